//! Broadcasts as the API reads and changes them. The worker's side (fan-out, claims,
//! outcomes, reconciliation) is in `db::sending`.

use parley_types::ids::{BroadcastId, ContactId, OrgId, RecipientId, TemplateId, TopicId};
use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use parley_types::time::Timestamp;

use parley_domain::Channel;
use parley_domain::ab_tests::{AbSettings, AbTest, PickedBy, Variant, VariantRow};
use parley_domain::broadcasts::{
    Broadcast, BroadcastFilter, BroadcastRecipient, BroadcastStatus, ContactMessage,
    RecipientFilter, SendPriority, TemplateVariables,
};
use parley_domain::send_rules::{PastTimePolicy, QuietHours, SendIn};
use parley_types::list::{Page, PageRequest};
use sqlx::types::Json;

pub async fn insert(
    db: impl PgExecutor<'_>,
    b: &Broadcast,
    contacts: &[Uuid],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO broadcasts (id, organization_id, broadcast_name, description, template_id,
            channel, template_channel, status, is_draft, send_now, scheduled_at,
            sender_email_address_id, subject_override, template_variables, email_variables,
            contact_ids, message_length, has_emojis, has_images, has_links, queued_at,
            created_at, updated_at, segment_id, priority, send_in, local_time, past_time_policy,
            quiet_hours, topic_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
            $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30)",
        b.id,
        b.organization_id,
        &b.broadcast_name,
        b.description.as_deref(),
        b.template_id,
        b.channel.as_str(),
        &b.template_channel,
        b.status.as_str(),
        b.is_draft,
        b.send_now,
        b.scheduled_at,
        b.sender_email_address_id.as_deref(),
        b.subject_override.as_deref(),
        &b.template_variables as _,
        &b.email_variables as _,
        contacts,
        b.message_length,
        b.has_emojis,
        b.has_images,
        b.has_links,
        b.queued_at,
        b.created_at,
        b.updated_at,
        b.segment_id,
        b.priority.as_str(),
        b.send_in.as_str(),
        b.local_time,
        b.past_time_policy.as_str(),
        &b.quiet_hours as _,
        b.topic_id as _,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Makes the new broadcast `id` an A/B broadcast: its settings and variants.
pub async fn insert_ab_test(
    conn: &mut PgConnection,
    org: OrgId,
    id: BroadcastId,
    settings: &AbSettings,
    variants: &[VariantRow],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE broadcasts SET ab_test = $3 WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
        Json(settings) as _,
    )
    .execute(&mut *conn)
    .await?;
    let numbers: Vec<i16> = variants.iter().map(|v| v.variant_no).collect();
    let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
    let templates: Vec<Uuid> = variants.iter().map(|v| v.template_id).collect();
    let vars: Vec<Option<serde_json::Value>> = variants
        .iter()
        .map(|v| {
            v.template_variables
                .as_ref()
                .map(|j| serde_json::to_value(&j.0).unwrap_or_default())
        })
        .collect();
    sqlx::query!(
        "INSERT INTO broadcast_variants (organization_id, broadcast_id, variant_no, name,
            template_id, template_variables)
         SELECT $1, $2, u.no, u.name, u.template_id, u.vars
         FROM unnest($3::int2[], $4::text[], $5::uuid[], $6::jsonb[]) AS u(no, name, template_id, vars)",
        org.uuid(),
        id.uuid(),
        &numbers,
        &names as _,
        &templates,
        &vars as _,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Writes the fields an update may change; `contacts` replaces the audience when given (and
/// `b.segment_id` is then `None`), as a segment does (`contact_ids` emptied).
pub async fn update(
    db: impl PgExecutor<'_>,
    b: &Broadcast,
    contacts: Option<&[Uuid]>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE broadcasts SET broadcast_name = $3, description = $4, status = $5, is_draft = $6,
            send_now = $7, scheduled_at = $8, sender_email_address_id = $9, subject_override = $10,
            template_variables = $11, email_variables = $12,
            contact_ids = CASE WHEN $20::uuid IS NOT NULL THEN '{}' ELSE coalesce($13, contact_ids) END,
            message_length = $14, has_emojis = $15,
            has_images = $16, has_links = $17, queued_at = $18, updated_at = $19, segment_id = $20,
            send_in = $21, local_time = $22, past_time_policy = $23, quiet_hours = $24,
            topic_id = $25
         WHERE organization_id = $1 AND id = $2",
        b.organization_id,
        b.id,
        &b.broadcast_name,
        b.description.as_deref(),
        b.status.as_str(),
        b.is_draft,
        b.send_now,
        b.scheduled_at,
        b.sender_email_address_id.as_deref(),
        b.subject_override.as_deref(),
        &b.template_variables as _,
        &b.email_variables as _,
        contacts,
        b.message_length,
        b.has_emojis,
        b.has_images,
        b.has_links,
        b.queued_at,
        b.updated_at,
        b.segment_id,
        b.send_in.as_str(),
        b.local_time,
        b.past_time_policy.as_str(),
        &b.quiet_hours as _,
        b.topic_id as _,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn get(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: BroadcastId,
) -> Result<Option<Broadcast>, sqlx::Error> {
    Ok(get_many(db, org, &[id.uuid()]).await?.pop())
}

/// Locks the broadcast's row (`FOR UPDATE`) and reads it.
pub async fn lock(
    db: &mut PgConnection,
    org: OrgId,
    id: BroadcastId,
) -> Result<Option<Broadcast>, sqlx::Error> {
    let found = sqlx::query_scalar!(
        "SELECT id FROM broadcasts WHERE organization_id = $1 AND id = $2 FOR UPDATE",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(&mut *db)
    .await?;
    match found {
        Some(_) => get(db, org, id).await,
        None => Ok(None),
    }
}

/// The broadcasts of `org` among `ids`, in no particular order, with their counters.
pub async fn get_many(
    db: impl PgExecutor<'_>,
    org: OrgId,
    ids: &[Uuid],
) -> Result<Vec<Broadcast>, sqlx::Error> {
    let rows = sqlx::query_as!(
        BroadcastRow,
        r#"SELECT b.id AS "id!", b.organization_id AS "organization_id!",
            b.broadcast_name AS "broadcast_name!", b.description, b.template_id AS "template_id!",
            b.channel AS "channel!", b.template_channel AS "template_channel!",
            b.status AS "status!", b.is_draft AS "is_draft!", b.send_now AS "send_now!",
            b.priority AS "priority!: SendPriority", b.scheduled_at,
            b.send_in AS "send_in!: SendIn", b.local_time,
            b.past_time_policy AS "past_time_policy!: PastTimePolicy",
            b.quiet_hours AS "quiet_hours: Json<QuietHours>",
            b.ab_test AS "ab_test: Json<AbSettings>", b.ab_test_ends_at, b.winning_variant,
            b.variant_picked_at, b.variant_picked_by AS "variant_picked_by: PickedBy",
            (SELECT json_agg(json_build_object('variantNo', v.variant_no, 'name', v.name,
                    'templateId', v.template_id, 'templateVariables', v.template_variables,
                    'total', coalesce(k.total, 0), 'sent', coalesce(k.sent, 0),
                    'delivered', coalesce(k.delivered, 0), 'read', coalesce(k.read, 0),
                    'failed', coalesce(k.failed, 0), 'skipped', coalesce(k.skipped, 0))
                    ORDER BY v.variant_no)
             FROM broadcast_variants v
             LEFT JOIN LATERAL (
                SELECT sum(c.total) AS total, sum(c.sent) AS sent, sum(c.delivered) AS delivered,
                    sum(c.read) AS read, sum(c.failed) AS failed, sum(c.skipped) AS skipped
                FROM broadcast_variant_counters c
                WHERE c.broadcast_id = v.broadcast_id AND c.variant_no = v.variant_no) k ON true
             WHERE v.broadcast_id = b.id) AS "variants: Json<Vec<VariantFigures>>",
            b.sender_email_address_id, b.subject_override, b.template_variables,
            b.email_variables, b.error_message,
            CASE WHEN b.segment_id IS NULL THEN b.contact_count
                 ELSE coalesce(k.total, 0) END AS "audience_size!",
            b.segment_id, s.name AS "audience_segment?", b.topic_id AS "topic_id: TopicId",
            coalesce(k.total, 0) AS "total_recipients!",
            coalesce(k.sent, 0) AS "sent_count!",
            coalesce(k.delivered, 0) AS "delivered_count!",
            coalesce(k.read, 0) AS "read_count!",
            coalesce(k.replied, 0) AS "replied_count!",
            coalesce(k.failed, 0) AS "failed_count!",
            coalesce(k.skipped, 0) AS "skipped_count!",
            coalesce(k.pending, 0) AS "pending_count!",
            coalesce(k.held, 0) AS "held_count!",
            coalesce(k.bounced, 0) AS "bounced_count!",
            coalesce(k.complained, 0) AS "complained_count!",
            coalesce(k.unsubscribed, 0) AS "unsubscribed_count!",
            b.message_length AS "message_length!", b.has_emojis AS "has_emojis!",
            b.has_images AS "has_images!", b.has_links AS "has_links!", b.queued_at, b.started_at,
            b.paused_at, b.completed_at, b.cancelled_at, b.recipients_purged_at,
            b.created_at AS "created_at!",
            b.updated_at AS "updated_at!"
         FROM broadcasts b LEFT JOIN broadcast_totals k ON k.broadcast_id = b.id
            LEFT JOIN segments s ON s.id = b.segment_id
         WHERE b.organization_id = $1 AND b.id = ANY($2)"#,
        org.uuid(),
        ids,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(from_row).collect())
}

/// A variant with its counters, as [`get_many`] reads it (one JSON array per broadcast).
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct VariantFigures {
    variant_no: i16,
    name: String,
    template_id: Uuid,
    template_variables: Option<TemplateVariables>,
    total: i32,
    sent: i32,
    delivered: i32,
    read: i32,
    failed: i32,
    skipped: i32,
}

fn push_filter(qb: &mut QueryBuilder<Postgres>, org: OrgId, f: &BroadcastFilter) {
    qb.push(" WHERE b.organization_id = ").push_bind(org);
    if let Some(status) = f.status {
        qb.push(" AND b.status = ").push_bind(status);
    }
    if let Some(channel) = f.channel {
        qb.push(" AND b.channel = ").push_bind(channel);
    }
    if let Some(template) = f.template_id {
        qb.push(" AND b.template_id = ").push_bind(template);
    }
}

pub async fn list(
    pool: &PgPool,
    org: OrgId,
    f: &BroadcastFilter,
    page: &PageRequest,
) -> Result<Page<Broadcast>, sqlx::Error> {
    super::page_of(
        pool,
        "FROM broadcasts b",
        "b",
        |qb| push_filter(qb, org, f),
        page,
        |ids| async move { get_many(pool, org, &ids).await },
    )
    .await
}

/// Sets a locked broadcast's status, with the time of the change.
pub async fn set_status(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: BroadcastId,
    to: BroadcastStatus,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE broadcasts SET status = $3,
            paused_at = CASE WHEN $3 = 'paused' THEN clock_timestamp() ELSE paused_at END,
            cancelled_at = CASE WHEN $3 = 'cancelled' THEN clock_timestamp() ELSE cancelled_at END,
            queued_at = CASE WHEN $3 = 'queued' THEN clock_timestamp() ELSE queued_at END,
            error_message = CASE WHEN $3 IN ('queued', 'sending') THEN NULL ELSE error_message END
         WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
        to.as_str(),
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Puts the broadcast's failed recipients (those with one of `codes`, if given; not those
/// that bounced or complained) back to `pending`, as never attempted (no message id: a late receipt of the old message finds
/// nothing) but as their next send (`send_generation`, which the provider's key carries),
/// enqueued now (so the reconciler takes them should the dispatch job be lost), and
/// the broadcast back to `sending`; the counters follow
/// (the recipients' trigger). Returns how many, and which when the caller named the ids (so
/// that what comes back is bounded by what it sent); with none, nothing changes. The caller
/// holds the broadcast's lock and has checked its state.
pub async fn retry_failed(
    conn: &mut PgConnection,
    id: BroadcastId,
    which: &RetryWhich<'_>,
) -> Result<Retried, sqlx::Error> {
    let retried = sqlx::query_as!(
        Retried,
        r#"WITH retried AS (
            UPDATE broadcast_recipients SET status = 'pending', error_code = NULL,
                error_message = NULL, failed_at = NULL, external_message_id = NULL, sent_to = NULL,
                sent_at = NULL, delivered_at = NULL, read_at = NULL, replied_at = NULL,
                requeues = 0, enqueued_at = clock_timestamp(),
                send_generation = send_generation + 1, discarded_at = NULL
             WHERE broadcast_id = $1 AND status = 'failed'
               AND bounced_at IS NULL AND complained_at IS NULL
               AND ($2::text[] IS NULL OR error_code = ANY ($2))
               AND ($3::uuid[] IS NULL OR id = ANY ($3))
               AND coalesce(error_code, '') <> ALL ($4)
             RETURNING id)
         SELECT count(*) AS "count!",
            coalesce(array_agg(id) FILTER (WHERE $3::uuid[] IS NOT NULL), '{}') AS "ids!: Vec<RecipientId>"
         FROM retried"#,
        id.uuid(),
        which.codes,
        which.ids,
        which.except,
    )
    .fetch_one(&mut *conn)
    .await?;
    if retried.count > 0 {
        sqlx::query!(
            "UPDATE broadcasts SET status = 'sending', completed_at = NULL, error_message = NULL
             WHERE id = $1",
            id.uuid(),
        )
        .execute(&mut *conn)
        .await?;
    }
    Ok(retried)
}

/// What [`retry_failed`] sent again: how many, and which when the caller named them.
#[derive(Debug)]
pub struct Retried {
    pub count: i64,
    pub ids: Vec<RecipientId>,
}

/// Which failed recipients [`retry_failed`] sends again: those with one of `codes` (all when
/// `None`), among `ids` (all when `None`), except those with one of `except`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RetryWhich<'a> {
    pub codes: Option<&'a [String]>,
    pub ids: Option<&'a [Uuid]>,
    pub except: &'a [String],
}

pub async fn delete(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: BroadcastId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM broadcasts WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

fn push_recipient_filter(
    qb: &mut QueryBuilder<Postgres>,
    broadcast: BroadcastId,
    f: &RecipientFilter,
) {
    qb.push(" WHERE r.broadcast_id = ").push_bind(broadcast);
    if let Some(status) = f.status {
        // Written into the SQL (it is one of a fixed set of words) so that the planner can
        // use the partial index of the rare end states.
        qb.push(format_args!(" AND r.status = '{}'", status.as_str()));
    }
}

/// A page of a broadcast's recipients, each with its contact.
pub async fn recipients(
    pool: &PgPool,
    org: OrgId,
    broadcast: BroadcastId,
    f: &RecipientFilter,
    page: &PageRequest,
) -> Result<Page<BroadcastRecipient>, sqlx::Error> {
    let total = super::count_up_to_bound(pool, "FROM broadcast_recipients r", &|qb| {
        push_recipient_filter(qb, broadcast, f)
    })
    .await?;
    let mut qb = QueryBuilder::new(
        "SELECT r.*, v.name AS variant FROM broadcast_recipients r
         LEFT JOIN broadcast_variants v
            ON v.broadcast_id = r.broadcast_id AND v.variant_no = r.variant_no",
    );
    push_recipient_filter(&mut qb, broadcast, f);
    super::push_window(page, &mut qb, "r");
    let rows: Vec<BroadcastRecipient> = qb.build_query_as().fetch_all(pool).await?;
    let ids: Vec<Uuid> = rows.iter().map(|r| r.contact_id).collect();
    let mut conn = pool.acquire().await?;
    let mut contacts = super::contacts::get_many(&mut conn, org, &ids).await?;
    let rows = rows
        .into_iter()
        .map(|mut r| {
            r.contact = contacts.remove(&r.contact_id);
            r
        })
        .collect();
    Ok(Page::new(
        rows,
        page,
        parley_types::list::Total::Counted(total),
    ))
}

/// A page of the messages broadcasts sent `contact` (its recipient records in every
/// broadcast), newest first by default. Read through the recipients' index by contact: a page
/// costs what the contact's own records cost (sorted, counted up to the bound), whatever the
/// organization holds.
pub async fn messages_of_contact(
    pool: &PgPool,
    org: OrgId,
    contact: ContactId,
    page: &PageRequest,
) -> Result<Page<ContactMessage>, sqlx::Error> {
    let filter = |qb: &mut QueryBuilder<Postgres>| {
        qb.push(" WHERE r.contact_id = ")
            .push_bind(contact)
            .push(" AND r.organization_id = ")
            .push_bind(org);
    };
    let total = super::count_up_to_bound(pool, "FROM broadcast_recipients r", &filter).await?;
    let mut qb = QueryBuilder::new(
        "SELECT r.id, r.broadcast_id, b.broadcast_name, b.channel, r.status, r.sent_to,
            r.external_message_id, r.error_code, r.error_message, r.hold_until, r.sent_at,
            r.delivered_at,
            r.read_at, r.replied_at, r.failed_at, r.bounce_type, r.bounced_at, r.complained_at,
            r.created_at, r.updated_at, v.name AS variant
         FROM broadcast_recipients r
         JOIN broadcasts b ON b.organization_id = r.organization_id AND b.id = r.broadcast_id
         LEFT JOIN broadcast_variants v
            ON v.broadcast_id = r.broadcast_id AND v.variant_no = r.variant_no",
    );
    filter(&mut qb);
    super::push_window(page, &mut qb, "r");
    let rows: Vec<ContactMessage> = qb.build_query_as().fetch_all(pool).await?;
    Ok(Page::new(
        rows,
        page,
        parley_types::list::Total::Counted(total),
    ))
}

/// Broadcasts of `template` that will still render its body (their message is captured when
/// sending starts): their channel and variables, so a template update can check that it
/// keeps their messages within their channels.
pub async fn rendering_from(
    db: impl PgExecutor<'_>,
    org: OrgId,
    template: TemplateId,
) -> Result<Vec<(Uuid, Channel, Option<Json<TemplateVariables>>)>, sqlx::Error> {
    // An A/B broadcast's variants B to D render their own templates with their own variables.
    let rows = sqlx::query!(
        r#"SELECT id AS "id!", channel AS "channel!: Channel",
                template_variables AS "template_variables: Json<TemplateVariables>"
         FROM broadcasts
         WHERE organization_id = $1 AND template_id = $2 AND message_body IS NULL
           AND status NOT IN ('completed', 'failed', 'cancelled')
         UNION ALL
         SELECT b.id, b.channel, v.template_variables
         FROM broadcast_variants v JOIN broadcasts b ON b.id = v.broadcast_id
         WHERE v.organization_id = $1 AND v.template_id = $2 AND v.variant_no > 1
           AND v.message_body IS NULL AND b.status NOT IN ('completed', 'failed', 'cancelled')"#,
        org.uuid(),
        template.uuid(),
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.id, r.channel, r.template_variables))
        .collect())
}

/// A broadcast as its checked statement reads it (the derived figures are filled in).
struct BroadcastRow {
    id: Uuid,
    organization_id: Uuid,
    broadcast_name: String,
    description: Option<String>,
    template_id: Uuid,
    channel: Channel,
    template_channel: String,
    status: BroadcastStatus,
    is_draft: bool,
    send_now: bool,
    priority: SendPriority,
    scheduled_at: Option<Timestamp>,
    send_in: SendIn,
    local_time: Option<chrono::NaiveDateTime>,
    past_time_policy: PastTimePolicy,
    quiet_hours: Option<Json<QuietHours>>,
    ab_test: Option<Json<AbSettings>>,
    ab_test_ends_at: Option<Timestamp>,
    winning_variant: Option<i16>,
    variant_picked_at: Option<Timestamp>,
    variant_picked_by: Option<PickedBy>,
    variants: Option<Json<Vec<VariantFigures>>>,
    sender_email_address_id: Option<String>,
    subject_override: Option<String>,
    template_variables: Option<Json<TemplateVariables>>,
    email_variables: Option<Json<serde_json::Value>>,
    error_message: Option<String>,
    audience_size: i32,
    segment_id: Option<Uuid>,
    audience_segment: Option<String>,
    topic_id: Option<TopicId>,
    total_recipients: i32,
    sent_count: i32,
    delivered_count: i32,
    read_count: i32,
    replied_count: i32,
    failed_count: i32,
    skipped_count: i32,
    pending_count: i32,
    held_count: i32,
    bounced_count: i32,
    complained_count: i32,
    unsubscribed_count: i32,
    message_length: i32,
    has_emojis: bool,
    has_images: bool,
    has_links: bool,
    queued_at: Option<Timestamp>,
    started_at: Option<Timestamp>,
    paused_at: Option<Timestamp>,
    completed_at: Option<Timestamp>,
    cancelled_at: Option<Timestamp>,
    recipients_purged_at: Option<Timestamp>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

/// The broadcast of a row, with an A/B broadcast's variants (variant A's variables are the
/// broadcast's own).
fn from_row(r: BroadcastRow) -> Broadcast {
    let figures = r.variants.map(|Json(v)| v).unwrap_or_default();
    let winner = r.winning_variant.and_then(|w| {
        figures
            .iter()
            .find(|v| v.variant_no == w)
            .map(|v| v.name.clone())
    });
    let ab_test = r.ab_test.map(|Json(s)| AbTest {
        test_percent: s.test_percent,
        winner_metric: s.winner_metric,
        wait_minutes: s.wait_minutes,
        test_ends_at: r.ab_test_ends_at,
        winner: winner.clone(),
        picked_at: r.variant_picked_at,
        picked_by: r.variant_picked_by,
    });
    let variants = figures
        .into_iter()
        .map(|f| {
            let mut v = Variant {
                name: f.name,
                template_id: f.template_id,
                template_variables: if f.variant_no == 1 {
                    r.template_variables.clone()
                } else {
                    f.template_variables.map(Json)
                },
                total_recipients: f.total,
                sent_count: f.sent,
                delivered_count: f.delivered,
                read_count: f.read,
                failed_count: f.failed,
                skipped_count: f.skipped,
                delivered_rate: 0.0,
                read_rate: 0.0,
                failed_rate: 0.0,
            };
            v.fill_rates();
            v
        })
        .collect();
    let mut b = Broadcast {
        id: r.id,
        organization_id: r.organization_id,
        broadcast_name: r.broadcast_name,
        description: r.description,
        template_id: r.template_id,
        channel: r.channel,
        template_channel: r.template_channel,
        status: r.status,
        is_draft: r.is_draft,
        send_now: r.send_now,
        priority: r.priority,
        scheduled_at: r.scheduled_at,
        send_in: r.send_in,
        local_time: r.local_time,
        past_time_policy: r.past_time_policy,
        quiet_hours: r.quiet_hours,
        sender_email_address_id: r.sender_email_address_id,
        subject_override: r.subject_override,
        template_variables: r.template_variables,
        email_variables: r.email_variables,
        error_message: r.error_message,
        audience_size: r.audience_size,
        segment_id: r.segment_id,
        topic_id: r.topic_id,
        total_recipients: r.total_recipients,
        sent_count: r.sent_count,
        delivered_count: r.delivered_count,
        read_count: r.read_count,
        replied_count: r.replied_count,
        failed_count: r.failed_count,
        skipped_count: r.skipped_count,
        pending_count: r.pending_count,
        held_count: r.held_count,
        bounced_count: r.bounced_count,
        complained_count: r.complained_count,
        unsubscribed_count: r.unsubscribed_count,
        message_length: r.message_length,
        has_emojis: r.has_emojis,
        has_images: r.has_images,
        has_links: r.has_links,
        open_rate: Default::default(),
        bounce_rate: Default::default(),
        is_ab_test: ab_test.is_some(),
        winning_variant: ab_test.as_ref().map(|t| t.winner.is_some()),
        variant_name: winner,
        ab_test,
        variants,
        audience_segment: r.audience_segment,
        target_demographic: Default::default(),
        performance_trend: Default::default(),
        peak_engagement_hour: Default::default(),
        avg_response_time: Default::default(),
        click_rate: Default::default(),
        conversion_rate: Default::default(),
        unsubscribe_rate: Default::default(),
        cost: Default::default(),
        revenue: Default::default(),
        roi: Default::default(),
        trend_percentage: Default::default(),
        age_group_breakdown: Default::default(),
        device_breakdown: Default::default(),
        location_breakdown: Default::default(),
        queued_at: r.queued_at,
        started_at: r.started_at,
        paused_at: r.paused_at,
        completed_at: r.completed_at,
        cancelled_at: r.cancelled_at,
        recipients_purged_at: r.recipients_purged_at,
        created_at: r.created_at,
        updated_at: r.updated_at,
    };
    b.fill_rates();
    b
}

//! Broadcasts as the API reads and changes them. The worker's side (fan-out, claims,
//! outcomes, reconciliation) is in `db::delivery`.

use sqlx::{PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::ListQuery;

use parley_domain::Channel;
use parley_domain::broadcasts::{
    Broadcast, BroadcastFilter, BroadcastRecipient, BroadcastStatus, RecipientFilter,
    TemplateVariables,
};
use parley_types::list::{Page, PageRequest};
use sqlx::types::Json;

macro_rules! select {
    () => {
        "SELECT b.id, b.organization_id, b.broadcast_name, b.description, b.template_id, b.channel,
            b.template_channel, b.status, b.is_draft, b.send_now, b.scheduled_at,
            b.sender_email_address_id, b.subject_override, b.template_variables, b.email_variables,
            b.error_message, cardinality(b.contact_ids) AS audience_size,
            coalesce(k.total, 0) AS total_recipients, coalesce(k.sent, 0) AS sent_count,
            coalesce(k.delivered, 0) AS delivered_count, coalesce(k.read, 0) AS read_count,
            coalesce(k.replied, 0) AS replied_count, coalesce(k.failed, 0) AS failed_count,
            coalesce(k.skipped, 0) AS skipped_count, coalesce(k.pending, 0) AS pending_count,
            b.message_length, b.has_emojis, b.has_images,
            b.has_links, b.queued_at, b.started_at, b.paused_at, b.completed_at, b.cancelled_at,
            b.created_at, b.updated_at
         FROM broadcasts b LEFT JOIN broadcast_totals k ON k.broadcast_id = b.id"
    };
}

pub async fn insert(
    db: impl PgExecutor<'_>,
    b: &Broadcast,
    contacts: &[Uuid],
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO broadcasts (id, organization_id, broadcast_name, description, template_id,
            channel, template_channel, status, is_draft, send_now, scheduled_at,
            sender_email_address_id, subject_override, template_variables, email_variables,
            contact_ids, message_length, has_emojis, has_images, has_links, queued_at,
            created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
            $19, $20, $21, $22, $23)",
    )
    .bind(b.id)
    .bind(b.organization_id)
    .bind(&b.broadcast_name)
    .bind(&b.description)
    .bind(b.template_id)
    .bind(b.channel)
    .bind(&b.template_channel)
    .bind(b.status)
    .bind(b.is_draft)
    .bind(b.send_now)
    .bind(b.scheduled_at)
    .bind(&b.sender_email_address_id)
    .bind(&b.subject_override)
    .bind(&b.template_variables)
    .bind(&b.email_variables)
    .bind(contacts)
    .bind(b.message_length)
    .bind(b.has_emojis)
    .bind(b.has_images)
    .bind(b.has_links)
    .bind(b.queued_at)
    .bind(b.created_at)
    .bind(b.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

/// Writes the fields an update may change; `contacts` replaces the audience when given.
pub async fn update(
    db: impl PgExecutor<'_>,
    b: &Broadcast,
    contacts: Option<&[Uuid]>,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE broadcasts SET broadcast_name = $3, description = $4, status = $5, is_draft = $6,
            send_now = $7, scheduled_at = $8, sender_email_address_id = $9, subject_override = $10,
            template_variables = $11, email_variables = $12,
            contact_ids = coalesce($13, contact_ids), message_length = $14, has_emojis = $15,
            has_images = $16, has_links = $17, queued_at = $18, updated_at = $19
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(b.organization_id)
    .bind(b.id)
    .bind(&b.broadcast_name)
    .bind(&b.description)
    .bind(b.status)
    .bind(b.is_draft)
    .bind(b.send_now)
    .bind(b.scheduled_at)
    .bind(&b.sender_email_address_id)
    .bind(&b.subject_override)
    .bind(&b.template_variables)
    .bind(&b.email_variables)
    .bind(contacts)
    .bind(b.message_length)
    .bind(b.has_emojis)
    .bind(b.has_images)
    .bind(b.has_links)
    .bind(b.queued_at)
    .bind(b.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn get(
    db: impl PgExecutor<'_>,
    org: Uuid,
    id: Uuid,
) -> Result<Option<Broadcast>, sqlx::Error> {
    let row: Option<Broadcast> = sqlx::query_as(concat!(
        select!(),
        " WHERE b.organization_id = $1 AND b.id = $2"
    ))
    .bind(org)
    .bind(id)
    .fetch_optional(db)
    .await?;
    Ok(row.map(|mut b| {
        b.fill_rates();
        b
    }))
}

pub async fn lock(
    db: impl PgExecutor<'_>,
    org: Uuid,
    id: Uuid,
) -> Result<Option<Broadcast>, sqlx::Error> {
    let row: Option<Broadcast> = sqlx::query_as(concat!(
        select!(),
        " WHERE b.organization_id = $1 AND b.id = $2 FOR UPDATE OF b"
    ))
    .bind(org)
    .bind(id)
    .fetch_optional(db)
    .await?;
    Ok(row.map(|mut b| {
        b.fill_rates();
        b
    }))
}

fn push_filter(qb: &mut QueryBuilder<Postgres>, org: Uuid, f: &BroadcastFilter) {
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
    org: Uuid,
    f: &BroadcastFilter,
    page: &PageRequest,
) -> Result<Page<Broadcast>, sqlx::Error> {
    let q = ListQuery {
        select: select!(),
        count_from: "FROM broadcasts b",
        alias: "b",
    };
    let mut page: Page<Broadcast> =
        super::page(pool, q, |qb| push_filter(qb, org, f), page).await?;
    page.items_mut().iter_mut().for_each(Broadcast::fill_rates);
    Ok(page)
}

/// Sets a locked broadcast's status, with the time of the change.
pub async fn set_status(
    db: impl PgExecutor<'_>,
    org: Uuid,
    id: Uuid,
    to: BroadcastStatus,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE broadcasts SET status = $3,
            paused_at = CASE WHEN $3 = 'paused' THEN clock_timestamp() ELSE paused_at END,
            cancelled_at = CASE WHEN $3 = 'cancelled' THEN clock_timestamp() ELSE cancelled_at END,
            queued_at = CASE WHEN $3 = 'queued' THEN clock_timestamp() ELSE queued_at END,
            error_message = CASE WHEN $3 IN ('queued', 'sending') THEN NULL ELSE error_message END
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(org)
    .bind(id)
    .bind(to)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn delete(db: impl PgExecutor<'_>, org: Uuid, id: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("DELETE FROM broadcasts WHERE organization_id = $1 AND id = $2")
        .bind(org)
        .bind(id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

fn push_recipient_filter(qb: &mut QueryBuilder<Postgres>, broadcast: Uuid, f: &RecipientFilter) {
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
    org: Uuid,
    broadcast: Uuid,
    f: &RecipientFilter,
    page: &PageRequest,
) -> Result<Page<BroadcastRecipient>, sqlx::Error> {
    let mut count = QueryBuilder::new("SELECT count(*) FROM broadcast_recipients r");
    push_recipient_filter(&mut count, broadcast, f);
    let total: i64 = count.build_query_scalar().fetch_one(pool).await?;
    let mut qb = QueryBuilder::new("SELECT r.* FROM broadcast_recipients r");
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
    Ok(Page::new(rows, page, total))
}

/// Broadcasts of `template` that will still render its body (their message is captured when
/// sending starts): their channel and variables, so a template update can check that it
/// keeps their messages within their channels.
pub async fn rendering_from(
    db: impl PgExecutor<'_>,
    org: Uuid,
    template: Uuid,
) -> Result<Vec<(Uuid, Channel, Option<Json<TemplateVariables>>)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, channel, template_variables FROM broadcasts
         WHERE organization_id = $1 AND template_id = $2 AND message_body IS NULL
           AND status NOT IN ('completed', 'failed', 'cancelled')",
    )
    .bind(org)
    .bind(template)
    .fetch_all(db)
    .await
}

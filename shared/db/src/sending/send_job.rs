//! A send job's statements: the broadcast and its claimed recipients as sending sees them,
//! their outcomes written, and the broadcast paused after a run of provider failures.

use parley_domain::Channel;
use parley_domain::broadcasts::{
    BroadcastStatus, RecipientStatus, SendPriority, TemplateVariables,
};
use parley_domain::send_rules::{FrequencyCaps, PastTimePolicy, QuietHours, SendIn};
use parley_domain::sending::{Claimed, RecipientOutcome, SendContext, VariantContent};
use parley_domain::suppressions::SuppressionReason;
use parley_domain::templates::TemplateCategory;
use parley_types::ids::{BroadcastId, ContactId, OrgId, RecipientId, TopicId};
use parley_types::time::Timestamp;
use sqlx::PgExecutor;
use sqlx::types::Json;

pub async fn send_context(
    db: impl PgExecutor<'_>,
    id: BroadcastId,
) -> Result<Option<SendContext>, sqlx::Error> {
    sqlx::query_as!(
        SendContext,
        r#"SELECT b.id AS "id: BroadcastId", b.organization_id AS "organization_id: OrgId",
                b.status, b.channel, b.template_id, b.message_body,
                b.message_subject, b.template_variables, b.email_variables,
                b.priority AS "priority: SendPriority", b.send_in AS "send_in: SendIn",
                b.local_time, b.past_time_policy AS "past_time_policy: PastTimePolicy",
                coalesce(b.scheduled_at, b.created_at) AS "scheduled_at!",
                coalesce(b.quiet_hours, o.quiet_hours) AS "quiet_hours: Json<QuietHours>",
                o.frequency_caps AS "frequency_caps: Json<FrequencyCaps>",
                o.working_hours->>'timezone' AS default_zone,
                b.ab_test IS NOT NULL AS "ab_test!",
                o.sending_paused_at IS NOT NULL AS "paused!",
                CASE WHEN EXISTS (SELECT 1 FROM broadcast_variants v
                                  JOIN templates vt ON vt.id = v.template_id
                                  WHERE v.broadcast_id = b.id AND vt.category = 'marketing')
                     THEN 'marketing'
                     ELSE coalesce(t.category, 'marketing') END AS "category!: TemplateCategory",
                b.topic_id AS "topic_id: TopicId"
         FROM broadcasts b JOIN organizations o ON o.id = b.organization_id
         LEFT JOIN templates t ON t.id = b.template_id
         WHERE b.id = $1"#,
        id as _,
    )
    .fetch_optional(db)
    .await
}

pub async fn variant_contents(
    db: impl PgExecutor<'_>,
    id: BroadcastId,
) -> Result<Vec<VariantContent>, sqlx::Error> {
    sqlx::query_as!(
        VariantContent,
        r#"SELECT variant_no, template_id, message_body, message_subject,
                template_variables AS "template_variables: Json<TemplateVariables>"
         FROM broadcast_variants WHERE broadcast_id = $1 AND variant_no > 1
         ORDER BY variant_no"#,
        id as _,
    )
    .fetch_all(db)
    .await
}

pub async fn status(
    db: impl PgExecutor<'_>,
    id: BroadcastId,
) -> Result<Option<BroadcastStatus>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT status AS "status: BroadcastStatus" FROM broadcasts WHERE id = $1"#,
        id as _,
    )
    .fetch_optional(db)
    .await
}

/// The recipients among `ids` that are still pending, with what their message needs of the
/// contact, the first of `reasons` the suppression ledger holds against it on `channel`, and
/// whether it unsubscribed from `topic`.
/// Read only: holding them is the worker's claim (in Redis), and the outcome is written only
/// while a recipient is still pending.
pub async fn pending_for_send(
    db: impl PgExecutor<'_>,
    org: OrgId,
    broadcast: BroadcastId,
    ids: &[RecipientId],
    channel: Channel,
    reasons: &[SuppressionReason],
    topic: Option<TopicId>,
) -> Result<Vec<Claimed>, sqlx::Error> {
    let reasons: Vec<&str> = reasons.iter().map(|r| r.as_str()).collect();
    // Only the primary key leads to the rows: with the broadcast or the status in the WHERE
    // clause the planner may scan a broadcast-wide index instead, which costs as much as the
    // broadcast is big. The few rows are checked here.
    let rows: Vec<ClaimRow> = sqlx::query_as!(
        ClaimRow,
        r#"SELECT r.broadcast_id AS "broadcast_id: BroadcastId",
                r.status AS "status: RecipientStatus", r.id AS "id: RecipientId",
                k.id AS "contact_id?: ContactId", k.name AS "name?", k.email AS "email?", k.phone AS "phone?",
                k.country AS "country?", k.language AS "language?", k.position AS "position?",
                k.external_id AS "external_id?", co.name AS "company_name?",
                k.do_not_contact AS "do_not_contact?",
                k.messaging_a_opted_out AS "messaging_a_opted_out?", k.timezone AS "timezone?",
                r.send_generation, r.variant_no,
                (SELECT s.reason FROM suppressions s
                 WHERE s.organization_id = $1 AND (s.channel IS NULL OR s.channel = $3)
                   AND s.reason = ANY($4)
                   AND (s.contact_id = k.id OR s.email = lower(k.email) OR s.phone = k.phone
                        OR s.address_hash = ANY (ARRAY[address_hash($1, k.email),
                                                       address_hash($1, k.phone),
                                                       address_hash($1, k.external_id)]))
                 ORDER BY array_position($4, s.reason) LIMIT 1)
                   AS "suppressed?: SuppressionReason",
                EXISTS (SELECT 1 FROM topic_unsubscribes tu
                        WHERE tu.contact_id = k.id AND tu.topic_id = $5) AS "topic_unsubscribed!"
         FROM unnest($2::uuid[]) AS u(id)
         JOIN broadcast_recipients r ON r.id = u.id
         LEFT JOIN contacts k ON k.id = r.contact_id AND k.organization_id = $1
         LEFT JOIN companies co ON co.id = k.company_id
         ORDER BY r.id"#,
        org as _,
        ids as _,
        channel.as_str(),
        &reasons as &[&str],
        topic as _,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .filter(|r| r.broadcast_id == broadcast && r.status == RecipientStatus::Pending)
        .map(|r| Claimed {
            id: r.id,
            contact_id: r.contact_id,
            name: r.name,
            email: r.email,
            phone: r.phone,
            country: r.country,
            language: r.language,
            position: r.position,
            external_id: r.external_id,
            company_name: r.company_name,
            do_not_contact: r.do_not_contact,
            messaging_a_opted_out: r.messaging_a_opted_out,
            timezone: r.timezone,
            send_generation: r.send_generation,
            variant_no: r.variant_no,
            suppressed: r.suppressed,
            topic_unsubscribed: r.topic_unsubscribed,
        })
        .collect())
}

/// A row of [`pending_for_send`]: the recipient's broadcast and status, checked here, and what
/// its message needs.
struct ClaimRow {
    broadcast_id: BroadcastId,
    status: RecipientStatus,
    id: RecipientId,
    contact_id: Option<ContactId>,
    name: Option<String>,
    email: Option<String>,
    phone: Option<String>,
    country: Option<String>,
    language: Option<String>,
    position: Option<String>,
    external_id: Option<String>,
    company_name: Option<String>,
    do_not_contact: Option<bool>,
    messaging_a_opted_out: Option<bool>,
    timezone: Option<String>,
    send_generation: i32,
    variant_no: Option<i16>,
    suppressed: Option<SuppressionReason>,
    topic_unsubscribed: bool,
}

/// Records outcomes in one statement (the counters follow by trigger); a recipient no longer
/// pending keeps the outcome it has. Unsent recipients are not written.
pub async fn record<'a>(
    db: impl PgExecutor<'_>,
    outcomes: impl IntoIterator<Item = &'a (RecipientId, RecipientOutcome)>,
) -> Result<(), sqlx::Error> {
    let outcomes: Vec<&(RecipientId, RecipientOutcome)> = outcomes
        .into_iter()
        .filter(|(_, o)| *o != RecipientOutcome::Unsent)
        .collect();
    if outcomes.is_empty() {
        return Ok(());
    }
    let n = outcomes.len();
    let (mut ids, mut statuses, mut message_ids, mut codes, mut messages, mut holds) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut sent_to: Vec<Option<&str>> = Vec::with_capacity(n);
    for (id, outcome) in outcomes {
        let mut hold = None;
        let mut to = None;
        let (status, message_id, code, message) = match outcome {
            RecipientOutcome::Sent {
                message_id,
                to: address,
            } => {
                to = Some(address.as_str());
                (RecipientStatus::Sent, message_id.clone(), None, None)
            }
            RecipientOutcome::Held { until } => {
                hold = *until;
                (RecipientStatus::Held, None, None, None)
            }
            RecipientOutcome::Failed { code, message } => (
                RecipientStatus::Failed,
                None,
                Some(code.clone()),
                Some(message.clone()),
            ),
            RecipientOutcome::Skipped { code, message } => (
                RecipientStatus::Skipped,
                None,
                Some(code.clone()),
                Some(message.clone()),
            ),
            RecipientOutcome::Unsent => continue,
        };
        ids.push(*id);
        statuses.push(status.as_str());
        message_ids.push(message_id);
        codes.push(code);
        messages.push(message);
        holds.push(hold);
        sent_to.push(to);
    }
    sqlx::query!(
        "UPDATE broadcast_recipients r SET
            status = u.status,
            external_message_id = coalesce(u.message_id, r.external_message_id),
            error_code = u.code,
            error_message = u.message,
            sent_at = CASE WHEN u.status = 'sent' THEN clock_timestamp() ELSE r.sent_at END,
            failed_at = CASE WHEN u.status = 'failed' THEN clock_timestamp() ELSE r.failed_at END,
            hold_until = u.hold_until,
            sent_to = coalesce(u.sent_to, r.sent_to)
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[],
                     $7::timestamptz[], $8::text[])
              AS u(id, status, message_id, code, message, hold_until, sent_to)
         WHERE r.id = u.id AND r.status = $6",
        &ids as _,
        &statuses as _,
        &message_ids as _,
        &codes as _,
        &messages as _,
        // As a parameter, so that the only path to the rows is the primary key: with a
        // literal `'pending'` the planner may scan the partial index of pending recipients
        // instead, which looks small in the statistics and holds a whole broadcast while it
        // sends.
        RecipientStatus::Pending.as_str(),
        &holds as &[Option<Timestamp>],
        &sent_to as &[Option<&str>],
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Pauses a sending broadcast on the service's own account.
pub async fn auto_pause(
    db: impl PgExecutor<'_>,
    id: BroadcastId,
    reason: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE broadcasts SET status = 'paused', paused_at = clock_timestamp(), error_message = $2
         WHERE id = $1 AND status = 'sending'",
        id as _,
        reason,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

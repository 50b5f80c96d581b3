//! Webhooks: the management API's reads and writes, and the worker's side of deliveries
//! (what an attempt needs, and writing what it did).

use parley_types::ids::{OrgId, WebhookId};
use std::collections::HashSet;
use std::time::Duration;

use secrecy::SecretString;
use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::ListQuery;
use parley_domain::webhooks::{
    AttemptFilter, AttemptStatus, Delivery, EventName, RecoveryStatus, Webhook, WebhookAttempt,
    WebhookRecovery,
};
use parley_types::list::{Page, PageRequest};
use parley_types::time::Timestamp;

pub async fn insert(db: impl PgExecutor<'_>, w: &Webhook, secret: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO webhooks (id, organization_id, url, events, description, is_active, secret,
            created_at, updated_at, rate_limit)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        w.id,
        w.organization_id,
        &w.url,
        &w.events,
        w.description.as_deref(),
        w.is_active,
        secret,
        w.created_at,
        w.updated_at,
        w.rate_limit,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update(db: impl PgExecutor<'_>, w: &Webhook) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE webhooks SET url = $3, events = $4, description = $5, is_active = $6,
            failing_since = $7, disabled_at = $8, updated_at = $9, disabled_reason = $10,
            rate_limit = $11
         WHERE organization_id = $1 AND id = $2",
        w.organization_id,
        w.id,
        &w.url,
        &w.events,
        w.description.as_deref(),
        w.is_active,
        w.failing_since,
        w.disabled_at,
        w.updated_at,
        w.disabled_reason.as_deref(),
        w.rate_limit,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn get(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: WebhookId,
) -> Result<Option<Webhook>, sqlx::Error> {
    Ok(rows(db, org, &[id.uuid()]).await?.pop())
}

/// The webhooks of `org` among `ids`, in no particular order (their secrets left out).
async fn rows(
    db: impl PgExecutor<'_>,
    org: OrgId,
    ids: &[Uuid],
) -> Result<Vec<Webhook>, sqlx::Error> {
    sqlx::query_as!(
        Webhook,
        "SELECT id, organization_id, url, events, description, is_active, failing_since,
            disabled_at, disabled_reason, rate_limit, previous_secret_expires_at, created_at,
            updated_at
         FROM webhooks WHERE organization_id = $1 AND id = ANY($2)",
        org.uuid(),
        ids,
    )
    .fetch_all(db)
    .await
}

pub async fn lock(
    conn: &mut PgConnection,
    org: OrgId,
    id: WebhookId,
) -> Result<Option<Webhook>, sqlx::Error> {
    let found = sqlx::query_scalar!(
        "SELECT id FROM webhooks WHERE organization_id = $1 AND id = $2 FOR UPDATE",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(&mut *conn)
    .await?;
    match found {
        Some(_) => get(conn, org, id).await,
        None => Ok(None),
    }
}

pub async fn list(
    pool: &PgPool,
    org: OrgId,
    page: &PageRequest,
) -> Result<Page<Webhook>, sqlx::Error> {
    super::page_of(
        pool,
        "FROM webhooks w",
        "w",
        |qb| {
            qb.push(" WHERE w.organization_id = ").push_bind(org);
        },
        page,
        |ids| async move { rows(pool, org, &ids).await },
    )
    .await
}

pub async fn delete(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: WebhookId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM webhooks WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Replaces the secret; the old one keeps signing (beside the new) for `overlap`.
pub async fn rotate_secret(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: WebhookId,
    secret: &str,
    overlap: Duration,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE webhooks SET previous_secret = secret, secret = $3,
            previous_secret_expires_at = clock_timestamp() + make_interval(secs => $4)
         WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
        secret,
        overlap.as_secs_f64(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

fn push_attempt_filter(qb: &mut QueryBuilder<Postgres>, webhook: WebhookId, f: &AttemptFilter) {
    qb.push(" WHERE a.webhook_id = ").push_bind(webhook);
    if let Some(status) = f.status {
        qb.push(" AND a.status = ").push_bind(status);
    }
    if let Some(event) = f.event {
        qb.push(" AND a.event = ").push_bind(event);
    }
}

/// The attempt log of a webhook.
pub async fn attempts(
    pool: &PgPool,
    webhook: WebhookId,
    f: &AttemptFilter,
    page: &PageRequest,
) -> Result<Page<WebhookAttempt>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT a.* FROM webhook_attempts a".into(),
        count_from: "FROM webhook_attempts a",
        alias: "a",
    };
    super::page(pool, q, |qb| push_attempt_filter(qb, webhook, f), page).await
}

/// A `webhook.test` event and its delivery to this webhook alone, due now.
pub async fn create_test_delivery(
    conn: &mut PgConnection,
    webhook: &Webhook,
) -> Result<Delivery, sqlx::Error> {
    let event = parley_types::ids::new_id();
    let data = serde_json::json!({
        "webhookId": webhook.id,
        "message": "A test delivery from Parley.",
    });
    sqlx::query!(
        "INSERT INTO webhook_events (id, organization_id, event, data, relayed_at)
         VALUES ($1, $2, $3, $4, clock_timestamp())",
        event,
        webhook.organization_id,
        EventName::WebhookTest.as_str(),
        sqlx::types::Json(data) as _,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query_as!(
        Delivery,
        "INSERT INTO webhook_deliveries
            (id, organization_id, webhook_id, event_id, event, next_attempt_at, enqueued_at)
         VALUES ($1, $2, $3, $4, $5, now(), now())
         RETURNING id AS delivery_id, webhook_id, event, status, attempts, next_attempt_at,
            delivered_at, created_at",
        parley_types::ids::new_id(),
        webhook.organization_id,
        webhook.id,
        event,
        EventName::WebhookTest.as_str(),
    )
    .fetch_one(&mut *conn)
    .await
}

/// Makes a logged delivery of this webhook due again now, keeping its id; its attempts go on
/// counting. `None` when the webhook has no such delivery.
pub async fn redeliver(
    db: impl PgExecutor<'_>,
    webhook: WebhookId,
    delivery: Uuid,
) -> Result<Option<Delivery>, sqlx::Error> {
    sqlx::query_as!(
        Delivery,
        "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now(), enqueued_at = now(),
            requeues = 0, discarded_at = NULL
         WHERE webhook_id = $1 AND id = $2
         RETURNING id AS delivery_id, webhook_id, event, status, attempts, next_attempt_at,
            delivered_at, created_at",
        webhook.uuid(),
        delivery,
    )
    .fetch_optional(db)
    .await
}

/// What an attempt needs: the delivery, its event and its webhook.
#[derive(Debug, Clone)]
pub struct DueAttempt {
    pub delivery_id: Uuid,
    pub organization_id: Uuid,
    pub webhook_id: Uuid,
    pub event: String,
    pub attempts: i32,
    pub pending: bool,
    pub due: bool,
    pub data: String,
    pub occurred_at: Timestamp,
    pub url: String,
    pub secret: SecretString,
    /// The secret before the last rotation, while it still signs.
    pub previous_secret: Option<SecretString>,
    pub is_active: bool,
    /// The webhook's deliveries per second at most.
    pub rate_limit: Option<i32>,
    /// When the delivery was last enqueued (or redelivered): the attempt's outcome is written
    /// only while it is still the same, so a redeliver during the attempt stands.
    pub enqueued_at: Option<Timestamp>,
}

/// The deliveries among `ids` with their event and webhook. Only the primary keys lead to the
/// rows (see `db::sending::pending_for_send`); the caller keeps those pending and due.
pub async fn load_due(
    db: impl PgExecutor<'_>,
    ids: &[Uuid],
) -> Result<Vec<DueAttempt>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT d.id AS delivery_id, d.organization_id, d.webhook_id, d.event, d.attempts,
                d.status = 'pending' AS "pending!", d.next_attempt_at <= clock_timestamp() AS "due!",
                e.data::text AS "data!", e.created_at AS occurred_at, w.url, w.secret,
                CASE WHEN w.previous_secret_expires_at > clock_timestamp() THEN w.previous_secret END
                    AS previous_secret,
                w.is_active, w.rate_limit, d.enqueued_at
         FROM unnest($1::uuid[]) AS u(id)
         JOIN webhook_deliveries d ON d.id = u.id
         JOIN webhook_events e ON e.id = d.event_id
         JOIN webhooks w ON w.id = d.webhook_id"#,
        ids,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| DueAttempt {
            delivery_id: r.delivery_id,
            organization_id: r.organization_id,
            webhook_id: r.webhook_id,
            event: r.event,
            attempts: r.attempts,
            pending: r.pending,
            due: r.due,
            data: r.data,
            occurred_at: r.occurred_at,
            url: r.url,
            secret: r.secret.into(),
            previous_secret: r.previous_secret.map(SecretString::from),
            is_active: r.is_active,
            rate_limit: r.rate_limit,
            enqueued_at: r.enqueued_at,
        })
        .collect())
}

/// What one attempt did.
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    pub delivery_id: Uuid,
    pub organization_id: Uuid,
    pub webhook_id: Uuid,
    pub event: String,
    pub attempt: i32,
    pub succeeded: bool,
    pub response_status: Option<i32>,
    pub response_body: Option<String>,
    pub duration_ms: i32,
    pub error: Option<String>,
    /// When to try again; `None` with a failure means the delivery is given up.
    pub next_attempt_at: Option<Timestamp>,
    /// The delivery's `enqueued_at` when the attempt began (see [`DueAttempt::enqueued_at`]).
    pub enqueued_at: Option<Timestamp>,
}

/// What a webhook job did: attempts made; deliveries put back for `busy_for` because their
/// webhook had no free slot; and the webhooks whose slots were all stuck, marked stalled for
/// `stall_for`.
pub struct WebhookJobReport {
    pub attempts: Vec<AttemptRecord>,
    pub busy: Vec<Uuid>,
    pub busy_for: Duration,
    pub stalled: Vec<Uuid>,
    pub stall_for: Duration,
}

/// Writes a job's outcome in one transaction: the attempts' log, the deliveries, the webhooks'
/// failure streaks, and the deliveries put back. Returns the webhooks this disabled (failing
/// since longer than `disable_after`), as (organization, id).
pub async fn record_outcome(
    tx: &mut PgConnection,
    outcome: &WebhookJobReport,
    disable_after: Duration,
) -> Result<Vec<(Uuid, Uuid)>, sqlx::Error> {
    let disabled = record_attempts(tx, &outcome.attempts, disable_after).await?;
    defer(&mut *tx, &outcome.busy, outcome.busy_for).await?;
    mark_stalled(&mut *tx, &outcome.stalled, outcome.stall_for).await?;
    Ok(disabled)
}

/// Logs the attempts, moves their deliveries on, and updates their webhooks' failure streaks;
/// returns the webhooks this disabled (organization, id).
async fn record_attempts(
    tx: &mut PgConnection,
    records: &[AttemptRecord],
    disable_after: Duration,
) -> Result<Vec<(Uuid, Uuid)>, sqlx::Error> {
    if records.is_empty() {
        return Ok(Vec::new());
    }
    let columns = AttemptColumns::of(records);
    insert_attempts(&mut *tx, &columns).await?;
    advance_deliveries(&mut *tx, &columns).await?;
    update_failure_streaks(tx, records, disable_after).await
}

/// The attempts as one array per column, for `unnest`.
struct AttemptColumns {
    delivery_ids: Vec<Uuid>,
    attempt_ids: Vec<Uuid>,
    orgs: Vec<Uuid>,
    webhooks: Vec<Uuid>,
    events: Vec<String>,
    attempts: Vec<i32>,
    statuses: Vec<&'static str>,
    response_statuses: Vec<Option<i32>>,
    bodies: Vec<Option<String>>,
    durations: Vec<i32>,
    errors: Vec<Option<String>>,
    next: Vec<Option<chrono::DateTime<chrono::Utc>>>,
    enqueued: Vec<Option<chrono::DateTime<chrono::Utc>>>,
}

impl AttemptColumns {
    fn of(records: &[AttemptRecord]) -> Self {
        fn col<T>(records: &[AttemptRecord], f: impl Fn(&AttemptRecord) -> T) -> Vec<T> {
            records.iter().map(f).collect()
        }
        AttemptColumns {
            delivery_ids: col(records, |r| r.delivery_id),
            attempt_ids: col(records, |_| parley_types::ids::new_id()),
            orgs: col(records, |r| r.organization_id),
            webhooks: col(records, |r| r.webhook_id),
            events: col(records, |r| r.event.clone()),
            attempts: col(records, |r| r.attempt),
            statuses: col(records, |r| {
                if r.succeeded {
                    AttemptStatus::Succeeded.as_str()
                } else {
                    AttemptStatus::Failed.as_str()
                }
            }),
            response_statuses: col(records, |r| r.response_status),
            bodies: col(records, |r| r.response_body.clone()),
            durations: col(records, |r| r.duration_ms),
            errors: col(records, |r| r.error.clone()),
            next: col(records, |r| r.next_attempt_at.map(|t| t.0)),
            enqueued: col(records, |r| r.enqueued_at.map(|t| t.0)),
        }
    }
}

/// The attempts' log, one row per attempt.
async fn insert_attempts(db: impl PgExecutor<'_>, c: &AttemptColumns) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO webhook_attempts (id, organization_id, webhook_id, delivery_id, event, attempt,
            status, response_status, response_body, duration_ms, error, next_attempt_at)
         SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::uuid[], $5::text[],
            $6::int4[], $7::text[], $8::int4[], $9::text[], $10::int4[], $11::text[],
            $12::timestamptz[])",
        &c.attempt_ids,
        &c.orgs,
        &c.webhooks,
        &c.delivery_ids,
        &c.events as _,
        &c.attempts,
        &c.statuses as _,
        &c.response_statuses as _,
        &c.bodies as _,
        &c.durations,
        &c.errors as _,
        &c.next as _,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Each delivery after its attempt: delivered, failed for good (no next attempt), or pending
/// until its next attempt. A failed attempt of a delivery that is no longer the pending one it
/// began with (redelivered, or enqueued again meanwhile) leaves the newer state standing.
async fn advance_deliveries(
    db: impl PgExecutor<'_>,
    c: &AttemptColumns,
) -> Result<(), sqlx::Error> {
    // The CASEs read the row as locked (the latest version). A success is always written (the
    // receiver has it); a failure only while the delivery is still the pending one the attempt
    // began with, so it never undoes a redeliver or a newer job's work.
    sqlx::query!(
        "UPDATE webhook_deliveries d SET
            attempts = greatest(d.attempts, u.attempt),
            requeues = CASE WHEN (u.status = 'succeeded' OR d.status = 'pending' AND d.enqueued_at IS NOT DISTINCT FROM u.enqueued_at)
                            THEN 0 ELSE d.requeues END,
            status = CASE WHEN NOT ((u.status = 'succeeded' OR d.status = 'pending' AND d.enqueued_at IS NOT DISTINCT FROM u.enqueued_at))
                               THEN d.status
                          WHEN u.status = 'succeeded' THEN 'delivered'
                          WHEN u.next_at IS NULL THEN 'failed' ELSE 'pending' END,
            delivered_at = CASE WHEN (u.status = 'succeeded' OR d.status = 'pending' AND d.enqueued_at IS NOT DISTINCT FROM u.enqueued_at)
                                     AND u.status = 'succeeded' THEN clock_timestamp()
                                ELSE d.delivered_at END,
            next_attempt_at = CASE WHEN (u.status = 'succeeded' OR d.status = 'pending' AND d.enqueued_at IS NOT DISTINCT FROM u.enqueued_at)
                                   THEN coalesce(u.next_at, d.next_attempt_at)
                                   ELSE d.next_attempt_at END
         FROM unnest($1::uuid[], $2::int4[], $3::text[], $4::timestamptz[], $5::timestamptz[])
              AS u(id, attempt, status, next_at, enqueued_at)
         WHERE d.id = u.id",
        &c.delivery_ids,
        &c.attempts,
        &c.statuses as _,
        &c.next as _,
        &c.enqueued as _,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A success ends a webhook's failure streak; a failure (of a webhook with no success in
/// these records) starts one or lengthens it, and a streak longer than `disable_after`
/// disables the webhook. Returns the webhooks disabled (organization, id).
async fn update_failure_streaks(
    tx: &mut PgConnection,
    records: &[AttemptRecord],
    disable_after: Duration,
) -> Result<Vec<(Uuid, Uuid)>, sqlx::Error> {
    let ok: HashSet<Uuid> = records
        .iter()
        .filter(|r| r.succeeded)
        .map(|r| r.webhook_id)
        .collect();
    let failed: Vec<Uuid> = records
        .iter()
        .filter(|r| !r.succeeded && !ok.contains(&r.webhook_id))
        .map(|r| r.webhook_id)
        .collect();
    if !ok.is_empty() {
        let ok: Vec<Uuid> = ok.into_iter().collect();
        sqlx::query!(
            "UPDATE webhooks SET failing_since = NULL
             WHERE id = ANY($1) AND failing_since IS NOT NULL",
            &ok,
        )
        .execute(&mut *tx)
        .await?;
    }
    if failed.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query!(
        "UPDATE webhooks SET failing_since = clock_timestamp()
         WHERE id = ANY($1) AND failing_since IS NULL",
        &failed,
    )
    .execute(&mut *tx)
    .await?;
    let disabled = sqlx::query!(
        r#"UPDATE webhooks SET is_active = false, disabled_at = clock_timestamp(),
            disabled_reason = 'every attempt failed since '
                || to_char(failing_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
         WHERE id = ANY($1) AND is_active
           AND failing_since <= clock_timestamp() - make_interval(secs => $2)
         RETURNING organization_id, id"#,
        &failed,
        disable_after.as_secs_f64(),
    )
    .fetch_all(&mut *tx)
    .await?;
    Ok(disabled
        .into_iter()
        .map(|d| (d.organization_id, d.id))
        .collect())
}

/// Marks webhooks whose slots were all stuck as stalled for `stall_for`. Renewed at most every
/// half period, so jobs finding the same stuck endpoint rarely write its row.
async fn mark_stalled(
    db: impl PgExecutor<'_>,
    webhooks: &[Uuid],
    stall_for: Duration,
) -> Result<(), sqlx::Error> {
    if webhooks.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "UPDATE webhooks SET stalled_until = clock_timestamp() + make_interval(secs => $2::float8)
         WHERE id = ANY($1)
           AND (stalled_until IS NULL
                OR stalled_until < clock_timestamp() + make_interval(secs => $2::float8 / 2))",
        webhooks,
        stall_for.as_secs_f64(),
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Puts deliveries that found their webhook busy back for `delay`, without using an attempt.
async fn defer(db: impl PgExecutor<'_>, ids: &[Uuid], delay: Duration) -> Result<(), sqlx::Error> {
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "UPDATE webhook_deliveries d SET next_attempt_at = clock_timestamp() + make_interval(secs => $2)
         FROM unnest($1::uuid[]) AS u(id) WHERE d.id = u.id AND d.status = 'pending'",
        ids,
        delay.as_secs_f64(),
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Starts a recovery of `webhook`'s failed deliveries of events in `[since, until)`; the relay
/// queues them again in the background ([`advance_recoveries`]).
///
/// `None` while another recovery of the webhook still runs (one at a time per webhook, so no
/// organization can line up recoveries that hold up the others').
pub async fn start_recovery(
    db: impl PgExecutor<'_>,
    org: OrgId,
    webhook: WebhookId,
    since: Timestamp,
    until: Timestamp,
) -> Result<Option<WebhookRecovery>, sqlx::Error> {
    sqlx::query_as!(
        WebhookRecovery,
        r#"INSERT INTO webhook_recoveries (id, organization_id, webhook_id, since, until)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (webhook_id) WHERE status = 'running' DO NOTHING
         RETURNING id, webhook_id, since, until, status AS "status: RecoveryStatus", recovered,
            completed_at, created_at, updated_at"#,
        parley_types::ids::new_id(),
        org.uuid(),
        webhook.uuid(),
        since,
        until,
    )
    .fetch_optional(db)
    .await
}

pub async fn get_recovery(
    db: impl PgExecutor<'_>,
    org: OrgId,
    webhook: WebhookId,
    id: Uuid,
) -> Result<Option<WebhookRecovery>, sqlx::Error> {
    sqlx::query_as!(
        WebhookRecovery,
        r#"SELECT id, webhook_id, since, until, status AS "status: RecoveryStatus", recovered,
            completed_at, created_at, updated_at
         FROM webhook_recoveries WHERE organization_id = $1 AND webhook_id = $2 AND id = $3"#,
        org.uuid(),
        webhook.uuid(),
        id,
    )
    .fetch_optional(db)
    .await
}

/// Moves the running recovery moved least recently on (so recoveries take turns): its next `batch` failed deliveries (by event time, after
/// where it stopped) become pending and due now, with no job holding them, so the relay feeds
/// them to the endpoint at its pace (a few per webhook per pass); their attempts go on
/// counting. A recovery finding fewer than `batch` is completed. Returns how many deliveries
/// were queued again. Recoveries being moved by another worker are skipped.
pub async fn advance_recoveries(tx: &mut PgConnection, batch: i64) -> Result<u64, sqlx::Error> {
    let Some(r) = sqlx::query!(
        "SELECT id, webhook_id, since, until, after_created_at, after_id
         FROM webhook_recoveries WHERE status = 'running'
         ORDER BY updated_at LIMIT 1 FOR UPDATE SKIP LOCKED"
    )
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(0);
    };
    // The window's next candidates decide the cursor and the end; of them, those still failed
    // are queued again (one redelivered meanwhile is left as it is).
    let step = sqlx::query!(
        r#"WITH f AS (
            SELECT id, created_at FROM webhook_deliveries
            WHERE webhook_id = $1 AND status = 'failed'
              AND created_at >= $2 AND created_at < $3
              AND ($4::timestamptz IS NULL OR (created_at, id) > ($4, $5))
            ORDER BY created_at, id LIMIT $6),
         u AS (
            UPDATE webhook_deliveries d SET status = 'pending',
                next_attempt_at = clock_timestamp(), enqueued_at = NULL, requeues = 0,
                discarded_at = NULL
            FROM f WHERE d.id = f.id AND d.status = 'failed'
            RETURNING d.id)
         SELECT (SELECT count(*) FROM f) AS "candidates!", (SELECT count(*) FROM u) AS "taken!",
            (SELECT created_at FROM f ORDER BY created_at DESC, id DESC LIMIT 1) AS last_created_at,
            (SELECT id FROM f ORDER BY created_at DESC, id DESC LIMIT 1) AS last_id"#,
        r.webhook_id,
        r.since,
        r.until,
        r.after_created_at,
        r.after_id,
        batch,
    )
    .fetch_one(&mut *tx)
    .await?;
    let done = step.candidates < batch;
    sqlx::query!(
        "UPDATE webhook_recoveries SET recovered = recovered + $2,
            after_created_at = coalesce($3, after_created_at), after_id = coalesce($4, after_id),
            status = CASE WHEN $5 THEN 'completed' ELSE status END,
            completed_at = CASE WHEN $5 THEN clock_timestamp() END
         WHERE id = $1",
        r.id,
        i32::try_from(step.taken).unwrap_or(i32::MAX),
        step.last_created_at,
        step.last_id,
        done,
    )
    .execute(&mut *tx)
    .await?;
    Ok(u64::try_from(step.taken).unwrap_or(0))
}

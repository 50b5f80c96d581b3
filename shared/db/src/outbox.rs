//! The webhook outbox: events written in the transaction of the change that causes them, and
//! the relay that turns them into deliveries. A crash or a lost Redis delays a delivery; it
//! cannot lose one, because the event and then the delivery are rows before any job exists.

use parley_types::ids::OrgId;
use std::time::Duration;

use serde::Serialize;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use parley_domain::webhooks::{DeliveryStatus, EventName};

/// The channel `emit` notifies, so relays wake at once instead of at their next tick.
pub const CHANNEL: &str = "parley_outbox";

/// Records `event` with `data` (the resource as the API returns it) for the organization's
/// webhooks. Call it in the transaction that makes the change: the event exists exactly when
/// the change does.
pub async fn emit(
    conn: &mut PgConnection,
    org: OrgId,
    event: EventName,
    data: &impl Serialize,
) -> Result<(), sqlx::Error> {
    let data = serde_json::to_value(data).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    emit_many(conn, &[(org.uuid(), event, data)]).await
}

/// [`emit`] for many events in one statement.
pub async fn emit_many(
    conn: &mut PgConnection,
    events: &[(Uuid, EventName, serde_json::Value)],
) -> Result<(), sqlx::Error> {
    if events.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = events.iter().map(|_| parley_types::ids::new_id()).collect();
    let orgs: Vec<Uuid> = events.iter().map(|e| e.0).collect();
    let names: Vec<&str> = events.iter().map(|e| e.1.as_str()).collect();
    let data: Vec<sqlx::types::Json<&serde_json::Value>> =
        events.iter().map(|e| sqlx::types::Json(&e.2)).collect();
    sqlx::query!(
        "INSERT INTO webhook_events (id, organization_id, event, data)
         SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::jsonb[])",
        &ids,
        &orgs,
        &names as _,
        &data as _,
    )
    .execute(&mut *conn)
    .await?;
    // Delivered on commit, and only then.
    sqlx::query!("SELECT pg_notify($1, '')", CHANNEL,)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Relays up to `limit` unrelayed events: one delivery per active webhook of the event's
/// organization that subscribes to it, marked enqueued now, unless the webhook is stalled
/// (those are left to [`take_due`]). Returns the deliveries to enqueue as (organization, webhook,
/// delivery) triples, and how many events were relayed.
pub async fn relay(
    db: impl PgExecutor<'_>,
    limit: i64,
) -> Result<(Vec<(Uuid, Uuid, Uuid)>, usize), sqlx::Error> {
    let rows = sqlx::query!(
        r#"WITH ev AS (
            SELECT id, organization_id, event FROM webhook_events
            WHERE relayed_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
         ), marked AS (
            UPDATE webhook_events e SET relayed_at = clock_timestamp()
            FROM ev WHERE e.id = ev.id RETURNING e.id
         ), made AS (
            INSERT INTO webhook_deliveries
                (id, organization_id, webhook_id, event_id, event, next_attempt_at, enqueued_at)
            SELECT uuid_v7(), ev.organization_id, w.id, ev.id, ev.event, now(),
                   CASE WHEN w.stalled_until > now() THEN NULL ELSE now() END
            FROM ev JOIN webhooks w
              ON w.organization_id = ev.organization_id AND w.is_active AND ev.event = ANY (w.events)
            ON CONFLICT (webhook_id, event_id) DO NOTHING
            RETURNING organization_id, webhook_id, id, enqueued_at IS NOT NULL AS enqueue
         )
         SELECT organization_id, webhook_id, id AS delivery_id, enqueue AS "enqueue!" FROM made
         UNION ALL
         SELECT NULL, NULL, NULL, false FROM marked"#,
        limit,
    )
    .fetch_all(db)
    .await?;
    let relayed = rows.iter().filter(|r| r.webhook_id.is_none()).count();
    let deliveries = rows
        .into_iter()
        .filter(|r| r.enqueue)
        .filter_map(|r| Some((r.organization_id?, r.webhook_id?, r.delivery_id?)))
        .collect();
    Ok((deliveries, relayed))
}

/// Deliveries due for an attempt that no job holds yet (retries whose time has come), marked
/// enqueued now: (organization, webhook, delivery), oldest due first, at most `limit`, and at most
/// `per_webhook` of any one webhook, so a slow endpoint's backlog is fed to it a few at a time
/// instead of churning through the queue; and those enqueued longer ago than `lost_after` and
/// not attempted since (their job was lost); one lost `max_requeues` times already is given
/// up. One worker at a time takes them.
pub async fn take_due(
    tx: &mut PgConnection,
    limit: i64,
    per_webhook: i64,
    lost_after: Duration,
    max_requeues: i16,
) -> Result<TakenDeliveries, sqlx::Error> {
    let ours: bool = sqlx::query_scalar!(
        r#"SELECT pg_try_advisory_xact_lock(hashtext('parley.take_due')) AS "locked!""#,
    )
    .fetch_one(&mut *tx)
    .await?;
    if !ours {
        return Ok(TakenDeliveries::default());
    }
    // A delivery taken again while its last enqueue is not followed by a recorded attempt
    // (`enqueued_at >= next_attempt_at`) is a requeue of lost work; past the ceiling it is
    // given up, so a delivery whose outcome cannot be written is not posted forever.
    //
    // Each webhook's oldest few, through two indexes by webhook (deliveries waiting for a job,
    // and deliveries in a job), visiting the webhooks that have any with a skip scan: a pass
    // costs the webhooks with pending deliveries (a few index descents each) and what it takes,
    // not the size of their backlogs. Lost ones are first cut to `per_webhook` a webhook by when
    // they were enqueued, then ranked with the rest by when they were due. The rows are updated
    // through their primary key (`= ANY (ARRAY(...))`: joined to the table, a small table
    // without statistics was read whole for a hash join), and only while still pending (a job
    // may record one meanwhile).
    let rows = sqlx::query!(
        "WITH RECURSIVE waiting(webhook_id) AS (
            (SELECT webhook_id FROM webhook_deliveries
             WHERE status = 'pending' AND (enqueued_at IS NULL OR enqueued_at < next_attempt_at)
             ORDER BY webhook_id LIMIT 1)
            UNION ALL
            SELECT (SELECT d.webhook_id FROM webhook_deliveries d
                    WHERE d.status = 'pending'
                      AND (d.enqueued_at IS NULL OR d.enqueued_at < d.next_attempt_at)
                      AND d.webhook_id > w.webhook_id
                    ORDER BY d.webhook_id LIMIT 1)
            FROM waiting w WHERE w.webhook_id IS NOT NULL
         ), in_job(webhook_id) AS (
            (SELECT webhook_id FROM webhook_deliveries
             WHERE status = 'pending' AND enqueued_at >= next_attempt_at
             ORDER BY webhook_id LIMIT 1)
            UNION ALL
            SELECT (SELECT d.webhook_id FROM webhook_deliveries d
                    WHERE d.status = 'pending' AND d.enqueued_at >= d.next_attempt_at
                      AND d.webhook_id > w.webhook_id
                    ORDER BY d.webhook_id LIMIT 1)
            FROM in_job w WHERE w.webhook_id IS NOT NULL
         ), candidates AS (
            SELECT c.* FROM waiting w CROSS JOIN LATERAL (
                SELECT d.id, d.webhook_id, d.next_attempt_at FROM webhook_deliveries d
                WHERE d.webhook_id = w.webhook_id AND d.status = 'pending'
                  AND (d.enqueued_at IS NULL OR d.enqueued_at < d.next_attempt_at)
                  AND d.next_attempt_at <= statement_timestamp()
                ORDER BY d.next_attempt_at LIMIT $2) c
            UNION ALL
            SELECT c.* FROM in_job w CROSS JOIN LATERAL (
                SELECT d.id, d.webhook_id, d.next_attempt_at FROM webhook_deliveries d
                WHERE d.webhook_id = w.webhook_id AND d.status = 'pending'
                  AND d.enqueued_at >= d.next_attempt_at
                  AND d.enqueued_at < statement_timestamp() - make_interval(secs => $3)
                ORDER BY d.enqueued_at LIMIT $2) c
         ), due AS (
            SELECT id FROM (
                SELECT id, next_attempt_at,
                       row_number() OVER (PARTITION BY webhook_id ORDER BY next_attempt_at) AS n
                FROM candidates) ranked
            WHERE n <= $2 ORDER BY next_attempt_at LIMIT $1
         )
         UPDATE webhook_deliveries d SET enqueued_at = clock_timestamp(),
            requeues = CASE WHEN d.enqueued_at >= d.next_attempt_at THEN d.requeues + 1
                            ELSE d.requeues END,
            status = CASE WHEN d.enqueued_at >= d.next_attempt_at AND d.requeues >= $4
                          THEN 'failed' ELSE d.status END
         WHERE d.id = ANY (ARRAY(SELECT id FROM due)) AND d.status = 'pending'
         RETURNING d.organization_id, d.webhook_id, d.id, d.status",
        limit,
        per_webhook,
        lost_after.as_secs_f64(),
        max_requeues,
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut due = TakenDeliveries::default();
    for r in rows {
        if r.status == DeliveryStatus::Pending {
            due.taken.push((r.organization_id, r.webhook_id, r.id));
        } else {
            due.given_up.push(r.id);
        }
    }
    Ok(due)
}

/// What [`take_due`] found: deliveries to enqueue (organization, webhook, delivery), and those
/// it gave up.
#[derive(Debug, Default)]
pub struct TakenDeliveries {
    pub taken: Vec<(Uuid, Uuid, Uuid)>,
    pub given_up: Vec<Uuid>,
}

/// Events not yet relayed: the outbox backlog.
pub async fn backlog(db: impl PgExecutor<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM webhook_events WHERE relayed_at IS NULL"#,
    )
    .fetch_one(db)
    .await
}

/// Deletes up to `limit` of the oldest relayed events past retention, with their deliveries
/// and attempts (the foreign keys cascade): an event whose deliveries all succeeded after
/// `retention`, one with a failed delivery after `failed_retention`; never one with a delivery
/// still pending. Returns how many events.
pub async fn sweep_expired(
    db: impl PgExecutor<'_>,
    retention: Duration,
    failed_retention: Duration,
    limit: i64,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM webhook_events WHERE id IN (
            SELECT e.id FROM webhook_events e
            WHERE e.relayed_at IS NOT NULL
              AND e.created_at < statement_timestamp() - make_interval(secs => $1)
              AND NOT EXISTS (
                SELECT 1 FROM webhook_deliveries d
                WHERE d.event_id = e.id
                  AND (d.status = 'pending'
                       OR (d.status = 'failed'
                           AND e.created_at >= statement_timestamp() - make_interval(secs => $2))))
            ORDER BY e.created_at LIMIT $3)",
        retention.as_secs_f64(),
        failed_retention.as_secs_f64(),
        limit,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

//! What the ticker and the reconciler find and mend: broadcasts due, A/B tests whose wait
//! ended, dispatches and recipients a lost job left behind, the lanes with work waiting, held
//! recipients whose time came; and the retention of ended broadcasts' recipients.

use std::time::Duration;

use parley_domain::broadcasts::{RecipientStatus, SendPriority};
use parley_types::ids::{BroadcastId, OrgId, RecipientId};
use parley_types::time::Timestamp;
use sqlx::{PgConnection, PgExecutor};

use super::secs;

/// Scheduled broadcasts whose time has come, moved to `queued` (at most `limit`).
pub async fn queue_due(
    db: impl PgExecutor<'_>,
    limit: i64,
) -> Result<Vec<BroadcastId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"UPDATE broadcasts SET status = 'queued', queued_at = clock_timestamp(), send_now = true
         WHERE id IN (
            SELECT id FROM broadcasts WHERE status = 'scheduled' AND scheduled_at <= statement_timestamp()
            ORDER BY scheduled_at LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING id AS "id: BroadcastId""#,
        limit,
    )
    .fetch_all(db)
    .await
}

/// Broadcasts whose dispatch job seems lost: queued for longer than `after`, or sending with
/// an unfinished fan-out and no live dispatcher. Their queue time is renewed.
pub async fn stale_dispatches(
    db: impl PgExecutor<'_>,
    after: Duration,
    limit: i64,
) -> Result<Vec<BroadcastId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"UPDATE broadcasts SET queued_at = clock_timestamp()
         WHERE id IN (
            SELECT id FROM broadcasts
            WHERE status IN ('queued', 'sending')
              AND (dispatch_lease_until IS NULL OR dispatch_lease_until < statement_timestamp())
              AND (status = 'queued' OR NOT fanout_done)
              AND coalesce(queued_at, created_at) < statement_timestamp() - make_interval(secs => $1)
            LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING id AS "id: BroadcastId""#,
        secs(after),
        limit,
    )
    .fetch_all(db)
    .await
}

/// Postgres' clock, which writes `enqueued_at` and the like.
pub async fn now(db: impl PgExecutor<'_>) -> Result<Timestamp, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT statement_timestamp() AS "now!""#)
        .fetch_one(db)
        .await
}

/// Pending recipients of sending broadcasts whose job seems lost: enqueued longer than
/// `after` ago, before `before` when given, and, for a broadcast with jobs still waiting
/// (`waiting`: broadcast and its oldest waiting job's park time; `waiting_else` for any other
/// broadcast, when given), `wait` before that time (a job behind others of its broadcast is
/// late, not lost). Returns (broadcast, recipient). Read only: the caller leaves out those a
/// worker still holds a claim on, and passes the rest to [`requeue`].
pub async fn stale_recipients(
    db: impl PgExecutor<'_>,
    bounds: &StaleBounds,
    limit: i64,
) -> Result<Vec<(BroadcastId, RecipientId)>, sqlx::Error> {
    let (broadcasts, since): (Vec<BroadcastId>, Vec<chrono::DateTime<chrono::Utc>>) =
        bounds.waiting.iter().map(|(b, t)| (*b, t.0)).unzip();
    // Every bound is stable within the statement and the broadcast: an index condition of
    // each broadcast's scan (see docs/jobs.md).
    let rows = sqlx::query!(
        r#"SELECT s.broadcast_id AS "broadcast_id!: BroadcastId", s.id AS "id!: RecipientId" FROM broadcasts b
         LEFT JOIN unnest($4::uuid[], $5::timestamptz[]) AS w(broadcast_id, since)
           ON w.broadcast_id = b.id
         CROSS JOIN LATERAL (
            SELECT r.broadcast_id, r.id FROM broadcast_recipients r
            WHERE r.broadcast_id = b.id AND r.status = 'pending'
              AND r.enqueued_at < least(statement_timestamp() - make_interval(secs => $1),
                                        coalesce($3, 'infinity'::timestamptz),
                                        coalesce(coalesce(w.since, $6) - make_interval(secs => $7),
                                                 'infinity'::timestamptz))
            LIMIT $2) s
         WHERE b.status = 'sending'
         LIMIT $2"#,
        secs(bounds.after),
        limit,
        bounds.before,
        &broadcasts as _,
        &since,
        bounds.waiting_else,
        secs(bounds.wait),
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.broadcast_id, r.id)).collect())
}

/// The bounds of [`stale_recipients`].
#[derive(Debug, Clone, Default)]
pub struct StaleBounds {
    pub after: Duration,
    pub before: Option<Timestamp>,
    pub waiting: Vec<(BroadcastId, Timestamp)>,
    pub waiting_else: Option<Timestamp>,
    pub wait: Duration,
}

/// Marks lost recipients (of [`stale_recipients`], still pending and stale) as enqueued
/// again, counting it. One enqueued `max_requeues` times already is failed instead
/// (`attempts_exhausted`): however its outcome fails to be written, it is not sent forever.
pub async fn requeue(
    db: impl PgExecutor<'_>,
    ids: &[RecipientId],
    after: Duration,
    max_requeues: i16,
) -> Result<StaleRecipients, sqlx::Error> {
    let rows = sqlx::query!(
        r#"UPDATE broadcast_recipients SET enqueued_at = clock_timestamp(),
            requeues = requeues + 1,
            status = CASE WHEN requeues >= $3 THEN 'failed' ELSE status END,
            failed_at = CASE WHEN requeues >= $3 THEN clock_timestamp() ELSE failed_at END,
            error_code = CASE WHEN requeues >= $3 THEN 'attempts_exhausted' ELSE error_code END,
            error_message = CASE WHEN requeues >= $3
                THEN 'given up: no outcome could be recorded after ' || requeues + 1 || ' tries'
                ELSE error_message END
         WHERE id IN (
            SELECT r.id FROM unnest($1::uuid[]) AS u(id)
            JOIN broadcast_recipients r ON r.id = u.id
            WHERE r.status = 'pending'
              AND r.enqueued_at < statement_timestamp() - make_interval(secs => $2)
            FOR UPDATE OF r SKIP LOCKED)
         RETURNING broadcast_id AS "broadcast_id: BroadcastId", id AS "id: RecipientId",
            status AS "status: RecipientStatus""#,
        ids as _,
        secs(after),
        max_requeues,
    )
    .fetch_all(db)
    .await?;
    let mut out = StaleRecipients::default();
    for r in rows {
        if r.status == RecipientStatus::Pending {
            out.requeued.push((r.broadcast_id, r.id));
        } else {
            out.given_up.push(r.broadcast_id);
        }
    }
    Ok(out)
}

/// What [`requeue`] did: recipients to enqueue again, and the broadcasts of those it gave up
/// (one entry per recipient).
#[derive(Debug, Default)]
pub struct StaleRecipients {
    pub requeued: Vec<(BroadcastId, RecipientId)>,
    pub given_up: Vec<BroadcastId>,
}

/// Where a broadcast's jobs take their turn: its organization, and whether it is `high`.
#[derive(Debug, Clone, Copy)]
pub struct BroadcastLane {
    pub organization_id: OrgId,
    pub high: bool,
}

/// The lanes of `broadcasts` (those that exist).
pub async fn lanes(
    db: impl PgExecutor<'_>,
    broadcasts: &[BroadcastId],
) -> Result<std::collections::HashMap<BroadcastId, BroadcastLane>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT id AS "id: BroadcastId", organization_id AS "organization_id: OrgId",
            priority AS "priority: SendPriority"
         FROM broadcasts WHERE id = ANY($1)"#,
        broadcasts as _,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let lane = BroadcastLane {
                organization_id: r.organization_id,
                high: r.priority == SendPriority::High,
            };
            (r.id, lane)
        })
        .collect())
}

/// Held recipients whose time has come by `now` (the worker's clock), at most `limit`, made
/// pending and enqueued now, oldest first: (broadcast, recipient). The caller enqueues them;
/// should that fail, the reconciler finds them as it finds any lost pending recipient.
pub async fn release_held(
    db: impl PgExecutor<'_>,
    now: Timestamp,
    limit: i64,
) -> Result<Vec<(BroadcastId, RecipientId)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"UPDATE broadcast_recipients SET status = 'pending', hold_until = NULL,
            enqueued_at = clock_timestamp()
         WHERE id IN (
            SELECT id FROM broadcast_recipients
            WHERE status = 'held' AND hold_until <= $1
            ORDER BY hold_until LIMIT $2 FOR UPDATE SKIP LOCKED)
           AND status = 'held'
         RETURNING broadcast_id AS "broadcast_id: BroadcastId", id AS "id: RecipientId""#,
        now as _,
        limit,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.broadcast_id, r.id)).collect())
}

/// Retention: deletes up to `limit` recipients of the broadcast that ended longest ago, more
/// than `after` ago, whose recipients are kept; marks it purged once none is left. Its counters
/// and the templates' daily figures stay (the delete trigger leaves them under
/// `parley.keep_counters`). Goes through the recipients' index of that one broadcast, so it
/// costs the rows it deletes whatever the table's size. Returns the rows deleted, and whether a
/// broadcast was found.
pub async fn purge_recipients(
    tx: &mut PgConnection,
    after: Duration,
    limit: i64,
) -> Result<(u64, bool), sqlx::Error> {
    let broadcast = sqlx::query_scalar!(
        "SELECT id FROM broadcasts
         WHERE recipients_purged_at IS NULL AND status IN ('completed', 'failed', 'cancelled')
           AND coalesce(completed_at, cancelled_at, updated_at)
               < now() - make_interval(secs => $1)
         ORDER BY coalesce(completed_at, cancelled_at, updated_at)
         LIMIT 1 FOR UPDATE SKIP LOCKED",
        after.as_secs_f64(),
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(broadcast) = broadcast else {
        return Ok((0, false));
    };
    sqlx::query_scalar!("SELECT set_config('parley.keep_counters', 'on', true)")
        .fetch_one(&mut *tx)
        .await?;
    let deleted = sqlx::query!(
        "DELETE FROM broadcast_recipients WHERE id IN (
            SELECT id FROM broadcast_recipients WHERE broadcast_id = $1 LIMIT $2)",
        broadcast,
        limit,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if deleted < limit as u64 {
        sqlx::query!(
            "UPDATE broadcasts SET recipients_purged_at = clock_timestamp() WHERE id = $1",
            broadcast,
        )
        .execute(&mut *tx)
        .await?;
    }
    Ok((deleted, true))
}

/// A/B broadcasts sending whose wait ended by `now` (the worker's clock) with no winner:
/// (organization, broadcast), at most `limit`.
pub async fn due_picks(
    db: impl PgExecutor<'_>,
    now: Timestamp,
    limit: i64,
) -> Result<Vec<(OrgId, BroadcastId)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT organization_id AS "organization_id: OrgId", id AS "id: BroadcastId"
         FROM broadcasts
         WHERE ab_test_ends_at <= $1 AND winning_variant IS NULL AND ab_test_ends_at IS NOT NULL
           AND status = 'sending'
         ORDER BY ab_test_ends_at LIMIT $2"#,
        now as _,
        limit,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.organization_id, r.id))
        .collect())
}

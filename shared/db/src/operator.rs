//! Operator control: dead work read across organizations, the actions on it (their log is
//! the audit log), pauses, operator keys and the largest backlogs.

use parley_domain::operator::{
    ActionKind, ActionStatus, DeadFilter, DeadItem, DeadQueue, OperatorAction, OrgBacklog,
    PausedOrganization, PausedQueue, SLA_CHECK_DEAD_AFTER_SECS,
};
use parley_types::ids::OrgId;
use parley_types::list::Cursor;
use parley_types::time::Timestamp;
use sqlx::types::Json;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

/// Where a page of dead work starts, and which of it: `ids` (if any) and given up at or before
/// `until` (an action's time).
#[derive(Debug, Clone, Default)]
pub struct DeadScope<'a> {
    pub after: Option<Cursor>,
    pub ids: &'a [Uuid],
    pub until: Option<Timestamp>,
}

/// One queue's dead work matching `filter`, newest first (then by id), at most `limit`.
pub async fn dead(
    db: impl PgExecutor<'_>,
    queue: DeadQueue,
    f: &DeadFilter,
    scope: &DeadScope<'_>,
    limit: i64,
) -> Result<Vec<DeadItem>, sqlx::Error> {
    let (after_at, after_id) = scope.after.as_ref().map(|c| (c.created_at, c.id)).unzip();
    let ids = (!scope.ids.is_empty()).then_some(scope.ids);
    // The filter's `to` and the action's time both bound from above.
    let to = match (f.to, scope.until) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 {
            a
        } else {
            Timestamp(b.0 + chrono::Duration::microseconds(1))
        }),
        (a, b) => a.or(b.map(|t| Timestamp(t.0 + chrono::Duration::microseconds(1)))),
    };
    macro_rules! items {
        ($rows:expr, $queue:expr) => {
            $rows
                .into_iter()
                .map(|r| DeadItem {
                    queue: $queue,
                    id: r.id,
                    organization_id: r.organization_id,
                    broadcast_id: r.broadcast_id,
                    webhook_id: r.webhook_id,
                    error_code: r.error_code,
                    error_message: r.error_message,
                    failed_at: r.failed_at,
                    attempts: r.attempts,
                })
                .collect()
        };
    }
    Ok(match queue {
        DeadQueue::RecipientSend => items!(
            sqlx::query!(
                r#"SELECT r.id, r.organization_id, r.broadcast_id AS "broadcast_id?",
                    NULL::uuid AS webhook_id, r.error_code, r.error_message,
                    r.failed_at AS "failed_at!: Timestamp", NULL::int4 AS attempts
                 FROM broadcast_recipients r
                 WHERE r.status = 'failed' AND r.discarded_at IS NULL AND r.failed_at IS NOT NULL
                   AND ($1::uuid IS NULL OR r.organization_id = $1)
                   AND ($2::uuid IS NULL OR r.broadcast_id = $2)
                   AND ($3::text IS NULL OR r.error_code = $3)
                   AND ($4::timestamptz IS NULL OR r.failed_at >= $4)
                   AND ($5::timestamptz IS NULL OR r.failed_at < $5)
                   AND ($6::timestamptz IS NULL OR (r.failed_at, r.id) < ($6, $7))
                   AND ($8::uuid[] IS NULL OR r.id = ANY ($8))
                 ORDER BY r.failed_at DESC, r.id DESC LIMIT $9"#,
                f.organization_id,
                f.broadcast_id,
                f.error_code,
                f.from as _,
                to as _,
                after_at as _,
                after_id,
                ids,
                limit,
            )
            .fetch_all(db)
            .await?,
            DeadQueue::RecipientSend
        ),
        DeadQueue::WebhookDelivery => items!(
            sqlx::query!(
                r#"SELECT d.id, d.organization_id, NULL::uuid AS broadcast_id,
                    d.webhook_id AS "webhook_id?",
                    CASE WHEN a.response_status IS NOT NULL THEN 'http_' || a.response_status
                         ELSE 'no_response' END AS error_code,
                    coalesce(a.error, 'HTTP ' || a.response_status) AS error_message,
                    d.updated_at AS "failed_at!: Timestamp", d.attempts AS "attempts?"
                 FROM webhook_deliveries d
                 LEFT JOIN LATERAL (
                    SELECT response_status, error FROM webhook_attempts a
                    WHERE a.delivery_id = d.id ORDER BY a.attempt DESC LIMIT 1) a ON true
                 WHERE d.status = 'failed' AND d.discarded_at IS NULL
                   AND ($1::uuid IS NULL OR d.organization_id = $1)
                   AND ($2::uuid IS NULL OR d.webhook_id = $2)
                   AND ($3::text IS NULL OR $3 = CASE WHEN a.response_status IS NOT NULL
                        THEN 'http_' || a.response_status ELSE 'no_response' END)
                   AND ($4::timestamptz IS NULL OR d.updated_at >= $4)
                   AND ($5::timestamptz IS NULL OR d.updated_at < $5)
                   AND ($6::timestamptz IS NULL OR (d.updated_at, d.id) < ($6, $7))
                   AND ($8::uuid[] IS NULL OR d.id = ANY ($8))
                 ORDER BY d.updated_at DESC, d.id DESC LIMIT $9"#,
                f.organization_id,
                f.webhook_id,
                f.error_code,
                f.from as _,
                to as _,
                after_at as _,
                after_id,
                ids,
                limit,
            )
            .fetch_all(db)
            .await?,
            DeadQueue::WebhookDelivery
        ),
        DeadQueue::ContactImport => items!(
            sqlx::query!(
                r#"SELECT i.id, i.organization_id, NULL::uuid AS broadcast_id,
                    NULL::uuid AS webhook_id, 'import_failed' AS error_code, i.error_message,
                    i.updated_at AS "failed_at!: Timestamp", i.attempts::int4 AS "attempts?"
                 FROM contact_imports i
                 WHERE i.status = 'failed' AND i.discarded_at IS NULL
                   AND ($1::uuid IS NULL OR i.organization_id = $1)
                   AND ($2::text IS NULL OR $2 = 'import_failed')
                   AND ($3::timestamptz IS NULL OR i.updated_at >= $3)
                   AND ($4::timestamptz IS NULL OR i.updated_at < $4)
                   AND ($5::timestamptz IS NULL OR (i.updated_at, i.id) < ($5, $6))
                   AND ($7::uuid[] IS NULL OR i.id = ANY ($7))
                 ORDER BY i.updated_at DESC, i.id DESC LIMIT $8"#,
                f.organization_id,
                f.error_code,
                f.from as _,
                to as _,
                after_at as _,
                after_id,
                ids,
                limit,
            )
            .fetch_all(db)
            .await?,
            DeadQueue::ContactImport
        ),
        DeadQueue::SlaCheck => items!(
            sqlx::query!(
                r#"SELECT c.id, c.organization_id, NULL::uuid AS broadcast_id,
                    NULL::uuid AS webhook_id, 'not_run' AS error_code,
                    c.kind || ' check of ' || c.target || ' not run ' ||
                        CASE WHEN c.enqueued_at IS NULL THEN '(never enqueued)'
                             ELSE '(enqueued, no outcome)' END AS error_message,
                    c.due_at AS "failed_at!: Timestamp", NULL::int4 AS attempts
                 FROM sla_checks c
                 WHERE sla_check_dead(c.due_at, c.enqueued_at, $9)
                   AND ($1::uuid IS NULL OR c.organization_id = $1)
                   AND ($2::text IS NULL OR $2 = 'not_run')
                   AND ($3::timestamptz IS NULL OR c.due_at >= $3)
                   AND ($4::timestamptz IS NULL OR c.due_at < $4)
                   AND ($5::timestamptz IS NULL OR (c.due_at, c.id) < ($5, $6))
                   AND ($7::uuid[] IS NULL OR c.id = ANY ($7))
                 ORDER BY c.due_at DESC, c.id DESC LIMIT $8"#,
                f.organization_id,
                f.error_code,
                f.from as _,
                to as _,
                after_at as _,
                after_id,
                ids,
                limit,
                SLA_CHECK_DEAD_AFTER_SECS as f64,
            )
            .fetch_all(db)
            .await?,
            DeadQueue::SlaCheck
        ),
    })
}

/// Retries dead items (still dead) of the webhook-delivery, contact-import and sla-check
/// queues: webhook deliveries due now, imports queued again (returned, to enqueue), SLA
/// checks to be enqueued. Recipients go through `parley_usecases::broadcasts::retry_recipients`,
/// as a tenant's retry does.
pub async fn retry(
    tx: &mut PgConnection,
    queue: DeadQueue,
    ids: &[Uuid],
) -> Result<Retried, sqlx::Error> {
    let mut out = Retried::default();
    match queue {
        DeadQueue::RecipientSend => {}
        DeadQueue::WebhookDelivery => {
            out.count = sqlx::query!(
                "UPDATE webhook_deliveries SET status = 'pending', discarded_at = NULL,
                    next_attempt_at = clock_timestamp(), enqueued_at = NULL, requeues = 0
                 WHERE id = ANY ($1) AND status = 'failed' AND discarded_at IS NULL",
                ids,
            )
            .execute(&mut *tx)
            .await?
            .rows_affected() as usize;
        }
        DeadQueue::ContactImport => {
            out.imports = sqlx::query_scalar!(
                "UPDATE contact_imports SET status = 'queued', error_message = NULL,
                    attempts = 0, lease_until = NULL, lease_token = NULL, discarded_at = NULL,
                    enqueued_at = clock_timestamp(), completed_at = NULL
                 WHERE id = ANY ($1) AND status = 'failed' AND discarded_at IS NULL
                 RETURNING id",
                ids,
            )
            .fetch_all(&mut *tx)
            .await?;
            out.count = out.imports.len();
        }
        // Only checks still dead: one the scheduler enqueued meanwhile is running.
        DeadQueue::SlaCheck => {
            out.count = sqlx::query!(
                "UPDATE sla_checks SET enqueued_at = NULL
                 WHERE id = ANY ($1) AND sla_check_dead(due_at, enqueued_at, $2)",
                ids,
                SLA_CHECK_DEAD_AFTER_SECS as f64,
            )
            .execute(&mut *tx)
            .await?
            .rows_affected() as usize;
        }
    }
    Ok(out)
}

/// What [`retry`] did.
#[derive(Debug, Default)]
pub struct Retried {
    pub count: usize,
    /// Imports queued again.
    pub imports: Vec<Uuid>,
}

/// Discards dead items: out of the dead list, their records kept (an SLA check, a timer only,
/// is deleted).
pub async fn discard(
    db: impl PgExecutor<'_>,
    queue: DeadQueue,
    ids: &[Uuid],
) -> Result<usize, sqlx::Error> {
    let done = match queue {
        DeadQueue::RecipientSend => sqlx::query!(
            "UPDATE broadcast_recipients SET discarded_at = clock_timestamp()
             WHERE id = ANY ($1) AND status = 'failed' AND discarded_at IS NULL",
            ids,
        )
        .execute(db)
        .await?
        .rows_affected(),
        DeadQueue::WebhookDelivery => sqlx::query!(
            "UPDATE webhook_deliveries SET discarded_at = clock_timestamp()
             WHERE id = ANY ($1) AND status = 'failed' AND discarded_at IS NULL",
            ids,
        )
        .execute(db)
        .await?
        .rows_affected(),
        DeadQueue::ContactImport => sqlx::query!(
            "UPDATE contact_imports SET discarded_at = clock_timestamp()
             WHERE id = ANY ($1) AND status = 'failed' AND discarded_at IS NULL",
            ids,
        )
        .execute(db)
        .await?
        .rows_affected(),
        // Only checks still dead: one the scheduler enqueued meanwhile is running.
        DeadQueue::SlaCheck => sqlx::query!(
            "DELETE FROM sla_checks
             WHERE id = ANY ($1) AND sla_check_dead(due_at, enqueued_at, $2)",
            ids,
            SLA_CHECK_DEAD_AFTER_SECS as f64,
        )
        .execute(db)
        .await?
        .rows_affected(),
    };
    Ok(done as usize)
}

/// A new action, as it is logged.
#[derive(Debug, Clone)]
pub struct NewAction<'a> {
    pub actor: &'a str,
    pub action: ActionKind,
    pub queue: Option<&'a str>,
    pub organization_id: Option<Uuid>,
    pub filter: serde_json::Value,
    pub status: ActionStatus,
    pub matched: i32,
    pub max_items: i32,
}

impl<'a> NewAction<'a> {
    /// A pause or a resume of a queue or of an organization: no filter, nothing matched. A
    /// running one (an organization's resume) goes on until it finds nothing left to do.
    pub fn switch(
        actor: &'a str,
        action: ActionKind,
        queue: Option<&'a str>,
        organization_id: Option<Uuid>,
        status: ActionStatus,
    ) -> Self {
        NewAction {
            actor,
            action,
            queue,
            organization_id,
            filter: serde_json::json!({}),
            status,
            matched: 0,
            max_items: if status == ActionStatus::Running {
                i32::MAX
            } else {
                0
            },
        }
    }
}

/// Logs an action; a running one is then advanced by [`take_running`].
pub async fn log_action(
    db: impl PgExecutor<'_>,
    a: &NewAction<'_>,
) -> Result<OperatorAction, sqlx::Error> {
    sqlx::query_as!(
        OperatorAction,
        r#"INSERT INTO operator_actions (id, actor, action, queue, organization_id, filter,
                status, matched, done, max_items, finished_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
                 CASE WHEN $7 = 'running' THEN 0 ELSE $8 END, $9,
                 CASE WHEN $7 = 'running' THEN NULL ELSE clock_timestamp() END)
         RETURNING id, actor, action AS "action: ActionKind", queue, organization_id,
            filter, status AS "status: ActionStatus", matched, done, error,
            created_at AS "created_at: Timestamp", finished_at AS "finished_at: Timestamp""#,
        Uuid::now_v7(),
        a.actor,
        a.action.as_str(),
        a.queue,
        a.organization_id,
        a.filter,
        a.status.as_str(),
        a.matched,
        a.max_items,
    )
    .fetch_one(db)
    .await
}

pub async fn action(
    db: impl PgExecutor<'_>,
    id: Uuid,
) -> Result<Option<OperatorAction>, sqlx::Error> {
    sqlx::query_as!(
        OperatorAction,
        r#"SELECT id, actor, action AS "action: ActionKind", queue, organization_id,
            filter, status AS "status: ActionStatus", matched, done, error,
            created_at AS "created_at: Timestamp", finished_at AS "finished_at: Timestamp"
         FROM operator_actions WHERE id = $1"#,
        id,
    )
    .fetch_optional(db)
    .await
}

/// The audit log, newest first, after `after`.
pub async fn audit(
    db: impl PgExecutor<'_>,
    after: Option<&Cursor>,
    limit: i64,
) -> Result<Vec<OperatorAction>, sqlx::Error> {
    let (at, id) = after.map(|c| (c.created_at, c.id)).unzip();
    sqlx::query_as!(
        OperatorAction,
        r#"SELECT id, actor, action AS "action: ActionKind", queue, organization_id,
            filter, status AS "status: ActionStatus", matched, done, error,
            created_at AS "created_at: Timestamp", finished_at AS "finished_at: Timestamp"
         FROM operator_actions
         WHERE $1::timestamptz IS NULL OR (created_at, id) < ($1, $2)
         ORDER BY created_at DESC, id DESC LIMIT $3"#,
        at as _,
        id,
        limit,
    )
    .fetch_all(db)
    .await
}

/// A running action to advance, leased to the caller for `lease_secs`: its queue, filter,
/// how far it got and how many it may still do.
#[derive(Debug)]
pub struct RunningAction {
    pub id: Uuid,
    pub action: ActionKind,
    pub organization_id: Option<Uuid>,
    /// A retry's or discard's filter.
    pub filter: Option<Json<DeadFilter>>,
    pub ids: Vec<Uuid>,
    pub created_at: Timestamp,
    pub cursor_at: Option<Timestamp>,
    pub cursor_id: Option<Uuid>,
    pub left: i32,
    /// The lease's end, which names it: a batch is recorded only under the lease it ran in.
    pub lease_until: Timestamp,
}

pub async fn take_running(
    db: impl PgExecutor<'_>,
    lease_secs: f64,
) -> Result<Option<RunningAction>, sqlx::Error> {
    sqlx::query_as!(
        RunningAction,
        r#"UPDATE operator_actions SET lease_until = clock_timestamp() + make_interval(secs => $1)
         WHERE id = (SELECT id FROM operator_actions
                     WHERE status = 'running'
                       AND (lease_until IS NULL OR lease_until < clock_timestamp())
                     ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
         RETURNING id, action AS "action: ActionKind", organization_id,
            CASE WHEN action IN ('retry', 'discard') THEN filter END
                AS "filter: Json<DeadFilter>",
            ids AS "ids!", created_at AS "created_at: Timestamp",
            cursor_at AS "cursor_at: Timestamp", cursor_id, max_items - done AS "left!",
            lease_until AS "lease_until!: Timestamp""#,
        lease_secs,
    )
    .fetch_optional(db)
    .await
}

/// Records a batch of a running action: `done` more, where it got to, and whether it ended.
/// Its lease is given back, so that the next tick of any worker takes its next batch. Nothing
/// is recorded when the lease `leased` ran out and another worker took the action: that worker
/// runs the batch again (retrying what is no longer dead, or discarding what is gone, does
/// nothing).
pub async fn advance(
    db: impl PgExecutor<'_>,
    id: Uuid,
    leased: Timestamp,
    done: i32,
    cursor: Option<&Cursor>,
    finished: bool,
) -> Result<(), sqlx::Error> {
    let (at, cid) = cursor.map(|c| (c.created_at, c.id)).unzip();
    sqlx::query!(
        "UPDATE operator_actions SET done = done + $2, failures = 0, error = NULL,
            cursor_at = coalesce($3, cursor_at), cursor_id = coalesce($4, cursor_id),
            status = CASE WHEN $5 THEN 'completed' ELSE status END,
            finished_at = CASE WHEN $5 THEN clock_timestamp() END,
            lease_until = NULL
         WHERE id = $1 AND status = 'running' AND lease_until = $6",
        id,
        done,
        at as _,
        cid,
        finished,
        leased as _,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Records a batch of a running action that failed: the error, and `failed` at `max_failures`
/// in a row (a batch that succeeds starts the count again). Its lease stands: the next try
/// is after it. Nothing is recorded when the lease `leased` ran out and another worker took
/// the action.
pub async fn batch_failed(
    db: impl PgExecutor<'_>,
    id: Uuid,
    leased: Timestamp,
    error: &str,
    max_failures: i16,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE operator_actions SET failures = failures + 1, error = left($2, 1000),
            status = CASE WHEN failures + 1 >= $3 THEN 'failed' ELSE status END,
            finished_at = CASE WHEN failures + 1 >= $3 THEN clock_timestamp() END
         WHERE id = $1 AND status = 'running' AND lease_until = $4",
        id,
        error,
        i32::from(max_failures),
        leased as _,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Names the items an action applies to (stored beside its filter).
pub async fn set_action_ids(
    db: impl PgExecutor<'_>,
    id: Uuid,
    ids: &[Uuid],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE operator_actions SET ids = $2 WHERE id = $1",
        id,
        ids
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Pauses or resumes an organization's sending; false if it does not exist or is already so.
pub async fn set_org_paused(
    db: impl PgExecutor<'_>,
    org: OrgId,
    paused: bool,
) -> Result<bool, sqlx::Error> {
    let changed = sqlx::query_scalar!(
        "UPDATE organizations SET sending_paused_at = CASE WHEN $2 THEN clock_timestamp() END
         WHERE id = $1 AND (sending_paused_at IS NOT NULL) <> $2 RETURNING id",
        org.uuid(),
        paused,
    )
    .fetch_optional(db)
    .await?;
    Ok(changed.is_some())
}

/// Gives up to `limit` of the recipients a pause held a time (`now`), unless the organization
/// is paused again: the ticker releases them as it releases any held recipient. Returns how
/// many.
pub async fn release_paused(
    db: impl PgExecutor<'_>,
    org: OrgId,
    now: Timestamp,
    limit: i64,
) -> Result<i64, sqlx::Error> {
    let n = sqlx::query!(
        "UPDATE broadcast_recipients SET hold_until = $2
         WHERE id IN (SELECT r.id FROM broadcast_recipients r
                      WHERE r.organization_id = $1 AND r.status = 'held' AND r.hold_until IS NULL
                      LIMIT $3 FOR UPDATE SKIP LOCKED)
           AND status = 'held' AND hold_until IS NULL
           AND NOT EXISTS (SELECT 1 FROM organizations
                           WHERE id = $1 AND sending_paused_at IS NOT NULL)",
        org.uuid(),
        now as _,
        limit,
    )
    .execute(db)
    .await?;
    Ok(n.rows_affected() as i64)
}

/// Organizations resumed in the last `within_secs` and not paused again: their held
/// recipients are swept again for a while ([`release_paused`]), for a job that read the pause
/// just before the resume and wrote its recipients held just after.
pub async fn recent_resumes(
    db: impl PgExecutor<'_>,
    within_secs: f64,
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT DISTINCT a.organization_id AS "organization_id!"
         FROM operator_actions a JOIN organizations o ON o.id = a.organization_id
         WHERE a.action = 'resume_organization'
           AND a.created_at > clock_timestamp() - make_interval(secs => $1)
           AND o.sending_paused_at IS NULL"#,
        within_secs,
    )
    .fetch_all(db)
    .await
}

/// Pauses a queue under `stored` or resumes it under any of `names` (the names a pause may
/// be stored under); false if it is already so.
pub async fn set_queue_paused(
    db: impl PgExecutor<'_>,
    stored: &str,
    names: &[&str],
    paused: bool,
    by: &str,
) -> Result<bool, sqlx::Error> {
    let n = if paused {
        sqlx::query!(
            "INSERT INTO paused_queues (queue, paused_by)
             SELECT $1, $2 WHERE NOT EXISTS (SELECT 1 FROM paused_queues WHERE queue = ANY($3))
             ON CONFLICT DO NOTHING",
            stored,
            by,
            &names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
        )
        .execute(db)
        .await?
    } else {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        sqlx::query!("DELETE FROM paused_queues WHERE queue = ANY($1)", &names)
            .execute(db)
            .await?
    };
    Ok(n.rows_affected() >= 1)
}

pub async fn paused_queues(db: impl PgExecutor<'_>) -> Result<Vec<PausedQueue>, sqlx::Error> {
    sqlx::query_as!(
        PausedQueue,
        r#"SELECT queue, paused_at AS "paused_at: Timestamp", paused_by
         FROM paused_queues ORDER BY queue"#
    )
    .fetch_all(db)
    .await
}

/// Recipients a pause holds counted, at most, per organization.
pub const HELD_COUNTED: i64 = 100_000;

/// Organizations paused (at most `limit`), with the recipients their pause holds (counted up
/// to [`HELD_COUNTED`]).
pub async fn paused_organizations(
    db: impl PgExecutor<'_>,
    limit: i64,
) -> Result<Vec<PausedOrganization>, sqlx::Error> {
    sqlx::query_as!(
        PausedOrganization,
        r#"SELECT o.id AS organization_id, o.name,
            o.sending_paused_at AS "paused_at!: Timestamp",
            (SELECT count(*) FROM (
                SELECT 1 FROM broadcast_recipients r
                WHERE r.organization_id = o.id AND r.status = 'held' AND r.hold_until IS NULL
                LIMIT $2) h) AS "held_recipients!"
         FROM organizations o WHERE o.sending_paused_at IS NOT NULL
         ORDER BY o.sending_paused_at DESC LIMIT $1"#,
        limit,
        HELD_COUNTED,
    )
    .fetch_all(db)
    .await
}

/// The organizations with the most work waiting (recipients of their active broadcasts not
/// yet sent or held, webhook deliveries waiting), largest first. Waiting webhook deliveries
/// are counted among the first [`WEBHOOKS_COUNTED`] only: a page refreshed every few seconds
/// must not scan millions.
pub async fn top_backlogs(
    db: impl PgExecutor<'_>,
    limit: i64,
) -> Result<Vec<OrgBacklog>, sqlx::Error> {
    sqlx::query_as!(
        OrgBacklog,
        r#"WITH r AS (
            SELECT b.organization_id, sum(k.pending)::int8 AS pending, sum(k.held)::int8 AS held
            FROM broadcasts b JOIN broadcast_totals k ON k.broadcast_id = b.id
            WHERE b.status IN ('queued', 'sending', 'paused')
            GROUP BY b.organization_id),
         w AS (
            SELECT organization_id, count(*) AS pending FROM (
                SELECT organization_id FROM webhook_deliveries WHERE status = 'pending'
                LIMIT $2) d
            GROUP BY organization_id),
         t AS (
            SELECT coalesce(r.organization_id, w.organization_id) AS organization_id,
                coalesce(r.pending, 0) AS pending, coalesce(r.held, 0) AS held,
                coalesce(w.pending, 0) AS webhooks
            FROM r FULL JOIN w ON w.organization_id = r.organization_id)
         SELECT t.organization_id AS "organization_id!", o.name,
            t.pending AS "pending_recipients!", t.held AS "held_recipients!",
            t.webhooks AS "pending_webhook_deliveries!",
            o.sending_paused_at IS NOT NULL AS "sending_paused!"
         FROM t JOIN organizations o ON o.id = t.organization_id
         WHERE t.pending + t.held + t.webhooks > 0
         ORDER BY t.pending + t.held + t.webhooks DESC, t.organization_id LIMIT $1"#,
        limit,
        WEBHOOKS_COUNTED,
    )
    .fetch_all(db)
    .await
}

/// Waiting webhook deliveries read, at most, for [`top_backlogs`].
pub const WEBHOOKS_COUNTED: i64 = 100_000;

/// The operator key's name for this hash, unless unknown or revoked.
pub async fn operator_named(
    db: impl PgExecutor<'_>,
    hash: &[u8],
) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT name FROM operator_keys WHERE key_hash = $1 AND revoked_at IS NULL",
        hash,
    )
    .fetch_optional(db)
    .await
}

/// Makes an operator key; false when one of that name exists.
pub async fn insert_operator_key(
    db: impl PgExecutor<'_>,
    name: &str,
    hash: &[u8],
) -> Result<bool, sqlx::Error> {
    let n = sqlx::query!(
        "INSERT INTO operator_keys (id, name, key_hash) VALUES ($1, $2, $3)
         ON CONFLICT (name) DO NOTHING",
        Uuid::now_v7(),
        name,
        hash,
    )
    .execute(db)
    .await?;
    Ok(n.rows_affected() == 1)
}

/// Revokes an operator key by name; false when there is none to revoke.
pub async fn revoke_operator_key(db: impl PgExecutor<'_>, name: &str) -> Result<bool, sqlx::Error> {
    let n = sqlx::query!(
        "UPDATE operator_keys SET revoked_at = clock_timestamp()
         WHERE name = $1 AND revoked_at IS NULL",
        name,
    )
    .execute(db)
    .await?;
    Ok(n.rows_affected() == 1)
}

/// Whether an organization exists.
pub async fn org_exists(db: impl PgExecutor<'_>, org: OrgId) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query_scalar!(
        "SELECT 1 AS one FROM organizations WHERE id = $1",
        org.uuid()
    )
    .fetch_optional(db)
    .await?
    .is_some())
}

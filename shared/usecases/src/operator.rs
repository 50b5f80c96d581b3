//! Operator control, for the operator API and the CLI alike: the queues and the
//! largest backlogs, dead work, retries and discards (run by the workers' operator loop in
//! batches, with progress), pauses, and the audit log every action is written to.

use parley_db as db;
use parley_db::operator::NewAction;
use parley_domain::operator::{
    ActionKind, ActionStatus, DeadAction, DeadFilter, DeadItem, DeadQueue, MATCHED_COUNTED,
    OperatorAction, Pauses, QueueOverview, QueuesOverview,
};
use parley_jobs::QueueName;
use parley_types::error::AppError;
use parley_types::ids::OrgId;
use parley_types::list::Cursor;
use uuid::Uuid;

use crate::{Ctx, Result, found};
pub use parley_db::operator::{DeadScope, RunningAction};
pub use parley_domain::operator::PausedQueue;
use parley_types::time::Timestamp;

/// Organizations shown in the backlog and pause lists, at most.
pub const TOP_ORGANIZATIONS: i64 = 20;
/// Dead items a page holds at most.
pub const MAX_PAGE: i64 = 100;

fn redis(err: impl std::fmt::Display) -> AppError {
    AppError::ServiceUnavailable(format!("Redis did not answer: {err}"))
}

/// Every queue's depth, activity and pause, and the organizations with the most waiting work.
pub async fn queues(ctx: Ctx<'_>) -> Result<QueuesOverview> {
    let paused: Vec<QueueName> = db::operator::paused_queues(ctx.pool)
        .await?
        .iter()
        .filter_map(|p| QueueName::parse(&p.queue))
        .collect();
    let mut queues = Vec::with_capacity(QueueName::ALL.len());
    for queue in QueueName::ALL {
        let depth = ctx.jobs.depth(*queue).await.map_err(redis)?;
        let activity = ctx.jobs.activity(*queue).await.map_err(redis)?;
        queues.push(QueueOverview {
            name: queue.as_str().to_owned(),
            ready: depth.ready,
            parked: depth.parked,
            scheduled: depth.scheduled,
            in_flight: activity.in_flight,
            oldest_ready_seconds: depth.oldest_age.unwrap_or_default().as_secs_f64(),
            consumers: activity.consumers,
            jobs_per_second: activity.jobs_per_second,
            items_per_second: activity.items_per_second,
            paused: paused.contains(queue),
        });
    }
    Ok(QueuesOverview {
        queues,
        top_organizations: db::operator::top_backlogs(ctx.pool, TOP_ORGANIZATIONS).await?,
    })
}

/// A page of dead work, newest first, and the cursor of the next page (none at the end).
pub async fn dead(
    ctx: Ctx<'_>,
    filter: &DeadFilter,
    after: Option<Cursor>,
    page_size: i64,
) -> Result<(Vec<DeadItem>, Option<Cursor>)> {
    let queue = filter.checked()?;
    let size = page_size.clamp(1, MAX_PAGE);
    let scope = DeadScope {
        after,
        ..Default::default()
    };
    let mut items = db::operator::dead(ctx.pool, queue, filter, &scope, size + 1).await?;
    let next = if items.len() as i64 > size {
        items.truncate(size as usize);
        items.last().map(|i| Cursor {
            created_at: i.failed_at,
            id: i.id,
        })
    } else {
        None
    };
    Ok((items, next))
}

/// Starts a retry or a discard of what `req` selects: logged at once with what it matches
/// now (counted up to 10,000), then run by the workers' operator loop a batch at a time; its progress
/// is the action's `done`.
pub async fn act(
    ctx: Ctx<'_>,
    actor: &str,
    kind: ActionKind,
    req: &DeadAction,
) -> Result<OperatorAction> {
    debug_assert!(matches!(kind, ActionKind::Retry | ActionKind::Discard));
    let queue = req.filter.checked()?;
    let max_items = req.max_items()?;
    let scope = DeadScope {
        ids: &req.ids,
        ..Default::default()
    };
    let counted = max_items.min(MATCHED_COUNTED);
    let matched =
        db::operator::dead(ctx.pool, queue, &req.filter, &scope, i64::from(counted)).await?;
    let mut tx = ctx.pool.begin().await?;
    let action = db::operator::log_action(
        &mut *tx,
        &NewAction {
            actor,
            action: kind,
            queue: Some(queue.as_str()),
            organization_id: req.filter.organization_id,
            filter: serde_json::to_value(&req.filter).map_err(|e| AppError::Internal(e.into()))?,
            status: if matched.is_empty() {
                ActionStatus::Completed
            } else {
                ActionStatus::Running
            },
            matched: matched.len() as i32,
            max_items: max_items as i32,
        },
    )
    .await?;
    if !req.ids.is_empty() {
        db::operator::set_action_ids(&mut *tx, action.id, &req.ids).await?;
    }
    tx.commit().await?;
    Ok(action)
}

/// Pauses or resumes one organization's sending. Paused, its recipients are held as their
/// jobs come (`held`, no `holdUntil`), `high` ones too; resumed, the held ones are released
/// by the workers (the action runs until all are). 404 for an unknown organization,
/// 409 when it is already so.
pub async fn set_org_paused(
    ctx: Ctx<'_>,
    actor: &str,
    org: OrgId,
    paused: bool,
) -> Result<OperatorAction> {
    let mut tx = ctx.pool.begin().await?;
    if !db::operator::org_exists(&mut *tx, org).await? {
        return Err(AppError::NotFound.into());
    }
    if !db::operator::set_org_paused(&mut *tx, org, paused).await? {
        return Err(AppError::invalid_state(if paused {
            "the organization's sending is already paused"
        } else {
            "the organization's sending is not paused"
        })
        .into());
    }
    let (kind, status) = if paused {
        (ActionKind::PauseOrganization, ActionStatus::Completed)
    } else {
        // A resume runs until every held recipient is released.
        (ActionKind::ResumeOrganization, ActionStatus::Running)
    };
    let action = db::operator::log_action(
        &mut *tx,
        &NewAction::switch(actor, kind, None, Some(org.uuid()), status),
    )
    .await?;
    tx.commit().await?;
    Ok(action)
}

/// Pauses or resumes a queue: its workers stop taking its jobs (those running finish), which
/// wait in Redis until it is resumed. 422 for an unknown queue, 409 when already so.
pub async fn set_queue_paused(
    ctx: Ctx<'_>,
    actor: &str,
    queue: &str,
    paused: bool,
) -> Result<OperatorAction> {
    let Some(queue) = QueueName::parse(queue) else {
        return Err(AppError::validation(
            "queue",
            "invalid_choice",
            "one of broadcast-dispatch, recipient-send, webhook-delivery, sla-check, contact-import",
        )
        .into());
    };
    let mut tx = ctx.pool.begin().await?;
    let stored = queue.shared_name();
    if !db::operator::set_queue_paused(&mut *tx, stored, &queue.names(), paused, actor).await? {
        return Err(AppError::invalid_state(if paused {
            "the queue is already paused"
        } else {
            "the queue is not paused"
        })
        .into());
    }
    let kind = if paused {
        ActionKind::PauseQueue
    } else {
        ActionKind::ResumeQueue
    };
    let action = db::operator::log_action(
        &mut *tx,
        &NewAction::switch(
            actor,
            kind,
            Some(queue.as_str()),
            None,
            ActionStatus::Completed,
        ),
    )
    .await?;
    tx.commit().await?;
    Ok(action)
}

/// Sends dead items of `queue` again (a batch of an operator's retry; recipients go through
/// [`crate::broadcasts::retry_recipients`]): back to waiting in one transaction, then the
/// imports among them enqueued (one lost between the two is found by the reconciler).
/// Returns how many.
pub async fn retry_dead(ctx: Ctx<'_>, queue: DeadQueue, ids: &[Uuid]) -> Result<usize> {
    let mut tx = ctx.pool.begin().await?;
    let retried = db::operator::retry(&mut tx, queue, ids).await?;
    tx.commit().await?;
    for import in retried.imports {
        ctx.jobs.import_contacts(import).await.map_err(redis)?;
    }
    Ok(retried.count)
}

/// What is paused now.
pub async fn pauses(ctx: Ctx<'_>) -> Result<Pauses> {
    let mut queues = db::operator::paused_queues(ctx.pool).await?;
    // Under its name, whichever name it is stored under.
    for q in &mut queues {
        if let Some(queue) = QueueName::parse(&q.queue) {
            q.queue = queue.as_str().to_owned();
        }
    }
    Ok(Pauses {
        queues,
        organizations: db::operator::paused_organizations(ctx.pool, TOP_ORGANIZATIONS).await?,
    })
}

/// A page of the audit log, newest first, and the next page's cursor.
pub async fn audit(
    ctx: Ctx<'_>,
    after: Option<Cursor>,
    page_size: i64,
) -> Result<(Vec<OperatorAction>, Option<Cursor>)> {
    let size = page_size.clamp(1, MAX_PAGE);
    let mut rows = db::operator::audit(ctx.pool, after.as_ref(), size + 1).await?;
    let next = if rows.len() as i64 > size {
        rows.truncate(size as usize);
        rows.last().map(|a| Cursor {
            created_at: a.created_at,
            id: a.id,
        })
    } else {
        None
    };
    Ok((rows, next))
}

// The worker's steps of the operator's actions and pauses: single statements, each through to
// its namesake in `parley_db::operator`, whose doc says what it does.

pub async fn paused_queues(ctx: Ctx<'_>) -> std::result::Result<Vec<PausedQueue>, sqlx::Error> {
    db::operator::paused_queues(ctx.pool).await
}

pub async fn recent_resumes(
    ctx: Ctx<'_>,
    within_secs: f64,
) -> std::result::Result<Vec<Uuid>, sqlx::Error> {
    db::operator::recent_resumes(ctx.pool, within_secs).await
}

pub async fn release_paused(
    ctx: Ctx<'_>,
    org: OrgId,
    now: Timestamp,
    limit: i64,
) -> std::result::Result<i64, sqlx::Error> {
    db::operator::release_paused(ctx.pool, org, now, limit).await
}

pub async fn take_running(
    ctx: Ctx<'_>,
    lease_secs: f64,
) -> std::result::Result<Option<RunningAction>, sqlx::Error> {
    db::operator::take_running(ctx.pool, lease_secs).await
}

pub async fn batch_failed(
    ctx: Ctx<'_>,
    id: Uuid,
    leased: Timestamp,
    error: &str,
    max_failures: i16,
) -> std::result::Result<(), sqlx::Error> {
    db::operator::batch_failed(ctx.pool, id, leased, error, max_failures).await
}

pub async fn dead_items(
    ctx: Ctx<'_>,
    queue: DeadQueue,
    f: &DeadFilter,
    scope: &DeadScope<'_>,
    limit: i64,
) -> std::result::Result<Vec<DeadItem>, sqlx::Error> {
    db::operator::dead(ctx.pool, queue, f, scope, limit).await
}

pub async fn discard(
    ctx: Ctx<'_>,
    queue: DeadQueue,
    ids: &[Uuid],
) -> std::result::Result<usize, sqlx::Error> {
    db::operator::discard(ctx.pool, queue, ids).await
}

pub async fn record_batch(
    ctx: Ctx<'_>,
    id: Uuid,
    leased: Timestamp,
    done: i32,
    cursor: Option<&Cursor>,
    finished: bool,
) -> std::result::Result<(), sqlx::Error> {
    db::operator::advance(ctx.pool, id, leased, done, cursor, finished).await
}

/// An operator action with its progress.
pub async fn action(ctx: Ctx<'_>, id: Uuid) -> Result<OperatorAction> {
    found(db::operator::action(ctx.pool, id).await?)
}

/// The operator key's name for this hash, unless unknown or revoked.
pub async fn operator_named(ctx: Ctx<'_>, hash: &[u8]) -> Result<Option<String>> {
    Ok(db::operator::operator_named(ctx.pool, hash).await?)
}

/// Makes an operator key; false when one of that name exists.
pub async fn create_operator_key(ctx: Ctx<'_>, name: &str, hash: &[u8]) -> Result<bool> {
    Ok(db::operator::insert_operator_key(ctx.pool, name, hash).await?)
}

/// Revokes an operator key by name; false when there is none to revoke.
pub async fn revoke_operator_key(ctx: Ctx<'_>, name: &str) -> Result<bool> {
    Ok(db::operator::revoke_operator_key(ctx.pool, name).await?)
}

//! Operator control in the worker (docs/operations.md, "Operator control"): the queues an
//! operator paused, read every few ticks (a paused queue's consumer stops taking jobs:
//! `crate::consumers`), and the running retries, discards and resumes, advanced a batch a
//! tick by whichever worker takes the action's lease.

use parley_usecases::operator::{self as usecase, DeadScope};
use std::collections::HashMap;

use parley_domain::operator::{ActionKind, DeadFilter, DeadItem, DeadQueue};
use parley_jobs::QueueName;
use parley_types::ids::{BroadcastId, OrgId};
use parley_types::list::Cursor;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::periodic::{self, Pass, Periodic};
use crate::state::WorkerState;

/// Items a batch of an action takes.
const BATCH: i64 = 1_000;
/// How long a worker holds an action while it runs a batch of it.
const LEASE_SECS: f64 = 30.0;
/// Ticks between two reads of the paused queues.
const PAUSES_EVERY: u64 = 4;
/// Ticks between two sweeps of recently resumed organizations' held recipients.
const SWEEP_EVERY: u64 = 40;
/// How long after a resume its organization is swept.
const SWEEP_FOR_SECS: f64 = 3600.0;

pub async fn run(ctx: WorkerState, shutdown: CancellationToken) {
    periodic::run(ctx.settings().tick_interval, shutdown, Operator(ctx)).await
}

struct Operator(WorkerState);

impl Periodic for Operator {
    const TASK: &'static str = "operator";

    async fn pass(&mut self, n: u64, pass: &mut Pass) {
        let ctx = &self.0;
        if n.is_multiple_of(PAUSES_EVERY) {
            let read = usecase::paused_queues(ctx.use_cases());
            if let Some(rows) = pass.step("read_pauses", async { Ok(read.await?) }).await {
                ctx.paused.set(
                    rows.iter()
                        .filter_map(|p| QueueName::parse(&p.queue))
                        .collect(),
                );
            }
        }
        pass.step("advance_action", advance(ctx)).await;
        if n.is_multiple_of(SWEEP_EVERY) {
            pass.step("sweep_resumed", sweep_resumed(ctx)).await;
        }
    }
}

/// A job that read an organization's pause just before its resume writes its recipients held
/// just after, and a resume's batches skip rows locked at that moment: for an hour after a
/// resume, its organization's held-by-pause recipients are released again (one batch each).
async fn sweep_resumed(ctx: &WorkerState) -> anyhow::Result<()> {
    for org in usecase::recent_resumes(ctx.use_cases(), SWEEP_FOR_SECS).await? {
        let n = usecase::release_paused(ctx.use_cases(), OrgId::from(org), ctx.clock.now(), BATCH)
            .await?;
        if n > 0 {
            tracing::info!(organization_id = %org, released = n, "held recipients of a resumed organization released");
        }
    }
    Ok(())
}

/// Retries failed recipients as a tenant's `retry-failed` does, broadcast by broadcast (under
/// its lock, from the states that allow it; then its dispatch enqueues them). Those whose
/// outcome is uncertain (`attempts_exhausted`, `timeout`) only when the filter names the code.
async fn retry_recipients(
    ctx: &WorkerState,
    filter: &DeadFilter,
    items: &[DeadItem],
) -> anyhow::Result<usize> {
    let uncertain_too = filter
        .error_code
        .as_deref()
        .is_some_and(|c| parley_usecases::broadcasts::UNCERTAIN_CODES.contains(&c));
    let mut by_broadcast: HashMap<(Uuid, Uuid), Vec<Uuid>> = HashMap::new();
    for item in items {
        if let Some(broadcast) = item.broadcast_id {
            by_broadcast
                .entry((item.organization_id, broadcast))
                .or_default()
                .push(item.id);
        }
    }
    let usecases = ctx.use_cases();
    let mut done = 0;
    for ((org, broadcast), ids) in by_broadcast {
        done += parley_usecases::broadcasts::retry_recipients(
            usecases,
            OrgId::from(org),
            BroadcastId::from(broadcast),
            &ids,
            uncertain_too,
        )
        .await
        .map_err(|e| anyhow::anyhow!("{}", e.0))?;
    }
    Ok(done as usize)
}

/// Runs one batch of the oldest running action whose lease is free. A batch that fails is
/// tried again after the lease; [`MAX_FAILURES`] in a row fail the action (its `error` says
/// why), so that no action loops for ever.
async fn advance(ctx: &WorkerState) -> anyhow::Result<()> {
    let Some(a) = usecase::take_running(ctx.use_cases(), LEASE_SECS).await? else {
        return Ok(());
    };
    if let Err(err) = run_batch(ctx, &a).await {
        let error = format!("{err:#}");
        usecase::batch_failed(ctx.use_cases(), a.id, a.lease_until, &error, MAX_FAILURES).await?;
        anyhow::bail!("action {}: {error}", a.id);
    }
    Ok(())
}

/// Batches of an action that may fail in a row before it is `failed`.
pub const MAX_FAILURES: i16 = 5;

async fn run_batch(ctx: &WorkerState, a: &usecase::RunningAction) -> anyhow::Result<()> {
    let limit = BATCH.min(i64::from(a.left.max(0)));
    let (done, cursor, finished) = match (a.action, &a.filter, a.organization_id) {
        (ActionKind::Retry | ActionKind::Discard, Some(filter), _) if limit > 0 => {
            let queue = filter.queue;
            let scope = DeadScope {
                after: a
                    .cursor_at
                    .zip(a.cursor_id)
                    .map(|(created_at, id)| Cursor { created_at, id }),
                ids: &a.ids,
                until: Some(a.created_at),
            };
            let items = usecase::dead_items(ctx.use_cases(), queue, filter, &scope, limit).await?;
            let ids: Vec<uuid::Uuid> = items.iter().map(|i| i.id).collect();
            let done = match (a.action, queue) {
                (ActionKind::Retry, DeadQueue::RecipientSend) => {
                    retry_recipients(ctx, filter, &items).await?
                }
                (ActionKind::Retry, _) => {
                    parley_usecases::operator::retry_dead(ctx.use_cases(), queue, &ids)
                        .await
                        .map_err(|e| anyhow::anyhow!("{}", e.0))?
                }
                _ => usecase::discard(ctx.use_cases(), queue, &ids).await?,
            };
            let cursor = items.last().map(|i| Cursor {
                created_at: i.failed_at,
                id: i.id,
            });
            let finished = (items.len() as i64) < limit || i64::from(a.left) <= items.len() as i64;
            (done as i32, cursor, finished)
        }
        (ActionKind::ResumeOrganization, _, Some(org)) => {
            let n =
                usecase::release_paused(ctx.use_cases(), OrgId::from(org), ctx.clock.now(), BATCH)
                    .await?;
            (n as i32, None, n < BATCH)
        }
        _ => (0, None, true),
    };
    usecase::record_batch(
        ctx.use_cases(),
        a.id,
        a.lease_until,
        done,
        cursor.as_ref(),
        finished,
    )
    .await?;
    if finished {
        tracing::info!(action_id = %a.id, action = a.action.as_str(), "operator action completed");
    }
    Ok(())
}

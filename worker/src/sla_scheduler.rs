//! Moves SLA checks from Postgres into the `sla-check` queue when their time comes: every
//! tick, in batches, and only while the queue is short, so a hundred thousand deadlines
//! falling due at once (or after an outage) reach the queue at the pace the workers take
//! them. Checks enqueued long ago and not run (their job was lost with Redis or a worker) are
//! enqueued again once the queue has drained. Any number of workers may run it: rows are
//! taken with `FOR UPDATE SKIP LOCKED`.

use parley_jobs::{QueueName, SLA_BATCH};
use parley_types::metric_names::{RECONCILED, SLA_BACKLOG};
use parley_usecases::sla;
use tokio_util::sync::CancellationToken;

use crate::periodic::{self, Pass, Periodic};
use crate::reporter::Family;
use crate::state::WorkerState;

/// Checks taken from Postgres per statement.
const BATCH: i64 = 1_000;
/// Jobs waiting in the queue above which the scheduler waits for the workers.
const MAX_READY_JOBS: u64 = 32;
/// Lost checks are looked for every this many ticks.
const RECONCILE_EVERY: u64 = 8;

/// Runs the scheduler until `shutdown`.
pub async fn run(ctx: WorkerState, shutdown: CancellationToken) {
    periodic::run(ctx.settings().tick_interval, shutdown, Scheduler(ctx)).await
}

struct Scheduler(WorkerState);

impl Periodic for Scheduler {
    const TASK: &'static str = "sla_scheduler";

    async fn pass(&mut self, n: u64, pass: &mut Pass) {
        let reconcile = n.is_multiple_of(RECONCILE_EVERY);
        pass.step("enqueue_due", enqueue_due(&self.0, reconcile))
            .await;
    }
}

async fn enqueue_due(ctx: &WorkerState, reconcile: bool) -> anyhow::Result<()> {
    let queue = QueueName::SlaCheck;
    let mut ready = ctx.jobs.depth(queue).await?.ready;
    while ready < MAX_READY_JOBS {
        let due = sla::take_due_checks(ctx.use_cases(), BATCH, None, ctx.clock.now()).await?;
        ctx.jobs.check_sla(&due).await?;
        ready += due.len().div_ceil(SLA_BATCH) as u64;
        // A pass gives each organization one job's worth at most: an organization alone with
        // a backlog fills the queue over several passes.
        if due.is_empty() {
            break;
        }
    }
    if reconcile {
        if ready == 0 {
            let lost = sla::take_due_checks(
                ctx.use_cases(),
                BATCH,
                Some(ctx.settings().reconcile_after),
                ctx.clock.now(),
            )
            .await?;
            if !lost.is_empty() {
                metrics::counter!(RECONCILED, "kind" => "sla_check").increment(lost.len() as u64);
                ctx.jobs.check_sla(&lost).await?;
            }
        }
        let backlog = if ctx.reporter.reports(Family::Sla).await {
            sla::checks_backlog(ctx.use_cases()).await?
        } else {
            0
        };
        metrics::gauge!(SLA_BACKLOG).set(backlog as f64);
    }
    Ok(())
}

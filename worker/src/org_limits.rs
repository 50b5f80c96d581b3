//! Limits an operator set for single organizations (`parley-api org limits`), read from
//! Postgres every 20 ticks (5 s by default) by every worker: the numbers of send and
//! webhook slots go to Redis, where the lanes' refill reads them, and the rates to this
//! worker's rate limiter. A change takes effect within that period; a Redis that lost them
//! gets them back at the next pass.

use parley_jobs::QueueName;
use parley_usecases::org_limits::{self, OrgLimits};
use tokio_util::sync::CancellationToken;

use crate::periodic::{self, Pass, Periodic};
use crate::state::WorkerState;

/// Ticks between two reads.
const EVERY_TICKS: u32 = 20;
/// Organizations with limits of their own read at most (the most recently changed): a
/// deployment sets them for its few exceptional organizations, not for every one.
const MAX_ORGS: i64 = 10_000;

pub async fn run(ctx: WorkerState, shutdown: CancellationToken) {
    let period = ctx.settings().tick_interval * EVERY_TICKS;
    periodic::run(period, shutdown, Sync(ctx)).await
}

struct Sync(WorkerState);

impl Periodic for Sync {
    const TASK: &'static str = "org_limits";

    async fn pass(&mut self, _: u64, pass: &mut Pass) {
        pass.step("sync", sync(&self.0)).await;
    }
}

/// Reads the limits and applies them.
pub async fn sync(ctx: &WorkerState) -> anyhow::Result<()> {
    let all = org_limits::all(ctx.use_cases(), MAX_ORGS).await?;
    let slots = |pick: fn(&OrgLimits) -> Option<i32>| -> Vec<(uuid::Uuid, usize)> {
        all.iter()
            .filter_map(|l| Some((l.organization_id, usize::try_from(pick(l)?).ok()?)))
            .collect()
    };
    ctx.jobs
        .set_org_slots(QueueName::RecipientSend, &slots(|l| l.send_jobs))
        .await?;
    ctx.jobs
        .set_org_slots(QueueName::WebhookDelivery, &slots(|l| l.webhook_jobs))
        .await?;
    ctx.limiter.set_org_rates(
        all.iter()
            .flat_map(|l| {
                l.rates.iter().filter_map(|(channel, rate)| {
                    Some(((l.organization_id, *channel), u32::try_from(*rate).ok()?))
                })
            })
            .collect(),
    );
    Ok(())
}

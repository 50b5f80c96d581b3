//! The broadcast-dispatch job: claims a broadcast (one dispatcher at a time, by lease), writes
//! its recipients in slices of the audience and parks them in send jobs in the
//! broadcast's lane, without ever holding the whole audience in memory. After a resume it
//! enqueues every pending recipient. A job writes slices for [`TURN`] at most, then gives the
//! broadcast to a new job at the queue's back, so a large audience does not keep a dispatch
//! slot while other organizations' broadcasts wait for one.

use std::time::Duration;

use parley_config::Config;
use parley_domain::broadcasts::{BroadcastStatus, SendPriority};
use parley_jobs::{DispatchBroadcast, Lane};
use parley_types::ids::OrgId;
use parley_usecases::sending;

use crate::job::{Backoff, Failure, Job, JobResult, RetryPolicy};
use crate::state::WorkerState;

/// Contacts turned into recipients by the first transaction: small, so sending starts soon.
const FIRST_SLICE: i32 = 2_000;
/// Each slice doubles up to this. Every slice reads the whole stored audience (Postgres reads
/// no part of an array alone), so fixed slices of 2,000 cost 50 reads of it at 100,000 contacts
/// and 500 at 1,000,000; growing ones 8 and 65.
const MAX_SLICE: i32 = 16_000;
/// A dispatcher's lease on a broadcast, renewed at every slice (one takes well under a second):
/// a dead dispatcher's broadcast is free again when its job comes back (after 10 s).
const LEASE: Duration = Duration::from_secs(10);
/// How long one job writes slices before it hands the rest of the fan-out to a new job.
const TURN: Duration = Duration::from_secs(1);

/// A failed or lost dispatch is found by the ticker once its lease ran out and enqueued again,
/// for as long as its broadcast is sending.
impl Job for DispatchBroadcast {
    const NAME: &'static str = "dispatch";

    fn retry_policy(_: &Config) -> RetryPolicy {
        RetryPolicy {
            retries: None,
            backoff: Backoff::Reconciled,
        }
    }

    /// None: its fan-out works in turns of [`TURN`], but a resume's requeue walks every
    /// pending recipient of the broadcast, and a dispatch dropped then would not come back
    /// (the reconciler finds a broadcast whose fan-out is done only through its recipients).
    fn timeout(_: &Config) -> Option<Duration> {
        None
    }

    fn span(&self) -> tracing::Span {
        tracing::info_span!("broadcast", broadcast_id = %self.broadcast_id)
    }

    async fn run(self, ctx: &WorkerState) -> JobResult {
        run(ctx, &self).await.map_err(Failure::of)
    }
}

async fn run(ctx: &WorkerState, job: &DispatchBroadcast) -> anyhow::Result<()> {
    let id = job.broadcast_id;
    let token = uuid::Uuid::now_v7();
    let per_org = ctx.settings().broadcasts_per_org;
    let Some(state) = sending::begin_dispatch(ctx.use_cases(), id, LEASE, token, per_org).await?
    else {
        return Ok(());
    };
    if state.ab_test {
        sending::capture_variants(ctx.use_cases(), id).await?;
    }
    let high = state.priority == SendPriority::High;
    let lane = Lane::of_broadcast(state.organization_id, id, high);
    let started = std::time::Instant::now();
    let result = async {
        let mut done = state.fanout_done;
        // A later turn starts at the largest slice: the audience is large.
        let mut size = if state.fanout_started {
            MAX_SLICE
        } else {
            FIRST_SLICE
        };
        while !done {
            if started.elapsed() >= TURN {
                return Ok(Turn::Over);
            }
            if sending::status(ctx.use_cases(), id).await? != Some(BroadcastStatus::Sending) {
                return Ok(Turn::Done);
            }
            let org = state.organization_id;
            let segment = state.segment_id.is_some();
            let slice =
                sending::fan_out(ctx.use_cases(), id, org, segment, size, LEASE, token).await?;
            let Some((recipients, finished)) = slice else {
                tracing::warn!("dispatch lease lost to another dispatcher; leaving the rest to it");
                return Ok(Turn::Done);
            };
            ctx.jobs.enqueue_sends(&lane, &recipients).await?;
            done = finished;
            size = (size * 2).min(MAX_SLICE);
        }
        if job.requeue {
            let mut after = None;
            loop {
                let ids = sending::take_pending(ctx.use_cases(), id, after, i64::from(FIRST_SLICE))
                    .await?;
                let Some(last) = ids.iter().max().copied() else {
                    break;
                };
                ctx.jobs.enqueue_sends(&lane, &ids).await?;
                after = Some(last);
            }
        }
        if let Some((status, org)) = sending::finish_if_done(ctx.use_cases(), id).await? {
            tracing::info!(broadcast_id = %id, %status, "broadcast ended");
            start_next(ctx, org).await?;
        }
        anyhow::Ok(Turn::Done)
    }
    .await;
    let handed_on = matches!(result, Ok(Turn::Over));
    sending::end_dispatch_turn(ctx.use_cases(), id, token, handed_on).await?;
    if let Turn::Over = result? {
        // The turn ended first, so that the next job takes the lease at once.
        ctx.jobs.dispatch(id, job.requeue).await?;
    }
    Ok(())
}

/// A broadcast of `org` ended: its broadcast queued longest, waiting for one of the
/// organization's sending spots (`PARLEY_BROADCASTS_PER_ORG`), starts now rather than at the
/// reconciler's next look.
#[tracing::instrument(skip(ctx), fields(organization_id = %org))]
pub async fn start_next(ctx: &WorkerState, org: OrgId) -> anyhow::Result<()> {
    if let Some(next) = sending::next_queued(ctx.use_cases(), org).await? {
        ctx.jobs.dispatch(next, false).await?;
    }
    Ok(())
}

/// How a dispatch job ended.
enum Turn {
    Done,
    /// Its turn ran out with the fan-out unfinished: a new job goes on.
    Over,
}

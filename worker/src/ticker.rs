//! The ticker every worker runs (any number may run it at once): it queues scheduled
//! broadcasts when their time comes, releases held recipients when theirs comes, wakes snoozed conversations, finds work whose job Redis lost and enqueues it again, ends
//! broadcasts whose last recipient was missed, and exports queue depths. The slower upkeep
//! (retention, the queues' vacuum) is `crate::maintenance`, on a loop of its own.
//! All timers live in Postgres; work moves into Redis in bounded batches.

use anyhow::Context as _;
use parley_domain::ab_tests::PickedBy;
use parley_jobs::{QueueName, SendRecipients};
use parley_types::ids::{BroadcastId, RecipientId};
use parley_types::time::Timestamp;
use parley_usecases::sending;
use tokio_util::sync::CancellationToken;

use crate::job::Job;
use crate::periodic::{self, Pass, Periodic};
use crate::reporter::Family;
use crate::state::WorkerState;
use parley_types::metric_names::{QUEUE_AGE, QUEUE_DEPTH, RECIPIENTS, RECONCILED};

/// Rows moved into Redis per pass, so a backlog never floods a queue at once.
const BATCH: i64 = 1_000;
/// Batches of held recipients released per tick, at most: 40,000 a second at the default tick.
const RELEASE_BATCHES: usize = 10;
/// Reconciliation runs every this many ticks.
const RECONCILE_EVERY: u64 = 4;

/// Runs the ticker until `shutdown`.
pub async fn run(ctx: WorkerState, shutdown: CancellationToken) {
    let ticker = Ticker {
        ctx: ctx.clone(),
        emptied_at: None,
    };
    periodic::run(ctx.settings().tick_interval, shutdown, ticker).await
}

/// How long reconciliation stays quick after Redis lost the deployment's keys.
const QUICK_FOR: std::time::Duration = std::time::Duration::from_secs(60);

struct Ticker {
    ctx: WorkerState,
    /// When Redis was last found emptied (and that time by Postgres' clock): for a claim lease after
    /// it reconciliation waits (the jobs still running take their claims back meanwhile), then
    /// until [`QUICK_FOR`] after it, work enqueued before it is presumed lost after a claim
    /// lease rather than after `PARLEY_RECONCILE_AFTER_SECS` (work enqueued since is in the
    /// new queue, and waits as usual).
    emptied_at: Option<(tokio::time::Instant, Timestamp)>,
}

impl Periodic for Ticker {
    const TASK: &'static str = "ticker";

    async fn pass(&mut self, n: u64, pass: &mut Pass) {
        let ctx = &self.ctx;
        pass.step("queue_due", queue_due(ctx)).await;
        // Jobs move from their lanes as jobs start and end; this pass covers a lane whose
        // producer failed to top the ready list up.
        for queue in [QueueName::RecipientSend, QueueName::WebhookDelivery] {
            let refilled = ctx.jobs.refill(queue);
            pass.step("refill", async { refilled.await.context(queue.as_str()) })
                .await;
        }
        if n.is_multiple_of(RECONCILE_EVERY) {
            if redis_emptied(ctx).await {
                tracing::warn!(
                    "Redis lost a queue of this deployment: lost work is enqueued again after a claim lease"
                );
                // By Postgres' clock, which the bound is compared with (the worker's, if
                // Postgres does not answer).
                let wall = sending::now(ctx.use_cases())
                    .await
                    .unwrap_or_else(|_| Timestamp::now());
                self.emptied_at = Some((tokio::time::Instant::now(), wall));
            }
            let lease = ctx.settings().claim_lease;
            // None: no reconciliation this pass; Some(quick): the quick window, if any.
            let window = match self.emptied_at.map(|(at, wall)| (at.elapsed(), wall)) {
                // Running jobs are still taking their claims back: none is presumed lost yet.
                Some((since, _)) if since < lease => None,
                Some((since, wall)) if since < QUICK_FOR => Some(Some((lease, wall))),
                _ => Some(None),
            };
            if let Some(quick) = window {
                pass.step("reconcile", reconcile(ctx, quick)).await;
            }
            export_depths(ctx).await;
        }
    }
}

async fn queue_due(ctx: &WorkerState) -> anyhow::Result<()> {
    let woken = parley_usecases::conversations::wake_snoozed(ctx.use_cases(), BATCH).await?;
    if woken > 0 {
        tracing::info!(woken, "snoozed conversations woken");
    }
    for id in sending::queue_due(ctx.use_cases(), BATCH).await? {
        tracing::info!(broadcast_id = %id, "scheduled broadcast queued");
        ctx.jobs.dispatch(id, false).await?;
    }
    // A/B tests whose wait ended: the winner goes to the rest.
    let usecases = ctx.use_cases();
    for (org, id) in sending::due_picks(ctx.use_cases(), ctx.clock.now(), BATCH).await? {
        let pick =
            parley_usecases::broadcasts::pick_variant(usecases, org, id, None, PickedBy::Auto);
        match pick.await {
            Ok(b) => {
                tracing::info!(broadcast_id = %id, winner = ?b.variant_name, "A/B winner picked")
            }
            // Picked meanwhile by the caller or another worker, or paused: nothing to do.
            Err(err) => tracing::debug!(broadcast_id = %id, %err, "A/B winner not picked"),
        }
    }
    // Held recipients whose time came (by the worker's clock, which tests move forward): up
    // to RELEASE_BATCHES batches a tick, so that one organization's zone coming due at once
    // (a million recipients at 09:00) is released faster than workers send, and another's
    // recipients due at the same time wait seconds behind it, not minutes.
    for _ in 0..RELEASE_BATCHES {
        let due = sending::release_held(ctx.use_cases(), ctx.clock.now(), BATCH).await?;
        let full = due.len() as i64 == BATCH;
        if !due.is_empty() {
            tracing::debug!(recipients = due.len(), "held recipients released");
            enqueue_recipients(ctx, due).await?;
        }
        if !full {
            break;
        }
    }
    Ok(())
}

/// Enqueues pending recipients, (broadcast, recipient), in their broadcasts' lanes.
pub(crate) async fn enqueue_recipients(
    ctx: &WorkerState,
    recipients: Vec<(BroadcastId, RecipientId)>,
) -> anyhow::Result<()> {
    let mut by_broadcast: std::collections::HashMap<BroadcastId, Vec<RecipientId>> =
        Default::default();
    for (broadcast, recipient) in recipients {
        by_broadcast.entry(broadcast).or_default().push(recipient);
    }
    let broadcasts: Vec<BroadcastId> = by_broadcast.keys().copied().collect();
    let lanes = sending::lanes(ctx.use_cases(), &broadcasts).await?;
    for (broadcast, recipients) in by_broadcast {
        let Some(lane) = lanes.get(&broadcast) else {
            continue;
        };
        let lane = parley_jobs::Lane::of_broadcast(lane.organization_id, broadcast, lane.high);
        ctx.jobs.enqueue_sends(&lane, &recipients).await?;
    }
    Ok(())
}

/// Work whose job is lost is enqueued again, under load too, at most [`BATCH`] rows per pass
/// so it cannot crowd out live work. Lost means: enqueued `PARLEY_RECONCILE_AFTER_SECS` (or,
/// in the `quick` window after Redis was found emptied, a claim lease, and before that moment)
/// before the oldest job still waiting in its queue was pushed, or that long ago when none
/// waits ([`parley_jobs::Jobs::lost_after`]: a job behind a long queue is late, not lost), and,
/// for a recipient, claimed by no job (a job that holds it is slow, not lost). Dispatches and
/// imports keep the quick wait for all their work: a second job for one takes its lease in
/// Postgres or leaves it to the job that holds it.
async fn reconcile(
    ctx: &WorkerState,
    quick: Option<(std::time::Duration, Timestamp)>,
) -> anyhow::Result<()> {
    let usual = ctx.settings().reconcile_after;
    let shortest = quick.map_or(usual, |(lease, _)| lease);
    // A head left by a lost lane would hold the relay's lost bound back for good.
    ctx.jobs.mend_lanes(QueueName::WebhookDelivery).await?;
    let after = |queue, wait| ctx.jobs.lost_after(queue, wait);
    let dispatch_after = after(QueueName::BroadcastDispatch, shortest).await?;
    for id in sending::stale_dispatches(ctx.use_cases(), dispatch_after, BATCH).await? {
        metrics::counter!(RECONCILED, "kind" => "dispatch").increment(1);
        ctx.jobs.dispatch(id, false).await?;
    }
    let import_after = after(QueueName::ContactImport, shortest).await?;
    for id in parley_usecases::imports::stale(ctx.use_cases(), import_after, BATCH).await? {
        metrics::counter!(RECONCILED, "kind" => "import").increment(1);
        ctx.jobs.import_contacts(id).await?;
    }
    let recipient_after = after(QueueName::RecipientSend, usual).await?;
    // Work behind its broadcast's waiting jobs (parked in its lane, or ready) is late, not
    // lost: each broadcast is bounded by its oldest waiting job.
    let waiting = ctx.jobs.waiting_since().await?;
    let at = |ms: i64| Timestamp(chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default());
    let oldest = waiting.since.iter().map(|(_, t)| *t).min();
    let mut bounds = sending::StaleBounds {
        after: recipient_after,
        before: None,
        waiting: (waiting.since.iter())
            .map(|(b, t)| (BroadcastId::from(*b), at(*t)))
            .collect(),
        waiting_else: oldest.filter(|_| waiting.truncated).map(at),
        wait: usual,
    };
    let mut ids: Vec<RecipientId> = sending::stale_recipients(ctx.use_cases(), &bounds, BATCH)
        .await?
        .into_iter()
        .map(|(_, id)| id)
        .collect();
    let mut requeue_after = recipient_after;
    if let Some((lease, emptied)) = quick {
        requeue_after = after(QueueName::RecipientSend, lease).await?;
        bounds.after = requeue_after;
        bounds.before = Some(emptied);
        bounds.wait = lease;
        let lost_with_redis = sending::stale_recipients(ctx.use_cases(), &bounds, BATCH).await?;
        ids.extend(lost_with_redis.into_iter().map(|(_, id)| id));
        ids.sort_unstable();
        ids.dedup();
    }
    let held = ctx.claims.held(&ids).await?;
    let lost: Vec<RecipientId> = ids.into_iter().filter(|id| !held.contains(id)).collect();
    let ceiling = SendRecipients::retry_policy(&ctx.config).requeue_ceiling();
    let stale = sending::requeue(ctx.use_cases(), &lost, requeue_after, ceiling).await?;
    crate::metrics::given_up("recipient", &stale.given_up);
    let stale = stale.requeued;
    if !stale.is_empty() {
        metrics::counter!(RECONCILED, "kind" => "recipient").increment(stale.len() as u64);
        enqueue_recipients(ctx, stale).await?;
    }
    let early = parley_usecases::receipts::apply_early(ctx.use_cases(), BATCH).await?;
    for (channel, status) in early.changed {
        metrics::counter!(RECIPIENTS, "channel" => channel.as_str(), "status" => status.as_str())
            .increment(1);
    }
    for id in sending::done_but_sending(ctx.use_cases(), BATCH).await? {
        if let Some((status, org)) =
            parley_usecases::sending::finish_if_done(ctx.use_cases(), id).await?
        {
            tracing::info!(broadcast_id = %id, %status, "broadcast ended by the reconciler");
            crate::dispatch::start_next(ctx, org).await?;
        }
    }
    Ok(())
}

/// Whether Redis lost any of this deployment's queues (a flush, a restart without
/// persistence, a failover to an empty replica, on a cluster of one queue's master only): the
/// marker beside a queue was absent ([`parley_jobs::Jobs::mark_present`]). Then the queue is
/// gone with it, and waiting `PARLEY_RECONCILE_AFTER_SECS` for lost jobs only delays them:
/// reconciliation waits one claim lease instead, enough for the jobs still running to take
/// their claims back (their heartbeat does, every third of a lease) so they are not taken
/// for lost; reconciliation pauses for that lease first. Also true at a deployment's very
/// first start: the quick wait applies only to work enqueued before, so that work enqueued
/// in the first minute (whose jobs wait in the new queue) is not taken for lost after a lease.
/// A queue whose marker could not be read is checked again next time (its marker is absent
/// still, if it was lost).
async fn redis_emptied(ctx: &WorkerState) -> bool {
    let mut emptied = false;
    for queue in QueueName::ALL {
        match ctx.jobs.mark_present(*queue).await {
            Ok(lost) => emptied |= lost,
            Err(err) => {
                tracing::warn!(%err, queue = queue.as_str(), "Redis not checked for a lost queue")
            }
        }
    }
    emptied
}

/// Exports the depth and age of every queue, when this worker reports them (0 otherwise: see
/// [`crate::reporter`]).
async fn export_depths(ctx: &WorkerState) {
    let reports = ctx.reporter.reports(Family::Queues).await;
    for queue in QueueName::ALL {
        let depth = if reports {
            match ctx.jobs.depth(*queue).await {
                Ok(depth) => depth,
                Err(err) => {
                    tracing::warn!(%err, queue = queue.as_str(), "queue depth not read");
                    continue;
                }
            }
        } else {
            Default::default()
        };
        metrics::gauge!(QUEUE_DEPTH, "queue" => queue.as_str(), "state" => "ready")
            .set(depth.ready as f64);
        metrics::gauge!(QUEUE_DEPTH, "queue" => queue.as_str(), "state" => "scheduled")
            .set(depth.scheduled as f64);
        if matches!(queue, QueueName::RecipientSend | QueueName::WebhookDelivery) {
            metrics::gauge!(QUEUE_DEPTH, "queue" => queue.as_str(), "state" => "parked")
                .set(depth.parked as f64);
        }
        metrics::gauge!(QUEUE_AGE, "queue" => queue.as_str())
            .set(depth.oldest_age.unwrap_or_default().as_secs_f64());
    }
}

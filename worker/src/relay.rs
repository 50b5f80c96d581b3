//! The outbox relay: turns committed events into deliveries and enqueues them, woken at once by
//! the events' `NOTIFY` (and every tick besides, in case a notification was missed), and moves
//! due retries from Postgres into the queue in bounded batches. Any number of workers may run
//! it; they share the rows through `FOR UPDATE SKIP LOCKED`.

use std::time::{Duration, Instant};

use parley_jobs::{DeliverWebhooks, QueueName};
use parley_types::metric_names::OUTBOX_BACKLOG;
use parley_usecases::webhook_deliveries;
use secrecy::ExposeSecret;
use sqlx::postgres::PgListener;
use tokio_util::sync::CancellationToken;

use crate::job::Job;
use crate::periodic::{self, Pass, Periodic};
use crate::reporter::Family;
use crate::state::WorkerState;

/// Events relayed, and due deliveries enqueued, per statement.
const BATCH: i64 = 1_000;
/// Recovery batches a pass takes at most (from the recoveries in turn).
const RECOVERIES_PER_PASS: usize = 4;

/// Runs the relay until `shutdown`.
pub async fn run(ctx: WorkerState, shutdown: CancellationToken) {
    let mut relay = Relay {
        listener: None,
        listen_again_at: Some(Instant::now()),
        last_gauge: None,
        ctx,
    };
    relay.listen_when_due().await;
    periodic::run(relay.ctx.settings().tick_interval, shutdown, relay).await
}

struct Relay {
    ctx: WorkerState,
    /// Wakes the relay on the events' `NOTIFY`; none while Postgres refuses to listen.
    listener: Option<PgListener>,
    /// Without a listener: when to try to listen again (at most once a second).
    listen_again_at: Option<Instant>,
    last_gauge: Option<Instant>,
}

impl Relay {
    /// Listens again once a second has passed since the listener was lost.
    async fn listen_when_due(&mut self) {
        if self.listener.is_some() || self.listen_again_at.is_none_or(|at| Instant::now() < at) {
            return;
        }
        self.listener = listen(&self.ctx).await;
        self.listen_again_at = self
            .listener
            .is_none()
            .then(|| Instant::now() + Duration::from_secs(1));
    }
}

impl Periodic for Relay {
    const TASK: &'static str = "relay";

    async fn woken(&mut self) {
        let Some(l) = self.listener.as_mut() else {
            return std::future::pending().await;
        };
        // A lost listener is dropped here (this future may be cancelled by the tick at any
        // await); the next passes listen again, a second later.
        if l.recv().await.is_err() {
            self.listener = None;
            self.listen_again_at = Some(Instant::now() + Duration::from_secs(1));
        }
    }

    async fn pass(&mut self, _: u64, pass: &mut Pass) {
        self.listen_when_due().await;
        let ctx = &self.ctx;
        // Notifications that arrived meanwhile are served by this pass.
        if let Some(l) = self.listener.as_mut() {
            while let Ok(Ok(_)) = tokio::time::timeout(Duration::ZERO, l.recv()).await {}
        }
        pass.step("relay_events", relay(ctx)).await;
        // Recoveries make failed deliveries due again, a few batches a pass, the recoveries
        // taking turns; the due path below feeds them to their endpoints a few at a time.
        for _ in 0..RECOVERIES_PER_PASS {
            let advanced = webhook_deliveries::advance_recoveries(ctx.use_cases(), BATCH);
            match pass
                .step("advance_recoveries", async { Ok(advanced.await?) })
                .await
            {
                Some(0) | None => break,
                Some(n) => tracing::info!(
                    deliveries = n,
                    "failed deliveries queued again by a recovery"
                ),
            }
        }
        pass.step("enqueue_due", enqueue_due(ctx)).await;
        if self
            .last_gauge
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1))
        {
            self.last_gauge = Some(Instant::now());
            if !ctx.reporter.reports(Family::Outbox).await {
                metrics::gauge!(OUTBOX_BACKLOG).set(0.0);
            } else if let Ok(n) = webhook_deliveries::outbox_backlog(ctx.use_cases()).await {
                metrics::gauge!(OUTBOX_BACKLOG).set(n as f64);
            }
        }
    }
}

async fn listen(ctx: &WorkerState) -> Option<PgListener> {
    // A session of its own, on PARLEY_DATABASE_SESSION_URL: a transaction pooler would hand
    // the LISTEN to a server connection other clients then share.
    let url = ctx.config.database_session_url.expose_secret();
    let mut listener = match PgListener::connect(url).await {
        Ok(l) => l,
        Err(err) => {
            tracing::warn!(%err, "outbox notifications unavailable; relaying on the tick");
            return None;
        }
    };
    match listener.listen(webhook_deliveries::OUTBOX_CHANNEL).await {
        Ok(()) => Some(listener),
        Err(err) => {
            tracing::warn!(%err, "outbox notifications unavailable; relaying on the tick");
            None
        }
    }
}

async fn relay(ctx: &WorkerState) -> anyhow::Result<()> {
    loop {
        let (deliveries, relayed) =
            webhook_deliveries::relay_events(ctx.use_cases(), BATCH).await?;
        ctx.jobs.deliver_webhooks(&deliveries).await?;
        if relayed < BATCH as usize {
            return Ok(());
        }
    }
}

/// Retries whose time has come, and deliveries whose job was lost, under load too: enqueued
/// `PARLEY_RECONCILE_AFTER_SECS` before the oldest job still waiting in the queue was pushed
/// (or that long ago when none waits: a job behind a long queue is late, not lost), and not
/// attempted since. A delivery whose first job still runs is not sent twice: its claim keeps
/// the new job off it.
async fn enqueue_due(ctx: &WorkerState) -> anyhow::Result<()> {
    let lost_after = ctx
        .jobs
        .lost_after(QueueName::WebhookDelivery, ctx.settings().reconcile_after)
        .await?;
    let per_webhook = i64::from(ctx.config.webhooks.per_endpoint) * 2;
    let ceiling = DeliverWebhooks::retry_policy(&ctx.config).requeue_ceiling();
    let due =
        webhook_deliveries::take_due(ctx.use_cases(), BATCH, per_webhook, lost_after, ceiling)
            .await?;
    crate::metrics::given_up("webhook", &due.given_up);
    ctx.jobs.deliver_webhooks(&due.taken).await?;
    Ok(())
}

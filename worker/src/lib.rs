//! The Parley worker: consumes the job queues it is given (`PARLEY_WORKER_QUEUES`), runs the
//! ticker that moves due and lost work from Postgres into the queues, and serves `/healthz`,
//! `/readyz` and `/metrics` on its metrics address. Any number of workers may run at once.

pub mod claims;
pub mod consumers;
pub mod db_retry;
pub mod dispatch;
pub mod endpoint_slots;
pub mod imports;
pub mod job;
pub mod maintenance;
pub mod metrics;
pub mod operator;
pub mod org_limits;
pub mod outbound;
pub mod outcomes;
pub mod paused_queues;
pub mod periodic;
pub mod process;
pub mod provider;
pub mod rate_limit;
pub mod relay;
pub mod renewal;
pub mod reporter;
pub mod send;
pub mod sla_checks;
pub mod sla_scheduler;
pub mod state;
pub mod status_watch;
pub mod ticker;
pub mod wakeups;
pub mod webhooks;

use secrecy::ExposeSecret;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use parley_config::Config;
use parley_jobs::redis_conn::Redis;
use parley_runtime::health::{self, Probes};
use parley_runtime::observability::metrics_handle;
use parley_types::time::Clock;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::provider::Provider;
use crate::rate_limit::RateLimiter;
use crate::state::WorkerState;

pub struct Worker {
    ctx: WorkerState,
    probes: Probes,
    listener: TcpListener,
}

impl Worker {
    /// Connects to Postgres and Redis and binds the metrics address (or `listener`).
    pub async fn build(config: Config, listener: Option<TcpListener>) -> anyhow::Result<Self> {
        Self::build_with_clock(config, listener, Clock::system()).await
    }

    /// As [`Worker::build`], with the SLA checks reading `clock` (tests move it forward).
    pub async fn build_with_clock(
        config: Config,
        listener: Option<TcpListener>,
        clock: Clock,
    ) -> anyhow::Result<Self> {
        let pool = parley_usecases::postgres::worker_pool(
            config.database_url.expose_secret(),
            config.db_max_connections,
        )?;
        let redis = Redis::connect(&config.redis_target(), &config.redis_prefix)
            .await
            .context("connecting to Redis")?;
        let listener = match listener {
            Some(l) => l,
            None => TcpListener::bind(config.worker_metrics_addr)
                .await
                .with_context(|| format!("binding {}", config.worker_metrics_addr))?,
        };
        let urls: HashMap<_, _> = config
            .channels
            .iter()
            .filter_map(|(c, s)| s.url.clone().map(|u| (*c, u)))
            .collect();
        let rates: HashMap<_, _> = config
            .channels
            .iter()
            .filter_map(|(c, s)| s.rate.map(|r| (*c, r)))
            .collect();
        let provider = Provider::new(
            urls,
            config.worker.provider_retry_base,
            config.worker.provider_max_attempts,
        );
        let claims = claims::Claims::new(redis.clone());
        let ctx = WorkerState {
            pool: pool.clone(),
            jobs: config.jobs(&redis),
            outcomes: outcomes::Outcomes::spawn(
                parley_usecases::Services {
                    pool: pool.clone(),
                    jobs: config.jobs(&redis),
                    clock: clock.clone(),
                },
                claims.clone(),
            ),
            limiter: RateLimiter::new(redis.clone(), rates, config.metrics_org_label),
            claims,
            reporter: reporter::Reporter::new(redis.clone(), config.worker.tick_interval),
            endpoint_slots: endpoint_slots::EndpointSlots::new(
                redis.clone(),
                config.webhooks.per_endpoint,
                config.webhooks.timeout + std::time::Duration::from_secs(5),
            ),
            wakeups: wakeups::Wakeups::new(&config.worker.queues),
            webhook_client: webhooks::client(&config.webhooks),
            redis: redis.clone(),
            provider: Arc::new(provider),
            config: Arc::new(config),
            clock,
            stopping: CancellationToken::new(),
            paused: Default::default(),
            unsubscribe_keys: Default::default(),
        };
        let metrics = metrics_handle();
        crate::metrics::register(&ctx.settings().queues);
        Ok(Worker {
            ctx,
            probes: Probes::new(pool, redis, metrics, true),
            listener,
        })
    }

    pub fn metrics_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Runs until `shutdown` is cancelled; then stops fetching jobs and gives in-flight ones
    /// up to the drain timeout before returning. Jobs cut short are found again from Postgres.
    pub async fn run_until(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let drain = self.ctx.settings().drain_timeout;
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(
            self.ctx
                .wakeups
                .clone()
                .listen(self.ctx.redis.clone(), shutdown.clone()),
        );
        for queue in self.ctx.settings().queues.clone() {
            tasks.spawn(consumers::run(self.ctx.clone(), shutdown.clone(), queue));
        }
        tasks.spawn(ticker::run(self.ctx.clone(), shutdown.clone()));
        tasks.spawn(maintenance::run(self.ctx.clone(), shutdown.clone()));
        tasks.spawn(org_limits::run(self.ctx.clone(), shutdown.clone()));
        tasks.spawn(operator::run(self.ctx.clone(), shutdown.clone()));
        if self
            .ctx
            .settings()
            .queues
            .contains(&parley_jobs::QueueName::WebhookDelivery)
        {
            tasks.spawn(relay::run(self.ctx.clone(), shutdown.clone()));
        }
        if self
            .ctx
            .settings()
            .queues
            .contains(&parley_jobs::QueueName::SlaCheck)
        {
            tasks.spawn(sla_scheduler::run(self.ctx.clone(), shutdown.clone()));
        }
        let server = axum::serve(self.listener, health::router(self.probes))
            .with_graceful_shutdown(shutdown.clone().cancelled_owned());
        let serving = tokio::spawn(async move { server.await });

        shutdown.cancelled().await;
        self.ctx.stopping.cancel();
        tracing::info!(?drain, "draining");
        let drained =
            tokio::time::timeout(drain, async { while tasks.join_next().await.is_some() {} }).await;
        if drained.is_err() {
            tracing::warn!("drain timed out; unfinished jobs will be picked up again");
            tasks.abort_all();
        }
        // Another worker reports the shared gauges at its next export, not a lease later.
        self.ctx.reporter.step_down().await;
        serving.await?.context("serving the metrics address")
    }
}

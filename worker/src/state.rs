//! What every job handler and periodic pass of the worker can reach (the API's is
//! `AppState`); the use cases get their own `parley_usecases::Ctx` from it.

use std::sync::Arc;

use parley_config::{Config, WorkerSettings};
use parley_jobs::Jobs;
use parley_jobs::redis_conn::Redis;
use parley_types::time::Clock;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::claims::Claims;
use crate::endpoint_slots::EndpointSlots;
use crate::outcomes::Outcomes;
use crate::provider::Provider;
use crate::rate_limit::RateLimiter;
use crate::reporter::Reporter;
use crate::wakeups::Wakeups;

#[derive(Clone)]
pub struct WorkerState {
    pub pool: PgPool,
    pub redis: Redis,
    pub jobs: Jobs,
    /// The process's writer of recipient outcomes, shared by its send jobs.
    pub outcomes: Outcomes,
    pub config: Arc<Config>,
    pub provider: Arc<Provider>,
    pub limiter: RateLimiter,
    pub claims: Claims,
    /// Whether this worker reports the gauges of shared state.
    pub reporter: Reporter,
    pub endpoint_slots: EndpointSlots,
    /// Wakes the consumers when their queues get jobs.
    pub wakeups: Wakeups,
    pub webhook_client: reqwest::Client,
    /// The time the SLA checks read.
    pub clock: Clock,
    /// Cancelled when the worker starts shutting down: jobs stop sending, write what they
    /// sent and hand the rest back to the queue.
    pub stopping: CancellationToken,
    /// The queues an operator paused (`crate::paused_queues`).
    pub paused: crate::paused_queues::PausedQueues,
    /// The keys unsubscribe links are signed with.
    pub unsubscribe_keys: parley_usecases::unsubscribe::UnsubscribeKeys,
}

impl WorkerState {
    pub fn settings(&self) -> &WorkerSettings {
        &self.config.worker
    }

    /// What the use cases act through.
    pub fn use_cases(&self) -> parley_usecases::Ctx<'_> {
        parley_usecases::Ctx {
            pool: &self.pool,
            jobs: &self.jobs,
            clock: &self.clock,
        }
    }
}

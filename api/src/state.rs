use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use parley_shared::config::Config;
use parley_shared::jobs::Jobs;
use parley_shared::redis_conn::Redis;
use sqlx::PgPool;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub redis: Redis,
    pub jobs: Jobs,
    pub config: Arc<Config>,
    pub metrics: PrometheusHandle,
}

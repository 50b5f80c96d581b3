use std::sync::Arc;

use metrics_exporter_prometheus::PrometheusHandle;
use parley_shared::config::Config;
use parley_shared::error::{AppError, AppResult};
use parley_shared::jobs::Jobs;
use parley_shared::redis_conn::Redis;
use parley_shared::storage::Storage;
use sqlx::PgPool;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub redis: Redis,
    pub jobs: Jobs,
    pub config: Arc<Config>,
    pub metrics: PrometheusHandle,
    /// Object storage; `None` when not configured.
    pub storage: Option<Storage>,
}

impl AppState {
    /// The object store, or 503 `storage_unavailable` when none is configured.
    pub fn storage(&self) -> AppResult<&Storage> {
        self.storage.as_ref().ok_or(AppError::StorageUnavailable)
    }
}

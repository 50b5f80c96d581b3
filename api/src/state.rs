use std::sync::Arc;

use crate::error::{AppError, AppResult};
use metrics_exporter_prometheus::PrometheusHandle;
use parley_config::Config;
use parley_jobs::Jobs;
use parley_jobs::redis_conn::Redis;
use parley_storage::Storage;
use parley_types::time::Clock;
use sqlx::PgPool;

/// What every handler can reach. Cloned for each extractor and layer of every request: one
/// reference count, whatever it holds (its fields' own clones allocated: their prefixes,
/// Redis' node list).
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> Self {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] holds.
pub struct Shared {
    pub pool: PgPool,
    pub redis: Redis,
    pub jobs: Jobs,
    pub config: Arc<Config>,
    pub metrics: PrometheusHandle,
    /// Object storage; `None` when not configured.
    pub storage: Option<Storage>,
    /// The time the SLA rules read.
    pub clock: Clock,
    /// Segment counts each organization runs at once.
    pub counts: crate::org_permits::OrgPermits,
    /// Import files each organization sends at once.
    pub files_sent: crate::org_permits::OrgPermits,
    /// Suppression exports each organization streams at once.
    pub exports: crate::org_permits::OrgPermits,
    /// Broadcast previews each organization runs at once.
    pub previews: crate::org_permits::OrgPermits,
    /// The temporary disk request bodies may hold.
    pub spool: crate::body_spool::DiskBudget,
    /// Requests each organization runs, and has waiting, at once.
    pub turns: crate::org_permits::OrgTurns,
    /// The same for the requests with one of its tickets' access tokens (its customers'),
    /// apart from its keys'.
    pub ticket_turns: crate::org_permits::OrgTurns,
    /// Failed authentications per client address.
    pub auth_failures: crate::auth_failures::AuthFailures,
    /// Failed calls (a token no key signed) and resubscribes of the public unsubscribe routes
    /// per client address.
    pub unsubscribe_calls: crate::auth_failures::AuthFailures,
    /// The keys unsubscribe links are signed with.
    pub unsubscribe_keys: parley_usecases::unsubscribe::UnsubscribeKeys,
    /// The API keys this process knows.
    pub keys: crate::key_cache::KeyCache,
    /// The requests of keys without a daily limit, counted here and written in batches.
    pub unlimited_usage: crate::usage::UnlimitedCounts,
}

impl AppState {
    /// What the use cases reach.
    pub fn use_cases(&self) -> parley_usecases::Ctx<'_> {
        parley_usecases::Ctx {
            pool: &self.pool,
            jobs: &self.jobs,
            clock: &self.clock,
        }
    }

    /// What [`Shared::use_cases`]'s `Ctx` borrows, owned: for the API's background loops.
    pub fn services(&self) -> parley_usecases::Services {
        parley_usecases::Services {
            pool: self.pool.clone(),
            jobs: self.jobs.clone(),
            clock: self.clock.clone(),
        }
    }

    /// The object store, or 503 `storage_unavailable` when none is configured.
    pub fn storage(&self) -> AppResult<&Storage> {
        self.storage
            .as_ref()
            .ok_or(AppError::StorageUnavailable.into())
    }
}

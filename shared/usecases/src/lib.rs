//! The use cases: each change of a resource that takes more than one statement runs here, in
//! one transaction with its checks of referenced ids, its effects and its event, and returns
//! what the caller answers. The API's route handlers parse, authorize, call one of these and
//! answer; the rules live in `parley_domain`, the SQL in `parley_db`. One module per feature.
//! The worker's jobs call the same layer for their units of work (a slice of an audience
//! written, an import batch applied, SLA checks run, a webhook job's outcome recorded); those
//! that a job retries on a transient failure return Postgres' own error.

pub mod broadcasts;
pub mod categories;
pub mod contacts;
pub mod conversations;
pub mod faq;
pub mod files;
pub mod imports;
pub mod leads;
pub mod message_attributes;
pub mod operator;
pub mod org_limits;
pub mod orgs;
pub mod receipts;
pub mod retention;
pub mod segments;
pub mod sending;
pub mod sla;
pub mod tags;
pub mod teams;
pub mod templates;
pub mod tickets;
pub mod users;
pub mod webhook_deliveries;
pub mod webhooks;

use parley_domain::Actor;
use parley_jobs::Jobs;
use parley_types::error::AppError;
use parley_types::time::Clock;
use sqlx::PgPool;
use uuid::Uuid;

/// The workers' connections to Postgres, and which of Postgres' errors pass (what the jobs
/// retry through): from `parley_db`, which the worker reaches only through this crate.
pub use parley_db::error::is_transient_error;
pub use parley_db::worker_pool;

/// What the use cases reach: Postgres, the queues they hand work to, and the clock the SLA
/// rules read.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub pool: &'a PgPool,
    pub jobs: &'a Jobs,
    pub clock: &'a Clock,
}

/// Who acts: an API key of an organization.
#[derive(Debug, Clone)]
pub struct Caller {
    pub org_id: Uuid,
    pub key_id: Uuid,
    pub key_name: String,
}

impl Caller {
    pub fn actor(&self) -> Actor {
        Actor::api_key(self.key_id, &self.key_name)
    }
}

/// Why a use case failed: the rules' error, Postgres' errors mapped to it
/// (`parley_db::error::app_error`).
#[derive(Debug)]
pub struct Error(pub AppError);

pub type Result<T> = std::result::Result<T, Error>;

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl From<AppError> for Error {
    fn from(err: AppError) -> Self {
        Error(err)
    }
}

impl From<sqlx::Error> for Error {
    fn from(err: sqlx::Error) -> Self {
        Error(parley_db::error::app_error(err))
    }
}

impl From<serde_json::Error> for Error {
    fn from(err: serde_json::Error) -> Self {
        Error(AppError::Internal(err.into()))
    }
}

//! The use cases, the one door to the database: every read and write of the API (its routes,
//! its middleware, its CLI) and of the worker (its jobs and periodic tasks) runs here. A
//! change of several statements runs in one transaction with its checks of referenced ids,
//! its effects and its event; a single statement goes through to its function in
//! `parley_db`. The API's route handlers parse, authorize, call one of these and answer; the
//! rules live in `parley_domain`, the SQL in `parley_db`. One module per feature. Those that
//! a job retries on a transient failure return Postgres' own error.
//!
//! One calling convention: [`Ctx`] first. A tenant's change takes the [`Caller`] next, a
//! tenant's query the organization's id; what the operator runs (the CLI, the operator API)
//! and what the worker runs take the ids they act on.

pub mod api_keys;
pub mod broadcasts;
pub mod categories;
pub mod contact_data;
pub mod contacts;
pub mod conversations;
pub mod faq;
pub mod files;
pub mod idempotency;
pub mod imports;
pub mod leads;
pub mod message_attributes;
pub mod operator;
pub mod org_limits;
pub mod orgs;
pub mod preview;
pub mod receipts;
pub mod retention;
pub mod segments;
pub mod sending;
pub mod sla;
pub mod suppressions;
pub mod tags;
pub mod teams;
pub mod templates;
pub mod tickets;
pub mod topics;
pub mod unsubscribe;
pub mod users;
pub mod webhook_deliveries;
pub mod webhooks;

use parley_domain::Actor;
use parley_jobs::Jobs;
use parley_types::error::AppError;
use parley_types::ids::OrgId;
use parley_types::time::Clock;
use sqlx::PgPool;
use uuid::Uuid;

/// Connections to Postgres, the migrations, and what Postgres' errors mean (to a client;
/// whether they pass, for the jobs that retry through them): `parley_db`'s, for the binaries
/// that reach the database only through this crate.
pub mod postgres {
    pub use parley_db::error::{app_error, is_transient_error};
    pub use parley_db::{api_connection_check, api_pool, migrate, pool, worker_pool};
}

/// What the use cases reach: Postgres, the queues they hand work to, and the clock the SLA
/// rules read. Every use case takes it first.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub pool: &'a PgPool,
    pub jobs: &'a Jobs,
    pub clock: &'a Clock,
}

/// What a [`Ctx`] borrows, owned: for a task that outlives its caller's borrows (the
/// worker's outcome writer, the API's background loops) and for the CLI.
#[derive(Clone)]
pub struct Services {
    pub pool: PgPool,
    pub jobs: Jobs,
    pub clock: Clock,
}

impl Services {
    pub fn ctx(&self) -> Ctx<'_> {
        Ctx {
            pool: &self.pool,
            jobs: &self.jobs,
            clock: &self.clock,
        }
    }
}

/// The row that was asked for, or 404.
fn found<T>(row: Option<T>) -> Result<T> {
    row.ok_or(Error(AppError::NotFound))
}

/// 404 unless it exists.
fn exists(it: bool) -> Result<()> {
    changed(it)
}

/// 404 when there was nothing to change.
fn changed(any: bool) -> Result<()> {
    if any {
        Ok(())
    } else {
        Err(Error(AppError::NotFound))
    }
}

/// Who acts: an API key of an organization.
#[derive(Debug, Clone)]
pub struct Caller {
    pub org_id: OrgId,
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

//! What the Parley API and worker share: configuration, the error type and response envelope,
//! validated field types, domain types, database access and (later) job payloads.

pub mod auth;
pub mod business_hours;
pub mod config;
pub mod db;
pub mod domain;
pub mod envelope;
pub mod error;
pub mod fields;
pub mod health;
pub mod ids;
pub mod jobs;
pub mod list;
pub mod metric_names;
pub mod net;
pub mod observability;
pub mod redis_conn;
pub mod shutdown;
pub mod signature;
pub mod storage;
pub mod time;
pub mod usage;

pub use error::{AppError, AppResult};

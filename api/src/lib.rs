//! The Parley HTTP API: validates requests, writes to Postgres, enqueues jobs.

pub mod admin_cli;
pub mod admin_page;
pub mod auth_failures;
pub mod body_spool;
pub mod cli;
pub mod client_addr;
pub mod envelope;
pub mod error;
pub mod extract;
pub mod key_cache;
pub mod middleware;
pub mod multipart_bounds;
pub mod openapi;
pub mod org_permits;
pub mod retention;
pub mod routes;
pub mod scopes;
pub mod serve;
pub mod startup;
pub mod state;
pub mod usage;

pub use startup::Application;

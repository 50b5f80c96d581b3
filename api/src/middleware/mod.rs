//! Request middleware, outermost first: request context, HTTP metrics, authentication,
//! idempotency keys.

pub mod auth;
pub mod bodies;
pub mod guard;
pub mod http_metrics;
pub mod idempotency;
pub mod operator_auth;
pub mod request_context;

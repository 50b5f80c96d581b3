//! Request middleware, outermost first: request context, HTTP metrics, authentication.

pub mod auth;
pub mod guard;
pub mod http_metrics;
pub mod request_context;

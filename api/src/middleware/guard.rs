//! What keeps one request, or many, from hurting the service: every API route runs under a
//! timeout and a global limit of requests in flight that sheds the excess at once (tower's
//! layers), and a panic anywhere below becomes the envelope's 500 with its request id
//! (tower-http's). Probes and metrics stay outside the limit, so they answer under load.

use std::any::Any;
use std::time::Duration;

use crate::error::{ApiError, AppError};
use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::response::{IntoResponse, Response};
use tower::ServiceBuilder;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::load_shed::LoadShedLayer;
use tower::timeout::TimeoutLayer;
use tower_http::catch_panic::CatchPanicLayer;

/// The limits [`guard`] applies.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub request_timeout: Duration,
    pub max_in_flight: usize,
}

/// Puts every route of `routes` under the request timeout and the shared in-flight limit.
pub fn guard<S: Clone + Send + Sync + 'static>(routes: Router<S>, limits: Limits) -> Router<S> {
    let timeout = limits.request_timeout;
    routes.layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(
                move |err: tower::BoxError| async move { refused(err, timeout) },
            ))
            .layer(LoadShedLayer::new())
            .layer(GlobalConcurrencyLimitLayer::new(limits.max_in_flight))
            .layer(TimeoutLayer::new(timeout)),
    )
}

fn refused(err: tower::BoxError, timeout: Duration) -> Response {
    if err.is::<tower::timeout::error::Elapsed>() {
        metrics::counter!(parley_types::metric_names::HTTP_REFUSED, "reason" => "timeout")
            .increment(1);
        ApiError(AppError::Overloaded(format!(
            "the request took longer than {} s and was stopped; retry shortly",
            timeout.as_secs()
        )))
        .into_response()
    } else if err.is::<tower::load_shed::error::Overloaded>() {
        metrics::counter!(parley_types::metric_names::HTTP_REFUSED, "reason" => "overloaded")
            .increment(1);
        ApiError(AppError::Overloaded(
            "the service is at capacity; retry shortly".to_owned(),
        ))
        .into_response()
    } else {
        ApiError(AppError::Internal(anyhow::anyhow!(
            "request layer failed: {err}"
        )))
        .into_response()
    }
}

/// Turns a panic below into the envelope's 500 (the cause logged, the request id in the
/// message). Must run inside the request context to know the id.
pub fn catch_panic<S: Clone + Send + Sync + 'static>(routes: Router<S>) -> Router<S> {
    routes.layer(CatchPanicLayer::custom(panicked))
}

fn panicked(payload: Box<dyn Any + Send + 'static>) -> Response {
    let what = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message");
    metrics::counter!(parley_types::metric_names::HTTP_REFUSED, "reason" => "panic").increment(1);
    ApiError(AppError::Internal(anyhow::anyhow!(
        "handler panicked: {what}"
    )))
    .into_response()
}

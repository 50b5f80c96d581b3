//! What keeps one request, or many, from hurting the service: every route runs under a
//! timeout, and takes one of the process's in-flight slots, shed at once with 503 when none is
//! free ([`in_flight`]); a panic anywhere below becomes the envelope's 500 with its request id
//! (tower-http's). An API request takes its slot once it is authenticated, its body has
//! arrived (`crate::middleware::bodies`) and its organization's turn came, so a client sending
//! slowly, or waiting its turn, holds none. Probes and metrics stay outside, so they answer
//! under load.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{ApiError, AppError};
use axum::Router;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{Request, State};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;
use tower::ServiceBuilder;
use tower::timeout::TimeoutLayer;
use tower_http::catch_panic::CatchPanicLayer;

/// The limits [`guard`] applies.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub request_timeout: Duration,
    pub max_in_flight: usize,
}

/// In-flight slots, shared by the routes that take one.
#[derive(Clone)]
pub struct InFlight(Arc<Semaphore>);

impl InFlight {
    pub fn new(slots: usize) -> Self {
        InFlight(Arc::new(Semaphore::new(slots)))
    }
}

/// Runs the request in a slot, or answers 503 at once when none is free.
pub async fn in_flight(State(slots): State<InFlight>, req: Request, next: Next) -> Response {
    let Ok(_slot) = slots.0.try_acquire() else {
        metrics::counter!(parley_types::metric_names::HTTP_REFUSED, "reason" => "overloaded")
            .increment(1);
        return ApiError(AppError::Overloaded(
            "the service is at capacity; retry shortly".to_owned(),
        ))
        .into_response();
    };
    next.run(req).await
}

/// Puts every route of `routes` under `timeout`: past it, 503.
pub fn timeout<S: Clone + Send + Sync + 'static>(
    routes: Router<S>,
    timeout: Duration,
) -> Router<S> {
    routes.layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(
                move |err: tower::BoxError| async move { refused(err, timeout) },
            ))
            .layer(TimeoutLayer::new(timeout)),
    )
}

/// Puts every route of `routes` under the request timeout and slots of its own (the receipts',
/// beside the process's).
pub fn guard<S: Clone + Send + Sync + 'static>(routes: Router<S>, limits: Limits) -> Router<S> {
    let slots = InFlight::new(limits.max_in_flight);
    timeout(
        routes.layer(from_fn_with_state(slots, in_flight)),
        limits.request_timeout,
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

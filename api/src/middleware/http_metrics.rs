//! Requests by route template, method and status, and their latency.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;

use parley_shared::metric_names::{HTTP_DURATION as DURATION, HTTP_REQUESTS as REQUESTS};

pub async fn http_metrics(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = req.method().as_str().to_owned();
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    let labels = [("route", route), ("method", method), ("status", status)];
    metrics::counter!(REQUESTS, &labels).increment(1);
    metrics::histogram!(DURATION, &labels).record(started.elapsed().as_secs_f64());
    response
}

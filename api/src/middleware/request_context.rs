//! Gives every request an id (the caller's `X-Request-Id` when it is sane, else a new one),
//! returns it in `X-Request-Id`, puts it on the request's log span, opens the request
//! context the envelope reads, and logs one line per request.

use crate::envelope::{self, RequestContext};
use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

pub const REQUEST_ID: &str = "x-request-id";

fn incoming_id(req: &Request) -> Option<String> {
    let v = req.headers().get(REQUEST_ID)?.to_str().ok()?;
    let sane = !v.is_empty() && v.len() <= 128 && v.chars().all(|c| c.is_ascii_graphic());
    sane.then(|| v.to_owned())
}

pub async fn request_context(req: Request, next: Next) -> Response {
    let id = incoming_id(&req).unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    // An unsubscribe link's token acts for its recipient: never in a log line.
    let path = match req.uri().path() {
        p if p.starts_with(parley_domain::unsubscribe::PATH_PREFIX) => "/unsubscribe/{token}",
        p => p,
    };
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %req.method(),
        path = %path,
        organization_id = tracing::field::Empty,
    );
    let ctx = RequestContext::new(id.clone());
    let started = std::time::Instant::now();
    let mut response = envelope::scope(ctx, next.run(req))
        .instrument(span.clone())
        .await;
    if let Ok(v) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(REQUEST_ID, v);
    }
    // One line per request; headers (the API key among them) are never logged.
    span.in_scope(|| {
        tracing::info!(
            status = response.status().as_u16(),
            duration_ms = started.elapsed().as_millis() as u64,
            "request"
        );
    });
    response
}

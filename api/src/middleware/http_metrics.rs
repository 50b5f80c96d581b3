//! Requests by route template, method and status, and their latency. Every label comes from
//! a fixed set, whatever the request says: the route is a template of the router (or
//! `unmatched`), the method one of the standard ones (or `other`), the status a number.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;

use parley_types::metric_names::{HTTP_DURATION as DURATION, HTTP_REQUESTS as REQUESTS};

pub async fn http_metrics(req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |p| p.as_str().to_owned());
    let method = method_label(req.method());
    let response = next.run(req).await;
    let status = response.status().as_u16().to_string();
    let labels = [
        ("route", route),
        ("method", method.to_owned()),
        ("status", status),
    ];
    metrics::counter!(REQUESTS, &labels).increment(1);
    metrics::histogram!(DURATION, &labels).record(started.elapsed().as_secs_f64());
    response
}

/// The method as a label: one of the standard methods, else `other`, so made-up methods make
/// no new series.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::CONNECT => "CONNECT",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_up_methods_share_one_label() {
        let made_up = axum::http::Method::from_bytes(b"BREW").unwrap();
        assert_eq!(method_label(&made_up), "other");
        assert_eq!(method_label(&axum::http::Method::PATCH), "PATCH");
    }
}

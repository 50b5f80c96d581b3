//! Requests by route template, method and status, and their latency. Every label comes from
//! a fixed set, whatever the request says: the route is a template of the router (or
//! `unmatched`), the method one of the standard ones (or `other`), the status a number.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use metrics::{Counter, Histogram};
use parking_lot::RwLock;

use parley_types::metric_names::{HTTP_DURATION as DURATION, HTTP_REQUESTS as REQUESTS};

const UNMATCHED: &str = "unmatched";

pub async fn http_metrics(State(series): State<Series>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = req.extensions().get::<MatchedPath>().cloned();
    let method = method_label(req.method());
    let response = next.run(req).await;
    let route = route.as_ref().map_or(UNMATCHED, MatchedPath::as_str);
    series.record(route, method, response.status().as_u16(), started);
    response
}

/// The handles of every series a router's requests have made, each registered at its first
/// request: the next requests of the series cost one lookup under a read lock, instead of the
/// labels' strings and the registry's two lookups each. Bounded as the labels are: routes of
/// the router, the methods' labels, the statuses the handlers answer.
#[derive(Clone, Default)]
pub struct Series(Arc<RwLock<HashMap<Box<str>, Vec<Handles>>>>);

/// One series' handles (a route's, for one method and status).
struct Handles {
    method: &'static str,
    status: u16,
    requests: Counter,
    duration: Histogram,
}

impl Series {
    fn record(&self, route: &str, method: &'static str, status: u16, started: Instant) {
        let record = |h: &Handles| {
            h.requests.increment(1);
            h.duration.record(started.elapsed().as_secs_f64());
        };
        let find = |hs: &[Handles]| -> Option<usize> {
            hs.iter()
                .position(|h| h.method == method && h.status == status)
        };
        {
            let routes = self.0.read();
            if let Some(hs) = routes.get(route)
                && let Some(i) = find(hs)
            {
                return record(&hs[i]);
            }
        }
        let mut routes = self.0.write();
        let hs = routes.entry(route.into()).or_default();
        // Another request of the series may have registered it meanwhile.
        let i = find(hs).unwrap_or_else(|| {
            let labels = [
                ("route", route.to_owned()),
                ("method", method.to_owned()),
                ("status", status.to_string()),
            ];
            hs.push(Handles {
                method,
                status,
                requests: metrics::counter!(REQUESTS, &labels),
                duration: metrics::histogram!(DURATION, &labels),
            });
            hs.len() - 1
        });
        record(&hs[i]);
    }
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

    /// What each series counts is tested over HTTP with the process's recorder
    /// (`tests/tests/api/openapi.rs`); here, that a series gets one entry.
    #[test]
    fn a_series_is_registered_once() {
        let series = Series::default();
        let started = Instant::now();
        for _ in 0..3 {
            series.record("/a/{id}", "GET", 200, started);
        }
        series.record("/a/{id}", "GET", 404, started);
        series.record("/b", "GET", 200, started);
        let routes = series.0.read();
        assert_eq!(routes.len(), 2);
        let statuses: Vec<u16> = routes["/a/{id}"].iter().map(|h| h.status).collect();
        assert_eq!(statuses, [200, 404]);
    }
}

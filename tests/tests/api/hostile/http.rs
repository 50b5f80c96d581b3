//! The HTTP layer of a real service: metric labels from fixed sets, a panic answered with the
//! envelope's 500, a request timeout, load shed with 503 and `Retry-After`, and connections
//! that dribble or bloat their headers cut off.

use std::time::{Duration, Instant};

use axum::Router;
use axum::routing::get;
use parley_api::middleware::guard::Limits;
use parley_api::serve::ConnectionLimits;
use parley_tests::{TestApp, metrics_text};
use reqwest::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::still_healthy;

#[tokio::test]
async fn made_up_methods_are_405_and_share_one_metric_label() {
    let app = TestApp::builder().start().await;
    for i in 0..500 {
        let method = Method::from_bytes(format!("BREW{i}").as_bytes()).unwrap();
        let resp = app
            .send(method, "/api/v1/contacts", Some(&app.key), None)
            .await;
        resp.expect_error(405, "method_not_allowed");
    }
    still_healthy(&app).await;
    let metrics = metrics_text(app.metrics_addr).await;
    assert!(!metrics.contains("BREW"), "no series per made-up method");
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("parley_http_requests_total")
                && l.contains("method=\"other\"")
                && l.contains("status=\"405\"")),
        "one series for them all"
    );
}

/// The production layer stack over routes of the test's own (and a `/healthz` probe), served
/// like the API.
async fn serve_with_layers(routes: Router, limits: Limits) -> (String, CancellationToken) {
    let probes = Router::new().route("/healthz", get(|| async { "ok" }));
    let slots = parley_api::middleware::guard::InFlight::new(limits.max_in_flight);
    let routes = routes.layer(axum::middleware::from_fn_with_state(
        slots,
        parley_api::middleware::guard::in_flight,
    ));
    let router = parley_api::startup::layered(routes, probes, limits.request_timeout, 1024 * 1024);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(parley_api::serve::serve(
        listener,
        router,
        CONNECTIONS,
        parley_config::Proxies::default(),
        stop.clone(),
    ));
    (format!("http://{addr}"), stop)
}

const CONNECTIONS: ConnectionLimits = ConnectionLimits {
    header_read_timeout: Duration::from_secs(5),
    max_connections: 64,
    max_per_address: 64,
    drain: Duration::from_secs(5),
};

const LIMITS: Limits = Limits {
    request_timeout: Duration::from_secs(1),
    max_in_flight: 2,
};

async fn boom() -> &'static str {
    panic!("a bug in a handler");
}

async fn slow() -> &'static str {
    tokio::time::sleep(Duration::from_secs(3)).await;
    "done"
}

#[tokio::test]
async fn a_handler_that_panics_answers_the_envelopes_500_with_its_request_id() {
    let routes = Router::new()
        .route("/boom", get(boom))
        .route("/fine", get(|| async { "fine" }));
    let (base, stop) = serve_with_layers(routes, LIMITS).await;
    let client = reqwest::Client::new();
    let resp = client
        .get(format!("{base}/boom"))
        .header("x-request-id", "req-panic-1")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 500);
    assert_eq!(resp.headers()["x-request-id"], "req-panic-1");
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["success"], false);
    assert_eq!(body["error"]["code"], "internal_error");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("req-panic-1"), "{message}");
    assert!(!message.contains("a bug"), "the cause stays in the log");
    // The server goes on.
    let fine = client.get(format!("{base}/fine")).send().await.unwrap();
    assert_eq!(fine.status(), 200);
    stop.cancel();
}

#[tokio::test]
async fn a_request_past_the_timeout_is_503_with_retry_after() {
    let routes = Router::new().route("/slow", get(slow));
    let (base, stop) = serve_with_layers(routes, LIMITS).await;
    let started = Instant::now();
    let resp = reqwest::get(format!("{base}/slow")).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(2_500),
        "cut at 1 s"
    );
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "service_unavailable");
    stop.cancel();
}

#[tokio::test]
async fn requests_past_the_in_flight_limit_are_shed_at_once() {
    let limits = Limits {
        request_timeout: Duration::from_secs(10),
        max_in_flight: 2,
    };
    // The handler counts the requests it holds: the two in flight are waited for, not guessed.
    let inside = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = inside.clone();
    let routes = Router::new().route(
        "/slow",
        get(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            slow()
        }),
    );
    let (base, stop) = serve_with_layers(routes, limits).await;
    let busy: Vec<_> = (0..2)
        .map(|_| tokio::spawn(reqwest::get(format!("{base}/slow"))))
        .collect();
    let two_inside = || async { inside.load(std::sync::atomic::Ordering::SeqCst) == 2 };
    assert!(
        parley_tests::wait_until(10, two_inside).await,
        "two requests in flight"
    );
    let started = Instant::now();
    let shed = reqwest::get(format!("{base}/slow")).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(1), "shed at once");
    assert_eq!(shed.status(), 503);
    assert_eq!(shed.headers()["retry-after"], "1");
    // Probes are outside the limit.
    let probe = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(probe.status(), 200);
    for b in busy {
        assert_eq!(b.await.unwrap().unwrap().status(), 200);
    }
    stop.cancel();
}

#[tokio::test]
async fn a_client_that_dribbles_its_headers_is_cut_off() {
    let app = TestApp::builder()
        .env(&[("PARLEY_HEADER_READ_TIMEOUT_SECS", "1")])
        .start()
        .await;
    let mut stream = tokio::net::TcpStream::connect(app.addr).await.unwrap();
    stream
        .write_all(b"GET /api/v1/contacts HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    // The server answers (408) or closes; either way the connection ends.
    let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the connection was not cut off");
    assert!(started.elapsed() < Duration::from_secs(5));
    still_healthy(&app).await;
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_and_connections_are_capped() {
    let app = TestApp::builder()
        .env(&[
            ("PARLEY_HEADER_READ_TIMEOUT_SECS", "1"),
            ("PARLEY_MAX_CONNECTIONS", "4"),
        ])
        .start()
        .await;
    // Four silent connections take every place...
    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(tokio::net::TcpStream::connect(app.addr).await.unwrap());
    }
    // ...and are closed by the header timeout, so a fifth client is served after them.
    let started = Instant::now();
    still_healthy(&app).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    for mut s in silent {
        let mut buf = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
        assert!(read.is_ok(), "a silent connection was left open");
    }
}

#[tokio::test]
async fn an_oversized_request_head_is_refused() {
    let app = TestApp::builder().start().await;
    let resp = app
        .client
        .get(format!("{}/api/v1/contacts", app.base))
        .bearer_auth(&app.key)
        .header("x-padding", "p".repeat(100 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 431);
    let many = (0..100).fold(
        app.client.get(format!("{}/api/v1/contacts", app.base)),
        |r, i| r.header(format!("x-h{i}"), "v"),
    );
    assert_eq!(many.send().await.unwrap().status(), 431);
    still_healthy(&app).await;
}

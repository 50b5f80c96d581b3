//! Cost before trust: nothing proportional to what a caller sends happens before it is
//! authenticated, beyond reading a body within its limit; and no list costs more than linear.

use std::time::{Duration, Instant};

use parley_tests::TestApp;
use serde_json::json;
use uuid::Uuid;

use super::{still_healthy, template};

const SECRET: &str = "receipts-secret";

#[tokio::test]
async fn a_flooded_signature_header_is_refused_without_work_on_the_body() {
    let app = TestApp::builder()
        .env(&[("PARLEY_CHANNEL_MESSAGING_A_SECRET", SECRET)])
        .start()
        .await;
    let url = format!("{}/api/v1/channels/messaging_a/receipts", app.base);
    let body = vec![b' '; 1024 * 1024];
    // 2,000 empty candidates (about 16 KB): refused while parsing the header.
    let flooded = "sha256=,".repeat(2_000);
    let started = Instant::now();
    let resp = app
        .client
        .post(&url)
        .header("content-type", "application/json")
        .header("x-parley-signature", &flooded)
        .body(body.clone())
        .send()
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(resp.status(), 401);
    println!("flooded signature header, 1 MiB body: {took:?}");
    // Measured 3 to 9 ms (debug build, docs/benchmarks.md); a MAC per candidate took over 60 s.
    assert!(took < Duration::from_millis(100), "took {took:?}");

    // Well-formed but too many candidates: the same.
    let zero = format!("sha256={}", "0".repeat(64));
    let five = [zero.as_str(); 5].join(",");
    let resp = app
        .client
        .post(&url)
        .header("content-type", "application/json")
        .header("x-parley-signature", &five)
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);

    // About 50,000 candidates do not fit the largest request head.
    let huge = "sha256=,".repeat(50_000);
    let resp = app
        .client
        .post(&url)
        .header("content-type", "application/json")
        .header("x-parley-signature", &huge)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 431, "request header fields too large");

    // A correct signature still works.
    let receipts = br#"[{"messageId": "unknown", "status": "delivered"}]"#;
    let resp = app
        .client
        .post(&url)
        .header("content-type", "application/json")
        .header(
            "x-parley-signature",
            parley_domain::signature::sign(SECRET, receipts),
        )
        .body(receipts.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    still_healthy(&app).await;
}

#[tokio::test]
async fn an_audience_of_200_000_unknown_ids_is_refused_quickly_with_capped_details() {
    let app = TestApp::builder().start().await;
    let template = template(&app, "email", "Hi").await;
    let ids: Vec<Uuid> = (0..200_000).map(|_| Uuid::now_v7()).collect();
    let started = Instant::now();
    let resp = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "b", "templateId": template, "contactIds": ids}),
        )
        .await;
    let took = started.elapsed();
    println!("200,000 unknown contact ids: {took:?}");
    resp.expect_error(422, "validation_error");
    let details = resp.body["error"]["details"].as_array().unwrap();
    assert_eq!(
        details.len(),
        101,
        "the first 100 and one that counts the rest"
    );
    assert_eq!(details[0]["field"], "contactIds[0]");
    assert_eq!(details[100]["field"], "contactIds");
    assert!(
        details[100]["message"]
            .as_str()
            .unwrap()
            .contains("199900 more"),
        "{}",
        details[100]
    );
    // Measured about 2 s (debug build, docs/benchmarks.md); the quadratic lookup never ended.
    assert!(took < Duration::from_secs(20), "took {took:?}");
    still_healthy(&app).await;
}

#[tokio::test]
async fn only_broadcast_create_and_update_take_long_bodies() {
    let app = TestApp::builder()
        .env(&[("PARLEY_MAX_BODY_BYTES", "4096")])
        .start()
        .await;
    let long = json!({"name": "x".repeat(5_000)});
    app.post("/api/v1/contacts", long.clone())
        .await
        .expect_error(413, "payload_too_large");
    // A broadcast body of the same size is read (and refused for its content, not its size).
    let resp = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "x".repeat(5_000), "templateId": Uuid::now_v7(),
                   "contactIds": [Uuid::now_v7()]}),
        )
        .await;
    resp.expect_error(422, "validation_error");
}

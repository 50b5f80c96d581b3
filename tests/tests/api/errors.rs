//! Every row of the error table in docs/api.md, reached over HTTP (500 is covered by a unit test
//! of the error type: no input reaches it).

use parley_tests::{TestApp, closed_port};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn every_error_uses_the_envelope() {
    let app = TestApp::builder().start().await;
    let cases = [
        (
            app.send_raw(Method::POST, "/api/v1/contacts", "application/json", "{")
                .await,
            400,
            "invalid_json",
        ),
        (
            app.send(Method::GET, "/api/v1/contacts", None, None).await,
            401,
            "unauthorized",
        ),
        (
            app.get(&format!("/api/v1/contacts/{}", uuid::Uuid::now_v7()))
                .await,
            404,
            "not_found",
        ),
        (
            app.get("/api/v1/contacts/not-a-uuid").await,
            404,
            "not_found",
        ),
        (app.get("/api/v1/planets").await, 404, "route_not_found"),
        (
            app.send(Method::PUT, "/api/v1/contacts", Some(&app.key), None)
                .await,
            405,
            "method_not_allowed",
        ),
        (
            app.send_raw(Method::POST, "/api/v1/contacts", "text/plain", "{}")
                .await,
            415,
            "unsupported_media_type",
        ),
        (
            app.post("/api/v1/contacts", json!({})).await,
            422,
            "validation_error",
        ),
    ];
    for (resp, status, code) in cases {
        resp.expect_error(status, code);
        assert!(resp.body["message"].is_string());
        assert!(resp.body["meta"].is_object());
        assert!(resp.body["data"].is_null());
        assert!(resp.headers.contains_key("x-request-id"));
    }
}

/// Every resource's id is read typed from its path: a malformed id (text, a NUL byte, an
/// overlong one) and an unknown one are 404 `not_found`, for a read and a delete alike, and a
/// delete of a malformed id changes nothing.
#[tokio::test]
async fn a_malformed_or_unknown_id_in_a_resource_path_is_not_found() {
    let app = TestApp::builder().start().await;
    let tag = app.post("/api/v1/tags", json!({"name": "kept"})).await.id();
    let resources = [
        "broadcasts",
        "categories",
        "companies",
        "contacts/imports",
        "contacts",
        "conversations",
        "faq-collections",
        "files",
        "leads",
        "message-attributes",
        "segments",
        "sla-policies",
        "tags",
        "teams",
        "templates",
        "tickets",
        "users",
        "webhooks",
    ];
    let unknown = uuid::Uuid::now_v7().to_string();
    let long = "a".repeat(300);
    for resource in resources {
        for id in ["not-a-uuid", "%00", long.as_str(), unknown.as_str()] {
            let path = format!("/api/v1/{resource}/{id}");
            app.get(&path).await.expect_error(404, "not_found");
            // Imports, conversations and tickets are not deleted.
            if !["contacts/imports", "conversations", "tickets"].contains(&resource) {
                app.send(Method::DELETE, &path, Some(&app.key), None)
                    .await
                    .expect_error(404, "not_found");
            }
        }
    }
    app.get(&format!("/api/v1/tags/{tag}")).await.expect(200);
}

#[tokio::test]
async fn a_duplicate_email_is_a_conflict_naming_the_field() {
    let app = TestApp::builder().start().await;
    app.post(
        "/api/v1/contacts",
        json!({"source": "web", "email": "ada@example.com"}),
    )
    .await
    .expect(201);
    let before = app.fingerprint(app.org_id).await;
    let resp = app
        .post(
            "/api/v1/contacts",
            json!({"source": "web", "email": "ADA@example.com"}),
        )
        .await;
    resp.expect_error(409, "conflict");
    assert_eq!(resp.field(), "email");
    assert_eq!(app.fingerprint(app.org_id).await, before);
}

#[tokio::test]
async fn an_action_the_state_forbids_is_invalid_state() {
    let app = TestApp::builder().start().await;
    let lead = app
        .post("/api/v1/leads", json!({"email": "c@example.com"}))
        .await
        .id();
    app.post(&format!("/api/v1/leads/{lead}/convert"), json!({}))
        .await
        .expect(200);
    let before = app.fingerprint(app.org_id).await;
    app.post(&format!("/api/v1/leads/{lead}/convert"), json!({}))
        .await
        .expect_error(409, "invalid_state");
    assert_eq!(app.fingerprint(app.org_id).await, before);
}

#[tokio::test]
async fn the_callers_request_id_is_returned() {
    let app = TestApp::builder().start().await;
    let resp = app
        .client
        .get(format!("{}/api/v1/contacts", app.base))
        .header("x-request-id", "trace-me-42")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-request-id"], "trace-me-42");
}

/// Postgres down: every request that needs it is 503 `service_unavailable`, not a 500.
#[tokio::test]
async fn a_dead_database_is_503() {
    let app = TestApp::builder().start().await;
    // A second app whose Postgres is a closed port (migrations off, pool connects lazily).
    let url = format!("postgres://postgres@127.0.0.1:{}/none", closed_port());
    let (addr, stop) = app.sibling_api(&[("DATABASE_URL", &url)]).await;
    let resp = app
        .client
        .get(format!("http://{addr}/api/v1/contacts"))
        .bearer_auth(&app.key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 503);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "service_unavailable");
    let ready = app
        .client
        .get(format!("http://{addr}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    stop.cancel();
}

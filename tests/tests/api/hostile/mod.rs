//! Hostile input: requests an attacker or a careless client sends, each refused quickly with a
//! 4xx (or served, where legal), the service healthy after each. Where a test guards cost its
//! time bound is generous (about ten times what was measured, see `docs/benchmarks.md`), so it
//! fails only when the cost has grown by an order of magnitude.

mod bodies;
mod cost;
mod dependencies;
mod http;
mod third_party;
mod values;

use parley_tests::TestApp;
use serde_json::json;

/// A template of `channel` with `body`; its id.
async fn template(app: &TestApp, channel: &str, body: &str) -> String {
    app.post(
        "/api/v1/templates",
        json!({"name": "t", "channel": channel, "body": body, "subject": "Hi"}),
    )
    .await
    .expect(201)
    .id()
}

/// A contact named Ada; its id.
async fn contact(app: &TestApp) -> String {
    parley_tests::seed::contact(app, "Ada").await
}

/// The service still answers a plain request.
async fn still_healthy(app: &TestApp) {
    app.get("/api/v1/contacts?pageSize=1").await.expect(200);
}

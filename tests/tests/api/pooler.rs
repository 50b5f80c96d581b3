//! The API and the worker through PgBouncer in transaction pooling mode (started by
//! `ops/test`), fewer server connections than clients: requests in parallel, a broadcast, a
//! webhook (the relay listens on the direct session URL) and SLA breaches, end to end.

use std::collections::HashSet;
use std::time::Duration;

use parley_tests::provider::FakeProvider;
use parley_tests::receiver::Receiver;
use parley_tests::{seed, spawn_pooled_app, wait_until};
use serde_json::json;

#[tokio::test]
async fn the_api_and_a_worker_run_through_pgbouncer() {
    let provider = FakeProvider::start().await;
    let receiver = Receiver::start().await;
    // More client connections (API 12, worker 12) than the pooler's 5 server connections per
    // database: statements prepared on one server connection run on another.
    let app = spawn_pooled_app(&[
        ("PARLEY_DB_MAX_CONNECTIONS", "12"),
        ("PARLEY_WEBHOOK_ALLOW_PRIVATE", "true"),
    ])
    .await;
    let pooled = app.pooled_settings();
    let mut settings: Vec<(&str, &str)> = pooled.iter().map(|(k, v)| (*k, v.as_str())).collect();
    settings.extend([
        ("PARLEY_DB_MAX_CONNECTIONS", "12"),
        ("PARLEY_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str()),
    ]);
    let _worker = app.spawn_worker(&settings).await;

    app.post(
        "/api/v1/webhooks",
        json!({"url": receiver.url, "events": ["lead.created"]}),
    )
    .await
    .expect(201);
    app.post(
        "/api/v1/sla-policies",
        json!({"name": "P", "firstResponseSeconds": 1, "nextResponseSeconds": 3600,
            "resolutionSeconds": 86400, "businessHoursOnly": false, "warningThresholdSeconds": 0}),
    )
    .await
    .expect(201);

    // Requests in parallel: each a transaction (or several) on whichever server connection
    // the pooler gives it.
    let created = futures::future::join_all((0..60).map(|i| {
        let app = &app;
        async move {
            match i % 3 {
                0 => {
                    app.post("/api/v1/leads", json!({"name": format!("Lead {i}")}))
                        .await
                }
                1 => {
                    app.post("/api/v1/tickets", json!({"subject": format!("T {i}")}))
                        .await
                }
                _ => {
                    app.post(
                        "/api/v1/contacts",
                        json!({"source": "web", "name": format!("C {i}")}),
                    )
                    .await
                }
            }
        }
    }))
    .await;
    for r in &created {
        r.expect(201);
    }
    let lists = futures::future::join_all(
        ["/api/v1/leads", "/api/v1/tickets", "/api/v1/contacts"]
            .iter()
            .cycle()
            .take(30)
            .map(|path| app.get(path)),
    )
    .await;
    for page in &lists {
        assert_eq!(page.status, 200, "{}", page.body);
        assert_eq!(page.body["meta"]["total"], 20);
    }

    // A broadcast, sent once per recipient.
    let contacts = seed::contacts(&app, 300).await;
    let template = app
        .post(
            "/api/v1/templates",
            json!({"name": "T", "channel": "email", "body": "Hi"}),
        )
        .await
        .id();
    let id = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "B", "templateId": template, "contactIds": contacts, "sendNow": true}),
        )
        .await
        .expect(201)
        .id();
    let b = app
        .wait_for(&format!("/api/v1/broadcasts/{id}"), 60, |b| {
            b["data"]["status"] == "completed"
        })
        .await;
    assert_eq!(b["data"]["sentCount"], 300);
    assert_eq!(provider.accepted().len(), 300, "one message per recipient");

    // Each lead's event delivered.
    let delivered = receiver.wait_for(20, 30).await;
    let events: HashSet<String> = delivered
        .iter()
        .map(|r| r.json()["data"]["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(events.len(), 20);

    // Every ticket's first response breached, found by the SLA checks.
    app.clock.advance(Duration::from_millis(1100));
    let breached = wait_until(30, || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM sla_states WHERE organization_id = $1
             AND first_response_breached_at IS NOT NULL",
        )
        .bind(app.org_id)
        .fetch_one(&app.pool)
        .await
        .unwrap()
            == 20
    })
    .await;
    assert!(breached, "every breach recorded through the pooler");
}

//! The API and the worker through PgBouncer in transaction pooling mode (started by
//! `ops/test`), fewer server connections than clients: requests in parallel, a broadcast, a
//! webhook (the relay listens on the direct session URL) and SLA breaches, end to end.

use parley_tests::provider::FakeProvider;
use parley_tests::receiver::Receiver;
use parley_tests::{TestApp, scenario};
use serde_json::json;

#[tokio::test]
async fn the_api_and_a_worker_run_through_pgbouncer() {
    let provider = FakeProvider::start().await;
    let receiver = Receiver::start().await;
    // More client connections (API 12, worker 12) than the pooler's 5 server connections per
    // database: statements prepared on one server connection run on another.
    let app = TestApp::builder()
        .pgbouncer()
        .env(&[
            ("PARLEY_DB_MAX_CONNECTIONS", "12"),
            ("PARLEY_WEBHOOK_ALLOW_PRIVATE", "true"),
        ])
        .start()
        .await;
    let pooled = app.pooled_settings();
    let mut settings: Vec<(&str, &str)> = pooled.iter().map(|(k, v)| (*k, v.as_str())).collect();
    settings.extend([
        ("PARLEY_DB_MAX_CONNECTIONS", "12"),
        ("PARLEY_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str()),
    ]);
    let _worker = app.spawn_worker(&settings).await;

    scenario::subscribe_and_set_sla(&app, &receiver).await;

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

    scenario::broadcast_sent_once(&app, &provider, 300).await;
    // Each lead's event delivered; every ticket's first response breached, found by the SLA
    // checks.
    scenario::events_and_breaches_arrive(&app, &receiver, 20, 20).await;
}

/// PgBouncer drops the startup option that carries the API's statement timeout: the API
/// refuses to start on connections without one. (With the database carrying one, it starts:
/// the test above.)
#[tokio::test]
async fn the_api_refuses_to_start_when_its_connections_have_no_statement_timeout() {
    let db = parley_tests::ScratchDatabase::new().await;
    let pooled = parley_tests::through_pgbouncer(&db.url);
    let settings = [
        ("DATABASE_URL", pooled.as_str()),
        ("PARLEY_DATABASE_SESSION_URL", db.url.as_str()),
        ("PARLEY_AUTO_MIGRATE", "false"),
    ];
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let config = parley_tests::test_config("parley-test-no-timeout", &settings);
    let refused = parley_api::startup::Application::build(config, Some(listener)).await;
    let why = format!("{:#}", refused.err().expect("the API refused to start"));
    assert!(why.contains("statement_timeout is not in force"), "{why}");
}

//! What third parties answer is stored only as text Postgres can hold, and nothing loops
//! forever: work whose outcome cannot be recorded is given up after a bounded number of tries.

use parley_tests::provider::{FakeProvider, Reply};
use parley_tests::receiver::{Answer, Receiver};
use parley_tests::{TestApp, metrics_text, seed, wait_until};
use serde_json::{Value, json};

/// Private addresses (the receivers are on 127.0.0.1), fast retries and reconciliation.
const LOCAL: &[(&str, &str)] = &[
    ("PARLEY_WEBHOOK_ALLOW_PRIVATE", "true"),
    ("PARLEY_WEBHOOK_RETRY_BASE_MS", "100"),
    ("PARLEY_WEBHOOK_TIMEOUT_MS", "1000"),
    ("PARLEY_RECONCILE_AFTER_SECS", "1"),
];

async fn subscribe(app: &TestApp, url: &str) -> String {
    app.post(
        "/api/v1/webhooks",
        json!({"url": url, "events": ["lead.created"]}),
    )
    .await
    .expect(201)
    .id()
}

async fn logs(app: &TestApp, webhook: &str) -> Vec<Value> {
    app.get(&format!("/api/v1/webhooks/{webhook}/logs?pageSize=100"))
        .await
        .data()
        .as_array()
        .cloned()
        .unwrap_or_default()
}

async fn send_email(app: &TestApp) -> String {
    let contacts = seed::contacts(app, 1).await;
    let template = super::template(app, "email", "Hello").await;
    app.post(
        "/api/v1/broadcasts",
        json!({"broadcastName": "B", "templateId": template, "contactIds": contacts, "sendNow": true}),
    )
    .await
    .expect(201)
    .id()
}

async fn recipient(app: &TestApp, broadcast: &str) -> Value {
    app.get(&format!("/api/v1/broadcasts/{broadcast}/recipients"))
        .await
        .data()[0]
        .clone()
}

#[tokio::test]
async fn a_receiver_answering_with_nul_bytes_is_logged_once_and_delivered() {
    let app = TestApp::builder().own_database().env(LOCAL).start().await;
    let _worker = app.spawn_worker(LOCAL).await;
    let receiver = Receiver::start().await;
    receiver.always(Answer::Body(200, b"ok\0\0 and \xff more"));
    let webhook = subscribe(&app, &receiver.url).await;
    app.post("/api/v1/leads", json!({"name": "Ada"}))
        .await
        .expect(201);
    assert!(
        wait_until(20, || async { !logs(&app, &webhook).await.is_empty() }).await,
        "the attempt is logged"
    );
    let log = logs(&app, &webhook).await;
    assert_eq!(log.len(), 1);
    assert_eq!(log[0]["status"], "succeeded");
    assert_eq!(
        log[0]["responseBody"], "ok\u{fffd}\u{fffd} and \u{fffd} more",
        "NUL and invalid UTF-8 are replaced"
    );
    // A later event must be delivered too, after the first: then nothing more is posted.
    app.post("/api/v1/leads", json!({"name": "Grace"}))
        .await
        .expect(201);
    receiver.received_at_least(2, 20).await;
    // Both deliveries are delivered in Postgres, which nothing takes again: no repost can come.
    let delivered = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM webhook_deliveries WHERE webhook_id = $1::uuid AND status = 'delivered'",
        )
        .bind(&webhook)
        .fetch_one(&app.pool)
        .await
        .unwrap()
            == 2
    };
    assert!(wait_until(20, delivered).await, "both deliveries delivered");
    assert_eq!(receiver.received().len(), 2, "each delivery posted once");
}

#[tokio::test]
async fn provider_text_with_nul_is_stored_cleaned() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    let _worker = app
        .spawn_worker(&[("PARLEY_CHANNEL_EMAIL_URL", &provider.url)])
        .await;
    provider.script(vec![Reply::Raw {
        status: 400,
        body: json!({"code": "bad\u{0}code", "message": "no\u{0}pe"}),
    }]);
    let broadcast = send_email(&app).await;
    app.wait_for(&format!("/api/v1/broadcasts/{broadcast}"), 20, |b| {
        b["data"]["status"] == "failed"
    })
    .await;
    let r = recipient(&app, &broadcast).await;
    assert_eq!(r["status"], "failed");
    assert_eq!(r["errorCode"], "bad\u{fffd}code");
    assert_eq!(r["errorMessage"], "no\u{fffd}pe");

    provider.script(vec![Reply::Raw {
        status: 200,
        body: json!({"messageId": "m\u{0}1"}),
    }]);
    let broadcast = send_email(&app).await;
    app.wait_for(&format!("/api/v1/broadcasts/{broadcast}"), 20, |b| {
        b["data"]["status"] == "completed"
    })
    .await;
    assert_eq!(recipient(&app, &broadcast).await["status"], "sent");
}

/// Makes every write of an outcome fail in this database, as a broken column or constraint
/// would: the work stays due, and only the ceiling ends it.
async fn refuse_outcomes(app: &TestApp, table: &str, when: &str) {
    for sql in [
        "CREATE FUNCTION refuse_outcome() RETURNS trigger LANGUAGE plpgsql AS
         $$ BEGIN RAISE EXCEPTION 'outcome refused by the test'; END $$"
            .to_owned(),
        format!(
            "CREATE TRIGGER refuse_outcome BEFORE INSERT OR UPDATE ON {table}
             FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION refuse_outcome()"
        ),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .execute(&app.pool)
            .await
            .expect("trigger");
    }
}

#[tokio::test]
async fn a_recipient_whose_outcome_cannot_be_recorded_is_given_up_after_a_few_sends() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().env(LOCAL).start().await;
    // A sent outcome cannot be written; giving up (attempts_exhausted) can.
    refuse_outcomes(
        &app,
        "broadcast_recipients",
        "NEW.status = 'sent' AND NEW.error_code IS NULL",
    )
    .await;
    let mut env = LOCAL.to_vec();
    env.push(("PARLEY_CHANNEL_EMAIL_URL", &provider.url));
    let worker = app.spawn_worker(&env).await;
    let broadcast = send_email(&app).await;
    app.wait_for(&format!("/api/v1/broadcasts/{broadcast}"), 60, |b| {
        b["data"]["status"] == "failed"
    })
    .await;
    let r = recipient(&app, &broadcast).await;
    assert_eq!(r["status"], "failed");
    assert_eq!(r["errorCode"], "attempts_exhausted");
    let sends = provider.calls().len();
    assert!(
        (1..=1 + parley_worker::job::RetryPolicy::DEFAULT.requeue_ceiling() as usize)
            .contains(&sends),
        "sent {sends} times"
    );
    let metrics = metrics_text(worker.metrics_addr).await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("parley_attempts_exhausted_total{kind=\"recipient\"} 1")),
        "counted"
    );
}

#[tokio::test]
async fn a_webhook_delivery_whose_attempt_cannot_be_recorded_is_given_up_after_a_few_posts() {
    let app = TestApp::builder().own_database().env(LOCAL).start().await;
    refuse_outcomes(&app, "webhook_attempts", "true").await;
    let worker = app.spawn_worker(LOCAL).await;
    let receiver = Receiver::start().await;
    let webhook = subscribe(&app, &receiver.url).await;
    app.post("/api/v1/leads", json!({"name": "Ada"}))
        .await
        .expect(201);
    let failed = || async {
        sqlx::query_scalar::<_, String>(
            "SELECT status FROM webhook_deliveries WHERE webhook_id = $1::uuid",
        )
        .bind(&webhook)
        .fetch_optional(&app.pool)
        .await
        .unwrap()
        .as_deref()
            == Some("failed")
    };
    assert!(wait_until(60, failed).await, "the delivery is given up");
    let posts = receiver.received().len();
    assert!(
        (1..=1 + parley_worker::job::RetryPolicy::DEFAULT.requeue_ceiling() as usize)
            .contains(&posts),
        "posted {posts} times"
    );
    // Given up for good: a later event is posted, this one no more.
    app.post("/api/v1/leads", json!({"name": "Grace"}))
        .await
        .expect(201);
    // The later event's post is the sentinel: the given-up delivery is `failed` in Postgres,
    // which nothing takes again, so no post of it can follow.
    receiver.received_at_least(posts + 1, 20).await;
    let later = receiver.received();
    let first_id = later[0].header("x-parley-delivery").to_owned();
    assert_eq!(
        later
            .iter()
            .filter(|r| r.header("x-parley-delivery") == first_id)
            .count(),
        posts
    );
    drop(worker);
}

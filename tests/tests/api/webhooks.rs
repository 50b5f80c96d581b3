//! Webhooks end to end: the API, a worker in this process, and receivers on 127.0.0.1.

use std::collections::HashSet;
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use parley_jobs::{Jobs, QueueName};
use parley_tests::receiver::{Answer, Received, Receiver};
use parley_tests::{TestApp, TestWorker, seed};
use serde_json::{Value, json};
use sha2::Sha256;
use uuid::Uuid;

/// Private addresses allowed (the receivers are on 127.0.0.1), fast retries.
const LOCAL: &[(&str, &str)] = &[
    ("PARLEY_WEBHOOK_ALLOW_PRIVATE", "true"),
    ("PARLEY_WEBHOOK_RETRY_BASE_MS", "100"),
    ("PARLEY_WEBHOOK_TIMEOUT_MS", "1000"),
];

async fn setup(extra: &[(&str, &str)]) -> (TestApp, TestWorker, Receiver) {
    let mut env = LOCAL.to_vec();
    env.extend_from_slice(extra);
    let app = TestApp::builder().own_database().env(&env).start().await;
    let worker = app.spawn_worker(&env).await;
    (app, worker, Receiver::start().await)
}

/// Creates a webhook for `events` to `url`; returns (id, secret).
async fn subscribe(app: &TestApp, url: &str, events: &[&str]) -> (String, String) {
    let created = app
        .post("/api/v1/webhooks", json!({"url": url, "events": events}))
        .await;
    created.expect(201);
    (
        created.id(),
        created.data()["secret"].as_str().unwrap().to_owned(),
    )
}

async fn create_lead(app: &TestApp, name: &str) -> Value {
    app.post("/api/v1/leads", json!({"name": name}))
        .await
        .expect(201)
        .data()
        .clone()
}

/// Hex HMAC-SHA256 of `body` under `secret`, computed here, not by the service's code.
fn hmac_hex(secret: &str, body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

fn signatures(r: &Received) -> Vec<String> {
    r.header("x-parley-signature")
        .split(',')
        .map(|s| s.trim().strip_prefix("sha256=").unwrap_or("").to_owned())
        .collect()
}

async fn logs(app: &TestApp, webhook: &str, query: &str) -> Vec<Value> {
    app.get(&format!(
        "/api/v1/webhooks/{webhook}/logs?pageSize=100{query}"
    ))
    .await
    .data()
    .as_array()
    .unwrap()
    .clone()
}

/// The deliveries made for `webhook`, in Postgres.
async fn deliveries_of(app: &TestApp, webhook: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM webhook_deliveries WHERE webhook_id = $1::uuid")
        .bind(webhook)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

/// Waits until the webhook's log holds `n` attempts.
async fn wait_logs(app: &TestApp, webhook: &str, n: usize) -> Vec<Value> {
    let body = app
        .wait_for(
            &format!("/api/v1/webhooks/{webhook}/logs?pageSize=100"),
            30,
            |b| b["data"].as_array().is_some_and(|a| a.len() >= n),
        )
        .await;
    body["data"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_delivery_carries_the_payload_headers_and_a_signature_over_the_raw_body() {
    let (app, _worker, receiver) = setup(&[]).await;
    let (webhook, secret) = subscribe(&app, &receiver.url, &["lead.created"]).await;
    assert!(secret.starts_with("whsec_"));
    let lead = create_lead(&app, "Charles").await;
    let got = receiver.received_at_least(1, 10).await;
    let r = &got[0];
    assert_eq!(signatures(r), vec![hmac_hex(&secret, &r.body)]);
    assert_eq!(r.header("content-type"), "application/json");
    let body = r.json();
    assert_eq!(body["event"], "lead.created");
    assert_eq!(body["organization_id"], app.org_id.to_string());
    assert_eq!(
        body["data"], lead,
        "data is the lead as the API returned it"
    );
    assert_eq!(body["metadata"]["attempt"], 1);
    assert_eq!(body["metadata"]["version"], "1");
    assert_eq!(r.header("x-parley-event"), "lead.created");
    assert_eq!(
        r.header("x-parley-delivery"),
        body["metadata"]["delivery_id"].as_str().unwrap()
    );
    let sent_at: i64 = r.header("x-parley-timestamp").parse().unwrap();
    assert!((sent_at - chrono::Utc::now().timestamp()).abs() < 60);
    assert!(parley_types::time::Timestamp::parse(body["timestamp"].as_str().unwrap()).is_some());
    let log = wait_logs(&app, &webhook, 1).await;
    assert_eq!(log[0]["status"], "succeeded");
    assert_eq!(log[0]["responseStatus"], 200);
    assert_eq!(log[0]["responseBody"], "ok");
    assert_eq!(log[0]["deliveryId"], body["metadata"]["delivery_id"]);
    // Secrets are shown once.
    let listed = app.get(&format!("/api/v1/webhooks/{webhook}")).await;
    assert!(listed.data().get("secret").is_none());
}

#[tokio::test]
async fn a_rotated_secret_signs_beside_the_new_one() {
    let (app, _worker, receiver) = setup(&[]).await;
    let (webhook, old) = subscribe(&app, &receiver.url, &["lead.created"]).await;
    let rotated = app
        .post(
            &format!("/api/v1/webhooks/{webhook}/rotate-secret"),
            json!({}),
        )
        .await;
    rotated.expect(200);
    let new = rotated.data()["secret"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert!(rotated.data()["previousSecretExpiresAt"].is_string());
    create_lead(&app, "Ada").await;
    let r = &receiver.received_at_least(1, 10).await[0];
    assert_eq!(
        signatures(r),
        vec![hmac_hex(&new, &r.body), hmac_hex(&old, &r.body)]
    );
}

#[tokio::test]
async fn deliveries_verify_with_the_standard_webhooks_library_under_either_secret_of_a_rotation() {
    use standardwebhooks::Webhook;
    let (app, _worker, receiver) = setup(&[]).await;
    let (webhook, old) = subscribe(&app, &receiver.url, &["lead.created"]).await;
    create_lead(&app, "Ada").await;
    let r = &receiver.received_at_least(1, 10).await[0];
    Webhook::new(&old)
        .unwrap()
        .verify(&r.body, &r.headers)
        .expect("verified by the standard's library");
    assert_eq!(r.header("webhook-id"), r.header("x-parley-delivery"));
    assert_eq!(
        r.header("webhook-timestamp"),
        r.header("x-parley-timestamp")
    );
    assert!(
        Webhook::new(&old)
            .unwrap()
            .verify(b"{}", &r.headers)
            .is_err(),
        "another body does not verify"
    );

    let rotated = app
        .post(
            &format!("/api/v1/webhooks/{webhook}/rotate-secret"),
            json!({}),
        )
        .await;
    let new = rotated.expect(200).data()["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    create_lead(&app, "Grace").await;
    let r = &receiver.received_at_least(2, 10).await[1];
    assert_eq!(r.header("webhook-signature").split(' ').count(), 2);
    for secret in [&new, &old] {
        Webhook::new(secret)
            .unwrap()
            .verify(&r.body, &r.headers)
            .expect("either secret verifies during the rotation");
    }
    let stranger = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    assert!(
        Webhook::new(stranger)
            .unwrap()
            .verify(&r.body, &r.headers)
            .is_err()
    );
}

#[tokio::test]
async fn failures_are_retried_under_one_delivery_id_until_one_succeeds() {
    let (app, _worker, receiver) = setup(&[]).await;
    receiver.script(vec![Answer::Status(500), Answer::Status(502)]);
    let (webhook, _) = subscribe(&app, &receiver.url, &["lead.created"]).await;
    create_lead(&app, "Ada").await;
    let got = receiver.received_at_least(3, 20).await;
    let ids: HashSet<String> = got
        .iter()
        .map(|r| r.header("x-parley-delivery").to_owned())
        .collect();
    assert_eq!(ids.len(), 1, "one delivery id for every attempt");
    let attempts: Vec<i64> = got
        .iter()
        .map(|r| r.json()["metadata"]["attempt"].as_i64().unwrap())
        .collect();
    assert_eq!(attempts, vec![1, 2, 3]);
    // The success is logged with the delivery marked delivered in the same transaction; a
    // delivered delivery is never taken again.
    let log = wait_logs(&app, &webhook, 3).await;
    assert_eq!(receiver.received().len(), 3, "no attempt after the success");
    // Newest first.
    let summary: Vec<(i64, &str, i64)> = log
        .iter()
        .map(|a| {
            (
                a["attempt"].as_i64().unwrap(),
                a["status"].as_str().unwrap(),
                a["responseStatus"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (3, "succeeded", 200),
            (2, "failed", 502),
            (1, "failed", 500)
        ]
    );
    assert!(
        log[1]["nextAttemptAt"].is_string(),
        "a failure says when the next attempt is"
    );
    assert_eq!(logs(&app, &webhook, "&status=failed").await.len(), 2);
    assert_eq!(logs(&app, &webhook, "&event=lead.created").await.len(), 3);
    assert_eq!(logs(&app, &webhook, "&event=user.created").await.len(), 0);
    app.get(&format!("/api/v1/webhooks/{webhook}/logs?status=maybe"))
        .await
        .expect_error(422, "validation_error");
}

#[tokio::test]
async fn a_receiver_that_sleeps_past_the_timeout_is_retried() {
    let (app, _worker, receiver) = setup(&[]).await;
    receiver.script(vec![Answer::Sleep(Duration::from_millis(2500))]);
    let (webhook, _) = subscribe(&app, &receiver.url, &["lead.created"]).await;
    create_lead(&app, "Ada").await;
    receiver.received_at_least(2, 20).await;
    let log = wait_logs(&app, &webhook, 2).await;
    assert_eq!(log[1]["status"], "failed");
    assert!(
        log[1]["error"].as_str().unwrap().contains("timed out"),
        "{}",
        log[1]
    );
    assert!(log[1]["responseStatus"].is_null());
    assert_eq!(log[0]["status"], "succeeded");
}

#[tokio::test]
async fn a_redirect_is_a_failure_and_is_not_followed() {
    let (app, _worker, receiver) = setup(&[("PARLEY_WEBHOOK_MAX_ATTEMPTS", "1")]).await;
    let elsewhere = receiver.url.replace("/hook", "/elsewhere");
    receiver.script(vec![Answer::Redirect(elsewhere.clone())]);
    let (webhook, _) = subscribe(&app, &receiver.url, &["lead.created"]).await;
    create_lead(&app, "Ada").await;
    let log = wait_logs(&app, &webhook, 1).await;
    assert_eq!(
        (log[0]["status"].clone(), log[0]["responseStatus"].clone()),
        (json!("failed"), json!(302))
    );
    assert!(log[0]["error"].as_str().unwrap().contains("not followed"));
    assert!(
        log[0]["nextAttemptAt"].is_null(),
        "one attempt allowed: given up"
    );
    // A redirect would have been followed within the attempt, which is logged: it was not.
    assert_eq!(
        receiver.received().len(),
        1,
        "the redirect target was never called"
    );
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let (app, _worker, receiver) = setup(&[]).await;
    receiver.script(vec![Answer::StatusRetryAfter(429, 2)]);
    subscribe(&app, &receiver.url, &["lead.created"]).await;
    create_lead(&app, "Ada").await;
    let got = receiver.received_at_least(2, 20).await;
    let waited = got[1].at - got[0].at;
    assert!(
        waited >= Duration::from_millis(1900),
        "retried after {waited:?}"
    );
}

#[tokio::test]
async fn private_addresses_are_refused_unless_allowed() {
    let app = TestApp::builder().own_database().start().await;
    let worker = app
        .spawn_worker(&[("PARLEY_WEBHOOK_RETRY_BASE_MS", "100")])
        .await;
    let receiver = Receiver::start().await;
    for url in [
        "https://127.0.0.1/hook",
        "https://10.0.0.1/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/hook",
        "http://hooks.example.com/plain-http",
    ] {
        let resp = app
            .post(
                "/api/v1/webhooks",
                json!({"url": url, "events": ["lead.created"]}),
            )
            .await;
        resp.expect_error(422, "validation_error");
        assert_eq!(resp.field(), "url", "{url}");
    }
    // A name that resolves to loopback passes creation and is refused at connect time.
    let port = receiver
        .url
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let (webhook, _) = subscribe(
        &app,
        &format!("https://localhost:{port}/hook"),
        &["lead.created"],
    )
    .await;
    create_lead(&app, "Ada").await;
    let log = wait_logs(&app, &webhook, 1).await;
    assert_eq!(log[0]["status"], "failed");
    let error = log[0]["error"].as_str().unwrap();
    assert!(error.contains("no public address"), "{error}");
    assert!(receiver.received().is_empty());
    drop(worker);
}

#[tokio::test]
async fn events_of_one_organization_never_reach_anothers_webhooks() {
    let (app, _worker, receiver) = setup(&[]).await;
    let other = Receiver::start().await;
    let (_, b_key) = app.new_org("Organization B").await;
    let b_webhook = app
        .send(
            reqwest::Method::POST,
            "/api/v1/webhooks",
            Some(&b_key),
            Some(&json!({"url": other.url, "events": ["lead.created"]})),
        )
        .await;
    b_webhook.expect(201);
    subscribe(&app, &receiver.url, &["lead.created"]).await;
    create_lead(&app, "Ada").await;
    // The relay makes an event's deliveries, for every webhook it reaches, in one statement:
    // once A's delivery arrived, a delivery to B would exist too.
    receiver.received_at_least(1, 10).await;
    assert_eq!(
        deliveries_of(&app, &b_webhook.id()).await,
        0,
        "B's webhook got A's event"
    );
    assert!(other.received().is_empty(), "B's webhook got A's event");
    // A user.created webhook does not get lead events.
    let third = Receiver::start().await;
    let (third_webhook, _) = subscribe(&app, &third.url, &["user.created"]).await;
    create_lead(&app, "Bob").await;
    receiver.received_at_least(2, 10).await;
    assert_eq!(deliveries_of(&app, &third_webhook).await, 0);
    assert!(third.received().is_empty());
}

#[tokio::test]
async fn subscriptions_are_checked() {
    let (app, _worker, receiver) = setup(&[]).await;
    let events = app.get("/api/v1/webhooks/events").await;
    let names: Vec<&str> = events
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.len(),
        18,
        "the specification's 12 events and sla.warning, sla.breached, webhook.disabled, \
         broadcast.variant_picked, contact.suppressed, contact.unsubscribed"
    );
    for name in [
        "conversation.started",
        "message.received",
        "ticket.closed",
        "broadcast.sent",
        "user.created",
        "lead.created",
    ] {
        assert!(names.contains(&name), "{name}");
    }
    for events in [json!(["lead.exploded"]), json!([]), json!(["webhook.test"])] {
        app.post(
            "/api/v1/webhooks",
            json!({"url": receiver.url, "events": events}),
        )
        .await
        .expect_error(422, "validation_error");
    }
    let key = app.key_with(&["contacts:read", "leads:write"]).await;
    app.send(
        reqwest::Method::GET,
        "/api/v1/webhooks/events",
        Some(&key),
        None,
    )
    .await
    .expect_error(403, "forbidden");
    let (webhook, _) = subscribe(&app, &receiver.url, &["lead.created", "lead.created"]).await;
    let w = app.get(&format!("/api/v1/webhooks/{webhook}")).await;
    assert_eq!(w.data()["events"], json!(["lead.created"]));
    let updated = app
        .patch(
            &format!("/api/v1/webhooks/{webhook}"),
            json!({"events": ["user.created"], "description": "users"}),
        )
        .await;
    assert_eq!(updated.data()["events"], json!(["user.created"]));
    app.delete(&format!("/api/v1/webhooks/{webhook}"))
        .await
        .expect(200);
    app.get(&format!("/api/v1/webhooks/{webhook}"))
        .await
        .expect_error(404, "not_found");
}

#[tokio::test]
async fn a_redeliver_during_a_failing_attempt_stands() {
    // One attempt allowed: a failure gives the delivery up.
    let (app, _worker, receiver) = setup(&[("PARLEY_WEBHOOK_MAX_ATTEMPTS", "1")]).await;
    // The first answer comes after the 1 s timeout: that attempt fails.
    receiver.script(vec![Answer::Sleep(Duration::from_millis(1500))]);
    let (webhook, _) = subscribe(&app, &receiver.url, &["lead.created"]).await;
    create_lead(&app, "Ada").await;
    // The first attempt has reached the receiver, which holds it.
    let first = receiver.received_at_least(1, 10).await;
    let delivery = first[0].header("x-parley-delivery").to_owned();
    app.post(
        &format!("/api/v1/webhooks/{webhook}/deliveries/{delivery}/redeliver"),
        json!({}),
    )
    .await
    .expect(200);
    // The failed attempt must not give up the delivery the redeliver put back.
    let got = receiver.received_at_least(2, 30).await;
    assert_eq!(got[1].header("x-parley-delivery"), delivery);
    assert_eq!(got[1].json()["metadata"]["attempt"], 2);
    let log = wait_logs(&app, &webhook, 2).await;
    let statuses: Vec<&str> = log.iter().map(|a| a["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, vec!["succeeded", "failed"], "newest first");
}

#[tokio::test]
async fn test_and_redeliver_send_signed_deliveries() {
    let (app, _worker, receiver) = setup(&[]).await;
    let (webhook, secret) = subscribe(&app, &receiver.url, &["user.created"]).await;
    let test = app
        .post(&format!("/api/v1/webhooks/{webhook}/test"), json!({}))
        .await;
    test.expect(200);
    let delivery = test.data()["deliveryId"].as_str().unwrap().to_owned();
    let r = receiver.received_at_least(1, 10).await[0].clone();
    assert_eq!(r.json()["event"], "webhook.test");
    assert_eq!(signatures(&r), vec![hmac_hex(&secret, &r.body)]);
    wait_logs(&app, &webhook, 1).await;
    let again = app
        .post(
            &format!("/api/v1/webhooks/{webhook}/deliveries/{delivery}/redeliver"),
            json!({}),
        )
        .await;
    again.expect(200);
    let got = receiver.received_at_least(2, 10).await;
    assert_eq!(got[1].header("x-parley-delivery"), delivery);
    assert_eq!(got[1].json()["metadata"]["attempt"], 2);
    app.post(
        &format!(
            "/api/v1/webhooks/{webhook}/deliveries/{}/redeliver",
            uuid::Uuid::now_v7()
        ),
        json!({}),
    )
    .await
    .expect_error(404, "not_found");
    // A user.created event carries the user as the API returns it.
    let user = app
        .post(
            "/api/v1/users",
            json!({"firstName": "Grace", "lastName": "Hopper", "email": "g@example.com"}),
        )
        .await;
    let got = receiver.received_at_least(3, 10).await;
    assert_eq!(got[2].json()["event"], "user.created");
    assert_eq!(&got[2].json()["data"], user.data());
}

#[tokio::test]
async fn a_webhook_failing_for_too_long_is_disabled() {
    let (app, worker, receiver) = setup(&[
        ("PARLEY_WEBHOOK_DISABLE_AFTER_SECS", "1"),
        ("PARLEY_WEBHOOK_MAX_ATTEMPTS", "50"),
    ])
    .await;
    receiver.always(Answer::Status(500));
    let (webhook, _) = subscribe(&app, &receiver.url, &["lead.created"]).await;
    let watcher = Receiver::start().await;
    subscribe(&app, &watcher.url, &["webhook.disabled"]).await;
    create_lead(&app, "Ada").await;
    let w = app
        .wait_for(&format!("/api/v1/webhooks/{webhook}"), 30, |b| {
            b["data"]["isActive"] == false
        })
        .await;
    assert!(w["data"]["disabledAt"].is_string());
    assert!(w["data"]["failingSince"].is_string());
    let reason = w["data"]["disabledReason"].as_str().unwrap();
    assert!(
        reason.starts_with("every attempt failed since "),
        "{reason}"
    );
    // The organization's other webhooks hear of it.
    let told = &watcher.received_at_least(1, 30).await[0];
    assert_eq!(told.header("x-parley-event"), "webhook.disabled");
    let body = told.json();
    assert_eq!(body["data"]["id"], webhook.as_str());
    assert_eq!(body["data"]["isActive"], false);
    assert_eq!(body["data"]["disabledReason"], reason);
    assert!(body["data"].get("secret").is_none());
    assert!(body["data"].get("url").is_none(), "a URL may carry a token");
    assert_eq!(body["data"]["host"], "127.0.0.1");
    app.post(&format!("/api/v1/webhooks/{webhook}/test"), json!({}))
        .await
        .expect_error(409, "invalid_state");
    let text = reqwest::get(format!("http://{}/metrics", worker.metrics_addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("parley_webhooks_disabled_total"), "{text}");
    assert!(
        text.contains("parley_webhook_attempts_total{outcome=\"failed\",status_class=\"5xx\"}"),
        "{text}"
    );
    // Enabling it again forgets the failures.
    receiver.always(Answer::Status(200));
    let on = app
        .patch(
            &format!("/api/v1/webhooks/{webhook}"),
            json!({"isActive": true}),
        )
        .await;
    assert_eq!(on.data()["isActive"], true);
    assert!(on.data()["failingSince"].is_null());
    assert!(on.data()["disabledReason"].is_null());
}

#[tokio::test]
async fn a_dead_endpoint_does_not_hold_up_the_others() {
    // The dead endpoint's two attempts outlast the test (a 60 s answer, a 30 s timeout): a
    // third would mean a slot taken beyond the two. (With a 5 s timeout, a suite slow enough
    // that the live endpoint took over 5 s saw the first two time out and two more arrive.)
    let (app, worker, fast) = setup(&[
        ("PARLEY_WEBHOOK_CONCURRENCY_PER_ENDPOINT", "2"),
        ("PARLEY_WEBHOOK_TIMEOUT_MS", "30000"),
    ])
    .await;
    let dead = Receiver::start().await;
    dead.always(Answer::Sleep(Duration::from_secs(60)));
    subscribe(&app, &dead.url, &["lead.created"]).await;
    subscribe(&app, &fast.url, &["lead.created"]).await;
    for i in 0..40 {
        create_lead(&app, &format!("Lead {i}")).await;
    }
    // Every event reaches the live endpoint while the dead one holds its two slots.
    fast.received_at_least(40, 10).await;
    assert!(
        dead.received().len() <= 2,
        "{} requests in flight to the dead endpoint",
        dead.received().len()
    );
    let text = reqwest::get(format!("http://{}/metrics", worker.metrics_addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in [
        "parley_webhook_delivery_latency_seconds_bucket",
        "parley_webhook_outbox_backlog",
        "parley_queue_depth{queue=\"webhook-delivery\"",
    ] {
        assert!(text.contains(name), "{name} is not exported");
    }
}

#[tokio::test]
async fn a_slow_endpoint_gets_every_delivery_once_within_its_concurrency() {
    let (app, _worker, slow) = setup(&[("PARLEY_WEBHOOK_CONCURRENCY_PER_ENDPOINT", "2")]).await;
    slow.always(Answer::Sleep(Duration::from_millis(400)));
    let (webhook, _) = subscribe(&app, &slow.url, &["lead.created"]).await;
    for i in 0..12 {
        create_lead(&app, &format!("Lead {i}")).await;
    }
    // Deliveries that find both slots taken go back without using an attempt, and the webhook
    // is fed from Postgres while it is stalled: each arrives once, as attempt 1.
    let got = slow.received_at_least(12, 30).await;
    let ids: HashSet<&str> = got.iter().map(|r| r.header("x-parley-delivery")).collect();
    assert_eq!(ids.len(), 12);
    assert!(got.iter().all(|r| r.json()["metadata"]["attempt"] == 1));
    assert!(
        slow.peak_in_flight() <= 2,
        "{} requests at once",
        slow.peak_in_flight()
    );
    let log = wait_logs(&app, &webhook, 12).await;
    assert!(log.iter().all(|a| a["status"] == "succeeded"), "{log:?}");
}

#[tokio::test]
async fn a_finished_broadcast_emits_its_event() {
    let (app, _worker, receiver) = setup(&[]).await;
    subscribe(&app, &receiver.url, &["broadcast.sent", "broadcast.failed"]).await;
    let id = seed::email_broadcast(&app, 3).await;
    let got = receiver.received_at_least(1, 30).await;
    let body = got[0].json();
    assert_eq!(body["event"], "broadcast.sent");
    assert_eq!(body["data"]["id"], id);
    assert_eq!(body["data"]["status"], "completed");
    assert_eq!(body["data"]["sentCount"], 3);
    let b = app.get(&format!("/api/v1/broadcasts/{id}")).await;
    assert_eq!(
        &body["data"],
        b.data(),
        "data is the broadcast as the API returns it"
    );
}

#[tokio::test]
async fn a_delivery_whose_job_was_lost_is_enqueued_again_while_the_queue_is_busy() {
    let (app, _worker, receiver) = setup(&[("PARLEY_RECONCILE_AFTER_SECS", "1")]).await;
    let (webhook, _) = subscribe(&app, &receiver.url, &["lead.created"]).await;
    create_lead(&app, "Ada").await;
    let first = receiver.received_at_least(1, 30).await;
    let delivery = first[0].header("x-parley-delivery").to_owned();

    // Live work of another organization fills the queue: jobs of deliveries that do not
    // exist, each finding nothing, parked in their webhooks' lanes behind that organization's
    // slots.
    let redis = app.redis().await;
    let jobs = Jobs::new(&redis);
    let busy_org = Uuid::now_v7();
    let other: Vec<(Uuid, Uuid, Uuid)> = (0..9_000)
        .map(|_| (busy_org, Uuid::now_v7(), Uuid::now_v7()))
        .collect();
    jobs.deliver_webhooks(&other).await.unwrap();
    // They wait in their lanes, a few in the ready list: left in apalis' scheduled set, a
    // burst past ~8,000 would stick the queue (its fetch promotes them all in one Lua
    // `unpack()`).
    // (A refill's few jobs may be caught between apalis' push and their promotion.)
    let queued = jobs.depth(QueueName::WebhookDelivery).await.unwrap();
    assert!(queued.scheduled <= 16, "{queued:?}");
    assert!(queued.ready + queued.parked > 8_000, "{queued:?}");
    // The delivery's job is lost: due an hour ago, enqueued half an hour ago, not attempted
    // since.
    sqlx::query(
        "UPDATE webhook_deliveries SET status = 'pending',
            next_attempt_at = now() - interval '1 hour', enqueued_at = now() - interval '30 minutes'
         WHERE webhook_id = $1::uuid",
    )
    .bind(&webhook)
    .execute(&app.pool)
    .await
    .unwrap();

    // The relay enqueues it again behind the live work, without waiting for the queue to empty.
    let enqueued_again = parley_tests::wait_until(30, || async {
        sqlx::query_scalar::<_, bool>(
            "SELECT enqueued_at > now() - interval '1 minute' FROM webhook_deliveries
             WHERE webhook_id = $1::uuid",
        )
        .bind(&webhook)
        .fetch_one(&app.pool)
        .await
        .unwrap()
    })
    .await;
    let depth = jobs.depth(QueueName::WebhookDelivery).await.unwrap();
    let waiting = depth.ready + depth.parked;
    assert!(enqueued_again, "the lost delivery was not enqueued again");
    assert!(
        waiting > 0,
        "it was enqueued again only once the queue was empty"
    );
    // And posted again under its delivery id once its turn comes.
    let both = receiver.received_at_least(2, 120).await;
    assert_eq!(both[1].header("x-parley-delivery"), delivery);
}

async fn failed_deliveries(app: &TestApp, webhook: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM webhook_deliveries WHERE webhook_id = $1::uuid AND status = 'failed'",
    )
    .bind(webhook)
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

fn now_rfc3339() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

#[tokio::test]
async fn recover_queues_again_the_failed_deliveries_of_its_window_only() {
    let (app, _worker, receiver) = setup(&[("PARLEY_WEBHOOK_MAX_ATTEMPTS", "1")]).await;
    receiver.always(Answer::Status(500));
    let (webhook, _) = subscribe(&app, &receiver.url, &["lead.created"]).await;
    let fail = |n: i64| {
        let (app, webhook) = (&app, &webhook);
        async move {
            assert!(
                parley_tests::wait_until(30, || async {
                    failed_deliveries(app, webhook).await == n
                })
                .await
            );
        }
    };
    create_lead(&app, "Before").await;
    fail(1).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let since = now_rfc3339();
    create_lead(&app, "In one").await;
    create_lead(&app, "In two").await;
    fail(3).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let until = now_rfc3339();
    create_lead(&app, "After").await;
    fail(4).await;
    let before = receiver.received().len();

    receiver.always(Answer::Status(200));
    let path = format!("/api/v1/webhooks/{webhook}/recover");
    app.post(&path, json!({"since": until, "until": since}))
        .await
        .expect_error(422, "validation_error");
    let started = app
        .post(&path, json!({"since": since, "until": until}))
        .await;
    started.expect(201);
    assert_eq!(started.data()["status"], "running");
    let recovery = started.id();
    let done = app
        .wait_for(
            &format!("/api/v1/webhooks/{webhook}/recoveries/{recovery}"),
            30,
            |b| b["data"]["status"] == "completed",
        )
        .await;
    assert_eq!(done["data"]["recovered"], 2);
    let got = receiver.received_at_least(before + 2, 30).await;
    let mut names: Vec<String> = got[before..]
        .iter()
        .map(|r| r.json()["data"]["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["In one", "In two"]);
    assert!(
        parley_tests::wait_until(10, || async {
            failed_deliveries(&app, &webhook).await == 2
        })
        .await,
        "the deliveries outside the window stay failed"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.received().len(), before + 2, "nothing else sent");
}

#[tokio::test]
async fn a_webhooks_rate_limit_spaces_its_deliveries() {
    let (app, _worker, receiver) = setup(&[]).await;
    for bad in [json!(0), json!(10_001), json!(2.5), json!("4")] {
        app.post(
            "/api/v1/webhooks",
            json!({"url": receiver.url, "events": ["lead.created"], "rateLimit": bad}),
        )
        .await
        .expect_error(422, "validation_error");
    }
    let created = app
        .post(
            "/api/v1/webhooks",
            json!({"url": receiver.url, "events": ["lead.created"], "rateLimit": 4}),
        )
        .await;
    created.expect(201);
    assert_eq!(created.data()["rateLimit"], 4);
    for i in 0..8 {
        create_lead(&app, &format!("Lead {i}")).await;
    }
    let got = receiver.received_at_least(8, 60).await;
    let mut at: Vec<std::time::Instant> = got.iter().map(|r| r.at).collect();
    at.sort();
    let gaps: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
    // 4 a second: a slot every 250 ms, whatever the jobs and the network add.
    assert!(
        at[7] - at[0] >= Duration::from_millis(1_600),
        "8 deliveries in {:?}: {gaps:?}",
        at[7] - at[0]
    );
    assert!(
        gaps.iter().all(|g| *g >= Duration::from_millis(150)),
        "{gaps:?}"
    );
    let id = created.id();
    let off = app
        .patch(
            &format!("/api/v1/webhooks/{id}"),
            json!({"rateLimit": null}),
        )
        .await;
    assert!(off.expect(200).data()["rateLimit"].is_null());
}

#[tokio::test]
async fn retention_deletes_old_events_with_their_deliveries_failed_ones_later() {
    let (app, _worker, receiver) = setup(&[("PARLEY_WEBHOOK_MAX_ATTEMPTS", "1")]).await;
    let (webhook, _) = subscribe(&app, &receiver.url, &["lead.created"]).await;
    create_lead(&app, "Delivered").await;
    receiver.received_at_least(1, 30).await;
    receiver.always(Answer::Status(500));
    create_lead(&app, "Failed").await;
    assert!(
        parley_tests::wait_until(30, || async {
            failed_deliveries(&app, &webhook).await == 1
        })
        .await
    );
    let count = |table: &'static str| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
                "SELECT count(*) FROM {table}"
            )))
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    assert_eq!(count("webhook_events").await, 2);
    assert_eq!(count("webhook_attempts").await, 2);
    let age = |days: i32| {
        sqlx::query("UPDATE webhook_events SET created_at = now() - make_interval(days => $1)")
            .bind(days)
            .execute(&app.pool)
    };
    let sweep = || {
        parley_db::outbox::sweep_expired(
            &app.pool,
            Duration::from_secs(30 * 86_400),
            Duration::from_secs(90 * 86_400),
            1_000,
        )
    };
    age(10).await.unwrap();
    assert_eq!(sweep().await.unwrap(), 0, "nothing is past 30 days");
    age(40).await.unwrap();
    assert_eq!(sweep().await.unwrap(), 1, "the delivered event goes");
    assert_eq!(count("webhook_events").await, 1);
    assert_eq!(count("webhook_deliveries").await, 1);
    assert_eq!(
        count("webhook_attempts").await,
        1,
        "its attempts went with it"
    );
    age(100).await.unwrap();
    assert_eq!(sweep().await.unwrap(), 1, "the failed one after 90 days");
    assert_eq!(count("webhook_events").await, 0);
}

/// Rows of `webhook_deliveries` read so far, by index and by sequential scans, as the
/// statistics last flushed by the server's sessions say.
async fn delivery_reads(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes
                 WHERE relname = 'webhook_deliveries')::bigint
              + (SELECT coalesce(seq_tup_read, 0) FROM pg_stat_user_tables
                 WHERE relname = 'webhook_deliveries')",
    )
    .fetch_one(pool)
    .await
    .expect("table statistics")
}

#[tokio::test]
async fn taking_due_deliveries_reads_what_it_takes_not_the_backlog() {
    // The relay looks for due deliveries on every pass (every tick, and on every event's
    // notification). It read, and sorted to cap each webhook, every due delivery and every
    // delivery in a job, so a slow endpoint's backlog made each pass cost its size.
    //
    // The passes run here one after another on one session, with no worker, so that what they
    // read is counted exactly (below: what else they may read, docs/jobs.md).
    let app = TestApp::builder().own_database().env(LOCAL).start().await;
    let receiver = Receiver::start().await;
    let (webhook, _) = subscribe(&app, &receiver.url, &["lead.created"]).await;
    let n: i64 = 10_000;
    // A backlog: n deliveries waiting for a job (due a minute ago) and n in jobs (enqueued at
    // their due time, not attempted since), with their events.
    sqlx::query(
        "WITH ev AS (
            INSERT INTO webhook_events (id, organization_id, event, data, relayed_at)
            SELECT gen_random_uuid(), $1, 'lead.created', '{}'::jsonb, now()
            FROM generate_series(1, 2 * $3) RETURNING id
         ), numbered AS (SELECT id, row_number() OVER () AS i FROM ev)
         INSERT INTO webhook_deliveries
            (id, organization_id, webhook_id, event_id, event, next_attempt_at, enqueued_at)
         SELECT gen_random_uuid(), $1, $2::uuid, id, 'lead.created', now() - interval '1 minute',
                CASE WHEN i % 2 = 0 THEN now() - interval '1 minute' END
         FROM numbered",
    )
    .bind(app.org_id)
    .bind(&webhook)
    .bind(n)
    .execute(&app.pool)
    .await
    .unwrap();
    // One session runs the passes, so its statistics can be flushed on demand
    // (`pg_stat_force_next_flush`: a session otherwise reports them up to 10 s late).
    let session = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&app.database_url)
        .await
        .unwrap();
    let flush = || sqlx::query("SELECT pg_stat_force_next_flush()").execute(&session);
    flush().await.unwrap();
    let before = delivery_reads(&app.pool).await;
    let (passes, per_webhook) = (20, 16);
    let lost_after = Duration::from_secs(600); // the ones in jobs are not lost yet
    let mut taken = HashSet::new();
    let services = parley_usecases::Services {
        pool: session.clone(),
        ..app.services().await
    };
    for _ in 0..passes {
        let due = parley_usecases::webhook_deliveries::take_due(
            services.ctx(),
            1_000,
            per_webhook,
            lost_after,
            5,
        )
        .await
        .unwrap();
        assert_eq!(
            due.taken.len() as i64,
            per_webhook,
            "a pass takes the webhook's share"
        );
        assert!(due.given_up.is_empty());
        taken.extend(due.taken.into_iter().map(|(_, _, d)| d));
    }
    assert_eq!(
        taken.len() as i64,
        passes * per_webhook,
        "no delivery is taken twice"
    );
    flush().await.unwrap();
    let read = delivery_reads(&app.pool).await - before;
    // The old pass read all 2n, every time. This one reads its 16 twice (by webhook, then by
    // key) and the entries left dead by the takes before it that a scan could not yet mark
    // dead: Postgres leaves them while a writing transaction older than the take runs
    // anywhere on the server (in any database), so alone this reads 1,280 (the last pass's
    // only) and beside the whole suite up to 6,760 (all of them). Never the backlog.
    // (With the entries of one due time merged into posting lists it read 4,560 alone, hence
    // `deduplicate_items = off` on the relay's indexes.)
    assert!(
        read < n,
        "{read} deliveries read in {passes} passes over a backlog of {}",
        2 * n
    );
}

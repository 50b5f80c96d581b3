//! Broadcasts end to end: the API, a worker in this process, and a provider on 127.0.0.1.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use parley_tests::email_worker::EmailWorker;
use parley_tests::provider::{FakeProvider, Reply};
use parley_tests::{TestApp, seed, wait_until};
use serde_json::{Value, json};
use uuid::Uuid;

pub(crate) async fn template(app: &TestApp, channel: &str, body: &str) -> String {
    app.post(
        "/api/v1/templates",
        json!({"name": "T", "channel": channel, "body": body, "subject": "Hello", "status": "active"}),
    )
    .await
    .expect(201)
    .id()
}

pub(crate) async fn send_now(app: &TestApp, template: &str, contacts: &[Uuid]) -> String {
    app.post(
        "/api/v1/broadcasts",
        json!({"broadcastName": "B", "templateId": template, "contactIds": contacts, "sendNow": true,
               "templateVariables": {"body": [{"type": "text", "value": "A-1"}]}}),
    )
    .await
    .expect(201)
    .id()
}

/// Sends "Hello" by email to `n` new contacts now; returns the broadcast's id.
async fn send_hello(sender: &EmailWorker, n: usize) -> String {
    let contacts = seed::contacts(&sender.app, n).await;
    let t = template(&sender.app, "email", "Hello").await;
    send_now(&sender.app, &t, &contacts).await
}

/// Recipients of `broadcast` the reconciler enqueued again.
async fn requeued(app: &TestApp, broadcast: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM broadcast_recipients WHERE broadcast_id = $1 AND requeues > 0",
    )
    .bind(broadcast.parse::<Uuid>().unwrap())
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

fn ended(b: &Value) -> bool {
    matches!(b["data"]["status"].as_str(), Some("completed" | "failed"))
}

/// Every recipient of `broadcast`, walking the list by cursor.
pub(crate) async fn recipients(app: &TestApp, broadcast: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor = String::new();
    let mut pages = 0;
    loop {
        pages += 1;
        assert!(
            pages <= 10000,
            "the cursor walks more than 10000 pages: it does not end"
        );
        let page = app
            .get(&format!(
                "/api/v1/broadcasts/{broadcast}/recipients?pageSize=100{cursor}"
            ))
            .await;
        page.expect(200);
        out.extend(page.data().as_array().unwrap().iter().cloned());
        if page.body["meta"]["hasNext"] != true {
            return out;
        }
        cursor = format!(
            "&cursor={}",
            page.body["meta"]["endCursor"].as_str().unwrap()
        );
    }
}

/// The counters equal the recipients' statuses (as a funnel).
fn assert_counters_match(b: &Value, recipients: &[Value]) {
    let mut by: HashMap<&str, i64> = HashMap::new();
    for r in recipients {
        *by.entry(r["status"].as_str().unwrap()).or_default() += 1;
    }
    let n = |s: &str| by.get(s).copied().unwrap_or(0);
    let d = &b["data"];
    assert_eq!(d["totalRecipients"], recipients.len() as i64);
    assert_eq!(
        d["sentCount"],
        n("sent") + n("delivered") + n("read") + n("replied")
    );
    assert_eq!(
        d["deliveredCount"],
        n("delivered") + n("read") + n("replied")
    );
    assert_eq!(d["readCount"], n("read") + n("replied"));
    assert_eq!(d["repliedCount"], n("replied"));
    assert_eq!(d["failedCount"], n("failed"));
    assert_eq!(d["skippedCount"], n("skipped"));
    assert_eq!(d["pendingCount"], n("pending"));
}

#[tokio::test]
async fn a_send_now_broadcast_reaches_every_recipient_once() {
    let app = TestApp::builder().own_database().start().await;
    let _worker = app.spawn_worker(&[]).await;
    let contacts = seed::contacts(&app, 450).await;
    let t = template(&app, "email", "Hi {{contact.name}}, order {{1}}").await;
    let mut audience = contacts.clone();
    audience.extend_from_slice(&contacts[..10]); // repeats count once
    let id = send_now(&app, &t, &audience).await;
    let b = app.ended_broadcast(&id, 60).await;
    assert_eq!(b["data"]["status"], "completed");
    assert_eq!(b["data"]["audienceSize"], 450);
    assert_eq!(b["data"]["sentCount"], 450);
    assert!(b["data"]["startedAt"].is_string() && b["data"]["completedAt"].is_string());
    let rs = recipients(&app, &id).await;
    assert_counters_match(&b, &rs);
    let contacts_seen: HashSet<&str> = rs
        .iter()
        .map(|r| r["contactId"].as_str().unwrap())
        .collect();
    assert_eq!(contacts_seen.len(), 450);
    for r in &rs {
        assert_eq!(r["status"], "sent");
        assert_eq!(
            r["externalMessageId"],
            format!("sandbox-{}", r["id"].as_str().unwrap())
        );
        assert!(r["sentAt"].is_string());
        assert!(
            r["contact"]["email"].is_string(),
            "recipients embed their contact"
        );
    }
}

#[tokio::test]
async fn provider_500_500_200_is_one_send_under_one_key() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    let _worker = app
        .spawn_worker(&[("PARLEY_CHANNEL_EMAIL_URL", &provider.url)])
        .await;
    let contacts = seed::contacts(&app, 1).await;
    let t = template(&app, "email", "Hi {{contact.name}}, order {{1}}").await;
    provider.script(vec![Reply::status(500), Reply::status(503), Reply::Accept]);
    let id = send_now(&app, &t, &contacts).await;
    let b = app.ended_broadcast(&id, 30).await;
    assert_eq!(b["data"]["status"], "completed");
    let rs = recipients(&app, &id).await;
    assert_eq!(rs[0]["status"], "sent");
    assert_eq!(
        rs[0]["externalMessageId"],
        provider.accepted()[rs[0]["id"].as_str().unwrap()]
    );
    let calls = provider.calls();
    assert_eq!(
        calls.iter().map(|c| c.status).collect::<Vec<_>>(),
        vec![500, 503, 200]
    );
    let keys: HashSet<&str> = calls.iter().map(|c| c.idempotency_key.as_str()).collect();
    assert_eq!(keys, HashSet::from([rs[0]["id"].as_str().unwrap()]));
    let body = &calls[2].body;
    assert_eq!(body["recipientId"], rs[0]["id"]);
    assert_eq!(body["channel"], "email");
    assert_eq!(body["templateId"], t);
    assert_eq!(body["to"], rs[0]["contact"]["email"]);
    assert_eq!(
        body["content"],
        format!(
            "Hi {}, order A-1",
            rs[0]["contact"]["name"].as_str().unwrap()
        )
    );
    assert_eq!(body["subject"], "Hello");
}

#[tokio::test]
async fn a_provider_400_fails_the_recipient_with_its_code() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    let _worker = app
        .spawn_worker(&[("PARLEY_CHANNEL_SOCIAL_A_URL", &provider.url)])
        .await;
    let contacts = seed::contacts(&app, 2).await;
    let t = template(&app, "social_a", "Hello").await;
    provider.script(vec![Reply::Status {
        status: 400,
        retry_after: None,
        code: Some("invalid_recipient"),
    }]);
    let id = send_now(&app, &t, &contacts).await;
    let b = app.ended_broadcast(&id, 30).await;
    assert_eq!(b["data"]["status"], "completed", "one of two was sent");
    let rs = recipients(&app, &id).await;
    let failed: Vec<&Value> = rs.iter().filter(|r| r["status"] == "failed").collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["errorCode"], "invalid_recipient");
    assert_eq!(failed[0]["errorMessage"], "scripted 400");
    assert!(failed[0]["failedAt"].is_string());
    assert_eq!(provider.calls().len(), 2, "a 400 is not retried");
    assert_counters_match(&b, &rs);
}

#[tokio::test]
async fn a_429_with_retry_after_is_waited_out() {
    let rig = EmailWorker::start(TestApp::builder(), Duration::ZERO, &[]).await;
    let (app, provider) = (&rig.app, &rig.provider);
    provider.script(vec![Reply::Status {
        status: 429,
        retry_after: Some(2),
        code: None,
    }]);
    let id = send_hello(&rig, 1).await;
    app.ended_broadcast(&id, 30).await;
    let calls = provider.calls();
    assert_eq!(
        calls.iter().map(|c| c.status).collect::<Vec<_>>(),
        vec![429, 200]
    );
    let waited = calls[1].at - calls[0].at;
    assert!(
        waited >= Duration::from_millis(1900),
        "retried after {waited:?}, before Retry-After"
    );
}

#[tokio::test]
async fn contacts_that_must_not_be_contacted_are_skipped_and_never_sent() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    let _worker = app
        .spawn_worker(&[("PARLEY_CHANNEL_MESSAGING_A_URL", &provider.url)])
        .await;
    let ok = app
        .post(
            "/api/v1/contacts",
            json!({"source": "web", "phone": "+14155550101"}),
        )
        .await
        .id();
    let dnc = app
        .post(
            "/api/v1/contacts",
            json!({"source": "web", "phone": "+14155550102", "doNotContact": true}),
        )
        .await
        .id();
    let out = app
        .post(
            "/api/v1/contacts",
            json!({"source": "web", "phone": "+14155550103"}),
        )
        .await
        .id();
    app.patch(
        &format!("/api/v1/contacts/{out}"),
        json!({"messagingAOptedOut": true}),
    )
    .await
    .expect(200);
    let no_phone = app
        .post(
            "/api/v1/contacts",
            json!({"source": "web", "name": "No phone"}),
        )
        .await
        .id();
    let t = template(&app, "messaging_a", "Hi").await;
    let ids: Vec<Uuid> = [&ok, &dnc, &out, &no_phone]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect();
    let id = send_now(&app, &t, &ids).await;
    let b = app.ended_broadcast(&id, 30).await;
    let rs = recipients(&app, &id).await;
    let status_of = |c: &str| {
        rs.iter()
            .find(|r| r["contactId"] == c)
            .map(|r| (r["status"].clone(), r["errorCode"].clone()))
            .unwrap()
    };
    assert_eq!(status_of(&ok), (json!("sent"), Value::Null));
    assert_eq!(status_of(&dnc), (json!("skipped"), json!("do_not_contact")));
    assert_eq!(status_of(&out), (json!("skipped"), json!("opted_out")));
    assert_eq!(status_of(&no_phone), (json!("failed"), json!("no_address")));
    let calls = provider.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].body["to"], "+14155550101");
    assert_counters_match(&b, &rs);
}

#[tokio::test]
async fn outcomes_reach_postgres_while_the_job_still_sends() {
    // One send job of 20 recipients at 5 messages a second: several seconds of sending.
    let rig = EmailWorker::start(
        TestApp::builder(),
        Duration::ZERO,
        &[("PARLEY_CHANNEL_EMAIL_RATE", "5")],
    )
    .await;
    let id = send_hello(&rig, 20).await;
    // What the job sent is recorded within moments, not when its chunk fills or it ends: a
    // crash now would resend almost nothing.
    let b = rig
        .app
        .wait_for(&format!("/api/v1/broadcasts/{id}"), 30, |b| {
            b["data"]["sentCount"].as_i64() >= Some(1)
        })
        .await;
    assert_eq!(b["data"]["status"], "sending", "{b}");
    assert!(b["data"]["pendingCount"].as_i64().unwrap() > 0, "{b}");
    let b = rig.app.ended_broadcast(&id, 60).await;
    assert_eq!(b["data"]["sentCount"], 20);
}

#[tokio::test]
async fn a_dispatcher_whose_lease_was_taken_over_can_neither_renew_nor_release_it() {
    use parley_db::sending::{begin_dispatch, end_dispatch_turn};
    use parley_types::ids::BroadcastId;
    use parley_usecases::sending::fan_out;
    // No worker: the test plays two dispatchers.
    let app = parley_tests::TestApp::builder().start().await;
    let contacts = seed::contacts(&app, 3).await;
    let t = template(&app, "email", "Hello").await;
    let id: BroadcastId = send_now(&app, &t, &contacts).await.parse().unwrap();
    let lease = Duration::from_secs(60);
    let (a, b, c) = (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    let state = begin_dispatch(&app.pool, id, lease, a, 20).await.unwrap();
    assert!(state.is_some(), "A takes the lease");
    assert!(
        begin_dispatch(&app.pool, id, lease, b, 20)
            .await
            .unwrap()
            .is_none(),
        "held by A"
    );
    // A stalls past its lease; B takes over.
    sqlx::query("UPDATE broadcasts SET dispatch_lease_until = clock_timestamp() - interval '1 second' WHERE id = $1")
        .bind(id)
        .execute(&app.pool)
        .await
        .unwrap();
    let org = state.unwrap().organization_id;
    assert!(
        begin_dispatch(&app.pool, id, lease, b, 20)
            .await
            .unwrap()
            .is_some()
    );
    // A wakes up: its fan-out writes nothing, its release leaves B's lease alone.
    assert!(
        fan_out(app.services().await.ctx(), id, org, false, 2, lease, a)
            .await
            .unwrap()
            .is_none()
    );
    end_dispatch_turn(&app.pool, id, a, false).await.unwrap();
    assert!(
        begin_dispatch(&app.pool, id, lease, c, 20)
            .await
            .unwrap()
            .is_none(),
        "B still holds the lease"
    );
    let (recipients, done) = fan_out(app.services().await.ctx(), id, org, false, 2, lease, b)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((recipients.len(), done), (2, false));
    end_dispatch_turn(&app.pool, id, b, false).await.unwrap();
    assert!(
        begin_dispatch(&app.pool, id, lease, c, 20)
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test]
async fn a_receipt_that_beats_the_outcome_write_is_applied_once_the_outcome_lands() {
    let secret = "receipt-secret";
    let rig = EmailWorker::start(
        TestApp::builder().env(&[("PARLEY_CHANNEL_EMAIL_SECRET", secret)]),
        Duration::ZERO,
        &[],
    )
    .await;
    let app = &rig.app;
    let message = format!("early-{}", Uuid::now_v7().simple());
    rig.provider.always(Reply::Raw {
        status: 200,
        body: json!({"messageId": message}),
    });
    // The provider's receipt comes first: no recipient has that message id yet.
    let body = json!([
        {"messageId": message, "status": "delivered", "at": "2026-11-20T09:00:00.000Z"},
    ])
    .to_string();
    let signature = parley_domain::signature::sign(secret, body.as_bytes());
    let early = parley_tests::post_receipts(&app.client, &app.base, "email", body, signature).await;
    assert_eq!(early.status(), 200);
    let answer: Value = early.json().await.unwrap();
    assert_eq!(
        answer["data"],
        json!({"received": 1, "applied": 0, "deferred": 1})
    );

    let id = send_hello(&rig, 1).await;
    let b = app
        .wait_for(&format!("/api/v1/broadcasts/{id}"), 30, |b| {
            b["data"]["deliveredCount"] == 1
        })
        .await;
    assert_eq!(b["data"]["status"], "completed");
    let rs = recipients(app, &id).await;
    assert_eq!(rs[0]["externalMessageId"], message.as_str());
    assert_eq!(rs[0]["status"], "delivered");
    assert_eq!(rs[0]["deliveredAt"], "2026-11-20T09:00:00.000Z");
    let kept: i64 =
        sqlx::query_scalar("SELECT count(*) FROM early_receipts WHERE external_message_id = $1")
            .bind(&message)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(kept, 0, "an applied receipt is not kept");
}

#[tokio::test]
async fn receipts_move_recipients_forward_only() {
    let secret = "receipt-secret";
    let rig = EmailWorker::start(
        TestApp::builder().env(&[("PARLEY_CHANNEL_EMAIL_SECRET", secret)]),
        Duration::ZERO,
        &[],
    )
    .await;
    let app = &rig.app;
    let id = send_hello(&rig, 3).await;
    let done = app.ended_broadcast(&id, 30).await;
    let t = done["data"]["templateId"].as_str().unwrap().to_owned();
    let rs = recipients(app, &id).await;
    let message = |i: usize| rs[i]["externalMessageId"].as_str().unwrap().to_owned();

    let receipts = json!([
        {"messageId": message(0), "status": "read", "at": "2026-11-20T10:00:00.000Z"},
        {"messageId": message(0), "status": "delivered", "at": "2026-11-20T09:00:00.000Z"},
        {"messageId": message(1), "status": "delivered"},
        {"messageId": message(2), "status": "failed", "errorCode": "bounced"},
        {"messageId": "unknown-id", "status": "read"},
    ]);
    let body = receipts.to_string();
    let post = |body: String, signature: String| {
        parley_tests::post_receipts(&app.client, &app.base, "email", body, signature)
    };
    let bad = post(body.clone(), "sha256=00".into()).await;
    assert_eq!(bad.status(), 401);
    let ok = post(
        body.clone(),
        parley_domain::signature::sign(secret, body.as_bytes()),
    )
    .await;
    assert_eq!(ok.status(), 200);
    let applied: Value = ok.json().await.unwrap();
    assert_eq!(
        applied["data"],
        json!({"received": 5, "applied": 4, "deferred": 1})
    );
    // A late `delivered` after `read` changes nothing.
    let late = json!([{"messageId": message(0), "status": "delivered"}]).to_string();
    post(
        late.clone(),
        parley_domain::signature::sign(secret, late.as_bytes()),
    )
    .await;

    let rs = recipients(app, &id).await;
    let by_message = |m: &str| {
        rs.iter()
            .find(|r| r["externalMessageId"] == m)
            .unwrap()
            .clone()
    };
    let first = by_message(&message(0));
    assert_eq!(first["status"], "read");
    assert_eq!(first["deliveredAt"], "2026-11-20T09:00:00.000Z");
    assert_eq!(first["readAt"], "2026-11-20T10:00:00.000Z");
    assert_eq!(by_message(&message(1))["status"], "delivered");
    let bounced = by_message(&message(2));
    assert_eq!(
        (bounced["status"].clone(), bounced["errorCode"].clone()),
        (json!("failed"), json!("bounced"))
    );
    let b = app.get(&format!("/api/v1/broadcasts/{id}")).await;
    assert_counters_match(&b.body, &rs);
    assert_eq!(b.data()["sentCount"], 2);
    assert_eq!(b.data()["deliveredCount"], 2);
    assert_eq!(b.data()["readCount"], 1);

    let analytics = app.get(&format!("/api/v1/templates/{t}/analytics")).await;
    analytics.expect(200);
    let a = analytics.data();
    assert_eq!(
        (
            a["broadcastCount"].clone(),
            a["sentCount"].clone(),
            a["failedCount"].clone()
        ),
        (json!(1), json!(2), json!(1))
    );
    assert_eq!(a["deliveryRate"], 1.0);
    assert_eq!(a["readRate"], 0.5);
    let days: Vec<&str> = a["daily"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["date"].as_str().unwrap())
        .collect();
    assert!(days.contains(&"2026-11-20"), "receipt days count: {days:?}");
    let other = app
        .get(&format!("/api/v1/templates/{t}/analytics?channel=social_b"))
        .await;
    assert_eq!(other.data()["broadcastCount"], 0);
    assert_eq!(other.data()["deliveryRate"], 0.0);

    // Unsigned channels refuse receipts; unknown channels are 404.
    let unsigned = json!([]).to_string();
    let resp = app
        .client
        .post(format!("{}/api/v1/channels/social_b/receipts", app.base))
        .header("content-type", "application/json")
        .header(
            "x-parley-signature",
            parley_domain::signature::sign("x", unsigned.as_bytes()),
        )
        .body(unsigned)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let resp = app
        .client
        .post(format!("{}/api/v1/channels/fax/receipts", app.base))
        .header("content-type", "application/json")
        .body("[]")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
}

#[tokio::test]
async fn the_state_machine_allows_and_refuses_transitions() {
    let app = TestApp::builder().own_database().start().await;
    let contacts = seed::contacts(&app, 2).await;
    let t = template(&app, "email", "Hello").await;
    let create = |extra: Value| {
        let mut body = json!({"broadcastName": "B", "templateId": t, "contactIds": contacts});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let future = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    let past = (chrono::Utc::now() - chrono::Duration::minutes(1)).to_rfc3339();
    // Creation.
    let draft = app.post("/api/v1/broadcasts", create(json!({}))).await;
    assert_eq!(draft.data()["status"], "draft");
    assert_eq!(draft.data()["channel"], "email");
    assert_eq!(draft.data()["templateChannel"], "email");
    let explicit = app
        .post("/api/v1/broadcasts", create(json!({"isDraft": true})))
        .await;
    assert_eq!(explicit.data()["status"], "draft");
    let scheduled = app
        .post("/api/v1/broadcasts", create(json!({"scheduledAt": future})))
        .await;
    assert_eq!(scheduled.data()["status"], "scheduled");
    for bad in [
        json!({"sendNow": true, "scheduledAt": future}),
        json!({"scheduledAt": past}),
        json!({"isDraft": true, "sendNow": true}),
    ] {
        app.post("/api/v1/broadcasts", create(bad))
            .await
            .expect_error(422, "validation_error");
    }
    let d = draft.id();
    let path = |id: &str, action: &str| format!("/api/v1/broadcasts/{id}/{action}");
    // A draft: no pause, resume or cancel; it can be scheduled, unscheduled and deleted.
    for action in ["pause", "resume", "cancel"] {
        app.post(&path(&d, action), json!({}))
            .await
            .expect_error(409, "invalid_state");
    }
    let s = app
        .patch(
            &format!("/api/v1/broadcasts/{d}"),
            json!({"scheduledAt": future}),
        )
        .await;
    assert_eq!(s.data()["status"], "scheduled");
    let back = app
        .patch(
            &format!("/api/v1/broadcasts/{d}"),
            json!({"scheduledAt": null}),
        )
        .await;
    assert_eq!(back.data()["status"], "draft");
    let again = app
        .patch(
            &format!("/api/v1/broadcasts/{d}"),
            json!({"scheduledAt": future}),
        )
        .await;
    assert_eq!(again.data()["status"], "scheduled");
    let to_draft = app
        .patch(&format!("/api/v1/broadcasts/{d}"), json!({"isDraft": true}))
        .await;
    assert_eq!(to_draft.data()["status"], "draft");
    assert!(to_draft.data()["scheduledAt"].is_null());
    // Scheduled: cancel allowed, delete and pause refused.
    let sc = scheduled.id();
    app.delete(&format!("/api/v1/broadcasts/{sc}"))
        .await
        .expect_error(409, "invalid_state");
    app.post(&path(&sc, "pause"), json!({}))
        .await
        .expect_error(409, "invalid_state");
    let cancelled = app.post(&path(&sc, "cancel"), json!({})).await;
    assert_eq!(cancelled.data()["status"], "cancelled");
    assert!(cancelled.data()["cancelledAt"].is_string());
    // Cancelled is final.
    for action in ["pause", "resume", "cancel"] {
        app.post(&path(&sc, action), json!({}))
            .await
            .expect_error(409, "invalid_state");
    }
    app.patch(
        &format!("/api/v1/broadcasts/{sc}"),
        json!({"description": "x"}),
    )
    .await
    .expect_error(409, "invalid_state");
    app.delete(&format!("/api/v1/broadcasts/{sc}"))
        .await
        .expect_error(409, "invalid_state");
    // Queued (no worker runs here): pause, resume back to queued, cancel.
    let q = app
        .patch(&format!("/api/v1/broadcasts/{d}"), json!({"sendNow": true}))
        .await;
    assert_eq!(q.data()["status"], "queued");
    app.patch(
        &format!("/api/v1/broadcasts/{d}"),
        json!({"description": "late"}),
    )
    .await
    .expect_error(409, "invalid_state");
    app.post(&path(&d, "resume"), json!({}))
        .await
        .expect_error(409, "invalid_state");
    assert_eq!(
        app.post(&path(&d, "pause"), json!({})).await.data()["status"],
        "paused"
    );
    app.post(&path(&d, "pause"), json!({}))
        .await
        .expect_error(409, "invalid_state");
    assert_eq!(
        app.post(&path(&d, "resume"), json!({})).await.data()["status"],
        "queued"
    );
    assert_eq!(
        app.post(&path(&d, "cancel"), json!({})).await.data()["status"],
        "cancelled"
    );
    // Deleting a draft.
    let e = explicit.id();
    app.delete(&format!("/api/v1/broadcasts/{e}"))
        .await
        .expect(200);
    app.get(&format!("/api/v1/broadcasts/{e}"))
        .await
        .expect_error(404, "not_found");
    // Lists filter by status.
    assert_eq!(
        app.get("/api/v1/broadcasts?status=cancelled").await.body["meta"]["total"],
        2
    );
    app.get("/api/v1/broadcasts?status=gone")
        .await
        .expect_error(422, "validation_error");
    // A template in use cannot be deleted.
    app.delete(&format!("/api/v1/templates/{t}"))
        .await
        .expect_error(409, "conflict");
}

#[tokio::test]
async fn bad_broadcast_input_is_refused_and_writes_nothing() {
    let app = TestApp::builder().own_database().start().await;
    let contacts = seed::contacts(&app, 1).await;
    let t = template(&app, "email", "Order {{1}} and {{2}}").await;
    let before = app.fingerprint(app.org_id).await;
    let nobody = Uuid::now_v7();
    let cases = [
        (
            json!({"broadcastName": "B", "templateId": t, "contactIds": [contacts[0], nobody]}),
            "contactIds[1]",
        ),
        (
            json!({"broadcastName": "B", "templateId": nobody, "contactIds": contacts}),
            "templateId",
        ),
        (
            json!({"broadcastName": "B", "templateId": t, "contactIds": [],
                   "templateVariables": {"body": [{"type": "t", "value": "1"}, {"type": "t", "value": "2"}]}}),
            "contactIds",
        ),
        (
            json!({"broadcastName": "B", "templateId": t, "contactIds": contacts,
                   "templateVariables": {"body": [{"type": "text", "value": "only one"}]}}),
            "templateVariables.body",
        ),
        (
            json!({"broadcastName": "B", "templateId": t, "contactIds": contacts, "scheduledAt": "tomorrow"}),
            "scheduledAt",
        ),
    ];
    for (body, field) in cases {
        let resp = app.post("/api/v1/broadcasts", body).await;
        resp.expect_error(422, "validation_error");
        assert_eq!(resp.field(), field);
    }
    assert_eq!(app.fingerprint(app.org_id).await, before);
}

#[tokio::test]
async fn a_scheduled_broadcast_fires_on_time() {
    let app = TestApp::builder().own_database().start().await;
    let _worker = app.spawn_worker(&[]).await;
    let contacts = seed::contacts(&app, 5).await;
    let t = template(&app, "email", "Hello").await;
    let at = chrono::Utc::now() + chrono::Duration::seconds(3);
    let id = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "Later", "templateId": t, "contactIds": contacts,
                   "scheduledAt": at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)}),
        )
        .await
        .id();
    // A scheduled broadcast is not due work until its time: idle says nothing of it.
    let b = app
        .wait_for(&format!("/api/v1/broadcasts/{id}"), 30, ended)
        .await;
    assert_eq!(b["data"]["status"], "completed");
    let started =
        chrono::DateTime::parse_from_rfc3339(b["data"]["startedAt"].as_str().unwrap()).unwrap();
    let late = started.with_timezone(&chrono::Utc) - at;
    assert!(late >= chrono::Duration::zero(), "started before its time");
    assert!(
        late < chrono::Duration::milliseconds(1000),
        "started {late} after its time"
    );
}

#[tokio::test]
async fn pause_stops_sends_and_resume_sends_exactly_the_pending_ones() {
    let rig = EmailWorker::start(
        TestApp::builder(),
        Duration::ZERO,
        &[("PARLEY_CHANNEL_EMAIL_RATE", "100")],
    )
    .await;
    let (app, provider) = (&rig.app, &rig.provider);
    let id = send_hello(&rig, 300).await;
    app.wait_for(&format!("/api/v1/broadcasts/{id}"), 30, |b| {
        b["data"]["sentCount"].as_i64() >= Some(50)
    })
    .await;
    let paused = app
        .post(&format!("/api/v1/broadcasts/{id}/pause"), json!({}))
        .await;
    paused.expect(200);
    assert_eq!(paused.data()["status"], "paused");
    let paused_at = Instant::now();
    let let_go = || async { app.claims_held(&id).await == 0 };
    assert!(
        wait_until(20, let_go).await,
        "the workers let go of the broadcast"
    );
    let late: Vec<_> = provider
        .calls()
        .into_iter()
        .filter(|c| c.at > paused_at + Duration::from_secs(1))
        .collect();
    assert!(
        late.is_empty(),
        "{} sends more than a second after the pause, the last {:?} after",
        late.len(),
        late.iter().map(|c| c.at - paused_at).max()
    );
    let b = app.get(&format!("/api/v1/broadcasts/{id}")).await;
    assert!(
        b.data()["pendingCount"].as_i64().unwrap() > 0,
        "the pause came before the end"
    );
    let sent_before = b.data()["sentCount"].as_i64().unwrap();

    app.post(&format!("/api/v1/broadcasts/{id}/resume"), json!({}))
        .await
        .expect(200);
    let b = app.ended_broadcast(&id, 60).await;
    assert_eq!(b["data"]["status"], "completed");
    assert_eq!(b["data"]["sentCount"], 300);
    let rs = recipients(app, &id).await;
    assert_counters_match(&b, &rs);
    // Exactly one accepted message per recipient, and never a second key per contact.
    let accepted = provider.accepted();
    assert_eq!(accepted.len(), 300);
    let ids: HashSet<&str> = rs.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert!(accepted.keys().all(|k| ids.contains(k.as_str())));
    assert!(sent_before < 300);
}

#[tokio::test]
async fn cancel_stops_a_large_send() {
    let rig = EmailWorker::start(
        TestApp::builder(),
        Duration::ZERO,
        &[("PARLEY_CHANNEL_EMAIL_RATE", "100")],
    )
    .await;
    let (app, provider) = (&rig.app, &rig.provider);
    let id = send_hello(&rig, 300).await;
    app.wait_for(&format!("/api/v1/broadcasts/{id}"), 30, |b| {
        b["data"]["sentCount"].as_i64() >= Some(30)
    })
    .await;
    app.post(&format!("/api/v1/broadcasts/{id}/cancel"), json!({}))
        .await
        .expect(200);
    let cancelled_at = Instant::now();
    let let_go = || async { app.claims_held(&id).await == 0 };
    assert!(
        wait_until(20, let_go).await,
        "the workers let go of the broadcast"
    );
    let late = provider
        .calls()
        .iter()
        .map(|c| c.at.saturating_duration_since(cancelled_at))
        .max();
    assert!(
        late <= Some(Duration::from_secs(1)),
        "a send {late:?} after the cancel"
    );
    let b = app.get(&format!("/api/v1/broadcasts/{id}")).await;
    assert_eq!(b.data()["status"], "cancelled");
    assert!(b.data()["pendingCount"].as_i64().unwrap() > 0);
    let rs = recipients(app, &id).await;
    assert_counters_match(&b.body, &rs);
}

#[tokio::test]
async fn the_rate_limit_spaces_sends() {
    let rig = EmailWorker::start(
        TestApp::builder(),
        Duration::ZERO,
        &[("PARLEY_CHANNEL_EMAIL_RATE", "20")],
    )
    .await;
    let (app, provider) = (&rig.app, &rig.provider);
    let id = send_hello(&rig, 60).await;
    app.ended_broadcast(&id, 30).await;
    let mut at: Vec<Instant> = provider.calls().iter().map(|c| c.at).collect();
    at.sort();
    // 60 slots 50 ms apart: the sends span almost three seconds (unlimited, they take a few
    // hundred milliseconds).
    let span = *at.last().unwrap() - at[0];
    assert!(span >= Duration::from_millis(2_800), "60 sends in {span:?}");
    // No window of one second holds more than the rate, give or take what the provider sees
    // of the scheduling between a slot and its request (on a loaded machine, a send or two).
    let most = at
        .iter()
        .map(|start| {
            at.iter()
                .filter(|t| **t >= *start && **t < *start + Duration::from_secs(1))
                .count()
        })
        .max()
        .unwrap();
    assert!(
        most <= 23,
        "{most} sends within one second at 20 per second"
    );
}

#[tokio::test]
async fn consecutive_provider_failures_pause_the_broadcast() {
    let rig = EmailWorker::start(
        TestApp::builder(),
        Duration::ZERO,
        &[
            ("PARLEY_BROADCAST_AUTO_PAUSE_FAILURES", "5"),
            ("PARLEY_CHANNEL_EMAIL_RATE", "50"),
        ],
    )
    .await;
    let (app, provider) = (&rig.app, &rig.provider);
    provider.always(Reply::Status {
        status: 401,
        retry_after: None,
        code: Some("bad_credentials"),
    });
    let id = send_hello(&rig, 300).await;
    let b = app
        .wait_for(&format!("/api/v1/broadcasts/{id}"), 30, |b| {
            b["data"]["status"] == "paused"
        })
        .await;
    let message = b["data"]["errorMessage"].as_str().unwrap();
    assert!(
        message.contains("consecutive provider failures") && message.contains("bad_credentials"),
        "{message}"
    );
    let let_go = || async { app.claims_held(&id).await == 0 };
    assert!(
        wait_until(20, let_go).await,
        "the workers let go of the broadcast"
    );
    let b = app.get(&format!("/api/v1/broadcasts/{id}")).await;
    assert!(
        b.data()["pendingCount"].as_i64().unwrap() > 200,
        "sending stopped: {}",
        b.body
    );
}

#[tokio::test]
async fn two_workers_never_send_a_recipient_twice() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    let env = [("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str())];
    let _a = app.spawn_worker(&env).await;
    let _b = app.spawn_worker(&env).await;
    let contacts = seed::contacts(&app, 800).await;
    let t = template(&app, "email", "Hello").await;
    let id = send_now(&app, &t, &contacts).await;
    let b = app.ended_broadcast(&id, 60).await;
    assert_eq!(b["data"]["sentCount"], 800);
    let calls = provider.calls();
    let mut per_key: HashMap<&str, usize> = HashMap::new();
    for c in &calls {
        *per_key.entry(c.idempotency_key.as_str()).or_default() += 1;
    }
    assert_eq!(per_key.len(), 800);
    assert!(
        per_key.values().all(|n| *n == 1),
        "a recipient was sent twice"
    );
}

#[tokio::test]
async fn a_flushed_redis_loses_no_recipient() {
    let rig = EmailWorker::start(
        TestApp::builder(),
        Duration::ZERO,
        &[("PARLEY_CHANNEL_EMAIL_RATE", "150")],
    )
    .await;
    let (app, provider) = (&rig.app, &rig.provider);
    let id = send_hello(&rig, 400).await;
    app.wait_for(&format!("/api/v1/broadcasts/{id}"), 30, |b| {
        b["data"]["sentCount"].as_i64() >= Some(40)
    })
    .await;
    assert!(app.flush_redis().await > 0);
    let b = app.ended_broadcast(&id, 90).await;
    assert_eq!(b["data"]["status"], "completed");
    assert_eq!(b["data"]["sentCount"], 400);
    let rs = recipients(app, &id).await;
    assert!(rs.iter().all(|r| r["status"] == "sent"));
    let keys: HashSet<String> = provider
        .calls()
        .into_iter()
        .map(|c| c.idempotency_key)
        .collect();
    assert_eq!(keys.len(), 400, "one idempotency key per recipient");
}

/// Sends `template` to `contacts` now, and checks the broadcast ends having started within a
/// second of its creation.
async fn sent_now_within_a_second(app: &TestApp, template: &str, contacts: &[Uuid]) {
    let id = send_now(app, template, contacts).await;
    let b = app.ended_broadcast(&id, 30).await;
    let time =
        |f: &str| chrono::DateTime::parse_from_rfc3339(b["data"][f].as_str().unwrap()).unwrap();
    let pickup = time("startedAt") - time("createdAt");
    assert!(
        pickup < chrono::Duration::milliseconds(1000),
        "picked up after {pickup}"
    );
}

#[tokio::test]
async fn an_idle_worker_picks_a_send_now_up_within_a_second() {
    let app = TestApp::builder().own_database().start().await;
    // Polling once a minute: the dispatch and the send jobs are fetched on their queues'
    // wake-ups alone (the broadcast would wait a minute for each without them).
    let worker = app
        .spawn_worker(&[("PARLEY_WORKER_POLL_MS", "60000")])
        .await;
    let contacts = seed::contacts(&app, 3).await;
    let t = template(&app, "email", "Hello").await;
    tokio::time::sleep(Duration::from_secs(2)).await; // the worker has been idle a while
    sent_now_within_a_second(&app, &t, &contacts).await;

    // The worker's metrics show the queues and what went through them.
    let text = reqwest::get(format!("http://{}/metrics", worker.metrics_addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for needle in [
        "parley_queue_depth{queue=\"recipient-send\",state=\"ready\"}",
        "parley_queue_depth{queue=\"broadcast-dispatch\",state=\"scheduled\"}",
        "parley_jobs_total{queue=\"broadcast-dispatch\",outcome=\"ok\"}",
        "parley_jobs_total{queue=\"recipient-send\",outcome=\"ok\"}",
        "parley_job_duration_seconds_bucket{queue=\"recipient-send\"",
        "parley_provider_calls_total{channel=\"email\",outcome=\"sandbox\"}",
        "parley_broadcast_recipients_total{channel=\"email\",status=\"sent\"}",
    ] {
        assert!(text.contains(needle), "{needle} is not exported:\n{text}");
    }
}

#[tokio::test]
async fn a_wake_up_subscription_gone_silent_is_made_again() {
    let app = TestApp::builder().own_database().start().await;
    // The worker reaches Redis through a proxy that can silence its subscription without
    // closing it; it polls once a minute, so only wake-ups move the broadcast along.
    let proxy = parley_tests::tcp_proxy::TcpProxy::start(&app.redis_url).await;
    let _worker = app
        .spawn_worker(&[
            ("REDIS_URL", &proxy.url),
            ("PARLEY_WORKER_POLL_MS", "60000"),
        ])
        .await;
    assert!(
        wait_until(10, || async { proxy.silence_subscribers() > 0 }).await,
        "the worker subscribes through the proxy"
    );
    let contacts = seed::contacts(&app, 3).await;
    let t = template(&app, "email", "Hello").await;
    // A ping every 5 s, given 2 s to come back, then a new subscription.
    assert!(
        wait_until(20, || async { proxy.live_subscribers() > 0 }).await,
        "the worker subscribes again"
    );
    sent_now_within_a_second(&app, &t, &contacts).await;
}

#[tokio::test]
async fn receipts_with_bad_bodies_are_refused() {
    let secret = "receipt-secret";
    let app = TestApp::builder()
        .own_database()
        .env(&[("PARLEY_CHANNEL_EMAIL_SECRET", secret)])
        .start()
        .await;
    let send = |body: &'static str, content_type: &'static str| {
        let client = app.client.clone();
        let url = format!("{}/api/v1/channels/email/receipts", app.base);
        async move {
            let resp = client
                .post(url)
                .header("content-type", content_type)
                .header(
                    "x-parley-signature",
                    parley_domain::signature::sign(secret, body.as_bytes()),
                )
                .body(body)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.unwrap();
            (
                status,
                body["error"]["code"].as_str().unwrap_or("").to_owned(),
                body,
            )
        }
    };
    assert_eq!(send("[{", "application/json").await.0, 400);
    assert_eq!(send("[]", "text/plain").await.0, 415);
    let (status, code, body) = send(
        r#"[{"messageId": "m", "status": "sent"}]"#,
        "application/json",
    )
    .await;
    assert_eq!((status, code.as_str()), (422, "validation_error"), "{body}");
    assert_eq!(body["error"]["details"][0]["field"], "[0].status");
    let (status, _, _) = send(r#"{"messageId": "m"}"#, "application/json").await;
    assert_eq!(status, 422, "the body is a list");
}

#[tokio::test]
async fn a_retry_reaches_a_provider_that_honours_keys_and_the_first_messages_receipts_change_nothing()
 {
    // The provider took the message, then reported it failed: a provider that honours keys
    // answers a resend under the same key with that first message, delivering nothing.
    let secret = "retry-secret";
    let provider = FakeProvider::start().await;
    let app = TestApp::builder()
        .own_database()
        .env(&[("PARLEY_CHANNEL_SOCIAL_A_SECRET", secret)])
        .start()
        .await;
    let _worker = app
        .spawn_worker(&[("PARLEY_CHANNEL_SOCIAL_A_URL", &provider.url)])
        .await;
    let contacts = seed::contacts(&app, 1).await;
    let t = template(&app, "social_a", "Hello").await;
    let id = send_now(&app, &t, &contacts).await;
    let path = format!("/api/v1/broadcasts/{id}");
    app.ended_broadcast(&id, 30).await;
    let recipient = recipients(&app, &id).await[0].clone();
    let rid = recipient["id"].as_str().unwrap().to_owned();
    let first_message = provider.accepted()[&rid].clone();
    let receipt = |message: &str, status: &str| {
        let body = json!([{"messageId": message, "status": status}]).to_string();
        let signature = parley_domain::signature::sign(secret, body.as_bytes());
        parley_tests::post_receipts(&app.client, &app.base, "social_a", body, signature)
    };
    assert_eq!(receipt(&first_message, "failed").await.status(), 200);
    let failed = app
        .wait_for(&path, 30, |b| b["data"]["failedCount"] == 1)
        .await;
    assert_eq!(failed["data"]["status"], "completed");

    app.post(&format!("{path}/retry-failed"), json!({}))
        .await
        .expect(200);
    let b = app.ended_broadcast(&id, 30).await;
    assert_eq!(b["data"]["sentCount"], 1, "{b}");
    assert_eq!(b["data"]["failedCount"], 0, "{b}");
    // The retry went under a key of its own, so the provider made a new message.
    let accepted = provider.accepted();
    let retry_message = accepted[&format!("{rid}.r1")].clone();
    assert_ne!(retry_message, first_message);
    // A late receipt of the first message finds nothing; the retry's own receipt applies.
    let late: Value = receipt(&first_message, "delivered")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(late["data"]["applied"], 0, "{late}");
    let own: Value = receipt(&retry_message, "delivered")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(own["data"]["applied"], 1, "{own}");
    let r = recipients(&app, &id).await[0].clone();
    assert_eq!(r["status"], "delivered", "{r}");
}

#[tokio::test]
async fn retry_failed_sends_once_more_to_the_failed_only_and_skips_who_opted_out() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    let _worker = app
        .spawn_worker(&[("PARLEY_CHANNEL_SOCIAL_A_URL", &provider.url)])
        .await;
    let contacts = seed::contacts(&app, 5).await;
    let t = template(&app, "social_a", "Hello").await;
    let refuse = |code| Reply::Status {
        status: 400,
        retry_after: None,
        code: Some(code),
    };
    provider.script(vec![
        refuse("invalid_recipient"),
        refuse("invalid_recipient"),
        refuse("blocked"),
    ]);
    let id = send_now(&app, &t, &contacts).await;
    let path = format!("/api/v1/broadcasts/{id}");
    let first = app.ended_broadcast(&id, 30).await;
    assert_eq!(first["data"]["failedCount"], 3);
    let rs = recipients(&app, &id).await;
    let with_code = |rs: &[Value], code: &str| -> Vec<Value> {
        rs.iter()
            .filter(|r| r["status"] == "failed" && r["errorCode"] == code)
            .cloned()
            .collect()
    };
    let invalid = with_code(&rs, "invalid_recipient");
    assert_eq!(invalid.len(), 2);
    // One of them asks not to be contacted before the retry.
    let opted_out = invalid[0]["contactId"].as_str().unwrap();
    app.patch(
        &format!("/api/v1/contacts/{opted_out}"),
        json!({"doNotContact": true}),
    )
    .await
    .expect(200);

    let retry = app
        .post(
            &format!("{path}/retry-failed"),
            json!({"errorCodes": ["invalid_recipient"]}),
        )
        .await;
    retry.expect(200);
    assert_eq!(retry.data()["failedCount"], 1, "{}", retry.body);
    let b = app.ended_broadcast(&id, 30).await;
    assert_eq!(b["data"]["status"], "completed");
    let rs = recipients(&app, &id).await;
    assert_counters_match(&b, &rs);
    let by_id = |rid: &Value| rs.iter().find(|r| r["id"] == *rid).unwrap().clone();
    let skipped = by_id(&invalid[0]["id"]);
    assert_eq!(skipped["status"], "skipped");
    assert_eq!(skipped["errorCode"], "do_not_contact");
    assert_eq!(by_id(&invalid[1]["id"])["status"], "sent");
    assert_eq!(
        with_code(&rs, "blocked").len(),
        1,
        "other codes stay failed"
    );
    // Each retried recipient was sent once more, the others not again; the retry under a key
    // of its own.
    let calls = provider.calls();
    assert_eq!(calls.len(), 5 + 1, "five sends, then the one retry");
    let retried = invalid[1]["id"].as_str().unwrap();
    let keys_of = |key: &str| calls.iter().filter(|c| c.idempotency_key == key).count();
    assert_eq!(keys_of(retried), 1);
    assert_eq!(keys_of(&format!("{retried}.r1")), 1);

    // A broadcast that has not ended does not retry.
    let draft = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "D", "templateId": t, "contactIds": [contacts[0]]}),
        )
        .await
        .id();
    app.post(
        &format!("/api/v1/broadcasts/{draft}/retry-failed"),
        json!({}),
    )
    .await
    .expect_error(409, "invalid_state");
    // Nothing left with that code.
    app.post(
        &format!("{path}/retry-failed"),
        json!({"errorCodes": ["invalid_recipient"]}),
    )
    .await
    .expect_error(409, "invalid_state");
    app.post(&format!("{path}/retry-failed"), json!({"errorCodes": []}))
        .await
        .expect_error(422, "validation_error");
    // Without codes: every failure, here the blocked one.
    app.post(&format!("{path}/retry-failed"), json!({}))
        .await
        .expect(200);
    let b = app.ended_broadcast(&id, 30).await;
    assert_eq!(b["data"]["failedCount"], 0);
    assert_eq!(b["data"]["sentCount"], 4);
    assert_eq!(b["data"]["skippedCount"], 1);
}

#[tokio::test]
async fn retention_deletes_the_recipients_of_old_broadcasts_and_keeps_their_counts() {
    // The worker's own sweep keeps off: the test calls it.
    let rig = EmailWorker::start(
        TestApp::builder(),
        Duration::ZERO,
        &[("PARLEY_RECIPIENT_RETENTION_DAYS", "36500")],
    )
    .await;
    let app = &rig.app;
    let old = send_hello(&rig, 120).await;
    let recent = send_hello(&rig, 30).await;
    for id in [&old, &recent] {
        app.ended_broadcast(id, 60).await;
    }
    let before = app.get(&format!("/api/v1/broadcasts/{old}")).await;
    let template = before.data()["templateId"].as_str().unwrap().to_owned();
    let analytics = app
        .get(&format!("/api/v1/templates/{template}/analytics"))
        .await;
    // The old broadcast ended 200 days ago, the recent one 10 days ago.
    for (id, days) in [(&old, 200), (&recent, 10)] {
        sqlx::query(
            "UPDATE broadcasts SET completed_at = now() - make_interval(days => $2) WHERE id = $1",
        )
        .bind(id.parse::<Uuid>().unwrap())
        .bind(days)
        .execute(&app.pool)
        .await
        .unwrap();
    }
    let services = app.services().await;
    let purge = || {
        let after = Duration::from_secs(180 * 86_400);
        parley_usecases::sending::purge_recipients(services.ctx(), after, 50)
    };
    // 50 a statement: three statements for 120, the last one marks the broadcast.
    assert_eq!(purge().await.unwrap(), (50, true));
    assert_eq!(purge().await.unwrap(), (50, true));
    assert_eq!(purge().await.unwrap(), (20, true));
    assert_eq!(
        purge().await.unwrap(),
        (0, false),
        "nothing else is past 180 days"
    );

    let after = app.get(&format!("/api/v1/broadcasts/{old}")).await;
    assert!(after.data()["recipientsPurgedAt"].is_string());
    for counter in [
        "totalRecipients",
        "sentCount",
        "failedCount",
        "pendingCount",
        "audienceSize",
    ] {
        assert_eq!(
            after.data()[counter],
            before.data()[counter],
            "{counter} kept"
        );
    }
    assert_eq!(after.data()["sentCount"], 120);
    assert!(
        recipients(app, &old).await.is_empty(),
        "the records are gone"
    );
    assert_eq!(
        app.get(&format!("/api/v1/templates/{template}/analytics"))
            .await
            .data(),
        analytics.data(),
        "the template's analytics are unchanged"
    );
    assert_eq!(
        recipients(app, &recent).await.len(),
        30,
        "the recent one keeps its records"
    );
    assert!(
        app.get(&format!("/api/v1/broadcasts/{recent}"))
            .await
            .data()["recipientsPurgedAt"]
            .is_null()
    );
}

/// Index entries read so far through the partial index of pending recipients.
async fn pending_index_reads(app: &TestApp) -> i64 {
    sqlx::query_scalar(
        "SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'broadcast_recipients_pending'",
    )
    .fetch_one(&app.pool)
    .await
    .expect("index statistics")
}

#[tokio::test]
async fn reconciliation_reads_only_stale_recipients_however_many_are_pending() {
    // The ticker looks for lost recipients every pass (here every 0.4 s). Its time bound must
    // be an index condition: as a filter (with `clock_timestamp()`, which is volatile) each
    // pass read every pending recipient of every sending broadcast, in every worker.
    let app = TestApp::builder().own_database().start().await;
    {
        // Redis holds this deployment's queues already: no "Redis emptied" catch-up mode.
        let jobs = parley_jobs::Jobs::new(&app.redis().await);
        for queue in parley_jobs::QueueName::ALL {
            jobs.mark_present(*queue).await.expect("marker");
        }
    }
    let n = 4_000;
    let rig_provider = FakeProvider::start().await;
    let _worker = app
        .spawn_worker(&[
            ("PARLEY_CHANNEL_EMAIL_URL", rig_provider.url.as_str()),
            // One message a second: the broadcast stays sending, its recipients pending.
            ("PARLEY_CHANNEL_EMAIL_RATE", "1"),
            ("PARLEY_RECONCILE_AFTER_SECS", "600"),
        ])
        .await;
    let contacts = seed::contacts(&app, n).await;
    let t = template(&app, "email", "Hello").await;
    let id = send_now(&app, &t, &contacts).await;
    app.wait_for(&format!("/api/v1/broadcasts/{id}"), 30, |b| {
        b["data"]["totalRecipients"].as_u64() == Some(n as u64)
    })
    .await;
    let before = pending_index_reads(&app).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let read = pending_index_reads(&app).await - before;
    assert!(
        read < n as i64 / 2,
        "{read} pending recipients read in 3 s of reconciliation passes over {n} fresh ones"
    );
}

#[tokio::test]
async fn a_fresh_deployment_does_not_take_fetched_jobs_for_lost() {
    // A worker's first tick finds no queue marker (a fresh deployment looks like an emptied
    // Redis) and reconciles quickly for a minute, but only work enqueued before that moment.
    // Jobs fetched by the worker and waiting for a free slot hold no claims yet: taking them for
    // lost after a lease enqueued them again (a second job for each of their recipients).
    sends_with_no_requeue(
        &[
            // About 8 s of sending: most jobs wait, in the queue or fetched, longer than a lease.
            ("PARLEY_CHANNEL_EMAIL_RATE", "400"),
            ("PARLEY_RECONCILE_AFTER_SECS", "600"),
        ],
        3_000,
    )
    .await;
}

#[tokio::test]
async fn jobs_waiting_their_turn_are_not_taken_for_lost() {
    // One job at a time, each 1 s (200 recipients at 200/s), and work presumed lost 2 s after
    // it was enqueued: the broadcast's eight jobs wait up to 7 s for their turn. While the
    // queue holds some, the recipients of its oldest were written a moment before it was
    // pushed (and were taken for lost as soon as it had waited 2 s); once it is empty, jobs
    // fetched four at a time waited for the slot with no claim (and were taken for lost too).
    sends_with_no_requeue(
        &[
            ("PARLEY_WORKER_CONCURRENCY", "1"),
            ("PARLEY_CHANNEL_EMAIL_RATE", "200"),
            ("PARLEY_RECONCILE_AFTER_SECS", "2"),
        ],
        1_600,
    )
    .await;
}

/// Sends to `n` contacts from a fresh deployment (past its first tick) through a worker with
/// `worker_env`, and checks that all were sent and none was enqueued again.
async fn sends_with_no_requeue(worker_env: &[(&str, &str)], n: usize) {
    let rig = EmailWorker::start(TestApp::builder(), Duration::ZERO, worker_env).await;
    tokio::time::sleep(Duration::from_secs(1)).await; // past the first tick
    let id = send_hello(&rig, n).await;
    let app = &rig.app;
    let b = app.ended_broadcast(&id, 60).await;
    assert_eq!(b["data"]["sentCount"], n, "{b}");
    assert_eq!(requeued(app, &id).await, 0, "recipients enqueued again");
}

/// A contact's messages: its record in each broadcast, newest first, with the broadcast's
/// name and channel, the outcome and its times, paged by cursor; none for a contact no
/// broadcast reached; 404 for a contact that does not exist or was deleted.
#[tokio::test]
async fn a_contacts_messages_list_every_broadcast_that_reached_it() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    let _worker = app
        .spawn_worker(&[("PARLEY_CHANNEL_SOCIAL_A_URL", &provider.url)])
        .await;
    provider.always(Reply::Status {
        status: 400,
        retry_after: None,
        code: Some("invalid_recipient"),
    });
    let contacts = seed::contacts(&app, 3).await;
    // The email channel has no provider here: the sandbox accepts every message.
    let email = send_now(
        &app,
        &template(&app, "email", "Hello").await,
        &contacts[..2],
    )
    .await;
    app.ended_broadcast(&email, 30).await;
    let social = send_now(
        &app,
        &template(&app, "social_a", "Hi").await,
        &contacts[..1],
    )
    .await;
    app.ended_broadcast(&social, 30).await;

    let path = format!("/api/v1/contacts/{}/messages", contacts[0]);
    let all = app.get(&path).await;
    all.expect(200);
    let items = all.data().as_array().unwrap().clone();
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(all.body["meta"]["total"], 2);
    let (newest, oldest) = (&items[0], &items[1]);
    assert_eq!(newest["broadcastId"], social.as_str());
    assert_eq!(newest["channel"], "social_a");
    assert_eq!(newest["broadcastName"], "B");
    assert_eq!(newest["status"], "failed");
    assert_eq!(newest["errorCode"], "invalid_recipient");
    assert!(newest["failedAt"].is_string() && newest["sentAt"].is_null());
    assert_eq!(oldest["broadcastId"], email.as_str());
    assert_eq!(oldest["channel"], "email");
    assert_eq!(oldest["status"], "sent");
    assert!(oldest["sentAt"].is_string() && oldest["errorCode"].is_null());

    let first = app.get(&format!("{path}?pageSize=1")).await;
    assert_eq!(first.data()[0]["id"], newest["id"]);
    let cursor = first.body["meta"]["endCursor"].as_str().unwrap().to_owned();
    let second = app.get(&format!("{path}?pageSize=1&cursor={cursor}")).await;
    assert_eq!(second.data()[0]["id"], oldest["id"]);
    assert_eq!(second.body["meta"]["hasNext"], false);
    let oldest_first = app.get(&format!("{path}?sort=createdAt")).await;
    assert_eq!(oldest_first.data()[0]["id"], oldest["id"]);

    let untouched = app
        .get(&format!("/api/v1/contacts/{}/messages", contacts[2]))
        .await;
    assert_eq!(untouched.data(), &json!([]));
    app.get(&format!("/api/v1/contacts/{}/messages", Uuid::now_v7()))
        .await
        .expect_error(404, "not_found");
    app.delete(&format!("/api/v1/contacts/{}", contacts[1]))
        .await
        .expect(200);
    app.get(&format!("/api/v1/contacts/{}/messages", contacts[1]))
        .await
        .expect_error(404, "not_found");
}

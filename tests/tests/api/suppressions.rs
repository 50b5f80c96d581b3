//! The suppression ledger: entries added, listed, exported and removed per organization, and
//! every send skipping whom it holds, by the rules of the template's category.

use parley_tests::TestApp;
use parley_tests::provider::FakeProvider;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::broadcasts::{recipients, send_now};

pub(crate) async fn contact(app: &TestApp, email: &str) -> Uuid {
    app.post("/api/v1/contacts", json!({"source": "web", "email": email}))
        .await
        .expect(201)
        .id()
        .parse()
        .unwrap()
}

async fn email_template(app: &TestApp, category: &str) -> String {
    email_template_with(app, category, "Hello").await
}

/// An active email template of `category` whose body is `body`.
pub(crate) async fn email_template_with(app: &TestApp, category: &str, body: &str) -> String {
    app.post(
        "/api/v1/templates",
        json!({"name": "T", "channel": "email", "body": body, "subject": "Hello",
               "status": "active", "category": category}),
    )
    .await
    .expect(201)
    .id()
}

/// `GET /api/v1/suppressions/export`, its body not yet read (it is CSV, not the envelope).
async fn export(app: &TestApp) -> reqwest::Response {
    app.client
        .get(format!("{}/api/v1/suppressions/export", app.base))
        .bearer_auth(&app.key)
        .send()
        .await
        .unwrap()
}

/// Each recipient's status and error code, by contact.
async fn outcomes(app: &TestApp, broadcast: &str) -> Vec<(String, Value, Value)> {
    let mut out: Vec<(String, Value, Value)> = recipients(app, broadcast)
        .await
        .iter()
        .map(|r| {
            (
                r["contactId"].as_str().unwrap().to_owned(),
                r["status"].clone(),
                r["errorCode"].clone(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn expected(rows: &[(Uuid, &str, Option<&str>)]) -> Vec<(String, Value, Value)> {
    let mut out: Vec<(String, Value, Value)> = rows
        .iter()
        .map(|(c, s, code)| (c.to_string(), json!(s), json!(code)))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[tokio::test]
async fn a_send_skips_whom_the_ledger_holds_and_transactional_mail_obeys_only_bounces_and_complaints()
 {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    let _worker = app
        .spawn_worker(&[("PARLEY_CHANNEL_EMAIL_URL", &provider.url)])
        .await;
    let free = contact(&app, "free@example.com").await;
    // Another organization's ledger holds the same address: not this organization's.
    let (_, other) = app.new_org("Other").await;
    app.send(
        reqwest::Method::POST,
        "/api/v1/suppressions",
        Some(&other),
        Some(&json!({"entries": [{"email": "free@example.com"}]})),
    )
    .await
    .expect(201);
    let unsubscribed = contact(&app, "Unsub@Example.com").await;
    let complained = contact(&app, "complained@example.com").await;
    let elsewhere = contact(&app, "elsewhere@example.com").await;
    let bounced = contact(&app, "bounced@example.com").await;
    let added = app
        .post(
            "/api/v1/suppressions",
            json!({"entries": [
                {"email": "unsub@example.COM", "reason": "unsubscribed"},
                {"contactId": complained, "reason": "complaint"},
                {"email": "elsewhere@example.com", "channel": "messaging_a", "reason": "manual"},
                {"email": "bounced@example.com", "channel": "email", "reason": "hard_bounce"}
            ]}),
        )
        .await;
    added.expect(201);
    assert_eq!(added.data()["added"].as_array().unwrap().len(), 4);
    assert_eq!(added.data()["existing"], 0);
    assert_eq!(added.data()["added"][0]["email"], "unsub@example.com");
    assert_eq!(added.data()["added"][0]["source"], "api");
    let again = app
        .post(
            "/api/v1/suppressions",
            json!({"entries": [{"email": "UNSUB@example.com", "reason": "unsubscribed"}]}),
        )
        .await;
    again.expect(201);
    assert_eq!(again.data()["added"], json!([]));
    assert_eq!(again.data()["existing"], 1, "the first entry stays");
    // An address that unsubscribed, then bounced: two entries, and the bounce holds
    // transactional mail too.
    let both = contact(&app, "both@example.com").await;
    for reason in ["unsubscribed", "hard_bounce"] {
        let r = app
            .post(
                "/api/v1/suppressions",
                json!({"entries": [{"email": "both@example.com", "reason": reason}]}),
            )
            .await;
        r.expect(201);
        assert_eq!(r.data()["added"][0]["reason"], reason);
    }

    let all = [free, unsubscribed, complained, elsewhere, bounced, both];
    let marketing = email_template(&app, "marketing").await;
    let id = send_now(&app, &marketing, &all).await;
    app.ended_broadcast(&id, 30).await;
    assert_eq!(
        outcomes(&app, &id).await,
        expected(&[
            (free, "sent", None),
            (unsubscribed, "skipped", Some("suppressed_unsubscribed")),
            (complained, "skipped", Some("suppressed_complaint")),
            (elsewhere, "sent", None),
            (bounced, "skipped", Some("suppressed_hard_bounce")),
            (both, "skipped", Some("suppressed_hard_bounce")),
        ])
    );
    assert_eq!(provider.calls().len(), 2);

    let utility = email_template(&app, "utility").await;
    let id = send_now(&app, &utility, &all).await;
    app.ended_broadcast(&id, 30).await;
    assert_eq!(
        outcomes(&app, &id).await,
        expected(&[
            (free, "sent", None),
            (unsubscribed, "sent", None),
            (complained, "skipped", Some("suppressed_complaint")),
            (elsewhere, "sent", None),
            (bounced, "skipped", Some("suppressed_hard_bounce")),
            (both, "skipped", Some("suppressed_hard_bounce")),
        ])
    );
    let sent_to: Vec<String> = provider.calls()[2..]
        .iter()
        .map(|c| c.body["to"].as_str().unwrap().to_lowercase())
        .collect();
    assert_eq!(sent_to.len(), 3);
    assert!(sent_to.contains(&"unsub@example.com".to_owned()));

    // An entry removed: its contact is sent to again.
    let entry = app
        .get("/api/v1/suppressions?reason=hard_bounce&email=Bounced%40example.com")
        .await
        .data()[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.delete(&format!("/api/v1/suppressions/{entry}"))
        .await
        .expect(200);
    let id = send_now(&app, &marketing, &[bounced]).await;
    app.ended_broadcast(&id, 30).await;
    assert_eq!(
        outcomes(&app, &id).await,
        expected(&[(bounced, "sent", None)])
    );
}

#[tokio::test]
async fn the_ledger_is_listed_filtered_exported_and_removed_within_its_organization() {
    let app = TestApp::builder().start().await;
    let c = contact(&app, "someone@example.com").await;
    app.post(
        "/api/v1/suppressions",
        json!({"entries": [
            {"email": "a@example.com", "reason": "unsubscribed"},
            {"phone": "+49 151 1234-5678", "channel": "messaging_a", "reason": "complaint"},
            {"contactId": c}
        ]}),
    )
    .await
    .expect(201);
    // Each entry written is an event, with the entry as its data.
    let events: Vec<Value> = app
        .events()
        .await
        .into_iter()
        .filter(|(name, _)| name == "contact.suppressed")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(events.len(), 3);
    assert!(events.iter().any(|d| d["phone"] == "+4915112345678"));

    let page = app.get("/api/v1/suppressions?pageSize=2").await;
    page.expect(200);
    assert_eq!(page.data().as_array().unwrap().len(), 2);
    assert_eq!(page.body["meta"]["hasNext"], true);
    let phone = app.get("/api/v1/suppressions?phone=%2B4915112345678").await;
    assert_eq!(phone.data()[0]["phone"], "+4915112345678");
    assert_eq!(phone.data()[0]["channel"], "messaging_a");
    let manual = app.get("/api/v1/suppressions?reason=manual").await;
    assert_eq!(manual.data().as_array().unwrap().len(), 1);
    assert_eq!(manual.data()[0]["contactId"], c.to_string());
    assert_eq!(manual.data()[0]["channel"], Value::Null);
    app.get("/api/v1/suppressions?reason=bounced")
        .await
        .expect_error(422, "validation_error");

    let csv = export(&app).await;
    assert_eq!(csv.status(), 200);
    assert!(
        csv.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv")
    );
    let text = csv.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "id,email,phone,contact_id,channel,reason,source,created_at,erased"
    );
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[1].contains(",a@example.com,,,,unsubscribed,api,"));
    assert!(lines[1].ends_with(",false"), "{text}");

    // Refused, and nothing written.
    for (body, field) in [
        (json!({"entries": []}), "entries"),
        (
            json!({"entries": [{"email": "b@example.com", "phone": "+4915112345679"}]}),
            "entries[0]",
        ),
        (json!({"entries": [{"reason": "manual"}]}), "entries[0]"),
        (
            json!({"entries": [{"email": "b@example.com"}, {"contactId": Uuid::now_v7()}]}),
            "entries[1].contactId",
        ),
        (json!({"entries": [{"email": "nope"}]}), "entries[0].email"),
    ] {
        let r = app.post("/api/v1/suppressions", body.clone()).await;
        r.expect_error(422, "validation_error");
        assert_eq!(r.field(), field, "{body}: {}", r.body);
    }
    let too_many: Vec<Value> = (0..1001)
        .map(|i| json!({"email": format!("x{i}@example.com")}))
        .collect();
    app.post("/api/v1/suppressions", json!({"entries": too_many}))
        .await
        .expect_error(422, "validation_error");
    assert_eq!(
        app.count_events("contact.suppressed").await,
        3,
        "refused requests emit nothing"
    );
    assert_eq!(
        app.get("/api/v1/suppressions").await.body["meta"]["total"],
        3
    );

    // Another organization sees none of them and removes none.
    let (_, other) = app.new_org("Other").await;
    let theirs = app
        .send(
            reqwest::Method::GET,
            "/api/v1/suppressions",
            Some(&other),
            None,
        )
        .await;
    assert_eq!(theirs.data(), &json!([]));
    let entry = manual.data()[0]["id"].as_str().unwrap().to_owned();
    let path = format!("/api/v1/suppressions/{entry}");
    app.send(reqwest::Method::DELETE, &path, Some(&other), None)
        .await
        .expect_error(404, "not_found");
    // Nor does it name this organization's contact.
    app.send(
        reqwest::Method::POST,
        "/api/v1/suppressions",
        Some(&other),
        Some(&json!({"entries": [{"contactId": c}]})),
    )
    .await
    .expect_error(422, "validation_error");

    app.delete(&path).await.expect(200);
    app.delete(&path).await.expect_error(404, "not_found");
    app.delete("/api/v1/suppressions/not-an-id")
        .await
        .expect_error(404, "not_found");
}

#[tokio::test]
async fn the_export_streams_every_entry_across_its_batches_quoted() {
    let app = TestApp::builder().start().await;
    for batch in 0..3 {
        let entries: Vec<Value> = (0..1000)
            .map(|i| json!({"email": format!("b{batch}-{i}@example.com")}))
            .collect();
        app.post("/api/v1/suppressions", json!({"entries": entries}))
            .await
            .expect(201);
    }
    app.post(
        "/api/v1/suppressions",
        json!({"entries": [{"email": "a,b@example.com"}, {"email": "=cmd@example.com"}]}),
    )
    .await
    .expect(201);
    let text = export(&app).await.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 3002);
    let ids: std::collections::HashSet<&str> = lines[1..]
        .iter()
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(ids.len(), 3002, "no entry twice");
    assert!(lines[1].contains(",b0-0@example.com,"), "oldest first");
    assert!(text.contains(",\"a,b@example.com\","));
    assert!(text.contains(",'=cmd@example.com,"));
    assert!(text.ends_with("\r\n"), "RFC 4180 line ends");
    // The first export gave its place back when its body ended: a second one runs.
    let again = export(&app).await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.text().await.unwrap().lines().count(), 1 + 3002);
}

#[tokio::test]
async fn an_ab_broadcast_with_a_marketing_variant_obeys_every_entry() {
    let app = TestApp::builder().own_database().start().await;
    let _worker = app.spawn_worker(&[]).await;
    let free = contact(&app, "free@example.com").await;
    let unsubscribed = contact(&app, "unsub@example.com").await;
    app.post(
        "/api/v1/suppressions",
        json!({"entries": [{"email": "unsub@example.com", "reason": "unsubscribed"}]}),
    )
    .await
    .expect(201);
    // Its own template is transactional, a variant's is marketing: the broadcast is marketing.
    let utility = email_template(&app, "utility").await;
    let marketing = email_template(&app, "marketing").await;
    let id = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "AB", "templateId": utility,
                   "contactIds": [free, unsubscribed], "sendNow": true,
                   "abTest": {"variants": [{"templateId": marketing}], "testPercent": 100,
                              "winnerMetric": "read", "waitMinutes": 60}}),
        )
        .await
        .expect(201)
        .id();
    app.wait_for(&format!("/api/v1/broadcasts/{id}"), 30, |b| {
        b["data"]["totalRecipients"] == 2 && b["data"]["pendingCount"] == 0
    })
    .await;
    assert_eq!(
        outcomes(&app, &id).await,
        expected(&[
            (free, "sent", None),
            (unsubscribed, "skipped", Some("suppressed_unsubscribed")),
        ])
    );
}

const RECEIPT_SECRET: &str = "receipt-secret";

/// Posts `receipts` to the email channel, signed; returns the status and the answer.
async fn email_receipts(app: &TestApp, receipts: Value) -> (u16, Value) {
    let body = receipts.to_string();
    let signature = parley_domain::signature::sign(RECEIPT_SECRET, body.as_bytes());
    let r = parley_tests::post_receipts(&app.client, &app.base, "email", body, signature).await;
    (r.status().as_u16(), r.json().await.unwrap())
}

/// Each contact's recipient record in `broadcast`, by contact id.
async fn by_contact(app: &TestApp, broadcast: &str) -> std::collections::HashMap<Uuid, Value> {
    recipients(app, broadcast)
        .await
        .into_iter()
        .map(|r| (r["contactId"].as_str().unwrap().parse().unwrap(), r))
        .collect()
}

/// An app on a database of its own that takes signed email receipts, and a worker sending
/// email through a fake provider.
async fn receipts_rig() -> (FakeProvider, TestApp, parley_tests::TestWorker) {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder()
        .own_database()
        .env(&[("PARLEY_CHANNEL_EMAIL_SECRET", RECEIPT_SECRET)])
        .start()
        .await;
    let worker = app
        .spawn_worker(&[("PARLEY_CHANNEL_EMAIL_URL", &provider.url)])
        .await;
    (provider, app, worker)
}

#[tokio::test]
async fn bounces_and_complaints_from_receipts_suppress_and_the_next_sends_skip_them() {
    let (_provider, app, _worker) = receipts_rig().await;
    let org = app
        .patch(
            "/api/v1/organization",
            json!({"softBounceLimit": {"count": 2, "days": 7}}),
        )
        .await;
    org.expect(200);
    assert_eq!(
        org.data()["softBounceLimit"],
        json!({"count": 2, "days": 7})
    );
    let hard = contact(&app, "Hard@example.com").await;
    // Its address changes between the send and the bounce: the entry names the old one.
    let moved = contact(&app, "old@example.com").await;
    let spam = contact(&app, "spam@example.com").await;
    let soft = contact(&app, "soft@example.com").await;
    let once = contact(&app, "once@example.com").await;
    let fine = contact(&app, "fine@example.com").await;
    let all = [hard, spam, soft, once, fine, moved];
    // Transactional mail: it obeys bounces and complaints.
    let utility = email_template(&app, "utility").await;

    let first = send_now(&app, &utility, &all).await;
    app.ended_broadcast(&first, 30).await;
    let rs = by_contact(&app, &first).await;
    let message = |c: &Uuid| rs[c]["externalMessageId"].as_str().unwrap().to_owned();
    let receipts = json!([
        {"messageId": message(&hard), "status": "bounced", "bounceType": "hard",
         "at": "2026-11-20T09:00:00.000Z"},
        {"messageId": message(&spam), "status": "delivered"},
        {"messageId": message(&spam), "status": "complained", "at": "2026-11-20T10:00:00.000Z"},
        {"messageId": message(&soft), "status": "delivered"},
        {"messageId": message(&soft), "status": "bounced", "bounceType": "soft",
         "errorCode": "mailbox_full"},
        {"messageId": message(&once), "status": "bounced", "bounceType": "soft"},
        {"messageId": message(&fine), "status": "delivered"},
        {"messageId": message(&moved), "status": "bounced", "bounceType": "hard"},
    ]);
    app.patch(
        &format!("/api/v1/contacts/{moved}"),
        json!({"email": "new@example.com"}),
    )
    .await
    .expect(200);
    let (status, answer) = email_receipts(&app, receipts.clone()).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["data"],
        json!({"received": 8, "applied": 8, "deferred": 0})
    );
    // The same receipts again change nothing.
    let (_, again) = email_receipts(&app, receipts).await;
    assert_eq!(
        again["data"],
        json!({"received": 8, "applied": 0, "deferred": 0})
    );

    let b = app.get(&format!("/api/v1/broadcasts/{first}")).await;
    let b = b.data();
    assert_eq!(b["bouncedCount"], 4);
    assert_eq!(b["complainedCount"], 1);
    assert_eq!(b["failedCount"], 4);
    assert_eq!(b["deliveredCount"], 2);
    // Bounced over what the provider took: 4 of 2 sent and 4 bounced.
    assert_eq!(b["bounceRate"], 4.0 / 6.0);
    let rs = by_contact(&app, &first).await;
    assert_eq!(rs[&hard]["status"], "failed");
    assert_eq!(rs[&hard]["errorCode"], "bounced_hard");
    assert_eq!(rs[&hard]["bounceType"], "hard");
    assert_eq!(rs[&hard]["bouncedAt"], "2026-11-20T09:00:00.000Z");
    assert_eq!(
        rs[&soft]["status"], "failed",
        "a bounce ends a delivered message"
    );
    assert_eq!(rs[&soft]["errorCode"], "mailbox_full");
    assert_eq!(rs[&soft]["bounceType"], "soft");
    assert!(
        rs[&soft]["deliveredAt"].is_string(),
        "its delivery in the same call is kept"
    );
    assert_eq!(rs[&spam]["status"], "delivered");
    assert_eq!(rs[&spam]["complainedAt"], "2026-11-20T10:00:00.000Z");
    for field in ["bounceType", "bouncedAt", "complainedAt"] {
        assert_eq!(rs[&fine].get(field), Some(&Value::Null), "{field}");
    }
    // Bounced messages are not retried: the failed recipients all bounced.
    app.post(
        &format!("/api/v1/broadcasts/{first}/retry-failed"),
        json!({}),
    )
    .await
    .expect(409);

    // The hard bounce and the complaint are entries for the address on the channel; one soft
    // bounce each is under the limit.
    let entries = app.get("/api/v1/suppressions?channel=email").await;
    let mut got: Vec<(String, String, String)> = entries
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["channel"], "email");
            (
                e["email"].as_str().unwrap().to_owned(),
                e["reason"].as_str().unwrap().to_owned(),
                e["source"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            (
                "hard@example.com".into(),
                "hard_bounce".into(),
                "receipt".into()
            ),
            (
                "old@example.com".into(),
                "hard_bounce".into(),
                "receipt".into()
            ),
            (
                "spam@example.com".into(),
                "complaint".into(),
                "receipt".into()
            ),
        ]
    );
    assert_eq!(app.count_events("contact.suppressed").await, 3);

    // The next send skips them; the second soft bounce reaches the limit.
    let second = send_now(&app, &utility, &all).await;
    app.ended_broadcast(&second, 30).await;
    assert_eq!(
        outcomes(&app, &second).await,
        expected(&[
            (hard, "skipped", Some("suppressed_hard_bounce")),
            (spam, "skipped", Some("suppressed_complaint")),
            (soft, "sent", None),
            (once, "sent", None),
            (fine, "sent", None),
            (moved, "sent", None),
        ])
    );
    let rs = by_contact(&app, &second).await;
    let (_, answer) = email_receipts(
        &app,
        json!([{"messageId": rs[&soft]["externalMessageId"], "status": "bounced",
                "bounceType": "soft"}]),
    )
    .await;
    assert_eq!(answer["data"]["applied"], 1);
    let third = send_now(&app, &utility, &all).await;
    app.ended_broadcast(&third, 30).await;
    assert_eq!(
        outcomes(&app, &third).await,
        expected(&[
            (hard, "skipped", Some("suppressed_hard_bounce")),
            (spam, "skipped", Some("suppressed_complaint")),
            (soft, "skipped", Some("suppressed_soft_bounce_limit")),
            (once, "sent", None),
            (fine, "sent", None),
            (moved, "sent", None),
        ])
    );

    // The address stays suppressed when its contact is deleted and imported again.
    app.delete(&format!("/api/v1/contacts/{hard}"))
        .await
        .expect(200);
    let again = contact(&app, "hard@EXAMPLE.com").await;
    let fourth = send_now(&app, &utility, &[again]).await;
    app.ended_broadcast(&fourth, 30).await;
    assert_eq!(
        outcomes(&app, &fourth).await,
        expected(&[(again, "skipped", Some("suppressed_hard_bounce"))])
    );
}

#[tokio::test]
async fn a_bounce_that_beats_its_message_id_is_kept_with_its_kind() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder()
        .own_database()
        .env(&[("PARLEY_CHANNEL_EMAIL_SECRET", RECEIPT_SECRET)])
        .start()
        .await;
    let message = format!("early-{}", Uuid::now_v7().simple());
    provider.always(parley_tests::provider::Reply::Raw {
        status: 200,
        body: json!({"messageId": message}),
    });
    let (status, answer) = email_receipts(
        &app,
        json!([{"messageId": message, "status": "bounced", "bounceType": "hard"}]),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(answer["data"]["deferred"], 1);
    let _worker = app
        .spawn_worker(&[("PARLEY_CHANNEL_EMAIL_URL", &provider.url)])
        .await;
    let c = contact(&app, "early@example.com").await;
    let t = email_template(&app, "marketing").await;
    let id = send_now(&app, &t, &[c]).await;
    app.wait_for(&format!("/api/v1/broadcasts/{id}"), 30, |b| {
        b["data"]["bouncedCount"] == 1
    })
    .await;
    let rs = by_contact(&app, &id).await;
    assert_eq!(rs[&c]["status"], "failed");
    assert_eq!(rs[&c]["bounceType"], "hard");
    let entries = app.get("/api/v1/suppressions?reason=hard_bounce").await;
    assert_eq!(entries.data()[0]["email"], "early@example.com");
    assert_eq!(entries.data()[0]["source"], "receipt");
}

#[tokio::test]
async fn malformed_bounces_and_soft_bounce_limits_are_refused_and_change_nothing() {
    let app = TestApp::builder()
        .env(&[("PARLEY_CHANNEL_EMAIL_SECRET", RECEIPT_SECRET)])
        .start()
        .await;
    let m1 = format!("m1-{}", Uuid::now_v7().simple());
    let m2 = format!("m2-{}", Uuid::now_v7().simple());
    for (receipts, field) in [
        (
            json!([{"messageId": m1, "status": "bounced"}]),
            "body[0].bounceType",
        ),
        (
            json!([{"messageId": m1, "status": "delivered"},
                   {"messageId": m2, "status": "delivered", "bounceType": "soft"}]),
            "body[1].bounceType",
        ),
    ] {
        let (status, answer) = email_receipts(&app, receipts).await;
        assert_eq!(status, 422, "{answer}");
        assert_eq!(answer["error"]["details"][0]["field"], field, "{answer}");
    }
    let (status, _) = email_receipts(
        &app,
        json!([{"messageId": m1, "status": "bounced", "bounceType": "medium"}]),
    )
    .await;
    assert_eq!(status, 422);
    let kept: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM early_receipts WHERE external_message_id IN ($1, $2)",
    )
    .bind(&m1)
    .bind(&m2)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(kept, 0);

    for (limit, field) in [
        (json!({"count": 0, "days": 7}), "softBounceLimit.count"),
        (json!({"count": 3, "days": 366}), "softBounceLimit.days"),
    ] {
        let r = app
            .patch("/api/v1/organization", json!({"softBounceLimit": limit}))
            .await;
        r.expect(422);
        assert_eq!(r.body["error"]["details"][0]["field"], field);
    }
    for bad in [
        json!(null),
        json!({"count": 3}),
        json!({"count": 3, "days": 7, "x": 1}),
    ] {
        app.patch("/api/v1/organization", json!({"softBounceLimit": bad}))
            .await
            .expect(422);
    }
    let org = app.get("/api/v1/organization").await;
    assert_eq!(
        org.data()["softBounceLimit"],
        json!({"count": 3, "days": 7})
    );
}

#[tokio::test]
async fn a_message_id_two_organizations_share_suppresses_in_neither() {
    let (provider, app, _worker) = receipts_rig().await;
    // A provider that reuses message ids.
    let message = format!("reused-{}", Uuid::now_v7().simple());
    provider.always(parley_tests::provider::Reply::Raw {
        status: 200,
        body: json!({"messageId": message}),
    });
    let mine = contact(&app, "mine@example.com").await;
    let t = email_template(&app, "marketing").await;
    let first = send_now(&app, &t, &[mine]).await;
    app.ended_broadcast(&first, 30).await;
    let (_, other) = app.new_org("Other").await;
    let as_other = |method, path: &str, body: Value| {
        let other = other.clone();
        let path = path.to_owned();
        let app = &app;
        async move {
            app.send(method, &path, Some(&other), Some(&body))
                .await
                .expect(201)
                .id()
        }
    };
    let theirs = as_other(
        reqwest::Method::POST,
        "/api/v1/contacts",
        json!({"source": "web", "email": "theirs@example.com"}),
    )
    .await;
    let their_template = as_other(
        reqwest::Method::POST,
        "/api/v1/templates",
        json!({"name": "T", "channel": "email", "body": "Hello", "subject": "Hello",
               "status": "active", "category": "marketing"}),
    )
    .await;
    let second = as_other(
        reqwest::Method::POST,
        "/api/v1/broadcasts",
        json!({"broadcastName": "B", "templateId": their_template, "contactIds": [theirs],
               "sendNow": true}),
    )
    .await;
    app.run_until_idle(30).await;
    let recorded: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM broadcast_recipients WHERE external_message_id = $1",
    )
    .bind(&message)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(
        recorded, 2,
        "both organizations' messages went out under one id"
    );

    let (status, answer) = email_receipts(
        &app,
        json!([{"messageId": message, "status": "bounced", "bounceType": "hard"}]),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        answer["data"],
        json!({"received": 1, "applied": 0, "deferred": 0})
    );
    for (key, broadcast) in [(&app.key, &first), (&other, &second)] {
        let entries = app
            .send(
                reqwest::Method::GET,
                "/api/v1/suppressions",
                Some(key),
                None,
            )
            .await;
        assert_eq!(entries.data(), &json!([]));
        let path = format!("/api/v1/broadcasts/{broadcast}");
        let b = app.send(reqwest::Method::GET, &path, Some(key), None).await;
        assert_eq!(b.data()["bouncedCount"], 0);
        assert_eq!(b.data()["sentCount"], 1);
    }
}

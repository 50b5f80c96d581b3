//! The suppression ledger: entries added, listed, exported and removed per organization, and
//! every send skipping whom it holds, by the rules of the template's category.

use parley_tests::TestApp;
use parley_tests::provider::FakeProvider;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::broadcasts::{recipients, send_now};

async fn contact(app: &TestApp, email: &str) -> Uuid {
    app.post("/api/v1/contacts", json!({"source": "web", "email": email}))
        .await
        .expect(201)
        .id()
        .parse()
        .unwrap()
}

async fn email_template(app: &TestApp, category: &str) -> String {
    app.post(
        "/api/v1/templates",
        json!({"name": "T", "channel": "email", "body": "Hello", "subject": "Hello",
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
    let app = TestApp::builder().start().await;
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
        "id,email,phone,contact_id,channel,reason,source,created_at"
    );
    assert_eq!(lines.len(), 4, "{text}");
    assert!(lines[1].contains(",a@example.com,,,,unsubscribed,api,"));

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
    let app = TestApp::builder().start().await;
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

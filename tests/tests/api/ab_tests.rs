//! A/B broadcasts end to end (issue 29): a test share split among variants, the winner picked
//! by receipts when the wait ends (the injectable clock) or by the caller, and the rest of the
//! audience sent the winner, each contact exactly once.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use parley_tests::{TestApp, seed};
use serde_json::{Value, json};

use crate::broadcasts::{recipients, template};

const SECRET: &str = "receipt-secret";

async fn app() -> TestApp {
    TestApp::builder()
        .env(&[("PARLEY_CHANNEL_EMAIL_SECRET", SECRET)])
        .own_database()
        .start()
        .await
}

async fn figures(app: &TestApp, id: &str, secs: u64, until: impl Fn(&Value) -> bool) -> Value {
    let path = format!("/api/v1/broadcasts/{id}");
    app.wait_for(&path, secs, |b| until(&b["data"])).await["data"].clone()
}

/// The test share is written and sent: the broadcast waits for its winner.
fn tested(b: &Value) -> bool {
    b["abTest"]["testEndsAt"].is_string()
        && b["pendingCount"] == 0
        && b["sentCount"] == b["totalRecipients"]
}

async fn read_receipts(app: &TestApp, messages: &[String]) {
    let receipts: Vec<Value> = messages
        .iter()
        .map(|m| json!({"messageId": m, "status": "read"}))
        .collect();
    let body = Value::Array(receipts).to_string();
    let signature = parley_domain::signature::sign(SECRET, body.as_bytes());
    let r = parley_tests::post_receipts(&app.client, &app.base, "email", body, signature).await;
    assert!(r.status().is_success(), "{}", r.status());
}

#[tokio::test]
async fn an_ab_broadcast_tests_its_variants_and_sends_the_winner_to_the_rest_once() {
    let app = app().await;
    let _worker = app.spawn_worker(&[]).await;
    let contacts = seed::contacts(&app, 80).await;
    let a = template(&app, "email", "Offer A").await;
    let b = template(&app, "email", "Offer B").await;
    let id = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "AB", "templateId": a, "contactIds": contacts, "sendNow": true,
                   "abTest": {"variants": [{"templateId": b}], "testPercent": 50,
                              "winnerMetric": "read", "waitMinutes": 60}}),
        )
        .await
        .expect(201)
        .id();
    let test = figures(&app, &id, 30, tested).await;
    assert_eq!(test["isABTest"], true);
    assert_eq!(test["winningVariant"], false);
    assert_eq!(test["status"], "sending", "waiting for its winner");
    let names: Vec<&str> = test["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["A", "B"]);
    let in_test = test["totalRecipients"].as_i64().unwrap();
    assert!((20..=60).contains(&in_test), "about half of 80: {in_test}");
    let rs = recipients(&app, &id).await;
    assert_eq!(rs.len() as i64, in_test);
    let by_variant = |rs: &[Value], name: &str| -> Vec<Value> {
        rs.iter()
            .filter(|r| r["variant"] == name)
            .cloned()
            .collect()
    };
    let (tested_a, tested_b) = (by_variant(&rs, "A"), by_variant(&rs, "B"));
    assert!(!tested_a.is_empty() && !tested_b.is_empty());
    assert_eq!(tested_a.len() + tested_b.len(), rs.len());
    assert_eq!(test["variants"][1]["totalRecipients"], tested_b.len());

    // B's recipients read their message: B wins on reads when the wait ends.
    let messages: Vec<String> = tested_b
        .iter()
        .map(|r| r["externalMessageId"].as_str().unwrap().to_owned())
        .collect();
    read_receipts(&app, &messages).await;
    let b_read = figures(&app, &id, 10, |b| b["variants"][1]["readRate"] == 1.0).await;
    assert_eq!(b_read["variants"][0]["readRate"], 0.0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        get_winner(&app, &id).await.is_null(),
        "not before the wait ends"
    );

    app.clock.advance(Duration::from_secs(61 * 60));
    let done = figures(&app, &id, 30, |b| b["status"] == "completed").await;
    assert_eq!(done["abTest"]["winner"], "B");
    assert_eq!(done["abTest"]["pickedBy"], "auto");
    assert_eq!(
        (
            done["variantName"].as_str(),
            done["winningVariant"].as_bool()
        ),
        (Some("B"), Some(true))
    );
    assert_eq!(done["sentCount"], 80);
    let all = recipients(&app, &id).await;
    let contacts_seen: HashSet<&str> = all
        .iter()
        .map(|r| r["contactId"].as_str().unwrap())
        .collect();
    assert_eq!(
        (all.len(), contacts_seen.len()),
        (80, 80),
        "each contact exactly once"
    );
    let mut per_variant: HashMap<&str, usize> = HashMap::new();
    for r in &all {
        *per_variant
            .entry(r["variant"].as_str().unwrap())
            .or_default() += 1;
    }
    assert_eq!(
        per_variant["A"],
        tested_a.len(),
        "A went to its test recipients only"
    );
    assert_eq!(per_variant["B"], 80 - tested_a.len());
    assert_eq!(done["variants"][1]["totalRecipients"], 80 - tested_a.len());
    assert_eq!(app.count_events("broadcast.variant_picked").await, 1);
    let history = app
        .get(&format!(
            "/api/v1/contacts/{}/messages",
            all[0]["contactId"].as_str().unwrap()
        ))
        .await;
    assert_eq!(history.data()[0]["variant"], all[0]["variant"]);
    // The winner's template counts its messages in its analytics.
    let analytics = app.get(&format!("/api/v1/templates/{b}/analytics")).await;
    analytics.expect(200);
    assert_eq!(
        analytics.data()["sentCount"],
        80 - tested_a.len(),
        "{:?}",
        analytics.body
    );
}

async fn get_winner(app: &TestApp, id: &str) -> Value {
    app.get(&format!("/api/v1/broadcasts/{id}")).await.data()["abTest"]["winner"].clone()
}

#[tokio::test]
async fn the_caller_may_pick_the_winner_before_the_wait_ends() {
    let app = app().await;
    let _worker = app.spawn_worker(&[]).await;
    let contacts = seed::contacts(&app, 30).await;
    let a = template(&app, "email", "One").await;
    let b = template(&app, "email", "Two").await;
    let c = template(&app, "email", "Three").await;
    let id = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "ABC", "templateId": a, "contactIds": contacts, "sendNow": true,
                   "abTest": {"variantAName": "first", "variants": [{"templateId": b, "name": "second"},
                              {"templateId": c}], "testPercent": 30, "winnerMetric": "delivered",
                              "waitMinutes": 600}}),
        )
        .await
        .expect(201)
        .id();
    figures(&app, &id, 30, tested).await;
    let pick = |variant: &str| {
        let app = &app;
        let body = json!({"variant": variant});
        let path = format!("/api/v1/broadcasts/{id}/pick-variant");
        async move { app.post(&path, body).await }
    };
    pick("fourth").await.expect_error(422, "validation_error");
    let picked = pick("C").await;
    picked.expect(200);
    assert_eq!(picked.data()["abTest"]["winner"], "C");
    assert_eq!(picked.data()["abTest"]["pickedBy"], "api");
    pick("first").await.expect_error(409, "invalid_state");
    let done = figures(&app, &id, 30, |b| b["status"] == "completed").await;
    assert_eq!(done["sentCount"], 30);
    let all = recipients(&app, &id).await;
    let rest = all.iter().filter(|r| r["variant"] == "C").count();
    assert_eq!(done["variants"][2]["totalRecipients"], rest);
    assert_eq!(app.count_events("broadcast.variant_picked").await, 1);

    // Not an A/B broadcast: 409.
    let plain = crate::broadcasts::send_now(&app, &a, &contacts[..1]).await;
    pick_on(&app, &plain)
        .await
        .expect_error(409, "invalid_state");
}

async fn pick_on(app: &TestApp, id: &str) -> parley_tests::Resp {
    app.post(
        &format!("/api/v1/broadcasts/{id}/pick-variant"),
        json!({"variant": "A"}),
    )
    .await
}

#[tokio::test]
async fn bad_ab_tests_are_refused_and_write_nothing() {
    let app = TestApp::builder().start().await;
    let contacts = seed::contacts(&app, 1).await;
    let a = template(&app, "email", "A").await;
    let sms = template(&app, "messaging_a", "Hi").await;
    let var = template(&app, "email", "Code {{1}}").await;
    let ab = |test: Value| {
        json!({"broadcastName": "AB", "templateId": a, "contactIds": contacts, "isDraft": true,
               "abTest": test})
    };
    let v = |t: &str| json!({"templateId": t});
    for (test, field) in [
        (
            json!({"variants": [], "testPercent": 20, "winnerMetric": "read", "waitMinutes": 60}),
            "abTest.variants",
        ),
        (
            json!({"variants": [v(&a), v(&a), v(&a), v(&a)], "testPercent": 20, "winnerMetric": "read", "waitMinutes": 60}),
            "abTest.variants",
        ),
        (
            json!({"variants": [v(&a)], "testPercent": 0, "winnerMetric": "read", "waitMinutes": 60}),
            "abTest.testPercent",
        ),
        (
            json!({"variants": [v(&a)], "testPercent": 20, "winnerMetric": "read", "waitMinutes": 0}),
            "abTest.waitMinutes",
        ),
        (
            json!({"variants": [v(&a)], "testPercent": 20, "winnerMetric": "clicks", "waitMinutes": 60}),
            "abTest.winnerMetric",
        ),
        (
            json!({"variants": [v(&sms)], "testPercent": 20, "winnerMetric": "read", "waitMinutes": 60}),
            "abTest.variants[0].templateId",
        ),
        (
            json!({"variants": [v(&var)], "testPercent": 20, "winnerMetric": "read", "waitMinutes": 60}),
            "abTest.variants[0].templateVariables.body",
        ),
        (
            json!({"variants": [{"templateId": a, "name": "A"}], "testPercent": 20, "winnerMetric": "read", "waitMinutes": 60}),
            "abTest.variants[0].name",
        ),
        (
            json!({"variants": [v(&uuid::Uuid::now_v7().to_string())], "testPercent": 20, "winnerMetric": "read", "waitMinutes": 60}),
            "abTest.variants[0].templateId",
        ),
    ] {
        let r = app.post("/api/v1/broadcasts", ab(test.clone())).await;
        r.expect(422);
        assert_eq!(r.field(), field, "{test}: {:?}", r.body);
    }
    let local = json!({"broadcastName": "AB", "templateId": a, "contactIds": contacts,
                       "sendIn": "contact_timezone", "scheduledAt": "2030-01-01T09:00:00",
                       "abTest": {"variants": [v(&a)], "testPercent": 20, "winnerMetric": "read", "waitMinutes": 60}});
    app.post("/api/v1/broadcasts", local).await.expect(422);
    assert_eq!(app.get("/api/v1/broadcasts").await.data(), &json!([]));
}

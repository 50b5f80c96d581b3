//! A send explained before it goes out: a broadcast's preview agrees, outcome by outcome, with
//! what its send then writes, for an audience mixing every outcome.

use std::collections::BTreeMap;

use chrono::Timelike;
use parley_tests::TestApp;
use parley_tests::provider::FakeProvider;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::broadcasts::recipients;
use crate::suppressions::{contact, email_template_with as email_template};

async fn contact_with(app: &TestApp, body: Value) -> Uuid {
    app.post("/api/v1/contacts", body)
        .await
        .expect(201)
        .id()
        .parse()
        .unwrap()
}

/// `(status, errorCode as JSON)` → count, of a preview's groups.
fn preview_counts(preview: &Value) -> BTreeMap<(String, String), i64> {
    preview["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                (
                    o["status"].as_str().unwrap().to_owned(),
                    o["errorCode"].to_string(),
                ),
                o["count"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// The group of a preview with `code` (or status `held`).
fn group<'a>(preview: &'a Value, status: &str, code: Value) -> &'a Value {
    preview["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["status"] == status && o["errorCode"] == code)
        .unwrap_or_else(|| panic!("no {status} {code} in {preview}"))
}

#[tokio::test]
async fn a_preview_counts_what_the_send_then_does_outcome_by_outcome() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    let _worker = app
        .spawn_worker(&[
            ("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str()),
            ("PARLEY_PUBLIC_URL", app.base.as_str()),
        ])
        .await;
    let marketing = email_template(&app, "marketing", "News").await;
    app.patch(
        "/api/v1/organization",
        json!({"frequencyCaps": {"email": {"perDay": 1}}}),
    )
    .await
    .expect(200);

    let sent_a = contact(&app, "a@example.com").await;
    let sent_b = contact(&app, "b@example.com").await;
    let bounced = contact(&app, "bounced@example.com").await;
    let unsubscribed = contact(&app, "unsubscribed@example.com").await;
    let left_topic = contact(&app, "left@example.com").await;
    let do_not_contact = contact_with(
        &app,
        json!({"source": "web", "email": "dnc@example.com", "doNotContact": true}),
    )
    .await;
    let no_email = contact_with(&app, json!({"source": "web", "phone": "+15550100"})).await;
    let capped = contact(&app, "capped@example.com").await;
    // UTC+12: its quiet hours, set below, are now there and not in UTC.
    let held = contact_with(
        &app,
        json!({"source": "web", "email": "held@example.com", "timezone": "Etc/GMT-12"}),
    )
    .await;
    let deleted = contact(&app, "deleted@example.com").await;

    app.post(
        "/api/v1/suppressions",
        json!({"entries": [
            {"email": "bounced@example.com", "reason": "hard_bounce"},
            {"email": "unsubscribed@example.com", "reason": "unsubscribed"},
        ]}),
    )
    .await
    .expect(201);
    let news = app
        .post("/api/v1/topics", json!({"name": "News"}))
        .await
        .expect(201)
        .id();
    app.patch(
        &format!("/api/v1/contacts/{left_topic}/subscriptions"),
        json!({"topics": [{"topicId": news, "subscribed": false}]}),
    )
    .await
    .expect(200);
    // The capped contact had its one message of the day.
    let earlier = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "Earlier", "templateId": marketing, "contactIds": [capped],
                   "sendNow": true}),
        )
        .await
        .expect(201)
        .id();
    app.ended_broadcast(&earlier, 30).await;

    let local_hour = (chrono::Utc::now().hour() + 12) % 24;
    let quiet = json!({"start": format!("{local_hour:02}:00"),
                       "end": format!("{:02}:00", (local_hour + 2) % 24)});
    let audience = [
        sent_a,
        sent_b,
        bounced,
        unsubscribed,
        left_topic,
        do_not_contact,
        no_email,
        capped,
        held,
        deleted,
    ];
    let draft = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "Preview", "templateId": marketing, "contactIds": audience,
                   "isDraft": true, "topicId": news, "quietHours": quiet}),
        )
        .await
        .expect(201)
        .id();
    app.delete(&format!("/api/v1/contacts/{deleted}"))
        .await
        .expect(200);

    let preview = app
        .post(&format!("/api/v1/broadcasts/{draft}/preview"), json!({}))
        .await;
    preview.expect(200);
    let preview = preview.data().clone();
    assert_eq!(preview["audience"], 10);
    assert_eq!(preview["wouldSend"], 2);
    assert_eq!(preview["wouldNotSend"], 8);
    assert_eq!(preview["abSplit"], Value::Null);
    assert_eq!(preview["outcomes"][0]["status"], "sent", "sent first");
    for (code, who) in [
        ("suppressed_hard_bounce", bounced),
        ("suppressed_unsubscribed", unsubscribed),
        ("topic_unsubscribed", left_topic),
        ("do_not_contact", do_not_contact),
        ("frequency_capped", capped),
        ("contact_deleted", deleted),
    ] {
        assert_eq!(
            group(&preview, "skipped", json!(code))["sampleContactIds"],
            json!([who]),
            "{code}"
        );
    }
    assert_eq!(
        group(&preview, "failed", json!("no_address"))["sampleContactIds"],
        json!([no_email])
    );
    let held_group = group(&preview, "held", Value::Null);
    assert_eq!(held_group["holdReason"], "quiet_hours");
    assert_eq!(held_group["sampleContactIds"], json!([held]));
    assert!(held_group["heldUntil"].is_string());
    // Reading changes nothing: no recipient, nothing sent.
    assert!(recipients(&app, &draft).await.is_empty());

    // The send, then: each recipient's status and code, counted as the preview counts them.
    app.patch(
        &format!("/api/v1/broadcasts/{draft}"),
        json!({"sendNow": true}),
    )
    .await
    .expect(200);
    // Every recipient written and none pending (the held one keeps the broadcast sending).
    app.wait_for(&format!("/api/v1/broadcasts/{draft}"), 30, |b| {
        b["data"]["totalRecipients"] == 10 && b["data"]["pendingCount"] == 0
    })
    .await;
    let written = recipients(&app, &draft).await;
    let mut counts: BTreeMap<(String, String), i64> = BTreeMap::new();
    for r in &written {
        *counts
            .entry((
                r["status"].as_str().unwrap().to_owned(),
                r["errorCode"].to_string(),
            ))
            .or_default() += 1;
        if r["status"] == "held" {
            assert_eq!(r["holdUntil"], held_group["heldUntil"]);
        }
    }
    assert_eq!(counts, preview_counts(&preview));

    // Only drafts and scheduled broadcasts are previewed.
    app.post(&format!("/api/v1/broadcasts/{draft}/preview"), json!({}))
        .await
        .expect_error(409, "invalid_state");
    app.post(
        &format!("/api/v1/broadcasts/{}/preview", Uuid::now_v7()),
        json!({}),
    )
    .await
    .expect(404);
}

#[tokio::test]
async fn an_ab_preview_splits_the_recipients_as_the_fan_out_then_writes_them() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().own_database().start().await;
    let _worker = app
        .spawn_worker(&[("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str())])
        .await;
    let a = email_template(&app, "marketing", "A").await;
    let b = email_template(&app, "marketing", "B").await;
    let audience = parley_tests::seed::contacts(&app, 40).await;
    let draft = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "AB", "templateId": a, "contactIds": audience, "isDraft": true,
                   "abTest": {"testPercent": 50, "winnerMetric": "read", "waitMinutes": 60,
                              "variants": [{"templateId": b}]}}),
        )
        .await
        .expect(201)
        .id();
    let preview = app
        .post(&format!("/api/v1/broadcasts/{draft}/preview"), json!({}))
        .await;
    preview.expect(200);
    let split = preview.data()["abSplit"].clone();
    let variants = split["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 2);
    let drawn: i64 = variants.iter().map(|v| v["count"].as_i64().unwrap()).sum();
    assert_eq!(drawn + split["rest"].as_i64().unwrap(), 40);
    assert!(drawn > 0 && split["rest"].as_i64().unwrap() > 0, "{split}");

    // The send writes the test share first, each recipient with the variant it was drawn.
    app.patch(
        &format!("/api/v1/broadcasts/{draft}"),
        json!({"sendNow": true}),
    )
    .await
    .expect(200);
    app.wait_for(&format!("/api/v1/broadcasts/{draft}"), 30, |b| {
        b["data"]["abTest"]["testEndsAt"].is_string() && b["data"]["pendingCount"] == 0
    })
    .await;
    let written = recipients(&app, &draft).await;
    assert_eq!(written.len() as i64, drawn, "the test share");
    for v in variants {
        let n = written.iter().filter(|r| r["variant"] == v["name"]).count() as i64;
        assert_eq!(n, v["count"].as_i64().unwrap(), "variant {}", v["name"]);
    }
}

#[tokio::test]
async fn a_scheduled_broadcast_is_previewed_at_its_time() {
    let app = TestApp::builder().start().await;
    let t = email_template(&app, "marketing", "Later").await;
    let c = contact(&app, "later@example.com").await;
    // Quiet now in UTC; over three hours from now, when the broadcast is due.
    let hour = chrono::Utc::now().hour();
    let quiet =
        json!({"start": format!("{hour:02}:00"), "end": format!("{:02}:00", (hour + 2) % 24)});
    let at = (chrono::Utc::now() + chrono::Duration::hours(3))
        .with_nanosecond(0)
        .unwrap();
    let body = |scheduled: Option<String>| {
        let mut b = json!({"broadcastName": "B", "templateId": t, "contactIds": [c],
                           "quietHours": quiet});
        match scheduled {
            Some(at) => b["scheduledAt"] = json!(at),
            None => b["isDraft"] = json!(true),
        }
        b
    };
    let scheduled = app
        .post("/api/v1/broadcasts", body(Some(at.to_rfc3339())))
        .await
        .expect(201)
        .id();
    let preview = app
        .post(
            &format!("/api/v1/broadcasts/{scheduled}/preview"),
            json!({}),
        )
        .await;
    preview.expect(200);
    assert_eq!(preview.data()["wouldSend"], 1, "{}", preview.body);
    let evaluated: chrono::DateTime<chrono::Utc> = preview.data()["evaluatedAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(evaluated, at);
    // A draft is previewed now: held by the quiet hours.
    let draft = app
        .post("/api/v1/broadcasts", body(None))
        .await
        .expect(201)
        .id();
    let now = app
        .post(&format!("/api/v1/broadcasts/{draft}/preview"), json!({}))
        .await;
    assert_eq!(now.data()["outcomes"][0]["status"], "held", "{}", now.body);
    assert_eq!(now.data()["outcomes"][0]["holdReason"], "quiet_hours");
}

/// An audience of many pages is counted whole, its suppressed contacts found on the first, a
/// middle and the last page; a second preview of the organization while one runs is 429
/// `rate_limited`, and the next one, once it ended, runs.
#[tokio::test]
async fn a_preview_counts_every_page_and_runs_one_at_a_time_per_organization() {
    let app = TestApp::builder().start().await;
    let n = 60_000;
    let ids = parley_tests::seed::contacts(&app, n).await;
    let bounced = [ids[0], ids[n / 2], ids[n - 1]];
    sqlx::query(
        "INSERT INTO suppressions (id, organization_id, contact_id, reason, source, created_at)
         SELECT uuid_v7(), $1, c, 'hard_bounce', 'api', now() FROM unnest($2::uuid[]) c",
    )
    .bind(app.org_id)
    .bind(&bounced[..])
    .execute(&app.pool)
    .await
    .unwrap();
    let segment = app
        .post(
            "/api/v1/segments",
            json!({"name": "Seeded", "filter": {"source": "seed"}}),
        )
        .await
        .id();
    let template = email_template(&app, "marketing", "Hello").await;
    let draft = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "Big", "templateId": template, "segmentId": segment}),
        )
        .await
        .id();
    let path = format!("/api/v1/broadcasts/{draft}/preview");
    let (a, b) = tokio::join!(app.post(&path, json!({})), app.post(&path, json!({})));
    let (done, busy) = if a.status == 200 { (a, b) } else { (b, a) };
    done.expect(200);
    busy.expect_error(429, "rate_limited");
    let p = done.data();
    assert_eq!(
        (&p["audience"], &p["wouldSend"], &p["wouldNotSend"]),
        (&json!(n), &json!(n - 3), &json!(3)),
        "{p}"
    );
    let g = group(p, "skipped", json!("suppressed_hard_bounce"));
    assert_eq!(g["count"], 3);
    let mut samples: Vec<Uuid> = serde_json::from_value(g["sampleContactIds"].clone()).unwrap();
    samples.sort();
    assert_eq!(samples, bounced);
    app.post(&path, json!({})).await.expect(200);
}

/// Without Redis, a preview that must count a frequency cap is 503 `service_unavailable` (not
/// a guess, not a 500), while one without a cap still answers from Postgres alone.
#[tokio::test]
async fn a_capped_preview_without_redis_is_503_and_an_uncapped_one_answers() {
    let app = TestApp::builder().start().await;
    // An API on the same database whose Redis is a closed port (it connects lazily).
    let url = format!("redis://127.0.0.1:{}", parley_tests::closed_port());
    let (addr, stop) = app.sibling_api(&[("REDIS_URL", &url)]).await;

    let mut status = Vec::new();
    for capped in [false, true] {
        let (_, key) = app.new_org(if capped { "Capped" } else { "Free" }).await;
        let send = |method: reqwest::Method, path: &str, body: Option<Value>| {
            let key = key.clone();
            let path = path.to_owned();
            let app = &app;
            async move { app.send(method, &path, Some(&key), body.as_ref()).await }
        };
        if capped {
            send(
                reqwest::Method::PATCH,
                "/api/v1/organization",
                Some(json!({"frequencyCaps": {"email": {"perDay": 1}}})),
            )
            .await
            .expect(200);
        }
        let c = send(
            reqwest::Method::POST,
            "/api/v1/contacts",
            Some(json!({"source": "web", "email": "a@example.com"})),
        )
        .await
        .id();
        let t = send(
            reqwest::Method::POST,
            "/api/v1/templates",
            Some(
                json!({"name": "T", "channel": "email", "body": "Hello", "subject": "Hi",
                        "status": "active", "category": "marketing"}),
            ),
        )
        .await
        .id();
        let draft = send(
            reqwest::Method::POST,
            "/api/v1/broadcasts",
            Some(json!({"broadcastName": "B", "templateId": t, "contactIds": [c]})),
        )
        .await
        .id();
        let resp = app
            .client
            .post(format!("http://{addr}/api/v1/broadcasts/{draft}/preview"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        let code = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap();
        status.push((
            code,
            body["error"]["code"].clone(),
            body["data"]["wouldSend"].clone(),
        ));
    }
    stop.cancel();
    assert_eq!(
        status,
        [
            (200, Value::Null, json!(1)),
            (503, json!("service_unavailable"), Value::Null)
        ]
    );
}

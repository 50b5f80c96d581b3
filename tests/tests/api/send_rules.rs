//! Sending that respects people's time (issue 29), end to end with a worker and the
//! injectable clock: local-time broadcasts, quiet hours and frequency caps.

use std::time::Duration;

use chrono::{Timelike, Utc};
use parley_tests::TestApp;
use serde_json::{Value, json};

use crate::broadcasts::template;

/// A contact with an email address in `zone` (none: the organization's).
async fn contact_in(app: &TestApp, name: &str, zone: Option<&str>) -> String {
    let mut body = json!({"source": "test", "name": name, "email": format!("{name}@example.com")});
    if let Some(zone) = zone {
        body["timezone"] = json!(zone);
    }
    app.post("/api/v1/contacts", body).await.expect(201).id()
}

async fn broadcast(app: &TestApp, body: Value) -> String {
    app.post("/api/v1/broadcasts", body).await.expect(201).id()
}

async fn get(app: &TestApp, broadcast: &str) -> Value {
    app.get(&format!("/api/v1/broadcasts/{broadcast}"))
        .await
        .expect(200)
        .data()
        .clone()
}

/// Waits until the broadcast's figures satisfy `until`; returns them.
async fn wait_figures(app: &TestApp, broadcast: &str, until: impl Fn(&Value) -> bool) -> Value {
    let path = format!("/api/v1/broadcasts/{broadcast}");
    app.wait_for(&path, 30, |b| until(&b["data"])).await["data"].clone()
}

/// The contact's record in the broadcast.
async fn record(app: &TestApp, contact: &str, broadcast: &str) -> Value {
    let page = app
        .get(&format!("/api/v1/contacts/{contact}/messages?pageSize=100"))
        .await;
    page.expect(200);
    page.data()
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["broadcastId"] == broadcast)
        .unwrap_or_else(|| panic!("no record of {contact} in {broadcast}"))
        .clone()
}

fn sent(b: &Value) -> i64 {
    b["sentCount"].as_i64().unwrap()
}

#[tokio::test]
async fn a_local_time_broadcast_reaches_each_zone_at_its_local_time() {
    let app = TestApp::builder().own_database().start().await;
    let _worker = app.spawn_worker(&[]).await;
    // Contacts without a zone are in the organization's (America/Phoenix: UTC-7, no DST).
    app.patch(
        "/api/v1/organization",
        json!({"workingHours": {"timezone": "America/Phoenix",
                                "days": {"monday": [{"start": "09:00", "end": "17:00"}]}}}),
    )
    .await
    .expect(200);
    let kiritimati = contact_in(&app, "kiritimati", Some("Pacific/Kiritimati")).await; // UTC+14
    let tokyo = contact_in(&app, "tokyo", Some("Asia/Tokyo")).await; // UTC+9
    let phoenix = contact_in(&app, "phoenix", None).await;
    let t = template(&app, "email", "Good morning").await;
    // The wall time 13 hours ahead of UTC's: an hour ago in Kiritimati (before the request:
    // sent at once), in 4 hours in Tokyo, in 20 in Phoenix.
    let wall = (Utc::now() + chrono::Duration::hours(13))
        .with_nanosecond(0)
        .unwrap()
        .naive_utc();
    let id = broadcast(
        &app,
        json!({"broadcastName": "Morning", "templateId": t,
               "contactIds": [phoenix, tokyo, kiritimati],
               "scheduledAt": wall.format("%Y-%m-%dT%H:%M:%S").to_string(),
               "sendIn": "contact_timezone"}),
    )
    .await;
    let b = get(&app, &id).await;
    assert_eq!(b["sendIn"], "contact_timezone");
    assert_eq!(b["localTime"], wall.format("%Y-%m-%dT%H:%M:%S").to_string());
    assert_eq!(b["pastTimePolicy"], "send_now");
    // Due at once (its first zone's time has passed): the ticker queues it within a tick.
    assert!(
        matches!(
            b["status"].as_str(),
            Some("scheduled" | "queued" | "sending")
        ),
        "{b}"
    );

    let b = wait_figures(&app, &id, |b| sent(b) == 1 && b["heldCount"] == 2).await;
    assert_eq!(
        b["status"], "sending",
        "sending from the first zone's time to the last"
    );
    assert_eq!(record(&app, &kiritimati, &id).await["status"], "sent");
    let held = record(&app, &tokyo, &id).await;
    assert_eq!(held["status"], "held");
    let due = chrono::DateTime::parse_from_rfc3339(held["holdUntil"].as_str().unwrap()).unwrap();
    assert_eq!(
        due.naive_utc(),
        wall - chrono::Duration::hours(9),
        "09:00 wall time in Tokyo"
    );

    app.clock.advance(Duration::from_secs(4 * 3600 + 60));
    wait_figures(&app, &id, |b| sent(b) == 2 && b["heldCount"] == 1).await;
    assert_eq!(record(&app, &tokyo, &id).await["status"], "sent");
    assert_eq!(record(&app, &phoenix, &id).await["status"], "held");

    app.clock.advance(Duration::from_secs(16 * 3600));
    let b = wait_figures(&app, &id, |b| b["status"] == "completed").await;
    assert_eq!((sent(&b), b["heldCount"].as_i64()), (3, Some(0)));
    let at = |r: &Value| r["sentAt"].as_str().unwrap().to_owned();
    let (first, second, third) = (
        at(&record(&app, &kiritimati, &id).await),
        at(&record(&app, &tokyo, &id).await),
        at(&record(&app, &phoenix, &id).await),
    );
    assert!(
        first < second && second < third,
        "sent in zone order: {first} {second} {third}"
    );

    // The same time with `skip`: the contact whose time had passed is skipped, counted.
    let skip = broadcast(
        &app,
        json!({"broadcastName": "Morning 2", "templateId": t, "contactIds": [kiritimati],
               "scheduledAt": format!("{}Z", wall.format("%Y-%m-%dT%H:%M:%S")),
               "sendIn": "contact_timezone", "pastTimePolicy": "skip"}),
    )
    .await;
    let b = wait_figures(&app, &skip, |b| b["status"] == "failed").await;
    assert_eq!(b["skippedCount"], 1);
    assert_eq!(
        record(&app, &kiritimati, &skip).await["errorCode"],
        "send_time_passed"
    );
}

#[tokio::test]
async fn quiet_hours_hold_bulk_sends_until_they_end_and_not_high_priority_ones() {
    let app = TestApp::builder().own_database().start().await;
    let _worker = app.spawn_worker(&[]).await;
    // Quiet from an hour ago to an hour from now in Tokyo (UTC+9, no DST).
    let tokyo_now = Utc::now() + chrono::Duration::hours(9);
    let hhmm = |t: chrono::DateTime<Utc>| t.format("%H:%M").to_string();
    let quiet = json!({"start": hhmm(tokyo_now - chrono::Duration::hours(1)),
                       "end": hhmm(tokyo_now + chrono::Duration::hours(1))});
    let org = app
        .patch("/api/v1/organization", json!({"quietHours": quiet}))
        .await;
    org.expect(200);
    assert_eq!(org.data()["quietHours"], quiet);
    let tokyo = contact_in(&app, "tokyo", Some("Asia/Tokyo")).await;
    let utc = contact_in(&app, "utc", Some("Etc/UTC")).await;
    let t = template(&app, "email", "News").await;
    let bulk = broadcast(
        &app,
        json!({"broadcastName": "News", "templateId": t, "contactIds": [tokyo, utc], "sendNow": true}),
    )
    .await;
    // Quiet in Tokyo, not in UTC (nine hours apart).
    let b = wait_figures(&app, &bulk, |b| sent(b) == 1 && b["heldCount"] == 1).await;
    assert_eq!(b["status"], "sending");
    let held = record(&app, &tokyo, &bulk).await;
    assert_eq!(held["status"], "held");
    assert!(held["holdUntil"].is_string());

    // A high-priority message goes now; a broadcast's own empty window lets a bulk one through.
    let urgent = broadcast(
        &app,
        json!({"broadcastName": "Code", "templateId": t, "contactIds": [tokyo], "sendNow": true,
               "priority": "high"}),
    )
    .await;
    wait_figures(&app, &urgent, |b| b["status"] == "completed").await;
    let own = broadcast(
        &app,
        json!({"broadcastName": "Own", "templateId": t, "contactIds": [tokyo], "sendNow": true,
               "quietHours": {"start": "00:00", "end": "00:00"}}),
    )
    .await;
    wait_figures(&app, &own, |b| b["status"] == "completed").await;

    // Still held a while later (the ticker does not release it early)...
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(get(&app, &bulk).await["heldCount"], 1);
    // ...and sent once the window ends, exactly once.
    app.clock.advance(Duration::from_secs(3600 + 60));
    let b = wait_figures(&app, &bulk, |b| b["status"] == "completed").await;
    assert_eq!((sent(&b), b["heldCount"].as_i64()), (2, Some(0)));
    assert_eq!(record(&app, &tokyo, &bulk).await["status"], "sent");
}

#[tokio::test]
async fn the_frequency_cap_skips_the_message_over_it_and_not_a_high_priority_one() {
    let app = TestApp::builder().own_database().start().await;
    let _worker = app.spawn_worker(&[]).await;
    let org = app
        .patch(
            "/api/v1/organization",
            json!({"frequencyCaps": {"email": {"perDay": 1, "perWeek": 5}}}),
        )
        .await;
    org.expect(200);
    assert_eq!(
        org.data()["frequencyCaps"],
        json!({"email": {"perDay": 1, "perWeek": 5}})
    );
    let x = contact_in(&app, "x", None).await;
    let y = contact_in(&app, "y", None).await;
    let t = template(&app, "email", "Offer").await;
    let send = |contacts: Vec<&String>, priority: &'static str| {
        let body = json!({"broadcastName": "Offer", "templateId": t, "contactIds": contacts,
                          "sendNow": true, "priority": priority});
        let app = &app;
        async move { broadcast(app, body).await }
    };
    let done = |b: &Value| matches!(b["status"].as_str(), Some("completed" | "failed"));

    let first = send(vec![&x], "normal").await;
    wait_figures(&app, &first, done).await;
    let second = send(vec![&x, &y], "normal").await;
    let b = wait_figures(&app, &second, done).await;
    assert_eq!((sent(&b), b["skippedCount"].as_i64()), (1, Some(1)));
    let capped = record(&app, &x, &second).await;
    assert_eq!(capped["status"], "skipped");
    assert_eq!(capped["errorCode"], "frequency_capped");
    assert_eq!(record(&app, &y, &second).await["status"], "sent");

    let urgent = send(vec![&x], "high").await;
    let b = wait_figures(&app, &urgent, done).await;
    assert_eq!(sent(&b), 1, "high priority is not capped");

    // A rolling day later the contact may get one more.
    app.clock.advance(Duration::from_secs(24 * 3600 + 60));
    let next_day = send(vec![&x], "normal").await;
    let b = wait_figures(&app, &next_day, done).await;
    assert_eq!(sent(&b), 1);
    let history = app.get(&format!("/api/v1/contacts/{x}/messages")).await;
    let statuses: Vec<&str> = history
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses,
        ["sent", "sent", "skipped", "sent"],
        "newest first"
    );
}

#[tokio::test]
async fn the_cap_holds_for_two_broadcasts_sent_at_once_by_two_workers() {
    let app = TestApp::builder().own_database().start().await;
    let _one = app.spawn_worker(&[]).await;
    let _two = app.spawn_worker(&[]).await;
    app.patch(
        "/api/v1/organization",
        json!({"frequencyCaps": {"email": {"perDay": 1}}}),
    )
    .await
    .expect(200);
    let contacts = parley_tests::seed::contacts(&app, 300).await;
    let t = template(&app, "email", "Sale").await;
    let body =
        json!({"broadcastName": "Sale", "templateId": t, "contactIds": contacts, "sendNow": true});
    let (first, second) = tokio::join!(broadcast(&app, body.clone()), broadcast(&app, body));
    let done = |b: &Value| matches!(b["status"].as_str(), Some("completed" | "failed"));
    let a = wait_figures(&app, &first, done).await;
    let b = wait_figures(&app, &second, done).await;
    // Every contact got exactly one of the two, whichever worker sent it.
    assert_eq!(sent(&a) + sent(&b), 300, "{a} {b}");
    assert_eq!(
        a["skippedCount"].as_i64().unwrap() + b["skippedCount"].as_i64().unwrap(),
        300
    );
    for c in contacts.iter().take(20) {
        let history = app.get(&format!("/api/v1/contacts/{c}/messages")).await;
        let statuses: Vec<&str> = history
            .data()
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["status"].as_str().unwrap())
            .collect();
        assert_eq!(
            statuses.iter().filter(|s| **s == "sent").count(),
            1,
            "{statuses:?}"
        );
    }
}

#[tokio::test]
async fn bad_send_rules_are_refused_and_change_nothing() {
    let app = TestApp::builder().start().await;
    let t = template(&app, "email", "Hi").await;
    let c = contact_in(&app, "c", None).await;
    for (body, field) in [
        (
            json!({"quietHours": {"start": "25:00", "end": "08:00"}}),
            "quietHours.start",
        ),
        (json!({"quietHours": {"start": "21:00"}}), "quietHours"),
        (
            json!({"frequencyCaps": {"email": {"perDay": 0}}}),
            "frequencyCaps.email.perDay",
        ),
        (
            json!({"frequencyCaps": {"email": {}}}),
            "frequencyCaps.email",
        ),
        (
            json!({"frequencyCaps": {"fax": {"perDay": 1}}}),
            "frequencyCaps",
        ),
        // Objects only, not arrays read by position.
        (json!({"frequencyCaps": [null, null]}), "frequencyCaps"),
        (json!({"quietHours": ["21:00", "08:00"]}), "quietHours"),
    ] {
        let r = app.patch("/api/v1/organization", body.clone()).await;
        r.expect(422);
        assert!(r.field().starts_with(field), "{body}: {:?}", r.body);
    }
    let org = app.get("/api/v1/organization").await;
    assert_eq!(org.data()["quietHours"], Value::Null);
    assert_eq!(org.data()["frequencyCaps"], json!({}));

    let base = json!({"broadcastName": "B", "templateId": t, "contactIds": [c]});
    let with = |extra: Value| {
        let mut b = base.clone();
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        b
    };
    let past_everywhere = (Utc::now() - chrono::Duration::hours(13))
        .format("%Y-%m-%dT%H:%M:%S")
        .to_string();
    for (extra, field) in [
        (
            json!({"sendIn": "contact_timezone", "sendNow": true}),
            "sendNow",
        ),
        (json!({"sendIn": "contact_timezone"}), "scheduledAt"),
        (
            json!({"sendIn": "contact_timezone", "scheduledAt": past_everywhere}),
            "scheduledAt",
        ),
        (json!({"scheduledAt": "2030-01-01T09:00:00"}), "scheduledAt"),
        (json!({"sendIn": "moon"}), "sendIn"),
        (json!({"pastTimePolicy": "later"}), "pastTimePolicy"),
        (
            json!({"quietHours": {"start": "09:00", "end": "9:00"}}),
            "quietHours.end",
        ),
    ] {
        let r = app.post("/api/v1/broadcasts", with(extra.clone())).await;
        r.expect(422);
        assert_eq!(r.field(), field, "{extra}: {:?}", r.body);
    }
    let list = app.get("/api/v1/broadcasts").await;
    assert_eq!(list.data(), &json!([]));

    // A draft may be local-time without a time yet; scheduling it later reads the wall time.
    let draft = app
        .post(
            "/api/v1/broadcasts",
            with(json!({"sendIn": "contact_timezone", "isDraft": true})),
        )
        .await;
    draft.expect(201);
    let wall = (Utc::now() + chrono::Duration::days(2))
        .format("%Y-%m-%dT09:00:00")
        .to_string();
    let scheduled = app
        .patch(
            &format!("/api/v1/broadcasts/{}", draft.id()),
            json!({"scheduledAt": format!("{wall}+05:00")}),
        )
        .await;
    scheduled.expect(200);
    assert_eq!(scheduled.data()["status"], "scheduled");
    assert_eq!(
        scheduled.data()["localTime"],
        wall,
        "the wall time as written"
    );
}

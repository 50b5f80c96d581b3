//! SLA: policy matching, met versus breached for each target, pauses, business hours, breaches
//! recorded by the worker on time and after a Redis loss, and the statistics.

use std::time::Duration;

use chrono::{DateTime, Datelike, Utc};
use parley_tests::TestApp;
use serde_json::{Value, json};

async fn policy(app: &TestApp, extra: Value) -> String {
    let mut body = json!({"name": "P", "firstResponseSeconds": 3600, "nextResponseSeconds": 3600,
        "resolutionSeconds": 86400, "businessHoursOnly": false, "warningThresholdSeconds": 0});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    app.post("/api/v1/sla-policies", body)
        .await
        .expect(201)
        .id()
}

async fn ticket(app: &TestApp, body: Value) -> Value {
    app.post("/api/v1/tickets", body)
        .await
        .expect(201)
        .data()
        .clone()
}

async fn sla_of(app: &TestApp, ticket: &Value) -> Value {
    app.get(&format!(
        "/api/v1/tickets/{}/sla",
        ticket["id"].as_str().unwrap()
    ))
    .await
    .data()
    .clone()
}

fn at(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap())
        .unwrap()
        .with_timezone(&Utc)
}

async fn reply(app: &TestApp, ticket: &Value, author: &str) {
    app.post(
        &format!("/api/v1/tickets/{}/replies", ticket["id"].as_str().unwrap()),
        json!({"content": "...", "authorType": author}),
    )
    .await
    .expect(201);
}

async fn set_status(app: &TestApp, ticket: &Value, status: &str) {
    app.patch(
        &format!("/api/v1/tickets/{}", ticket["id"].as_str().unwrap()),
        json!({"status": status}),
    )
    .await
    .expect(200);
}

#[tokio::test]
async fn the_most_specific_active_policy_applies() {
    let app = TestApp::builder().start().await;
    let any = policy(&app, json!({"name": "any"})).await;
    let high = policy(&app, json!({"name": "high", "priority": "high"})).await;
    let email = policy(&app, json!({"name": "email", "channel": "email"})).await;
    let both = policy(
        &app,
        json!({"name": "both", "priority": "high", "channel": "email"}),
    )
    .await;
    policy(
        &app,
        json!({"name": "inactive", "priority": "urgent", "channel": "social_b", "isActive": false}),
    )
    .await;
    for (priority, channel, want) in [
        ("high", "email", &both),
        ("high", "social_a", &high),
        ("low", "email", &email),
        ("low", "social_a", &any),
        ("urgent", "social_b", &any),
    ] {
        let t = ticket(
            &app,
            json!({"subject": "x", "priority": priority, "channel": channel}),
        )
        .await;
        assert_eq!(
            t["slaState"]["slaPolicyId"],
            want.as_str(),
            "{priority} {channel}"
        );
    }
    // Editing a policy changes no running clock.
    let t = ticket(
        &app,
        json!({"subject": "x", "priority": "low", "channel": "social_a"}),
    )
    .await;
    app.patch(
        &format!("/api/v1/sla-policies/{any}"),
        json!({"firstResponseSeconds": 60}),
    )
    .await
    .expect(200);
    assert_eq!(sla_of(&app, &t).await["firstResponseSeconds"], 3600);
    app.delete(&format!("/api/v1/sla-policies/{any}"))
        .await
        .expect(200);
    let kept = sla_of(&app, &t).await;
    assert!(kept["slaPolicyId"].is_null() && kept["firstResponseDeadline"].is_string());
    let none = ticket(
        &app,
        json!({"subject": "x", "priority": "low", "channel": "social_a"}),
    )
    .await;
    assert!(none["slaState"].is_null());

    for (body, field) in [
        (json!({"firstResponseSeconds": 0}), "firstResponseSeconds"),
        (
            json!({"warningThresholdSeconds": -1}),
            "warningThresholdSeconds",
        ),
        (json!({"priority": "asap"}), "priority"),
        (json!({"businessHoursOnly": "yes"}), "businessHoursOnly"),
    ] {
        let mut full = json!({"name": "P", "firstResponseSeconds": 1, "nextResponseSeconds": 1, "resolutionSeconds": 1,
            "businessHoursOnly": false, "warningThresholdSeconds": 0});
        for (k, v) in body.as_object().unwrap() {
            full[k] = v.clone();
        }
        let r = app.post("/api/v1/sla-policies", full).await;
        r.expect_error(422, "validation_error");
        assert_eq!(r.field(), field);
    }
}

#[tokio::test]
async fn targets_met_in_time_and_breached_when_late() {
    let app = TestApp::builder().start().await;
    policy(
        &app,
        json!({"firstResponseSeconds": 1, "nextResponseSeconds": 1, "resolutionSeconds": 2}),
    )
    .await;
    let quick = ticket(&app, json!({"subject": "quick"})).await;
    let slow = ticket(&app, json!({"subject": "slow"})).await;
    reply(&app, &quick, "agent").await;
    reply(&app, &quick, "customer").await;
    let open = sla_of(&app, &quick).await;
    assert_eq!(open["activeTarget"], "next_response");
    assert!(open["nextResponseDeadline"].is_string());
    reply(&app, &quick, "agent").await;
    set_status(&app, &quick, "resolved").await;
    let met = sla_of(&app, &quick).await;
    for target in ["firstResponse", "nextResponse", "resolution"] {
        assert_eq!(
            (
                met[format!("{target}Met")].as_bool(),
                met[format!("{target}Breached")].as_bool()
            ),
            (Some(true), Some(false)),
            "{target}"
        );
    }
    assert_eq!(met["activeTarget"], "none");
    assert!(met["secondsRemaining"].is_null());

    // No worker runs here: the late reply and the late resolution record their own breaches.
    app.clock.advance(Duration::from_millis(2100));
    reply(&app, &slow, "agent").await;
    reply(&app, &slow, "customer").await;
    set_status(&app, &slow, "resolved").await;
    let late = sla_of(&app, &slow).await;
    assert_eq!(
        (
            late["firstResponseMet"].as_bool(),
            late["firstResponseBreached"].as_bool()
        ),
        (Some(false), Some(true))
    );
    assert_eq!(
        (
            late["resolutionMet"].as_bool(),
            late["resolutionBreached"].as_bool()
        ),
        (Some(false), Some(true))
    );
    assert!(
        late["nextResponseBreachedAt"].is_null(),
        "its cycle had not run out when resolved"
    );
}

#[tokio::test]
async fn a_pause_moves_the_deadlines_by_its_length() {
    let app = TestApp::builder().start().await;
    policy(&app, json!({})).await;
    let t = ticket(&app, json!({"subject": "x"})).await;
    let before = sla_of(&app, &t).await;
    set_status(&app, &t, "on_hold").await;
    let paused = sla_of(&app, &t).await;
    assert!(paused["pausedAt"].is_string());
    app.clock.advance(Duration::from_millis(1200));
    let still = sla_of(&app, &t).await;
    assert_eq!(
        still["secondsRemaining"], paused["secondsRemaining"],
        "the clock stands still"
    );
    set_status(&app, &t, "open").await;
    let resumed = sla_of(&app, &t).await;
    assert!(resumed["pausedAt"].is_null());
    let paused_for = resumed["totalPausedSeconds"].as_i64().unwrap();
    assert!(paused_for >= 1, "{paused_for}");
    for deadline in ["firstResponseDeadline", "resolutionDeadline"] {
        let moved = (at(&resumed[deadline]) - at(&before[deadline])).num_milliseconds();
        assert!(
            (1_200..3_000).contains(&moved),
            "{deadline} moved {moved} ms"
        );
    }
}

#[tokio::test]
async fn business_hours_deadlines_skip_closed_time() {
    let app = TestApp::builder().start().await;
    // One working hour a week: Mondays 09:00 to 10:00 UTC.
    let hours = json!({"timezone": "UTC", "days": {"monday": [{"start": "09:00", "end": "10:00"}]}, "holidays": []});
    let org = app
        .patch("/api/v1/organization", json!({"workingHours": hours}))
        .await;
    org.expect(200);
    assert_eq!(
        org.data()["workingHours"]["days"]["monday"][0]["end"],
        "10:00"
    );
    policy(
        &app,
        json!({"firstResponseSeconds": 1800, "businessHoursOnly": true}),
    )
    .await;
    let t = ticket(&app, json!({"subject": "x"})).await;
    let deadline = at(&t["slaState"]["firstResponseDeadline"]);
    let created = at(&t["createdAt"]);
    assert_eq!(deadline.weekday(), chrono::Weekday::Mon);
    assert!(deadline > created);
    let in_window = deadline.format("%H:%M:%S").to_string();
    let starts_this_hour =
        created.weekday() == chrono::Weekday::Mon && created.format("%H").to_string() == "09";
    if !starts_this_hour {
        assert_eq!(
            in_window, "09:30:00",
            "half an hour into the next working hour"
        );
    }

    for (hours, field) in [
        (
            json!({"timezone": "Mars/Olympus", "days": {"monday": [{"start": "09:00", "end": "10:00"}]}}),
            "workingHours.timezone",
        ),
        (
            json!({"timezone": "UTC", "days": {"monday": [{"start": "10:00", "end": "09:00"}]}}),
            "workingHours.days.monday[0].end",
        ),
        (json!({"timezone": "UTC", "days": {}}), "workingHours.days"),
        (
            json!({"timezone": "UTC", "days": {"someday": []}}),
            "workingHours.days",
        ),
    ] {
        let r = app
            .patch("/api/v1/organization", json!({"workingHours": hours}))
            .await;
        r.expect_error(422, "validation_error");
        assert!(r.field().starts_with(field), "{} for {field}", r.field());
    }
}

#[tokio::test]
async fn the_worker_records_breaches_and_warnings_within_seconds_unread() {
    let app = TestApp::builder().own_database().start().await;
    let _worker = app.spawn_worker(&[]).await;
    // Two seconds between warning and deadline: room for a loaded machine to run the warning
    // before the breach (issue 12 moves these tests to an injectable clock).
    policy(
        &app,
        json!({"firstResponseSeconds": 4, "resolutionSeconds": 3600, "warningThresholdSeconds": 2}),
    )
    .await;
    let t = ticket(&app, json!({"subject": "Nobody answers"})).await;
    let c = app
        .post("/api/v1/contacts", json!({"source": "test", "name": "Ada"}))
        .await
        .id();
    let conv = app
        .post(
            "/api/v1/conversations",
            json!({"contactId": c, "channel": "email"}),
        )
        .await
        .id();
    // Watch the database, not the API: nothing reads the ticket meanwhile.
    let breached = parley_tests::wait_until(15, || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM sla_states WHERE organization_id = $1 AND first_response_breached_at IS NOT NULL")
            .bind(app.org_id)
            .fetch_one(&app.pool)
            .await
            .unwrap()
            == 2
    })
    .await;
    assert!(breached, "both breaches recorded");
    let (deadline, recorded): (DateTime<Utc>, DateTime<Utc>) = sqlx::query_as(
        "SELECT first_response_deadline, first_response_breached_at FROM sla_states WHERE ticket_id = $1::text::uuid",
    )
    .bind(t["id"].as_str().unwrap())
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert!(recorded >= deadline, "never before the deadline");
    let sla = sla_of(&app, &t).await;
    assert_eq!(
        (
            sla["firstResponseBreached"].as_bool(),
            sla["firstResponseMet"].as_bool()
        ),
        (Some(true), Some(false))
    );
    assert_eq!(app.count_events("sla.breached").await, 2);
    assert_eq!(app.count_events("sla.warning").await, 2);
    let events = app.events().await;
    let (_, breach) = events.iter().find(|(e, _)| e == "sla.breached").unwrap();
    assert_eq!(breach["target"], "first_response");
    let full = app
        .get(&format!("/api/v1/tickets/{}", t["id"].as_str().unwrap()))
        .await;
    let kinds: Vec<&str> = full.data()["activities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["type"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"sla_breached") && kinds.contains(&"sla_warning"),
        "{kinds:?}"
    );
    // A reply now is late: it does not make the target met.
    reply(&app, &t, "agent").await;
    assert_eq!(sla_of(&app, &t).await["firstResponseMet"], false);
    let _ = conv;
}

#[tokio::test]
async fn a_redis_loss_misses_no_breach() {
    let app = TestApp::builder().own_database().start().await;
    policy(
        &app,
        json!({"firstResponseSeconds": 1, "resolutionSeconds": 3600}),
    )
    .await;
    for i in 0..20 {
        ticket(&app, json!({"subject": format!("t{i}")})).await;
    }
    app.clock.advance(Duration::from_millis(1100));
    // As if a scheduler had moved every due check into Redis, and Redis then lost them all.
    sqlx::query("UPDATE sla_checks SET enqueued_at = clock_timestamp() WHERE organization_id = $1")
        .bind(app.org_id)
        .execute(&app.pool)
        .await
        .unwrap();
    app.flush_redis().await;
    let _worker = app.spawn_worker(&[]).await;
    let all = parley_tests::wait_until(20, || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM sla_states WHERE organization_id = $1 AND first_response_breached_at IS NOT NULL")
            .bind(app.org_id)
            .fetch_one(&app.pool)
            .await
            .unwrap()
            == 20
    })
    .await;
    assert!(all, "every breach recorded from Postgres");
    assert_eq!(app.count_events("sla.breached").await, 20, "each once");
}

#[tokio::test]
async fn statistics_count_met_breached_and_in_progress() {
    let app = TestApp::builder().start().await;
    policy(
        &app,
        json!({"firstResponseSeconds": 1, "resolutionSeconds": 3600}),
    )
    .await;
    let started = Utc::now();
    let met = ticket(&app, json!({"subject": "met", "priority": "high"})).await;
    reply(&app, &met, "agent").await;
    set_status(&app, &met, "resolved").await;
    let late = ticket(&app, json!({"subject": "late", "priority": "low"})).await;
    let open = ticket(&app, json!({"subject": "open", "priority": "low"})).await;
    app.clock.advance(Duration::from_millis(1100));
    reply(&app, &late, "agent").await;
    let _ = open;

    let s = app.get("/api/v1/statistics/sla").await;
    let s = s.data();
    assert_eq!(
        (
            s["total"].as_i64(),
            s["met"].as_i64(),
            s["breached"].as_i64(),
            s["inProgress"].as_i64()
        ),
        (Some(3), Some(1), Some(1), Some(1))
    );
    assert_eq!(s["complianceRate"], 0.5);
    assert_eq!(
        (
            s["firstResponse"]["met"].as_i64(),
            s["firstResponse"]["breached"].as_i64()
        ),
        (Some(1), Some(1))
    );
    assert!(s["firstResponse"]["avgSeconds"].as_f64().unwrap() >= 0.0);
    assert_eq!(s["resolution"]["met"], 1);
    assert!(s["nextResponse"]["avgSeconds"].is_null());
    assert_eq!(s["byPriority"]["high"]["met"], 1);
    assert_eq!(s["byPriority"]["low"]["total"], 2);
    assert_eq!(s["byPriority"]["urgent"]["total"], 0);

    // Ranges: the edges are exact whatever the hour.
    let iso = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let q = |from: DateTime<Utc>, to: DateTime<Utc>| {
        format!("/api/v1/statistics/sla?from={}&to={}", iso(from), iso(to))
    };
    let around = app
        .get(&q(
            started - chrono::Duration::seconds(1),
            Utc::now() + chrono::Duration::seconds(1),
        ))
        .await;
    assert_eq!(around.data()["total"], 3);
    let wide = app
        .get(&q(
            started - chrono::Duration::days(2),
            Utc::now() + chrono::Duration::days(2),
        ))
        .await;
    assert_eq!(wide.data()["total"], 3);
    let after = app
        .get(&q(
            Utc::now() + chrono::Duration::seconds(1),
            Utc::now() + chrono::Duration::days(1),
        ))
        .await;
    assert_eq!(after.data()["total"], 0);
    assert_eq!(after.data()["complianceRate"], 0.0);
    let between = at(&late["createdAt"]);
    let split = app
        .get(&q(between, Utc::now() + chrono::Duration::seconds(1)))
        .await;
    assert_eq!(split.data()["total"], 2, "from is inclusive");
    let inverted = app.get(&q(Utc::now(), started)).await;
    inverted.expect(200);
    assert_eq!(
        inverted.data()["total"],
        0,
        "a range that ends before it starts is empty"
    );
    app.get("/api/v1/statistics/sla?from=yesterday")
        .await
        .expect_error(422, "validation_error");
}

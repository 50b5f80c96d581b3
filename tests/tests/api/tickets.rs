//! Tickets: activities for every change, replies, events once per change, filters, and
//! the SLA state with a key or the ticket's access token.

use std::collections::HashSet;

use parley_tests::{TestApp, seed};
use serde_json::{Value, json};

async fn ticket(app: &TestApp, body: Value) -> Value {
    app.post("/api/v1/tickets", body)
        .await
        .expect(201)
        .data()
        .clone()
}

fn activity_types(t: &Value) -> Vec<String> {
    let mut kinds: Vec<String> = t["activities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["type"].as_str().unwrap().to_owned())
        .collect();
    kinds.reverse(); // oldest first
    kinds
}

#[tokio::test]
async fn every_change_is_an_activity_and_one_event() {
    let app = TestApp::builder().start().await;
    let ada = seed::contact(&app, "Ada").await;
    let agent = seed::user(&app, "agent@example.com").await;
    let t = ticket(
        &app,
        json!({"subject": "Refund", "customerId": ada, "priority": "high"}),
    )
    .await;
    assert_eq!(t["referenceNumber"], "TKT-000001");
    assert_eq!(t["status"], "open");
    assert_eq!(t["customer"]["name"], "Ada");
    assert_eq!(t["accessToken"].as_str().unwrap().len(), 32);
    let id = t["id"].as_str().unwrap();
    let path = format!("/api/v1/tickets/{id}");

    let u = app
        .patch(
            &path,
            json!({"status": "pending", "priority": "urgent", "resolutionNotes": "Waiting"}),
        )
        .await;
    let u = u.data();
    assert_eq!(
        (u["status"].as_str(), u["priority"].as_str()),
        (Some("pending"), Some("urgent"))
    );
    let changed = u["activities"].as_array().unwrap();
    let status = changed
        .iter()
        .find(|a| a["type"] == "status_changed")
        .unwrap();
    assert_eq!(
        (status["oldValue"].as_str(), status["newValue"].as_str()),
        (Some("open"), Some("pending"))
    );
    app.post(&format!("{path}/assignees"), json!({"userIds": [agent]}))
        .await
        .expect(200);
    app.post(&format!("{path}/assignees"), json!({"userIds": [agent]}))
        .await
        .expect(200);
    app.delete(&format!("{path}/assignees/{agent}"))
        .await
        .expect(200);
    // Nothing changes: no activity, no event.
    app.patch(&path, json!({"priority": "urgent"}))
        .await
        .expect(200);
    let closed = app.patch(&path, json!({"status": "closed"})).await;
    assert!(closed.data()["closedAt"].is_string() && closed.data()["resolvedAt"].is_string());
    let kinds = activity_types(closed.data());
    assert_eq!(
        kinds,
        [
            "created",
            "status_changed",
            "priority_changed",
            "updated",
            "assigned",
            "unassigned",
            "status_changed"
        ],
    );
    assert_eq!(app.count_events("ticket.created").await, 1);
    assert_eq!(
        app.count_events("ticket.updated").await,
        3,
        "the update, the assignment, the unassignment"
    );
    assert_eq!(app.count_events("ticket.closed").await, 1);

    let events = app.events().await.len();
    app.patch(&path, json!({"status": "open"}))
        .await
        .expect_error(409, "invalid_state");
    app.post(
        &format!("{path}/replies"),
        json!({"content": "Hi", "authorType": "agent"}),
    )
    .await
    .expect_error(409, "invalid_state");
    assert_eq!(app.events().await.len(), events);
    let next = ticket(&app, json!({"subject": "Another"})).await;
    assert_eq!(next["referenceNumber"], "TKT-000002");
}

#[tokio::test]
async fn replies_count_and_a_customer_reply_reopens_a_pending_ticket() {
    let app = TestApp::builder().start().await;
    let ada = seed::contact(&app, "Ada").await;
    let bob = seed::contact(&app, "Bob").await;
    let agent = seed::user(&app, "agent@example.com").await;
    let t = ticket(&app, json!({"subject": "Broken", "customerId": ada})).await;
    let path = format!("/api/v1/tickets/{}", t["id"].as_str().unwrap());

    let note = app.post(&format!("{path}/replies"), json!({"content": "Checking logs", "authorType": "agent", "authorId": agent, "isInternal": true})).await;
    note.expect(201);
    let after_note = app.get(&path).await;
    assert_eq!(
        after_note.data()["replyCount"],
        0,
        "an internal note is no reply"
    );
    assert!(after_note.data()["firstResponseAt"].is_null());

    let reply = app
        .post(
            &format!("{path}/replies"),
            json!({"content": "Fixed?", "authorType": "agent", "authorId": agent}),
        )
        .await;
    reply.expect(201);
    app.patch(&path, json!({"status": "pending"}))
        .await
        .expect(200);
    let theirs = app
        .post(
            &format!("{path}/replies"),
            json!({"content": "Still broken", "authorType": "customer"}),
        )
        .await;
    assert_eq!(theirs.data()["authorId"], ada.as_str());
    let t = app.get(&path).await;
    let t = t.data();
    assert_eq!(t["replyCount"], 2);
    assert_eq!(t["firstResponseAt"], reply.data()["createdAt"]);
    assert_eq!(t["lastReplyAt"], theirs.data()["createdAt"]);
    assert_eq!(t["status"], "open", "the customer's reply reopened it");
    assert_eq!(t["replies"].as_array().unwrap().len(), 3);

    for (body, field) in [
        (
            json!({"content": "x", "authorType": "customer", "authorId": bob}),
            "authorId",
        ),
        (
            json!({"content": "x", "authorType": "agent", "authorId": bob}),
            "authorId",
        ),
        (
            json!({"content": "x", "authorType": "customer", "isInternal": true}),
            "isInternal",
        ),
        (json!({"content": "x", "authorType": "robot"}), "authorType"),
    ] {
        let r = app.post(&format!("{path}/replies"), body.clone()).await;
        r.expect_error(422, "validation_error");
        assert_eq!(r.field(), field, "{body}");
    }
    let page = app.get(&format!("{path}/replies?pageSize=2")).await;
    assert_eq!(page.body["meta"]["total"], 3);
}

#[tokio::test]
async fn the_list_filters() {
    let app = TestApp::builder().start().await;
    let ada = seed::contact(&app, "Ada").await;
    let agent = seed::user(&app, "agent@example.com").await;
    let team = app
        .post("/api/v1/teams", json!({"name": "Tier 2"}))
        .await
        .id();
    let tag = app
        .post("/api/v1/tags", json!({"name": "billing"}))
        .await
        .id();
    let a = ticket(
        &app,
        json!({"subject": "A", "customerId": ada, "priority": "urgent", "tagIds": [tag]}),
    )
    .await;
    let b = ticket(
        &app,
        json!({"subject": "B", "teamId": team, "assigneeIds": [agent], "channel": "messaging_a"}),
    )
    .await;
    let (a, b) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());
    app.patch(
        &format!("/api/v1/tickets/{b}"),
        json!({"status": "on_hold"}),
    )
    .await
    .expect(200);
    for (query, want) in [
        ("", vec![a, b]),
        ("?status=on_hold", vec![b]),
        ("?priority=urgent", vec![a]),
        ("?channel=messaging_a", vec![b]),
        (&format!("?customerId={ada}") as &str, vec![a]),
        (&format!("?teamId={team}"), vec![b]),
        (&format!("?assigneeId={agent}"), vec![b]),
        ("?tag=billing", vec![a]),
    ] {
        let got = app.get(&format!("/api/v1/tickets{query}")).await;
        let got: HashSet<&str> = got
            .data()
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap())
            .collect();
        let want: HashSet<&str> = want.into_iter().collect();
        assert_eq!(got, want, "{query}");
    }
    let list = app.get("/api/v1/tickets").await;
    assert!(
        list.data()[0].get("activities").is_none(),
        "lists leave activities out"
    );
}

#[tokio::test]
async fn the_sla_reads_with_a_key_or_the_tickets_access_token() {
    let app = TestApp::builder().start().await;
    let bare = ticket(&app, json!({"subject": "No policy yet"})).await;
    let none = app
        .get(&format!(
            "/api/v1/tickets/{}/sla",
            bare["id"].as_str().unwrap()
        ))
        .await;
    none.expect(200);
    assert!(none.data().is_null(), "no policy applies");

    app.post(
        "/api/v1/sla-policies",
        json!({"name": "All", "firstResponseSeconds": 3600, "nextResponseSeconds": 3600,
        "resolutionSeconds": 86400, "businessHoursOnly": false, "warningThresholdSeconds": 0}),
    )
    .await
    .expect(201);
    let t = ticket(&app, json!({"subject": "Covered"})).await;
    let other = ticket(&app, json!({"subject": "Other"})).await;
    let path = format!("/api/v1/tickets/{}/sla", t["id"].as_str().unwrap());
    let by_key = app.get(&path).await;
    let sla = by_key.data();
    assert_eq!(sla["ticketId"], t["id"]);
    assert_eq!(sla["subjectType"], "ticket");
    assert_eq!(sla["activeTarget"], "first_response");
    let left = sla["secondsRemaining"].as_i64().unwrap();
    assert!((3590..=3600).contains(&left), "{left}");

    let token = t["accessToken"].as_str().unwrap();
    let with_token = |path: String, token: String| {
        let app = &app;
        async move {
            app.client
                .get(format!("{}{path}", app.base))
                .header("X-Ticket-Access-Token", token)
                .send()
                .await
                .unwrap()
        }
    };
    let resp = with_token(path.clone(), token.to_owned()).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["data"]["id"], sla["id"]);
    assert!(body["meta"]["apiKeyUsage"].is_null(), "no key was used");
    let wrong = with_token(path.clone(), "x".repeat(32)).await;
    assert_eq!(wrong.status(), 401);
    let elsewhere = with_token(
        format!("/api/v1/tickets/{}/sla", other["id"].as_str().unwrap()),
        token.to_owned(),
    )
    .await;
    assert_eq!(
        elsewhere.status(),
        401,
        "a token grants its own ticket only"
    );
    let other_route = with_token(
        format!("/api/v1/tickets/{}", t["id"].as_str().unwrap()),
        token.to_owned(),
    )
    .await;
    assert_eq!(other_route.status(), 401, "and only its SLA");
}

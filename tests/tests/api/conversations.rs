//! Conversations: messages and their counters, events once per change, the list's filters
//! and pages, assignment, handover, snoozing.

use std::collections::HashSet;

use parley_tests::{TestApp, seed};
use serde_json::{Value, json};

async fn start(app: &TestApp, body: Value) -> Value {
    app.post("/api/v1/conversations", body)
        .await
        .expect(201)
        .data()
        .clone()
}

fn ids(list: &Value) -> HashSet<String> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn messages_are_counted_and_every_change_is_one_event() {
    let app = TestApp::builder().start().await;
    let ada = seed::contact(&app, "Ada").await;
    let agent = seed::user(&app, "agent@example.com").await;
    let first = start(
        &app,
        json!({"contactId": ada, "channel": "messaging_a", "message": {"content": "Hello?"}}),
    )
    .await;
    let second = start(&app, json!({"contactId": ada, "channel": "email"})).await;
    assert_eq!(
        (
            first["referenceNumber"].as_i64(),
            second["referenceNumber"].as_i64()
        ),
        (Some(1), Some(2))
    );
    assert_eq!(first["messageCount"], 1);
    assert_eq!(first["messages"][0]["senderType"], "contact");
    assert_eq!(first["messages"][0]["senderId"], ada.as_str());
    assert!(first["lastCustomerMessageAt"].is_string());

    let id = first["id"].as_str().unwrap();
    let reply = app
        .post(
            &format!("/api/v1/conversations/{id}/messages"),
            json!({"content": "On its way.", "senderType": "user", "senderId": agent}),
        )
        .await;
    reply.expect(201);
    assert_eq!(reply.data()["senderType"], "user");
    let c = app.get(&format!("/api/v1/conversations/{id}")).await;
    let c = c.data();
    assert_eq!(c["messageCount"], 2);
    assert_eq!(c["lastMessageAt"], reply.data()["createdAt"]);
    assert_eq!(c["lastCustomerMessageAt"], first["lastCustomerMessageAt"]);
    assert_eq!(c["messages"].as_array().unwrap().len(), 2);

    app.post(
        &format!("/api/v1/conversations/{id}/assignees"),
        json!({"userIds": [agent]}),
    )
    .await
    .expect(200);
    let again = app
        .post(
            &format!("/api/v1/conversations/{id}/assignees"),
            json!({"userIds": [agent]}),
        )
        .await;
    assert_eq!(
        again.data()["assignees"].as_array().unwrap().len(),
        1,
        "assigning twice is one assignment"
    );
    let closed = app
        .patch(
            &format!("/api/v1/conversations/{id}"),
            json!({"status": "closed"}),
        )
        .await;
    assert_eq!(closed.data()["status"], "closed");
    assert!(closed.data()["closedAt"].is_string());

    for (event, n) in [
        ("conversation.started", 2),
        ("message.received", 1),
        ("message.sent", 1),
        ("conversation.assigned", 1),
        ("conversation.ended", 1),
    ] {
        assert_eq!(app.count_events(event).await, n, "{event}");
    }
    let events = app.events().await;
    let (_, sent) = events.iter().find(|(e, _)| e == "message.sent").unwrap();
    assert_eq!(
        sent["id"],
        reply.data()["id"],
        "data is the message as the API returns it"
    );

    // Closed is final: no reopening, no new message, and no event for refused changes.
    app.patch(
        &format!("/api/v1/conversations/{id}"),
        json!({"status": "active"}),
    )
    .await
    .expect_error(409, "invalid_state");
    app.post(
        &format!("/api/v1/conversations/{id}/messages"),
        json!({"content": "Hi again"}),
    )
    .await
    .expect_error(409, "invalid_state");
    assert_eq!(app.events().await.len(), events.len());
}

#[tokio::test]
async fn bad_messages_are_refused_and_attachments_take_their_files_type() {
    let app = TestApp::builder().start().await;
    let ada = seed::contact(&app, "Ada").await;
    let other = seed::contact(&app, "Bob").await;
    let c = start(&app, json!({"contactId": ada, "channel": "email"})).await;
    let path = format!(
        "/api/v1/conversations/{}/messages",
        c["id"].as_str().unwrap()
    );
    let before = app.fingerprint(app.org_id).await;
    for (body, field) in [
        (json!({}), "content"),
        (json!({"content": "x", "senderId": other}), "senderId"),
        (
            json!({"content": "x", "senderType": "user", "senderId": other}),
            "senderId",
        ),
        (
            json!({"attachments": [{"fileId": uuid::Uuid::now_v7()}]}),
            "attachments[0].fileId",
        ),
        (json!({"content": "x", "type": "hologram"}), "type"),
    ] {
        let resp = app.post(&path, body.clone()).await;
        resp.expect_error(422, "validation_error");
        assert_eq!(resp.field(), field, "{body}");
    }
    assert_eq!(app.fingerprint(app.org_id).await, before);

    let file = seed::file(&app, "image").await;
    let m = app
        .post(
            &path,
            json!({"attachments": [{"fileId": file, "caption": "The parcel"}]}),
        )
        .await;
    m.expect(201);
    let a = &m.data()["attachments"][0];
    assert_eq!(
        (a["type"].as_str(), a["caption"].as_str()),
        (Some("image"), Some("The parcel"))
    );
    assert_eq!(a["file"]["id"], file.to_string());
}

#[tokio::test]
async fn the_list_filters_pages_and_embeds() {
    let app = TestApp::builder().start().await;
    let ada = seed::contact(&app, "Ada").await;
    let bob = seed::contact(&app, "Bob").await;
    let agent = seed::user(&app, "agent@example.com").await;
    let team = app
        .post("/api/v1/teams", json!({"name": "Tier 2"}))
        .await
        .id();
    let tag = app.post("/api/v1/tags", json!({"name": "vip"})).await.id();
    let category = app
        .post("/api/v1/categories", json!({"name": "Billing"}))
        .await
        .id();
    let a = start(
        &app,
        json!({"contactId": ada, "channel": "email", "priority": "high", "tagIds": [tag],
        "categoryId": category, "message": {"content": "Invoice?"}}),
    )
    .await;
    let b = start(
        &app,
        json!({"contactId": bob, "channel": "messaging_a", "priority": "low"}),
    )
    .await;
    let c = start(&app, json!({"contactId": ada, "channel": "social_a"})).await;
    let (a, b, c) = (
        a["id"].as_str().unwrap(),
        b["id"].as_str().unwrap(),
        c["id"].as_str().unwrap(),
    );
    app.post(
        &format!("/api/v1/conversations/{b}/assignees"),
        json!({"userIds": [agent]}),
    )
    .await
    .expect(200);
    app.post(
        &format!("/api/v1/conversations/{c}/teams"),
        json!({"teamIds": [team]}),
    )
    .await
    .expect(200);
    app.patch(
        &format!("/api/v1/conversations/{c}"),
        json!({"status": "pending", "isStarred": true}),
    )
    .await
    .expect(200);

    for (query, want) in [
        ("", vec![a, b, c]),
        ("?status=pending", vec![c]),
        ("?status=active", vec![a, b]),
        ("?channel=email", vec![a]),
        ("?priority=low", vec![b]),
        (&format!("?contactId={ada}") as &str, vec![a, c]),
        (&format!("?assigneeId={agent}"), vec![b]),
        (&format!("?teamId={team}"), vec![c]),
        (&format!("?tag={tag}"), vec![a]),
        ("?tag=VIP", vec![a]),
        ("?tag=unknown", vec![]),
        (&format!("?categoryId={category}"), vec![a]),
        ("?isStarred=true", vec![c]),
    ] {
        let got = app.get(&format!("/api/v1/conversations{query}")).await;
        got.expect(200);
        let want: HashSet<String> = want.into_iter().map(str::to_owned).collect();
        assert_eq!(ids(&got.body), want, "{query}");
        assert_eq!(got.body["meta"]["total"], want.len(), "{query}");
    }
    app.get("/api/v1/conversations?status=lost")
        .await
        .expect_error(422, "validation_error");

    // Pages of one, by cursor, oldest first: every conversation once.
    let mut seen = Vec::new();
    let mut path = "/api/v1/conversations?pageSize=1&sort=createdAt".to_owned();
    let mut pages = 0;
    loop {
        pages += 1;
        assert!(
            pages <= 100,
            "the cursor walks more than 100 pages: it does not end"
        );
        let page = app.get(&path).await;
        seen.extend(ids(&page.body));
        if page.body["meta"]["hasNext"] != true {
            break;
        }
        path = format!(
            "/api/v1/conversations?pageSize=1&sort=createdAt&cursor={}",
            page.body["meta"]["endCursor"].as_str().unwrap()
        );
    }
    assert_eq!(seen, vec![a.to_owned(), b.to_owned(), c.to_owned()]);

    let list = app.get("/api/v1/conversations?channel=email").await;
    let first = &list.data()[0];
    assert_eq!(first["contact"]["name"], "Ada");
    assert_eq!(first["category"]["name"], "Billing");
    assert_eq!(first["tags"][0]["name"], "vip");
    assert_eq!(first["messages"][0]["content"], "Invoice?");
    let list = app
        .get(&format!("/api/v1/conversations?assigneeId={agent}"))
        .await;
    assert_eq!(
        list.data()[0]["assignees"][0]["user"]["email"],
        "agent@example.com"
    );
    let list = app
        .get(&format!("/api/v1/conversations?teamId={team}"))
        .await;
    assert_eq!(list.data()[0]["assignedTeams"][0]["team"]["name"], "Tier 2");
    let team_view = app.get(&format!("/api/v1/teams/{team}")).await;
    assert_eq!(team_view.data()["conversationCount"], 1);
    // The count is kept beside the team: it follows an unassignment and a new assignment.
    app.delete(&format!("/api/v1/conversations/{c}/teams/{team}"))
        .await
        .expect(200);
    let team_view = app.get(&format!("/api/v1/teams/{team}")).await;
    assert_eq!(team_view.data()["conversationCount"], 0);
    app.post(
        &format!("/api/v1/conversations/{c}/teams"),
        json!({"teamIds": [team]}),
    )
    .await
    .expect(200);
    let listed = app.get("/api/v1/teams").await;
    let listed = listed
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == team.as_str());
    assert_eq!(listed.unwrap()["conversationCount"], 1);

    // Unassigning: the assignment goes; an absent one is 404.
    app.delete(&format!("/api/v1/conversations/{b}/assignees/{agent}"))
        .await
        .expect(200);
    app.delete(&format!("/api/v1/conversations/{b}/assignees/{agent}"))
        .await
        .expect_error(404, "not_found");
}

#[tokio::test]
async fn a_handover_moves_through_its_states() {
    let app = TestApp::builder().start().await;
    let ada = seed::contact(&app, "Ada").await;
    let c = start(&app, json!({"contactId": ada, "channel": "messaging_a"})).await;
    let path = format!(
        "/api/v1/conversations/{}/handover",
        c["id"].as_str().unwrap()
    );
    app.post(&path, json!({"action": "accept"}))
        .await
        .expect_error(409, "invalid_state");
    let r = app.post(&path, json!({"action": "request", "reason": "guest_request", "requestedBy": "guest", "estimatedWaitSeconds": 90})).await;
    assert_eq!(r.data()["handoverStatus"], "requested");
    assert_eq!(r.data()["estimatedWaitSeconds"], 90);
    let r = app.post(&path, json!({"action": "accept"})).await;
    assert_eq!(r.data()["handoverStatus"], "accepted");
    assert!(r.data()["handoverAcceptedAt"].is_string());
    let r = app
        .post(
            &path,
            json!({"action": "complete", "notes": "Solved by phone"}),
        )
        .await;
    assert_eq!(r.data()["handoverStatus"], "completed");
    assert_eq!(r.data()["handoverNotes"], "Solved by phone");
    app.post(&path, json!({"action": "timeout"}))
        .await
        .expect_error(409, "invalid_state");
    app.post(&path, json!({"action": "explode"}))
        .await
        .expect_error(422, "validation_error");
}

#[tokio::test]
async fn a_snoozed_conversation_wakes_on_time_or_when_the_customer_writes() {
    let app = TestApp::builder().own_database().start().await;
    let _worker = app.spawn_worker(&[]).await;
    let ada = seed::contact(&app, "Ada").await;
    let a = start(&app, json!({"contactId": ada, "channel": "email"})).await;
    let b = start(&app, json!({"contactId": ada, "channel": "email"})).await;
    let soon = (chrono::Utc::now() + chrono::Duration::seconds(1)).to_rfc3339();
    let later = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339();
    for (c, until) in [(&a, &soon), (&b, &later)] {
        let r = app
            .patch(
                &format!("/api/v1/conversations/{}", c["id"].as_str().unwrap()),
                json!({"status": "snoozed", "snoozeUntil": until}),
            )
            .await;
        assert_eq!(r.data()["status"], "snoozed");
        assert!(r.data()["snoozedAt"].is_string());
    }
    let past = (chrono::Utc::now() - chrono::Duration::seconds(5)).to_rfc3339();
    app.patch(
        &format!("/api/v1/conversations/{}", b["id"].as_str().unwrap()),
        json!({"status": "snoozed", "snoozeUntil": past}),
    )
    .await
    .expect_error(422, "validation_error");

    let woke = app
        .wait_for(
            &format!("/api/v1/conversations/{}", a["id"].as_str().unwrap()),
            10,
            |c| c["data"]["status"] == "active",
        )
        .await;
    assert!(woke["data"]["snoozeUntil"].is_null());
    // The pass that woke the first looked at the second too (one statement takes every due
    // conversation): it was not due.
    let still = app
        .get(&format!(
            "/api/v1/conversations/{}",
            b["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(still.data()["status"], "snoozed");
    app.post(
        &format!(
            "/api/v1/conversations/{}/messages",
            b["id"].as_str().unwrap()
        ),
        json!({"content": "Any news?"}),
    )
    .await
    .expect(201);
    let woke = app
        .get(&format!(
            "/api/v1/conversations/{}",
            b["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(woke.data()["status"], "active");
}

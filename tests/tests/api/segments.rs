//! Segments: saved filters, their counts, and broadcasts whose audience is one.

use std::collections::HashSet;

use parley_tests::TestApp;
use serde_json::{Value, json};

async fn contact(app: &TestApp, body: Value) -> String {
    app.post("/api/v1/contacts", body).await.expect(201).id()
}

async fn count(app: &TestApp, segment: &str) -> Value {
    app.get(&format!("/api/v1/segments/{segment}/count"))
        .await
        .expect(200)
        .data()
        .clone()
}

#[tokio::test]
async fn a_segment_holds_the_contacts_its_filter_names_and_counts_them() {
    let app = TestApp::builder().start().await;
    let vip = app.post("/api/v1/tags", json!({"name": "vip"})).await.id();
    contact(
        &app,
        json!({"source": "web", "email": "a@example.com", "tagIds": [vip]}),
    )
    .await;
    contact(
        &app,
        json!({"source": "ads", "email": "b@example.com", "tagIds": [vip]}),
    )
    .await;
    contact(
        &app,
        json!({"source": "web", "email": "c@example.com", "doNotContact": true}),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let later = chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let d = contact(&app, json!({"source": "web", "email": "d@example.com"})).await;
    // Visitors come from the chat widget, not from this API.
    sqlx::query("UPDATE contacts SET type = 'visitor' WHERE id = $1::uuid")
        .bind(&d)
        .execute(&app.pool)
        .await
        .unwrap();
    app.patch(
        &format!("/api/v1/contacts/{d}"),
        json!({"messagingAOptedOut": true}),
    )
    .await
    .expect(200);

    let make = |name: &str, filter: Value| {
        let app = &app;
        let body = json!({"name": name, "filter": filter});
        async move { app.post("/api/v1/segments", body).await }
    };
    let tagged = make("VIPs", json!({"tagIds": [vip]})).await;
    tagged.expect(201);
    assert_eq!(tagged.data()["filter"]["tagIds"], json!([vip]));
    let web = make("Web", json!({"source": "web"})).await.id();
    let web_contacts = make("Web contacts", json!({"source": "web", "type": "contact"}))
        .await
        .id();
    let recent = make("Recent", json!({"createdAfter": later})).await.id();
    let everyone = make("Everyone", json!({})).await.id();

    let c = count(&app, &tagged.id()).await;
    assert_eq!(c["contacts"], 2);
    let c = count(&app, &web).await;
    assert_eq!(
        (&c["contacts"], &c["doNotContact"], &c["messagingAOptedOut"]),
        (&json!(3), &json!(1), &json!(1))
    );
    assert_eq!(count(&app, &web_contacts).await["contacts"], 2);
    assert_eq!(count(&app, &recent).await["contacts"], 1);
    assert_eq!(count(&app, &everyone).await["contacts"], 4);

    // The filter's own rules, and its records.
    make("Bad tag", json!({"tagIds": [uuid::Uuid::now_v7()]}))
        .await
        .expect_error(422, "validation_error");
    make(
        "Backwards",
        json!({"createdAfter": later, "createdBefore": "2020-01-01T00:00:00.000Z"}),
    )
    .await
    .expect_error(422, "validation_error");
    make("vips", json!({})).await.expect_error(409, "conflict");
    // Changed, listed, deleted.
    let changed = app
        .patch(
            &format!("/api/v1/segments/{web}"),
            json!({"filter": {"source": "ads"}}),
        )
        .await;
    changed.expect(200);
    assert_eq!(count(&app, &web).await["contacts"], 1);
    let listed = app.get("/api/v1/segments").await;
    assert_eq!(listed.data().as_array().unwrap().len(), 5);
    app.delete(&format!("/api/v1/segments/{recent}"))
        .await
        .expect(200);
    app.get(&format!("/api/v1/segments/{recent}"))
        .await
        .expect_error(404, "not_found");
}

#[tokio::test]
async fn a_broadcast_to_a_segment_sends_to_whom_it_holds_when_sending_starts() {
    let app = TestApp::builder().own_database().start().await;
    let _worker = app.spawn_worker(&[]).await;
    let t = app
        .post(
            "/api/v1/templates",
            json!({"name": "T", "channel": "email", "body": "Hello", "subject": "Hi",
                   "status": "active"}),
        )
        .await
        .id();
    let mut web = HashSet::new();
    for i in 0..3 {
        web.insert(
            contact(
                &app,
                json!({"source": "web", "email": format!("w{i}@example.com")}),
            )
            .await,
        );
    }
    let mut ads = HashSet::new();
    for i in 0..4 {
        ads.insert(
            contact(
                &app,
                json!({"source": "ads", "email": format!("a{i}@example.com")}),
            )
            .await,
        );
    }
    let blocked = contact(
        &app,
        json!({"source": "ads", "email": "no@example.com", "doNotContact": true}),
    )
    .await;
    let segment = app
        .post(
            "/api/v1/segments",
            json!({"name": "Web", "filter": {"source": "web"}}),
        )
        .await
        .id();
    let both = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "B", "templateId": t, "segmentId": segment,
                   "contactIds": [blocked]}),
        )
        .await;
    both.expect_error(422, "validation_error");
    let draft = app
        .post(
            "/api/v1/broadcasts",
            json!({"broadcastName": "B", "templateId": t, "segmentId": segment}),
        )
        .await;
    draft.expect(201);
    assert_eq!(draft.data()["segmentId"], segment.as_str());
    assert_eq!(draft.data()["audienceSegment"], "Web");
    let id = draft.id();
    // The segment changes before sending: the broadcast goes to what it holds then.
    app.patch(
        &format!("/api/v1/segments/{segment}"),
        json!({"filter": {"source": "ads"}}),
    )
    .await
    .expect(200);
    app.delete(&format!("/api/v1/segments/{segment}"))
        .await
        .expect_error(409, "conflict");
    app.patch(
        &format!("/api/v1/broadcasts/{id}"),
        json!({"sendNow": true}),
    )
    .await
    .expect(200);
    let b = app.ended_broadcast(&id, 30).await;
    let d = &b["data"];
    assert_eq!(d["status"], "completed");
    assert_eq!(d["totalRecipients"], 5);
    assert_eq!(d["audienceSize"], 5);
    assert_eq!(d["sentCount"], 4);
    assert_eq!(
        d["skippedCount"], 1,
        "do-not-contact is skipped and counted"
    );
    let rs = app
        .get(&format!("/api/v1/broadcasts/{id}/recipients?pageSize=100"))
        .await;
    let got: HashSet<String> = rs
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["contactId"].as_str().unwrap().to_owned())
        .collect();
    let mut expected = ads.clone();
    expected.insert(blocked.clone());
    assert_eq!(got, expected);
    assert!(got.is_disjoint(&web));
}

use parley_tests::TestApp;
use serde_json::json;

#[tokio::test]
async fn a_lead_embeds_its_assignee_and_tags() {
    let app = TestApp::builder().start().await;
    let user = app
        .post(
            "/api/v1/users",
            json!({"firstName": "Grace", "lastName": "Hopper", "email": "grace@example.com"}),
        )
        .await
        .id();
    let tag = app.post("/api/v1/tags", json!({"name": "hot"})).await.id();
    let lead = app
        .post(
            "/api/v1/leads",
            json!({"name": "Charles", "email": "charles@example.com", "assigneeId": user,
                   "tagIds": [tag], "value": 1250.555, "currency": "gbp", "source": "fair"}),
        )
        .await;
    lead.expect(201);
    let l = lead.data();
    assert_eq!(l["status"], "new");
    assert_eq!(l["assignee"]["id"], user);
    assert_eq!(l["assignee"]["firstName"], "Grace");
    assert_eq!(l["tags"][0]["name"], "hot");
    assert_eq!(l["value"], 1250.56);
    assert_eq!(l["currency"], "GBP");
    let got = app.get(&format!("/api/v1/leads/{}", lead.id())).await;
    assert_eq!(got.data(), l);
}

#[tokio::test]
async fn converting_a_lead_makes_a_contact_once() {
    let app = TestApp::builder().start().await;
    let tag = app.post("/api/v1/tags", json!({"name": "hot"})).await.id();
    let lead = app
        .post(
            "/api/v1/leads",
            json!({"name": "Charles", "email": "charles@example.com", "tagIds": [tag]}),
        )
        .await
        .id();
    let converted = app
        .post(&format!("/api/v1/leads/{lead}/convert"), json!({}))
        .await;
    converted.expect(200);
    let contact = converted.data();
    assert_eq!(contact["email"], "charles@example.com");
    assert_eq!(contact["source"], "lead");
    assert_eq!(contact["tags"][0]["id"], tag);
    let l = app.get(&format!("/api/v1/leads/{lead}")).await;
    assert_eq!(l.data()["status"], "converted");
    assert_eq!(l.data()["contactId"], contact["id"]);
    assert!(l.data()["convertedAt"].is_string());
    app.post(&format!("/api/v1/leads/{lead}/convert"), json!({}))
        .await
        .expect_error(409, "invalid_state");
    app.patch(&format!("/api/v1/leads/{lead}"), json!({"status": "new"}))
        .await
        .expect_error(409, "invalid_state");
    app.patch(&format!("/api/v1/leads/{lead}"), json!({"notes": "signed"}))
        .await
        .expect(200);
}

#[tokio::test]
async fn converting_links_an_existing_contact_with_the_same_email() {
    let app = TestApp::builder().start().await;
    let existing = app
        .post(
            "/api/v1/contacts",
            json!({"source": "web", "email": "dora@example.com"}),
        )
        .await
        .id();
    let lead = app
        .post("/api/v1/leads", json!({"email": "DORA@example.com"}))
        .await
        .id();
    let converted = app
        .post(&format!("/api/v1/leads/{lead}/convert"), json!({}))
        .await;
    assert_eq!(converted.id(), existing);
    let contact = app.get(&format!("/api/v1/contacts/{existing}")).await;
    let types: Vec<&str> = contact.data()["activities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["type"].as_str().unwrap())
        .collect();
    assert!(types.contains(&"converted_from_lead"), "{types:?}");
    assert_eq!(app.get("/api/v1/contacts").await.body["meta"]["total"], 1);
}

#[tokio::test]
async fn status_moves_through_patch_but_not_to_converted() {
    let app = TestApp::builder().start().await;
    let lead = app
        .post("/api/v1/leads", json!({"phone": "+14155550100"}))
        .await
        .id();
    let q = app
        .patch(
            &format!("/api/v1/leads/{lead}"),
            json!({"status": "qualified"}),
        )
        .await;
    assert_eq!(q.data()["status"], "qualified");
    app.patch(
        &format!("/api/v1/leads/{lead}"),
        json!({"status": "converted"}),
    )
    .await
    .expect_error(422, "validation_error");
    app.patch(&format!("/api/v1/leads/{lead}"), json!({"phone": null}))
        .await
        .expect_error(422, "validation_error");
    assert_eq!(
        app.get("/api/v1/leads?status=qualified").await.body["meta"]["total"],
        1
    );
}

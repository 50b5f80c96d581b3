use parley_tests::TestApp;
use serde_json::{Value, json};

/// Every field of `sent` comes back unchanged in `got`.
#[track_caller]
fn assert_round_trip(sent: &Value, got: &Value) {
    for (k, v) in sent.as_object().unwrap() {
        assert_eq!(&got[k], v, "field {k} did not round-trip: {got}");
    }
}

#[tokio::test]
async fn spec_example_values_round_trip() {
    let app = TestApp::builder().start().await;
    let collection = json!({"name": "Getting started", "color": "#1a73e8", "description": "First steps",
        "displayOrder": 3, "icon": "rocket", "isPublished": true, "locale": "pt-BR", "slug": "comecar"});
    let id = app
        .post("/api/v1/faq-collections", collection.clone())
        .await
        .id();
    assert_round_trip(
        &collection,
        app.get(&format!("/api/v1/faq-collections/{id}"))
            .await
            .data(),
    );

    let contact = json!({"source": "website", "avatar": "https://example.com/a.png", "channelData": "{}",
        "country": "DE", "email": "ada@example.com", "externalId": "crm-1", "language": "en",
        "name": "Ada", "phone": "+4915112345678", "position": "CTO", "doNotContact": true,
        "isAnonymous": false, "isPotentialClient": true});
    let got = app
        .get(&format!(
            "/api/v1/contacts/{}",
            app.post("/api/v1/contacts", contact.clone()).await.id()
        ))
        .await;
    assert_round_trip(&contact, got.data());
    assert_eq!(got.data()["type"], "contact");
    assert_eq!(got.data()["activities"][0]["type"], "created");

    let lead = json!({"currency": "EUR", "email": "c@example.com", "name": "Charles", "notes": "n",
        "phone": "+442071234567", "source": "fair", "value": 12.5});
    let got = app
        .get(&format!(
            "/api/v1/leads/{}",
            app.post("/api/v1/leads", lead.clone()).await.id()
        ))
        .await;
    assert_round_trip(&lead, got.data());

    let team = json!({"name": "emea", "displayName": "EMEA", "description": "d", "color": "#0b8043",
        "icon": "globe", "isActive": true});
    let got = app
        .get(&format!(
            "/api/v1/teams/{}",
            app.post("/api/v1/teams", team.clone()).await.id()
        ))
        .await;
    assert_round_trip(&team, got.data());

    let category = json!({"name": "Billing", "description": "d", "icon": "receipt", "slug": "billing",
        "isActive": true});
    let got = app
        .get(&format!(
            "/api/v1/categories/{}",
            app.post("/api/v1/categories", category.clone()).await.id()
        ))
        .await;
    assert_round_trip(&category, got.data());

    let attribute = json!({"key": "order_number", "label": "Order", "category": "commerce",
        "dataSource": "shop", "defaultValue": "none", "attributeType": "guest", "isActive": true});
    let got = app
        .get(&format!(
            "/api/v1/message-attributes/{}",
            app.post("/api/v1/message-attributes", attribute.clone())
                .await
                .id()
        ))
        .await;
    assert_round_trip(&attribute, got.data());

    for channel in ["messaging_a", "email", "social_a", "social_b"] {
        let template = json!({"name": format!("t-{channel}"), "channel": channel, "body": "Hi {{1}}",
            "language": "en", "category": "utility", "status": "active"});
        let got = app
            .get(&format!(
                "/api/v1/templates/{}",
                app.post("/api/v1/templates", template.clone()).await.id()
            ))
            .await;
        assert_round_trip(&template, got.data());
    }
}

#[tokio::test]
async fn duplicating_a_template_makes_a_draft_copy() {
    let app = TestApp::builder().start().await;
    let original = app
        .post(
            "/api/v1/templates",
            json!({"name": "Order shipped", "channel": "messaging_a", "body": "Order {{1}} shipped",
                   "status": "active", "buttons": [{"type": "url", "text": "Track", "value": "https://t.example"}]}),
        )
        .await;
    original.expect(201);
    let copy = app
        .post(
            &format!("/api/v1/templates/{}/duplicate", original.id()),
            json!({}),
        )
        .await;
    copy.expect(201);
    let c = copy.data();
    assert_ne!(c["id"], original.data()["id"]);
    assert_eq!(c["name"], "Order shipped (Copy)");
    assert_eq!(c["status"], "draft");
    assert_eq!(c["channel"], "messaging_a");
    assert_eq!(c["body"], original.data()["body"]);
    assert_eq!(c["buttons"], original.data()["buttons"]);
    let emailed = app
        .post(
            &format!(
                "/api/v1/templates/{}/duplicate?channel=email",
                original.id()
            ),
            json!({}),
        )
        .await;
    assert_eq!(emailed.data()["channel"], "email");
    app.post(
        &format!("/api/v1/templates/{}/duplicate?channel=fax", original.id()),
        json!({}),
    )
    .await
    .expect_error(422, "validation_error");
    let unchanged = app
        .get(&format!("/api/v1/templates/{}", original.id()))
        .await;
    assert_eq!(unchanged.data(), original.data());
    assert_eq!(app.get("/api/v1/templates").await.body["meta"]["total"], 3);
}

#[tokio::test]
async fn templates_update_and_delete() {
    let app = TestApp::builder().start().await;
    let id = app
        .post(
            "/api/v1/templates",
            json!({"name": "T", "channel": "email", "body": "x", "subject": "S"}),
        )
        .await
        .id();
    let updated = app
        .patch(
            &format!("/api/v1/templates/{id}"),
            json!({"status": "archived", "subject": null}),
        )
        .await;
    assert_eq!(updated.data()["status"], "archived");
    assert!(updated.data()["subject"].is_null());
    app.patch(
        &format!("/api/v1/templates/{id}"),
        json!({"buttons": [{"type": "url", "text": "Go"}]}),
    )
    .await
    .expect_error(422, "validation_error");
    app.delete(&format!("/api/v1/templates/{id}"))
        .await
        .expect(200);
    app.get(&format!("/api/v1/templates/{id}"))
        .await
        .expect_error(404, "not_found");
}

#[tokio::test]
async fn a_team_shows_its_members_counts_and_creator() {
    let app = TestApp::builder().start().await;
    let mut users = Vec::new();
    for (i, name) in ["Grace", "Alan", "Barbara"].iter().enumerate() {
        users.push(
            app.post("/api/v1/users", json!({"firstName": name, "lastName": "X", "email": format!("u{i}@example.com"), "phoneNumber": "+14155550100"}))
                .await
                .id(),
        );
    }
    app.post(
        "/api/v1/users",
        json!({"firstName": "G", "lastName": "H", "email": "U0@example.com"}),
    )
    .await
    .expect_error(409, "conflict");
    let team = app
        .post(
            "/api/v1/teams",
            json!({"name": "Support", "createdBy": users[0], "memberIds": [users[0], users[1]]}),
        )
        .await;
    team.expect(201);
    let id = team.id();
    let got = app.get(&format!("/api/v1/teams/{id}")).await;
    let t = got.data();
    assert_eq!(t["memberCount"], 2);
    assert_eq!(t["conversationCount"], 0);
    assert_eq!(t["creator"]["id"], users[0]);
    assert_eq!(t["creator"]["firstName"], "Grace");
    assert_eq!(t["members"][1]["id"], users[1]);
    assert_eq!(
        t["members"][0]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>(),
        vec![
            "avatar",
            "email",
            "firstName",
            "id",
            "lastName",
            "phoneNumber"
        ]
    );
    let more = app
        .post(
            &format!("/api/v1/teams/{id}/members"),
            json!({"userIds": [users[1], users[2]]}),
        )
        .await;
    assert_eq!(
        more.data()["memberCount"],
        3,
        "an existing member is not added twice"
    );
    app.delete(&format!("/api/v1/teams/{id}/members/{}", users[1]))
        .await
        .expect(200);
    app.delete(&format!("/api/v1/teams/{id}/members/{}", users[1]))
        .await
        .expect_error(404, "not_found");
    assert_eq!(
        app.get(&format!("/api/v1/teams/{id}")).await.data()["memberCount"],
        2
    );
    app.post("/api/v1/teams", json!({"name": "support"}))
        .await
        .expect_error(409, "conflict");
    let renamed = app
        .patch(
            &format!("/api/v1/teams/{id}"),
            json!({"displayName": "Support", "isActive": false}),
        )
        .await;
    assert_eq!(renamed.data()["isActive"], false);
    assert_eq!(
        app.get("/api/v1/teams?isActive=false").await.body["meta"]["total"],
        1
    );
    app.delete(&format!("/api/v1/teams/{id}")).await.expect(200);
    app.get(&format!("/api/v1/teams/{id}"))
        .await
        .expect_error(404, "not_found");
    assert_eq!(
        app.get("/api/v1/users").await.body["meta"]["total"],
        3,
        "users outlive their team"
    );
}

#[tokio::test]
async fn categories_list_create_update_delete() {
    let app = TestApp::builder().start().await;
    let a = app
        .post("/api/v1/categories", json!({"name": "Billing Questions"}))
        .await;
    assert_eq!(a.data()["slug"], "billing-questions");
    assert_eq!(a.data()["isActive"], true);
    let b = app
        .post("/api/v1/categories", json!({"name": "Billing questions"}))
        .await;
    assert_eq!(b.data()["slug"], "billing-questions-2");
    let listed = app.get("/api/v1/categories").await;
    assert_eq!(listed.body["meta"]["total"], 2);
    let off = app
        .patch(
            &format!("/api/v1/categories/{}", b.id()),
            json!({"isActive": false}),
        )
        .await;
    assert_eq!(off.data()["isActive"], false);
    assert_eq!(
        app.get("/api/v1/categories?isActive=true").await.body["meta"]["total"],
        1
    );
    app.patch(
        &format!("/api/v1/categories/{}", b.id()),
        json!({"slug": "billing-questions"}),
    )
    .await
    .expect_error(409, "conflict");
    app.delete(&format!("/api/v1/categories/{}", a.id()))
        .await
        .expect(200);
    assert_eq!(app.get("/api/v1/categories").await.body["meta"]["total"], 1);
}

#[tokio::test]
async fn message_attributes_are_deletable() {
    let app = TestApp::builder().start().await;
    let a = app
        .post(
            "/api/v1/message-attributes",
            json!({"key": "plan", "label": "Plan"}),
        )
        .await;
    a.expect(201);
    assert_eq!(a.data()["attributeType"], "guest");
    app.post(
        "/api/v1/message-attributes",
        json!({"key": "plan", "label": "Again"}),
    )
    .await
    .expect_error(409, "conflict");
    let updated = app
        .patch(
            &format!("/api/v1/message-attributes/{}", a.id()),
            json!({"label": "Plan name", "defaultValue": "free"}),
        )
        .await;
    assert_eq!(updated.data()["defaultValue"], "free");
    let deleted = app
        .delete(&format!("/api/v1/message-attributes/{}", a.id()))
        .await;
    deleted.expect(200);
    assert_eq!(deleted.data(), &json!({"id": a.id()}));
    assert_eq!(deleted.body["success"], true);
    app.get(&format!("/api/v1/message-attributes/{}", a.id()))
        .await
        .expect_error(404, "not_found");
    app.post(
        "/api/v1/message-attributes",
        json!({"key": "plan", "label": "Reused"}),
    )
    .await
    .expect(201);
}

#[tokio::test]
async fn tags_are_read_changed_and_deleted_and_their_records_stay() {
    let app = TestApp::builder().start().await;
    let tag = app
        .post(
            "/api/v1/tags",
            json!({"name": "vip", "displayName": "VIP", "color": "#d4af37"}),
        )
        .await
        .id();
    app.post("/api/v1/tags", json!({"name": "cold"}))
        .await
        .expect(201);
    let contact = app
        .post(
            "/api/v1/contacts",
            json!({"name": "Ada", "source": "web", "tagIds": [tag]}),
        )
        .await
        .id();
    let path = format!("/api/v1/tags/{tag}");
    assert_eq!(app.get(&path).await.expect(200).data()["name"], "vip");

    let changed = app
        .patch(
            &path,
            json!({"displayName": "Very important", "color": null}),
        )
        .await;
    changed.expect(200);
    assert_eq!(changed.data()["name"], "vip");
    assert_eq!(changed.data()["displayName"], "Very important");
    assert!(changed.data()["color"].is_null());
    assert_eq!(app.get(&path).await.data(), changed.data());
    app.patch(&path, json!({"name": "COLD"}))
        .await
        .expect_error(409, "conflict");
    app.patch(&path, json!({"name": null}))
        .await
        .expect_error(422, "validation_error");

    // Another organization sees no such tag.
    let (_, other) = app.new_org("Other").await;
    let theirs = app
        .send(reqwest::Method::DELETE, &path, Some(&other), None)
        .await;
    theirs.expect_error(404, "not_found");

    app.delete(&path).await.expect(200);
    app.get(&path).await.expect_error(404, "not_found");
    app.delete(&path).await.expect_error(404, "not_found");
    let c = app.get(&format!("/api/v1/contacts/{contact}")).await;
    c.expect(200);
    assert_eq!(c.data()["tags"], json!([]), "the contact stays, untagged");
}

#[tokio::test]
async fn companies_are_read_changed_and_deleted_and_their_contacts_stay() {
    let app = TestApp::builder().start().await;
    let company = app
        .post(
            "/api/v1/companies",
            json!({"name": "Analytical Engines", "domain": "engines.example"}),
        )
        .await
        .id();
    let contact = app
        .post(
            "/api/v1/contacts",
            json!({"name": "Ada", "source": "web", "companyId": company}),
        )
        .await
        .id();
    let path = format!("/api/v1/companies/{company}");
    let changed = app
        .patch(&path, json!({"name": "Engines Ltd", "domain": null}))
        .await;
    changed.expect(200);
    assert_eq!(changed.data()["name"], "Engines Ltd");
    assert!(changed.data()["domain"].is_null());
    assert_eq!(app.get(&path).await.data(), changed.data());

    app.delete(&path).await.expect(200);
    app.get(&path).await.expect_error(404, "not_found");
    let c = app.get(&format!("/api/v1/contacts/{contact}")).await;
    c.expect(200);
    assert!(c.data()["companyId"].is_null(), "{}", c.body);
}

#[tokio::test]
async fn a_deleted_user_is_unassigned_everywhere() {
    let app = TestApp::builder().start().await;
    let agent = parley_tests::seed::user(&app, "agent@example.com").await;
    parley_tests::seed::user(&app, "taken@example.com").await;
    let path = format!("/api/v1/users/{agent}");
    let changed = app
        .patch(
            &path,
            json!({"jobTitle": "Head of support", "agentStatus": "away", "phoneNumber": null}),
        )
        .await;
    changed.expect(200);
    assert_eq!(changed.data()["jobTitle"], "Head of support");
    assert_eq!(changed.data()["agentStatus"], "away");
    assert_eq!(app.get(&path).await.data(), changed.data());
    app.patch(&path, json!({"email": "TAKEN@example.com"}))
        .await
        .expect_error(409, "conflict");

    let contact = parley_tests::seed::contact(&app, "Ada").await;
    let conversation = app
        .post(
            "/api/v1/conversations",
            json!({"contactId": contact, "channel": "email"}),
        )
        .await
        .id();
    app.post(
        &format!("/api/v1/conversations/{conversation}/assignees"),
        json!({"userIds": [agent]}),
    )
    .await
    .expect(200);
    let ticket = app
        .post("/api/v1/tickets", json!({"subject": "Invoice"}))
        .await
        .id();
    app.post(
        &format!("/api/v1/tickets/{ticket}/assignees"),
        json!({"userIds": [agent]}),
    )
    .await
    .expect(200);
    let lead = app
        .post("/api/v1/leads", json!({"name": "Bob", "assigneeId": agent}))
        .await
        .id();

    app.delete(&path).await.expect(200);
    app.get(&path).await.expect_error(404, "not_found");
    let c = app
        .get(&format!("/api/v1/conversations/{conversation}"))
        .await;
    assert_eq!(c.expect(200).data()["assignees"], json!([]), "{}", c.body);
    let t = app.get(&format!("/api/v1/tickets/{ticket}")).await;
    assert_eq!(t.expect(200).data()["assignees"], json!([]), "{}", t.body);
    let l = app.get(&format!("/api/v1/leads/{lead}")).await;
    assert!(l.expect(200).data()["assigneeId"].is_null(), "{}", l.body);
}

#[tokio::test]
async fn a_deleted_lead_leaves_the_contact_it_became() {
    let app = TestApp::builder().start().await;
    let lead = app
        .post(
            "/api/v1/leads",
            json!({"name": "Ada", "email": "ada@example.com"}),
        )
        .await
        .id();
    let contact = app
        .post(&format!("/api/v1/leads/{lead}/convert"), json!({}))
        .await
        .id();
    let path = format!("/api/v1/leads/{lead}");
    app.delete(&path).await.expect(200);
    app.get(&path).await.expect_error(404, "not_found");
    app.delete(&path).await.expect_error(404, "not_found");
    app.get(&format!("/api/v1/contacts/{contact}"))
        .await
        .expect(200);
}

use parley_tests::TestApp;
use serde_json::{Value, json};

fn activity_types(contact: &Value) -> Vec<String> {
    contact["activities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["type"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_new_contact_has_its_company_tags_and_a_created_activity() {
    let app = TestApp::builder().start().await;
    let tag = app
        .post("/api/v1/tags", json!({"name": "vip", "color": "#FFAA00"}))
        .await;
    tag.expect(201);
    assert_eq!(tag.data()["color"], "#ffaa00");
    let company = app
        .post(
            "/api/v1/companies",
            json!({"name": "Acme", "domain": "acme.example"}),
        )
        .await
        .id();
    let created = app
        .post(
            "/api/v1/contacts",
            json!({"source": "website", "name": "Ada", "email": "ada@example.com",
                   "phone": "+44 20 7123 4567", "companyId": company, "tagIds": [tag.id(), tag.id()]}),
        )
        .await;
    created.expect(201);
    let c = created.data();
    assert_eq!(c["phone"], "+442071234567");
    assert_eq!(c["companyName"], "Acme");
    assert_eq!(
        c["company"],
        json!({"id": company, "name": "Acme", "domain": "acme.example"})
    );
    assert_eq!(
        c["tags"].as_array().unwrap().len(),
        1,
        "repeated tag ids count once"
    );
    assert_eq!(activity_types(c), vec!["created"]);
    assert_eq!(c["activities"][0]["actorType"], "api_key");
    // The answer is what was written (nothing is read back but the company and the tags):
    // it equals a later read, with tags, with a company only, and with neither.
    let mut answers = vec![created];
    for body in [
        json!({"source": "web", "name": "Grace", "companyId": company, "timezone": "Europe/Berlin"}),
        json!({"source": "web", "email": "bare@example.com", "doNotContact": true}),
    ] {
        let answer = app.post("/api/v1/contacts", body).await;
        answer.expect(201);
        answers.push(answer);
    }
    for answer in answers {
        let read = app.get(&format!("/api/v1/contacts/{}", answer.id())).await;
        read.expect(200);
        assert_eq!(answer.data(), read.data());
    }
    assert_eq!(
        app.get("/api/v1/contacts").await.body["meta"]["total"],
        3,
        "the kept total counts each one-statement create"
    );
}

#[tokio::test]
async fn a_contact_of_another_organizations_company_is_422_and_not_written() {
    let app = TestApp::builder().start().await;
    let (_, other_key) = app.new_org("other").await;
    let theirs = app
        .send(
            reqwest::Method::POST,
            "/api/v1/companies",
            Some(&other_key),
            Some(&json!({"name": "Theirs"})),
        )
        .await;
    theirs.expect(201);
    let refused = app
        .post(
            "/api/v1/contacts",
            json!({"source": "web", "email": "x@example.com", "companyId": theirs.id()}),
        )
        .await;
    refused.expect_error(422, "validation_error");
    assert_eq!(refused.field(), "companyId");
    assert_eq!(app.get("/api/v1/contacts").await.body["meta"]["total"], 0);
    // The email is free: nothing of the refused contact was kept.
    app.post(
        "/api/v1/contacts",
        json!({"source": "web", "email": "x@example.com"}),
    )
    .await
    .expect(201);
}

#[tokio::test]
async fn every_change_is_an_activity() {
    let app = TestApp::builder().start().await;
    let vip = app.post("/api/v1/tags", json!({"name": "vip"})).await.id();
    let id = app
        .post("/api/v1/contacts", json!({"source": "web", "name": "Ada"}))
        .await
        .id();
    let updated = app
        .patch(
            &format!("/api/v1/contacts/{id}"),
            json!({"name": "Ada L.", "position": "CTO", "tagIds": [vip]}),
        )
        .await;
    updated.expect(200);
    let c = updated.data();
    assert_eq!(c["name"], "Ada L.");
    let types = activity_types(c);
    assert_eq!(
        types.iter().filter(|t| *t == "updated").count(),
        2,
        "{types:?}"
    );
    assert!(types.contains(&"tag_added".to_owned()));
    let name_change = c["activities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["metadata"] == "name")
        .unwrap();
    assert_eq!(
        (
            name_change["oldValue"].clone(),
            name_change["newValue"].clone()
        ),
        (json!("Ada"), json!("Ada L."))
    );

    // Nothing changed: no activity, updatedAt kept.
    let same = app
        .patch(&format!("/api/v1/contacts/{id}"), json!({"name": "Ada L."}))
        .await;
    assert_eq!(activity_types(same.data()).len(), types.len());
    assert_eq!(same.data()["updatedAt"], c["updatedAt"]);

    let untagged = app
        .patch(
            &format!("/api/v1/contacts/{id}"),
            json!({"tagIds": [], "position": null}),
        )
        .await;
    let c = untagged.data();
    assert!(c["position"].is_null());
    assert_eq!(c["tags"], json!([]));
    assert!(activity_types(c).contains(&"tag_removed".to_owned()));
}

#[tokio::test]
async fn opting_out_records_when() {
    let app = TestApp::builder().start().await;
    let id = app
        .post("/api/v1/contacts", json!({"source": "web"}))
        .await
        .id();
    let out = app
        .patch(
            &format!("/api/v1/contacts/{id}"),
            json!({"messagingAOptedOut": true}),
        )
        .await;
    assert!(out.data()["messagingAOptedOutAt"].is_string());
    let back = app
        .patch(
            &format!("/api/v1/contacts/{id}"),
            json!({"messagingAOptedOut": false}),
        )
        .await;
    assert!(back.data()["messagingAOptedOutAt"].is_null());
}

#[tokio::test]
async fn a_deleted_contact_is_gone() {
    let app = TestApp::builder().start().await;
    let id = app
        .post("/api/v1/contacts", json!({"source": "web"}))
        .await
        .id();
    let deleted = app.delete(&format!("/api/v1/contacts/{id}")).await;
    deleted.expect(200);
    assert_eq!(deleted.data(), &json!({"id": id}));
    app.get(&format!("/api/v1/contacts/{id}"))
        .await
        .expect_error(404, "not_found");
    app.delete(&format!("/api/v1/contacts/{id}"))
        .await
        .expect_error(404, "not_found");
}

#[tokio::test]
async fn a_changed_email_that_clashes_is_409() {
    let app = TestApp::builder().start().await;
    app.post(
        "/api/v1/contacts",
        json!({"source": "web", "email": "a@example.com"}),
    )
    .await
    .expect(201);
    let b = app
        .post(
            "/api/v1/contacts",
            json!({"source": "web", "email": "b@example.com"}),
        )
        .await
        .id();
    let before = app.get(&format!("/api/v1/contacts/{b}")).await;
    app.patch(
        &format!("/api/v1/contacts/{b}"),
        json!({"email": "A@example.com", "name": "B"}),
    )
    .await
    .expect_error(409, "conflict");
    let after = app.get(&format!("/api/v1/contacts/{b}")).await;
    assert_eq!(
        before.body["data"], after.body["data"],
        "the failed update changed nothing"
    );
}

/// A contact's time zone is an IANA name: kept, listed, changed (an activity), cleared, and a
/// name the tz database does not know is 422 on its field, changing nothing.
#[tokio::test]
async fn a_contact_has_a_time_zone() {
    let app = TestApp::builder().start().await;
    let created = app
        .post(
            "/api/v1/contacts",
            json!({"source": "web", "name": "Ada", "timezone": "Asia/Tokyo"}),
        )
        .await;
    created.expect(201);
    assert_eq!(created.data()["timezone"], "Asia/Tokyo");
    let id = created.id();
    let listed = app.get("/api/v1/contacts").await;
    assert_eq!(listed.data()[0]["timezone"], "Asia/Tokyo");

    for bad in ["Mars/Olympus", "Europe/Berlin\u{0}", "", "UTC+25"] {
        app.post(
            "/api/v1/contacts",
            json!({"source": "web", "email": "x@example.com", "timezone": bad}),
        )
        .await
        .expect_error(422, "validation_error");
        let r = app
            .patch(&format!("/api/v1/contacts/{id}"), json!({"timezone": bad}))
            .await;
        r.expect_error(422, "validation_error");
        assert_eq!(r.field(), "timezone", "{bad:?}");
    }
    let moved = app
        .patch(
            &format!("/api/v1/contacts/{id}"),
            json!({"timezone": "America/New_York"}),
        )
        .await;
    moved.expect(200);
    assert_eq!(moved.data()["timezone"], "America/New_York");
    let change = moved.data()["activities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["metadata"] == "timezone")
        .cloned()
        .unwrap();
    assert_eq!(
        (change["oldValue"].clone(), change["newValue"].clone()),
        (json!("Asia/Tokyo"), json!("America/New_York"))
    );
    let cleared = app
        .patch(&format!("/api/v1/contacts/{id}"), json!({"timezone": null}))
        .await;
    assert!(cleared.data()["timezone"].is_null());
    assert!(
        app.get("/api/v1/contacts?email=x@example.com")
            .await
            .data()
            .as_array()
            .unwrap()
            .is_empty()
    );
}

/// Contacts, leads and tickets carry at most 50 tags (`refs::MAX_TAGS`): 51 ids are 422 on
/// `tagIds` before any is looked up, 50 unknown ones are 422 on the first of them; nothing is
/// written either way.
#[tokio::test]
async fn more_than_fifty_tags_are_refused_on_every_record_that_carries_tags() {
    let app = TestApp::builder().start().await;
    let ids =
        |n: usize| -> Vec<String> { (0..n).map(|_| uuid::Uuid::now_v7().to_string()).collect() };
    let before = app.fingerprint(app.org_id).await;
    for (path, body) in [
        ("/api/v1/contacts", json!({"source": "web"})),
        ("/api/v1/leads", json!({"name": "Lead"})),
        ("/api/v1/tickets", json!({"subject": "Ticket"})),
    ] {
        for (n, field) in [(51, "tagIds"), (50, "tagIds[0]")] {
            let mut body = body.clone();
            body["tagIds"] = json!(ids(n));
            let refused = app.post(path, body).await;
            refused.expect_error(422, "validation_error");
            assert_eq!(refused.field(), field, "{path} with {n} tags");
        }
    }
    assert_eq!(app.fingerprint(app.org_id).await, before);
}

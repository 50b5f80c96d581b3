//! Every value fits where it is stored, and every size has a limit: NUL anywhere, numbers past
//! their column, times past what can be written back, cursors past Postgres' range, template
//! variables and messages past their channel. Each is a 422 that changes nothing.

use parley_tests::TestApp;
use serde_json::json;
use uuid::Uuid;

use super::{contact, still_healthy, template};

#[tokio::test]
async fn nul_in_a_body_field_a_free_form_object_or_a_filter_is_a_422_that_writes_nothing() {
    let app = TestApp::builder().start().await;
    let before = app.fingerprint(app.org_id).await;
    for (body, field) in [
        (json!({"source": "web", "name": "Ada\u{0}"}), "name"),
        (
            json!({"source": "web", "name": "Ada", "channelData": "a\u{0}"}),
            "channelData",
        ),
        // An unknown field is ignored, but not a NUL in it: the rule is the body's.
        (
            json!({"source": "web", "name": "Ada", "x": {"y": ["ok", "\u{0}"]}}),
            "x.y[1]",
        ),
        (
            json!({"source": "web", "name": "Ada", "x": {"k\u{0}": 1}}),
            "x.k\u{fffd}",
        ),
    ] {
        let resp = app.post("/api/v1/contacts", body).await;
        resp.expect_error(422, "validation_error");
        assert_eq!(resp.field(), field, "{}", resp.body);
    }
    // A free-form object stored as jsonb (files are checked before storage is).
    let resp = app
        .post(
            "/api/v1/files/presigned-upload",
            json!({"filename": "a.pdf", "contentType": "application/pdf", "fileSize": 1,
                   "fileType": "document", "metadata": {"note": "\u{0}"}}),
        )
        .await;
    resp.expect_error(422, "validation_error");
    assert_eq!(resp.field(), "metadata.note");
    for query in [
        "source=a%00b",
        "email=%00",
        "tag=%00",
        "cursor=1_%00",
        "unknown=%00",
    ] {
        let resp = app.get(&format!("/api/v1/contacts?{query}")).await;
        resp.expect_error(422, "validation_error");
    }
    assert_eq!(before, app.fingerprint(app.org_id).await, "nothing written");
    still_healthy(&app).await;
}

#[tokio::test]
async fn numbers_past_their_column_are_422_and_the_largest_that_fit_are_kept_exactly() {
    let app = TestApp::builder().start().await;
    for value in [json!(1e12), json!(-0.01), json!(1e300)] {
        app.post("/api/v1/leads", json!({"name": "a", "value": value}))
            .await
            .expect_error(422, "validation_error");
    }
    let lead = app
        .post(
            "/api/v1/leads",
            json!({"name": "a", "value": 999_999_999_999.99_f64}),
        )
        .await;
    lead.expect(201);
    assert_eq!(lead.data()["value"], json!(999_999_999_999.99_f64));
    let lead = app
        .post("/api/v1/leads", json!({"name": "a", "value": 12_500.125}))
        .await;
    assert_eq!(lead.data()["value"], json!(12_500.13), "rounded to cents");

    for hours in [json!(1e8), json!(99_999_999.995)] {
        app.post(
            "/api/v1/tickets",
            json!({"subject": "s", "estimatedHours": hours}),
        )
        .await
        .expect_error(422, "validation_error");
    }
    let ticket = app
        .post(
            "/api/v1/tickets",
            json!({"subject": "s", "estimatedHours": 99_999_999.99_f64}),
        )
        .await;
    ticket.expect(201);
    assert_eq!(ticket.data()["estimatedHours"], json!(99_999_999.99_f64));
    // JSON Schema's integers may carry a zero fraction.
    app.post(
        "/api/v1/faq-collections",
        json!({"name": "c", "displayOrder": 3.0}),
    )
    .await
    .expect(201);
    app.post(
        "/api/v1/faq-collections",
        json!({"name": "c", "displayOrder": 1e20}),
    )
    .await
    .expect_error(422, "validation_error");
    still_healthy(&app).await;
}

#[tokio::test]
async fn times_and_cursors_past_their_range_are_422() {
    let app = TestApp::builder().start().await;
    for due in ["9999-12-31T23:00:00-05:00", "+10000-01-01T00:00:00Z"] {
        let resp = app
            .post("/api/v1/tickets", json!({"subject": "s", "dueDate": due}))
            .await;
        resp.expect_error(422, "validation_error");
        assert_eq!(resp.field(), "dueDate");
    }
    app.post(
        "/api/v1/tickets",
        json!({"subject": "s", "dueDate": "9999-12-31T23:59:59.999Z"}),
    )
    .await
    .expect(201);
    let id = Uuid::now_v7();
    for cursor in [
        format!("{}_{id}", "9".repeat(18)),
        format!("-1_{id}"),
        "99999999999999999999999_x".to_owned(),
    ] {
        let resp = app.get(&format!("/api/v1/contacts?cursor={cursor}")).await;
        resp.expect_error(422, "validation_error");
        assert_eq!(resp.field(), "cursor");
    }
    // The furthest cursor the format allows is a position like any other.
    app.get(&format!("/api/v1/contacts?cursor={}_{id}", "9".repeat(17)))
        .await
        .expect(200);
    app.get("/api/v1/contacts?page=100001")
        .await
        .expect_error(422, "validation_error");
    still_healthy(&app).await;
}

#[tokio::test]
async fn template_variables_placeholders_and_rendered_messages_are_bounded_when_written() {
    let app = TestApp::builder().start().await;
    // Placeholders: at most 100, numbered to 100.
    for body in ["{{1}}".repeat(101), "Hi {{101}}".to_owned()] {
        let resp = app
            .post(
                "/api/v1/templates",
                json!({"name": "t", "channel": "email", "body": body}),
            )
            .await;
        resp.expect_error(422, "validation_error");
        assert_eq!(resp.field(), "body");
    }
    // A body longer than its channel takes, the contact fields at their longest.
    let resp = app
        .post(
            "/api/v1/templates",
            json!({"name": "t", "channel": "social_b", "body": format!("{} {{{{contact.name}}}}", "x".repeat(850))}),
        )
        .await;
    resp.expect_error(422, "validation_error");
    assert_eq!(resp.body["error"]["details"][0]["code"], "too_long");

    let template = template(&app, "messaging_a", "{{1}} {{2}} {{3}} {{4}} {{5}}").await;
    let contact = contact(&app).await;
    let broadcast = |values: Vec<String>| {
        json!({
            "broadcastName": "b", "templateId": template, "contactIds": [contact], "isDraft": true,
            "templateVariables": {"body": values.iter().map(|v| json!({"type": "text", "value": v})).collect::<Vec<_>>()}
        })
    };
    // Each value at most 1,000 characters.
    let resp = app
        .post("/api/v1/broadcasts", broadcast(vec!["v".repeat(1_001); 5]))
        .await;
    resp.expect_error(422, "validation_error");
    assert_eq!(resp.field(), "templateVariables.body[0].value");
    // Five values of 1,000 render past messaging_a's 4,096 characters.
    let resp = app
        .post("/api/v1/broadcasts", broadcast(vec!["v".repeat(1_000); 5]))
        .await;
    resp.expect_error(422, "validation_error");
    assert_eq!(resp.field(), "templateVariables.body");
    // More values than placeholders can be: refused by count.
    let resp = app
        .post("/api/v1/broadcasts", broadcast(vec!["v".to_owned(); 101]))
        .await;
    resp.expect_error(422, "validation_error");
    // emailVariables at most 16 KiB as JSON.
    let mut big = broadcast(vec!["v".to_owned(); 5]);
    big["emailVariables"] = json!({"blob": "x".repeat(17 * 1024)});
    let resp = app.post("/api/v1/broadcasts", big).await;
    resp.expect_error(422, "validation_error");
    assert_eq!(resp.field(), "emailVariables");

    // A draft that fits; then a template change that would make it too long is refused.
    let draft = app
        .post("/api/v1/broadcasts", broadcast(vec!["v".repeat(800); 5]))
        .await;
    draft.expect(201);
    let resp = app
        .patch(
            &format!("/api/v1/templates/{template}"),
            json!({"body": format!("{} {{{{1}}}} {{{{2}}}} {{{{3}}}} {{{{4}}}} {{{{5}}}}", "x".repeat(500))}),
        )
        .await;
    resp.expect_error(422, "validation_error");
    assert!(
        resp.body["error"]["details"][0]["message"]
            .as_str()
            .unwrap()
            .contains(&draft.id()),
        "{}",
        resp.body
    );
    // The broadcast's own update is checked the same way.
    let resp = app
        .patch(
            &format!("/api/v1/broadcasts/{}", draft.id()),
            broadcast(vec!["v".repeat(900); 5]),
        )
        .await;
    resp.expect_error(422, "validation_error");
    still_healthy(&app).await;
}

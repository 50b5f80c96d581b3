//! Bad input for every operation that takes a body or a page: each gets its contract status
//! and code, never a 500, and nothing is written.

use parley_tests::TestApp;
use parley_tests::fixture::Fixture;
use parley_tests::openapi::{document, example, keyed_operations, resolve, type_of, wrong_type};
use reqwest::Method;
use serde_json::{Value, json};

async fn unchanged(app: &TestApp, before: &[(String, i64, Option<String>)], what: &str) {
    assert_eq!(
        app.fingerprint(app.org_id).await,
        before,
        "{what} wrote something"
    );
}

#[tokio::test]
async fn every_body_rejects_malformed_json_wrong_types_missing_fields_and_long_strings() {
    let app = TestApp::builder().start().await;
    let f = Fixture::create(&app).await;
    let doc = document();
    let before = app.fingerprint(app.org_id).await;
    let mut cases = 0;
    for op in keyed_operations(&doc) {
        let Some(schema) = &op.body else { continue };
        let path = f.fill(&op.path);
        let label = format!("{} {}", op.method, op.path);
        let valid = example(schema);
        assert!(
            valid.is_object(),
            "{label}: the request schema has no example"
        );

        for raw in ["{\"name\": ", "not json", "[1,", ""] {
            let resp = app
                .send_raw(op.method.clone(), &path, "application/json", raw)
                .await;
            assert_eq!(
                (resp.status, resp.code()),
                (400, "invalid_json"),
                "{label} {raw:?}"
            );
        }
        let resp = app
            .send_raw(op.method.clone(), &path, "text/plain", valid.to_string())
            .await;
        assert_eq!(
            (resp.status, resp.code()),
            (415, "unsupported_media_type"),
            "{label}"
        );
        let resp = app
            .send(
                op.method.clone(),
                &path,
                Some(&app.key),
                Some(&json!([valid])),
            )
            .await;
        assert_eq!(
            (resp.status, resp.code()),
            (422, "validation_error"),
            "{label} array body"
        );

        let properties = schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (name, prop) in &properties {
            let prop = resolve(&doc, prop);
            let mut body = valid.clone();
            body[name] = wrong_type(&prop);
            let resp = app
                .send(op.method.clone(), &path, Some(&app.key), Some(&body))
                .await;
            assert_eq!(
                resp.status, 422,
                "{label}: wrong type for {name}: {}",
                resp.body
            );
            assert!(
                resp.field().starts_with(name.as_str()),
                "{label} {name}: {}",
                resp.body
            );
            cases += 1;

            if let Some(max) = prop["maxLength"].as_u64() {
                let mut body = valid.clone();
                body[name] = json!("a".repeat(max as usize + 1));
                let resp = app
                    .send(op.method.clone(), &path, Some(&app.key), Some(&body))
                    .await;
                assert_eq!(
                    resp.status, 422,
                    "{label}: {name} over {max} characters: {}",
                    resp.body
                );
                assert_eq!(resp.field(), name, "{label}");
                cases += 1;
            }
            if let Some(max) = prop["maxItems"].as_u64() {
                let item = resolve(&doc, &prop["items"]);
                let one = if item["format"] == "uuid" {
                    json!(uuid::Uuid::now_v7())
                } else {
                    json!("x")
                };
                let mut body = valid.clone();
                body[name] = Value::Array(
                    (0..=max)
                        .map(|_| {
                            if item["format"] == "uuid" {
                                json!(uuid::Uuid::now_v7())
                            } else {
                                one.clone()
                            }
                        })
                        .collect(),
                );
                let resp = app
                    .send(op.method.clone(), &path, Some(&app.key), Some(&body))
                    .await;
                assert_eq!(
                    resp.status,
                    422,
                    "{label}: {name} with {} items: {}",
                    max + 1,
                    resp.body
                );
                cases += 1;
            }
            if type_of(&prop).as_deref() == Some("integer") && prop["maximum"].is_number() {
                let mut body = valid.clone();
                body[name] = json!(prop["maximum"].as_i64().unwrap_or(0) + 1);
                let resp = app
                    .send(op.method.clone(), &path, Some(&app.key), Some(&body))
                    .await;
                assert_eq!(
                    resp.status, 422,
                    "{label}: {name} above its maximum: {}",
                    resp.body
                );
                cases += 1;
            }
        }
        for required in schema["required"].as_array().into_iter().flatten() {
            let name = required.as_str().unwrap_or_default();
            let mut body = valid.clone();
            body.as_object_mut().map(|o| o.remove(name));
            let resp = app
                .send(op.method.clone(), &path, Some(&app.key), Some(&body))
                .await;
            assert_eq!(
                (resp.status, resp.field()),
                (422, name),
                "{label}: without {name}: {}",
                resp.body
            );
            let details = &resp.body["error"]["details"][0];
            assert_eq!(details["code"], "required", "{label}");
            cases += 1;
        }
    }
    assert!(cases > 150, "only {cases} cases ran");
    unchanged(&app, &before, "bad input").await;
}

#[tokio::test]
async fn a_body_over_the_size_limit_is_413_on_every_operation() {
    let app = TestApp::builder()
        .env(&[
            ("PARLEY_MAX_BODY_BYTES", "4096"),
            ("PARLEY_MAX_BROADCAST_BODY_BYTES", "4096"),
        ])
        .start()
        .await;
    let f = Fixture::create(&app).await;
    let doc = document();
    let before = app.fingerprint(app.org_id).await;
    let big = json!({"name": "x".repeat(5000)}).to_string();
    for op in keyed_operations(&doc)
        .into_iter()
        .filter(|op| op.body.is_some())
    {
        let resp = app
            .send_raw(
                op.method.clone(),
                &f.fill(&op.path),
                "application/json",
                big.clone(),
            )
            .await;
        assert_eq!(
            (resp.status, resp.code()),
            (413, "payload_too_large"),
            "{} {}",
            op.method,
            op.path
        );
    }
    unchanged(&app, &before, "an oversized body").await;
}

#[tokio::test]
async fn page_size_zero_and_a_thousand_are_refused_on_every_list() {
    let app = TestApp::builder().start().await;
    let f = Fixture::create(&app).await;
    let doc = document();
    let mut lists = 0;
    for op in keyed_operations(&doc)
        .into_iter()
        .filter(|op| op.query_params.iter().any(|p| p == "pageSize"))
    {
        for bad in [
            "pageSize=0",
            "pageSize=1000",
            "pageSize=ten",
            "page=0",
            "sort=name",
            "cursor=zzz",
        ] {
            let path = format!("{}?{bad}", f.fill(&op.path));
            let resp = app.send(Method::GET, &path, Some(&app.key), None).await;
            assert_eq!(
                (resp.status, resp.code()),
                (422, "validation_error"),
                "{path}: {}",
                resp.body
            );
        }
        lists += 1;
    }
    assert!(lists >= 12, "only {lists} lists");
}

#[tokio::test]
async fn unknown_ids_in_references_are_422_and_write_nothing() {
    let app = TestApp::builder().start().await;
    let f = Fixture::create(&app).await;
    let before = app.fingerprint(app.org_id).await;
    let nobody = uuid::Uuid::now_v7();
    let cases: Vec<(&str, String, Value, &str)> = vec![
        (
            "POST",
            "/api/v1/contacts".into(),
            json!({"source": "web", "tagIds": [f.tag, nobody]}),
            "tagIds[1]",
        ),
        (
            "POST",
            "/api/v1/contacts".into(),
            json!({"source": "web", "companyId": nobody}),
            "companyId",
        ),
        (
            "PATCH",
            format!("/api/v1/contacts/{}", f.contact),
            json!({"tagIds": [nobody]}),
            "tagIds[0]",
        ),
        (
            "PATCH",
            format!("/api/v1/contacts/{}", f.contact),
            json!({"companyId": nobody}),
            "companyId",
        ),
        (
            "POST",
            "/api/v1/leads".into(),
            json!({"name": "x", "assigneeId": nobody}),
            "assigneeId",
        ),
        (
            "POST",
            "/api/v1/leads".into(),
            json!({"name": "x", "tagIds": [nobody]}),
            "tagIds[0]",
        ),
        (
            "PATCH",
            format!("/api/v1/leads/{}", f.lead),
            json!({"assigneeId": nobody}),
            "assigneeId",
        ),
        (
            "POST",
            "/api/v1/teams".into(),
            json!({"name": "t2", "memberIds": [nobody]}),
            "memberIds[0]",
        ),
        (
            "POST",
            "/api/v1/teams".into(),
            json!({"name": "t2", "createdBy": nobody}),
            "createdBy",
        ),
        (
            "POST",
            format!("/api/v1/teams/{}/members", f.team),
            json!({"userIds": [nobody]}),
            "userIds[0]",
        ),
        (
            "POST",
            format!("/api/v1/faq-collections/{}/faqs", f.collection),
            json!({"title": "t", "content": "c", "categoryId": nobody}),
            "categoryId",
        ),
    ];
    for (method, path, body, field) in cases {
        let resp = app
            .send(method.parse().unwrap(), &path, Some(&app.key), Some(&body))
            .await;
        resp.expect_error(422, "validation_error");
        assert_eq!(resp.field(), field, "{method} {path}");
        assert_eq!(resp.body["error"]["details"][0]["code"], "not_found");
    }
    unchanged(&app, &before, "unknown ids").await;
}

#[tokio::test]
async fn field_formats_are_checked() {
    let app = TestApp::builder().start().await;
    let cases = [
        (
            "/api/v1/contacts",
            json!({"source": "web", "email": "not-an-email"}),
            "email",
        ),
        (
            "/api/v1/contacts",
            json!({"source": "web", "phone": "12"}),
            "phone",
        ),
        ("/api/v1/contacts", json!({"source": "   "}), "source"),
        (
            "/api/v1/contacts",
            json!({"source": "web", "avatar": "ftp://x"}),
            "avatar",
        ),
        ("/api/v1/leads", json!({"notes": "nobody"}), "name"),
        ("/api/v1/leads", json!({"name": "x", "value": -1}), "value"),
        (
            "/api/v1/leads",
            json!({"name": "x", "currency": "EURO"}),
            "currency",
        ),
        (
            "/api/v1/templates",
            json!({"name": "t", "channel": "fax", "body": "b"}),
            "channel",
        ),
        (
            "/api/v1/templates",
            json!({"name": "t", "channel": "email", "body": "{{contact.secret}}"}),
            "body",
        ),
        (
            "/api/v1/faq-collections",
            json!({"name": "n", "slug": "Not A Slug"}),
            "slug",
        ),
        (
            "/api/v1/faq-collections",
            json!({"name": "n", "color": "blue"}),
            "color",
        ),
        (
            "/api/v1/faq-collections",
            json!({"name": "n", "displayOrder": 1.5}),
            "displayOrder",
        ),
        (
            "/api/v1/message-attributes",
            json!({"key": "Bad Key", "label": "l"}),
            "key",
        ),
        (
            "/api/v1/message-attributes",
            json!({"key": "k", "label": "l", "attributeType": "alien"}),
            "attributeType",
        ),
        (
            "/api/v1/users",
            json!({"firstName": "a", "lastName": "b", "email": "c@d.io", "timezone": "Mars/Base"}),
            "timezone",
        ),
        (
            "/api/v1/api-keys",
            json!({"name": "k", "scopes": ["planets:read"]}),
            "scopes[0]",
        ),
        (
            "/api/v1/api-keys",
            json!({"name": "k", "scopes": []}),
            "scopes",
        ),
    ];
    let before = app.fingerprint(app.org_id).await;
    for (path, body, field) in cases {
        let resp = app.post(path, body.clone()).await;
        resp.expect_error(422, "validation_error");
        assert_eq!(resp.field(), field, "{path} {body}");
    }
    let resp = app
        .patch(
            &format!("/api/v1/contacts/{}", uuid::Uuid::now_v7()),
            json!({"source": null}),
        )
        .await;
    assert_eq!(
        (resp.status, resp.field()),
        (422, "source"),
        "null for a required field"
    );
    unchanged(&app, &before, "bad formats").await;
}

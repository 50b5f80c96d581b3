use parley_tests::TestApp;
use parley_tests::fixture::Fixture;
use parley_tests::openapi::{document, example, keyed_operations};
use serde_json::json;

/// For every route with an `{id}`, organization B's key on organization A's record gets 404,
/// and A's data is unchanged afterwards.
#[tokio::test]
async fn another_organizations_records_are_not_found_and_stay_unchanged() {
    let app = TestApp::builder().start().await;
    let a = Fixture::create(&app).await;
    let (_, b_key) = app.new_org("Organization B").await;
    let before = app.fingerprint(app.org_id).await;
    let doc = document();
    let mut checked = 0;
    for op in keyed_operations(&doc)
        .into_iter()
        .filter(|op| op.path.contains('{'))
    {
        let path = a.fill(&op.path);
        let body = op.body.as_ref().map(example);
        let resp = app
            .send(op.method.clone(), &path, Some(&b_key), body.as_ref())
            .await;
        assert_eq!(
            resp.status, 404,
            "{} {} answered {}",
            op.method, op.path, resp.body
        );
        assert_eq!(resp.code(), "not_found", "{} {}", op.method, op.path);
        checked += 1;
    }
    assert!(
        checked >= 30,
        "only {checked} routes with an id were checked"
    );
    assert_eq!(
        app.fingerprint(app.org_id).await,
        before,
        "organization A changed"
    );
}

#[tokio::test]
async fn lists_show_only_the_callers_organization() {
    let app = TestApp::builder().start().await;
    let a = Fixture::create(&app).await;
    let (_, b_key) = app.new_org("Organization B").await;
    let doc = document();
    for op in keyed_operations(&doc).into_iter().filter(|op| {
        op.method == reqwest::Method::GET && op.query_params.iter().any(|p| p == "pageSize")
    }) {
        let path = a.fill(&op.path);
        let resp = app.send(op.method.clone(), &path, Some(&b_key), None).await;
        if op.path.contains('{') {
            assert_eq!(resp.status, 404, "{}", op.path);
        } else {
            resp.expect(200);
            // B's own `*` key is the only record B has of any kind.
            let expected = if op.path == "/api/v1/api-keys" { 1 } else { 0 };
            assert_eq!(
                resp.body["meta"]["total"], expected,
                "{}: {}",
                op.path, resp.body
            );
        }
    }
}

#[tokio::test]
async fn ids_of_another_organization_are_unknown_ids() {
    let app = TestApp::builder().start().await;
    let (b_org, b_key) = app.new_org("Organization B").await;
    let _ = b_org;
    let b_tag = app
        .send(
            reqwest::Method::POST,
            "/api/v1/tags",
            Some(&b_key),
            Some(&json!({"name": "b"})),
        )
        .await
        .expect(201)
        .id();
    let before = app.fingerprint(app.org_id).await;
    let resp = app
        .post(
            "/api/v1/contacts",
            json!({"source": "web", "tagIds": [b_tag]}),
        )
        .await;
    resp.expect_error(422, "validation_error");
    assert_eq!(resp.field(), "tagIds[0]");
    assert_eq!(app.fingerprint(app.org_id).await, before);
}

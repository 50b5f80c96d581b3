use parley_domain::auth::all_scopes;
use parley_tests::TestApp;
use parley_tests::fixture::Fixture;
use parley_tests::openapi::{document, example, keyed_operations};

/// Every operation, called with a key holding every scope but the one it needs, is 403 and
/// writes nothing.
#[tokio::test]
async fn a_key_without_the_routes_scope_is_forbidden_and_changes_nothing() {
    let app = TestApp::builder().start().await;
    let f = Fixture::create(&app).await;
    let doc = document();
    let ops = keyed_operations(&doc);
    let before = app.fingerprint(app.org_id).await;
    let mut keys = std::collections::HashMap::new();
    for op in &ops {
        assert!(
            !op.scope.is_empty(),
            "{} {} declares no scope",
            op.method,
            op.path
        );
        if !keys.contains_key(&op.scope) {
            let others: Vec<String> = all_scopes()
                .into_iter()
                .filter(|s| s != "*" && *s != op.scope)
                .collect();
            let others: Vec<&str> = others.iter().map(String::as_str).collect();
            keys.insert(op.scope.clone(), app.key_with(&others).await);
        }
        let key = &keys[&op.scope];
        let body = op.body.as_ref().map(example);
        let resp = app
            .send(
                op.method.clone(),
                &f.fill(&op.path),
                Some(key),
                body.as_ref(),
            )
            .await;
        assert_eq!(resp.status, 403, "{} {}: {}", op.method, op.path, resp.body);
        assert_eq!(resp.code(), "forbidden");
    }
    // Keys made for this test are the only new rows.
    let after: Vec<_> = app
        .fingerprint(app.org_id)
        .await
        .into_iter()
        .filter(|(t, ..)| t != "api_keys")
        .collect();
    let before: Vec<_> = before
        .into_iter()
        .filter(|(t, ..)| t != "api_keys")
        .collect();
    assert_eq!(after, before);
}

#[tokio::test]
async fn a_read_scope_reads_and_cannot_write() {
    let app = TestApp::builder().start().await;
    let key = app.key_with(&["contacts:read"]).await;
    let list = app
        .send(reqwest::Method::GET, "/api/v1/contacts", Some(&key), None)
        .await;
    list.expect(200);
    let create = app
        .send(
            reqwest::Method::POST,
            "/api/v1/contacts",
            Some(&key),
            Some(&serde_json::json!({"source": "web"})),
        )
        .await;
    create.expect_error(403, "forbidden");
    assert_eq!(app.get("/api/v1/contacts").await.body["meta"]["total"], 0);
}

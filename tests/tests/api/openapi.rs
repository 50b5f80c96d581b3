use parley_tests::TestApp;

#[tokio::test]
async fn the_document_is_openapi_3_1_with_every_route() {
    let app = TestApp::builder().start().await;
    let resp = app
        .client
        .get(format!("{}/api/v1/openapi.json", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let doc: serde_json::Value = resp.json().await.unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    for path in [
        "/api/v1/faq-collections",
        "/api/v1/contacts",
        "/api/v1/templates/{id}/duplicate",
        "/api/v1/leads/{id}/convert",
        "/api/v1/teams/{id}",
        "/api/v1/leads",
        "/api/v1/categories",
        "/api/v1/message-attributes/{id}",
        "/api/v1/api-keys",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} is missing");
    }
    let post = &doc["paths"]["/api/v1/contacts"]["post"];
    for status in [
        "201", "400", "401", "403", "409", "413", "415", "422", "429", "500", "503",
    ] {
        assert!(
            post["responses"][status].is_object(),
            "POST /contacts lacks {status}"
        );
    }
    assert_eq!(post["security"][0]["bearer"][0], "contacts:write");
}

#[tokio::test]
async fn the_docs_page_is_served_from_the_binary() {
    let app = TestApp::builder().start().await;
    let page = app
        .client
        .get(format!("{}/docs/", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    // It shares its origin with the operator page: only its own scripts run.
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    for rule in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(policy.contains(rule), "{rule} in {policy}");
    }
    assert!(!policy.contains("unsafe-eval") && !policy.contains("script-src 'self' 'unsafe"));
    let html = page.text().await.unwrap();
    assert!(html.contains("swagger-ui"), "{html}");
    assert!(
        !html.contains("https://"),
        "the page loads nothing from the internet"
    );
    let js = app
        .client
        .get(format!("{}/docs/swagger-ui-bundle.js", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(js.status(), 200);
    assert!(js.headers().contains_key("content-security-policy"));
}

/// What the schema allows, the API takes: a lead's update offers no `converted`, and an
/// import's `format` part is no nullable field (a form field has no null).
#[test]
fn the_schema_offers_no_value_the_api_refuses() {
    let doc = parley_tests::openapi::document();
    let patch = parley_tests::openapi::operations(&doc)
        .into_iter()
        .find(|op| op.path == "/api/v1/leads/{id}" && op.method == reqwest::Method::PATCH)
        .expect("PATCH /leads/{id}");
    let body = patch.body.expect("a body");
    let status = parley_tests::openapi::resolve(&doc, &body["properties"]["status"]);
    let values: Vec<&str> = status["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("an enum: {status}"))
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(values, ["new", "contacted", "qualified", "unqualified"]);
    let form = &doc["paths"]["/api/v1/contacts/imports"]["post"]["requestBody"]["content"]["multipart/form-data"]
        ["schema"];
    let form = parley_tests::openapi::resolve(&doc, form);
    let format = &form["properties"]["format"];
    assert!(
        !format.to_string().contains("null"),
        "format is not nullable: {format}"
    );
}

#[tokio::test]
async fn http_metrics_count_requests_by_route_template() {
    let app = TestApp::builder().start().await;
    app.get(&format!("/api/v1/contacts/{}", uuid::Uuid::now_v7()))
        .await
        .expect(404);
    // Not on the public address: on the metrics listener.
    let public = app
        .client
        .get(format!("{}/metrics", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(public.status(), 404);
    let text = app
        .client
        .get(format!("http://{}/metrics", app.metrics_addr))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // Other tests in this process share the recorder, so look for our line among theirs.
    assert!(
        text.lines().any(|l| {
            l.starts_with("parley_http_requests_total")
                && l.contains("route=\"/api/v1/contacts/{id}\"")
                && l.contains("status=\"404\"")
                && l.contains("method=\"GET\"")
        }),
        "no request counter in\n{text}"
    );
    assert!(text.contains("parley_http_request_duration_seconds_bucket"));
}

/// Each request is counted once in its series, the first of the series and those after it
/// (whose handles the middleware keeps). No other test sends a made-up method to this route.
#[tokio::test]
async fn http_metrics_count_every_request_of_a_series() {
    let app = TestApp::builder().start().await;
    let count = || async {
        parley_tests::metrics_text(app.metrics_addr)
            .await
            .lines()
            .find(|l| {
                l.starts_with("parley_http_requests_total{")
                    && l.contains("route=\"/api/v1/teams/{id}\"")
                    && l.contains("method=\"other\"")
                    && l.contains("status=\"405\"")
            })
            .map_or(0, |l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
    };
    let before = count().await;
    let path = format!("/api/v1/teams/{}", uuid::Uuid::now_v7());
    for round in 1..=2 {
        for _ in 0..3 {
            let method = reqwest::Method::from_bytes(b"BREW").unwrap();
            app.send(method, &path, Some(&app.key), None)
                .await
                .expect_error(405, "method_not_allowed");
        }
        assert_eq!(count().await, before + 3 * round);
    }
}

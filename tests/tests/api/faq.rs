use parley_tests::spawn_app;
use serde_json::json;

#[tokio::test]
async fn collections_count_their_faqs_and_reading_time() {
    let app = spawn_app().await;
    let c = app
        .post(
            "/api/v1/faq-collections",
            json!({"name": "Getting Started!"}),
        )
        .await;
    c.expect(201);
    assert_eq!(c.data()["slug"], "getting-started");
    assert_eq!(
        (
            c.data()["faqCount"].clone(),
            c.data()["totalReadTime"].clone()
        ),
        (json!(0), json!(0))
    );
    let id = c.id();
    let long = "word ".repeat(450);
    let faq = app
        .post(
            &format!("/api/v1/faq-collections/{id}/faqs"),
            json!({"title": "Long read", "content": long}),
        )
        .await;
    faq.expect(201);
    assert_eq!(faq.data()["readTime"], 3);
    assert_eq!(faq.data()["slug"], "long-read");
    assert_eq!(
        faq.data()["locale"],
        "en",
        "inherits the collection's locale"
    );
    app.post(
        &format!("/api/v1/faq-collections/{id}/faqs"),
        json!({"title": "Short", "content": "Yes."}),
    )
    .await
    .expect(201);
    let got = app.get(&format!("/api/v1/faq-collections/{id}")).await;
    assert_eq!(
        (
            got.data()["faqCount"].clone(),
            got.data()["totalReadTime"].clone()
        ),
        (json!(2), json!(4))
    );
    assert_eq!(got.data()["faqs"].as_array().unwrap().len(), 2);
    let listed = app.get("/api/v1/faq-collections").await;
    assert_eq!(listed.data()[0]["faqCount"], 2);

    let shorter = app
        .patch(
            &format!("/api/v1/faq-collections/{id}/faqs/{}", faq.id()),
            json!({"content": "Now short."}),
        )
        .await;
    assert_eq!(shorter.data()["readTime"], 1);
    let got = app.get(&format!("/api/v1/faq-collections/{id}")).await;
    assert_eq!(got.data()["totalReadTime"], 2);
    // The figures are kept beside the collection: they follow a deletion.
    app.delete(&format!("/api/v1/faq-collections/{id}/faqs/{}", faq.id()))
        .await
        .expect(200);
    let got = app.get(&format!("/api/v1/faq-collections/{id}")).await;
    assert_eq!(
        (
            got.data()["faqCount"].clone(),
            got.data()["totalReadTime"].clone()
        ),
        (json!(1), json!(1))
    );
}

#[tokio::test]
async fn slugs_are_unique_per_locale() {
    let app = spawn_app().await;
    let first = app
        .post("/api/v1/faq-collections", json!({"name": "Help"}))
        .await;
    let second = app
        .post("/api/v1/faq-collections", json!({"name": "Help"}))
        .await;
    assert_eq!(
        second.data()["slug"],
        "help-2",
        "a derived slug takes a suffix"
    );
    let german = app
        .post(
            "/api/v1/faq-collections",
            json!({"name": "Help", "locale": "de"}),
        )
        .await;
    assert_eq!(
        german.data()["slug"],
        "help",
        "another locale has its own slugs"
    );
    let before = app.fingerprint(app.org_id).await;
    app.post(
        "/api/v1/faq-collections",
        json!({"name": "Other", "slug": "help"}),
    )
    .await
    .expect_error(409, "conflict");
    app.patch(
        &format!("/api/v1/faq-collections/{}", second.id()),
        json!({"slug": "help"}),
    )
    .await
    .expect_error(409, "conflict");
    assert_eq!(app.fingerprint(app.org_id).await, before);
    let _ = first;
}

#[tokio::test]
async fn faqs_belong_to_categories_of_their_collection() {
    let app = spawn_app().await;
    let one = app
        .post("/api/v1/faq-collections", json!({"name": "One"}))
        .await
        .id();
    let two = app
        .post("/api/v1/faq-collections", json!({"name": "Two"}))
        .await
        .id();
    let cat = app
        .post(
            &format!("/api/v1/faq-collections/{one}/categories"),
            json!({"name": "Billing", "displayOrder": 2}),
        )
        .await;
    cat.expect(201);
    app.post(
        &format!("/api/v1/faq-collections/{one}/categories"),
        json!({"name": "billing"}),
    )
    .await
    .expect_error(409, "conflict");
    let faq = app
        .post(
            &format!("/api/v1/faq-collections/{one}/faqs"),
            json!({"title": "Invoices", "content": "Monthly.", "categoryId": cat.id(), "tags": ["billing"]}),
        )
        .await;
    faq.expect(201);
    assert_eq!(faq.data()["category"]["name"], "Billing");
    assert_eq!(faq.data()["tags"], json!(["billing"]));
    let filtered = app
        .get(&format!(
            "/api/v1/faq-collections/{one}/faqs?categoryId={}",
            cat.id()
        ))
        .await;
    assert_eq!(filtered.body["meta"]["total"], 1);
    let resp = app
        .post(
            &format!("/api/v1/faq-collections/{two}/faqs"),
            json!({"title": "X", "content": "Y", "categoryId": cat.id()}),
        )
        .await;
    resp.expect_error(422, "validation_error");
    // The FAQ is not reachable through another collection.
    app.get(&format!("/api/v1/faq-collections/{two}/faqs/{}", faq.id()))
        .await
        .expect_error(404, "not_found");
    // Deleting the category keeps the FAQ, without a category.
    app.delete(&format!(
        "/api/v1/faq-collections/{one}/categories/{}",
        cat.id()
    ))
    .await
    .expect(200);
    let after = app
        .get(&format!("/api/v1/faq-collections/{one}/faqs/{}", faq.id()))
        .await;
    assert!(after.data()["categoryId"].is_null());
    // Deleting the collection deletes its FAQs.
    app.delete(&format!("/api/v1/faq-collections/{one}"))
        .await
        .expect(200);
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM faqs WHERE organization_id = $1")
        .bind(app.org_id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
}

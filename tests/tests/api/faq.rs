use parley_tests::TestApp;
use serde_json::json;

#[tokio::test]
async fn collections_count_their_faqs_and_reading_time() {
    let app = TestApp::builder().start().await;
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
    let app = TestApp::builder().start().await;
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
    let app = TestApp::builder().start().await;
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

/// FAQs written, changed or deleted many in one statement (a collection's deletion cascades to
/// all its FAQs at once) move the collection's figures once per statement, right.
#[tokio::test]
async fn figures_follow_statements_of_many_faqs() {
    let app = TestApp::builder().start().await;
    let id = app
        .post("/api/v1/faq-collections", json!({"name": "Bulk"}))
        .await
        .expect(201)
        .id();
    let seed = app
        .post(
            &format!("/api/v1/faq-collections/{id}/faqs"),
            json!({"title": "Seed", "content": "word ".repeat(450)}),
        )
        .await
        .expect(201)
        .id();
    let figures = |collection: &str| {
        let path = format!("/api/v1/faq-collections/{collection}");
        let app = &app;
        async move {
            let got = app.get(&path).await;
            (
                got.data()["faqCount"].as_i64().unwrap(),
                got.data()["totalReadTime"].as_i64().unwrap(),
            )
        }
    };
    let exec = |sql: &'static str| {
        let (pool, id) = (&app.pool, &id);
        async move {
            sqlx::query(sql)
                .bind(id)
                .execute(pool)
                .await
                .unwrap()
                .rows_affected()
        }
    };
    // 5,000 copies of the seed (read time 3) in one statement.
    sqlx::query(
        "INSERT INTO faqs SELECT r.*
         FROM (SELECT * FROM faqs WHERE id = $1::uuid) t, generate_series(1, 5000) g,
              LATERAL jsonb_populate_record(NULL::faqs, to_jsonb(t)
                  || jsonb_build_object('id', uuid_v7(), 'slug', t.slug || '-' || g)) r",
    )
    .bind(&seed)
    .execute(&app.pool)
    .await
    .unwrap();
    assert_eq!(figures(&id).await, (5_001, 15_003));
    // Every read time changes in one statement; a statement that changes neither the
    // collection nor the read time moves nothing.
    let n = exec("UPDATE faqs SET read_time = read_time + 1 WHERE collection_id = $1::uuid").await;
    assert_eq!(n, 5_001);
    exec("UPDATE faqs SET is_featured = true WHERE collection_id = $1::uuid").await;
    assert_eq!(figures(&id).await, (5_001, 20_004));
    let n =
        exec("DELETE FROM faqs WHERE collection_id = $1::uuid AND slug ~ '-[0-9]*[02468]$'").await;
    assert_eq!(n, 2_500);
    assert_eq!(figures(&id).await, (2_501, 10_004));

    // 500 FAQs move to another collection in one statement: one loses what the other gains.
    let other = app
        .post("/api/v1/faq-collections", json!({"name": "Other"}))
        .await
        .expect(201)
        .id();
    let moved = sqlx::query(
        "UPDATE faqs SET collection_id = $2::uuid
         WHERE collection_id = $1::uuid AND slug ~ '-[0-9]*5$'",
    )
    .bind(&id)
    .bind(&other)
    .execute(&app.pool)
    .await
    .unwrap()
    .rows_affected();
    assert_eq!(moved, 500);
    assert_eq!(figures(&id).await, (2_001, 8_004));
    assert_eq!(figures(&other).await, (500, 2_000));

    // The collection goes with its FAQs, in one cascade, and its figures with it.
    app.delete(&format!("/api/v1/faq-collections/{id}"))
        .await
        .expect(200);
    let left: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM faq_collection_totals WHERE collection_id = $1::uuid",
    )
    .bind(&id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(left, 0);
}

/// A category's and an FAQ's ids are read typed from their paths, under their collection's:
/// a malformed or unknown one, or one of another collection, is 404 `not_found` for a read,
/// an update and a delete, and changes nothing.
#[tokio::test]
async fn a_malformed_unknown_or_foreign_faq_or_category_id_is_not_found() {
    let app = TestApp::builder().start().await;
    let mut collections = Vec::new();
    for name in ["One", "Two"] {
        let c = app
            .post("/api/v1/faq-collections", json!({"name": name}))
            .await
            .id();
        let category = app
            .post(
                &format!("/api/v1/faq-collections/{c}/categories"),
                json!({"name": "Billing"}),
            )
            .await
            .id();
        let faq = app
            .post(
                &format!("/api/v1/faq-collections/{c}/faqs"),
                json!({"title": "Refunds", "content": "Yes."}),
            )
            .await
            .id();
        collections.push((c, category, faq));
    }
    let (one, _, _) = &collections[0];
    let (_, other_category, other_faq) = &collections[1];
    let before = app.fingerprint(app.org_id).await;
    let unknown = uuid::Uuid::now_v7().to_string();
    let long = "a".repeat(300);
    for id in [
        "not-a-uuid",
        "%00",
        long.as_str(),
        unknown.as_str(),
        other_faq.as_str(),
        other_category.as_str(),
    ] {
        let faq = format!("/api/v1/faq-collections/{one}/faqs/{id}");
        app.get(&faq).await.expect_error(404, "not_found");
        app.patch(&faq, json!({"title": "Changed"}))
            .await
            .expect_error(404, "not_found");
        app.delete(&faq).await.expect_error(404, "not_found");
        let category = format!("/api/v1/faq-collections/{one}/categories/{id}");
        app.patch(&category, json!({"name": "Changed"}))
            .await
            .expect_error(404, "not_found");
        app.delete(&category).await.expect_error(404, "not_found");
    }
    assert_eq!(app.fingerprint(app.org_id).await, before);
}

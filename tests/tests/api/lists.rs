use std::collections::HashSet;

use parley_tests::TestApp;
use serde_json::{Value, json};

fn ids(body: &Value) -> Vec<String> {
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn pages_and_cursors_walk_the_whole_list_once() {
    let app = TestApp::builder().start().await;
    let mut created = Vec::new();
    for i in 0..7 {
        created.push(
            app.post("/api/v1/tags", json!({"name": format!("tag-{i}")}))
                .await
                .id(),
        );
    }
    let first = app.get("/api/v1/tags?pageSize=3").await;
    first.expect(200);
    let meta = &first.body["meta"];
    assert_eq!(
        (
            meta["page"].clone(),
            meta["pageSize"].clone(),
            meta["limit"].clone(),
            meta["total"].clone()
        ),
        (json!(1), json!(3), json!(3), json!(7))
    );
    assert_eq!(
        (meta["totalPages"].clone(), meta["count"].clone()),
        (json!(3), json!(3))
    );
    assert_eq!(
        (meta["hasNext"].clone(), meta["hasPrevious"].clone()),
        (json!(true), json!(false))
    );
    // Newest first by default.
    let newest_first: Vec<String> = created.iter().rev().cloned().collect();
    assert_eq!(ids(&first.body), newest_first[..3]);

    let third = app.get("/api/v1/tags?pageSize=3&page=3").await;
    assert_eq!(ids(&third.body), newest_first[6..]);
    assert_eq!(third.body["meta"]["hasNext"], false);
    assert_eq!(third.body["meta"]["hasPrevious"], true);

    // Cursor: stable while rows are added in between.
    let mut seen = Vec::new();
    let mut cursor = first.body["meta"]["endCursor"].as_str().unwrap().to_owned();
    seen.extend(ids(&first.body));
    app.post("/api/v1/tags", json!({"name": "added-meanwhile"}))
        .await
        .expect(201);
    let mut pages = 0;
    loop {
        pages += 1;
        assert!(
            pages <= 100,
            "the cursor walks more than 100 pages: it does not end"
        );
        let page = app
            .get(&format!("/api/v1/tags?pageSize=3&cursor={cursor}"))
            .await;
        page.expect(200);
        assert!(page.body["meta"]["page"].is_null());
        assert_eq!(page.body["meta"]["hasPrevious"], true);
        seen.extend(ids(&page.body));
        if page.body["meta"]["hasNext"] == false {
            break;
        }
        cursor = page.body["meta"]["endCursor"].as_str().unwrap().to_owned();
    }
    assert_eq!(seen, newest_first);
}

#[tokio::test]
async fn sort_created_at_ascending() {
    let app = TestApp::builder().start().await;
    let mut created = Vec::new();
    for i in 0..3 {
        created.push(
            app.post("/api/v1/categories", json!({"name": format!("c{i}")}))
                .await
                .id(),
        );
    }
    let asc = app.get("/api/v1/categories?sort=createdAt").await;
    assert_eq!(ids(&asc.body), created);
    let desc = app.get("/api/v1/categories?sort=-createdAt").await;
    assert_eq!(
        ids(&desc.body),
        created.into_iter().rev().collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn filters_narrow_lists_and_unknown_values_are_422() {
    let app = TestApp::builder().start().await;
    let vip = app.post("/api/v1/tags", json!({"name": "VIP"})).await.id();
    let company = app
        .post("/api/v1/companies", json!({"name": "Acme"}))
        .await
        .id();
    let a = app
        .post(
            "/api/v1/contacts",
            json!({"source": "import", "tagIds": [vip], "companyId": company}),
        )
        .await
        .id();
    let b = app
        .post("/api/v1/contacts", json!({"source": "website"}))
        .await
        .id();
    let set = |v: &Value| ids(v).into_iter().collect::<HashSet<_>>();
    assert_eq!(
        set(&app.get(&format!("/api/v1/contacts?tag={vip}")).await.body),
        HashSet::from([a.clone()])
    );
    assert_eq!(
        set(&app.get("/api/v1/contacts?tag=vip").await.body),
        HashSet::from([a.clone()])
    );
    assert_eq!(
        set(&app.get("/api/v1/contacts?tag=nosuchtag").await.body),
        HashSet::new()
    );
    assert_eq!(
        set(&app
            .get(&format!("/api/v1/contacts?companyId={company}"))
            .await
            .body),
        HashSet::from([a.clone()])
    );
    assert_eq!(
        set(&app.get("/api/v1/contacts?source=website").await.body),
        HashSet::from([b.clone()])
    );
    assert_eq!(
        set(&app.get("/api/v1/contacts?type=contact").await.body),
        HashSet::from([a, b])
    );

    app.post(
        "/api/v1/templates",
        json!({"name": "e", "channel": "email", "body": "x"}),
    )
    .await
    .expect(201);
    app.post(
        "/api/v1/templates",
        json!({"name": "s", "channel": "social_a", "body": "x", "status": "active"}),
    )
    .await
    .expect(201);
    assert_eq!(
        app.get("/api/v1/templates?channel=email").await.body["meta"]["total"],
        1
    );
    assert_eq!(
        app.get("/api/v1/templates?status=active&channel=social_a")
            .await
            .body["meta"]["total"],
        1
    );
    assert_eq!(
        app.get("/api/v1/templates?status=draft&channel=social_a")
            .await
            .body["meta"]["total"],
        0
    );

    for bad in [
        "/api/v1/templates?channel=fax",
        "/api/v1/templates?status=gone",
        "/api/v1/leads?status=won",
        "/api/v1/contacts?type=robot",
        "/api/v1/contacts?companyId=nope",
        "/api/v1/teams?isActive=maybe",
        "/api/v1/message-attributes?attributeType=alien",
    ] {
        let resp = app.get(bad).await;
        resp.expect_error(422, "validation_error");
        let param = bad.split('?').nth(1).unwrap().split('=').next().unwrap();
        assert_eq!(resp.field(), param, "{bad}");
    }
}

#[tokio::test]
async fn a_total_is_exact_up_to_ten_thousand_then_flagged() {
    let app = TestApp::builder().start().await;
    parley_tests::seed::contacts(&app, 10_050).await;
    // A filtered list is counted, up to 10,000.
    let page = app.get("/api/v1/contacts?pageSize=100&source=seed").await;
    let meta = &page.body["meta"];
    assert_eq!(meta["total"], 10_000, "{meta}");
    assert_eq!(meta["totalExact"], false);
    assert_eq!(meta["totalPages"], 100);
    assert_eq!(meta["hasNext"], true);
    // The last page is found by hasNext, not by totalPages.
    let last = app
        .get("/api/v1/contacts?pageSize=100&page=101&source=seed")
        .await;
    assert_eq!(last.body["meta"]["count"], 50);
    assert_eq!(last.body["meta"]["hasNext"], false);
    // A filter that keeps fewer is counted exactly.
    app.post(
        "/api/v1/contacts",
        json!({"source": "ads", "email": "only@example.com"}),
    )
    .await
    .expect(201);
    let ads = app.get("/api/v1/contacts?source=ads").await;
    assert_eq!(ads.body["meta"]["total"], 1);
    assert_eq!(ads.body["meta"]["totalExact"], true);
    // The unfiltered list's total is kept as contacts come and go: exact at any size.
    let all = app.get("/api/v1/contacts?pageSize=100").await;
    assert_eq!(all.body["meta"]["total"], 10_051);
    assert_eq!(all.body["meta"]["totalExact"], true);
    assert_eq!(all.body["meta"]["totalPages"], 101);
    app.delete(&format!(
        "/api/v1/contacts/{}",
        ads.data()[0]["id"].as_str().unwrap()
    ))
    .await
    .expect(200);
    let all = app.get("/api/v1/contacts?pageSize=100").await;
    assert_eq!(all.body["meta"]["total"], 10_050);
}

/// The unfiltered page of contacts has its own statement (no count, no ids first): it walks
/// the list as the filtered one does, in both orders, by page and by cursor, with each
/// contact's company and tags.
#[tokio::test]
async fn the_unfiltered_contacts_page_walks_as_the_filtered_one() {
    let app = TestApp::builder().start().await;
    let company = app
        .post("/api/v1/companies", json!({"name": "Acme"}))
        .await
        .id();
    let tag = app.post("/api/v1/tags", json!({"name": "vip"})).await.id();
    for i in 0..7 {
        app.post(
            "/api/v1/contacts",
            json!({"source": "walk", "name": format!("c{i}"), "companyId": company,
                   "tagIds": [tag]}),
        )
        .await
        .expect(201);
    }
    for sort in ["", "&sort=createdAt"] {
        // The filter keeps every contact: the filtered path is the reference.
        let reference = ids(&app
            .get(&format!("/api/v1/contacts?pageSize=100&source=walk{sort}"))
            .await
            .body);
        assert_eq!(reference.len(), 7);
        let mut by_page = Vec::new();
        for page in 1..=3 {
            let resp = app
                .get(&format!("/api/v1/contacts?pageSize=3&page={page}{sort}"))
                .await;
            assert_eq!(resp.body["meta"]["total"], 7);
            assert_eq!(resp.body["meta"]["hasNext"], page < 3);
            for c in resp.data().as_array().unwrap() {
                assert_eq!(c["company"]["name"], "Acme", "{c}");
                assert_eq!(c["tags"][0]["id"], tag.as_str(), "{c}");
            }
            by_page.extend(ids(&resp.body));
        }
        assert_eq!(by_page, reference, "by page{sort}");
        let mut by_cursor = Vec::new();
        let mut cursor = String::new();
        loop {
            let resp = app
                .get(&format!("/api/v1/contacts?pageSize=3{sort}{cursor}"))
                .await;
            by_cursor.extend(ids(&resp.body));
            match resp.body["meta"]["endCursor"].as_str() {
                Some(end) if resp.body["meta"]["hasNext"] == true => {
                    cursor = format!("&cursor={end}");
                }
                _ => break,
            }
            assert!(by_cursor.len() <= 7, "the walk ends");
        }
        assert_eq!(by_cursor, reference, "by cursor{sort}");
    }
}

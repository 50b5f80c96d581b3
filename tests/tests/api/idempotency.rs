//! `Idempotency-Key` on POST: a repeat gets the first answer again and does nothing twice.

use parley_tests::{Resp, TestApp};
use serde_json::{Value, json};

async fn post_with_key(app: &TestApp, api_key: &str, path: &str, key: &str, body: &Value) -> Resp {
    app.post_with_headers(path, api_key, body, &[("idempotency-key", key)])
        .await
}

/// Holds the organization's row: an insert of a record of it (whose foreign key's check waits
/// for the row) blocks until the transaction ends.
/// Holds a lock that every insert into `table` waits for, and nothing else: the request's
/// `Idempotency-Key` is taken, its handler blocks. On an app with a database of its own.
async fn hold_inserts(app: &TestApp, table: &str) -> sqlx::Transaction<'static, sqlx::Postgres> {
    let mut holder = app.pool.begin().await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "LOCK TABLE {table} IN SHARE MODE"
    )))
    .execute(&mut *holder)
    .await
    .unwrap();
    holder
}

async fn leads_named(app: &TestApp, name: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM leads WHERE organization_id = $1 AND name = $2")
        .bind(app.org_id)
        .bind(name)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_repeated_request_gets_the_first_answer_and_creates_nothing_more() {
    let app = TestApp::builder().start().await;
    let body = json!({"name": "Ada", "email": "ada@example.com"});
    let first = post_with_key(&app, &app.key, "/api/v1/leads", "order-1", &body).await;
    first.expect(201);
    assert!(first.headers.get("idempotent-replayed").is_none());
    let again = post_with_key(&app, &app.key, "/api/v1/leads", "order-1", &body).await;
    again.expect(201);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(again.body, first.body, "the first answer, as it was");
    assert_eq!(leads_named(&app, "Ada").await, 1);

    // Another key, or none, is another request.
    post_with_key(&app, &app.key, "/api/v1/leads", "order-2", &body)
        .await
        .expect(201);
    app.post("/api/v1/leads", body.clone()).await.expect(201);
    assert_eq!(leads_named(&app, "Ada").await, 3);
}

#[tokio::test]
async fn requests_arriving_at_once_with_one_key_create_one_record() {
    let app = TestApp::builder().start().await;
    let body = json!({"name": "Grace"});
    let answers = futures::future::join_all(
        (0..8).map(|_| post_with_key(&app, &app.key, "/api/v1/leads", "burst", &body)),
    )
    .await;
    let ids: std::collections::HashSet<String> = answers
        .iter()
        .map(|a| {
            a.expect(201);
            a.id()
        })
        .collect();
    assert_eq!(ids.len(), 1, "every answer names the one lead");
    assert_eq!(leads_named(&app, "Grace").await, 1);
    let replayed = answers
        .iter()
        .filter(|a| a.headers.contains_key("idempotent-replayed"))
        .count();
    assert_eq!(replayed, 7);
}

#[tokio::test]
async fn the_same_key_with_another_body_is_refused_and_changes_nothing() {
    let app = TestApp::builder().start().await;
    post_with_key(
        &app,
        &app.key,
        "/api/v1/leads",
        "k",
        &json!({"name": "Ada"}),
    )
    .await
    .expect(201);
    post_with_key(
        &app,
        &app.key,
        "/api/v1/leads",
        "k",
        &json!({"name": "Eve"}),
    )
    .await
    .expect_error(422, "idempotency_key_reused");
    // Another route with the same key is another request too.
    post_with_key(&app, &app.key, "/api/v1/tags", "k", &json!({"name": "vip"}))
        .await
        .expect_error(422, "idempotency_key_reused");
    assert_eq!(leads_named(&app, "Eve").await, 0);
}

#[tokio::test]
async fn keys_belong_to_their_organization() {
    let app = TestApp::builder().start().await;
    let (_, other_key) = app.new_org("Other").await;
    let body = json!({"name": "Ada"});
    let ours = post_with_key(&app, &app.key, "/api/v1/leads", "shared", &body).await;
    let theirs = post_with_key(&app, &other_key, "/api/v1/leads", "shared", &body).await;
    ours.expect(201);
    theirs.expect(201);
    assert!(theirs.headers.get("idempotent-replayed").is_none());
    assert_ne!(ours.id(), theirs.id());
}

#[tokio::test]
async fn a_refusal_is_kept_but_a_malformed_key_is_not_a_key() {
    let app = TestApp::builder().start().await;
    // A 4xx answer is the request's answer: repeated as it was.
    let refused = post_with_key(&app, &app.key, "/api/v1/leads", "bad", &json!({})).await;
    refused.expect_error(422, "validation_error");
    let again = post_with_key(&app, &app.key, "/api/v1/leads", "bad", &json!({})).await;
    again.expect_error(422, "validation_error");
    assert_eq!(again.headers["idempotent-replayed"], "true");

    for key in ["x".repeat(256), "café".to_owned(), "a b".to_owned()] {
        let r = app
            .post_with_headers(
                "/api/v1/leads",
                &app.key,
                &json!({"name": "Mallory"}),
                &[("idempotency-key", &key)],
            )
            .await;
        r.expect_error(422, "validation_error");
        assert_eq!(r.field(), "Idempotency-Key");
    }
    assert_eq!(leads_named(&app, "Mallory").await, 0);
}

#[tokio::test]
async fn a_key_older_than_a_day_is_a_new_key_and_is_swept() {
    let app = TestApp::builder().start().await;
    let body = json!({"name": "Ada"});
    post_with_key(&app, &app.key, "/api/v1/leads", "old", &body)
        .await
        .expect(201);
    let age = |hours: i32| {
        sqlx::query(
            "UPDATE idempotency_keys SET created_at = now() - make_interval(hours => $2)
             WHERE organization_id = $1",
        )
        .bind(app.org_id)
        .bind(hours)
        .execute(&app.pool)
    };
    age(25).await.unwrap();
    let again = post_with_key(&app, &app.key, "/api/v1/leads", "old", &body).await;
    again.expect(201);
    assert!(again.headers.get("idempotent-replayed").is_none());
    assert_eq!(leads_named(&app, "Ada").await, 2);

    age(25).await.unwrap();
    parley_db::idempotency::sweep(&app.pool, std::time::Duration::from_secs(24 * 3600), 1_000)
        .await
        .unwrap();
    let left: i64 =
        sqlx::query_scalar("SELECT count(*) FROM idempotency_keys WHERE organization_id = $1")
            .bind(app.org_id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(left, 0);
}

#[tokio::test]
async fn a_repeat_of_an_answer_with_a_secret_is_refused_and_names_what_was_made() {
    let app = TestApp::builder().start().await;
    let body = json!({"name": "CRM sync", "scopes": ["contacts:read"]});
    let first = post_with_key(&app, &app.key, "/api/v1/api-keys", "key-1", &body).await;
    first.expect(201);
    assert!(first.data()["key"].as_str().unwrap().starts_with("prl_"));
    // The 201 the operation documents carries the key, which is not kept: a repeat is told
    // what the first request made instead of getting a 201 without it.
    let again = post_with_key(&app, &app.key, "/api/v1/api-keys", "key-1", &body).await;
    again.expect_error(409, "idempotency_replay_secret");
    assert_eq!(again.body["error"]["details"]["id"], first.data()["id"]);
    let keys: i64 = sqlx::query_scalar("SELECT count(*) FROM api_keys WHERE organization_id = $1")
        .bind(app.org_id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(keys, 2, "the repeat made no second key");
    let stored: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM idempotency_keys WHERE organization_id = $1
           AND position(convert_to($2, 'UTF8') in body) > 0",
    )
    .bind(app.org_id)
    .bind(first.data()["key"].as_str().unwrap())
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(stored, 0, "the key is stored nowhere in plain text");
}

#[tokio::test]
async fn a_request_cut_off_in_its_handler_never_gives_its_key_to_a_second_execution() {
    // Requests time out after 1 s; a key not answered counts as unknown 2 * 1 + 5 s later.
    let app = parley_tests::TestApp::builder()
        .own_database()
        .env(&[("PARLEY_REQUEST_TIMEOUT_SECS", "1")])
        .start()
        .await;
    let body = json!({"name": "Cut off"});
    // The lead's insert waits for the lock held here (the key's own row does not): the
    // request times out inside its handler.
    let holder = hold_inserts(&app, "leads").await;
    let first = post_with_key(&app, &app.key, "/api/v1/leads", "cut-1", &body).await;
    first.expect_error(503, "service_unavailable");
    holder.commit().await.unwrap();
    // The repeat does not run it again: the first may have written (here it did, or its
    // statement was cancelled: either way at most one lead).
    // (While it could still be running a repeat waits for it, and here times out too.)
    let mut again = post_with_key(&app, &app.key, "/api/v1/leads", "cut-1", &body).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while again.status == 503 && std::time::Instant::now() < deadline {
        again = post_with_key(&app, &app.key, "/api/v1/leads", "cut-1", &body).await;
    }
    again.expect_error(409, "idempotency_outcome_unknown");
    assert!(leads_named(&app, "Cut off").await <= 1);
    // Under a new key it runs.
    post_with_key(&app, &app.key, "/api/v1/leads", "cut-2", &body)
        .await
        .expect(201);
}

#[tokio::test]
async fn a_5xx_of_the_handler_leaves_the_outcome_unknown_and_an_answer_before_it_leaves_the_key() {
    // No object storage: the presigned upload's handler answers 503 `storage_unavailable`.
    let app = TestApp::builder().start().await;
    let body = json!({"filename": "a.pdf", "contentType": "application/pdf", "fileSize": 10,
                      "fileType": "document"});
    let path = "/api/v1/files/presigned-upload";
    post_with_key(&app, &app.key, path, "five-1", &body)
        .await
        .expect_error(503, "storage_unavailable");
    // The handler ran: not replayed ("retry shortly" would loop), not run again.
    post_with_key(&app, &app.key, path, "five-1", &body)
        .await
        .expect_error(409, "idempotency_outcome_unknown");
    // A 401 comes before the key is taken: the key stays free for the request that counts.
    let lead = json!({"name": "After a 401"});
    let made_up = format!("prl_{}", "y".repeat(32));
    post_with_key(&app, &made_up, "/api/v1/leads", "five-2", &lead)
        .await
        .expect_error(401, "unauthorized");
    post_with_key(&app, &app.key, "/api/v1/leads", "five-2", &lead)
        .await
        .expect(201);
}

#[tokio::test]
async fn a_client_that_hangs_up_during_a_broadcast_and_retries_gets_one_broadcast() {
    let app = parley_tests::TestApp::builder()
        .own_database()
        .env(&[("PARLEY_REQUEST_TIMEOUT_SECS", "2")])
        .start()
        .await;
    let contacts = parley_tests::seed::contacts(&app, 2).await;
    let template = app
        .post(
            "/api/v1/templates",
            json!({"name": "T", "channel": "email", "body": "Hi"}),
        )
        .await
        .expect(201)
        .id();
    let body = json!({"broadcastName": "Hung up", "templateId": template,
                      "contactIds": contacts, "isDraft": true});
    // The broadcast's insert waits for the lock held here; the client gives up after 300 ms,
    // hanging up while the handler runs.
    let holder = hold_inserts(&app, "broadcasts").await;
    let impatient = reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(300))
        .build()
        .unwrap();
    let hung_up = impatient
        .post(format!("{}/api/v1/broadcasts", app.base))
        .bearer_auth(&app.key)
        .header("idempotency-key", "hang-1")
        .json(&body)
        .send()
        .await;
    assert!(hung_up.is_err(), "the client gave up");
    holder.commit().await.unwrap();
    // Retried until it gets an answer of its own: the first one's again, or (when the handler
    // was cut off with the connection) `idempotency_outcome_unknown`; never a second run.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let again = loop {
        let r = post_with_key(&app, &app.key, "/api/v1/broadcasts", "hang-1", &body).await;
        let waiting = r.status == 503 || (r.status == 409 && r.code() == "idempotency_key_in_use");
        if !waiting || std::time::Instant::now() > deadline {
            break r;
        }
    };
    let made: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM broadcasts WHERE organization_id = $1 AND broadcast_name = 'Hung up'",
    )
    .bind(app.org_id)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    match again.status {
        201 => {
            assert_eq!(again.headers["idempotent-replayed"], "true");
            assert_eq!(made, 1);
        }
        _ => {
            again.expect_error(409, "idempotency_outcome_unknown");
            assert!(made <= 1, "{made} broadcasts");
        }
    }
}

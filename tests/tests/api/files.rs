//! Files: presigned uploads to a real S3-compatible store (s3s-fs, which checks signatures),
//! completion, download, deletion, attachments, and the refusals.

use std::time::Duration;

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};
use aws_sdk_s3::primitives::ByteStream;
use parley_tests::{TestApp, storage_vars};
use reqwest::Method;
use serde_json::{Value, json};

const PDF: &[u8] = b"%PDF-1.7\nnot really a pdf, but bytes to carry\n%%EOF\n";

fn upload_body(size: usize) -> Value {
    json!({
        "filename": "Invoice November.pdf",
        "contentType": "application/pdf",
        "fileSize": size,
        "fileType": "document",
        "metadata": {"source": "portal"}
    })
}

/// PUTs `body` to a presigned URL as a plain HTTP client would; answers the store's status
/// and ETag.
async fn put(url: &str, content_type: &str, body: Vec<u8>) -> (u16, Option<String>) {
    let resp = reqwest::Client::new()
        .put(url)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("the store answers");
    let etag = resp
        .headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .map(|e| e.trim_matches('"').to_owned());
    (resp.status().as_u16(), etag)
}

async fn files_of(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM files WHERE organization_id = $1")
        .bind(app.org_id)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn upload_complete_download_and_delete() {
    let app = TestApp::builder().storage().start().await;
    let created = app
        .post("/api/v1/files/presigned-upload", upload_body(PDF.len()))
        .await;
    created.expect(201);
    let body = &created.body;
    assert!(
        body.get("success").is_none(),
        "the bare object, not the envelope: {body}"
    );
    let file_id = body["fileId"].as_str().unwrap().to_owned();
    let key = body["storageKey"].as_str().unwrap();
    assert_eq!(
        key,
        format!("org/{}/{file_id}/Invoice_November.pdf", app.org_id)
    );
    assert_eq!(body["expiresIn"], 900);
    assert!(body["fileUrl"].as_str().unwrap().ends_with(key));
    let upload_url = body["uploadUrl"].as_str().unwrap();
    assert!(upload_url.contains("X-Amz-Signature="), "{upload_url}");

    let pending = app.get(&format!("/api/v1/files/{file_id}")).await;
    pending.expect(200);
    assert_eq!(pending.data()["status"], "pending");
    assert_eq!(pending.data()["fileUrl"], Value::Null);
    assert_eq!(pending.data()["metadata"]["source"], "portal");

    let (status, etag) = put(upload_url, "application/pdf", PDF.to_vec()).await;
    assert_eq!(status, 200, "the store takes the signed upload");

    let done = app
        .post(&format!("/api/v1/files/{file_id}/complete"), json!({}))
        .await;
    done.expect(200);
    assert_eq!(done.data()["status"], "uploaded");
    assert_eq!(done.data()["fileSize"], PDF.len());
    assert_eq!(done.data()["fileHash"].as_str(), etag.as_deref());
    assert!(done.data()["uploadedAt"].is_string());
    // Completing again answers the same file.
    let again = app
        .post(&format!("/api/v1/files/{file_id}/complete"), json!({}))
        .await;
    again.expect(200);
    assert_eq!(again.data()["uploadedAt"], done.data()["uploadedAt"]);

    let got = app.get(&format!("/api/v1/files/{file_id}")).await;
    got.expect(200);
    let download = got.data()["fileUrl"].as_str().unwrap().to_owned();
    let bytes = reqwest::get(&download).await.unwrap();
    assert_eq!(bytes.status(), 200);
    assert_eq!(bytes.bytes().await.unwrap().as_ref(), PDF);

    // Attachments take it now.
    let ticket = app
        .post(
            "/api/v1/tickets",
            json!({"subject": "Invoice", "fileIds": [file_id]}),
        )
        .await;
    ticket.expect(201);
    assert_eq!(ticket.data()["attachments"][0]["fileId"], file_id.as_str());

    app.delete(&format!("/api/v1/files/{file_id}"))
        .await
        .expect(200);
    app.get(&format!("/api/v1/files/{file_id}"))
        .await
        .expect_error(404, "not_found");
    app.delete(&format!("/api/v1/files/{file_id}"))
        .await
        .expect_error(404, "not_found");
    assert_eq!(
        reqwest::get(&download).await.unwrap().status(),
        404,
        "the object is gone from the store"
    );
    let deleted_at: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT deleted_at FROM files WHERE id = $1::uuid")
            .bind(&file_id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert!(deleted_at.is_some(), "the record stays, marked deleted");
    let refused = app
        .post(
            "/api/v1/tickets",
            json!({"subject": "Invoice again", "fileIds": [file_id]}),
        )
        .await;
    refused.expect_error(422, "validation_error");
    assert_eq!(refused.field(), "fileIds[0]");
}

#[tokio::test]
async fn the_store_refuses_what_the_signature_does_not_cover() {
    let app = TestApp::builder().storage().start().await;
    let created = app
        .post("/api/v1/files/presigned-upload", upload_body(PDF.len()))
        .await;
    created.expect(201);
    let url = created.body["uploadUrl"].as_str().unwrap().to_owned();
    let file_id = created.body["fileId"].as_str().unwrap().to_owned();

    let (status, _) = put(&url, "text/html", PDF.to_vec()).await;
    assert_eq!(status, 403, "another content type");
    let mut longer = PDF.to_vec();
    longer.extend_from_slice(b"and a payload more");
    let (status, _) = put(&url, "application/pdf", longer).await;
    assert_eq!(status, 403, "another length");
    let (start, sig) = url.split_once("X-Amz-Signature=").unwrap();
    let flipped = if sig.starts_with('0') { "1" } else { "0" };
    let tampered = format!("{start}X-Amz-Signature={flipped}{}", &sig[1..]);
    let (status, _) = put(&tampered, "application/pdf", PDF.to_vec()).await;
    assert_eq!(status, 403, "a tampered signature");
    let other_key = url.replace(&file_id, &uuid::Uuid::now_v7().to_string());
    let (status, _) = put(&other_key, "application/pdf", PDF.to_vec()).await;
    assert_eq!(status, 403, "another key");

    app.post(&format!("/api/v1/files/{file_id}/complete"), json!({}))
        .await
        .expect_error(422, "validation_error");

    // An expired URL.
    let short = TestApp::builder()
        .storage()
        .env(&[("PARLEY_UPLOAD_URL_TTL_SECS", "1")])
        .start()
        .await;
    let created = short
        .post("/api/v1/files/presigned-upload", upload_body(PDF.len()))
        .await;
    assert_eq!(created.body["expiresIn"], 1);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let (status, _) = put(
        created.body["uploadUrl"].as_str().unwrap(),
        "application/pdf",
        PDF.to_vec(),
    )
    .await;
    assert_eq!(status, 403, "an expired URL");
}

#[tokio::test]
async fn complete_checks_the_object_and_the_caller() {
    let app = TestApp::builder().storage().start().await;
    let created = app
        .post("/api/v1/files/presigned-upload", upload_body(PDF.len()))
        .await;
    let file_id = created.body["fileId"].as_str().unwrap().to_owned();
    let key = created.body["storageKey"].as_str().unwrap().to_owned();
    let complete = format!("/api/v1/files/{file_id}/complete");

    let early = app.post(&complete, json!({})).await;
    early.expect_error(422, "validation_error");
    assert_eq!(early.body["error"]["details"][0]["code"], "not_uploaded");

    // An object of another size at the key (put with the store's own credentials).
    let vars: std::collections::HashMap<_, _> = storage_vars().into_iter().collect();
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(&vars["S3_ENDPOINT"])
            .force_path_style(true)
            .credentials_provider(Credentials::new(
                &vars["AWS_ACCESS_KEY_ID"],
                &vars["AWS_SECRET_ACCESS_KEY"],
                None,
                None,
                "test",
            ))
            .build(),
    );
    s3.put_object()
        .bucket(&vars["S3_BUCKET"])
        .key(&key)
        .body(ByteStream::from_static(b"short"))
        .send()
        .await
        .expect("put through the SDK");
    let mismatch = app.post(&complete, json!({})).await;
    mismatch.expect_error(422, "validation_error");
    assert_eq!(mismatch.field(), "fileSize");
    assert_eq!(
        app.get(&format!("/api/v1/files/{file_id}")).await.data()["status"],
        "pending"
    );

    // Another organization sees nothing; no key is 401; a read-only key cannot upload.
    let (_, other_key) = app.new_org("Other").await;
    for (method, path) in [
        (Method::GET, format!("/api/v1/files/{file_id}")),
        (Method::POST, complete.clone()),
        (Method::DELETE, format!("/api/v1/files/{file_id}")),
    ] {
        // A `GET` takes no body (413 unread).
        let body = (method != Method::GET).then(|| json!({}));
        app.send(method.clone(), &path, Some(&other_key), body.as_ref())
            .await
            .expect_error(404, "not_found");
        app.send(method, &path, None, body.as_ref())
            .await
            .expect_error(401, "unauthorized");
    }
    app.send(
        Method::POST,
        "/api/v1/files/presigned-upload",
        None,
        Some(&upload_body(3)),
    )
    .await
    .expect_error(401, "unauthorized");
    let reader = app.key_with(&["files:read"]).await;
    app.send(
        Method::POST,
        "/api/v1/files/presigned-upload",
        Some(&reader),
        Some(&upload_body(3)),
    )
    .await
    .expect_error(403, "forbidden");
    app.send(
        Method::GET,
        &format!("/api/v1/files/{file_id}"),
        Some(&reader),
        None,
    )
    .await
    .expect(200);
}

#[tokio::test]
async fn every_field_is_validated_and_nothing_is_written() {
    let app = TestApp::builder()
        .storage()
        .env(&[("PARLEY_UPLOAD_MAX_BYTES", "1000")])
        .start()
        .await;
    let cases: Vec<(&str, Value, &str)> = vec![
        ("filename", json!(null), "filename"),
        ("filename", json!("   "), "filename"),
        ("filename", json!("a\u{0007}b.pdf"), "filename"),
        ("filename", json!("a\u{0}.pdf"), "filename"),
        ("filename", json!("x".repeat(256)), "filename"),
        ("contentType", json!(null), "contentType"),
        ("contentType", json!("pdf"), "contentType"),
        (
            "contentType",
            json!("text/plain; charset=utf-8"),
            "contentType",
        ),
        ("contentType", json!("text/html"), "contentType"),
        ("contentType", json!("image/svg+xml"), "contentType"),
        ("fileSize", json!(null), "fileSize"),
        ("fileSize", json!(0), "fileSize"),
        ("fileSize", json!(-5), "fileSize"),
        ("fileSize", json!(1001), "fileSize"),
        ("fileSize", json!("12"), "fileSize"),
        ("fileSize", json!(1.5), "fileSize"),
        ("fileType", json!(null), "fileType"),
        ("fileType", json!("spreadsheet"), "fileType"),
        ("fileType", json!("image"), "fileType"),
        ("metadata", json!("notes"), "metadata"),
    ];
    for (field, value, want) in cases {
        let mut body = upload_body(100);
        if value.is_null() {
            body.as_object_mut().unwrap().remove(field);
        } else {
            body[field] = value.clone();
        }
        let resp = app.post("/api/v1/files/presigned-upload", body).await;
        resp.expect_error(422, "validation_error");
        assert_eq!(resp.field(), want, "{field} = {value}: {}", resp.body);
    }
    app.post("/api/v1/files/presigned-upload", json!([]))
        .await
        .expect_error(422, "validation_error");
    assert_eq!(files_of(&app).await, 0, "a refused request writes nothing");

    // The limit itself is accepted, and video/* covers any video.
    let mut at_limit = upload_body(1000);
    at_limit["contentType"] = json!("video/x-matroska");
    at_limit["fileType"] = json!("video");
    app.post("/api/v1/files/presigned-upload", at_limit)
        .await
        .expect(201);
}

#[tokio::test]
async fn without_storage_the_file_routes_answer_503_and_write_nothing() {
    let app = TestApp::builder().start().await;
    let resp = app
        .post("/api/v1/files/presigned-upload", upload_body(10))
        .await;
    resp.expect_error(503, "storage_unavailable");
    assert_eq!(files_of(&app).await, 0);
    // The request is checked first: a bad body is 422, an unknown file 404.
    app.post("/api/v1/files/presigned-upload", json!({"filename": "x"}))
        .await
        .expect_error(422, "validation_error");
    let unknown = uuid::Uuid::now_v7();
    app.get(&format!("/api/v1/files/{unknown}"))
        .await
        .expect_error(404, "not_found");
    let known = parley_tests::seed::file(&app, "image").await;
    for resp in [
        app.get(&format!("/api/v1/files/{known}")).await,
        app.delete(&format!("/api/v1/files/{known}")).await,
    ] {
        resp.expect_error(503, "storage_unavailable");
    }
    let deleted: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT deleted_at FROM files WHERE id = $1")
            .bind(known)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert!(deleted.is_none(), "nothing changed");
    // Everything else still works.
    app.get("/api/v1/contacts").await.expect(200);
}

#[tokio::test]
async fn attachments_take_only_uploaded_files_of_the_organization() {
    let app = TestApp::builder().storage().start().await;
    let pending = app
        .post("/api/v1/files/presigned-upload", upload_body(PDF.len()))
        .await
        .body["fileId"]
        .as_str()
        .unwrap()
        .to_owned();
    let contact = app
        .post("/api/v1/contacts", json!({"source": "test", "name": "Ada"}))
        .await
        .id();
    let conversation = app
        .post(
            "/api/v1/conversations",
            json!({"contactId": contact, "channel": "email"}),
        )
        .await
        .id();
    let other = TestApp::builder().storage().start().await;
    let foreign = parley_tests::seed::file(&other, "document").await;
    for (file, why) in [(pending, "pending"), (foreign.to_string(), "foreign")] {
        let resp = app
            .post(
                &format!("/api/v1/conversations/{conversation}/messages"),
                json!({"content": "see attached", "senderType": "contact",
                       "attachments": [{"fileId": file}]}),
            )
            .await;
        resp.expect_error(422, "validation_error");
        assert_eq!(resp.field(), "attachments[0].fileId", "{why}");
    }
}

#[tokio::test]
async fn a_store_that_does_not_answer_is_503_not_500() {
    let vars = storage_vars();
    let mut settings: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // Nothing listens on port 9 of 127.0.0.1 (discard) in the test environment.
    settings.push(("S3_ENDPOINT", "http://127.0.0.1:9"));
    let app = parley_tests::TestApp::builder()
        .env(&settings)
        .start()
        .await;
    // Signing is local: the URL is valid once the store is back.
    let created = app
        .post("/api/v1/files/presigned-upload", upload_body(10))
        .await;
    created.expect(201);
    let id = created.body["fileId"].as_str().unwrap();
    app.post(&format!("/api/v1/files/{id}/complete"), json!({}))
        .await
        .expect_error(503, "service_unavailable");
    app.delete(&format!("/api/v1/files/{id}"))
        .await
        .expect_error(503, "service_unavailable");
    assert_eq!(
        app.get(&format!("/api/v1/files/{id}")).await.data()["status"],
        "pending",
        "a failed delete changes nothing"
    );
}

#[tokio::test]
async fn abandoned_uploads_are_deleted_with_their_objects() {
    let app = TestApp::builder().own_database().storage().start().await;
    // Three uploads whose bytes reached the store: one never confirmed and old, one confirmed
    // and old, one never confirmed but recent.
    let mut files = Vec::new();
    for _ in 0..3 {
        let created = app
            .post("/api/v1/files/presigned-upload", upload_body(PDF.len()))
            .await;
        created.expect(201);
        let url = created.body["uploadUrl"].as_str().unwrap();
        assert_eq!(put(url, "application/pdf", PDF.to_vec()).await.0, 200);
        files.push((
            created.body["fileId"].as_str().unwrap().to_owned(),
            created.body["storageKey"].as_str().unwrap().to_owned(),
        ));
    }
    app.post(&format!("/api/v1/files/{}/complete", files[1].0), json!({}))
        .await
        .expect(200);
    let old: Vec<uuid::Uuid> = files[..2]
        .iter()
        .map(|(id, _)| id.parse().unwrap())
        .collect();
    sqlx::query("UPDATE files SET created_at = now() - interval '2 hours' WHERE id = ANY($1)")
        .bind(&old)
        .execute(&app.pool)
        .await
        .unwrap();
    let vars = storage_vars();
    let settings: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let config = parley_tests::test_config("unused", &settings);
    let storage = parley_storage::Storage::new(config.storage.as_ref().unwrap());
    // The upload URL lives 15 minutes; the grace is an hour: past both only the old ones.
    let older_than = Duration::from_secs(900) + parley_api::retention::GRACE;
    let services = app.services().await;
    let sweep = || parley_api::retention::sweep_uploads(&services, &storage, older_than, 100);
    assert_eq!(sweep().await.unwrap(), 1, "the abandoned upload goes");
    assert_eq!(sweep().await.unwrap(), 0);

    app.get(&format!("/api/v1/files/{}", files[0].0))
        .await
        .expect(404);
    assert_eq!(
        storage.head(&files[0].1).await.unwrap(),
        None,
        "with its object"
    );
    let kept = app.get(&format!("/api/v1/files/{}", files[1].0)).await;
    assert_eq!(kept.expect(200).data()["status"], "uploaded");
    assert!(storage.head(&files[1].1).await.unwrap().is_some());
    let recent = app.get(&format!("/api/v1/files/{}", files[2].0)).await;
    assert_eq!(recent.expect(200).data()["status"], "pending");
    assert!(storage.head(&files[2].1).await.unwrap().is_some());
}

#[tokio::test]
async fn a_repeated_presigned_upload_is_refused_and_its_url_is_stored_nowhere() {
    let app = TestApp::builder().storage().start().await;
    let body = upload_body(PDF.len());
    let send = || {
        app.post_with_headers(
            "/api/v1/files/presigned-upload",
            &app.key,
            &body,
            &[("idempotency-key", "upload-1")],
        )
    };
    let first = send().await;
    first.expect(201);
    let url = first.body["uploadUrl"].as_str().unwrap().to_owned();
    // The URL is a credential while it lives: a repeat names the file instead of showing it.
    let again = send().await;
    again.expect_error(409, "idempotency_replay_secret");
    assert_eq!(again.body["error"]["details"]["id"], first.body["fileId"]);
    assert_eq!(files_of(&app).await, 1, "the repeat made no second file");
    let stored: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM idempotency_keys WHERE organization_id = $1
           AND position(convert_to($2, 'UTF8') in body) > 0",
    )
    .bind(app.org_id)
    .bind(&url)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(stored, 0, "the upload URL is stored nowhere");
}

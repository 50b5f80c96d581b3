//! Imports in one request: the file as the body (`text/csv`, `application/x-ndjson`) or as a
//! `multipart/form-data` part, kept with the import without object storage and stored in it
//! with; the limits, and an `Idempotency-Key` on a body written to disk.

use std::fmt::Write as _;

use parley_tests::{Resp, TestApp};
use serde_json::Value;

const PATH: &str = "/api/v1/contacts/imports";

/// Sends `body` to `PATH` as `content_type`, with any extra headers.
async fn send(app: &TestApp, content_type: &str, body: Vec<u8>, headers: &[(&str, &str)]) -> Resp {
    let mut req = app
        .client
        .post(format!("{}{PATH}", app.base))
        .bearer_auth(&app.key)
        .header("content-type", content_type)
        .body(body);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    TestApp::read(req.send().await.expect("request is sent")).await
}

/// One part of a multipart body: name, file name, content type, bytes.
type Part<'a> = (&'a str, Option<&'a str>, Option<&'a str>, &'a [u8]);

/// A `multipart/form-data` body of `parts`, and its content type.
fn multipart(parts: &[Part]) -> (String, Vec<u8>) {
    let boundary = "parley-test-boundary-7d3f";
    let mut body = Vec::new();
    for (name, filename, content_type, bytes) in parts {
        let mut head = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"");
        if let Some(filename) = filename {
            write!(head, "; filename=\"{filename}\"").unwrap();
        }
        head.push_str("\r\n");
        if let Some(content_type) = content_type {
            write!(head, "Content-Type: {content_type}\r\n").unwrap();
        }
        head.push_str("\r\n");
        body.extend_from_slice(head.as_bytes());
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

async fn finished(app: &TestApp, id: &str) -> Value {
    let b = app
        .wait_for(&format!("{PATH}/{id}"), 120, |b| {
            matches!(b["data"]["status"].as_str(), Some("completed" | "failed"))
        })
        .await;
    b["data"].clone()
}

fn counts(i: &Value) -> [i64; 5] {
    ["rows", "created", "updated", "unchanged", "rejected"].map(|k| i[k].as_i64().unwrap())
}

/// A CSV of `n` contacts, `name` in each.
fn csv(n: usize, name: &str) -> Vec<u8> {
    let mut csv = String::from("email,name\n");
    for i in 0..n {
        writeln!(csv, "{name}{i}@example.com,{name} {i}").unwrap();
    }
    csv.into_bytes()
}

async fn count(app: &TestApp, table: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM {table} WHERE organization_id = $1"
    )))
    .bind(app.org_id)
    .fetch_one(&app.pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn without_object_storage_a_body_within_the_body_limit_is_kept_with_its_import() {
    let app = TestApp::builder()
        .own_database()
        .env(&[("PARLEY_MAX_BODY_BYTES", "4096")])
        .start()
        .await;
    let _worker = app.spawn_worker(&[]).await;

    let created = send(&app, "text/csv; charset=utf-8", csv(3, "ada"), &[]).await;
    created.expect(201);
    assert_eq!(created.data()["format"], "csv");
    assert_eq!(
        created.data()["fileId"],
        Value::Null,
        "kept with the import"
    );
    let done = finished(&app, &created.id()).await;
    assert_eq!(counts(&done), [3, 3, 0, 0, 0], "{done}");

    let lines = b"{\"email\":\"x@example.com\"}\n{\"email\":\"y@example.com\",\"name\":\"Y\"}\n";
    let created = send(&app, "application/x-ndjson", lines.to_vec(), &[]).await;
    created.expect(201);
    assert_eq!(created.data()["format"], "ndjson");
    let done = finished(&app, &created.id()).await;
    assert_eq!(counts(&done), [2, 2, 0, 0, 0], "{done}");

    // Refused, and nothing made: past the body limit, another type, another charset, empty.
    send(&app, "text/csv", csv(200, "long"), &[])
        .await
        .expect_error(413, "payload_too_large");
    send(&app, "text/plain", csv(1, "plain"), &[])
        .await
        .expect_error(415, "unsupported_media_type");
    send(&app, "text/csv; charset=iso-8859-1", csv(1, "latin"), &[])
        .await
        .expect_error(415, "unsupported_media_type");
    send(&app, "text/csv", Vec::new(), &[])
        .await
        .expect_error(422, "validation_error");
    assert_eq!(count(&app, "contact_imports").await, 2);
}

#[tokio::test]
async fn a_body_or_a_multipart_file_is_stored_in_object_storage_and_imported() {
    let app = TestApp::builder()
        .own_database()
        .storage()
        .env(&[
            ("PARLEY_MAX_BODY_BYTES", "4096"),
            ("PARLEY_UPLOAD_MAX_BYTES", "200000"),
        ])
        .start()
        .await;
    let _worker = app.spawn_worker(&[]).await;

    // Longer than the body limit: written to disk, then to the store.
    let body = csv(2_000, "bulk");
    let created = send(&app, "text/csv", body.clone(), &[]).await;
    created.expect(201);
    let file_id = created.data()["fileId"]
        .as_str()
        .expect("stored")
        .to_owned();
    let file = app.get(&format!("/api/v1/files/{file_id}")).await;
    file.expect(200);
    assert_eq!(file.data()["status"], "uploaded");
    assert_eq!(file.data()["contentType"], "text/csv");
    assert_eq!(file.data()["filename"], "contacts.csv");
    assert_eq!(file.data()["fileSize"], body.len());
    let stored = reqwest::get(file.data()["fileUrl"].as_str().unwrap())
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(
        stored.as_ref(),
        body.as_slice(),
        "the store holds the body as sent"
    );
    let done = finished(&app, &created.id()).await;
    assert_eq!(counts(&done), [2_000, 2_000, 0, 0, 0], "{done}");

    // A multipart file: its format from its name, then from `format` over a generic type.
    let lines = b"{\"email\":\"m1@example.com\"}\n{\"email\":\"m2@example.com\"}\n";
    let (content_type, form) = multipart(&[(
        "file",
        Some("people.jsonl"),
        Some("application/octet-stream"),
        lines,
    )]);
    let created = send(&app, &content_type, form, &[]).await;
    created.expect(201);
    assert_eq!(created.data()["format"], "ndjson");
    let file_id = created.data()["fileId"].as_str().unwrap().to_owned();
    let file = app.get(&format!("/api/v1/files/{file_id}")).await;
    assert_eq!(file.data()["filename"], "people.jsonl");
    let done = finished(&app, &created.id()).await;
    assert_eq!(counts(&done), [2, 2, 0, 0, 0], "{done}");

    let named = csv(3, "form");
    let (content_type, form) = multipart(&[
        ("file", Some("export"), None, &named),
        ("format", None, None, b"csv"),
    ]);
    let created = send(&app, &content_type, form, &[]).await;
    created.expect(201);
    let done = finished(&app, &created.id()).await;
    assert_eq!(counts(&done), [3, 3, 0, 0, 0], "{done}");

    // A part it does not know is read past, as unknown JSON fields are ignored.
    let (content_type, form) = multipart(&[
        ("note", None, None, b"from the CRM"),
        ("file", Some("a.csv"), None, b"email\na@example.com\n"),
    ]);
    send(&app, &content_type, form, &[]).await.expect(201);

    // Refused before anything is stored: no file part, no way to tell the format, a bad
    // format, two files, past the upload limit.
    let files = count(&app, "files").await;
    let refusals: [(&[Part], u16, &str); 7] = [
        (&[("format", None, None, b"csv")], 422, "file"),
        (
            &[("file", Some("export"), None, b"email\na@example.com\n")],
            422,
            "format",
        ),
        (
            &[
                ("file", Some("a.csv"), None, b"email\n"),
                ("format", None, None, b"xml"),
            ],
            422,
            "format",
        ),
        (
            &[
                ("file", Some("a.csv"), None, b"email\n"),
                ("format", None, None, &[b'x'; 200]),
            ],
            422,
            "format",
        ),
        (
            &[
                ("file", Some("a.csv"), None, b"email\n"),
                ("file", Some("b.csv"), None, b"email\n"),
            ],
            422,
            "file",
        ),
        (
            &[("file", Some("big.csv"), None, &csv(10_000, "big"))],
            413,
            "",
        ),
        // An unknown part is read past, but may not carry NUL, as an unknown JSON field.
        (
            &[
                ("file", Some("a.csv"), None, b"email\n"),
                ("note", None, None, b"a\0b"),
            ],
            422,
            "note",
        ),
    ];
    for (parts, status, field) in refusals {
        let (content_type, form) = multipart(parts);
        let refused = send(&app, &content_type, form, &[]).await;
        refused.expect(status);
        if status == 422 {
            assert_eq!(
                refused.body["error"]["details"][0]["field"], field,
                "{:?}",
                refused.body
            );
        }
    }
    send(&app, "text/csv", csv(10_000, "big"), &[])
        .await
        .expect_error(413, "payload_too_large");
    send(
        &app,
        "multipart/form-data; boundary=x",
        b"not a form".to_vec(),
        &[],
    )
    .await
    .expect(422);
    // Framing the parser would hold in memory: junk before the first boundary, a part's
    // headers that never end (each refused within its bound, keyed or not).
    let junk = vec![b'j'; 64 * 1024];
    let mut endless = b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\nX-Pad: ".to_vec();
    endless.extend(vec![b'p'; 64 * 1024]);
    let cases = [
        (junk, None, "the body does not start with its boundary"),
        (endless.clone(), None, "a part's headers are too long"),
        (endless, Some("framing-1"), "a part's headers are too long"),
    ];
    for (body, key, why) in cases {
        let headers: Vec<(&str, &str)> = key.map(|k| ("idempotency-key", k)).into_iter().collect();
        let refused = send(&app, "multipart/form-data; boundary=XyZ", body, &headers).await;
        refused.expect(422);
        assert_eq!(
            refused.body["error"]["details"][0]["code"], "invalid_multipart",
            "{:?}",
            refused.body
        );
        assert_eq!(refused.body["error"]["details"][0]["message"], why);
    }
    assert_eq!(count(&app, "files").await, files, "nothing stored");
    assert_eq!(count(&app, "contact_imports").await, 4);
}

#[tokio::test]
async fn an_upload_repeated_with_its_idempotency_key_makes_one_import() {
    let app = TestApp::builder()
        .own_database()
        .storage()
        .env(&[
            ("PARLEY_MAX_BODY_BYTES", "4096"),
            ("PARLEY_UPLOAD_MAX_BYTES", "200000"),
        ])
        .start()
        .await;
    // Longer than the body limit: the idempotency middleware hashes it on its way to disk.
    let body = csv(1_000, "keyed");
    let first = send(
        &app,
        "text/csv",
        body.clone(),
        &[("idempotency-key", "csv-1")],
    )
    .await;
    first.expect(201);
    let again = send(
        &app,
        "text/csv",
        body.clone(),
        &[("idempotency-key", "csv-1")],
    )
    .await;
    again.expect(201);
    assert_eq!(again.id(), first.id());
    assert!(again.headers.contains_key("idempotent-replayed"));
    let mut other = body.clone();
    other.extend_from_slice(b"late@example.com,Late\n");
    send(&app, "text/csv", other, &[("idempotency-key", "csv-1")])
        .await
        .expect_error(422, "idempotency_key_reused");

    // A multipart body: hashed as its file part is written to disk.
    let (content_type, form) = multipart(&[("file", Some("keyed.csv"), Some("text/csv"), &body)]);
    let first = send(
        &app,
        &content_type,
        form.clone(),
        &[("idempotency-key", "form-1")],
    )
    .await;
    first.expect(201);
    let again = send(&app, &content_type, form, &[("idempotency-key", "form-1")]).await;
    assert_eq!(again.id(), first.id());
    assert_eq!(count(&app, "contact_imports").await, 2);
    assert_eq!(count(&app, "files").await, 2);

    // A JSON body too long for JSON, keyed, is still refused as too large.
    let long = serde_json::to_vec(
        &serde_json::json!({"format": "csv", "data": String::from_utf8(body).unwrap()}),
    )
    .unwrap();
    send(
        &app,
        "application/json",
        long,
        &[("idempotency-key", "json-1")],
    )
    .await
    .expect_error(413, "payload_too_large");
}

/// A keyed multipart import writes its file to disk once (the idempotency key's hash is taken
/// on the way): the temporary disk needs its file's bytes, not twice them. Past what the disk
/// may hold for all requests, an import is 503 and leaves nothing behind.
#[tokio::test]
async fn a_keyed_multipart_import_is_written_to_disk_once() {
    let body = csv(1_000, "once");
    let room = (body.len() * 3 / 2).to_string();
    let app = TestApp::builder()
        .own_database()
        .storage()
        .env(&[
            ("PARLEY_MAX_BODY_BYTES", "4096"),
            ("PARLEY_UPLOAD_MAX_BYTES", "200000"),
            ("PARLEY_SPOOL_BYTES", &room),
        ])
        .start()
        .await;
    let (content_type, form) = multipart(&[("file", Some("once.csv"), Some("text/csv"), &body)]);
    for key in ["once-1", "once-2"] {
        send(
            &app,
            &content_type,
            form.clone(),
            &[("idempotency-key", key)],
        )
        .await
        .expect(201);
    }
    send(&app, &content_type, form.clone(), &[])
        .await
        .expect(201);
    assert_eq!(count(&app, "contact_imports").await, 3);

    let small = TestApp::builder()
        .own_database()
        .storage()
        .env(&[
            ("PARLEY_MAX_BODY_BYTES", "4096"),
            ("PARLEY_UPLOAD_MAX_BYTES", "200000"),
            ("PARLEY_SPOOL_BYTES", "10000"),
        ])
        .start()
        .await;
    send(
        &small,
        &content_type,
        form,
        &[("idempotency-key", "too-big")],
    )
    .await
    .expect_error(503, "service_unavailable");
    assert_eq!(count(&small, "contact_imports").await, 0);
    assert_eq!(count(&small, "files").await, 0);
}

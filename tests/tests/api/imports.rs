//! Contact imports: CSV and NDJSON, inline and uploaded, good rows, bad rows, repeats, a
//! second import of the same file, and a 100,000-row file.

use parley_types::ids::ImportId;
use parley_types::ids::OrgId;
use std::fmt::Write as _;
use std::time::Duration;

use parley_tests::TestApp;
use serde_json::{Value, json};

async fn finished(app: &TestApp, id: &str) -> Value {
    let b = app
        .wait_for(&format!("/api/v1/contacts/imports/{id}"), 120, |b| {
            matches!(b["data"]["status"].as_str(), Some("completed" | "failed"))
        })
        .await;
    b["data"].clone()
}

pub(crate) async fn import(app: &TestApp, body: Value) -> Value {
    let created = app.post("/api/v1/contacts/imports", body).await;
    created.expect(201);
    assert_eq!(created.data()["status"], "queued");
    finished(app, &created.id()).await
}

async fn contacts(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM contacts WHERE organization_id = $1")
        .bind(app.org_id)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

fn counts(i: &Value) -> [i64; 5] {
    ["rows", "created", "updated", "unchanged", "rejected"].map(|k| i[k].as_i64().unwrap())
}

#[tokio::test]
async fn a_csv_upserts_by_email_or_phone_rejects_bad_rows_and_changes_nothing_twice() {
    let app = TestApp::builder().own_database().start().await;
    let _worker = app.spawn_worker(&[]).await;
    let known = app
        .post(
            "/api/v1/contacts",
            json!({"source": "web", "email": "known@example.com", "name": "Old name"}),
        )
        .await
        .id();
    let by_phone = app
        .post(
            "/api/v1/contacts",
            json!({"source": "web", "phone": "+14155550100"}),
        )
        .await
        .id();
    let csv = "\
email,name,phone,country,ignored
ada@example.com,Ada,,GB,x
not-an-email,Bad,,,
,Nobody,,,
KNOWN@example.com,New name,,,
,By phone,+1 415 555 0100,US,
Ada@Example.com,Ada,,GB,
grace@example.com,\"Hopper, Grace\",,US,
";
    let first = import(&app, json!({"format": "csv", "data": csv})).await;
    assert_eq!(first["status"], "completed", "{first}");
    // Seven data rows: Ada and Grace created; the known contact and the phone's contact
    // updated; Ada's second row (her email in other case) finds her unchanged; two rejected.
    assert_eq!(counts(&first), [7, 2, 2, 1, 2], "{first}");
    let rejected: Vec<i64> = first["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["row"].as_i64().unwrap())
        .collect();
    assert_eq!(rejected, [3, 4], "rows are counted from the header, row 1");
    assert!(
        first["errors"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("email: ")
    );
    assert_eq!(contacts(&app).await, 4);
    let k = app.get(&format!("/api/v1/contacts/{known}")).await;
    assert_eq!(k.data()["name"], "New name");
    let p = app.get(&format!("/api/v1/contacts/{by_phone}")).await;
    assert_eq!(p.data()["name"], "By phone");
    assert_eq!(p.data()["country"], "US");
    let ada = app.get("/api/v1/contacts?email=ada@example.com").await;
    assert_eq!(ada.data()[0]["name"], "Ada");
    assert_eq!(
        ada.data().as_array().unwrap().len(),
        1,
        "one contact for both rows"
    );
    assert_eq!(ada.data()[0]["source"], "import");
    let grace = app.get("/api/v1/contacts?email=grace@example.com").await;
    assert_eq!(grace.data()[0]["name"], "Hopper, Grace");

    // The same file again changes nothing.
    let again = import(&app, json!({"format": "csv", "data": csv})).await;
    assert_eq!(counts(&again), [7, 0, 0, 5, 2], "{again}");
    assert_eq!(contacts(&app).await, 4);
}

#[tokio::test]
async fn ndjson_lines_are_rows_and_a_bad_line_is_only_that_row() {
    let app = TestApp::builder().own_database().start().await;
    let _worker = app.spawn_worker(&[]).await;
    let data = "{\"email\": \"a@example.com\", \"externalId\": \"crm-1\"}\n\
                {not json}\n\
                \n\
                {\"phone\": \"+4915112345678\", \"name\": \"Bea\"}\n\
                {\"email\": \"z@example.com\", \"phone\": \"+493012345678\"}\n\
                {\"phone\": \"+49 30 12345678\", \"name\": \"Zed\"}\n";
    let done = import(&app, json!({"format": "ndjson", "data": data})).await;
    // The last two rows name one new contact (by its email, then by its phone alone): one
    // contact, the second row folded into the first.
    assert_eq!(counts(&done), [5, 3, 0, 1, 1], "{done}");
    assert_eq!(done["errors"][0]["row"], 2);
    let zed = app.get("/api/v1/contacts?email=z@example.com").await;
    assert_eq!(zed.data()[0]["name"], "Zed");
    assert_eq!(zed.data().as_array().unwrap().len(), 1);
    // A time zone is a field like the others: set, and a bad one rejects only its row.
    let zones = "{\"email\": \"a@example.com\", \"timezone\": \"Asia/Tokyo\"}\n\
                 {\"email\": \"t@example.com\", \"timezone\": \"Mars/Olympus\"}\n";
    let done = import(&app, json!({"format": "ndjson", "data": zones})).await;
    assert_eq!(counts(&done), [2, 0, 1, 0, 1], "{done}");
    assert!(
        done["errors"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("timezone:"),
        "{done}"
    );
    let a = app.get("/api/v1/contacts?email=a@example.com").await;
    assert_eq!(a.data()[0]["timezone"], "Asia/Tokyo");
    assert_eq!(a.data()[0]["externalId"], "crm-1");
    // Neither a source nor a format a client can get wrong passes silently.
    app.post("/api/v1/contacts/imports", json!({"format": "csv"}))
        .await
        .expect_error(422, "validation_error");
    app.post(
        "/api/v1/contacts/imports",
        json!({"format": "xlsx", "data": "x"}),
    )
    .await
    .expect_error(422, "validation_error");
    // A CSV whose header names neither email nor phone fails as a whole, saying why.
    let failed = import(&app, json!({"format": "csv", "data": "name\nAda\n"})).await;
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["errorMessage"]
            .as_str()
            .unwrap()
            .contains("neither an email nor a phone")
    );
}

#[tokio::test]
async fn a_100000_row_upload_imports_and_imports_again_unchanged() {
    let app = TestApp::builder().own_database().storage().start().await;
    let _worker = app.spawn_worker(&[]).await;
    let mut csv = String::from("email,name,phone\n");
    for i in 0..100_000 {
        writeln!(csv, "user{i}@example.com,User {i},+1555{i:07}").unwrap();
    }
    let file = uploaded(&app, csv.into_bytes()).await;

    let first = import(&app, json!({"format": "csv", "fileId": file})).await;
    assert_eq!(first["status"], "completed", "{first}");
    assert_eq!(counts(&first), [100_000, 100_000, 0, 0, 0]);
    assert_eq!(contacts(&app).await, 100_000);
    let again = import(&app, json!({"format": "csv", "fileId": file})).await;
    assert_eq!(counts(&again), [100_000, 0, 0, 100_000, 0]);
    assert_eq!(contacts(&app).await, 100_000);
}

#[tokio::test]
async fn an_import_whose_job_died_resumes_after_its_last_batch_and_a_stale_holder_writes_nothing() {
    let app = TestApp::builder().own_database().start().await;
    let mut csv = String::from("email,name\n");
    for i in 0..10 {
        writeln!(csv, "r{i}@example.com,Row {i}").unwrap();
    }
    // An import a job took and died in: five rows done, its lease run out.
    let import = parley_db::imports::create(
        &app.pool,
        OrgId::from(app.org_id),
        parley_domain::imports::ImportFormat::Csv,
        Some(csv.as_bytes()),
        None,
        None,
    )
    .await
    .unwrap();
    let dead = parley_db::imports::begin(
        &app.pool,
        ImportId::from(import.id),
        Duration::from_secs(60),
        2,
    )
    .await
    .unwrap()
    .expect("the first job takes it");
    assert!(
        parley_db::imports::begin(
            &app.pool,
            ImportId::from(import.id),
            Duration::from_secs(60),
            2
        )
        .await
        .unwrap()
        .is_none(),
        "a held import is not taken twice"
    );
    sqlx::query(
        "UPDATE contact_imports SET rows = 5, lease_until = now() - interval '1 second'
         WHERE id = $1",
    )
    .bind(import.id)
    .execute(&app.pool)
    .await
    .unwrap();
    // A new job takes it (the ticker would enqueue it; here it is enqueued at once).
    let _worker = app.spawn_worker(&[]).await;
    let redis = app.redis().await;
    parley_jobs::Jobs::new(&redis)
        .import_contacts(import.id)
        .await
        .unwrap();
    let done = finished(&app, &import.id.to_string()).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(counts(&done), [10, 5, 0, 0, 0], "rows 6 to 10, each once");
    assert_eq!(contacts(&app).await, 5);
    // The dead job, were it still running, is fenced off.
    let late =
        parley_db::imports::finish(&app.pool, ImportId::from(import.id), dead.token, None).await;
    assert!(matches!(
        late,
        Err(parley_db::imports::ImportError::LeaseLost)
    ));
}

/// Uploads `bytes` as a completed file of the test's organization; its id.
async fn uploaded(app: &TestApp, bytes: Vec<u8>) -> String {
    let upload = app
        .post(
            "/api/v1/files/presigned-upload",
            json!({"filename": "contacts.csv", "contentType": "text/csv",
                   "fileSize": bytes.len(), "fileType": "document"}),
        )
        .await;
    upload.expect(201);
    let file = upload.body["fileId"].as_str().unwrap().to_owned();
    let put = reqwest::Client::new()
        .put(upload.body["uploadUrl"].as_str().unwrap())
        .header("content-type", "text/csv")
        .body(bytes)
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success());
    app.post(&format!("/api/v1/files/{file}/complete"), json!({}))
        .await
        .expect(200);
    file
}

#[tokio::test]
async fn a_quote_never_closed_fails_its_import_and_the_worker_imports_the_next_file() {
    let app = TestApp::builder().own_database().storage().start().await;
    let _worker = app.spawn_worker(&[]).await;
    // 3 MiB after an opening quote: one cell to a csv reader, however many lines it spans.
    let mut csv = String::from("email,name\nada@example.com,\"Ada\n");
    while csv.len() < 3 << 20 {
        csv.push_str("grace@example.com,Grace\n");
    }
    let file = uploaded(&app, csv.into_bytes()).await;
    let failed = import(&app, json!({"format": "csv", "fileId": file})).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert!(
        failed["errorMessage"]
            .as_str()
            .unwrap()
            .contains("a record is longer than 1024 KiB"),
        "{failed}"
    );
    assert_eq!(contacts(&app).await, 0);
    let next = import(
        &app,
        json!({"format": "csv", "data": "email,name\nada@example.com,Ada\n"}),
    )
    .await;
    assert_eq!(next["status"], "completed", "{next}");
    assert_eq!(counts(&next), [1, 1, 0, 0, 0]);
}

#[tokio::test]
async fn files_with_carriage_return_line_ends_import() {
    let app = TestApp::builder().own_database().storage().start().await;
    let _worker = app.spawn_worker(&[]).await;
    // Over 1 MiB of `\r` line ends: once read as one line of that length, and refused.
    let mut csv = String::from("email,name\r");
    let mut n = 0;
    while csv.len() < (1 << 20) + 4096 {
        write!(csv, "user{n}@example.com,User {n}\r").unwrap();
        n += 1;
    }
    let file = uploaded(&app, csv.into_bytes()).await;
    let done = import(&app, json!({"format": "csv", "fileId": file})).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(counts(&done), [n, n, 0, 0, 0]);
    let ndjson = "{\"email\":\"a@example.com\"}\r{\"email\":\"b@example.com\"}\r\n{\"email\":\"c@example.com\"}";
    let lines = import(&app, json!({"format": "ndjson", "data": ndjson})).await;
    assert_eq!(counts(&lines), [3, 3, 0, 0, 0], "{lines}");
}

#[tokio::test]
async fn an_organization_runs_at_most_its_share_of_imports_at_once() {
    let app = TestApp::builder().own_database().start().await;
    let _worker = app.spawn_worker(&[("PARLEY_IMPORTS_PER_ORG", "1")]).await;
    let mut ids = Vec::new();
    for file in 0..3 {
        let mut csv = String::from("email,name\n");
        for i in 0..15_000 {
            writeln!(csv, "f{file}-user{i}@example.com,User {i}").unwrap();
        }
        let created = app
            .post(
                "/api/v1/contacts/imports",
                json!({"format": "csv", "data": csv}),
            )
            .await;
        created.expect(201);
        ids.push(created.id());
    }
    // Every few milliseconds, how many of the organization's imports run.
    let most = std::sync::atomic::AtomicI64::new(0);
    let all_ended = parley_tests::wait_until(120, || async {
        let (running, ended): (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE status = 'running'),
                    count(*) FILTER (WHERE status IN ('completed', 'failed'))
             FROM contact_imports WHERE organization_id = $1",
        )
        .bind(app.org_id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
        most.fetch_max(running, std::sync::atomic::Ordering::Relaxed);
        ended == 3
    })
    .await;
    assert!(all_ended, "the imports did not all end");
    assert_eq!(
        most.into_inner(),
        1,
        "imports of one organization ran side by side"
    );
    for id in &ids {
        assert_eq!(finished(&app, id).await["status"], "completed");
    }
    assert_eq!(contacts(&app).await, 45_000);
}

#[tokio::test]
async fn a_slow_download_keeps_its_import_lease_on_a_timer() {
    // A file served slowly: its header, then a row every 200 ms for 4 s. No batch fills
    // (5,000 rows), so only the timer renews the 2 s lease, every third of it.
    let rows: i64 = 20;
    let file = axum::Router::new().route(
        "/file.csv",
        axum::routing::get(move || async move {
            let lines = futures::stream::unfold(0i64, move |i| async move {
                if i > rows {
                    return None;
                }
                let line = if i == 0 {
                    "email,name\n".to_owned()
                } else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    format!("slow{i}@example.com,Row {i}\n")
                };
                Some((Ok::<_, std::convert::Infallible>(line), i + 1))
            });
            axum::body::Body::from_stream(lines)
        }),
    );
    let (addr, _stop) = parley_tests::loopback::serve(file).await;
    let app = TestApp::builder().own_database().start().await;
    let url = format!("http://{addr}/file.csv");
    let import = parley_db::imports::create(
        &app.pool,
        OrgId::from(app.org_id),
        parley_domain::imports::ImportFormat::Csv,
        None,
        None,
        Some(&url),
    )
    .await
    .unwrap();
    let _worker = app
        .spawn_worker(&[
            ("PARLEY_IMPORT_LEASE_SECS", "2"),
            ("PARLEY_RECONCILE_AFTER_SECS", "1"),
        ])
        .await;
    let redis = app.redis().await;
    parley_jobs::Jobs::new(&redis)
        .import_contacts(import.id)
        .await
        .unwrap();
    // While it runs its lease is always ahead, and never more than the 2 s set: no second job
    // could take it, and the renewal is what keeps it.
    let samples = std::sync::atomic::AtomicUsize::new(0);
    let ended = parley_tests::wait_until(60, || async {
        let (status, held): (String, Option<bool>) = sqlx::query_as(
            "SELECT status, lease_until > clock_timestamp()
                AND lease_until <= clock_timestamp() + interval '2.5 seconds'
             FROM contact_imports WHERE id = $1",
        )
        .bind(import.id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
        if status == "running" {
            samples.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            assert_eq!(
                held,
                Some(true),
                "the running import's lease ran out or is not 2 s"
            );
        }
        status != "running" && status != "queued"
    })
    .await;
    assert!(ended, "the import did not end");
    let samples = samples.into_inner();
    assert!(samples > 10, "sampled {samples} times while it ran");
    let done = finished(&app, &import.id.to_string()).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(counts(&done), [rows, rows, 0, 0, 0], "{done}");
    let attempts: i16 = sqlx::query_scalar("SELECT attempts FROM contact_imports WHERE id = $1")
        .bind(import.id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(attempts, 1, "a second job took the import");
}

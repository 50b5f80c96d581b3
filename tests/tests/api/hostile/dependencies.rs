//! Transient is 503, never 500: Postgres refusing writes (a read-only replica), a lock that is
//! not granted in time; and Redis is not a single point of failure for the API.

use std::net::TcpListener as StdListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use parley_tests::{TestApp, metrics_text, wait_until};
use serde_json::json;

use super::{still_healthy, template};

/// Sets `setting` on the app's database, from the server's `postgres` database, and ends the
/// database's open connections so the app connects again and takes it.
async fn set_on_database(app: &parley_tests::TestApp, setting: &str) {
    let (server, name) = app.database_url.rsplit_once('/').unwrap();
    let admin = sqlx::PgPool::connect(&format!("{server}/postgres"))
        .await
        .unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ALTER DATABASE \"{name}\" SET {setting}"
    )))
    .execute(&admin)
    .await
    .unwrap();
    sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
        .bind(name)
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
}

#[tokio::test]
async fn writes_to_a_read_only_postgres_are_503_with_retry_after_and_reads_go_on() {
    let app = TestApp::builder().own_database().start().await;
    let before = app.fingerprint(app.org_id).await;
    set_on_database(&app, "default_transaction_read_only = on").await;
    // The first request may meet a connection that was just ended (503 as well); the next
    // ones meet the read-only database.
    for _ in 0..3 {
        let resp = app
            .post("/api/v1/contacts", json!({"source": "web", "name": "Ada"}))
            .await;
        resp.expect_error(503, "service_unavailable");
        assert_eq!(resp.headers["retry-after"], "1");
    }
    // Reading needs no write: the key's lookup and the list still work.
    assert!(
        wait_until(5, || async {
            app.get("/api/v1/contacts").await.status == 200
        })
        .await
    );
    set_on_database(&app, "default_transaction_read_only = off").await;
    assert_eq!(
        before,
        app.fingerprint(app.org_id).await,
        "nothing was written"
    );
    assert!(
        wait_until(5, || async {
            app.post("/api/v1/contacts", json!({"source": "web", "name": "Ada"}))
                .await
                .status
                == 201
        })
        .await,
        "writes resume"
    );
}

#[tokio::test]
async fn a_lock_not_granted_in_time_is_503() {
    let app = TestApp::builder().own_database().start().await;
    set_on_database(&app, "lock_timeout = '200ms'").await;
    let mut holder = app.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE contacts IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *holder)
        .await
        .unwrap();
    let mut resp = app.get("/api/v1/contacts").await;
    if resp.status != 503 || resp.headers.get("retry-after").is_none() {
        resp = app.get("/api/v1/contacts").await;
    }
    resp.expect_error(503, "service_unavailable");
    assert_eq!(resp.headers["retry-after"], "1");
    holder.rollback().await.unwrap();
    still_healthy(&app).await;
}

/// A Redis server of this test's own on a free port, so it can be stopped and started.
struct OwnRedis {
    port: u16,
    child: Child,
}

impl OwnRedis {
    fn start(port: u16) -> OwnRedis {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server runs (ops/test installs it)");
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        OwnRedis { port, child }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn readyz(app: &parley_tests::TestApp) -> (u16, serde_json::Value) {
    let resp = reqwest::get(format!("{}/readyz", app.base)).await.unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

#[tokio::test]
async fn the_api_starts_and_serves_without_redis() {
    // Nothing listens on this port.
    let url = format!("redis://127.0.0.1:{}", free_port());
    let app = TestApp::builder().env(&[("REDIS_URL", &url)]).start().await;
    let created = app
        .post("/api/v1/contacts", json!({"source": "web", "name": "Ada"}))
        .await;
    created.expect(201);
    assert!(
        created.body["meta"]["apiKeyUsage"].is_null(),
        "usage is not counted"
    );
    let (status, body) = readyz(&app).await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "degraded");
    assert_eq!(body["redis"], "unavailable");
    assert_eq!(body["postgres"], "ok");
}

#[tokio::test]
async fn the_api_keeps_serving_while_redis_is_away_and_counts_again_when_it_is_back() {
    let port = free_port();
    let redis = OwnRedis::start(port);
    let app = TestApp::builder()
        .env(&[("REDIS_URL", &redis.url())])
        .start()
        .await;
    let before = app.get("/api/v1/contacts").await;
    assert_eq!(before.body["meta"]["apiKeyUsage"]["used"], 1);
    drop(redis);
    // An unlimited key is counted in memory until a batch of counts cannot be written (a
    // tenth of a second later); then its requests go uncounted.
    assert!(
        wait_until(5, || async {
            app.get("/api/v1/contacts").await.body["meta"]["apiKeyUsage"].is_null()
        })
        .await,
        "counting stops"
    );

    // A broadcast sent now is accepted; its dispatch is left to the reconciler.
    let template = template(&app, "email", "Hi").await;
    let contact = app
        .post("/api/v1/contacts", json!({"source": "web", "name": "Ada"}))
        .await;
    contact.expect(201);
    assert!(contact.body["meta"]["apiKeyUsage"].is_null());
    app.post(
        "/api/v1/broadcasts",
        json!({"broadcastName": "b", "templateId": template, "contactIds": [contact.id()],
               "sendNow": true}),
    )
    .await
    .expect(201);
    let (status, body) = readyz(&app).await;
    assert_eq!((status, body["status"].as_str()), (200, Some("degraded")));
    let metrics = metrics_text(app.metrics_addr).await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("parley_usage_uncounted_total") && !l.ends_with(" 0")),
        "uncounted requests are counted in a metric"
    );

    let _redis = OwnRedis::start(port);
    assert!(
        wait_until(10, || async {
            app.get("/api/v1/contacts").await.body["meta"]["apiKeyUsage"]["used"].is_number()
        })
        .await,
        "counting resumes"
    );
    assert!(
        wait_until(5, || async { readyz(&app).await.1["status"] == "ok" }).await,
        "ready again"
    );
}

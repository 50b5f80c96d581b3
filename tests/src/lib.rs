//! Test harness: `TestApp::builder().start()` starts the real API on 127.0.0.1:0 against the real Postgres
//! and Redis, with a fresh organization and Redis prefix per test, so tests run in parallel
//! without sharing state.

pub mod email_worker;
pub mod fixture;
pub mod loopback;
pub mod openapi;
pub mod provider;
pub mod receiver;
pub mod scenario;
pub mod seed;
pub mod tcp_proxy;

use parley_types::ids::OrgId;
use std::collections::HashMap;
use std::net::SocketAddr;

use parley_config::Config;
use parley_db as db;
use parley_domain::api_keys::NewApiKey;
use parley_jobs::redis_conn::{Redis, RedisTarget};
use parley_types::time::Clock;
use reqwest::Method;
use secrecy::ExposeSecret;
use serde_json::Value;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The test database; created and migrated on first use. Its name carries a digest of the
/// embedded migrations, so a checkout with other migrations (another branch, a CI run on a
/// shared server) never meets a database it cannot migrate.
pub fn database_url() -> String {
    let base = std::env::var("PARLEY_TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres:postgres@127.0.0.1:5432/parley_test".to_owned());
    format!("{base}_{}", migrations_digest())
}

fn migrations_digest() -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for migration in db::MIGRATOR.iter() {
        hasher.update(migration.version.to_be_bytes());
        hasher.update(&*migration.checksum);
    }
    hex::encode(&hasher.finalize()[..4])
}

pub fn redis_url() -> String {
    std::env::var("PARLEY_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
}

pub fn redis_target() -> RedisTarget {
    RedisTarget::new(&redis_url(), false)
}

/// The nodes of the tests' Redis Cluster (three masters, started by `ops/test`), as
/// `REDIS_URL` takes them: `PARLEY_TEST_REDIS_CLUSTER_URL`, else ports 6481-6483.
pub fn redis_cluster_url() -> String {
    std::env::var("PARLEY_TEST_REDIS_CLUSTER_URL").unwrap_or_else(|_| {
        "redis://127.0.0.1:6481,redis://127.0.0.1:6482,redis://127.0.0.1:6483".to_owned()
    })
}

static MIGRATED: OnceCell<()> = OnceCell::const_new();

fn server_and_name(url: &str) -> (&str, &str) {
    url.rsplit_once('/').expect("database URL has a name")
}

async fn admin() -> PgPool {
    let url = database_url();
    let (server, _) = server_and_name(&url);
    sqlx::PgPool::connect(&format!("{server}/postgres"))
        .await
        .expect("Postgres answers (start it with ops/test)")
}

/// The shared test database, and a template that tests needing a database of their own
/// (because a worker reconciles every broadcast it can see) are cloned from.
fn template_url() -> String {
    format!("{}_template", database_url())
}

async fn create_and_migrate(admin: &PgPool, url: &str) {
    let (_, name) = server_and_name(url);
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(name)
            .fetch_one(admin)
            .await
            .expect("query pg_database");
    if !exists {
        // Another test process may win the race; that is fine.
        let _ = sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(admin)
            .await;
    }
    let pool = db::pool(url, 2).expect("pool");
    db::migrate(&pool).await.expect("migrations apply");
    pool.close().await;
}

/// Creates and migrates the test databases once per process.
pub async fn prepare_database() {
    MIGRATED
        .get_or_init(|| async {
            let admin = admin().await;
            create_and_migrate(&admin, &database_url()).await;
            create_and_migrate(&admin, &template_url()).await;
            admin.close().await;
        })
        .await;
}

/// A fresh database cloned from the migrated template; dropped with its [`TestApp`].
async fn isolated_database() -> String {
    prepare_database().await;
    let name = format!(
        "{}_{}",
        server_and_name(&template_url()).1,
        Uuid::now_v7().simple()
    );
    let admin = admin().await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE DATABASE \"{name}\" TEMPLATE \"{}\"",
        server_and_name(&template_url()).1
    )))
    .execute(&admin)
    .await
    .expect("clone the template database");
    admin.close().await;
    format!("{}/{name}", server_and_name(&database_url()).0)
}

/// Sets the statement timeout of the database at `url` for every new session.
pub async fn set_statement_timeout(url: &str, timeout: &str) {
    let (_, name) = server_and_name(url);
    let admin = admin().await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ALTER DATABASE \"{name}\" SET statement_timeout = '{timeout}'"
    )))
    .execute(&admin)
    .await
    .expect("set the database's statement timeout");
    admin.close().await;
}

/// A database of its own cloned from the migrated template, dropped when this is.
pub struct ScratchDatabase {
    pub url: String,
}

impl ScratchDatabase {
    pub async fn new() -> Self {
        ScratchDatabase {
            url: isolated_database().await,
        }
    }
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        drop_database(self.url.clone());
    }
}

fn drop_database(url: String) {
    // Drop cannot await; a short-lived runtime on its own thread does the work.
    let done = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let admin = admin().await;
            let name = server_and_name(&url).1.to_owned();
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
            )))
            .execute(&admin)
            .await;
            admin.close().await;
        });
    });
    let _ = done.join();
}

/// Settings of an app or worker under test: the test database, a fresh Redis prefix, and
/// short timers so that waiting on the worker takes seconds, not minutes.
/// Polls `check` every 50 ms until it holds (true) or `secs` pass (false).
/// Posts a provider's receipts (`body`, a JSON array) to the channel's receipt endpoint of the
/// API at `base`, under `signature` (the `X-Parley-Signature` header).
pub async fn post_receipts(
    client: &reqwest::Client,
    base: &str,
    channel: &str,
    body: String,
    signature: String,
) -> reqwest::Response {
    client
        .post(format!("{base}/api/v1/channels/{channel}/receipts"))
        .header("content-type", "application/json")
        .header("x-parley-signature", signature)
        .body(body)
        .send()
        .await
        .expect("the receipts are posted")
}

pub async fn wait_until<F, Fut>(secs: u64, check: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if check().await {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// With `TEST_LOG` set, the API's and the workers' log lines are printed, through the test
/// harness (so `cargo test` shows those of a failing test): `TEST_LOG=1` at `info`, or a
/// filter such as `TEST_LOG=parley_worker=debug,info`.
pub fn init_test_log() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Ok(filter) = std::env::var("TEST_LOG") else {
            return;
        };
        let filter = match filter.as_str() {
            "" | "0" => return,
            "1" | "true" => "info,sqlx=warn".to_owned(),
            other => other.to_owned(),
        };
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    });
}

/// A port on 127.0.0.1 that nothing listens on (bound, then closed): a service that is down.
pub fn closed_port() -> u16 {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    closed.local_addr().expect("its address").port()
}

pub fn test_config(redis_prefix: &str, extra: &[(&str, &str)]) -> Config {
    init_test_log();
    let mut vars: HashMap<String, String> = HashMap::from([
        ("DATABASE_URL".to_owned(), database_url()),
        ("REDIS_URL".to_owned(), redis_url()),
        ("PARLEY_REDIS_PREFIX".to_owned(), redis_prefix.to_owned()),
        ("PARLEY_AUTO_MIGRATE".to_owned(), "false".to_owned()),
        ("PARLEY_DB_MAX_CONNECTIONS".to_owned(), "4".to_owned()),
        ("PARLEY_TICK_MS".to_owned(), "100".to_owned()),
        ("PARLEY_RECONCILE_AFTER_SECS".to_owned(), "2".to_owned()),
        ("PARLEY_CLAIM_LEASE_SECS".to_owned(), "3".to_owned()),
        ("PARLEY_PROVIDER_RETRY_BASE_MS".to_owned(), "50".to_owned()),
        ("PARLEY_WORKER_DRAIN_SECS".to_owned(), "5".to_owned()),
        (
            "PARLEY_API_METRICS_ADDR".to_owned(),
            "127.0.0.1:0".to_owned(),
        ),
    ]);
    for (k, v) in extra {
        vars.insert((*k).to_owned(), (*v).to_owned());
    }
    Config::from_lookup(|k| vars.get(k).cloned()).expect("test config is valid")
}

pub struct TestApp {
    pub addr: SocketAddr,
    /// Where the API serves `/metrics` (`PARLEY_API_METRICS_ADDR`).
    pub metrics_addr: SocketAddr,
    /// Where the operator API is served when `PARLEY_ADMIN_ADDR` is set.
    pub admin_addr: Option<SocketAddr>,
    pub database_url: String,
    own_database: bool,
    pub base: String,
    pub client: reqwest::Client,
    pub pool: PgPool,
    pub org_id: Uuid,
    /// A key with scope `*` in `org_id`.
    pub key: String,
    pub redis_prefix: String,
    /// The app's `REDIS_URL`: one server, or a cluster's nodes.
    pub redis_url: String,
    /// The clock this app's API and workers read for SLA deadlines: `clock.advance(d)` makes
    /// time pass for them without waiting.
    pub clock: Clock,
    shutdown: CancellationToken,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if self.own_database {
            drop_database(self.database_url.clone());
        }
    }
}

/// `url` through the tests' PgBouncer (transaction pooling, started by `ops/test` in front of
/// the tests' Postgres): the same server and database, on `PARLEY_TEST_PGBOUNCER_PORT` (6442).
pub fn through_pgbouncer(url: &str) -> String {
    let port = std::env::var("PARLEY_TEST_PGBOUNCER_PORT").unwrap_or_else(|_| "6442".to_owned());
    let (server, name) = server_and_name(url);
    let (host, _) = server.rsplit_once(':').expect("database URL has a port");
    format!("{host}:{port}/{name}")
}

/// The Prometheus text a process serves at `http://<addr>/metrics`.
pub async fn metrics_text(addr: SocketAddr) -> String {
    reqwest::get(format!("http://{addr}/metrics"))
        .await
        .expect("metrics answer")
        .text()
        .await
        .expect("metrics text")
}

/// Sends SIGTERM to a child process, as a deploy does.
pub fn terminate(child: &std::process::Child) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -TERM {}", child.id());
}

/// The S3-compatible store of the tests (s3s-fs, started by `ops/test`), as configuration.
pub fn storage_vars() -> Vec<(&'static str, String)> {
    let endpoint = std::env::var("PARLEY_TEST_S3_ENDPOINT")
        .unwrap_or_else(|_| "http://127.0.0.1:9000".to_owned());
    vec![
        ("S3_ENDPOINT", endpoint),
        ("S3_BUCKET", "parley-test".to_owned()),
        ("S3_REGION", "us-east-1".to_owned()),
        ("S3_FORCE_PATH_STYLE", "true".to_owned()),
        ("AWS_ACCESS_KEY_ID", "parley-dev".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "parley-dev-secret".to_owned()),
    ]
}

/// How a test's API runs, chosen with [`TestApp::builder`]: by default on the tests' shared
/// database, without object storage, straight to Postgres and to one Redis.
#[derive(Default)]
pub struct AppBuilder {
    own_database: bool,
    storage: bool,
    pgbouncer: bool,
    redis_cluster: bool,
    env: Vec<(String, String)>,
}

impl TestApp {
    pub fn builder() -> AppBuilder {
        AppBuilder::default()
    }
}

impl AppBuilder {
    /// On a database of its own, dropped with the app: for tests that run a worker, whose
    /// ticker reconciles every broadcast in its database.
    pub fn own_database(mut self) -> Self {
        self.own_database = true;
        self
    }

    /// With object storage: the tests' S3-compatible store ([`storage_vars`]), the bucket
    /// made on first use.
    pub fn storage(mut self) -> Self {
        self.storage = true;
        self
    }

    /// Reaching its own database through PgBouncer in transaction pooling
    /// ([`through_pgbouncer`]); migrations take the direct session URL. Workers join with
    /// [`TestApp::pooled_settings`].
    pub fn pgbouncer(mut self) -> Self {
        self.pgbouncer = true;
        self.own_database = true;
        self
    }

    /// On the tests' Redis Cluster ([`redis_cluster_url`]), with a database of its own;
    /// workers spawned by the app join it.
    pub fn redis_cluster(mut self) -> Self {
        self.redis_cluster = true;
        self.own_database = true;
        self
    }

    /// Settings of the API (and of the workers it spawns), over the tests' defaults.
    pub fn env(mut self, vars: &[(&str, &str)]) -> Self {
        self.env
            .extend(vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        self
    }

    pub async fn start(self) -> TestApp {
        let url = if self.own_database {
            isolated_database().await
        } else {
            prepare_database().await;
            database_url()
        };
        let mut settings: Vec<(String, String)> = Vec::new();
        if self.storage {
            settings.extend(storage_vars().into_iter().map(|(k, v)| (k.to_owned(), v)));
        }
        if self.pgbouncer {
            // PgBouncer drops the startup options that carry the API's statement timeout; the
            // API refuses connections without one, so the database carries it, as a
            // deployment's role would (docs/operations.md, PgBouncer).
            set_statement_timeout(&url, "30s").await;
            settings.push(("DATABASE_URL".into(), through_pgbouncer(&url)));
            settings.push(("PARLEY_DATABASE_SESSION_URL".into(), url.clone()));
            settings.push(("PARLEY_AUTO_MIGRATE".into(), "true".into()));
        }
        if self.redis_cluster {
            settings.push(("REDIS_URL".into(), redis_cluster_url()));
        }
        settings.extend(self.env);
        let settings: Vec<(&str, &str)> = settings
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        if self.storage {
            ensure_bucket(&settings).await;
        }
        start(url, self.own_database, &settings).await
    }
}

static BUCKET: OnceCell<()> = OnceCell::const_new();

async fn ensure_bucket(settings: &[(&str, &str)]) {
    let config = test_config("unused", settings);
    BUCKET
        .get_or_init(|| async {
            parley_storage::Storage::new(config.storage.as_ref().expect("storage set"))
                .ensure_bucket()
                .await
                .expect("the S3-compatible store answers (start it with ops/test)");
        })
        .await;
}

async fn start(database_url: String, own_database: bool, extra: &[(&str, &str)]) -> TestApp {
    let redis_prefix = format!("parley-test-{}", Uuid::now_v7().simple());
    let mut settings: Vec<(&str, &str)> = vec![("DATABASE_URL", &database_url)];
    settings.extend_from_slice(extra);
    let config = test_config(&redis_prefix, &settings);
    let redis_url = config.redis_url.expose_secret().to_owned();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let clock = Clock::system();
    let app = parley_api::Application::build_with_clock(config, Some(listener), clock.clone())
        .await
        .expect("the app builds");
    let addr = app.local_addr().expect("addr");
    let metrics_addr = app.metrics_addr().expect("metrics addr");
    let admin_addr = app.admin_addr().map(|a| a.expect("admin addr"));
    let shutdown = CancellationToken::new();
    tokio::spawn(app.run_until(shutdown.clone()));
    let pool = db::pool(&database_url, 2).expect("pool");
    let mut test = TestApp {
        addr,
        metrics_addr,
        admin_addr,
        database_url,
        own_database,
        base: format!("http://{addr}"),
        client: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            // The API closes a kept-alive connection idle for PARLEY_HEADER_READ_TIMEOUT_SECS
            // (10 s): a pooled one older than that may be closed as a request goes out on it
            // (hyper's `IncompleteMessage`).
            .pool_idle_timeout(std::time::Duration::from_secs(5))
            .build()
            .expect("client"),
        pool,
        org_id: Uuid::nil(),
        key: String::new(),
        redis_prefix,
        redis_url,
        clock,
        shutdown,
    };
    let (org, key) = test.new_org("Test organization").await;
    test.org_id = org;
    test.key = key;
    test
}

/// A response, with the body parsed as JSON (`Value::Null` when it is not JSON).
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Resp {
    pub fn data(&self) -> &Value {
        &self.body["data"]
    }

    pub fn id(&self) -> String {
        self.body["data"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no data.id in {}", self.body))
            .to_owned()
    }

    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    /// The `field` of the first validation detail.
    pub fn field(&self) -> &str {
        self.body["error"]["details"][0]["field"]
            .as_str()
            .unwrap_or("")
    }

    #[track_caller]
    pub fn expect(&self, status: u16) -> &Self {
        assert_eq!(
            self.status, status,
            "unexpected status; body: {}",
            self.body
        );
        self
    }

    #[track_caller]
    pub fn expect_error(&self, status: u16, code: &str) -> &Self {
        self.expect(status);
        assert_eq!(self.code(), code, "body: {}", self.body);
        assert_eq!(self.body["success"], false);
        self
    }
}

/// A worker running in this test's process, against the test's Redis prefix.
pub struct TestWorker {
    pub metrics_addr: SocketAddr,
    stop: CancellationToken,
    done: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl TestWorker {
    /// Stops the worker and waits for it to drain.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(done) = self.done.take() {
            done.await.expect("worker task").expect("worker drained");
        }
    }
}

impl Drop for TestWorker {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl TestApp {
    /// What the use cases reach, as this app's API and workers have it: its database, its
    /// queues and its clock (`services().ctx()` to call one).
    pub async fn services(&self) -> parley_usecases::Services {
        parley_usecases::Services {
            pool: self.pool.clone(),
            jobs: parley_jobs::Jobs::new(&self.redis().await),
            clock: self.clock.clone(),
        }
    }

    /// A connection to this app's Redis (one server or the cluster), under its prefix.
    pub async fn redis(&self) -> Redis {
        Redis::connect(
            &RedisTarget::new(&self.redis_url, false),
            &self.redis_prefix,
        )
        .await
        .expect("redis")
    }

    /// How many recipients of `broadcast` a worker holds a claim on in Redis. None held is a
    /// fact to wait for: nothing of the broadcast is being sent, and a send needs a claim.
    pub async fn claims_held(&self, broadcast: &str) -> usize {
        let ids: Vec<Uuid> =
            sqlx::query_scalar("SELECT id FROM broadcast_recipients WHERE broadcast_id = $1::uuid")
                .bind(broadcast)
                .fetch_all(&self.pool)
                .await
                .expect("recipients");
        parley_worker::claims::Claims::new(self.redis().await)
            .held(&ids)
            .await
            .expect("claims read")
            .len()
    }

    /// Deletes everything this test has in Redis (queues, in-flight sets, claims, worker
    /// registrations), as a lost Redis would; returns how many keys went. Keys are
    /// `<prefix>:...` or, grouped under a hash tag, `{<prefix>:...}...`.
    pub async fn flush_redis(&self) -> usize {
        let redis = self.redis().await;
        let mut conn = redis.conn.clone();
        let mut keys: Vec<String> = Vec::new();
        for pattern in [
            format!("{}:*", self.redis_prefix),
            format!("{{{}:*", self.redis_prefix),
        ] {
            // On a cluster, KEYS asks every master and joins their answers.
            let found: Vec<String> = redis::cmd("KEYS")
                .arg(pattern)
                .query_async(&mut conn)
                .await
                .expect("KEYS");
            keys.extend(found);
        }
        for key in &keys {
            // One key a command: on a cluster, keys of several slots cannot go in one DEL.
            let _: () = redis::cmd("DEL")
                .arg(key)
                .query_async(&mut conn)
                .await
                .expect("DEL");
        }
        keys.len()
    }

    /// The database settings of a process reaching this app's database through PgBouncer.
    pub fn pooled_settings(&self) -> [(&'static str, String); 2] {
        [
            ("DATABASE_URL", through_pgbouncer(&self.database_url)),
            ("PARLEY_DATABASE_SESSION_URL", self.database_url.clone()),
        ]
    }

    pub async fn spawn_worker(&self, extra: &[(&str, &str)]) -> TestWorker {
        let mut settings: Vec<(&str, &str)> = vec![
            ("DATABASE_URL", &self.database_url),
            ("REDIS_URL", &self.redis_url),
        ];
        settings.extend_from_slice(extra);
        let config = test_config(&self.redis_prefix, &settings);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let worker =
            parley_worker::Worker::build_with_clock(config, Some(listener), self.clock.clone())
                .await
                .expect("the worker builds");
        let metrics_addr = worker.metrics_addr().expect("addr");
        let stop = CancellationToken::new();
        let done = tokio::spawn(worker.run_until(stop.clone()));
        TestWorker {
            metrics_addr,
            stop,
            done: Some(done),
        }
    }

    /// Lets the running workers work until nothing of this app's organization is left to do,
    /// for at most `secs` seconds: every queue of its Redis prefix is empty (ready, parked,
    /// scheduled, and none running), and Postgres holds none of its work due (broadcasts
    /// queued or sending, recipients pending, events not relayed, deliveries due, imports
    /// unfinished). Idle is seen twice in a row, a tick apart, so work between Redis and
    /// Postgres is not missed. Work that waits on a time to come (held recipients, a
    /// delivery's next attempt, a scheduled broadcast) does not count: it is not due.
    pub async fn run_until_idle(&self, secs: u64) {
        let jobs = parley_jobs::Jobs::new(&self.redis().await);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        let mut idle_before = false;
        loop {
            let busy = self.busy(&jobs).await;
            if busy.is_empty() && idle_before {
                return;
            }
            idle_before = busy.is_empty();
            assert!(
                std::time::Instant::now() < deadline,
                "not idle after {secs}s: {}",
                busy.join(", ")
            );
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    }

    /// The broadcast `id` once the workers are idle ([`TestApp::run_until_idle`]): it must have
    /// ended (`completed` or `failed`).
    pub async fn ended_broadcast(&self, id: &str, secs: u64) -> Value {
        self.run_until_idle(secs).await;
        let b = self
            .send(
                Method::GET,
                &format!("/api/v1/broadcasts/{id}"),
                Some(&self.key),
                None,
            )
            .await
            .body;
        assert!(
            matches!(b["data"]["status"].as_str(), Some("completed" | "failed")),
            "idle, and the broadcast has not ended: {b}"
        );
        b
    }

    /// What keeps this app from idle ([`TestApp::run_until_idle`]).
    async fn busy(&self, jobs: &parley_jobs::Jobs) -> Vec<String> {
        let mut busy = Vec::new();
        for queue in parley_jobs::QueueName::ALL {
            let depth = jobs.depth(*queue).await.expect("queue depth");
            let running = jobs
                .activity(*queue)
                .await
                .expect("queue activity")
                .in_flight;
            let waiting = depth.ready + depth.parked + depth.scheduled + running;
            if waiting > 0 {
                busy.push(format!("{} jobs of {}", waiting, queue.as_str()));
            }
        }
        let (broadcasts, recipients, events, deliveries, imports): (i64, i64, i64, i64, i64) =
            sqlx::query_as(
                "SELECT
                    (SELECT count(*) FROM broadcasts
                     WHERE organization_id = $1 AND status IN ('queued', 'sending')),
                    (SELECT count(*) FROM broadcast_recipients
                     WHERE organization_id = $1 AND status = 'pending'),
                    (SELECT count(*) FROM webhook_events
                     WHERE organization_id = $1 AND relayed_at IS NULL),
                    (SELECT count(*) FROM webhook_deliveries
                     WHERE organization_id = $1 AND status = 'pending'
                       AND next_attempt_at <= now()),
                    (SELECT count(*) FROM contact_imports
                     WHERE organization_id = $1 AND status IN ('queued', 'running'))",
            )
            .bind(self.org_id)
            .fetch_one(&self.pool)
            .await
            .expect("due work");
        for (n, what) in [
            (broadcasts, "broadcasts queued or sending"),
            (recipients, "recipients pending"),
            (events, "events not relayed"),
            (deliveries, "deliveries due"),
            (imports, "imports unfinished"),
        ] {
            if n > 0 {
                busy.push(format!("{n} {what}"));
            }
        }
        busy
    }

    /// Polls `GET path` until `until` holds for its body, for at most `secs` seconds.
    pub async fn wait_for(&self, path: &str, secs: u64, until: impl Fn(&Value) -> bool) -> Value {
        self.wait_for_with(path, Some(&self.key), secs, until).await
    }

    /// [`TestApp::wait_for`] with another bearer token (or none).
    pub async fn wait_for_with(
        &self,
        path: &str,
        token: Option<&str>,
        secs: u64,
        until: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let resp = self.send(Method::GET, path, token, None).await;
            if until(&resp.body) {
                return resp.body;
            }
            if std::time::Instant::now() > deadline {
                panic!(
                    "timed out after {secs}s waiting on {path}; last body: {}",
                    resp.body
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// Another API process on this test's settings but `extra` (a service that is down, say:
    /// its URL on [`closed_port`]); it connects lazily, and stops when the token is cancelled.
    pub async fn sibling_api(&self, extra: &[(&str, &str)]) -> (SocketAddr, CancellationToken) {
        let config = test_config(&self.redis_prefix, extra);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let api = parley_api::Application::build(config, Some(listener))
            .await
            .expect("the API builds");
        let addr = api.local_addr().expect("its address");
        let stop = CancellationToken::new();
        tokio::spawn(api.run_until(stop.clone()));
        (addr, stop)
    }

    /// A new organization (through the same code as `parley-api org create`) and its `*` key.
    pub async fn new_org(&self, name: &str) -> (Uuid, String) {
        let mut conn = self.pool.acquire().await.expect("connection");
        let org = db::orgs::create(&mut conn, name).await.expect("org");
        let key = self.key_for(org.id, &["*"], None).await;
        (org.id, key)
    }

    pub async fn key_for(&self, org: Uuid, scopes: &[&str], limit: Option<i64>) -> String {
        let new = NewApiKey::parse(
            "test".into(),
            scopes.iter().map(|s| (*s).to_owned()).collect(),
            limit,
        )
        .expect("valid scopes");
        db::api_keys::create(&self.pool, OrgId::from(org), new)
            .await
            .expect("key")
            .expect("fewer than the most active keys")
            .key
    }

    /// A key of this test's organization with exactly `scopes`.
    pub async fn key_with(&self, scopes: &[&str]) -> String {
        self.key_for(self.org_id, scopes, None).await
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<&Value>,
    ) -> Resp {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(key) = key {
            req = req.bearer_auth(key);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        Self::read(req.send().await.expect("request is sent")).await
    }

    pub async fn send_raw(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: impl Into<reqwest::Body>,
    ) -> Resp {
        let req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .header("content-type", content_type)
            .body(body);
        Self::read(req.send().await.expect("request is sent")).await
    }

    /// A response read whole, its body parsed as JSON (`null` when it is not).
    pub async fn read(resp: reqwest::Response) -> Resp {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let bytes = resp.bytes().await.expect("body");
        Resp {
            status,
            headers,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(Method::GET, path, Some(&self.key), None).await
    }

    /// A `POST` of JSON `body` with `api_key` on a connection of its own, of which only the
    /// first `sent` bytes of the body go now: its body does not end until the caller writes
    /// the rest (`body[sent..]`) to the stream returned.
    pub async fn post_held(
        &self,
        path: &str,
        api_key: &str,
        body: &[u8],
        sent: usize,
    ) -> tokio::net::TcpStream {
        use tokio::io::AsyncWriteExt;
        let mut held = tokio::net::TcpStream::connect(self.addr)
            .await
            .expect("connect");
        let head = format!(
            "POST {path} HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {api_key}\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n",
            self.addr,
            body.len()
        );
        held.write_all(head.as_bytes()).await.expect("head sent");
        held.write_all(&body[..sent]).await.expect("body sent");
        held
    }

    /// A `POST` with `api_key` and extra headers.
    pub async fn post_with_headers(
        &self,
        path: &str,
        api_key: &str,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> Resp {
        let mut req = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(api_key)
            .json(body);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        Self::read(req.send().await.expect("request is sent")).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Resp {
        self.send(Method::POST, path, Some(&self.key), Some(&body))
            .await
    }

    pub async fn patch(&self, path: &str, body: Value) -> Resp {
        self.send(Method::PATCH, path, Some(&self.key), Some(&body))
            .await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.send(Method::DELETE, path, Some(&self.key), None).await
    }

    /// The organization's webhook events in the order they were written: (name, data).
    pub async fn events(&self) -> Vec<(String, Value)> {
        sqlx::query_as::<_, (String, sqlx::types::Json<Value>)>(
            "SELECT event, data FROM webhook_events WHERE organization_id = $1 ORDER BY id",
        )
        .bind(self.org_id)
        .fetch_all(&self.pool)
        .await
        .expect("events")
        .into_iter()
        .map(|(e, d)| (e, d.0))
        .collect()
    }

    /// How many events named `name` the organization has.
    pub async fn count_events(&self, name: &str) -> usize {
        self.events()
            .await
            .iter()
            .filter(|(e, _)| e == name)
            .count()
    }

    /// Everything an organization has: rows and the latest change of each tenant table.
    /// Equal fingerprints before and after a request mean the request wrote nothing.
    pub async fn fingerprint(&self, org: Uuid) -> Vec<(String, i64, Option<String>)> {
        let tables: Vec<(String, bool)> = sqlx::query_as(
            "SELECT c.table_name::text, EXISTS (
                    SELECT 1 FROM information_schema.columns u
                    WHERE u.table_schema = 'public' AND u.table_name = c.table_name
                      AND u.column_name = 'updated_at')
             FROM information_schema.columns c
             WHERE c.table_schema = 'public' AND c.column_name = 'organization_id'
             ORDER BY 1",
        )
        .fetch_all(&self.pool)
        .await
        .expect("tables");
        let mut out = Vec::new();
        for (t, has_updated_at) in tables {
            // Without `updated_at`, a digest of the rows themselves.
            let latest = if has_updated_at {
                "max(updated_at)::text"
            } else {
                "md5(string_agg(x::text, ',' ORDER BY x::text))"
            };
            let (count, latest): (i64, Option<String>) = sqlx::query_as(sqlx::AssertSqlSafe(
                format!("SELECT count(*), {latest} FROM {t} x WHERE organization_id = $1"),
            ))
            .bind(org)
            .fetch_one(&self.pool)
            .await
            .expect("fingerprint");
            out.push((t, count, latest));
        }
        out
    }
}

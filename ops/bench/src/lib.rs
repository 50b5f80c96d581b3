//! What the benchmarks share: a fresh database with an organization and a key, the API and a
//! worker as release processes, and their memory.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use uuid::Uuid;

pub const API_ADDR: &str = "127.0.0.1:18480";

/// A child process, killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn env(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_owned())
}

/// A fresh database, migrated, with one organization and a `*` key.
pub struct Bench {
    pub name: String,
    pub url: String,
    pub pool: sqlx::PgPool,
    pub org: Uuid,
    pub key: String,
    pub prefix: String,
    admin: sqlx::PgPool,
}

impl Bench {
    pub async fn new(name: &str) -> anyhow::Result<Bench> {
        let admin_url = env(
            "PARLEY_BENCH_ADMIN_URL",
            "postgres://postgres:postgres@127.0.0.1:5432/postgres",
        );
        let admin = sqlx::PgPool::connect(&admin_url).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
        )))
        .execute(&admin)
        .await?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&admin)
            .await?;
        let server = admin_url
            .rsplit_once('/')
            .map(|(s, _)| s)
            .unwrap_or(&admin_url);
        let url = format!("{server}/{name}");
        let pool = parley_db::pool(&url, 8)?;
        parley_db::migrate(&pool).await?;
        let org = parley_db::orgs::create(&mut *pool.acquire().await?, "Bench").await?;
        let new = parley_domain::api_keys::NewApiKey::parse("bench".into(), vec!["*".into()], None)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let key = parley_db::api_keys::create(&pool, org.id, new).await?.key;
        Ok(Bench {
            name: name.to_owned(),
            url,
            pool,
            org: org.id,
            key,
            prefix: format!("parley-bench-{}", Uuid::now_v7().simple()),
            admin,
        })
    }

    /// Starts a release binary (`parley-api`, `parley-worker`) on this database.
    pub fn spawn(&self, bin: &str, extra: &[(&str, &str)]) -> anyhow::Result<Proc> {
        let path = std::env::current_exe()?.with_file_name(bin);
        let mut command = Command::new(&path);
        command
            .env("DATABASE_URL", &self.url)
            .env("REDIS_URL", env("REDIS_URL", "redis://127.0.0.1:6379"))
            .env("PARLEY_REDIS_PREFIX", &self.prefix)
            .env("PARLEY_API_ADDR", API_ADDR)
            .env("PARLEY_WORKER_METRICS_ADDR", "127.0.0.1:0")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null());
        for (k, v) in extra {
            command.env(k, v);
        }
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", path.display()))?;
        Ok(Proc(child))
    }

    /// Waits for the API to answer.
    pub async fn api_ready(&self) -> anyhow::Result<reqwest::Client> {
        let client = reqwest::Client::new();
        for _ in 0..100 {
            if client
                .get(format!("http://{API_ADDR}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return Ok(client);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!("the API did not become ready")
    }

    /// Drops the database, unless `PARLEY_BENCH_KEEP` is set.
    pub async fn finish(self) -> anyhow::Result<()> {
        self.pool.close().await;
        if std::env::var("PARLEY_BENCH_KEEP").is_err() {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            )))
            .execute(&self.admin)
            .await?;
        }
        Ok(())
    }
}

/// Resident memory of a process, from /proc: (current, peak) in KiB.
pub fn rss(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

//! What the benchmarks share: a fresh database with an organization and a key, the API and a
//! worker as release processes, and their memory.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use parley_types::ids::OrgId;
use uuid::Uuid;

pub const API_ADDR: &str = "127.0.0.1:18480";

/// A connection to the API from 127.0.0.`n`: another client address, which the API's limits
/// per address count apart.
pub async fn connect_from(n: u8) -> std::io::Result<tokio::net::TcpStream> {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n)), 0))?;
    socket.connect(API_ADDR.parse().expect("an address")).await
}

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
        let key = parley_db::api_keys::create(&pool, OrgId::from(org.id), new)
            .await?
            .context("a key")?
            .key;
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
            .env("PARLEY_API_METRICS_ADDR", "127.0.0.1:0")
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

    /// Inserts `n` contacts with an email each, 50,000 per statement; returns their ids.
    pub async fn seed_contacts(&self, n: usize) -> anyhow::Result<Vec<Uuid>> {
        let mut all = Vec::with_capacity(n);
        for start in (0..n).step_by(50_000) {
            let end = (start + 50_000).min(n);
            let ids: Vec<Uuid> = (start..end).map(|_| Uuid::now_v7()).collect();
            let emails: Vec<String> = (start..end)
                .map(|i| format!("bench{i}@example.com"))
                .collect();
            sqlx::query(
                "INSERT INTO contacts (id, organization_id, name, email, source)
                 SELECT id, $1, 'Contact', email, 'bench' FROM unnest($2::uuid[], $3::text[]) AS u(id, email)",
            )
            .bind(self.org)
            .bind(&ids)
            .bind(&emails)
            .execute(&self.pool)
            .await?;
            all.extend(ids);
        }
        Ok(all)
    }

    /// `POST /api/v1{path}` with this bench's key; the created record's id.
    pub async fn create(
        &self,
        client: &reqwest::Client,
        path: &str,
        body: &serde_json::Value,
    ) -> anyhow::Result<String> {
        let r = client
            .post(format!("http://{API_ADDR}/api/v1{path}"))
            .bearer_auth(&self.key)
            .json(body)
            .send()
            .await?;
        let status = r.status();
        let answer: serde_json::Value = r.json().await?;
        answer["data"]["id"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("POST {path} answered {status}: {answer}"))
    }

    /// An email template, as the benchmarks send.
    pub async fn template(&self, client: &reqwest::Client) -> anyhow::Result<String> {
        let body = serde_json::json!({"name": "Bench", "channel": "email", "body": "Hello {{contact.name}}"});
        self.create(client, "/templates", &body).await
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

/// Processor time used so far, from /proc, in clock ticks (1/100 s on Linux): by every process
/// alive now, summed by command name, and the machine's idle time under `"(idle)"`. Two readings
/// taken around a run say where its processor time went (a process that exits between them is
/// missed; the benchmarks' processes and Postgres' pooled backends live through the run).
pub fn cpu_ticks() -> std::collections::BTreeMap<String, u64> {
    let mut by_command = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return by_command;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ..." where comm may hold spaces and parentheses; utime and
        // stime are the 12th and 13th fields after it.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let command = stat[open + 1..close].to_owned();
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        if let (Some(user), Some(system)) = (ticks(11), ticks(12)) {
            *by_command.entry(command).or_default() += user + system;
        }
    }
    if let Ok(stat) = std::fs::read_to_string("/proc/stat")
        && let Some(cpu) = stat.lines().next()
    {
        // "cpu user nice system idle iowait ...": idle and iowait.
        let idle: u64 = cpu
            .split_whitespace()
            .skip(4)
            .take(2)
            .filter_map(|f| f.parse::<u64>().ok())
            .sum();
        by_command.insert("(idle)".to_owned(), idle);
    }
    by_command
}

/// Where the processor time between two [`cpu_ticks`] readings went, in seconds, largest
/// first, commands under 1% of the total folded into "other".
pub fn cpu_spent(
    before: &std::collections::BTreeMap<String, u64>,
    after: &std::collections::BTreeMap<String, u64>,
) -> Vec<(String, f64)> {
    let mut spent: Vec<(String, u64)> = after
        .iter()
        .map(|(command, t)| {
            (
                command.clone(),
                t.saturating_sub(before.get(command).copied().unwrap_or(0)),
            )
        })
        .filter(|(_, t)| *t > 0)
        .collect();
    let total: u64 = spent.iter().map(|(_, t)| t).sum();
    let mut other = 0;
    spent.retain(|(_, t)| {
        let keep = *t * 100 >= total;
        if !keep {
            other += t;
        }
        keep
    });
    spent.sort_by_key(|s| std::cmp::Reverse(s.1));
    if other > 0 {
        spent.push(("other".to_owned(), other));
    }
    spent
        .into_iter()
        .map(|(command, t)| (command, t as f64 / 100.0))
        .collect()
}

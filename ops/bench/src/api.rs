//! API benchmark: requests per second of a few routes of a release API, each beside
//! `GET /healthz` (no key, no database: the HTTP floor) measured in the same run, with the
//! ratio. The load is this process's own HTTP/1.1 client on raw keep-alive connections (a
//! request written, its answer read by `Content-Length`), so the generator costs about what
//! wrk costs, on the same two cores as the API and Postgres.
//!
//! Rows: the organization (one key, one row), a page of 20 contacts at 10,000 and at 1,000,000
//! contacts, the same filtered by source, and a contact created per request.
//!
//! Then the tenant next door: one organization floods the API with filtered lists over 64
//! connections while another reads pages of its contacts one at a time; the second's latency
//! (median, 99th percentile) with the organizations' turns as configured and with them off
//! (`PARLEY_REQUESTS_PER_ORG` past any flood).
//!
//! Env: `PARLEY_BENCH_SECONDS` (10) per row, `PARLEY_BENCH_CONNECTIONS` (32),
//! `PARLEY_BENCH_BIG` (1000000) contacts of the large organization, `PARLEY_BENCH_ONLY` (all)
//! runs only the rows whose label contains it (to profile one request),
//! `PARLEY_BENCH_NEIGHBOUR` (1; 0 leaves the tenant next door out).

use parley_types::ids::OrgId;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use parley_bench::{API_ADDR, Bench, env};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What one request is: a fixed one, or one made per request (a body that must differ).
#[derive(Clone)]
enum Request {
    Fixed(Arc<Vec<u8>>),
    NewContact { key: Arc<str> },
}

impl Request {
    fn get(path: &str, key: Option<&str>) -> Request {
        let auth = key.map_or(String::new(), |k| format!("authorization: Bearer {k}\r\n"));
        Request::Fixed(Arc::new(
            format!("GET {path} HTTP/1.1\r\nhost: {API_ADDR}\r\n{auth}\r\n").into_bytes(),
        ))
    }

    fn bytes(&self, conn: usize, n: u64) -> Arc<Vec<u8>> {
        match self {
            Request::Fixed(b) => b.clone(),
            Request::NewContact { key } => {
                let body = format!(
                    r#"{{"name":"Load {conn}-{n}","email":"load-{conn}-{n}-{}@example.com","source":"bench"}}"#,
                    std::process::id()
                );
                Arc::new(
                    format!(
                        "POST /api/v1/contacts HTTP/1.1\r\nhost: {API_ADDR}\r\nauthorization: Bearer {key}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    )
                    .into_bytes(),
                )
            }
        }
    }
}

/// Answers counted by one run: successes (2xx) and others.
#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    other: AtomicU64,
}

/// Reads one answer: its status; the body is read through its `Content-Length` and dropped.
async fn read_answer(stream: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<u16> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..end])?;
            let status: u16 = head
                .get(9..12)
                .and_then(|s| s.parse().ok())
                .context("no status")?;
            let length: usize = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().ok())?
                })
                .context("an answer without content-length")?;
            let total = end + 4 + length;
            while buf.len() < total {
                read_more(stream, buf).await?;
            }
            buf.drain(..total);
            return Ok(status);
        }
        read_more(stream, buf).await?;
    }
}

async fn open() -> anyhow::Result<TcpStream> {
    let stream = TcpStream::connect(API_ADDR).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<()> {
    let mut chunk = [0u8; 16 * 1024];
    let n = stream.read(&mut chunk).await?;
    anyhow::ensure!(n > 0, "the connection closed");
    buf.extend_from_slice(&chunk[..n]);
    Ok(())
}

/// Requests per second of `request` over `conns` connections for `seconds`, and the 2xx and
/// other answers.
async fn load(request: &Request, conns: usize, seconds: u64) -> anyhow::Result<(f64, u64, u64)> {
    let counts = Arc::new(Counts::default());
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for conn in 0..conns {
        let (request, counts) = (request.clone(), counts.clone());
        tasks.push(tokio::spawn(async move {
            let mut stream = open().await?;
            let mut buf = Vec::with_capacity(64 * 1024);
            let mut n = 0;
            while Instant::now() < deadline {
                let bytes = request.bytes(conn, n);
                n += 1;
                let answered = async {
                    stream.write_all(&bytes).await?;
                    read_answer(&mut stream, &mut buf).await
                };
                let slot = match answered.await {
                    Ok(status) if (200..300).contains(&status) => &counts.ok,
                    Ok(_) => &counts.other,
                    // The API closed the connection (one past the address's limit while a
                    // connection of the readiness probe was still closing is answered 429, then
                    // closed): counted as refused, and a client opens a new one.
                    Err(_) => {
                        buf.clear();
                        stream = open().await?;
                        &counts.other
                    }
                };
                slot.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let secs = started.elapsed().as_secs_f64();
    let ok = counts.ok.load(Ordering::Relaxed);
    Ok((ok as f64 / secs, ok, counts.other.load(Ordering::Relaxed)))
}

/// Runs `request`, then the floor, and prints the row: the rates, their ratio, and the
/// processor time a request took in the API process and in Postgres (from /proc).
async fn row(label: &str, request: &Request, conns: usize, seconds: u64) -> anyhow::Result<()> {
    let floor = Request::get("/healthz", None);
    let before = parley_bench::cpu_ticks();
    let (rate, ok, other) = load(request, conns, seconds).await?;
    let after = parley_bench::cpu_ticks();
    let (floor_rate, _, _) = load(&floor, conns, seconds).await?;
    // Ticks are 10 ms; per request in microseconds.
    let per_request = |command: &str| {
        let ticks =
            after.get(command).copied().unwrap_or(0) - before.get(command).copied().unwrap_or(0);
        ticks as f64 * 10_000.0 / (ok + other).max(1) as f64
    };
    println!(
        "| {label} | {rate:.0} | {floor_rate:.0} | {:.3} | {:.0} | {:.0} |{}",
        rate / floor_rate,
        per_request("parley-api"),
        per_request("postgres"),
        if other > 0 {
            format!(" {other} non-2xx answers")
        } else {
            String::new()
        }
    );
    Ok(())
}

/// Each answer's time of `request` sent one at a time over one connection for `seconds`, from
/// 127.0.0.2: the tenant next door is another client, not one more of the flood's connections
/// (which, from one address, reach its connection limit).
async fn latencies(request: &Request, seconds: u64) -> anyhow::Result<Vec<Duration>> {
    let mut stream = parley_bench::connect_from(2).await?;
    stream.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(64 * 1024);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut took = Vec::new();
    let mut n = 0;
    while Instant::now() < deadline {
        let sent = Instant::now();
        stream.write_all(&request.bytes(0, n)).await?;
        n += 1;
        let status = read_answer(&mut stream, &mut buf).await?;
        anyhow::ensure!((200..300).contains(&status), "the neighbour got {status}");
        took.push(sent.elapsed());
    }
    took.sort();
    Ok(took)
}

/// The tenant next door: `flood` over 64 connections beside `probe` one at a time, with the
/// API as `api` started it; prints the row.
async fn neighbour(
    label: &str,
    flood: &Request,
    probe: &Request,
    seconds: u64,
) -> anyhow::Result<()> {
    let flooding = load(flood, 64, seconds);
    let probing = async {
        // The flood's connections are open first.
        tokio::time::sleep(Duration::from_millis(200)).await;
        latencies(probe, seconds.saturating_sub(1).max(1)).await
    };
    let (flooded, took) = tokio::join!(flooding, probing);
    let (flood_rate, _, refused) = flooded?;
    let took = took?;
    let at = |q: f64| took[((took.len() - 1) as f64 * q) as usize].as_secs_f64() * 1000.0;
    println!(
        "| {label} | {flood_rate:.0} | {refused} | {} | {:.2} | {:.2} |",
        took.len(),
        at(0.5),
        at(0.99)
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let seconds: u64 = env("PARLEY_BENCH_SECONDS", "10").parse()?;
    let conns: usize = env("PARLEY_BENCH_CONNECTIONS", "32").parse()?;
    let big: usize = env("PARLEY_BENCH_BIG", "1000000").parse()?;
    let bench = Bench::new("parley_bench_api").await?;
    // The large organization is a second one in the same database, as a tenant next door.
    let large = {
        let mut conn = bench.pool.acquire().await?;
        let org = parley_db::orgs::create(&mut conn, "Large").await?;
        let new = parley_domain::api_keys::NewApiKey::parse("large".into(), vec!["*".into()], None)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let key = parley_db::api_keys::create(&mut *conn, OrgId::from(org.id), new)
            .await?
            .context("a key")?
            .key;
        (org.id, key)
    };
    bench.seed_contacts(10_000).await?;
    println!("seeding {big} contacts in a second organization");
    for start in (0..big).step_by(100_000) {
        let n = (big - start).min(100_000) as i64;
        sqlx::query(
            "INSERT INTO contacts (id, organization_id, name, email, source)
             SELECT uuid_v7(), $1, 'Contact', 'big' || ($2 + g) || '@example.com',
                    CASE WHEN g % 10 = 0 THEN 'web' ELSE 'bench' END
             FROM generate_series(1, $3) g",
        )
        .bind(large.0)
        .bind(start as i64)
        .bind(n)
        .execute(&bench.pool)
        .await?;
    }
    sqlx::query("VACUUM ANALYZE contacts")
        .execute(&bench.pool)
        .await?;
    let mut api = bench.spawn("parley-api", &[])?;
    bench.api_ready().await?;
    println!(
        "machine: {} cores; {conns} connections, {seconds} s a run; release API, one process",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "\n| request | req/s | `GET /healthz` req/s, same run | ratio | API µs/req | Postgres µs/req |\n|---|---:|---:|---:|---:|---:|"
    );
    let key = bench.key.as_str();
    let rows = [
        ("`GET /healthz`", Request::get("/healthz", None)),
        (
            "`GET /api/v1/organization`",
            Request::get("/api/v1/organization", Some(key)),
        ),
        (
            "`GET /api/v1/contacts?pageSize=20`, 10,000 contacts",
            Request::get("/api/v1/contacts?pageSize=20", Some(key)),
        ),
        (
            "`GET /api/v1/contacts?pageSize=20&source=web`, 10,000 contacts (none match)",
            Request::get("/api/v1/contacts?pageSize=20&source=web", Some(key)),
        ),
        (
            &*format!("`GET /api/v1/contacts?pageSize=20`, {big} contacts"),
            Request::get("/api/v1/contacts?pageSize=20", Some(&large.1)),
        ),
        (
            &*format!(
                "`GET /api/v1/contacts?pageSize=20&source=web`, {big} contacts (a tenth match)"
            ),
            Request::get("/api/v1/contacts?pageSize=20&source=web", Some(&large.1)),
        ),
        (
            "`POST /api/v1/contacts`",
            Request::NewContact { key: key.into() },
        ),
    ];
    let only = env("PARLEY_BENCH_ONLY", "");
    for (label, request) in rows
        .iter()
        .filter(|(label, _)| label.contains(only.as_str()))
    {
        row(label, request, conns, seconds).await?;
    }
    if env("PARLEY_BENCH_NEIGHBOUR", "1") != "0" {
        println!(
            "\nThe tenant next door: the 10,000 contacts' organization sends \
             `GET /api/v1/contacts?pageSize=20&source=web` over 64 connections; the other \
             organization `GET /api/v1/contacts?pageSize=20`, one at a time.\n\n\
             | organizations' turns | flood: answered req/s | flood: 429s | neighbour: requests | neighbour: median ms | neighbour: 99th percentile ms |\n|---|---:|---:|---:|---:|---:|"
        );
        let flood = Request::get("/api/v1/contacts?pageSize=20&source=web", Some(key));
        let probe = Request::get("/api/v1/contacts?pageSize=20", Some(&large.1));
        let configured = format!(
            "as configured (`PARLEY_REQUESTS_PER_ORG` {}, queued {})",
            env("PARLEY_REQUESTS_PER_ORG", "the pool's size"),
            env("PARLEY_REQUESTS_QUEUED_PER_ORG", "64")
        );
        neighbour(&configured, &flood, &probe, seconds).await?;
        drop(api);
        api = bench.spawn(
            "parley-api",
            &[
                ("PARLEY_REQUESTS_PER_ORG", "10000"),
                ("PARLEY_REQUESTS_QUEUED_PER_ORG", "100000"),
            ],
        )?;
        bench.api_ready().await?;
        neighbour("off", &flood, &probe, seconds).await?;
    }
    drop(api);
    bench.finish().await
}

//! Slow-body drill: one client address holds as many requests as it can, each sending its
//! headers and all but the last byte of a body, while another organization, from another
//! address, sends its requests; the API's memory is read all along. It replays the floods seen
//! in issue 43: with a tenant's key (`POST /api/v1/contacts`) and without one
//! (`GET /api/v1/tickets/{id}/sla` with a made-up ticket token).
//!
//! Each phase lasts `PARLEY_BENCH_SECONDS` (30): first the other organization alone (its floor:
//! the same requests with nothing else running), then beside each flood. The flood's
//! connections (`PARLEY_BENCH_FLOOD`, 540) come from 127.0.0.2 and connect again as soon as
//! the API closes one, sending `PARLEY_BENCH_BODY` (524288) bytes but one; the other
//! organization's 8 clients come from 127.0.0.1, one request at a time each. Printed per
//! phase: the other organization's answers by status and their latency (median, 99th
//! percentile, worst), what the flood's connections ended with, and the API's resident memory
//! (peak over the phase, and the process's peak so far).
//!
//! `PARLEY_BENCH_API_BIN` runs another build of the API (an A/B against an earlier commit);
//! `PARLEY_BENCH_API_ENV` adds its settings (`NAME=value,NAME=value`).

use parley_types::ids::OrgId;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use parking_lot::Mutex;
use parley_bench::{API_ADDR, Bench, env, rss};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the other organization's clients saw.
#[derive(Default)]
struct Seen {
    statuses: BTreeMap<String, u64>,
    latencies: Vec<Duration>,
}

/// How the flood's connections ended.
type Ends = Arc<Mutex<BTreeMap<String, u64>>>;

/// One flooding connection after another until `stop`: each sends `head` and `len - 1` bytes
/// of body, then waits for the API to answer or close.
async fn flood(head: Arc<String>, len: usize, stop: Arc<AtomicBool>, ends: Ends) {
    let body = vec![b' '; len - 1];
    while !stop.load(Ordering::Relaxed) {
        let end = match parley_bench::connect_from(2).await {
            Err(_) => "connect failed".to_owned(),
            Ok(mut stream) => {
                let sent = async {
                    stream.write_all(head.as_bytes()).await?;
                    stream.write_all(&body).await
                };
                // A refused request is answered before its body is read: writing may fail.
                let _ = tokio::time::timeout(Duration::from_secs(60), sent).await;
                let mut answer = [0u8; 12];
                let read = async {
                    loop {
                        if stop.load(Ordering::Relaxed) {
                            return None;
                        }
                        match tokio::time::timeout(
                            Duration::from_millis(200),
                            stream.read_exact(&mut answer),
                        )
                        .await
                        {
                            Ok(Ok(_)) => {
                                return Some(String::from_utf8_lossy(&answer[9..12]).into_owned());
                            }
                            Ok(Err(_)) => return Some("closed".to_owned()),
                            Err(_) => {}
                        }
                    }
                };
                match read.await {
                    Some(status) => status,
                    None => "held to the end".to_owned(),
                }
            }
        };
        *ends.lock().entry(end).or_default() += 1;
        // A client retrying at once: a pause of 100 ms, not a busy loop.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The other organization: `clients` loops of one request at a time (a page of contacts, then
/// a contact created), each given 30 s, until `stop`.
async fn neighbour(
    client: reqwest::Client,
    key: String,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let request = if n.is_multiple_of(2) {
            client.get(format!("http://{API_ADDR}/api/v1/contacts?pageSize=20"))
        } else {
            client
                .post(format!("http://{API_ADDR}/api/v1/contacts"))
                .json(&serde_json::json!({
                    "name": "Neighbour",
                    "email": format!("n{n}-{}@example.com", uuid::Uuid::now_v7().simple()),
                    "source": "drill",
                }))
        };
        let started = Instant::now();
        let status = match request
            .bearer_auth(&key)
            .timeout(Duration::from_secs(30))
            .send()
            .await
        {
            Ok(r) => r.status().as_u16().to_string(),
            Err(e) if e.is_timeout() => "timeout".to_owned(),
            Err(_) => "error".to_owned(),
        };
        let mut seen = seen.lock();
        *seen.statuses.entry(status).or_default() += 1;
        seen.latencies.push(started.elapsed());
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

/// Runs one phase: the neighbour for `seconds`, beside `flood` when given; prints its row.
async fn phase(
    label: &str,
    key: &str,
    flood_head: Option<Arc<String>>,
    conns: usize,
    len: usize,
    seconds: u64,
    pid: u32,
) -> anyhow::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let ends: Ends = Default::default();
    let mut tasks = Vec::new();
    if let Some(head) = flood_head {
        for _ in 0..conns {
            tasks.push(tokio::spawn(flood(
                head.clone(),
                len,
                stop.clone(),
                ends.clone(),
            )));
        }
        // The flood first, as in the report: the neighbour comes to an API already held.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let seen = Arc::new(Mutex::new(Seen::default()));
    let client = reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::LOCALHOST))
        .pool_max_idle_per_host(8)
        .build()?;
    for _ in 0..8 {
        tasks.push(tokio::spawn(neighbour(
            client.clone(),
            key.to_owned(),
            stop.clone(),
            seen.clone(),
        )));
    }
    let started = Instant::now();
    let mut peak = 0;
    while started.elapsed() < Duration::from_secs(seconds) {
        if let Some((now, _)) = rss(pid) {
            peak = peak.max(now);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(40), t).await;
    }
    let process_peak = rss(pid).map_or(0, |(_, hwm)| hwm);
    let mut seen = Arc::try_unwrap(seen)
        .map_err(|_| anyhow::anyhow!("the neighbour's tasks outlived the phase"))?
        .into_inner();
    seen.latencies.sort();
    let statuses: Vec<String> = seen
        .statuses
        .iter()
        .map(|(s, n)| format!("{s}: {n}"))
        .collect();
    let ends: Vec<String> = ends
        .lock()
        .iter()
        .map(|(s, n)| format!("{s}: {n}"))
        .collect();
    println!(
        "| {label} | {} | {:.1} | {:.1} | {:.1} | {} | {} | {} |",
        statuses.join(", "),
        percentile(&seen.latencies, 0.5),
        percentile(&seen.latencies, 0.99),
        percentile(&seen.latencies, 1.0),
        if ends.is_empty() {
            "-".to_owned()
        } else {
            ends.join(", ")
        },
        peak / 1024,
        process_peak / 1024,
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let seconds: u64 = env("PARLEY_BENCH_SECONDS", "30").parse()?;
    let conns: usize = env("PARLEY_BENCH_FLOOD", "540").parse()?;
    let len: usize = env("PARLEY_BENCH_BODY", "524288").parse()?;
    let bench = Bench::new("parley_bench_slow_bodies").await?;
    let other = {
        let mut conn = bench.pool.acquire().await?;
        let org = parley_db::orgs::create(&mut conn, "Next door").await?;
        let new = parley_domain::api_keys::NewApiKey::parse("next".into(), vec!["*".into()], None)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        parley_db::api_keys::create(&mut *conn, OrgId::from(org.id), new)
            .await?
            .context("a key")?
            .key
    };
    bench.seed_contacts(1_000).await?;
    let extra = env("PARLEY_BENCH_API_ENV", "");
    let mut settings: Vec<(&str, &str)> = extra
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    // The flood's own failed authentications must not end the keyless phase early.
    settings.push(("PARLEY_AUTH_FAILURES_PER_MINUTE", "0"));
    let bin = env("PARLEY_BENCH_API_BIN", "parley-api");
    let api = bench.spawn(&bin, &settings)?;
    bench.api_ready().await?;
    let pid = api.0.id();
    println!(
        "{conns} connections from 127.0.0.2, each with {len} bytes of body but one; the other \
         organization's 8 clients from 127.0.0.1; {seconds} s a phase"
    );
    println!();
    println!(
        "| phase | the other organization's answers | median (ms) | p99 (ms) | worst (ms) | the flood's connections ended with | API RSS peak in the phase (MiB) | API RSS peak so far (MiB) |"
    );
    println!("|---|---|---:|---:|---:|---|---:|---:|");
    phase("alone (floor)", &other, None, conns, len, seconds, pid).await?;
    let keyed = Arc::new(format!(
        "POST /api/v1/contacts HTTP/1.1\r\nhost: {API_ADDR}\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: {len}\r\n\r\n",
        bench.key
    ));
    phase(
        "beside a keyed flood",
        &other,
        Some(keyed),
        conns,
        len,
        seconds,
        pid,
    )
    .await?;
    let keyless = Arc::new(format!(
        "GET /api/v1/tickets/{}/sla HTTP/1.1\r\nhost: {API_ADDR}\r\n\
         x-ticket-access-token: guess\r\ncontent-length: {len}\r\n\r\n",
        uuid::Uuid::now_v7()
    ));
    phase(
        "beside a keyless flood",
        &other,
        Some(keyless),
        conns,
        len,
        seconds,
        pid,
    )
    .await?;
    drop(api);
    bench.finish().await
}

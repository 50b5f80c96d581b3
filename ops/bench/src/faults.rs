//! Fault drills: a `sendNow` broadcast of N recipients (default 10,000) to a provider that
//! honours `Idempotency-Key` and counts every call, hit a third of the way in by one fault:
//!
//! - `kill`: the worker is SIGKILLed and a new one started at once;
//! - `redis`: every Redis key of the deployment is deleted (queues, claims, rate buckets,
//!   apalis' worker registrations) while the worker runs;
//! - `postgres`: Postgres is restarted (`PARLEY_BENCH_PG_RESTART`, a shell command).
//!
//! For each it prints the recipients, how many reached the provider, how many were sent twice,
//! the time from the fault to the last send and to `completed`, and the status codes the API
//! answered while a client polled it every 20 ms (only 200 and 503 are allowed). The API and
//! workers are release processes with their default settings; Postgres and Redis are real.
//!
//! Usage (through ops/bench/faults): parley-bench-faults [kill|redis|postgres]...

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use parking_lot::Mutex;
use parley_bench::{API_ADDR, Bench, Proc, env};
use serde_json::{Value, json};

/// What the provider saw: calls per idempotency key, and when the last call came.
#[derive(Default)]
struct Seen {
    calls: HashMap<String, u32>,
    last: Option<Instant>,
}

/// A provider that takes `latency` per message and answers a key it already took with the same
/// message id, as real providers do.
async fn provider(latency: Duration) -> anyhow::Result<(String, Arc<Mutex<Seen>>)> {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let s = seen.clone();
    let app = axum::Router::new().route(
        "/send",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let s = s.clone();
            async move {
                let key = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                {
                    let mut s = s.lock();
                    *s.calls.entry(key.clone()).or_default() += 1;
                    s.last = Some(Instant::now());
                }
                tokio::time::sleep(latency).await;
                axum::Json(json!({"messageId": format!("drill-{key}")}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/send", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((url, seen))
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fault {
    Kill,
    Redis,
    Postgres,
}

impl Fault {
    fn parse(s: &str) -> anyhow::Result<Fault> {
        Ok(match s {
            "kill" => Fault::Kill,
            "redis" => Fault::Redis,
            "postgres" => Fault::Postgres,
            _ => bail!("unknown fault {s:?} (kill, redis, postgres)"),
        })
    }

    fn name(self) -> &'static str {
        match self {
            Fault::Kill => "worker SIGKILLed, new worker started at once",
            Fault::Redis => "Redis keys of the deployment deleted",
            Fault::Postgres => "Postgres restarted",
        }
    }
}

struct Figures {
    sent: usize,
    twice: usize,
    last_send_s: f64,
    completed_s: f64,
    answers: BTreeMap<u16, u64>,
}

async fn broadcast_status(client: &reqwest::Client, key: &str, id: &str) -> Option<Value> {
    let r = client
        .get(format!("http://{API_ADDR}/api/v1/broadcasts/{id}"))
        .bearer_auth(key)
        .send()
        .await
        .ok()?;
    r.json::<Value>().await.ok()
}

fn shell(command: &str) -> anyhow::Result<()> {
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .status()?;
    if !status.success() {
        bail!("`{command}` failed: {status}");
    }
    Ok(())
}

async fn drill(fault: Fault, n: usize) -> anyhow::Result<Figures> {
    let latency = Duration::from_millis(env("PARLEY_BENCH_PROVIDER_MS", "5").parse()?);
    let (url, seen) = provider(latency).await?;
    let rate = env("PARLEY_BENCH_RATE", "1000");
    let settings = [
        ("PARLEY_CHANNEL_EMAIL_URL", url.as_str()),
        ("PARLEY_CHANNEL_EMAIL_RATE", rate.as_str()),
    ];
    let bench = Bench::new("parley_bench_faults").await?;
    let contacts = bench.seed_contacts(n).await?;
    let _api = bench.spawn("parley-api", &settings)?;
    let mut worker = Some(bench.spawn("parley-worker", &settings)?);
    let client = bench.api_ready().await?;
    let key = bench.key.clone();
    let template = bench.template(&client).await?;
    let body = json!({"broadcastName": "drill", "templateId": template, "contactIds": contacts, "sendNow": true});
    let id = bench.create(&client, "/broadcasts", &body).await?;

    // A client polling the API through the whole drill; it tallies the status codes.
    let answers: Arc<Mutex<BTreeMap<u16, u64>>> = Arc::default();
    let polling = tokio::spawn({
        let (client, key, id, answers) = (client.clone(), key.clone(), id.clone(), answers.clone());
        async move {
            loop {
                let r = client
                    .get(format!("http://{API_ADDR}/api/v1/broadcasts/{id}"))
                    .bearer_auth(&key)
                    .timeout(Duration::from_secs(35))
                    .send()
                    .await;
                let code = r.map(|r| r.status().as_u16()).unwrap_or(0);
                *answers.lock().entry(code).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });

    while seen.lock().calls.len() < n / 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let fault_at = Instant::now();
    let mut _replacement: Option<Proc> = None;
    match fault {
        Fault::Kill => {
            drop(worker.take()); // SIGKILL
            _replacement = Some(bench.spawn("parley-worker", &settings)?);
        }
        // Keys are <prefix>:... or, grouped under a hash tag, {<prefix>:...}...
        Fault::Redis => shell(&format!(
            "for p in '{0}:*' '{{{0}:*'; do redis-cli --scan --pattern \"$p\" | xargs -r -n 500 redis-cli del >/dev/null; done",
            bench.prefix
        ))?,
        Fault::Postgres => shell(
            &std::env::var("PARLEY_BENCH_PG_RESTART")
                .context("PARLEY_BENCH_PG_RESTART: the command that restarts Postgres")?,
        )?,
    }
    let b = loop {
        if let Some(b) = broadcast_status(&client, &key, &id).await {
            match b["data"]["status"].as_str() {
                Some("completed") => break b,
                Some("failed" | "paused" | "cancelled") => {
                    bail!("the broadcast ended {}", b["data"])
                }
                _ => {}
            }
        }
        if fault_at.elapsed() > Duration::from_secs(600) {
            bail!("no end 10 minutes after the fault");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let completed_s = fault_at.elapsed().as_secs_f64();
    polling.abort();
    if b["data"]["sentCount"].as_u64() != Some(n as u64) {
        bail!("completed with {} sent of {n}", b["data"]["sentCount"]);
    }
    let figures = {
        let seen = seen.lock();
        Figures {
            sent: seen.calls.len(),
            twice: seen.calls.values().filter(|c| **c > 1).count(),
            last_send_s: seen
                .last
                .map(|t| t.saturating_duration_since(fault_at).as_secs_f64())
                .unwrap_or_default(),
            completed_s,
            answers: answers.lock().clone(),
        }
    };
    drop(worker);
    bench.finish().await?;
    Ok(figures)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut faults: Vec<Fault> = std::env::args()
        .skip(1)
        .map(|a| Fault::parse(&a))
        .collect::<anyhow::Result<_>>()?;
    if faults.is_empty() {
        faults = vec![Fault::Kill, Fault::Redis, Fault::Postgres];
    }
    let n: usize = env("PARLEY_BENCH_N", "10000").parse()?;
    println!(
        "N = {n}, channel rate {}/s, provider latency {} ms",
        env("PARLEY_BENCH_RATE", "1000"),
        env("PARLEY_BENCH_PROVIDER_MS", "5")
    );
    println!(
        "| fault | recipients | sent | sent twice | fault to last send (s) | fault to completed (s) | API answers while polled |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    let mut bad = false;
    for fault in faults {
        let f = drill(fault, n).await?;
        let answers: Vec<String> = f
            .answers
            .iter()
            .map(|(code, count)| format!("{code}: {count}"))
            .collect();
        println!(
            "| {} | {n} | {} | {} ({:.2}%) | {:.1} | {:.1} | {} |",
            fault.name(),
            f.sent,
            f.twice,
            f.twice as f64 * 100.0 / n as f64,
            f.last_send_s,
            f.completed_s,
            answers.join(", ")
        );
        bad |= f.sent != n || f.answers.keys().any(|code| !matches!(code, 200 | 503));
    }
    if bad {
        bail!("a drill lost recipients or the API answered other than 200 or 503");
    }
    Ok(())
}

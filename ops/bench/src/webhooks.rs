//! Webhook benchmark: a receiver on 127.0.0.1, M webhooks, N events committed through the
//! outbox (the same `emit` the API calls), one worker process. Reports deliveries per second,
//! and the same with one more endpoint that never answers (medians of alternating runs); and
//! the commit-to-receipt latency (p50, p99) at a steady rate of events.
//!
//! Usage (through ops/bench/webhooks): parley-bench-webhooks [M N RATE SECONDS]

use parley_types::ids::OrgId;
use secrecy::ExposeSecret;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use parking_lot::Mutex;
use parley_bench::Bench;
use parley_db::outbox;
use parley_domain::webhooks::EventName;
use serde_json::json;

/// Counts deliveries to `/live`, and keeps each one's latency from the event's timestamp;
/// `/dead` never answers.
#[derive(Default)]
struct Receiver {
    live: AtomicU64,
    latencies_ms: Mutex<Vec<f64>>,
}

async fn receiver() -> anyhow::Result<(String, Arc<Receiver>)> {
    let state = Arc::new(Receiver::default());
    let live = state.clone();
    let app = axum::Router::new()
        .route(
            "/live",
            axum::routing::post(move |body: axum::body::Bytes| {
                let r = live.clone();
                async move {
                    let now = chrono::Utc::now();
                    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body)
                        && let Some(ts) = v["timestamp"].as_str()
                        && let Ok(at) = chrono::DateTime::parse_from_rfc3339(ts)
                    {
                        let ms = (now - at.with_timezone(&chrono::Utc))
                            .num_microseconds()
                            .unwrap_or(0) as f64
                            / 1000.0;
                        r.latencies_ms.lock().push(ms);
                    }
                    r.live.fetch_add(1, Ordering::Relaxed);
                    "ok"
                }
            }),
        )
        .route(
            "/dead",
            axum::routing::post(|| async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                "never"
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((base, state))
}

const WORKER: &[(&str, &str)] = &[("PARLEY_WEBHOOK_ALLOW_PRIVATE", "true")];

async fn subscribe(bench: &Bench, url: &str) -> anyhow::Result<()> {
    let new = parley_domain::webhooks::CreateWebhook {
        url: parley_types::fields::WebhookUrl::parse(url).map_err(|e| anyhow::anyhow!("{e:?}"))?,
        events: vec!["lead.created".into()],
        description: None,
        is_active: None,
        rate_limit: None,
    };
    let (webhook, secret) = new
        .into_webhook(bench.org, true)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    parley_db::webhooks::insert(&bench.pool, &webhook, secret.expose_secret()).await?;
    Ok(())
}

/// Commits `n` events in transactions of `per_tx`.
async fn emit(bench: &Bench, n: usize, per_tx: usize) -> anyhow::Result<()> {
    let mut left = n;
    while left > 0 {
        let mut tx = bench.pool.begin().await?;
        for _ in 0..per_tx.min(left) {
            let data = json!({"id": uuid::Uuid::now_v7(), "name": "Bench lead", "status": "new"});
            outbox::emit(
                &mut tx,
                OrgId::from(bench.org),
                EventName::LeadCreated,
                &data,
            )
            .await?;
        }
        tx.commit().await?;
        left = left.saturating_sub(per_tx);
    }
    Ok(())
}

async fn wait_for(r: &Receiver, n: u64, limit: Duration) -> anyhow::Result<()> {
    let started = Instant::now();
    while r.live.load(Ordering::Relaxed) < n {
        if started.elapsed() > limit {
            bail!(
                "{} of {n} deliveries after {limit:?}",
                r.live.load(Ordering::Relaxed)
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// N events to M live webhooks (and one dead one when `dead`): deliveries per second.
async fn throughput(m: usize, n: usize, dead: bool) -> anyhow::Result<f64> {
    let (base, r) = receiver().await?;
    let bench = Bench::new(if dead {
        "parley_bench_webhooks_dead"
    } else {
        "parley_bench_webhooks"
    })
    .await?;
    for _ in 0..m {
        subscribe(&bench, &format!("{base}/live")).await?;
    }
    if dead {
        subscribe(&bench, &format!("{base}/dead")).await?;
    }
    let _worker = bench.spawn("parley-worker", WORKER)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let expected = (m * n) as u64;
    let started = Instant::now();
    emit(&bench, n, 100).await?;
    wait_for(&r, expected, Duration::from_secs(600)).await?;
    let secs = started.elapsed().as_secs_f64();
    bench.finish().await?;
    Ok(expected as f64 / secs)
}

/// `rate` events a second for `seconds` to one webhook: latency from commit to receipt.
async fn latency(rate: usize, seconds: u64) -> anyhow::Result<(f64, f64, f64)> {
    let (base, r) = receiver().await?;
    let bench = Bench::new("parley_bench_webhooks_latency").await?;
    subscribe(&bench, &format!("{base}/live")).await?;
    let _worker = bench.spawn("parley-worker", WORKER)?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Eight emitters, each committing one event per transaction on its own beat.
    const EMITTERS: usize = 8;
    let every = Duration::from_secs_f64(EMITTERS as f64 / rate as f64);
    let end = Instant::now() + Duration::from_secs(seconds);
    let bench = Arc::new(bench);
    let mut tasks = Vec::new();
    for _ in 0..EMITTERS {
        let bench = bench.clone();
        tasks.push(tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut sent = 0u64;
            while Instant::now() < end {
                ticks.tick().await;
                emit(&bench, 1, 1).await?;
                sent += 1;
            }
            anyhow::Ok(sent)
        }));
    }
    let mut sent = 0;
    for t in tasks {
        sent += t.await??;
    }
    wait_for(&r, sent, Duration::from_secs(120)).await?;
    let mut l = r.latencies_ms.lock().clone();
    l.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| l[((l.len() as f64 - 1.0) * q).round() as usize];
    let achieved = sent as f64 / seconds as f64;
    Arc::try_unwrap(bench)
        .map_err(|_| anyhow::anyhow!("emitters still hold the bench"))?
        .finish()
        .await?;
    Ok((achieved, at(0.5), at(0.99)))
}

/// Throughput runs of each setup.
const ROUNDS: usize = 5;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().context("arguments are numbers"))
        .collect::<anyhow::Result<_>>()?;
    let (m, n, rate, seconds) = match args.as_slice() {
        [] => (10, 4_000, 1_000, 10),
        [m, n, rate, seconds] => (*m, *n, *rate, *seconds as u64),
        _ => bail!("usage: parley-bench-webhooks [M N RATE SECONDS]"),
    };
    // Runs on 2 cores vary by about 10% from one to the next: alternate the two setups and
    // compare their medians.
    let (mut lives, mut deads) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        lives.push(throughput(m, n, false).await?);
        deads.push(throughput(m, n, true).await?);
    }
    let (live, with_dead) = (median(&mut lives), median(&mut deads));
    eprintln!("deliveries/s live: {lives:.0?}; with a dead endpoint: {deads:.0?}");
    let (achieved, p50, p99) = latency(rate, seconds).await?;
    println!("| measure | value |");
    println!("|---|---:|");
    println!("| deliveries/s, {n} events x {m} webhooks (median of {ROUNDS}) | {live:.0} |");
    println!(
        "| the same with one more endpoint that never answers (median of {ROUNDS}) | {with_dead:.0} ({:+.1}%) |",
        (with_dead / live - 1.0) * 100.0
    );
    println!("| events/s offered to one webhook | {achieved:.0} |");
    println!("| commit to receipt, p50 (ms) | {p50:.1} |");
    println!("| commit to receipt, p99 (ms) | {p99:.1} |");
    Ok(())
}

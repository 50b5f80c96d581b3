//! Broadcast benchmark: N contacts, one template, one `sendNow` broadcast to a local HTTP sink
//! provider, timed from the create request until `completed`, with the worker's peak RSS.
//! The API and one worker run as release processes; Postgres and Redis are the real ones.
//!
//! In the same run it measures this machine's floor: the least work any design must do per
//! recipient, one insert and one update of its row, each a single statement over all N rows
//! of the same table (with its indexes and triggers), and prints Parley's ratio to it.
//!
//! Usage (through ops/bench/broadcast): parley-bench-broadcast <N>...

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use parley_bench::{API_ADDR, Bench, rss};
use serde_json::{Value, json};
use uuid::Uuid;

/// A provider that accepts everything, as fast as it can.
async fn sink() -> anyhow::Result<(String, Arc<AtomicU64>)> {
    let count = Arc::new(AtomicU64::new(0));
    let c = count.clone();
    let app = axum::Router::new().route(
        "/send",
        axum::routing::post(move |body: axum::body::Bytes| {
            let c = c.clone();
            async move {
                let n = c.fetch_add(1, Ordering::Relaxed);
                let _ = body;
                axum::Json(json!({"messageId": format!("sink-{n}")}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/send", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((url, count))
}

struct Figures {
    n: usize,
    create_ms: f64,
    total_s: f64,
    per_second: f64,
    floor: f64,
    worker_peak_mib: f64,
}

async fn run(n: usize, sink_url: &str, sink_count: &AtomicU64) -> anyhow::Result<Figures> {
    let bench = Bench::new(&format!("parley_bench_{n}")).await?;
    let (pool, key) = (&bench.pool, &bench.key);
    let contacts = bench.seed_contacts(n).await?;
    sqlx::query("VACUUM ANALYZE contacts").execute(pool).await?;
    let provider = [("PARLEY_CHANNEL_EMAIL_URL", sink_url)];
    let _api = bench.spawn("parley-api", &provider)?;
    let worker = bench.spawn("parley-worker", &provider)?;
    let worker_pid = worker.0.id();
    let client = bench.api_ready().await?;
    let base = format!("http://{API_ADDR}");
    let template = bench.template(&client).await?;

    // The create request, alone: a draft of min(N, 10,000) contacts, best of five.
    let sample: Vec<Uuid> = contacts.iter().take(10_000).copied().collect();
    let mut create_ms = f64::MAX;
    let mut draft = String::new();
    for _ in 0..5 {
        let t = Instant::now();
        let r = client
            .post(format!("{base}/api/v1/broadcasts"))
            .bearer_auth(key)
            .json(&json!({"broadcastName": "draft", "templateId": template, "contactIds": sample, "isDraft": true}))
            .send()
            .await?;
        let took = t.elapsed().as_secs_f64() * 1000.0;
        if !r.status().is_success() {
            bail!("create answered {}", r.status());
        }
        create_ms = create_ms.min(took);
        let r: Value = r.json().await?;
        draft = r["data"]["id"].as_str().context("draft id")?.to_owned();
    }

    let before = sink_count.load(Ordering::Relaxed);
    let started = Instant::now();
    let body = json!({"broadcastName": "bench", "templateId": template, "contactIds": contacts, "sendNow": true});
    let id = bench.create(&client, "/broadcasts", &body).await?;
    let mut peak_kib = 0;
    loop {
        if let Some((_, hwm)) = rss(worker_pid) {
            peak_kib = peak_kib.max(hwm);
        }
        let b: Value = client
            .get(format!("{base}/api/v1/broadcasts/{id}"))
            .bearer_auth(key)
            .send()
            .await?
            .json()
            .await?;
        match b["data"]["status"].as_str() {
            Some("completed") => {
                if b["data"]["sentCount"].as_u64() != Some(n as u64) {
                    bail!("completed with {} sent of {n}", b["data"]["sentCount"]);
                }
                break;
            }
            Some("failed" | "paused" | "cancelled") => bail!("broadcast ended {}", b["data"]),
            _ => {}
        }
        if started.elapsed() > Duration::from_secs(1800) {
            bail!("no end after 30 minutes");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let total = started.elapsed().as_secs_f64();
    if let Some((_, hwm)) = rss(worker_pid) {
        peak_kib = peak_kib.max(hwm);
    }
    let sent = sink_count.load(Ordering::Relaxed) - before;
    if sent != n as u64 {
        bail!("the sink got {sent} messages for {n} recipients");
    }
    drop(worker);
    let floor = floor(&bench, draft.parse()?, &contacts).await?;
    bench.finish().await?;
    Ok(Figures {
        n,
        create_ms,
        total_s: total,
        per_second: n as f64 / total,
        floor,
        worker_peak_mib: peak_kib as f64 / 1024.0,
    })
}

/// Recipients per second when each is one row inserted and then updated to `sent`, all N
/// rows in one statement each: the machine's floor for the same table.
async fn floor(bench: &Bench, broadcast: Uuid, contacts: &[Uuid]) -> anyhow::Result<f64> {
    let ids: Vec<Uuid> = contacts.iter().map(|_| Uuid::now_v7()).collect();
    let started = Instant::now();
    sqlx::query(
        "INSERT INTO broadcast_recipients (id, organization_id, broadcast_id, contact_id, enqueued_at)
         SELECT u.id, $1, $2, u.contact_id, clock_timestamp()
         FROM unnest($3::uuid[], $4::uuid[]) AS u(id, contact_id)",
    )
    .bind(bench.org)
    .bind(broadcast)
    .bind(&ids)
    .bind(contacts)
    .execute(&bench.pool)
    .await?;
    sqlx::query(
        "UPDATE broadcast_recipients SET status = 'sent', external_message_id = 'floor-' || id,
             sent_at = clock_timestamp()
         WHERE broadcast_id = $1 AND status = 'pending'",
    )
    .bind(broadcast)
    .execute(&bench.pool)
    .await?;
    Ok(contacts.len() as f64 / started.elapsed().as_secs_f64())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().context("sizes are numbers"))
        .collect::<anyhow::Result<_>>()?;
    let (sink_url, sink_count) = sink().await?;
    println!(
        "| N | create 10k contactIds (ms, best of 5) | create to completed (s) | recipients/s | floor: insert + update (recipients/s) | Parley / floor | worker peak RSS (MiB) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for n in sizes {
        let f = run(n, &sink_url, &sink_count).await?;
        println!(
            "| {} | {:.1} | {:.2} | {:.0} | {:.0} | {:.0}% | {:.1} |",
            f.n,
            f.create_ms,
            f.total_s,
            f.per_second,
            f.floor,
            f.per_second * 100.0 / f.floor,
            f.worker_peak_mib
        );
    }
    Ok(())
}

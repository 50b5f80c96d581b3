//! Bulk retry benchmark: a broadcast of N contacts (`PARLEY_BENCH_N`, 100,000) whose every
//! recipient the provider refused, retried by one operator action
//! (`POST /admin/v1/dead/retry`, its filter the broadcast) once the provider takes them. It
//! prints how long the action took to retry them all (the operator loop's batches, 1,000 a
//! tick) and how long until the broadcast completed again with each sent once, beside the
//! floor measured in the same run: one statement changing the status of the same N rows of
//! `broadcast_recipients`. The API and a worker run as release processes, with the default
//! tick (`PARLEY_TICK_MS`, 250 ms) unless `PARLEY_BENCH_API_ENV` says otherwise.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use parking_lot::Mutex;
use parley_bench::{API_ADDR, Bench, env};
use serde_json::{Value, json};

const TOKEN: &str = "bench-operator-token-0123456789abcdefXYZ";

/// A provider that refuses every message while `refusing`, and takes each after; it counts
/// the messages taken and those taken twice.
#[derive(Default)]
struct Provider {
    refusing: AtomicBool,
    taken: AtomicU64,
    keys: Mutex<HashSet<String>>,
    twice: AtomicU64,
}

async fn provider() -> anyhow::Result<(String, Arc<Provider>)> {
    let p = Arc::new(Provider::default());
    p.refusing.store(true, Ordering::Relaxed);
    let seen = p.clone();
    let app = axum::Router::new().route(
        "/send",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let p = seen.clone();
            async move {
                if p.refusing.load(Ordering::Relaxed) {
                    return (
                        axum::http::StatusCode::BAD_REQUEST,
                        axum::Json(json!({"code": "invalid_recipient", "message": "refused"})),
                    );
                }
                let key = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                if !p.keys.lock().insert(key) {
                    p.twice.fetch_add(1, Ordering::Relaxed);
                }
                let n = p.taken.fetch_add(1, Ordering::Relaxed);
                (
                    axum::http::StatusCode::OK,
                    axum::Json(json!({"messageId": format!("bulk-{n}")})),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/send", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((url, p))
}

/// Polls `GET path` with `token` every 100 ms until `done` holds, for at most `secs`.
async fn wait_for(
    client: &reqwest::Client,
    path: &str,
    token: &str,
    secs: u64,
    done: impl Fn(&Value) -> bool,
) -> anyhow::Result<Value> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let body: Value = client
            .get(format!("http://{API_ADDR}{path}"))
            .bearer_auth(token)
            .send()
            .await?
            .json()
            .await?;
        if done(&body["data"]) {
            return Ok(body["data"].clone());
        }
        if Instant::now() > deadline {
            bail!("{path} not done after {secs} s: {body}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = env("PARLEY_BENCH_N", "100000").parse()?;
    let bench = Bench::new("parley_bench_bulk_retry").await?;
    let contacts = bench.seed_contacts(n).await?;
    let (url, provider) = provider().await?;
    let extra = env("PARLEY_BENCH_API_ENV", "");
    let mut settings: Vec<(&str, &str)> = extra
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .collect();
    settings.extend([
        ("PARLEY_CHANNEL_EMAIL_URL", url.as_str()),
        ("PARLEY_ADMIN_TOKEN", TOKEN),
        // Every message is refused on purpose: the broadcast must fail, not pause.
        ("PARLEY_BROADCAST_AUTO_PAUSE_FAILURES", "4000000000"),
    ]);
    let _api = bench.spawn("parley-api", &settings)?;
    let _worker = bench.spawn("parley-worker", &settings)?;
    let client = bench.api_ready().await?;
    let template = bench.template(&client).await?;
    let body = json!({"broadcastName": "Refused", "templateId": template,
        "contactIds": contacts, "sendNow": true});
    let broadcast = bench.create(&client, "/broadcasts", &body).await?;
    let path = format!("/api/v1/broadcasts/{broadcast}");
    println!("sending {n} recipients, each refused");
    let sending = Instant::now();
    let failed = wait_for(&client, &path, &bench.key, 1800, |b| {
        b["status"] == "failed"
    })
    .await?;
    anyhow::ensure!(
        failed["failedCount"].as_u64() == Some(n as u64),
        "every recipient failed: {failed}"
    );
    println!(
        "all failed after {:.1} s; retrying them",
        sending.elapsed().as_secs_f64()
    );

    provider.refusing.store(false, Ordering::Relaxed);
    let started = Instant::now();
    let action: Value = client
        .post(format!("http://{API_ADDR}/admin/v1/dead/retry"))
        .bearer_auth(TOKEN)
        .json(
            &json!({"filter": {"queue": "recipient-send", "broadcastId": broadcast},
            "limit": n}),
        )
        .send()
        .await?
        .json()
        .await?;
    let id = action["data"]["id"]
        .as_str()
        .with_context(|| format!("an action: {action}"))?;
    let done = wait_for(
        &client,
        &format!("/admin/v1/actions/{id}"),
        TOKEN,
        1800,
        |a| a["status"] != "running",
    )
    .await?;
    let retried_s = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        done["status"] == "completed" && done["done"].as_u64() == Some(n as u64),
        "the action retried them all: {done}"
    );
    let sent = wait_for(&client, &path, &bench.key, 1800, |b| {
        b["status"] == "completed"
    })
    .await?;
    let sent_s = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        sent["sentCount"].as_u64() == Some(n as u64),
        "each sent: {sent}"
    );

    // The floor: one statement changing the status of the same rows (as a retry's does, with
    // the counters that follow a status).
    let floor_started = Instant::now();
    sqlx::query(
        "UPDATE broadcast_recipients SET status = 'failed', failed_at = clock_timestamp(),
             error_code = 'floor'
         WHERE broadcast_id = $1::uuid",
    )
    .bind(&broadcast)
    .execute(&bench.pool)
    .await?;
    let floor_s = floor_started.elapsed().as_secs_f64();

    println!();
    println!(
        "| N | action to completed (s) | items retried/s | to the broadcast completed again (s) | recipients sent/s | floor: one UPDATE of the N rows' status (rows/s) | retried/s over the floor | sent twice |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {n} | {retried_s:.1} | {:.0} | {sent_s:.1} | {:.0} | {:.0} | {:.3} | {} |",
        n as f64 / retried_s,
        n as f64 / sent_s,
        n as f64 / floor_s,
        floor_s / retried_s,
        provider.twice.load(Ordering::Relaxed),
    );
    bench.finish().await
}

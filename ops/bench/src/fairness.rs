//! Fair share benchmark: organization A sends one broadcast of N recipients while organization
//! B starts a 5-recipient broadcast every `PARLEY_BENCH_B_EVERY_MS` (2,000) until A's ends. It
//! prints B's create-to-completed times (p50, p99, max) beside B's time on an idle service, and
//! A's recipients per second beside A alone, all measured in the same run on the same
//! processes (A alone runs before and after, and the mean is the reference). One API and one
//! worker as release processes, a local sink provider, the real Postgres and Redis.
//!
//! `parley-bench-fairness counts [N]` (default 1000000) instead has A, with N contacts, run 40
//! segment counts at once, again and again for 10 s, while B lists its contacts
//! (`GET /contacts?pageSize=20`, 4 at once); it prints B's p50/p99 and answers beside B alone,
//! and what A's counts got (200 or 429).
//!
//! Usage (through ops/bench/fairness): parley-bench-fairness <N>...   (default 100000)

use parley_types::ids::OrgId;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use parley_bench::{API_ADDR, Bench};
use serde_json::{Value, json};
use uuid::Uuid;

/// A provider that accepts everything at once.
async fn sink() -> anyhow::Result<String> {
    let app = axum::Router::new().route(
        "/send",
        axum::routing::post(|| async { axum::Json(json!({"messageId": Uuid::now_v7()})) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/send", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(url)
}

/// An organization's client: its key and its template.
struct Tenant {
    key: String,
    template: String,
}

async fn post(
    client: &reqwest::Client,
    key: &str,
    path: &str,
    body: Value,
) -> anyhow::Result<String> {
    let r = client
        .post(format!("http://{API_ADDR}/api/v1{path}"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await?;
    let status = r.status();
    let answer: Value = r.json().await?;
    answer["data"]["id"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("POST {path} answered {status}: {answer}"))
}

/// Starts a broadcast of `contacts` now; its id.
async fn start(client: &reqwest::Client, t: &Tenant, contacts: &[Uuid]) -> anyhow::Result<String> {
    let body = json!({"broadcastName": "bench", "templateId": t.template, "contactIds": contacts, "sendNow": true});
    post(client, &t.key, "/broadcasts", body).await
}

/// Waits (polling every `every`) until broadcast `id` completed with all of `n` sent.
async fn completed(
    client: &reqwest::Client,
    t: &Tenant,
    id: &str,
    n: usize,
    every: Duration,
) -> anyhow::Result<()> {
    let started = Instant::now();
    loop {
        let b: Value = client
            .get(format!("http://{API_ADDR}/api/v1/broadcasts/{id}"))
            .bearer_auth(&t.key)
            .send()
            .await?
            .json()
            .await?;
        match b["data"]["status"].as_str() {
            Some("completed") if b["data"]["sentCount"].as_u64() == Some(n as u64) => {
                return Ok(());
            }
            Some("completed" | "failed" | "paused" | "cancelled") => {
                bail!("broadcast ended {}", b["data"])
            }
            _ => {}
        }
        if started.elapsed() > Duration::from_secs(1800) {
            bail!("no end after 30 minutes");
        }
        tokio::time::sleep(every).await;
    }
}

/// A's broadcast of `contacts`, timed: recipients per second.
async fn a_alone(client: &reqwest::Client, a: &Tenant, contacts: &[Uuid]) -> anyhow::Result<f64> {
    let t = Instant::now();
    let id = start(client, a, contacts).await?;
    completed(client, a, &id, contacts.len(), Duration::from_millis(50)).await?;
    Ok(contacts.len() as f64 / t.elapsed().as_secs_f64())
}

/// B's broadcast of `contacts`, created and waited for: seconds from create to completed.
async fn b_once(client: &reqwest::Client, b: &Tenant, contacts: &[Uuid]) -> anyhow::Result<f64> {
    let t = Instant::now();
    let id = start(client, b, contacts).await?;
    completed(client, b, &id, contacts.len(), Duration::from_millis(10)).await?;
    Ok(t.elapsed().as_secs_f64())
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i]
}

async fn tenant(bench: &Bench, org: Uuid, client: &reqwest::Client) -> anyhow::Result<Tenant> {
    let new = parley_domain::api_keys::NewApiKey::parse("bench".into(), vec!["*".into()], None)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let key = parley_db::api_keys::create(&bench.pool, OrgId::from(org), new)
        .await?
        .context("a key")?
        .key;
    let body = json!({"name": "Bench", "channel": "email", "body": "Hello {{contact.name}}"});
    let template = post(client, &key, "/templates", body).await?;
    Ok(Tenant { key, template })
}

async fn run(n: usize, sink_url: &str) -> anyhow::Result<()> {
    let every = Duration::from_millis(
        parley_bench::env("PARLEY_BENCH_B_EVERY_MS", "2000")
            .parse()
            .context("PARLEY_BENCH_B_EVERY_MS is a number")?,
    );
    let bench = Bench::new("parley_bench_fairness").await?;
    let a_contacts = bench.seed_contacts(n).await?;
    let b_org = parley_db::orgs::create(&mut *bench.pool.acquire().await?, "B").await?;
    let b_contacts: Vec<Uuid> = (0..5).map(|_| Uuid::now_v7()).collect();
    sqlx::query(
        "INSERT INTO contacts (id, organization_id, name, email, source)
         SELECT id, $1, 'B', 'b-' || id || '@example.com', 'bench' FROM unnest($2::uuid[]) AS u(id)",
    )
    .bind(b_org.id)
    .bind(&b_contacts)
    .execute(&bench.pool)
    .await?;
    sqlx::query("VACUUM ANALYZE contacts")
        .execute(&bench.pool)
        .await?;
    let provider = [("PARLEY_CHANNEL_EMAIL_URL", sink_url)];
    let _api = bench.spawn("parley-api", &provider)?;
    let _worker = bench.spawn("parley-worker", &provider)?;
    let client = bench.api_ready().await?;
    let a = tenant(&bench, bench.org, &client).await?;
    let b = tenant(&bench, b_org.id, &client).await?;

    // Warm-up, then B on an idle service: its floor.
    a_alone(&client, &a, &a_contacts[..n.min(20_000)]).await?;
    let mut idle = Vec::new();
    for _ in 0..10 {
        idle.push(b_once(&client, &b, &b_contacts).await?);
    }
    idle.sort_by(f64::total_cmp);

    let alone_before = a_alone(&client, &a, &a_contacts).await?;

    // A again, with B's broadcasts started every `every` until A's ends.
    let t = Instant::now();
    let a_id = start(&client, &a, &a_contacts).await?;
    let a_done = {
        let (client, a_id) = (client.clone(), a_id.clone());
        let a = Tenant {
            key: a.key.clone(),
            template: a.template.clone(),
        };
        tokio::spawn(async move {
            completed(&client, &a, &a_id, n, Duration::from_millis(50))
                .await
                .map(|()| Instant::now())
        })
    };
    let mut waits = Vec::new();
    let mut next = Instant::now() + every / 4;
    while !a_done.is_finished() {
        tokio::time::sleep_until(next.into()).await;
        next += every;
        let client = client.clone();
        let b = Tenant {
            key: b.key.clone(),
            template: b.template.clone(),
        };
        let contacts = b_contacts.clone();
        waits.push(tokio::spawn(
            async move { b_once(&client, &b, &contacts).await },
        ));
    }
    let a_end = a_done.await??;
    let with_b = n as f64 / (a_end - t).as_secs_f64();
    let mut b_times = Vec::new();
    for w in waits {
        b_times.push(w.await??);
    }
    b_times.sort_by(f64::total_cmp);

    let alone_after = a_alone(&client, &a, &a_contacts).await?;
    let alone = (alone_before + alone_after) / 2.0;
    println!(
        "| {n} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.0} / {:.0} | {:.0} | {:.1}% |",
        b_times.len(),
        quantile(&idle, 0.5),
        quantile(&b_times, 0.5),
        quantile(&b_times, 0.99),
        b_times.last().copied().unwrap_or(f64::NAN),
        alone_before,
        alone_after,
        with_b,
        with_b * 100.0 / alone
    );
    drop(_worker);
    drop(_api);
    bench.finish().await
}

/// B's list requests, 4 at once, for `secs`: their times in seconds and statuses.
async fn b_lists(client: &reqwest::Client, b: &Tenant, secs: u64) -> Vec<(f64, u16)> {
    let until = Instant::now() + Duration::from_secs(secs);
    let lanes = (0..4).map(|_| {
        let (client, key) = (client.clone(), b.key.clone());
        tokio::spawn(async move {
            let mut seen = Vec::new();
            while Instant::now() < until {
                let t = Instant::now();
                let status = client
                    .get(format!("http://{API_ADDR}/api/v1/contacts?pageSize=20"))
                    .bearer_auth(&key)
                    .send()
                    .await
                    .map_or(0, |r| r.status().as_u16());
                seen.push((t.elapsed().as_secs_f64(), status));
            }
            seen
        })
    });
    let mut all = Vec::new();
    for lane in lanes {
        all.extend(lane.await.unwrap_or_default());
    }
    all
}

fn summary(seen: &[(f64, u16)]) -> String {
    let mut times: Vec<f64> = seen.iter().map(|(t, _)| *t * 1000.0).collect();
    times.sort_by(f64::total_cmp);
    let ok = seen.iter().filter(|(_, s)| *s == 200).count();
    format!(
        "{:.1} | {:.1} | {ok} of {}",
        quantile(&times, 0.5),
        quantile(&times, 0.99),
        seen.len()
    )
}

async fn counts(n: usize) -> anyhow::Result<()> {
    let bench = Bench::new("parley_bench_fairness").await?;
    bench.seed_contacts(n).await?;
    let b_org = parley_db::orgs::create(&mut *bench.pool.acquire().await?, "B").await?;
    sqlx::query(
        "INSERT INTO contacts (id, organization_id, name, email, source)
         SELECT gen_random_uuid(), $1, 'B', 'b' || i || '@example.com', 'bench'
         FROM generate_series(1, 100) AS i",
    )
    .bind(b_org.id)
    .execute(&bench.pool)
    .await?;
    sqlx::query("VACUUM ANALYZE contacts")
        .execute(&bench.pool)
        .await?;
    let _api = bench.spawn("parley-api", &[])?;
    let client = bench.api_ready().await?;
    let a = tenant(&bench, bench.org, &client).await?;
    let b = tenant(&bench, b_org.id, &client).await?;
    // A filter on an unindexed condition too: the count reads until its bound either way.
    let segment = post(
        &client,
        &a.key,
        "/segments",
        json!({"name": "Everyone", "filter": {"source": "bench"}}),
    )
    .await?;
    let alone = b_lists(&client, &b, 5).await;
    let stop = Instant::now() + Duration::from_secs(10);
    let counters = (0..40).map(|_| {
        let (client, key, segment) = (client.clone(), a.key.clone(), segment.clone());
        tokio::spawn(async move {
            let mut statuses = Vec::new();
            while Instant::now() < stop {
                let status = client
                    .get(format!("http://{API_ADDR}/api/v1/segments/{segment}/count"))
                    .bearer_auth(&key)
                    .send()
                    .await
                    .map_or(0, |r| r.status().as_u16());
                statuses.push(status);
                if status == 429 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            statuses
        })
    });
    let counters: Vec<_> = counters.collect();
    let beside = b_lists(&client, &b, 9).await;
    let mut a_statuses = std::collections::BTreeMap::<u16, usize>::new();
    for c in counters {
        for s in c.await? {
            *a_statuses.entry(s).or_default() += 1;
        }
    }
    println!(
        "| A's contacts | B alone p50 (ms) | p99 (ms) | answered 200 | B beside A's 40 counts p50 (ms) | p99 (ms) | answered 200 | A's counts by status |"
    );
    println!("|---:|---:|---:|---|---:|---:|---|---|");
    println!(
        "| {n} | {} | {} | {a_statuses:?} |",
        summary(&alone),
        summary(&beside)
    );
    drop(_api);
    bench.finish().await
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("counts") {
        let n = args.get(1).map_or(Ok(1_000_000), |a| a.parse())?;
        return counts(n).await;
    }
    let sizes: Vec<usize> = args
        .iter()
        .map(|a| a.parse().context("sizes are numbers"))
        .collect::<anyhow::Result<_>>()?;
    let sizes = if sizes.is_empty() {
        vec![100_000]
    } else {
        sizes
    };
    let sink_url = sink().await?;
    println!(
        "| A's N | B's broadcasts | B idle p50 (s) | B beside A p50 (s) | p99 (s) | max (s) | A alone before / after (r/s) | A beside B (r/s) | A beside B / A alone |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for n in sizes {
        run(n, &sink_url).await?;
    }
    Ok(())
}

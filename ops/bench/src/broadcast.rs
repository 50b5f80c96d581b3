//! Broadcast benchmark: N contacts, one template, one `sendNow` broadcast to a local HTTP sink
//! provider, timed from the create request until `completed`, with the workers' peak RSS.
//! The API and the workers run as release processes; Postgres and Redis are the real ones.
//!
//! In the same run it measures this machine's floors: the least work any design must do per
//! recipient, one insert and one update of its row, each a single statement over all N rows,
//! once on a minimal table (`id`, `broadcast_id`, `contact_id`, `status`, `sent_at`, unique on
//! the broadcast and the contact) and once on `broadcast_recipients` itself (with its indexes
//! and triggers), and prints Parley's ratio to each.
//!
//! With `PARLEY_BENCH_WORKERS` (e.g. `1 2 4`, default `1`) each size runs once per number of
//! worker processes sharing the broadcast; the sink checks that no recipient is sent twice.
//! With `PARLEY_BENCH_WARMUP=W` the workers first send a broadcast of W of the contacts, untimed,
//! so the timed one runs on workers whose connections are open and statements prepared (the
//! peak RSS is then the workers' peak over both).
//!
//! With `PARLEY_BENCH_RULES=1` the same run then gives the contacts four time zones and times
//! five more sends of all N, in turn: without sending rules, with the organization's frequency
//! cap on (not reached) and quiet hours configured (a window nobody is in), without, with, and
//! without; it prints the mean rate with the rules against the mean without (issue 29). Taking
//! them in turn cancels the drift of a growing recipients table.
//!
//! With `PARLEY_BENCH_LEDGER=L` it times five more sends of all N the same way, without and
//! with L entries in the organization's suppression ledger (addresses none of the contacts
//! has, half of them kept as an erased address's hash, so every recipient is still sent and
//! looked up both ways): what the ledger costs a send.
//!
//! Usage (through ops/bench/broadcast): parley-bench-broadcast <N>...

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use parley_bench::{API_ADDR, Bench, rss};
use serde_json::{Value, json};
use uuid::Uuid;

/// What the sink saw: messages, and the idempotency keys (recipient ids) seen more than once.
#[derive(Default)]
struct Seen {
    count: AtomicU64,
    keys: Mutex<HashSet<String>>,
    twice: AtomicU64,
}

/// A provider that accepts everything, as fast as it can.
async fn sink() -> anyhow::Result<(String, Arc<Seen>)> {
    let seen = Arc::new(Seen::default());
    let s = seen.clone();
    let app = axum::Router::new().route(
        "/send",
        axum::routing::post(move |headers: axum::http::HeaderMap| {
            let s = s.clone();
            async move {
                let n = s.count.fetch_add(1, Ordering::Relaxed);
                let key = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                if !s.keys.lock().unwrap().insert(key) {
                    s.twice.fetch_add(1, Ordering::Relaxed);
                }
                axum::Json(json!({"messageId": format!("sink-{n}")}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/send", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((url, seen))
}

struct Figures {
    n: usize,
    workers: usize,
    create_ms: f64,
    total_s: f64,
    per_second: f64,
    floor: f64,
    minimal_floor: f64,
    worker_peak_mib: f64,
    /// Processor seconds spent from the create request until `completed`, by command.
    cpu: Vec<(String, f64)>,
    /// The database's transactions, rows read and rows written, per recipient.
    per_recipient: Vec<f64>,
    /// With `PARLEY_BENCH_RULES=1`: recipients/s without rules, with, without, with, without.
    rules: Option<[f64; 5]>,
    /// With `PARLEY_BENCH_LEDGER=L`: the same without and with L ledger entries.
    ledger: Option<[f64; 5]>,
}

/// The database's committed transactions, rows read (returned by scans) and rows written, so
/// far (`pg_stat_database`).
async fn db_activity(pool: &sqlx::PgPool) -> anyhow::Result<[i64; 3]> {
    let (xacts, read, written): (i64, i64, i64) = sqlx::query_as(
        "SELECT xact_commit, tup_returned, tup_inserted + tup_updated + tup_deleted
         FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(pool)
    .await?;
    Ok([xacts, read, written])
}

async fn run(n: usize, workers: usize, sink_url: &str, seen: &Seen) -> anyhow::Result<Figures> {
    let entries: usize = parley_bench::env("PARLEY_BENCH_LEDGER", "0")
        .parse()
        .context("PARLEY_BENCH_LEDGER is a number")?;
    let bench = Bench::new(&format!("parley_bench_{n}")).await?;
    let (pool, key) = (&bench.pool, &bench.key);
    let contacts = bench.seed_contacts(n).await?;
    sqlx::query("VACUUM ANALYZE contacts").execute(pool).await?;
    let provider = [("PARLEY_CHANNEL_EMAIL_URL", sink_url)];
    let _api = bench.spawn("parley-api", &provider)?;
    let running = (0..workers)
        .map(|_| bench.spawn("parley-worker", &provider))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let pids: Vec<u32> = running.iter().map(|w| w.0.id()).collect();
    let peak = |now: u64| {
        pids.iter()
            .filter_map(|pid| rss(*pid))
            .map(|(_, hwm)| hwm)
            .fold(now, u64::max)
    };
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

    // Workers that have sent before: their connections open, their statements prepared.
    let warmup = parley_bench::env("PARLEY_BENCH_WARMUP", "0")
        .parse::<usize>()
        .context("PARLEY_BENCH_WARMUP is a number")?;
    if warmup > 0 {
        let first: Vec<Uuid> = contacts.iter().take(warmup).copied().collect();
        send(&bench, &client, &template, &first, || {}).await?;
        let twice = seen.twice.load(Ordering::Relaxed);
        if twice > 0 {
            bail!("the warm-up sent {twice} recipients twice");
        }
    }

    let before = seen.count.load(Ordering::Relaxed);
    seen.keys.lock().unwrap().clear();
    seen.twice.store(0, Ordering::Relaxed);
    let db_before = db_activity(pool).await?;
    let cpu_before = parley_bench::cpu_ticks();
    let started = Instant::now();
    let mut peak_kib = 0;
    send(&bench, &client, &template, &contacts, || {
        peak_kib = peak(peak_kib)
    })
    .await?;
    let total = started.elapsed().as_secs_f64();
    let cpu = parley_bench::cpu_spent(&cpu_before, &parley_bench::cpu_ticks());
    // Backends report their statistics within a second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let db_after = db_activity(pool).await?;
    let per_recipient: Vec<f64> = db_after
        .iter()
        .zip(&db_before)
        .map(|(a, b)| (a - b) as f64 / n as f64)
        .collect();
    peak_kib = peak(peak_kib);
    let sent = seen.count.load(Ordering::Relaxed) - before;
    let twice = seen.twice.load(Ordering::Relaxed);
    if sent != n as u64 || twice > 0 {
        bail!("the sink got {sent} messages for {n} recipients, {twice} sent twice");
    }
    let rules = if parley_bench::env("PARLEY_BENCH_RULES", "0") == "1" {
        set_zones(&bench).await?;
        Some(in_turn(&bench, &client, &template, &contacts, seen, Toggle::Rules).await?)
    } else {
        None
    };
    let ledger = if entries > 0 {
        let toggle = Toggle::Ledger(entries);
        Some(in_turn(&bench, &client, &template, &contacts, seen, toggle).await?)
    } else {
        None
    };
    drop(running);
    let floor = floor(&bench, draft.parse()?, &contacts).await?;
    let minimal_floor = minimal_floor(&bench, draft.parse()?, &contacts).await?;
    bench.finish().await?;
    Ok(Figures {
        n,
        workers,
        create_ms,
        total_s: total,
        per_second: n as f64 / total,
        floor,
        minimal_floor,
        worker_peak_mib: peak_kib as f64 / 1024.0,
        cpu,
        per_recipient,
        rules,
        ledger,
    })
}

/// Recipients per second of a send of all `contacts`, checked by the sink.
async fn timed(
    bench: &Bench,
    client: &reqwest::Client,
    template: &str,
    contacts: &[Uuid],
    seen: &Seen,
) -> anyhow::Result<f64> {
    let before = seen.count.load(Ordering::Relaxed);
    seen.keys.lock().unwrap().clear();
    seen.twice.store(0, Ordering::Relaxed);
    let started = Instant::now();
    send(bench, client, template, contacts, || {}).await?;
    let secs = started.elapsed().as_secs_f64();
    let (sent, twice) = (
        seen.count.load(Ordering::Relaxed) - before,
        seen.twice.load(Ordering::Relaxed),
    );
    if sent != contacts.len() as u64 || twice > 0 {
        bail!(
            "the sink got {sent} messages for {}, {twice} twice",
            contacts.len()
        );
    }
    Ok(contacts.len() as f64 / secs)
}

/// Sets the organization's sending rules: a frequency cap on email that these sends do not
/// reach, and quiet hours that no contact is in (local 03:00 to 04:00 ahead of UTC's time of
/// day: the contacts' zones are 0, +1, -5 and +9 hours from UTC); or none.
async fn set_rules(bench: &Bench, client: &reqwest::Client, on: bool) -> anyhow::Result<()> {
    let hhmm = |h: i64| {
        (chrono::Utc::now() + chrono::Duration::hours(h))
            .format("%H:%M")
            .to_string()
    };
    let body = if on {
        json!({"quietHours": {"start": hhmm(3), "end": hhmm(4)},
               "frequencyCaps": {"email": {"perDay": 1000, "perWeek": 1000}}})
    } else {
        json!({"quietHours": null, "frequencyCaps": {}})
    };
    let r = client
        .patch(format!("http://{API_ADDR}/api/v1/organization"))
        .bearer_auth(&bench.key)
        .json(&body)
        .send()
        .await?;
    if !r.status().is_success() {
        bail!("PATCH /organization answered {}", r.status());
    }
    // Each API process keeps the organization up to 30 s, but the worker reads it per job.
    Ok(())
}

/// What [`in_turn`] switches on and off.
#[derive(Clone, Copy)]
enum Toggle {
    /// The organization's sending rules ([`set_rules`]).
    Rules,
    /// This many entries in the suppression ledger, of addresses no contact has.
    Ledger(usize),
}

impl Toggle {
    async fn set(self, bench: &Bench, client: &reqwest::Client, on: bool) -> anyhow::Result<()> {
        match self {
            Toggle::Rules => set_rules(bench, client, on).await,
            Toggle::Ledger(entries) => {
                sqlx::query("DELETE FROM suppressions WHERE organization_id = $1")
                    .bind(bench.org)
                    .execute(&bench.pool)
                    .await?;
                if on {
                    // Half by address, half by an erased address's hash: each kind of
                    // entry a recipient is compared with.
                    sqlx::query(
                        "INSERT INTO suppressions (id, organization_id, email, address_hash,
                             reason, source, created_at)
                         SELECT uuid_v7(), $1,
                             CASE WHEN g % 2 = 0 THEN 'ledger' || g || '@example.org' END,
                             CASE WHEN g % 2 = 1
                                  THEN address_hash($1, 'ledger' || g || '@example.org') END,
                             'unsubscribed', 'api', now()
                         FROM generate_series(1, $2) g",
                    )
                    .bind(bench.org)
                    .bind(entries as i64)
                    .execute(&bench.pool)
                    .await?;
                }
                sqlx::query("VACUUM ANALYZE suppressions")
                    .execute(&bench.pool)
                    .await?;
                Ok(())
            }
        }
    }
}

/// Gives the contacts four time zones, for the sending rules' turns.
async fn set_zones(bench: &Bench) -> anyhow::Result<()> {
    sqlx::query(
        "UPDATE contacts SET timezone = (ARRAY['UTC', 'Europe/Berlin', 'America/New_York',
            'Asia/Tokyo'])[1 + abs(hashtext(id::text)) % 4]",
    )
    .execute(&bench.pool)
    .await?;
    sqlx::query("VACUUM ANALYZE contacts")
        .execute(&bench.pool)
        .await?;
    Ok(())
}

/// Sends of all `contacts` without `toggle` and with it, in turn: without, with, without,
/// with, without (the rules: issue 29's benchmark; the ledger: issue 45's).
async fn in_turn(
    bench: &Bench,
    client: &reqwest::Client,
    template: &str,
    contacts: &[Uuid],
    seen: &Seen,
    toggle: Toggle,
) -> anyhow::Result<[f64; 5]> {
    let mut rates = [0.0; 5];
    for (i, on) in [false, true, false, true, false].into_iter().enumerate() {
        toggle.set(bench, client, on).await?;
        rates[i] = timed(bench, client, template, contacts, seen).await?;
    }
    Ok(rates)
}

/// Sends a `sendNow` broadcast to `contacts` and waits for it to complete with every one sent,
/// calling `each_poll` at every look at its status (every 50 ms).
async fn send(
    bench: &Bench,
    client: &reqwest::Client,
    template: &str,
    contacts: &[Uuid],
    mut each_poll: impl FnMut(),
) -> anyhow::Result<()> {
    let started = Instant::now();
    let body = json!({"broadcastName": "bench", "templateId": template, "contactIds": contacts, "sendNow": true});
    let id = bench.create(client, "/broadcasts", &body).await?;
    loop {
        each_poll();
        let b: Value = client
            .get(format!("http://{API_ADDR}/api/v1/broadcasts/{id}"))
            .bearer_auth(&bench.key)
            .send()
            .await?
            .json()
            .await?;
        match b["data"]["status"].as_str() {
            Some("completed") => {
                if b["data"]["sentCount"].as_u64() != Some(contacts.len() as u64) {
                    bail!(
                        "completed with {} sent of {}",
                        b["data"]["sentCount"],
                        contacts.len()
                    );
                }
                return Ok(());
            }
            Some("failed" | "paused" | "cancelled") => bail!("broadcast ended {}", b["data"]),
            _ => {}
        }
        if started.elapsed() > Duration::from_secs(1800) {
            bail!("no end after 30 minutes");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Recipients per second when each is one row inserted and then updated to `sent`, all N
/// rows in one statement each: the machine's floor for the same table.
async fn floor(bench: &Bench, broadcast: Uuid, contacts: &[Uuid]) -> anyhow::Result<f64> {
    insert_then_update(
        bench,
        "INSERT INTO broadcast_recipients (id, organization_id, broadcast_id, contact_id, enqueued_at)
         SELECT u.id, (SELECT organization_id FROM broadcasts WHERE id = $1), $1, u.contact_id,
             clock_timestamp()
         FROM unnest($2::uuid[], $3::uuid[]) AS u(id, contact_id)",
        "UPDATE broadcast_recipients SET status = 'sent', external_message_id = 'floor-' || id,
             sent_at = clock_timestamp()
         WHERE broadcast_id = $1 AND status = 'pending'",
        broadcast,
        contacts,
    )
    .await
}

/// [`floor`] on a table of the least a recipient can be: made, written and dropped here.
async fn minimal_floor(bench: &Bench, broadcast: Uuid, contacts: &[Uuid]) -> anyhow::Result<f64> {
    sqlx::query("DROP TABLE IF EXISTS bench_minimal_recipients")
        .execute(&bench.pool)
        .await?;
    sqlx::query(
        "CREATE TABLE bench_minimal_recipients (id uuid PRIMARY KEY, broadcast_id uuid NOT NULL,
             contact_id uuid NOT NULL, status text NOT NULL DEFAULT 'pending', sent_at timestamptz,
             UNIQUE (broadcast_id, contact_id))",
    )
    .execute(&bench.pool)
    .await?;
    let rate = insert_then_update(
        bench,
        "INSERT INTO bench_minimal_recipients (id, broadcast_id, contact_id)
         SELECT u.id, $1, u.contact_id FROM unnest($2::uuid[], $3::uuid[]) AS u(id, contact_id)",
        "UPDATE bench_minimal_recipients SET status = 'sent', sent_at = clock_timestamp()
         WHERE broadcast_id = $1 AND status = 'pending'",
        broadcast,
        contacts,
    )
    .await?;
    sqlx::query("DROP TABLE bench_minimal_recipients")
        .execute(&bench.pool)
        .await?;
    Ok(rate)
}

/// Rows per second of `insert` (bound to the broadcast, new ids and `contacts`) then `update`
/// (bound to the broadcast), one statement each.
async fn insert_then_update(
    bench: &Bench,
    insert: &'static str,
    update: &'static str,
    broadcast: Uuid,
    contacts: &[Uuid],
) -> anyhow::Result<f64> {
    let ids: Vec<Uuid> = contacts.iter().map(|_| Uuid::now_v7()).collect();
    // The writes before (the send, the other floor) are flushed first, not timed here.
    sqlx::query("CHECKPOINT").execute(&bench.pool).await?;
    let started = Instant::now();
    sqlx::query(insert)
        .bind(broadcast)
        .bind(&ids)
        .bind(contacts)
        .execute(&bench.pool)
        .await?;
    sqlx::query(update)
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
    let workers: Vec<usize> = parley_bench::env("PARLEY_BENCH_WORKERS", "1")
        .split_whitespace()
        .map(|w| w.parse().context("PARLEY_BENCH_WORKERS holds numbers"))
        .collect::<anyhow::Result<_>>()?;
    let (sink_url, seen) = sink().await?;
    let redis_nodes = parley_bench::env("REDIS_URL", "redis://127.0.0.1:6379")
        .split(',')
        .count();
    if redis_nodes > 1 {
        println!("Redis: a cluster, {redis_nodes} nodes");
    } else {
        println!("Redis: one server");
    }
    println!(
        "| N | workers | create 10k contactIds (ms, best of 5) | create to completed (s) | recipients/s | minimal floor: insert + update (recipients/s) | Parley / minimal floor | floor on broadcast_recipients | Parley / that floor | peak RSS of a worker (MiB) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut cpu = Vec::new();
    let mut rules = Vec::new();
    let mut ledger = Vec::new();
    for n in sizes {
        for w in &workers {
            let f = run(n, *w, &sink_url, &seen).await?;
            cpu.push((f.n, f.workers, f.cpu.clone(), f.per_recipient.clone()));
            if let Some(r) = f.rules {
                rules.push((f.n, f.workers, r));
            }
            if let Some(r) = f.ledger {
                ledger.push((f.n, f.workers, r));
            }
            println!(
                "| {} | {} | {:.1} | {:.2} | {:.0} | {:.0} | {:.0}% | {:.0} | {:.0}% | {:.1} |",
                f.n,
                f.workers,
                f.create_ms,
                f.total_s,
                f.per_second,
                f.minimal_floor,
                f.per_second * 100.0 / f.minimal_floor,
                f.floor,
                f.per_second * 100.0 / f.floor,
                f.worker_peak_mib
            );
        }
    }
    // Where the machine's processor time went during each send (the sink and the status polls
    // are this benchmark's own process).
    println!();
    println!(
        "| N | workers | processor seconds from create to completed, by command | transactions / recipient | rows read / recipient | rows written / recipient |"
    );
    println!("|---:|---:|---|---:|---:|---:|");
    for (n, workers, spent, per) in cpu {
        let spent: Vec<String> = spent.iter().map(|(c, s)| format!("{c} {s:.1}")).collect();
        println!(
            "| {n} | {workers} | {} | {:.3} | {:.1} | {:.2} |",
            spent.join(", "),
            per[0],
            per[1],
            per[2]
        );
    }
    print_in_turn(
        &rules,
        "without, with (cap on + quiet hours configured), without, with, without",
    );
    let entries = parley_bench::env("PARLEY_BENCH_LEDGER", "0");
    print_in_turn(
        &ledger,
        &format!("without, with {entries} ledger entries, without, with, without"),
    );
    Ok(())
}

/// The table of sends in turn ([`in_turn`]): each rate, and the mean with against the mean
/// without.
fn print_in_turn(rows: &[(usize, usize, [f64; 5])], turns: &str) {
    if rows.is_empty() {
        return;
    }
    println!();
    println!("| N | workers | recipients/s in turn: {turns} | mean with / mean without |");
    println!("|---:|---:|---|---:|");
    for (n, workers, r) in rows {
        let without = (r[0] + r[2] + r[4]) / 3.0;
        let with = (r[1] + r[3]) / 2.0;
        let each: Vec<String> = r.iter().map(|x| format!("{x:.0}")).collect();
        println!(
            "| {n} | {workers} | {} | {:.0}% |",
            each.join(", "),
            with * 100.0 / without
        );
    }
}

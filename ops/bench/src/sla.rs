//! SLA benchmark, two parts on fresh databases:
//! - breach lag: N open SLA states (tickets) whose first-response deadlines fall evenly over
//!   one minute, one worker process; the lag from each deadline to its breach record (p50,
//!   p99, max), read from Postgres once every breach is recorded;
//! - statistics: M SLA states over 30 days (a third met, a third breached, a third open,
//!   four priorities), the API process; the time of `GET /api/v1/statistics/sla` over all of
//!   them, and over a range whose ends fall inside hours.
//!
//! States are written straight to Postgres in batches (what the API would have written,
//! without the requests). Usage (through ops/bench/sla): parley-bench-sla [N M]

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use parley_bench::{API_ADDR, Bench};

const BATCH: i64 = 100_000;

/// Where seeded first-response deadlines fall.
enum Deadlines {
    /// From this instant, evenly over this many seconds.
    Spread(chrono::DateTime<chrono::Utc>, f64),
    /// A minute after each state started.
    AfterAMinute,
}

/// `n` tickets with SLA states started over the last `spread_secs` seconds, with
/// `deadlines`; with `outcomes`, a third met, a third breached and a third open (otherwise
/// all open); priorities in turn.
async fn seed(
    bench: &Bench,
    n: i64,
    spread_secs: f64,
    deadlines: Deadlines,
    outcomes: bool,
) -> anyhow::Result<()> {
    let (start, span) = match deadlines {
        Deadlines::Spread(start, span) => (Some(start), span),
        Deadlines::AfterAMinute => (None, 0.0),
    };
    let mut from = 1;
    while from <= n {
        let to = (from + BATCH - 1).min(n);
        let mut tx = bench.pool.begin().await?;
        sqlx::query(
            "INSERT INTO tickets (id, organization_id, reference_number, subject, access_token, created_at, updated_at)
             SELECT uuid_v7(), $1, i, 'bench', md5(i::text),
                    clock_timestamp() - make_interval(secs => $4 * (1 - i::float8 / $5)), now()
             FROM generate_series($2::int8, $3::int8) AS i",
        )
        .bind(bench.org)
        .bind(from)
        .bind(to)
        .bind(spread_secs)
        .bind(n as f64)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO sla_states (id, organization_id, subject_type, ticket_id, priority,
                business_hours_only, warning_threshold_seconds, first_response_seconds,
                next_response_seconds, resolution_seconds, first_response_deadline,
                first_response_at, first_response_breached_at, resolution_deadline, resolved_at,
                created_at, updated_at)
             SELECT uuid_v7(), t.organization_id, 'ticket', t.id,
                (ARRAY['low', 'medium', 'high', 'urgent'])[1 + t.reference_number % 4],
                false, 0, 60, 3600, 86400, d.deadline,
                CASE WHEN $6 AND t.reference_number % 3 = 0 THEN t.created_at + interval '30 seconds' END,
                CASE WHEN $6 AND t.reference_number % 3 = 1 THEN t.created_at + interval '1 hour' END,
                t.created_at + interval '1 day',
                CASE WHEN $6 AND t.reference_number % 3 = 0 THEN t.created_at + interval '2 hours' END,
                t.created_at, now()
             FROM tickets t,
                  LATERAL (SELECT coalesce($4::timestamptz + make_interval(secs => $5 * t.reference_number::float8 / $7),
                                           t.created_at + interval '1 minute') AS deadline) d
             WHERE t.organization_id = $1 AND t.reference_number BETWEEN $2 AND $3",
        )
        .bind(bench.org)
        .bind(from)
        .bind(to)
        .bind(start)
        .bind(span)
        .bind(outcomes)
        .bind(n as f64)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        from = to + 1;
    }
    Ok(())
}

/// Breach lag of `n` deadlines spread over a minute: (p50, p99, max) in ms, and the seconds
/// the last breach took after the last deadline.
async fn lag(n: i64) -> anyhow::Result<(f64, f64, f64)> {
    let bench = Bench::new("parley_bench_sla_lag").await?;
    // Deadlines start once seeding (and a worker start) is surely over.
    let lead = 20.0 + n as f64 / 20_000.0;
    let seeding = Instant::now();
    let first = chrono::Utc::now() + chrono::Duration::milliseconds((lead * 1000.0) as i64);
    seed(&bench, n, 0.0, Deadlines::Spread(first, 60.0), false).await?;
    sqlx::query(
        "INSERT INTO sla_checks (id, organization_id, sla_state_id, target, kind, due_at)
         SELECT uuid_v7(), organization_id, id, 'first_response', 'deadline', first_response_deadline
         FROM sla_states WHERE organization_id = $1",
    )
    .bind(bench.org)
    .execute(&bench.pool)
    .await?;
    sqlx::query("ANALYZE").execute(&bench.pool).await?;
    let seeded = seeding.elapsed().as_secs_f64();
    if seeded > lead - 5.0 {
        bail!("seeding took {seeded:.0} s, too close to the first deadline");
    }
    let _worker = bench.spawn("parley-worker", &[])?;
    let started = Instant::now();
    loop {
        let done: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM sla_states WHERE organization_id = $1 AND first_response_breached_at IS NOT NULL",
        )
        .bind(bench.org)
        .fetch_one(&bench.pool)
        .await?;
        if done == n {
            break;
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("{done} of {n} breaches recorded after 10 minutes");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (p50, p99, max): (f64, f64, f64) = sqlx::query_as(
        "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), percentile_cont(0.99) WITHIN GROUP (ORDER BY ms), max(ms)
         FROM (SELECT (extract(epoch FROM first_response_breached_at - first_response_deadline) * 1000)::float8 AS ms
               FROM sla_states WHERE organization_id = $1) x",
    )
    .bind(bench.org)
    .fetch_one(&bench.pool)
    .await?;
    let early: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sla_states WHERE organization_id = $1 AND first_response_breached_at < first_response_deadline",
    )
    .bind(bench.org)
    .fetch_one(&bench.pool)
    .await?;
    if early > 0 {
        bail!("{early} breaches recorded before their deadline");
    }
    bench.finish().await?;
    Ok((p50, p99, max))
}

/// Milliseconds of `GET path` (median and p95 of 20, after 3 warm-ups).
async fn time_get(
    client: &reqwest::Client,
    key: &str,
    path: &str,
) -> anyhow::Result<(f64, f64, serde_json::Value)> {
    let mut times = Vec::new();
    let mut last = serde_json::Value::Null;
    for i in 0..23 {
        let started = Instant::now();
        let resp = client
            .get(format!("http://{API_ADDR}{path}"))
            .bearer_auth(key)
            .send()
            .await?;
        if !resp.status().is_success() {
            bail!("{path}: {}", resp.status());
        }
        last = resp.json().await?;
        if i >= 3 {
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    times.sort_by(|a, b| a.total_cmp(b));
    Ok((times[times.len() / 2], times[times.len() * 95 / 100], last))
}

async fn statistics(m: i64) -> anyhow::Result<Vec<(String, f64, f64)>> {
    let bench = Bench::new("parley_bench_sla_stats").await?;
    seed(&bench, m, 30.0 * 86_400.0, Deadlines::AfterAMinute, true).await?;
    sqlx::query("ANALYZE").execute(&bench.pool).await?;
    let _api = bench.spawn("parley-api", &[])?;
    let client = bench.api_ready().await?;
    let now = chrono::Utc::now();
    let iso =
        |t: chrono::DateTime<chrono::Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let ranged = format!(
        "/api/v1/statistics/sla?from={}&to={}",
        iso(now - chrono::Duration::days(20) - chrono::Duration::minutes(17)),
        iso(now - chrono::Duration::days(1) + chrono::Duration::minutes(23)),
    );
    let mut out = Vec::new();
    for (label, path) in [
        ("all time", "/api/v1/statistics/sla".to_owned()),
        ("from/to inside hours, 19 days", ranged),
    ] {
        let (p50, p95, body) = time_get(&client, &bench.key, &path).await?;
        let total = body["data"]["total"].as_i64().context("a total")?;
        let (met, breached, open) = (
            body["data"]["met"].as_i64().unwrap_or(0),
            body["data"]["breached"].as_i64().unwrap_or(0),
            body["data"]["inProgress"].as_i64().unwrap_or(0),
        );
        if met + breached + open != total || total == 0 {
            bail!("{label}: figures do not add up: {body}");
        }
        out.push((format!("{label} ({total} states)"), p50, p95));
    }
    // The figures equal a count over the states themselves.
    let direct: i64 =
        sqlx::query_scalar("SELECT count(*) FROM sla_states WHERE organization_id = $1")
            .bind(bench.org)
            .fetch_one(&bench.pool)
            .await?;
    if direct != m {
        bail!("{direct} states seeded, {m} expected");
    }
    bench.finish().await?;
    Ok(out)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<i64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().context("arguments are numbers"))
        .collect::<anyhow::Result<_>>()?;
    let (n, m) = match args.as_slice() {
        [] => (100_000, 1_000_000),
        [n, m] => (*n, *m),
        _ => bail!("usage: parley-bench-sla [N M]"),
    };
    let (p50, p99, max) = lag(n).await?;
    let stats = statistics(m).await?;
    println!("| measure | value |");
    println!("|---|---:|");
    println!("| breach lag, {n} deadlines over one minute, p50 (ms) | {p50:.0} |");
    println!("| breach lag, p99 (ms) | {p99:.0} |");
    println!("| breach lag, max (ms) | {max:.0} |");
    for (label, p50, p95) in stats {
        println!("| GET /statistics/sla, {label}, median / p95 (ms) | {p50:.1} / {p95:.1} |");
    }
    Ok(())
}

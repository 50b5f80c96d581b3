//! Contact import benchmark, on a fresh database each: an N-row CSV (email, name, phone,
//! country) recorded as an import (what `POST /contacts/imports` records for an inline file,
//! without the request and its body limit), one `parley-worker` process, timed from the job's
//! enqueue until the import is `completed`; then the same file again (every row unchanged).
//! The worker's peak RSS is read from /proc. Usage (through ops/bench/imports):
//! parley-bench-imports [N...]   (default 1000000)
//!
//! `parley-bench-imports unclosed [MiB]` (default 100) instead downloads a CSV of that size whose
//! second line opens a quote never closed (served by this process on 127.0.0.1, as an upload's
//! presigned URL would be), and prints the worker's resident memory idle and at its peak, and
//! how the import ended.

use parley_types::ids::{ImportId, OrgId};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::bail;
use parley_bench::{Bench, rss};
use parley_domain::imports::ImportFormat;

/// The import as Postgres holds it now.
async fn import_now(
    bench: &Bench,
    id: uuid::Uuid,
) -> anyhow::Result<parley_domain::imports::ContactImport> {
    Ok(
        parley_db::imports::get(&bench.pool, OrgId::from(bench.org), ImportId::from(id))
            .await?
            .expect("the import"),
    )
}

async fn run_import(
    bench: &Bench,
    jobs: &parley_jobs::Jobs,
    csv: &[u8],
) -> anyhow::Result<(f64, serde_json::Value)> {
    let import = parley_db::imports::create(
        &bench.pool,
        OrgId::from(bench.org),
        ImportFormat::Csv,
        Some(csv),
        None,
        None,
    )
    .await?;
    let started = Instant::now();
    jobs.import_contacts(import.id).await?;
    loop {
        let now = import_now(bench, import.id).await?;
        match now.status.as_str() {
            "completed" => {
                return Ok((started.elapsed().as_secs_f64(), serde_json::to_value(&now)?));
            }
            "failed" => bail!("the import failed: {:?}", now.error_message),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
        if started.elapsed() > Duration::from_secs(900) {
            bail!("the import did not end in 15 minutes");
        }
    }
}

/// A producer of jobs for the bench's workers (its Redis prefix).
async fn producer(bench: &Bench) -> anyhow::Result<parley_jobs::Jobs> {
    let redis = parley_jobs::redis_conn::Redis::connect(
        &parley_jobs::redis_conn::RedisTarget::new(
            &parley_bench::env("REDIS_URL", "redis://127.0.0.1:6379"),
            false,
        ),
        &bench.prefix,
    )
    .await?;
    Ok(parley_jobs::Jobs::new(&redis))
}

/// Serves `mib` MiB of CSV whose second line opens a quote never closed, on 127.0.0.1; its URL.
async fn unclosed_file(mib: usize) -> anyhow::Result<String> {
    let mut body = String::from("email,name\nada@example.com,\"Ada\n");
    while body.len() < mib << 20 {
        body.push_str("grace@example.com,Grace Hopper of the United States Navy\n");
    }
    let body = bytes::Bytes::from(body);
    let app = axum::Router::new().route(
        "/file.csv",
        axum::routing::get(move || {
            let body = body.clone();
            async move { body }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/file.csv", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok(url)
}

async fn unclosed(mib: usize) -> anyhow::Result<()> {
    let bench = Bench::new("parley_bench_imports").await?;
    let url = unclosed_file(mib).await?;
    let worker = bench.spawn("parley-worker", &[])?;
    let jobs = producer(&bench).await?;
    // Idle: started, connected, its loops running.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (idle, _) = rss(worker.0.id()).unwrap_or_default();
    let import = parley_db::imports::create(
        &bench.pool,
        OrgId::from(bench.org),
        ImportFormat::Csv,
        None,
        None,
        Some(&url),
    )
    .await?;
    let started = Instant::now();
    jobs.import_contacts(import.id).await?;
    let ended = loop {
        let now = import_now(&bench, import.id).await?;
        if matches!(now.status.as_str(), "completed" | "failed") {
            break now;
        }
        if started.elapsed() > Duration::from_secs(300) {
            bail!("the import did not end in 5 minutes");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (_, peak) = rss(worker.0.id()).unwrap_or_default();
    println!(
        "| file (MiB) | worker RSS idle (MiB) | worker peak RSS (MiB) | peak over idle (MiB) | import | took (s) | errorMessage |"
    );
    println!("|---:|---:|---:|---:|---|---:|---|");
    println!(
        "| {mib} | {:.1} | {:.1} | {:.1} | {} | {:.2} | {} |",
        idle as f64 / 1024.0,
        peak as f64 / 1024.0,
        peak.saturating_sub(idle) as f64 / 1024.0,
        ended.status,
        started.elapsed().as_secs_f64(),
        ended.error_message.unwrap_or_default()
    );
    drop(worker);
    bench.finish().await
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("unclosed") {
        let mib = args.get(1).map_or(Ok(100), |a| a.parse())?;
        return unclosed(mib).await;
    }
    let sizes: Vec<usize> = args.iter().map(|a| a.parse()).collect::<Result<_, _>>()?;
    let sizes = if sizes.is_empty() {
        vec![1_000_000]
    } else {
        sizes
    };
    println!(
        "| rows | file (MB) | first import (s) | rows/s | again, unchanged (s) | rows/s | worker peak RSS (MiB) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for n in sizes {
        let bench = Bench::new("parley_bench_imports").await?;
        let mut csv = String::from("email,name,phone,country\n");
        for i in 0..n {
            writeln!(csv, "user{i}@example.com,User {i},+1555{i:07},US")?;
        }
        let csv = csv.into_bytes();
        let worker = bench.spawn("parley-worker", &[])?;
        let jobs = producer(&bench).await?;
        let (first, i1) = run_import(&bench, &jobs, &csv).await?;
        if i1["created"] != n as i64 {
            bail!("expected {n} created: {i1}");
        }
        let (again, i2) = run_import(&bench, &jobs, &csv).await?;
        if i2["unchanged"] != n as i64 {
            bail!("expected {n} unchanged: {i2}");
        }
        let peak = rss(worker.0.id())
            .map(|(_, hwm)| hwm as f64 / 1024.0)
            .unwrap_or(0.0);
        println!(
            "| {n} | {:.1} | {first:.2} | {:.0} | {again:.2} | {:.0} | {peak:.1} |",
            csv.len() as f64 / 1e6,
            n as f64 / first,
            n as f64 / again,
        );
        drop(worker);
        bench.finish().await?;
    }
    Ok(())
}

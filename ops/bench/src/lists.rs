//! List benchmark: `GET /api/v1/contacts` at N contacts (fresh database each, one org; a
//! tenth of the contacts have `source = ads`), through the `parley-api` process: page 1 of 100,
//! the same filtered by `source=ads`, page 500, and the page after page 1 by `cursor`. Median
//! of 5 requests after 2 warm-ups. Usage (through ops/bench/lists): parley-bench-lists [N...]
//! (default 10000 1000000)

use std::time::Instant;

use parley_bench::{API_ADDR, Bench};

async fn median_ms(
    client: &reqwest::Client,
    key: &str,
    path: &str,
) -> anyhow::Result<(f64, serde_json::Value)> {
    let url = format!("http://{API_ADDR}/api/v1{path}");
    let mut times = Vec::new();
    let mut last = serde_json::Value::Null;
    for i in 0..7 {
        let started = Instant::now();
        let r = client.get(&url).bearer_auth(key).send().await?;
        let status = r.status();
        last = r.json().await?;
        if !status.is_success() {
            anyhow::bail!("GET {path}: {status} {last}");
        }
        if i >= 2 {
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], last))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let sizes = if sizes.is_empty() {
        vec![10_000, 1_000_000]
    } else {
        sizes
    };
    println!(
        "| contacts | page 1 (ms) | `source=ads` (ms) | page 500 (ms) | next page by cursor (ms) | meta.total, totalExact |"
    );
    println!("|---:|---:|---:|---:|---:|---|");
    for n in sizes {
        let bench = Bench::new("parley_bench_lists").await?;
        bench.seed_contacts(n).await?;
        sqlx::query(
            "UPDATE contacts SET source = 'ads' WHERE organization_id = $1 AND hashtext(email) % 10 = 0",
        )
        .bind(bench.org)
        .execute(&bench.pool)
        .await?;
        sqlx::query("VACUUM ANALYZE contacts")
            .execute(&bench.pool)
            .await?;
        let _api = bench.spawn("parley-api", &[])?;
        let client = bench.api_ready().await?;
        let (first, body) = median_ms(&client, &bench.key, "/contacts?pageSize=100").await?;
        let (ads, _) = median_ms(&client, &bench.key, "/contacts?pageSize=100&source=ads").await?;
        let (deep, _) = median_ms(&client, &bench.key, "/contacts?pageSize=100&page=500").await?;
        let cursor = body["meta"]["endCursor"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let (next, _) = median_ms(
            &client,
            &bench.key,
            &format!("/contacts?pageSize=100&cursor={cursor}"),
        )
        .await?;
        println!(
            "| {n} | {first:.1} | {ads:.1} | {deep:.1} | {next:.1} | {}, {} |",
            body["meta"]["total"], body["meta"]["totalExact"]
        );
        drop(_api);
        bench.finish().await?;
    }
    Ok(())
}

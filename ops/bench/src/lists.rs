//! List benchmark, through the `parley-api` process on a fresh database for each N (one
//! organization): N contacts (a tenth with `source = ads`), N leads (a tenth `source = ads`)
//! and N recipients of one broadcast (a tenth `failed`), each list read with `pageSize=100`:
//! page 1, the same filtered (the tenth), page 500, and the page after page 1 by `cursor`.
//! Median of 5 requests after 2 warm-ups. Usage (through ops/bench/lists):
//! parley-bench-lists [N...] (default 10000 1000000)

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
        "| list | rows | page 1 (ms) | filtered (ms) | page 500 (ms) | next page by cursor (ms) | meta.total, totalExact |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    for n in sizes {
        let bench = Bench::new("parley_bench_lists").await?;
        let contacts = bench.seed_contacts(n).await?;
        sqlx::query(
            "UPDATE contacts SET source = 'ads' WHERE organization_id = $1 AND hashtext(email) % 10 = 0",
        )
        .bind(bench.org)
        .execute(&bench.pool)
        .await?;
        sqlx::query(
            "INSERT INTO leads (id, organization_id, name, source)
             SELECT uuid_v7(), $1, 'Lead ' || i, CASE WHEN i % 10 = 0 THEN 'ads' ELSE 'web' END
             FROM generate_series(1, $2::int8) AS i",
        )
        .bind(bench.org)
        .bind(n as i64)
        .execute(&bench.pool)
        .await?;
        let _api = bench.spawn("parley-api", &[])?;
        let client = bench.api_ready().await?;
        let template = bench.template(&client).await?;
        let broadcast = bench
            .create(
                &client,
                "/broadcasts",
                &serde_json::json!({"broadcastName": "Lists", "templateId": template,
                                    "contactIds": [contacts[0]]}),
            )
            .await?;
        sqlx::query(
            "INSERT INTO broadcast_recipients (id, organization_id, broadcast_id, contact_id, status)
             SELECT uuid_v7(), $1, $2::uuid, uuid_v7(),
                    CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'sent' END
             FROM generate_series(1, $3::int8) AS i",
        )
        .bind(bench.org)
        .bind(&broadcast)
        .bind(n as i64)
        .execute(&bench.pool)
        .await?;
        for table in ["contacts", "leads", "broadcast_recipients"] {
            sqlx::query(sqlx::AssertSqlSafe(format!("VACUUM ANALYZE {table}")))
                .execute(&bench.pool)
                .await?;
        }
        let recipients = format!("/broadcasts/{broadcast}/recipients");
        for (label, path, filter) in [
            ("contacts", "/contacts".to_owned(), "source=ads"),
            ("leads", "/leads".to_owned(), "source=ads"),
            ("broadcast recipients", recipients, "status=failed"),
        ] {
            let (first, body) =
                median_ms(&client, &bench.key, &format!("{path}?pageSize=100")).await?;
            let (filtered, _) = median_ms(
                &client,
                &bench.key,
                &format!("{path}?pageSize=100&{filter}"),
            )
            .await?;
            let (deep, _) = median_ms(
                &client,
                &bench.key,
                &format!("{path}?pageSize=100&page=500"),
            )
            .await?;
            let cursor = body["meta"]["endCursor"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let (next, _) = median_ms(
                &client,
                &bench.key,
                &format!("{path}?pageSize=100&cursor={cursor}"),
            )
            .await?;
            println!(
                "| {label} (`{filter}`) | {n} | {first:.1} | {filtered:.1} | {deep:.1} | {next:.1} | {}, {} |",
                body["meta"]["total"], body["meta"]["totalExact"]
            );
        }
        drop(_api);
        bench.finish().await?;
    }
    Ok(())
}

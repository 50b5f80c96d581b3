//! Preview benchmark, through the `parley-api` process on a fresh database: a draft broadcast
//! whose audience is a segment of N contacts (`source = 'bench'`), previewed with every rule
//! on the way: a frequency cap on email (read in Redis for each contact to send), a topic the
//! broadcast names (1% left it), 1% of the addresses in the ledger (`hard_bounce`) and 1%
//! `doNotContact`; then the same without the cap (no Redis). Beside it, in the same run: `SELECT count(*)` of the same segment (the
//! floor of reading it at all) and `GET /healthz` through the API (the HTTP floor). Medians of
//! 3 after 1 warm-up. Usage (through ops/bench/preview): parley-bench-preview [N] (default
//! 1000000)

use std::time::Instant;

use parley_bench::{API_ADDR, Bench};
use serde_json::json;

async fn median_ms<F, Fut>(mut f: F) -> anyhow::Result<(f64, serde_json::Value)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<serde_json::Value>>,
{
    let mut last = f().await?;
    let mut times = Vec::new();
    for _ in 0..3 {
        let started = Instant::now();
        last = f().await?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(f64::total_cmp);
    Ok((times[1], last))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let bench = Bench::new("parley_bench_preview").await?;
    let started = Instant::now();
    bench.seed_contacts(n).await?;
    sqlx::query(
        "UPDATE contacts SET do_not_contact = true
         WHERE organization_id = $1 AND abs(hashtext(email)) % 100 = 1",
    )
    .bind(bench.org)
    .execute(&bench.pool)
    .await?;
    sqlx::query(
        "INSERT INTO suppressions (id, organization_id, email, reason, source, created_at)
         SELECT uuid_v7(), $1, email, 'hard_bounce', 'api', clock_timestamp() FROM contacts
         WHERE organization_id = $1 AND abs(hashtext(email)) % 100 = 2",
    )
    .bind(bench.org)
    .execute(&bench.pool)
    .await?;
    sqlx::query("VACUUM ANALYZE contacts")
        .execute(&bench.pool)
        .await?;
    let _api = bench.spawn("parley-api", &[("PARLEY_REQUEST_TIMEOUT_SECS", "600")])?;
    let client = bench.api_ready().await?;
    let template = bench.template(&client).await?;
    let segment = bench
        .create(
            &client,
            "/segments",
            &json!({"name": "Everyone", "filter": {"source": "bench"}}),
        )
        .await?;
    let topic = bench
        .create(&client, "/topics", &json!({"name": "News"}))
        .await?;
    sqlx::query(
        "INSERT INTO topic_unsubscribes (organization_id, contact_id, topic_id, source)
         SELECT $1, id, $2::uuid, 'api' FROM contacts
         WHERE organization_id = $1 AND abs(hashtext(email)) % 100 = 3",
    )
    .bind(bench.org)
    .bind(&topic)
    .execute(&bench.pool)
    .await?;
    let capped = client
        .patch(format!("http://{API_ADDR}/api/v1/organization"))
        .bearer_auth(&bench.key)
        .json(&json!({"frequencyCaps": {"email": {"perDay": 3}}}))
        .send()
        .await?;
    anyhow::ensure!(
        capped.status().is_success(),
        "frequency caps: {}",
        capped.status()
    );
    let broadcast = bench
        .create(
            &client,
            "/broadcasts",
            &json!({"broadcastName": "Preview", "templateId": template, "segmentId": segment,
                    "topicId": topic, "isDraft": true}),
        )
        .await?;
    eprintln!(
        "seeded {n} contacts in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let (floor_ms, _) = median_ms(|| async {
        let r = client
            .get(format!("http://{API_ADDR}/healthz"))
            .send()
            .await?;
        anyhow::ensure!(r.status().is_success(), "healthz: {}", r.status());
        Ok(serde_json::Value::Null)
    })
    .await?;
    let (count_ms, counted) = median_ms(|| async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM contacts c WHERE c.organization_id = $1 AND c.source = 'bench'",
        )
        .bind(bench.org)
        .fetch_one(&bench.pool)
        .await?;
        Ok(json!(n))
    })
    .await?;
    let preview_once = || async {
        let r = client
            .post(format!(
                "http://{API_ADDR}/api/v1/broadcasts/{broadcast}/preview"
            ))
            .bearer_auth(&bench.key)
            .json(&json!({}))
            .send()
            .await?;
        let status = r.status();
        let body: serde_json::Value = r.json().await?;
        anyhow::ensure!(status.is_success(), "preview: {status} {body}");
        Ok(body["data"].clone())
    };
    let (preview_ms, preview) = median_ms(preview_once).await?;
    // The same without the cap: what its dry run in Redis costs.
    let uncapped = client
        .patch(format!("http://{API_ADDR}/api/v1/organization"))
        .bearer_auth(&bench.key)
        .json(&json!({"frequencyCaps": {}}))
        .send()
        .await?;
    anyhow::ensure!(
        uncapped.status().is_success(),
        "frequency caps: {}",
        uncapped.status()
    );
    let (uncapped_ms, _) = median_ms(preview_once).await?;
    anyhow::ensure!(
        preview["audience"] == counted,
        "the preview's audience {} is not the count {counted}",
        preview["audience"]
    );
    println!("| what | contacts | median (ms) | per contact (µs) |");
    println!("|---|---:|---:|---:|");
    println!("| HTTP floor: `GET /healthz` | | {floor_ms:.2} | |");
    println!(
        "| `count(*)` of the segment | {counted} | {count_ms:.1} | {:.2} |",
        count_ms * 1000.0 / n as f64
    );
    println!(
        "| `POST /broadcasts/{{id}}/preview` | {} | {preview_ms:.1} | {:.2} |",
        preview["audience"],
        preview_ms * 1000.0 / n as f64
    );
    println!(
        "| the same preview, no frequency cap (no Redis) | {} | {uncapped_ms:.1} | {:.2} |",
        preview["audience"],
        uncapped_ms * 1000.0 / n as f64
    );
    println!("| preview / count(*) | | {:.1}x | |", preview_ms / count_ms);
    for o in preview["outcomes"].as_array().into_iter().flatten() {
        eprintln!("  {} {} {}", o["status"], o["errorCode"], o["count"]);
    }
    bench.finish().await
}

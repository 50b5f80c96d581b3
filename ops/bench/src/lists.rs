//! List benchmark, through the `parley-api` process on a fresh database for each N (one
//! organization): every list of the API with N rows (a nested list, N rows under one parent),
//! each read with `pageSize=100`: page 1, the same filtered where the list has a filter (it
//! matches a tenth of the rows), page 500, and the page after page 1 by `cursor`. Median of 5
//! requests after 2 warm-ups.
//!
//! Contacts, leads, broadcast recipients (the first of them a seeded contact, whose messages
//! are listed too) and webhook log entries (attempts) are written by their own statements;
//! every other list's rows are copies of one record made through the API, each with a new id,
//! an earlier `created_at` and new values in its unique columns. Usage (through
//! ops/bench/lists):
//! parley-bench-lists [N...] (default 10000 1000000)

use std::time::Instant;

use anyhow::Context;
use parley_bench::{API_ADDR, Bench};
use serde_json::json;

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

/// A list made of copies of one record.
struct Copied {
    label: &'static str,
    path: String,
    table: &'static str,
    /// The seed row's parent column and id, for a nested list.
    parent: Option<(&'static str, String)>,
    /// A jsonb expression over the seed row `t` and the copy's number `g`: the columns that
    /// must differ (unique ones), and the tenth that the filter matches.
    changes: &'static str,
    /// A query parameter that matches the tenth `changes` sets (`None`: the list has none).
    filter: Option<&'static str>,
}

/// Copies the seed row of `list` `n - 1` times (the seed is the n-th).
async fn copy_rows(bench: &Bench, list: &Copied, n: i64) -> anyhow::Result<()> {
    let (parent_filter, parent_id) = match &list.parent {
        Some((column, id)) => (format!("AND {column} = $2::uuid"), id.clone()),
        None => (String::new(), String::new()),
    };
    let table = list.table;
    // The record is built once a row, in a LATERAL call: `(f(...)).*` would call f once per
    // column (26 times slower on broadcasts).
    let sql = format!(
        "INSERT INTO {table}
         SELECT r.*
         FROM (SELECT * FROM {table} WHERE organization_id = $1 {parent_filter} LIMIT 1) t,
              generate_series(1, $3::int8) AS g,
              LATERAL jsonb_populate_record(NULL::{table}, to_jsonb(t)
                  || jsonb_build_object('id', uuid_v7(),
                                        'created_at', t.created_at - make_interval(secs => g / 1000.0))
                  || {changes}) AS r",
        changes = list.changes,
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(bench.org)
        .bind(parent_id)
        .bind(n - 1)
        .execute(&bench.pool)
        .await
        .with_context(|| format!("copying {table}"))?;
    Ok(())
}

/// One record of every kind through the API; the lists made of their copies.
async fn seeds(
    bench: &Bench,
    client: &reqwest::Client,
    contact: &str,
    template: &str,
) -> anyhow::Result<(Vec<Copied>, String)> {
    let create = |path: &'static str, body: serde_json::Value| async move {
        bench.create(client, path, &body).await
    };
    let user = create(
        "/users",
        json!({"firstName": "Grace", "lastName": "Hopper", "email": "grace@example.com"}),
    )
    .await?;
    create(
        "/api-keys",
        json!({"name": "lists", "scopes": ["contacts:read"]}),
    )
    .await?;
    create("/tags", json!({"name": "vip"})).await?;
    create(
        "/segments",
        json!({"name": "VIPs", "filter": {"source": "ads"}}),
    )
    .await?;
    create("/companies", json!({"name": "Engines Ltd"})).await?;
    create("/teams", json!({"name": "support", "memberIds": [user]})).await?;
    create(
        "/message-attributes",
        json!({"key": "order_number", "label": "Order"}),
    )
    .await?;
    create("/categories", json!({"name": "Billing"})).await?;
    create(
        "/sla-policies",
        json!({"name": "Standard", "firstResponseSeconds": 3600, "nextResponseSeconds": 7200,
               "resolutionSeconds": 86400, "businessHoursOnly": false, "warningThresholdSeconds": 600}),
    )
    .await?;
    create(
        "/broadcasts",
        json!({"broadcastName": "Draft", "templateId": template, "contactIds": [contact]}),
    )
    .await?;
    let collection = create("/faq-collections", json!({"name": "Getting started"})).await?;
    let faq_category = bench
        .create(
            client,
            &format!("/faq-collections/{collection}/categories"),
            &json!({"name": "Basics"}),
        )
        .await?;
    bench
        .create(
            client,
            &format!("/faq-collections/{collection}/faqs"),
            &json!({"title": "What is Parley?", "content": "A service.", "categoryId": faq_category}),
        )
        .await?;
    let conversation = create(
        "/conversations",
        json!({"contactId": contact, "channel": "email", "subject": "Order",
               "message": {"content": "Where is my order?"}}),
    )
    .await?;
    let ticket = create(
        "/tickets",
        json!({"subject": "Refund", "customerId": contact}),
    )
    .await?;
    bench
        .create(
            client,
            &format!("/tickets/{ticket}/replies"),
            &json!({"content": "On its way.", "authorType": "agent"}),
        )
        .await?;
    let webhook = create(
        "/webhooks",
        json!({"url": "https://hooks.example.com/parley", "events": ["lead.created"]}),
    )
    .await?;
    let r = client
        .post(format!("http://{API_ADDR}/api/v1/webhooks/{webhook}/test"))
        .bearer_auth(&bench.key)
        .json(&json!({}))
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "webhook test: {}", r.status());

    let tenth = |column: &str, value: &str| {
        format!(
            "jsonb_build_object('{column}', CASE WHEN g % 10 = 0 THEN {value} ELSE to_jsonb(t.{column}) END)"
        )
    };
    // The filtered tenths, as jsonb expressions (leaked: they live for the whole run).
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let top = |label, path: &str, table, changes, filter| Copied {
        label,
        path: path.to_owned(),
        table,
        parent: None,
        changes,
        filter,
    };
    let lists = vec![
        top(
            "api keys",
            "/api-keys",
            "api_keys",
            "jsonb_build_object('key_hash', '\\x' || md5(g::text || random()::text))",
            None,
        ),
        top(
            "broadcasts",
            "/broadcasts",
            "broadcasts",
            leak(tenth("status", "'\"cancelled\"'::jsonb")),
            Some("status=cancelled"),
        ),
        top(
            "categories",
            "/categories",
            "conversation_categories",
            leak(format!(
                "jsonb_build_object('slug', t.slug || '-' || g, 'name', t.name || ' ' || g) || {}",
                tenth("is_active", "'false'::jsonb")
            )),
            Some("isActive=false"),
        ),
        top(
            "companies",
            "/companies",
            "companies",
            "jsonb_build_object('name', t.name || ' ' || g)",
            None,
        ),
        top(
            "conversations",
            "/conversations",
            "conversations",
            leak(format!(
                "jsonb_build_object('reference_number', t.reference_number + g) || {}",
                tenth("priority", "'\"urgent\"'::jsonb")
            )),
            Some("priority=urgent"),
        ),
        top(
            "FAQ collections",
            "/faq-collections",
            "faq_collections",
            leak(format!(
                "jsonb_build_object('slug', t.slug || '-' || g) || {}",
                tenth("is_published", "'true'::jsonb")
            )),
            Some("isPublished=true"),
        ),
        top(
            "message attributes",
            "/message-attributes",
            "message_attributes",
            leak(format!(
                "jsonb_build_object('key', t.key || '_' || g) || {}",
                tenth("is_active", "'false'::jsonb")
            )),
            Some("isActive=false"),
        ),
        top(
            "segments",
            "/segments",
            "segments",
            "jsonb_build_object('name', t.name || ' ' || g)",
            None,
        ),
        top(
            "SLA policies",
            "/sla-policies",
            "sla_policies",
            leak(tenth("is_active", "'false'::jsonb")),
            Some("isActive=false"),
        ),
        top(
            "tags",
            "/tags",
            "tags",
            "jsonb_build_object('name', t.name || ' ' || g)",
            None,
        ),
        top(
            "teams",
            "/teams",
            "teams",
            leak(format!(
                "jsonb_build_object('name', t.name || ' ' || g) || {}",
                tenth("is_active", "'false'::jsonb")
            )),
            Some("isActive=false"),
        ),
        top(
            "templates",
            "/templates",
            "templates",
            leak(tenth("channel", "'\"social_a\"'::jsonb")),
            Some("channel=social_a"),
        ),
        top(
            "tickets",
            "/tickets",
            "tickets",
            leak(format!(
                "jsonb_build_object('reference_number', t.reference_number + g) || {}",
                tenth("priority", "'\"urgent\"'::jsonb")
            )),
            Some("priority=urgent"),
        ),
        top(
            "users",
            "/users",
            "users",
            leak(format!(
                "jsonb_build_object('email', 'user' || g || '@example.com') || {}",
                tenth("is_active", "'false'::jsonb")
            )),
            Some("isActive=false"),
        ),
        top("webhooks", "/webhooks", "webhooks", "'{}'::jsonb", None),
        Copied {
            label: "conversation messages",
            path: format!("/conversations/{conversation}/messages"),
            table: "messages",
            parent: Some(("conversation_id", conversation)),
            changes: "'{}'::jsonb",
            filter: None,
        },
        Copied {
            label: "FAQ categories",
            path: format!("/faq-collections/{collection}/categories"),
            table: "faq_categories",
            parent: Some(("collection_id", collection.clone())),
            changes: "jsonb_build_object('name', t.name || ' ' || g)",
            filter: None,
        },
        Copied {
            label: "FAQs",
            path: format!("/faq-collections/{collection}/faqs"),
            table: "faqs",
            parent: Some(("collection_id", collection)),
            changes: leak(format!(
                "jsonb_build_object('slug', t.slug || '-' || g) || {}",
                tenth("is_featured", "'true'::jsonb")
            )),
            filter: Some("isFeatured=true"),
        },
        Copied {
            label: "ticket replies",
            path: format!("/tickets/{ticket}/replies"),
            table: "ticket_replies",
            parent: Some(("ticket_id", ticket)),
            changes: "'{}'::jsonb",
            filter: None,
        },
    ];
    Ok((lists, webhook))
}

/// The webhook's log: `n` attempts of its test delivery (a tenth failed).
async fn attempts(bench: &Bench, webhook: &str, n: i64) -> anyhow::Result<()> {
    sqlx::query(
        "INSERT INTO webhook_attempts (id, organization_id, webhook_id, delivery_id, event,
             attempt, status, response_status, duration_ms, created_at)
         SELECT uuid_v7(), d.organization_id, d.webhook_id, d.id, 'webhook.test', g,
                CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'succeeded' END, 200, 12,
                now() - make_interval(secs => g / 1000.0)
         FROM (SELECT * FROM webhook_deliveries WHERE organization_id = $1 AND webhook_id = $2::uuid
               LIMIT 1) d,
              generate_series(1, $3::int8) AS g",
    )
    .bind(bench.org)
    .bind(webhook)
    .bind(n)
    .execute(&bench.pool)
    .await
    .context("writing webhook attempts")?;
    Ok(())
}

async fn measure(
    client: &reqwest::Client,
    key: &str,
    n: usize,
    label: &str,
    path: &str,
    filter: Option<&str>,
) -> anyhow::Result<()> {
    let (first, body) = median_ms(client, key, &format!("{path}?pageSize=100")).await?;
    let filtered = match filter {
        Some(f) => {
            let (ms, _) = median_ms(client, key, &format!("{path}?pageSize=100&{f}")).await?;
            format!("{ms:.1}")
        }
        None => "—".to_owned(),
    };
    let (deep, _) = median_ms(client, key, &format!("{path}?pageSize=100&page=500")).await?;
    // A list whose page has no `endCursor` is read by page only.
    let next = match body["meta"]["endCursor"].as_str() {
        Some(cursor) => {
            let path = format!("{path}?pageSize=100&cursor={cursor}");
            format!("{:.1}", median_ms(client, key, &path).await?.0)
        }
        None => "—".to_owned(),
    };
    let filter = filter.map(|f| format!(" (`{f}`)")).unwrap_or_default();
    println!(
        "| {label}{filter} | {n} | {first:.1} | {filtered} | {deep:.1} | {next} | {}, {} |",
        body["meta"]["total"], body["meta"]["totalExact"]
    );
    Ok(())
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
        "| list (filter) | rows | page 1 (ms) | filtered (ms) | page 500 (ms) | next page by cursor (ms) | meta.total, totalExact |"
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
        let contact = contacts[0].to_string();
        let broadcast = bench
            .create(
                &client,
                "/broadcasts",
                &json!({"broadcastName": "Lists", "templateId": template, "contactIds": [contact]}),
            )
            .await?;
        sqlx::query(
            "INSERT INTO broadcast_recipients (id, organization_id, broadcast_id, contact_id, status)
             SELECT uuid_v7(), $1, $2::uuid, CASE WHEN i = 1 THEN $4 ELSE uuid_v7() END,
                    CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'sent' END
             FROM generate_series(1, $3::int8) AS i",
        )
        .bind(bench.org)
        .bind(&broadcast)
        .bind(n as i64)
        .bind(contacts[0])
        .execute(&bench.pool)
        .await?;
        let (copied, webhook) = seeds(&bench, &client, &contact, &template).await?;
        attempts(&bench, &webhook, n as i64).await?;
        for list in &copied {
            let started = Instant::now();
            copy_rows(&bench, list, n as i64).await?;
            eprintln!(
                "{}: {n} rows written in {:.1} s",
                list.table,
                started.elapsed().as_secs_f64()
            );
        }
        sqlx::query("VACUUM ANALYZE").execute(&bench.pool).await?;
        let recipients = format!("/broadcasts/{broadcast}/recipients");
        let logs = format!("/webhooks/{webhook}/logs");
        // One of the organization's n recipients: its page reads only its own records.
        let messages = format!("/contacts/{contact}/messages");
        for (label, path, filter) in [
            ("contacts", "/contacts".to_owned(), "source=ads"),
            ("leads", "/leads".to_owned(), "source=ads"),
            ("broadcast recipients", recipients, "status=failed"),
            ("webhook logs", logs, "status=failed"),
        ] {
            measure(&client, &bench.key, n, label, &path, Some(filter)).await?;
        }
        measure(
            &client,
            &bench.key,
            n,
            "a contact's messages (one of the recipients)",
            &messages,
            None,
        )
        .await?;
        for list in &copied {
            measure(&client, &bench.key, n, list.label, &list.path, list.filter).await?;
        }
        drop(_api);
        bench.finish().await?;
    }
    Ok(())
}

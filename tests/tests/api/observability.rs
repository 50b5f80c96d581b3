//! Every metric the dashboard, the alert rules and the KEDA triggers query is exported, so
//! no panel goes empty, no alert goes blind and no autoscaler stalls after a rename.

use std::collections::BTreeSet;

use parley_tests::TestApp;

/// `parley_*` names in a dashboard or rules file, without histogram suffixes.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("parley_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let base = ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        names.insert(base.to_owned());
        rest = &tail[end..];
    }
    names
}

fn exported(scrape: &str) -> BTreeSet<String> {
    scrape
        .lines()
        .filter(|l| l.starts_with("# TYPE "))
        .filter_map(|l| l.split_whitespace().nth(2).map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn every_metric_in_the_dashboard_and_the_alerts_is_exported() {
    let ops = concat!(env!("CARGO_MANIFEST_DIR"), "/../ops");
    let dashboard = std::fs::read_to_string(format!("{ops}/grafana/parley.json")).unwrap();
    let alerts = std::fs::read_to_string(format!("{ops}/prometheus/alerts.yml")).unwrap();
    let keda = std::fs::read_to_string(format!("{ops}/k8s/keda.yaml")).unwrap();
    let mut wanted = metric_names(&dashboard);
    wanted.extend(metric_names(&alerts));
    wanted.extend(metric_names(&keda));
    assert!(wanted.len() >= 15, "the files name metrics: {wanted:?}");

    let app = TestApp::builder().own_database().start().await;
    let worker = app.spawn_worker(&[]).await;
    app.get("/api/v1/contacts").await.expect(200);
    let client = reqwest::Client::new();
    let mut seen = BTreeSet::new();
    let mut text = String::new();
    for url in [
        format!("http://{}/metrics", app.metrics_addr),
        format!("http://{}/metrics", worker.metrics_addr),
    ] {
        text = client.get(&url).send().await.unwrap().text().await.unwrap();
        seen.extend(exported(&text));
    }
    let missing: Vec<&String> = wanted.difference(&seen).collect();
    assert!(missing.is_empty(), "queried but not exported: {missing:?}");
    // The breach-lag alert's 60 s threshold falls on a bucket, so the quantile can pass it.
    for le in ["60", "120", "3600"] {
        let bucket = format!("parley_sla_breach_lag_seconds_bucket{{le=\"{le}\"}}");
        assert!(text.contains(&bucket), "{bucket} in the worker's scrape");
    }
    worker.stop().await;
}

#[test]
fn names_are_read_with_histogram_suffixes_dropped() {
    let names = metric_names(
        r#"histogram_quantile(0.99, rate(parley_job_duration_seconds_bucket[5m])) / parley_queue_depth{state="ready"}"#,
    );
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        ["parley_job_duration_seconds", "parley_queue_depth"]
    );
}

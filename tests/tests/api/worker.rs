use parley_tests::TestApp;

#[tokio::test]
async fn the_worker_starts_and_answers_its_probes() {
    // A database of its own: a worker relays and reconciles whatever its database holds.
    let app = TestApp::builder().own_database().start().await;
    let worker = app.spawn_worker(&[]).await;
    let client = reqwest::Client::new();
    for probe in ["healthz", "readyz", "metrics"] {
        let resp = client
            .get(format!("http://{}/{probe}", worker.metrics_addr))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{probe}");
    }
    worker.stop().await;
}

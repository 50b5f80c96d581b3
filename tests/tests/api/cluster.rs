//! The API and workers on a Redis Cluster of three masters (started by `ops/test`): every
//! script and pipeline keeps to one hash slot, so a broadcast, webhooks and SLA checks run end
//! to end; and a queue lost with its master alone is noticed by its own marker and sent in full.

use std::collections::HashSet;

use parley_jobs::{Jobs, QueueName, queue_name};
use parley_tests::provider::FakeProvider;
use parley_tests::receiver::Receiver;
use parley_tests::{TestApp, scenario};
use serde_json::json;

#[tokio::test]
async fn the_api_and_two_workers_run_on_a_redis_cluster() {
    let provider = FakeProvider::start().await;
    let receiver = Receiver::start().await;
    let app = TestApp::builder()
        .redis_cluster()
        .env(&[("PARLEY_WEBHOOK_ALLOW_PRIVATE", "true")])
        .start()
        .await;
    let settings = [
        ("PARLEY_WEBHOOK_ALLOW_PRIVATE", "true"),
        ("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str()),
    ];
    let _a = app.spawn_worker(&settings).await;
    let _b = app.spawn_worker(&settings).await;

    scenario::subscribe_and_set_sla(&app, &receiver).await;
    for i in 0..20 {
        app.post("/api/v1/leads", json!({"name": format!("Lead {i}")}))
            .await
            .expect(201);
        app.post("/api/v1/tickets", json!({"subject": format!("T {i}")}))
            .await
            .expect(201);
    }
    // Two workers share it: their claims (one slot) keep each recipient to one send.
    scenario::broadcast_sent_once(&app, &provider, 600).await;
    scenario::events_and_breaches_arrive(&app, &receiver, 20, 20).await;

    // The queues' keys are where the cluster put them, under their hash tags.
    let redis = app.redis().await;
    let mut conn = redis.conn.clone();
    for queue in [
        QueueName::RecipientSend,
        QueueName::WebhookDelivery,
        QueueName::SlaCheck,
    ] {
        let workers: u64 = redis::cmd("ZCARD")
            .arg(format!("{}:workers", queue_name(&app.redis_prefix, queue)))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(workers, 2, "both workers registered on {}", queue.as_str());
    }
}

/// A master failing over to an empty replica loses the keys of its slots only. The lost
/// queue's own marker goes with it, so the ticker reconciles after one claim lease, not after
/// `PARLEY_RECONCILE_AFTER_SECS` (ten minutes here, past the test's patience).
#[tokio::test]
async fn a_queue_lost_with_its_master_alone_is_sent_in_full() {
    let provider = FakeProvider::start().await;
    let app = TestApp::builder().redis_cluster().start().await;
    // A deployment that has run a while: its queues' markers are set (a first start finds
    // them absent and reconciles quickly for a minute anyway).
    let redis = app.redis().await;
    let jobs = Jobs::new(&redis);
    for queue in QueueName::ALL {
        jobs.mark_present(*queue).await.unwrap();
    }
    let _worker = app
        .spawn_worker(&[
            ("PARLEY_CHANNEL_EMAIL_URL", provider.url.as_str()),
            ("PARLEY_CHANNEL_EMAIL_RATE", "400"),
            // One job at a time, so most of the broadcast's jobs wait in the queue.
            ("PARLEY_WORKER_CONCURRENCY", "1"),
            ("PARLEY_RECONCILE_AFTER_SECS", "600"),
        ])
        .await;
    let id = parley_tests::seed::email_broadcast(&app, 2_000).await;
    app.wait_for(&format!("/api/v1/broadcasts/{id}"), 30, |b| {
        b["data"]["sentCount"].as_i64() >= Some(40)
    })
    .await;

    // Every key of the recipient-send queue's slot goes, as with its master; the rest stays.
    let mut conn = redis.conn.clone();
    let queue = queue_name(&app.redis_prefix, QueueName::RecipientSend);
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{queue}*"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(keys.iter().any(|k| k.ends_with(":present")));
    assert!(
        keys.iter().any(|k| k.ends_with(":active")),
        "jobs were waiting"
    );
    for key in &keys {
        let _: () = redis::cmd("DEL")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
    }

    let b = app
        .wait_for(&format!("/api/v1/broadcasts/{id}"), 60, |b| {
            b["data"]["status"] == "completed"
        })
        .await;
    assert_eq!(b["data"]["sentCount"], 2_000);
    let keys: HashSet<String> = provider
        .calls()
        .into_iter()
        .map(|c| c.idempotency_key)
        .collect();
    assert_eq!(keys.len(), 2_000, "one idempotency key per recipient");
}

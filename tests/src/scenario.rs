//! The work of the scale-out tests (PgBouncer, Redis Cluster): a broadcast, webhook events and
//! SLA checks, each run end to end by a worker and checked for its effects.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::json;

use crate::provider::FakeProvider;
use crate::receiver::Receiver;
use crate::{TestApp, seed, wait_until};

/// A webhook on `lead.created` to `receiver`, and an SLA policy whose first response is due
/// one second after a ticket opens.
pub async fn subscribe_and_set_sla(app: &TestApp, receiver: &Receiver) {
    app.post(
        "/api/v1/webhooks",
        json!({"url": receiver.url, "events": ["lead.created"]}),
    )
    .await
    .expect(201);
    app.post(
        "/api/v1/sla-policies",
        json!({"name": "P", "firstResponseSeconds": 1, "nextResponseSeconds": 3600,
            "resolutionSeconds": 86400, "businessHoursOnly": false, "warningThresholdSeconds": 0}),
    )
    .await
    .expect(201);
}

/// A broadcast to `recipients` new contacts by email completes, each sent once.
pub async fn broadcast_sent_once(app: &TestApp, provider: &FakeProvider, recipients: usize) {
    let id = seed::email_broadcast(app, recipients).await;
    let b = app
        .wait_for(&format!("/api/v1/broadcasts/{id}"), 60, |b| {
            b["data"]["status"] == "completed"
        })
        .await;
    assert_eq!(b["data"]["sentCount"], recipients);
    assert_eq!(
        provider.accepted().len(),
        recipients,
        "one message per recipient"
    );
}

/// Each of the `leads` leads created after [`subscribe_and_set_sla`] reaches `receiver` (one
/// event each), and the first response of each of the `tickets` tickets breaches.
pub async fn events_and_breaches_arrive(
    app: &TestApp,
    receiver: &Receiver,
    leads: usize,
    tickets: i64,
) {
    let delivered = receiver.received_at_least(leads, 30).await;
    let events: HashSet<String> = delivered
        .iter()
        .map(|r| r.json()["data"]["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(events.len(), leads);

    app.clock.advance(Duration::from_millis(1100));
    let breached = wait_until(30, || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM sla_states WHERE organization_id = $1
             AND first_response_breached_at IS NOT NULL",
        )
        .bind(app.org_id)
        .fetch_one(&app.pool)
        .await
        .unwrap()
            == tickets
    })
    .await;
    assert!(breached, "every breach recorded");
}

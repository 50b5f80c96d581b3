//! The worker's metrics (names in `parley_types::metric_names`), registered at zero so
//! dashboards and alerts see every series from the start, and work given up.

use parley_domain::Channel;
use parley_domain::ab_tests::PickedBy;
use parley_domain::send_rules::HoldReason;
use parley_domain::sla::SlaTarget;
use parley_jobs::QueueName;
use parley_types::metric_names::{
    ATTEMPTS_EXHAUSTED, JOB_DURATION, JOBS, OUTBOX_BACKLOG, OUTCOME_STATEMENTS,
    OUTCOME_WRITE_FAILURES, PROVIDER_CALLS, PROVIDER_DURATION, QUEUE_AGE, QUEUE_DEPTH, RECIPIENTS,
    RECIPIENTS_CAPPED, RECIPIENTS_HELD, RECONCILED, RETENTION_DELETED, RUNTIME_THREADS,
    SLA_BACKLOG, SLA_BREACH_LAG, SLA_BREACHES, SLA_CHECKS, SLA_WARNINGS, VARIANT_PICKS,
    WEBHOOK_ATTEMPTS, WEBHOOK_LATENCY, WEBHOOKS_DISABLED,
};

/// Counts and logs work given up at its requeue ceiling: `ids` are the broadcasts of the
/// recipients (`kind` `recipient`) or the deliveries (`webhook`).
pub fn given_up<Id: std::fmt::Display>(kind: &'static str, ids: &[Id]) {
    let Some(first) = ids.first() else {
        return;
    };
    metrics::counter!(ATTEMPTS_EXHAUSTED, "kind" => kind).increment(ids.len() as u64);
    tracing::error!(
        kind,
        count = ids.len(),
        first = %first,
        "given up: enqueued again too often without an outcome recorded"
    );
}

/// Registers the worker's series with their known labels, at zero, and sets its runtime's
/// threads. The backlog gauges are registered only by the workers that may report them: those
/// of the webhook-delivery queue (the outbox relay runs there) and of the sla-check queue (the
/// SLA scheduler).
pub fn register(queues: &[QueueName]) {
    let threads = tokio::runtime::Handle::current().metrics().num_workers();
    metrics::gauge!(RUNTIME_THREADS).set(threads as f64);
    for queue in QueueName::ALL {
        let q = queue.as_str();
        for outcome in ["ok", "error"] {
            metrics::counter!(JOBS, "queue" => q, "outcome" => outcome).absolute(0);
            let _ = metrics::histogram!(JOB_DURATION, "queue" => q, "outcome" => outcome);
        }
        for state in ["ready", "scheduled"] {
            metrics::gauge!(QUEUE_DEPTH, "queue" => q, "state" => state).set(0.0);
        }
        metrics::gauge!(QUEUE_AGE, "queue" => q).set(0.0);
    }
    for channel in Channel::ALL {
        let c = channel.as_str();
        for outcome in ["sent", "retryable", "rejected"] {
            metrics::counter!(PROVIDER_CALLS, "channel" => c, "outcome" => outcome).absolute(0);
        }
        let _ = metrics::histogram!(PROVIDER_DURATION, "channel" => c);
        for status in ["sent", "failed"] {
            metrics::counter!(RECIPIENTS, "channel" => c, "status" => status).absolute(0);
        }
        for reason in [
            HoldReason::LocalTime,
            HoldReason::QuietHours,
            HoldReason::Paused,
        ] {
            metrics::counter!(RECIPIENTS_HELD, "channel" => c, "reason" => reason.as_str())
                .absolute(0);
        }
        metrics::counter!(RECIPIENTS_CAPPED, "channel" => c).absolute(0);
    }
    for by in [PickedBy::Auto, PickedBy::Api] {
        metrics::counter!(VARIANT_PICKS, "by" => by.as_str()).absolute(0);
    }
    for kind in ["dispatch", "recipient", "sla_check"] {
        metrics::counter!(RECONCILED, "kind" => kind).absolute(0);
    }
    for (outcome, class) in [("succeeded", "2xx"), ("failed", "5xx"), ("failed", "none")] {
        metrics::counter!(WEBHOOK_ATTEMPTS, "outcome" => outcome, "status_class" => class)
            .absolute(0);
    }
    let _ = metrics::histogram!(WEBHOOK_LATENCY);
    if queues.contains(&QueueName::WebhookDelivery) {
        metrics::gauge!(OUTBOX_BACKLOG).set(0.0);
    }
    metrics::counter!(WEBHOOKS_DISABLED).absolute(0);
    for target in SlaTarget::ALL {
        metrics::counter!(SLA_BREACHES, "target" => target.as_str()).absolute(0);
        metrics::counter!(SLA_WARNINGS, "target" => target.as_str()).absolute(0);
    }
    for outcome in ["recorded", "nothing"] {
        metrics::counter!(SLA_CHECKS, "outcome" => outcome).absolute(0);
    }
    let _ = metrics::histogram!(SLA_BREACH_LAG);
    if queues.contains(&QueueName::SlaCheck) {
        metrics::gauge!(SLA_BACKLOG).set(0.0);
    }
    for kind in ["webhook_event", "broadcast_recipient", "idempotency_key"] {
        metrics::counter!(RETENTION_DELETED, "kind" => kind).absolute(0);
    }
    metrics::counter!(OUTCOME_STATEMENTS).absolute(0);
    for kind in ["webhook", "recipient"] {
        metrics::counter!(OUTCOME_WRITE_FAILURES, "kind" => kind).absolute(0);
        metrics::counter!(ATTEMPTS_EXHAUSTED, "kind" => kind).absolute(0);
    }
}

//! Running a job under its log span, with its metrics (names in `parley_types::metric_names`),
//! and the worker's metrics registered at zero so dashboards and alerts see every series from
//! the start.

use std::future::Future;
use std::time::Instant;

use apalis::prelude::TaskId;
use parley_domain::Channel;
use parley_domain::sla::SlaTarget;
use parley_jobs::QueueName;
use parley_types::metric_names::{
    ATTEMPTS_EXHAUSTED, JOB_DURATION, JOBS, OUTBOX_BACKLOG, OUTCOME_WRITE_FAILURES, PROVIDER_CALLS,
    PROVIDER_DURATION, QUEUE_AGE, QUEUE_DEPTH, RECIPIENTS, RECONCILED, SLA_BACKLOG, SLA_BREACH_LAG,
    SLA_BREACHES, SLA_CHECKS, SLA_WARNINGS, WEBHOOK_ATTEMPTS, WEBHOOK_LATENCY, WEBHOOKS_DISABLED,
};
use tracing::Instrument;

/// Runs one job's work in a span carrying its queue and id (so every log line of the job
/// has them), records its outcome and duration, and logs a failure as `what failed`. Never
/// fails the apalis job: its retries are not ours; Postgres keeps the work due and the
/// ticker enqueues it again.
pub async fn observe<F>(queue: QueueName, task: &TaskId, what: &'static str, work: F)
where
    F: Future<Output = anyhow::Result<()>>,
{
    let span = tracing::info_span!("job", queue = queue.as_str(), job_id = %task);
    async move {
        let started = Instant::now();
        let result = work.await;
        let outcome = if result.is_ok() { "ok" } else { "error" };
        metrics::counter!(JOBS, "queue" => queue.as_str(), "outcome" => outcome).increment(1);
        metrics::histogram!(JOB_DURATION, "queue" => queue.as_str(), "outcome" => outcome)
            .record(started.elapsed().as_secs_f64());
        if let Err(err) = result {
            tracing::warn!(error = %format!("{err:#}"), "{what} failed; it will be enqueued again");
        }
    }
    .instrument(span)
    .await
}

/// Registers the worker's series with their known labels, at zero.
/// Counts and logs work given up at its requeue ceiling: `ids` are the broadcasts of the
/// recipients (`kind` `recipient`) or the deliveries (`webhook`).
pub fn given_up(kind: &'static str, ids: &[uuid::Uuid]) {
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

pub fn register() {
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
    }
    for kind in ["dispatch", "recipient", "sla_check"] {
        metrics::counter!(RECONCILED, "kind" => kind).absolute(0);
    }
    for (outcome, class) in [("succeeded", "2xx"), ("failed", "5xx"), ("failed", "none")] {
        metrics::counter!(WEBHOOK_ATTEMPTS, "outcome" => outcome, "status_class" => class)
            .absolute(0);
    }
    let _ = metrics::histogram!(WEBHOOK_LATENCY);
    metrics::gauge!(OUTBOX_BACKLOG).set(0.0);
    metrics::counter!(WEBHOOKS_DISABLED).absolute(0);
    for target in SlaTarget::ALL {
        metrics::counter!(SLA_BREACHES, "target" => target.as_str()).absolute(0);
        metrics::counter!(SLA_WARNINGS, "target" => target.as_str()).absolute(0);
    }
    for outcome in ["recorded", "nothing"] {
        metrics::counter!(SLA_CHECKS, "outcome" => outcome).absolute(0);
    }
    let _ = metrics::histogram!(SLA_BREACH_LAG);
    metrics::gauge!(SLA_BACKLOG).set(0.0);
    for kind in ["webhook", "recipient"] {
        metrics::counter!(OUTCOME_WRITE_FAILURES, "kind" => kind).absolute(0);
        metrics::counter!(ATTEMPTS_EXHAUSTED, "kind" => kind).absolute(0);
    }
}

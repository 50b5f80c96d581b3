//! Running one job: under its log span, with its outcome and duration counted.

use std::future::Future;
use std::time::Instant;

use apalis::prelude::TaskId;
use parley_jobs::QueueName;
use parley_types::metric_names::{JOB_DURATION, JOBS};
use tracing::Instrument;

/// Runs one job's work in a span carrying its queue and id (so every log line of the job
/// has them), records its outcome and duration, and logs a failure as `what failed`. Never
/// fails the apalis job: its retries are not ours; Postgres keeps the work due and the
/// ticker enqueues it again.
pub async fn run<F>(queue: QueueName, task: &TaskId, what: &'static str, work: F)
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

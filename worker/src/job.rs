//! The contract every job keeps, and the one place that runs a job: the payload's version is
//! checked, the job runs in a span with its queue, its id and the ids it names, and its
//! outcome is logged and counted.
//!
//! A job never fails its apalis task: apalis' retries are not used (Postgres holds the truth).
//! A job that fails for now ([`Failure::Retry`], what `?` gives) leaves its work due in
//! Postgres, and the ticker, the relay or the SLA scheduler enqueues it again; how many times
//! before the work itself is given up is counted in Postgres (`parley_db::MAX_REQUEUES`,
//! an import's attempts), as only Postgres sees every worker's tries. A job that can never
//! succeed ([`Failure::GiveUp`]: a payload of another version) is dropped and logged as an
//! error.

use std::future::Future;
use std::time::Instant;

use apalis::prelude::{BoxDynError, Data, TaskId};
use parley_jobs::{PAYLOAD_VERSION, Payload};
use parley_types::metric_names::{JOB_DURATION, JOBS};
use tracing::Instrument;

use crate::state::WorkerState;

/// Why a job did not finish.
#[derive(Debug)]
pub enum Failure {
    /// It may succeed later: its work stays due and is enqueued again.
    Retry(anyhow::Error),
    /// It never will: the job is dropped.
    GiveUp(anyhow::Error),
}

/// Any error is worth another try unless the job says otherwise.
impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(err: E) -> Self {
        Failure::Retry(err.into())
    }
}

pub type JobResult = Result<(), Failure>;

/// A job: its payload (queue and version), what its log lines call it, the span of the ids
/// it works on, and its work.
pub trait Job: Payload {
    const NAME: &'static str;

    /// The span its log lines carry (the ids that matter: broadcast, import, webhook, ...).
    fn span(&self) -> tracing::Span;

    /// Items of work it carries (recipients, deliveries, checks), for the operator's rates.
    fn items(&self) -> u64 {
        1
    }

    fn run(self, ctx: &WorkerState) -> impl Future<Output = JobResult> + Send;
}

/// Runs one job of any queue, as apalis calls it.
pub async fn handle<J: Job>(
    job: J,
    ctx: Data<WorkerState>,
    task: TaskId,
) -> Result<(), BoxDynError> {
    let outer = job.span();
    let span =
        tracing::info_span!(parent: &outer, "job", queue = J::QUEUE.as_str(), job_id = %task);
    async move {
        let started = Instant::now();
        let items = job.items();
        let result = if job.version() == PAYLOAD_VERSION {
            job.run(&ctx).await
        } else {
            Err(Failure::GiveUp(anyhow::anyhow!(
                "its payload is of version {}, and this worker reads version {PAYLOAD_VERSION}",
                job.version()
            )))
        };
        let outcome = match &result {
            Ok(()) => "ok",
            Err(Failure::Retry(_)) => "error",
            Err(Failure::GiveUp(_)) => "given_up",
        };
        metrics::counter!(JOBS, "queue" => J::QUEUE.as_str(), "outcome" => outcome).increment(1);
        metrics::histogram!(JOB_DURATION, "queue" => J::QUEUE.as_str(), "outcome" => outcome)
            .record(started.elapsed().as_secs_f64());
        // The operator API's rates: not worth failing or delaying a job for.
        let jobs = ctx.jobs.clone();
        tokio::spawn(async move {
            if let Err(err) = jobs.record_done(J::QUEUE, items).await {
                tracing::debug!(%err, "job not counted in the queue's rates");
            }
        });
        match result {
            Ok(()) => {}
            Err(Failure::Retry(err)) => tracing::warn!(
                error = %format!("{err:#}"),
                "{} failed; it will be enqueued again",
                J::NAME
            ),
            Err(Failure::GiveUp(err)) => tracing::error!(
                error = %format!("{err:#}"),
                "{} given up",
                J::NAME
            ),
        }
    }
    .instrument(span)
    .await;
    Ok(())
}

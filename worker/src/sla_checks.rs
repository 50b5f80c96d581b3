//! The SLA check job: runs a batch of checks whose time has come
//! (`parley_usecases::sla::run_checks`) and counts what they found.

use parley_domain::sla::CheckKind;
use parley_jobs::CheckSla;
use parley_types::metric_names::{SLA_BREACH_LAG, SLA_BREACHES, SLA_CHECKS, SLA_WARNINGS};
use uuid::Uuid;

use crate::job::{Backoff, Failure, Job, JobResult, RetryPolicy};
use crate::state::WorkerState;

/// The checks of a failed job stay in Postgres, marked enqueued; the scheduler enqueues them
/// again after `PARLEY_RECONCILE_AFTER_SECS`, with no ceiling.
impl Job for CheckSla {
    const NAME: &'static str = "SLA check job";

    fn retry_policy(_: &parley_config::Config) -> RetryPolicy {
        RetryPolicy {
            retries: None,
            backoff: Backoff::Reconciled,
        }
    }

    fn span(&self) -> tracing::Span {
        tracing::info_span!("sla_checks", checks = self.check_ids.len())
    }

    fn items(&self) -> u64 {
        self.check_ids.len() as u64
    }

    async fn run(self, ctx: &WorkerState) -> JobResult {
        run(ctx, &self.check_ids).await.map_err(Failure::of)
    }
}

async fn run(ctx: &WorkerState, ids: &[Uuid]) -> anyhow::Result<()> {
    let now = ctx.clock.now();
    let found = parley_usecases::sla::run_checks(ctx.use_cases(), ids, now).await?;
    for f in &found {
        let name = match f.kind {
            CheckKind::Warning => SLA_WARNINGS,
            CheckKind::Deadline => SLA_BREACHES,
        };
        metrics::counter!(name, "target" => f.target.as_str()).increment(1);
        if f.kind == CheckKind::Deadline {
            let lag = (now.0 - f.deadline.0).num_microseconds().unwrap_or(0) as f64 / 1e6;
            metrics::histogram!(SLA_BREACH_LAG).record(lag.max(0.0));
        }
    }
    metrics::counter!(SLA_CHECKS, "outcome" => "recorded").increment(found.len() as u64);
    metrics::counter!(SLA_CHECKS, "outcome" => "nothing")
        .increment(ids.len().saturating_sub(found.len()) as u64);
    Ok(())
}

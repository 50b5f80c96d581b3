//! The contract every job keeps, and the one place that runs a job. A job declares its retry
//! policy, its timeout and whether it runs in its organization's slot; [`handle`] checks the
//! payload's version, runs the job in a span with its queue, its id and the ids it names,
//! within its slot and its timeout, and logs and counts its outcome.
//!
//! A job never fails its apalis task: apalis' retries are not used (Postgres holds the truth).
//! A job's work stays due in Postgres until its outcome is written there, and the ticker, the
//! relay or the SLA scheduler enqueues it again when its job failed or was lost, as the job's
//! [`RetryPolicy`] says; the tries are counted in Postgres, which sees every worker's. A job
//! says of each failure whether it is worth another try ([`Failure::Retry`]) or never will be
//! ([`Failure::GiveUp`]); [`Failure::of`] is the usual way to say it.

use std::future::Future;
use std::time::{Duration, Instant};

use apalis::prelude::{BoxDynError, Data, TaskId};
use backon::{BackoffBuilder, ExponentialBuilder};
use parley_config::Config;
use parley_jobs::{PAYLOAD_VERSION, Payload, QueueName, SLOT_RENEW};
use parley_types::metric_names::{JOB_DURATION, JOBS};
use tracing::Instrument;
use uuid::Uuid;

use crate::renewal::Renewal;
use crate::state::WorkerState;

/// Why a job did not finish.
#[derive(Debug)]
pub enum Failure {
    /// It may succeed later: its work stays due and is enqueued again, within the job's
    /// [`RetryPolicy`].
    Retry(anyhow::Error),
    /// It never will: the job is dropped and logged as an error. Its work, still due, ends
    /// at the ceiling of its policy (or sooner, where the job ends it itself).
    GiveUp(anyhow::Error),
}

impl Failure {
    pub fn retry(err: impl Into<anyhow::Error>) -> Self {
        Failure::Retry(err.into())
    }

    pub fn give_up(err: impl Into<anyhow::Error>) -> Self {
        Failure::GiveUp(err.into())
    }

    /// What an error of a job's statements and calls calls for. A statement Postgres refused
    /// for its data (SQLSTATE class 22, a data exception; 23502, a null where none may be;
    /// 23514, a check) is refused again however often it runs: give up. Anything else may pass:
    /// retry (a connection lost, a timeout, a serialization failure or deadlock, and the
    /// constraints a race can break: unique, foreign key, exclusion; Redis, the network).
    pub fn of(err: impl Into<anyhow::Error>) -> Self {
        let err = err.into();
        if refused_for_its_data(&err) {
            Failure::GiveUp(err)
        } else {
            Failure::Retry(err)
        }
    }
}

/// Whether `err` (or what caused it) is Postgres refusing a statement for its data.
pub fn refused_for_its_data(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        let Some(sqlx::Error::Database(db)) = cause.downcast_ref::<sqlx::Error>() else {
            return false;
        };
        let code = db.code().unwrap_or_default();
        code.starts_with("22") || code == "23502" || code == "23514"
    })
}

pub type JobResult = Result<(), Failure>;

/// How a job's work is tried again after its job failed or was lost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Times the work is enqueued again before it is given up; `None`: no ceiling (the work
    /// ends by other means, such as its broadcast's end).
    pub retries: Option<u32>,
    pub backoff: Backoff,
}

/// How long work waits before it is tried again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Backoff {
    /// Until the reconciler finds it left behind: `PARLEY_RECONCILE_AFTER_SECS` after its
    /// enqueue, a lease after its lease ran out, or a claim lease after Redis lost its queue.
    Reconciled,
    /// `base` doubling per try, with jitter, at most `max`.
    Exponential { base: Duration, max: Duration },
}

impl RetryPolicy {
    /// Enqueued again by the reconciler, at most five times.
    pub const DEFAULT: RetryPolicy = RetryPolicy {
        retries: Some(5),
        backoff: Backoff::Reconciled,
    };

    /// The wait before try `attempt + 1` (`attempt` from 1), for an exponential backoff.
    pub fn delay(&self, attempt: u32) -> Option<Duration> {
        let Backoff::Exponential { base, max } = self.backoff else {
            return None;
        };
        let nth = usize::try_from(attempt.max(1) - 1).unwrap_or(usize::MAX);
        let delay = ExponentialBuilder::default()
            .with_min_delay(base)
            .with_factor(2.0)
            .with_max_delay(max)
            .with_jitter()
            .without_max_times()
            .build()
            .nth(nth)
            .unwrap_or(max);
        Some(delay.min(max))
    }

    /// The most times lost work is enqueued again, as Postgres counts it.
    pub fn requeue_ceiling(&self) -> i16 {
        self.retries
            .map_or(i16::MAX, |r| i16::try_from(r).unwrap_or(i16::MAX))
    }

    /// Whether work tried `tries` times so far (the first try and its retries) may be tried
    /// again.
    pub fn allows_another(&self, tries: u32) -> bool {
        self.retries.is_none_or(|retries| tries <= retries)
    }
}

/// A job: its payload (queue and version), what its log lines call it, the span of the ids
/// it works on, its policies, and its work.
pub trait Job: Payload {
    const NAME: &'static str;

    /// How its work is tried again ([`RetryPolicy::DEFAULT`] unless it says otherwise).
    fn retry_policy(_config: &Config) -> RetryPolicy {
        RetryPolicy::DEFAULT
    }

    /// How long one run may take before it is dropped (and counted as a retry); `None`: it
    /// bounds itself.
    fn timeout(_config: &Config) -> Option<Duration> {
        Some(Duration::from_secs(60))
    }

    /// Whether its queue is shared fairly: it then runs in its organization's slot
    /// ([`Job::org_slot`], [`in_org_slot`]).
    const FAIR: bool = false;

    /// Its organization's slot, once it left its lane (a fair queue's job).
    fn org_slot(&self) -> Option<(Uuid, &str)> {
        None
    }

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
        let slot = job.org_slot().map(|(org, slot)| (org, slot.to_owned()));
        let result = if job.version() != PAYLOAD_VERSION {
            Err(Failure::GiveUp(anyhow::anyhow!(
                "its payload is of version {}, and this worker reads version {PAYLOAD_VERSION}",
                job.version()
            )))
        } else if J::FAIR {
            in_org_slot(&ctx, J::QUEUE, slot, within_timeout(&ctx, job)).await
        } else {
            within_timeout(&ctx, job).await
        };
        record(&ctx, J::QUEUE, J::NAME, items, started, &result);
    }
    .instrument(span)
    .await;
    Ok(())
}

/// Runs `job` until it ends or its timeout passes.
async fn within_timeout<J: Job>(ctx: &WorkerState, job: J) -> JobResult {
    match J::timeout(&ctx.config) {
        None => job.run(ctx).await,
        Some(limit) => tokio::time::timeout(limit, job.run(ctx))
            .await
            .unwrap_or_else(|_| {
                Err(Failure::Retry(anyhow::anyhow!(
                    "it ran for {limit:?}, its timeout, and was dropped"
                )))
            }),
    }
}

/// Logs and counts a job's outcome.
fn record(
    ctx: &WorkerState,
    queue: QueueName,
    name: &'static str,
    items: u64,
    started: Instant,
    result: &JobResult,
) {
    let outcome = match result {
        Ok(()) => "ok",
        Err(Failure::Retry(_)) => "error",
        Err(Failure::GiveUp(_)) => "given_up",
    };
    metrics::counter!(JOBS, "queue" => queue.as_str(), "outcome" => outcome).increment(1);
    metrics::histogram!(JOB_DURATION, "queue" => queue.as_str(), "outcome" => outcome)
        .record(started.elapsed().as_secs_f64());
    // The operator API's rates: not worth failing or delaying a job for.
    let jobs = ctx.jobs.clone();
    tokio::spawn(async move {
        if let Err(err) = jobs.record_done(queue, items).await {
            tracing::debug!(%err, "job not counted in the queue's rates");
        }
    });
    match result {
        Ok(()) => {}
        Err(Failure::Retry(err)) => tracing::warn!(
            error = %format!("{err:#}"),
            "{name} failed; its work stays due and is enqueued again"
        ),
        Err(Failure::GiveUp(err)) => tracing::error!(
            error = %format!("{err:#}"),
            "{name} given up"
        ),
    }
}

/// Runs `work` in the slot `org_slot` of `queue` (none: a job parked before slots existed).
/// A job taken from its lane (recipient-send and webhook-delivery, `parley_jobs::lanes`) holds
/// one of its organization's slots while it runs: renewed from its start (it may have waited
/// in the ready list) until it ends, then given back so that the organization's next job
/// takes its turn.
async fn in_org_slot<T>(
    ctx: &WorkerState,
    queue: QueueName,
    org_slot: Option<(Uuid, String)>,
    work: impl Future<Output = T>,
) -> T {
    let _renewal = org_slot.clone().map(|(org, slot)| {
        let jobs = ctx.jobs.clone();
        Renewal::every(SLOT_RENEW, move || {
            let (jobs, slot) = (jobs.clone(), slot.clone());
            async move {
                if let Err(err) = jobs.slot_held(queue, org, &slot).await {
                    tracing::warn!(%err, queue = queue.as_str(), "organization's slot not renewed");
                }
            }
        })
    });
    let out = work.await;
    let org_slot = org_slot.as_ref().map(|(org, slot)| (*org, slot.as_str()));
    if let Err(err) = ctx.jobs.slot_done(queue, org_slot).await {
        tracing::warn!(%err, queue = queue.as_str(), "organization's slot not given back; it expires");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exponential_policy_doubles_within_its_bounds_and_a_reconciled_one_has_no_delay() {
        let base = Duration::from_secs(1);
        let policy = RetryPolicy {
            retries: Some(3),
            backoff: Backoff::Exponential {
                base,
                max: Duration::from_secs(60),
            },
        };
        for attempt in 1..=10 {
            let d = policy.delay(attempt).unwrap();
            // Jitter adds up to one more of the delay.
            let floor = base * 2u32.pow((attempt - 1).min(5));
            assert!(d >= floor.min(Duration::from_secs(60)), "{attempt}: {d:?}");
            assert!(d <= Duration::from_secs(60), "{attempt}: {d:?}");
        }
        assert_eq!(RetryPolicy::DEFAULT.delay(1), None);
        // The first try and three retries.
        assert!(policy.allows_another(3) && !policy.allows_another(4));
        let unbounded = RetryPolicy {
            retries: None,
            ..policy
        };
        assert!(unbounded.allows_another(u32::MAX));
    }

    /// An error Postgres answers with `code`.
    #[derive(Debug)]
    struct Refused(&'static str);

    impl std::fmt::Display for Refused {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "refused ({})", self.0)
        }
    }

    impl std::error::Error for Refused {}

    impl sqlx::error::DatabaseError for Refused {
        fn message(&self) -> &str {
            "refused"
        }
        fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
            Some(self.0.into())
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    fn postgres(code: &'static str) -> anyhow::Error {
        anyhow::Error::new(sqlx::Error::Database(Box::new(Refused(code)))).context("a statement")
    }

    #[test]
    fn only_errors_of_the_data_give_up() {
        let gives_up = |err| matches!(Failure::of(err), Failure::GiveUp(_));
        // Data exceptions and broken constraints, however deep in the chain.
        assert!(gives_up(postgres("22P02")));
        assert!(gives_up(postgres("22021")));
        assert!(gives_up(postgres("23502")));
        assert!(gives_up(postgres("23514")));
        // A constraint a race can break (a row inserted or deleted meanwhile); the rest.
        assert!(!gives_up(postgres("23505")));
        assert!(!gives_up(postgres("23503")));
        assert!(!gives_up(postgres("23P01")));
        assert!(!gives_up(postgres("40001")));
        assert!(!gives_up(postgres("57P01")));
        assert!(!gives_up(anyhow::anyhow!("Redis is away")));
        assert!(!gives_up(sqlx::Error::PoolTimedOut.into()));
    }
}

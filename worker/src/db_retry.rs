//! Postgres statements tried again through transient failures (a restart, a failover), for
//! the jobs that hold claims meanwhile.

use backon::{ExponentialBuilder, Retryable};

/// How long a job keeps trying to read or write Postgres through transient failures (a
/// restart, a failover) while its claims keep its recipients: what it sent meanwhile is
/// written when Postgres is back, not sent again by another job.
const RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs `statement` again on transient failures, with exponential backoff, until
/// [`RETRY_FOR`] has passed since the first try (by the clock: attempts count, not only waits).
pub async fn retry_transient<T, F, Fut>(statement: F) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
{
    let started = std::time::Instant::now();
    let backoff = ExponentialBuilder::default()
        .with_min_delay(std::time::Duration::from_millis(50))
        .with_max_delay(std::time::Duration::from_secs(2))
        .without_max_times()
        .with_jitter();
    statement
        .retry(backoff)
        .when(|err| {
            parley_usecases::postgres::is_transient_error(err) && started.elapsed() < RETRY_FOR
        })
        .notify(|err, after| tracing::warn!(%err, ?after, "Postgres unavailable; trying again"))
        .await
}

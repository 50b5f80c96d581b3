//! Retention of abandoned uploads: a file still `pending` an hour after its upload URL expired
//! is removed with its object (its client may have PUT the bytes and never confirmed them).
//! The API runs it, being the process that holds the storage credentials; every replica may
//! (files are taken with `SKIP LOCKED`).

use std::time::Duration;

use parley_storage::Storage;
use parley_types::metric_names::RETENTION_DELETED;
use parley_usecases::Services;
use tokio_util::sync::CancellationToken;

/// How often the API looks for abandoned uploads.
const EVERY: Duration = Duration::from_secs(60);
/// How long past its upload URL's expiry a pending file is kept (a client may still confirm).
pub const GRACE: Duration = Duration::from_secs(3600);
/// Files a transaction removes, and transactions a pass.
const BATCH: i64 = 20;
const BATCHES: usize = 25;

/// Sweeps every [`EVERY`] until `shutdown`.
pub async fn run(
    services: Services,
    storage: Storage,
    upload_url_ttl: Duration,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        for _ in 0..BATCHES {
            match sweep_uploads(&services, &storage, upload_url_ttl + GRACE, BATCH).await {
                Ok(n) if n == BATCH as u64 => {}
                Ok(_) => break,
                Err(err) => {
                    tracing::warn!(error = %format!("{err:#}"), "abandoned uploads not swept");
                    break;
                }
            }
        }
    }
}

/// Removes up to `limit` files still `pending` longer than `older_than` after their creation,
/// each object before its row: a file whose object could not be deleted keeps its row and is
/// tried again at the next pass. Returns the files removed.
pub async fn sweep_uploads(
    services: &Services,
    storage: &Storage,
    older_than: Duration,
    limit: i64,
) -> anyhow::Result<u64> {
    let n = parley_usecases::files::sweep_abandoned(services.ctx(), older_than, limit, |id, key| async move {
        match storage.delete(&key).await {
            Ok(()) => true,
            Err(err) => {
                tracing::warn!(%err, file_id = %id, "an abandoned upload's object was not deleted");
                false
            }
        }
    })
    .await?;
    if n > 0 {
        metrics::counter!(RETENTION_DELETED, "kind" => "upload").increment(n);
        tracing::info!(removed = n, "abandoned uploads deleted with their objects");
    }
    Ok(n)
}

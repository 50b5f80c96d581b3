//! Keeps a job informed of whether it may still send: its broadcast is sending and the worker
//! is not shutting down. A pause, a cancel or a SIGTERM stops new sends within a fraction of a
//! second, and cuts short the waits (rate limit, retry backoff) of sends not yet made.

use std::future::Future;
use std::time::Duration;

use parley_domain::broadcasts::BroadcastStatus;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const EVERY: Duration = Duration::from_millis(200);

/// `true` while the job may send.
pub type Go = watch::Receiver<bool>;

pub struct StatusWatch {
    rx: Go,
    poller: tokio::task::JoinHandle<()>,
}

impl Drop for StatusWatch {
    fn drop(&mut self) {
        self.poller.abort();
    }
}

impl StatusWatch {
    /// Watches a broadcast, now `initial`, through `status` (`None`: it is gone), and
    /// `stopping`, the worker's shutdown.
    pub fn spawn<F, Fut>(initial: BroadcastStatus, stopping: CancellationToken, status: F) -> Self
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Option<BroadcastStatus>, sqlx::Error>> + Send,
    {
        let (tx, rx) =
            watch::channel(initial == BroadcastStatus::Sending && !stopping.is_cancelled());
        let poller = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(EVERY) => {}
                    _ = stopping.cancelled() => {
                        let _ = tx.send(false);
                        return;
                    }
                }
                match status().await {
                    Ok(status) => {
                        // Deleted (None): nothing more to send.
                        let go = status == Some(BroadcastStatus::Sending);
                        tx.send_if_modified(|current| std::mem::replace(current, go) != go);
                    }
                    Err(err) => tracing::warn!(%err, "broadcast status poll failed"),
                }
            }
        });
        StatusWatch { rx, poller }
    }

    pub fn is_sending(&self) -> bool {
        *self.rx.borrow()
    }

    /// A receiver that resolves [`stopped`] on its own, for futures that outlive a borrow.
    pub fn receiver(&self) -> Go {
        self.rx.clone()
    }
}

/// Resolves once the job may no longer send.
pub async fn stopped(mut go: Go) {
    let _ = go.wait_for(|go| !*go).await;
}

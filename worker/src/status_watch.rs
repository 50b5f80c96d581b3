//! Keeps a job informed of its broadcast's status, so a pause or cancel stops new sends
//! within a fraction of a second.

use std::time::Duration;

use parley_db as db;
use parley_domain::broadcasts::BroadcastStatus;
use sqlx::PgPool;
use tokio::sync::watch;
use uuid::Uuid;

const EVERY: Duration = Duration::from_millis(200);

pub struct StatusWatch {
    rx: watch::Receiver<BroadcastStatus>,
    poller: tokio::task::JoinHandle<()>,
}

impl Drop for StatusWatch {
    fn drop(&mut self) {
        self.poller.abort();
    }
}

impl StatusWatch {
    pub fn spawn(pool: PgPool, broadcast: Uuid, initial: BroadcastStatus) -> Self {
        let (tx, rx) = watch::channel(initial);
        let poller = tokio::spawn(async move {
            loop {
                tokio::time::sleep(EVERY).await;
                match db::delivery::status(&pool, broadcast).await {
                    Ok(Some(s)) => {
                        tx.send_if_modified(|current| std::mem::replace(current, s) != s);
                    }
                    // Deleted: nothing more to send.
                    Ok(None) => {
                        let _ = tx.send(BroadcastStatus::Cancelled);
                    }
                    Err(err) => tracing::warn!(%err, "broadcast status poll failed"),
                }
            }
        });
        StatusWatch { rx, poller }
    }

    pub fn is_sending(&self) -> bool {
        *self.rx.borrow() == BroadcastStatus::Sending
    }

    /// A receiver that resolves [`stopped`] on its own, for futures that outlive a borrow.
    pub fn receiver(&self) -> watch::Receiver<BroadcastStatus> {
        self.rx.clone()
    }
}

/// Resolves once the broadcast is no longer sending.
pub async fn stopped(mut rx: watch::Receiver<BroadcastStatus>) {
    let _ = rx.wait_for(|s| *s != BroadcastStatus::Sending).await;
}

//! Renewing a lease on a timer while the work that holds it runs: the task stops when its
//! guard is dropped, whether the work ended, failed, panicked or was dropped at shutdown (a
//! renewal that outlived its work would hold the lease for good).

use std::future::Future;
use std::time::Duration;

pub struct Renewal(tokio::task::JoinHandle<()>);

impl Renewal {
    /// Calls `renew` now and then every `period` until dropped.
    pub fn every<F, Fut>(period: Duration, mut renew: F) -> Self
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        Renewal(tokio::spawn(async move {
            loop {
                renew().await;
                tokio::time::sleep(period).await;
            }
        }))
    }
}

impl Drop for Renewal {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    // On the real clock (tokio's paused one needs its `test-util` feature, which would build
    // tokio, and all that depends on it, apart for the tests).
    #[tokio::test]
    async fn a_renewal_runs_until_its_guard_is_dropped() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        let renewal = Renewal::every(Duration::from_millis(20), move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while runs.load(Ordering::SeqCst) < 3 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "it renews, again and again"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(renewal);
        // Aborted: a run that had begun ends, none begins.
        tokio::task::yield_now().await;
        let after = runs.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            runs.load(Ordering::SeqCst),
            after,
            "none after the guard is dropped"
        );
    }
}

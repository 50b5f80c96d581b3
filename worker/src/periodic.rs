//! The loop the ticker, the outbox relay and the SLA scheduler share: a pass every tick, and
//! at once when the task is woken, until shutdown. A pass logs its own failures; the next
//! tick tries again.

use std::future::Future;
use std::time::Duration;

use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

pub trait Periodic {
    /// Pass number `n` (0, 1, ...), so a task can do some work only every few ticks.
    fn pass(&mut self, n: u64) -> impl Future<Output = ()> + Send;

    /// Resolves when a pass is wanted before the next tick; never, unless a task says so.
    fn woken(&mut self) -> impl Future<Output = ()> + Send {
        std::future::pending()
    }
}

/// Runs `task` every `period` until `shutdown`. A late tick delays the next ones rather than
/// bunching them; a pass that was woken starts the period again.
pub async fn run(period: Duration, shutdown: CancellationToken, mut task: impl Periodic) {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    for n in 0.. {
        let woken = tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticks.tick() => false,
            _ = task.woken() => true,
        };
        if woken {
            ticks.reset();
        }
        task.pass(n).await;
    }
}

//! The contract of the worker's periodic tasks (the ticker, the outbox relay, the SLA
//! scheduler, maintenance, the organizations' limits, the operator's actions), and the one
//! loop that runs them: a pass every tick, and at once when the task is woken, until shutdown.
//! Each pass runs in a span named for its task, is timed and counted
//! (`parley_periodic_passes_total{task, outcome}`, `parley_periodic_pass_duration_seconds`);
//! a pass is made of steps ([`Pass::step`]), and a step that fails is logged and counted
//! (`parley_periodic_step_failures_total{task, step}`) while the others go on. The next tick
//! tries again.

use std::future::Future;
use std::time::{Duration, Instant};

use parley_types::metric_names::{PERIODIC_PASS_DURATION, PERIODIC_PASSES, PERIODIC_STEP_FAILURES};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub trait Periodic {
    /// What its metrics and log lines call it.
    const TASK: &'static str;

    /// Pass number `n` (0, 1, ...), so a task can do some work only every few ticks.
    fn pass(&mut self, n: u64, pass: &mut Pass) -> impl Future<Output = ()> + Send;

    /// Resolves when a pass is wanted before the next tick; never, unless a task says so.
    fn woken(&mut self) -> impl Future<Output = ()> + Send {
        std::future::pending()
    }
}

/// One pass of a task: the steps it ran and how many failed.
pub struct Pass {
    task: &'static str,
    failed: u32,
}

impl Pass {
    fn new(task: &'static str) -> Self {
        Pass { task, failed: 0 }
    }

    /// Runs one step of the pass; a failure is logged and counted under `step`, and the pass
    /// goes on. Returns the step's value when it succeeded.
    pub async fn step<T>(
        &mut self,
        step: &'static str,
        work: impl Future<Output = anyhow::Result<T>>,
    ) -> Option<T> {
        match work.await {
            Ok(value) => Some(value),
            Err(err) => {
                self.failed += 1;
                metrics::counter!(PERIODIC_STEP_FAILURES, "task" => self.task, "step" => step)
                    .increment(1);
                tracing::warn!(
                    task = self.task,
                    step,
                    error = %format!("{err:#}"),
                    "periodic step failed; the next pass tries again"
                );
                None
            }
        }
    }

    /// Whether every step so far succeeded.
    pub fn ok(&self) -> bool {
        self.failed == 0
    }
}

/// Runs `task` every `period` until `shutdown`. A late tick delays the next ones rather than
/// bunching them; a pass that was woken starts the period again.
pub async fn run<P: Periodic>(period: Duration, shutdown: CancellationToken, mut task: P) {
    // Seen from the start, so that dashboards and alerts find the series (an increment of
    // nothing: another task of the same name in this process keeps its count).
    for outcome in ["ok", "error"] {
        metrics::counter!(PERIODIC_PASSES, "task" => P::TASK, "outcome" => outcome).increment(0);
    }
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
        let started = Instant::now();
        let mut pass = Pass::new(P::TASK);
        task.pass(n, &mut pass)
            .instrument(tracing::debug_span!("periodic", task = P::TASK, pass = n))
            .await;
        let outcome = if pass.ok() { "ok" } else { "error" };
        metrics::counter!(PERIODIC_PASSES, "task" => P::TASK, "outcome" => outcome).increment(1);
        metrics::histogram!(PERIODIC_PASS_DURATION, "task" => P::TASK)
            .record(started.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failed_step_is_counted_and_the_pass_goes_on() {
        let mut pass = Pass::new("test");
        assert_eq!(pass.step("one", async { Ok(1) }).await, Some(1));
        assert!(pass.ok());
        let failed: Option<()> = pass.step("two", async { anyhow::bail!("no") }).await;
        assert_eq!(failed, None);
        assert_eq!(pass.step("three", async { Ok("on") }).await, Some("on"));
        assert!(!pass.ok());
    }
}

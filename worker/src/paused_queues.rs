//! The queues an operator paused, as this worker last read them (`crate::operator` reads
//! them; a paused queue's consumer stops taking jobs: `crate::consumers`). Unknown until the
//! first read: a worker started while a queue is paused takes none of its jobs.

use std::collections::HashSet;
use std::sync::Arc;

use parley_jobs::QueueName;
use tokio::sync::watch;

/// The paused queues; `None` before the first read.
pub type Paused = Option<HashSet<QueueName>>;

#[derive(Clone)]
pub struct PausedQueues(Arc<watch::Sender<Paused>>);

impl Default for PausedQueues {
    fn default() -> Self {
        PausedQueues(Arc::new(watch::Sender::new(None)))
    }
}

impl PausedQueues {
    pub fn subscribe(&self) -> watch::Receiver<Paused> {
        self.0.subscribe()
    }

    pub fn set(&self, paused: HashSet<QueueName>) {
        self.0.send_if_modified(|now| {
            let before = now.clone().unwrap_or_default();
            if now.is_some() && before == paused {
                return false;
            }
            for q in paused.symmetric_difference(&before) {
                let state = if paused.contains(q) {
                    "paused"
                } else {
                    "resumed"
                };
                tracing::info!(queue = q.as_str(), state, "queue {state} by an operator");
            }
            *now = Some(paused);
            true
        });
    }
}

/// Whether `queue` may be consumed: the pauses are known and it is not among them.
pub fn runs(paused: &Paused, queue: QueueName) -> bool {
    paused.as_ref().is_some_and(|p| !p.contains(&queue))
}

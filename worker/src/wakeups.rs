//! Wake-ups: a producer publishes the name of the queue it pushed to
//! ([`parley_jobs::wake_channel`]), and one subscription per worker process wakes that queue's
//! consumer, which fetches at once. Besides, an idle consumer looks for jobs every
//! `PARLEY_WORKER_POLL_MS` (1 s by default): the pickup of a job whose wake-up was lost (no
//! subscription at the time, Redis failing over) or that came back by apalis' own orphan
//! recovery, which publishes nothing.
//!
//! Why not poll often instead: docs/decisions.md, "Wake-ups instead of fast polling".

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use apalis_core::backend::ext::poll_strategy::{PollSnapshot, PollStrategy};
use futures::StreamExt;
use futures::task::AtomicWaker;
use parley_jobs::redis_conn::Redis;
use parley_jobs::{QueueName, wake_channel};
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

/// How soon a consumer looks again after a wake-up: a wake-up that arrives while a fetch is
/// on its way back empty is consumed by that fetch, so one more fetch follows it.
const AGAIN: Duration = Duration::from_millis(25);

/// How long subscribing may take (connecting, then the SUBSCRIBE's answer).
const SUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(5);

/// A subscription is pinged this often, and given up (then made again) when the answer takes
/// longer than [`PING_TIMEOUT`]: a connection can die without closing (a node gone behind a
/// DNS switch or a dropped route), and a dead subscription's consumers only poll.
const PING_EVERY: Duration = Duration::from_secs(5);
const PING_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Signal {
    woken: AtomicBool,
    waker: AtomicWaker,
}

impl Signal {
    fn wake(&self) {
        self.woken.store(true, Ordering::Release);
        self.waker.wake();
    }
}

/// The wake-up signals of the queues this process consumes. Cheap to clone.
#[derive(Clone)]
pub struct Wakeups {
    signals: Arc<HashMap<QueueName, Arc<Signal>>>,
}

impl Wakeups {
    pub fn new(queues: &[QueueName]) -> Self {
        Wakeups {
            signals: Arc::new(queues.iter().map(|q| (*q, Arc::default())).collect()),
        }
    }

    fn wake(&self, queue: QueueName) {
        if let Some(signal) = self.signals.get(&queue) {
            signal.wake();
        }
    }

    fn wake_all(&self) {
        self.signals.values().for_each(|s| s.wake());
    }

    /// The poll strategy of `queue`'s consumer: fetch on a wake-up, and every `every` besides.
    pub fn strategy(&self, queue: QueueName, every: Duration) -> WakeOrPoll {
        WakeOrPoll {
            signal: self.signals.get(&queue).cloned().unwrap_or_default(),
            every,
            next: Box::pin(tokio::time::sleep(every)),
        }
    }

    /// Listens for wake-ups until `shutdown`, subscribing again a second after a loss (the
    /// connection closed, or a ping unanswered). Each (re)subscription wakes every consumer:
    /// jobs may have been pushed meanwhile.
    pub async fn listen(self, redis: Redis, shutdown: CancellationToken) {
        let channel = wake_channel(redis.prefix());
        while !shutdown.is_cancelled() {
            let subscribed = tokio::select! {
                _ = shutdown.cancelled() => return,
                subscribed = tokio::time::timeout(SUBSCRIBE_TIMEOUT, redis.subscribe(&channel)) => subscribed,
            };
            match subscribed.unwrap_or_else(|_| {
                Err(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "subscribe timed out",
                )))
            }) {
                Ok(pubsub) => {
                    self.wake_all();
                    let Some(reason) = self.follow(pubsub, &shutdown).await else {
                        return;
                    };
                    tracing::warn!(%reason, "wake-up subscription lost; consumers poll until it is back");
                }
                Err(err) => {
                    tracing::warn!(%err, "no wake-up subscription; consumers poll until there is one");
                }
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    /// Wakes consumers on the subscription's messages, and pings it; returns why it ended, or
    /// `None` at shutdown.
    async fn follow(
        &self,
        pubsub: redis::aio::PubSub,
        shutdown: &CancellationToken,
    ) -> Option<String> {
        let (mut sink, mut messages) = pubsub.split();
        let mut ping = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return None,
                message = messages.next() => {
                    let Some(message) = message else {
                        return Some("connection closed".to_owned());
                    };
                    let queue = message.get_payload::<String>().ok();
                    if let Some(queue) = queue.as_deref().and_then(QueueName::parse) {
                        self.wake(queue);
                    }
                }
                _ = ping.tick() => {
                    // Messages that arrive meanwhile wait in the stream's buffer. Subscribed,
                    // the answer is an array (`pong`, "") or an error reply: any answer is one,
                    // hence `Value`.
                    match tokio::time::timeout(PING_TIMEOUT, sink.ping::<redis::Value>()).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(err)) => return Some(format!("ping failed: {err}")),
                        Err(_) => return Some(format!("no answer to a ping within {PING_TIMEOUT:?}")),
                    }
                }
            }
        }
    }
}

/// An apalis poll strategy: wakes its consumer when the queue's wake-up arrives, and every
/// `every` besides. (apalis fetches again at once while fetches return jobs; a strategy only
/// wakes a consumer whose last fetch came back empty.)
pub struct WakeOrPoll {
    signal: Arc<Signal>,
    every: Duration,
    next: Pin<Box<Sleep>>,
}

impl PollStrategy for WakeOrPoll {
    fn poll_drive(&mut self, cx: &mut Context<'_>, _: &PollSnapshot) -> Poll<Option<()>> {
        self.signal.waker.register(cx.waker());
        let next = if self.signal.woken.swap(false, Ordering::AcqRel) {
            AGAIN
        } else if self.next.as_mut().poll(cx).is_ready() {
            self.every
        } else {
            return Poll::Pending;
        };
        // Armed at once: apalis may not poll the strategy again before this timer is due
        // (an empty fetch ends the pass), and a timer wakes only once it has been polled.
        self.next.as_mut().reset(Instant::now() + next);
        let _ = self.next.as_mut().poll(cx);
        Poll::Ready(Some(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drive(strategy: &mut WakeOrPoll) -> bool {
        let mut cx = Context::from_waker(futures::task::noop_waker_ref());
        strategy
            .poll_drive(&mut cx, &PollSnapshot::default())
            .is_ready()
    }

    /// Polls `strategy` until it is ready, for at most `secs`.
    async fn ready_within(strategy: &mut WakeOrPoll, secs: u64) -> bool {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if drive(strategy) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        false
    }

    // On the real clock (tokio's paused one needs its `test-util` feature, which would build
    // tokio, and all that depends on it, apart for the tests): a poll far away stands for
    // "not yet", a wait with a deadline for "soon".
    #[tokio::test]
    async fn a_consumer_fetches_on_its_wakeup_and_at_its_poll_besides() {
        let wakeups = Wakeups::new(&[QueueName::RecipientSend, QueueName::SlaCheck]);
        let mut send = wakeups.strategy(QueueName::RecipientSend, Duration::from_secs(3600));
        assert!(!drive(&mut send), "nothing to fetch yet");

        wakeups.wake(QueueName::SlaCheck);
        assert!(!drive(&mut send), "another queue's wake-up");
        wakeups.wake(QueueName::RecipientSend);
        assert!(drive(&mut send), "its own wake-up");
        // One more look soon after a wake-up (its poll is an hour away), then none: the
        // wake-up was taken once.
        assert!(ready_within(&mut send, 5).await, "the look again");
        assert!(!drive(&mut send), "then the poll, an hour away");

        // The poll, without a wake-up (of a queue never woken).
        let quiet = Wakeups::new(&[QueueName::SlaCheck]);
        let mut polled = quiet.strategy(QueueName::SlaCheck, Duration::from_millis(50));
        assert!(ready_within(&mut polled, 5).await, "the poll");
    }
}

//! Job queues: one apalis Redis queue per job kind, carrying small, typed, versioned payloads.
//!
//! The queue design follows ../shared/JOBS.md: payloads name rows in Postgres (which holds the
//! truth) and carry batches; apalis' own delayed jobs and retries are never used (mass timers
//! live in Postgres and a ticker moves due rows here); task locking and events are off, which
//! is the fast path; results are acknowledged so the in-flight sets stay small, and the
//! maintenance tick vacuums what acknowledgements leave behind.

use std::time::Duration;

use apalis_core::backend::TaskSink;
use apalis_redis::{Config, RedisStorage};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub mod redis_conn;

use crate::redis_conn::{Conn, Redis};

/// Version of every payload below; a worker drops (and logs) payloads of another version.
pub const PAYLOAD_VERSION: u16 = 1;

fn version() -> u16 {
    PAYLOAD_VERSION
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueName {
    BroadcastDispatch,
    RecipientDelivery,
    WebhookDelivery,
    SlaCheck,
    ContactImport,
}

impl QueueName {
    pub const ALL: &'static [QueueName] = &[
        QueueName::BroadcastDispatch,
        QueueName::RecipientDelivery,
        QueueName::WebhookDelivery,
        QueueName::SlaCheck,
        QueueName::ContactImport,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            QueueName::BroadcastDispatch => "broadcast-dispatch",
            QueueName::RecipientDelivery => "recipient-delivery",
            QueueName::WebhookDelivery => "webhook-delivery",
            QueueName::SlaCheck => "sla-check",
            QueueName::ContactImport => "contact-import",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|q| q.as_str() == s)
    }
}

/// Make progress on a broadcast: fan out its audience, or enqueue its pending recipients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchBroadcast {
    #[serde(default = "version")]
    pub version: u16,
    pub broadcast_id: Uuid,
    /// After a resume: enqueue every pending recipient again, not only new ones.
    #[serde(default)]
    pub requeue: bool,
}

/// Send a batch of a broadcast's recipients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliverRecipients {
    #[serde(default = "version")]
    pub version: u16,
    pub broadcast_id: Uuid,
    pub recipient_ids: Vec<Uuid>,
}

/// Attempt a batch of webhook deliveries (of one webhook, as the relay groups them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliverWebhooks {
    #[serde(default = "version")]
    pub version: u16,
    pub delivery_ids: Vec<Uuid>,
}

/// Deliveries per webhook job.
pub const WEBHOOK_BATCH: usize = 25;

/// Run a batch of SLA checks (warning times and deadlines that have come).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckSla {
    #[serde(default = "version")]
    pub version: u16,
    pub check_ids: Vec<Uuid>,
}

/// Run a contact import (`contact_imports` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportContacts {
    #[serde(default = "version")]
    pub version: u16,
    pub import_id: Uuid,
}

/// Checks per SLA job.
pub const SLA_BATCH: usize = 250;

/// The name of a queue, which starts every key apalis-redis gives it: a hash tag, so that on a
/// Redis Cluster all of a queue's keys are in one slot (its scripts use several at once).
pub fn queue_name(prefix: &str, queue: QueueName) -> String {
    format!("{{{prefix}:queue:{}}}", queue.as_str())
}

/// The channel on which producers name the queue they pushed to, so that idle consumers fetch
/// at once instead of at their next poll. A message lost (no subscriber connected, Redis
/// failing over) only delays the job to that poll.
pub fn wake_channel(prefix: &str) -> String {
    format!("{prefix}:wake")
}

/// How long a producer waits for its wake-up to be published.
const WAKE_TIMEOUT: Duration = Duration::from_millis(200);

/// The apalis configuration of a queue, shared by producers and consumers.
pub fn queue_config(prefix: &str, queue: QueueName) -> Config {
    Config::default()
        .queue(queue_name(prefix, queue))
        .lock_tasks(false)
        .persist_results(true)
        .emit_events(false)
        // One job per fetch: a fetched job waits for no slot, so it holds its claims from the
        // moment it leaves the queue (a batch's later jobs held none while they waited, and
        // the reconciler took their recipients for lost).
        .batch_size(1)
        // A worker that stops heartbeating is presumed dead after 10 s, and its in-flight jobs
        // go back to the queue (Postgres reconciliation covers the rest). Its claims on
        // recipients (PARLEY_RECIPIENT_LEASE_SECS, 6 s) are gone by then, so those jobs send.
        .heartbeat_interval(Duration::from_secs(2))
        .missed_heartbeats(5)
}

/// Producer side: enqueues jobs. Cheap to clone.
#[derive(Clone)]
pub struct Jobs {
    conn: Conn,
    prefix: String,
}

/// Recipients per delivery job.
pub const DELIVERY_BATCH: usize = 200;

/// Jobs moved from a scheduled set to a ready list per script call: well under the ~8,000
/// values a Lua `unpack()` takes.
const PROMOTE_BATCH: usize = 1_000;

impl Jobs {
    pub fn new(redis: &Redis) -> Self {
        Jobs {
            conn: redis.conn.clone(),
            prefix: redis.prefix().to_owned(),
        }
    }

    pub fn storage<T>(&self, queue: QueueName) -> RedisStorage<T, Conn> {
        RedisStorage::new(self.conn.clone()).with_config(queue_config(&self.prefix, queue))
    }

    pub async fn dispatch(&self, broadcast_id: Uuid, requeue: bool) -> Result<(), JobError> {
        let job = DispatchBroadcast {
            version: PAYLOAD_VERSION,
            broadcast_id,
            requeue,
        };
        self.push(QueueName::BroadcastDispatch, vec![job]).await
    }

    /// Enqueues delivery jobs of at most [`DELIVERY_BATCH`] recipients each.
    pub async fn deliver(&self, broadcast_id: Uuid, recipients: &[Uuid]) -> Result<(), JobError> {
        if recipients.is_empty() {
            return Ok(());
        }
        let jobs = recipients
            .chunks(DELIVERY_BATCH)
            .map(|chunk| DeliverRecipients {
                version: PAYLOAD_VERSION,
                broadcast_id,
                recipient_ids: chunk.to_vec(),
            })
            .collect();
        self.push(QueueName::RecipientDelivery, jobs).await
    }

    /// Enqueues webhook delivery jobs, keeping each webhook's deliveries together: (webhook,
    /// delivery) pairs, in any order.
    pub async fn deliver_webhooks(&self, deliveries: &[(Uuid, Uuid)]) -> Result<(), JobError> {
        if deliveries.is_empty() {
            return Ok(());
        }
        let mut by_webhook: std::collections::BTreeMap<Uuid, Vec<Uuid>> = Default::default();
        for (webhook, delivery) in deliveries {
            by_webhook.entry(*webhook).or_default().push(*delivery);
        }
        // Round-robin over the webhooks, so the workers take up many endpoints at once rather
        // than one endpoint's whole backlog.
        let mut chunks: Vec<std::slice::Chunks<'_, Uuid>> = by_webhook
            .values()
            .map(|ids| ids.chunks(WEBHOOK_BATCH))
            .collect();
        let mut jobs = Vec::new();
        loop {
            let before = jobs.len();
            for c in &mut chunks {
                if let Some(chunk) = c.next() {
                    jobs.push(DeliverWebhooks {
                        version: PAYLOAD_VERSION,
                        delivery_ids: chunk.to_vec(),
                    });
                }
            }
            if jobs.len() == before {
                break;
            }
        }
        self.push(QueueName::WebhookDelivery, jobs).await
    }

    pub async fn import_contacts(&self, import_id: Uuid) -> Result<(), JobError> {
        let job = ImportContacts {
            version: PAYLOAD_VERSION,
            import_id,
        };
        self.push(QueueName::ContactImport, vec![job]).await
    }

    /// Enqueues SLA check jobs of at most [`SLA_BATCH`] checks each.
    pub async fn check_sla(&self, checks: &[Uuid]) -> Result<(), JobError> {
        if checks.is_empty() {
            return Ok(());
        }
        let jobs = checks
            .chunks(SLA_BATCH)
            .map(|chunk| CheckSla {
                version: PAYLOAD_VERSION,
                check_ids: chunk.to_vec(),
            })
            .collect();
        self.push(QueueName::SlaCheck, jobs).await
    }

    /// Pushes jobs, moves them from the queue's scheduled set to its ready list, and wakes the
    /// queue's idle consumers ([`wake_channel`]).
    ///
    /// apalis-redis pushes every job as scheduled for the current second, and its fetch moves
    /// every due scheduled job to the ready list in one Lua `unpack()`: past about 8,000 that
    /// fails, and every later fetch of the queue with it (../shared/JOBS.md). A burst pushed
    /// while the consumers are busy (a large fan-out behind a slow provider) would reach that,
    /// so the producer promotes its jobs itself, [`PROMOTE_BATCH`] at a time.
    async fn push<T>(&self, queue: QueueName, jobs: Vec<T>) -> Result<(), JobError>
    where
        T: Serialize + for<'de> Deserialize<'de> + Send + Sync + Unpin + 'static,
    {
        self.storage::<T>(queue)
            .push_bulk(jobs)
            .await
            .map_err(|e| JobError(e.to_string()))?;
        self.promote(queue)
            .await
            .map_err(|e| JobError(e.to_string()))?;
        // The jobs are in; a wake-up that fails is only a later pickup, so it waits briefly (on
        // a cluster the channel's node may be failing over while the queue's is fine).
        let mut conn = self.conn.clone();
        let mut publish = redis::cmd("PUBLISH");
        publish.arg(wake_channel(&self.prefix)).arg(queue.as_str());
        let publish = publish.query_async::<i64>(&mut conn);
        match tokio::time::timeout(WAKE_TIMEOUT, publish).await {
            Ok(Ok(_)) => {}
            Ok(Err(err)) => tracing::debug!(%err, queue = queue.as_str(), "consumers not woken"),
            Err(_) => tracing::debug!(queue = queue.as_str(), "consumers not woken in time"),
        }
        Ok(())
    }

    /// Moves the due jobs of a queue's scheduled set to its ready list, in batches small
    /// enough for `unpack()`, until none is due.
    pub async fn promote(&self, queue: QueueName) -> Result<(), redis::RedisError> {
        static PROMOTE: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
            redis::Script::new(
                r"local ids = redis.call('zrangebyscore', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
                if #ids > 0 then
                    redis.call('rpush', KEYS[2], unpack(ids))
                    redis.call('zrem', KEYS[1], unpack(ids))
                end
                return #ids",
            )
        });
        let config = queue_config(&self.prefix, queue);
        let mut conn = self.conn.clone();
        loop {
            // apalis' clock: whole seconds of the producer's time.
            let now = chrono::Utc::now().timestamp();
            let moved: usize = PROMOTE
                .key(config.scheduled_jobs_set())
                .key(config.active_jobs_list())
                .arg(now)
                .arg(PROMOTE_BATCH)
                .invoke_async(&mut conn)
                .await?;
            if moved < PROMOTE_BATCH {
                return Ok(());
            }
        }
    }

    /// Sets the marker kept beside a queue's keys (in its hash slot, so on a cluster it lives
    /// and dies with the queue's master) when it is absent; true when it was: the queue's keys
    /// were lost, or the deployment has just started.
    pub async fn mark_present(&self, queue: QueueName) -> Result<bool, redis::RedisError> {
        let mut conn = self.conn.clone();
        let set: Option<String> = redis::cmd("SET")
            .arg(format!("{}:present", queue_name(&self.prefix, queue)))
            .arg(1)
            .arg("NX")
            .query_async(&mut conn)
            .await?;
        Ok(set.is_some())
    }

    /// How long ago work must have been enqueued in Postgres for its job to be presumed lost:
    /// `wait` before the oldest job still waiting in `queue` was pushed. A job behind a long
    /// queue is late, not lost; and work is written to Postgres before its job is pushed
    /// (a fan-out slice, then its jobs), so the work of the oldest job waiting is a little
    /// older than that job: `wait` covers the gap.
    pub async fn lost_after(
        &self,
        queue: QueueName,
        wait: Duration,
    ) -> Result<Duration, redis::RedisError> {
        Ok(wait
            + self
                .depth(queue)
                .await?
                .oldest_ready_age
                .unwrap_or_default())
    }

    /// Jobs waiting in a queue, read from Redis itself: ready ones, scheduled ones, and how
    /// long the next ready one (the list's head) has waited.
    pub async fn depth(&self, queue: QueueName) -> Result<QueueDepth, redis::RedisError> {
        let config = queue_config(&self.prefix, queue);
        let mut conn = self.conn.clone();
        let (ready, scheduled, head): (u64, u64, Option<String>) = redis::pipe()
            .llen(config.active_jobs_list())
            .zcard(config.scheduled_jobs_set())
            .lindex(config.active_jobs_list(), 0)
            .query_async(&mut conn)
            .await?;
        let now_ms = chrono::Utc::now().timestamp_millis();
        Ok(QueueDepth {
            ready,
            scheduled,
            oldest_ready_age: head
                .as_deref()
                .and_then(ulid_millis)
                .map(|ms| Duration::from_millis(u64::try_from(now_ms - ms).unwrap_or(0))),
        })
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    pub ready: u64,
    pub scheduled: u64,
    pub oldest_ready_age: Option<Duration>,
}

/// The creation time (Unix milliseconds) in a ULID, the id apalis-redis gives each job: its
/// first ten Crockford base32 characters.
fn ulid_millis(id: &str) -> Option<i64> {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    if id.len() != 26 {
        return None;
    }
    id.bytes().take(10).try_fold(0i64, |acc, c| {
        let digit = ALPHABET.iter().position(|a| *a == c.to_ascii_uppercase())?;
        Some(acc * 32 + digit as i64)
    })
}

#[derive(Debug, thiserror::Error)]
#[error("could not enqueue a job: {0}")]
pub struct JobError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ulid_carries_its_creation_time() {
        // 01ARZ3NDEKTSV4RRFFQ69G5FAV is the ULID spec's example: 1469922850259 ms.
        assert_eq!(
            ulid_millis("01ARZ3NDEKTSV4RRFFQ69G5FAV"),
            Some(1_469_922_850_259)
        );
        assert_eq!(ulid_millis("not a ulid"), None);
        assert_eq!(ulid_millis("0!ARZ3NDEKTSV4RRFFQ69G5FAV"), None);
    }

    #[test]
    fn queue_names_round_trip() {
        for q in QueueName::ALL {
            assert_eq!(QueueName::parse(q.as_str()), Some(*q));
        }
        assert_eq!(QueueName::parse("nope"), None);
    }

    #[test]
    fn payloads_without_a_version_are_version_one() {
        let id = Uuid::now_v7();
        let job: DispatchBroadcast =
            serde_json::from_value(serde_json::json!({"broadcast_id": id})).unwrap();
        assert_eq!(job.version, 1);
    }
}

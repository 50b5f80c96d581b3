//! Job queues: one apalis Redis queue per job kind, carrying small, typed, versioned payloads.
//!
//! The queue design follows apalis-redis 1.0's measured limits (docs/jobs.md): payloads name rows in Postgres (which holds the
//! truth) and carry batches; apalis' own delayed jobs and retries are never used (mass timers
//! live in Postgres and a ticker moves due rows here); task locking and events are off, which
//! is the fast path; results are acknowledged so the in-flight sets stay small, and the
//! maintenance tick vacuums what acknowledgements leave behind.

use std::time::Duration;

use apalis_core::backend::TaskSink;
use apalis_redis::{Config, RedisStorage};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub mod activity;
pub mod frequency_caps;
mod lanes;
pub mod redis_conn;

use crate::lanes::Lanes;
pub use crate::lanes::{Lane, Parked, SLOT_LEASE, SLOT_RENEW};
use crate::redis_conn::{Conn, Redis};
use parley_types::ids::{BroadcastId, OrgId, RecipientId};
use parley_types::metric_names::org_limit_hits;

/// Version of every payload below; a worker drops (and logs) payloads of another version.
pub const PAYLOAD_VERSION: u16 = 1;

fn version() -> u16 {
    PAYLOAD_VERSION
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueName {
    BroadcastDispatch,
    RecipientSend,
    WebhookDelivery,
    SlaCheck,
    ContactImport,
}

impl QueueName {
    pub const ALL: &'static [QueueName] = &[
        QueueName::BroadcastDispatch,
        QueueName::RecipientSend,
        QueueName::WebhookDelivery,
        QueueName::SlaCheck,
        QueueName::ContactImport,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            QueueName::BroadcastDispatch => "broadcast-dispatch",
            QueueName::RecipientSend => "recipient-send",
            QueueName::WebhookDelivery => "webhook-delivery",
            QueueName::SlaCheck => "sla-check",
            QueueName::ContactImport => "contact-import",
        }
    }

    /// The queue named `s`, by its name or its former one ([`QueueName::FORMER_NAMES`]).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|q| q.as_str() == s)
            .or_else(|| {
                Self::FORMER_NAMES
                    .iter()
                    .find(|(_, former)| *former == s)
                    .map(|(q, _)| *q)
            })
    }

    /// Names a queue had before, still read wherever a queue is named (settings, the operator
    /// API, stored pauses) for one release: `recipient-send` was `recipient-delivery`.
    pub const FORMER_NAMES: &'static [(QueueName, &'static str)] =
        &[(QueueName::RecipientSend, "recipient-delivery")];

    /// The name every worker of this release and of the one before reads: its former name
    /// while it has one, else its name. Pauses are stored, and wake-ups published, under it,
    /// so that during a rolling upgrade older workers obey a pause and wake up too.
    pub fn shared_name(self) -> &'static str {
        Self::FORMER_NAMES
            .iter()
            .find(|(q, _)| *q == self)
            .map_or(self.as_str(), |(_, former)| former)
    }

    /// Its name, then its former names.
    pub fn names(self) -> Vec<&'static str> {
        std::iter::once(self.as_str())
            .chain(
                Self::FORMER_NAMES
                    .iter()
                    .filter(|(q, _)| *q == self)
                    .map(|(_, former)| *former),
            )
            .collect()
    }

    /// The name its Redis keys go by: the queue's first name, so that an upgrade finds the
    /// jobs already waiting (`recipient-send`'s keys keep `recipient-delivery`).
    pub fn key_name(self) -> &'static str {
        match self {
            QueueName::RecipientSend => "recipient-delivery",
            other => other.as_str(),
        }
    }
}

/// A job's payload: the queue it goes to and the version of its shape, which a worker checks
/// before it runs the job.
pub trait Payload: Serialize + for<'de> Deserialize<'de> + Send + Sync + Unpin + 'static {
    const QUEUE: QueueName;
    fn version(&self) -> u16;
}

macro_rules! payload {
    ($($payload:ty => $queue:ident),+ $(,)?) => {$(
        impl Payload for $payload {
            const QUEUE: QueueName = QueueName::$queue;
            fn version(&self) -> u16 {
                self.version
            }
        }
    )+};
}

payload!(
    DispatchBroadcast => BroadcastDispatch,
    SendRecipients => RecipientSend,
    DeliverWebhooks => WebhookDelivery,
    CheckSla => SlaCheck,
    ImportContacts => ContactImport,
);

/// Make progress on a broadcast: fan out its audience, or enqueue its pending recipients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchBroadcast {
    #[serde(default = "version")]
    pub version: u16,
    pub broadcast_id: BroadcastId,
    /// After a resume: enqueue every pending recipient again, not only new ones.
    #[serde(default)]
    pub requeue: bool,
}

/// Send a batch of a broadcast's recipients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendRecipients {
    #[serde(default = "version")]
    pub version: u16,
    pub broadcast_id: BroadcastId,
    pub recipient_ids: Vec<RecipientId>,
    /// Its organization and tier, so that what it hands back goes to the same lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization_id: Option<OrgId>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub high: bool,
    /// When it was parked in its lane (Unix milliseconds): the reconciler counts it as
    /// waiting from then, in the lane and in the ready list alike.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked_at_ms: Option<i64>,
    /// Its organization's slot, held from the lane until the job ends ([`Jobs::slot_held`],
    /// [`Jobs::slot_done`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
}

impl SendRecipients {
    /// The lane its recipients go back to (a job of before lanes: the bulk lane of an
    /// unknown organization, which is a lane of its own).
    pub fn lane(&self) -> Lane {
        Lane {
            organization_id: self.organization_id.map(OrgId::uuid).unwrap_or_default(),
            id: self.broadcast_id.uuid(),
            high: self.high,
        }
    }
}

/// Attempt a batch of webhook deliveries (of one webhook, as the relay groups them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliverWebhooks {
    #[serde(default = "version")]
    pub version: u16,
    pub delivery_ids: Vec<Uuid>,
    /// The organization whose lane it waited in, and its slot there (as for
    /// [`SendRecipients`]); none in a job of before lanes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parked_at_ms: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
}

/// A job that waits its turn in a lane ([`lanes`]) and holds one of its organization's slots
/// while it is ready or runs.
pub trait Fair: Payload {
    /// Its organization and slot, once it left its lane.
    fn slot(&self) -> Option<(Uuid, &str)>;
    fn with_slot(self, slot: String) -> Self;
}

impl Fair for SendRecipients {
    fn slot(&self) -> Option<(Uuid, &str)> {
        Some((self.organization_id?.uuid(), self.slot.as_deref()?))
    }
    fn with_slot(self, slot: String) -> Self {
        SendRecipients {
            slot: Some(slot),
            ..self
        }
    }
}

impl Fair for DeliverWebhooks {
    fn slot(&self) -> Option<(Uuid, &str)> {
        Some((self.organization_id?, self.slot.as_deref()?))
    }
    fn with_slot(self, slot: String) -> Self {
        DeliverWebhooks {
            slot: Some(slot),
            ..self
        }
    }
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
    format!("{{{prefix}:queue:{}}}", queue.key_name())
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
        // recipients (PARLEY_CLAIM_LEASE_SECS, 6 s) are gone by then, so those jobs send.
        .heartbeat_interval(Duration::from_secs(2))
        .missed_heartbeats(5)
}

/// Producer side: enqueues jobs. Cheap to clone.
#[derive(Clone)]
pub struct Jobs {
    conn: Conn,
    prefix: String,
    /// How the recipient-send queue is shared.
    send: FairShare,
    /// How the webhook-delivery queue is shared.
    webhooks: FairShare,
    /// Limit hits are counted per organization (`PARLEY_METRICS_ORG_LABEL`).
    org_label: bool,
}

/// How a queue of tenant work is shared between organizations ([`lanes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FairShare {
    /// Jobs its ready list is topped up to from the lanes: enough that a worker's free slots
    /// find one at once (each job that starts tops the list up again), few enough that a new
    /// lane's first job waits behind little (docs/jobs.md, Fair share).
    pub ready: usize,
    /// Jobs of one organization ready or running at once, unless an operator set another
    /// number for it ([`Jobs::set_org_slots`]).
    pub per_org: usize,
}

/// Sending to recipients by default: fewer slots per organization than one worker's
/// (`PARLEY_WORKER_CONCURRENCY`, 4), so that one organization never takes a whole worker.
pub const SEND_SHARE: FairShare = FairShare {
    ready: 8,
    per_org: 3,
};
/// Webhook delivery by default: half a worker's slots (`PARLEY_WEBHOOK_WORKER_CONCURRENCY`,
/// 16) per organization.
pub const WEBHOOK_SHARE: FairShare = FairShare {
    ready: 16,
    per_org: 8,
};

/// Recipients per send job.
pub const SEND_BATCH: usize = 200;

/// Jobs moved from a scheduled set to a ready list per script call: well under the ~8,000
/// values a Lua `unpack()` takes.
const PROMOTE_BATCH: usize = 1_000;

impl Jobs {
    pub fn new(redis: &Redis) -> Self {
        Jobs {
            conn: redis.conn.clone(),
            prefix: redis.prefix().to_owned(),
            send: SEND_SHARE,
            webhooks: WEBHOOK_SHARE,
            org_label: false,
        }
    }

    /// Sets how a fair queue (recipient-send or webhook-delivery) is shared; others have no lanes.
    pub fn with_share(mut self, queue: QueueName, share: FairShare) -> Self {
        let share = FairShare {
            ready: share.ready.max(1),
            per_org: share.per_org.max(1),
        };
        match queue {
            QueueName::RecipientSend => self.send = share,
            QueueName::WebhookDelivery => self.webhooks = share,
            _ => {}
        }
        self
    }

    /// Counts limit hits per organization (a series each: only when an operator asks).
    pub fn with_org_label(mut self, on: bool) -> Self {
        self.org_label = on;
        self
    }

    fn share(&self, queue: QueueName) -> Option<FairShare> {
        match queue {
            QueueName::RecipientSend => Some(self.send),
            QueueName::WebhookDelivery => Some(self.webhooks),
            _ => None,
        }
    }

    fn lanes(&self, queue: QueueName) -> Lanes {
        Lanes::new(&queue_name(&self.prefix, queue))
    }

    /// Keeps the slot of a running job of `queue` (every third of [`lanes::SLOT_LEASE`]):
    /// `org` and `slot` as [`Fair::slot`] gives them.
    pub async fn slot_held(
        &self,
        queue: QueueName,
        org: Uuid,
        slot: &str,
    ) -> Result<(), redis::RedisError> {
        let mut conn = self.conn.clone();
        self.lanes(queue).renew_slot(&mut conn, org, slot).await
    }

    /// Gives an ended job's slot back (`org_slot` as [`Fair::slot`] gives it), and tops its
    /// queue's ready list up: its organization's next job may now take its place.
    pub async fn slot_done(
        &self,
        queue: QueueName,
        org_slot: Option<(Uuid, &str)>,
    ) -> Result<(), JobError> {
        if let Some((org, slot)) = org_slot {
            let mut conn = self.conn.clone();
            self.lanes(queue)
                .give_back_slot(&mut conn, org, slot)
                .await
                .map_err(|e| JobError(e.to_string()))?;
        }
        self.refill(queue).await
    }

    /// Sets the organizations whose operator gave them their own number of slots in `queue`,
    /// replacing the earlier ones (the others have the default).
    pub async fn set_org_slots(
        &self,
        queue: QueueName,
        slots: &[(Uuid, usize)],
    ) -> Result<(), redis::RedisError> {
        let mut conn = self.conn.clone();
        self.lanes(queue).set_caps(&mut conn, slots).await
    }

    pub fn storage<T>(&self, queue: QueueName) -> RedisStorage<T, Conn> {
        RedisStorage::new(self.conn.clone()).with_config(queue_config(&self.prefix, queue))
    }

    pub async fn dispatch(&self, broadcast_id: BroadcastId, requeue: bool) -> Result<(), JobError> {
        let job = DispatchBroadcast {
            version: PAYLOAD_VERSION,
            broadcast_id,
            requeue,
        };
        self.push(QueueName::BroadcastDispatch, vec![job]).await
    }

    /// Parks send jobs of at most [`SEND_BATCH`] recipients each in their lane, then
    /// tops the ready list up from the lanes in turn ([`lanes`]).
    pub async fn enqueue_sends(
        &self,
        lane: &Lane,
        recipients: &[RecipientId],
    ) -> Result<(), JobError> {
        let now_ms = chrono::Utc::now().timestamp_millis();
        let jobs: Vec<SendRecipients> = recipients
            .chunks(SEND_BATCH)
            .map(|chunk| SendRecipients {
                version: PAYLOAD_VERSION,
                broadcast_id: BroadcastId::from(lane.id),
                recipient_ids: chunk.to_vec(),
                organization_id: Some(OrgId::from(lane.organization_id)),
                high: lane.high,
                parked_at_ms: Some(now_ms),
                slot: None,
            })
            .collect();
        self.park(now_ms, &[(*lane, jobs)]).await
    }

    /// Parks jobs in their lanes, then tops their queue's ready list up once.
    async fn park<J: Fair>(&self, now_ms: i64, lanes: &[(Lane, Vec<J>)]) -> Result<(), JobError> {
        if lanes.iter().all(|(_, jobs)| jobs.is_empty()) {
            return Ok(());
        }
        let mut entries = Vec::with_capacity(lanes.len());
        for (lane, jobs) in lanes.iter().filter(|(_, jobs)| !jobs.is_empty()) {
            let serialized = jobs
                .iter()
                .map(|job| {
                    let json = serde_json::to_string(job).map_err(|e| JobError(e.to_string()))?;
                    Ok(lanes::parked_entry(now_ms, &json))
                })
                .collect::<Result<Vec<_>, JobError>>()?;
            entries.push((*lane, serialized));
        }
        let mut conn = self.conn.clone();
        self.lanes(J::QUEUE)
            .park(&mut conn, &entries)
            .await
            .map_err(|e| JobError(e.to_string()))?;
        // Parked is enqueued: a refill that fails now is made by the next job or tick.
        if let Err(err) = self.refill(J::QUEUE).await {
            tracing::warn!(%err, queue = J::QUEUE.as_str(), "ready list not topped up from the lanes; the ticker will");
        }
        Ok(())
    }

    /// Tops a fair queue's ready list up to its target from the lanes, in turn (nothing for
    /// another queue). Called after parking, by every job of the queue as it starts and ends,
    /// and by the ticker.
    pub async fn refill(&self, queue: QueueName) -> Result<(), JobError> {
        match queue {
            QueueName::RecipientSend => self.refill_with::<SendRecipients>().await,
            QueueName::WebhookDelivery => self.refill_with::<DeliverWebhooks>().await,
            _ => Ok(()),
        }
    }

    async fn refill_with<J: Fair>(&self) -> Result<(), JobError> {
        let Some(share) = self.share(J::QUEUE) else {
            return Ok(());
        };
        let lanes = self.lanes(J::QUEUE);
        let ready = queue_config(&self.prefix, J::QUEUE).active_jobs_list();
        let mut conn = self.conn.clone();
        let taken = lanes
            .take(
                &mut conn,
                &ready,
                share.ready,
                share.per_org,
                self.org_label,
            )
            .await
            .map_err(|e| JobError(e.to_string()))?;
        let limit = match J::QUEUE {
            QueueName::WebhookDelivery => "webhook_jobs",
            _ => "send_jobs",
        };
        if self.org_label {
            for org in taken.passed {
                org_limit_hits(limit, Some(org), 1);
            }
        } else if taken.passes > 0 {
            org_limit_hits(limit, None, taken.passes);
        }
        if taken.jobs.is_empty() {
            return Ok(());
        }
        let jobs: Vec<J> = taken
            .jobs
            .into_iter()
            .filter_map(|(slot, entry)| {
                let (_, json) = lanes::split_entry(&entry)?;
                match serde_json::from_str::<J>(json) {
                    Ok(job) => Some(job.with_slot(slot)),
                    Err(err) => {
                        tracing::error!(%err, queue = J::QUEUE.as_str(), "a parked job could not be read; dropped");
                        None
                    }
                }
            })
            .collect();
        let pushed = self.push(J::QUEUE, jobs).await;
        // Out of transit either way: what was not pushed is lost like a lost queue, and the
        // reconciler (or the relay) finds its work.
        if let Err(err) = lanes.arrived(&mut conn, &taken.transit).await {
            tracing::debug!(%err, "transit count not lowered; it expires");
        }
        pushed
    }

    /// Parks webhook delivery jobs of at most [`WEBHOOK_BATCH`] deliveries each in their
    /// webhook's lane (one lane per webhook, taken in turn by organization like send
    /// jobs): (organization, webhook, delivery) triples, in any order.
    pub async fn deliver_webhooks(
        &self,
        deliveries: &[(Uuid, Uuid, Uuid)],
    ) -> Result<(), JobError> {
        let mut by_webhook: std::collections::BTreeMap<(Uuid, Uuid), Vec<Uuid>> =
            Default::default();
        for (org, webhook, delivery) in deliveries {
            by_webhook
                .entry((*org, *webhook))
                .or_default()
                .push(*delivery);
        }
        let now_ms = chrono::Utc::now().timestamp_millis();
        let lanes: Vec<(Lane, Vec<DeliverWebhooks>)> = by_webhook
            .into_iter()
            .map(|((org, webhook), ids)| {
                let lane = Lane {
                    organization_id: org,
                    id: webhook,
                    high: false,
                };
                let jobs = ids
                    .chunks(WEBHOOK_BATCH)
                    .map(|chunk| DeliverWebhooks {
                        version: PAYLOAD_VERSION,
                        delivery_ids: chunk.to_vec(),
                        organization_id: Some(org),
                        parked_at_ms: Some(now_ms),
                        slot: None,
                    })
                    .collect();
                (lane, jobs)
            })
            .collect();
        self.park(now_ms, &lanes).await
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
    /// fails, and every later fetch of the queue with it (docs/jobs.md). A burst pushed
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
        publish
            .arg(wake_channel(&self.prefix))
            .arg(queue.shared_name());
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
        let depth = self.depth(queue).await?;
        // Sending to recipients bounds each broadcast by its own waiting jobs as well
        // ([`Jobs::waiting_since`]); the other queues by the job that has waited longest, in a
        // lane or in the ready list.
        let waited = if queue == QueueName::RecipientSend {
            depth.oldest_ready_age
        } else {
            depth.oldest_age
        };
        Ok(wait + waited.unwrap_or_default())
    }

    /// Mends what a partial loss of keys left in a fair queue's lanes (see `lanes::HEADS`):
    /// heads noted for empty lanes, lanes out of their rings. The reconciler's read of the
    /// recipient-send heads ([`Jobs::waiting_since`]) does it for that queue; the ticker
    /// calls this for the webhook queue, whose lost bound counts the oldest head.
    pub async fn mend_lanes(&self, queue: QueueName) -> Result<(), redis::RedisError> {
        if self.share(queue).is_none() {
            return Ok(());
        }
        let mut conn = self.conn.clone();
        self.lanes(queue).heads_of(&mut conn).await.map(|_| ())
    }

    /// For each broadcast with send jobs waiting (parked in its lane, or in the ready list
    /// with a park time), the oldest of their park times: its work enqueued before that is
    /// not behind a waiting job. The reconciler bounds each broadcast by it, so a broadcast
    /// parked for long (a large one behind its organization's slots) is late, not lost,
    /// without holding back the recovery of other broadcasts' lost work.
    pub async fn waiting_since(&self) -> Result<Waiting, redis::RedisError> {
        let mut conn = self.conn.clone();
        let queue = QueueName::RecipientSend;
        let (heads, truncated) = self.lanes(queue).heads_of(&mut conn).await?;
        let mut since: std::collections::HashMap<Uuid, i64> = heads.into_iter().collect();
        for (broadcast, parked) in self.parked_in_ready(queue).await? {
            since
                .entry(broadcast)
                .and_modify(|t| *t = (*t).min(parked))
                .or_insert(parked);
        }
        Ok(Waiting {
            since: since.into_iter().collect(),
            truncated,
        })
    }

    /// The oldest park time among the jobs of a fair queue's ready list (at most its first
    /// [`READY_READ`]): one parked long in its lane may reach the list behind younger ones.
    async fn oldest_parked_ready(
        &self,
        queue: QueueName,
    ) -> Result<Option<i64>, redis::RedisError> {
        Ok(self
            .parked_in_ready(queue)
            .await?
            .into_iter()
            .map(|(_, t)| t)
            .min())
    }

    /// (broadcast (nil for a webhook job), park time) of the jobs in a fair queue's ready list
    /// (at most its first [`READY_READ`]).
    async fn parked_in_ready(
        &self,
        queue: QueueName,
    ) -> Result<Vec<(Uuid, i64)>, redis::RedisError> {
        let config = queue_config(&self.prefix, queue);
        let mut conn = self.conn.clone();
        let ids: Vec<String> = redis::cmd("LRANGE")
            .arg(config.active_jobs_list())
            .arg(0)
            .arg(READY_READ - 1)
            .query_async(&mut conn)
            .await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let data: Vec<Option<Vec<u8>>> = redis::cmd("HMGET")
            .arg(config.job_data_hash())
            .arg(&ids)
            .query_async(&mut conn)
            .await?;
        Ok(data
            .iter()
            .flatten()
            .filter_map(|bytes| {
                let job = serde_json::from_slice::<ParkTime>(bytes).ok()?;
                Some((job.broadcast_id, job.parked_at_ms?))
            })
            .collect())
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
        let age = |ms: i64| Duration::from_millis(u64::try_from(now_ms - ms).unwrap_or(0));
        let oldest_ready_age = head.as_deref().and_then(ulid_millis).map(age);
        let (parked, oldest_parked) = if self.share(queue).is_some() {
            let lanes = self.lanes(queue).parked(&mut conn).await?;
            let in_ready = self.oldest_parked_ready(queue).await?;
            let oldest = [lanes.oldest_ms, in_ready].into_iter().flatten().min();
            (lanes.jobs, oldest.map(age))
        } else {
            (0, None)
        };
        Ok(QueueDepth {
            ready,
            scheduled,
            parked,
            oldest_ready_age,
            oldest_age: oldest_ready_age.max(oldest_parked),
        })
    }
}

/// Ready jobs read for their park time.
const READY_READ: usize = 100;

#[derive(Deserialize)]
struct ParkTime {
    #[serde(default)]
    broadcast_id: Uuid,
    parked_at_ms: Option<i64>,
}

/// What [`Jobs::waiting_since`] found.
#[derive(Debug, Default)]
pub struct Waiting {
    /// (broadcast, oldest park time of its waiting jobs, Unix milliseconds).
    pub since: Vec<(Uuid, i64)>,
    /// More broadcasts had parked jobs than were read: those left out are bounded by the
    /// oldest time of all (late rather than taken for lost).
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDepth {
    pub ready: u64,
    pub scheduled: u64,
    /// Jobs waiting in their lanes for the ready list (recipient-send and webhook-delivery).
    pub parked: u64,
    /// How long the ready list's head has waited there.
    pub oldest_ready_age: Option<Duration>,
    /// How long the job that has waited longest has waited, in a lane or the ready list.
    pub oldest_age: Option<Duration>,
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
    fn a_former_name_reads_as_its_queue_and_keys_keep_the_first_name() {
        assert_eq!(
            QueueName::parse("recipient-delivery"),
            Some(QueueName::RecipientSend)
        );
        assert_eq!(QueueName::RecipientSend.as_str(), "recipient-send");
        assert_eq!(QueueName::RecipientSend.shared_name(), "recipient-delivery");
        assert_eq!(QueueName::SlaCheck.shared_name(), "sla-check");
        assert_eq!(
            queue_name("p", QueueName::RecipientSend),
            "{p:queue:recipient-delivery}"
        );
        assert_eq!(
            queue_name("p", QueueName::WebhookDelivery),
            "{p:queue:webhook-delivery}"
        );
    }

    #[test]
    fn payloads_without_a_version_are_version_one() {
        let id = Uuid::now_v7();
        let job: DispatchBroadcast =
            serde_json::from_value(serde_json::json!({"broadcast_id": id})).unwrap();
        assert_eq!(job.version, 1);
    }
}

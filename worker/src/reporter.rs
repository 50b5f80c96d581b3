//! Gauges of shared state (queue depths and ages, the webhook outbox and SLA backlogs) read
//! the same value from every worker. Each family of them is reported by one worker at a time,
//! the holder of a short Redis lease; the others export 0. Summed or maxed across workers a
//! dashboard then reads the value once, and a reporter that dies is replaced within a lease.

use std::time::Duration;

use parley_jobs::redis_conn::Redis;

/// How long a reporter keeps its family without reporting again, at least: three times the
/// slowest export (the SLA backlog's, every 8 ticks) when that is longer.
const LEASE: Duration = Duration::from_secs(15);
const SLOWEST_EXPORT_TICKS: u32 = 8;

/// Takes the lease KEYS[1] for ARGV[1] when free, or extends it when ARGV[1] holds it.
const TAKE: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
";

/// Deletes the leases KEYS that ARGV[1] holds.
const STEP_DOWN: &str = r"
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key) end
end
return 0
";

/// What a worker reports: a family of gauges of shared state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `parley_queue_depth` and `parley_queue_oldest_ready_seconds` (every worker's ticker).
    Queues,
    /// `parley_webhook_outbox_backlog` (workers of the webhook-delivery queue).
    Outbox,
    /// `parley_sla_checks_backlog` (workers of the sla-check queue).
    Sla,
}

impl Family {
    const ALL: [Family; 3] = [Family::Queues, Family::Outbox, Family::Sla];

    fn as_str(self) -> &'static str {
        match self {
            Family::Queues => "queues",
            Family::Outbox => "outbox",
            Family::Sla => "sla",
        }
    }
}

#[derive(Clone)]
pub struct Reporter {
    redis: Redis,
    /// This process, in the lease.
    id: String,
    lease: Duration,
}

impl Reporter {
    pub fn new(redis: Redis, tick: Duration) -> Self {
        Reporter {
            redis,
            id: uuid::Uuid::now_v7().to_string(),
            lease: LEASE.max(tick * SLOWEST_EXPORT_TICKS * 3),
        }
    }

    fn key(&self, family: Family) -> String {
        self.redis.key(&format!("reporter:{}", family.as_str()))
    }

    /// Whether this worker reports `family` now: it takes the lease, or keeps it. False when
    /// Redis does not answer (another worker may report meanwhile).
    pub async fn reports(&self, family: Family) -> bool {
        let mut conn = self.redis.conn.clone();
        let taken: Result<i64, _> = redis::Script::new(TAKE)
            .key(self.key(family))
            .arg(&self.id)
            .arg(self.lease.as_millis() as u64)
            .invoke_async(&mut conn)
            .await;
        taken.is_ok_and(|t| t == 1)
    }

    /// Gives up the families this worker reports (when it stops), so another takes them at
    /// its next export rather than a lease later.
    pub async fn step_down(&self) {
        let mut conn = self.redis.conn.clone();
        for family in Family::ALL {
            // One key a call: the keys need not share a cluster slot.
            let stepped_down: Result<i64, _> = redis::Script::new(STEP_DOWN)
                .key(self.key(family))
                .arg(&self.id)
                .invoke_async(&mut conn)
                .await;
            if let Err(err) = stepped_down {
                tracing::warn!(%err, "reporter lease not given up; it lapses by itself");
            }
        }
    }
}

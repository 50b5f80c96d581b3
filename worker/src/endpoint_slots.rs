//! At most N deliveries in flight per webhook, across every worker, so one slow or dead
//! endpoint holds N slots and no more: the others keep their throughput. A slot is a member of
//! a Redis sorted set scored by its expiry, so a worker that dies cannot leak one for long.

use std::time::Duration;

use parley_jobs::redis_conn::Redis;
use uuid::Uuid;

/// Takes up to ARGV[2] free slots (of ARGV[1]) for tokens ARGV[4..], each held ARGV[3] ms.
/// Returns {taken, ms the youngest held slot has been held}: a busy endpoint that frees its
/// slots quickly has young slots; a stuck one has none.
const ACQUIRE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local free = tonumber(ARGV[1]) - redis.call('ZCARD', KEYS[1])
local n = math.max(math.min(free, tonumber(ARGV[2])), 0)
for i = 1, n do
  redis.call('ZADD', KEYS[1], now + lease, ARGV[3 + i])
end
if n > 0 then
  redis.call('PEXPIRE', KEYS[1], lease)
  return {n, 0}
end
local youngest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local held = 0
if youngest[2] then held = now - (tonumber(youngest[2]) - lease) end
return {0, held}
";

#[derive(Clone)]
pub struct EndpointSlots {
    redis: Redis,
    limit: u32,
    /// How long a slot lives if its holder never gives it back.
    lease: Duration,
}

/// Slots taken; give them back with [`EndpointSlots::give_back`].
pub struct Slots {
    key: String,
    tokens: Vec<String>,
}

impl Slots {
    pub fn count(&self) -> usize {
        self.tokens.len()
    }
}

/// A webhook whose most recently taken slot has been held this long is slow (or stuck): a job
/// puts its deliveries back rather than wait. Below it the endpoint is busy but moving, and
/// the job waits for a slot.
const STUCK_AFTER: Duration = Duration::from_millis(150);
/// The longest a job waits for a slot in any case.
const PATIENCE: Duration = Duration::from_secs(5);

impl EndpointSlots {
    pub fn new(redis: Redis, limit: u32, lease: Duration) -> Self {
        EndpointSlots {
            redis,
            limit,
            lease,
        }
    }

    /// (tokens taken, how long the youngest slot has been held when none was free).
    async fn try_acquire(
        &self,
        key: &str,
        want: usize,
    ) -> Result<(Vec<String>, Duration), redis::RedisError> {
        let tokens: Vec<String> = (0..want).map(|_| Uuid::now_v7().to_string()).collect();
        let mut conn = self.redis.conn.clone();
        let (got, held_ms): (usize, i64) = redis::Script::new(ACQUIRE)
            .key(key)
            .arg(self.limit)
            .arg(want)
            .arg(self.lease.as_millis() as u64)
            .arg(&tokens)
            .invoke_async(&mut conn)
            .await?;
        let held = Duration::from_millis(held_ms.max(0) as u64);
        Ok((tokens.into_iter().take(got).collect(), held))
    }

    /// Up to `want` slots of `webhook` (at most half of them, so two jobs share a busy
    /// endpoint). When none is free the job waits while the endpoint is moving, and gets none
    /// (to put its deliveries back) when it is stuck.
    pub async fn take(&self, webhook: Uuid, want: usize) -> Result<Slots, redis::RedisError> {
        let key = self.redis.key(&format!("webhook:{webhook}:inflight"));
        let want = want.min((self.limit as usize / 2).max(1));
        let started = std::time::Instant::now();
        loop {
            let (tokens, held) = self.try_acquire(&key, want).await?;
            if !tokens.is_empty() || held >= STUCK_AFTER || started.elapsed() >= PATIENCE {
                return Ok(Slots { key, tokens });
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub async fn give_back(&self, slots: Slots) {
        if slots.tokens.is_empty() {
            return;
        }
        let mut conn = self.redis.conn.clone();
        let done: Result<i64, _> = redis::cmd("ZREM")
            .arg(&slots.key)
            .arg(&slots.tokens)
            .query_async(&mut conn)
            .await;
        if let Err(err) = done {
            tracing::warn!(%err, "endpoint slots not given back; they expire");
        }
    }
}

//! Claims on recipients, held in Redis while a job sends them: one worker at a time per
//! recipient, so a recipient in two jobs (a job enqueued again by the reconciler while the
//! first still runs) is sent by one. Claims are coordination only; the truth of what was sent is
//! the recipient's status in Postgres, and a claim lost with Redis at worst lets a recipient be
//! sent twice under the same idempotency key, which the provider answers once.

use std::time::Duration;

use parley_jobs::redis_conn::Redis;
use uuid::Uuid;

/// Takes each free key for `token`; returns the positions of those taken.
const TAKE: &str = r"
local taken = {}
for i, key in ipairs(KEYS) do
  if redis.call('SET', key, ARGV[1], 'NX', 'PX', ARGV[2]) then
    taken[#taken + 1] = i
  end
end
return taken
";

/// Extends (ARGV[2] = ms) or, with ARGV[2] = 0, drops the keys `token` holds.
const KEEP_OR_DROP: &str = r"
local n = 0
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    if ARGV[2] == '0' then redis.call('DEL', key) else redis.call('PEXPIRE', key, ARGV[2]) end
    n = n + 1
  end
end
return n
";

#[derive(Clone)]
pub struct Claims {
    redis: Redis,
}

impl Claims {
    pub fn new(redis: Redis) -> Self {
        Claims { redis }
    }

    fn keys(&self, ids: &[Uuid]) -> Vec<String> {
        ids.iter()
            .map(|id| self.redis.key(&format!("claim:{id}")))
            .collect()
    }

    /// Claims what it can of `ids` for `lease`; returns the ids claimed.
    pub async fn take(
        &self,
        ids: &[Uuid],
        token: Uuid,
        lease: Duration,
    ) -> Result<Vec<Uuid>, redis::RedisError> {
        let mut conn = self.redis.conn.clone();
        let taken: Vec<usize> = redis::Script::new(TAKE)
            .key(self.keys(ids))
            .arg(token.to_string())
            .arg(lease.as_millis() as u64)
            .invoke_async(&mut conn)
            .await?;
        Ok(taken
            .into_iter()
            .filter_map(|i| ids.get(i - 1).copied())
            .collect())
    }

    /// Extends the claims `token` still holds; returns how many.
    pub async fn renew(
        &self,
        ids: &[Uuid],
        token: Uuid,
        lease: Duration,
    ) -> Result<u64, redis::RedisError> {
        self.keep_or_drop(ids, token, lease.as_millis().max(1) as u64)
            .await
    }

    /// The ids of `ids` some job holds a claim on now.
    pub async fn held(
        &self,
        ids: &[Uuid],
    ) -> Result<std::collections::HashSet<Uuid>, redis::RedisError> {
        if ids.is_empty() {
            return Ok(Default::default());
        }
        let mut conn = self.redis.conn.clone();
        let holders: Vec<Option<String>> = redis::cmd("MGET")
            .arg(self.keys(ids))
            .query_async(&mut conn)
            .await?;
        Ok(ids
            .iter()
            .zip(holders)
            .filter(|(_, holder)| holder.is_some())
            .map(|(id, _)| *id)
            .collect())
    }

    pub async fn release(&self, ids: &[Uuid], token: Uuid) -> Result<u64, redis::RedisError> {
        self.keep_or_drop(ids, token, 0).await
    }

    async fn keep_or_drop(
        &self,
        ids: &[Uuid],
        token: Uuid,
        ms: u64,
    ) -> Result<u64, redis::RedisError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut conn = self.redis.conn.clone();
        redis::Script::new(KEEP_OR_DROP)
            .key(self.keys(ids))
            .arg(token.to_string())
            .arg(ms)
            .invoke_async(&mut conn)
            .await
    }
}

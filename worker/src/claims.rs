//! Claims on recipients (and webhook deliveries), held in Redis while a job sends them: one
//! worker at a time per recipient, so a recipient in two jobs (a job enqueued again by the
//! reconciler or by apalis' orphan recovery while the first still runs) is sent by one.
//!
//! A send job's claims are short leases ([`TakenClaims`]): a heartbeat keeps them every third of
//! the lease, so a SIGKILLed worker's recipients are free again within one lease. A job that
//! finds a recipient claimed by another job has lost it: it no longer sends it and does not
//! write its outcome. Claims are coordination only; the truth of what was sent is the
//! recipient's status in Postgres, and a claim lost with Redis is taken again by its job.
//!
//! A job claims its ids in one script, so on a Redis Cluster all claims share one hash tag
//! (`{<prefix>:claims}`) and one slot.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use parley_jobs::redis_conn::Redis;
use uuid::Uuid;

/// What a claim is on: a recipient ([`parley_types::ids::RecipientId`]) or a webhook delivery.
pub trait ClaimId: Copy + Eq + std::hash::Hash + std::fmt::Display + Send + Sync + 'static {}

impl<I: Copy + Eq + std::hash::Hash + std::fmt::Display + Send + Sync + 'static> ClaimId for I {}

/// Takes each free key for `token` (ARGV[1]); returns the positions of those it holds. A key
/// it holds already counts: a cluster client may run the script again after a lost reply.
const TAKE: &str = r"
local taken = {}
for i, key in ipairs(KEYS) do
  if redis.call('SET', key, ARGV[1], 'NX', 'PX', ARGV[2]) or redis.call('GET', key) == ARGV[1] then
    taken[#taken + 1] = i
  end
end
return taken
";

/// Keeps the keys for `token` (ARGV[1]) another ARGV[2] ms: extends those it holds, takes
/// again those nobody holds (a Redis that lost its keys); returns the positions of those
/// another token holds, which this one has lost.
const KEEP: &str = r"
local lost = {}
for i, key in ipairs(KEYS) do
  local holder = redis.call('GET', key)
  if holder == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
  elseif holder then
    lost[#lost + 1] = i
  else
    redis.call('SET', key, ARGV[1], 'PX', ARGV[2])
  end
end
return lost
";

/// Drops the keys `token` (ARGV[1]) holds.
const DROP: &str = r"
local n = 0
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('DEL', key)
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

    /// The key of the claim on `id`.
    pub fn key(&self, id: impl std::fmt::Display) -> String {
        self.redis.tagged("claims", &id.to_string())
    }

    fn keys<I: ClaimId>(&self, ids: &[I]) -> Vec<String> {
        ids.iter().map(|id| self.key(*id)).collect()
    }

    /// Claims what it can of `ids` for `lease`; returns the ids claimed.
    pub async fn take<I: ClaimId>(
        &self,
        ids: &[I],
        token: Uuid,
        lease: Duration,
    ) -> Result<Vec<I>, redis::RedisError> {
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

    /// Keeps `token`'s claims on `ids` for another `lease`, taking again any that expired or
    /// that Redis lost; returns the ids another token holds now (this job has lost them).
    pub async fn keep<I: ClaimId>(
        &self,
        ids: &[I],
        token: Uuid,
        lease: Duration,
    ) -> Result<Vec<I>, redis::RedisError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.redis.conn.clone();
        let lost: Vec<usize> = redis::Script::new(KEEP)
            .key(self.keys(ids))
            .arg(token.to_string())
            .arg(lease.as_millis().max(1) as u64)
            .invoke_async(&mut conn)
            .await?;
        Ok(lost
            .into_iter()
            .filter_map(|i| ids.get(i - 1).copied())
            .collect())
    }

    /// The ids of `ids` some job holds a claim on now.
    pub async fn held<I: ClaimId>(
        &self,
        ids: &[I],
    ) -> Result<std::collections::HashSet<I>, redis::RedisError> {
        Ok(ids
            .iter()
            .zip(self.holders(ids).await?)
            .filter(|(_, holder)| holder.is_some())
            .map(|(id, _)| *id)
            .collect())
    }

    /// The token holding each of `ids` now (one `MGET`); `None` when Redis cannot say.
    pub async fn holders_now<I: ClaimId>(&self, ids: &[I]) -> Option<Vec<Option<String>>> {
        match self.holders(ids).await {
            Ok(holders) if holders.len() == ids.len() => Some(holders),
            Ok(holders) => {
                tracing::warn!(
                    asked = ids.len(),
                    answered = holders.len(),
                    "claims not checked before an outcome write: a short reply"
                );
                None
            }
            Err(err) => {
                tracing::warn!(%err, "claims not checked before an outcome write");
                None
            }
        }
    }

    /// The token holding each of `ids`, if any.
    async fn holders<I: ClaimId>(
        &self,
        ids: &[I],
    ) -> Result<Vec<Option<String>>, redis::RedisError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut conn = self.redis.conn.clone();
        redis::cmd("MGET")
            .arg(self.keys(ids))
            .query_async(&mut conn)
            .await
    }

    pub async fn give_back<I: ClaimId>(
        &self,
        ids: &[I],
        token: Uuid,
    ) -> Result<u64, redis::RedisError> {
        if ids.is_empty() {
            return Ok(0);
        }
        let mut conn = self.redis.conn.clone();
        redis::Script::new(DROP)
            .key(self.keys(ids))
            .arg(token.to_string())
            .invoke_async(&mut conn)
            .await
    }
}

/// A job's claims while it works: kept by a heartbeat every third of the lease and checked
/// again before each outcome write ([`ClaimFence`]); the ids another job took over are lost to this
/// one.
pub struct TakenClaims<I: ClaimId> {
    claims: Claims,
    ids: Vec<I>,
    token: Uuid,
    lost: Arc<Mutex<HashSet<I>>>,
    heartbeat: tokio::task::JoinHandle<()>,
}

impl<I: ClaimId> Drop for TakenClaims<I> {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

impl<I: ClaimId> TakenClaims<I> {
    /// Claims what it can of `ids`; `None` when another job holds them all.
    pub async fn take(
        claims: &Claims,
        ids: &[I],
        lease: Duration,
    ) -> Result<Option<TakenClaims<I>>, redis::RedisError> {
        let token = Uuid::now_v7();
        let ids = claims.take(ids, token, lease).await?;
        if ids.is_empty() {
            return Ok(None);
        }
        let lost: Arc<Mutex<HashSet<I>>> = Default::default();
        let heartbeat = tokio::spawn({
            let (claims, ids, lost) = (claims.clone(), ids.clone(), lost.clone());
            async move {
                loop {
                    tokio::time::sleep(lease / 3).await;
                    match claims.keep(&ids, token, lease).await {
                        Ok(gone) => lose(&lost, gone),
                        Err(err) => tracing::warn!(%err, "claims not kept"),
                    }
                }
            }
        });
        Ok(Some(TakenClaims {
            claims: claims.clone(),
            ids,
            token,
            lost,
            heartbeat,
        }))
    }

    /// The ids this job claimed.
    pub fn ids(&self) -> &[I] {
        &self.ids
    }

    /// Whether another job has taken `id` over.
    pub fn is_lost(&self, id: I) -> bool {
        self.lost.lock().is_ok_and(|lost| lost.contains(&id))
    }

    /// What the worker's outcome writer checks before it writes this job's outcomes.
    pub fn fence(&self) -> ClaimFence<I> {
        ClaimFence {
            token: self.token.to_string(),
            lost: self.lost.clone(),
        }
    }

    /// Gives the claims back (they would expire within a lease anyway).
    pub async fn give_back(mut self) {
        // Stopped first, so that no keep of the heartbeat comes after the drop.
        self.heartbeat.abort();
        let _ = (&mut self.heartbeat).await;
        if let Err(err) = self.claims.give_back(&self.ids, self.token).await {
            tracing::warn!(%err, "claims not given back; they expire");
        }
    }
}

/// A job's claims as its outcome writes see them: the statement that writes them checks the
/// holders of all its recipients at once, right before it runs.
#[derive(Clone)]
pub struct ClaimFence<I: ClaimId> {
    token: String,
    lost: Arc<Mutex<HashSet<I>>>,
}

impl<I: ClaimId> ClaimFence<I> {
    /// Of `ids`, given their claims' `holders` read right before the write, those no other job
    /// holds; the others are lost to this job. A claim nobody holds (Redis lost it) is still
    /// this job's: its heartbeat takes it again. Without holders (Redis unreachable) they count
    /// as this job's: Postgres' status guard still lets only the first outcome of a recipient
    /// stand.
    pub fn mine(&self, ids: &[I], holders: Option<&[Option<String>]>) -> Vec<I> {
        if let Some(holders) = holders {
            let taken_over = ids
                .iter()
                .zip(holders)
                .filter(|(_, holder)| holder.as_ref().is_some_and(|h| *h != self.token))
                .map(|(id, _)| *id)
                .collect();
            lose(&self.lost, taken_over);
        }
        let lost = self.lost.lock();
        ids.iter()
            .copied()
            .filter(|id| !lost.as_ref().is_ok_and(|lost| lost.contains(id)))
            .collect()
    }
}

fn lose<I: ClaimId>(lost: &Mutex<HashSet<I>>, gone: Vec<I>) {
    if gone.is_empty() {
        return;
    }
    tracing::warn!(
        recipients = gone.len(),
        "claims lost to another job; those are left to it"
    );
    if let Ok(mut lost) = lost.lock() {
        lost.extend(gone);
    }
}

//! Fair share for delivery jobs: lanes, taken in turn.
//!
//! A delivery job does not go straight into the queue, where it would wait behind every job
//! pushed before it (a broadcast of 1,000,000 is 5,000 jobs). It is parked in its broadcast's
//! lane, and the queue's ready list is topped up to a few jobs ([`Lanes::refill`]) from the
//! lanes in turn: organizations round-robin, and within an organization its broadcasts
//! round-robin; `high` lanes (transactional broadcasts) before any other. So a new
//! broadcast's first job waits behind at most the ready list's few jobs, whatever another
//! organization has parked, and a lone broadcast loses nothing as long as the ready list
//! never runs dry: every job that starts tops it up again.
//!
//! Keys (all in the queue's hash tag, so the scripts run on a Redis Cluster):
//! `<queue>:fair:orgs:<tier>` (organizations with parked jobs, a ring),
//! `<queue>:fair:org:<tier>:<organization>` (its broadcasts with parked jobs, a ring),
//! `<queue>:fair:lane:<broadcast>` (the parked jobs, oldest first), and
//! `<queue>:fair:transit` (jobs taken from lanes and not yet in the ready list).
//! A broadcast is in its organization's ring exactly when its lane holds jobs, and an
//! organization in its tier's ring exactly when its ring holds broadcasts.
//!
//! A job lost between its lane and the ready list (a process killed in between, a Redis
//! flushed) is lost like any queued job: its recipients stay pending in Postgres and the
//! reconciler enqueues them again. The reconciler's "lost" bound counts parked jobs as
//! waiting, broadcast by broadcast: `<queue>:fair:heads` keeps each lane's head time
//! ([`crate::Jobs::waiting_since`]).

use std::sync::LazyLock;
use std::time::Duration;

use uuid::Uuid;

/// Where a delivery job waits its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane {
    pub organization_id: Uuid,
    pub broadcast_id: Uuid,
    /// Transactional work: its lanes are taken before any bulk lane.
    pub high: bool,
}

impl Lane {
    fn tier(&self) -> &'static str {
        if self.high { "high" } else { "bulk" }
    }
}

/// Parks jobs in a lane, putting the lane (and its organization) in turn when they were not,
/// and noting the lane's head time when none is noted (the lane was empty, or the note lost).
/// KEYS: the tier's organization ring, the organization's broadcast ring, the lane, the heads
/// set, the parked counter. ARGV: organization, broadcast, then the jobs.
static PARK: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"redis.call('rpush', KEYS[3], unpack(ARGV, 3))
        redis.call('incrby', KEYS[5], #ARGV - 2)
        local head = redis.call('lindex', KEYS[3], 0)
        local t = tonumber(string.match(head, '^(%d+) ')) or 0
        redis.call('zadd', KEYS[4], 'NX', t, ARGV[2])
        if not redis.call('lpos', KEYS[2], ARGV[2]) then
            redis.call('rpush', KEYS[2], ARGV[2])
        end
        if not redis.call('lpos', KEYS[1], ARGV[1]) then
            redis.call('rpush', KEYS[1], ARGV[1])
        end
        return 1",
    )
});

/// Takes up to (target - ready - in transit) jobs from the lanes, high tier first, one job
/// per turn: the organization at the ring's head gives the job at the head of its next
/// broadcast's lane, and each goes to the back of its ring while it has more. An organization
/// whose jobs hold its whole share of slots (ready or running, ARGV[4]) is passed over: its
/// turn comes again when one of them ends. Each job taken gets a slot (a member of the
/// organization's `busy` set, scored by its expiry), which the job renews while it runs and
/// gives back when it ends; a dead worker's slots expire.
/// KEYS: the ready list, the transit counter, the high ring, the bulk ring.
/// ARGV: the target, the key prefix of rings and lanes, the transit counter's expiry (ms), the
/// slots per organization, a slot's lease (ms).
/// Returns the organizations passed over, then slot, job, slot, job, ...
static REFILL: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local cap = tonumber(ARGV[4])
        local room = tonumber(ARGV[1]) - redis.call('llen', KEYS[1])
            - tonumber(redis.call('get', KEYS[2]) or '0')
        local out = {'0'}
        local passes = 0
        for i, tier in ipairs({'high', 'bulk'}) do
            local ring = KEYS[2 + i]
            local passed = 0
            while room > 0 do
                local len = redis.call('llen', ring)
                if len == 0 or passed >= len then break end
                local org = redis.call('lpop', ring)
                local busy = ARGV[2] .. 'busy:' .. org
                redis.call('zremrangebyscore', busy, '-inf', now)
                if redis.call('zcard', busy) >= cap then
                    redis.call('rpush', ring, org)
                    passed = passed + 1
                    passes = passes + 1
                else
                    passed = 0
                    local orgring = ARGV[2] .. 'org:' .. tier .. ':' .. org
                    local b = redis.call('lpop', orgring)
                    if b then
                        local lane = ARGV[2] .. 'lane:' .. b
                        local job = redis.call('lpop', lane)
                        local head = redis.call('lindex', lane, 0)
                        if head then
                            local t = tonumber(string.match(head, '^(%d+) ')) or 0
                            redis.call('zadd', ARGV[2] .. 'heads', t, b)
                        else
                            redis.call('zrem', ARGV[2] .. 'heads', b)
                        end
                        if job then
                            redis.call('decr', ARGV[2] .. 'parked')
                            local slot = tostring(redis.call('incr', ARGV[2] .. 'seq'))
                            redis.call('zadd', busy, now + tonumber(ARGV[5]), slot)
                            redis.call('pexpire', busy, ARGV[5])
                            out[#out + 1] = slot
                            out[#out + 1] = job
                            room = room - 1
                        end
                        if redis.call('llen', lane) > 0 then redis.call('rpush', orgring, b) end
                    end
                    if redis.call('llen', orgring) > 0 then redis.call('rpush', ring, org) end
                end
            end
        end
        if #out > 1 then
            redis.call('incrby', KEYS[2], (#out - 1) / 2)
            redis.call('pexpire', KEYS[2], ARGV[3])
        end
        out[1] = tostring(passes)
        return out",
    )
});

/// Renews a slot while its job runs (KEYS: the organization's busy set; ARGV: the slot, its
/// lease in ms); 0 when it had expired (it is taken again: the job runs on).
static RENEW: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local fresh = redis.call('zadd', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
        redis.call('pexpire', KEYS[1], ARGV[2])
        return 1 - fresh",
    )
});

/// Lane heads read at most for the reconciler; past it, the oldest bounds them all.
const MAX_HEADS_READ: isize = 10_000;
/// Jobs parked per script call: well under what `unpack()` takes.
const PARK_BATCH: usize = 1_000;
/// How long a job's slot lasts unless renewed (every [`SLOT_RENEW`] from the job's start): a
/// killed worker's slots are free after it, as its claims on recipients are (6 s), so its
/// organization's next jobs go on while apalis hands the dead jobs back (10 s). A job waiting
/// longer than this in the ready list loses its slot until it starts (its organization may then
/// have one job more than its share ready, for that while).
pub const SLOT_LEASE: Duration = Duration::from_secs(6);
/// How often a running job renews its slot.
pub const SLOT_RENEW: Duration = Duration::from_secs(2);
/// How long a refill's jobs count as in transit at most (a producer killed between taking
/// them and pushing them must not shrink the ready list for good).
const TRANSIT_EXPIRY: Duration = Duration::from_secs(5);

/// The lanes of one queue.
pub(crate) struct Lanes {
    /// `<queue>:fair:`
    prefix: String,
}

/// What waits in the lanes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Parked {
    pub jobs: u64,
    /// When the oldest job at a lane's head was parked (Unix milliseconds).
    pub oldest_ms: Option<i64>,
}

impl Lanes {
    pub(crate) fn new(queue_name: &str) -> Self {
        Lanes {
            prefix: format!("{queue_name}:fair:"),
        }
    }

    fn ring(&self, tier: &str) -> String {
        format!("{}orgs:{tier}", self.prefix)
    }

    fn transit(&self) -> String {
        format!("{}transit", self.prefix)
    }

    fn heads(&self) -> String {
        format!("{}heads", self.prefix)
    }

    fn parked_count(&self) -> String {
        format!("{}parked", self.prefix)
    }

    /// Parks `jobs` (serialized, each starting with its park time in Unix milliseconds and a
    /// space) in `lane`.
    pub(crate) async fn park<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
        lane: &Lane,
        jobs: &[String],
    ) -> Result<(), redis::RedisError> {
        let org = lane.organization_id.to_string();
        let broadcast = lane.broadcast_id.to_string();
        for chunk in jobs.chunks(PARK_BATCH) {
            let mut call = PARK.key(self.ring(lane.tier()));
            call.key(format!("{}org:{}:{org}", self.prefix, lane.tier()))
                .key(format!("{}lane:{broadcast}", self.prefix))
                .key(self.heads())
                .key(self.parked_count())
                .arg(&org)
                .arg(&broadcast);
            for job in chunk {
                call.arg(job);
            }
            call.invoke_async::<i64>(conn).await?;
        }
        Ok(())
    }

    /// Takes the jobs that may join the ready list now, in turn, each with its slot (see
    /// [`REFILL`]), and the organizations passed over at their limit; the caller pushes them
    /// and then calls [`Lanes::arrived`].
    pub(crate) async fn take<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
        ready_list: &str,
        target: usize,
        slots_per_org: usize,
    ) -> Result<(Vec<(String, String)>, u64), redis::RedisError> {
        let flat: Vec<String> = REFILL
            .key(ready_list)
            .key(self.transit())
            .key(self.ring("high"))
            .key(self.ring("bulk"))
            .arg(target)
            .arg(&self.prefix)
            .arg(TRANSIT_EXPIRY.as_millis() as u64)
            .arg(slots_per_org)
            .arg(SLOT_LEASE.as_millis() as u64)
            .invoke_async(conn)
            .await?;
        let mut it = flat.into_iter();
        let passed = it.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let mut pairs = Vec::with_capacity(it.len() / 2);
        while let (Some(slot), Some(job)) = (it.next(), it.next()) {
            pairs.push((slot, job));
        }
        Ok((pairs, passed))
    }

    fn busy(&self, org: Uuid) -> String {
        format!("{}busy:{org}", self.prefix)
    }

    /// Keeps a running job's slot.
    pub(crate) async fn renew_slot<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
        org: Uuid,
        slot: &str,
    ) -> Result<(), redis::RedisError> {
        RENEW
            .key(self.busy(org))
            .arg(slot)
            .arg(SLOT_LEASE.as_millis() as u64)
            .invoke_async::<i64>(conn)
            .await
            .map(|_| ())
    }

    /// Gives a job's slot back.
    pub(crate) async fn release_slot<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
        org: Uuid,
        slot: &str,
    ) -> Result<(), redis::RedisError> {
        redis::cmd("ZREM")
            .arg(self.busy(org))
            .arg(slot)
            .query_async::<i64>(conn)
            .await
            .map(|_| ())
    }

    /// `n` jobs taken by [`Lanes::take`] are in the ready list (a count that fell to 0 or
    /// below, after it expired, is removed rather than left negative).
    pub(crate) async fn arrived<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
        n: usize,
    ) -> Result<(), redis::RedisError> {
        static ARRIVED: LazyLock<redis::Script> = LazyLock::new(|| {
            redis::Script::new(
                r"if redis.call('decrby', KEYS[1], ARGV[1]) <= 0 then redis.call('del', KEYS[1]) end
                return 1",
            )
        });
        ARRIVED
            .key(self.transit())
            .arg(n)
            .invoke_async::<i64>(conn)
            .await
            .map(|_| ())
    }

    /// What waits in the lanes: the parked jobs, and the oldest lane head.
    pub(crate) async fn parked<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
    ) -> Result<Parked, redis::RedisError> {
        let (jobs, oldest): (Option<i64>, Vec<(String, f64)>) = redis::pipe()
            .get(self.parked_count())
            .zrange_withscores(self.heads(), 0, 0)
            .query_async(conn)
            .await?;
        Ok(Parked {
            jobs: u64::try_from(jobs.unwrap_or(0)).unwrap_or(0),
            oldest_ms: oldest.first().map(|(_, t)| *t as i64),
        })
    }

    /// Each broadcast with parked jobs and its lane head's park time (Unix milliseconds); true
    /// when there were more than [`MAX_HEADS_READ`] (the rest are left out).
    pub(crate) async fn heads_of<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
    ) -> Result<(Vec<(Uuid, i64)>, bool), redis::RedisError> {
        let heads: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg(self.heads())
            .arg(0)
            .arg(MAX_HEADS_READ)
            .arg("WITHSCORES")
            .query_async(conn)
            .await?;
        let truncated = heads.len() > MAX_HEADS_READ as usize;
        Ok((
            heads
                .into_iter()
                .take(MAX_HEADS_READ as usize)
                .filter_map(|(b, t)| Some((b.parse().ok()?, t as i64)))
                .collect(),
            truncated,
        ))
    }
}

/// A job as a lane holds it: its park time, a space, its JSON.
pub(crate) fn parked_entry(now_ms: i64, json: &str) -> String {
    format!("{now_ms} {json}")
}

/// The JSON and park time of a lane's entry.
pub(crate) fn split_entry(entry: &str) -> Option<(i64, &str)> {
    let (ms, json) = entry.split_once(' ')?;
    Some((ms.parse().ok()?, json))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_carries_its_park_time() {
        let e = parked_entry(1_700_000_000_123, r#"{"a":1}"#);
        assert_eq!(split_entry(&e), Some((1_700_000_000_123, r#"{"a":1}"#)));
        assert_eq!(split_entry("nope"), None);
    }
}

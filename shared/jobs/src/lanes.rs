//! Fair share for the queues of tenant work (recipient sends and webhook deliveries): lanes, taken
//! in turn.
//!
//! A send or webhook job does not go straight into the queue, where it would wait behind every job
//! pushed before it (a broadcast of 1,000,000 is 5,000 jobs). It is parked in its lane (its
//! broadcast's, or its webhook's), and the queue's ready list is topped up to a few jobs
//! ([`Lanes::take`]) from the lanes in turn: organizations round-robin, and within an
//! organization its lanes round-robin; `high` lanes (transactional broadcasts) before any
//! other. So a new
//! broadcast's first job waits behind at most the ready list's few jobs, whatever another
//! organization has parked, and a lone broadcast loses nothing as long as the ready list
//! never runs dry: every job that starts tops it up again.
//!
//! Keys (all in the queue's hash tag, so the scripts run on a Redis Cluster):
//! `<queue>:fair:orgs:<tier>` (organizations with parked jobs, a ring),
//! `<queue>:fair:org:<tier>:<organization>` (its lanes with parked jobs, a ring),
//! `<queue>:fair:lane:<id>` (the parked jobs, oldest first),
//! `<queue>:fair:transits` (refills taken from lanes and not yet in the ready list: one member
//! `<seq>:<jobs>` each, scored by when it stops counting),
//! `<queue>:fair:busy:<organization>` (its slots) and `<queue>:fair:caps` (organizations whose
//! operator set them another number of slots than the default).
//! A lane is in its organization's ring when it holds jobs, and an organization in its tier's
//! ring when its ring holds lanes; parking reads that without searching a ring (see [`PARK`]).
//!
//! A job lost between its lane and the ready list (a process killed in between, a Redis
//! flushed) is lost like any queued job: its recipients stay pending in Postgres and the
//! reconciler enqueues them again. The reconciler's "lost" bound counts parked jobs as
//! waiting, broadcast by broadcast: `<queue>:fair:heads` keeps each lane's head time
//! ([`crate::Jobs::waiting_since`]).

use std::sync::LazyLock;
use std::time::Duration;

use parley_types::ids::{BroadcastId, OrgId};
use uuid::Uuid;

/// Where a job waits its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lane {
    pub organization_id: Uuid,
    /// Whose jobs it holds: a broadcast's (recipient-send) or a webhook's.
    pub id: Uuid,
    /// Transactional work: its lanes are taken before any bulk lane.
    pub high: bool,
}

impl Lane {
    /// A broadcast's lane: where its send jobs wait.
    pub fn of_broadcast(org: OrgId, broadcast: BroadcastId, high: bool) -> Lane {
        Lane {
            organization_id: org.uuid(),
            id: broadcast.uuid(),
            high,
        }
    }

    fn tier(&self) -> &'static str {
        if self.high { "high" } else { "bulk" }
    }
}

/// Parks jobs in lanes, putting each lane (and its organization) in turn when they were not,
/// and noting each lane's head time when none is noted (the lane was empty, or the note lost).
/// Whether a lane is in its ring is read without searching the ring, so parking costs the same
/// however many lanes or organizations wait: an empty lane is in no ring (a refill drops a lane
/// it empties, an organization whose ring it empties), and a lane that holds jobs is in its
/// ring when it is in the set beside it (`<ring>:in`). The first rule alone would do while no
/// key is lost; the set covers what it cannot see (jobs left in a lane whose ring entry was
/// lost). A set entry without a ring entry (a refill of an earlier version that emptied the
/// lane and kept the entry) is harmless: the lane is empty, and the first rule puts it back.
/// A ring entry without a set entry (rings of an earlier version) makes a second ring entry:
/// a lane taken twice per turn until it empties.
/// It also notes where each lane is (`<queue>:fair:where`: lane id to `<tier>:<organization>`),
/// so that a lane left out of its rings can be put back ([`HEADS`]).
/// KEYS: the heads set, the parked counter, the where hash, then for each lane: its tier's
/// organization ring, its organization's lane ring, the lane. ARGV: for each lane:
/// organization, lane id, the number of jobs n, its n jobs, then `<tier>:<organization>`.
static PARK: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"local a, k, total = 1, 3, 0
        while a <= #ARGV do
            local org, id, n = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
            local ring, orgring, lane = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
            local lane_was_empty = redis.call('llen', lane) == 0
            local ring_was_empty = redis.call('llen', orgring) == 0
            redis.call('rpush', lane, unpack(ARGV, a + 3, a + 2 + n))
            total = total + n
            local head = redis.call('lindex', lane, 0)
            local t = tonumber(string.match(head, '^(%d+) ')) or 0
            redis.call('zadd', KEYS[1], 'NX', t, id)
            redis.call('hset', KEYS[3], id, ARGV[a + 3 + n])
            if redis.call('sadd', orgring .. ':in', id) == 1 or lane_was_empty then
                redis.call('rpush', orgring, id)
            end
            if redis.call('sadd', ring .. ':in', org) == 1 or ring_was_empty then
                redis.call('rpush', ring, org)
            end
            a = a + 4 + n
            k = k + 3
        end
        redis.call('incrby', KEYS[2], total)
        return 1",
    )
});

/// Takes up to (target - ready - in transit) jobs from the lanes, high tier first, one job
/// per turn: the organization at the ring's head gives the job at the head of its next lane,
/// and each goes to the back of its ring while it has more. An organization whose jobs hold
/// its whole share of slots (ready or running: its entry in the caps hash, else ARGV[4]) is
/// passed over: its turn comes again when one of them ends. Each job taken gets a slot (a member of the
/// organization's `busy` set, scored by its expiry), which the job renews while it runs and
/// gives back when it ends; a dead worker's slots expire.
/// The jobs in transit are the refills' members of the transits set that have not expired
/// (each expires on its own, so a refill lost with its process stops counting after
/// [`TRANSIT_EXPIRY`] however many refills follow it).
/// KEYS: the ready list, the transits set, the high ring, the bulk ring.
/// ARGV: the target, the key prefix of rings and lanes, a refill's transit expiry (ms), the
/// slots per organization, a slot's lease (ms), '1' to name the organizations passed over, the
/// most passes over organizations at their limit in one call (the next call goes on from
/// where this one stopped: the ring has turned).
/// Returns {passes, the organizations passed over (when named), then slot, job, slot, job,
/// ..., this refill's transit member ('' when it took nothing)} as
/// {passes, {orgs}, {slot, job, ...}, member}.
static REFILL: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local default_cap = tonumber(ARGV[4])
        local max_passes = tonumber(ARGV[7])
        local named = {}
        redis.call('zremrangebyscore', KEYS[2], '-inf', now)
        local transit = 0
        for _, m in ipairs(redis.call('zrange', KEYS[2], 0, -1)) do
            transit = transit + (tonumber(string.match(m, ':(%d+)$')) or 0)
        end
        local room = tonumber(ARGV[1]) - redis.call('llen', KEYS[1]) - transit
        local out = {}
        local passes = 0
        for i, tier in ipairs({'high', 'bulk'}) do
            local ring = KEYS[2 + i]
            local passed = 0
            while room > 0 do
                local len = redis.call('llen', ring)
                if len == 0 or passed >= len or passes >= max_passes then break end
                local org = redis.call('lpop', ring)
                local busy = ARGV[2] .. 'busy:' .. org
                redis.call('zremrangebyscore', busy, '-inf', now)
                local cap = tonumber(redis.call('hget', ARGV[2] .. 'caps', org)) or default_cap
                if redis.call('zcard', busy) >= cap then
                    redis.call('rpush', ring, org)
                    passed = passed + 1
                    passes = passes + 1
                    if ARGV[6] == '1' then named[#named + 1] = org end
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
                            redis.call('hdel', ARGV[2] .. 'where', b)
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
                        if redis.call('llen', lane) > 0 then
                            redis.call('rpush', orgring, b)
                        else
                            redis.call('srem', orgring .. ':in', b)
                        end
                    end
                    if redis.call('llen', orgring) > 0 then
                        redis.call('rpush', ring, org)
                    else
                        redis.call('srem', ring .. ':in', org)
                    end
                end
            end
        end
        local member = ''
        if #out > 0 then
            member = redis.call('incr', ARGV[2] .. 'seq') .. ':' .. (#out / 2)
            redis.call('zadd', KEYS[2], now + tonumber(ARGV[3]), member)
            redis.call('pexpire', KEYS[2], ARGV[3])
        end
        return {passes, named, out, member}",
    )
});

/// The lanes with parked jobs and their head times, read for the reconciler, mending what a
/// partial loss of keys (keys deleted one by one, a slot migrating) can leave: a head noted
/// for a lane that is empty is dropped (else its broadcast would count as waiting for good,
/// and its lost work would never be found), and a lane whose head has waited longer than
/// ARGV[4] ms is put back in its rings if it is missing from them (at most ARGV[5] lanes a
/// call, each a search of its rings).
/// KEYS: the heads set, the where hash. ARGV: the key prefix, the most heads read, now (ms),
/// the wait past which a lane is checked, the most lanes checked.
/// Returns lane, head time, lane, head time, ...
static HEADS: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r"local heads = redis.call('zrange', KEYS[1], 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
        local now, older, most = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
        local out, checked = {}, 0
        for i = 1, #heads, 2 do
            local b, t = heads[i], tonumber(heads[i + 1])
            if redis.call('llen', ARGV[1] .. 'lane:' .. b) == 0 then
                redis.call('zrem', KEYS[1], b)
                redis.call('hdel', KEYS[2], b)
            else
                out[#out + 1] = b
                out[#out + 1] = heads[i + 1]
                local at = redis.call('hget', KEYS[2], b)
                if now - t > older and checked < most and at then
                    checked = checked + 1
                    local tier, org = string.match(at, '^(%a+):(.+)$')
                    if tier then
                        local orgring = ARGV[1] .. 'org:' .. tier .. ':' .. org
                        if not redis.call('lpos', orgring, b) then
                            redis.call('rpush', orgring, b)
                            redis.call('sadd', orgring .. ':in', b)
                        end
                        local ring = ARGV[1] .. 'orgs:' .. tier
                        if not redis.call('lpos', ring, org) then
                            redis.call('rpush', ring, org)
                            redis.call('sadd', ring .. ':in', org)
                        end
                    end
                end
            end
        end
        return out",
    )
});

/// How long a lane's head waits before [`HEADS`] checks that the lane is in its rings, and how
/// many lanes it checks a call.
const CHECK_LANES_AFTER: Duration = Duration::from_secs(30);
const LANES_CHECKED: usize = 50;

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

/// Organizations at their limit passed over in one refill at most: a refill costs a few Redis
/// operations per organization passed over, so with many at their limit each call stops
/// there, and the next (every job start and end, every tick) goes on round the ring.
const MAX_PASSES: u64 = 500;
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
pub(crate) const TRANSIT_EXPIRY: Duration = Duration::from_secs(5);

/// The lanes of one queue.
pub(crate) struct Lanes {
    /// `<queue>:fair:`
    prefix: String,
}

/// What [`Lanes::take`] took.
pub(crate) struct Taken {
    /// (slot, job) in turn.
    pub jobs: Vec<(String, String)>,
    /// The refill's member of the transits set, for [`Lanes::arrived`] (empty when it took
    /// nothing).
    pub transit: String,
    /// How many times an organization at its limit was passed over.
    pub passes: u64,
    /// Who was passed over (when asked for), once per pass.
    pub passed: Vec<String>,
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

    fn transits(&self) -> String {
        format!("{}transits", self.prefix)
    }

    fn where_key(&self) -> String {
        format!("{}where", self.prefix)
    }

    fn heads(&self) -> String {
        format!("{}heads", self.prefix)
    }

    fn parked_count(&self) -> String {
        format!("{}parked", self.prefix)
    }

    /// Parks jobs (serialized, each starting with its park time in Unix milliseconds and a
    /// space) in their lanes, at most [`PARK_BATCH`] jobs per script call.
    pub(crate) async fn park<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
        lanes: &[(Lane, Vec<String>)],
    ) -> Result<(), redis::RedisError> {
        let mut call = PARK.key(self.heads());
        call.key(self.parked_count()).key(self.where_key());
        let mut in_call = 0;
        for (lane, jobs) in lanes {
            let org = lane.organization_id.to_string();
            let id = lane.id.to_string();
            for chunk in jobs.chunks(PARK_BATCH) {
                if in_call > 0 && in_call + chunk.len() > PARK_BATCH {
                    call.invoke_async::<i64>(conn).await?;
                    call = PARK.key(self.heads());
                    call.key(self.parked_count()).key(self.where_key());
                    in_call = 0;
                }
                call.key(self.ring(lane.tier()))
                    .key(format!("{}org:{}:{org}", self.prefix, lane.tier()))
                    .key(format!("{}lane:{id}", self.prefix))
                    .arg(&org)
                    .arg(&id)
                    .arg(chunk.len());
                for job in chunk {
                    call.arg(job);
                }
                call.arg(format!("{}:{org}", lane.tier()));
                in_call += chunk.len();
            }
        }
        if in_call > 0 {
            call.invoke_async::<i64>(conn).await?;
        }
        Ok(())
    }

    /// Takes the jobs that may join the ready list now, in turn, each with its slot (see
    /// [`REFILL`]); the caller pushes them and then calls [`Lanes::arrived`].
    pub(crate) async fn take<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
        ready_list: &str,
        target: usize,
        slots_per_org: usize,
        name_passed: bool,
    ) -> Result<Taken, redis::RedisError> {
        let (passes, passed, flat, transit): (u64, Vec<String>, Vec<String>, String) = REFILL
            .key(ready_list)
            .key(self.transits())
            .key(self.ring("high"))
            .key(self.ring("bulk"))
            .arg(target)
            .arg(&self.prefix)
            .arg(TRANSIT_EXPIRY.as_millis() as u64)
            .arg(slots_per_org)
            .arg(SLOT_LEASE.as_millis() as u64)
            .arg(if name_passed { "1" } else { "0" })
            .arg(MAX_PASSES)
            .invoke_async(conn)
            .await?;
        let mut it = flat.into_iter();
        let mut jobs = Vec::with_capacity(it.len() / 2);
        while let (Some(slot), Some(job)) = (it.next(), it.next()) {
            jobs.push((slot, job));
        }
        Ok(Taken {
            jobs,
            transit,
            passes,
            passed,
        })
    }

    /// Replaces the organizations' own numbers of slots (an operator's overrides of the
    /// default): (organization, slots).
    pub(crate) async fn set_caps<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
        caps: &[(Uuid, usize)],
    ) -> Result<(), redis::RedisError> {
        let key = format!("{}caps", self.prefix);
        let mut pipe = redis::pipe();
        pipe.atomic().del(&key);
        if !caps.is_empty() {
            let pairs: Vec<(String, usize)> =
                caps.iter().map(|(o, n)| (o.to_string(), *n)).collect();
            pipe.hset_multiple(&key, &pairs);
        }
        pipe.query_async::<()>(conn).await
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
    pub(crate) async fn give_back_slot<C: redis::aio::ConnectionLike>(
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

    /// The jobs of a refill ([`Taken::transit`]) are in the ready list: they no longer count
    /// as in transit.
    pub(crate) async fn arrived<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
        transit: &str,
    ) -> Result<(), redis::RedisError> {
        redis::cmd("ZREM")
            .arg(self.transits())
            .arg(transit)
            .query_async::<i64>(conn)
            .await
            .map(|_| ())
    }

    /// The jobs counted in transit now (what a refill subtracts from its room).
    #[cfg(test)]
    pub(crate) async fn in_transit<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
    ) -> Result<u64, redis::RedisError> {
        let members: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg(self.transits())
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(conn)
            .await?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis() as f64;
        Ok(members
            .iter()
            .filter(|(_, expires)| *expires > now)
            .filter_map(|(m, _)| m.rsplit_once(':')?.1.parse::<u64>().ok())
            .sum())
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

    /// Each lane with parked jobs and its head's park time (Unix milliseconds), mended as
    /// [`HEADS`] says; true when there were more than [`MAX_HEADS_READ`] (the rest are left
    /// out).
    pub(crate) async fn heads_of<C: redis::aio::ConnectionLike>(
        &self,
        conn: &mut C,
    ) -> Result<(Vec<(Uuid, i64)>, bool), redis::RedisError> {
        let now_ms = chrono::Utc::now().timestamp_millis();
        let flat: Vec<String> = HEADS
            .key(self.heads())
            .key(self.where_key())
            .arg(&self.prefix)
            .arg(MAX_HEADS_READ + 1)
            .arg(now_ms)
            .arg(CHECK_LANES_AFTER.as_millis() as u64)
            .arg(LANES_CHECKED)
            .invoke_async(conn)
            .await?;
        let truncated = flat.len() / 2 > MAX_HEADS_READ as usize;
        Ok(flat
            .chunks(2)
            .take(MAX_HEADS_READ as usize)
            .filter_map(|pair| {
                let [b, t] = pair else { return None };
                Some((b.parse().ok()?, t.parse::<f64>().ok()? as i64))
            })
            .collect::<Vec<_>>())
        .map(|heads| (heads, truncated))
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

    /// A refill taken by a producer that died before pushing it (SIGKILLed between the two)
    /// stops counting in transit after [`TRANSIT_EXPIRY`], even while other refills go on all
    /// the time: the ready list gets its whole target again.
    #[tokio::test]
    async fn a_lost_refill_stops_counting_in_transit_under_steady_refills() {
        let url = std::env::var("PARLEY_TEST_REDIS_URL")
            .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
        let mut conn = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .expect("Redis answers (start it with ops/test)");
        let queue = format!("parley-test-{}:q", Uuid::now_v7().simple());
        let lanes = Lanes::new(&queue);
        let ready = format!("{queue}:ready");
        let lane = Lane {
            organization_id: Uuid::now_v7(),
            id: Uuid::now_v7(),
            high: false,
        };
        let jobs: Vec<String> = (0..1_000)
            .map(|i| parked_entry(1_700_000_000_000, &format!("{{\"n\":{i}}}")))
            .collect();
        lanes.park(&mut conn, &[(lane, jobs)]).await.unwrap();
        // Five taken and never pushed: the producer died.
        let lost = lanes
            .take(&mut conn, &ready, 5, 10_000, false)
            .await
            .unwrap();
        assert_eq!(lost.jobs.len(), 5);
        assert_eq!(lanes.in_transit(&mut conn).await.unwrap(), 5);
        // Steady refills that arrive: each finds the lost five still counted, at first.
        let started = std::time::Instant::now();
        let mut first = None;
        while started.elapsed() < TRANSIT_EXPIRY + Duration::from_secs(1) {
            let taken = lanes
                .take(&mut conn, &ready, 10, 10_000, false)
                .await
                .unwrap();
            first.get_or_insert(taken.jobs.len());
            lanes.arrived(&mut conn, &taken.transit).await.unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(first, Some(5), "the lost refill counted at first");
        let after = lanes
            .take(&mut conn, &ready, 10, 10_000, false)
            .await
            .unwrap();
        assert_eq!(after.jobs.len(), 10, "the lost refill no longer counts");
        lanes.arrived(&mut conn, &after.transit).await.unwrap();
        assert_eq!(lanes.in_transit(&mut conn).await.unwrap(), 0);
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{queue}*"))
            .query_async(&mut conn)
            .await
            .unwrap();
        for key in keys {
            let _: () = redis::cmd("DEL")
                .arg(key)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
    }

    #[test]
    fn an_entry_carries_its_park_time() {
        let e = parked_entry(1_700_000_000_123, r#"{"a":1}"#);
        assert_eq!(split_entry(&e), Some((1_700_000_000_123, r#"{"a":1}"#)));
        assert_eq!(split_entry("nope"), None);
    }
}

//! The daily request counter behind `meta.apiKeyUsage` and its 429, kept in Redis so every API
//! process counts against the same number.
//!
//! A key with a daily limit is counted in Redis as each request arrives (one script: two
//! concurrent requests cannot both take the last slot). A key without one is counted in this
//! process and added to Redis in batches every [`FLUSH_EVERY`] ([`UnlimitedCounts`]): its
//! request does not wait on Redis, and its `used` is Redis' total when this process last wrote
//! the key plus what it counted since (with several API processes it misses the others'
//! requests since then). A batch whose answer is lost (a timeout after Redis applied it) is
//! sent again: at least once, so a key's count may be too high by such a batch, never lower.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::envelope::ApiKeyUsage;
use parley_jobs::redis_conn::Redis;

/// How often this process adds its unlimited keys' requests to Redis.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// How long a key's counter lives in Redis past its first request: the day and a margin.
const COUNTER_TTL_SECS: i64 = 172_800;

/// Counts one request unless the limit is reached; returns the count and whether it was counted.
/// One script, so concurrent requests cannot both take the last slot.
const COUNT_SCRIPT: &str = r"
local limit = tonumber(ARGV[1])
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if limit >= 0 and used >= limit then
  return {used, 0}
end
used = redis.call('INCR', KEYS[1])
if used == 1 then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return {used, 1}
";

/// Whether a request may go on, after counting it against its key's daily limit.
pub enum Admission {
    Counted(ApiKeyUsage),
    LimitReached {
        usage: ApiKeyUsage,
        retry_after: u64,
    },
    /// Redis did not answer in time: the request goes on uncounted (the counter fails open,
    /// so a Redis outage does not stop the API).
    Uncounted,
}

/// How long a request waits for its count before it goes on uncounted.
const COUNT_TIMEOUT: Duration = Duration::from_millis(500);
/// Unix seconds of the last "uncounted" log line, so an outage logs one line per interval.
static LAST_WARNING: AtomicI64 = AtomicI64::new(0);
const WARNING_INTERVAL_SECS: i64 = 10;

/// Counts a request of the key: a key with a limit through [`count_request`], failing open (a
/// Redis error or a wait past [`COUNT_TIMEOUT`]); a key without one in `unlimited`, which
/// fails open while its last batch could not be written. Failing open is counted in
/// `parley_usage_uncounted_total`, logged (once per 10 s), and answered
/// [`Admission::Uncounted`].
pub async fn count_or_skip(
    redis: &Redis,
    unlimited: &UnlimitedCounts,
    key_id: Uuid,
    limit: Option<i64>,
    now: DateTime<Utc>,
) -> Admission {
    let why = match limit {
        None => match unlimited.count(key_id, now.date_naive()) {
            Some(used) => {
                return Admission::Counted(ApiKeyUsage {
                    used,
                    limit: None,
                    unlimited: true,
                });
            }
            None => "the last batch of counts was not written".to_owned(),
        },
        Some(_) => {
            match tokio::time::timeout(COUNT_TIMEOUT, count_request(redis, key_id, limit, now))
                .await
            {
                Ok(Ok(outcome)) => return outcome,
                Ok(Err(err)) => err.to_string(),
                Err(_) => format!("no answer within {} ms", COUNT_TIMEOUT.as_millis()),
            }
        }
    };
    uncounted(&why, now);
    Admission::Uncounted
}

/// Counts and logs (once per [`WARNING_INTERVAL_SECS`]) a request served uncounted.
fn uncounted(why: &str, now: DateTime<Utc>) {
    metrics::counter!(parley_types::metric_names::USAGE_UNCOUNTED).increment(1);
    let last = LAST_WARNING.load(Ordering::Relaxed);
    if now.timestamp() - last >= WARNING_INTERVAL_SECS
        && LAST_WARNING
            .compare_exchange(last, now.timestamp(), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::warn!(
            error = %why,
            "Redis unavailable: requests are served without counting daily usage"
        );
    }
}

/// The requests of keys without a daily limit, counted in this process: per key and UTC day,
/// Redis' total at the last batch and what was counted since.
#[derive(Clone)]
pub struct UnlimitedCounts(Arc<Counts>);

struct Counts {
    days: Mutex<HashMap<(Uuid, NaiveDate), Tally>>,
    /// Whether the last batch was written: while not, requests are served uncounted.
    writing: AtomicBool,
}

#[derive(Default, Clone, Copy)]
struct Tally {
    /// The key's total in Redis after the last batch that wrote it.
    known: i64,
    /// Counted here since.
    pending: i64,
}

impl UnlimitedCounts {
    /// Counts that start written (Redis answered) or not (requests go uncounted until it does).
    pub fn new(writing: bool) -> Self {
        UnlimitedCounts(Arc::new(Counts {
            days: Mutex::default(),
            writing: AtomicBool::new(writing),
        }))
    }

    /// Counts one request of `key` on `day`; its requests that day as far as this process
    /// knows, or `None` (not counted) while batches are not written.
    pub fn count(&self, key: Uuid, day: NaiveDate) -> Option<i64> {
        if !self.0.writing.load(Ordering::Acquire) {
            return None;
        }
        let mut days = self.0.days.lock();
        let t = days.entry((key, day)).or_default();
        t.pending += 1;
        Some(t.known + t.pending)
    }

    /// Adds what was counted since the last batch to Redis (`INCRBY`, one small pipeline per
    /// key, all at once), within [`COUNT_TIMEOUT`]; forgets the days that are over.
    pub async fn flush(&self, redis: &Redis, today: NaiveDate) {
        let batch: Vec<((Uuid, NaiveDate), i64)> = {
            let mut days = self.0.days.lock();
            days.retain(|(_, day), t| *day >= today || t.pending > 0);
            days.iter()
                .filter(|(_, t)| t.pending > 0)
                .map(|(k, t)| (*k, t.pending))
                .collect()
        };
        if batch.is_empty() {
            // Nothing to write: while batches were not written, Redis' answer says whether
            // counting starts again.
            if !self.0.writing.load(Ordering::Acquire) {
                self.0
                    .writing
                    .store(answers(redis).await, Ordering::Release);
            }
            return;
        }
        let writes = batch.iter().map(|((key, day), n)| {
            let mut conn = redis.conn.clone();
            let counter = redis.key(&format!("usage:{key}:{}", day.format("%Y-%m-%d")));
            async move {
                let (total,): (i64,) = redis::pipe()
                    .incr(&counter, *n)
                    .expire(&counter, COUNTER_TTL_SECS)
                    .ignore()
                    .query_async(&mut conn)
                    .await?;
                Ok::<i64, redis::RedisError>(total)
            }
        });
        let written = tokio::time::timeout(COUNT_TIMEOUT, futures::future::join_all(writes)).await;
        let Ok(results) = written else {
            self.0.writing.store(false, Ordering::Release);
            uncounted("no answer to a batch of counts", Utc::now());
            return;
        };
        let mut all_written = true;
        let mut days = self.0.days.lock();
        for ((day_key, n), result) in batch.iter().zip(results) {
            match result {
                Ok(total) => {
                    let t = days.entry(*day_key).or_default();
                    t.pending -= n;
                    t.known = total;
                }
                Err(_) => all_written = false,
            }
        }
        self.0.writing.store(all_written, Ordering::Release);
    }
}

/// Whether Redis answers a `PING` within [`COUNT_TIMEOUT`].
pub async fn answers(redis: &Redis) -> bool {
    let mut conn = redis.conn.clone();
    let ping = redis::cmd("PING");
    let answer = tokio::time::timeout(COUNT_TIMEOUT, ping.query_async::<String>(&mut conn));
    matches!(answer.await, Ok(Ok(_)))
}

/// Writes the batches every [`FLUSH_EVERY`] until `shutdown` (the last request served), then
/// the last one.
pub async fn write_batches(counts: UnlimitedCounts, redis: Redis, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(FLUSH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        counts.flush(&redis, Utc::now().date_naive()).await;
    }
    counts.flush(&redis, Utc::now().date_naive()).await;
}

pub async fn count_request(
    redis: &Redis,
    key_id: Uuid,
    limit: Option<i64>,
    now: DateTime<Utc>,
) -> Result<Admission, redis::RedisError> {
    let day = now.format("%Y-%m-%d");
    let key = redis.key(&format!("usage:{key_id}:{day}"));
    let mut conn = redis.conn.clone();
    let (used, counted): (i64, i64) = redis::Script::new(COUNT_SCRIPT)
        .key(key)
        .arg(limit.unwrap_or(-1))
        .arg(COUNTER_TTL_SECS)
        .invoke_async(&mut conn)
        .await?;
    let usage = ApiKeyUsage {
        used,
        limit,
        unlimited: limit.is_none(),
    };
    if counted == 1 {
        Ok(Admission::Counted(usage))
    } else {
        Ok(Admission::LimitReached {
            usage,
            retry_after: seconds_until_next_utc_day(now),
        })
    }
}

pub fn seconds_until_next_utc_day(now: DateTime<Utc>) -> u64 {
    let tomorrow = (now.date_naive() + chrono::Days::new(1))
        .and_hms_opt(0, 0, 0)
        .map(|t| t.and_utc());
    tomorrow
        .map(|t| (t - now).num_seconds().max(1) as u64)
        .unwrap_or(86_400)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_points_at_utc_midnight() {
        let now = DateTime::parse_from_rfc3339("2026-11-22T23:59:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(seconds_until_next_utc_day(now), 60);
    }
}

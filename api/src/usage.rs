//! The daily request counter behind `meta.apiKeyUsage` and its 429, kept in Redis so every API
//! process counts against the same number.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::envelope::ApiKeyUsage;
use parley_jobs::redis_conn::Redis;

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
  redis.call('EXPIRE', KEYS[1], 172800)
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

/// [`count_request`], failing open: a Redis error or a wait past [`COUNT_TIMEOUT`] is
/// counted in `parley_usage_uncounted_total`, logged (once per 10 s), and answered
/// [`Admission::Uncounted`].
pub async fn count_or_skip(
    redis: &Redis,
    key_id: uuid::Uuid,
    limit: Option<i64>,
    now: DateTime<Utc>,
) -> Admission {
    let why =
        match tokio::time::timeout(COUNT_TIMEOUT, count_request(redis, key_id, limit, now)).await {
            Ok(Ok(outcome)) => return outcome,
            Ok(Err(err)) => err.to_string(),
            Err(_) => format!("no answer within {} ms", COUNT_TIMEOUT.as_millis()),
        };
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
    Admission::Uncounted
}

pub async fn count_request(
    redis: &Redis,
    key_id: uuid::Uuid,
    limit: Option<i64>,
    now: DateTime<Utc>,
) -> Result<Admission, redis::RedisError> {
    let day = now.format("%Y-%m-%d");
    let key = redis.key(&format!("usage:{key_id}:{day}"));
    let mut conn = redis.conn.clone();
    let (used, counted): (i64, i64) = redis::Script::new(COUNT_SCRIPT)
        .key(key)
        .arg(limit.unwrap_or(-1))
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

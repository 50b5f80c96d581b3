//! Messages per second per channel and organization, and deliveries per second per webhook,
//! shared by every worker through Redis. A GCRA reservation: each message takes the next free
//! slot, and the caller waits for it, so a broadcast is slowed to the provider's limit instead
//! of failing on it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use parley_domain::Channel;
use parley_jobs::redis_conn::Redis;
use parley_types::metric_names::org_limit_hits;
use uuid::Uuid;

/// Reserves the next slot unless it is more than ARGV[2] microseconds away; returns the
/// microseconds to wait for it, or -1 (nothing reserved). Redis' clock is the one clock all
/// workers share.
const RESERVE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
local start = math.max(tat, now)
if start - now > tonumber(ARGV[2]) then
  return '-1'
end
redis.call('SET', KEYS[1], tostring(start + interval), 'PX', math.ceil((start + interval - now) / 1000) + 1000)
return tostring(start - now)
";

/// Reserves the next slot of `key` at `per_second`, unless it is further away than
/// `within`: the wait until it, or `None` (nothing reserved).
pub async fn reserve(
    redis: &Redis,
    key: &str,
    per_second: u32,
    within: Duration,
) -> Result<Option<Duration>, redis::RedisError> {
    let interval_us = 1_000_000.0 / f64::from(per_second.max(1));
    let mut conn = redis.conn.clone();
    let wait: String = redis::Script::new(RESERVE)
        .key(key)
        .arg(interval_us)
        .arg(within.as_micros() as f64)
        .invoke_async(&mut conn)
        .await?;
    let wait_us = wait.parse::<f64>().unwrap_or(0.0);
    Ok((wait_us >= 0.0).then(|| Duration::from_micros(wait_us as u64)))
}

#[derive(Clone)]
pub struct RateLimiter {
    redis: Redis,
    /// `PARLEY_CHANNEL_<CH>_RATE`: each organization's rate on the channel.
    rates: HashMap<Channel, u32>,
    /// Rates an operator set for single organizations ([`crate::org_limits`]).
    org_rates: Arc<RwLock<HashMap<(Uuid, Channel), u32>>>,
    /// Waits are counted per organization (`PARLEY_METRICS_ORG_LABEL`).
    org_label: bool,
}

impl RateLimiter {
    pub fn new(redis: Redis, rates: HashMap<Channel, u32>, org_label: bool) -> Self {
        RateLimiter {
            redis,
            rates,
            org_rates: Arc::default(),
            org_label,
        }
    }

    /// Replaces the rates set for single organizations.
    pub fn set_org_rates(&self, rates: HashMap<(Uuid, Channel), u32>) {
        *self.org_rates.write().unwrap_or_else(|e| e.into_inner()) = rates;
    }

    fn rate(&self, channel: Channel, org: Uuid) -> Option<u32> {
        let own = self
            .org_rates
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(org, channel))
            .copied();
        own.or_else(|| self.rates.get(&channel).copied())
    }

    /// Waits for a slot to send one message; `false` when the broadcast stopped meanwhile.
    pub async fn acquire(
        &self,
        channel: Channel,
        org: Uuid,
        status: crate::status_watch::Go,
    ) -> Result<bool, redis::RedisError> {
        let Some(rate) = self.rate(channel, org) else {
            return Ok(true);
        };
        let key = self.redis.key(&format!("rate:{}:{org}", channel.as_str()));
        let wait = reserve(&self.redis, &key, rate, Duration::MAX)
            .await?
            .unwrap_or_default();
        if wait < Duration::from_micros(1) {
            return Ok(true);
        }
        // The organization's rate holds this message back: a limit hit.
        org_limit_hits("channel_rate", self.org_label.then(|| org.to_string()), 1);
        tokio::select! {
            _ = tokio::time::sleep(wait) => Ok(true),
            _ = crate::status_watch::stopped(status) => Ok(false),
        }
    }
}

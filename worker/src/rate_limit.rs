//! Messages per second per channel and organization, shared by every worker through Redis.
//! A GCRA reservation: each message takes the next free slot, and the caller waits for it,
//! so a broadcast is slowed to the provider's limit instead of failing on it.

use std::collections::HashMap;
use std::time::Duration;

use parley_domain::Channel;
use parley_jobs::redis_conn::Redis;
use uuid::Uuid;

/// Reserves the next slot; returns microseconds to wait for it. Redis' clock is the one clock
/// all workers share.
const RESERVE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
local start = math.max(tat, now)
redis.call('SET', KEYS[1], tostring(start + interval), 'PX', math.ceil((start + interval - now) / 1000) + 1000)
return tostring(start - now)
";

#[derive(Clone)]
pub struct RateLimiter {
    redis: Redis,
    rates: HashMap<Channel, u32>,
}

impl RateLimiter {
    pub fn new(redis: Redis, rates: HashMap<Channel, u32>) -> Self {
        RateLimiter { redis, rates }
    }

    /// Waits for a slot to send one message; `false` when the broadcast stopped meanwhile.
    pub async fn acquire(
        &self,
        channel: Channel,
        org: Uuid,
        status: crate::status_watch::Go,
    ) -> Result<bool, redis::RedisError> {
        let Some(rate) = self.rates.get(&channel).copied() else {
            return Ok(true);
        };
        let key = self.redis.key(&format!("rate:{}:{org}", channel.as_str()));
        let interval_us = 1_000_000.0 / f64::from(rate);
        let mut conn = self.redis.conn.clone();
        let wait: String = redis::Script::new(RESERVE)
            .key(key)
            .arg(interval_us)
            .invoke_async(&mut conn)
            .await?;
        let wait_us = wait.parse::<f64>().unwrap_or(0.0).max(0.0);
        if wait_us < 1.0 {
            return Ok(true);
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_micros(wait_us as u64)) => Ok(true),
            _ = crate::status_watch::stopped(status) => Ok(false),
        }
    }
}

//! What the operator API shows of a queue beyond its depth: jobs in flight, consumers, and
//! jobs and items finished per second over the last minute (counted by the workers in
//! ten-second buckets beside the queue's keys, in its hash slot).

use std::time::Duration;

use crate::{Jobs, QueueName, queue_config, queue_name};

/// Width of one bucket of the finished counts, in seconds.
const BUCKET_SECS: i64 = 10;
/// Buckets summed: the last minute (the current, partial one left out).
const BUCKETS: i64 = 6;
/// A consumer not seen for this long is not counted.
const CONSUMER_SEEN_SECS: i64 = 60;

/// A queue's activity.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Activity {
    pub in_flight: u64,
    pub consumers: u64,
    pub jobs_per_second: f64,
    pub items_per_second: f64,
}

impl Jobs {
    fn rate_key(&self, queue: QueueName, what: &str, bucket: i64) -> String {
        format!("{}:rate:{what}:{bucket}", queue_name(&self.prefix, queue))
    }

    /// Counts a job of `queue` finished, and the items it carried (recipients, deliveries,
    /// checks; 1 for a job whose work is one item). One round trip.
    pub async fn record_done(&self, queue: QueueName, items: u64) -> Result<(), redis::RedisError> {
        let bucket = chrono::Utc::now().timestamp() / BUCKET_SECS;
        let ttl = (BUCKET_SECS * (BUCKETS + 2)) as u64;
        let (jobs, done) = (
            self.rate_key(queue, "jobs", bucket),
            self.rate_key(queue, "items", bucket),
        );
        let mut conn = self.conn.clone();
        redis::pipe()
            .incr(&jobs, 1)
            .ignore()
            .expire(&jobs, ttl as i64)
            .ignore()
            .incr(&done, items)
            .ignore()
            .expire(&done, ttl as i64)
            .ignore()
            .query_async::<()>(&mut conn)
            .await
    }

    /// In flight, consumers and the last minute's rates of `queue`.
    pub async fn activity(&self, queue: QueueName) -> Result<Activity, redis::RedisError> {
        let config = queue_config(&self.prefix, queue);
        let mut conn = self.conn.clone();
        let now = chrono::Utc::now().timestamp();
        let workers: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(config.workers_set())
            .arg(now - CONSUMER_SEEN_SECS)
            .arg("+inf")
            .query_async(&mut conn)
            .await?;
        let mut pipe = redis::pipe();
        for w in &workers {
            pipe.scard(format!("{}:{w}", config.inflight_jobs_set()));
        }
        let bucket = now / BUCKET_SECS;
        let past: Vec<i64> = (1..=BUCKETS).map(|i| bucket - i).collect();
        let keys = |what: &str| -> Vec<String> {
            past.iter()
                .map(|b| self.rate_key(queue, what, *b))
                .collect()
        };
        pipe.mget(keys("jobs")).mget(keys("items"));
        let mut replies: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
        let sum = |v: redis::Value| -> u64 {
            let counts: Vec<Option<u64>> = redis::from_redis_value(v).unwrap_or_default();
            counts.into_iter().flatten().sum()
        };
        let items = replies.pop().map(sum).unwrap_or(0);
        let jobs = replies.pop().map(sum).unwrap_or(0);
        let in_flight = replies
            .into_iter()
            .map(|v| redis::from_redis_value::<u64>(v).unwrap_or(0))
            .sum();
        let window = Duration::from_secs((BUCKET_SECS * BUCKETS) as u64).as_secs_f64();
        Ok(Activity {
            in_flight,
            consumers: workers.len() as u64,
            jobs_per_second: jobs as f64 / window,
            items_per_second: items as f64 / window,
        })
    }
}

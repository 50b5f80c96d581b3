//! The Redis connection (one server, or a Redis Cluster) and the key namespace
//! (`PARLEY_REDIS_PREFIX`).
//!
//! On a cluster, a script or a pipeline may only touch keys of one hash slot. Every key the
//! service writes is named through [`Redis::key`] (one key a command or script) or
//! [`Redis::tagged`] (keys used together, which share a hash tag). The queues name theirs
//! through their queue name, which is a hash tag itself (`crate::queue_config`).

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster::{ClusterClient, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
const RESPONSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
const CLUSTER_OVERALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(6);

/// Where Redis is: `REDIS_URL` (one URL, or a cluster's nodes separated by commas) and
/// whether it is a cluster (`PARLEY_REDIS_CLUSTER`, or implied by several nodes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisTarget {
    pub nodes: Vec<String>,
    pub cluster: bool,
}

impl RedisTarget {
    /// `urls`: one URL or several separated by commas; several are a cluster's nodes.
    pub fn new(urls: &str, cluster: bool) -> Self {
        let nodes: Vec<String> = urls
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_owned)
            .collect();
        RedisTarget {
            cluster: cluster || nodes.len() > 1,
            nodes,
        }
    }
}

/// A connection to one Redis server or to a cluster, usable wherever redis-rs or apalis-redis
/// take a connection. Cheap to clone; reconnects by itself.
#[derive(Clone)]
pub enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

#[derive(Clone)]
pub struct Redis {
    pub conn: Conn,
    prefix: String,
    target: RedisTarget,
}

impl Redis {
    fn single_config() -> redis::aio::ConnectionManagerConfig {
        redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(RESPONSE_TIMEOUT))
            .set_number_of_retries(2)
    }

    /// Follows MOVED and ASK, and sends a command again after a lost connection, at most 4
    /// times and 6 s in all. Unlike `ConnectionManager`, a command may so run twice: the
    /// scripts that coordinate work (claims, leases, slots) answer the same when they do.
    fn cluster_client(target: &RedisTarget) -> Result<ClusterClient, redis::RedisError> {
        ClusterClient::builder(target.nodes.iter().map(String::as_str))
            .connection_timeout(CONNECT_TIMEOUT)
            .response_timeout(RESPONSE_TIMEOUT)
            .overall_response_timeout(Some(CLUSTER_OVERALL_TIMEOUT))
            .retries(4)
            .build()
    }

    fn cluster_config() -> ClusterConfig {
        ClusterConfig::new()
            .set_connection_timeout(CONNECT_TIMEOUT)
            .set_response_timeout(RESPONSE_TIMEOUT)
    }

    fn single_client(target: &RedisTarget) -> Result<redis::Client, redis::RedisError> {
        match target.nodes.as_slice() {
            [url] => redis::Client::open(url.as_str()),
            _ => Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "one Redis URL expected",
            ))),
        }
    }

    /// Connects now: for the worker, which can do nothing without Redis.
    pub async fn connect(target: &RedisTarget, prefix: &str) -> Result<Self, redis::RedisError> {
        let conn = if target.cluster {
            Conn::Cluster(
                Self::cluster_client(target)?
                    .get_async_connection_with_config(Self::cluster_config())
                    .await?,
            )
        } else {
            Conn::Single(
                ConnectionManager::new_with_config(
                    Self::single_client(target)?,
                    Self::single_config(),
                )
                .await?,
            )
        };
        Ok(Redis {
            conn,
            prefix: prefix.to_owned(),
            target: target.clone(),
        })
    }

    /// Connects on first use, and again after each loss: for the API, which starts and serves
    /// while Redis is away (only a malformed URL fails here).
    pub fn lazy(target: &RedisTarget, prefix: &str) -> Result<Self, redis::RedisError> {
        let conn = if target.cluster {
            Conn::Cluster(
                Self::cluster_client(target)?
                    .get_pending_async_connection_with_config(Self::cluster_config()),
            )
        } else {
            Conn::Single(ConnectionManager::new_lazy_with_config(
                Self::single_client(target)?,
                Self::single_config(),
            )?)
        };
        Ok(Redis {
            conn,
            prefix: prefix.to_owned(),
            target: target.clone(),
        })
    }

    /// A connection subscribed to `channel`, on the first node that answers: on a cluster a
    /// message published on any node reaches every node's subscribers.
    pub async fn subscribe(&self, channel: &str) -> Result<redis::aio::PubSub, redis::RedisError> {
        let mut last = None;
        for node in &self.target.nodes {
            let subscribed = async {
                let client = redis::Client::open(node.as_str())?;
                let mut pubsub = tokio::time::timeout(CONNECT_TIMEOUT, client.get_async_pubsub())
                    .await
                    .map_err(|_| {
                        redis::RedisError::from((redis::ErrorKind::Io, "connect timed out"))
                    })??;
                pubsub.subscribe(channel).await?;
                Ok::<_, redis::RedisError>(pubsub)
            };
            match subscribed.await {
                Ok(pubsub) => return Ok(pubsub),
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| {
            redis::RedisError::from((redis::ErrorKind::InvalidClientConfig, "no Redis node"))
        }))
    }

    /// `<prefix>:<suffix>`: a key used alone (by one command or script at a time).
    pub fn key(&self, suffix: &str) -> String {
        format!("{}:{suffix}", self.prefix)
    }

    /// `{<prefix>:<group>}:<suffix>`: keys of one group share a hash tag, so one script may
    /// use several of them on a cluster.
    pub fn tagged(&self, group: &str, suffix: &str) -> String {
        format!("{{{}:{group}}}:{suffix}", self.prefix)
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub async fn ping(&self) -> Result<(), redis::RedisError> {
        let mut conn = self.conn.clone();
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_nodes_are_a_cluster() {
        let one = RedisTarget::new("redis://127.0.0.1:6379", false);
        assert_eq!(one.nodes, ["redis://127.0.0.1:6379"]);
        assert!(!one.cluster);
        assert!(RedisTarget::new("redis://127.0.0.1:7000", true).cluster);
        let three = RedisTarget::new("redis://a:1, redis://b:2,redis://c:3", false);
        assert_eq!(three.nodes, ["redis://a:1", "redis://b:2", "redis://c:3"]);
        assert!(three.cluster);
    }
}

//! The Redis connection and the key namespace (`PARLEY_REDIS_PREFIX`).

use redis::aio::ConnectionManager;

#[derive(Clone)]
pub struct Redis {
    pub conn: ConnectionManager,
    prefix: String,
}

impl Redis {
    fn config() -> redis::aio::ConnectionManagerConfig {
        redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(std::time::Duration::from_secs(2)))
            .set_response_timeout(Some(std::time::Duration::from_secs(2)))
            .set_number_of_retries(2)
    }

    /// Connects now: for the worker, which can do nothing without Redis.
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, redis::RedisError> {
        let client = redis::Client::open(url)?;
        let conn = ConnectionManager::new_with_config(client, Self::config()).await?;
        Ok(Redis {
            conn,
            prefix: prefix.to_owned(),
        })
    }

    /// Connects on first use, and again after each loss: for the API, which starts and serves
    /// while Redis is away (only a malformed URL fails here).
    pub fn lazy(url: &str, prefix: &str) -> Result<Self, redis::RedisError> {
        let client = redis::Client::open(url)?;
        let conn = ConnectionManager::new_lazy_with_config(client, Self::config())?;
        Ok(Redis {
            conn,
            prefix: prefix.to_owned(),
        })
    }

    /// `<prefix>:<suffix>`: every key the service writes goes through here.
    pub fn key(&self, suffix: &str) -> String {
        format!("{}:{suffix}", self.prefix)
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

//! Configuration from environment variables (CONTRACT.md, "Processes and configuration").
//! A missing or malformed value stops the process with one line naming the variable.

use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use parley_domain::files::{DEFAULT_UPLOAD_CONTENT_TYPES, UploadSettings};
use parley_jobs::QueueName;
use parley_types::enums::Channel;
use secrecy::SecretString;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("configuration error: {var} {problem}")]
pub struct ConfigError {
    pub var: String,
    pub problem: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err("expected text or json".to_owned()),
        }
    }
}

/// Settings of both binaries. Each reads what it needs; all are checked at start.
#[derive(Debug, Clone)]
pub struct Config {
    /// With its password: never in `Debug` or in logs.
    pub database_url: SecretString,
    pub db_max_connections: u32,
    /// May carry a password: never in `Debug` or in logs.
    pub redis_url: SecretString,
    /// Namespace of every Redis key and queue.
    pub redis_prefix: String,
    pub api_addr: SocketAddr,
    pub worker_metrics_addr: SocketAddr,
    /// `parley-api serve` applies migrations first unless this is false.
    pub auto_migrate: bool,
    pub max_body_bytes: usize,
    /// Body limit of broadcast create and update, whose `contactIds` may be long.
    pub max_broadcast_body_bytes: usize,
    pub log_format: LogFormat,
    pub http: HttpSettings,
    pub worker: WorkerSettings,
    pub channels: Vec<(Channel, ChannelSettings)>,
    pub webhooks: WebhookSettings,
    /// Object storage; `None` (no `S3_BUCKET`) turns the file routes into 503s.
    pub storage: Option<StorageSettings>,
    pub uploads: UploadSettings,
}

/// How much one request may take of the API (see `docs/api.md`, "Limits").
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// A request not answered within this is answered 503 (its work is dropped).
    pub request_timeout: Duration,
    /// Requests served at once; more are shed at once with 503 and `Retry-After`.
    pub max_in_flight: usize,
    /// A client must send its request line and headers within this.
    pub header_read_timeout: Duration,
    /// Connections open at once; the next ones wait in the kernel's backlog.
    pub max_connections: usize,
}

/// The S3-compatible store (`S3_*` and the AWS credential variables).
#[derive(Debug, Clone)]
pub struct StorageSettings {
    /// The store's URL; none means AWS S3 itself.
    pub endpoint: Option<String>,
    pub bucket: String,
    pub region: String,
    pub access_key_id: String,
    pub secret_access_key: SecretString,
    pub session_token: Option<SecretString>,
    /// `https://host/bucket/key` rather than `https://bucket.host/key` (MinIO, s3s-fs, Ceph).
    pub force_path_style: bool,
}

/// How webhooks are delivered (CONTRACT.md, Webhooks).
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Lets webhook URLs be `http` and reach private addresses (local development, tests).
    pub allow_private: bool,
    /// Attempts per delivery before it is failed.
    pub max_attempts: i32,
    /// The first retry's delay; each later one doubles, with jitter.
    pub retry_base: Duration,
    /// How long a receiver has to answer.
    pub timeout: Duration,
    /// A webhook failing this long without a success is disabled.
    pub disable_after: Duration,
    /// Deliveries in flight at once per webhook, across all workers.
    pub per_endpoint: u32,
}

/// How a worker process runs its queues.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// The queues this process consumes (`PARLEY_WORKER_QUEUES`, comma-separated; all by default).
    pub queues: Vec<QueueName>,
    /// Jobs run at once per queue (`PARLEY_WORKER_CONCURRENCY`).
    pub concurrency: usize,
    /// Jobs run at once on the webhook queue, whose jobs mostly wait on receivers
    /// (`PARLEY_WEBHOOK_WORKER_CONCURRENCY`).
    pub webhook_concurrency: usize,
    /// How often an idle worker looks for jobs.
    pub poll_interval: Duration,
    /// How long a stopping worker waits for its jobs before it exits anyway.
    pub drain_timeout: Duration,
    /// How often the ticker looks for due and lost work.
    pub tick_interval: Duration,
    /// A pending recipient whose job is older than this is enqueued again.
    pub reconcile_after: Duration,
    /// How long a worker holds a recipient it is sending; past it, another may take it over.
    pub recipient_lease: Duration,
    /// First retry delay of a provider call that failed with 429 or 5xx.
    pub provider_retry_base: Duration,
    /// Provider attempts per recipient before it is `failed`.
    pub provider_max_attempts: usize,
    /// Consecutive provider failures that pause a broadcast.
    pub auto_pause_after: u32,
}

/// One channel's provider (CONTRACT.md: `PARLEY_CHANNEL_<CHANNEL>_URL`, `_SECRET`, `_RATE`).
#[derive(Debug, Clone, Default)]
pub struct ChannelSettings {
    /// The provider's URL; none means the built-in sandbox provider.
    pub url: Option<String>,
    /// The secret that signs delivery receipts.
    pub secret: Option<SecretString>,
    /// Messages per second per organization, shared by all workers.
    pub rate: Option<u32>,
}

impl Config {
    pub fn channel(&self, channel: Channel) -> ChannelSettings {
        self.channels
            .iter()
            .find(|(c, _)| *c == channel)
            .map(|(_, s)| s.clone())
            .unwrap_or_default()
    }
}

/// Reads variables through `lookup`, so tests need not touch the process environment.
struct Vars<F>(F);

impl<F: Fn(&str) -> Option<String>> Vars<F> {
    fn get(&self, var: &str) -> Option<String> {
        (self.0)(var).filter(|v| !v.trim().is_empty())
    }

    fn required(&self, var: &str) -> Result<String, ConfigError> {
        self.get(var).ok_or(ConfigError {
            var: var.to_owned(),
            problem: "is not set".to_owned(),
        })
    }

    fn parsed<T: FromStr>(&self, var: &str, default: T) -> Result<T, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        match self.get(var) {
            None => Ok(default),
            Some(raw) => raw.trim().parse().map_err(|e| ConfigError {
                var: var.to_owned(),
                problem: format!("is malformed ({e}): {raw:?}"),
            }),
        }
    }

    fn url(&self, var: &str, schemes: &[&str]) -> Result<String, ConfigError> {
        let raw = self.required(var)?;
        let scheme_ok = raw
            .split_once("://")
            .is_some_and(|(scheme, _)| schemes.contains(&scheme));
        if !scheme_ok {
            return Err(ConfigError {
                var: var.to_owned(),
                problem: format!("is malformed: expected a {} URL", schemes.join(" or ")),
            });
        }
        Ok(raw)
    }
}

impl<F: Fn(&str) -> Option<String>> Vars<F> {
    fn positive<T: FromStr + PartialOrd + Default>(
        &self,
        var: &str,
        default: T,
    ) -> Result<T, ConfigError>
    where
        T::Err: std::fmt::Display,
    {
        let value = self.parsed(var, default)?;
        if value <= T::default() {
            return Err(ConfigError {
                var: var.to_owned(),
                problem: "is malformed: must be more than 0".to_owned(),
            });
        }
        Ok(value)
    }

    fn queues(&self) -> Result<Vec<QueueName>, ConfigError> {
        let Some(raw) = self.get("PARLEY_WORKER_QUEUES") else {
            return Ok(QueueName::ALL.to_vec());
        };
        raw.split(',')
            .map(str::trim)
            .filter(|q| !q.is_empty())
            .map(|q| {
                QueueName::parse(q).ok_or_else(|| ConfigError {
                    var: "PARLEY_WORKER_QUEUES".to_owned(),
                    problem: format!(
                        "is malformed: unknown queue {q:?} (queues: {})",
                        QueueName::ALL
                            .iter()
                            .map(|q| q.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                })
            })
            .collect()
    }

    fn channel(&self, channel: Channel) -> Result<ChannelSettings, ConfigError> {
        let name = channel.as_str().to_ascii_uppercase();
        let var = |suffix: &str| format!("PARLEY_CHANNEL_{name}_{suffix}");
        let url_var = var("URL");
        let url = match self.get(&url_var) {
            None => None,
            Some(raw) => match url::Url::parse(raw.trim()) {
                Ok(u) if matches!(u.scheme(), "http" | "https") => Some(raw.trim().to_owned()),
                _ => {
                    return Err(ConfigError {
                        var: url_var,
                        problem: "is malformed: expected an http or https URL".to_owned(),
                    });
                }
            },
        };
        let rate_var = var("RATE");
        let rate = match self.get(&rate_var) {
            None => None,
            Some(_) => Some(self.positive(&rate_var, 1u32)?),
        };
        Ok(ChannelSettings {
            url,
            secret: self.get(&var("SECRET")).map(SecretString::from),
            rate,
        })
    }
}

impl<F: Fn(&str) -> Option<String>> Vars<F> {
    fn storage(&self) -> Result<Option<StorageSettings>, ConfigError> {
        let Some(bucket) = self.get("S3_BUCKET") else {
            return Ok(None);
        };
        let endpoint = match self.get("S3_ENDPOINT") {
            None => None,
            Some(_) => Some(self.url("S3_ENDPOINT", &["http", "https"])?),
        };
        Ok(Some(StorageSettings {
            endpoint,
            bucket,
            region: self
                .get("S3_REGION")
                .unwrap_or_else(|| "us-east-1".to_owned()),
            access_key_id: self.required("AWS_ACCESS_KEY_ID")?,
            secret_access_key: self.required("AWS_SECRET_ACCESS_KEY")?.into(),
            session_token: self.get("AWS_SESSION_TOKEN").map(SecretString::from),
            force_path_style: self.parsed("S3_FORCE_PATH_STYLE", false)?,
        }))
    }

    fn uploads(&self) -> Result<UploadSettings, ConfigError> {
        let content_types = match self.get("PARLEY_UPLOAD_CONTENT_TYPES") {
            None => DEFAULT_UPLOAD_CONTENT_TYPES
                .iter()
                .map(|t| (*t).to_owned())
                .collect(),
            Some(raw) => {
                let types: Vec<String> = raw
                    .split(',')
                    .map(|t| t.trim().to_ascii_lowercase())
                    .filter(|t| !t.is_empty())
                    .collect();
                if let Some(bad) = types.iter().find(|t| {
                    t.split_once('/')
                        .is_none_or(|(a, b)| a.is_empty() || b.is_empty() || a == "*")
                }) {
                    return Err(ConfigError {
                        var: "PARLEY_UPLOAD_CONTENT_TYPES".to_owned(),
                        problem: format!("is malformed: {bad:?} is not a type/subtype or type/*"),
                    });
                }
                types
            }
        };
        Ok(UploadSettings {
            max_bytes: self.positive("PARLEY_UPLOAD_MAX_BYTES", 100 * 1024 * 1024)?,
            content_types,
            upload_url_ttl: self.presign_ttl("PARLEY_UPLOAD_URL_TTL_SECS", 900)?,
            download_url_ttl: self.presign_ttl("PARLEY_DOWNLOAD_URL_TTL_SECS", 300)?,
        })
    }

    /// A presigned URL's life: 1 s to 7 days, the most SigV4 signs.
    fn presign_ttl(&self, var: &str, default: u64) -> Result<Duration, ConfigError> {
        const MAX: u64 = 7 * 24 * 3600;
        let secs = self.positive(var, default)?;
        if secs > MAX {
            return Err(ConfigError {
                var: var.to_owned(),
                problem: format!("is malformed: must be at most {MAX} (7 days)"),
            });
        }
        Ok(Duration::from_secs(secs))
    }
}

impl Config {
    pub fn from_env() -> Result<Self, ConfigError> {
        // A missing .env is normal; a broken one is reported as such.
        if let Err(err) = dotenvy::dotenv()
            && !err.not_found()
        {
            return Err(ConfigError {
                var: ".env".to_owned(),
                problem: format!("could not be read: {err}"),
            });
        }
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let v = Vars(lookup);
        let redis_prefix = v
            .get("PARLEY_REDIS_PREFIX")
            .unwrap_or_else(|| "parley".into());
        let channels = Channel::ALL
            .iter()
            .map(|c| Ok((*c, v.channel(*c)?)))
            .collect::<Result<Vec<_>, ConfigError>>()?;
        if redis_prefix.contains(char::is_whitespace) {
            return Err(ConfigError {
                var: "PARLEY_REDIS_PREFIX".to_owned(),
                problem: "is malformed: must not contain whitespace".to_owned(),
            });
        }
        Ok(Config {
            database_url: v.url("DATABASE_URL", &["postgres", "postgresql"])?.into(),
            db_max_connections: v.parsed("PARLEY_DB_MAX_CONNECTIONS", 10)?,
            redis_url: v
                .url("REDIS_URL", &["redis", "rediss", "unix", "redis+unix"])?
                .into(),
            redis_prefix,
            api_addr: v.parsed("PARLEY_API_ADDR", SocketAddr::from(([127, 0, 0, 1], 8080)))?,
            worker_metrics_addr: v.parsed(
                "PARLEY_WORKER_METRICS_ADDR",
                SocketAddr::from(([127, 0, 0, 1], 9091)),
            )?,
            auto_migrate: v.parsed("PARLEY_AUTO_MIGRATE", true)?,
            max_body_bytes: v.parsed("PARLEY_MAX_BODY_BYTES", 1024 * 1024)?,
            max_broadcast_body_bytes: v
                .parsed("PARLEY_MAX_BROADCAST_BODY_BYTES", 64 * 1024 * 1024)?,
            log_format: v.parsed("PARLEY_LOG_FORMAT", LogFormat::Text)?,
            http: HttpSettings {
                request_timeout: Duration::from_secs(
                    v.positive("PARLEY_REQUEST_TIMEOUT_SECS", 30)?,
                ),
                max_in_flight: v.positive("PARLEY_MAX_IN_FLIGHT", 512)?,
                header_read_timeout: Duration::from_secs(
                    v.positive("PARLEY_HEADER_READ_TIMEOUT_SECS", 10)?,
                ),
                max_connections: v.positive("PARLEY_MAX_CONNECTIONS", 1024)?,
            },
            worker: WorkerSettings {
                queues: v.queues()?,
                concurrency: v.positive("PARLEY_WORKER_CONCURRENCY", 4)?,
                webhook_concurrency: v.positive("PARLEY_WEBHOOK_WORKER_CONCURRENCY", 16)?,
                poll_interval: Duration::from_millis(v.positive("PARLEY_WORKER_POLL_MS", 100)?),
                drain_timeout: Duration::from_secs(v.parsed("PARLEY_WORKER_DRAIN_SECS", 25)?),
                tick_interval: Duration::from_millis(v.positive("PARLEY_TICK_MS", 250)?),
                reconcile_after: Duration::from_secs(
                    v.positive("PARLEY_RECONCILE_AFTER_SECS", 30)?,
                ),
                recipient_lease: Duration::from_secs(
                    v.positive("PARLEY_RECIPIENT_LEASE_SECS", 120)?,
                ),
                provider_retry_base: Duration::from_millis(
                    v.positive("PARLEY_PROVIDER_RETRY_BASE_MS", 500)?,
                ),
                provider_max_attempts: v.positive("PARLEY_PROVIDER_MAX_ATTEMPTS", 5)?,
                auto_pause_after: v.positive("PARLEY_BROADCAST_AUTO_PAUSE_FAILURES", 20)?,
            },
            channels,
            webhooks: WebhookSettings {
                allow_private: v.parsed("PARLEY_WEBHOOK_ALLOW_PRIVATE", false)?,
                max_attempts: v.positive("PARLEY_WEBHOOK_MAX_ATTEMPTS", 8)?,
                retry_base: Duration::from_millis(
                    v.positive("PARLEY_WEBHOOK_RETRY_BASE_MS", 600_000)?,
                ),
                timeout: Duration::from_millis(v.positive("PARLEY_WEBHOOK_TIMEOUT_MS", 10_000)?),
                disable_after: Duration::from_secs(
                    v.positive("PARLEY_WEBHOOK_DISABLE_AFTER_SECS", 5 * 24 * 3600)?,
                ),
                per_endpoint: v.positive("PARLEY_WEBHOOK_CONCURRENCY_PER_ENDPOINT", 8)?,
            },
            storage: v.storage()?,
            uploads: v.uploads()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;
    use std::collections::HashMap;

    fn load(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    const BASE: [(&str, &str); 2] = [
        ("DATABASE_URL", "postgres://postgres@127.0.0.1/parley"),
        ("REDIS_URL", "redis://127.0.0.1:6379"),
    ];

    #[test]
    fn defaults_apply() {
        let c = load(&BASE).unwrap();
        assert_eq!(c.api_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(c.worker_metrics_addr.to_string(), "127.0.0.1:9091");
        assert_eq!(c.redis_prefix, "parley");
        assert!(c.auto_migrate);
    }

    #[test]
    fn secrets_never_show_in_debug() {
        let c = load(&[
            (
                "DATABASE_URL",
                "postgres://parley:db-pass-1@127.0.0.1/parley",
            ),
            ("REDIS_URL", "redis://:redis-pass-2@127.0.0.1:6379"),
            ("S3_BUCKET", "b"),
            ("AWS_ACCESS_KEY_ID", "key-id"),
            ("AWS_SECRET_ACCESS_KEY", "s3-secret-3"),
            ("AWS_SESSION_TOKEN", "s3-token-4"),
            ("PARLEY_CHANNEL_EMAIL_SECRET", "channel-secret-5"),
        ])
        .unwrap();
        let shown = format!("{c:?}");
        for secret in [
            "db-pass-1",
            "redis-pass-2",
            "s3-secret-3",
            "s3-token-4",
            "channel-secret-5",
        ] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains("key-id"), "the rest is shown: {shown}");
        assert_eq!(
            c.database_url.expose_secret(),
            "postgres://parley:db-pass-1@127.0.0.1/parley"
        );
    }

    #[test]
    fn a_missing_variable_is_named() {
        let err = load(&BASE[1..]).unwrap_err();
        assert_eq!(err.var, "DATABASE_URL");
        assert_eq!(
            err.to_string(),
            "configuration error: DATABASE_URL is not set"
        );
    }

    #[test]
    fn worker_and_channel_settings() {
        let mut pairs = BASE.to_vec();
        pairs.extend([
            ("PARLEY_WORKER_QUEUES", "recipient-delivery"),
            ("PARLEY_CHANNEL_EMAIL_URL", "http://127.0.0.1:9000/send"),
            ("PARLEY_CHANNEL_EMAIL_RATE", "50"),
            ("PARLEY_CHANNEL_SOCIAL_A_SECRET", "s3cret"),
        ]);
        let c = load(&pairs).unwrap();
        assert_eq!(c.worker.queues, vec![QueueName::RecipientDelivery]);
        assert_eq!(c.channel(Channel::Email).rate, Some(50));
        assert_eq!(
            c.channel(Channel::SocialA)
                .secret
                .as_ref()
                .map(ExposeSecret::expose_secret),
            Some("s3cret")
        );
        assert!(c.channel(Channel::MessagingA).url.is_none());
        for (var, value) in [
            ("PARLEY_WORKER_QUEUES", "emails"),
            ("PARLEY_WORKER_CONCURRENCY", "0"),
            ("PARLEY_CHANNEL_EMAIL_URL", "ftp://x"),
            ("PARLEY_CHANNEL_EMAIL_RATE", "fast"),
        ] {
            let mut pairs = BASE.to_vec();
            pairs.push((var, value));
            assert_eq!(load(&pairs).unwrap_err().var, var);
        }
    }

    #[test]
    fn storage_and_upload_settings() {
        let c = load(&BASE).unwrap();
        assert!(c.storage.is_none(), "no S3_BUCKET, no storage");
        assert_eq!(c.uploads.max_bytes, 100 * 1024 * 1024);
        assert!(c.uploads.allows("image/png") && c.uploads.allows("Video/MP4"));
        assert!(!c.uploads.allows("image/svg+xml") && !c.uploads.allows("video/"));

        let mut pairs = BASE.to_vec();
        pairs.extend([
            ("S3_BUCKET", "parley"),
            ("S3_ENDPOINT", "http://127.0.0.1:9000"),
            ("S3_FORCE_PATH_STYLE", "true"),
            ("AWS_ACCESS_KEY_ID", "ak"),
            ("AWS_SECRET_ACCESS_KEY", "sk"),
            ("PARLEY_UPLOAD_CONTENT_TYPES", "image/*, application/pdf"),
        ]);
        let c = load(&pairs).unwrap();
        let s = c.storage.unwrap();
        assert_eq!(
            (s.bucket.as_str(), s.region.as_str()),
            ("parley", "us-east-1")
        );
        assert!(s.force_path_style);
        assert!(c.uploads.allows("image/svg+xml") && !c.uploads.allows("text/plain"));

        for (var, value) in [
            ("AWS_SECRET_ACCESS_KEY", ""),
            ("S3_ENDPOINT", "127.0.0.1:9000"),
            ("S3_FORCE_PATH_STYLE", "yes please"),
            ("PARLEY_UPLOAD_CONTENT_TYPES", "png"),
            ("PARLEY_UPLOAD_MAX_BYTES", "0"),
            ("PARLEY_UPLOAD_URL_TTL_SECS", "604801"),
            ("PARLEY_DOWNLOAD_URL_TTL_SECS", "0"),
        ] {
            let mut broken: Vec<_> = pairs.iter().filter(|(k, _)| *k != var).copied().collect();
            broken.push((var, value));
            assert_eq!(load(&broken).unwrap_err().var, var, "{var}={value}");
        }
    }

    #[test]
    fn a_malformed_variable_is_named() {
        let mut pairs = BASE.to_vec();
        pairs.push(("PARLEY_API_ADDR", "localhost"));
        assert_eq!(load(&pairs).unwrap_err().var, "PARLEY_API_ADDR");
        let mut pairs = BASE.to_vec();
        pairs.push(("PARLEY_AUTO_MIGRATE", "sometimes"));
        assert_eq!(load(&pairs).unwrap_err().var, "PARLEY_AUTO_MIGRATE");
        let err = load(&[BASE[0], ("REDIS_URL", "127.0.0.1:6379")]).unwrap_err();
        assert_eq!(err.var, "REDIS_URL");
    }
}

//! Configuration from environment variables (README.md, Configuration).
//! A missing or malformed value stops the process with one line naming the variable.

mod vars;

use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use parley_domain::files::{DEFAULT_UPLOAD_CONTENT_TYPES, UploadSettings};
use parley_jobs::{FairShare, QueueName};
use parley_types::enums::Channel;
use secrecy::{ExposeSecret, SecretString};

use crate::vars::Vars;

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
    /// `PARLEY_DATABASE_SESSION_URL`, else `DATABASE_URL`: where migrations run and the outbox
    /// relay listens (both need a session of their own, which a transaction pooler does not
    /// give). With its password: never in `Debug` or in logs.
    pub database_session_url: SecretString,
    pub db_max_connections: u32,
    /// One URL, or a cluster's nodes separated by commas. May carry a password: never in
    /// `Debug` or in logs.
    pub redis_url: SecretString,
    /// `PARLEY_REDIS_CLUSTER`: Redis is a Redis Cluster (several nodes in `REDIS_URL` say
    /// so too: [`Config::redis_target`]).
    pub redis_cluster: bool,
    /// Namespace of every Redis key and queue.
    pub redis_prefix: String,
    pub api_addr: SocketAddr,
    pub worker_metrics_addr: SocketAddr,
    /// `PARLEY_API_METRICS_ADDR`: where the API serves `/metrics`, apart from its public
    /// address (which has no `/metrics`).
    pub api_metrics_addr: SocketAddr,
    /// `parley-api serve` applies migrations first unless this is false.
    pub auto_migrate: bool,
    pub max_body_bytes: usize,
    /// Body limit of broadcast create and update, whose `contactIds` may be long.
    pub max_broadcast_body_bytes: usize,
    pub log_format: LogFormat,
    /// `PARLEY_METRICS_ORG_LABEL`: limit hits (`parley_org_limit_hits_total`) carry the
    /// organization, a series for each that hits one.
    pub metrics_org_label: bool,
    pub http: HttpSettings,
    pub worker: WorkerSettings,
    pub channels: Vec<(Channel, ChannelSettings)>,
    pub webhooks: WebhookSettings,
    /// Object storage; `None` (no `S3_BUCKET`) turns the file routes into 503s.
    pub storage: Option<StorageSettings>,
    pub uploads: UploadSettings,
    /// `PARLEY_PUBLIC_URL`, without a trailing `/`: the origin of unsubscribe links.
    pub public_url: String,
    /// `PARLEY_UNSUBSCRIBE_MAILTO`: a `mailto:` in `List-Unsubscribe` too.
    pub unsubscribe_mailto: Option<String>,
    /// Renamed variables this configuration read under their former name, as (name, former
    /// name): the process logs a warning for each at start.
    pub former_names: Vec<(&'static str, &'static str)>,
}

/// How much one request may take of the API (see `docs/api.md`, "Limits").
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// A request not answered within this is answered 503 (its work is dropped).
    pub request_timeout: Duration,
    /// Requests served at once; more are shed at once with 503 and `Retry-After`.
    pub max_in_flight: usize,
    /// An organization's requests run at once in a process (`PARLEY_REQUESTS_PER_ORG`, else
    /// the pool's size); the next ones wait their turn.
    pub requests_per_org: usize,
    /// An organization's requests waiting for their turn (`PARLEY_REQUESTS_QUEUED_PER_ORG`);
    /// past them a request gets 429 at once.
    pub requests_queued_per_org: usize,
    /// A client must send its request line and headers within this.
    pub header_read_timeout: Duration,
    /// Connections open at once; the next ones wait in the kernel's backlog.
    pub max_connections: usize,
    /// Failed authentications (a key-shaped token that names no key) one client address may
    /// make per minute before it gets 429 without a lookup (`PARLEY_AUTH_FAILURES_PER_MINUTE`;
    /// 0: no limit).
    pub auth_failures_per_minute: u32,
    /// `PARLEY_ADMIN_TOKEN`: never in `Debug` or in logs.
    pub admin_token: Option<SecretString>,
    /// `PARLEY_ADMIN_ADDR`: where the operator API and page are served; `None`: on the public
    /// address with the rest.
    pub admin_addr: Option<SocketAddr>,
    /// Whose forwarding header names the client (`PARLEY_TRUSTED_PROXIES`), and which header
    /// (`PARLEY_TRUSTED_PROXY_HEADER`).
    pub proxies: Proxies,
    /// What one client address, one organization and all requests may hold while bodies
    /// arrive (docs/api.md, "Limits and hostile input").
    pub bodies: BodyLimits,
    /// Connections one client address may hold open (`PARLEY_MAX_CONNECTIONS_PER_ADDRESS`);
    /// trusted proxies are not counted.
    pub max_connections_per_address: usize,
    /// Bytes of request bodies on the temporary disk at once (`PARLEY_SPOOL_BYTES`).
    pub spool_bytes: u64,
}

/// The proxies in front of the API, whose forwarding header is believed.
#[derive(Debug, Clone, Default)]
pub struct Proxies {
    pub trusted: TrustedProxies,
    pub header: ForwardedHeader,
}

/// Addresses and CIDRs (`PARLEY_TRUSTED_PROXIES`).
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(pub Vec<ipnet::IpNet>);

impl TrustedProxies {
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.0.iter().any(|net| net.contains(&ip))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The header a trusted proxy names the client in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, ...`
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for=proxy1`
    Forwarded,
}

/// The bounds on request bodies while they arrive.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// Requests of one client address reading a body at once.
    pub readers_per_address: usize,
    /// Requests of one organization reading a body at once.
    pub readers_per_org: usize,
    /// Bytes of bodies one client address holds in memory, from their first byte to the answer.
    pub bytes_per_address: usize,
    /// The same for one organization.
    pub bytes_per_org: usize,
    /// The same for all requests.
    pub bytes: usize,
    /// Bodies past `PARLEY_MAX_BODY_BYTES` read into memory at once (a broadcast's long
    /// audience, a long batch of receipts); one per organization.
    pub long_bodies: usize,
    /// After the grace, a body must keep coming at this rate.
    pub min_bytes_per_sec: u64,
    /// How far ahead of its bytes a body may be: its first seconds, and the longest pause.
    pub grace: Duration,
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

/// How webhooks are delivered (docs/api.md, Webhooks).
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
    /// How long an event whose deliveries all succeeded is kept, with them and their attempts.
    pub retention: Duration,
    /// How long an event with a failed delivery is kept (none is removed while pending).
    pub failed_retention: Duration,
}

/// How a worker process runs its queues.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// The queues this process consumes (`PARLEY_WORKER_QUEUES`, comma-separated; all by default).
    pub queues: Vec<QueueName>,
    /// Jobs run at once per queue (`PARLEY_WORKER_CONCURRENCY`).
    pub concurrency: usize,
    /// The process's runtime threads (`PARLEY_WORKER_THREADS`); `None`: one per core it may
    /// use (its CPU quota counts).
    pub threads: Option<usize>,
    /// Jobs run at once on the webhook queue, whose jobs mostly wait on receivers
    /// (`PARLEY_WEBHOOK_WORKER_CONCURRENCY`).
    pub webhook_concurrency: usize,
    /// How sending to recipients is shared: jobs kept in the ready list, topped up from the
    /// broadcasts' lanes in turn (`PARLEY_SEND_READY_JOBS`: what a new broadcast's first
    /// job waits behind), and jobs of one organization ready or running at once across all
    /// workers (`PARLEY_SEND_JOBS_PER_ORG`: an organization at its limit waits its turn,
    /// the others do not).
    pub send_share: FairShare,
    /// The same for webhook delivery, from the webhooks' lanes
    /// (`PARLEY_WEBHOOK_READY_JOBS`, `PARLEY_WEBHOOK_JOBS_PER_ORG`).
    pub webhook_share: FairShare,
    /// Imports of one organization that run at once (`PARLEY_IMPORTS_PER_ORG`); the others
    /// wait, queued.
    pub imports_per_org: i64,
    /// Broadcasts of one organization sending at once (`PARLEY_BROADCASTS_PER_ORG`); the
    /// others stay queued until one ends.
    pub broadcasts_per_org: i64,
    /// How often an idle consumer looks for jobs besides the wake-ups of its queue
    /// (`PARLEY_WORKER_POLL_MS`).
    pub poll_interval: Duration,
    /// How long a stopping worker waits for its jobs before it exits anyway.
    pub drain_timeout: Duration,
    /// How often the ticker looks for due and lost work.
    pub tick_interval: Duration,
    /// A pending recipient whose job is older than this is enqueued again.
    pub reconcile_after: Duration,
    /// How long a worker holds a recipient it is sending; past it, another may take it over.
    pub claim_lease: Duration,
    /// How long a job holds an import (`PARLEY_IMPORT_LEASE_SECS`), renewed every third of it
    /// while it runs; past it, another job may take the import over.
    pub import_lease: Duration,
    /// How long after a broadcast ends its recipients' rows are kept (its counters
    /// stay).
    pub recipient_retention: Duration,
    /// First retry delay of a provider call that failed with 429 or 5xx.
    pub provider_retry_base: Duration,
    /// Provider attempts per recipient before it is `failed`.
    pub provider_max_attempts: usize,
    /// Consecutive provider failures that pause a broadcast.
    pub auto_pause_after: u32,
}

/// One channel's provider (`PARLEY_CHANNEL_<CHANNEL>_URL`, `_SECRET`, `_RATE`; README.md, Configuration).
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
    /// The job producer of both binaries: the fair queues shared as configured.
    pub fn jobs(&self, redis: &parley_jobs::redis_conn::Redis) -> parley_jobs::Jobs {
        parley_jobs::Jobs::new(redis)
            .with_share(QueueName::RecipientSend, self.worker.send_share)
            .with_share(QueueName::WebhookDelivery, self.worker.webhook_share)
            .with_org_label(self.metrics_org_label)
    }

    pub fn channel(&self, channel: Channel) -> ChannelSettings {
        self.channels
            .iter()
            .find(|(c, _)| *c == channel)
            .map(|(_, s)| s.clone())
            .unwrap_or_default()
    }

    /// Where Redis is, for [`parley_jobs::redis_conn::Redis`].
    pub fn redis_target(&self) -> parley_jobs::redis_conn::RedisTarget {
        parley_jobs::redis_conn::RedisTarget::new(
            self.redis_url.expose_secret(),
            self.redis_cluster,
        )
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

    /// The configuration from the variables `lookup` knows (`from_env` reads the process
    /// environment; tests pass their own).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Ok(Vars::read(lookup)?.into())
    }

    /// Logs a warning for each variable read under its former name (call once logging is up).
    pub fn warn_of_former_names(&self) {
        for (name, former) in &self.former_names {
            tracing::warn!(
                setting = name,
                former,
                "setting read under its former name, which a later release will no longer read: rename it"
            );
        }
    }
}

impl From<Vars> for Config {
    fn from(mut v: Vars) -> Self {
        let secs = Duration::from_secs;
        let ms = Duration::from_millis;
        let channel =
            |url: Option<String>, secret: Option<String>, rate: Option<u32>| ChannelSettings {
                url,
                secret: secret.map(SecretString::from),
                rate,
            };
        let storage = match (v.S3_BUCKET, v.AWS_ACCESS_KEY_ID, v.AWS_SECRET_ACCESS_KEY) {
            (Some(bucket), Some(access_key_id), Some(secret)) => Some(StorageSettings {
                endpoint: v.S3_ENDPOINT,
                bucket,
                region: v.S3_REGION,
                access_key_id,
                secret_access_key: secret.into(),
                session_token: v.AWS_SESSION_TOKEN.map(SecretString::from),
                force_path_style: v.S3_FORCE_PATH_STYLE,
            }),
            // clap requires the credentials with a bucket.
            _ => None,
        };
        Config {
            former_names: std::mem::take(&mut v.former_names),
            database_session_url: v
                .PARLEY_DATABASE_SESSION_URL
                .unwrap_or_else(|| v.DATABASE_URL.clone())
                .into(),
            database_url: v.DATABASE_URL.into(),
            db_max_connections: v.PARLEY_DB_MAX_CONNECTIONS,
            redis_cluster: v.PARLEY_REDIS_CLUSTER,
            redis_url: v.REDIS_URL.into(),
            redis_prefix: v.PARLEY_REDIS_PREFIX,
            api_addr: v.PARLEY_API_ADDR,
            public_url: v
                .PARLEY_PUBLIC_URL
                .clone()
                .unwrap_or_else(|| format!("http://{}", v.PARLEY_API_ADDR)),
            unsubscribe_mailto: v.PARLEY_UNSUBSCRIBE_MAILTO.clone(),
            worker_metrics_addr: v.PARLEY_WORKER_METRICS_ADDR,
            api_metrics_addr: v.PARLEY_API_METRICS_ADDR,
            auto_migrate: v.PARLEY_AUTO_MIGRATE,
            max_body_bytes: v.PARLEY_MAX_BODY_BYTES,
            max_broadcast_body_bytes: v.PARLEY_MAX_BROADCAST_BODY_BYTES,
            log_format: v.PARLEY_LOG_FORMAT,
            metrics_org_label: v.PARLEY_METRICS_ORG_LABEL,
            http: HttpSettings {
                request_timeout: secs(v.PARLEY_REQUEST_TIMEOUT_SECS),
                max_in_flight: v.PARLEY_MAX_IN_FLIGHT,
                requests_per_org: v
                    .PARLEY_REQUESTS_PER_ORG
                    .unwrap_or(v.PARLEY_DB_MAX_CONNECTIONS as usize),
                requests_queued_per_org: v.PARLEY_REQUESTS_QUEUED_PER_ORG,
                header_read_timeout: secs(v.PARLEY_HEADER_READ_TIMEOUT_SECS),
                max_connections: v.PARLEY_MAX_CONNECTIONS,
                auth_failures_per_minute: v.PARLEY_AUTH_FAILURES_PER_MINUTE,
                admin_token: v.PARLEY_ADMIN_TOKEN.map(SecretString::from),
                admin_addr: v.PARLEY_ADMIN_ADDR,
                proxies: Proxies {
                    trusted: v.PARLEY_TRUSTED_PROXIES.unwrap_or_default(),
                    header: v.PARLEY_TRUSTED_PROXY_HEADER,
                },
                bodies: BodyLimits {
                    readers_per_address: v.PARLEY_BODY_READERS_PER_ADDRESS,
                    readers_per_org: v.PARLEY_BODY_READERS_PER_ORG,
                    bytes_per_address: v.PARLEY_BODY_BYTES_PER_ADDRESS,
                    bytes_per_org: v.PARLEY_BODY_BYTES_PER_ORG,
                    bytes: v.PARLEY_BODY_BYTES,
                    long_bodies: v.PARLEY_LONG_BODIES,
                    min_bytes_per_sec: v.PARLEY_MIN_BODY_BYTES_PER_SEC,
                    grace: secs(v.PARLEY_BODY_GRACE_SECS),
                },
                max_connections_per_address: v.PARLEY_MAX_CONNECTIONS_PER_ADDRESS,
                spool_bytes: v.PARLEY_SPOOL_BYTES,
            },
            worker: WorkerSettings {
                queues: v
                    .PARLEY_WORKER_QUEUES
                    .map_or_else(|| QueueName::ALL.to_vec(), |q| q.0),
                concurrency: v.PARLEY_WORKER_CONCURRENCY,
                threads: v.PARLEY_WORKER_THREADS,
                webhook_concurrency: v.PARLEY_WEBHOOK_WORKER_CONCURRENCY,
                send_share: FairShare {
                    ready: v.PARLEY_SEND_READY_JOBS,
                    per_org: v.PARLEY_SEND_JOBS_PER_ORG,
                },
                webhook_share: FairShare {
                    ready: v.PARLEY_WEBHOOK_READY_JOBS,
                    per_org: v.PARLEY_WEBHOOK_JOBS_PER_ORG,
                },
                imports_per_org: v.PARLEY_IMPORTS_PER_ORG,
                broadcasts_per_org: v.PARLEY_BROADCASTS_PER_ORG,
                poll_interval: ms(v.PARLEY_WORKER_POLL_MS),
                drain_timeout: secs(v.PARLEY_WORKER_DRAIN_SECS),
                tick_interval: ms(v.PARLEY_TICK_MS),
                reconcile_after: secs(v.PARLEY_RECONCILE_AFTER_SECS),
                claim_lease: secs(v.PARLEY_CLAIM_LEASE_SECS),
                import_lease: secs(v.PARLEY_IMPORT_LEASE_SECS),
                recipient_retention: secs(v.PARLEY_RECIPIENT_RETENTION_DAYS * 86_400),
                provider_retry_base: ms(v.PARLEY_PROVIDER_RETRY_BASE_MS),
                provider_max_attempts: v.PARLEY_PROVIDER_MAX_ATTEMPTS,
                auto_pause_after: v.PARLEY_BROADCAST_AUTO_PAUSE_FAILURES,
            },
            channels: vec![
                (
                    Channel::MessagingA,
                    channel(
                        v.PARLEY_CHANNEL_MESSAGING_A_URL,
                        v.PARLEY_CHANNEL_MESSAGING_A_SECRET,
                        v.PARLEY_CHANNEL_MESSAGING_A_RATE,
                    ),
                ),
                (
                    Channel::Email,
                    channel(
                        v.PARLEY_CHANNEL_EMAIL_URL,
                        v.PARLEY_CHANNEL_EMAIL_SECRET,
                        v.PARLEY_CHANNEL_EMAIL_RATE,
                    ),
                ),
                (
                    Channel::SocialA,
                    channel(
                        v.PARLEY_CHANNEL_SOCIAL_A_URL,
                        v.PARLEY_CHANNEL_SOCIAL_A_SECRET,
                        v.PARLEY_CHANNEL_SOCIAL_A_RATE,
                    ),
                ),
                (
                    Channel::SocialB,
                    channel(
                        v.PARLEY_CHANNEL_SOCIAL_B_URL,
                        v.PARLEY_CHANNEL_SOCIAL_B_SECRET,
                        v.PARLEY_CHANNEL_SOCIAL_B_RATE,
                    ),
                ),
            ],
            webhooks: WebhookSettings {
                allow_private: v.PARLEY_WEBHOOK_ALLOW_PRIVATE,
                max_attempts: v.PARLEY_WEBHOOK_MAX_ATTEMPTS,
                retry_base: ms(v.PARLEY_WEBHOOK_RETRY_BASE_MS),
                timeout: ms(v.PARLEY_WEBHOOK_TIMEOUT_MS),
                disable_after: secs(v.PARLEY_WEBHOOK_DISABLE_AFTER_SECS),
                per_endpoint: v.PARLEY_WEBHOOK_CONCURRENCY_PER_ENDPOINT,
                retention: secs(v.PARLEY_WEBHOOK_RETENTION_DAYS * 86_400),
                failed_retention: secs(v.PARLEY_WEBHOOK_FAILED_RETENTION_DAYS * 86_400),
            },
            storage,
            uploads: UploadSettings {
                max_bytes: v.PARLEY_UPLOAD_MAX_BYTES,
                content_types: v.PARLEY_UPLOAD_CONTENT_TYPES.map_or_else(
                    || {
                        DEFAULT_UPLOAD_CONTENT_TYPES
                            .iter()
                            .map(|t| (*t).to_owned())
                            .collect()
                    },
                    |t| t.0,
                ),
                upload_url_ttl: secs(v.PARLEY_UPLOAD_URL_TTL_SECS),
                download_url_ttl: secs(v.PARLEY_DOWNLOAD_URL_TTL_SECS),
            },
        }
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
    fn the_public_url_is_kept_as_parsed_and_the_mailto_is_one_address() {
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut pairs = BASE.to_vec();
            pairs.extend_from_slice(extra);
            load(&pairs)
        };
        assert_eq!(with(&[]).unwrap().public_url, "http://127.0.0.1:8080");
        let c = with(&[("PARLEY_PUBLIC_URL", "https://parley.example.com/\n")]).unwrap();
        assert_eq!(c.public_url, "https://parley.example.com");
        let c = with(&[("PARLEY_PUBLIC_URL", "https://example.com/parley/")]).unwrap();
        assert_eq!(c.public_url, "https://example.com/parley");
        let long = format!("https://{}.com", "a".repeat(200));
        let long: &'static str = Box::leak(long.into_boxed_str());
        for bad in [
            "ftp://example.com",
            "https://example.com/?a=1",
            "https://x.com/#f",
            long,
        ] {
            assert!(with(&[("PARLEY_PUBLIC_URL", bad)]).is_err(), "{bad}");
        }
        let c = with(&[("PARLEY_UNSUBSCRIBE_MAILTO", "unsub+list@example.com")]).unwrap();
        assert_eq!(
            c.unsubscribe_mailto.as_deref(),
            Some("unsub+list@example.com")
        );
        for bad in [
            "a@b@example.com",
            "no-at.example.com",
            "a@example.com>, <x",
            "a@localhost",
        ] {
            assert!(
                with(&[("PARLEY_UNSUBSCRIBE_MAILTO", bad)]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_renamed_setting_is_read_under_its_former_name_and_noted() {
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut pairs = BASE.to_vec();
            pairs.extend_from_slice(extra);
            load(&pairs)
        };
        let c = with(&[]).unwrap();
        assert_eq!(c.worker.send_share.per_org, 3);
        assert!(c.former_names.is_empty());
        let c = with(&[("PARLEY_DELIVERY_JOBS_PER_ORG", "7")]).unwrap();
        assert_eq!(c.worker.send_share.per_org, 7);
        assert_eq!(
            c.former_names,
            vec![("PARLEY_SEND_JOBS_PER_ORG", "PARLEY_DELIVERY_JOBS_PER_ORG")]
        );
        let c = with(&[("PARLEY_SEND_JOBS_PER_ORG", "5")]).unwrap();
        assert_eq!(c.worker.send_share.per_org, 5);
        assert!(c.former_names.is_empty());
        // Both, agreeing: fine; disagreeing: refused, naming the new one.
        let both = [
            ("PARLEY_SEND_READY_JOBS", "9"),
            ("PARLEY_DELIVERY_READY_JOBS", " 9 "),
        ];
        assert_eq!(with(&both).unwrap().worker.send_share.ready, 9);
        let err = with(&[
            ("PARLEY_SEND_READY_JOBS", "9"),
            ("PARLEY_DELIVERY_READY_JOBS", "10"),
        ])
        .unwrap_err();
        assert_eq!(err.var, "PARLEY_SEND_READY_JOBS");
        assert!(err.problem.contains("PARLEY_DELIVERY_READY_JOBS"), "{err}");
        // The former name's value is checked as the new one's would be.
        let err = with(&[("PARLEY_DELIVERY_JOBS_PER_ORG", "0")]).unwrap_err();
        assert_eq!(err.var, "PARLEY_SEND_JOBS_PER_ORG");
        assert!(
            err.problem.contains("set as PARLEY_DELIVERY_JOBS_PER_ORG"),
            "{err}"
        );
    }

    #[test]
    fn defaults_apply() {
        let c = load(&BASE).unwrap();
        assert_eq!(c.api_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(c.worker_metrics_addr.to_string(), "127.0.0.1:9091");
        assert_eq!(c.redis_prefix, "parley");
        assert!(c.auto_migrate);
    }

    #[test]
    fn the_session_url_defaults_to_the_database_url() {
        let c = load(&BASE).unwrap();
        assert_eq!(
            c.database_session_url.expose_secret(),
            c.database_url.expose_secret()
        );
        let mut pairs = BASE.to_vec();
        pairs[0].1 = "postgres://postgres@127.0.0.1:6442/parley";
        pairs.push((
            "PARLEY_DATABASE_SESSION_URL",
            "postgres://postgres@127.0.0.1:5432/parley",
        ));
        let c = load(&pairs).unwrap();
        assert!(c.database_url.expose_secret().contains(":6442/"));
        assert!(c.database_session_url.expose_secret().contains(":5432/"));
        let mut pairs = BASE.to_vec();
        pairs.push(("PARLEY_DATABASE_SESSION_URL", "mysql://127.0.0.1/parley"));
        let err = load(&pairs).unwrap_err();
        assert_eq!(err.var, "PARLEY_DATABASE_SESSION_URL");
    }

    #[test]
    fn secrets_never_show_in_debug() {
        let c = load(&[
            (
                "DATABASE_URL",
                "postgres://parley:db-pass-1@127.0.0.1/parley",
            ),
            (
                "PARLEY_DATABASE_SESSION_URL",
                "postgres://parley:db-pass-6@127.0.0.1:5432/parley",
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
            "db-pass-6",
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
            ("PARLEY_WORKER_QUEUES", "recipient-send"),
            ("PARLEY_WORKER_THREADS", "2"),
            ("PARLEY_CHANNEL_EMAIL_URL", "http://127.0.0.1:9000/send"),
            ("PARLEY_CHANNEL_EMAIL_RATE", "50"),
            ("PARLEY_CHANNEL_SOCIAL_A_SECRET", "s3cret"),
        ]);
        let c = load(&pairs).unwrap();
        assert_eq!(c.worker.queues, vec![QueueName::RecipientSend]);
        assert_eq!(c.worker.threads, Some(2));
        assert_eq!(load(&BASE).unwrap().worker.threads, None);
        assert_eq!(c.channel(Channel::Email).rate, Some(50));
        assert_eq!(
            c.channel(Channel::SocialA)
                .secret
                .as_ref()
                .map(ExposeSecret::expose_secret),
            Some("s3cret")
        );
        assert!(c.channel(Channel::MessagingA).url.is_none());
        let mut pairs = BASE.to_vec();
        pairs.push((
            "PARLEY_WORKER_QUEUES",
            "sla-check, recipient-send,sla-check,,recipient-delivery",
        ));
        assert_eq!(
            load(&pairs).unwrap().worker.queues,
            vec![QueueName::SlaCheck, QueueName::RecipientSend],
            "each queue once (under its name or its former one), in the order first named"
        );
        for (var, value) in [
            ("PARLEY_WORKER_QUEUES", "emails"),
            ("PARLEY_WORKER_CONCURRENCY", "0"),
            ("PARLEY_WORKER_THREADS", "0"),
            ("PARLEY_WORKER_THREADS", "1025"),
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
    fn a_malformed_value_is_one_line_with_the_variable_the_rule_and_the_value() {
        let mut pairs = BASE.to_vec();
        pairs.push(("PARLEY_WORKER_CONCURRENCY", "0"));
        assert_eq!(
            load(&pairs).unwrap_err().to_string(),
            "configuration error: PARLEY_WORKER_CONCURRENCY is malformed (must be more than 0): \"0\""
        );
        let mut pairs = BASE.to_vec();
        pairs.push(("PARLEY_UPLOAD_URL_TTL_SECS", "604801"));
        assert_eq!(
            load(&pairs).unwrap_err().to_string(),
            "configuration error: PARLEY_UPLOAD_URL_TTL_SECS is malformed (604801 is not in 1..=604800): \"604801\""
        );
    }

    #[test]
    fn a_malformed_url_is_named_without_its_value() {
        let err = load(&[
            (
                "DATABASE_URL",
                "postgress://parley:db-pass-1@127.0.0.1/parley",
            ),
            BASE[1],
        ])
        .unwrap_err();
        assert_eq!(err.var, "DATABASE_URL");
        assert!(!err.to_string().contains("db-pass-1"), "{err}");
    }

    #[test]
    fn redis_is_one_server_or_a_cluster() {
        let one = load(&BASE).unwrap().redis_target();
        assert_eq!(one.nodes, ["redis://127.0.0.1:6379"]);
        assert!(!one.cluster);
        let behind_one = load(&[BASE[0], BASE[1], ("PARLEY_REDIS_CLUSTER", "true")]).unwrap();
        assert!(behind_one.redis_target().cluster);
        let nodes = load(&[
            BASE[0],
            ("REDIS_URL", "redis://127.0.0.1:7001,redis://127.0.0.1:7002"),
        ])
        .unwrap()
        .redis_target();
        assert_eq!(nodes.nodes.len(), 2);
        assert!(nodes.cluster);
        for bad in [
            "redis://127.0.0.1:7001,127.0.0.1:7002",
            "redis://127.0.0.1:7001,",
            // A cluster's nodes are reached over TCP.
            "redis://127.0.0.1:7001,unix:///run/redis.sock",
        ] {
            let err = load(&[BASE[0], ("REDIS_URL", bad)]).unwrap_err();
            assert_eq!(err.var, "REDIS_URL", "{bad}");
        }
        // The prefix goes inside hash tags.
        let err = load(&[BASE[0], BASE[1], ("PARLEY_REDIS_PREFIX", "a{b}")]).unwrap_err();
        assert_eq!(err.var, "PARLEY_REDIS_PREFIX");
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

    #[test]
    fn a_placeholder_secret_is_refused_and_named_without_its_value() {
        let shipped = "change-me-to-a-random-token-of-32-characters-or-more";
        for (var, value) in [
            ("PARLEY_ADMIN_TOKEN", shipped),
            ("AWS_SECRET_ACCESS_KEY", "CHANGE-ME"),
            ("DATABASE_URL", "postgres://parley:change-me@db:5432/parley"),
            ("PARLEY_CHANNEL_EMAIL_SECRET", "replace-me"),
        ] {
            let mut pairs = BASE.to_vec();
            pairs.retain(|(k, _)| *k != var);
            pairs.push((var, value));
            let err = load(&pairs).unwrap_err();
            assert_eq!(err.var, var);
            assert!(err.problem.contains("placeholder"), "{}", err.problem);
            assert!(!err.to_string().contains(value), "{err}");
        }
        // A token of its own starts.
        let mut pairs = BASE.to_vec();
        pairs.push(("PARLEY_ADMIN_TOKEN", "k3J9vQ2mX7pL4wR8tZ1nB6yH5cF0dGsA"));
        assert!(load(&pairs).unwrap().http.admin_token.is_some());
    }

    #[test]
    fn an_admin_token_of_few_distinct_characters_is_refused() {
        for weak in ["a".repeat(40), "0123".repeat(10)] {
            let mut pairs = BASE.to_vec();
            pairs.push(("PARLEY_ADMIN_TOKEN", &weak));
            let err = load(&pairs).unwrap_err();
            assert_eq!(err.var, "PARLEY_ADMIN_TOKEN");
            assert!(err.problem.contains("distinct"), "{}", err.problem);
        }
    }

    #[test]
    fn trusted_proxies_are_addresses_or_cidrs() {
        let mut pairs = BASE.to_vec();
        pairs.push((
            "PARLEY_TRUSTED_PROXIES",
            "10.0.0.0/8, 192.168.1.7,2001:db8::/32",
        ));
        pairs.push(("PARLEY_TRUSTED_PROXY_HEADER", "Forwarded"));
        let c = load(&pairs).unwrap();
        let proxies = &c.http.proxies;
        assert_eq!(proxies.header, ForwardedHeader::Forwarded);
        for ip in ["10.1.2.3", "192.168.1.7", "2001:db8::1", "::ffff:10.9.9.9"] {
            assert!(proxies.trusted.contains(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["11.0.0.1", "192.168.1.8", "2001:db9::1"] {
            assert!(!proxies.trusted.contains(ip.parse().unwrap()), "{ip}");
        }
        let none = load(&BASE).unwrap();
        assert!(none.http.proxies.trusted.is_empty());
        assert_eq!(none.http.proxies.header, ForwardedHeader::XForwardedFor);
        for bad in ["10.0.0.0/33", "proxy.local", "10.0.0.1/8/2"] {
            let mut pairs = BASE.to_vec();
            pairs.push(("PARLEY_TRUSTED_PROXIES", bad));
            assert_eq!(
                load(&pairs).unwrap_err().var,
                "PARLEY_TRUSTED_PROXIES",
                "{bad}"
            );
        }
    }
}

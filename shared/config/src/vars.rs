//! Every environment variable, with its type, default and rule, declared once for clap,
//! which parses and checks them. Each variable is an option named after it
//! (`--DATABASE_URL=...`), so the values can come from the process environment or, in tests,
//! from any lookup, and clap's errors name the variable.

use std::error::Error as _;
use std::net::SocketAddr;

use clap::builder::RangedU64ValueParser;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, Parser};
use parley_jobs::QueueName;

use crate::{ConfigError, ForwardedHeader, LogFormat, TrustedProxies};

/// The most a presigned URL may live: 7 days, as SigV4 allows.
const MAX_PRESIGN_SECS: u64 = 7 * 24 * 3600;

/// Greater than zero.
fn positive<T>() -> RangedU64ValueParser<T>
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
    <T as TryFrom<u64>>::Error: std::fmt::Display + Send + Sync + 'static,
{
    RangedU64ValueParser::new().range(1..)
}

#[derive(Parser, Debug)]
#[command(
    name = "parley",
    no_binary_name = true,
    disable_help_flag = true,
    rename_all = "verbatim"
)]
#[allow(non_snake_case)]
pub(crate) struct Vars {
    #[arg(long, value_parser = url_with(&["postgres", "postgresql"]))]
    pub DATABASE_URL: String,
    /// A direct connection to Postgres for what a transaction pooler (PgBouncer) cannot
    /// carry: migrations (a session advisory lock) and the outbox relay's `LISTEN`.
    #[arg(long, value_parser = url_with(&["postgres", "postgresql"]))]
    pub PARLEY_DATABASE_SESSION_URL: Option<String>,
    #[arg(long, default_value_t = 10, value_parser = positive::<u32>())]
    pub PARLEY_DB_MAX_CONNECTIONS: u32,
    /// One URL, or a Redis Cluster's nodes (some or all) separated by commas.
    #[arg(long, value_parser = redis_urls)]
    pub REDIS_URL: String,
    /// A Redis Cluster behind one URL (a cluster's configuration endpoint); several URLs
    /// imply it.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub PARLEY_REDIS_CLUSTER: bool,
    #[arg(long, default_value = "parley", value_parser = key_prefix)]
    pub PARLEY_REDIS_PREFIX: String,
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub PARLEY_API_ADDR: SocketAddr,
    #[arg(long, default_value = "127.0.0.1:9091")]
    pub PARLEY_WORKER_METRICS_ADDR: SocketAddr,
    #[arg(long, default_value = "127.0.0.1:9090")]
    pub PARLEY_API_METRICS_ADDR: SocketAddr,
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub PARLEY_AUTO_MIGRATE: bool,
    #[arg(long, default_value_t = 1024 * 1024, value_parser = positive::<usize>())]
    pub PARLEY_MAX_BODY_BYTES: usize,
    #[arg(long, default_value_t = 64 * 1024 * 1024, value_parser = positive::<usize>())]
    pub PARLEY_MAX_BROADCAST_BODY_BYTES: usize,
    #[arg(long, default_value = "text", value_parser = log_format)]
    pub PARLEY_LOG_FORMAT: LogFormat,
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub PARLEY_METRICS_ORG_LABEL: bool,

    #[arg(long, default_value_t = 30, value_parser = positive::<u64>())]
    pub PARLEY_REQUEST_TIMEOUT_SECS: u64,
    #[arg(long, default_value_t = 512, value_parser = positive::<usize>())]
    pub PARLEY_MAX_IN_FLIGHT: usize,
    /// Unset: `PARLEY_DB_MAX_CONNECTIONS`.
    #[arg(long, value_parser = RangedU64ValueParser::<usize>::new().range(1..=10000))]
    pub PARLEY_REQUESTS_PER_ORG: Option<usize>,
    #[arg(long, default_value_t = 64, value_parser = RangedU64ValueParser::<usize>::new().range(0..=100000))]
    pub PARLEY_REQUESTS_QUEUED_PER_ORG: usize,
    #[arg(long, default_value_t = 10, value_parser = positive::<u64>())]
    pub PARLEY_HEADER_READ_TIMEOUT_SECS: u64,
    #[arg(long, default_value_t = 1024, value_parser = positive::<usize>())]
    pub PARLEY_MAX_CONNECTIONS: usize,
    #[arg(long, default_value_t = 30, value_parser = RangedU64ValueParser::<u32>::new().range(0..=1_000_000))]
    pub PARLEY_AUTH_FAILURES_PER_MINUTE: u32,
    /// The operator API's bearer token (`/admin/v1`), beside the operator keys in Postgres;
    /// at least 32 characters. Unset: only operator keys are accepted.
    #[arg(long, value_parser = admin_token)]
    pub PARLEY_ADMIN_TOKEN: Option<String>,
    /// Where the operator API and page are served instead of the public address.
    #[arg(long)]
    pub PARLEY_ADMIN_ADDR: Option<SocketAddr>,
    /// Addresses or CIDRs of the proxies in front of the API, comma-separated.
    #[arg(long, value_parser = trusted_proxies)]
    pub PARLEY_TRUSTED_PROXIES: Option<TrustedProxies>,
    #[arg(long, default_value = "x-forwarded-for", value_parser = forwarded_header)]
    pub PARLEY_TRUSTED_PROXY_HEADER: ForwardedHeader,
    #[arg(long, default_value_t = 64, value_parser = positive::<usize>())]
    pub PARLEY_MAX_CONNECTIONS_PER_ADDRESS: usize,
    #[arg(long, default_value_t = 8, value_parser = positive::<usize>())]
    pub PARLEY_BODY_READERS_PER_ADDRESS: usize,
    #[arg(long, default_value_t = 32, value_parser = positive::<usize>())]
    pub PARLEY_BODY_READERS_PER_ORG: usize,
    #[arg(long, default_value_t = 8 * 1024 * 1024, value_parser = positive::<usize>())]
    pub PARLEY_BODY_BYTES_PER_ADDRESS: usize,
    #[arg(long, default_value_t = 16 * 1024 * 1024, value_parser = positive::<usize>())]
    pub PARLEY_BODY_BYTES_PER_ORG: usize,
    #[arg(long, default_value_t = 64 * 1024 * 1024, value_parser = positive::<usize>())]
    pub PARLEY_BODY_BYTES: usize,
    #[arg(long, default_value_t = 2, value_parser = positive::<usize>())]
    pub PARLEY_LONG_BODIES: usize,
    #[arg(long, default_value_t = 1024, value_parser = positive::<u64>())]
    pub PARLEY_MIN_BODY_BYTES_PER_SEC: u64,
    #[arg(long, default_value_t = 5, value_parser = RangedU64ValueParser::<u64>::new().range(1..=3600))]
    pub PARLEY_BODY_GRACE_SECS: u64,
    #[arg(long, default_value_t = 1024 * 1024 * 1024, value_parser = positive::<u64>())]
    pub PARLEY_SPOOL_BYTES: u64,

    /// Comma-separated; all queues when unset.
    #[arg(long, value_parser = queues)]
    pub PARLEY_WORKER_QUEUES: Option<Queues>,
    #[arg(long, default_value_t = 4, value_parser = positive::<usize>())]
    pub PARLEY_WORKER_CONCURRENCY: usize,
    /// Unset: one per core the process may use.
    #[arg(long, value_parser = RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub PARLEY_WORKER_THREADS: Option<usize>,
    #[arg(long, default_value_t = 16, value_parser = positive::<usize>())]
    pub PARLEY_WEBHOOK_WORKER_CONCURRENCY: usize,
    #[arg(long, default_value_t = 8, value_parser = RangedU64ValueParser::<usize>::new().range(1..=1000))]
    pub PARLEY_SEND_READY_JOBS: usize,
    #[arg(long, default_value_t = 3, value_parser = RangedU64ValueParser::<usize>::new().range(1..=10000))]
    pub PARLEY_SEND_JOBS_PER_ORG: usize,
    #[arg(long, default_value_t = 16, value_parser = RangedU64ValueParser::<usize>::new().range(1..=1000))]
    pub PARLEY_WEBHOOK_READY_JOBS: usize,
    #[arg(long, default_value_t = 8, value_parser = RangedU64ValueParser::<usize>::new().range(1..=10000))]
    pub PARLEY_WEBHOOK_JOBS_PER_ORG: usize,
    #[arg(long, default_value_t = 2, value_parser = RangedU64ValueParser::<i64>::new().range(1..=1000))]
    pub PARLEY_IMPORTS_PER_ORG: i64,
    #[arg(long, default_value_t = 20, value_parser = RangedU64ValueParser::<i64>::new().range(1..=100000))]
    pub PARLEY_BROADCASTS_PER_ORG: i64,
    #[arg(long, default_value_t = 1000, value_parser = positive::<u64>())]
    pub PARLEY_WORKER_POLL_MS: u64,
    #[arg(long, default_value_t = 25)]
    pub PARLEY_WORKER_DRAIN_SECS: u64,
    #[arg(long, default_value_t = 250, value_parser = positive::<u64>())]
    pub PARLEY_TICK_MS: u64,
    #[arg(long, default_value_t = 30, value_parser = positive::<u64>())]
    pub PARLEY_RECONCILE_AFTER_SECS: u64,
    #[arg(long, default_value_t = 6, value_parser = positive::<u64>())]
    pub PARLEY_CLAIM_LEASE_SECS: u64,
    #[arg(long, default_value_t = 60, value_parser = RangedU64ValueParser::<u64>::new().range(2..=3600))]
    pub PARLEY_IMPORT_LEASE_SECS: u64,
    #[arg(long, default_value_t = 180, value_parser = clap::value_parser!(u64).range(1..=36_500))]
    pub PARLEY_RECIPIENT_RETENTION_DAYS: u64,
    #[arg(long, default_value_t = 500, value_parser = positive::<u64>())]
    pub PARLEY_PROVIDER_RETRY_BASE_MS: u64,
    #[arg(long, default_value_t = 5, value_parser = positive::<usize>())]
    pub PARLEY_PROVIDER_MAX_ATTEMPTS: usize,
    #[arg(long, default_value_t = 20, value_parser = positive::<u32>())]
    pub PARLEY_BROADCAST_AUTO_PAUSE_FAILURES: u32,

    #[arg(long, value_parser = url_with(&["http", "https"]))]
    pub PARLEY_CHANNEL_MESSAGING_A_URL: Option<String>,
    #[arg(long)]
    pub PARLEY_CHANNEL_MESSAGING_A_SECRET: Option<String>,
    #[arg(long, value_parser = positive::<u32>())]
    pub PARLEY_CHANNEL_MESSAGING_A_RATE: Option<u32>,
    #[arg(long, value_parser = url_with(&["http", "https"]))]
    pub PARLEY_CHANNEL_EMAIL_URL: Option<String>,
    #[arg(long)]
    pub PARLEY_CHANNEL_EMAIL_SECRET: Option<String>,
    #[arg(long, value_parser = positive::<u32>())]
    pub PARLEY_CHANNEL_EMAIL_RATE: Option<u32>,
    #[arg(long, value_parser = url_with(&["http", "https"]))]
    pub PARLEY_CHANNEL_SOCIAL_A_URL: Option<String>,
    #[arg(long)]
    pub PARLEY_CHANNEL_SOCIAL_A_SECRET: Option<String>,
    #[arg(long, value_parser = positive::<u32>())]
    pub PARLEY_CHANNEL_SOCIAL_A_RATE: Option<u32>,
    #[arg(long, value_parser = url_with(&["http", "https"]))]
    pub PARLEY_CHANNEL_SOCIAL_B_URL: Option<String>,
    #[arg(long)]
    pub PARLEY_CHANNEL_SOCIAL_B_SECRET: Option<String>,
    #[arg(long, value_parser = positive::<u32>())]
    pub PARLEY_CHANNEL_SOCIAL_B_RATE: Option<u32>,

    /// Where people reach the API's public routes (unsubscribe links): `http://` and
    /// `PARLEY_API_ADDR` unless set.
    #[arg(long, value_parser = public_url)]
    pub PARLEY_PUBLIC_URL: Option<String>,
    /// An address for `List-Unsubscribe`'s `mailto:`, besides the link.
    #[arg(long, value_parser = mailto)]
    pub PARLEY_UNSUBSCRIBE_MAILTO: Option<String>,

    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub PARLEY_WEBHOOK_ALLOW_PRIVATE: bool,
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(i32).range(1..))]
    pub PARLEY_WEBHOOK_MAX_ATTEMPTS: i32,
    #[arg(long, default_value_t = 600_000, value_parser = positive::<u64>())]
    pub PARLEY_WEBHOOK_RETRY_BASE_MS: u64,
    #[arg(long, default_value_t = 10_000, value_parser = positive::<u64>())]
    pub PARLEY_WEBHOOK_TIMEOUT_MS: u64,
    #[arg(long, default_value_t = 5 * 24 * 3600, value_parser = positive::<u64>())]
    pub PARLEY_WEBHOOK_DISABLE_AFTER_SECS: u64,
    #[arg(long, default_value_t = 8, value_parser = positive::<u32>())]
    pub PARLEY_WEBHOOK_CONCURRENCY_PER_ENDPOINT: u32,
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=36_500))]
    pub PARLEY_WEBHOOK_RETENTION_DAYS: u64,
    #[arg(long, default_value_t = 90, value_parser = clap::value_parser!(u64).range(1..=36_500))]
    pub PARLEY_WEBHOOK_FAILED_RETENTION_DAYS: u64,

    /// Object storage is configured when this is set, and then needs the credentials.
    #[arg(long, requires_all = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"])]
    pub S3_BUCKET: Option<String>,
    #[arg(long, value_parser = url_with(&["http", "https"]))]
    pub S3_ENDPOINT: Option<String>,
    #[arg(long, default_value = "us-east-1")]
    pub S3_REGION: String,
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub S3_FORCE_PATH_STYLE: bool,
    #[arg(long)]
    pub AWS_ACCESS_KEY_ID: Option<String>,
    #[arg(long)]
    pub AWS_SECRET_ACCESS_KEY: Option<String>,
    #[arg(long)]
    pub AWS_SESSION_TOKEN: Option<String>,

    #[arg(long, default_value_t = 100 * 1024 * 1024, value_parser = clap::value_parser!(i64).range(1..))]
    pub PARLEY_UPLOAD_MAX_BYTES: i64,
    /// Comma-separated `type/subtype` or `type/*`; the built-in list when unset.
    #[arg(long, value_parser = content_types)]
    pub PARLEY_UPLOAD_CONTENT_TYPES: Option<ContentTypes>,
    #[arg(long, default_value_t = 900, value_parser = clap::value_parser!(u64).range(1..=MAX_PRESIGN_SECS))]
    pub PARLEY_UPLOAD_URL_TTL_SECS: u64,
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=MAX_PRESIGN_SECS))]
    pub PARLEY_DOWNLOAD_URL_TTL_SECS: u64,
    /// The renamed variables read under their former name: (name, former name).
    #[arg(skip)]
    pub former_names: Vec<(&'static str, &'static str)>,
}

/// Variables renamed, as (name, former name). For one release the former name is read when
/// the name is not set; both set to different values is an error.
pub const RENAMED: &[(&str, &str)] = &[
    ("PARLEY_SEND_READY_JOBS", "PARLEY_DELIVERY_READY_JOBS"),
    ("PARLEY_SEND_JOBS_PER_ORG", "PARLEY_DELIVERY_JOBS_PER_ORG"),
    ("PARLEY_CLAIM_LEASE_SECS", "PARLEY_RECIPIENT_LEASE_SECS"),
];

/// `var`'s value: under its name, else under its former name (noted in `former`). Blank counts
/// as unset.
fn look_up(
    lookup: &impl Fn(&str) -> Option<String>,
    var: &str,
    former: &mut Vec<(&'static str, &'static str)>,
) -> Result<Option<String>, ConfigError> {
    let set = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
    let value = set(var);
    let Some(&(name, old)) = RENAMED.iter().find(|(name, _)| *name == var) else {
        return Ok(value);
    };
    match (value, set(old)) {
        (Some(new), Some(before)) if new.trim() != before.trim() => Err(ConfigError {
            var: var.to_owned(),
            problem: format!("differs from {old}, its former name: set only {var}"),
        }),
        (Some(new), _) => Ok(Some(new)),
        (None, Some(before)) => {
            former.push((name, old));
            Ok(Some(before))
        }
        (None, None) => Ok(None),
    }
}

/// The queues of `PARLEY_WORKER_QUEUES`.
#[derive(Debug, Clone)]
pub(crate) struct Queues(pub Vec<QueueName>);

/// The content types of `PARLEY_UPLOAD_CONTENT_TYPES`, lowercase.
#[derive(Debug, Clone)]
pub(crate) struct ContentTypes(pub Vec<String>);

impl Vars {
    /// Parses the variables `lookup` knows (blank ones count as unset, values are trimmed).
    pub(crate) fn read(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let command = Vars::command();
        let mut placeholder = None;
        let mut former = Vec::new();
        let mut args = Vec::new();
        for var in command.get_arguments().filter_map(|arg| arg.get_long()) {
            let Some(raw) = look_up(&lookup, var, &mut former)? else {
                continue;
            };
            // A secret is taken as written; other values without surrounding blanks.
            let value = if holds_secret(var) { &raw } else { raw.trim() };
            if holds_secret(var) && is_placeholder(value) && placeholder.is_none() {
                placeholder = Some(var.to_owned());
            }
            args.push(format!("--{var}={value}"));
        }
        let mut vars = Vars::try_parse_from(args)
            .map_err(config_error)
            .map_err(|mut err| {
                // A value read under a former name: say which name the operator set.
                if let Some((_, old)) = former.iter().find(|(name, _)| *name == err.var) {
                    err.problem = format!("{} (set as {old}, its former name)", err.problem);
                }
                err
            })?;
        vars.former_names = former;
        match placeholder {
            Some(var) => Err(ConfigError {
                var,
                problem: "holds a placeholder (\"change-me\" or the like), not a secret: set one of your own".to_owned(),
            }),
            None => Ok(vars),
        }
    }
}

/// Variables whose value is or may carry a secret (a URL may hold a password): their values
/// are never repeated in an error.
fn holds_secret(var: &str) -> bool {
    var.ends_with("_URL")
        || var.contains("SECRET")
        || var.contains("TOKEN")
        || var.starts_with("AWS_")
}

/// clap's error as the one line that names the variable.
fn config_error(err: clap::Error) -> ConfigError {
    let arg = match err.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(s)) => s.clone(),
        Some(ContextValue::Strings(s)) => s.first().cloned().unwrap_or_default(),
        _ => String::new(),
    };
    // "--NAME=<NAME>" or "--NAME <NAME>": the variable is NAME.
    let var = arg
        .trim_start_matches("--")
        .split(['=', ' '])
        .next()
        .unwrap_or_default()
        .to_owned();
    let problem = match err.kind() {
        ErrorKind::MissingRequiredArgument => "is not set".to_owned(),
        _ => {
            let value = match err.get(ContextKind::InvalidValue) {
                Some(ContextValue::String(v)) if !holds_secret(&var) => format!(": {v:?}"),
                _ => String::new(),
            };
            let why = err
                .source()
                .map(|s| s.to_string())
                .or_else(|| match err.get(ContextKind::ValidValue) {
                    Some(ContextValue::Strings(v)) => Some(format!("expected {}", v.join(", "))),
                    _ => None,
                })
                .unwrap_or_else(|| "not a valid value".to_owned());
            // clap states "at least 1" as a range up to the type's largest value.
            let why = match why.split_once(" is not in 1..") {
                Some((_, end)) if !end.starts_with('=') => "must be more than 0".to_owned(),
                _ => why,
            };
            format!("is malformed ({why}){value}")
        }
    };
    if var.is_empty() {
        return ConfigError {
            var: "environment".to_owned(),
            problem: err.kind().to_string(),
        };
    }
    ConfigError { var, problem }
}

fn url_with(schemes: &'static [&'static str]) -> impl Fn(&str) -> Result<String, String> + Clone {
    move |raw| {
        let scheme_ok = raw.split_once("://").is_some_and(|(scheme, rest)| {
            schemes.contains(&scheme.to_ascii_lowercase().as_str()) && !rest.is_empty()
        });
        let parses = url::Url::parse(raw).is_ok();
        if scheme_ok && parses {
            Ok(raw.to_owned())
        } else {
            Err(format!("expected a {} URL", schemes.join(" or ")))
        }
    }
}

/// An `http` or `https` URL of at most `MAX_PUBLIC_URL_CHARS`, without query or fragment;
/// kept without its trailing `/`.
fn public_url(raw: &str) -> Result<String, String> {
    use parley_domain::unsubscribe::MAX_PUBLIC_URL_CHARS;
    let url = url_with(&["http", "https"])(raw)?;
    let parsed = url::Url::parse(&url).map_err(|e| e.to_string())?;
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err("expected a URL without query or fragment".to_owned());
    }
    // As parsed: what the parser dropped (tabs, line breaks, spaces around it) stays out of
    // every link and header.
    let url = parsed.as_str().trim_end_matches('/').to_owned();
    if url.chars().count() > MAX_PUBLIC_URL_CHARS {
        return Err(format!(
            "expected at most {MAX_PUBLIC_URL_CHARS} characters"
        ));
    }
    Ok(url)
}

/// An email address, as a contact's `email` is checked.
fn mailto(raw: &str) -> Result<String, String> {
    let ok = raw.len() <= 254
        && raw.matches('@').count() == 1
        && raw.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && domain.contains('.')
                && raw
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "@.-_+".contains(c))
        });
    if ok {
        Ok(raw.to_owned())
    } else {
        Err("expected an email address (letters, digits, . - _ + and one @)".to_owned())
    }
}

/// One Redis URL, or several separated by commas (a cluster's nodes, reached over TCP).
fn redis_urls(raw: &str) -> Result<String, String> {
    let check = if raw.contains(',') {
        url_with(&["redis", "rediss"])
    } else {
        url_with(&["redis", "rediss", "unix", "redis+unix"])
    };
    for url in raw.split(',') {
        check(url.trim())?;
    }
    Ok(raw.to_owned())
}

/// No whitespace, and no braces: the prefix goes inside Redis Cluster hash tags (`{...}`).
fn key_prefix(raw: &str) -> Result<String, String> {
    if raw.contains(|c: char| c.is_whitespace() || c == '{' || c == '}') {
        return Err("must not contain whitespace or braces".to_owned());
    }
    Ok(raw.to_owned())
}

fn log_format(raw: &str) -> Result<LogFormat, String> {
    raw.parse()
}

/// Each queue once, in the order first named: a queue named twice would get two consumers
/// sharing one wake-up signal.
fn queues(raw: &str) -> Result<Queues, String> {
    let mut queues: Vec<QueueName> = Vec::new();
    for q in raw.split(',').map(str::trim).filter(|q| !q.is_empty()) {
        let queue = QueueName::parse(q).ok_or_else(|| {
            let known: Vec<&str> = QueueName::ALL.iter().map(|q| q.as_str()).collect();
            format!("unknown queue {q:?}; queues: {}", known.join(", "))
        })?;
        if !queues.contains(&queue) {
            queues.push(queue);
        }
    }
    Ok(Queues(queues))
}

fn content_types(raw: &str) -> Result<ContentTypes, String> {
    let types: Vec<String> = raw
        .split(',')
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect();
    if let Some(bad) = types.iter().find(|t| {
        t.split_once('/')
            .is_none_or(|(a, b)| a.is_empty() || b.is_empty() || a == "*")
    }) {
        return Err(format!("{bad:?} is not a type/subtype or type/*"));
    }
    Ok(ContentTypes(types))
}

/// An operator token: 32 to 256 visible ASCII characters, at least [`MIN_TOKEN_CHARS`] of them
/// distinct (a run of one character, or of a few, is no secret).
fn admin_token(s: &str) -> Result<String, String> {
    if !((32..=256).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_graphic())) {
        return Err("32 to 256 visible ASCII characters (no spaces)".to_owned());
    }
    let distinct = s.bytes().collect::<std::collections::HashSet<u8>>().len();
    if distinct < MIN_TOKEN_CHARS {
        return Err(format!(
            "at least {MIN_TOKEN_CHARS} distinct characters: make one with `openssl rand -base64 33`"
        ));
    }
    Ok(s.to_owned())
}

/// Distinct characters an operator token has at least (a random token of 32 characters has
/// about 25 in base64, 14 in hex).
const MIN_TOKEN_CHARS: usize = 10;

/// What the shipped manifests and examples put where a secret goes: a value containing one of
/// these (in any case) is refused, so that no deployment runs on a secret everyone can read.
const PLACEHOLDERS: &[&str] = &[
    "change-me",
    "changeme",
    "change_me",
    "replace-me",
    "replace_me",
];

/// Whether `value` is a placeholder rather than a secret of its own ([`PLACEHOLDERS`]).
pub(crate) fn is_placeholder(value: &str) -> bool {
    let value = value.to_ascii_lowercase();
    PLACEHOLDERS.iter().any(|p| value.contains(p))
}

/// The proxies whose forwarding header names the client (`PARLEY_TRUSTED_PROXIES`).
fn trusted_proxies(raw: &str) -> Result<TrustedProxies, String> {
    let mut nets = Vec::new();
    for item in raw.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let net = match item.parse::<ipnet::IpNet>() {
            Ok(net) => net.trunc(),
            Err(_) => match item.parse::<std::net::IpAddr>() {
                Ok(ip) => ipnet::IpNet::from(ip),
                Err(_) => return Err(format!("{item:?} is not an address or a CIDR")),
            },
        };
        nets.push(net);
    }
    if nets.len() > MAX_TRUSTED_PROXIES {
        return Err(format!("at most {MAX_TRUSTED_PROXIES} addresses or CIDRs"));
    }
    Ok(TrustedProxies(nets))
}

/// Entries of `PARLEY_TRUSTED_PROXIES` at most: each request's address is checked against them.
const MAX_TRUSTED_PROXIES: usize = 64;

fn forwarded_header(raw: &str) -> Result<ForwardedHeader, String> {
    match raw.to_ascii_lowercase().as_str() {
        "x-forwarded-for" => Ok(ForwardedHeader::XForwardedFor),
        "forwarded" => Ok(ForwardedHeader::Forwarded),
        _ => Err("expected x-forwarded-for or forwarded".to_owned()),
    }
}

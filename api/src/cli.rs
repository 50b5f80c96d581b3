//! `parley-api [serve]`, `migrate`, `org create`, `org limits`, `key create`,
//! `unsubscribe-keys rotate`, `bucket create`, `openapi`,
//! `probe`, `admin ...` (`crate::admin_cli`).

use clap::{Args, Parser, Subcommand};
use parley_domain::operator::DeadQueue;
use parley_types::enums::Channel;
use parley_types::ids::OrgId;
use parley_types::time::Timestamp;
use parley_usecases::org_limits::Setting;
use uuid::Uuid;

#[derive(Debug, Parser)]
#[command(name = "parley-api", about = "The Parley HTTP API", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API (the default); applies migrations first unless PARLEY_AUTO_MIGRATE=false.
    Serve,
    /// Apply the database migrations and exit.
    Migrate,
    /// Organizations.
    Org {
        #[command(subcommand)]
        command: OrgCommand,
    },
    /// API keys.
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
    /// The keys unsubscribe links are signed with (docs/operations.md, "Unsubscribe keys").
    UnsubscribeKeys {
        #[command(subcommand)]
        command: UnsubscribeKeysCommand,
    },
    /// Object storage.
    Bucket {
        #[command(subcommand)]
        command: BucketCommand,
    },
    /// Operator control: queues, dead work, retries, pauses, the audit log
    /// (docs/operations.md, "Operator control"). Prints tables; `--json` for scripts.
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
        /// Print JSON instead of tables.
        #[arg(long, global = true)]
        json: bool,
    },
    /// Print the OpenAPI document.
    Openapi,
    /// GET a URL and exit 0 on a 2xx, 1 otherwise: the container health check (the runtime
    /// image has no curl).
    Probe {
        #[arg(default_value = "http://127.0.0.1:8080/readyz")]
        url: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum UnsubscribeKeysCommand {
    /// Add a key: it signs new links two minutes later, once every API process knows it; the
    /// older keys keep verifying the links they signed. Prints {"keyId"}.
    Rotate,
}

#[derive(Debug, Subcommand)]
pub enum BucketCommand {
    /// Create the configured bucket (S3_BUCKET) unless it exists: for development stores.
    Create,
}

#[derive(Debug, Subcommand)]
pub enum OrgCommand {
    /// Create an organization and a key with scope `*`; prints {"organizationId","apiKey"}.
    Create {
        #[arg(long)]
        name: String,
    },
    /// Show or change one organization's own limits, each in place of the deployment's
    /// default (docs/operations.md, "Per-organization limits"); prints them as JSON. The
    /// workers apply a change within 20 ticks (5 s). A value `default` gives a limit back to
    /// the deployment's.
    Limits {
        #[arg(long)]
        org: OrgId,
        /// Send jobs ready or running at once (PARLEY_SEND_JOBS_PER_ORG); also read as
        /// `--delivery-jobs`, its former name, for one release.
        #[arg(long, alias = "delivery-jobs", value_parser = setting(10_000))]
        send_jobs: Option<Setting>,
        /// Webhook delivery jobs ready or running at once (PARLEY_WEBHOOK_JOBS_PER_ORG).
        #[arg(long, value_parser = setting(10_000))]
        webhook_jobs: Option<Setting>,
        /// Imports running at once (PARLEY_IMPORTS_PER_ORG).
        #[arg(long, value_parser = setting(1_000))]
        imports: Option<Setting>,
        /// Broadcasts sending at once (PARLEY_BROADCASTS_PER_ORG).
        #[arg(long, value_parser = setting(100_000))]
        broadcasts: Option<Setting>,
        /// Messages per second on a channel (PARLEY_CHANNEL_<CH>_RATE), as CHANNEL=N or
        /// CHANNEL=default; may be repeated.
        #[arg(long = "rate", value_parser = channel_rate)]
        rates: Vec<(Channel, Setting)>,
    },
}

/// A refusal of the rules, as a command prints it: each field and why.
pub fn describe(err: parley_types::error::AppError) -> anyhow::Error {
    match err {
        parley_types::error::AppError::Validation(v) => anyhow::anyhow!(
            "{}",
            v.iter()
                .map(|f| format!("{}: {}", f.field, f.message))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        other => anyhow::anyhow!("{other}"),
    }
}

/// A limit from 1 to `max`, or `default`.
fn setting(max: i32) -> impl Fn(&str) -> Result<Setting, String> + Clone + Send + Sync + 'static {
    move |s| {
        if s == "default" {
            return Ok(Setting::Default);
        }
        match s.parse::<i32>() {
            Ok(n) if (1..=max).contains(&n) => Ok(Setting::Value(n)),
            _ => Err(format!(
                "expected a whole number from 1 to {max}, or default"
            )),
        }
    }
}

/// CHANNEL=N (1 to 1,000,000 messages per second) or CHANNEL=default.
fn channel_rate(s: &str) -> Result<(Channel, Setting), String> {
    let (channel, value) = s
        .split_once('=')
        .ok_or_else(|| "expected CHANNEL=N or CHANNEL=default".to_owned())?;
    let channel = Channel::ALL
        .iter()
        .copied()
        .find(|c| c.as_str() == channel)
        .ok_or_else(|| {
            let names: Vec<_> = Channel::ALL.iter().map(|c| c.as_str()).collect();
            format!("unknown channel {channel:?}; one of {}", names.join(", "))
        })?;
    Ok((channel, setting(1_000_000)(value)?))
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create a key; prints {"organizationId","apiKey"}.
    Create {
        #[arg(long)]
        org: OrgId,
        /// Comma-separated scopes, e.g. contacts:read,contacts:write (or *).
        #[arg(long, value_delimiter = ',')]
        scopes: Vec<String>,
        /// Requests allowed per UTC day.
        #[arg(long)]
        limit: Option<i64>,
        #[arg(long, default_value = "cli")]
        name: String,
    },
}

/// `parley-api admin ...` (run by `crate::admin_cli`).
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Every queue's depth, activity and pause, and the largest backlogs.
    Queues,
    /// A page of dead work, newest first.
    Dead {
        #[command(flatten)]
        filter: FilterArgs,
        /// Items per page (1 to 100).
        #[arg(long, default_value_t = 50)]
        page_size: u32,
        /// The next page: the cursor the previous page printed.
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Retry the dead work a filter selects (run by the workers); prints the action.
    Retry(ActArgs),
    /// Discard the dead work a filter selects (out of the dead list, records kept).
    Discard(ActArgs),
    /// Follow one action.
    Action { id: Uuid },
    /// Pause an organization's sending (its recipients are held).
    PauseOrg { org: OrgId },
    /// Resume an organization's sending (its held recipients are released, each sent once).
    ResumeOrg { org: OrgId },
    /// Pause a queue (its workers stop taking its jobs).
    PauseQueue { queue: String },
    /// Resume a queue.
    ResumeQueue { queue: String },
    /// What is paused.
    Pauses,
    /// The audit log, newest first.
    Audit {
        #[arg(long, default_value_t = 50)]
        page_size: u32,
        #[arg(long)]
        cursor: Option<String>,
    },
    /// Operator keys for the operator API.
    Key {
        #[command(subcommand)]
        command: OperatorKeyCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum OperatorKeyCommand {
    /// Make a key; prints {"name","operatorKey"} (shown once).
    Create {
        #[arg(long)]
        name: String,
    },
    /// Revoke a key by name.
    Revoke {
        #[arg(long)]
        name: String,
    },
}

/// Which dead work.
#[derive(Debug, Args)]
pub struct FilterArgs {
    /// recipient-send, webhook-delivery, contact-import or sla-check.
    #[arg(long, value_parser = dead_queue)]
    pub queue: DeadQueue,
    #[arg(long)]
    pub org: Option<Uuid>,
    #[arg(long)]
    pub broadcast: Option<Uuid>,
    #[arg(long)]
    pub webhook: Option<Uuid>,
    #[arg(long)]
    pub error_code: Option<String>,
    /// Given up at or after (RFC 3339).
    #[arg(long, value_parser = instant)]
    pub from: Option<Timestamp>,
    /// Given up before (RFC 3339).
    #[arg(long, value_parser = instant)]
    pub to: Option<Timestamp>,
}

#[derive(Debug, Args)]
pub struct ActArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Only these items (may be repeated).
    #[arg(long = "id")]
    pub ids: Vec<Uuid>,
    /// Items acted on at most (default 100,000).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Wait until the workers have done it.
    #[arg(long)]
    pub wait: bool,
}

fn dead_queue(s: &str) -> Result<DeadQueue, String> {
    s.parse()
}

fn instant(s: &str) -> Result<Timestamp, String> {
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| Timestamp(t.with_timezone(&chrono::Utc)))
        .map_err(|e| format!("an RFC 3339 time: {e}"))
}

/// What the use cases reach, for a command: Postgres on `DATABASE_URL` (a small pool), Redis
/// connected on first use (a command that enqueues nothing never needs it), the system clock.
pub fn services(config: &parley_config::Config) -> anyhow::Result<parley_usecases::Services> {
    use anyhow::Context;
    use secrecy::ExposeSecret;
    let redis = parley_jobs::redis_conn::Redis::lazy(&config.redis_target(), &config.redis_prefix)
        .context("REDIS_URL")?;
    Ok(parley_usecases::Services {
        pool: parley_usecases::postgres::pool(config.database_url.expose_secret(), 2)?,
        jobs: config.jobs(&redis),
        clock: parley_types::time::Clock::system(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_numbers_in_range_or_default() {
        let cli = Cli::try_parse_from([
            "parley-api",
            "org",
            "limits",
            "--org",
            "0190f5c4-0000-7000-8000-000000000001",
            "--send-jobs",
            "10",
            "--imports",
            "default",
            "--rate",
            "email=50",
            "--rate",
            "social_a=default",
        ])
        .expect("parses");
        let Some(Command::Org {
            command:
                OrgCommand::Limits {
                    send_jobs,
                    imports,
                    rates,
                    webhook_jobs,
                    ..
                },
        }) = cli.command
        else {
            panic!("not org limits");
        };
        assert_eq!(send_jobs, Some(Setting::Value(10)));
        assert_eq!(imports, Some(Setting::Default));
        assert_eq!(webhook_jobs, None);
        assert_eq!(
            rates,
            vec![
                (Channel::Email, Setting::Value(50)),
                (Channel::SocialA, Setting::Default)
            ]
        );
        for bad in [
            ["--send-jobs", "0"],
            ["--delivery-jobs", "10001"],
            ["--rate", "fax=5"],
            ["--rate", "email"],
            ["--imports", "-1"],
        ] {
            let args = [
                "parley-api",
                "org",
                "limits",
                "--org",
                "0190f5c4-0000-7000-8000-000000000001",
            ];
            assert!(
                Cli::try_parse_from(args.iter().chain(bad.iter())).is_err(),
                "{bad:?} was taken"
            );
        }
    }
}

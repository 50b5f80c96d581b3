use secrecy::ExposeSecret;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use parley_api::Application;
use parley_api::cli::{
    BucketCommand, Cli, Command, KeyCommand, OrgCommand, UnsubscribeKeysCommand,
};
use parley_config::Config;
use parley_domain::api_keys::NewApiKey;
use parley_runtime::observability;
use parley_storage::Storage;
use parley_types::error::AppError;
use parley_usecases::{api_keys, org_limits, postgres};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// mimalloc: a request allocates and frees many small buffers across threads
/// (docs/decisions.md, "Allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Probe { url }) = &cli.command {
        return probe(url).await;
    }
    if let Some(Command::Openapi) = cli.command {
        let doc = parley_api::openapi::default_document();
        println!("{doc:#}");
        return ExitCode::SUCCESS;
    }
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::from(2);
        }
    };
    let command = cli.command.unwrap_or(Command::Serve);
    let logs = match command {
        Command::Serve => observability::LogTo::Stdout,
        _ => observability::LogTo::Stderr,
    };
    observability::init_tracing(config.log_format, logs);
    config.warn_of_former_names();
    match run(command, config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command, config: Config) -> anyhow::Result<()> {
    match command {
        Command::Serve => serve(config).await,
        Command::Migrate => {
            let pool = postgres::pool(config.database_session_url.expose_secret(), 2)?;
            postgres::migrate(&pool)
                .await
                .context("applying migrations")?;
            eprintln!("migrations applied");
            Ok(())
        }
        Command::Org {
            command: OrgCommand::Create { name },
        } => {
            let services = parley_api::cli::services(&config)?;
            let (org, key) = parley_usecases::orgs::create_with_key(services.ctx(), &name).await?;
            println!("{}", json!({"organizationId": org.id, "apiKey": key.key}));
            Ok(())
        }
        Command::Org {
            command:
                OrgCommand::Limits {
                    org,
                    send_jobs,
                    webhook_jobs,
                    imports,
                    broadcasts,
                    rates,
                },
        } => {
            let services = parley_api::cli::services(&config)?;
            let changes = org_limits::Changes {
                send_jobs: send_jobs.unwrap_or_default(),
                webhook_jobs: webhook_jobs.unwrap_or_default(),
                imports: imports.unwrap_or_default(),
                broadcasts: broadcasts.unwrap_or_default(),
                rates,
            };
            let limits = org_limits::set(services.ctx(), org, &changes)
                .await?
                .with_context(|| format!("no organization {org}"))?;
            println!("{}", serde_json::to_string(&limits)?);
            Ok(())
        }
        Command::Key {
            command:
                KeyCommand::Create {
                    org,
                    scopes,
                    limit,
                    name,
                },
        } => {
            let services = parley_api::cli::services(&config)?;
            let ctx = services.ctx();
            parley_usecases::orgs::read(ctx, org)
                .await
                .map_err(|e| match e.0 {
                    AppError::NotFound => anyhow::anyhow!("no organization {org}"),
                    err => parley_api::cli::describe(err),
                })?;
            let new = NewApiKey::parse(name, scopes, limit).map_err(parley_api::cli::describe)?;
            let key = api_keys::create_for(ctx, org, new)
                .await
                .map_err(|e| match e.0 {
                    AppError::InvalidState(_) => anyhow::anyhow!(
                        "organization {org} holds {} active keys, the most it may: revoke one first",
                        api_keys::MAX_ACTIVE_KEYS
                    ),
                    err => parley_api::cli::describe(err),
                })?;
            println!("{}", json!({"organizationId": org, "apiKey": key.key}));
            Ok(())
        }
        Command::UnsubscribeKeys {
            command: UnsubscribeKeysCommand::Rotate,
        } => {
            let services = parley_api::cli::services(&config)?;
            let id = parley_usecases::unsubscribe::rotate(services.ctx()).await?;
            println!("{}", serde_json::json!({ "keyId": id }));
            Ok(())
        }
        Command::Bucket {
            command: BucketCommand::Create,
        } => {
            let settings = config
                .storage
                .as_ref()
                .context("S3_BUCKET is not set: no object storage is configured")?;
            Storage::new(settings).ensure_bucket().await?;
            eprintln!("bucket {} is ready", settings.bucket);
            Ok(())
        }
        Command::Admin { command, json } => parley_api::admin_cli::run(command, json, config).await,
        Command::Openapi | Command::Probe { .. } => Ok(()),
    }
}

async fn serve(config: Config) -> anyhow::Result<()> {
    let app = Application::build(config, None).await?;
    tracing::info!(addr = %app.local_addr()?, "parley-api listening");
    if let Some(addr) = app.admin_addr() {
        tracing::info!(addr = %addr?, "the operator API listening");
    }
    let shutdown = CancellationToken::new();
    tokio::spawn(parley_runtime::shutdown::cancel_on_signal(shutdown.clone()));
    app.run_until(shutdown).await?;
    tracing::info!("parley-api stopped");
    Ok(())
}

async fn probe(url: &str) -> ExitCode {
    let client = match reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(3))
        .build()
    {
        Ok(c) => c,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::FAILURE;
        }
    };
    match client.get(url).send().await {
        Ok(resp) if resp.status().is_success() => ExitCode::SUCCESS,
        Ok(resp) => {
            eprintln!("{url}: {}", resp.status());
            ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("{url}: {err}");
            ExitCode::FAILURE
        }
    }
}

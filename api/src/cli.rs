//! `parley-api [serve]`, `migrate`, `org create`, `key create`, `bucket create`, `openapi`,
//! `probe`.

use clap::{Parser, Subcommand};
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
    /// Object storage.
    Bucket {
        #[command(subcommand)]
        command: BucketCommand,
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
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Create a key; prints {"organizationId","apiKey"}.
    Create {
        #[arg(long)]
        org: Uuid,
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

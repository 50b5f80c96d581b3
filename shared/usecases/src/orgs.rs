//! Organizations, as the operator's CLI makes them.

use parley_db as db;
use parley_domain::api_keys::{CreatedApiKey, NewApiKey};
use parley_domain::orgs::Organization;
use parley_types::error::AppError;
use sqlx::PgPool;

use crate::Result;

/// Creates an organization with one key, `default`, of every scope, in one transaction.
#[tracing::instrument(skip_all)]
pub async fn create_with_key(pool: &PgPool, name: &str) -> Result<(Organization, CreatedApiKey)> {
    let key = NewApiKey::parse("default".into(), vec!["*".into()], None)?;
    let mut tx = pool.begin().await?;
    let org = db::orgs::create(&mut tx, name).await?;
    // A new organization holds no key yet: it is always below the most.
    let key = db::api_keys::create(&mut *tx, org.id, key)
        .await?
        .ok_or_else(|| AppError::InvalidState("the organization holds too many keys".into()))?;
    tx.commit().await?;
    Ok((org, key))
}

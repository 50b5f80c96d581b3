//! Organizations: made by the operator's CLI, read by their keys (and kept in the API's cache,
//! which hears of a change on `api_keys::REVOKED_CHANNEL` as [`CHANGED_PREFIX`] and the id).

use parley_db as db;
use parley_domain::api_keys::{CreatedApiKey, NewApiKey};
use parley_domain::orgs::Organization;
use parley_types::error::AppError;
use parley_types::ids::OrgId;

use crate::{Ctx, Result, found};

pub use parley_db::orgs::CHANGED_PREFIX;

/// The organization, with its business hours.
pub async fn read(ctx: Ctx<'_>, id: OrgId) -> Result<Organization> {
    found(db::orgs::get(ctx.pool, id).await?)
}

/// Creates an organization with one key, `default`, of every scope, in one transaction.
#[tracing::instrument(skip_all)]
pub async fn create_with_key(ctx: Ctx<'_>, name: &str) -> Result<(Organization, CreatedApiKey)> {
    let key = NewApiKey::parse("default".into(), vec!["*".into()], None)?;
    let mut tx = ctx.pool.begin().await?;
    let org = db::orgs::create(&mut tx, name).await?;
    // A new organization holds no key yet: it is always below the most.
    let key = db::api_keys::create(&mut *tx, OrgId::from(org.id), key)
        .await?
        .ok_or_else(|| AppError::InvalidState("the organization holds too many keys".into()))?;
    tx.commit().await?;
    Ok((org, key))
}

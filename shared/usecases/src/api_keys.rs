//! API keys: created, listed and revoked by the organization's own keys and by the CLI, and
//! found by their hash when the API's key cache does not hold them.

use parley_db as db;
use parley_domain::api_keys::{ApiKey, CreatedApiKey, KeyIdentity, NewApiKey};
use parley_types::error::AppError;
use parley_types::ids::OrgId;
use parley_types::list::{Page, PageRequest};
use uuid::Uuid;

use crate::{Caller, Ctx, Result, found};

pub use parley_db::api_keys::{MAX_ACTIVE_KEYS, REVOKED_CHANNEL};

/// The active key with this hash (of its secret) and its organization's limits; `None` for
/// an unknown or revoked key.
pub async fn identify(ctx: Ctx<'_>, hash: &[u8]) -> Result<Option<KeyIdentity>> {
    Ok(db::api_keys::identify_hash(ctx.pool, hash).await?)
}

/// Notifies `payload` on [`REVOKED_CHANNEL`]: the key caches' heartbeats, which prove that
/// notifications reach their listener.
pub async fn notify_key_caches(ctx: Ctx<'_>, payload: &str) -> Result<()> {
    Ok(db::api_keys::notify_revoked_channel(ctx.pool, payload).await?)
}

/// A page of the organization's keys (never their secrets).
pub async fn list(ctx: Ctx<'_>, org: OrgId, page: &PageRequest) -> Result<Page<ApiKey>> {
    Ok(db::api_keys::list(ctx.pool, org, page).await?)
}

/// A new key for the caller's organization, its secret shown this once; refused while the
/// organization holds [`MAX_ACTIVE_KEYS`] active keys.
pub async fn create(ctx: Ctx<'_>, caller: &Caller, new: NewApiKey) -> Result<CreatedApiKey> {
    create_for(ctx, caller.org_id, new).await
}

/// [`create`] for an organization the operator names (the CLI, which checks it exists).
pub async fn create_for(ctx: Ctx<'_>, org: OrgId, new: NewApiKey) -> Result<CreatedApiKey> {
    Ok(db::api_keys::create(ctx.pool, org, new).await?.ok_or_else(|| {
        AppError::InvalidState(format!(
            "the organization holds {MAX_ACTIVE_KEYS} active keys, the most it may: revoke one first"
        ))
    })?)
}

/// Revokes a key of the caller's organization; answers the revoked key's id, which the
/// key caches drop (every API process hears of it on [`REVOKED_CHANNEL`]).
pub async fn revoke(ctx: Ctx<'_>, caller: &Caller, id: Uuid) -> Result<Uuid> {
    found(db::api_keys::revoke(ctx.pool, caller.org_id, id).await?)
}

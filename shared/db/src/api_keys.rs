use parley_types::ids::OrgId;
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::ListQuery;

use parley_domain::api_keys::{ApiKey, CreatedApiKey, KeyIdentity, NewApiKey};
use parley_domain::auth;
use parley_types::list::{Page, PageRequest};

/// Active keys an organization may hold: each API process may keep every key in memory
/// (`api/src/key_cache.rs`), so a tenant's keys are bounded. Two creations at the same instant
/// may both pass the count.
pub const MAX_ACTIVE_KEYS: i64 = 1_000;

/// Issues a key; `None` when the organization holds [`MAX_ACTIVE_KEYS`] active keys already.
pub async fn create(
    db: impl PgExecutor<'_>,
    org: OrgId,
    new: NewApiKey,
) -> Result<Option<CreatedApiKey>, sqlx::Error> {
    let key = auth::generate_key();
    let api_key: Option<ApiKey> = sqlx::query_as!(
        ApiKey,
        r#"INSERT INTO api_keys (id, organization_id, name, prefix, key_hash, scopes, daily_limit)
         SELECT $1, $2, $3, $4, $5, $6, $7
         WHERE (SELECT count(*) FROM api_keys WHERE organization_id = $2 AND revoked_at IS NULL)
               < $8
         RETURNING id, organization_id, name, prefix, scopes, daily_limit AS "limit",
            revoked_at, created_at, updated_at"#,
        parley_types::ids::new_id(),
        org.uuid(),
        &new.name,
        &key.prefix,
        &key.hash,
        &new.scopes,
        new.limit,
        MAX_ACTIVE_KEYS,
    )
    .fetch_optional(db)
    .await?;
    Ok(api_key.map(|api_key| CreatedApiKey {
        api_key,
        key: key.secret,
    }))
}

/// The active key whose secret hashes to `hash` ([`auth::hash_key`]), if any.
pub async fn identify_hash(
    db: impl PgExecutor<'_>,
    hash: &[u8],
) -> Result<Option<KeyIdentity>, sqlx::Error> {
    sqlx::query_as!(
        KeyIdentity,
        "SELECT id, organization_id, name, scopes, daily_limit FROM api_keys
         WHERE key_hash = $1 AND revoked_at IS NULL",
        hash,
    )
    .fetch_optional(db)
    .await
}

pub async fn list(
    pool: &PgPool,
    org: OrgId,
    page: &PageRequest,
) -> Result<Page<ApiKey>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT k.* FROM api_keys k".into(),
        count_from: "FROM api_keys k",
        alias: "k",
    };
    super::page(
        pool,
        q,
        |qb| {
            qb.push(" WHERE k.organization_id = ").push_bind(org);
        },
        page,
    )
    .await
}

/// The channel a changed or deleted key's id is notified on when the change commits (migration
/// `api_key_changes`): the API processes that keep keys in memory drop it. A changed
/// organization is notified on it too, as [`crate::orgs::CHANGED_PREFIX`] and its id.
pub const REVOKED_CHANNEL: &str = "parley_api_key_revoked";

/// Revokes a key; revoking a revoked key is a no-op. The first revocation notifies
/// [`REVOKED_CHANNEL`] with the key's id when it commits (a trigger does, for any change of a
/// key row; a repeat changes nothing and does not). `None` when there is no such key.
pub async fn revoke(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: Uuid,
) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "UPDATE api_keys SET revoked_at = coalesce(revoked_at, clock_timestamp())
         WHERE organization_id = $1 AND id = $2 RETURNING id",
        org.uuid(),
        id,
    )
    .fetch_optional(db)
    .await
}

/// Notifies `payload` on [`REVOKED_CHANNEL`] (the API processes' heartbeats).
pub async fn notify_revoked_channel(
    db: impl PgExecutor<'_>,
    payload: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!("SELECT pg_notify('parley_api_key_revoked', $1)", payload)
        .execute(db)
        .await?;
    Ok(())
}

//! Idempotency keys: a request with an `Idempotency-Key` takes its key before the handler runs
//! and stores the answer after, so that a repeat is answered the same without running again.

use std::time::Duration;

use parley_db as db;
use parley_types::ids::OrgId;
use uuid::Uuid;

use crate::{Ctx, Result};

pub use parley_db::idempotency::{Claim, KEPT_FOR};

/// Takes the organization's `key` for the request whose hash is `hash`, or says who holds it:
/// a request still running (counted abandoned after `abandoned_after`), or the answer kept
/// for [`KEPT_FOR`].
pub async fn claim(
    ctx: Ctx<'_>,
    org: OrgId,
    key: &str,
    hash: &[u8],
    abandoned_after: Duration,
) -> Result<Claim> {
    Ok(db::idempotency::claim(ctx.pool, org, key, hash, KEPT_FOR, abandoned_after).await?)
}

/// Keeps the answer of the request that took the key with `token`.
pub async fn complete(
    ctx: Ctx<'_>,
    org: OrgId,
    key: &str,
    token: Uuid,
    status: u16,
    body: &[u8],
) -> Result<()> {
    Ok(db::idempotency::complete(ctx.pool, org, key, token, status, body).await?)
}

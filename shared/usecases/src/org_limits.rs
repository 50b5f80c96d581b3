//! The limits an operator sets for one organization (`parley-api org limits`).

use parley_db as db;
use parley_types::ids::OrgId;

use crate::{Ctx, Result};
pub use parley_db::org_limits::{Changes, OrgLimits, Setting};

/// Applies `changes` under the organization's row lock and returns its limits; `None` when
/// there is no such organization.
#[tracing::instrument(skip_all, fields(organization_id = %org))]
pub async fn set(ctx: Ctx<'_>, org: OrgId, changes: &Changes) -> Result<Option<OrgLimits>> {
    let mut tx = ctx.pool.begin().await?;
    let limits = db::org_limits::set(&mut tx, org, changes).await?;
    tx.commit().await?;
    Ok(limits)
}

// What the workers read of the organizations' own limits, through to `parley_db::org_limits`.

pub async fn all(ctx: Ctx<'_>, limit: i64) -> std::result::Result<Vec<OrgLimits>, sqlx::Error> {
    db::org_limits::all(ctx.pool, limit).await
}

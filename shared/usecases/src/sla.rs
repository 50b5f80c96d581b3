//! SLA policies and the organization's SLA settings: each change under its row lock.

use parley_db as db;
use parley_domain::orgs::{Organization, UpdateOrganization};
use parley_domain::sla::{SlaPolicy, UpdateSlaPolicy};
use parley_types::error::AppError;
use uuid::Uuid;

use crate::{Caller, Ctx, Result};

/// Changes an SLA policy.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: Uuid,
    req: UpdateSlaPolicy,
) -> Result<SlaPolicy> {
    let mut tx = ctx.pool.begin().await?;
    let mut policy = db::sla::get_policy(&mut *tx, caller.org_id, id, true)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut policy);
    db::sla::update_policy(&mut *tx, &policy).await?;
    tx.commit().await?;
    Ok(policy)
}

/// Changes the organization's SLA settings.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update_organization(
    ctx: Ctx<'_>,
    caller: &Caller,
    req: UpdateOrganization,
) -> Result<Organization> {
    let mut tx = ctx.pool.begin().await?;
    let mut org = db::orgs::lock(&mut *tx, caller.org_id)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut org)?;
    db::orgs::update(&mut *tx, &org).await?;
    tx.commit().await?;
    Ok(org)
}

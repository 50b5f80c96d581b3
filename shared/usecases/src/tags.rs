//! Tags and companies: changing one under its row lock.

use parley_db as db;
use parley_domain::tags::{Company, Tag, UpdateCompany, UpdateTag};
use parley_types::error::AppError;
use uuid::Uuid;

use crate::{Caller, Ctx, Result};

/// Changes a tag.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update_tag(ctx: Ctx<'_>, caller: &Caller, id: Uuid, req: UpdateTag) -> Result<Tag> {
    let mut tx = ctx.pool.begin().await?;
    let mut tag = db::tags::get_tag(&mut *tx, caller.org_id, id, true)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut tag);
    db::tags::update_tag(&mut *tx, &tag).await?;
    tx.commit().await?;
    Ok(tag)
}

/// Changes a company.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update_company(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: Uuid,
    req: UpdateCompany,
) -> Result<Company> {
    let mut tx = ctx.pool.begin().await?;
    let mut company = db::tags::get_company(&mut *tx, caller.org_id, id, true)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut company);
    db::tags::update_company(&mut *tx, &company).await?;
    tx.commit().await?;
    Ok(company)
}

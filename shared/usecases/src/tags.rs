//! Tags and companies: created, read, listed and deleted; changed under their row lock.

use parley_db as db;
use parley_domain::tags::{Company, CreateCompany, CreateTag, Tag, UpdateCompany, UpdateTag};
use parley_types::error::AppError;
use parley_types::ids::{CompanyId, OrgId, TagId};
use parley_types::list::{Page, PageRequest};

use crate::{Caller, Ctx, Result, changed, found};

/// Changes a tag.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update_tag(ctx: Ctx<'_>, caller: &Caller, id: TagId, req: UpdateTag) -> Result<Tag> {
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
    id: CompanyId,
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

/// Deletes the organization's tag; 404 when there is none.
pub async fn delete_tag(ctx: Ctx<'_>, caller: &Caller, id: TagId) -> Result<()> {
    changed(db::tags::delete_tag(ctx.pool, caller.org_id, id).await?)
}

/// Deletes the organization's company; 404 when there is none.
pub async fn delete_company(ctx: Ctx<'_>, caller: &Caller, id: CompanyId) -> Result<()> {
    changed(db::tags::delete_company(ctx.pool, caller.org_id, id).await?)
}

/// A page of the organization's tags.
pub async fn list_tags(ctx: Ctx<'_>, org: OrgId, page: &PageRequest) -> Result<Page<Tag>> {
    Ok(db::tags::list_tags(ctx.pool, org, page).await?)
}

/// A page of the organization's companies.
pub async fn list_companies(ctx: Ctx<'_>, org: OrgId, page: &PageRequest) -> Result<Page<Company>> {
    Ok(db::tags::list_companies(ctx.pool, org, page).await?)
}

/// The organization's tag.
pub async fn read_tag(ctx: Ctx<'_>, org: OrgId, id: TagId) -> Result<Tag> {
    found(db::tags::get_tag(ctx.pool, org, id, false).await?)
}

/// The organization's company.
pub async fn read_company(ctx: Ctx<'_>, org: OrgId, id: CompanyId) -> Result<Company> {
    found(db::tags::get_company(ctx.pool, org, id, false).await?)
}

/// Creates a tag.
pub async fn create_tag(ctx: Ctx<'_>, caller: &Caller, req: CreateTag) -> Result<Tag> {
    let tag = req.into_tag(caller.org_id.uuid());
    db::tags::insert_tag(ctx.pool, &tag).await?;
    Ok(tag)
}

/// Creates a company.
pub async fn create_company(ctx: Ctx<'_>, caller: &Caller, req: CreateCompany) -> Result<Company> {
    let company = req.into_company(caller.org_id.uuid());
    db::tags::insert_company(ctx.pool, &company).await?;
    Ok(company)
}

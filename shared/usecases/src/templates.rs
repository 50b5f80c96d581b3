//! Templates: created (the body checked for its channel), read, listed, duplicated and
//! deleted; changed under their row lock; their analytics.

use parley_db as db;
use parley_domain::Channel;
use parley_domain::analytics::TemplateAnalytics;
use parley_domain::broadcasts::check_template_change;
use parley_domain::templates::{CreateTemplate, Template, TemplateFilter, UpdateTemplate};
use parley_types::error::AppError;
use parley_types::ids::{OrgId, TemplateId};
use parley_types::list::{Page, PageRequest};

use crate::{Caller, Ctx, Result, changed, found};

/// Changes a template.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: TemplateId,
    req: UpdateTemplate,
) -> Result<Template> {
    let mut tx = ctx.pool.begin().await?;
    let mut template = db::templates::lock(&mut *tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut template)?;
    let pending = db::broadcasts::rendering_from(&mut *tx, caller.org_id, id).await?;
    check_template_change(&template, &pending)?;
    db::templates::update(&mut *tx, &template).await?;
    tx.commit().await?;
    Ok(template)
}

/// Deletes the organization's template; 404 when there is none.
pub async fn delete(ctx: Ctx<'_>, caller: &Caller, id: TemplateId) -> Result<()> {
    changed(db::templates::delete(ctx.pool, caller.org_id, id).await?)
}

/// A page of the organization's templates.
pub async fn list(
    ctx: Ctx<'_>,
    org: OrgId,
    f: &TemplateFilter,
    page: &PageRequest,
) -> Result<Page<Template>> {
    Ok(db::templates::list(ctx.pool, org, f, page).await?)
}

/// The organization's template.
pub async fn read(ctx: Ctx<'_>, org: OrgId, id: TemplateId) -> Result<Template> {
    found(db::templates::get(ctx.pool, org, id).await?)
}

/// Creates a template, its body checked for its channel.
pub async fn create(ctx: Ctx<'_>, caller: &Caller, req: CreateTemplate) -> Result<Template> {
    let template = req.into_template(caller.org_id.uuid())?;
    db::templates::insert(ctx.pool, &template).await?;
    Ok(template)
}

/// A copy of the template, for `channel` or its own.
pub async fn duplicate(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: TemplateId,
    channel: Option<Channel>,
) -> Result<Template> {
    let copy = read(ctx, caller.org_id, id).await?.duplicate(channel);
    db::templates::insert(ctx.pool, &copy).await?;
    Ok(copy)
}

/// The template's sends and outcomes, for one channel or all.
pub async fn analytics(
    ctx: Ctx<'_>,
    org: OrgId,
    id: TemplateId,
    channel: Option<Channel>,
) -> Result<TemplateAnalytics> {
    read(ctx, org, id).await?;
    Ok(db::analytics::template(ctx.pool, org, id, channel).await?)
}

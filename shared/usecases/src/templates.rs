//! Templates: changing one under its row lock.

use parley_db as db;
use parley_domain::broadcasts::check_template_change;
use parley_domain::templates::{Template, UpdateTemplate};
use parley_types::error::AppError;
use uuid::Uuid;

use crate::{Caller, Ctx, Result};

/// Changes a template.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: Uuid,
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

//! Conversation categories: read, listed and deleted; created and changed, each in one
//! transaction with its checks.

use parley_db as db;
use parley_domain::categories::{
    CategoryFilter, ConversationCategory, CreateCategory, UpdateCategory,
};
use parley_types::error::AppError;
use parley_types::fields::next_free_slug;
use parley_types::ids::{CategoryId, OrgId};
use parley_types::list::{Page, PageRequest};

use crate::{Caller, Ctx, Result, changed, found};

/// Creates a category.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn create(
    ctx: Ctx<'_>,
    caller: &Caller,
    req: CreateCategory,
) -> Result<ConversationCategory> {
    let (mut category, derived) = req.into_category(caller.org_id.uuid());
    let mut tx = ctx.pool.begin().await?;
    if derived {
        let taken = db::categories::taken_slugs(&mut *tx, caller.org_id, &category.slug).await?;
        category.slug = next_free_slug(&category.slug, &taken);
    }
    db::categories::insert(&mut *tx, &category).await?;
    tx.commit().await?;
    Ok(category)
}

/// Changes a category.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: CategoryId,
    req: UpdateCategory,
) -> Result<ConversationCategory> {
    let mut tx = ctx.pool.begin().await?;
    let mut category = db::categories::lock(&mut *tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut category);
    db::categories::update(&mut *tx, &category).await?;
    tx.commit().await?;
    Ok(category)
}

/// Deletes the organization's conversation category; 404 when there is none.
pub async fn delete(ctx: Ctx<'_>, caller: &Caller, id: CategoryId) -> Result<()> {
    changed(db::categories::delete(ctx.pool, caller.org_id, id).await?)
}

/// A page of the organization's conversation categories.
pub async fn list(
    ctx: Ctx<'_>,
    org: OrgId,
    f: &CategoryFilter,
    page: &PageRequest,
) -> Result<Page<ConversationCategory>> {
    Ok(db::categories::list(ctx.pool, org, f, page).await?)
}

/// The organization's conversation category.
pub async fn read(ctx: Ctx<'_>, org: OrgId, id: CategoryId) -> Result<ConversationCategory> {
    found(db::categories::get(ctx.pool, org, id).await?)
}

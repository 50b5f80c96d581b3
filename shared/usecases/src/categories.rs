//! Conversation categories: creating and changing one, each in one transaction with its
//! checks.

use parley_db as db;
use parley_domain::categories::{ConversationCategory, CreateCategory, UpdateCategory};
use parley_types::error::AppError;
use parley_types::fields::next_free_slug;
use uuid::Uuid;

use crate::{Caller, Ctx, Result};

/// Creates a category.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn create(
    ctx: Ctx<'_>,
    caller: &Caller,
    req: CreateCategory,
) -> Result<ConversationCategory> {
    let (mut category, derived) = req.into_category(caller.org_id);
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
    id: Uuid,
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

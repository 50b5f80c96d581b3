//! Message attributes: changing one under its row lock.

use parley_db as db;
use parley_domain::message_attributes::{MessageAttribute, UpdateMessageAttribute};
use parley_types::error::AppError;
use uuid::Uuid;

use crate::{Caller, Ctx, Result};

/// Changes a message attribute.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: Uuid,
    req: UpdateMessageAttribute,
) -> Result<MessageAttribute> {
    let mut tx = ctx.pool.begin().await?;
    let mut attribute = db::message_attributes::lock(&mut *tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut attribute);
    db::message_attributes::update(&mut *tx, &attribute).await?;
    tx.commit().await?;
    Ok(attribute)
}

//! Message attributes: created, read, listed and deleted; changed under their row lock.

use parley_db as db;
use parley_domain::message_attributes::{
    CreateMessageAttribute, MessageAttribute, MessageAttributeFilter, UpdateMessageAttribute,
};
use parley_types::error::AppError;
use parley_types::ids::{MessageAttributeId, OrgId};
use parley_types::list::{Page, PageRequest};

use crate::{Caller, Ctx, Result, changed, found};

/// Changes a message attribute.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: MessageAttributeId,
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

/// Deletes the organization's message attribute; 404 when there is none.
pub async fn delete(ctx: Ctx<'_>, caller: &Caller, id: MessageAttributeId) -> Result<()> {
    changed(db::message_attributes::delete(ctx.pool, caller.org_id, id).await?)
}

/// A page of the organization's message attributes.
pub async fn list(
    ctx: Ctx<'_>,
    org: OrgId,
    f: &MessageAttributeFilter,
    page: &PageRequest,
) -> Result<Page<MessageAttribute>> {
    Ok(db::message_attributes::list(ctx.pool, org, f, page).await?)
}

/// The organization's message attribute.
pub async fn read(ctx: Ctx<'_>, org: OrgId, id: MessageAttributeId) -> Result<MessageAttribute> {
    found(db::message_attributes::get(ctx.pool, org, id).await?)
}

/// Creates a message attribute.
pub async fn create(
    ctx: Ctx<'_>,
    caller: &Caller,
    req: CreateMessageAttribute,
) -> Result<MessageAttribute> {
    let attribute = req.into_attribute(caller.org_id.uuid());
    db::message_attributes::insert(ctx.pool, &attribute).await?;
    Ok(attribute)
}

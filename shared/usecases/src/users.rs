//! Users: read, listed and deleted; created and changed, each in one transaction with its
//! checks.

use parley_db as db;
use parley_domain::users::{CreateUser, UpdateUser, User, UserFilter};
use parley_domain::webhooks::EventName;
use parley_types::error::AppError;
use parley_types::ids::{OrgId, UserId};
use parley_types::list::{Page, PageRequest};

use crate::{Caller, Ctx, Result, changed, found};

/// Creates a user.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn create(ctx: Ctx<'_>, caller: &Caller, req: CreateUser) -> Result<User> {
    let user = req.into_user(caller.org_id.uuid());
    let mut tx = ctx.pool.begin().await?;
    db::users::insert(&mut *tx, &user).await?;
    db::outbox::emit(&mut tx, caller.org_id, EventName::UserCreated, &user).await?;
    tx.commit().await?;
    Ok(user)
}

/// Changes a user.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update(ctx: Ctx<'_>, caller: &Caller, id: UserId, req: UpdateUser) -> Result<User> {
    let mut tx = ctx.pool.begin().await?;
    let mut user = db::users::lock(&mut *tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut user);
    db::users::update(&mut *tx, &user).await?;
    tx.commit().await?;
    Ok(user)
}

/// Deletes the organization's user; 404 when there is none.
pub async fn delete(ctx: Ctx<'_>, caller: &Caller, id: UserId) -> Result<()> {
    changed(db::users::delete(ctx.pool, caller.org_id, id).await?)
}

/// A page of the organization's users.
pub async fn list(
    ctx: Ctx<'_>,
    org: OrgId,
    f: &UserFilter,
    page: &PageRequest,
) -> Result<Page<User>> {
    Ok(db::users::list(ctx.pool, org, f, page).await?)
}

/// The organization's user.
pub async fn read(ctx: Ctx<'_>, org: OrgId, id: UserId) -> Result<User> {
    found(db::users::get(ctx.pool, org, id).await?)
}

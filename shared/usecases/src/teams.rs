//! Teams: read, listed and deleted, members taken off; created and changed, and members
//! added, each in one transaction with the checks of the users it names.

use parley_db as db;
use parley_db::refs::{self, RefTable};
use parley_domain::teams::{AddMembers, CreateTeam, Team, TeamFilter, UpdateTeam};
use parley_types::error::AppError;
use parley_types::ids::{OrgId, TeamId, UserId};
use parley_types::list::{Page, PageRequest};

use crate::{Caller, Ctx, Result, changed, found};

/// Who added a member, as `team_members.added_by` records it.
fn added_by(caller: &Caller) -> String {
    format!("api_key:{}", caller.key_id)
}

const MAX_MEMBERS_PER_CALL: usize = 100;

/// Creates a team with its members.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn create(ctx: Ctx<'_>, caller: &Caller, req: CreateTeam) -> Result<Team> {
    let (team, member_ids) = req.into_team(caller.org_id.uuid());
    let member_ids = parley_types::ids::dedup(member_ids);
    let mut tx = ctx.pool.begin().await?;
    refs::check_id(
        &mut tx,
        RefTable::Users,
        caller.org_id,
        "createdBy",
        team.created_by,
    )
    .await?;
    refs::check_ids(
        &mut tx,
        RefTable::Users,
        caller.org_id,
        "memberIds",
        &member_ids,
        MAX_MEMBERS_PER_CALL,
    )
    .await?;
    db::teams::insert(&mut *tx, &team).await?;
    db::teams::add_members(
        &mut *tx,
        caller.org_id,
        TeamId::from(team.id),
        &member_ids,
        &added_by(caller),
    )
    .await?;
    let team = db::teams::get(&mut tx, caller.org_id, TeamId::from(team.id))
        .await?
        .ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(team)
}

/// Changes a team.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update(ctx: Ctx<'_>, caller: &Caller, id: TeamId, req: UpdateTeam) -> Result<Team> {
    let mut tx = ctx.pool.begin().await?;
    let mut team = db::teams::lock(&mut tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut team);
    db::teams::update(&mut *tx, &team).await?;
    tx.commit().await?;
    Ok(team)
}

/// Adds members to a team.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn add_members(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: TeamId,
    req: AddMembers,
) -> Result<Team> {
    let mut tx = ctx.pool.begin().await?;
    db::teams::lock(&mut tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    if req.user_ids.is_empty() {
        return Err(AppError::validation("userIds", "required", "at least one user id").into());
    }
    let user_ids = parley_types::ids::dedup(req.user_ids);
    refs::check_ids(
        &mut tx,
        RefTable::Users,
        caller.org_id,
        "userIds",
        &user_ids,
        MAX_MEMBERS_PER_CALL,
    )
    .await?;
    db::teams::add_members(&mut *tx, caller.org_id, id, &user_ids, &added_by(caller)).await?;
    let team = db::teams::get(&mut tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(team)
}

/// Deletes the organization's team; 404 when there is none.
pub async fn delete(ctx: Ctx<'_>, caller: &Caller, id: TeamId) -> Result<()> {
    changed(db::teams::delete(ctx.pool, caller.org_id, id).await?)
}

/// Takes a user off the organization's team; 404 when the user is not on it.
pub async fn remove_member(
    ctx: Ctx<'_>,
    caller: &Caller,
    team: TeamId,
    user: UserId,
) -> Result<()> {
    changed(db::teams::remove_member(ctx.pool, caller.org_id, team, user).await?)
}

/// A page of the organization's teams.
pub async fn list(
    ctx: Ctx<'_>,
    org: OrgId,
    f: &TeamFilter,
    page: &PageRequest,
) -> Result<Page<Team>> {
    Ok(db::teams::list(ctx.pool, org, f, page).await?)
}

/// The organization's team.
pub async fn read(ctx: Ctx<'_>, org: OrgId, id: TeamId) -> Result<Team> {
    found(db::teams::get(&mut *ctx.pool.acquire().await?, org, id).await?)
}

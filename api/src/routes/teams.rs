//! Teams and their members.

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::teams::{AddMembers, CreateTeam, Team, TeamFilter, UpdateTeam};
use parley_types::ids::{TeamId, UserId};
use parley_types::list::PageParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;
use parley_usecases::teams;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update, delete))
        .routes(routes!(add_members))
        .routes(routes!(remove_member))
}

/// Create a team, optionally with members.
#[utoipa::path(post, path = "/api/v1/teams", tag = "teams",
    request_body = CreateTeam,
    responses(
        (status = 201, description = "The new team", body = Envelope<Team>),
        (status = 409, description = "A team with this name exists", body = ErrorEnvelope),
    ))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateTeam>,
) -> AppResult<Reply<Team>> {
    Ok(Reply::created(
        teams::create(state.use_cases(), &tenant.caller(), req).await?,
    ))
}

/// List teams with their members.
#[utoipa::path(get, path = "/api/v1/teams", tag = "teams",
    params(PageParams, TeamFilter),
    responses((status = 200, description = "A page of teams", body = ListEnvelope<Team>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
    Query(filter): Query<TeamFilter>,
) -> AppResult<Reply<Vec<Team>>> {
    Ok(Reply::page(
        teams::list(state.use_cases(), tenant.org_id, &filter, &page).await?,
    ))
}

/// Get a team with members, `memberCount`, `conversationCount` and `creator`.
#[utoipa::path(get, path = "/api/v1/teams/{id}", tag = "teams",
    params(("id" = Uuid, Path, description = "Team id")),
    responses((status = 200, description = "The team", body = Envelope<Team>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TeamId>,
) -> AppResult<Reply<Team>> {
    Ok(Reply::ok(
        teams::read(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update a team.
#[utoipa::path(patch, path = "/api/v1/teams/{id}", tag = "teams",
    params(("id" = Uuid, Path, description = "Team id")),
    request_body = UpdateTeam,
    responses(
        (status = 200, description = "The updated team", body = Envelope<Team>),
        (status = 409, description = "A team with this name exists", body = ErrorEnvelope),
    ))]
async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TeamId>,
    Json(req): Json<UpdateTeam>,
) -> AppResult<Reply<Team>> {
    Ok(Reply::ok(
        teams::update(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Delete a team and its memberships.
#[utoipa::path(delete, path = "/api/v1/teams/{id}", tag = "teams",
    params(("id" = Uuid, Path, description = "Team id")),
    responses((status = 200, description = "The team is gone", body = Envelope<Deleted>)))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TeamId>,
) -> AppResult<Reply<Deleted>> {
    teams::delete(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

/// Add users to a team; users already in it stay as they are.
#[utoipa::path(post, path = "/api/v1/teams/{id}/members", tag = "teams",
    params(("id" = Uuid, Path, description = "Team id")),
    request_body = AddMembers,
    responses((status = 200, description = "The team with its members", body = Envelope<Team>)))]
async fn add_members(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TeamId>,
    Json(req): Json<AddMembers>,
) -> AppResult<Reply<Team>> {
    Ok(Reply::ok(
        teams::add_members(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Remove a user from a team.
#[utoipa::path(delete, path = "/api/v1/teams/{id}/members/{userId}", tag = "teams",
    params(
        ("id" = Uuid, Path, description = "Team id"),
        ("userId" = Uuid, Path, description = "User id of the member"),
    ),
    responses((status = 200, description = "The membership is gone; `id` is the user's", body = Envelope<Deleted>)))]
async fn remove_member(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((id, user_id)): Path<(TeamId, UserId)>,
) -> AppResult<Reply<Deleted>> {
    teams::remove_member(state.use_cases(), &tenant.caller(), id, user_id).await?;
    Ok(Reply::deleted(user_id.uuid()))
}

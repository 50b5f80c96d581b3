//! Workspace users (agents).

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::users::{CreateUser, UpdateUser, User, UserFilter};
use parley_types::ids::UserId;
use parley_types::list::PageParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;
use parley_usecases::users;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update, delete))
}

/// Create a workspace user.
#[utoipa::path(post, path = "/api/v1/users", tag = "users",
    request_body = CreateUser,
    responses(
        (status = 201, description = "The new user", body = Envelope<User>),
        (status = 409, description = "A user with this email exists", body = ErrorEnvelope),
    ))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateUser>,
) -> AppResult<Reply<User>> {
    Ok(Reply::created(
        users::create(state.use_cases(), &tenant.caller(), req).await?,
    ))
}

/// List users.
#[utoipa::path(get, path = "/api/v1/users", tag = "users",
    params(PageParams, UserFilter),
    responses((status = 200, description = "A page of users", body = ListEnvelope<User>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
    Query(filter): Query<UserFilter>,
) -> AppResult<Reply<Vec<User>>> {
    Ok(Reply::page(
        users::list(state.use_cases(), tenant.org_id, &filter, &page).await?,
    ))
}

/// Get a user.
#[utoipa::path(get, path = "/api/v1/users/{id}", tag = "users",
    params(("id" = Uuid, Path, description = "User id")),
    responses((status = 200, description = "The user", body = Envelope<User>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<UserId>,
) -> AppResult<Reply<User>> {
    Ok(Reply::ok(
        users::read(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update a user: only the fields sent change.
#[utoipa::path(patch, path = "/api/v1/users/{id}", tag = "users",
    params(("id" = Uuid, Path, description = "User id")),
    request_body = UpdateUser,
    responses(
        (status = 200, description = "The updated user", body = Envelope<User>),
        (status = 409, description = "Another user has this email", body = ErrorEnvelope),
    ))]
async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<UserId>,
    Json(req): Json<UpdateUser>,
) -> AppResult<Reply<User>> {
    Ok(Reply::ok(
        users::update(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Delete a user: unassigned from conversations and tickets and removed from teams; leads
/// assigned to the user keep no assignee.
#[utoipa::path(delete, path = "/api/v1/users/{id}", tag = "users",
    params(("id" = Uuid, Path, description = "User id")),
    responses((status = 200, description = "The user is gone", body = Envelope<Deleted>)))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<UserId>,
) -> AppResult<Reply<Deleted>> {
    users::delete(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

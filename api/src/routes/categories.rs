//! Conversation categories.

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::categories::{
    CategoryFilter, ConversationCategory, CreateCategory, UpdateCategory,
};
use parley_types::ids::CategoryId;
use parley_types::list::PageParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;
use parley_usecases::categories;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update, delete))
}

/// Create a conversation category; `slug` is derived from `name` when absent.
#[utoipa::path(post, path = "/api/v1/categories", tag = "categories",
    request_body = CreateCategory,
    responses(
        (status = 201, description = "The new category", body = Envelope<ConversationCategory>),
        (status = 409, description = "The given slug is taken", body = ErrorEnvelope),
    ))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateCategory>,
) -> AppResult<Reply<ConversationCategory>> {
    Ok(Reply::created(
        categories::create(state.use_cases(), &tenant.caller(), req).await?,
    ))
}

/// List conversation categories.
#[utoipa::path(get, path = "/api/v1/categories", tag = "categories",
    params(PageParams, CategoryFilter),
    responses((status = 200, description = "A page of categories", body = ListEnvelope<ConversationCategory>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
    Query(filter): Query<CategoryFilter>,
) -> AppResult<Reply<Vec<ConversationCategory>>> {
    Ok(Reply::page(
        categories::list(state.use_cases(), tenant.org_id, &filter, &page).await?,
    ))
}

/// Get a conversation category.
#[utoipa::path(get, path = "/api/v1/categories/{id}", tag = "categories",
    params(("id" = Uuid, Path, description = "Category id")),
    responses((status = 200, description = "The category", body = Envelope<ConversationCategory>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<CategoryId>,
) -> AppResult<Reply<ConversationCategory>> {
    Ok(Reply::ok(
        categories::read(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update a conversation category.
#[utoipa::path(patch, path = "/api/v1/categories/{id}", tag = "categories",
    params(("id" = Uuid, Path, description = "Category id")),
    request_body = UpdateCategory,
    responses(
        (status = 200, description = "The updated category", body = Envelope<ConversationCategory>),
        (status = 409, description = "The slug is taken", body = ErrorEnvelope),
    ))]
async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<CategoryId>,
    Json(req): Json<UpdateCategory>,
) -> AppResult<Reply<ConversationCategory>> {
    Ok(Reply::ok(
        categories::update(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Delete a conversation category.
#[utoipa::path(delete, path = "/api/v1/categories/{id}", tag = "categories",
    params(("id" = Uuid, Path, description = "Category id")),
    responses((status = 200, description = "The category is gone", body = Envelope<Deleted>)))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<CategoryId>,
) -> AppResult<Reply<Deleted>> {
    categories::delete(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

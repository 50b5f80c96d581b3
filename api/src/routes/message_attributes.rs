//! Message attributes.

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::message_attributes::{
    CreateMessageAttribute, MessageAttribute, MessageAttributeFilter, UpdateMessageAttribute,
};
use parley_types::ids::MessageAttributeId;
use parley_types::list::PageParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;
use parley_usecases::message_attributes;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update, delete))
}

/// Create a message attribute.
#[utoipa::path(post, path = "/api/v1/message-attributes", tag = "message-attributes",
    request_body = CreateMessageAttribute,
    responses(
        (status = 201, description = "The new attribute", body = Envelope<MessageAttribute>),
        (status = 409, description = "An attribute with this key exists", body = ErrorEnvelope),
    ))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateMessageAttribute>,
) -> AppResult<Reply<MessageAttribute>> {
    let attribute = message_attributes::create(state.use_cases(), &tenant.caller(), req).await?;
    Ok(Reply::created(attribute))
}

/// List message attributes.
#[utoipa::path(get, path = "/api/v1/message-attributes", tag = "message-attributes",
    params(PageParams, MessageAttributeFilter),
    responses((status = 200, description = "A page of attributes", body = ListEnvelope<MessageAttribute>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
    Query(filter): Query<MessageAttributeFilter>,
) -> AppResult<Reply<Vec<MessageAttribute>>> {
    Ok(Reply::page(
        message_attributes::list(state.use_cases(), tenant.org_id, &filter, &page).await?,
    ))
}

/// Get a message attribute.
#[utoipa::path(get, path = "/api/v1/message-attributes/{id}", tag = "message-attributes",
    params(("id" = Uuid, Path, description = "Message attribute id")),
    responses((status = 200, description = "The attribute", body = Envelope<MessageAttribute>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<MessageAttributeId>,
) -> AppResult<Reply<MessageAttribute>> {
    Ok(Reply::ok(
        message_attributes::read(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update a message attribute.
#[utoipa::path(patch, path = "/api/v1/message-attributes/{id}", tag = "message-attributes",
    params(("id" = Uuid, Path, description = "Message attribute id")),
    request_body = UpdateMessageAttribute,
    responses(
        (status = 200, description = "The updated attribute", body = Envelope<MessageAttribute>),
        (status = 409, description = "An attribute with this key exists", body = ErrorEnvelope),
    ))]
async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<MessageAttributeId>,
    Json(req): Json<UpdateMessageAttribute>,
) -> AppResult<Reply<MessageAttribute>> {
    Ok(Reply::ok(
        message_attributes::update(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Delete a message attribute.
#[utoipa::path(delete, path = "/api/v1/message-attributes/{id}", tag = "message-attributes",
    params(("id" = Uuid, Path, description = "Message attribute id")),
    responses((status = 200, description = "The attribute is gone", body = Envelope<Deleted>)))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<MessageAttributeId>,
) -> AppResult<Reply<Deleted>> {
    message_attributes::delete(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

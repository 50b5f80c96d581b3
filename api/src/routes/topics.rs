//! Subscription topics and a contact's preferences for them (docs/api.md, Topics).

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::topics::{CreateTopic, Subscriptions, Topic, UpdateSubscriptions, UpdateTopic};
use parley_types::ids::{ContactId, TopicId};
use parley_types::list::PageParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Tenant};
use crate::state::AppState;
use parley_usecases::topics;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update, delete))
        .routes(routes!(subscriptions, update_subscriptions))
}

/// Create a subscription topic (at most 100 an organization).
#[utoipa::path(post, path = "/api/v1/topics", tag = "topics",
    request_body = CreateTopic,
    responses(
        (status = 201, description = "The new topic", body = Envelope<Topic>),
        (status = 409, description = "The name is taken, or the organization has 100 topics", body = ErrorEnvelope),
    ))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateTopic>,
) -> AppResult<Reply<Topic>> {
    Ok(Reply::created(
        topics::create(state.use_cases(), &tenant.caller(), req).await?,
    ))
}

/// List the organization's subscription topics.
#[utoipa::path(get, path = "/api/v1/topics", tag = "topics",
    params(PageParams),
    responses((status = 200, description = "A page of topics", body = ListEnvelope<Topic>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
) -> AppResult<Reply<Vec<Topic>>> {
    Ok(Reply::page(
        topics::list(state.use_cases(), tenant.org_id, &page).await?,
    ))
}

/// Get a subscription topic.
#[utoipa::path(get, path = "/api/v1/topics/{id}", tag = "topics",
    params(("id" = Uuid, Path, description = "Topic id")),
    responses((status = 200, description = "The topic", body = Envelope<Topic>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TopicId>,
) -> AppResult<Reply<Topic>> {
    Ok(Reply::ok(
        topics::read(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Rename a subscription topic or change its description.
#[utoipa::path(patch, path = "/api/v1/topics/{id}", tag = "topics",
    params(("id" = Uuid, Path, description = "Topic id")),
    request_body = UpdateTopic,
    responses(
        (status = 200, description = "The updated topic", body = Envelope<Topic>),
        (status = 409, description = "The name is taken", body = ErrorEnvelope),
    ))]
async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TopicId>,
    Json(req): Json<UpdateTopic>,
) -> AppResult<Reply<Topic>> {
    Ok(Reply::ok(
        topics::update(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Delete a subscription topic, with its contacts' preferences; 409 while a broadcast names it.
#[utoipa::path(delete, path = "/api/v1/topics/{id}", tag = "topics",
    params(("id" = Uuid, Path, description = "Topic id")),
    responses(
        (status = 200, description = "The topic is gone", body = Envelope<Deleted>),
        (status = 409, description = "A broadcast names the topic", body = ErrorEnvelope),
    ))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TopicId>,
) -> AppResult<Reply<Deleted>> {
    topics::delete(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

/// A contact's subscriptions: its preference for every topic of the organization, and whether
/// the suppression ledger's `unsubscribed` entries hold its marketing on each channel.
#[utoipa::path(get, path = "/api/v1/contacts/{id}/subscriptions", tag = "topics",
    params(("id" = Uuid, Path, description = "Contact id")),
    responses((status = 200, description = "The contact's subscriptions", body = Envelope<Subscriptions>)))]
async fn subscriptions(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ContactId>,
) -> AppResult<Reply<Subscriptions>> {
    Ok(Reply::ok(
        topics::subscriptions(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Change a contact's preferences for the topics named (source `api`); the others stay.
#[utoipa::path(patch, path = "/api/v1/contacts/{id}/subscriptions", tag = "topics",
    params(("id" = Uuid, Path, description = "Contact id")),
    request_body = UpdateSubscriptions,
    responses((status = 200, description = "The contact's subscriptions", body = Envelope<Subscriptions>)))]
async fn update_subscriptions(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ContactId>,
    Json(req): Json<UpdateSubscriptions>,
) -> AppResult<Reply<Subscriptions>> {
    Ok(Reply::ok(
        topics::update_subscriptions(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

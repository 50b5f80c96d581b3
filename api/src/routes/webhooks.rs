//! Outbound webhooks and their management (scope `webhooks:manage`).

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::webhooks::{
    AttemptFilter, CreateWebhook, Delivery, EventInfo, EventName, RecoverWebhook, UpdateWebhook,
    Webhook, WebhookAttempt, WebhookRecovery, WebhookWithSecret,
};
use parley_types::ids::WebhookId;
use parley_types::list::PageParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;
use parley_usecases::webhooks;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(events))
        .routes(routes!(create, list))
        .routes(routes!(get, update, delete))
        .routes(routes!(rotate_secret))
        .routes(routes!(test))
        .routes(routes!(logs))
        .routes(routes!(redeliver))
        .routes(routes!(recover))
        .routes(routes!(recovery))
}

/// The events a webhook can subscribe to; this list is authoritative.
#[utoipa::path(get, path = "/api/v1/webhooks/events", tag = "webhooks",
    responses((status = 200, description = "Event names and what fires them", body = Envelope<Vec<EventInfo>>)))]
async fn events(_t: Tenant) -> AppResult<Reply<Vec<EventInfo>>> {
    Ok(Reply::ok(
        EventName::SUBSCRIBABLE
            .iter()
            .map(|(name, description)| EventInfo {
                name: *name,
                description,
            })
            .collect(),
    ))
}

/// Create a webhook. The signing `secret` is in this answer only.
#[utoipa::path(post, path = "/api/v1/webhooks", tag = "webhooks",
    request_body = CreateWebhook,
    responses((status = 201, description = "The webhook and its secret", body = Envelope<WebhookWithSecret>)))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateWebhook>,
) -> AppResult<Reply<WebhookWithSecret>> {
    let allow_private = state.config.webhooks.allow_private;
    Ok(Reply::created(
        webhooks::create(state.use_cases(), &tenant.caller(), req, allow_private).await?,
    ))
}

/// List webhooks (never their secrets).
#[utoipa::path(get, path = "/api/v1/webhooks", tag = "webhooks",
    params(PageParams),
    responses((status = 200, description = "A page of webhooks", body = ListEnvelope<Webhook>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
) -> AppResult<Reply<Vec<Webhook>>> {
    Ok(Reply::page(
        webhooks::list(state.use_cases(), tenant.org_id, &page).await?,
    ))
}

/// Get a webhook.
#[utoipa::path(get, path = "/api/v1/webhooks/{id}", tag = "webhooks",
    params(("id" = Uuid, Path, description = "Webhook id")),
    responses((status = 200, description = "The webhook", body = Envelope<Webhook>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<WebhookId>,
) -> AppResult<Reply<Webhook>> {
    Ok(Reply::ok(
        webhooks::read(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update a webhook; `isActive: true` enables a disabled one again.
#[utoipa::path(patch, path = "/api/v1/webhooks/{id}", tag = "webhooks",
    params(("id" = Uuid, Path, description = "Webhook id")),
    request_body = UpdateWebhook,
    responses((status = 200, description = "The updated webhook", body = Envelope<Webhook>)))]
async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<WebhookId>,
    Json(req): Json<UpdateWebhook>,
) -> AppResult<Reply<Webhook>> {
    Ok(Reply::ok(
        webhooks::update(
            state.use_cases(),
            &tenant.caller(),
            id,
            req,
            state.config.webhooks.allow_private,
        )
        .await?,
    ))
}

/// Delete a webhook with its deliveries and log.
#[utoipa::path(delete, path = "/api/v1/webhooks/{id}", tag = "webhooks",
    params(("id" = Uuid, Path, description = "Webhook id")),
    responses((status = 200, description = "The webhook is gone", body = Envelope<Deleted>)))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<WebhookId>,
) -> AppResult<Reply<Deleted>> {
    webhooks::delete(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

/// Replace the signing secret. For 24 hours deliveries carry signatures under both secrets.
#[utoipa::path(post, path = "/api/v1/webhooks/{id}/rotate-secret", tag = "webhooks",
    params(("id" = Uuid, Path, description = "Webhook id")),
    responses((status = 200, description = "The webhook and its new secret", body = Envelope<WebhookWithSecret>)))]
async fn rotate_secret(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<WebhookId>,
) -> AppResult<Reply<WebhookWithSecret>> {
    Ok(Reply::ok(
        webhooks::rotate_secret(state.use_cases(), &tenant.caller(), id).await?,
    ))
}

/// Send a signed `webhook.test` delivery to this webhook now.
#[utoipa::path(post, path = "/api/v1/webhooks/{id}/test", tag = "webhooks",
    params(("id" = Uuid, Path, description = "Webhook id")),
    responses(
        (status = 200, description = "The test delivery, due now", body = Envelope<Delivery>),
        (status = 409, description = "The webhook is disabled (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn test(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<WebhookId>,
) -> AppResult<Reply<Delivery>> {
    Ok(Reply::ok(
        webhooks::test(state.use_cases(), &tenant.caller(), id).await?,
    ))
}

/// The delivery history of a webhook: every attempt, newest first, with the
/// receiver's answer.
#[utoipa::path(get, path = "/api/v1/webhooks/{id}/logs", tag = "webhooks",
    params(("id" = Uuid, Path, description = "Webhook id"), PageParams, AttemptFilter),
    responses((status = 200, description = "A page of attempts", body = ListEnvelope<WebhookAttempt>)))]
async fn logs(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<WebhookId>,
    Paging(page): Paging,
    Query(filter): Query<AttemptFilter>,
) -> AppResult<Reply<Vec<WebhookAttempt>>> {
    Ok(Reply::page(
        webhooks::attempts(state.use_cases(), tenant.org_id, id, &filter, &page).await?,
    ))
}

/// Deliver a logged delivery again now, under the same delivery id; its attempts go on counting.
#[utoipa::path(post, path = "/api/v1/webhooks/{id}/deliveries/{deliveryId}/redeliver", tag = "webhooks",
    params(
        ("id" = Uuid, Path, description = "Webhook id"),
        ("deliveryId" = Uuid, Path, description = "Delivery id, as in the log and `X-Parley-Delivery`"),
    ),
    responses(
        (status = 200, description = "The delivery, due now", body = Envelope<Delivery>),
        (status = 409, description = "The webhook is disabled (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn redeliver(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((id, delivery)): Path<(WebhookId, Uuid)>,
) -> AppResult<Reply<Delivery>> {
    Ok(Reply::ok(
        webhooks::redeliver(state.use_cases(), &tenant.caller(), id, delivery).await?,
    ))
}

/// Queue again, in the background, every failed delivery of events between `since` and
/// `until` (now when left out): a batch at each relay pass, then attempted at the endpoint's
/// pace (its slots and `rateLimit`). Attempts go on counting; a delivery past its last attempt
/// gets one more.
#[utoipa::path(post, path = "/api/v1/webhooks/{id}/recover", tag = "webhooks",
    params(("id" = Uuid, Path, description = "Webhook id")),
    request_body = RecoverWebhook,
    responses(
        (status = 201, description = "The recovery, running", body = Envelope<WebhookRecovery>),
        (status = 409, description = "The webhook is disabled, or a recovery of it still runs (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn recover(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<WebhookId>,
    Json(req): Json<RecoverWebhook>,
) -> AppResult<Reply<WebhookRecovery>> {
    Ok(Reply::created(
        webhooks::recover(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// A recovery and how far it went.
#[utoipa::path(get, path = "/api/v1/webhooks/{id}/recoveries/{recoveryId}", tag = "webhooks",
    params(
        ("id" = Uuid, Path, description = "Webhook id"),
        ("recoveryId" = Uuid, Path, description = "Recovery id"),
    ),
    responses((status = 200, description = "The recovery", body = Envelope<WebhookRecovery>)))]
async fn recovery(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((id, recovery)): Path<(WebhookId, Uuid)>,
) -> AppResult<Reply<WebhookRecovery>> {
    Ok(Reply::ok(
        webhooks::read_recovery(state.use_cases(), tenant.org_id, id, recovery).await?,
    ))
}

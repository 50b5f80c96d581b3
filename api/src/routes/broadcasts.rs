//! Broadcasts with their actions and recipients. Sending is the worker's; the changes are
//! `parley_usecases::broadcasts`'.

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::ab_tests::{PickVariant, PickedBy};
use parley_domain::broadcasts::{
    Action, Broadcast, BroadcastFilter, BroadcastRecipient, CreateBroadcast, RecipientFilter,
    RetryFailed, UpdateBroadcast,
};
use parley_domain::preview::BroadcastPreview;
use parley_types::ids::BroadcastId;
use parley_types::list::PageParams;
use parley_usecases::broadcasts;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;

/// The routes whose bodies carry an audience (`contactIds`, up to 1,000,000 ids): create and
/// update, with the reads and delete of the same paths. They get the larger body limit.
pub fn audience_router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update, delete))
}

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(recipients))
        .routes(routes!(pause))
        .routes(routes!(resume))
        .routes(routes!(cancel))
        .routes(routes!(retry_failed))
        .routes(routes!(pick_variant))
        .routes(routes!(preview))
}

/// Preview a draft or scheduled broadcast: every contact of its audience decided by the
/// send's own rules (the ledger, its topic, do-not-contact, opt-out, the address, local time,
/// quiet hours, a paused organization) at now or its `scheduledAt` if later, and by the
/// frequency caps as they stand now; counted by the outcome the send would write, with up to
/// five contacts each and an A/B broadcast's split. Reads only. One preview of an organization
/// at a time (429 `rate_limited` otherwise).
#[utoipa::path(post, path = "/api/v1/broadcasts/{id}/preview", tag = "broadcasts",
    params(("id" = Uuid, Path, description = "Broadcast id")),
    responses(
        (status = 200, description = "What the send would do", body = Envelope<BroadcastPreview>),
        (status = 404, description = "No such broadcast in the organization", body = ErrorEnvelope),
        (status = 409, description = "Neither a draft nor scheduled (`invalid_state`)", body = ErrorEnvelope),
        (status = 429, description = "A preview of the organization is running (`rate_limited`)", body = ErrorEnvelope),
    ))]
async fn preview(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<BroadcastId>,
) -> AppResult<Reply<BroadcastPreview>> {
    let _permit = state.previews.take(tenant.org_id.uuid())?;
    Ok(Reply::ok(
        parley_usecases::preview::preview(state.use_cases(), &state.redis, tenant.org_id, id)
            .await?,
    ))
}

/// Create a broadcast: a draft, scheduled (future `scheduledAt`) or queued
/// (`sendNow`). `channel` and `templateChannel` come from the template.
#[utoipa::path(post, path = "/api/v1/broadcasts", tag = "broadcasts",
    request_body = CreateBroadcast,
    responses((status = 201, description = "The new broadcast", body = Envelope<Broadcast>)))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateBroadcast>,
) -> AppResult<Reply<Broadcast>> {
    Ok(Reply::created(
        broadcasts::create(state.use_cases(), &tenant.caller(), req).await?,
    ))
}

/// List broadcasts.
#[utoipa::path(get, path = "/api/v1/broadcasts", tag = "broadcasts",
    params(PageParams, BroadcastFilter),
    responses((status = 200, description = "A page of broadcasts", body = ListEnvelope<Broadcast>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
    Query(filter): Query<BroadcastFilter>,
) -> AppResult<Reply<Vec<Broadcast>>> {
    Ok(Reply::page(
        broadcasts::list(state.use_cases(), tenant.org_id, &filter, &page).await?,
    ))
}

/// Get a broadcast with its counters.
#[utoipa::path(get, path = "/api/v1/broadcasts/{id}", tag = "broadcasts",
    params(("id" = Uuid, Path, description = "Broadcast id")),
    responses((status = 200, description = "The broadcast", body = Envelope<Broadcast>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<BroadcastId>,
) -> AppResult<Reply<Broadcast>> {
    Ok(Reply::ok(
        broadcasts::read(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update a draft or scheduled broadcast. `sendNow: true` sends it, a future
/// `scheduledAt` schedules it, `isDraft: true` or `scheduledAt: null` makes it a draft again.
#[utoipa::path(patch, path = "/api/v1/broadcasts/{id}", tag = "broadcasts",
    params(("id" = Uuid, Path, description = "Broadcast id")),
    request_body = UpdateBroadcast,
    responses(
        (status = 200, description = "The updated broadcast", body = Envelope<Broadcast>),
        (status = 409, description = "The broadcast is past draft and scheduled (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<BroadcastId>,
    Json(req): Json<UpdateBroadcast>,
) -> AppResult<Reply<Broadcast>> {
    Ok(Reply::ok(
        broadcasts::update(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Delete a draft broadcast.
#[utoipa::path(delete, path = "/api/v1/broadcasts/{id}", tag = "broadcasts",
    params(("id" = Uuid, Path, description = "Broadcast id")),
    responses(
        (status = 200, description = "The broadcast is gone", body = Envelope<Deleted>),
        (status = 409, description = "Only drafts can be deleted (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<BroadcastId>,
) -> AppResult<Reply<Deleted>> {
    broadcasts::delete(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

/// List a broadcast's recipients, each with its contact.
#[utoipa::path(get, path = "/api/v1/broadcasts/{id}/recipients", tag = "broadcasts",
    params(("id" = Uuid, Path, description = "Broadcast id"), PageParams, RecipientFilter),
    responses((status = 200, description = "A page of recipients", body = ListEnvelope<BroadcastRecipient>)))]
async fn recipients(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<BroadcastId>,
    Paging(page): Paging,
    Query(filter): Query<RecipientFilter>,
) -> AppResult<Reply<Vec<BroadcastRecipient>>> {
    Ok(Reply::page(
        broadcasts::recipients(state.use_cases(), tenant.org_id, id, &filter, &page).await?,
    ))
}

/// Runs an action: checks the state under a row lock, then moves the broadcast.
async fn act(
    state: &AppState,
    tenant: &Tenant,
    id: BroadcastId,
    action: Action,
) -> AppResult<Reply<Broadcast>> {
    Ok(Reply::ok(
        broadcasts::act(state.use_cases(), &tenant.caller(), id, action).await?,
    ))
}

/// Pause a queued or sending broadcast: no new message goes out within a second.
#[utoipa::path(post, path = "/api/v1/broadcasts/{id}/pause", tag = "broadcasts",
    params(("id" = Uuid, Path, description = "Broadcast id")),
    responses(
        (status = 200, description = "The paused broadcast", body = Envelope<Broadcast>),
        (status = 409, description = "Only queued or sending broadcasts pause (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn pause(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<BroadcastId>,
) -> AppResult<Reply<Broadcast>> {
    act(&state, &tenant, id, Action::Pause).await
}

/// Resume a paused broadcast: exactly the recipients still `pending` are sent.
#[utoipa::path(post, path = "/api/v1/broadcasts/{id}/resume", tag = "broadcasts",
    params(("id" = Uuid, Path, description = "Broadcast id")),
    responses(
        (status = 200, description = "The resumed broadcast", body = Envelope<Broadcast>),
        (status = 409, description = "Only paused broadcasts resume (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn resume(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<BroadcastId>,
) -> AppResult<Reply<Broadcast>> {
    act(&state, &tenant, id, Action::Resume).await
}

/// Cancel a scheduled, queued, sending or paused broadcast; recipients not yet sent stay
/// `pending` and are never sent.
#[utoipa::path(post, path = "/api/v1/broadcasts/{id}/cancel", tag = "broadcasts",
    params(("id" = Uuid, Path, description = "Broadcast id")),
    responses(
        (status = 200, description = "The cancelled broadcast", body = Envelope<Broadcast>),
        (status = 409, description = "Drafts and ended broadcasts do not cancel (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn cancel(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<BroadcastId>,
) -> AppResult<Reply<Broadcast>> {
    act(&state, &tenant, id, Action::Cancel).await
}

/// Send again, once each, to the recipients whose send failed (optionally only those with
/// one of `errorCodes`): they go back to `pending`, the broadcast back to `sending`, and it
/// ends again when they are done. A recipient marked do-not-contact or opted out since is
/// skipped.
#[utoipa::path(post, path = "/api/v1/broadcasts/{id}/retry-failed", tag = "broadcasts",
    params(("id" = Uuid, Path, description = "Broadcast id")),
    request_body = RetryFailed,
    responses(
        (status = 200, description = "The broadcast, sending again", body = Envelope<Broadcast>),
        (status = 409, description = "Only completed or failed broadcasts retry, and only when a failed recipient matches (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn retry_failed(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<BroadcastId>,
    Json(req): Json<RetryFailed>,
) -> AppResult<Reply<Broadcast>> {
    let codes = req.codes()?;
    Ok(Reply::ok(
        broadcasts::retry_failed(state.use_cases(), &tenant.caller(), id, codes.as_deref()).await?,
    ))
}

/// Pick the winner of an A/B broadcast now, instead of waiting for its test to end: the rest
/// of the audience is sent this variant, and `broadcast.variant_picked` is emitted.
#[utoipa::path(post, path = "/api/v1/broadcasts/{id}/pick-variant", tag = "broadcasts",
    params(("id" = Uuid, Path, description = "Broadcast id")),
    request_body = PickVariant,
    responses(
        (status = 200, description = "The broadcast, sending the winner to the rest", body = Envelope<Broadcast>),
        (status = 409, description = "Not an A/B broadcast, its winner is picked already, or its test share is not written yet (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn pick_variant(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<BroadcastId>,
    Json(req): Json<PickVariant>,
) -> AppResult<Reply<Broadcast>> {
    Ok(Reply::ok(
        broadcasts::pick_variant(
            state.use_cases(),
            tenant.org_id,
            id,
            Some(req.variant.as_str()),
            PickedBy::Api,
        )
        .await?,
    ))
}

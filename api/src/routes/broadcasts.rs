//! Broadcasts (endpoints 2, 3 and 4) with their actions and recipients. Sending is the
//! worker's; the API writes the broadcast and enqueues its dispatch.

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::{AppError, AppResult};
use axum::extract::State;
use parley_db as db;
use parley_db::refs::{self, RefTable};
use parley_domain::broadcasts::{
    Action, Broadcast, BroadcastFilter, BroadcastRecipient, BroadcastStatus, CreateBroadcast,
    MAX_AUDIENCE, RecipientFilter, RetryFailed, UpdateBroadcast,
};
use parley_types::list::PageParams;
use parley_types::time::Timestamp;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

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
}

/// Hands a broadcast to the workers. Postgres already says it is queued, so if Redis is
/// unreachable now the worker's reconciler dispatches it later; the request still succeeds.
async fn dispatch(state: &AppState, id: Uuid, requeue: bool) {
    if let Err(err) = state.jobs.dispatch(id, requeue).await {
        tracing::warn!(broadcast_id = %id, %err, "dispatch not enqueued; the reconciler will");
    }
}

async fn read(state: &AppState, org: Uuid, id: Uuid) -> AppResult<Broadcast> {
    db::broadcasts::get(&state.pool, org, id)
        .await?
        .ok_or(AppError::NotFound.into())
}

async fn template(
    conn: &mut sqlx::PgConnection,
    org: Uuid,
    id: Uuid,
) -> AppResult<parley_domain::templates::Template> {
    db::templates::share(conn, org, id).await?.ok_or_else(|| {
        AppError::validation(
            "templateId",
            "not_found",
            format!("{id} is not a template of this organization"),
        )
        .into()
    })
}

/// Create a broadcast (endpoint 2): a draft, scheduled (future `scheduledAt`) or queued
/// (`sendNow`). `channel` and `templateChannel` come from the template.
#[utoipa::path(post, path = "/api/v1/broadcasts", tag = "broadcasts",
    request_body = CreateBroadcast,
    responses((status = 201, description = "The new broadcast", body = Envelope<Broadcast>)))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateBroadcast>,
) -> AppResult<Reply<Broadcast>> {
    let mut tx = state.pool.begin().await?;
    let template = template(&mut tx, tenant.org_id, req.template_id).await?;
    refs::check_ids(
        &mut tx,
        RefTable::Contacts,
        tenant.org_id,
        "contactIds",
        &req.contact_ids,
        MAX_AUDIENCE,
    )
    .await?;
    refs::check_id(
        &mut tx,
        RefTable::Segments,
        tenant.org_id,
        "segmentId",
        req.segment_id,
    )
    .await?;
    let (broadcast, audience) = req.into_broadcast(tenant.org_id, &template, Timestamp::now())?;
    db::broadcasts::insert(&mut *tx, &broadcast, &audience).await?;
    tx.commit().await?;
    if broadcast.status == BroadcastStatus::Queued {
        dispatch(&state, broadcast.id, false).await;
    }
    Ok(Reply::created(
        read(&state, tenant.org_id, broadcast.id).await?,
    ))
}

/// List broadcasts (endpoint 4).
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
        db::broadcasts::list(&state.pool, tenant.org_id, &filter, &page).await?,
    ))
}

/// Get a broadcast with its counters.
#[utoipa::path(get, path = "/api/v1/broadcasts/{id}", tag = "broadcasts",
    params(("id" = Uuid, Path, description = "Broadcast id")),
    responses((status = 200, description = "The broadcast", body = Envelope<Broadcast>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<Uuid>,
) -> AppResult<Reply<Broadcast>> {
    Ok(Reply::ok(read(&state, tenant.org_id, id).await?))
}

/// Update a draft or scheduled broadcast (endpoint 3). `sendNow: true` sends it, a future
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
    Path(id): Path<Uuid>,
    Json(req): Json<UpdateBroadcast>,
) -> AppResult<Reply<Broadcast>> {
    let mut tx = state.pool.begin().await?;
    let mut broadcast = db::broadcasts::lock(&mut tx, tenant.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    if !Action::Update.allowed_from().contains(&broadcast.status) {
        return Err(Action::Update.refused(broadcast.status).into());
    }
    if let Some(ids) = &req.contact_ids {
        refs::check_ids(
            &mut tx,
            RefTable::Contacts,
            tenant.org_id,
            "contactIds",
            ids,
            MAX_AUDIENCE,
        )
        .await?;
    }
    refs::check_id(
        &mut tx,
        RefTable::Segments,
        tenant.org_id,
        "segmentId",
        req.segment_id,
    )
    .await?;
    let template = template(&mut tx, tenant.org_id, broadcast.template_id).await?;
    let audience = req.apply(&mut broadcast, &template, Timestamp::now())?;
    db::broadcasts::update(&mut *tx, &broadcast, audience.as_deref()).await?;
    tx.commit().await?;
    if broadcast.status == BroadcastStatus::Queued {
        dispatch(&state, id, false).await;
    }
    Ok(Reply::ok(read(&state, tenant.org_id, id).await?))
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
    Path(id): Path<Uuid>,
) -> AppResult<Reply<Deleted>> {
    let mut tx = state.pool.begin().await?;
    let broadcast = db::broadcasts::lock(&mut tx, tenant.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    if !Action::Delete.allowed_from().contains(&broadcast.status) {
        return Err(Action::Delete.refused(broadcast.status).into());
    }
    db::broadcasts::delete(&mut *tx, tenant.org_id, id).await?;
    tx.commit().await?;
    Ok(Reply::deleted(id))
}

/// List a broadcast's recipients, each with its contact.
#[utoipa::path(get, path = "/api/v1/broadcasts/{id}/recipients", tag = "broadcasts",
    params(("id" = Uuid, Path, description = "Broadcast id"), PageParams, RecipientFilter),
    responses((status = 200, description = "A page of recipients", body = ListEnvelope<BroadcastRecipient>)))]
async fn recipients(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<Uuid>,
    Paging(page): Paging,
    Query(filter): Query<RecipientFilter>,
) -> AppResult<Reply<Vec<BroadcastRecipient>>> {
    read(&state, tenant.org_id, id).await?;
    Ok(Reply::page(
        db::broadcasts::recipients(&state.pool, tenant.org_id, id, &filter, &page).await?,
    ))
}

/// Runs an action: checks the state under a row lock, then moves the broadcast.
async fn act(
    state: &AppState,
    tenant: &Tenant,
    id: Uuid,
    action: Action,
) -> AppResult<Reply<Broadcast>> {
    let mut tx = state.pool.begin().await?;
    let broadcast = db::broadcasts::lock(&mut tx, tenant.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    if !action.allowed_from().contains(&broadcast.status) {
        return Err(action.refused(broadcast.status).into());
    }
    let to = match action {
        Action::Pause => BroadcastStatus::Paused,
        Action::Cancel => BroadcastStatus::Cancelled,
        // A broadcast paused before its dispatch started goes back to the queue.
        Action::Resume if broadcast.started_at.is_some() => BroadcastStatus::Sending,
        Action::Resume => BroadcastStatus::Queued,
        Action::Update | Action::Delete | Action::RetryFailed => {
            return Err(action.refused(broadcast.status).into());
        }
    };
    db::broadcasts::set_status(&mut *tx, tenant.org_id, id, to).await?;
    tx.commit().await?;
    if action == Action::Resume {
        dispatch(state, id, true).await;
    }
    Ok(Reply::ok(read(state, tenant.org_id, id).await?))
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
    Path(id): Path<Uuid>,
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
    Path(id): Path<Uuid>,
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
    Path(id): Path<Uuid>,
) -> AppResult<Reply<Broadcast>> {
    act(&state, &tenant, id, Action::Cancel).await
}

/// Send again, once each, to the recipients whose delivery failed (optionally only those with
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
    Path(id): Path<Uuid>,
    Json(req): Json<RetryFailed>,
) -> AppResult<Reply<Broadcast>> {
    let codes = req.codes()?;
    let mut tx = state.pool.begin().await?;
    let broadcast = db::broadcasts::lock(&mut tx, tenant.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    if !Action::RetryFailed
        .allowed_from()
        .contains(&broadcast.status)
    {
        return Err(Action::RetryFailed.refused(broadcast.status).into());
    }
    let retried = db::broadcasts::retry_failed(&mut tx, id, codes.as_deref()).await?;
    if retried == 0 {
        return Err(
            AppError::invalid_state("no failed recipient of this broadcast matches").into(),
        );
    }
    tx.commit().await?;
    tracing::info!(broadcast_id = %id, retried, "failed recipients sent again");
    dispatch(&state, id, true).await;
    Ok(Reply::ok(read(&state, tenant.org_id, id).await?))
}

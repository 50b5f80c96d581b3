//! Segments: saved contact filters a broadcast may name as its audience (scope `contacts:*`).

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::segments::{CreateSegment, Segment, SegmentCount, UpdateSegment};
use parley_types::ids::SegmentId;
use parley_types::list::PageParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Tenant};
use crate::state::AppState;
use parley_usecases::segments;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update, delete))
        .routes(routes!(count))
}

/// Create a segment.
#[utoipa::path(post, path = "/api/v1/segments", tag = "segments",
    request_body = CreateSegment,
    responses(
        (status = 201, description = "The new segment", body = Envelope<Segment>),
        (status = 409, description = "A segment with this name exists", body = ErrorEnvelope),
    ))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateSegment>,
) -> AppResult<Reply<Segment>> {
    Ok(Reply::created(
        segments::create(state.use_cases(), &tenant.caller(), req).await?,
    ))
}

/// List segments.
#[utoipa::path(get, path = "/api/v1/segments", tag = "segments",
    params(PageParams),
    responses((status = 200, description = "A page of segments", body = ListEnvelope<Segment>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
) -> AppResult<Reply<Vec<Segment>>> {
    Ok(Reply::page(
        segments::list(state.use_cases(), tenant.org_id, &page).await?,
    ))
}

/// Get a segment.
#[utoipa::path(get, path = "/api/v1/segments/{id}", tag = "segments",
    params(("id" = Uuid, Path, description = "Segment id")),
    responses((status = 200, description = "The segment", body = Envelope<Segment>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<SegmentId>,
) -> AppResult<Reply<Segment>> {
    Ok(Reply::ok(
        segments::read(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update a segment: `name`, or `filter` (replaced whole). A broadcast that names it and has
/// not started sending sends to the new filter.
#[utoipa::path(patch, path = "/api/v1/segments/{id}", tag = "segments",
    params(("id" = Uuid, Path, description = "Segment id")),
    request_body = UpdateSegment,
    responses(
        (status = 200, description = "The updated segment", body = Envelope<Segment>),
        (status = 409, description = "Another segment has this name", body = ErrorEnvelope),
    ))]
async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<SegmentId>,
    Json(req): Json<UpdateSegment>,
) -> AppResult<Reply<Segment>> {
    Ok(Reply::ok(
        segments::update(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Delete a segment that no broadcast names (else 409 `conflict`).
#[utoipa::path(delete, path = "/api/v1/segments/{id}", tag = "segments",
    params(("id" = Uuid, Path, description = "Segment id")),
    responses(
        (status = 200, description = "The segment is gone", body = Envelope<Deleted>),
        (status = 409, description = "A broadcast names the segment (`conflict`)", body = ErrorEnvelope),
    ))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<SegmentId>,
) -> AppResult<Reply<Deleted>> {
    segments::delete(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

/// How many contacts the segment holds now, and how many of them a broadcast would skip.
#[utoipa::path(get, path = "/api/v1/segments/{id}/count", tag = "segments",
    params(("id" = Uuid, Path, description = "Segment id")),
    responses((status = 200, description = "The counts (exact up to 10,000: `totalExact`)", body = Envelope<SegmentCount>),
        (status = 429, description = "The organization runs as many counts as it may at once", body = ErrorEnvelope)))]
async fn count(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<SegmentId>,
) -> AppResult<Reply<SegmentCount>> {
    let segment = segments::read(state.use_cases(), tenant.org_id, id).await?;
    // Held while counting: an organization's parallel counts past its permits are refused.
    let _permit = state.counts.take(tenant.org_id.uuid())?;
    Ok(Reply::ok(
        segments::count(state.use_cases(), tenant.org_id, &segment).await?,
    ))
}

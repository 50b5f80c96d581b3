//! Leads, and the operations beside them.

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::contacts::Contact;
use parley_domain::leads::{CreateLead, Lead, LeadFilter, UpdateLead};
use parley_types::ids::LeadId;
use parley_types::list::PageParams;
use parley_usecases::leads;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update, delete))
        .routes(routes!(convert))
}

/// Create a lead; one of `name`, `email`, `phone` is required.
#[utoipa::path(post, path = "/api/v1/leads", tag = "leads",
    request_body = CreateLead,
    responses((status = 201, description = "The new lead, with `assignee` embedded", body = Envelope<Lead>)))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateLead>,
) -> AppResult<Reply<Lead>> {
    Ok(Reply::created(
        leads::create(state.use_cases(), &tenant.caller(), req).await?,
    ))
}

/// List leads.
#[utoipa::path(get, path = "/api/v1/leads", tag = "leads",
    params(PageParams, LeadFilter),
    responses((status = 200, description = "A page of leads", body = ListEnvelope<Lead>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
    Query(filter): Query<LeadFilter>,
) -> AppResult<Reply<Vec<Lead>>> {
    Ok(Reply::page(
        leads::list(state.use_cases(), tenant.org_id, &filter, &page).await?,
    ))
}

/// Get a lead.
#[utoipa::path(get, path = "/api/v1/leads/{id}", tag = "leads",
    params(("id" = Uuid, Path, description = "Lead id")),
    responses((status = 200, description = "The lead", body = Envelope<Lead>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<LeadId>,
) -> AppResult<Reply<Lead>> {
    Ok(Reply::ok(
        leads::read(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update a lead. `status` cannot become `converted` here (use convert), nor leave it.
#[utoipa::path(patch, path = "/api/v1/leads/{id}", tag = "leads",
    params(("id" = Uuid, Path, description = "Lead id")),
    request_body = UpdateLead,
    responses(
        (status = 200, description = "The updated lead", body = Envelope<Lead>),
        (status = 409, description = "The lead is converted and keeps its status", body = ErrorEnvelope),
    ))]
async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<LeadId>,
    Json(req): Json<UpdateLead>,
) -> AppResult<Reply<Lead>> {
    Ok(Reply::ok(
        leads::update(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Convert a lead into a contact: links the contact with the lead's email or
/// phone, or creates one; the lead becomes `converted`. Converting twice is 409.
#[utoipa::path(post, path = "/api/v1/leads/{id}/convert", tag = "leads",
    params(("id" = Uuid, Path, description = "Lead id")),
    responses(
        (status = 200, description = "The contact the lead became", body = Envelope<Contact>),
        (status = 409, description = "The lead is already converted (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn convert(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<LeadId>,
) -> AppResult<Reply<Contact>> {
    Ok(Reply::ok(
        leads::convert(state.use_cases(), &tenant.caller(), id).await?,
    ))
}

/// Delete a lead with its tags. A converted lead's contact stays.
#[utoipa::path(delete, path = "/api/v1/leads/{id}", tag = "leads",
    params(("id" = Uuid, Path, description = "Lead id")),
    responses((status = 200, description = "The lead is gone", body = Envelope<Deleted>)))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<LeadId>,
) -> AppResult<Reply<Deleted>> {
    leads::delete(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

//! SLA policies, SLA statistics, and the organization's business hours the
//! policies may count in.

use crate::envelope::{Deleted, Envelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::orgs::{Organization, UpdateOrganization};
use parley_domain::sla::{
    CreateSlaPolicy, SlaPolicy, SlaPolicyFilter, SlaStats, SlaStatsQuery, UpdateSlaPolicy,
};
use parley_types::ids::SlaPolicyId;
use parley_types::list::PageParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;
use parley_usecases::sla;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update, delete))
        .routes(routes!(statistics))
        .routes(routes!(organization, update_organization))
}

/// Create an SLA policy. It applies to conversations and tickets created afterwards whose
/// priority and channel it matches, when no more specific active policy does.
#[utoipa::path(post, path = "/api/v1/sla-policies", tag = "sla",
    request_body = CreateSlaPolicy,
    responses((status = 201, description = "The new policy", body = Envelope<SlaPolicy>)))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateSlaPolicy>,
) -> AppResult<Reply<SlaPolicy>> {
    let policy = sla::create_policy(state.use_cases(), &tenant.caller(), req).await?;
    Ok(Reply::created(policy))
}

/// List SLA policies.
#[utoipa::path(get, path = "/api/v1/sla-policies", tag = "sla",
    params(PageParams, SlaPolicyFilter),
    responses((status = 200, description = "A page of policies", body = ListEnvelope<SlaPolicy>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
    Query(filter): Query<SlaPolicyFilter>,
) -> AppResult<Reply<Vec<SlaPolicy>>> {
    Ok(Reply::page(
        sla::list_policies(state.use_cases(), tenant.org_id, &filter, &page).await?,
    ))
}

/// Get an SLA policy.
#[utoipa::path(get, path = "/api/v1/sla-policies/{id}", tag = "sla",
    params(("id" = Uuid, Path, description = "Policy id")),
    responses((status = 200, description = "The policy", body = Envelope<SlaPolicy>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<SlaPolicyId>,
) -> AppResult<Reply<SlaPolicy>> {
    Ok(Reply::ok(
        sla::read_policy(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update an SLA policy. Running clocks keep the targets they started with.
#[utoipa::path(patch, path = "/api/v1/sla-policies/{id}", tag = "sla",
    params(("id" = Uuid, Path, description = "Policy id")),
    request_body = UpdateSlaPolicy,
    responses((status = 200, description = "The updated policy", body = Envelope<SlaPolicy>)))]
async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<SlaPolicyId>,
    Json(req): Json<UpdateSlaPolicy>,
) -> AppResult<Reply<SlaPolicy>> {
    Ok(Reply::ok(
        sla::update(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Delete an SLA policy. Running clocks go on (their `slaPolicyId` becomes `null`).
#[utoipa::path(delete, path = "/api/v1/sla-policies/{id}", tag = "sla",
    params(("id" = Uuid, Path, description = "Policy id")),
    responses((status = 200, description = "The policy is gone", body = Envelope<Deleted>)))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<SlaPolicyId>,
) -> AppResult<Reply<Deleted>> {
    sla::delete_policy(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

/// SLA compliance of the conversations and tickets whose SLA started in `[from, to)`:
/// overall, per target and per priority.
#[utoipa::path(get, path = "/api/v1/statistics/sla", tag = "sla",
    params(SlaStatsQuery),
    responses((status = 200, description = "The figures", body = Envelope<SlaStats>)))]
async fn statistics(
    State(state): State<AppState>,
    tenant: Tenant,
    Query(q): Query<SlaStatsQuery>,
) -> AppResult<Reply<SlaStats>> {
    Ok(Reply::ok(
        sla::stats(state.use_cases(), tenant.org_id, q.from, q.to).await?,
    ))
}

/// The key's organization, with its business hours (`workingHours`).
#[utoipa::path(get, path = "/api/v1/organization", tag = "sla",
    responses((status = 200, description = "The organization", body = Envelope<Organization>)))]
async fn organization(
    State(state): State<AppState>,
    tenant: Tenant,
) -> AppResult<Reply<Organization>> {
    // Kept in memory like the keys (`crate::key_cache`): a change is notified to every process.
    let now = std::time::Instant::now();
    if let Some(org) = state.keys.organization(tenant.org_id.uuid(), now) {
        return Ok(Reply::ok(org));
    }
    let generation = state.keys.organization_generation();
    let org = parley_usecases::orgs::read(state.use_cases(), tenant.org_id).await?;
    state.keys.put_organization(org.clone(), generation, now);
    Ok(Reply::ok(org))
}

/// Rename the organization or set its business hours.
#[utoipa::path(patch, path = "/api/v1/organization", tag = "sla",
    request_body = UpdateOrganization,
    responses((status = 200, description = "The organization", body = Envelope<Organization>)))]
async fn update_organization(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<UpdateOrganization>,
) -> AppResult<Reply<Organization>> {
    let org = sla::update_organization(state.use_cases(), &tenant.caller(), req).await?;
    // Committed: this process's next read is fresh without waiting for the notification.
    state.keys.forget_organization(tenant.org_id.uuid());
    Ok(Reply::ok(org))
}

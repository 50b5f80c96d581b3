//! Templates, their duplication and analytics.

use crate::envelope::{Deleted, Envelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::analytics::TemplateAnalytics;
use parley_domain::templates::{
    ChannelParam, CreateTemplate, Template, TemplateFilter, UpdateTemplate,
};
use parley_types::ids::TemplateId;
use parley_types::list::PageParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;
use parley_usecases::templates;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update, delete))
        .routes(routes!(duplicate))
        .routes(routes!(analytics))
}

/// Create a template.
#[utoipa::path(post, path = "/api/v1/templates", tag = "templates",
    request_body = CreateTemplate,
    responses((status = 201, description = "The new template", body = Envelope<Template>)))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateTemplate>,
) -> AppResult<Reply<Template>> {
    let template = templates::create(state.use_cases(), &tenant.caller(), req).await?;
    Ok(Reply::created(template))
}

/// List templates.
#[utoipa::path(get, path = "/api/v1/templates", tag = "templates",
    params(PageParams, TemplateFilter),
    responses((status = 200, description = "A page of templates", body = ListEnvelope<Template>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
    Query(filter): Query<TemplateFilter>,
) -> AppResult<Reply<Vec<Template>>> {
    Ok(Reply::page(
        templates::list(state.use_cases(), tenant.org_id, &filter, &page).await?,
    ))
}

/// Get a template.
#[utoipa::path(get, path = "/api/v1/templates/{id}", tag = "templates",
    params(("id" = Uuid, Path, description = "Template id")),
    responses((status = 200, description = "The template", body = Envelope<Template>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TemplateId>,
) -> AppResult<Reply<Template>> {
    Ok(Reply::ok(
        templates::read(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update a template.
#[utoipa::path(patch, path = "/api/v1/templates/{id}", tag = "templates",
    params(("id" = Uuid, Path, description = "Template id")),
    request_body = UpdateTemplate,
    responses((status = 200, description = "The updated template", body = Envelope<Template>)))]
async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TemplateId>,
    Json(req): Json<UpdateTemplate>,
) -> AppResult<Reply<Template>> {
    Ok(Reply::ok(
        templates::update(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Delete a template.
#[utoipa::path(delete, path = "/api/v1/templates/{id}", tag = "templates",
    params(("id" = Uuid, Path, description = "Template id")),
    responses((status = 200, description = "The template is gone", body = Envelope<Deleted>)))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TemplateId>,
) -> AppResult<Reply<Deleted>> {
    templates::delete(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

/// Copy a template: a new `draft` named `<name> (Copy)`, on `?channel=` if given.
#[utoipa::path(post, path = "/api/v1/templates/{id}/duplicate", tag = "templates",
    params(("id" = Uuid, Path, description = "Template id"), ChannelParam),
    responses((status = 201, description = "The copy", body = Envelope<Template>)))]
async fn duplicate(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TemplateId>,
    Query(param): Query<ChannelParam>,
) -> AppResult<Reply<Template>> {
    Ok(Reply::created(
        templates::duplicate(state.use_cases(), &tenant.caller(), id, param.channel).await?,
    ))
}

/// Analytics of a template, from its broadcasts; `?channel=` narrows to
/// broadcasts on that channel.
#[utoipa::path(get, path = "/api/v1/templates/{id}/analytics", tag = "templates",
    params(("id" = Uuid, Path, description = "Template id"), ChannelParam),
    responses((status = 200, description = "The template's figures", body = Envelope<TemplateAnalytics>)))]
async fn analytics(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TemplateId>,
    Query(param): Query<ChannelParam>,
) -> AppResult<Reply<TemplateAnalytics>> {
    Ok(Reply::ok(
        templates::analytics(state.use_cases(), tenant.org_id, id, param.channel).await?,
    ))
}

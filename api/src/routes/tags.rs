//! Tags and companies, which contacts and leads refer to (scope `contacts:*`).

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::tags::{Company, CreateCompany, CreateTag, Tag, UpdateCompany, UpdateTag};
use parley_types::ids::{CompanyId, TagId};
use parley_types::list::PageParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Tenant};
use crate::state::AppState;
use parley_usecases::tags;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_tag, list_tags))
        .routes(routes!(get_tag, update_tag, delete_tag))
        .routes(routes!(create_company, list_companies))
        .routes(routes!(get_company, update_company, delete_company))
}

/// Create a tag.
#[utoipa::path(post, path = "/api/v1/tags", tag = "tags",
    request_body = CreateTag,
    responses(
        (status = 201, description = "The new tag", body = Envelope<Tag>),
        (status = 409, description = "A tag with this name exists", body = ErrorEnvelope),
    ))]
async fn create_tag(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateTag>,
) -> AppResult<Reply<Tag>> {
    let tag = tags::create_tag(state.use_cases(), &tenant.caller(), req).await?;
    Ok(Reply::created(tag))
}

/// List tags.
#[utoipa::path(get, path = "/api/v1/tags", tag = "tags",
    params(PageParams),
    responses((status = 200, description = "A page of tags", body = ListEnvelope<Tag>)))]
async fn list_tags(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
) -> AppResult<Reply<Vec<Tag>>> {
    Ok(Reply::page(
        tags::list_tags(state.use_cases(), tenant.org_id, &page).await?,
    ))
}

/// Create a company.
#[utoipa::path(post, path = "/api/v1/companies", tag = "companies",
    request_body = CreateCompany,
    responses(
        (status = 201, description = "The new company", body = Envelope<Company>),
        (status = 409, description = "A company with this name exists", body = ErrorEnvelope),
    ))]
async fn create_company(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateCompany>,
) -> AppResult<Reply<Company>> {
    let company = tags::create_company(state.use_cases(), &tenant.caller(), req).await?;
    Ok(Reply::created(company))
}

/// List companies.
#[utoipa::path(get, path = "/api/v1/companies", tag = "companies",
    params(PageParams),
    responses((status = 200, description = "A page of companies", body = ListEnvelope<Company>)))]
async fn list_companies(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
) -> AppResult<Reply<Vec<Company>>> {
    Ok(Reply::page(
        tags::list_companies(state.use_cases(), tenant.org_id, &page).await?,
    ))
}

/// Get a tag.
#[utoipa::path(get, path = "/api/v1/tags/{id}", tag = "tags",
    params(("id" = Uuid, Path, description = "Tag id")),
    responses((status = 200, description = "The tag", body = Envelope<Tag>)))]
async fn get_tag(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TagId>,
) -> AppResult<Reply<Tag>> {
    Ok(Reply::ok(
        tags::read_tag(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update a tag: only the fields sent change.
#[utoipa::path(patch, path = "/api/v1/tags/{id}", tag = "tags",
    params(("id" = Uuid, Path, description = "Tag id")),
    request_body = UpdateTag,
    responses(
        (status = 200, description = "The updated tag", body = Envelope<Tag>),
        (status = 409, description = "Another tag has this name", body = ErrorEnvelope),
    ))]
async fn update_tag(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TagId>,
    Json(req): Json<UpdateTag>,
) -> AppResult<Reply<Tag>> {
    Ok(Reply::ok(
        tags::update_tag(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Delete a tag. The contacts, leads, conversations and tickets that had it stay, without it.
#[utoipa::path(delete, path = "/api/v1/tags/{id}", tag = "tags",
    params(("id" = Uuid, Path, description = "Tag id")),
    responses((status = 200, description = "The tag is gone", body = Envelope<Deleted>)))]
async fn delete_tag(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TagId>,
) -> AppResult<Reply<Deleted>> {
    tags::delete_tag(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

/// Get a company.
#[utoipa::path(get, path = "/api/v1/companies/{id}", tag = "companies",
    params(("id" = Uuid, Path, description = "Company id")),
    responses((status = 200, description = "The company", body = Envelope<Company>)))]
async fn get_company(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<CompanyId>,
) -> AppResult<Reply<Company>> {
    Ok(Reply::ok(
        tags::read_company(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update a company: only the fields sent change.
#[utoipa::path(patch, path = "/api/v1/companies/{id}", tag = "companies",
    params(("id" = Uuid, Path, description = "Company id")),
    request_body = UpdateCompany,
    responses(
        (status = 200, description = "The updated company", body = Envelope<Company>),
        (status = 409, description = "Another company has this name", body = ErrorEnvelope),
    ))]
async fn update_company(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<CompanyId>,
    Json(req): Json<UpdateCompany>,
) -> AppResult<Reply<Company>> {
    Ok(Reply::ok(
        tags::update_company(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Delete a company. Its contacts stay, without a company.
#[utoipa::path(delete, path = "/api/v1/companies/{id}", tag = "companies",
    params(("id" = Uuid, Path, description = "Company id")),
    responses((status = 200, description = "The company is gone", body = Envelope<Deleted>)))]
async fn delete_company(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<CompanyId>,
) -> AppResult<Reply<Deleted>> {
    tags::delete_company(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

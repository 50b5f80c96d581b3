//! Tags and companies, which contacts and leads refer to (scope `contacts:*`).

use crate::envelope::{Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_db as db;
use parley_domain::tags::{Company, CreateCompany, CreateTag, Tag};
use parley_types::list::PageParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Tenant};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_tag, list_tags))
        .routes(routes!(create_company, list_companies))
}

/// Create a tag.
#[utoipa::path(post, path = "/api/v1/tags", tag = "tags",
    request_body = CreateTag,
    responses(
        (status = 201, description = "The new tag", body = Envelope<Tag>),
        (status = 409, description = "A tag with this name exists", body = ErrorEnvelope),
    ))]
async fn create_tag(
    State(s): State<AppState>,
    t: Tenant,
    Json(req): Json<CreateTag>,
) -> AppResult<Reply<Tag>> {
    let tag = req.into_tag(t.org_id);
    db::tags::insert_tag(&s.pool, &tag).await?;
    Ok(Reply::created(tag))
}

/// List tags.
#[utoipa::path(get, path = "/api/v1/tags", tag = "tags",
    params(PageParams),
    responses((status = 200, description = "A page of tags", body = ListEnvelope<Tag>)))]
async fn list_tags(
    State(s): State<AppState>,
    t: Tenant,
    Paging(page): Paging,
) -> AppResult<Reply<Vec<Tag>>> {
    Ok(Reply::page(
        db::tags::list_tags(&s.pool, t.org_id, &page).await?,
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
    State(s): State<AppState>,
    t: Tenant,
    Json(req): Json<CreateCompany>,
) -> AppResult<Reply<Company>> {
    let company = req.into_company(t.org_id);
    db::tags::insert_company(&s.pool, &company).await?;
    Ok(Reply::created(company))
}

/// List companies.
#[utoipa::path(get, path = "/api/v1/companies", tag = "companies",
    params(PageParams),
    responses((status = 200, description = "A page of companies", body = ListEnvelope<Company>)))]
async fn list_companies(
    State(s): State<AppState>,
    t: Tenant,
    Paging(page): Paging,
) -> AppResult<Reply<Vec<Company>>> {
    Ok(Reply::page(
        db::tags::list_companies(&s.pool, t.org_id, &page).await?,
    ))
}

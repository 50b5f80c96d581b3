//! FAQ collections, with the FAQ categories and FAQ
//! entries inside a collection.

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::faq::{
    CreateFaq, CreateFaqCategory, CreateFaqCollection, Faq, FaqCategory, FaqCollection,
    FaqCollectionFilter, FaqFilter, UpdateFaq, UpdateFaqCategory, UpdateFaqCollection,
};
use parley_types::ids::{FaqCategoryId, FaqCollectionId, FaqId};
use parley_types::list::PageParams;
use parley_usecases::faq;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_collection, list_collections))
        .routes(routes!(
            get_collection,
            update_collection,
            delete_collection
        ))
        .routes(routes!(create_category, list_categories))
        .routes(routes!(update_category, delete_category))
        .routes(routes!(create_faq, list_faqs))
        .routes(routes!(get_faq, update_faq, delete_faq))
}

/// Create an FAQ collection; `slug` is derived from `name` when absent.
#[utoipa::path(post, path = "/api/v1/faq-collections", tag = "faq",
    request_body = CreateFaqCollection,
    responses(
        (status = 201, description = "The new collection", body = Envelope<FaqCollection>),
        (status = 409, description = "The given slug is taken in this locale", body = ErrorEnvelope),
    ))]
async fn create_collection(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateFaqCollection>,
) -> AppResult<Reply<FaqCollection>> {
    Ok(Reply::created(
        faq::create_collection(state.use_cases(), &tenant.caller(), req).await?,
    ))
}

/// List FAQ collections with `faqCount` and `totalReadTime`.
#[utoipa::path(get, path = "/api/v1/faq-collections", tag = "faq",
    params(PageParams, FaqCollectionFilter),
    responses((status = 200, description = "A page of collections", body = ListEnvelope<FaqCollection>)))]
async fn list_collections(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
    Query(filter): Query<FaqCollectionFilter>,
) -> AppResult<Reply<Vec<FaqCollection>>> {
    Ok(Reply::page(
        faq::list_collections(state.use_cases(), tenant.org_id, &filter, &page).await?,
    ))
}

/// Get an FAQ collection with its FAQs.
#[utoipa::path(get, path = "/api/v1/faq-collections/{id}", tag = "faq",
    params(("id" = Uuid, Path, description = "Collection id")),
    responses((status = 200, description = "The collection and its FAQs", body = Envelope<FaqCollection>)))]
async fn get_collection(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<FaqCollectionId>,
) -> AppResult<Reply<FaqCollection>> {
    Ok(Reply::ok(
        faq::read_collection(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update an FAQ collection.
#[utoipa::path(patch, path = "/api/v1/faq-collections/{id}", tag = "faq",
    params(("id" = Uuid, Path, description = "Collection id")),
    request_body = UpdateFaqCollection,
    responses(
        (status = 200, description = "The updated collection", body = Envelope<FaqCollection>),
        (status = 409, description = "The slug is taken in this locale", body = ErrorEnvelope),
    ))]
async fn update_collection(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<FaqCollectionId>,
    Json(req): Json<UpdateFaqCollection>,
) -> AppResult<Reply<FaqCollection>> {
    Ok(Reply::ok(
        faq::update_collection(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Delete an FAQ collection with its categories and FAQs.
#[utoipa::path(delete, path = "/api/v1/faq-collections/{id}", tag = "faq",
    params(("id" = Uuid, Path, description = "Collection id")),
    responses((status = 200, description = "The collection is gone", body = Envelope<Deleted>)))]
async fn delete_collection(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<FaqCollectionId>,
) -> AppResult<Reply<Deleted>> {
    faq::delete_collection(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

/// Create a FAQ category in a collection.
#[utoipa::path(post, path = "/api/v1/faq-collections/{id}/categories", tag = "faq",
    params(("id" = Uuid, Path, description = "Collection id")),
    request_body = CreateFaqCategory,
    responses(
        (status = 201, description = "The new category", body = Envelope<FaqCategory>),
        (status = 409, description = "The collection has a category with this name", body = ErrorEnvelope),
    ))]
async fn create_category(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<FaqCollectionId>,
    Json(req): Json<CreateFaqCategory>,
) -> AppResult<Reply<FaqCategory>> {
    Ok(Reply::created(
        faq::create_category(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// List the FAQ categories of a collection.
#[utoipa::path(get, path = "/api/v1/faq-collections/{id}/categories", tag = "faq",
    params(("id" = Uuid, Path, description = "Collection id"), PageParams),
    responses((status = 200, description = "A page of categories", body = ListEnvelope<FaqCategory>)))]
async fn list_categories(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<FaqCollectionId>,
    Paging(page): Paging,
) -> AppResult<Reply<Vec<FaqCategory>>> {
    Ok(Reply::page(
        faq::list_categories(state.use_cases(), tenant.org_id, id, &page).await?,
    ))
}

/// Update a FAQ category.
#[utoipa::path(patch, path = "/api/v1/faq-collections/{id}/categories/{categoryId}", tag = "faq",
    params(
        ("id" = Uuid, Path, description = "Collection id"),
        ("categoryId" = Uuid, Path, description = "Category id"),
    ),
    request_body = UpdateFaqCategory,
    responses(
        (status = 200, description = "The updated category", body = Envelope<FaqCategory>),
        (status = 409, description = "The collection has a category with this name", body = ErrorEnvelope),
    ))]
async fn update_category(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((id, category_id)): Path<(FaqCollectionId, FaqCategoryId)>,
    Json(req): Json<UpdateFaqCategory>,
) -> AppResult<Reply<FaqCategory>> {
    Ok(Reply::ok(
        faq::update_category(state.use_cases(), &tenant.caller(), id, category_id, req).await?,
    ))
}

/// Delete a FAQ category; its FAQs stay, without a category.
#[utoipa::path(delete, path = "/api/v1/faq-collections/{id}/categories/{categoryId}", tag = "faq",
    params(
        ("id" = Uuid, Path, description = "Collection id"),
        ("categoryId" = Uuid, Path, description = "Category id"),
    ),
    responses((status = 200, description = "The category is gone", body = Envelope<Deleted>)))]
async fn delete_category(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((id, category_id)): Path<(FaqCollectionId, FaqCategoryId)>,
) -> AppResult<Reply<Deleted>> {
    faq::delete_category(state.use_cases(), &tenant.caller(), id, category_id).await?;
    Ok(Reply::deleted(category_id.uuid()))
}

/// Create a FAQ in a collection; `slug` is derived from `title` when absent.
#[utoipa::path(post, path = "/api/v1/faq-collections/{id}/faqs", tag = "faq",
    params(("id" = Uuid, Path, description = "Collection id")),
    request_body = CreateFaq,
    responses(
        (status = 201, description = "The new FAQ", body = Envelope<Faq>),
        (status = 409, description = "The given slug is taken in this locale", body = ErrorEnvelope),
    ))]
async fn create_faq(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<FaqCollectionId>,
    Json(req): Json<CreateFaq>,
) -> AppResult<Reply<Faq>> {
    Ok(Reply::created(
        faq::create_faq(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// List the FAQs of a collection.
#[utoipa::path(get, path = "/api/v1/faq-collections/{id}/faqs", tag = "faq",
    params(("id" = Uuid, Path, description = "Collection id"), PageParams, FaqFilter),
    responses((status = 200, description = "A page of FAQs", body = ListEnvelope<Faq>)))]
async fn list_faqs(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<FaqCollectionId>,
    Paging(page): Paging,
    Query(filter): Query<FaqFilter>,
) -> AppResult<Reply<Vec<Faq>>> {
    Ok(Reply::page(
        faq::list_faqs(state.use_cases(), tenant.org_id, id, &filter, &page).await?,
    ))
}

/// Get a FAQ.
#[utoipa::path(get, path = "/api/v1/faq-collections/{id}/faqs/{faqId}", tag = "faq",
    params(
        ("id" = Uuid, Path, description = "Collection id"),
        ("faqId" = Uuid, Path, description = "FAQ id"),
    ),
    responses((status = 200, description = "The FAQ", body = Envelope<Faq>)))]
async fn get_faq(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((id, faq_id)): Path<(FaqCollectionId, FaqId)>,
) -> AppResult<Reply<Faq>> {
    Ok(Reply::ok(
        faq::read_faq(state.use_cases(), tenant.org_id, id, faq_id).await?,
    ))
}

/// Update a FAQ; `readTime` follows the content.
#[utoipa::path(patch, path = "/api/v1/faq-collections/{id}/faqs/{faqId}", tag = "faq",
    params(
        ("id" = Uuid, Path, description = "Collection id"),
        ("faqId" = Uuid, Path, description = "FAQ id"),
    ),
    request_body = UpdateFaq,
    responses(
        (status = 200, description = "The updated FAQ", body = Envelope<Faq>),
        (status = 409, description = "The slug is taken in this locale", body = ErrorEnvelope),
    ))]
async fn update_faq(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((id, faq_id)): Path<(FaqCollectionId, FaqId)>,
    Json(req): Json<UpdateFaq>,
) -> AppResult<Reply<Faq>> {
    Ok(Reply::ok(
        faq::update_faq(state.use_cases(), &tenant.caller(), id, faq_id, req).await?,
    ))
}

/// Delete a FAQ.
#[utoipa::path(delete, path = "/api/v1/faq-collections/{id}/faqs/{faqId}", tag = "faq",
    params(
        ("id" = Uuid, Path, description = "Collection id"),
        ("faqId" = Uuid, Path, description = "FAQ id"),
    ),
    responses((status = 200, description = "The FAQ is gone", body = Envelope<Deleted>)))]
async fn delete_faq(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((id, faq_id)): Path<(FaqCollectionId, FaqId)>,
) -> AppResult<Reply<Deleted>> {
    faq::delete_faq(state.use_cases(), &tenant.caller(), id, faq_id).await?;
    Ok(Reply::deleted(faq_id.uuid()))
}

//! Endpoint 5 and the everyday contact operations.

use crate::envelope::{Deleted, Envelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::broadcasts::ContactMessage;
use parley_domain::contact_data::{ContactErased, ContactExport};
use parley_domain::contacts::{Contact, ContactFilter, CreateContact, UpdateContact};
use parley_types::ids::ContactId;
use parley_types::list::PageParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;
use parley_usecases::{contact_data, contacts};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update, delete))
        .routes(routes!(messages))
        .routes(routes!(export))
        .routes(routes!(erase))
}

/// Create a contact in the organization.
#[utoipa::path(post, path = "/api/v1/contacts", tag = "contacts",
    request_body = CreateContact,
    responses(
        (status = 201, description = "The new contact, with a `created` activity", body = Envelope<Contact>),
        (status = 409, description = "Another contact has this email", body = crate::envelope::ErrorEnvelope),
    ))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateContact>,
) -> AppResult<Reply<Contact>> {
    Ok(Reply::created(
        contacts::create(state.use_cases(), &tenant.caller(), req).await?,
    ))
}

/// List the organization's contacts.
#[utoipa::path(get, path = "/api/v1/contacts", tag = "contacts",
    params(PageParams, ContactFilter),
    responses((status = 200, description = "A page of contacts", body = ListEnvelope<Contact>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
    Query(filter): Query<ContactFilter>,
) -> AppResult<Reply<Vec<Contact>>> {
    let page = contacts::list(state.use_cases(), tenant.org_id, &filter, &page).await?;
    Ok(Reply::page(page))
}

/// Get a contact with its tags, company and latest 100 activities.
#[utoipa::path(get, path = "/api/v1/contacts/{id}", tag = "contacts",
    params(("id" = Uuid, Path, description = "Contact id")),
    responses((status = 200, description = "The contact", body = Envelope<Contact>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ContactId>,
) -> AppResult<Reply<Contact>> {
    Ok(Reply::ok(
        contacts::read(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// A contact's messages: its recipient record in every broadcast (broadcast, channel, status,
/// sent, delivered, read and failed times, error), newest first. 404 for a deleted contact.
#[utoipa::path(get, path = "/api/v1/contacts/{id}/messages", tag = "contacts",
    params(("id" = Uuid, Path, description = "Contact id"), PageParams),
    responses((status = 200, description = "A page of the contact's messages", body = ListEnvelope<ContactMessage>)))]
async fn messages(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ContactId>,
    Paging(page): Paging,
) -> AppResult<Reply<Vec<ContactMessage>>> {
    Ok(Reply::page(
        contacts::messages(state.use_cases(), tenant.org_id, id, &page).await?,
    ))
}

/// Update a contact; each changed field is recorded as an activity.
#[utoipa::path(patch, path = "/api/v1/contacts/{id}", tag = "contacts",
    params(("id" = Uuid, Path, description = "Contact id")),
    request_body = UpdateContact,
    responses(
        (status = 200, description = "The updated contact", body = Envelope<Contact>),
        (status = 409, description = "Another contact has this email", body = crate::envelope::ErrorEnvelope),
    ))]
async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ContactId>,
    Json(req): Json<UpdateContact>,
) -> AppResult<Reply<Contact>> {
    Ok(Reply::ok(
        contacts::update(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Delete a contact with its tags and activities.
#[utoipa::path(delete, path = "/api/v1/contacts/{id}", tag = "contacts",
    params(("id" = Uuid, Path, description = "Contact id")),
    responses((status = 200, description = "The contact is gone", body = Envelope<Deleted>)))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ContactId>,
) -> AppResult<Reply<Deleted>> {
    contacts::delete(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

/// Export everything the organization keeps of a contact (a data subject's request): every
/// field with its tags and activities, its messages, its conversations with their messages,
/// the tickets it is the customer of, the leads converted into it, its topic preferences and
/// channel unsubscribes, and the suppression entries that name it or its addresses. Each
/// section is cut at its limit (named in `truncated`; its paged route reads the rest). Scope
/// `privacy:read`.
#[utoipa::path(get, path = "/api/v1/contacts/{id}/export", tag = "contacts",
    params(("id" = Uuid, Path, description = "Contact id")),
    responses(
        (status = 200, description = "The contact's data", body = Envelope<ContactExport>),
        (status = 404, description = "No such contact in the organization", body = crate::envelope::ErrorEnvelope),
    ))]
async fn export(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ContactId>,
) -> AppResult<Reply<ContactExport>> {
    Ok(Reply::ok(
        contact_data::export(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Erase a contact (a data subject's request): the contact goes with its tags, activities,
/// topic preferences, conversations, the tickets it is the customer of and the leads
/// converted into it or holding its addresses; its messages' records lose the address they
/// went to. Its addresses stay in the suppression ledger only as one-way hashes, with an
/// `erased` entry for every channel, so that a later import or change that brings an address
/// back sends it nothing (transactional messages included) until that entry is removed.
/// Scope `privacy:write`.
#[utoipa::path(post, path = "/api/v1/contacts/{id}/erase", tag = "contacts",
    params(("id" = Uuid, Path, description = "Contact id")),
    responses(
        (status = 200, description = "The contact is erased", body = Envelope<ContactErased>),
        (status = 404, description = "No such contact in the organization", body = crate::envelope::ErrorEnvelope),
    ))]
async fn erase(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ContactId>,
) -> AppResult<Reply<ContactErased>> {
    Ok(Reply::ok(
        contact_data::erase(state.use_cases(), &tenant.caller(), id).await?,
    ))
}

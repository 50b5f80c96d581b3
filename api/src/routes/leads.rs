//! Leads (endpoints 9 and 11, and the operations beside them).

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::{AppError, AppResult};
use axum::extract::State;
use parley_db as db;
use parley_db::refs::{self, RefTable};
use parley_db::tags::{TagLink, set_tags, tags_of};
use parley_domain::contacts::{ActivityType, Contact, ContactActivity};
use parley_domain::leads::{CreateLead, Lead, LeadFilter, LeadStatus, UpdateLead};
use parley_domain::webhooks::EventName;
use parley_types::list::PageParams;
use parley_types::time::Timestamp;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;

const MAX_TAGS: usize = 50;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update, delete))
        .routes(routes!(convert))
}

/// Create a lead (endpoint 11); one of `name`, `email`, `phone` is required.
#[utoipa::path(post, path = "/api/v1/leads", tag = "leads",
    request_body = CreateLead,
    responses((status = 201, description = "The new lead, with `assignee` embedded", body = Envelope<Lead>)))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateLead>,
) -> AppResult<Reply<Lead>> {
    let (lead, tag_ids) = req.into_lead(tenant.org_id)?;
    let tag_ids = parley_types::ids::dedup(tag_ids);
    let mut tx = state.pool.begin().await?;
    refs::check_id(
        &mut tx,
        RefTable::Users,
        tenant.org_id,
        "assigneeId",
        lead.assignee_id,
    )
    .await?;
    refs::check_ids(
        &mut tx,
        RefTable::Tags,
        tenant.org_id,
        "tagIds",
        &tag_ids,
        MAX_TAGS,
    )
    .await?;
    db::leads::insert(&mut *tx, &lead).await?;
    set_tags(&mut tx, TagLink::Lead, tenant.org_id, lead.id, &tag_ids).await?;
    let lead = db::leads::get(&mut tx, tenant.org_id, lead.id)
        .await?
        .ok_or(AppError::NotFound)?;
    db::outbox::emit(&mut tx, tenant.org_id, EventName::LeadCreated, &lead).await?;
    tx.commit().await?;
    Ok(Reply::created(lead))
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
        db::leads::list(&state.pool, tenant.org_id, &filter, &page).await?,
    ))
}

/// Get a lead.
#[utoipa::path(get, path = "/api/v1/leads/{id}", tag = "leads",
    params(("id" = Uuid, Path, description = "Lead id")),
    responses((status = 200, description = "The lead", body = Envelope<Lead>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<Uuid>,
) -> AppResult<Reply<Lead>> {
    let mut conn = state.pool.acquire().await?;
    db::leads::get(&mut conn, tenant.org_id, id)
        .await?
        .map(Reply::ok)
        .ok_or(AppError::NotFound.into())
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
    Path(id): Path<Uuid>,
    Json(req): Json<UpdateLead>,
) -> AppResult<Reply<Lead>> {
    let mut tx = state.pool.begin().await?;
    let mut lead = db::leads::lock(&mut tx, tenant.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    let before_assignee = lead.assignee_id;
    let tag_ids = req.apply(&mut lead)?;
    if lead.assignee_id != before_assignee {
        refs::check_id(
            &mut tx,
            RefTable::Users,
            tenant.org_id,
            "assigneeId",
            lead.assignee_id,
        )
        .await?;
    }
    if let Some(tag_ids) = tag_ids {
        let tag_ids = parley_types::ids::dedup(tag_ids);
        refs::check_ids(
            &mut tx,
            RefTable::Tags,
            tenant.org_id,
            "tagIds",
            &tag_ids,
            MAX_TAGS,
        )
        .await?;
        set_tags(&mut tx, TagLink::Lead, tenant.org_id, id, &tag_ids).await?;
    }
    db::leads::update(&mut *tx, &lead).await?;
    let lead = db::leads::get(&mut tx, tenant.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(Reply::ok(lead))
}

/// Convert a lead into a contact (endpoint 9): links the contact with the lead's email or
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
    Path(id): Path<Uuid>,
) -> AppResult<Reply<Contact>> {
    let actor = tenant.actor();
    let mut tx = state.pool.begin().await?;
    let mut lead = db::leads::lock(&mut tx, tenant.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    if lead.status == LeadStatus::Converted {
        return Err(AppError::invalid_state("the lead is already converted").into());
    }
    let existing = db::contacts::find_by_email_or_phone(
        &mut tx,
        tenant.org_id,
        lead.email.as_deref(),
        lead.phone.as_deref(),
    )
    .await?;
    let now = Timestamp::now();
    let contact_id = match existing {
        Some(contact_id) => contact_id,
        None => {
            let contact = lead.new_contact(now);
            db::contacts::insert(&mut *tx, &contact).await?;
            let tag_ids: Vec<Uuid> = tags_of(&mut *tx, TagLink::Lead, &[id])
                .await?
                .remove(&id)
                .unwrap_or_default()
                .into_iter()
                .map(|t| t.id)
                .collect();
            set_tags(
                &mut tx,
                TagLink::Contact,
                tenant.org_id,
                contact.id,
                &tag_ids,
            )
            .await?;
            let created = ContactActivity::new(
                contact.id,
                ActivityType::Created,
                &actor,
                "Contact created".to_owned(),
            );
            db::contacts::add_activities(&mut tx, tenant.org_id, &[created]).await?;
            contact.id
        }
    };
    let mut converted = ContactActivity::new(
        contact_id,
        ActivityType::ConvertedFromLead,
        &actor,
        "Converted from a lead".to_owned(),
    );
    converted.metadata = Some(id.to_string());
    db::contacts::add_activities(&mut tx, tenant.org_id, &[converted]).await?;
    lead.status = LeadStatus::Converted;
    lead.contact_id = Some(contact_id);
    lead.converted_at = Some(now);
    lead.updated_at = now;
    db::leads::update(&mut *tx, &lead).await?;
    let contact = db::contacts::get(&mut tx, tenant.org_id, contact_id)
        .await?
        .ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(Reply::ok(contact))
}

/// Delete a lead with its tags. A converted lead's contact stays.
#[utoipa::path(delete, path = "/api/v1/leads/{id}", tag = "leads",
    params(("id" = Uuid, Path, description = "Lead id")),
    responses((status = 200, description = "The lead is gone", body = Envelope<Deleted>)))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<Uuid>,
) -> AppResult<Reply<Deleted>> {
    if db::leads::delete(&state.pool, tenant.org_id, id).await? {
        Ok(Reply::deleted(id))
    } else {
        Err(AppError::NotFound.into())
    }
}

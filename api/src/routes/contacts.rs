//! Endpoint 5 and the everyday contact operations.

use crate::envelope::{Deleted, Envelope, ListEnvelope, Reply};
use crate::error::{AppError, AppResult};
use axum::extract::State;
use parley_db as db;
use parley_db::refs::{self, RefTable};
use parley_db::tags::{TagLink, set_tags};
use parley_domain::contacts::{
    ActivityType, Contact, ContactActivity, ContactFilter, CreateContact, UpdateContact,
};
use parley_types::list::PageParams;
use parley_types::time::Timestamp;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;

const MAX_TAGS: usize = 50;
/// Activities shown with a contact, newest first.
const ACTIVITIES_SHOWN: i64 = 100;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update, delete))
}

/// Create a contact in the organization (endpoint 5).
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
    let (contact, tag_ids) = req.into_contact(tenant.org_id);
    let tag_ids = parley_types::ids::dedup(tag_ids);
    let mut tx = state.pool.begin().await?;
    refs::check_id(
        &mut tx,
        RefTable::Companies,
        tenant.org_id,
        "companyId",
        contact.company_id,
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
    db::contacts::insert(&mut *tx, &contact).await?;
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
        &tenant.actor(),
        "Contact created".to_owned(),
    );
    db::contacts::add_activities(&mut tx, tenant.org_id, &[created]).await?;
    let contact = read(&mut tx, tenant.org_id, contact.id).await?;
    tx.commit().await?;
    Ok(Reply::created(contact))
}

async fn read(conn: &mut sqlx::PgConnection, org: Uuid, id: Uuid) -> AppResult<Contact> {
    let mut contact = db::contacts::get(conn, org, id)
        .await?
        .ok_or(AppError::NotFound)?;
    contact.activities = Some(db::contacts::activities(&mut *conn, id, ACTIVITIES_SHOWN).await?);
    Ok(contact)
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
    let tag = match &filter.tag {
        // An unknown tag matches no contact.
        Some(tag) => Some(
            db::contacts::resolve_tag(&state.pool, tenant.org_id, tag.as_str())
                .await?
                .unwrap_or(Uuid::nil()),
        ),
        None => None,
    };
    let page = db::contacts::list(&state.pool, tenant.org_id, &filter, tag, &page).await?;
    Ok(Reply::page(page))
}

/// Get a contact with its tags, company and latest 100 activities.
#[utoipa::path(get, path = "/api/v1/contacts/{id}", tag = "contacts",
    params(("id" = Uuid, Path, description = "Contact id")),
    responses((status = 200, description = "The contact", body = Envelope<Contact>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<Uuid>,
) -> AppResult<Reply<Contact>> {
    let mut conn = state.pool.acquire().await?;
    Ok(Reply::ok(read(&mut conn, tenant.org_id, id).await?))
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
    Path(id): Path<Uuid>,
    Json(req): Json<UpdateContact>,
) -> AppResult<Reply<Contact>> {
    let actor = tenant.actor();
    let mut tx = state.pool.begin().await?;
    let mut contact = db::contacts::lock(&mut tx, tenant.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    let now = Timestamp::now();
    let (changes, tag_ids) = req.apply(&mut contact, now);
    if changes.iter().any(|c| c.field == "companyId") {
        refs::check_id(
            &mut tx,
            RefTable::Companies,
            tenant.org_id,
            "companyId",
            contact.company_id,
        )
        .await?;
    }
    let mut activities: Vec<ContactActivity> = changes
        .into_iter()
        .map(|c| c.into_activity(id, &actor))
        .collect();
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
        let (added, removed) =
            set_tags(&mut tx, TagLink::Contact, tenant.org_id, id, &tag_ids).await?;
        for (tags, kind, verb) in [
            (added, ActivityType::TagAdded, "added"),
            (removed, ActivityType::TagRemoved, "removed"),
        ] {
            for tag in tags {
                let mut a =
                    ContactActivity::new(id, kind, &actor, format!("Tag {} {verb}", tag.name));
                if kind == ActivityType::TagAdded {
                    a.new_value = Some(tag.name);
                } else {
                    a.old_value = Some(tag.name);
                }
                activities.push(a);
            }
        }
    }
    if !activities.is_empty() {
        contact.updated_at = now;
        db::contacts::update(&mut *tx, &contact).await?;
        db::contacts::add_activities(&mut tx, tenant.org_id, &activities).await?;
    }
    let contact = read(&mut tx, tenant.org_id, id).await?;
    tx.commit().await?;
    Ok(Reply::ok(contact))
}

/// Delete a contact with its tags and activities.
#[utoipa::path(delete, path = "/api/v1/contacts/{id}", tag = "contacts",
    params(("id" = Uuid, Path, description = "Contact id")),
    responses((status = 200, description = "The contact is gone", body = Envelope<Deleted>)))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<Uuid>,
) -> AppResult<Reply<Deleted>> {
    if db::contacts::delete(&state.pool, tenant.org_id, id).await? {
        Ok(Reply::deleted(id))
    } else {
        Err(AppError::NotFound.into())
    }
}

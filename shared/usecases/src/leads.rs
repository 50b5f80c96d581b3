//! Leads: read, listed and deleted; their changes, each in one transaction with its reference
//! checks, its tags and, for a new lead, its `lead.created` event; converting a lead finds or
//! creates its contact.

use parley_db as db;
use parley_db::refs::{self, RefTable};
use parley_db::tags::{TagLink, set_tags, tags_of};
use parley_domain::contacts::{ActivityType, Contact, ContactActivity};
use parley_domain::leads::{CreateLead, Lead, LeadFilter, LeadStatus, UpdateLead};
use parley_domain::webhooks::EventName;
use parley_types::error::AppError;
use parley_types::ids::ContactId;
use parley_types::ids::{LeadId, OrgId};
use parley_types::list::{Page, PageRequest};
use parley_types::time::Timestamp;
use uuid::Uuid;

use crate::{Caller, Ctx, Result, changed, found};

/// Creates a lead with its tags and its `lead.created` event.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn create(ctx: Ctx<'_>, caller: &Caller, req: CreateLead) -> Result<Lead> {
    let (lead, tag_ids) = req.into_lead(caller.org_id.uuid())?;
    let tag_ids = parley_types::ids::dedup(tag_ids);
    let mut tx = ctx.pool.begin().await?;
    refs::check_id(
        &mut tx,
        RefTable::Users,
        caller.org_id,
        "assigneeId",
        lead.assignee_id,
    )
    .await?;
    refs::check_tag_ids(&mut tx, caller.org_id, &tag_ids).await?;
    db::leads::insert(&mut *tx, &lead).await?;
    set_tags(&mut tx, TagLink::Lead, caller.org_id, lead.id, &tag_ids).await?;
    let lead = db::leads::get(&mut tx, caller.org_id, LeadId::from(lead.id))
        .await?
        .ok_or(AppError::NotFound)?;
    db::outbox::emit(&mut tx, caller.org_id, EventName::LeadCreated, &lead).await?;
    tx.commit().await?;
    Ok(lead)
}

/// Changes a lead and its tags.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, lead_id = %id))]
pub async fn update(ctx: Ctx<'_>, caller: &Caller, id: LeadId, req: UpdateLead) -> Result<Lead> {
    let mut tx = ctx.pool.begin().await?;
    let mut lead = db::leads::lock(&mut tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    let before_assignee = lead.assignee_id;
    let tag_ids = req.apply(&mut lead)?;
    if lead.assignee_id != before_assignee {
        refs::check_id(
            &mut tx,
            RefTable::Users,
            caller.org_id,
            "assigneeId",
            lead.assignee_id,
        )
        .await?;
    }
    if let Some(tag_ids) = tag_ids {
        let tag_ids = parley_types::ids::dedup(tag_ids);
        refs::check_tag_ids(&mut tx, caller.org_id, &tag_ids).await?;
        set_tags(&mut tx, TagLink::Lead, caller.org_id, id.uuid(), &tag_ids).await?;
    }
    db::leads::update(&mut *tx, &lead).await?;
    let lead = db::leads::get(&mut tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(lead)
}

/// Converts a lead into a contact: the contact with its email or phone, or a new one; the lead
/// becomes `converted`.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, lead_id = %id))]
pub async fn convert(ctx: Ctx<'_>, caller: &Caller, id: LeadId) -> Result<Contact> {
    let actor = caller.actor();
    let mut tx = ctx.pool.begin().await?;
    let mut lead = db::leads::lock(&mut tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    if lead.status == LeadStatus::Converted {
        return Err(AppError::invalid_state("the lead is already converted").into());
    }
    let existing = db::contacts::find_by_email_or_phone(
        &mut tx,
        caller.org_id,
        lead.email.as_deref(),
        lead.phone.as_deref(),
    )
    .await?;
    let now = Timestamp::now();
    let contact_id = match existing {
        Some(contact_id) => contact_id,
        None => {
            let mut contact = lead.new_contact(now);
            let created = ContactActivity::new(
                contact.id,
                ActivityType::Created,
                &actor,
                "Contact created".to_owned(),
            );
            db::contacts::insert_created(&mut *tx, &mut contact, &created).await?;
            let tag_ids: Vec<Uuid> = tags_of(&mut *tx, TagLink::Lead, &[id.uuid()])
                .await?
                .remove(&id.uuid())
                .unwrap_or_default()
                .into_iter()
                .map(|t| t.id)
                .collect();
            set_tags(
                &mut tx,
                TagLink::Contact,
                caller.org_id,
                contact.id,
                &tag_ids,
            )
            .await?;
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
    db::contacts::add_activities(&mut tx, caller.org_id, &[converted]).await?;
    lead.status = LeadStatus::Converted;
    lead.contact_id = Some(contact_id);
    lead.converted_at = Some(now);
    lead.updated_at = now;
    db::leads::update(&mut *tx, &lead).await?;
    let contact = db::contacts::get(&mut tx, caller.org_id, ContactId::from(contact_id))
        .await?
        .ok_or(AppError::NotFound)?;
    tx.commit().await?;
    Ok(contact)
}

/// Deletes the organization's lead; 404 when there is none.
pub async fn delete(ctx: Ctx<'_>, caller: &Caller, id: LeadId) -> Result<()> {
    changed(db::leads::delete(ctx.pool, caller.org_id, id).await?)
}

/// A page of the organization's leads.
pub async fn list(
    ctx: Ctx<'_>,
    org: OrgId,
    f: &LeadFilter,
    page: &PageRequest,
) -> Result<Page<Lead>> {
    Ok(db::leads::list(ctx.pool, org, f, page).await?)
}

/// The organization's lead.
pub async fn read(ctx: Ctx<'_>, org: OrgId, id: LeadId) -> Result<Lead> {
    found(db::leads::get(&mut *ctx.pool.acquire().await?, org, id).await?)
}

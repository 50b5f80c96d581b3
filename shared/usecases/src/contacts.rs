//! Contacts: read (with their latest activities), listed, with what was sent them, and
//! deleted; created and changed, each in one transaction with its tags, its activities and
//! its reference checks.

use parley_db as db;
use parley_db::refs::{self, RefTable};
use parley_db::tags::{TagLink, set_tags, tags_of};
use parley_domain::broadcasts::ContactMessage;
use parley_domain::contacts::{
    ActivityType, Contact, ContactActivity, ContactFilter, CreateContact, UpdateContact,
};
use parley_types::error::AppError;
use parley_types::ids::{ContactId, OrgId};
use parley_types::list::{Page, PageRequest};
use parley_types::time::Timestamp;
use uuid::Uuid;

use crate::{Caller, Ctx, Result, changed, exists};

/// Activities shown with a contact, newest first.
const ACTIVITIES_SHOWN: i64 = 100;

/// Creates a contact with its tags and its `created` activity. Without tags this is one
/// statement and no transaction; the answer is what was written (nothing is read back but the
/// company's name and the tags).
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn create(ctx: Ctx<'_>, caller: &Caller, req: CreateContact) -> Result<Contact> {
    let (mut contact, tag_ids) = req.into_contact(caller.org_id.uuid());
    let tag_ids = parley_types::ids::dedup(tag_ids);
    let created = ContactActivity::new(
        contact.id,
        ActivityType::Created,
        &caller.actor(),
        "Contact created".to_owned(),
    );
    if tag_ids.is_empty() {
        db::contacts::insert_created(ctx.pool, &mut contact, &created).await?;
    } else {
        let mut tx = ctx.pool.begin().await?;
        refs::check_tag_ids(&mut tx, caller.org_id, &tag_ids).await?;
        db::contacts::insert_created(&mut *tx, &mut contact, &created).await?;
        set_tags(
            &mut tx,
            TagLink::Contact,
            caller.org_id,
            contact.id,
            &tag_ids,
        )
        .await?;
        contact.tags = tags_of(&mut *tx, TagLink::Contact, &[contact.id])
            .await?
            .remove(&contact.id)
            .unwrap_or_default();
        tx.commit().await?;
    }
    contact.activities = Some(vec![created]);
    Ok(contact)
}

/// Changes a contact, its tags and its activities.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: ContactId,
    req: UpdateContact,
) -> Result<Contact> {
    let actor = caller.actor();
    let mut tx = ctx.pool.begin().await?;
    let mut contact = db::contacts::lock(&mut tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    let now = Timestamp::now();
    let (changes, tag_ids) = req.apply(&mut contact, now);
    if changes.iter().any(|c| c.field == "companyId") {
        refs::check_id(
            &mut tx,
            RefTable::Companies,
            caller.org_id,
            "companyId",
            contact.company_id,
        )
        .await?;
    }
    let mut activities: Vec<ContactActivity> = changes
        .into_iter()
        .map(|c| c.into_activity(id.uuid(), &actor))
        .collect();
    if let Some(tag_ids) = tag_ids {
        let tag_ids = parley_types::ids::dedup(tag_ids);
        refs::check_tag_ids(&mut tx, caller.org_id, &tag_ids).await?;
        let (added, removed) = set_tags(
            &mut tx,
            TagLink::Contact,
            caller.org_id,
            id.uuid(),
            &tag_ids,
        )
        .await?;
        for (tags, kind, verb) in [
            (added, ActivityType::TagAdded, "added"),
            (removed, ActivityType::TagRemoved, "removed"),
        ] {
            for tag in tags {
                let mut a = ContactActivity::new(
                    id.uuid(),
                    kind,
                    &actor,
                    format!("Tag {} {verb}", tag.name),
                );
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
        db::contacts::add_activities(&mut tx, caller.org_id, &activities).await?;
    }
    let contact = read_in(&mut tx, caller.org_id, id).await?;
    tx.commit().await?;
    Ok(contact)
}

/// The contact with its latest activities, as the API shows it.
pub async fn read(ctx: Ctx<'_>, org: OrgId, id: ContactId) -> Result<Contact> {
    read_in(&mut *ctx.pool.acquire().await?, org, id).await
}

async fn read_in(conn: &mut sqlx::PgConnection, org: OrgId, id: ContactId) -> Result<Contact> {
    let mut contact = db::contacts::get(conn, org, id)
        .await?
        .ok_or(AppError::NotFound)?;
    contact.activities = Some(db::contacts::activities(&mut *conn, id, ACTIVITIES_SHOWN).await?);
    Ok(contact)
}

/// Deletes the organization's contact; 404 when there is none.
pub async fn delete(ctx: Ctx<'_>, caller: &Caller, id: ContactId) -> Result<()> {
    changed(db::contacts::delete(ctx.pool, caller.org_id, id).await?)
}

/// The tag a list's `tag` filter names, by its name or its id: none without the filter, and
/// for an unknown tag the nil id, which no row has, so that it matches nothing. Contacts,
/// conversations and tickets filter on it alike.
pub(crate) async fn tag_filter(
    ctx: Ctx<'_>,
    org: OrgId,
    tag: Option<&str>,
) -> Result<Option<Uuid>> {
    Ok(match tag {
        Some(tag) => Some(
            db::contacts::resolve_tag(ctx.pool, org, tag)
                .await?
                .unwrap_or(Uuid::nil()),
        ),
        None => None,
    })
}

/// A page of the organization's contacts; a `tag` filter names a tag or gives its id, and an
/// unknown tag matches no contact.
pub async fn list(
    ctx: Ctx<'_>,
    org: OrgId,
    f: &ContactFilter,
    page: &PageRequest,
) -> Result<Page<Contact>> {
    let tag = tag_filter(ctx, org, f.tag.as_ref().map(|t| t.as_str())).await?;
    Ok(db::contacts::list(ctx.pool, org, f, tag, page).await?)
}

/// A page of what was sent to a contact (404 for another organization's contact).
pub async fn messages(
    ctx: Ctx<'_>,
    org: OrgId,
    id: ContactId,
    page: &PageRequest,
) -> Result<Page<ContactMessage>> {
    exists(db::contacts::exists(ctx.pool, org, id).await?)?;
    Ok(db::broadcasts::messages_of_contact(ctx.pool, org, id, page).await?)
}

use parley_types::ids::{LeadId, OrgId};
use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::tags::{TagLink, tags_of};
use super::users::summaries;
use parley_domain::leads::{Lead, LeadFilter, LeadStatus};
use parley_types::list::{Page, PageRequest};
use parley_types::time::Timestamp;
use sqlx::types::Decimal;

pub async fn insert(db: impl PgExecutor<'_>, l: &Lead) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO leads (id, organization_id, name, email, phone, source, notes, value, currency,
            status, assignee_id, contact_id, converted_at, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
        l.id,
        l.organization_id,
        l.name.as_deref(),
        l.email.as_deref(),
        l.phone.as_deref(),
        l.source.as_deref(),
        l.notes.as_deref(),
        l.value,
        l.currency.as_deref(),
        l.status.as_str(),
        l.assignee_id,
        l.contact_id,
        l.converted_at,
        l.created_at,
        l.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Deletes a lead and its tags; a converted lead's contact stays. Whether there was one.
pub async fn delete(db: impl PgExecutor<'_>, org: OrgId, id: LeadId) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM leads WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn update(db: impl PgExecutor<'_>, l: &Lead) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE leads SET name = $3, email = $4, phone = $5, source = $6, notes = $7,
            value = $8, currency = $9, status = $10, assignee_id = $11,
            contact_id = $12, converted_at = $13, updated_at = $14
         WHERE organization_id = $1 AND id = $2",
        l.organization_id,
        l.id,
        l.name.as_deref(),
        l.email.as_deref(),
        l.phone.as_deref(),
        l.source.as_deref(),
        l.notes.as_deref(),
        l.value,
        l.currency.as_deref(),
        l.status.as_str(),
        l.assignee_id,
        l.contact_id,
        l.converted_at,
        l.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Fills `assignee` and `tags` of the given leads.
async fn embed(conn: &mut PgConnection, org: OrgId, leads: &mut [Lead]) -> Result<(), sqlx::Error> {
    let ids: Vec<Uuid> = leads.iter().map(|l| l.id).collect();
    let assignees: Vec<Uuid> = leads.iter().filter_map(|l| l.assignee_id).collect();
    let mut tags = tags_of(&mut *conn, TagLink::Lead, &ids).await?;
    let users = summaries(&mut *conn, org, &assignees).await?;
    for l in leads {
        l.tags = tags.remove(&l.id).unwrap_or_default();
        l.assignee = l.assignee_id.and_then(|a| users.get(&a).cloned());
    }
    Ok(())
}

pub async fn get(
    conn: &mut PgConnection,
    org: OrgId,
    id: LeadId,
) -> Result<Option<Lead>, sqlx::Error> {
    Ok(read(conn, org, &[id.uuid()]).await?.pop())
}

/// The leads of `org` among `ids`, in no particular order, with their assignee and tags.
async fn read(conn: &mut PgConnection, org: OrgId, ids: &[Uuid]) -> Result<Vec<Lead>, sqlx::Error> {
    let mut leads: Vec<Lead> = sqlx::query_as!(
        LeadRow,
        "SELECT l.id, l.organization_id, l.name, l.email, l.phone, l.source, l.notes, l.value,
            l.currency, l.status, l.assignee_id, l.contact_id, l.converted_at, l.created_at,
            l.updated_at
         FROM leads l WHERE l.organization_id = $1 AND l.id = ANY($2)",
        org.uuid(),
        ids,
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(Lead::from)
    .collect();
    embed(conn, org, &mut leads).await?;
    Ok(leads)
}

pub async fn lock(
    conn: &mut PgConnection,
    org: OrgId,
    id: LeadId,
) -> Result<Option<Lead>, sqlx::Error> {
    let found: Option<Uuid> = sqlx::query_scalar!(
        "SELECT id FROM leads WHERE organization_id = $1 AND id = $2 FOR UPDATE",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(&mut *conn)
    .await?;
    match found {
        Some(_) => get(conn, org, id).await,
        None => Ok(None),
    }
}

fn push_filter(qb: &mut QueryBuilder<Postgres>, org: OrgId, f: &LeadFilter) {
    qb.push(" WHERE l.organization_id = ").push_bind(org);
    if let Some(status) = f.status {
        qb.push(" AND l.status = ").push_bind(status);
    }
    if let Some(assignee) = f.assignee_id {
        qb.push(" AND l.assignee_id = ").push_bind(assignee);
    }
    if let Some(source) = &f.source {
        qb.push(" AND l.source = ")
            .push_bind(source.as_str().to_owned());
    }
    if let Some(contact) = f.contact_id {
        qb.push(" AND l.contact_id = ").push_bind(contact);
    }
}

pub async fn list(
    pool: &PgPool,
    org: OrgId,
    f: &LeadFilter,
    page: &PageRequest,
) -> Result<Page<Lead>, sqlx::Error> {
    super::page_of(
        pool,
        "FROM leads l",
        "l",
        |qb| push_filter(qb, org, f),
        page,
        |ids| async move { read(&mut *pool.acquire().await?, org, &ids).await },
    )
    .await
}

/// A lead as its checked statement reads it (assignee and tags are read apart).
struct LeadRow {
    id: Uuid,
    organization_id: Uuid,
    name: Option<String>,
    email: Option<String>,
    phone: Option<String>,
    source: Option<String>,
    notes: Option<String>,
    value: Option<Decimal>,
    currency: Option<String>,
    status: LeadStatus,
    assignee_id: Option<Uuid>,
    contact_id: Option<Uuid>,
    converted_at: Option<Timestamp>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<LeadRow> for Lead {
    fn from(r: LeadRow) -> Self {
        Self {
            id: r.id,
            organization_id: r.organization_id,
            name: r.name,
            email: r.email,
            phone: r.phone,
            source: r.source,
            notes: r.notes,
            value: r.value,
            currency: r.currency,
            status: r.status,
            assignee_id: r.assignee_id,
            assignee: Default::default(),
            contact_id: r.contact_id,
            converted_at: r.converted_at,
            tags: Default::default(),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::ListQuery;

use super::tags::{TagLink, tags_of};
use super::users::summaries;
use parley_domain::leads::{Lead, LeadFilter};
use parley_types::list::{Page, PageRequest};

macro_rules! select {
    () => {
        "SELECT l.id, l.organization_id, l.name, l.email, l.phone, l.source, l.notes,
                l.value, l.currency, l.status, l.assignee_id, l.contact_id,
                l.converted_at, l.created_at, l.updated_at
         FROM leads l"
    };
}

pub async fn insert(db: impl PgExecutor<'_>, l: &Lead) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO leads (id, organization_id, name, email, phone, source, notes, value, currency,
            status, assignee_id, contact_id, converted_at, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
    )
    .bind(l.id)
    .bind(l.organization_id)
    .bind(&l.name)
    .bind(&l.email)
    .bind(&l.phone)
    .bind(&l.source)
    .bind(&l.notes)
    .bind(l.value)
    .bind(&l.currency)
    .bind(l.status)
    .bind(l.assignee_id)
    .bind(l.contact_id)
    .bind(l.converted_at)
    .bind(l.created_at)
    .bind(l.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update(db: impl PgExecutor<'_>, l: &Lead) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE leads SET name = $3, email = $4, phone = $5, source = $6, notes = $7,
            value = $8, currency = $9, status = $10, assignee_id = $11,
            contact_id = $12, converted_at = $13, updated_at = $14
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(l.organization_id)
    .bind(l.id)
    .bind(&l.name)
    .bind(&l.email)
    .bind(&l.phone)
    .bind(&l.source)
    .bind(&l.notes)
    .bind(l.value)
    .bind(&l.currency)
    .bind(l.status)
    .bind(l.assignee_id)
    .bind(l.contact_id)
    .bind(l.converted_at)
    .bind(l.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

/// Fills `assignee` and `tags` of the given leads.
async fn embed(conn: &mut PgConnection, org: Uuid, leads: &mut [Lead]) -> Result<(), sqlx::Error> {
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
    org: Uuid,
    id: Uuid,
) -> Result<Option<Lead>, sqlx::Error> {
    let row: Option<Lead> = sqlx::query_as(concat!(
        select!(),
        " WHERE l.organization_id = $1 AND l.id = $2"
    ))
    .bind(org)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(lead) = row else { return Ok(None) };
    let mut leads = [lead];
    embed(conn, org, &mut leads).await?;
    let [lead] = leads;
    Ok(Some(lead))
}

pub async fn lock(
    conn: &mut PgConnection,
    org: Uuid,
    id: Uuid,
) -> Result<Option<Lead>, sqlx::Error> {
    let found: Option<Uuid> = sqlx::query_scalar(
        "SELECT id FROM leads WHERE organization_id = $1 AND id = $2 FOR UPDATE",
    )
    .bind(org)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    match found {
        Some(_) => get(conn, org, id).await,
        None => Ok(None),
    }
}

fn push_filter(qb: &mut QueryBuilder<Postgres>, org: Uuid, f: &LeadFilter) {
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
}

pub async fn list(
    pool: &PgPool,
    org: Uuid,
    f: &LeadFilter,
    page: &PageRequest,
) -> Result<Page<Lead>, sqlx::Error> {
    let q = ListQuery {
        select: select!(),
        count_from: "FROM leads l",
        alias: "l",
    };
    let mut page = super::page(pool, q, |qb| push_filter(qb, org, f), page).await?;
    let mut conn = pool.acquire().await?;
    embed(&mut conn, org, page.items_mut()).await?;
    Ok(page)
}

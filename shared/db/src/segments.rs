//! Segments: saved contact filters, and the contacts they hold (counted, or walked by id for
//! a broadcast's fan-out).

use parley_types::ids::{OrgId, SegmentId};
use sqlx::types::Json;
use sqlx::{PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use parley_domain::segments::{Segment, SegmentCount, SegmentFilter};
use parley_types::list::{EXACT_TOTAL_UP_TO, Page, PageRequest};
use parley_types::time::Timestamp;

struct Row {
    id: Uuid,
    organization_id: Uuid,
    name: String,
    filter: Json<SegmentFilter>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<Row> for Segment {
    fn from(r: Row) -> Self {
        Segment {
            id: r.id,
            organization_id: r.organization_id,
            name: r.name,
            filter: r.filter.0,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

pub async fn insert(db: impl PgExecutor<'_>, s: &Segment) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO segments (id, organization_id, name, filter, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
        s.id,
        s.organization_id,
        &s.name,
        Json(&s.filter) as _,
        s.created_at,
        s.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update(db: impl PgExecutor<'_>, s: &Segment) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE segments SET name = $3, filter = $4, updated_at = $5
         WHERE organization_id = $1 AND id = $2",
        s.organization_id,
        s.id,
        &s.name,
        Json(&s.filter) as _,
        s.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn get(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: SegmentId,
) -> Result<Option<Segment>, sqlx::Error> {
    let row = sqlx::query_as!(
        Row,
        r#"SELECT id, organization_id, name, filter AS "filter: Json<SegmentFilter>", created_at,
            updated_at
         FROM segments WHERE organization_id = $1 AND id = $2"#,
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(Segment::from))
}

/// Deletes a segment no broadcast names (one that does is 409: `broadcasts_segment_fkey`).
pub async fn delete(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: SegmentId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM segments WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn list(
    pool: &PgPool,
    org: OrgId,
    page: &PageRequest,
) -> Result<Page<Segment>, sqlx::Error> {
    super::page_of(
        pool,
        "FROM segments s",
        "s",
        |qb| {
            qb.push(" WHERE s.organization_id = ").push_bind(org);
        },
        page,
        |ids| async move {
            let rows = sqlx::query_as!(
                Row,
                r#"SELECT id, organization_id, name, filter AS "filter: Json<SegmentFilter>",
                    created_at, updated_at
                 FROM segments WHERE organization_id = $1 AND id = ANY($2)"#,
                org.uuid(),
                &ids,
            )
            .fetch_all(pool)
            .await?;
            Ok(rows.into_iter().map(Segment::from).collect())
        },
    )
    .await
}

/// `WHERE` over contacts `c` of `org` that `f` holds.
pub(crate) fn push_filter(qb: &mut QueryBuilder<Postgres>, org: OrgId, f: &SegmentFilter) {
    qb.push(" WHERE c.organization_id = ").push_bind(org);
    if !f.tag_ids.is_empty() {
        qb.push(" AND EXISTS (SELECT 1 FROM contact_tags ct WHERE ct.contact_id = c.id AND ct.tag_id = ANY(")
            .push_bind(f.tag_ids.clone())
            .push("))");
    }
    if let Some(source) = &f.source {
        qb.push(" AND c.source = ")
            .push_bind(source.as_str().to_owned());
    }
    if let Some(kind) = f.kind {
        qb.push(" AND c.type = ").push_bind(kind);
    }
    if let Some(company) = f.company_id {
        qb.push(" AND c.company_id = ").push_bind(company);
    }
    if let Some(country) = &f.country {
        qb.push(" AND c.country = ")
            .push_bind(country.as_str().to_owned());
    }
    if let Some(language) = &f.language {
        qb.push(" AND c.language = ")
            .push_bind(language.as_str().to_owned());
    }
    if let Some(after) = f.created_after {
        qb.push(" AND c.created_at >= ").push_bind(after);
    }
    if let Some(before) = f.created_before {
        qb.push(" AND c.created_at < ").push_bind(before);
    }
}

/// The contacts `f` holds now, and those of them a broadcast would skip.
pub async fn count(
    db: impl PgExecutor<'_>,
    org: OrgId,
    f: &SegmentFilter,
) -> Result<SegmentCount, sqlx::Error> {
    // Bounded like list totals: the count stops after EXACT_TOTAL_UP_TO + 1 contacts, so its
    // cost does not grow with the organization past that (the filter's columns are indexed).
    let mut qb = QueryBuilder::new(
        "SELECT count(*), count(*) FILTER (WHERE c.do_not_contact),
            count(*) FILTER (WHERE c.messaging_a_opted_out AND NOT c.do_not_contact)
         FROM (SELECT c.do_not_contact, c.messaging_a_opted_out FROM contacts c",
    );
    push_filter(&mut qb, org, f);
    qb.push(" LIMIT ")
        .push_bind(EXACT_TOTAL_UP_TO + 1)
        .push(") c");
    let (contacts, do_not_contact, messaging_a_opted_out): (i64, i64, i64) =
        qb.build_query_as().fetch_one(db).await?;
    let total_exact = contacts <= EXACT_TOTAL_UP_TO;
    Ok(SegmentCount {
        contacts: contacts.min(EXACT_TOTAL_UP_TO),
        total_exact,
        do_not_contact,
        messaging_a_opted_out,
    })
}

/// The next `limit` contacts `f` holds after `after`, by id.
pub(crate) async fn contacts_after(
    conn: &mut sqlx::PgConnection,
    org: OrgId,
    f: &SegmentFilter,
    after: Option<Uuid>,
    limit: i64,
) -> Result<Vec<Uuid>, sqlx::Error> {
    let mut qb = QueryBuilder::new("SELECT c.id FROM contacts c");
    push_filter(&mut qb, org, f);
    if let Some(after) = after {
        qb.push(" AND c.id > ").push_bind(after);
    }
    qb.push(" ORDER BY c.id LIMIT ").push_bind(limit);
    qb.build_query_scalar().fetch_all(conn).await
}

use std::collections::HashMap;

use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::ListQuery;

use parley_domain::tags::{Company, Tag};
use parley_types::list::{Page, PageRequest};

pub async fn insert_tag(db: impl PgExecutor<'_>, t: &Tag) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO tags (id, organization_id, name, display_name, color, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(t.id)
    .bind(t.organization_id)
    .bind(&t.name)
    .bind(&t.display_name)
    .bind(&t.color)
    .bind(t.created_at)
    .bind(t.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn list_tags(
    pool: &PgPool,
    org: Uuid,
    page: &PageRequest,
) -> Result<Page<Tag>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT t.* FROM tags t",
        count_from: "FROM tags t",
        alias: "t",
    };
    super::page(
        pool,
        q,
        |qb| {
            qb.push(" WHERE t.organization_id = ").push_bind(org);
        },
        page,
    )
    .await
}

/// The tags joined to each owner (a contact, lead, conversation or ticket) through `link`, by
/// owner id, ordered by name.
pub async fn tags_of(
    db: impl PgExecutor<'_>,
    link: TagLink,
    owners: &[Uuid],
) -> Result<HashMap<Uuid, Vec<Tag>>, sqlx::Error> {
    if owners.is_empty() {
        return Ok(HashMap::new());
    }
    #[derive(sqlx::FromRow)]
    struct Row {
        owner_id: Uuid,
        #[sqlx(flatten)]
        tag: Tag,
    }
    let (table, column) = link.table();
    // Table and column come from the enum, never from input.
    let sql = format!(
        "SELECT l.{column} AS owner_id, t.* FROM {table} l JOIN tags t ON t.id = l.tag_id
         WHERE l.{column} = ANY($1) ORDER BY lower(t.name)"
    );
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(owners)
        .fetch_all(db)
        .await?;
    let mut out: HashMap<Uuid, Vec<Tag>> = HashMap::new();
    for r in rows {
        out.entry(r.owner_id).or_default().push(r.tag);
    }
    Ok(out)
}

/// What tags are joined to, and through which table.
#[derive(Debug, Clone, Copy)]
pub enum TagLink {
    Contact,
    Lead,
    Conversation,
    Ticket,
}

impl TagLink {
    /// The link table and its owner column.
    fn table(self) -> (&'static str, &'static str) {
        match self {
            TagLink::Contact => ("contact_tags", "contact_id"),
            TagLink::Lead => ("lead_tags", "lead_id"),
            TagLink::Conversation => ("conversation_tags", "conversation_id"),
            TagLink::Ticket => ("ticket_tags", "ticket_id"),
        }
    }
}

/// Replaces an owner's tags with `tag_ids`; returns the tags added and removed.
pub async fn set_tags(
    conn: &mut sqlx::PgConnection,
    link: TagLink,
    org: Uuid,
    owner: Uuid,
    tag_ids: &[Uuid],
) -> Result<(Vec<Tag>, Vec<Tag>), sqlx::Error> {
    let before = tags_of(&mut *conn, link, &[owner])
        .await?
        .remove(&owner)
        .unwrap_or_default();
    let (table, column) = link.table();
    let delete = format!("DELETE FROM {table} WHERE {column} = $1 AND NOT (tag_id = ANY($2))");
    let insert = format!(
        "INSERT INTO {table} (organization_id, {column}, tag_id)
         SELECT $1, $2, unnest($3::uuid[]) ON CONFLICT DO NOTHING"
    );
    sqlx::query(sqlx::AssertSqlSafe(delete))
        .bind(owner)
        .bind(tag_ids)
        .execute(&mut *conn)
        .await?;
    sqlx::query(sqlx::AssertSqlSafe(insert))
        .bind(org)
        .bind(owner)
        .bind(tag_ids)
        .execute(&mut *conn)
        .await?;
    let after = tags_of(&mut *conn, link, &[owner])
        .await?
        .remove(&owner)
        .unwrap_or_default();
    let added = after
        .iter()
        .filter(|t| !before.contains(t))
        .cloned()
        .collect();
    let removed = before.into_iter().filter(|t| !after.contains(t)).collect();
    Ok((added, removed))
}

pub async fn insert_company(db: impl PgExecutor<'_>, c: &Company) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO companies (id, organization_id, name, domain, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(c.id)
    .bind(c.organization_id)
    .bind(&c.name)
    .bind(&c.domain)
    .bind(c.created_at)
    .bind(c.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn list_companies(
    pool: &PgPool,
    org: Uuid,
    page: &PageRequest,
) -> Result<Page<Company>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT c.* FROM companies c",
        count_from: "FROM companies c",
        alias: "c",
    };
    super::page(
        pool,
        q,
        |qb| {
            qb.push(" WHERE c.organization_id = ").push_bind(org);
        },
        page,
    )
    .await
}

use std::collections::HashMap;

use parley_types::ids::{CompanyId, OrgId, TagId};
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use super::ListQuery;

use parley_domain::tags::{Company, Tag};
use parley_types::list::{Page, PageRequest};
use parley_types::time::Timestamp;

/// Expands `$run!(table, column)` with the link table of `$link` and its owner column, as
/// literals: one checked statement per link table.
macro_rules! per_link {
    ($link:expr, $run:ident) => {
        match $link {
            TagLink::Contact => $run!("contact_tags", "contact_id"),
            TagLink::Lead => $run!("lead_tags", "lead_id"),
            TagLink::Conversation => $run!("conversation_tags", "conversation_id"),
            TagLink::Ticket => $run!("ticket_tags", "ticket_id"),
        }
    };
}

pub async fn insert_tag(db: impl PgExecutor<'_>, t: &Tag) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO tags (id, organization_id, name, display_name, color, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        t.id,
        t.organization_id,
        &t.name,
        t.display_name.as_deref(),
        t.color.as_deref(),
        t.created_at,
        t.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn list_tags(
    pool: &PgPool,
    org: OrgId,
    page: &PageRequest,
) -> Result<Page<Tag>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT t.* FROM tags t".into(),
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
    struct Row {
        owner_id: Uuid,
        id: Uuid,
        organization_id: Uuid,
        name: String,
        display_name: Option<String>,
        color: Option<String>,
        created_at: Timestamp,
        updated_at: Timestamp,
    }
    macro_rules! read {
        ($table:tt, $column:tt) => {
            sqlx::query_as!(
                Row,
                "SELECT l."
                    + $column
                    + " AS owner_id, t.id, t.organization_id, t.name,
                    t.display_name, t.color, t.created_at, t.updated_at
                 FROM "
                    + $table
                    + " l JOIN tags t ON t.id = l.tag_id
                 WHERE l."
                    + $column
                    + " = ANY($1) ORDER BY lower(t.name)",
                owners,
            )
            .fetch_all(db)
            .await?
        };
    }
    let rows = per_link!(link, read);
    let mut out: HashMap<Uuid, Vec<Tag>> = HashMap::new();
    for r in rows {
        out.entry(r.owner_id).or_default().push(Tag {
            id: r.id,
            organization_id: r.organization_id,
            name: r.name,
            display_name: r.display_name,
            color: r.color,
            created_at: r.created_at,
            updated_at: r.updated_at,
        });
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

/// Replaces an owner's tags with `tag_ids`; returns the tags added and removed.
pub async fn set_tags(
    conn: &mut sqlx::PgConnection,
    link: TagLink,
    org: OrgId,
    owner: Uuid,
    tag_ids: &[Uuid],
) -> Result<(Vec<Tag>, Vec<Tag>), sqlx::Error> {
    let before = tags_of(&mut *conn, link, &[owner])
        .await?
        .remove(&owner)
        .unwrap_or_default();
    // No tags before or after (most new records): nothing to write or to read again.
    if before.is_empty() && tag_ids.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    macro_rules! replace {
        ($table:tt, $column:tt) => {{
            sqlx::query!(
                "DELETE FROM " + $table + " WHERE " + $column + " = $1 AND NOT (tag_id = ANY($2))",
                owner,
                tag_ids,
            )
            .execute(&mut *conn)
            .await?;
            sqlx::query!(
                "INSERT INTO "
                    + $table
                    + " (organization_id, "
                    + $column
                    + ", tag_id)
                 SELECT $1, $2, unnest($3::uuid[]) ON CONFLICT DO NOTHING",
                org.uuid(),
                owner,
                tag_ids,
            )
            .execute(&mut *conn)
            .await?;
        }};
    }
    per_link!(link, replace);
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
    sqlx::query!(
        "INSERT INTO companies (id, organization_id, name, domain, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6)",
        c.id,
        c.organization_id,
        &c.name,
        c.domain.as_deref(),
        c.created_at,
        c.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn list_companies(
    pool: &PgPool,
    org: OrgId,
    page: &PageRequest,
) -> Result<Page<Company>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT c.* FROM companies c".into(),
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

pub async fn get_tag(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: TagId,
    for_update: bool,
) -> Result<Option<Tag>, sqlx::Error> {
    if for_update {
        sqlx::query_as!(
            Tag,
            "SELECT * FROM tags WHERE organization_id = $1 AND id = $2 FOR UPDATE",
            org.uuid(),
            id.uuid(),
        )
        .fetch_optional(db)
        .await
    } else {
        sqlx::query_as!(
            Tag,
            "SELECT * FROM tags WHERE organization_id = $1 AND id = $2",
            org.uuid(),
            id.uuid(),
        )
        .fetch_optional(db)
        .await
    }
}

pub async fn update_tag(db: impl PgExecutor<'_>, t: &Tag) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE tags SET name = $3, display_name = $4, color = $5, updated_at = $6
         WHERE organization_id = $1 AND id = $2",
        t.organization_id,
        t.id,
        &t.name,
        t.display_name.as_deref(),
        t.color.as_deref(),
        t.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Deletes a tag; the contacts, leads, conversations and tickets that had it lose it (the
/// link rows go with it). Whether there was one.
pub async fn delete_tag(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: TagId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM tags WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn get_company(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: CompanyId,
    for_update: bool,
) -> Result<Option<Company>, sqlx::Error> {
    if for_update {
        sqlx::query_as!(
            Company,
            "SELECT * FROM companies WHERE organization_id = $1 AND id = $2 FOR UPDATE",
            org.uuid(),
            id.uuid(),
        )
        .fetch_optional(db)
        .await
    } else {
        sqlx::query_as!(
            Company,
            "SELECT * FROM companies WHERE organization_id = $1 AND id = $2",
            org.uuid(),
            id.uuid(),
        )
        .fetch_optional(db)
        .await
    }
}

pub async fn update_company(db: impl PgExecutor<'_>, c: &Company) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE companies SET name = $3, domain = $4, updated_at = $5
         WHERE organization_id = $1 AND id = $2",
        c.organization_id,
        c.id,
        &c.name,
        c.domain.as_deref(),
        c.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Deletes a company; its contacts stay, without a company. Whether there was one.
pub async fn delete_company(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: CompanyId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM companies WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

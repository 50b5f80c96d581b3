use parley_types::ids::{CategoryId, OrgId};
use sqlx::{PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::ListQuery;

use parley_domain::categories::{CategoryFilter, ConversationCategory};
use parley_types::list::{Page, PageRequest};

/// Slugs like `base` or `base-<n>` already used in the organization.
pub async fn taken_slugs(
    db: impl PgExecutor<'_>,
    org: OrgId,
    base: &str,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT slug FROM conversation_categories WHERE organization_id = $1
           AND (slug = $2 OR slug ~ ('^' || $2 || '-[0-9]+$'))",
        org.uuid(),
        base,
    )
    .fetch_all(db)
    .await
}

pub async fn insert(db: impl PgExecutor<'_>, c: &ConversationCategory) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO conversation_categories (id, organization_id, name, slug, description, icon,
            is_active, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        c.id,
        c.organization_id,
        &c.name,
        &c.slug,
        c.description.as_deref(),
        c.icon.as_deref(),
        c.is_active,
        c.created_at,
        c.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update(db: impl PgExecutor<'_>, c: &ConversationCategory) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE conversation_categories SET name = $3, slug = $4, description = $5, icon = $6,
            is_active = $7, updated_at = $8
         WHERE organization_id = $1 AND id = $2",
        c.organization_id,
        c.id,
        &c.name,
        &c.slug,
        c.description.as_deref(),
        c.icon.as_deref(),
        c.is_active,
        c.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn get(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: CategoryId,
) -> Result<Option<ConversationCategory>, sqlx::Error> {
    sqlx::query_as!(
        ConversationCategory,
        "SELECT * FROM conversation_categories WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(db)
    .await
}

/// Several categories, by id.
pub async fn get_many(
    db: impl PgExecutor<'_>,
    org: OrgId,
    ids: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, ConversationCategory>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let rows: Vec<ConversationCategory> = sqlx::query_as!(
        ConversationCategory,
        "SELECT * FROM conversation_categories WHERE organization_id = $1 AND id = ANY($2)",
        org.uuid(),
        ids,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|c| (c.id, c)).collect())
}

pub async fn lock(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: CategoryId,
) -> Result<Option<ConversationCategory>, sqlx::Error> {
    sqlx::query_as!(
        ConversationCategory,
        "SELECT * FROM conversation_categories WHERE organization_id = $1 AND id = $2 FOR UPDATE",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(db)
    .await
}

fn push_filter(qb: &mut QueryBuilder<Postgres>, org: OrgId, f: &CategoryFilter) {
    qb.push(" WHERE c.organization_id = ").push_bind(org);
    if let Some(active) = f.is_active {
        qb.push(" AND c.is_active = ").push_bind(active);
    }
}

pub async fn list(
    pool: &PgPool,
    org: OrgId,
    f: &CategoryFilter,
    page: &PageRequest,
) -> Result<Page<ConversationCategory>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT c.* FROM conversation_categories c".into(),
        count_from: "FROM conversation_categories c",
        alias: "c",
    };
    super::page(pool, q, |qb| push_filter(qb, org, f), page).await
}

pub async fn delete(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: CategoryId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM conversation_categories WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

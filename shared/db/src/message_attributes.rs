use parley_types::ids::{MessageAttributeId, OrgId};
use sqlx::{PgExecutor, PgPool, Postgres, QueryBuilder};

use super::ListQuery;

use parley_domain::message_attributes::{MessageAttribute, MessageAttributeFilter};
use parley_types::list::{Page, PageRequest};

pub async fn insert(db: impl PgExecutor<'_>, a: &MessageAttribute) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO message_attributes (id, organization_id, key, label, category, data_source,
            default_value, attribute_type, is_active, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        a.id,
        a.organization_id,
        &a.key,
        &a.label,
        a.category.as_deref(),
        a.data_source.as_deref(),
        a.default_value.as_deref(),
        a.attribute_type.as_str(),
        a.is_active,
        a.created_at,
        a.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update(db: impl PgExecutor<'_>, a: &MessageAttribute) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE message_attributes SET key = $3, label = $4, category = $5, data_source = $6,
            default_value = $7, attribute_type = $8, is_active = $9, updated_at = $10
         WHERE organization_id = $1 AND id = $2",
        a.organization_id,
        a.id,
        &a.key,
        &a.label,
        a.category.as_deref(),
        a.data_source.as_deref(),
        a.default_value.as_deref(),
        a.attribute_type.as_str(),
        a.is_active,
        a.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn get(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: MessageAttributeId,
) -> Result<Option<MessageAttribute>, sqlx::Error> {
    sqlx::query_as!(
        MessageAttribute,
        "SELECT * FROM message_attributes WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(db)
    .await
}

pub async fn lock(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: MessageAttributeId,
) -> Result<Option<MessageAttribute>, sqlx::Error> {
    sqlx::query_as!(
        MessageAttribute,
        "SELECT * FROM message_attributes WHERE organization_id = $1 AND id = $2 FOR UPDATE",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(db)
    .await
}

fn push_filter(qb: &mut QueryBuilder<Postgres>, org: OrgId, f: &MessageAttributeFilter) {
    qb.push(" WHERE a.organization_id = ").push_bind(org);
    if let Some(kind) = f.attribute_type {
        qb.push(" AND a.attribute_type = ").push_bind(kind);
    }
    if let Some(active) = f.is_active {
        qb.push(" AND a.is_active = ").push_bind(active);
    }
}

pub async fn list(
    pool: &PgPool,
    org: OrgId,
    f: &MessageAttributeFilter,
    page: &PageRequest,
) -> Result<Page<MessageAttribute>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT a.* FROM message_attributes a".into(),
        count_from: "FROM message_attributes a",
        alias: "a",
    };
    super::page(pool, q, |qb| push_filter(qb, org, f), page).await
}

pub async fn delete(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: MessageAttributeId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM message_attributes WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

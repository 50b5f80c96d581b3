use std::collections::HashMap;

use parley_types::ids::{OrgId, UserId};
use sqlx::{PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::ListQuery;

use parley_domain::users::{User, UserFilter, UserSummary};
use parley_types::list::{Page, PageRequest};

pub async fn insert(db: impl PgExecutor<'_>, u: &User) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO users (id, organization_id, first_name, last_name, email, phone_number, avatar,
            job_title, language, timezone, agent_status, is_active, max_concurrent_chats,
            created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
        u.id,
        u.organization_id,
        &u.first_name,
        &u.last_name,
        &u.email,
        u.phone_number.as_deref(),
        u.avatar.as_deref(),
        u.job_title.as_deref(),
        &u.language,
        &u.timezone,
        u.agent_status.as_str(),
        u.is_active,
        u.max_concurrent_chats,
        u.created_at,
        u.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn get(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: UserId,
) -> Result<Option<User>, sqlx::Error> {
    sqlx::query_as!(
        User,
        "SELECT * FROM users WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(db)
    .await
}

/// The user, locked until the transaction ends.
pub async fn lock(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: UserId,
) -> Result<Option<User>, sqlx::Error> {
    sqlx::query_as!(
        User,
        "SELECT * FROM users WHERE organization_id = $1 AND id = $2 FOR UPDATE",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(db)
    .await
}

pub async fn update(db: impl PgExecutor<'_>, u: &User) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE users SET first_name = $3, last_name = $4, email = $5, phone_number = $6,
            avatar = $7, job_title = $8, language = $9, timezone = $10, agent_status = $11,
            is_active = $12, max_concurrent_chats = $13, updated_at = $14
         WHERE organization_id = $1 AND id = $2",
        u.organization_id,
        u.id,
        &u.first_name,
        &u.last_name,
        &u.email,
        u.phone_number.as_deref(),
        u.avatar.as_deref(),
        u.job_title.as_deref(),
        &u.language,
        &u.timezone,
        u.agent_status.as_str(),
        u.is_active,
        u.max_concurrent_chats,
        u.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Deletes a user: unassigned from conversations and tickets and removed from teams (those
/// rows go with it); leads assigned to the user and records naming the user as creator or
/// assigner keep no one there. Whether there was one.
pub async fn delete(db: impl PgExecutor<'_>, org: OrgId, id: UserId) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM users WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

fn push_filter(qb: &mut QueryBuilder<Postgres>, org: OrgId, f: &UserFilter) {
    qb.push(" WHERE u.organization_id = ").push_bind(org);
    if let Some(active) = f.is_active {
        qb.push(" AND u.is_active = ").push_bind(active);
    }
    if let Some(status) = f.agent_status {
        qb.push(" AND u.agent_status = ").push_bind(status);
    }
}

pub async fn list(
    pool: &PgPool,
    org: OrgId,
    f: &UserFilter,
    page: &PageRequest,
) -> Result<Page<User>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT u.* FROM users u".into(),
        count_from: "FROM users u",
        alias: "u",
    };
    super::page(pool, q, |qb| push_filter(qb, org, f), page).await
}

/// Summaries of the given users, by id.
pub async fn summaries(
    db: impl PgExecutor<'_>,
    org: OrgId,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, UserSummary>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<UserSummary> = sqlx::query_as!(
        UserSummary,
        "SELECT id, first_name, last_name, email, phone_number, avatar FROM users
         WHERE organization_id = $1 AND id = ANY($2)",
        org.uuid(),
        ids,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|u| (u.id, u)).collect())
}

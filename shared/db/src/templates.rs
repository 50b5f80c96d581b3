use parley_types::ids::{OrgId, TemplateId};
use sqlx::{PgExecutor, PgPool, Postgres, QueryBuilder};

use super::ListQuery;

use parley_domain::templates::{Template, TemplateFilter};
use parley_types::list::{Page, PageRequest};

pub async fn insert(db: impl PgExecutor<'_>, t: &Template) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO templates (id, organization_id, name, channel, language, category, subject,
            header, body, footer, buttons, status, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        t.id,
        t.organization_id,
        &t.name,
        t.channel.as_str(),
        &t.language,
        t.category.as_str(),
        t.subject.as_deref(),
        t.header.as_deref(),
        &t.body,
        t.footer.as_deref(),
        &t.buttons as _,
        t.status.as_str(),
        t.created_at,
        t.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update(db: impl PgExecutor<'_>, t: &Template) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE templates SET name = $3, channel = $4, language = $5, category = $6, subject = $7,
            header = $8, body = $9, footer = $10, buttons = $11, status = $12, updated_at = $13
         WHERE organization_id = $1 AND id = $2",
        t.organization_id,
        t.id,
        &t.name,
        t.channel.as_str(),
        &t.language,
        t.category.as_str(),
        t.subject.as_deref(),
        t.header.as_deref(),
        &t.body,
        t.footer.as_deref(),
        &t.buttons as _,
        t.status.as_str(),
        t.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn get(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: TemplateId,
) -> Result<Option<Template>, sqlx::Error> {
    sqlx::query_as!(
        Template,
        "SELECT * FROM templates WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(db)
    .await
}

/// The template, locked against updates until the transaction ends: a broadcast checks its
/// message against the body it reads, which must not change under it.
pub async fn share(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: TemplateId,
) -> Result<Option<Template>, sqlx::Error> {
    sqlx::query_as!(
        Template,
        "SELECT * FROM templates WHERE organization_id = $1 AND id = $2 FOR SHARE",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(db)
    .await
}

pub async fn lock(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: TemplateId,
) -> Result<Option<Template>, sqlx::Error> {
    sqlx::query_as!(
        Template,
        "SELECT * FROM templates WHERE organization_id = $1 AND id = $2 FOR UPDATE",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(db)
    .await
}

fn push_filter(qb: &mut QueryBuilder<Postgres>, org: OrgId, f: &TemplateFilter) {
    qb.push(" WHERE t.organization_id = ").push_bind(org);
    if let Some(channel) = f.channel {
        qb.push(" AND t.channel = ").push_bind(channel);
    }
    if let Some(status) = f.status {
        qb.push(" AND t.status = ").push_bind(status);
    }
    if let Some(category) = f.category {
        qb.push(" AND t.category = ").push_bind(category);
    }
    if let Some(language) = &f.language {
        qb.push(" AND t.language = ")
            .push_bind(language.as_str().to_owned());
    }
}

pub async fn list(
    pool: &PgPool,
    org: OrgId,
    f: &TemplateFilter,
    page: &PageRequest,
) -> Result<Page<Template>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT t.* FROM templates t".into(),
        count_from: "FROM templates t",
        alias: "t",
    };
    super::page(pool, q, |qb| push_filter(qb, org, f), page).await
}

pub async fn delete(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: TemplateId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM templates WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

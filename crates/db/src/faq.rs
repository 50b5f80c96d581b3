use std::collections::HashMap;

use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::ListQuery;

use parley_domain::faq::{Faq, FaqCategory, FaqCollection, FaqCollectionFilter, FaqFilter};
use parley_types::list::{Page, PageRequest};

macro_rules! select_collection {
    () => {
        "SELECT c.*,
            (SELECT count(*) FROM faqs f WHERE f.collection_id = c.id) AS faq_count,
            (SELECT coalesce(sum(f.read_time), 0)::int8 FROM faqs f WHERE f.collection_id = c.id)
                AS total_read_time
         FROM faq_collections c"
    };
}

/// Slugs like `base` or `base-<n>` already used in `(org, locale)` by collections or FAQs.
pub async fn taken_slugs(
    db: impl PgExecutor<'_>,
    of_faqs: bool,
    org: Uuid,
    locale: &str,
    base: &str,
) -> Result<Vec<String>, sqlx::Error> {
    let sql = if of_faqs {
        "SELECT slug FROM faqs WHERE organization_id = $1 AND locale = $2
           AND (slug = $3 OR slug ~ ('^' || $3 || '-[0-9]+$'))"
    } else {
        "SELECT slug FROM faq_collections WHERE organization_id = $1 AND locale = $2
           AND (slug = $3 OR slug ~ ('^' || $3 || '-[0-9]+$'))"
    };
    sqlx::query_scalar(sql)
        .bind(org)
        .bind(locale)
        .bind(base)
        .fetch_all(db)
        .await
}

pub async fn insert_collection(
    db: impl PgExecutor<'_>,
    c: &FaqCollection,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO faq_collections (id, organization_id, name, slug, description, color, icon,
            display_order, is_published, locale, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    )
    .bind(c.id)
    .bind(c.organization_id)
    .bind(&c.name)
    .bind(&c.slug)
    .bind(&c.description)
    .bind(&c.color)
    .bind(&c.icon)
    .bind(c.display_order)
    .bind(c.is_published)
    .bind(&c.locale)
    .bind(c.created_at)
    .bind(c.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update_collection(
    db: impl PgExecutor<'_>,
    c: &FaqCollection,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE faq_collections SET name = $3, slug = $4, description = $5, color = $6, icon = $7,
            display_order = $8, is_published = $9, locale = $10, updated_at = $11
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(c.organization_id)
    .bind(c.id)
    .bind(&c.name)
    .bind(&c.slug)
    .bind(&c.description)
    .bind(&c.color)
    .bind(&c.icon)
    .bind(c.display_order)
    .bind(c.is_published)
    .bind(&c.locale)
    .bind(c.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn get_collection(
    db: impl PgExecutor<'_>,
    org: Uuid,
    id: Uuid,
) -> Result<Option<FaqCollection>, sqlx::Error> {
    sqlx::query_as(concat!(
        select_collection!(),
        " WHERE c.organization_id = $1 AND c.id = $2"
    ))
    .bind(org)
    .bind(id)
    .fetch_optional(db)
    .await
}

pub async fn lock_collection(
    db: impl PgExecutor<'_>,
    org: Uuid,
    id: Uuid,
) -> Result<Option<FaqCollection>, sqlx::Error> {
    sqlx::query_as(concat!(
        select_collection!(),
        " WHERE c.organization_id = $1 AND c.id = $2 FOR UPDATE OF c"
    ))
    .bind(org)
    .bind(id)
    .fetch_optional(db)
    .await
}

fn push_collection_filter(qb: &mut QueryBuilder<Postgres>, org: Uuid, f: &FaqCollectionFilter) {
    qb.push(" WHERE c.organization_id = ").push_bind(org);
    if let Some(locale) = &f.locale {
        qb.push(" AND c.locale = ")
            .push_bind(locale.as_str().to_owned());
    }
    if let Some(published) = f.is_published {
        qb.push(" AND c.is_published = ").push_bind(published);
    }
}

pub async fn list_collections(
    pool: &PgPool,
    org: Uuid,
    f: &FaqCollectionFilter,
    page: &PageRequest,
) -> Result<Page<FaqCollection>, sqlx::Error> {
    let q = ListQuery {
        select: select_collection!(),
        count_from: "FROM faq_collections c",
        alias: "c",
    };
    super::page(pool, q, |qb| push_collection_filter(qb, org, f), page).await
}

pub async fn delete_collection(
    db: impl PgExecutor<'_>,
    org: Uuid,
    id: Uuid,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("DELETE FROM faq_collections WHERE organization_id = $1 AND id = $2")
        .bind(org)
        .bind(id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn insert_category(db: impl PgExecutor<'_>, c: &FaqCategory) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO faq_categories (id, organization_id, collection_id, name, display_order,
            created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(c.id)
    .bind(c.organization_id)
    .bind(c.collection_id)
    .bind(&c.name)
    .bind(c.display_order)
    .bind(c.created_at)
    .bind(c.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update_category(db: impl PgExecutor<'_>, c: &FaqCategory) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE faq_categories SET name = $3, display_order = $4, updated_at = $5
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(c.organization_id)
    .bind(c.id)
    .bind(&c.name)
    .bind(c.display_order)
    .bind(c.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

/// A category of collection `collection` in organization `org`, locked for a change.
pub async fn lock_category(
    db: impl PgExecutor<'_>,
    org: Uuid,
    collection: Uuid,
    id: Uuid,
) -> Result<Option<FaqCategory>, sqlx::Error> {
    sqlx::query_as(
        "SELECT * FROM faq_categories
         WHERE organization_id = $1 AND collection_id = $2 AND id = $3 FOR UPDATE",
    )
    .bind(org)
    .bind(collection)
    .bind(id)
    .fetch_optional(db)
    .await
}

pub async fn list_categories(
    pool: &PgPool,
    org: Uuid,
    collection: Uuid,
    page: &PageRequest,
) -> Result<Page<FaqCategory>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT k.* FROM faq_categories k",
        count_from: "FROM faq_categories k",
        alias: "k",
    };
    super::page(
        pool,
        q,
        |qb| {
            qb.push(" WHERE k.organization_id = ")
                .push_bind(org)
                .push(" AND k.collection_id = ")
                .push_bind(collection);
        },
        page,
    )
    .await
}

pub async fn delete_category(
    db: impl PgExecutor<'_>,
    org: Uuid,
    collection: Uuid,
    id: Uuid,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "DELETE FROM faq_categories WHERE organization_id = $1 AND collection_id = $2 AND id = $3",
    )
    .bind(org)
    .bind(collection)
    .bind(id)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Whether `category` is a category of `collection`.
pub async fn category_in_collection(
    db: impl PgExecutor<'_>,
    collection: Uuid,
    category: Uuid,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM faq_categories WHERE collection_id = $1 AND id = $2)",
    )
    .bind(collection)
    .bind(category)
    .fetch_one(db)
    .await
}

pub async fn insert_faq(db: impl PgExecutor<'_>, f: &Faq) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO faqs (id, organization_id, collection_id, category_id, title, slug, content,
            description, tags, locale, is_featured, is_published, display_order, views, read_time,
            created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
    )
    .bind(f.id)
    .bind(f.organization_id)
    .bind(f.collection_id)
    .bind(f.category_id)
    .bind(&f.title)
    .bind(&f.slug)
    .bind(&f.content)
    .bind(&f.description)
    .bind(&f.tags)
    .bind(&f.locale)
    .bind(f.is_featured)
    .bind(f.is_published)
    .bind(f.display_order)
    .bind(f.views)
    .bind(f.read_time)
    .bind(f.created_at)
    .bind(f.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update_faq(db: impl PgExecutor<'_>, f: &Faq) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE faqs SET category_id = $3, title = $4, slug = $5, content = $6, description = $7,
            tags = $8, locale = $9, is_featured = $10, is_published = $11, display_order = $12,
            read_time = $13, updated_at = $14
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(f.organization_id)
    .bind(f.id)
    .bind(f.category_id)
    .bind(&f.title)
    .bind(&f.slug)
    .bind(&f.content)
    .bind(&f.description)
    .bind(&f.tags)
    .bind(&f.locale)
    .bind(f.is_featured)
    .bind(f.is_published)
    .bind(f.display_order)
    .bind(f.read_time)
    .bind(f.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn get_faq(
    db: impl PgExecutor<'_>,
    org: Uuid,
    collection: Uuid,
    id: Uuid,
) -> Result<Option<Faq>, sqlx::Error> {
    sqlx::query_as(
        "SELECT * FROM faqs WHERE organization_id = $1 AND collection_id = $2 AND id = $3",
    )
    .bind(org)
    .bind(collection)
    .bind(id)
    .fetch_optional(db)
    .await
}

pub async fn lock_faq(
    db: impl PgExecutor<'_>,
    org: Uuid,
    collection: Uuid,
    id: Uuid,
) -> Result<Option<Faq>, sqlx::Error> {
    sqlx::query_as(
        "SELECT * FROM faqs WHERE organization_id = $1 AND collection_id = $2 AND id = $3 FOR UPDATE",
    )
    .bind(org)
    .bind(collection)
    .bind(id)
    .fetch_optional(db)
    .await
}

/// Fills `category` of the given FAQs.
pub async fn embed_categories(
    conn: &mut PgConnection,
    faqs: &mut [Faq],
) -> Result<(), sqlx::Error> {
    let ids: Vec<Uuid> = faqs.iter().filter_map(|f| f.category_id).collect();
    if ids.is_empty() {
        return Ok(());
    }
    let rows: Vec<FaqCategory> = sqlx::query_as("SELECT * FROM faq_categories WHERE id = ANY($1)")
        .bind(&ids)
        .fetch_all(&mut *conn)
        .await?;
    let by_id: HashMap<Uuid, FaqCategory> = rows.into_iter().map(|c| (c.id, c)).collect();
    for f in faqs {
        f.category = f.category_id.and_then(|id| by_id.get(&id).cloned());
    }
    Ok(())
}

/// Every FAQ of a collection, in display order.
pub async fn faqs_of(conn: &mut PgConnection, collection: Uuid) -> Result<Vec<Faq>, sqlx::Error> {
    let mut faqs: Vec<Faq> = sqlx::query_as(
        "SELECT * FROM faqs WHERE collection_id = $1 ORDER BY display_order, created_at, id",
    )
    .bind(collection)
    .fetch_all(&mut *conn)
    .await?;
    embed_categories(conn, &mut faqs).await?;
    Ok(faqs)
}

fn push_faq_filter(qb: &mut QueryBuilder<Postgres>, org: Uuid, collection: Uuid, f: &FaqFilter) {
    qb.push(" WHERE q.organization_id = ")
        .push_bind(org)
        .push(" AND q.collection_id = ")
        .push_bind(collection);
    if let Some(category) = f.category_id {
        qb.push(" AND q.category_id = ").push_bind(category);
    }
    if let Some(published) = f.is_published {
        qb.push(" AND q.is_published = ").push_bind(published);
    }
    if let Some(featured) = f.is_featured {
        qb.push(" AND q.is_featured = ").push_bind(featured);
    }
}

pub async fn list_faqs(
    pool: &PgPool,
    org: Uuid,
    collection: Uuid,
    f: &FaqFilter,
    page: &PageRequest,
) -> Result<Page<Faq>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT q.* FROM faqs q",
        count_from: "FROM faqs q",
        alias: "q",
    };
    let mut page = super::page(pool, q, |qb| push_faq_filter(qb, org, collection, f), page).await?;
    let mut conn = pool.acquire().await?;
    embed_categories(&mut conn, page.items_mut()).await?;
    Ok(page)
}

pub async fn delete_faq(
    db: impl PgExecutor<'_>,
    org: Uuid,
    collection: Uuid,
    id: Uuid,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "DELETE FROM faqs WHERE organization_id = $1 AND collection_id = $2 AND id = $3",
    )
    .bind(org)
    .bind(collection)
    .bind(id)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

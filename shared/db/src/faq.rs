use std::collections::HashMap;

use parley_types::ids::{FaqCategoryId, FaqCollectionId, FaqId, OrgId};
use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::ListQuery;
use parley_domain::faq::{Faq, FaqCategory, FaqCollection, FaqCollectionFilter, FaqFilter};
use parley_types::list::{Page, PageRequest};
use parley_types::time::Timestamp;

/// Slugs like `base` or `base-<n>` already used in `(org, locale)` by collections or FAQs.
pub async fn taken_slugs(
    db: impl PgExecutor<'_>,
    of_faqs: bool,
    org: OrgId,
    locale: &str,
    base: &str,
) -> Result<Vec<String>, sqlx::Error> {
    if of_faqs {
        sqlx::query_scalar!(
            "SELECT slug FROM faqs WHERE organization_id = $1 AND locale = $2
               AND (slug = $3 OR slug ~ ('^' || $3 || '-[0-9]+$'))",
            org.uuid(),
            locale,
            base,
        )
        .fetch_all(db)
        .await
    } else {
        sqlx::query_scalar!(
            "SELECT slug FROM faq_collections WHERE organization_id = $1 AND locale = $2
               AND (slug = $3 OR slug ~ ('^' || $3 || '-[0-9]+$'))",
            org.uuid(),
            locale,
            base,
        )
        .fetch_all(db)
        .await
    }
}

pub async fn insert_collection(
    db: impl PgExecutor<'_>,
    c: &FaqCollection,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO faq_collections (id, organization_id, name, slug, description, color, icon,
            display_order, is_published, locale, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        c.id,
        c.organization_id,
        &c.name,
        &c.slug,
        c.description.as_deref(),
        c.color.as_deref(),
        c.icon.as_deref(),
        c.display_order,
        c.is_published,
        &c.locale,
        c.created_at,
        c.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update_collection(
    db: impl PgExecutor<'_>,
    c: &FaqCollection,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE faq_collections SET name = $3, slug = $4, description = $5, color = $6, icon = $7,
            display_order = $8, is_published = $9, locale = $10, updated_at = $11
         WHERE organization_id = $1 AND id = $2",
        c.organization_id,
        c.id,
        &c.name,
        &c.slug,
        c.description.as_deref(),
        c.color.as_deref(),
        c.icon.as_deref(),
        c.display_order,
        c.is_published,
        &c.locale,
        c.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn get_collection(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: FaqCollectionId,
) -> Result<Option<FaqCollection>, sqlx::Error> {
    Ok(collections(db, org, &[id.uuid()]).await?.pop())
}

/// The collections of `org` among `ids`, in no particular order, with their figures.
async fn collections(
    db: impl PgExecutor<'_>,
    org: OrgId,
    ids: &[Uuid],
) -> Result<Vec<FaqCollection>, sqlx::Error> {
    let rows = sqlx::query_as!(
        FaqCollectionRow,
        r#"SELECT c.id, c.organization_id, c.name, c.slug, c.description, c.color, c.icon,
            c.display_order, c.is_published, c.locale,
            coalesce(k.faq_count, 0) AS "faq_count!",
            coalesce(k.total_read_time, 0) AS "total_read_time!",
            c.created_at, c.updated_at
         FROM faq_collections c LEFT JOIN faq_collection_totals k ON k.collection_id = c.id
         WHERE c.organization_id = $1 AND c.id = ANY($2)"#,
        org.uuid(),
        ids,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(FaqCollection::from).collect())
}

pub async fn lock_collection(
    conn: &mut PgConnection,
    org: OrgId,
    id: FaqCollectionId,
) -> Result<Option<FaqCollection>, sqlx::Error> {
    let found = sqlx::query_scalar!(
        "SELECT id FROM faq_collections WHERE organization_id = $1 AND id = $2 FOR UPDATE",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(&mut *conn)
    .await?;
    match found {
        Some(_) => get_collection(conn, org, id).await,
        None => Ok(None),
    }
}

fn push_collection_filter(qb: &mut QueryBuilder<Postgres>, org: OrgId, f: &FaqCollectionFilter) {
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
    org: OrgId,
    f: &FaqCollectionFilter,
    page: &PageRequest,
) -> Result<Page<FaqCollection>, sqlx::Error> {
    super::page_of(
        pool,
        "FROM faq_collections c",
        "c",
        |qb| push_collection_filter(qb, org, f),
        page,
        |ids| async move { collections(pool, org, &ids).await },
    )
    .await
}

pub async fn delete_collection(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: FaqCollectionId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM faq_collections WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub async fn insert_category(db: impl PgExecutor<'_>, c: &FaqCategory) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO faq_categories (id, organization_id, collection_id, name, display_order,
            created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
        c.id,
        c.organization_id,
        c.collection_id,
        &c.name,
        c.display_order,
        c.created_at,
        c.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update_category(db: impl PgExecutor<'_>, c: &FaqCategory) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE faq_categories SET name = $3, display_order = $4, updated_at = $5
         WHERE organization_id = $1 AND id = $2",
        c.organization_id,
        c.id,
        &c.name,
        c.display_order,
        c.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// A category of collection `collection` in organization `org`, locked for a change.
pub async fn lock_category(
    db: impl PgExecutor<'_>,
    org: OrgId,
    collection: FaqCollectionId,
    id: FaqCategoryId,
) -> Result<Option<FaqCategory>, sqlx::Error> {
    sqlx::query_as!(
        FaqCategory,
        "SELECT * FROM faq_categories
         WHERE organization_id = $1 AND collection_id = $2 AND id = $3 FOR UPDATE",
        org.uuid(),
        collection.uuid(),
        id.uuid(),
    )
    .fetch_optional(db)
    .await
}

pub async fn list_categories(
    pool: &PgPool,
    org: OrgId,
    collection: FaqCollectionId,
    page: &PageRequest,
) -> Result<Page<FaqCategory>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT k.* FROM faq_categories k".into(),
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
    org: OrgId,
    collection: FaqCollectionId,
    id: FaqCategoryId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM faq_categories WHERE organization_id = $1 AND collection_id = $2 AND id = $3",
        org.uuid(),
        collection.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Whether `category` is a category of `collection`.
pub async fn category_in_collection(
    db: impl PgExecutor<'_>,
    collection: FaqCollectionId,
    category: FaqCategoryId,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM faq_categories WHERE collection_id = $1 AND id = $2) AS "exists!""#,
        collection.uuid(),
        category.uuid(),
    )
    .fetch_one(db)
    .await
}

pub async fn insert_faq(db: impl PgExecutor<'_>, f: &Faq) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO faqs (id, organization_id, collection_id, category_id, title, slug, content,
            description, tags, locale, is_featured, is_published, display_order, views, read_time,
            created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
        f.id,
        f.organization_id,
        f.collection_id,
        f.category_id,
        &f.title,
        &f.slug,
        &f.content,
        f.description.as_deref(),
        &f.tags,
        &f.locale,
        f.is_featured,
        f.is_published,
        f.display_order,
        f.views,
        f.read_time,
        f.created_at,
        f.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update_faq(db: impl PgExecutor<'_>, f: &Faq) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE faqs SET category_id = $3, title = $4, slug = $5, content = $6, description = $7,
            tags = $8, locale = $9, is_featured = $10, is_published = $11, display_order = $12,
            read_time = $13, updated_at = $14
         WHERE organization_id = $1 AND id = $2",
        f.organization_id,
        f.id,
        f.category_id,
        &f.title,
        &f.slug,
        &f.content,
        f.description.as_deref(),
        &f.tags,
        &f.locale,
        f.is_featured,
        f.is_published,
        f.display_order,
        f.read_time,
        f.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn get_faq(
    db: impl PgExecutor<'_>,
    org: OrgId,
    collection: FaqCollectionId,
    id: FaqId,
) -> Result<Option<Faq>, sqlx::Error> {
    Ok(faqs(db, org, collection, Some(&[id.uuid()])).await?.pop())
}

/// The FAQs of a collection (those among `ids`, or all), in display order.
async fn faqs(
    db: impl PgExecutor<'_>,
    org: OrgId,
    collection: FaqCollectionId,
    ids: Option<&[Uuid]>,
) -> Result<Vec<Faq>, sqlx::Error> {
    let rows = sqlx::query_as!(
        FaqRow,
        "SELECT q.id, q.organization_id, q.collection_id, q.category_id, q.title, q.slug, q.content,
            q.description, q.tags, q.locale, q.is_featured, q.is_published, q.display_order,
            q.views, q.read_time, q.created_at, q.updated_at
         FROM faqs q WHERE q.organization_id = $1 AND q.collection_id = $2
           AND ($3::uuid[] IS NULL OR q.id = ANY($3))
         ORDER BY q.display_order, q.created_at, q.id",
        org.uuid(),
        collection.uuid(),
        ids,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Faq::from).collect())
}

pub async fn lock_faq(
    conn: &mut PgConnection,
    org: OrgId,
    collection: FaqCollectionId,
    id: FaqId,
) -> Result<Option<Faq>, sqlx::Error> {
    let found = sqlx::query_scalar!(
        "SELECT id FROM faqs WHERE organization_id = $1 AND collection_id = $2 AND id = $3
         FOR UPDATE",
        org.uuid(),
        collection.uuid(),
        id.uuid(),
    )
    .fetch_optional(&mut *conn)
    .await?;
    match found {
        Some(_) => get_faq(conn, org, collection, id).await,
        None => Ok(None),
    }
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
    let rows: Vec<FaqCategory> = sqlx::query_as!(
        FaqCategory,
        "SELECT * FROM faq_categories WHERE id = ANY($1)",
        &ids,
    )
    .fetch_all(&mut *conn)
    .await?;
    let by_id: HashMap<Uuid, FaqCategory> = rows.into_iter().map(|c| (c.id, c)).collect();
    for f in faqs {
        f.category = f.category_id.and_then(|id| by_id.get(&id).cloned());
    }
    Ok(())
}

/// Every FAQ of a collection, in display order.
pub async fn faqs_of(
    conn: &mut PgConnection,
    org: OrgId,
    collection: FaqCollectionId,
) -> Result<Vec<Faq>, sqlx::Error> {
    let mut found = faqs(&mut *conn, org, collection, None).await?;
    embed_categories(conn, &mut found).await?;
    Ok(found)
}

fn push_faq_filter(
    qb: &mut QueryBuilder<Postgres>,
    org: OrgId,
    collection: FaqCollectionId,
    f: &FaqFilter,
) {
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
    org: OrgId,
    collection: FaqCollectionId,
    f: &FaqFilter,
    page: &PageRequest,
) -> Result<Page<Faq>, sqlx::Error> {
    super::page_of(
        pool,
        "FROM faqs q",
        "q",
        |qb| push_faq_filter(qb, org, collection, f),
        page,
        |ids| async move {
            let mut conn = pool.acquire().await?;
            let mut found = faqs(&mut *conn, org, collection, Some(&ids)).await?;
            embed_categories(&mut conn, &mut found).await?;
            Ok(found)
        },
    )
    .await
}

pub async fn delete_faq(
    db: impl PgExecutor<'_>,
    org: OrgId,
    collection: FaqCollectionId,
    id: FaqId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM faqs WHERE organization_id = $1 AND collection_id = $2 AND id = $3",
        org.uuid(),
        collection.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// FaqCollection as its checked statements read it (what it embeds is read apart).
struct FaqCollectionRow {
    id: Uuid,
    organization_id: Uuid,
    name: String,
    slug: String,
    description: Option<String>,
    color: Option<String>,
    icon: Option<String>,
    display_order: i32,
    is_published: bool,
    locale: String,
    faq_count: i64,
    total_read_time: i64,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<FaqCollectionRow> for FaqCollection {
    fn from(r: FaqCollectionRow) -> Self {
        Self {
            id: r.id,
            organization_id: r.organization_id,
            name: r.name,
            slug: r.slug,
            description: r.description,
            color: r.color,
            icon: r.icon,
            display_order: r.display_order,
            is_published: r.is_published,
            locale: r.locale,
            faq_count: r.faq_count,
            total_read_time: r.total_read_time,
            faqs: Default::default(),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Faq as its checked statements read it (what it embeds is read apart).
struct FaqRow {
    id: Uuid,
    organization_id: Uuid,
    collection_id: Uuid,
    category_id: Option<Uuid>,
    title: String,
    slug: String,
    content: String,
    description: Option<String>,
    tags: Vec<String>,
    locale: String,
    is_featured: bool,
    is_published: bool,
    display_order: i32,
    views: i64,
    read_time: i32,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<FaqRow> for Faq {
    fn from(r: FaqRow) -> Self {
        Self {
            id: r.id,
            organization_id: r.organization_id,
            collection_id: r.collection_id,
            category_id: r.category_id,
            category: Default::default(),
            title: r.title,
            slug: r.slug,
            content: r.content,
            description: r.description,
            tags: r.tags,
            locale: r.locale,
            is_featured: r.is_featured,
            is_published: r.is_published,
            display_order: r.display_order,
            views: r.views,
            read_time: r.read_time,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

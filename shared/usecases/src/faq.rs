//! FAQ collections, their categories and their FAQs: each change in one transaction with its
//! checks (the collection is the organization's, the category the collection's, a derived
//! slug free in its locale).

use parley_db as db;
use parley_domain::faq::{
    CreateFaq, CreateFaqCategory, CreateFaqCollection, Faq, FaqCategory, FaqCollection,
    FaqCollectionFilter, FaqFilter, UpdateFaq, UpdateFaqCategory, UpdateFaqCollection,
};
use parley_types::error::AppError;
use parley_types::fields::next_free_slug;
use parley_types::ids::{FaqCategoryId, FaqCollectionId, FaqId, OrgId};
use parley_types::list::{Page, PageRequest};
use sqlx::PgConnection;

use crate::{Caller, Ctx, Result, changed};

/// The collection with its FAQs, as the API shows it.
pub async fn read_collection(
    ctx: Ctx<'_>,
    org: OrgId,
    id: FaqCollectionId,
) -> Result<FaqCollection> {
    read_collection_in(&mut *ctx.pool.acquire().await?, org, id).await
}

/// A page of the organization's collections.
pub async fn list_collections(
    ctx: Ctx<'_>,
    org: OrgId,
    filter: &FaqCollectionFilter,
    page: &PageRequest,
) -> Result<Page<FaqCollection>> {
    Ok(db::faq::list_collections(ctx.pool, org, filter, page).await?)
}

/// A page of a collection's categories (404 for another organization's collection).
pub async fn list_categories(
    ctx: Ctx<'_>,
    org: OrgId,
    collection: FaqCollectionId,
    page: &PageRequest,
) -> Result<Page<FaqCategory>> {
    collection_in(&mut *ctx.pool.acquire().await?, org, collection).await?;
    Ok(db::faq::list_categories(ctx.pool, org, collection, page).await?)
}

/// A page of a collection's FAQs (404 for another organization's collection).
pub async fn list_faqs(
    ctx: Ctx<'_>,
    org: OrgId,
    collection: FaqCollectionId,
    filter: &FaqFilter,
    page: &PageRequest,
) -> Result<Page<Faq>> {
    collection_in(&mut *ctx.pool.acquire().await?, org, collection).await?;
    Ok(db::faq::list_faqs(ctx.pool, org, collection, filter, page).await?)
}

/// The FAQ with its category embedded.
pub async fn read_faq(
    ctx: Ctx<'_>,
    org: OrgId,
    collection: FaqCollectionId,
    id: FaqId,
) -> Result<Faq> {
    read_faq_in(&mut *ctx.pool.acquire().await?, org, collection, id).await
}

/// Deletes a collection with its categories and FAQs.
pub async fn delete_collection(ctx: Ctx<'_>, caller: &Caller, id: FaqCollectionId) -> Result<()> {
    changed(db::faq::delete_collection(ctx.pool, caller.org_id, id).await?)
}

/// Deletes a category of a collection.
pub async fn delete_category(
    ctx: Ctx<'_>,
    caller: &Caller,
    collection: FaqCollectionId,
    id: FaqCategoryId,
) -> Result<()> {
    changed(db::faq::delete_category(ctx.pool, caller.org_id, collection, id).await?)
}

/// Deletes an FAQ of a collection.
pub async fn delete_faq(
    ctx: Ctx<'_>,
    caller: &Caller,
    collection: FaqCollectionId,
    id: FaqId,
) -> Result<()> {
    changed(db::faq::delete_faq(ctx.pool, caller.org_id, collection, id).await?)
}

async fn read_collection_in(
    conn: &mut PgConnection,
    org: OrgId,
    id: FaqCollectionId,
) -> Result<FaqCollection> {
    let mut c = collection_in(&mut *conn, org, id).await?;
    c.faqs = Some(db::faq::faqs_of(conn, org, id).await?);
    Ok(c)
}

/// The organization's collection (404 otherwise).
async fn collection_in(
    conn: &mut PgConnection,
    org: OrgId,
    id: FaqCollectionId,
) -> Result<FaqCollection> {
    Ok(db::faq::get_collection(conn, org, id)
        .await?
        .ok_or(AppError::NotFound)?)
}

async fn read_faq_in(
    conn: &mut PgConnection,
    org: OrgId,
    collection: FaqCollectionId,
    id: FaqId,
) -> Result<Faq> {
    let mut faq = db::faq::get_faq(&mut *conn, org, collection, id)
        .await?
        .ok_or(AppError::NotFound)?;
    db::faq::embed_categories(conn, std::slice::from_mut(&mut faq)).await?;
    Ok(faq)
}

async fn check_category(
    conn: &mut PgConnection,
    collection: FaqCollectionId,
    category: Option<FaqCategoryId>,
) -> Result<()> {
    match category {
        Some(c) if !db::faq::category_in_collection(conn, collection, c).await? => {
            Err(AppError::validation(
                "categoryId",
                "not_found",
                format!("{c} is not a category of this collection"),
            )
            .into())
        }
        _ => Ok(()),
    }
}

#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn create_collection(
    ctx: Ctx<'_>,
    caller: &Caller,
    req: CreateFaqCollection,
) -> Result<FaqCollection> {
    let (mut c, derived) = req.into_collection(caller.org_id.uuid());
    let mut tx = ctx.pool.begin().await?;
    if derived {
        let taken =
            db::faq::taken_slugs(&mut *tx, false, caller.org_id, &c.locale, &c.slug).await?;
        c.slug = next_free_slug(&c.slug, &taken);
    }
    db::faq::insert_collection(&mut *tx, &c).await?;
    tx.commit().await?;
    c.faqs = Some(Vec::new());
    Ok(c)
}

#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, collection_id = %id))]
pub async fn update_collection(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: FaqCollectionId,
    req: UpdateFaqCollection,
) -> Result<FaqCollection> {
    let mut tx = ctx.pool.begin().await?;
    let mut c = db::faq::lock_collection(&mut tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut c);
    db::faq::update_collection(&mut *tx, &c).await?;
    let c = read_collection_in(&mut tx, caller.org_id, id).await?;
    tx.commit().await?;
    Ok(c)
}

#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, collection_id = %id))]
pub async fn create_category(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: FaqCollectionId,
    req: CreateFaqCategory,
) -> Result<FaqCategory> {
    let mut tx = ctx.pool.begin().await?;
    collection_in(&mut tx, caller.org_id, id).await?;
    let category = req.into_category(caller.org_id, id);
    db::faq::insert_category(&mut *tx, &category).await?;
    tx.commit().await?;
    Ok(category)
}

#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, collection_id = %id, category_id = %category_id))]
pub async fn update_category(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: FaqCollectionId,
    category_id: FaqCategoryId,
    req: UpdateFaqCategory,
) -> Result<FaqCategory> {
    let mut tx = ctx.pool.begin().await?;
    let mut category = db::faq::lock_category(&mut *tx, caller.org_id, id, category_id)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut category);
    db::faq::update_category(&mut *tx, &category).await?;
    tx.commit().await?;
    Ok(category)
}

#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, collection_id = %id))]
pub async fn create_faq(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: FaqCollectionId,
    req: CreateFaq,
) -> Result<Faq> {
    let mut tx = ctx.pool.begin().await?;
    let c = collection_in(&mut tx, caller.org_id, id).await?;
    let (mut faq, derived) = req.into_faq(&c)?;
    check_category(&mut tx, id, faq.category_id.map(FaqCategoryId::from)).await?;
    if derived {
        let taken =
            db::faq::taken_slugs(&mut *tx, true, caller.org_id, &faq.locale, &faq.slug).await?;
        faq.slug = next_free_slug(&faq.slug, &taken);
    }
    db::faq::insert_faq(&mut *tx, &faq).await?;
    db::faq::embed_categories(&mut tx, std::slice::from_mut(&mut faq)).await?;
    tx.commit().await?;
    Ok(faq)
}

#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, collection_id = %id, faq_id = %faq_id))]
pub async fn update_faq(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: FaqCollectionId,
    faq_id: FaqId,
    req: UpdateFaq,
) -> Result<Faq> {
    let mut tx = ctx.pool.begin().await?;
    let mut faq = db::faq::lock_faq(&mut tx, caller.org_id, id, faq_id)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut faq)?;
    check_category(&mut tx, id, faq.category_id.map(FaqCategoryId::from)).await?;
    db::faq::update_faq(&mut *tx, &faq).await?;
    let faq = read_faq_in(&mut tx, caller.org_id, id, faq_id).await?;
    tx.commit().await?;
    Ok(faq)
}

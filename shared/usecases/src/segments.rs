//! Segments: read, listed, counted and deleted; created and changed, each in one transaction
//! with the check of the tags its filter names.

use parley_db as db;
use parley_db::refs::{self, RefTable};
use parley_domain::segments::{CreateSegment, MAX_TAGS, Segment, SegmentCount, UpdateSegment};
use parley_types::error::AppError;
use parley_types::ids::{OrgId, SegmentId};
use parley_types::list::{Page, PageRequest};

use crate::{Caller, Ctx, Result, changed, found};

/// Creates a segment.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn create(ctx: Ctx<'_>, caller: &Caller, req: CreateSegment) -> Result<Segment> {
    let segment = req.into_segment(caller.org_id.uuid())?;
    let mut tx = ctx.pool.begin().await?;
    check_tags(&mut tx, caller.org_id, &segment).await?;
    db::segments::insert(&mut *tx, &segment).await?;
    tx.commit().await?;
    Ok(segment)
}

/// Changes a segment.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: SegmentId,
    req: UpdateSegment,
) -> Result<Segment> {
    let mut tx = ctx.pool.begin().await?;
    let mut segment = db::segments::get(&mut *tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    // Only a new filter's tags are checked: a tag deleted since does not lock the segment.
    let new_filter = req.filter.is_some();
    req.apply(&mut segment)?;
    if new_filter {
        check_tags(&mut tx, caller.org_id, &segment).await?;
    }
    db::segments::update(&mut *tx, &segment).await?;
    tx.commit().await?;
    Ok(segment)
}

async fn check_tags(conn: &mut sqlx::PgConnection, org: OrgId, segment: &Segment) -> Result<()> {
    refs::check_ids(
        conn,
        RefTable::Tags,
        org,
        "filter.tagIds",
        &segment.filter.tag_ids,
        MAX_TAGS,
    )
    .await?;
    Ok(())
}

/// Deletes the organization's segment; 404 when there is none.
pub async fn delete(ctx: Ctx<'_>, caller: &Caller, id: SegmentId) -> Result<()> {
    changed(db::segments::delete(ctx.pool, caller.org_id, id).await?)
}

/// A page of the organization's segments.
pub async fn list(ctx: Ctx<'_>, org: OrgId, page: &PageRequest) -> Result<Page<Segment>> {
    Ok(db::segments::list(ctx.pool, org, page).await?)
}

/// The organization's segment.
pub async fn read(ctx: Ctx<'_>, org: OrgId, id: SegmentId) -> Result<Segment> {
    found(db::segments::get(ctx.pool, org, id).await?)
}

/// How many contacts the segment holds now, and how many of them a broadcast would skip.
pub async fn count(ctx: Ctx<'_>, org: OrgId, segment: &Segment) -> Result<SegmentCount> {
    Ok(db::segments::count(ctx.pool, org, &segment.filter).await?)
}

//! Files' records (their objects are in the store, which the API reaches): recorded `pending`,
//! marked uploaded or deleted; and the retention of abandoned uploads, files still `pending`
//! long after their upload URL expired, removed with their objects a batch per transaction.

use std::time::Duration;

use parley_db as db;
use parley_domain::files::File;
use parley_types::error::AppError;
use parley_types::ids::{FileId, OrgId};
use uuid::Uuid;

use crate::{Caller, Ctx, Result, changed, found};

/// Takes up to `limit` files still `pending` longer than `older_than` after their creation
/// (skipping those another process holds), deletes each one's object with `delete_object`
/// (given its key; `false` when it could not), then the rows of those whose object went:
/// a file whose object stays keeps its row and is tried again. Returns the files removed.
#[tracing::instrument(skip_all)]
pub async fn sweep_abandoned<F, Fut>(
    ctx: Ctx<'_>,
    older_than: Duration,
    limit: i64,
    mut delete_object: F,
) -> Result<u64>
where
    F: FnMut(Uuid, String) -> Fut,
    Fut: Future<Output = bool>,
{
    let mut tx = ctx.pool.begin().await?;
    let abandoned = db::files::take_abandoned(&mut tx, older_than, limit).await?;
    let mut removed = Vec::with_capacity(abandoned.len());
    for (id, key) in abandoned {
        if delete_object(id, key).await {
            removed.push(id);
        }
    }
    let n = db::files::delete_many(&mut *tx, &removed).await?;
    tx.commit().await?;
    Ok(n)
}

/// The organization's file.
pub async fn read(ctx: Ctx<'_>, org: OrgId, id: FileId) -> Result<File> {
    found(db::files::get(ctx.pool, org, id).await?)
}

/// Records a file of the caller's organization `pending`: its object is put in the store
/// after (a client's upload, or the API's own), so a store call that fails leaves a pending
/// file the sweep removes.
pub async fn record_pending(ctx: Ctx<'_>, caller: &Caller, file: &File) -> Result<()> {
    if file.organization_id != caller.org_id.uuid() {
        return Err(AppError::Internal(anyhow::anyhow!("a file of another organization")).into());
    }
    Ok(db::files::insert(ctx.pool, file).await?)
}

/// Marks the file uploaded with the stored object's size and ETag.
pub async fn mark_uploaded(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: FileId,
    size: i64,
    hash: Option<&str>,
) -> Result<File> {
    found(db::files::mark_uploaded(ctx.pool, caller.org_id, id, size, hash).await?)
}

/// Marks the file deleted (its object removed already); attachments keep showing the record.
pub async fn mark_deleted(ctx: Ctx<'_>, caller: &Caller, id: FileId) -> Result<()> {
    changed(db::files::mark_deleted(ctx.pool, caller.org_id, id).await?)
}

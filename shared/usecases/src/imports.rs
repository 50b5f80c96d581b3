//! Contact imports: created (queued, and handed to the workers) and read. A file sent in the
//! request and stored by the API becomes an import in one transaction (the file marked uploaded, the import queued); the worker applies the
//! file's rows a batch per transaction, so a job that dies resumes where the last batch ended.

use parley_types::ids::FileId;
use std::time::Duration;

use parley_db as db;
use parley_db::imports::BatchCounts;
use parley_domain::imports::{self, ContactImport, ImportFormat, MatchedRows};
use parley_types::ids::{ImportId, OrgId};
use uuid::Uuid;

use crate::{Caller, Ctx, Result, found};
pub use parley_db::imports::{ImportBatch, ImportError, ImportJob};

/// A file the API put in object storage.
pub struct StoredFile<'a> {
    pub id: Uuid,
    pub size: i64,
    pub etag: Option<&'a str>,
    /// Where the worker downloads it from (a presigned URL).
    pub download_url: &'a str,
}

/// Marks the stored file uploaded and creates its import, `queued`, handed to the workers.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, file_id = %file.id))]
pub async fn import_stored_file(
    ctx: Ctx<'_>,
    caller: &Caller,
    file: StoredFile<'_>,
    format: ImportFormat,
) -> Result<ContactImport> {
    let mut tx = ctx.pool.begin().await?;
    db::files::mark_uploaded(
        &mut *tx,
        caller.org_id,
        FileId::from(file.id),
        file.size,
        file.etag,
    )
    .await?;
    let import = db::imports::create(
        &mut *tx,
        caller.org_id,
        format,
        None,
        Some(file.id),
        Some(file.download_url),
    )
    .await?;
    tx.commit().await?;
    enqueue(ctx, &import).await;
    Ok(import)
}

/// Upserts a batch of rows and records it on the import (counts, rejected rows, rows read),
/// in one transaction, if `token` still holds the import. A row matches the organization's
/// contact with its email (without case), else the oldest with its phone
/// ([`imports::match_rows`]); a match takes the row's non-empty fields, a row without one
/// creates a contact. A row with `unsubscribed` adds its ledger entry (source `import`) with
/// its `contact.suppressed` event; an entry already held is left as it is.
#[tracing::instrument(skip_all, fields(import_id = %import, organization_id = %org, rows = batch.rows.len()))]
pub async fn apply_batch(
    ctx: Ctx<'_>,
    import: ImportId,
    token: Uuid,
    org: OrgId,
    batch: ImportBatch<'_>,
    lease: Duration,
) -> std::result::Result<BatchCounts, ImportError> {
    let mut tx = ctx.pool.begin().await?;
    if !db::imports::fence_batch(&mut tx, import, token).await? {
        return Err(ImportError::LeaseLost);
    }
    let rows = batch.rows;
    let by_email = db::imports::contacts_by_email(&mut *tx, org, &imports::emails_of(rows)).await?;
    let phones = imports::phones_of(rows, &by_email);
    let by_phone = db::imports::contacts_by_phone(&mut *tx, org, &phones).await?;
    let MatchedRows { existing, new } = imports::match_rows(rows, &by_email, &by_phone);
    let updated = db::imports::update_matched(&mut *tx, org, &existing).await?;
    let created = db::imports::insert_new(&mut *tx, org, &new).await?;
    let now = ctx.clock.now();
    let unsubscribes: Vec<_> = rows
        .iter()
        .filter_map(|r| r.unsubscribe(org, now))
        .collect();
    crate::suppressions::write(&mut tx, &unsubscribes).await?;
    let counts = BatchCounts {
        created: created as i32,
        updated: updated as i32,
        unchanged: (rows.len() + batch.folded - created - updated) as i32,
    };
    db::imports::record_batch(
        &mut *tx,
        import,
        counts,
        batch.rejected,
        batch.rows_read,
        lease,
    )
    .await?;
    tx.commit().await?;
    Ok(counts)
}

// The import job's and the reconciler's single statements, each through to its namesake in
// `parley_db::imports`, whose doc says what it does.

pub async fn begin(
    ctx: Ctx<'_>,
    id: ImportId,
    lease: Duration,
    per_org: i64,
) -> std::result::Result<Option<ImportJob>, sqlx::Error> {
    db::imports::begin(ctx.pool, id, lease, per_org).await
}

pub async fn finish(
    ctx: Ctx<'_>,
    id: ImportId,
    token: Uuid,
    failure: Option<&str>,
) -> std::result::Result<(), ImportError> {
    db::imports::finish(ctx.pool, id, token, failure).await
}

pub async fn next_waiting(
    ctx: Ctx<'_>,
    org: OrgId,
) -> std::result::Result<Option<Uuid>, sqlx::Error> {
    db::imports::next_waiting(ctx.pool, org).await
}

pub async fn renew(
    ctx: Ctx<'_>,
    id: ImportId,
    token: Uuid,
    lease: Duration,
) -> std::result::Result<bool, sqlx::Error> {
    db::imports::renew(ctx.pool, id, token, lease).await
}

pub async fn stale(
    ctx: Ctx<'_>,
    after: Duration,
    limit: i64,
) -> std::result::Result<Vec<Uuid>, sqlx::Error> {
    db::imports::stale(ctx.pool, after, limit).await
}

/// Creates an import, `queued`, of rows sent in the request (`data`) or of an uploaded file
/// the workers download (`file`: its id and a download URL), and hands it to the workers.
pub async fn create(
    ctx: Ctx<'_>,
    caller: &Caller,
    format: ImportFormat,
    data: Option<&[u8]>,
    file: Option<(Uuid, &str)>,
) -> Result<ContactImport> {
    let import = db::imports::create(
        ctx.pool,
        caller.org_id,
        format,
        data,
        file.map(|(id, _)| id),
        file.map(|(_, url)| url),
    )
    .await?;
    enqueue(ctx, &import).await;
    Ok(import)
}

/// The organization's import, with its progress and result.
pub async fn read(ctx: Ctx<'_>, org: OrgId, id: ImportId) -> Result<ContactImport> {
    found(db::imports::get(ctx.pool, org, id).await?)
}

/// Hands a queued import to the workers; when Redis does not take it, the reconciler will.
async fn enqueue(ctx: Ctx<'_>, import: &ContactImport) {
    if let Err(err) = ctx.jobs.import_contacts(import.id).await {
        tracing::warn!(import_id = %import.id, %err, "import not enqueued; the reconciler will");
    }
}

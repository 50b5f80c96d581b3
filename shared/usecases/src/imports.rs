//! Contact imports: a file sent in the request and stored by the API becomes an import in
//! one transaction (the file marked uploaded, the import queued).

use parley_db as db;
use parley_domain::imports::{ContactImport, ImportFormat};
use uuid::Uuid;

use crate::{Caller, Ctx, Result};

/// A file the API put in object storage.
pub struct StoredFile<'a> {
    pub id: Uuid,
    pub size: i64,
    pub etag: Option<&'a str>,
    /// Where the worker downloads it from (a presigned URL).
    pub download_url: &'a str,
}

/// Marks the stored file uploaded and creates its import, `queued`.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, file_id = %file.id))]
pub async fn import_stored_file(
    ctx: Ctx<'_>,
    caller: &Caller,
    file: StoredFile<'_>,
    format: ImportFormat,
) -> Result<ContactImport> {
    let mut tx = ctx.pool.begin().await?;
    db::files::mark_uploaded(&mut *tx, caller.org_id, file.id, file.size, file.etag).await?;
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
    Ok(import)
}

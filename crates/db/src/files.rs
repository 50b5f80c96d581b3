//! Files in object storage.

use std::collections::HashMap;

use sqlx::PgExecutor;
use uuid::Uuid;

use parley_domain::files::File;

/// Several files of the organization (deleted ones too: an attachment keeps showing its
/// file), by id.
pub async fn get_many(
    db: impl PgExecutor<'_>,
    org: Uuid,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, File>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<File> =
        sqlx::query_as("SELECT * FROM files WHERE organization_id = $1 AND id = ANY($2)")
            .bind(org)
            .bind(ids)
            .fetch_all(db)
            .await?;
    Ok(rows.into_iter().map(|f| (f.id, f)).collect())
}

pub async fn insert(db: impl PgExecutor<'_>, f: &File) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO files (id, organization_id, user_id, guest_session_id, filename, file_type,
            content_type, file_size, storage_key, status, metadata, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)",
    )
    .bind(f.id)
    .bind(f.organization_id)
    .bind(f.user_id)
    .bind(&f.guest_session_id)
    .bind(&f.filename)
    .bind(f.file_type)
    .bind(&f.content_type)
    .bind(f.file_size)
    .bind(&f.storage_key)
    .bind(f.status)
    .bind(&f.metadata)
    .bind(f.created_at)
    .execute(db)
    .await?;
    Ok(())
}

/// A file of the organization that is not deleted.
pub async fn get(
    db: impl PgExecutor<'_>,
    org: Uuid,
    id: Uuid,
) -> Result<Option<File>, sqlx::Error> {
    sqlx::query_as(
        "SELECT * FROM files WHERE organization_id = $1 AND id = $2 AND deleted_at IS NULL",
    )
    .bind(org)
    .bind(id)
    .fetch_optional(db)
    .await
}

/// Records the upload as the store saw it: its size and ETag.
pub async fn mark_uploaded(
    db: impl PgExecutor<'_>,
    org: Uuid,
    id: Uuid,
    size: i64,
    hash: Option<&str>,
) -> Result<Option<File>, sqlx::Error> {
    sqlx::query_as(
        "UPDATE files SET status = 'uploaded', file_size = $3, file_hash = $4,
            uploaded_at = coalesce(uploaded_at, clock_timestamp())
         WHERE organization_id = $1 AND id = $2 AND deleted_at IS NULL
         RETURNING *",
    )
    .bind(org)
    .bind(id)
    .bind(size)
    .bind(hash)
    .fetch_optional(db)
    .await
}

/// Sets `deletedAt`; attachments keep referring to the record.
pub async fn mark_deleted(
    db: impl PgExecutor<'_>,
    org: Uuid,
    id: Uuid,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE files SET deleted_at = clock_timestamp()
         WHERE organization_id = $1 AND id = $2 AND deleted_at IS NULL",
    )
    .bind(org)
    .bind(id)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

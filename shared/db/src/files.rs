//! Files in object storage.

use parley_types::ids::{FileId, OrgId};
use std::collections::HashMap;

use sqlx::PgExecutor;
use uuid::Uuid;

use parley_domain::files::{File, FileStatus, FileType};
use parley_types::time::Timestamp;

/// Several files of the organization (deleted ones too: an attachment keeps showing its
/// file), by id.
pub async fn get_many(
    db: impl PgExecutor<'_>,
    org: OrgId,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, File>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = sqlx::query_as!(
        FileRow,
        "SELECT id, organization_id, user_id, guest_session_id, filename, file_type,
            content_type, file_size, file_hash, storage_key, status, uploaded_at,
            thumbnail_url, thumbnail_storage_key, thumbnail_status, thumbnail_error,
            thumbnail_size, metadata, created_at, updated_at, deleted_at
         FROM files WHERE organization_id = $1 AND id = ANY($2)",
        org.uuid(),
        ids,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|f| (f.id, File::from(f))).collect())
}

pub async fn insert(db: impl PgExecutor<'_>, f: &File) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO files (id, organization_id, user_id, guest_session_id, filename, file_type,
            content_type, file_size, storage_key, status, metadata, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)",
        f.id,
        f.organization_id,
        f.user_id,
        f.guest_session_id.as_deref(),
        &f.filename,
        f.file_type.as_str(),
        &f.content_type,
        f.file_size,
        &f.storage_key,
        f.status.as_str(),
        &f.metadata as _,
        f.created_at,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A file of the organization that is not deleted.
pub async fn get(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: FileId,
) -> Result<Option<File>, sqlx::Error> {
    let row = sqlx::query_as!(
        FileRow,
        "SELECT id, organization_id, user_id, guest_session_id, filename, file_type,
            content_type, file_size, file_hash, storage_key, status, uploaded_at,
            thumbnail_url, thumbnail_storage_key, thumbnail_status, thumbnail_error,
            thumbnail_size, metadata, created_at, updated_at, deleted_at
         FROM files WHERE organization_id = $1 AND id = $2 AND deleted_at IS NULL",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(File::from))
}

/// Records the upload as the store saw it: its size and ETag.
pub async fn mark_uploaded(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: FileId,
    size: i64,
    hash: Option<&str>,
) -> Result<Option<File>, sqlx::Error> {
    let row = sqlx::query_as!(
        FileRow,
        "UPDATE files SET status = 'uploaded', file_size = $3, file_hash = $4,
            uploaded_at = coalesce(uploaded_at, clock_timestamp())
         WHERE organization_id = $1 AND id = $2 AND deleted_at IS NULL
         RETURNING id, organization_id, user_id, guest_session_id, filename, file_type,
                content_type, file_size, file_hash, storage_key, status, uploaded_at,
                thumbnail_url, thumbnail_storage_key, thumbnail_status, thumbnail_error,
                thumbnail_size, metadata, created_at, updated_at, deleted_at",
        org.uuid(),
        id.uuid(),
        size,
        hash,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(File::from))
}

/// Sets `deletedAt`; attachments keep referring to the record.
pub async fn mark_deleted(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: FileId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE files SET deleted_at = clock_timestamp()
         WHERE organization_id = $1 AND id = $2 AND deleted_at IS NULL",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A file as its checked statements read it (its URL is signed apart).
struct FileRow {
    id: Uuid,
    organization_id: Uuid,
    user_id: Option<Uuid>,
    guest_session_id: Option<String>,
    filename: String,
    file_type: FileType,
    content_type: String,
    file_size: i64,
    file_hash: Option<String>,
    storage_key: String,
    status: FileStatus,
    uploaded_at: Option<Timestamp>,
    thumbnail_url: Option<String>,
    thumbnail_storage_key: Option<String>,
    thumbnail_status: Option<String>,
    thumbnail_error: Option<String>,
    thumbnail_size: Option<i64>,
    metadata: sqlx::types::Json<serde_json::Value>,
    created_at: Timestamp,
    updated_at: Timestamp,
    deleted_at: Option<Timestamp>,
}

impl From<FileRow> for File {
    fn from(r: FileRow) -> Self {
        Self {
            id: r.id,
            organization_id: r.organization_id,
            user_id: r.user_id,
            guest_session_id: r.guest_session_id,
            filename: r.filename,
            file_type: r.file_type,
            content_type: r.content_type,
            file_size: r.file_size,
            file_hash: r.file_hash,
            file_url: Default::default(),
            storage_key: r.storage_key,
            status: r.status,
            uploaded_at: r.uploaded_at,
            thumbnail_url: r.thumbnail_url,
            thumbnail_storage_key: r.thumbnail_storage_key,
            thumbnail_status: r.thumbnail_status,
            thumbnail_error: r.thumbnail_error,
            thumbnail_size: r.thumbnail_size,
            metadata: r.metadata,
            created_at: r.created_at,
            updated_at: r.updated_at,
            deleted_at: r.deleted_at,
        }
    }
}

/// Files still `pending` longer than `older_than` after their creation (abandoned uploads),
/// oldest first, at most `limit`, locked for this transaction and skipped by any other
/// sweeper: their ids and storage keys.
pub async fn take_abandoned(
    tx: &mut sqlx::PgConnection,
    older_than: std::time::Duration,
    limit: i64,
) -> Result<Vec<(Uuid, String)>, sqlx::Error> {
    let rows = sqlx::query!(
        "SELECT id, storage_key FROM files
         WHERE status = 'pending' AND created_at < now() - make_interval(secs => $1)
         ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED",
        older_than.as_secs_f64(),
        limit,
    )
    .fetch_all(tx)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.storage_key)).collect())
}

/// Removes the files `ids` (attachments can refer only to uploaded files).
pub async fn delete_many(db: impl PgExecutor<'_>, ids: &[Uuid]) -> Result<u64, sqlx::Error> {
    if ids.is_empty() {
        return Ok(0);
    }
    let done = sqlx::query!("DELETE FROM files WHERE id = ANY($1)", ids)
        .execute(db)
        .await?;
    Ok(done.rows_affected())
}

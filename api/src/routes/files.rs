//! Files: clients upload straight to object storage with a presigned URL, then
//! confirm; Parley keeps the records that message and ticket attachments refer to.

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, Reply};
use crate::error::{AppError, AppResult};
use axum::Json as BareJson;
use axum::extract::State;
use axum::http::StatusCode;
use parley_domain::files::{File, FileStatus, PresignUpload, PresignedUpload};
use parley_storage::Storage;
use parley_types::ids::{FileId, OrgId};
use parley_usecases::files;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Path, Tenant};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(presigned_upload))
        .routes(routes!(complete))
        .routes(routes!(get, delete))
}

/// Generate a presigned upload URL. The answer is the specification's bare object, not
/// the envelope. PUT the bytes to `uploadUrl` with the same `Content-Type` and exactly
/// `fileSize` bytes within `expiresIn` seconds (the store refuses anything else), then call
/// `POST /files/{fileId}/complete`.
#[utoipa::path(post, path = "/api/v1/files/presigned-upload", tag = "files",
    request_body = PresignUpload,
    responses(
        (status = 201, description = "Where to upload (bare object)", body = PresignedUpload),
        (status = 503, description = "Object storage is not configured (`storage_unavailable`) or not answering", body = ErrorEnvelope),
    ))]
async fn presigned_upload(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<PresignUpload>,
) -> AppResult<(StatusCode, BareJson<PresignedUpload>)> {
    let uploads = &state.config.uploads;
    req.check(uploads)?;
    let storage = state.storage()?;
    let file = req.into_file(tenant.org_id.uuid());
    let upload_url = storage
        .presign_upload(
            &file.storage_key,
            &file.content_type,
            file.file_size,
            uploads.upload_url_ttl,
        )
        .await?;
    files::record_pending(state.use_cases(), &tenant.caller(), &file).await?;
    Ok((
        StatusCode::CREATED,
        BareJson(PresignedUpload {
            expires_in: uploads.upload_url_ttl.as_secs(),
            file_id: file.id,
            file_url: storage.object_url(&file.storage_key),
            storage_key: file.storage_key,
            upload_url,
        }),
    ))
}

/// The organization's file and the store: an unknown file is 404 whether or not storage is
/// configured; a known one needs the store (503 `storage_unavailable` without it).
pub(crate) async fn stored_file(
    state: &AppState,
    org: OrgId,
    id: FileId,
) -> AppResult<(File, &Storage)> {
    let file = files::read(state.use_cases(), org, id).await?;
    Ok((file, state.storage()?))
}

/// Confirm an upload: the object must be in the store with the declared size (422
/// otherwise). Records the stored size and the ETag as `fileHash`; the file can then be
/// attached to messages and tickets. Completing again answers the file as it is.
#[utoipa::path(post, path = "/api/v1/files/{id}/complete", tag = "files",
    params(("id" = Uuid, Path, description = "File id")),
    responses((status = 200, description = "The uploaded file", body = Envelope<File>)))]
async fn complete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<FileId>,
) -> AppResult<Reply<File>> {
    let (file, storage) = stored_file(&state, tenant.org_id, id).await?;
    if file.status == FileStatus::Uploaded {
        return Ok(Reply::ok(file));
    }
    let Some(object) = storage.head(&file.storage_key).await? else {
        return Err(AppError::validation(
            "id",
            "not_uploaded",
            "nothing was uploaded to this file's URL yet",
        )
        .into());
    };
    if object.size != file.file_size {
        return Err(AppError::validation(
            "fileSize",
            "size_mismatch",
            format!(
                "the stored object has {} bytes, not the declared {}",
                object.size, file.file_size
            ),
        )
        .into());
    }
    let hash = object.etag.as_deref();
    Ok(Reply::ok(
        files::mark_uploaded(state.use_cases(), &tenant.caller(), id, object.size, hash).await?,
    ))
}

/// Get a file, with a short-lived signed download URL in `fileUrl` once it is uploaded.
#[utoipa::path(get, path = "/api/v1/files/{id}", tag = "files",
    params(("id" = Uuid, Path, description = "File id")),
    responses((status = 200, description = "The file", body = Envelope<File>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<FileId>,
) -> AppResult<Reply<File>> {
    let (mut file, storage) = stored_file(&state, tenant.org_id, id).await?;
    if file.status == FileStatus::Uploaded {
        file.file_url = Some(
            storage
                .presign_download(&file.storage_key, state.config.uploads.download_url_ttl)
                .await?,
        );
    }
    Ok(Reply::ok(file))
}

/// Delete a file: the object is removed from the store and the record gets `deletedAt`
/// (attachments that refer to it keep showing the record).
#[utoipa::path(delete, path = "/api/v1/files/{id}", tag = "files",
    params(("id" = Uuid, Path, description = "File id")),
    responses((status = 200, description = "Deleted", body = Envelope<Deleted>)))]
async fn delete(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<FileId>,
) -> AppResult<Reply<Deleted>> {
    let (file, storage) = stored_file(&state, tenant.org_id, id).await?;
    // The object goes first: if the store fails, nothing changed and the call can be repeated.
    storage.delete(&file.storage_key).await?;
    files::mark_deleted(state.use_cases(), &tenant.caller(), id).await?;
    Ok(Reply::deleted(id.uuid()))
}

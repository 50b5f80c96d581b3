//! Contact imports (scope `contacts:*`): a CSV or NDJSON file of contacts, run as a job.

use std::time::Duration;

use crate::envelope::{Envelope, Reply};
use crate::error::{AppError, AppResult};
use axum::extract::State;
use parley_db as db;
use parley_domain::files::FileStatus;
use parley_domain::imports::{ContactImport, CreateImport};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::extract::{Json, Path, Tenant};
use crate::state::AppState;

/// How long the worker may take to start downloading an uploaded file (the presigned URL's
/// life): a job that starts or resumes later fails the import with a download error.
const DOWNLOAD_FOR: Duration = Duration::from_secs(6 * 3600);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_import))
        .routes(routes!(get_import))
}

/// Import contacts from a CSV (with a header row) or NDJSON file, inline (`data`) or uploaded
/// (`fileId`). Runs as a job: rows are upserted by email (without case), else phone; a bad
/// row is rejected with its number and reason, never the file. Progress and the result are at
/// `GET /contacts/imports/{id}`.
#[utoipa::path(post, path = "/api/v1/contacts/imports", tag = "contacts",
    request_body = CreateImport,
    responses((status = 201, description = "The import, queued", body = Envelope<ContactImport>)))]
async fn create_import(
    State(s): State<AppState>,
    t: Tenant,
    Json(req): Json<CreateImport>,
) -> AppResult<Reply<ContactImport>> {
    req.check()?;
    let download_url = match req.file_id {
        Some(id) => {
            let (file, storage) = crate::routes::files::stored_file(&s, t.org_id, id)
                .await
                .map_err(|e| match e.0 {
                    AppError::NotFound => AppError::validation(
                        "fileId",
                        "not_found",
                        format!("{id} is not an uploaded file of this organization"),
                    )
                    .into(),
                    _ => e,
                })?;
            if file.status != FileStatus::Uploaded {
                return Err(AppError::validation(
                    "fileId",
                    "not_found",
                    format!("{id} is not an uploaded file of this organization (complete the upload first)"),
                )
                .into());
            }
            Some(
                storage
                    .presign_download(&file.storage_key, DOWNLOAD_FOR)
                    .await?,
            )
        }
        None => None,
    };
    let import = db::imports::create(
        &s.pool,
        t.org_id,
        req.format,
        req.data.as_deref().map(str::as_bytes),
        req.file_id,
        download_url.as_deref(),
    )
    .await?;
    if let Err(err) = s.jobs.import_contacts(import.id).await {
        tracing::warn!(import_id = %import.id, %err, "import not enqueued; the reconciler will");
    }
    Ok(Reply::created(import))
}

/// An import's progress and result: rows read, created, updated, unchanged, rejected (the
/// first 1,000 with their row numbers and reasons).
#[utoipa::path(get, path = "/api/v1/contacts/imports/{id}", tag = "contacts",
    params(("id" = Uuid, Path, description = "Import id")),
    responses((status = 200, description = "The import", body = Envelope<ContactImport>)))]
async fn get_import(
    State(s): State<AppState>,
    t: Tenant,
    Path(id): Path<Uuid>,
) -> AppResult<Reply<ContactImport>> {
    db::imports::get(&s.pool, t.org_id, id)
        .await?
        .map(Reply::ok)
        .ok_or(AppError::NotFound.into())
}

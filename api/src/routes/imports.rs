//! Contact imports (scope `contacts:*`): a CSV or NDJSON file of contacts, run as a job. The
//! file comes inline in JSON, as an uploaded file's id, as the body itself (`text/csv`,
//! `application/x-ndjson`) or as a `multipart/form-data` part.

use std::time::Duration;

use axum::extract::{FromRequest, Request, State};
use futures::StreamExt;
use parley_domain::files::{File, FileStatus, FileType};
use parley_domain::imports::{ContactImport, CreateImport, ImportFormat};
use parley_storage::ObjectBody;
use parley_types::fields::Filename;
use parley_types::ids::{FileId, ImportId};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::body_spool::{Handed, Spool, SpoolLimits, Spooled};
use crate::envelope::{Envelope, Reply};
use crate::error::{ApiError, AppError, AppResult};
use crate::extract::{Json, Path, Tenant, is_json_type};
use crate::state::AppState;
use parley_usecases::imports::{self, StoredFile};

pub const PATH: &str = "/api/v1/contacts/imports";

/// How long the worker may take to start downloading a stored file (the presigned URL's
/// life): a job that starts or resumes later fails the import with a download error.
const DOWNLOAD_FOR: Duration = Duration::from_secs(6 * 3600);
/// What a multipart body may add to its file: boundaries, part headers and `format`.
const MULTIPART_OVERHEAD: u64 = 64 * 1024;
/// The longest `format` part.
const MAX_FORMAT_PART: u64 = 64;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_import))
        .routes(routes!(get_import))
}

/// The bounds of an import's file: with object storage, the upload limit
/// (`PARLEY_UPLOAD_MAX_BYTES`), written to a temporary file beyond the body limit; without
/// it, the body limit (`PARLEY_MAX_BODY_BYTES`), as the file is kept in Postgres.
fn file_limits(state: &AppState) -> SpoolLimits {
    let in_memory = state.config.max_body_bytes;
    let max = match state.storage {
        Some(_) => state.config.uploads.max_bytes.max(0) as u64,
        None => in_memory as u64,
    };
    SpoolLimits { max, in_memory }
}

fn is_multipart(content_type: &str) -> bool {
    content_type
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
}

/// The multipart form of an import (documented; read by hand, as it streams).
#[derive(ToSchema)]
#[allow(dead_code)]
struct ImportUpload {
    /// The file: CSV with a header row, or one JSON object per line.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
    /// How the file is written; when left out, from the part's `Content-Type` (`text/csv`,
    /// `application/x-ndjson`) or else its file name (`.csv`, `.ndjson`, `.jsonl`).
    #[schema(nullable = false)]
    format: Option<ImportFormat>,
}

/// Import contacts from a CSV (with a header row) or NDJSON file. Runs as a job: rows are
/// upserted by email (without case), else phone; a bad row is rejected with its number and
/// reason, never the file. Progress and the result are at `GET /contacts/imports/{id}`.
///
/// The file may come in four ways:
/// - JSON: inline (`data`, within `PARLEY_MAX_BODY_BYTES`) or an uploaded file (`fileId`);
/// - `multipart/form-data`: a `file` part and, optionally, `format`;
/// - the body itself, with `Content-Type: text/csv` or `application/x-ndjson` (UTF-8), as in
///   `curl --data-binary @contacts.csv -H 'Content-Type: text/csv'`.
///
/// A file sent in the request is kept in object storage when it is configured (the import's
/// `fileId` names it), up to `PARLEY_UPLOAD_MAX_BYTES` and within the request timeout;
/// without object storage it is kept with the import, up to `PARLEY_MAX_BODY_BYTES`.
#[utoipa::path(post, path = "/api/v1/contacts/imports", tag = "contacts",
    request_body(content(
        (CreateImport = "application/json"),
        (ImportUpload = "multipart/form-data"),
    )),
    responses((status = 201, description = "The import, queued", body = Envelope<ContactImport>)))]
async fn create_import(
    State(state): State<AppState>,
    tenant: Tenant,
    req: Request,
) -> AppResult<Reply<ContactImport>> {
    let content_type = crate::extract::content_type(req.headers());
    if is_json_type(&content_type) {
        let Json(req) = Json::<CreateImport>::from_request(req, &state).await?;
        return from_json(&state, &tenant, req).await;
    }
    // Read by the idempotency middleware when the request has a key (hashed on the way).
    let handed = req
        .extensions()
        .get::<Handed<SentFile>>()
        .and_then(Handed::take);
    let sent = match handed {
        Some(sent) => sent,
        None => {
            read_sent(
                &state,
                tenant.org_id.uuid(),
                &content_type,
                req.into_body(),
                |_| {},
            )
            .await?
        }
    };
    from_sent_file(&state, &tenant, sent).await
}

/// A file sent in the request.
pub struct SentFile {
    format: ImportFormat,
    filename: Option<Filename>,
    spool: Spool,
    /// The organization's place among those sending a file now, held until the import is made.
    _sending: crate::org_permits::Permit,
}

/// The file of an import request that is not JSON: the body itself (`text/csv`,
/// `application/x-ndjson`) or the `file` part of a multipart body, in memory up to
/// `PARLEY_MAX_BODY_BYTES` and on disk past it (one temporary file a request). Every chunk of
/// the body, as sent, is shown to `each_chunk` (the idempotency middleware hashes them),
/// a multipart body's epilogue too (at most 1 KiB after its closing boundary). An
/// organization sends [`crate::org_permits::FILES_PER_ORG`] files at once at most (429).
pub async fn read_sent(
    state: &AppState,
    org: Uuid,
    content_type: &str,
    body: axum::body::Body,
    each_chunk: impl FnMut(&[u8]) + Send + 'static,
) -> AppResult<SentFile> {
    let sending = state.files_sent.take(org)?;
    if is_multipart(content_type) {
        return multipart_file(state, content_type, body, each_chunk, sending).await;
    }
    let Some(format) = ImportFormat::from_content_type(content_type) else {
        return Err(AppError::UnsupportedMediaType.into());
    };
    let spool = Spool::read(body, file_limits(state), &state.spool, each_chunk).await?;
    Ok(SentFile {
        format,
        filename: None,
        spool,
        _sending: sending,
    })
}

/// The `file` part (and `format`) of a multipart body.
async fn multipart_file(
    state: &AppState,
    content_type: &str,
    body: axum::body::Body,
    mut each_chunk: impl FnMut(&[u8]) + Send + 'static,
    sending: crate::org_permits::Permit,
) -> AppResult<SentFile> {
    let boundary = crate::multipart_bounds::boundary(content_type)?;
    let limits = file_limits(state);
    let constraints = multer::Constraints::new().size_limit(
        multer::SizeLimit::new()
            .whole_stream(limits.max + MULTIPART_OVERHEAD)
            .per_field(limits.max)
            .for_field("format", MAX_FORMAT_PART),
    );
    let raw =
        crate::multipart_bounds::SharedBody::new(body.into_data_stream().inspect(move |chunk| {
            if let Ok(chunk) = chunk {
                each_chunk(chunk);
            }
        }));
    let chunks = crate::multipart_bounds::checked(raw.clone(), &boundary);
    let mut multipart = multer::Multipart::with_constraints(chunks, boundary, constraints);
    let mut format = None;
    let mut file: Option<(Spool, Option<ImportFormat>, Option<Filename>)> = None;
    while let Some(field) = multipart.next_field().await.map_err(multipart_error)? {
        match field.name() {
            Some("format") => {
                let text = field.text().await.map_err(multipart_error)?;
                format = Some(text.trim().parse::<ImportFormat>().map_err(|_| {
                    AppError::validation("format", "invalid_value", "must be csv or ndjson")
                })?);
            }
            Some("file") if file.is_some() => {
                return Err(AppError::validation("file", "invalid_value", "give one file").into());
            }
            Some("file") => {
                let by_type = field
                    .content_type()
                    .and_then(|m| ImportFormat::from_content_type(m.as_ref()));
                let filename = field.file_name().and_then(|n| Filename::parse(n).ok());
                let chunks = field.map(|chunk| chunk.map_err(multipart_error));
                let spool = Spool::read_chunks(chunks, limits, &state.spool, |_| {}).await?;
                file = Some((spool, by_type, filename));
            }
            // Other parts are read past, as unknown JSON fields are ignored, and as those may
            // not carry NUL (docs/api.md, Limits and hostile input).
            _ => {
                let mut field = field;
                let name = field
                    .name()
                    .filter(|n| !n.is_empty())
                    .unwrap_or("body")
                    .to_owned();
                while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
                    if chunk.contains(&0) {
                        return Err(AppError::validation(
                            name,
                            "invalid_format",
                            "must not contain the NUL character (U+0000)",
                        )
                        .into());
                    }
                }
            }
        }
    }
    drop(multipart);
    crate::multipart_bounds::read_epilogue(raw).await?;
    let Some((spool, by_type, filename)) = file else {
        return Err(
            AppError::validation("file", "required", "send the file in a part named file").into(),
        );
    };
    let by_name = filename
        .as_ref()
        .and_then(|n| ImportFormat::from_filename(n.as_str()));
    let format = format.or(by_type).or(by_name).ok_or_else(|| {
        AppError::validation(
            "format",
            "required",
            "give format, or a file typed text/csv or application/x-ndjson, or named .csv, .ndjson or .jsonl",
        )
    })?;
    Ok(SentFile {
        format,
        filename,
        spool,
        _sending: sending,
    })
}

fn multipart_error(err: multer::Error) -> ApiError {
    ApiError(match err {
        // A `format` past its few bytes is no format, not a body too large.
        multer::Error::FieldSizeExceeded { field_name, .. }
            if field_name.as_deref() == Some("format") =>
        {
            AppError::validation("format", "invalid_value", "must be csv or ndjson")
        }
        multer::Error::StreamSizeExceeded { .. } | multer::Error::FieldSizeExceeded { .. } => {
            AppError::PayloadTooLarge
        }
        // What the framing check or the body's read refused.
        multer::Error::StreamReadFailed(err) => match err.downcast::<AppError>() {
            Ok(err) => *err,
            Err(err) => AppError::validation("body", "invalid_multipart", err.to_string()),
        },
        err => AppError::validation("body", "invalid_multipart", err.to_string()),
    })
}

async fn from_json(
    state: &AppState,
    tenant: &Tenant,
    req: CreateImport,
) -> AppResult<Reply<ContactImport>> {
    req.check()?;
    let download_url = match req.file_id {
        Some(id) => {
            let (file, storage) =
                crate::routes::files::stored_file(state, tenant.org_id, FileId::from(id))
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
    let data = req.data.as_deref().map(str::as_bytes);
    let file = req.file_id.zip(download_url.as_deref());
    let import =
        imports::create(state.use_cases(), &tenant.caller(), req.format, data, file).await?;
    Ok(Reply::created(import))
}

/// A file sent in the request: stored, then imported.
async fn from_sent_file(
    state: &AppState,
    tenant: &Tenant,
    sent: SentFile,
) -> AppResult<Reply<ContactImport>> {
    if sent.spool.len == 0 {
        return Err(AppError::validation("file", "required", "the file is empty").into());
    }
    let Some(storage) = &state.storage else {
        // Within the body limit, so in memory: kept with the import.
        let Spooled::Memory(data) = &sent.spool.content else {
            return Err(AppError::PayloadTooLarge.into());
        };
        let import = imports::create(
            state.use_cases(),
            &tenant.caller(),
            sent.format,
            Some(data),
            None,
        )
        .await?;
        return Ok(Reply::created(import));
    };
    let filename = sent.filename.unwrap_or_else(|| {
        Filename::parse(sent.format.default_filename()).expect("a valid file name")
    });
    let file = File::pending(
        tenant.org_id.uuid(),
        &filename,
        FileType::Document,
        sent.format.content_type().to_owned(),
        sent.spool.len as i64,
        serde_json::Map::new(),
    );
    // The record first: an object whose store call fails or whose request is cut off is
    // then a pending file of the organization, as an upload never completed is.
    parley_usecases::files::record_pending(state.use_cases(), &tenant.caller(), &file).await?;
    let body = match &sent.spool.content {
        Spooled::Memory(bytes) => ObjectBody::Bytes(bytes.clone()),
        Spooled::File(path) => ObjectBody::File(path.to_path_buf()),
    };
    let etag = storage
        .put(
            &file.storage_key,
            &file.content_type,
            body,
            state.config.http.request_timeout,
        )
        .await?;
    let download_url = storage
        .presign_download(&file.storage_key, DOWNLOAD_FOR)
        .await?;
    let import = imports::import_stored_file(
        state.use_cases(),
        &tenant.caller(),
        StoredFile {
            id: file.id,
            size: file.file_size,
            etag: etag.as_deref(),
            download_url: &download_url,
        },
        sent.format,
    )
    .await?;
    Ok(Reply::created(import))
}

/// An import's progress and result: rows read, created, updated, unchanged, rejected (the
/// first 1,000 with their row numbers and reasons).
#[utoipa::path(get, path = "/api/v1/contacts/imports/{id}", tag = "contacts",
    params(("id" = Uuid, Path, description = "Import id")),
    responses((status = 200, description = "The import", body = Envelope<ContactImport>)))]
async fn get_import(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ImportId>,
) -> AppResult<Reply<ContactImport>> {
    Ok(Reply::ok(
        imports::read(state.use_cases(), tenant.org_id, id).await?,
    ))
}

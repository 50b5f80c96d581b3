//! Files in object storage, as attachments of messages and tickets refer to them.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use parley_types::error::{AppError, FieldError};
use parley_types::fields::{ContentType, Filename, safe_key_segment};
use parley_types::time::Timestamp;

parley_types::text_enum!(
    /// What kind of file: also the type of an attachment.
    FileType {
        Image = "image",
        Video = "video",
        Audio = "audio",
        Document = "document",
        Other = "other",
    }
);

parley_types::text_enum!(
    /// `pending` until the upload is confirmed; then `uploaded`.
    FileStatus {
        Pending = "pending",
        Uploaded = "uploaded",
    }
);

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct File {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub user_id: Option<Uuid>,
    pub guest_session_id: Option<String>,
    pub filename: String,
    pub file_type: FileType,
    pub content_type: String,
    pub file_size: i64,
    pub file_hash: Option<String>,
    /// A short-lived download URL (on `GET /files/{id}`); `null` elsewhere.
    pub file_url: Option<String>,
    pub storage_key: String,
    pub status: FileStatus,
    pub uploaded_at: Option<Timestamp>,
    pub thumbnail_url: Option<String>,
    pub thumbnail_storage_key: Option<String>,
    pub thumbnail_status: Option<String>,
    pub thumbnail_error: Option<String>,
    pub thumbnail_size: Option<i64>,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: sqlx::types::Json<serde_json::Value>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub deleted_at: Option<Timestamp>,
}
parley_types::keyed!(File);

/// `POST /files/presigned-upload`. Size and content type are checked against the
/// configured limits by [`PresignUpload::check`].
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "filename": "invoice-2026-11.pdf", "contentType": "application/pdf",
    "fileSize": 48213, "fileType": "document", "metadata": {"source": "portal"}
})))]
pub struct PresignUpload {
    pub filename: Filename,
    pub content_type: ContentType,
    /// Bytes; the upload must be exactly this long. At most `PARLEY_UPLOAD_MAX_BYTES`.
    #[serde(deserialize_with = "parley_types::fields::whole")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1))]
    pub file_size: i64,
    /// `image`, `video` and `audio` need a content type of that family.
    pub file_type: FileType,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

impl PresignUpload {
    /// Refuses sizes and content types the configuration does not allow, and a `fileType`
    /// that contradicts the content type (an `image` must be `image/*`, and so on).
    pub fn check(&self, uploads: &UploadSettings) -> Result<(), AppError> {
        let mut errors = Vec::new();
        if self.file_size <= 0 || self.file_size > uploads.max_bytes {
            errors.push(FieldError::new(
                "fileSize",
                "out_of_range",
                format!("must be between 1 and {} bytes", uploads.max_bytes),
            ));
        }
        let content_type = self.content_type.as_str();
        if !uploads.allows(content_type) {
            errors.push(FieldError::new(
                "contentType",
                "not_allowed",
                format!(
                    "{content_type} is not accepted; allowed: {}",
                    uploads.content_types.join(", ")
                ),
            ));
        }
        let family = content_type.split('/').next().unwrap_or_default();
        let expected = match self.file_type {
            FileType::Image => Some("image"),
            FileType::Video => Some("video"),
            FileType::Audio => Some("audio"),
            FileType::Document | FileType::Other => None,
        };
        if expected.is_some_and(|e| e != family) {
            errors.push(FieldError::new(
                "fileType",
                "mismatch",
                format!(
                    "{} does not match contentType {content_type}",
                    self.file_type
                ),
            ));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(AppError::Validation(errors))
        }
    }

    /// The pending File this upload will fill.
    pub fn into_file(self, organization_id: Uuid) -> File {
        File::pending(
            organization_id,
            &self.filename,
            self.file_type,
            self.content_type.into(),
            self.file_size,
            self.metadata.unwrap_or_default(),
        )
    }
}

impl File {
    /// A file not yet in the store, at `org/<orgId>/<fileId>/<safe filename>`.
    pub fn pending(
        organization_id: Uuid,
        filename: &Filename,
        file_type: FileType,
        content_type: String,
        file_size: i64,
        metadata: serde_json::Map<String, serde_json::Value>,
    ) -> File {
        let id = parley_types::ids::new_id();
        let now = Timestamp::now();
        let storage_key = format!(
            "org/{organization_id}/{id}/{}",
            safe_key_segment(filename.as_str())
        );
        File {
            id,
            organization_id,
            user_id: None,
            guest_session_id: None,
            filename: filename.as_str().to_owned(),
            file_type,
            content_type,
            file_size,
            file_hash: None,
            file_url: None,
            storage_key,
            status: FileStatus::Pending,
            uploaded_at: None,
            thumbnail_url: None,
            thumbnail_storage_key: None,
            thumbnail_status: None,
            thumbnail_error: None,
            thumbnail_size: None,
            metadata: sqlx::types::Json(serde_json::Value::Object(metadata)),
            created_at: now,
            updated_at: now,
            deleted_at: None,
        }
    }
}

/// The specification's presigned upload result: the bare object, not the envelope. The client PUTs
/// the bytes to `uploadUrl` with the same `Content-Type` within `expiresIn` seconds, then
/// calls `POST /files/{fileId}/complete`.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PresignedUpload {
    pub expires_in: u64,
    pub file_id: Uuid,
    /// The object's unsigned URL (readable only where the bucket is public; `GET
    /// /files/{id}` gives a signed download URL).
    pub file_url: String,
    pub storage_key: String,
    pub upload_url: String,
}

/// What clients may upload, and how long the URLs Parley signs for them live.
#[derive(Debug, Clone)]
pub struct UploadSettings {
    pub max_bytes: i64,
    /// Allowed content types: exact (`image/png`) or a whole family (`image/*`).
    pub content_types: Vec<String>,
    pub upload_url_ttl: Duration,
    pub download_url_ttl: Duration,
}

/// The content types allowed when `PARLEY_UPLOAD_CONTENT_TYPES` is not set: images, video,
/// audio and common documents. SVG and HTML stay out: a browser runs their scripts.
pub const DEFAULT_UPLOAD_CONTENT_TYPES: &[&str] = &[
    "image/jpeg",
    "image/png",
    "image/gif",
    "image/webp",
    "image/heic",
    "video/*",
    "audio/*",
    "application/pdf",
    "text/plain",
    "text/csv",
    "application/json",
    "application/zip",
    "application/msword",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.ms-excel",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.ms-powerpoint",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
];

impl UploadSettings {
    pub fn allows(&self, content_type: &str) -> bool {
        let content_type = content_type.to_ascii_lowercase();
        self.content_types
            .iter()
            .any(|allowed| match allowed.strip_suffix("/*") {
                Some(family) => content_type
                    .split_once('/')
                    .is_some_and(|(f, sub)| f == family && !sub.is_empty()),
                None => *allowed == content_type,
            })
    }
}

//! Files in object storage, as attachments of messages and tickets refer to them.

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::time::Timestamp;

crate::text_enum!(
    /// What kind of file: also the type of an attachment.
    FileType {
        Image = "image",
        Video = "video",
        Audio = "audio",
        Document = "document",
        Other = "other",
    }
);

crate::text_enum!(
    /// `pending` until the upload is confirmed; then `uploaded`.
    FileStatus {
        Pending = "pending",
        Uploaded = "uploaded",
    }
);

#[derive(Debug, Clone, Serialize, sqlx::FromRow, ToSchema)]
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
    #[sqlx(skip)]
    pub file_url: Option<String>,
    pub storage_key: String,
    pub status: FileStatus,
    pub uploaded_at: Option<Timestamp>,
    pub thumbnail_url: Option<String>,
    pub thumbnail_storage_key: Option<String>,
    pub thumbnail_status: Option<String>,
    pub thumbnail_error: Option<String>,
    pub thumbnail_size: Option<i64>,
    #[schema(value_type = Object)]
    pub metadata: sqlx::types::Json<serde_json::Value>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub deleted_at: Option<Timestamp>,
}
crate::keyed!(File);

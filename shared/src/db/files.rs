//! Files in object storage.

use std::collections::HashMap;

use sqlx::PgExecutor;
use uuid::Uuid;

use crate::domain::files::File;

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

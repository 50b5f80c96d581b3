//! Retention of abandoned uploads: files still `pending` long after their upload URL expired
//! are removed with their objects, a batch per transaction.

use std::time::Duration;

use parley_db as db;
use sqlx::PgPool;
use uuid::Uuid;

use crate::Result;

/// Takes up to `limit` files still `pending` longer than `older_than` after their creation
/// (skipping those another process holds), deletes each one's object with `delete_object`
/// (given its key; `false` when it could not), then the rows of those whose object went:
/// a file whose object stays keeps its row and is tried again. Returns the files removed.
#[tracing::instrument(skip_all)]
pub async fn sweep_abandoned<F, Fut>(
    pool: &PgPool,
    older_than: Duration,
    limit: i64,
    mut delete_object: F,
) -> Result<u64>
where
    F: FnMut(Uuid, String) -> Fut,
    Fut: Future<Output = bool>,
{
    let mut tx = pool.begin().await?;
    let abandoned = db::files::take_abandoned(&mut tx, older_than, limit).await?;
    let mut removed = Vec::with_capacity(abandoned.len());
    for (id, key) in abandoned {
        if delete_object(id, key).await {
            removed.push(id);
        }
    }
    let n = db::files::delete_many(&mut *tx, &removed).await?;
    tx.commit().await?;
    Ok(n)
}

//! `Idempotency-Key`: a request takes its organization's key, runs, and stores its answer;
//! a repeat of the same request gets that answer again. The API's `idempotency` middleware
//! drives it.

use parley_types::ids::OrgId;
use std::time::Duration;

use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

/// How long a key answers its first request's answer again.
pub const KEPT_FOR: Duration = Duration::from_secs(24 * 3600);

/// What taking a key found.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// The key is this request's now: run it, then [`complete`] with `token`.
    Taken { token: Uuid },
    /// A request with this key answered; `same_request` says whether it was this one.
    Answered {
        same_request: bool,
        status: u16,
        body: Vec<u8>,
    },
    /// A request with this key is still running; `abandoned` when it took the key longer
    /// ago than it could still be running (its process died, or its answer could not be
    /// stored): its outcome is unknown.
    Running { same_request: bool, abandoned: bool },
}

/// Takes `key` for a request whose hash is `hash`, unless a request took it less than
/// `kept_for` ago. A key taken by a request that did not answer within `abandoned_after` (its
/// process died, its client went away, or its answer could not be stored) is never taken again
/// within `kept_for`: that request may have written what it writes, so no second one runs.
pub async fn claim(
    pool: &PgPool,
    org: OrgId,
    key: &str,
    hash: &[u8],
    kept_for: Duration,
    abandoned_after: Duration,
) -> Result<Claim, sqlx::Error> {
    let token = Uuid::now_v7();
    // A key swept (expired and deleted) between the insert and the read is taken on the next
    // turn.
    loop {
        let taken = sqlx::query_scalar!(
            r#"INSERT INTO idempotency_keys (organization_id, key, request_hash, token)
             VALUES ($1, $2, $3, $4)
             ON CONFLICT (organization_id, key) DO UPDATE
                SET request_hash = EXCLUDED.request_hash, token = EXCLUDED.token,
                    status = NULL, body = NULL, created_at = clock_timestamp()
                WHERE idempotency_keys.created_at < clock_timestamp() - make_interval(secs => $5)
             RETURNING true AS "taken!""#,
            org.uuid(),
            key,
            hash,
            token,
            kept_for.as_secs_f64(),
        )
        .fetch_optional(pool)
        .await?;
        if taken.is_some() {
            return Ok(Claim::Taken { token });
        }
        let held = sqlx::query!(
            r#"SELECT request_hash = $3 AS same, status, body,
                created_at < clock_timestamp() - make_interval(secs => $4) AS "abandoned!"
             FROM idempotency_keys WHERE organization_id = $1 AND key = $2"#,
            org.uuid(),
            key,
            hash,
            abandoned_after.as_secs_f64(),
        )
        .fetch_optional(pool)
        .await?;
        let Some(held) = held else { continue };
        let same_request = held.same.unwrap_or(false);
        return Ok(match (held.status, held.body) {
            (Some(status), Some(body)) => Claim::Answered {
                same_request,
                status: u16::try_from(status).unwrap_or(500),
                body,
            },
            _ => Claim::Running {
                same_request,
                abandoned: held.abandoned,
            },
        });
    }
}

/// Stores the answer of the request holding `token`.
pub async fn complete(
    db: impl PgExecutor<'_>,
    org: OrgId,
    key: &str,
    token: Uuid,
    status: u16,
    body: &[u8],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE idempotency_keys SET status = $4, body = $5
         WHERE organization_id = $1 AND key = $2 AND token = $3",
        org.uuid(),
        key,
        token,
        i16::try_from(status).unwrap_or(i16::MAX),
        body,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Deletes up to `limit` keys taken longer ago than `kept_for`; returns how many.
pub async fn sweep(
    db: impl PgExecutor<'_>,
    kept_for: Duration,
    limit: i64,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(
            SELECT ctid FROM idempotency_keys
            WHERE created_at < statement_timestamp() - make_interval(secs => $1)
            LIMIT $2))",
        kept_for.as_secs_f64(),
        limit,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

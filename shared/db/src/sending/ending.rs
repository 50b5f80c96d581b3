//! A sending broadcast's end: its totals read under its row lock and its final status
//! written (what the end is, `parley_domain::sending::ending` decides), and the broadcasts
//! the ticker looks at for it.

use parley_domain::sending::{Ending, SendingTotals};
use parley_types::ids::{BroadcastId, OrgId};
use sqlx::{PgConnection, PgExecutor};

/// A broadcast that is `sending` with its audience written, locked, and its totals read after
/// the lock (in a statement of their own: one statement that waited for the lock would read
/// totals from before the wait, and miss the pending recipients a retry under the lock has
/// just given it). `None` for any other broadcast.
pub async fn lock_sending_totals(
    tx: &mut PgConnection,
    id: BroadcastId,
) -> Result<Option<(OrgId, SendingTotals)>, sqlx::Error> {
    let Some(locked) = sqlx::query!(
        r#"SELECT organization_id AS "organization_id: OrgId",
            (ab_test IS NOT NULL AND winning_variant IS NULL) AS "winner_awaited!"
         FROM broadcasts WHERE id = $1 AND status = 'sending' AND fanout_done
         FOR UPDATE"#,
        id as _,
    )
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(None);
    };
    let totals = sqlx::query!(
        r#"SELECT coalesce(sent, 0)::int8 AS "sent!", coalesce(pending, 0)::int8 AS "pending!",
            coalesce(held, 0)::int8 AS "held!"
         FROM broadcast_totals WHERE broadcast_id = $1"#,
        id as _,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let (sent, pending, held) = totals.map_or((0, 0, 0), |t| (t.sent, t.pending, t.held));
    Ok(Some((
        locked.organization_id,
        SendingTotals {
            sent,
            pending,
            held,
            winner_awaited: locked.winner_awaited,
        },
    )))
}

/// Ends a broadcast locked by [`lock_sending_totals`] as `ending` says.
pub async fn end_sending(
    tx: &mut PgConnection,
    id: BroadcastId,
    ending: Ending,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE broadcasts SET status = $2, error_message = coalesce($3, error_message),
            completed_at = clock_timestamp(),
            dispatch_lease_until = NULL, dispatch_lease_token = NULL
         WHERE id = $1",
        id as _,
        ending.status.as_str(),
        ending.error_message,
    )
    .execute(&mut *tx)
    .await
    .map(|_| ())
}

/// Sending broadcasts that are done but not yet ended (an ending check that was missed).
pub async fn done_but_sending(
    db: impl PgExecutor<'_>,
    limit: i64,
) -> Result<Vec<BroadcastId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT b.id AS "id: BroadcastId" FROM broadcasts b
         LEFT JOIN broadcast_totals k ON k.broadcast_id = b.id
         WHERE b.status = 'sending' AND b.fanout_done AND coalesce(k.pending, 0) = 0
           AND coalesce(k.held, 0) = 0 AND (b.ab_test IS NULL OR b.winning_variant IS NOT NULL)
         LIMIT $1"#,
        limit,
    )
    .fetch_all(db)
    .await
}

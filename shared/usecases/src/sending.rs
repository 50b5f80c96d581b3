//! The worker's units of work on a sending broadcast: a slice of its audience written, the
//! broadcast ended, an ended broadcast's recipients purged. Each is one transaction; they
//! fail with Postgres' own error, which the jobs sort into transient (try again) or not.

use std::time::Duration;

use parley_db as db;
use parley_domain::broadcasts::{self as rules, BroadcastStatus};
use parley_domain::webhooks::EventName;
use parley_types::ids::{BroadcastId, OrgId};
use sqlx::PgPool;
use uuid::Uuid;

/// Writes the next `slice` recipients of the broadcast's audience (its contact list, or its
/// segment's contacts when it names one) if `token` still holds its dispatch lease, renewing
/// the lease; returns their ids and whether the audience is all written. `None` when the
/// lease is lost.
#[tracing::instrument(skip_all, fields(broadcast_id = %id, organization_id = %org))]
pub async fn fan_out(
    pool: &PgPool,
    id: BroadcastId,
    org: OrgId,
    segment: bool,
    slice: i32,
    lease: Duration,
    token: Uuid,
) -> Result<Option<(Vec<Uuid>, bool)>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let written = if segment {
        db::sending::fan_out_segment(&mut tx, id, org, slice, lease, token).await?
    } else {
        db::sending::fan_out(&mut tx, id, org, slice, lease, token).await?
    };
    tx.commit().await?;
    Ok(written)
}

/// Ends the broadcast if it is sending, its audience is written and nothing of it can still
/// be sent ([`parley_domain::broadcasts::ending`]), with its `broadcast.sent` or
/// `broadcast.failed` event in the same transaction; returns its final status and
/// organization when this call ended it. The place every end of a sending broadcast is
/// decided: the dispatcher's, a send job's and the ticker's.
#[tracing::instrument(skip_all, fields(broadcast_id = %id))]
pub async fn finish_if_done(
    pool: &PgPool,
    id: BroadcastId,
) -> Result<Option<(BroadcastStatus, OrgId)>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let Some((org, totals)) = db::sending::lock_sending_totals(&mut tx, id).await? else {
        return Ok(None);
    };
    let Some(ending) = rules::ending(totals) else {
        return Ok(None);
    };
    db::sending::end_sending(&mut tx, id, ending).await?;
    if let Some(broadcast) = db::broadcasts::get(&mut *tx, org.uuid(), id.uuid()).await? {
        let event = match ending.status {
            BroadcastStatus::Completed => EventName::BroadcastSent,
            _ => EventName::BroadcastFailed,
        };
        db::outbox::emit(&mut tx, org.uuid(), event, &broadcast).await?;
    }
    tx.commit().await?;
    Ok(Some((ending.status, org)))
}

/// Retention: deletes up to `limit` recipients of the broadcast that ended longest ago, more
/// than `after` ago; returns the rows deleted and whether such a broadcast was found.
#[tracing::instrument(skip_all)]
pub async fn purge_recipients(
    pool: &PgPool,
    after: Duration,
    limit: i64,
) -> Result<(u64, bool), sqlx::Error> {
    let mut tx = pool.begin().await?;
    let purged = db::sending::purge_recipients(&mut tx, after, limit).await?;
    tx.commit().await?;
    Ok(purged)
}

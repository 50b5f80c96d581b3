//! The worker's side of a sending broadcast, the one door its jobs and ticker go through:
//! the units of work that take a transaction (a slice of its audience written, the broadcast
//! ended, an ended broadcast's recipients purged), and the single statements of the dispatch,
//! the send job and the reconciler (`parley_db::sending` holds their SQL). All fail with
//! Postgres' own error, which the jobs sort into transient (try again) or not.

use std::time::Duration;

use parley_db as db;
use parley_domain::broadcasts::BroadcastStatus;
use parley_domain::sending::{
    self as rules, Claimed, RecipientOutcome, SendContext, VariantContent,
};
use parley_domain::webhooks::EventName;
use parley_types::ids::{BroadcastId, OrgId, RecipientId};
use parley_types::time::Timestamp;
use uuid::Uuid;

use crate::Ctx;

pub use parley_db::sending::{BroadcastLane, DispatchState, StaleBounds, StaleRecipients};

type Result<T> = std::result::Result<T, sqlx::Error>;

/// Writes the next `slice` recipients of the broadcast's audience (its contact list, or its
/// segment's contacts when it names one) if `token` still holds its dispatch lease, renewing
/// the lease; returns their ids and whether the audience is all written. `None` when the
/// lease is lost.
#[tracing::instrument(skip_all, fields(broadcast_id = %id, organization_id = %org))]
pub async fn fan_out(
    ctx: Ctx<'_>,
    id: BroadcastId,
    org: OrgId,
    segment: bool,
    slice: i32,
    lease: Duration,
    token: Uuid,
) -> Result<Option<(Vec<RecipientId>, bool)>> {
    let mut tx = ctx.pool.begin().await?;
    let written = if segment {
        db::sending::fan_out_segment(&mut tx, id, org, slice, lease, token).await?
    } else {
        db::sending::fan_out(&mut tx, id, org, slice, lease, token).await?
    };
    tx.commit().await?;
    Ok(written)
}

/// Ends the broadcast if it is sending, its audience is written and nothing of it can still
/// be sent ([`parley_domain::sending::ending`]), with its `broadcast.sent` or
/// `broadcast.failed` event in the same transaction; returns its final status and
/// organization when this call ended it. The place every end of a sending broadcast is
/// decided: the dispatcher's, a send job's and the ticker's.
#[tracing::instrument(skip_all, fields(broadcast_id = %id))]
pub async fn finish_if_done(
    ctx: Ctx<'_>,
    id: BroadcastId,
) -> Result<Option<(BroadcastStatus, OrgId)>> {
    let mut tx = ctx.pool.begin().await?;
    let Some((org, totals)) = db::sending::lock_sending_totals(&mut tx, id).await? else {
        return Ok(None);
    };
    let Some(ending) = rules::ending(totals) else {
        return Ok(None);
    };
    db::sending::end_sending(&mut tx, id, ending).await?;
    if let Some(broadcast) = db::broadcasts::get(&mut *tx, org, id).await? {
        let event = match ending.status {
            BroadcastStatus::Completed => EventName::BroadcastSent,
            _ => EventName::BroadcastFailed,
        };
        db::outbox::emit(&mut tx, org, event, &broadcast).await?;
    }
    tx.commit().await?;
    Ok(Some((ending.status, org)))
}

/// Retention: deletes up to `limit` recipients of the broadcast that ended longest ago, more
/// than `after` ago; returns the rows deleted and whether such a broadcast was found.
#[tracing::instrument(skip_all)]
pub async fn purge_recipients(ctx: Ctx<'_>, after: Duration, limit: i64) -> Result<(u64, bool)> {
    let mut tx = ctx.pool.begin().await?;
    let purged = db::sending::purge_recipients(&mut tx, after, limit).await?;
    tx.commit().await?;
    Ok(purged)
}

// The dispatcher's steps.

/// Takes the broadcast's dispatch lease (`parley_db::sending::begin_dispatch`).
pub async fn begin_dispatch(
    ctx: Ctx<'_>,
    id: BroadcastId,
    lease: Duration,
    token: Uuid,
    per_org: i64,
) -> Result<Option<DispatchState>> {
    db::sending::begin_dispatch(ctx.pool, id, lease, token, per_org).await
}

/// Captures an A/B broadcast's variants' content when sending starts.
pub async fn capture_variants(ctx: Ctx<'_>, id: BroadcastId) -> Result<()> {
    db::sending::capture_variants(ctx.pool, id).await
}

/// The broadcast's status; `None` when it is gone.
pub async fn status(ctx: Ctx<'_>, id: BroadcastId) -> Result<Option<BroadcastStatus>> {
    db::sending::status(ctx.pool, id).await
}

/// The next pending recipients after `after`, marked enqueued (a resume's requeue).
pub async fn take_pending(
    ctx: Ctx<'_>,
    id: BroadcastId,
    after: Option<RecipientId>,
    limit: i64,
) -> Result<Vec<RecipientId>> {
    db::sending::take_pending(ctx.pool, id, after, limit).await
}

/// Gives the dispatch lease up if `token` holds it; `handed_on` when a new job takes over.
pub async fn end_dispatch_turn(
    ctx: Ctx<'_>,
    id: BroadcastId,
    token: Uuid,
    handed_on: bool,
) -> Result<()> {
    db::sending::end_dispatch_turn(ctx.pool, id, token, handed_on).await
}

/// The organization's broadcast queued longest, to start now that one of its own ended.
pub async fn next_queued(ctx: Ctx<'_>, org: OrgId) -> Result<Option<BroadcastId>> {
    db::sending::next_queued(ctx.pool, org).await
}

// The send job's steps.

/// What sending needs to know about the broadcast.
pub async fn send_context(ctx: Ctx<'_>, id: BroadcastId) -> Result<Option<SendContext>> {
    db::sending::send_context(ctx.pool, id).await
}

/// The recipients among `ids` still pending, with what their messages need and the first
/// entry of the suppression ledger they obey (the send decides on it in
/// `parley_domain::sending`).
pub async fn pending_for_send(
    ctx: Ctx<'_>,
    broadcast: &SendContext,
    ids: &[RecipientId],
) -> Result<Vec<Claimed>> {
    db::sending::pending_for_send(
        ctx.pool,
        broadcast.organization_id,
        broadcast.id,
        ids,
        broadcast.channel,
        &broadcast.suppression_reasons(),
        broadcast.obeyed_topic(),
    )
    .await
}

/// An A/B broadcast's variants' content (B to D).
pub async fn variant_contents(ctx: Ctx<'_>, id: BroadcastId) -> Result<Vec<VariantContent>> {
    db::sending::variant_contents(ctx.pool, id).await
}

/// Pauses a sending broadcast on the service's own account; whether it was sending.
pub async fn auto_pause(ctx: Ctx<'_>, id: BroadcastId, reason: &str) -> Result<bool> {
    db::sending::auto_pause(ctx.pool, id, reason).await
}

/// Records outcomes in one statement, a recipient no longer pending keeping its own (the
/// worker's outcome writer, which runs apart from any job, holds `Services` for it).
pub async fn record_outcomes<'a>(
    ctx: Ctx<'_>,
    outcomes: impl IntoIterator<Item = &'a (RecipientId, RecipientOutcome)>,
) -> Result<()> {
    db::sending::record(ctx.pool, outcomes).await
}

// The ticker's and the reconciler's steps.

/// Postgres' clock, which writes `enqueued_at` and the like.
pub async fn now(ctx: Ctx<'_>) -> Result<Timestamp> {
    db::sending::now(ctx.pool).await
}

/// Scheduled broadcasts whose time has come, moved to `queued`.
pub async fn queue_due(ctx: Ctx<'_>, limit: i64) -> Result<Vec<BroadcastId>> {
    db::sending::queue_due(ctx.pool, limit).await
}

/// A/B broadcasts whose wait ended by `now` with no winner: (organization, broadcast).
pub async fn due_picks(
    ctx: Ctx<'_>,
    now: Timestamp,
    limit: i64,
) -> Result<Vec<(OrgId, BroadcastId)>> {
    db::sending::due_picks(ctx.pool, now, limit).await
}

/// Held recipients whose time has come by `now`, made pending: (broadcast, recipient).
pub async fn release_held(
    ctx: Ctx<'_>,
    now: Timestamp,
    limit: i64,
) -> Result<Vec<(BroadcastId, RecipientId)>> {
    db::sending::release_held(ctx.pool, now, limit).await
}

/// The lanes of `broadcasts`: their organizations and tiers.
pub async fn lanes(
    ctx: Ctx<'_>,
    broadcasts: &[BroadcastId],
) -> Result<std::collections::HashMap<BroadcastId, BroadcastLane>> {
    db::sending::lanes(ctx.pool, broadcasts).await
}

/// Broadcasts whose dispatch job seems lost, their queue time renewed.
pub async fn stale_dispatches(
    ctx: Ctx<'_>,
    after: Duration,
    limit: i64,
) -> Result<Vec<BroadcastId>> {
    db::sending::stale_dispatches(ctx.pool, after, limit).await
}

/// Pending recipients whose job seems lost within `bounds`: (broadcast, recipient).
pub async fn stale_recipients(
    ctx: Ctx<'_>,
    bounds: &StaleBounds,
    limit: i64,
) -> Result<Vec<(BroadcastId, RecipientId)>> {
    db::sending::stale_recipients(ctx.pool, bounds, limit).await
}

/// Marks lost recipients enqueued again, failing those enqueued `max_requeues` times already.
pub async fn requeue(
    ctx: Ctx<'_>,
    ids: &[RecipientId],
    after: Duration,
    max_requeues: i16,
) -> Result<StaleRecipients> {
    db::sending::requeue(ctx.pool, ids, after, max_requeues).await
}

/// Sending broadcasts that may be done but were not ended (for [`finish_if_done`] to decide).
pub async fn done_but_sending(ctx: Ctx<'_>, limit: i64) -> Result<Vec<BroadcastId>> {
    db::sending::done_but_sending(ctx.pool, limit).await
}

//! The worker's units of work on webhook deliveries: the deliveries due taken for jobs, a
//! job's outcome recorded, a recovery moved on. Each is one transaction; they fail with
//! Postgres' own error, which the jobs sort into transient (try again) or not.

use parley_db as db;
use parley_types::ids::OrgId;
use parley_types::ids::WebhookId;
use std::time::Duration;

use crate::Ctx;
pub use parley_db::outbox::CHANNEL as OUTBOX_CHANNEL;
use parley_db::outbox::TakenDeliveries;
pub use parley_db::webhooks::{AttemptRecord, DueAttempt, WebhookJobReport};
use parley_domain::webhooks::EventName;
use uuid::Uuid;

/// Takes the deliveries due for an attempt that no job holds (and those whose job was lost),
/// at most `per_webhook` of one webhook, giving up those lost `max_requeues` times already;
/// one worker at a time (the others find nothing).
#[tracing::instrument(skip_all)]
pub async fn take_due(
    ctx: Ctx<'_>,
    limit: i64,
    per_webhook: i64,
    lost_after: Duration,
    max_requeues: i16,
) -> Result<TakenDeliveries, sqlx::Error> {
    let mut tx = ctx.pool.begin().await?;
    let due = db::outbox::take_due(&mut tx, limit, per_webhook, lost_after, max_requeues).await?;
    tx.commit().await?;
    Ok(due)
}

/// Writes a webhook job's outcome: the attempts' log, the deliveries, the webhooks' failure
/// streaks, the deliveries put back; a webhook this disabled is told to its organization's
/// other webhooks (`webhook.disabled`; it is inactive now and gets none). Returns the
/// webhooks this disabled.
#[tracing::instrument(skip_all, fields(attempts = outcome.attempts.len()))]
pub async fn record_outcome(
    ctx: Ctx<'_>,
    outcome: &WebhookJobReport,
    disable_after: Duration,
) -> Result<Vec<Uuid>, sqlx::Error> {
    if outcome.attempts.is_empty() && outcome.busy.is_empty() && outcome.stalled.is_empty() {
        return Ok(Vec::new());
    }
    let mut tx = ctx.pool.begin().await?;
    let disabled = db::webhooks::record_outcome(&mut tx, outcome, disable_after).await?;
    let mut events = Vec::new();
    for &(org, id) in &disabled {
        if let Some(webhook) =
            db::webhooks::get(&mut *tx, OrgId::from(org), WebhookId::from(id)).await?
        {
            let data = webhook
                .disabled_event()
                .map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
            events.push((org, EventName::WebhookDisabled, data));
        }
    }
    db::outbox::emit_many(&mut tx, &events).await?;
    tx.commit().await?;
    Ok(disabled.into_iter().map(|(_, id)| id).collect())
}

/// Moves the running recovery moved least recently on by `batch` failed deliveries; returns
/// how many were queued again.
#[tracing::instrument(skip_all)]
pub async fn advance_recoveries(ctx: Ctx<'_>, batch: i64) -> Result<u64, sqlx::Error> {
    let mut tx = ctx.pool.begin().await?;
    let queued = db::webhooks::advance_recoveries(&mut tx, batch).await?;
    tx.commit().await?;
    Ok(queued)
}

// The webhook job's and the relay's single statements, through to `parley_db::webhooks` and
// `parley_db::outbox`.

pub async fn load_due(
    ctx: Ctx<'_>,
    ids: &[Uuid],
) -> std::result::Result<Vec<DueAttempt>, sqlx::Error> {
    db::webhooks::load_due(ctx.pool, ids).await
}

pub async fn relay_events(
    ctx: Ctx<'_>,
    limit: i64,
) -> std::result::Result<(Vec<(Uuid, Uuid, Uuid)>, usize), sqlx::Error> {
    db::outbox::relay(ctx.pool, limit).await
}

pub async fn outbox_backlog(ctx: Ctx<'_>) -> std::result::Result<i64, sqlx::Error> {
    db::outbox::backlog(ctx.pool).await
}

//! The worker's retention sweeps that delete a batch a statement: events with their deliveries
//! and attempts, expired idempotency keys, and soft bounces older than any window counts
//! (an ended broadcast's recipients are
//! [`crate::sending::purge_recipients`]), each through to `parley_db`.

use std::time::Duration;

use parley_db as db;

use crate::Ctx;

pub use crate::idempotency::KEPT_FOR as IDEMPOTENCY_KEYS_KEPT_FOR;

pub async fn sweep_webhook_events(
    ctx: Ctx<'_>,
    retention: Duration,
    failed_retention: Duration,
    limit: i64,
) -> std::result::Result<u64, sqlx::Error> {
    db::outbox::sweep_expired(ctx.pool, retention, failed_retention, limit).await
}

pub async fn sweep_idempotency_keys(
    ctx: Ctx<'_>,
    kept_for: Duration,
    limit: i64,
) -> std::result::Result<u64, sqlx::Error> {
    db::idempotency::sweep(ctx.pool, kept_for, limit).await
}

/// Deletes up to `limit` soft bounces older than the longest `softBounceLimit.days`.
pub async fn sweep_soft_bounces(ctx: Ctx<'_>, limit: i64) -> std::result::Result<u64, sqlx::Error> {
    db::suppressions::sweep_soft_bounces(ctx.pool, limit).await
}

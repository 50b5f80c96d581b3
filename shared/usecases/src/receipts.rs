//! Providers' delivery receipts: a batch applied in one transaction, and the receipts that
//! came before their message was recorded applied later, in one transaction per pass. The
//! bounces and complaints they mark go to the suppression ledger in the same transaction
//! ([`crate::suppressions::from_receipts`]).

use parley_db as db;
use parley_db::receipts::ReceiptsOutcome;
use parley_domain::Channel;

use crate::{Ctx, Result};
pub use parley_db::receipts::Receipt;

/// Applies a batch of `channel`'s receipts (each recipient moves forward only), keeping those
/// whose message is not recorded yet for [`apply_early`].
#[tracing::instrument(skip_all, fields(%channel, receipts = receipts.len()))]
pub async fn apply(
    ctx: Ctx<'_>,
    channel: Channel,
    receipts: &[Receipt],
) -> Result<ReceiptsOutcome> {
    let mut tx = ctx.pool.begin().await?;
    let outcome = db::receipts::apply(&mut tx, channel, receipts).await?;
    crate::suppressions::from_receipts(&mut tx, &outcome.reports, ctx.clock.now()).await?;
    tx.commit().await?;
    Ok(outcome)
}

/// Applies at most `limit` kept receipts whose message is now recorded (the ticker's pass).
#[tracing::instrument(skip_all)]
pub async fn apply_early(ctx: Ctx<'_>, limit: i64) -> Result<ReceiptsOutcome> {
    let mut tx = ctx.pool.begin().await?;
    let outcome = db::receipts::apply_early(&mut tx, limit).await?;
    crate::suppressions::from_receipts(&mut tx, &outcome.reports, ctx.clock.now()).await?;
    tx.commit().await?;
    Ok(outcome)
}

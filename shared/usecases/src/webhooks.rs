//! Webhooks: the changes that take several statements, each in one transaction under the
//! webhook's row lock.

use parley_db as db;
use parley_domain::webhooks::{Delivery, UpdateWebhook, Webhook};
use parley_types::error::AppError;
use uuid::Uuid;

use crate::{Caller, Ctx, Result};

/// Changes a webhook; `allow_private` admits `http` and private addresses (development).
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, webhook_id = %id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: Uuid,
    req: UpdateWebhook,
    allow_private: bool,
) -> Result<Webhook> {
    let mut tx = ctx.pool.begin().await?;
    let mut webhook = db::webhooks::lock(&mut tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut webhook, allow_private)?;
    db::webhooks::update(&mut *tx, &webhook).await?;
    tx.commit().await?;
    Ok(webhook)
}

/// A `webhook.test` delivery of an active webhook, due now, handed to the workers (the relay
/// enqueues it if Redis is unreachable: it is a due row already).
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, webhook_id = %id))]
pub async fn test(ctx: Ctx<'_>, caller: &Caller, id: Uuid) -> Result<Delivery> {
    let mut tx = ctx.pool.begin().await?;
    let webhook = db::webhooks::lock(&mut tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    if !webhook.is_active {
        return Err(AppError::invalid_state("the webhook is disabled; enable it first").into());
    }
    let delivery = db::webhooks::create_test_delivery(&mut tx, &webhook).await?;
    tx.commit().await?;
    if let Err(err) = ctx
        .jobs
        .deliver_webhooks(&[(caller.org_id, delivery.webhook_id, delivery.delivery_id)])
        .await
    {
        tracing::warn!(delivery_id = %delivery.delivery_id, %err, "delivery not enqueued; the relay will");
    }
    Ok(delivery)
}

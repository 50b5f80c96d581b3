//! Webhooks: created with their secret, read, changed under the webhook's row lock, deleted;
//! their secrets rotated, their test deliveries, redeliveries and recoveries started and
//! handed to the workers; their delivery attempts' log.

use std::time::Duration;

use parley_db as db;
use parley_domain::webhooks::{
    AttemptFilter, CreateWebhook, Delivery, RecoverWebhook, UpdateWebhook, Webhook, WebhookAttempt,
    WebhookRecovery, WebhookWithSecret, new_secret,
};
use parley_types::error::AppError;
use parley_types::ids::{OrgId, WebhookId};
use parley_types::list::{Page, PageRequest};
use secrecy::ExposeSecret;
use uuid::Uuid;

use crate::{Caller, Ctx, Result, changed, found};

/// How long a rotated-out secret keeps signing beside the new one.
const ROTATION_OVERLAP: Duration = Duration::from_secs(24 * 3600);

/// Changes a webhook; `allow_private` admits `http` and private addresses (development).
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, webhook_id = %id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: WebhookId,
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
pub async fn test(ctx: Ctx<'_>, caller: &Caller, id: WebhookId) -> Result<Delivery> {
    let mut tx = ctx.pool.begin().await?;
    let webhook = db::webhooks::lock(&mut tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    if !webhook.is_active {
        return Err(AppError::invalid_state("the webhook is disabled; enable it first").into());
    }
    let delivery = db::webhooks::create_test_delivery(&mut tx, &webhook).await?;
    tx.commit().await?;
    enqueue(ctx, caller.org_id, &delivery).await;
    Ok(delivery)
}

/// Deletes the organization's webhook; 404 when there is none.
pub async fn delete(ctx: Ctx<'_>, caller: &Caller, id: WebhookId) -> Result<()> {
    changed(db::webhooks::delete(ctx.pool, caller.org_id, id).await?)
}

/// A page of the organization's webhooks (never their secrets).
pub async fn list(ctx: Ctx<'_>, org: OrgId, page: &PageRequest) -> Result<Page<Webhook>> {
    Ok(db::webhooks::list(ctx.pool, org, page).await?)
}

/// The organization's webhook (never its secret).
pub async fn read(ctx: Ctx<'_>, org: OrgId, id: WebhookId) -> Result<Webhook> {
    found(db::webhooks::get(ctx.pool, org, id).await?)
}

/// The organization's active webhook; 409 when it is disabled.
async fn active(ctx: Ctx<'_>, org: OrgId, id: WebhookId) -> Result<Webhook> {
    let webhook = read(ctx, org, id).await?;
    if !webhook.is_active {
        return Err(AppError::invalid_state("the webhook is disabled; enable it first").into());
    }
    Ok(webhook)
}

/// Creates a webhook with a new signing secret, shown in this answer only; `allow_private`
/// admits `http` and private addresses (development).
pub async fn create(
    ctx: Ctx<'_>,
    caller: &Caller,
    req: CreateWebhook,
    allow_private: bool,
) -> Result<WebhookWithSecret> {
    let (webhook, secret) = req.into_webhook(caller.org_id.uuid(), allow_private)?;
    db::webhooks::insert(ctx.pool, &webhook, secret.expose_secret()).await?;
    Ok(WebhookWithSecret { webhook, secret })
}

/// A new signing secret; the former one keeps signing beside it for [`ROTATION_OVERLAP`].
pub async fn rotate_secret(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: WebhookId,
) -> Result<WebhookWithSecret> {
    let secret = new_secret();
    changed(
        db::webhooks::rotate_secret(
            ctx.pool,
            caller.org_id,
            id,
            secret.expose_secret(),
            ROTATION_OVERLAP,
        )
        .await?,
    )?;
    let webhook = read(ctx, caller.org_id, id).await?;
    Ok(WebhookWithSecret { webhook, secret })
}

/// A page of the webhook's delivery attempts.
pub async fn attempts(
    ctx: Ctx<'_>,
    org: OrgId,
    id: WebhookId,
    filter: &AttemptFilter,
    page: &PageRequest,
) -> Result<Page<WebhookAttempt>> {
    read(ctx, org, id).await?;
    Ok(db::webhooks::attempts(ctx.pool, id, filter, page).await?)
}

/// Sends a delivery of an active webhook again, due now, handed to the workers (the relay
/// enqueues it if Redis is unreachable).
pub async fn redeliver(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: WebhookId,
    delivery: Uuid,
) -> Result<Delivery> {
    active(ctx, caller.org_id, id).await?;
    let delivery = found(db::webhooks::redeliver(ctx.pool, id, delivery).await?)?;
    enqueue(ctx, caller.org_id, &delivery).await;
    Ok(delivery)
}

/// Starts sending an active webhook's failed deliveries of `[since, until)` again; 409 while
/// a recovery of it runs.
pub async fn recover(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: WebhookId,
    req: RecoverWebhook,
) -> Result<WebhookRecovery> {
    let (since, until) = req.window()?;
    active(ctx, caller.org_id, id).await?;
    db::webhooks::start_recovery(ctx.pool, caller.org_id, id, since, until)
        .await?
        .ok_or_else(|| {
            AppError::invalid_state("a recovery of this webhook is still running; wait for it")
                .into()
        })
}

/// A recovery of the organization's webhook.
pub async fn read_recovery(
    ctx: Ctx<'_>,
    org: OrgId,
    webhook: WebhookId,
    id: Uuid,
) -> Result<WebhookRecovery> {
    found(db::webhooks::get_recovery(ctx.pool, org, webhook, id).await?)
}

/// Hands a due delivery to the workers; when Redis does not take it, the relay will (it is a
/// due row in Postgres already).
async fn enqueue(ctx: Ctx<'_>, org: OrgId, d: &Delivery) {
    if let Err(err) = ctx
        .jobs
        .deliver_webhooks(&[(org.uuid(), d.webhook_id, d.delivery_id)])
        .await
    {
        tracing::warn!(delivery_id = %d.delivery_id, %err, "delivery not enqueued; the relay will");
    }
}

//! Broadcasts' changes, each in one transaction under the broadcast's row lock (its state
//! machine is `parley_domain::broadcasts::Action`'s), then handed to the workers.

use parley_db as db;
use parley_db::refs::{self, RefTable};
use parley_domain::broadcasts::{
    Action, Broadcast, BroadcastStatus, CreateBroadcast, MAX_AUDIENCE, UpdateBroadcast,
};
use parley_domain::templates::Template;
use parley_types::error::AppError;
use parley_types::time::Timestamp;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::{Caller, Ctx, Result};

/// Hands a broadcast to the workers. Postgres already says it is queued, so if Redis is
/// unreachable now the worker's reconciler dispatches it later; the change still stands.
async fn dispatch(ctx: Ctx<'_>, id: Uuid, requeue: bool) {
    if let Err(err) = ctx.jobs.dispatch(id, requeue).await {
        tracing::warn!(broadcast_id = %id, %err, "dispatch not enqueued; the reconciler will");
    }
}

/// The broadcast as the API shows it.
pub async fn read(ctx: Ctx<'_>, org: Uuid, id: Uuid) -> Result<Broadcast> {
    Ok(db::broadcasts::get(ctx.pool, org, id)
        .await?
        .ok_or(AppError::NotFound)?)
}

async fn template(conn: &mut PgConnection, org: Uuid, id: Uuid) -> Result<Template> {
    Ok(db::templates::share(conn, org, id).await?.ok_or_else(|| {
        AppError::validation(
            "templateId",
            "not_found",
            format!("{id} is not a template of this organization"),
        )
    })?)
}

/// Creates a broadcast: a draft, scheduled or queued (then dispatched).
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn create(ctx: Ctx<'_>, caller: &Caller, req: CreateBroadcast) -> Result<Broadcast> {
    let org = caller.org_id;
    let mut tx = ctx.pool.begin().await?;
    let template = template(&mut tx, org, req.template_id).await?;
    refs::check_ids(
        &mut tx,
        RefTable::Contacts,
        org,
        "contactIds",
        &req.contact_ids,
        MAX_AUDIENCE,
    )
    .await?;
    refs::check_id(
        &mut tx,
        RefTable::Segments,
        org,
        "segmentId",
        req.segment_id,
    )
    .await?;
    let (broadcast, audience) = req.into_broadcast(org, &template, Timestamp::now())?;
    db::broadcasts::insert(&mut *tx, &broadcast, &audience).await?;
    tx.commit().await?;
    if broadcast.status == BroadcastStatus::Queued {
        dispatch(ctx, broadcast.id, false).await;
    }
    read(ctx, org, broadcast.id).await
}

/// Changes a draft or scheduled broadcast (dispatched when it becomes queued).
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, broadcast_id = %id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: Uuid,
    req: UpdateBroadcast,
) -> Result<Broadcast> {
    let org = caller.org_id;
    let mut tx = ctx.pool.begin().await?;
    let mut broadcast = db::broadcasts::lock(&mut tx, org, id)
        .await?
        .ok_or(AppError::NotFound)?;
    if !Action::Update.allowed_from().contains(&broadcast.status) {
        return Err(Action::Update.refused(broadcast.status).into());
    }
    if let Some(ids) = &req.contact_ids {
        refs::check_ids(
            &mut tx,
            RefTable::Contacts,
            org,
            "contactIds",
            ids,
            MAX_AUDIENCE,
        )
        .await?;
    }
    refs::check_id(
        &mut tx,
        RefTable::Segments,
        org,
        "segmentId",
        req.segment_id,
    )
    .await?;
    let template = template(&mut tx, org, broadcast.template_id).await?;
    let audience = req.apply(&mut broadcast, &template, Timestamp::now())?;
    db::broadcasts::update(&mut *tx, &broadcast, audience.as_deref()).await?;
    tx.commit().await?;
    if broadcast.status == BroadcastStatus::Queued {
        dispatch(ctx, id, false).await;
    }
    read(ctx, org, id).await
}

/// Deletes a draft broadcast.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, broadcast_id = %id))]
pub async fn delete(ctx: Ctx<'_>, caller: &Caller, id: Uuid) -> Result<()> {
    let mut tx = ctx.pool.begin().await?;
    let broadcast = db::broadcasts::lock(&mut tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    if !Action::Delete.allowed_from().contains(&broadcast.status) {
        return Err(Action::Delete.refused(broadcast.status).into());
    }
    db::broadcasts::delete(&mut *tx, caller.org_id, id).await?;
    tx.commit().await?;
    Ok(())
}

/// Pauses, resumes or cancels: checks the state under the row lock, then moves the broadcast
/// (a resumed one is dispatched again, every pending recipient enqueued).
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, broadcast_id = %id, ?action))]
pub async fn act(ctx: Ctx<'_>, caller: &Caller, id: Uuid, action: Action) -> Result<Broadcast> {
    let mut tx = ctx.pool.begin().await?;
    let broadcast = db::broadcasts::lock(&mut tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    if !action.allowed_from().contains(&broadcast.status) {
        return Err(action.refused(broadcast.status).into());
    }
    let to = match action {
        Action::Pause => BroadcastStatus::Paused,
        Action::Cancel => BroadcastStatus::Cancelled,
        // A broadcast paused before its dispatch started goes back to the queue.
        Action::Resume if broadcast.started_at.is_some() => BroadcastStatus::Sending,
        Action::Resume => BroadcastStatus::Queued,
        Action::Update | Action::Delete | Action::RetryFailed => {
            return Err(action.refused(broadcast.status).into());
        }
    };
    db::broadcasts::set_status(&mut *tx, caller.org_id, id, to).await?;
    tx.commit().await?;
    if action == Action::Resume {
        dispatch(ctx, id, true).await;
    }
    read(ctx, caller.org_id, id).await
}

/// Sends again the recipients whose delivery failed (those with one of `codes`, when given).
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, broadcast_id = %id))]
pub async fn retry_failed(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: Uuid,
    codes: Option<&[String]>,
) -> Result<Broadcast> {
    let mut tx = ctx.pool.begin().await?;
    let broadcast = db::broadcasts::lock(&mut tx, caller.org_id, id)
        .await?
        .ok_or(AppError::NotFound)?;
    if !Action::RetryFailed
        .allowed_from()
        .contains(&broadcast.status)
    {
        return Err(Action::RetryFailed.refused(broadcast.status).into());
    }
    let retried = db::broadcasts::retry_failed(&mut tx, id, codes).await?;
    if retried == 0 {
        return Err(
            AppError::invalid_state("no failed recipient of this broadcast matches").into(),
        );
    }
    tx.commit().await?;
    tracing::info!(retried, "failed recipients sent again");
    dispatch(ctx, id, true).await;
    read(ctx, caller.org_id, id).await
}

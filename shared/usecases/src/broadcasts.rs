//! Broadcasts' changes, each in one transaction under the broadcast's row lock (its state
//! machine is `parley_domain::broadcasts::Action`'s), then handed to the workers.

use parley_db as db;
use parley_db::refs::{self, RefTable};
use parley_domain::ab_tests::{PickedBy, winner};
use parley_domain::broadcasts::{
    Action, Broadcast, BroadcastFilter, BroadcastRecipient, BroadcastStatus, CreateBroadcast,
    MAX_AUDIENCE, NewBroadcast, RecipientFilter, UpdateBroadcast,
};
use parley_domain::templates::Template;
use parley_domain::webhooks::EventName;
use parley_types::error::AppError;
use parley_types::ids::{BroadcastId, OrgId};
use parley_types::ids::{TemplateId, TopicId};
use parley_types::list::{Page, PageRequest};
use parley_types::time::Timestamp;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::{Caller, Ctx, Result};

/// Hands a broadcast to the workers. Postgres already says it is queued, so if Redis is
/// unreachable now the worker's reconciler dispatches it later; the change still stands.
async fn dispatch(ctx: Ctx<'_>, id: BroadcastId, requeue: bool) {
    if let Err(err) = ctx.jobs.dispatch(id, requeue).await {
        tracing::warn!(broadcast_id = %id, %err, "dispatch not enqueued; the reconciler will");
    }
}

/// The broadcast as the API shows it.
pub async fn read(ctx: Ctx<'_>, org: OrgId, id: BroadcastId) -> Result<Broadcast> {
    Ok(db::broadcasts::get(ctx.pool, org, id)
        .await?
        .ok_or(AppError::NotFound)?)
}

async fn template(conn: &mut PgConnection, org: OrgId, id: TemplateId) -> Result<Template> {
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
    if let Some(ab) = &req.ab_test {
        ab.check_count()?;
    }
    let template = template(&mut tx, org, TemplateId::from(req.template_id)).await?;
    let mut variant_templates = Vec::new();
    for (i, v) in req.ab_test.iter().flat_map(|ab| &ab.variants).enumerate() {
        let t = db::templates::share(&mut *tx, org, TemplateId::from(v.template_id))
            .await?
            .ok_or_else(|| {
                AppError::validation(
                    format!("abTest.variants[{i}].templateId"),
                    "not_found",
                    format!("{} is not a template of this organization", v.template_id),
                )
            })?;
        variant_templates.push(t);
    }
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
    refs::check_id(
        &mut tx,
        RefTable::Topics,
        org,
        "topicId",
        req.topic_id.map(TopicId::uuid),
    )
    .await?;
    let NewBroadcast {
        broadcast,
        audience,
        ab,
    } = req.into_broadcast(org.uuid(), &template, &variant_templates, Timestamp::now())?;
    db::broadcasts::insert(&mut *tx, &broadcast, &audience).await?;
    if let Some((settings, variants)) = &ab {
        db::broadcasts::insert_ab_test(
            &mut tx,
            org,
            BroadcastId::from(broadcast.id),
            settings,
            variants,
        )
        .await?;
    }
    tx.commit().await?;
    if broadcast.status == BroadcastStatus::Queued {
        dispatch(ctx, BroadcastId::from(broadcast.id), false).await;
    }
    read(ctx, org, BroadcastId::from(broadcast.id)).await
}

/// Changes a draft or scheduled broadcast (dispatched when it becomes queued).
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, broadcast_id = %id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: BroadcastId,
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
    refs::check_id(
        &mut tx,
        RefTable::Topics,
        org,
        "topicId",
        req.topic_id.flatten().map(TopicId::uuid),
    )
    .await?;
    let template = template(&mut tx, org, TemplateId::from(broadcast.template_id)).await?;
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
pub async fn delete(ctx: Ctx<'_>, caller: &Caller, id: BroadcastId) -> Result<()> {
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
pub async fn act(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: BroadcastId,
    action: Action,
) -> Result<Broadcast> {
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

/// Sends again the recipients whose send failed (those with one of `codes`, when given).
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, broadcast_id = %id))]
pub async fn retry_failed(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: BroadcastId,
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
    let which = db::broadcasts::RetryWhich {
        codes,
        ..Default::default()
    };
    let retried = db::broadcasts::retry_failed(&mut tx, id, &which)
        .await?
        .count;
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

/// Sends again the failed recipients `ids` of a broadcast (an operator's retry of dead work):
/// as [`retry_failed`] does, for those only, under the broadcast's lock, from the states that
/// allow a tenant's retry and from `sending` too, so that an action's later batches of one
/// broadcast go on while its first ones send (0 from `paused`, which the retry would resume,
/// and from `cancelled`). Recipients whose outcome is uncertain (`attempts_exhausted`,
/// `timeout`: the provider may have taken the message) are sent again only when
/// `uncertain_too`. A broadcast that ended is dispatched again; a sending one (whose dispatcher
/// may hold it, and whose other pending recipients have their jobs) gets the retried
/// recipients in its lane at once, as the reconciler would enqueue them.
pub async fn retry_recipients(
    ctx: Ctx<'_>,
    org: OrgId,
    id: BroadcastId,
    ids: &[Uuid],
    uncertain_too: bool,
) -> Result<u64> {
    let mut tx = ctx.pool.begin().await?;
    let Some(broadcast) = db::broadcasts::lock(&mut tx, org, id).await? else {
        return Ok(0);
    };
    if broadcast.status != BroadcastStatus::Sending
        && !Action::RetryFailed
            .allowed_from()
            .contains(&broadcast.status)
    {
        return Ok(0);
    }
    let uncertain = UNCERTAIN_CODES.map(str::to_owned);
    let which = db::broadcasts::RetryWhich {
        codes: None,
        ids: Some(ids),
        except: if uncertain_too { &[] } else { &uncertain },
    };
    let retried = db::broadcasts::retry_failed(&mut tx, id, &which).await?.ids;
    tx.commit().await?;
    if retried.is_empty() {
        return Ok(0);
    }
    tracing::info!(broadcast_id = %id, retried = retried.len(), "failed recipients sent again by an operator");
    if broadcast.status == BroadcastStatus::Sending {
        let high = broadcast.priority == parley_domain::broadcasts::SendPriority::High;
        let lane = parley_jobs::Lane::of_broadcast(org, id, high);
        if let Err(err) = ctx.jobs.enqueue_sends(&lane, &retried).await {
            tracing::warn!(broadcast_id = %id, %err, "retried recipients not enqueued; the reconciler will");
        }
    } else {
        dispatch(ctx, id, true).await;
    }
    Ok(retried.len() as u64)
}

/// Error codes after which a recipient may have been sent although it failed.
pub const UNCERTAIN_CODES: [&str; 2] = ["attempts_exhausted", "timeout"];

/// Picks the winner of an A/B broadcast whose test share is written and whose winner is not
/// picked yet (409 `invalid_state` otherwise): the variant named `name`, or (`None`, when the
/// wait ended) the best by the test's winner metric, the first on a tie. The rest of the
/// audience is then sent the winner, and `broadcast.variant_picked` is emitted in the same
/// transaction.
#[tracing::instrument(skip_all, fields(organization_id = %org, broadcast_id = %id, ?by))]
pub async fn pick_variant(
    ctx: Ctx<'_>,
    org: OrgId,
    id: BroadcastId,
    name: Option<&str>,
    by: PickedBy,
) -> Result<Broadcast> {
    let mut tx = ctx.pool.begin().await?;
    let broadcast = db::broadcasts::lock(&mut tx, org, id)
        .await?
        .ok_or(AppError::NotFound)?;
    let Some(test) = &broadcast.ab_test else {
        return Err(AppError::invalid_state("this broadcast is not an A/B broadcast").into());
    };
    if test.winner.is_some() {
        return Err(AppError::invalid_state("this broadcast's winner is picked already").into());
    }
    if !matches!(
        broadcast.status,
        BroadcastStatus::Sending | BroadcastStatus::Paused
    ) || test.test_ends_at.is_none()
    {
        return Err(AppError::invalid_state(format!(
            "a winner is picked once the test share is written, while the broadcast is sending or paused; it is {}",
            broadcast.status
        ))
        .into());
    }
    let index = match name {
        Some(name) => broadcast
            .variants
            .iter()
            .position(|v| v.name == name)
            .ok_or_else(|| {
                AppError::validation(
                    "variant",
                    "not_found",
                    format!("{name:?} is not a variant of this broadcast"),
                )
            })?,
        None => winner(&broadcast.variants, test.winner_metric),
    };
    let variant = index as i16 + 1;
    let picked = db::sending::pick_variant(&mut *tx, id, variant, by).await?;
    if !picked {
        return Err(AppError::invalid_state("this broadcast's winner is picked already").into());
    }
    let broadcast = db::broadcasts::get(&mut *tx, org, id)
        .await?
        .ok_or(AppError::NotFound)?;
    db::outbox::emit(&mut tx, org, EventName::BroadcastVariantPicked, &broadcast).await?;
    tx.commit().await?;
    tracing::info!(winner = ?broadcast.variant_name, "A/B winner picked");
    metrics::counter!(parley_types::metric_names::VARIANT_PICKS, "by" => by.as_str()).increment(1);
    if broadcast.status == BroadcastStatus::Sending {
        dispatch(ctx, id, false).await;
    }
    Ok(broadcast)
}

/// A page of the organization's broadcasts.
pub async fn list(
    ctx: Ctx<'_>,
    org: OrgId,
    f: &BroadcastFilter,
    page: &PageRequest,
) -> Result<Page<Broadcast>> {
    Ok(db::broadcasts::list(ctx.pool, org, f, page).await?)
}

/// A page of the broadcast's recipients with their outcomes.
pub async fn recipients(
    ctx: Ctx<'_>,
    org: OrgId,
    id: BroadcastId,
    filter: &RecipientFilter,
    page: &PageRequest,
) -> Result<Page<BroadcastRecipient>> {
    read(ctx, org, id).await?;
    Ok(db::broadcasts::recipients(ctx.pool, org, id, filter, page).await?)
}

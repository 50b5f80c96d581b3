//! Subscription topics and a contact's preferences for them (docs/api.md, Topics).

use parley_db as db;
use parley_domain::topics::{
    CreateTopic, MAX_TOPICS, Subscriptions, Topic, TopicChoice, TopicSource, UpdateSubscriptions,
    UpdateTopic,
};
use parley_types::error::AppError;
use parley_types::ids::{ContactId, OrgId, TopicId};
use parley_types::list::{Page, PageRequest};

use crate::{Caller, Ctx, Result, changed, found};

/// Creates a topic, while the organization has fewer than [`MAX_TOPICS`].
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn create(ctx: Ctx<'_>, caller: &Caller, req: CreateTopic) -> Result<Topic> {
    let topic = req.into_topic(caller.org_id, ctx.clock.now());
    let mut tx = ctx.pool.begin().await?;
    if db::topics::count_locked(&mut tx, caller.org_id).await? >= MAX_TOPICS as i64 {
        return Err(AppError::invalid_state(format!(
            "an organization keeps at most {MAX_TOPICS} topics"
        ))
        .into());
    }
    db::topics::insert(&mut *tx, &topic).await?;
    tx.commit().await?;
    Ok(topic)
}

/// Renames a topic or changes its description.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update(ctx: Ctx<'_>, caller: &Caller, id: TopicId, req: UpdateTopic) -> Result<Topic> {
    let mut tx = ctx.pool.begin().await?;
    let mut topic = found(db::topics::get(&mut *tx, caller.org_id, id, true).await?)?;
    req.apply(&mut topic, ctx.clock.now());
    db::topics::update(&mut *tx, &topic).await?;
    tx.commit().await?;
    Ok(topic)
}

/// Deletes a topic and its contacts' unsubscribes from it; 409 while a broadcast names it.
pub async fn delete(ctx: Ctx<'_>, caller: &Caller, id: TopicId) -> Result<()> {
    changed(db::topics::delete(ctx.pool, caller.org_id, id).await?)
}

pub async fn list(ctx: Ctx<'_>, org: OrgId, page: &PageRequest) -> Result<Page<Topic>> {
    Ok(db::topics::list(ctx.pool, org, page).await?)
}

pub async fn read(ctx: Ctx<'_>, org: OrgId, id: TopicId) -> Result<Topic> {
    found(db::topics::get(ctx.pool, org, id, false).await?)
}

/// A contact's preference for every topic, and whether the ledger holds its marketing on each
/// channel.
pub async fn subscriptions(ctx: Ctx<'_>, org: OrgId, contact: ContactId) -> Result<Subscriptions> {
    let channels = db::topics::channel_unsubscribes(ctx.pool, org, contact).await?;
    if channels.is_empty() {
        return Err(AppError::NotFound.into());
    }
    Ok(Subscriptions {
        contact_id: contact,
        topics: db::topics::preferences(ctx.pool, org, contact).await?,
        channels,
    })
}

/// Changes a contact's preferences for the topics named (source `api`); every topic must be
/// the organization's (422 naming the first that is not).
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, contact_id = %contact))]
pub async fn update_subscriptions(
    ctx: Ctx<'_>,
    caller: &Caller,
    contact: ContactId,
    req: UpdateSubscriptions,
) -> Result<Subscriptions> {
    let org = caller.org_id;
    let choices = req.check()?;
    let mut tx = ctx.pool.begin().await?;
    if !db::contacts::hold(&mut tx, org, contact).await? {
        return Err(AppError::NotFound.into());
    }
    let ids: Vec<(usize, uuid::Uuid)> = choices
        .iter()
        .enumerate()
        .map(|(i, c)| (i, c.topic_id.uuid()))
        .collect();
    db::refs::check_ids_of(
        &mut tx,
        db::refs::RefTable::Topics,
        org,
        "topics",
        "topicId",
        &ids,
    )
    .await?;
    let (on, off): (Vec<TopicChoice>, Vec<TopicChoice>) =
        choices.into_iter().partition(|c| c.subscribed);
    let on: Vec<TopicId> = on.iter().map(|c| c.topic_id).collect();
    let off: Vec<TopicId> = off.iter().map(|c| c.topic_id).collect();
    db::topics::resubscribe(&mut *tx, org, contact, &on).await?;
    db::topics::unsubscribe(&mut *tx, org, contact, &off, TopicSource::Api).await?;
    tx.commit().await?;
    subscriptions(ctx, org, contact).await
}

//! Unsubscribe links: the keys that sign them (in Postgres, read again each minute by every
//! process), and what a link does (docs/api.md, Unsubscribing): an `unsubscribed` entry in the
//! ledger for the address the link's channel sends to, or its removal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parley_db as db;
use parley_domain::suppressions::{Subject, Suppression, SuppressionReason, SuppressionSource};
use parley_domain::topics::TopicSource;
use parley_domain::unsubscribe::{
    Subscription, UnsubscribeKey, UnsubscribeSource, UnsubscribeToken, new_secret,
};
use parley_domain::webhooks::EventName;
use parley_types::error::AppError;
use parley_types::ids::TopicId;

use crate::{Ctx, Error, Result};

/// How long a process trusts the keys it read.
const FRESH_FOR: Duration = Duration::from_secs(60);

/// The deployment's unsubscribe keys, as this process last read them.
#[derive(Clone, Default)]
pub struct UnsubscribeKeys {
    read: Arc<tokio::sync::Mutex<Option<Read>>>,
}

/// The keys as read, and when.
struct Read {
    at: Instant,
    keys: Arc<Vec<UnsubscribeKey>>,
}

impl UnsubscribeKeys {
    /// Every key, read again once a minute old (by one caller at a time: the others wait for
    /// its read); the deployment's first is made on first use. Should Postgres not answer, the
    /// keys read last serve on.
    pub async fn all(
        &self,
        ctx: Ctx<'_>,
    ) -> std::result::Result<Arc<Vec<UnsubscribeKey>>, sqlx::Error> {
        let mut read = self.read.lock().await;
        if let Some(r) = &*read
            && r.at.elapsed() < FRESH_FOR
        {
            return Ok(r.keys.clone());
        }
        match load(ctx).await {
            Ok(keys) => {
                let keys = Arc::new(keys);
                *read = Some(Read {
                    at: Instant::now(),
                    keys: keys.clone(),
                });
                Ok(keys)
            }
            Err(err) => match &*read {
                Some(r) => {
                    tracing::warn!(%err, "unsubscribe keys not read again; the last read serves");
                    Ok(r.keys.clone())
                }
                None => Err(err),
            },
        }
    }

    /// What `token` names, if one of the keys signed it.
    pub async fn verify(
        &self,
        ctx: Ctx<'_>,
        token: &str,
    ) -> std::result::Result<Option<UnsubscribeToken>, sqlx::Error> {
        Ok(UnsubscribeToken::verify(token, &self.all(ctx).await?))
    }
}

/// The keys, the first made when there is none.
async fn load(ctx: Ctx<'_>) -> std::result::Result<Vec<UnsubscribeKey>, sqlx::Error> {
    let keys = db::unsubscribe::keys(ctx.pool).await?;
    if !keys.is_empty() {
        return Ok(keys);
    }
    db::unsubscribe::add_key(ctx.pool, Some(1), &new_secret()).await?;
    db::unsubscribe::keys(ctx.pool).await
}

/// Adds a key (`parley-api unsubscribe-keys rotate`): it signs new links once every process
/// knows it (`KEY_WARM_UP_SECS`); the older ones keep verifying the links they signed.
/// Returns its id.
pub async fn rotate(ctx: Ctx<'_>) -> Result<u8> {
    // Two rotations at once may pick the same next id: the one that lost tries again.
    for _ in 0..3 {
        if let Some(id) = db::unsubscribe::add_key(ctx.pool, None, &new_secret()).await? {
            return Ok(id);
        }
        if db::unsubscribe::keys(ctx.pool)
            .await?
            .iter()
            .any(|k| k.id == u8::MAX)
        {
            return Err(Error(AppError::invalid_state(
                "the last key id (255) is taken: no further key can be added",
            )));
        }
    }
    Err(Error(AppError::invalid_state(
        "other rotations took every id tried: run it again",
    )))
}

/// What a link names now; `None` when its organization is gone.
pub async fn subscription(ctx: Ctx<'_>, t: &UnsubscribeToken) -> Result<Option<Subscription>> {
    Ok(db::unsubscribe::lookup(ctx.pool, t).await?)
}

/// RFC 8058's one-click: from the link's broadcast's topic when it names one
/// ([`set_topics`]), else from every marketing message on the link's channel
/// ([`unsubscribe`]).
pub async fn one_click(ctx: Ctx<'_>, t: &UnsubscribeToken) -> Result<Option<Subscription>> {
    let Some(now) = subscription(ctx, t).await? else {
        return Ok(None);
    };
    match now.topic {
        Some(topic) => change_topics(ctx, t, &[], &[topic], UnsubscribeSource::OneClick).await,
        None => unsubscribe(ctx, t, UnsubscribeSource::OneClick).await,
    }
}

/// Unsubscribes the link's address (or contact) from the organization's marketing messages on
/// its channel: an `unsubscribed` entry (source `unsubscribe`) with its `contact.suppressed`
/// and `contact.unsubscribed` events, the contact counted in the link's broadcast's
/// `unsubscribedCount` once whatever it does later. While the entry is there: nothing changes.
pub async fn unsubscribe(
    ctx: Ctx<'_>,
    t: &UnsubscribeToken,
    how: UnsubscribeSource,
) -> Result<Option<Subscription>> {
    let mut tx = ctx.pool.begin().await?;
    let Some(subject) = subject_of(&mut tx, t).await? else {
        tx.commit().await?;
        return subscription(ctx, t).await;
    };
    let entry = Suppression::new(
        t.organization_id,
        subject,
        Some(t.channel),
        SuppressionReason::Unsubscribed,
        SuppressionSource::Unsubscribe,
        ctx.clock.now(),
    );
    let written = crate::suppressions::write(&mut tx, std::slice::from_ref(&entry)).await?;
    if let Some(entry) = written.first() {
        let data = serde_json::json!({"entry": entry, "topicId": null});
        unsubscribed(&mut tx, t, how, vec![data]).await?;
    }
    tx.commit().await?;
    subscription(ctx, t).await
}

/// The page's topics form: of the topics it `shown`, the contact gets those in `subscribed` and
/// leaves the others (a topic added since, or an id that is not the organization's topic,
/// changes nothing). Each topic newly left is a
/// `topic_unsubscribes` row (source `unsubscribe`) and a `contact.unsubscribed` event; the
/// contact counts in the broadcast's `unsubscribedCount` as for [`unsubscribe`].
pub async fn set_topics(
    ctx: Ctx<'_>,
    t: &UnsubscribeToken,
    shown: &[TopicId],
    subscribed: &[TopicId],
) -> Result<Option<Subscription>> {
    let Some(now) = subscription(ctx, t).await? else {
        return Ok(None);
    };
    let (on, off): (Vec<TopicId>, Vec<TopicId>) = now
        .topics
        .iter()
        .map(|p| p.topic_id)
        .filter(|id| shown.contains(id))
        .partition(|id| subscribed.contains(id));
    change_topics(ctx, t, &on, &off, UnsubscribeSource::Page).await
}

/// Subscribes the link's contact to `on` again and unsubscribes it from `off`, in one
/// transaction; a deleted contact changes nothing.
async fn change_topics(
    ctx: Ctx<'_>,
    t: &UnsubscribeToken,
    on: &[TopicId],
    off: &[TopicId],
    how: UnsubscribeSource,
) -> Result<Option<Subscription>> {
    let (org, contact) = (t.organization_id, t.contact_id);
    let mut tx = ctx.pool.begin().await?;
    if db::contacts::hold(&mut tx, org, contact).await? {
        db::topics::resubscribe(&mut *tx, org, contact, on).await?;
        let left =
            db::topics::unsubscribe(&mut *tx, org, contact, off, TopicSource::Unsubscribe).await?;
        let events = left
            .iter()
            .map(|topic| serde_json::json!({"entry": null, "topicId": topic}))
            .collect::<Vec<_>>();
        if !events.is_empty() {
            unsubscribed(&mut tx, t, how, events).await?;
        }
    }
    tx.commit().await?;
    subscription(ctx, t).await
}

/// A `contact.unsubscribed` event for each of `parts` (what was left: a ledger `entry` or a
/// `topicId`), and the contact counted once in the link's broadcast.
async fn unsubscribed(
    tx: &mut sqlx::PgConnection,
    t: &UnsubscribeToken,
    how: UnsubscribeSource,
    parts: Vec<serde_json::Value>,
) -> Result<()> {
    let events: Vec<_> = parts
        .into_iter()
        .map(|part| {
            let mut data = serde_json::json!({
                "contactId": t.contact_id,
                "broadcastId": t.broadcast_id,
                "channel": t.channel,
                "source": how,
            });
            if let (Some(data), serde_json::Value::Object(part)) = (data.as_object_mut(), part) {
                data.extend(part);
            }
            (
                t.organization_id.uuid(),
                EventName::ContactUnsubscribed,
                data,
            )
        })
        .collect();
    db::outbox::emit_many(&mut *tx, &events).await?;
    db::unsubscribe::count(tx, t).await?;
    Ok(())
}

/// Removes the `unsubscribed` entries links made for the contact on the link's channel:
/// marketing reaches it again there, unless another entry (or `doNotContact`) holds it.
pub async fn resubscribe(ctx: Ctx<'_>, t: &UnsubscribeToken) -> Result<Option<Subscription>> {
    db::unsubscribe::remove(ctx.pool, t).await?;
    subscription(ctx, t).await
}

/// What the link's entry names: the contact's address on its channel, else the contact;
/// `None` when the contact is gone.
async fn subject_of(
    conn: &mut sqlx::PgConnection,
    t: &UnsubscribeToken,
) -> Result<Option<Subject>> {
    let found = db::suppressions::addresses(conn, &[(t.organization_id, t.contact_id)]).await?;
    Ok(found.get(&t.contact_id).map(|(email, phone)| {
        Subject::on_channel(t.channel, t.contact_id, email.as_deref(), phone.as_deref())
    }))
}

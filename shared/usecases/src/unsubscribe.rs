//! Unsubscribe links: the keys that sign them (in Postgres, read again each minute by every
//! process), and what a link does (docs/api.md, Unsubscribing): an `unsubscribed` entry in the
//! ledger for the address the link's channel sends to, or its removal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parley_db as db;
use parley_domain::suppressions::{Subject, Suppression, SuppressionReason, SuppressionSource};
use parley_domain::unsubscribe::{
    Subscription, UnsubscribeKey, UnsubscribeSource, UnsubscribeToken, new_secret,
};
use parley_domain::webhooks::EventName;
use parley_types::error::AppError;

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
        let data = serde_json::json!({
            "contactId": t.contact_id,
            "broadcastId": t.broadcast_id,
            "channel": t.channel,
            "source": how,
            "entry": entry,
        });
        db::outbox::emit_many(
            &mut tx,
            &[(
                t.organization_id.uuid(),
                EventName::ContactUnsubscribed,
                data,
            )],
        )
        .await?;
        db::unsubscribe::count(&mut tx, t).await?;
    }
    tx.commit().await?;
    subscription(ctx, t).await
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

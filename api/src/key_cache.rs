//! The API keys this process knows, and their organizations: a key's identity (organization,
//! name, scopes, daily limit) by the hash of its secret, so that a request with a known key
//! reads nothing to be authenticated; an organization's row by its id, so that
//! `GET /organization` reads nothing either.
//!
//! A revoked key gets 401 from the next request in every process: any change of a key row (a
//! revocation, through the API or by hand) notifies [`api_keys::REVOKED_CHANNEL`]
//! with the key's id on commit (a trigger), and each API process listens to it on a session
//! connection ([`listen`]), dropping the key. A changed organization is notified the same way
//! (with [`parley_usecases::orgs::CHANGED_PREFIX`]); the process that changed it drops it itself
//! before it answers, so its own next read is fresh. The listener proves every 5 s that
//! notifications reach it (a heartbeat notified through the pool must come back within 2 s).
//! While it is not connected, or its last heartbeat did not come back (at start, after a lost
//! or half-open connection, with LISTEN sent through a transaction pooler), the cache is
//! bypassed and emptied, so a notification missed meanwhile cannot leave a revoked key or a
//! stale organization in it; and an entry is dropped [`TTL`] after it was read whatever
//! happens. Unknown secrets are never kept (a client trying random keys fills nothing). A
//! lookup that raced a revocation or a change does not store what it read
//! ([`KeyCache::generation`], [`KeyCache::organization_generation`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use parley_domain::api_keys::KeyIdentity;
use parley_domain::orgs::Organization;
use parley_usecases::{Ctx, Services, api_keys};
use sqlx::postgres::PgListener;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How long a key or an organization is trusted without reading it again: the bound on a
/// revocation's (a change's) reach if its notification were lost while the listener still
/// looked connected.
pub const TTL: Duration = Duration::from_secs(30);
/// Keys (and organizations) kept at most; past it the cache starts again empty (the ones in use
/// come back).
const MAX_KEYS: usize = 100_000;

#[derive(Clone, Default)]
pub struct KeyCache(Arc<Inner>);

#[derive(Default)]
struct Inner {
    keys: RwLock<HashMap<Vec<u8>, (KeyIdentity, Instant)>>,
    /// Locked after `keys` when both are.
    orgs: RwLock<HashMap<Uuid, (Organization, Instant)>>,
    /// Whether the revocation listener is connected: the cache is used only then.
    listening: AtomicBool,
    /// Moves on at every revocation and reset; a key read from Postgres started before a
    /// move is not stored.
    generation: AtomicU64,
    /// The same for organizations: their changes do not hold back keys' reads (nor the other
    /// way round).
    org_generation: AtomicU64,
}

impl KeyCache {
    /// The key whose secret hashes to `hash`, if known and fresh.
    pub fn get(&self, hash: &[u8], now: Instant) -> Option<KeyIdentity> {
        if !self.0.listening.load(Ordering::Acquire) {
            return None;
        }
        let keys = self.0.keys.read();
        let (key, read_at) = keys.get(hash)?;
        (now.duration_since(*read_at) < TTL).then(|| key.clone())
    }

    /// The generation to hand to [`KeyCache::put`] with what is read next.
    pub fn generation(&self) -> u64 {
        self.0.generation.load(Ordering::Acquire)
    }

    /// Keeps `key`, read from Postgres at `read_at`, unless a revocation or a reset came since
    /// `generation` was taken.
    pub fn put(&self, hash: Vec<u8>, key: KeyIdentity, generation: u64, read_at: Instant) {
        if !self.0.listening.load(Ordering::Acquire) {
            return;
        }
        let mut keys = self.0.keys.write();
        // Under the write lock: a revocation moves the generation under it too.
        if self.0.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if keys.len() >= MAX_KEYS {
            keys.clear();
        }
        keys.insert(hash, (key, read_at));
    }

    /// The organization `id`, if known and fresh.
    pub fn organization(&self, id: Uuid, now: Instant) -> Option<Organization> {
        if !self.0.listening.load(Ordering::Acquire) {
            return None;
        }
        let orgs = self.0.orgs.read();
        let (org, read_at) = orgs.get(&id)?;
        (now.duration_since(*read_at) < TTL).then(|| org.clone())
    }

    /// The generation to hand to [`KeyCache::put_organization`] with what is read next.
    pub fn organization_generation(&self) -> u64 {
        self.0.org_generation.load(Ordering::Acquire)
    }

    /// Keeps `org`, read from Postgres at `read_at`, unless a change or a reset came since
    /// `generation` was taken.
    pub fn put_organization(&self, org: Organization, generation: u64, read_at: Instant) {
        if !self.0.listening.load(Ordering::Acquire) {
            return;
        }
        let mut orgs = self.0.orgs.write();
        if self.0.org_generation.load(Ordering::Acquire) != generation {
            return;
        }
        if orgs.len() >= MAX_KEYS {
            orgs.clear();
        }
        orgs.insert(org.id, (org, read_at));
    }

    /// Drops the organization `id` (changed or deleted).
    pub fn forget_organization(&self, id: Uuid) {
        let mut orgs = self.0.orgs.write();
        self.0.org_generation.fetch_add(1, Ordering::AcqRel);
        orgs.remove(&id);
    }

    /// Drops the key `id` (revoked).
    pub fn revoke(&self, id: Uuid) {
        let mut keys = self.0.keys.write();
        self.0.generation.fetch_add(1, Ordering::AcqRel);
        keys.retain(|_, (key, _)| key.id != id);
    }

    /// Empties the cache and uses it (`true`) or bypasses it (`false`).
    fn reset(&self, listening: bool) {
        let mut keys = self.0.keys.write();
        let mut orgs = self.0.orgs.write();
        self.0.generation.fetch_add(1, Ordering::AcqRel);
        self.0.org_generation.fetch_add(1, Ordering::AcqRel);
        keys.clear();
        orgs.clear();
        self.0.listening.store(listening, Ordering::Release);
        metrics::gauge!(parley_types::metric_names::KEY_CACHE_IN_USE)
            .set(f64::from(u8::from(listening)));
    }
}

/// How often the listener proves that notifications reach it: it notifies the channel through
/// the pool (the way revocations come) and waits for its own note.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);
/// How long a heartbeat may take before the listener counts as deaf: the cache is bypassed and
/// the connection made again.
const HEARTBEAT_WAIT: Duration = Duration::from_secs(2);
/// Heartbeats' payloads start with this; revocations' are key ids.
const HEARTBEAT: &str = "heartbeat:";

/// Listens to revocations on `session_url` until `shutdown`, reconnecting after a lost
/// connection or a heartbeat not heard; the cache is used only while the last heartbeat came
/// back in time.
pub async fn listen(
    cache: KeyCache,
    services: Services,
    session_url: String,
    shutdown: CancellationToken,
) {
    loop {
        let outcome = tokio::select! {
            () = shutdown.cancelled() => break,
            r = listen_once(&cache, services.ctx(), &session_url) => r,
        };
        cache.reset(false);
        if let Err(err) = outcome {
            tracing::warn!(%err, "API key revocations and organization changes not heard; keys and organizations are read at each request until they are");
        }
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    // Draining requests read their keys: nobody hears revocations any more.
    cache.reset(false);
}

async fn listen_once(cache: &KeyCache, ctx: Ctx<'_>, session_url: &str) -> anyhow::Result<()> {
    let mut listener = PgListener::connect(session_url).await?;
    // A lost connection ends this turn at once (the cache goes off) instead of reconnecting
    // inside `try_recv` while the cache is still used.
    listener.eager_reconnect(false);
    listener.listen(api_keys::REVOKED_CHANNEL).await?;
    let mut heard_once = false;
    let mut waiting = Some(heartbeat(ctx).await?);
    let mut next_beat = Instant::now() + HEARTBEAT_EVERY;
    loop {
        let wake = match &waiting {
            Some((_, deadline)) => *deadline,
            None => next_beat,
        };
        // `try_recv` may be dropped for the timer: sqlx takes a message out of its buffer only
        // once it has arrived whole, so nothing is lost.
        let note = tokio::select! {
            n = listener.try_recv() => n?,
            () = tokio::time::sleep_until(wake.into()) => {
                if waiting.is_some() {
                    anyhow::bail!("a heartbeat did not come back within {HEARTBEAT_WAIT:?}");
                }
                waiting = Some(heartbeat(ctx).await?);
                continue;
            }
        };
        // `None`: the connection was lost, and notifications with it.
        let Some(note) = note else {
            return Ok(());
        };
        let payload = note.payload();
        if let Some(token) = payload.strip_prefix(HEARTBEAT) {
            if waiting.as_ref().is_some_and(|(ours, _)| ours == token) {
                waiting = None;
                next_beat = Instant::now() + HEARTBEAT_EVERY;
                if !heard_once {
                    // Heard from here on: whatever was revoked before is read as revoked.
                    cache.reset(true);
                    heard_once = true;
                }
            }
            // Another process's heartbeat.
            continue;
        }
        if let Some(org) = payload.strip_prefix(parley_usecases::orgs::CHANGED_PREFIX) {
            match org.parse::<Uuid>() {
                Ok(id) => cache.forget_organization(id),
                Err(_) => cache.reset(heard_once),
            }
            continue;
        }
        match payload.parse::<Uuid>() {
            Ok(id) => cache.revoke(id),
            // Not ours to read: forget everything rather than keep a key that may be revoked.
            Err(_) => cache.reset(heard_once),
        }
    }
}

/// Notifies a heartbeat; returns its token and when it must be back.
async fn heartbeat(ctx: Ctx<'_>) -> parley_usecases::Result<(String, Instant)> {
    let token = Uuid::now_v7().simple().to_string();
    api_keys::notify_key_caches(ctx, &format!("{HEARTBEAT}{token}")).await?;
    Ok((token, Instant::now() + HEARTBEAT_WAIT))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: Uuid) -> KeyIdentity {
        KeyIdentity {
            id,
            organization_id: Uuid::now_v7(),
            name: "k".into(),
            scopes: vec!["*".into()],
            daily_limit: None,
        }
    }

    #[test]
    fn nothing_is_kept_or_served_while_not_listening() {
        let cache = KeyCache::default();
        let now = Instant::now();
        cache.put(b"h".to_vec(), key(Uuid::now_v7()), cache.generation(), now);
        assert!(cache.get(b"h", now).is_none());
        cache.reset(true);
        cache.put(b"h".to_vec(), key(Uuid::now_v7()), cache.generation(), now);
        assert!(cache.get(b"h", now).is_some());
        cache.reset(false);
        assert!(cache.get(b"h", now).is_none());
    }

    #[test]
    fn a_revoked_key_goes_and_a_read_that_raced_it_is_not_kept() {
        let cache = KeyCache::default();
        cache.reset(true);
        let (id, now) = (Uuid::now_v7(), Instant::now());
        let before = cache.generation();
        cache.put(b"h".to_vec(), key(id), before, now);
        cache.revoke(id);
        assert!(cache.get(b"h", now).is_none());
        cache.put(b"h".to_vec(), key(id), before, now);
        assert!(cache.get(b"h", now).is_none(), "read before the revocation");
    }

    fn org(id: Uuid) -> Organization {
        let now = parley_types::time::Timestamp::now();
        Organization {
            id,
            name: "o".into(),
            slug: "o".into(),
            working_hours: sqlx::types::Json(serde_json::json!({})),
            quiet_hours: None,
            frequency_caps: sqlx::types::Json(Default::default()),
            soft_bounce_limit: sqlx::types::Json(Default::default()),
            created_at: now,
            updated_at: now,
        }
    }

    #[test]
    fn a_changed_organization_goes_and_a_read_that_raced_it_is_not_kept() {
        let cache = KeyCache::default();
        cache.reset(true);
        let (id, now) = (Uuid::now_v7(), Instant::now());
        let before = cache.organization_generation();
        cache.put_organization(org(id), before, now);
        assert!(cache.organization(id, now).is_some());
        cache.forget_organization(id);
        assert!(cache.organization(id, now).is_none());
        cache.put_organization(org(id), before, now);
        assert!(
            cache.organization(id, now).is_none(),
            "read before the change"
        );
        cache.put_organization(org(id), cache.organization_generation(), now);
        assert!(cache.organization(id, now + TTL).is_none(), "expired");
        cache.reset(false);
        assert!(cache.organization(id, now).is_none(), "not listening");
    }

    #[test]
    fn an_entry_expires() {
        let cache = KeyCache::default();
        cache.reset(true);
        let now = Instant::now();
        cache.put(b"h".to_vec(), key(Uuid::now_v7()), cache.generation(), now);
        assert!(
            cache
                .get(b"h", now + TTL - Duration::from_millis(1))
                .is_some()
        );
        assert!(cache.get(b"h", now + TTL).is_none());
    }
}

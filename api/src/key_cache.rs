//! The API keys this process knows: a key's identity (organization, name, scopes, daily limit)
//! by the hash of its secret, so that a request with a known key reads nothing to be
//! authenticated.
//!
//! A revoked key gets 401 from the next request in every process: revoking notifies
//! [`parley_db::api_keys::REVOKED_CHANNEL`] with the key's id, on commit, and each API process
//! listens to it on a session connection ([`listen`]), dropping the key. While that listener
//! is not connected (at start, after a lost connection) the cache is bypassed and emptied, so
//! a notification missed while away cannot leave a revoked key in it; and an entry is dropped
//! [`TTL`] after it was read whatever happens. Unknown secrets are never kept (a client trying
//! random keys fills nothing). A lookup that raced a revocation does not store what it read
//! ([`KeyCache::generation`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use parley_domain::api_keys::KeyIdentity;
use sqlx::postgres::PgListener;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How long a key is trusted without reading it again: the bound on a revocation's reach if
/// its notification were lost while the listener still looked connected.
pub const TTL: Duration = Duration::from_secs(30);
/// Keys kept at most; past it the cache starts again empty (the keys in use come back).
const MAX_KEYS: usize = 100_000;

#[derive(Clone, Default)]
pub struct KeyCache(Arc<Inner>);

#[derive(Default)]
struct Inner {
    keys: RwLock<HashMap<Vec<u8>, (KeyIdentity, Instant)>>,
    /// Whether the revocation listener is connected: the cache is used only then.
    listening: AtomicBool,
    /// Moves on at every revocation and every reset; a read from Postgres started before a
    /// move is not stored.
    generation: AtomicU64,
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

    /// Drops the key `id` (revoked).
    pub fn revoke(&self, id: Uuid) {
        let mut keys = self.0.keys.write();
        self.0.generation.fetch_add(1, Ordering::AcqRel);
        keys.retain(|_, (key, _)| key.id != id);
    }

    /// Empties the cache and uses it (`true`) or bypasses it (`false`).
    fn reset(&self, listening: bool) {
        let mut keys = self.0.keys.write();
        self.0.generation.fetch_add(1, Ordering::AcqRel);
        keys.clear();
        self.0.listening.store(listening, Ordering::Release);
    }
}

/// Listens to revocations on `session_url` until `shutdown`, reconnecting after a lost
/// connection; the cache is used only while connected.
pub async fn listen(cache: KeyCache, session_url: String, shutdown: CancellationToken) {
    loop {
        let outcome = tokio::select! {
            () = shutdown.cancelled() => return,
            r = listen_once(&cache, &session_url) => r,
        };
        cache.reset(false);
        if let Err(err) = outcome {
            tracing::warn!(%err, "API key revocations not heard; keys are read at each request until they are");
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

async fn listen_once(cache: &KeyCache, session_url: &str) -> Result<(), sqlx::Error> {
    let mut listener = PgListener::connect(session_url).await?;
    listener
        .listen(parley_db::api_keys::REVOKED_CHANNEL)
        .await?;
    // Listening from here: whatever was revoked before is read as revoked.
    cache.reset(true);
    loop {
        // `try_recv` returns `None` when the connection was lost (a notification may have
        // been missed): start again.
        let Some(n) = listener.try_recv().await? else {
            return Ok(());
        };
        match n.payload().parse::<Uuid>() {
            Ok(id) => cache.revoke(id),
            // Not ours to read: forget everything rather than keep a key that may be revoked.
            Err(_) => cache.reset(true),
        }
    }
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

//! Failed authentications per client address: a key-shaped token that names no key costs a
//! database lookup (and a wrong operator token or ticket token is a guess at a secret), so an
//! address may make at most `PARLEY_AUTH_FAILURES_PER_MINUTE` such failures in a minute; past that its key-shaped tokens get 429 `rate_limited` at once,
//! without the lookup, until the minute ends. Valid keys never count, however many arrive at
//! once. Lookups already running when an address reaches its limit still end (and count), so
//! an address may fail a little more than its limit: by the lookups it has in flight at most.
//!
//! Counted in this process (each API process counts its own), in fixed one-minute windows
//! shared by all addresses (a window's counts are dropped at once when it ends). The address
//! is the client's (`crate::client_addr`: behind a trusted proxy, the one it forwarded for),
//! an IPv6 one by its /64. At most [`MAX_ADDRESSES`]
//! addresses are counted per window; further ones go uncounted in that window (a flood from
//! more addresses costs the lookups it costs without the limit, never memory).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::client_addr;

/// Addresses counted per window at most.
pub const MAX_ADDRESSES: usize = 100_000;
const WINDOW: Duration = Duration::from_secs(60);

#[derive(Clone)]
pub struct AuthFailures {
    per_minute: u32,
    window: Arc<Mutex<Window>>,
}

struct Window {
    started: Instant,
    /// Failures per client this window.
    attempts: HashMap<IpAddr, u32>,
}

impl AuthFailures {
    /// `per_minute` 0 turns the limit off.
    pub fn new(per_minute: u32) -> Self {
        AuthFailures {
            per_minute,
            window: Arc::new(Mutex::new(Window {
                started: Instant::now(),
                attempts: HashMap::new(),
            })),
        }
    }

    /// Starts the current window over when it has ended.
    fn roll(w: &mut Window, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(w.started);
        if elapsed < WINDOW {
            return elapsed;
        }
        w.started = now;
        w.attempts.clear();
        Duration::ZERO
    }

    /// Seconds until the window ends, when `peer` failed as often as it may in it.
    pub fn blocked(&self, peer: IpAddr, now: Instant) -> Option<u64> {
        if self.per_minute == 0 {
            return None;
        }
        let mut w = self.window.lock();
        let elapsed = Self::roll(&mut w, now);
        let failures = *w.attempts.get(&client_addr::key(peer))?;
        (failures >= self.per_minute).then(|| (WINDOW - elapsed).as_secs().max(1))
    }

    /// 429 `rate_limited` when `peer` (if known) failed as often as it may this minute.
    pub fn admit(
        &self,
        peer: Option<IpAddr>,
        now: Instant,
    ) -> Result<(), parley_types::error::AppError> {
        match peer.and_then(|ip| self.blocked(ip, now)) {
            Some(retry_after) => Err(parley_types::error::AppError::RateLimited {
                message: "too many failed authentications from this address; try again later"
                    .to_owned(),
                retry_after,
            }),
            None => Ok(()),
        }
    }

    /// Counts a key-shaped token of `peer` that named no key.
    pub fn failed(&self, peer: IpAddr, now: Instant) {
        if self.per_minute == 0 {
            return;
        }
        let client = client_addr::key(peer);
        let mut w = self.window.lock();
        Self::roll(&mut w, now);
        if w.attempts.len() >= MAX_ADDRESSES && !w.attempts.contains_key(&client) {
            return;
        }
        let failures = w.attempts.entry(client).or_insert(0);
        *failures = failures.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_refused_past_its_failures_until_the_window_ends() {
        let limit = AuthFailures::new(3);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = limit.window.lock().started;
        for _ in 0..3 {
            assert_eq!(limit.blocked(a, t0), None);
            limit.failed(a, t0);
        }
        assert_eq!(limit.blocked(a, t0 + Duration::from_secs(10)), Some(50));
        assert_eq!(limit.blocked(b, t0), None, "another address is not");
        assert_eq!(limit.blocked(a, t0 + WINDOW), None, "a new window");
        let off = AuthFailures::new(0);
        off.failed(a, t0);
        assert_eq!(off.blocked(a, t0), None);
    }

    #[test]
    fn an_ipv6_host_counts_by_its_64() {
        let limit = AuthFailures::new(2);
        let t0 = limit.window.lock().started;
        limit.failed("2001:db8::1".parse().unwrap(), t0);
        limit.failed("2001:db8::2:3".parse().unwrap(), t0);
        assert!(
            limit
                .blocked("2001:db8::ffff".parse().unwrap(), t0)
                .is_some()
        );
        assert!(
            limit
                .blocked("2001:db8:0:1::1".parse().unwrap(), t0)
                .is_none()
        );
        // An IPv4 client on a dual-stack socket is its IPv4 address.
        let mapped: IpAddr = "::ffff:10.0.0.9".parse().unwrap();
        let v4: IpAddr = "10.0.0.9".parse().unwrap();
        assert_eq!(client_addr::key(mapped), v4);
    }

    #[test]
    fn the_addresses_counted_are_bounded() {
        let limit = AuthFailures::new(1);
        let t0 = limit.window.lock().started;
        for i in 0..(MAX_ADDRESSES as u32 + 10) {
            limit.failed(IpAddr::from(i.to_be_bytes()), t0);
        }
        assert_eq!(limit.window.lock().attempts.len(), MAX_ADDRESSES);
    }
}

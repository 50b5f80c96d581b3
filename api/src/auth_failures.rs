//! Failed authentications per client address: a key-shaped token that names no key costs a
//! database lookup, so an address may make at most `PARLEY_AUTH_FAILURES_PER_MINUTE` such
//! attempts in a minute; past that its key-shaped tokens get 429 `rate_limited` at once,
//! without the lookup, until the minute ends.
//!
//! Each lookup is reserved before it runs and given back when the key is found, so valid keys
//! never use up the allowance and concurrent attempts cannot run more lookups than it allows.
//! Counted in this process (each API process counts its own), in fixed one-minute windows
//! shared by all addresses (a window's counts are dropped at once when it ends). An IPv6
//! client counts by its /64, the block one host is usually given. At most [`MAX_ADDRESSES`]
//! addresses are counted per window; further ones go uncounted in that window (a flood from
//! more addresses costs the lookups it costs without the limit, never memory).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

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
    generation: u64,
    attempts: HashMap<IpAddr, u32>,
}

/// A lookup reserved by [`AuthFailures::begin`]; give it back with
/// [`AuthFailures::succeeded`] when the key is found.
pub struct Attempt {
    client: IpAddr,
    generation: u64,
}

/// What an address is counted by: itself, or its /64 for IPv6.
fn client(peer: IpAddr) -> IpAddr {
    match peer.to_canonical() {
        IpAddr::V6(v6) => {
            let mut octets = v6.octets();
            octets[8..].fill(0);
            IpAddr::from(octets)
        }
        v4 => v4,
    }
}

impl AuthFailures {
    /// `per_minute` 0 turns the limit off.
    pub fn new(per_minute: u32) -> Self {
        AuthFailures {
            per_minute,
            window: Arc::new(Mutex::new(Window {
                started: Instant::now(),
                generation: 0,
                attempts: HashMap::new(),
            })),
        }
    }

    /// Reserves a lookup for `peer`; `Err(seconds)` until the window ends when its attempts
    /// this window are used up. `Ok(None)`: not counted (the limit is off, or the window
    /// counts as many addresses as it may).
    pub fn begin(&self, peer: IpAddr, now: Instant) -> Result<Option<Attempt>, u64> {
        if self.per_minute == 0 {
            return Ok(None);
        }
        let client = client(peer);
        let mut w = self.window.lock();
        let mut elapsed = now.saturating_duration_since(w.started);
        if elapsed >= WINDOW {
            w.started = now;
            w.generation += 1;
            w.attempts.clear();
            elapsed = Duration::ZERO;
        }
        if w.attempts.len() >= MAX_ADDRESSES && !w.attempts.contains_key(&client) {
            return Ok(None);
        }
        let generation = w.generation;
        let attempts = w.attempts.entry(client).or_insert(0);
        if *attempts >= self.per_minute {
            return Err((WINDOW - elapsed).as_secs().max(1));
        }
        *attempts += 1;
        Ok(Some(Attempt { client, generation }))
    }

    /// The key was found (or the lookup could not be made): the attempt is not a failure.
    pub fn succeeded(&self, attempt: Attempt) {
        let mut w = self.window.lock();
        if w.generation == attempt.generation
            && let Some(n) = w.attempts.get_mut(&attempt.client)
        {
            *n = n.saturating_sub(1);
        }
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
            assert!(limit.begin(a, t0).unwrap().is_some(), "a failure");
        }
        assert_eq!(limit.begin(a, t0 + Duration::from_secs(10)).err(), Some(50));
        assert!(limit.begin(b, t0).is_ok(), "another address is not");
        assert!(limit.begin(a, t0 + WINDOW).is_ok(), "a new window");
        assert!(AuthFailures::new(0).begin(a, t0).unwrap().is_none());
    }

    #[test]
    fn found_keys_give_their_attempt_back() {
        let limit = AuthFailures::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let t0 = limit.window.lock().started;
        for _ in 0..10 {
            let attempt = limit.begin(a, t0).unwrap().unwrap();
            limit.succeeded(attempt);
        }
        assert!(limit.begin(a, t0).is_ok());
    }

    #[test]
    fn an_ipv6_host_counts_by_its_64() {
        let limit = AuthFailures::new(2);
        let t0 = limit.window.lock().started;
        for host in ["2001:db8::1", "2001:db8::2:3"] {
            limit.begin(host.parse().unwrap(), t0).unwrap().unwrap();
        }
        assert!(limit.begin("2001:db8::ffff".parse().unwrap(), t0).is_err());
        assert!(limit.begin("2001:db8:0:1::1".parse().unwrap(), t0).is_ok());
        // An IPv4 client on a dual-stack socket is its IPv4 address.
        let mapped: IpAddr = "::ffff:10.0.0.9".parse().unwrap();
        let v4: IpAddr = "10.0.0.9".parse().unwrap();
        assert_eq!(client(mapped), v4);
    }

    #[test]
    fn the_addresses_counted_are_bounded() {
        let limit = AuthFailures::new(1);
        let t0 = limit.window.lock().started;
        for i in 0..(MAX_ADDRESSES as u32 + 10) {
            let _ = limit.begin(IpAddr::from(i.to_be_bytes()), t0);
        }
        assert_eq!(limit.window.lock().attempts.len(), MAX_ADDRESSES);
    }
}

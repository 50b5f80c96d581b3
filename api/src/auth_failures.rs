//! Failed authentications per client address: a key-shaped token that names no key costs a
//! database lookup, so an address that sends more than `PARLEY_AUTH_FAILURES_PER_MINUTE` of
//! them in a minute gets 429 `rate_limited` at once, without the lookup, until its minute is
//! over. Counted in this process (each API process counts its own), in fixed one-minute
//! windows; at most [`MAX_ADDRESSES`] addresses are tracked (when full, the windows that ended
//! are dropped, and if none has, the count starts afresh: a flood from many addresses costs
//! the lookups it costs without the limit, never memory).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Addresses tracked at most.
pub const MAX_ADDRESSES: usize = 100_000;
const WINDOW: Duration = Duration::from_secs(60);

#[derive(Clone)]
pub struct AuthFailures {
    per_minute: u32,
    seen: Arc<Mutex<HashMap<IpAddr, (Instant, u32)>>>,
}

impl AuthFailures {
    /// `per_minute` 0 turns the limit off.
    pub fn new(per_minute: u32) -> Self {
        AuthFailures {
            per_minute,
            seen: Arc::default(),
        }
    }

    /// Seconds until `addr` may try again, when it has failed too often this minute.
    pub fn blocked(&self, addr: IpAddr, now: Instant) -> Option<u64> {
        if self.per_minute == 0 {
            return None;
        }
        let seen = self.seen.lock();
        let (start, failures) = seen.get(&addr)?;
        let left = WINDOW
            .checked_sub(now.saturating_duration_since(*start))
            .filter(|left| !left.is_zero())?;
        (*failures >= self.per_minute).then(|| left.as_secs().max(1))
    }

    /// Counts a failed authentication of `addr`.
    pub fn failed(&self, addr: IpAddr, now: Instant) {
        if self.per_minute == 0 {
            return;
        }
        let mut seen = self.seen.lock();
        if seen.len() >= MAX_ADDRESSES && !seen.contains_key(&addr) {
            seen.retain(|_, (start, _)| now.saturating_duration_since(*start) < WINDOW);
            if seen.len() >= MAX_ADDRESSES {
                seen.clear();
            }
        }
        let entry = seen.entry(addr).or_insert((now, 0));
        if now.saturating_duration_since(entry.0) >= WINDOW {
            *entry = (now, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_blocked_past_its_failures_until_its_minute_ends() {
        let limit = AuthFailures::new(3);
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(limit.blocked(a, t0), None);
            limit.failed(a, t0);
        }
        assert_eq!(limit.blocked(a, t0 + Duration::from_secs(10)), Some(50));
        assert_eq!(limit.blocked(b, t0), None, "another address is not");
        assert_eq!(limit.blocked(a, t0 + WINDOW), None, "a new minute");
        limit.failed(a, t0 + WINDOW);
        assert_eq!(limit.blocked(a, t0 + WINDOW), None, "counted afresh");
        assert_eq!(AuthFailures::new(0).blocked(a, t0), None);
    }

    #[test]
    fn the_addresses_tracked_are_bounded() {
        let limit = AuthFailures::new(1);
        let t0 = Instant::now();
        for i in 0..(MAX_ADDRESSES as u32 + 10) {
            limit.failed(IpAddr::from(i.to_be_bytes()), t0);
        }
        assert!(limit.seen.lock().len() <= MAX_ADDRESSES);
    }
}

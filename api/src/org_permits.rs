//! Costly reads one organization may run at once in this process (segment counts). Past the
//! limit the request gets 429 at once, so one organization's parallel counts cannot take the
//! pool's connections from the others.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use parley_types::error::AppError;
use parley_types::metric_names::org_limit_hits;
use uuid::Uuid;

/// Segment counts one organization runs at once, per API process.
pub const COUNTS_PER_ORG: usize = 2;

#[derive(Clone)]
pub struct OrgPermits {
    limit: usize,
    /// The metric's label.
    what: &'static str,
    /// What the answer calls them.
    noun: &'static str,
    /// Hits are counted per organization (`PARLEY_METRICS_ORG_LABEL`).
    org_label: bool,
    held: Arc<Mutex<HashMap<Uuid, usize>>>,
}

/// One organization's hold on a permit, given back when dropped.
pub struct Permit {
    held: Arc<Mutex<HashMap<Uuid, usize>>>,
    org: Uuid,
}

impl OrgPermits {
    pub fn new(what: &'static str, noun: &'static str, limit: usize, org_label: bool) -> Self {
        OrgPermits {
            limit,
            what,
            noun,
            org_label,
            held: Default::default(),
        }
    }

    /// A permit for `org`, or 429 `rate_limited` when it holds all of its own.
    pub fn take(&self, org: Uuid) -> Result<Permit, AppError> {
        let mut held = self.held.lock();
        let n = held.entry(org).or_default();
        if *n >= self.limit {
            org_limit_hits(self.what, self.org_label.then(|| org.to_string()), 1);
            return Err(AppError::RateLimited {
                message: format!(
                    "at most {} {} of an organization run at once; try again shortly",
                    self.limit, self.noun
                ),
                retry_after: 1,
            });
        }
        *n += 1;
        Ok(Permit {
            held: self.held.clone(),
            org,
        })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut held = self.held.lock();
        if let Some(n) = held.get_mut(&self.org) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.org);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_organization_past_its_permits_is_refused_and_others_are_not() {
        let permits = OrgPermits::new("segment_counts", "segment counts", 2, false);
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let first = permits.take(a).unwrap();
        let _second = permits.take(a).unwrap();
        assert!(matches!(permits.take(a), Err(AppError::RateLimited { .. })));
        assert!(permits.take(b).is_ok());
        drop(first);
        assert!(permits.take(a).is_ok());
    }
}

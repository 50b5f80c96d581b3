//! What one organization may run at once in this process: its requests ([`OrgTurns`]: past
//! its share they wait their turn, past its queue they get 429), and costly reads among them
//! ([`OrgPermits`], segment counts: 429 at once past the limit). So one organization's parallel
//! requests cannot take the pool's connections, or the process's in-flight requests, from the
//! others.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use parley_types::error::AppError;
use parley_types::metric_names::org_limit_hits;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use uuid::Uuid;

/// Segment counts one organization runs at once, per API process.
pub const COUNTS_PER_ORG: usize = 2;
/// Requests with a ticket's access token (a tenant's customers reading their tickets' SLA) one
/// organization runs at once per API process, and has waiting: a lane apart from its keys',
/// so that a customer's token cannot take its tenant's own turns.
pub const TICKET_TOKEN_TURNS: usize = 2;
pub const TICKET_TOKEN_QUEUED: usize = 8;
/// Import files one organization sends at once, per API process: each may hold up to
/// `PARLEY_UPLOAD_MAX_BYTES` of the temporary disk (`crate::body_spool::DiskBudget`).
pub const FILES_PER_ORG: usize = 2;
/// Suppression exports one organization streams at once, per API process: each reads the
/// ledger a batch at a time after its handler returned, outside the request's slot.
pub const EXPORTS_PER_ORG: usize = 1;
/// Broadcast previews one organization runs at once, per API process: each reads its whole
/// audience (a page of 5,000 contacts a statement) within the request.
pub const PREVIEWS_PER_ORG: usize = 1;

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

/// An organization's requests in this process: at most `running` at once, the next
/// `queued` waiting their turn in arrival order, and 429 `rate_limited` at once past those.
/// The requests of an organization that floods the API wait in its own queue, not in the
/// pool's: another organization's request finds a connection as soon as one is free (and,
/// with `running` below the pool's size, finds one free), and one organization holds at most
/// `running` of the process's in-flight slots (`PARLEY_MAX_IN_FLIGHT`), taken once its turn
/// came.
#[derive(Clone)]
pub struct OrgTurns {
    running: usize,
    queued: usize,
    org_label: bool,
    orgs: Arc<Mutex<HashMap<Uuid, Lane>>>,
}

/// One organization's requests: admitted (running or waiting) and running.
#[derive(Clone)]
struct Lane {
    admitted: Arc<Semaphore>,
    running: Arc<Semaphore>,
}

/// A request's turn, held until it is answered; its organization is forgotten when no request
/// of it is admitted.
pub struct Turn {
    running: Option<OwnedSemaphorePermit>,
    admitted: Option<OwnedSemaphorePermit>,
    orgs: Arc<Mutex<HashMap<Uuid, Lane>>>,
    org: Uuid,
}

impl OrgTurns {
    pub fn new(running: usize, queued: usize, org_label: bool) -> Self {
        OrgTurns {
            running: running.max(1),
            queued,
            org_label,
            orgs: Default::default(),
        }
    }

    /// The request's turn: at once while the organization runs fewer than its share, after
    /// the requests ahead of it otherwise; 429 when its queue is full too.
    pub async fn take(&self, org: Uuid) -> Result<Turn, AppError> {
        // The guard exists before anything is held, so that a request dropped while it waits
        // (its client gone, its timeout) still forgets an idle organization.
        let mut turn = Turn {
            running: None,
            admitted: None,
            orgs: self.orgs.clone(),
            org,
        };
        let lane = self
            .orgs
            .lock()
            .entry(org)
            .or_insert_with(|| Lane {
                admitted: Arc::new(Semaphore::new(self.running + self.queued)),
                running: Arc::new(Semaphore::new(self.running)),
            })
            .clone();
        let Ok(admitted) = lane.admitted.try_acquire_owned() else {
            org_limit_hits("requests", self.org_label.then(|| org.to_string()), 1);
            return Err(AppError::RateLimited {
                message: format!(
                    "at most {} requests of an organization run or wait at once; try again shortly",
                    self.running + self.queued
                ),
                retry_after: 1,
            });
        };
        turn.admitted = Some(admitted);
        let running = match lane.running.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                org_limit_hits(
                    "requests_waited",
                    self.org_label.then(|| org.to_string()),
                    1,
                );
                lane.running
                    .acquire_owned()
                    .await
                    .map_err(|_| AppError::Internal(anyhow::anyhow!("a lane closed")))?
            }
        };
        turn.running = Some(running);
        Ok(turn)
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.running.take();
        self.admitted.take();
        let mut orgs = self.orgs.lock();
        // Only the map holds the lane: no request of the organization is admitted or taking
        // its turn.
        if orgs
            .get(&self.org)
            .is_some_and(|lane| Arc::strong_count(&lane.admitted) == 1)
        {
            orgs.remove(&self.org);
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

    #[tokio::test]
    async fn an_organization_past_its_share_waits_its_turn_past_its_queue_is_refused() {
        use futures::FutureExt;
        let turns = OrgTurns::new(2, 1, false);
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let first = turns.take(a).await.unwrap();
        let _second = turns.take(a).await.unwrap();
        // The third waits; the fourth finds the queue full.
        let mut third = Box::pin(turns.take(a));
        assert!((&mut third).now_or_never().is_none());
        assert!(matches!(
            turns.take(a).now_or_never(),
            Some(Err(AppError::RateLimited { .. }))
        ));
        // Another organization is not held by any of it.
        let other = turns.take(b).now_or_never();
        assert!(matches!(other, Some(Ok(_))));
        drop(other);
        assert!(
            !turns.orgs.lock().contains_key(&b),
            "an idle organization is forgotten"
        );
        // A finished request hands its turn to the one waiting.
        drop(first);
        let third = third.await.unwrap();
        drop(third);
        drop(_second);
        assert!(turns.orgs.lock().is_empty());
    }

    #[tokio::test]
    async fn a_request_dropped_while_it_waits_leaves_nothing_behind() {
        use futures::FutureExt;
        let turns = OrgTurns::new(1, 4, false);
        let a = Uuid::now_v7();
        // Dropped while the first still runs, and dropped after the first ended (its turn
        // handed to the waiter, which never ran).
        for waiter_first in [true, false] {
            let first = turns.take(a).await.unwrap();
            let mut waiting = Box::pin(turns.take(a));
            assert!((&mut waiting).now_or_never().is_none());
            if waiter_first {
                drop(waiting);
                drop(first);
            } else {
                drop(first);
                drop(waiting);
            }
            assert!(turns.orgs.lock().is_empty());
            // The organization's share is whole again.
            let again = turns.take(a).now_or_never();
            assert!(matches!(again, Some(Ok(_))));
        }
    }
}

//! A job taken from its lane (recipient-send and webhook-delivery, `parley_jobs::lanes`) holds
//! one of its organization's slots while it runs: renewed from its start (it may have waited
//! in the ready list) until it ends, then given back so that the organization's next job
//! takes its turn. [`crate::job::handle`] runs every job of such a queue in its slot.

use std::future::Future;

use parley_jobs::{QueueName, SLOT_RENEW};
use uuid::Uuid;

use crate::renewal::Renewal;
use crate::state::WorkerState;

/// Runs `work` in the slot `org_slot` of `queue` (none: a job parked before slots existed).
pub async fn in_org_slot<T>(
    ctx: &WorkerState,
    queue: QueueName,
    org_slot: Option<(Uuid, String)>,
    work: impl Future<Output = T>,
) -> T {
    let _renewal = org_slot.clone().map(|(org, slot)| {
        let jobs = ctx.jobs.clone();
        Renewal::every(SLOT_RENEW, move || {
            let (jobs, slot) = (jobs.clone(), slot.clone());
            async move {
                if let Err(err) = jobs.slot_held(queue, org, &slot).await {
                    tracing::warn!(%err, queue = queue.as_str(), "organization's slot not renewed");
                }
            }
        })
    });
    let out = work.await;
    let org_slot = org_slot.as_ref().map(|(org, slot)| (*org, slot.as_str()));
    if let Err(err) = ctx.jobs.slot_done(queue, org_slot).await {
        tracing::warn!(%err, queue = queue.as_str(), "organization's slot not given back; it expires");
    }
    out
}

//! A job taken from its lane (recipient and webhook delivery, `parley_jobs::lanes`) holds one
//! of its organization's slots while it runs: renewed from its start (it may have waited in
//! the ready list) until it ends, then given back so that the organization's next job takes
//! its turn.

use std::future::Future;

use parley_jobs::{Fair, SLOT_RENEW};

use crate::renewal::Renewal;
use crate::state::WorkerState;

/// Runs `work` holding `job`'s slot.
pub async fn in_org_slot<J: Fair, T>(
    ctx: &WorkerState,
    job: &J,
    work: impl Future<Output = T>,
) -> T {
    let _renewal = job.slot().map(|(org, slot)| {
        let (jobs, slot) = (ctx.jobs.clone(), slot.to_owned());
        Renewal::every(SLOT_RENEW, move || {
            let (jobs, slot) = (jobs.clone(), slot.clone());
            async move {
                if let Err(err) = jobs.slot_held(J::QUEUE, org, &slot).await {
                    tracing::warn!(%err, queue = J::QUEUE.as_str(), "organization's slot not renewed");
                }
            }
        })
    });
    let out = work.await;
    if let Err(err) = ctx.jobs.slot_done(job).await {
        tracing::warn!(%err, queue = J::QUEUE.as_str(), "organization's slot not given back; it expires");
    }
    out
}

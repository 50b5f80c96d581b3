//! One apalis consumer per queue this process runs, supervised: if a consumer dies (say Redis
//! was flushed and forgot this worker), it starts again under a new name.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use apalis::layers::WorkerBuilderExt;
use apalis::prelude::*;
use parley_jobs::{
    CheckSla, DeliverWebhooks, DispatchBroadcast, ImportContacts, QueueName, SendRecipients,
};
use tokio_util::sync::CancellationToken;

use crate::job::Job;
use crate::paused_queues::runs;
use crate::state::WorkerState;

/// A worker name unique to this process and attempt: two processes sharing a name would take
/// each other's in-flight jobs (docs/jobs.md).
fn worker_name(queue: QueueName) -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_owned());
    let tail = uuid::Uuid::now_v7().simple().to_string();
    format!(
        "{host}-{}-{}-{}",
        std::process::id(),
        queue.as_str(),
        &tail[24..]
    )
}

/// Runs each job on its own task, so jobs of one queue use every core.
fn spawn_job<F>(job: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    tokio::spawn(job)
}

/// Runs the consumer of `J`'s queue until `shutdown`, starting it again if it dies. While an
/// operator has the queue paused, no consumer runs (the one running stops taking jobs and
/// lets its jobs finish): the queue's jobs wait in Redis.
async fn consume<J: Job>(ctx: WorkerState, shutdown: CancellationToken) {
    let queue = J::QUEUE;
    let mut paused = ctx.paused.subscribe();
    loop {
        if paused.borrow().as_ref().is_some_and(|p| p.contains(&queue)) {
            tracing::info!(
                queue = queue.as_str(),
                "queue paused: no jobs taken until resumed"
            );
        }
        tokio::select! {
            _ = paused.wait_for(|p| runs(p, queue)) => {}
            () = shutdown.cancelled() => return,
        }
        let settings = ctx.settings().clone();
        let backend = ctx
            .jobs
            .storage::<J>(queue)
            .poll_with_strategy(ctx.wakeups.strategy(queue, settings.poll_interval));
        let name = worker_name(queue);
        tracing::info!(queue = queue.as_str(), worker = %name, "consumer started");
        let worker = WorkerBuilder::new(name)
            .backend(backend)
            .concurrency(if queue == QueueName::WebhookDelivery {
                settings.webhook_concurrency
            } else {
                settings.concurrency
            })
            .parallelize(spawn_job)
            .data(ctx.clone())
            .build(crate::job::handle::<J>);
        let stop = shutdown.clone();
        let mut pausing = ctx.paused.subscribe();
        // Boxed as a `Send` future: the compiler cannot prove the worker's future `Send` for
        // every lifetime of a generic job type otherwise.
        let running: Pin<Box<dyn Future<Output = Result<(), WorkerError>> + Send>> =
            Box::pin(worker.run_until(async move {
                tokio::select! {
                    () = stop.cancelled() => {}
                    _ = pausing.wait_for(|p| !runs(p, queue)) => {}
                }
                Ok::<(), std::io::Error>(())
            }));
        let result = running.await;
        if shutdown.is_cancelled() {
            tracing::info!(queue = queue.as_str(), "consumer drained");
            return;
        }
        if !runs(&paused.borrow(), queue) {
            continue;
        }
        tracing::warn!(
            queue = queue.as_str(),
            ?result,
            "consumer stopped; restarting"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Runs the consumer of `queue` until `shutdown`, then lets its in-flight jobs finish.
pub async fn run(ctx: WorkerState, shutdown: CancellationToken, queue: QueueName) {
    match queue {
        QueueName::BroadcastDispatch => consume::<DispatchBroadcast>(ctx, shutdown).await,
        QueueName::RecipientSend => consume::<SendRecipients>(ctx, shutdown).await,
        QueueName::WebhookDelivery => consume::<DeliverWebhooks>(ctx, shutdown).await,
        QueueName::SlaCheck => consume::<CheckSla>(ctx, shutdown).await,
        QueueName::ContactImport => consume::<ImportContacts>(ctx, shutdown).await,
    }
}

//! Upkeep every worker runs once a minute (every 240 ticks), on a loop of its own so that a
//! long pass never delays the ticker: retention of webhook events and of broadcast
//! recipients, expired `Idempotency-Key`s, old soft bounces, and the queues' leftovers in Redis. Every delete is
//! a short statement over a bounded batch; any number of workers may run it at once.

use std::future::Future;

use anyhow::Context as _;

use apalis_core::backend::Vacuum;
use parley_jobs::{QueueName, queue_config};
use parley_types::metric_names::RETENTION_DELETED;
use parley_usecases::retention;
use tokio_util::sync::CancellationToken;

use crate::periodic::{self, Pass, Periodic};
use crate::state::WorkerState;

/// A pass runs every this many ticks.
const EVERY_TICKS: u32 = 240;

/// Runs the upkeep until `shutdown`.
pub async fn run(ctx: WorkerState, shutdown: CancellationToken) {
    let period = ctx.settings().tick_interval * EVERY_TICKS;
    periodic::run(period, shutdown, Maintenance(ctx)).await
}

struct Maintenance(WorkerState);

impl Periodic for Maintenance {
    const TASK: &'static str = "maintenance";

    async fn pass(&mut self, n: u64, pass: &mut Pass) {
        // The first tick fires at once: the upkeep waits for its first period.
        if n > 0 {
            upkeep(&self.0, pass).await;
        }
    }
}

/// What a kind of sweep may do in one pass.
struct Bounds {
    statements: usize,
    rows: u64,
}

/// Runs `batch` (a statement that returns the rows it deleted and whether more may be left)
/// until nothing is left or `bounds` is reached; counts the rows in
/// `parley_retention_deleted_total{kind}` (those of a sweep that failed half-way too).
async fn sweep<F, Fut>(kind: &'static str, bounds: Bounds, mut batch: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(u64, bool), sqlx::Error>>,
{
    let mut deleted = 0;
    let mut result = Ok(());
    for _ in 0..bounds.statements {
        match batch().await {
            Ok((n, more)) => {
                deleted += n;
                if !more || deleted >= bounds.rows {
                    break;
                }
            }
            Err(err) => {
                result = Err(err.into());
                break;
            }
        }
    }
    if deleted > 0 {
        metrics::counter!(RETENTION_DELETED, "kind" => kind).increment(deleted);
        tracing::info!(deleted, kind, "swept");
    }
    result
}

/// Webhook events deleted per statement (with their deliveries and attempts).
const EVENTS_BATCH: i64 = 500;
/// Broadcast recipients deleted per statement, all of one broadcast.
const RECIPIENTS_BATCH: i64 = 5_000;
/// Expired idempotency keys (and old soft bounces) deleted per statement.
const KEYS_BATCH: i64 = 1_000;

async fn upkeep(ctx: &WorkerState, pass: &mut Pass) {
    let webhooks = &ctx.config.webhooks;
    let events = sweep(
        "webhook_event",
        Bounds {
            statements: 40,
            rows: 20_000,
        },
        || async {
            let n = retention::sweep_webhook_events(
                ctx.use_cases(),
                webhooks.retention,
                webhooks.failed_retention,
                EVENTS_BATCH,
            )
            .await?;
            Ok((n, n == EVENTS_BATCH as u64))
        },
    );
    pass.step("sweep_webhook_events", events).await;
    // A statement takes one broadcast: many small broadcasts take many statements, so the
    // pass is bounded by rows as well.
    let recipients = sweep(
        "broadcast_recipient",
        Bounds {
            statements: 400,
            rows: 200_000,
        },
        || {
            parley_usecases::sending::purge_recipients(
                ctx.use_cases(),
                ctx.settings().recipient_retention,
                RECIPIENTS_BATCH,
            )
        },
    );
    pass.step("sweep_recipients", recipients).await;
    // Until none is left, so the table keeps up with any rate.
    let keys = sweep(
        "idempotency_key",
        Bounds {
            statements: 100,
            rows: u64::MAX,
        },
        || async {
            let n = retention::sweep_idempotency_keys(
                ctx.use_cases(),
                retention::IDEMPOTENCY_KEYS_KEPT_FOR,
                KEYS_BATCH,
            )
            .await?;
            Ok((n, n == KEYS_BATCH as u64))
        },
    );
    pass.step("sweep_idempotency_keys", keys).await;
    let bounces = sweep(
        "soft_bounce",
        Bounds {
            statements: 100,
            rows: u64::MAX,
        },
        || async {
            let n = retention::sweep_soft_bounces(ctx.use_cases(), KEYS_BATCH).await?;
            Ok((n, n == KEYS_BATCH as u64))
        },
    );
    pass.step("sweep_soft_bounces", bounces).await;
    vacuum_queues(ctx, pass).await;
}

/// Drops what acknowledged jobs leave in Redis: their data and metadata (apalis' vacuum), and
/// the set of done job ids, which nothing here reads. And moves due jobs that a producer left
/// scheduled (it stopped between its push and its promotion) to the ready list, so they can
/// never pile up past what apalis' fetch can promote.
async fn vacuum_queues(ctx: &WorkerState, pass: &mut Pass) {
    for queue in QueueName::ALL {
        let promoted = ctx.jobs.promote(*queue);
        pass.step("promote", async { promoted.await.context(queue.as_str()) })
            .await;
        let mut storage = ctx.jobs.storage::<serde_json::Value>(*queue);
        pass.step("vacuum", async {
            let vacuumed = storage.vacuum().await;
            vacuumed.map_err(|e| anyhow::anyhow!("{e}").context(queue.as_str()))
        })
        .await;
        let config = queue_config(ctx.redis.prefix(), *queue);
        let mut conn = ctx.redis.conn.clone();
        let _: Result<(), _> = redis::cmd("DEL")
            .arg(config.done_jobs_set())
            .query_async(&mut conn)
            .await;
    }
}

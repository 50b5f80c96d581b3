//! The worker's one writer of recipient outcomes: every send job of the process hands its
//! outcomes here, and each statement takes all that arrived while the previous one ran (group
//! commit across jobs, up to [`MAX_ROWS`]).
//!
//! Statements per second then follow the number of worker processes, not the number of jobs
//! they run (docs/decisions.md, "One writer of outcomes per worker").
//!
//! One statement runs at a time, and a second beside it only for jobs' last chunks: their jobs
//! have nothing left to send and would hold their slots waiting. A job hands over one chunk at
//! a time and waits for its statement; so an outcome waits in memory for the statements
//! running and then its own. Right before each statement, one
//! `MGET` checks the claims on all its recipients ([`ClaimFence`]): the outcome of a recipient
//! another job took over is not written, that job's stands. A statement failing for a reason
//! other than Postgres' availability writes its chunks again one by one, so that a chunk
//! Postgres refuses fails only its own job.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use parley_domain::sending::RecipientOutcome;
use parley_types::ids::RecipientId;
use parley_types::metric_names::{OUTCOME_STATEMENTS, OUTCOME_WRITE_FAILURES};
use parley_usecases::sending;
use parley_usecases::{Ctx, Services};
use tokio::sync::{mpsc, oneshot};

use crate::claims::{ClaimFence, Claims};
use crate::db_retry::retry_transient;

/// Outcomes per statement, at most, unless one chunk has more (a job's chunk is at most 200, and
/// never split).
const MAX_ROWS: usize = 1_000;

pub type Chunk = Vec<(RecipientId, RecipientOutcome)>;

/// A job's chunk, its claims, and where its statement's result goes: what of the chunk was
/// written.
struct Handed {
    chunk: Chunk,
    fence: ClaimFence<RecipientId>,
    /// The job's last: it has nothing left to send.
    last: bool,
    written: oneshot::Sender<Result<Chunk, String>>,
}

#[derive(Clone)]
pub struct Outcomes {
    // Unbounded, yet bounded by the jobs: each waits for its chunk before handing another.
    handed: mpsc::UnboundedSender<Handed>,
    statements: Arc<AtomicU64>,
}

impl Outcomes {
    /// Starts the writer on the current runtime; it stops when every handle is dropped.
    pub fn spawn(services: Services, claims: Claims) -> Self {
        let (handed, queue) = mpsc::unbounded_channel();
        let statements = Arc::new(AtomicU64::new(0));
        tokio::spawn(write_all(
            Arc::new(services),
            claims,
            queue,
            statements.clone(),
        ));
        Outcomes { handed, statements }
    }

    /// Hands `chunk`, fenced by its job's claims, to the writer at once (in the order of the
    /// calls); `last` when the job has nothing left to send. The future resolves with what of
    /// the chunk was written (the outcomes of recipients another job took over are not) when
    /// its statement has committed, or with why it was not.
    pub fn write(
        &self,
        chunk: Chunk,
        fence: ClaimFence<RecipientId>,
        last: bool,
    ) -> impl Future<Output = anyhow::Result<Chunk>> + use<> {
        let (written, result) = oneshot::channel();
        let handed = self.handed.send(Handed {
            chunk,
            fence,
            last,
            written,
        });
        async move {
            handed.map_err(|_| anyhow::anyhow!("the outcome writer has stopped"))?;
            result
                .await
                .map_err(|_| anyhow::anyhow!("the outcome writer gave no answer"))?
                .map_err(anyhow::Error::msg)
        }
    }

    /// Statements written so far, whatever their result.
    pub fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }
}

/// Waits for chunks and starts their statements: one at a time, and a second beside it for
/// jobs' last chunks (their jobs have nothing left to send, and hold their slots until the
/// write).
async fn write_all(
    services: Arc<Services>,
    claims: Claims,
    mut queue: mpsc::UnboundedReceiver<Handed>,
    statements: Arc<AtomicU64>,
) {
    let mut waiting: VecDeque<Handed> = VecDeque::new();
    let mut running = FuturesUnordered::new();
    let mut open = true;
    while open || !waiting.is_empty() || !running.is_empty() {
        tokio::select! {
            handed = queue.recv(), if open => match handed {
                Some(h) => waiting.push_back(h),
                None => open = false,
            },
            Some(()) = running.next(), if !running.is_empty() => {}
            else => {}
        }
        while let Ok(h) = queue.try_recv() {
            waiting.push_back(h);
        }
        let second = !running.is_empty();
        if running.len() < 2 && waiting.iter().any(|h| !second || h.last) {
            let batch = take(&mut waiting, |h| !second || h.last);
            let (services, claims, statements) =
                (services.clone(), claims.clone(), statements.clone());
            let statement = async move {
                let mut batch = batch;
                fence(&claims, &mut batch).await;
                write_batch(services.ctx(), batch, &statements).await;
            };
            // A bug that panics costs its statement's jobs (their chunks go unanswered, their
            // recipients stay pending), not the writer and every job after them.
            running.push(AssertUnwindSafe(statement).catch_unwind().map(|done| {
                if done.is_err() {
                    tracing::error!("an outcome statement panicked; its recipients stay pending");
                }
            }));
        }
    }
}

/// The chunks `pick` takes from `waiting`, in their order, up to [`MAX_ROWS`] outcomes (the
/// first whatever its size).
fn take(waiting: &mut VecDeque<Handed>, pick: impl Fn(&Handed) -> bool) -> Vec<Handed> {
    let mut batch = Vec::new();
    let mut rows = 0;
    let mut left = VecDeque::with_capacity(waiting.len());
    for h in waiting.drain(..) {
        let n = h.chunk.len();
        if pick(&h) && (batch.is_empty() || rows + n <= MAX_ROWS) {
            rows += n;
            batch.push(h);
        } else {
            left.push_back(h);
        }
    }
    *waiting = left;
    batch
}

/// Drops from each chunk the outcomes of recipients another job took over (one `MGET`).
async fn fence(claims: &Claims, batch: &mut [Handed]) {
    let ids: Vec<RecipientId> = batch
        .iter()
        .flat_map(|h| h.chunk.iter().map(|(id, _)| *id))
        .collect();
    let holders = claims.holders_now(&ids).await;
    let mut at = 0;
    for h in batch {
        let n = h.chunk.len();
        let mine = h.fence.mine(
            &ids[at..at + n],
            holders.as_ref().and_then(|holders| holders.get(at..at + n)),
        );
        if mine.len() < n {
            let mine: HashSet<RecipientId> = mine.into_iter().collect();
            h.chunk.retain(|(id, _)| mine.contains(id));
        }
        at += n;
    }
}

#[tracing::instrument(skip_all, fields(outcomes = batch.len()))]
async fn write_batch(ctx: Ctx<'_>, batch: Vec<Handed>, statements: &AtomicU64) {
    match write(ctx, &batch, statements).await {
        Ok(()) => batch.into_iter().for_each(|h| h.answer(Ok(()))),
        Err(err) if batch.len() > 1 && !parley_usecases::postgres::is_transient_error(&err) => {
            tracing::warn!(%err, chunks = batch.len(), "outcomes refused; each job's written alone");
            for h in batch {
                let result = write(ctx, std::slice::from_ref(&h), statements).await;
                let result = result.map_err(|err| failed(&err, h.chunk.len()));
                h.answer(result);
            }
        }
        Err(err) => {
            let err = failed(&err, batch.iter().map(|h| h.chunk.len()).sum());
            batch.into_iter().for_each(|h| h.answer(Err(err.clone())));
        }
    }
}

/// The chunks of `batch` in one statement, through Postgres outages of up to a minute; none
/// for no outcomes (all taken over by other jobs).
async fn write(ctx: Ctx<'_>, batch: &[Handed], statements: &AtomicU64) -> Result<(), sqlx::Error> {
    if batch.iter().all(|h| h.chunk.is_empty()) {
        return Ok(());
    }
    let rows = || batch.iter().flat_map(|h| &h.chunk);
    let result = retry_transient(|| sending::record_outcomes(ctx, rows())).await;
    statements.fetch_add(1, Ordering::Relaxed);
    metrics::counter!(OUTCOME_STATEMENTS).increment(1);
    result
}

/// Counts and logs a write that failed; the recipients stay pending, and the reconciler takes
/// them again, up to its ceiling.
fn failed(err: &sqlx::Error, recipients: usize) -> String {
    metrics::counter!(OUTCOME_WRITE_FAILURES, "kind" => "recipient").increment(1);
    tracing::error!(%err, recipients, "recipient outcomes not recorded");
    err.to_string()
}

impl Handed {
    fn answer(self, result: Result<(), String>) {
        let Handed { chunk, written, .. } = self;
        // A job that is gone (aborted at the drain timeout) has nobody to tell.
        let _ = written.send(result.map(|()| chunk));
    }
}

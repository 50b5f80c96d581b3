//! The recipient-send job: sends a batch of a broadcast's recipients, each at most once.
//!
//! The adapter around the send pipeline (`parley_domain::sending`, which decides each
//! recipient and renders its message): recipients are claimed in Redis first (one job at a
//! time per recipient, short leases kept by a heartbeat: see [`crate::claims`]), decided
//! (held, skipped, failed without an address, or sent under the frequency cap), rate-limited
//! per channel and organization, and sent with the recipient id as idempotency key. Outcomes
//! are written while the sends go on, each chunk taking all that arrived during the previous
//! one's write, through the worker's one writer, whose
//! statements take the chunks of all its jobs (see [`crate::outcomes`]); the counters follow
//! by trigger in the same statement. At shutdown a job stops sending, writes what it sent and
//! hands the rest back to the queue.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context as _;
use futures::StreamExt;
use parley_config::Config;
use parley_domain::Channel;
use parley_domain::broadcasts::BroadcastStatus;
use parley_domain::sending::{Claimed, Decided, Messages, Ready, RecipientOutcome, SendContext};
use parley_domain::templates::TemplateCategory;
use parley_domain::unsubscribe::{
    LIST_UNSUBSCRIBE_POST, UnsubscribeKey, UnsubscribeToken, list_unsubscribe,
};
use parley_jobs::{QueueName, SEND_BATCH, SendRecipients};
use parley_types::ids::{BroadcastId, ContactId, RecipientId};
use parley_usecases::sending;
use uuid::Uuid;

use crate::claims::TakenClaims;
use crate::db_retry::retry_transient;
use crate::job::{Failure, Job, JobResult};
use crate::provider::{EmailHeaders, Message, SendResult};
use crate::state::WorkerState;
use crate::status_watch::StatusWatch;
use parley_types::metric_names::{RECIPIENTS, RECIPIENTS_CAPPED, RECIPIENTS_HELD};

/// Messages in flight at once within one job.
const IN_FLIGHT: usize = 32;
/// Outcomes a job lets wait, at most, and hands to the writer in one chunk: a whole job's, so
/// that sends never wait on the writer (docs/decisions.md, "Outcome chunks and group commit").
const CHUNK: usize = SEND_BATCH;

/// The recipients of a failed job stay pending in Postgres; the reconciler enqueues them
/// again, five times at most ([`crate::job::RetryPolicy::DEFAULT`]), then fails them
/// (`attempts_exhausted`).
impl Job for SendRecipients {
    const NAME: &'static str = "send job";
    const FAIR: bool = true;

    fn org_slot(&self) -> Option<(Uuid, &str)> {
        parley_jobs::Fair::slot(self)
    }

    /// None: a job bounds itself (each send by the provider's timeout and attempts, the
    /// rate's waits by the broadcast's status), and one dropped while it sends would leave
    /// messages sent and not recorded, to be sent again.
    fn timeout(_: &Config) -> Option<std::time::Duration> {
        None
    }

    fn span(&self) -> tracing::Span {
        tracing::info_span!("broadcast", broadcast_id = %self.broadcast_id, recipients = self.recipient_ids.len())
    }

    fn items(&self) -> u64 {
        self.recipient_ids.len() as u64
    }

    async fn run(self, ctx: &WorkerState) -> JobResult {
        send_batch(ctx, &self).await.map_err(Failure::of)
    }
}

async fn send_batch(ctx: &WorkerState, job: &SendRecipients) -> anyhow::Result<()> {
    // The claims first: a job out of the queue holds its recipients from its first step on,
    // so the reconciler never finds them both unqueued and unclaimed.
    let lease = ctx.settings().claim_lease;
    let taken = TakenClaims::take(&ctx.claims, &job.recipient_ids, lease).await?;
    // This job left the ready list: the next job in turn takes its place.
    if let Err(err) = ctx.jobs.refill(QueueName::RecipientSend).await {
        tracing::warn!(%err, "send queue not topped up from the lanes; the ticker will");
    }
    let Some(taken) = taken else {
        return Ok(());
    };
    let result = async {
        let broadcast =
            retry_transient(|| sending::send_context(ctx.use_cases(), job.broadcast_id)).await?;
        match broadcast {
            Some(b) if b.status == BroadcastStatus::Sending => send_all(ctx, job, &b, &taken).await,
            _ => Ok(Vec::new()),
        }
    }
    .await;
    taken.give_back().await;
    let unsent = result?;
    // A worker shutting down hands back what it did not send, so that another worker takes
    // it up at once rather than after the reconciler's wait.
    if ctx.stopping.is_cancelled() && !unsent.is_empty() {
        ctx.jobs.enqueue_sends(&job.lane(), &unsent).await?;
        tracing::info!(
            recipients = unsent.len(),
            "unsent recipients handed back at shutdown"
        );
    }
    Ok(())
}

/// Sends the held recipients still pending and writes their outcomes; returns the ids left
/// pending (the broadcast stopped, or the worker is shutting down).
#[tracing::instrument(skip_all, fields(organization_id = %broadcast.organization_id, channel = %broadcast.channel, recipients = job.recipient_ids.len()))]
async fn send_all(
    ctx: &WorkerState,
    job: &SendRecipients,
    broadcast: &SendContext,
    taken: &TakenClaims<RecipientId>,
) -> anyhow::Result<Vec<RecipientId>> {
    let claimed =
        retry_transient(|| sending::pending_for_send(ctx.use_cases(), broadcast, taken.ids()))
            .await?;
    if claimed.is_empty() {
        return Ok(Vec::new());
    }
    let keys = retry_transient(|| ctx.unsubscribe_keys.all(ctx.use_cases())).await?;
    let links = Links {
        public_url: &ctx.config.public_url,
        mailto: ctx.config.unsubscribe_mailto.as_deref(),
        // `all` makes the first key: none would be a bug, and marketing without its link
        // must not go out.
        key: UnsubscribeKey::signing(&keys).context("no unsubscribe key to sign links with")?,
    };
    let message = if broadcast.ab_test {
        let contents =
            retry_transient(|| sending::variant_contents(ctx.use_cases(), job.broadcast_id))
                .await?;
        Messages::new(broadcast, &contents)
    } else {
        Messages::new(broadcast, &[])
    };
    // Held, skipped and capped recipients are decided before any is sent; their outcomes
    // are the first to be written.
    let Decisions {
        to_send,
        mut ready,
        reserved,
    } = decide(ctx, broadcast, claimed).await?;
    let watch = StatusWatch::spawn(broadcast.status, ctx.stopping.clone(), {
        let (ctx, id) = (ctx.clone(), job.broadcast_id);
        move || {
            let ctx = ctx.clone();
            async move { sending::status(ctx.use_cases(), id).await }
        }
    });
    let saw_failure = AtomicBool::new(false);
    // Known as soon as the last outcome is in, so that its chunk goes as the job's last.
    let mut unanswered = to_send.len();
    let mut sends = futures::stream::iter(to_send)
        .map(|r| {
            send_one(
                ctx,
                broadcast,
                &message,
                &links,
                r,
                &watch,
                taken,
                &saw_failure,
            )
        })
        .buffer_unordered(IN_FLIGHT);
    // Group commit: while the sends go on, each chunk takes what arrived during the previous
    // one's write, and the worker's writer puts the chunks of all its jobs that came meanwhile
    // in one statement. An outcome waits in memory for the statements running, then its own
    // (a job's last chunk gets a statement beside the one running), so a crash loses (and a
    // new worker resends) only what was sent in that time.
    let mut unsent = Vec::new();
    let mut give_back = Vec::new();
    let mut writing: Option<Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send + '_>>> = None;
    // Nothing to send (all settled or held): the first chunk is the job's last.
    let mut sending = unanswered > 0;
    while sending || writing.is_some() || !ready.is_empty() {
        if writing.is_none() && !ready.is_empty() {
            let batch: Vec<_> = ready.drain(..ready.len().min(CHUNK)).collect();
            let last = !sending && ready.is_empty();
            writing = Some(Box::pin(record(ctx, taken, broadcast.channel, batch, last)));
        }
        tokio::select! {
            // At most CHUNK outcomes wait (a job carries no more): while a write is retried
            // (Postgres is down), the sends go on and their outcomes wait for it.
            outcome = sends.next(), if sending && ready.len() < CHUNK => {
                let Some((id, outcome)) = outcome else {
                    sending = false;
                    continue;
                };
                unanswered = unanswered.saturating_sub(1);
                sending = unanswered > 0;
                // Not when another job took the recipient over: its place is that job's.
                if let Some(contact) = reserved.get(&id)
                    && !matches!(outcome, RecipientOutcome::Sent { .. })
                    && !taken.is_lost(id)
                {
                    give_back.push((id, *contact));
                }
                if outcome != RecipientOutcome::Unsent {
                    ready.push((id, outcome));
                } else if !taken.is_lost(id) {
                    unsent.push(id);
                }
            }
            written = async { writing.as_mut().expect("a write in flight").await }, if writing.is_some() => {
                writing = None;
                written?;
            }
        }
    }
    parley_jobs::frequency_caps::give_back(
        &ctx.redis,
        broadcast.organization_id,
        broadcast.channel,
        &give_back,
    )
    .await;
    if let Some((status, org)) = retry_transient(|| {
        parley_usecases::sending::finish_if_done(ctx.use_cases(), job.broadcast_id)
    })
    .await?
    {
        tracing::info!(broadcast_id = %job.broadcast_id, %status, "broadcast ended");
        crate::dispatch::start_next(ctx, org).await?;
    }
    Ok(unsent)
}

/// Writes a chunk of outcomes, fenced by the claims (an outcome of a recipient another job
/// took over is not written: that job's stands), and counts what was written.
#[tracing::instrument(skip_all, fields(outcomes = chunk.len(), last))]
async fn record(
    ctx: &WorkerState,
    taken: &TakenClaims<RecipientId>,
    channel: Channel,
    chunk: Vec<(RecipientId, RecipientOutcome)>,
    last: bool,
) -> anyhow::Result<()> {
    let written = ctx.outcomes.write(chunk, taken.fence(), last).await?;
    count(channel, &written);
    Ok(())
}

fn count(channel: Channel, chunk: &[(RecipientId, RecipientOutcome)]) {
    for status in chunk.iter().filter_map(|(_, o)| o.counted_as()) {
        metrics::counter!(RECIPIENTS, "channel" => channel.as_str(), "status" => status)
            .increment(1);
    }
}

/// The claimed recipients decided before any is sent: those to send, the outcomes of the
/// others (held, settled, capped), and the recipients that hold a place under the frequency
/// cap (with their contacts), to give back if they end unsent.
struct Decisions {
    to_send: Vec<Ready>,
    ready: Vec<(RecipientId, RecipientOutcome)>,
    reserved: HashMap<RecipientId, ContactId>,
}

/// Decides the claimed recipients by the worker's clock ([`SendContext::decide`]), then
/// reserves the places of those to send under the broadcast's frequency cap (in Redis): a
/// recipient refused one is skipped.
async fn decide(
    ctx: &WorkerState,
    b: &SendContext,
    claimed: Vec<Claimed>,
) -> anyhow::Result<Decisions> {
    let plan = b.send_plan();
    let now = ctx.clock.now();
    let channel = b.channel.as_str();
    let mut decided = Decisions {
        to_send: Vec::with_capacity(claimed.len()),
        ready: Vec::new(),
        reserved: HashMap::new(),
    };
    for r in claimed {
        match b.decide(&plan, r, now.0) {
            Decided::Send(ready) => decided.to_send.push(*ready),
            other => {
                if let Decided::Hold { reason, .. } = &other {
                    metrics::counter!(RECIPIENTS_HELD, "channel" => channel, "reason" => reason.as_str())
                        .increment(1);
                }
                decided.ready.extend(other.outcome());
            }
        }
    }
    let Some(cap) = b.frequency_cap().filter(|_| !decided.to_send.is_empty()) else {
        return Ok(decided);
    };
    let candidates: Vec<(RecipientId, ContactId)> = decided
        .to_send
        .iter()
        .map(|r| (r.recipient.id, r.contact))
        .collect();
    let refused = parley_jobs::frequency_caps::reserve(
        &ctx.redis,
        b.organization_id,
        b.channel,
        cap,
        &candidates,
        now,
    )
    .await?;
    decided.reserved = candidates.into_iter().collect();
    if !refused.is_empty() {
        metrics::counter!(RECIPIENTS_CAPPED, "channel" => channel).increment(refused.len() as u64);
        let refused: std::collections::HashSet<RecipientId> = refused.into_iter().collect();
        decided
            .to_send
            .retain(|r| !refused.contains(&r.recipient.id));
        for id in refused {
            decided.reserved.remove(&id);
            decided.ready.push((id, RecipientOutcome::capped()));
        }
    }
    Ok(decided)
}

/// What recipients' unsubscribe links are made of: the deployment's public URL, its
/// `mailto:`, and the key that signs now.
struct Links<'a> {
    public_url: &'a str,
    mailto: Option<&'a str>,
    key: &'a UnsubscribeKey,
}

impl Links<'_> {
    /// `r`'s link in broadcast `b`.
    fn url(&self, b: &SendContext, r: &Ready) -> String {
        UnsubscribeToken {
            organization_id: b.organization_id,
            contact_id: r.contact,
            broadcast_id: b.id,
            channel: b.channel,
        }
        .url(self.public_url, self.key)
    }
}

#[allow(clippy::too_many_arguments)]
#[tracing::instrument(level = "debug", skip_all, fields(recipient_id = %r.recipient.id))]
async fn send_one(
    ctx: &WorkerState,
    b: &SendContext,
    messages: &Messages,
    links: &Links<'_>,
    r: Ready,
    watch: &StatusWatch,
    taken: &TakenClaims<RecipientId>,
    saw_failure: &AtomicBool,
) -> (RecipientId, RecipientOutcome) {
    let id = r.recipient.id;
    if !take_turn(ctx, b, watch).await || taken.is_lost(id) {
        return (id, RecipientOutcome::Unsent);
    }
    let prepared = messages.of(r.recipient.variant_no);
    let url = links.url(b, &r);
    let content = match prepared.compose(b.channel, &r.recipient, &url) {
        Ok(content) => content,
        Err(outcome) => return (id, outcome),
    };
    // Marketing messages carry their link; marketing email its headers too (RFC 2369, 8058).
    let marketing = b.category == TemplateCategory::Marketing;
    let headers = (marketing && b.channel == Channel::Email).then(|| EmailHeaders {
        list_unsubscribe: list_unsubscribe(&url, links.mailto),
        list_unsubscribe_post: LIST_UNSUBSCRIBE_POST,
    });
    let message = Message {
        recipient_id: id.uuid(),
        send_generation: r.recipient.send_generation,
        channel: b.channel,
        to: &r.to,
        content: &content,
        template_id: prepared.template_id,
        variables: &prepared.variables,
        subject: prepared.subject.as_deref(),
        unsubscribe_url: marketing.then_some(url.as_str()),
        headers,
    };
    (id, send(ctx, b, &message, watch, saw_failure).await)
}

/// Waits for the channel's rate limit while the broadcast is sending; `false` when the
/// recipient goes back (the broadcast stopped, or the limiter is unavailable).
async fn take_turn(ctx: &WorkerState, b: &SendContext, watch: &StatusWatch) -> bool {
    if !watch.is_sending() {
        return false;
    }
    match ctx
        .limiter
        .acquire(b.channel, b.organization_id.uuid(), watch.receiver())
        .await
    {
        Ok(turn) => turn,
        Err(err) => {
            tracing::warn!(%err, "rate limiter unavailable; recipient left for later");
            false
        }
    }
}

/// Sends through the provider and keeps the broadcast's failure streak (auto-pause) current.
async fn send(
    ctx: &WorkerState,
    b: &SendContext,
    message: &Message<'_>,
    watch: &StatusWatch,
    saw_failure: &AtomicBool,
) -> RecipientOutcome {
    match ctx.provider.send(message, watch.receiver()).await {
        SendResult::Accepted { message_id } => {
            if saw_failure.swap(false, Ordering::Relaxed) {
                reset_failures(ctx, b).await;
            }
            RecipientOutcome::Sent {
                message_id,
                to: message.to.to_owned(),
            }
        }
        SendResult::Rejected { code, message } | SendResult::GaveUp { code, message } => {
            saw_failure.store(true, Ordering::Relaxed);
            note_failure(ctx, b, &code, &message).await;
            RecipientOutcome::Failed { code, message }
        }
        SendResult::Stopped => RecipientOutcome::Unsent,
    }
}

fn failures_key(ctx: &WorkerState, broadcast: BroadcastId) -> String {
    ctx.redis.key(&format!("broadcast:{broadcast}:failures"))
}

/// Counts a provider failure; pauses the broadcast when they run past the limit in a row.
async fn note_failure(ctx: &WorkerState, b: &SendContext, code: &str, message: &str) {
    let broadcast = b.id;
    let key = failures_key(ctx, broadcast);
    let mut conn = ctx.redis.conn.clone();
    let in_a_row: Result<u32, _> = redis::pipe()
        .incr(&key, 1)
        .expire(&key, 86_400)
        .ignore()
        .query_async::<(u32,)>(&mut conn)
        .await
        .map(|(n,)| n);
    let limit = ctx.settings().auto_pause_after;
    match in_a_row {
        Ok(n) if n >= limit => {
            let reason = format!(
                "paused after {n} consecutive provider failures; the last: {code}: {message}"
            );
            match sending::auto_pause(ctx.use_cases(), broadcast, &reason).await {
                Ok(true) => {
                    tracing::warn!(broadcast_id = %broadcast, failures = n, "broadcast paused");
                    let _: Result<(), _> = redis::cmd("DEL").arg(&key).query_async(&mut conn).await;
                }
                Ok(false) => {}
                Err(err) => tracing::warn!(%err, "could not pause the broadcast"),
            }
        }
        Ok(_) => {}
        Err(err) => tracing::warn!(%err, "could not count a provider failure"),
    }
}

async fn reset_failures(ctx: &WorkerState, b: &SendContext) {
    let key = failures_key(ctx, b.id);
    let mut conn = ctx.redis.conn.clone();
    let _: Result<(), _> = redis::cmd("SET")
        .arg(&key)
        .arg(0)
        .arg("EX")
        .arg(86_400)
        .query_async(&mut conn)
        .await;
}

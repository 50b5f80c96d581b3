//! The recipient-send job: sends a batch of a broadcast's recipients, each at most once.
//!
//! Recipients are claimed in Redis first (one job at a time per recipient, short leases kept by
//! a heartbeat: see [`crate::claims`]), skipped when their contact must not be contacted,
//! rendered, rate-limited per channel and organization, and sent with the recipient id as
//! idempotency key. Outcomes are written while the sends go on, each chunk taking all that
//! arrived during the previous one's write, through the worker's one writer, whose
//! statements take the chunks of all its jobs (see [`crate::outcomes`]); the counters follow
//! by trigger in the same statement. At shutdown a job stops sending, writes what it sent and
//! hands the rest back to the queue.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use parley_config::Config;
use parley_domain::Channel;
use parley_domain::broadcasts::BroadcastStatus;
use parley_domain::broadcasts::RecipientOutcome;
use parley_domain::broadcasts::TemplateVariables;
use parley_domain::templates::{max_message_chars, render};
use parley_jobs::{QueueName, SEND_BATCH, SendRecipients};
use parley_types::ids::BroadcastId;
use parley_usecases::sending::{self, Claimed, SendContext, VariantContent};
use uuid::Uuid;

use crate::claims::TakenClaims;
use crate::db_retry::retry_transient;
use crate::job::{Failure, Job, JobResult};
use crate::provider::{Message, SendResult};
use crate::state::WorkerState;
use crate::status_watch::StatusWatch;
use chrono::SubsecRound;
use parley_domain::send_rules::{Decision, HoldReason};
use parley_types::metric_names::{RECIPIENTS, RECIPIENTS_CAPPED, RECIPIENTS_HELD};
use parley_types::time::Timestamp;

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
    taken: &TakenClaims,
) -> anyhow::Result<Vec<Uuid>> {
    let claimed = retry_transient(|| {
        sending::pending_for_send(
            ctx.use_cases(),
            broadcast.organization_id,
            job.broadcast_id,
            taken.ids(),
        )
    })
    .await?;
    if claimed.is_empty() {
        return Ok(Vec::new());
    }
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
    let Decided {
        to_send: claimed,
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
    let mut unanswered = claimed.len();
    let mut sends = futures::stream::iter(claimed)
        .map(|r| send_one(ctx, broadcast, &message, r, &watch, taken, &saw_failure))
        .buffer_unordered(IN_FLIGHT);
    // Group commit: while the sends go on, each chunk takes what arrived during the previous
    // one's write, and the worker's writer puts the chunks of all its jobs that came meanwhile
    // in one statement. An outcome waits in memory for the statements running, then its own
    // (a job's last chunk gets a statement beside the one running), so a crash loses (and a
    // new worker resends) only what was sent in that time.
    let mut unsent = Vec::new();
    let mut give_back = Vec::new();
    let mut writing: Option<Pin<Box<dyn Future<Output = anyhow::Result<()>> + Send + '_>>> = None;
    let mut sending = true;
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
    crate::frequency_caps::give_back(
        &ctx.redis,
        broadcast.organization_id.uuid(),
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
    taken: &TakenClaims,
    channel: Channel,
    chunk: Vec<(Uuid, RecipientOutcome)>,
    last: bool,
) -> anyhow::Result<()> {
    let written = ctx.outcomes.write(chunk, taken.fence(), last).await?;
    count(channel, &written);
    Ok(())
}

fn count(channel: Channel, chunk: &[(Uuid, RecipientOutcome)]) {
    for (_, outcome) in chunk {
        let status = match outcome {
            RecipientOutcome::Sent { .. } => "sent",
            RecipientOutcome::Failed { .. } => "failed",
            RecipientOutcome::Skipped { .. } => "skipped",
            RecipientOutcome::Held { .. } | RecipientOutcome::Unsent => continue,
        };
        metrics::counter!(RECIPIENTS, "channel" => channel.as_str(), "status" => status)
            .increment(1);
    }
}

/// The claimed recipients sorted before sending: those to send, the outcomes of the others
/// (held, skipped: their local time passed, capped), and the recipients that hold a place
/// under the frequency cap (with their contacts), to give back if they end unsent.
struct Decided {
    to_send: Vec<Claimed>,
    ready: Vec<(Uuid, RecipientOutcome)>,
    reserved: HashMap<Uuid, Uuid>,
}

/// Applies the broadcast's local time, quiet hours and frequency cap (by the worker's clock)
/// to the claimed recipients. A contact that will not be sent to anyway (deleted, do-not-
/// contact, opted out, no address) is left to [`send_one`] and takes no place under the cap.
async fn decide(
    ctx: &WorkerState,
    b: &SendContext,
    claimed: Vec<Claimed>,
) -> anyhow::Result<Decided> {
    let plan = b.send_plan();
    let cap = b.frequency_cap();
    let mut decided = Decided {
        to_send: Vec::with_capacity(claimed.len()),
        ready: Vec::new(),
        reserved: HashMap::new(),
    };
    let channel = b.channel.as_str();
    // An operator paused the organization: every recipient waits, `high` ones too.
    if b.paused {
        metrics::counter!(RECIPIENTS_HELD, "channel" => channel, "reason" => HoldReason::Paused.as_str())
            .increment(claimed.len() as u64);
        decided.ready = claimed
            .into_iter()
            .map(|r| (r.id, RecipientOutcome::Held { until: None }))
            .collect();
        return Ok(decided);
    }
    if plan.is_free() && cap.is_none() {
        decided.to_send = claimed;
        return Ok(decided);
    }
    let now = ctx.clock.now();
    for r in claimed {
        if r.contact_id.is_none() {
            decided.to_send.push(r);
            continue;
        }
        match plan.decide(r.timezone.as_deref(), now.0) {
            Decision::Send => decided.to_send.push(r),
            Decision::Hold { until, reason } => {
                metrics::counter!(RECIPIENTS_HELD, "channel" => channel, "reason" => reason.as_str())
                    .increment(1);
                let until = Timestamp(until.trunc_subsecs(6));
                decided
                    .ready
                    .push((r.id, RecipientOutcome::Held { until: Some(until) }));
            }
            Decision::SkipPast => decided.ready.push((
                r.id,
                skip(
                    "send_time_passed",
                    "the local send time had passed in the contact's time zone when the broadcast was created",
                ),
            )),
        }
    }
    let Some(cap) = cap else {
        return Ok(decided);
    };
    let candidates: Vec<(Uuid, Uuid)> = decided
        .to_send
        .iter()
        .filter(|r| reachable_address(b, r).is_ok())
        .filter_map(|r| Some((r.id, r.contact_id?)))
        .collect();
    let refused = crate::frequency_caps::reserve(
        &ctx.redis,
        b.organization_id.uuid(),
        b.channel,
        cap,
        &candidates,
        now,
    )
    .await?;
    decided.reserved = candidates.into_iter().collect();
    if !refused.is_empty() {
        metrics::counter!(RECIPIENTS_CAPPED, "channel" => channel).increment(refused.len() as u64);
        let refused: std::collections::HashSet<Uuid> = refused.into_iter().collect();
        decided.to_send.retain(|r| !refused.contains(&r.id));
        for id in refused {
            decided.reserved.remove(&id);
            decided.ready.push((
                id,
                skip(
                    "frequency_capped",
                    "the contact reached the organization's frequency cap on this channel",
                ),
            ));
        }
    }
    Ok(decided)
}

/// The messages of a broadcast: its own, and an A/B broadcast's variants B to D.
struct Messages {
    own: Prepared,
    variants: HashMap<i16, Prepared>,
}

impl Messages {
    fn new(b: &SendContext, variants: &[VariantContent]) -> Self {
        let own = Prepared::new(
            b,
            b.template_id,
            b.message_body.as_deref(),
            b.message_subject.as_deref(),
            b.template_variables.as_ref(),
        );
        let variants = variants
            .iter()
            .map(|v| {
                let prepared = Prepared::new(
                    b,
                    v.template_id,
                    v.message_body.as_deref(),
                    v.message_subject.as_deref(),
                    v.template_variables.as_ref(),
                );
                (v.variant_no, prepared)
            })
            .collect();
        Messages { own, variants }
    }

    /// The message of a recipient's variant (variant A, and every recipient of other
    /// broadcasts: the broadcast's own).
    fn of(&self, variant: Option<i16>) -> &Prepared {
        variant
            .and_then(|v| self.variants.get(&v))
            .unwrap_or(&self.own)
    }
}

/// The parts of one message shared by every recipient sent it.
struct Prepared {
    template_id: Uuid,
    body: String,
    subject: Option<String>,
    values: Vec<String>,
    variables: serde_json::Value,
}

impl Prepared {
    fn new(
        b: &SendContext,
        template_id: Uuid,
        body: Option<&str>,
        subject: Option<&str>,
        vars: Option<&sqlx::types::Json<TemplateVariables>>,
    ) -> Self {
        let vars = vars.map(|v| v.0.clone()).unwrap_or_default();
        let values = vars
            .body
            .iter()
            .map(|v| v.value.as_str().to_owned())
            .collect();
        let mut variables = serde_json::to_value(&vars).unwrap_or_default();
        if let (Some(email), Some(obj)) = (&b.email_variables, variables.as_object_mut()) {
            obj.insert("email".to_owned(), email.0.clone());
        }
        Prepared {
            template_id,
            body: body.unwrap_or_default().to_owned(),
            subject: subject.map(str::to_owned),
            values,
            variables,
        }
    }
}

fn skip(code: &str, message: &str) -> RecipientOutcome {
    RecipientOutcome::Skipped {
        code: code.to_owned(),
        message: message.to_owned(),
    }
}

/// The address a channel sends to.
fn address(channel: Channel, r: &Claimed) -> Option<&str> {
    match channel {
        Channel::Email => r.email.as_deref(),
        Channel::MessagingA => r.phone.as_deref(),
        Channel::SocialA | Channel::SocialB => r.external_id.as_deref().or(r.phone.as_deref()),
    }
}

#[tracing::instrument(level = "debug", skip_all, fields(recipient_id = %r.id))]
async fn send_one(
    ctx: &WorkerState,
    b: &SendContext,
    messages: &Messages,
    r: Claimed,
    watch: &StatusWatch,
    taken: &TakenClaims,
    saw_failure: &AtomicBool,
) -> (Uuid, RecipientOutcome) {
    let id = r.id;
    let to = match reachable_address(b, &r) {
        Ok(to) => to,
        Err(outcome) => return (id, outcome),
    };
    if !take_turn(ctx, b, watch).await || taken.is_lost(id) {
        return (id, RecipientOutcome::Unsent);
    }
    let prepared = messages.of(r.variant_no);
    let content = match compose(b, prepared, &r) {
        Ok(content) => content,
        Err(outcome) => return (id, outcome),
    };
    let message = Message {
        recipient_id: id,
        send_generation: r.send_generation,
        channel: b.channel,
        to,
        content: &content,
        template_id: prepared.template_id,
        variables: &prepared.variables,
        subject: if b.channel == Channel::Email {
            prepared.subject.as_deref()
        } else {
            None
        },
    };
    (id, send(ctx, b, &message, watch, saw_failure).await)
}

/// The recipient's address on the broadcast's channel; or why the message is not sent: the
/// contact is gone, do-not-contact or opted out (skipped), or has no address (failed).
fn reachable_address<'r>(b: &SendContext, r: &'r Claimed) -> Result<&'r str, RecipientOutcome> {
    if r.contact_id.is_none() {
        return Err(skip("contact_deleted", "the contact was deleted"));
    }
    if r.do_not_contact == Some(true) {
        return Err(skip(
            "do_not_contact",
            "the contact is marked do-not-contact",
        ));
    }
    if b.channel == Channel::MessagingA && r.messaging_a_opted_out == Some(true) {
        return Err(skip("opted_out", "the contact opted out of this channel"));
    }
    address(b.channel, r).ok_or_else(|| RecipientOutcome::Failed {
        code: "no_address".to_owned(),
        message: format!("the contact has no address for {}", b.channel),
    })
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

/// The template rendered for this recipient, within the channel's length.
fn compose(b: &SendContext, prepared: &Prepared, r: &Claimed) -> Result<String, RecipientOutcome> {
    let values: Vec<&str> = prepared.values.iter().map(String::as_str).collect();
    let content = render(&prepared.body, &values, |field| match field {
        "name" => r.name.as_deref(),
        "email" => r.email.as_deref(),
        "phone" => r.phone.as_deref(),
        "country" => r.country.as_deref(),
        "language" => r.language.as_deref(),
        "position" => r.position.as_deref(),
        "companyName" => r.company_name.as_deref(),
        "externalId" => r.external_id.as_deref(),
        _ => None,
    });
    // Checked when the broadcast and its template were written; this only guards the
    // provider against a message that got past those checks.
    if content.chars().count() > max_message_chars(b.channel) {
        return Err(RecipientOutcome::Failed {
            code: "message_too_long".to_owned(),
            message: format!("the message is longer than {} takes", b.channel),
        });
    }
    Ok(content)
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
            RecipientOutcome::Sent { message_id }
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

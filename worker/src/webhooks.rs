//! The webhook-delivery job: attempts a batch of deliveries of one webhook. Each attempt is
//! `POST`ed with the specification's payload and the headers and signature of docs/api.md (Webhooks), within the
//! timeout, without following redirects; it is logged with its status, duration and the first
//! 4 KiB of the answer. A failure is retried with exponential backoff and jitter (a
//! `Retry-After` honoured within bounds): the next attempt's time is a row in Postgres that
//! the relay's ticker enqueues when due.

use secrecy::ExposeSecret;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use parley_config::{Config, WebhookSettings};
use parley_domain::signature;
use parley_domain::webhooks::{WEBHOOK_BODY_VERSION, WebhookBody, WebhookBodyMetadata};
use parley_jobs::{DeliverWebhooks, QueueName};
use parley_types::fields::storable;
use parley_types::metric_names::{
    OUTCOME_WRITE_FAILURES, WEBHOOK_ATTEMPTS, WEBHOOK_LATENCY, WEBHOOKS_DISABLED,
};
use parley_types::time::Timestamp;
use parley_usecases::webhook_deliveries::{self, AttemptRecord, DueAttempt, WebhookJobReport};
use uuid::Uuid;

use crate::claims::TakenClaims;
use crate::job::{Backoff, Failure, Job, JobResult, RetryPolicy};
use crate::outbound::{self, read_prefix};
use crate::state::WorkerState;

/// Bytes of the receiver's answer kept in the log.
const BODY_KEPT: usize = 4 * 1024;
/// The longest error text kept in the log.
const MAX_ERROR_CHARS: usize = 1_000;
/// The longest wait between two attempts, whatever the backoff or the receiver says.
const MAX_DELAY: Duration = Duration::from_secs(24 * 3600);
/// How soon a delivery that found its webhook busy is tried again.
const BUSY_DELAY: Duration = Duration::from_millis(500);
/// How long a webhook found with every slot stuck gets no new deliveries from the relay
/// (they are fed to it from Postgres a few at a time meanwhile).
const STALL: Duration = Duration::from_secs(2);
/// How long a job keeps starting attempts to one webhook.
const SEND_WINDOW: Duration = Duration::from_secs(1);

/// The HTTP client webhooks are sent with: no redirects, the timeout, and (unless private
/// addresses are allowed) the public-only resolver.
pub fn client(settings: &WebhookSettings) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .timeout(settings.timeout)
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(64)
        .user_agent("Parley-Webhooks/1");
    if !settings.allow_private {
        builder = builder.dns_resolver(Arc::new(outbound::PublicOnly));
    }
    builder.build().expect("the webhook client builds")
}

/// How a delivery the receiver did not take is attempted again: `PARLEY_WEBHOOK_MAX_ATTEMPTS`
/// attempts in all, `PARLEY_WEBHOOK_RETRY_BASE_MS` doubling between them, at most a day.
/// (A failed or lost job is another matter: its deliveries are enqueued again as
/// [`Job::retry_policy`] says, without counting an attempt.)
pub fn attempt_policy(settings: &WebhookSettings) -> RetryPolicy {
    RetryPolicy {
        retries: Some(u32::try_from(settings.max_attempts.max(1) - 1).unwrap_or(0)),
        backoff: Backoff::Exponential {
            base: settings.retry_base,
            max: MAX_DELAY,
        },
    }
}

/// The delay before attempt `attempt + 1` under `policy`, at least the receiver's
/// `Retry-After`, at most a day.
pub fn retry_delay(policy: &RetryPolicy, attempt: i32, retry_after: Option<Duration>) -> Duration {
    let backoff = policy
        .delay(u32::try_from(attempt).unwrap_or(1))
        .unwrap_or(MAX_DELAY);
    backoff.max(retry_after.unwrap_or_default()).min(MAX_DELAY)
}

/// The deliveries of a failed job stay due in Postgres; the relay enqueues them again.
impl Job for DeliverWebhooks {
    const NAME: &'static str = "webhook job";
    const FAIR: bool = true;

    fn org_slot(&self) -> Option<(Uuid, &str)> {
        parley_jobs::Fair::slot(self)
    }

    /// None: each attempt is bounded by `PARLEY_WEBHOOK_TIMEOUT_MS`, and a job dropped after
    /// its posts and before their record would post them again.
    fn timeout(_: &Config) -> Option<Duration> {
        None
    }

    fn span(&self) -> tracing::Span {
        tracing::info_span!("webhooks", organization_id = ?self.organization_id, deliveries = self.delivery_ids.len())
    }

    fn items(&self) -> u64 {
        self.delivery_ids.len() as u64
    }

    async fn run(self, ctx: &WorkerState) -> JobResult {
        run(ctx, &self).await.map_err(Failure::of)
    }
}

async fn run(ctx: &WorkerState, job: &DeliverWebhooks) -> anyhow::Result<()> {
    let settings = &ctx.config.webhooks;
    // The same short, heartbeat-kept claims as recipients: a dead worker's deliveries are
    // free again within a lease, when apalis hands its jobs back. What a job records is fenced
    // in Postgres (a failure stands only while the delivery was not enqueued again).
    let lease = ctx.settings().claim_lease;
    let taken = TakenClaims::take(&ctx.claims, &job.delivery_ids, lease).await?;
    // This job left the ready list: the next job in turn takes its place.
    if let Err(err) = ctx.jobs.refill(QueueName::WebhookDelivery).await {
        tracing::warn!(%err, "webhook queue not topped up from the lanes; the ticker will");
    }
    let Some(taken) = taken else {
        return Ok(());
    };
    let result = async {
        let due: Vec<DueAttempt> = webhook_deliveries::load_due(ctx.use_cases(), taken.ids())
            .await?
            .into_iter()
            .filter(|d| d.pending && d.due)
            .collect();
        // Each webhook's deliveries go out over the slots it can spare, all webhooks at once,
        // so a slow endpoint holds its own slots and delays nobody else's deliveries.
        let mut by_webhook: std::collections::BTreeMap<Uuid, Vec<DueAttempt>> = Default::default();
        for d in due {
            by_webhook.entry(d.webhook_id).or_default().push(d);
        }
        let sent = futures::future::join_all(
            by_webhook
                .into_iter()
                .map(|(webhook, group)| send_group(ctx, webhook, group)),
        )
        .await;
        let mut outcome = WebhookJobReport {
            attempts: Vec::new(),
            busy: Vec::new(),
            busy_for: BUSY_DELAY,
            stalled: Vec::new(),
            stall_for: STALL,
        };
        for result in sent {
            let sent = result?;
            outcome.attempts.extend(sent.attempted);
            outcome.busy.extend(sent.busy);
            outcome.stalled.extend(sent.stalled);
        }
        let disabled = webhook_deliveries::record_outcome(ctx.use_cases(), &outcome, settings.disable_after)
            .await
            .inspect_err(|err| {
                // The deliveries stay due; the relay takes them again, up to its ceiling.
                metrics::counter!(OUTCOME_WRITE_FAILURES, "kind" => "webhook").increment(1);
                tracing::error!(%err, attempts = outcome.attempts.len(), "webhook attempts not recorded");
            })?;
        for id in &disabled {
            tracing::warn!(webhook_id = %id, "webhook disabled after failing for too long");
            metrics::counter!(WEBHOOKS_DISABLED).increment(1);
        }
        anyhow::Ok(())
    }
    .await;
    taken.give_back().await;
    result
}

/// One webhook's share of a job: the attempts made, the deliveries put back, and the
/// webhook when it had no slot to spare at all.
#[derive(Default)]
struct GroupResult {
    attempted: Vec<AttemptRecord>,
    busy: Vec<Uuid>,
    stalled: Option<Uuid>,
}

/// One webhook's share of a job, sent over the endpoint's free slots. New attempts start only
/// within [`SEND_WINDOW`]: behind a slow endpoint the rest go back rather than wait in line,
/// so a job lasts at most the window plus one timeout.
#[tracing::instrument(skip_all, fields(webhook_id = %webhook, deliveries = group.len()))]
async fn send_group(
    ctx: &WorkerState,
    webhook: Uuid,
    group: Vec<DueAttempt>,
) -> Result<GroupResult, redis::RedisError> {
    let slots = ctx.endpoint_slots.take(webhook, group.len()).await?;
    let deadline = Instant::now() + SEND_WINDOW;
    let mut waiting = group.into_iter();
    let mut in_flight = futures::stream::FuturesUnordered::new();
    let mut sent = GroupResult {
        stalled: (slots.count() == 0).then_some(webhook),
        ..GroupResult::default()
    };
    let mut put_back = None;
    'sending: loop {
        while in_flight.len() < slots.count() && Instant::now() < deadline {
            let Some(d) = waiting.next() else { break };
            let wait = match d.rate_limit {
                // The webhook's rate: the attempt waits for its turn, taken within the window.
                Some(rate) => match rate_slot(ctx, webhook, rate, deadline).await {
                    Some(wait) => wait,
                    None => {
                        put_back = Some(d);
                        break 'sending;
                    }
                },
                None => Duration::ZERO,
            };
            in_flight.push(async move {
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
                attempt(ctx, d).await
            });
        }
        match in_flight.next().await {
            Some(record) => sent.attempted.push(record),
            None => break,
        }
    }
    while let Some(record) = in_flight.next().await {
        sent.attempted.push(record);
    }
    ctx.endpoint_slots.give_back(slots).await;
    sent.busy = put_back
        .into_iter()
        .chain(waiting)
        .map(|d| d.delivery_id)
        .collect();
    metrics::counter!(WEBHOOK_ATTEMPTS, "outcome" => "deferred", "status_class" => "none")
        .increment(sent.busy.len() as u64);
    Ok(sent)
}

/// The wait for `webhook`'s next delivery slot at `rate` per second, reserved if it comes
/// before `deadline`; `None` (nothing reserved) otherwise, or when Redis does not answer.
async fn rate_slot(
    ctx: &WorkerState,
    webhook: Uuid,
    rate: i32,
    deadline: Instant,
) -> Option<Duration> {
    let key = ctx.redis.key(&format!("rate:webhook:{webhook}"));
    let within = deadline.saturating_duration_since(Instant::now());
    let rate = u32::try_from(rate).unwrap_or(1);
    crate::rate_limit::reserve(&ctx.redis, &key, rate, within)
        .await
        .inspect_err(|err| tracing::warn!(%err, "webhook rate slot not reserved; put back"))
        .ok()
        .flatten()
}

fn status_class(status: Option<u16>) -> &'static str {
    match status {
        Some(200..=299) => "2xx",
        Some(300..=399) => "3xx",
        Some(400..=499) => "4xx",
        Some(500..=599) => "5xx",
        _ => "none",
    }
}

#[tracing::instrument(level = "debug", skip_all, fields(delivery_id = %d.delivery_id, event = %d.event, attempt = d.attempts + 1))]
async fn attempt(ctx: &WorkerState, d: DueAttempt) -> AttemptRecord {
    let settings = &ctx.config.webhooks;
    let attempt = d.attempts + 1;
    let record = |succeeded: bool,
                  status: Option<u16>,
                  body: Option<String>,
                  took: Duration,
                  error: Option<String>,
                  retry_after: Option<Duration>| {
        let next_attempt_at =
            (!succeeded && attempt < settings.max_attempts && d.is_active).then(|| {
                let delay = retry_delay(&attempt_policy(settings), attempt, retry_after);
                Timestamp(
                    chrono::Utc::now() + chrono::Duration::from_std(delay).unwrap_or_default(),
                )
            });
        AttemptRecord {
            delivery_id: d.delivery_id,
            organization_id: d.organization_id,
            webhook_id: d.webhook_id,
            event: d.event.clone(),
            attempt,
            succeeded,
            response_status: status.map(i32::from),
            // The receiver's words are stored only as text Postgres can hold.
            response_body: body.map(|b| storable(&b, BODY_KEPT)),
            duration_ms: took.as_millis().min(i32::MAX as u128) as i32,
            error: error.map(|e| storable(&e, MAX_ERROR_CHARS)),
            next_attempt_at,
            enqueued_at: d.enqueued_at,
        }
    };
    if !d.is_active {
        return record(
            false,
            None,
            None,
            Duration::ZERO,
            Some("the webhook is disabled".into()),
            None,
        );
    }
    if !settings.allow_private
        && let Some(why) = outbound::refuse_literal(&d.url)
    {
        metrics::counter!(WEBHOOK_ATTEMPTS, "outcome" => "failed", "status_class" => "none")
            .increment(1);
        return record(false, None, None, Duration::ZERO, Some(why), None);
    }
    let started = Instant::now();
    let result = send(ctx, &d, attempt).await;
    let took = started.elapsed();
    match result {
        Ok((status, body, retry_after, location)) => {
            let ok = (200..300).contains(&status);
            let error = match (ok, location) {
                (true, _) => None,
                (false, Some(to)) => Some(format!("redirect to {to} not followed")),
                (false, None) => Some(format!("the receiver answered {status}")),
            };
            if ok {
                let latency = chrono::Utc::now() - d.occurred_at.0;
                metrics::histogram!(WEBHOOK_LATENCY)
                    .record(latency.num_microseconds().unwrap_or(0) as f64 / 1e6);
            }
            metrics::counter!(WEBHOOK_ATTEMPTS, "outcome" => if ok { "succeeded" } else { "failed" },
                "status_class" => status_class(Some(status)))
            .increment(1);
            record(ok, Some(status), Some(body), took, error, retry_after)
        }
        Err(err) => {
            metrics::counter!(WEBHOOK_ATTEMPTS, "outcome" => "failed", "status_class" => "none")
                .increment(1);
            record(false, None, None, took, Some(err), None)
        }
    }
}

/// One `POST`: (status, the answer's first 4 KiB, `Retry-After`, a redirect's `Location`).
async fn send(
    ctx: &WorkerState,
    d: &DueAttempt,
    attempt: i32,
) -> Result<(u16, String, Option<Duration>, Option<String>), String> {
    let data =
        serde_json::value::RawValue::from_string(d.data.clone()).map_err(|e| e.to_string())?;
    let payload = WebhookBody {
        event: &d.event,
        timestamp: d.occurred_at,
        organization_id: d.organization_id,
        data: &data,
        metadata: WebhookBodyMetadata {
            delivery_id: d.delivery_id,
            attempt,
            version: WEBHOOK_BODY_VERSION,
        },
    };
    let body = serde_json::to_vec(&payload).map_err(|e| e.to_string())?;
    let id = d.delivery_id.to_string();
    let timestamp = chrono::Utc::now().timestamp();
    let secrets = std::iter::once(&d.secret).chain(&d.previous_secret);
    // Parley's own signature (comma-separated during a rotation) and the Standard Webhooks one
    // (space-separated), over the same body and time.
    let sig = secrets
        .clone()
        .map(|s| signature::sign(s.expose_secret(), &body))
        .collect::<Vec<_>>()
        .join(", ");
    let standard = secrets
        .map(|s| signature::sign_standard(s.expose_secret(), &id, timestamp, &body))
        .collect::<Vec<_>>()
        .join(" ");
    let response = ctx
        .webhook_client
        .post(&d.url)
        .header("content-type", "application/json")
        .header("x-parley-event", &d.event)
        .header("x-parley-delivery", &id)
        .header("x-parley-timestamp", timestamp.to_string())
        .header(signature::HEADER, sig)
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", standard)
        .body(body)
        .send()
        .await
        .map_err(|e| {
            if e.is_timeout() {
                "timed out".to_owned()
            } else {
                chain(&e)
            }
        })?;
    let status = response.status().as_u16();
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let retry_after = header("retry-after")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let location = header("location").filter(|_| (300..400).contains(&status));
    let body = read_prefix(response, BODY_KEPT).await;
    Ok((status, body, retry_after, location))
}

/// An error with its causes, for the log: reqwest's own message omits why a connect failed.
fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_follow_the_settings_and_honour_retry_after_within_a_day() {
        let config = Config::from_lookup(|var| match var {
            "DATABASE_URL" => Some("postgres://127.0.0.1/parley".into()),
            "REDIS_URL" => Some("redis://127.0.0.1".into()),
            "PARLEY_WEBHOOK_MAX_ATTEMPTS" => Some("4".into()),
            "PARLEY_WEBHOOK_RETRY_BASE_MS" => Some("10000".into()),
            _ => None,
        })
        .unwrap();
        let policy = attempt_policy(&config.webhooks);
        // Four attempts: the first and three retries, 10 s doubling between them.
        assert_eq!(policy.retries, Some(3));
        let first = retry_delay(&policy, 1, None);
        assert!(first >= Duration::from_secs(10) && first <= Duration::from_secs(20));
        let after = |secs| retry_delay(&policy, 1, Some(Duration::from_secs(secs)));
        assert!(after(300) >= Duration::from_secs(300));
        assert_eq!(after(10 * 86_400), MAX_DELAY);
        assert!(retry_delay(&policy, 40, None) <= MAX_DELAY);
    }
}

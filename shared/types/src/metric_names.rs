//! Every metric name the service exports, in one place: the dashboard and the alert rules
//! (and a test) rely on them.

/// HTTP requests by route template, method and status (API).
pub const HTTP_REQUESTS: &str = "parley_http_requests_total";
/// HTTP request latency by route template, method and status (API).
pub const HTTP_DURATION: &str = "parley_http_request_duration_seconds";
/// Requests (and connections) the API refused before or instead of answering them, by reason
/// (`timeout`, `overloaded`, `panic`, `connections_per_address`, `address_body_readers`,
/// `address_body_bytes`, `address_long_bodies`, `body_bytes`, `long_bodies`, `slow_body`, `spool_bytes`) (API).
pub const HTTP_REFUSED: &str = "parley_http_refused_total";
/// Requests whose daily usage could not be counted because Redis did not answer; they are
/// served uncounted (API).
pub const USAGE_UNCOUNTED: &str = "parley_usage_uncounted_total";
/// 1 while the API process hears API keys' revocations (its last heartbeat came back) and
/// keeps known keys in memory; 0 while it reads every key at each request (API).
pub const KEY_CACHE_IN_USE: &str = "parley_api_key_cache_in_use";
/// Jobs waiting per queue and state (`ready`, `scheduled`; `parked` in their lanes for the
/// recipient- and webhook-delivery queues), read from Redis (worker).
pub const QUEUE_DEPTH: &str = "parley_queue_depth";
/// How long the oldest job waiting in each queue (ready, or parked in its lane) has waited,
/// from its id's time or its park time (worker): the queue's latency, which KEDA scales on
/// beside the depth and `ParleyQueueLatencyHigh` alerts on.
pub const QUEUE_AGE: &str = "parley_queue_oldest_ready_seconds";
/// Jobs run, by queue and outcome (`ok`, `error`: enqueued again, `given_up`) (worker).
pub const JOBS: &str = "parley_jobs_total";
/// Job duration by queue and outcome (worker).
pub const JOB_DURATION: &str = "parley_job_duration_seconds";
/// Passes of the worker's periodic tasks (`ticker`, `relay`, `sla_scheduler`, `maintenance`,
/// `org_limits`, `operator`), by task and outcome (`ok`, `error`: a step failed) (worker).
pub const PERIODIC_PASSES: &str = "parley_periodic_passes_total";
/// How long a periodic task's pass took, by task (worker).
pub const PERIODIC_PASS_DURATION: &str = "parley_periodic_pass_duration_seconds";
/// Steps of periodic passes that failed (the next pass tries again), by task and step (worker).
pub const PERIODIC_STEP_FAILURES: &str = "parley_periodic_step_failures_total";
/// Provider calls by channel and outcome (worker).
pub const PROVIDER_CALLS: &str = "parley_provider_calls_total";
/// Provider call latency by channel (worker).
pub const PROVIDER_DURATION: &str = "parley_provider_call_duration_seconds";
/// Recipients reaching a status, by channel: sends (worker) and receipts (API).
pub const RECIPIENTS: &str = "parley_broadcast_recipients_total";
/// Work found again by the reconciler, by kind (worker).
pub const RECONCILED: &str = "parley_reconciled_total";
/// Rows removed by retention, by `kind`.
pub const RETENTION_DELETED: &str = "parley_retention_deleted_total";
/// Webhook delivery attempts by outcome (`succeeded`, `failed`, `deferred`) and HTTP status
/// class (`2xx` ... `5xx`, `none`) (worker).
pub const WEBHOOK_ATTEMPTS: &str = "parley_webhook_attempts_total";
/// From an event's commit to the 2xx of its delivery (worker).
pub const WEBHOOK_LATENCY: &str = "parley_webhook_delivery_latency_seconds";
/// Events not yet turned into deliveries (worker).
pub const OUTBOX_BACKLOG: &str = "parley_webhook_outbox_backlog";
/// Webhooks disabled after failing for too long (worker).
pub const WEBHOOKS_DISABLED: &str = "parley_webhooks_disabled_total";
/// SLA targets breached, by target (`first_response`, `next_response`, `resolution`): by the
/// worker's checks and by late achievements alike (worker).
pub const SLA_BREACHES: &str = "parley_sla_breaches_total";
/// SLA warnings given, by target (worker).
pub const SLA_WARNINGS: &str = "parley_sla_warnings_total";
/// SLA checks run, by outcome (`recorded`: a warning or breach was written; `nothing`: met
/// or already recorded) (worker).
pub const SLA_CHECKS: &str = "parley_sla_checks_total";
/// From an SLA deadline to the breach record the worker wrote (worker).
pub const SLA_BREACH_LAG: &str = "parley_sla_breach_lag_seconds";
/// SLA checks due and not yet moved into the queue (worker).
pub const SLA_BACKLOG: &str = "parley_sla_checks_backlog";
/// Outcomes of deliveries or recipients that could not be written, by kind (`webhook`,
/// `recipient`); the work stays due and its attempt ceiling still holds (worker).
pub const OUTCOME_WRITE_FAILURES: &str = "parley_outcome_write_failures_total";
/// Statements that wrote recipient outcomes, whatever their result (worker): the sent, failed
/// and skipped of `parley_broadcast_recipients_total` over it are the outcomes a statement
/// carried.
pub const OUTCOME_STATEMENTS: &str = "parley_recipient_outcome_statements_total";
/// Deliveries or recipients given up because they reached their attempt ceiling without an
/// outcome being recorded, by kind (worker).
pub const ATTEMPTS_EXHAUSTED: &str = "parley_attempts_exhausted_total";
/// The worker process's runtime threads (`PARLEY_WORKER_THREADS`, or one per core it may use):
/// `sum()` is a fleet's threads, to weigh against the cores they share (worker).
pub const RUNTIME_THREADS: &str = "parley_worker_runtime_threads";
/// Recipients held at sending time, by channel and reason (`local_time`: their local send time
/// has not come; `quiet_hours`: it is quiet time where they are) (worker). A recipient held
/// twice counts twice.
pub const RECIPIENTS_HELD: &str = "parley_recipients_held_total";
/// Recipients skipped because they reached their organization's frequency cap on the channel,
/// by channel (worker); also in `parley_broadcast_recipients_total{status="skipped"}`.
pub const RECIPIENTS_CAPPED: &str = "parley_recipients_capped_total";
/// A/B broadcasts' winners picked, by who picked (`auto`: the wait ended; `api`: the caller).
pub const VARIANT_PICKS: &str = "parley_broadcast_variant_picks_total";
/// Requests or work held back because an organization reached one of its own limits, by
/// limit (in the API `segment_counts`, `requests` (429s past an organization's turns and
/// queue), `requests_waited` (requests that waited their turn), `body_readers`, `body_bytes`
/// and `long_bodies` (429s past its share of bodies arriving), `files_sent` (429s past its
/// import files sent at once) and `exports` (429s past its suppression exports at once); in
/// the worker
/// `send_jobs` and `webhook_jobs`, each
/// time the lanes pass an organization over, and `channel_rate`, each message its rate holds
/// back): one series per limit, and per organization too only when the operator asks
/// (`PARLEY_METRICS_ORG_LABEL`). Counted by [`org_limit_hits`].
pub const ORG_LIMIT_HITS: &str = "parley_org_limit_hits_total";

/// Counts `n` hits of `limit`; `org` is `Some` only when organizations are labelled.
pub fn org_limit_hits(limit: &'static str, org: Option<String>, n: u64) {
    match org {
        Some(org) => {
            metrics::counter!(ORG_LIMIT_HITS, "limit" => limit, "organization" => org).increment(n)
        }
        None => metrics::counter!(ORG_LIMIT_HITS, "limit" => limit).increment(n),
    }
}

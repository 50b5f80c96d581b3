//! Operator control: what the operator API, the CLI and the operator page show and
//! do. Dead work is work given up on a queue (a recipient failed, a webhook delivery
//! exhausted, an import failed, an SLA check that could not run); an action retries or
//! discards what a filter matches, pauses or resumes a queue or an organization's sending, and
//! each is kept in the audit log.

use parley_types::error::AppError;
use parley_types::time::Timestamp;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

parley_types::text_enum!(
    /// A queue whose given-up work is dead work.
    DeadQueue {
        RecipientSend = "recipient-send" | "recipient-delivery",
        WebhookDelivery = "webhook-delivery",
        ContactImport = "contact-import",
        SlaCheck = "sla-check",
    }
);

parley_types::text_enum!(
    /// What an operator did.
    ActionKind {
        Retry = "retry",
        Discard = "discard",
        PauseQueue = "pause_queue",
        ResumeQueue = "resume_queue",
        PauseOrganization = "pause_organization",
        ResumeOrganization = "resume_organization",
    }
);

parley_types::text_enum!(
    /// Where an action stands: a retry or discard runs in batches until it is done.
    ActionStatus { Running = "running", Completed = "completed", Failed = "failed" }
);

/// An SLA check due this long ago and still waiting could not run.
pub const SLA_CHECK_DEAD_AFTER_SECS: i64 = 600;
/// Items one retry or discard acts on at most (`limit` defaults to it).
pub const MAX_ACTION_ITEMS: u32 = 100_000;
/// Items an action's `matched` counts at most (the action itself goes on to its limit).
pub const MATCHED_COUNTED: u32 = 10_000;
/// Ids one action may name.
pub const MAX_ACTION_IDS: usize = 1_000;
/// The longest error code a filter may name.
const MAX_ERROR_CODE: usize = 64;

/// Which dead work: one queue's, narrowed by any of the rest. A field it does not know is
/// refused (a misspelt `organizationId` must not widen a retry to every organization).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema, utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct DeadFilter {
    /// The queue: `recipient-send`, `webhook-delivery`, `contact-import` or `sla-check`.
    pub queue: DeadQueue,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization_id: Option<Uuid>,
    /// Recipients of this broadcast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broadcast_id: Option<Uuid>,
    /// Deliveries to this webhook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_id: Option<Uuid>,
    /// The error code (a recipient's `errorCode`; a webhook delivery's `http_<status>` or
    /// `no_response`; an import's `import_failed`; an SLA check's `not_run`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 64, pattern = r"^[a-z0-9_]+$"),
        param(max_length = 64, pattern = r"^[a-z0-9_]+$")
    )]
    pub error_code: Option<String>,
    /// Given up at or after this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime), param(value_type = Option<String>, format = DateTime))]
    pub from: Option<Timestamp>,
    /// Given up before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, format = DateTime), param(value_type = Option<String>, format = DateTime))]
    pub to: Option<Timestamp>,
}

impl DeadFilter {
    /// The queue, and the filter's own rules: 422 naming the field otherwise.
    pub fn checked(&self) -> Result<DeadQueue, AppError> {
        let queue = self.queue;
        if let Some(code) = &self.error_code
            && (code.is_empty()
                || code.len() > MAX_ERROR_CODE
                || !code
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'))
        {
            return Err(AppError::validation(
                "errorCode",
                "invalid_format",
                "an error code: 1 to 64 of a-z, 0-9 and _",
            ));
        }
        if let (Some(from), Some(to)) = (self.from, self.to)
            && from >= to
        {
            return Err(AppError::validation(
                "to",
                "invalid_range",
                "`to` must be after `from`",
            ));
        }
        let stray = match queue {
            DeadQueue::RecipientSend => self.webhook_id.map(|_| "webhookId"),
            DeadQueue::WebhookDelivery => self.broadcast_id.map(|_| "broadcastId"),
            DeadQueue::ContactImport | DeadQueue::SlaCheck => self
                .broadcast_id
                .map(|_| "broadcastId")
                .or(self.webhook_id.map(|_| "webhookId")),
        };
        if let Some(field) = stray {
            return Err(AppError::validation(
                field,
                "not_applicable",
                format!("the queue {queue} has no such work"),
            ));
        }
        Ok(queue)
    }
}

/// One item of dead work.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DeadItem {
    pub queue: DeadQueue,
    /// The recipient's, delivery's, import's or SLA check's id.
    pub id: Uuid,
    pub organization_id: Uuid,
    pub broadcast_id: Option<Uuid>,
    pub webhook_id: Option<Uuid>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// When it was given up (an SLA check: when it was due).
    pub failed_at: Timestamp,
    /// Attempts made (webhook deliveries and imports).
    pub attempts: Option<i32>,
}

/// A retry or a discard: of the items named by `ids`, or of everything the filter matches
/// (at most `limit`). Given up after the action is made, an item is left to the next one.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct DeadAction {
    /// Which dead work (`queue` required).
    pub filter: DeadFilter,
    /// Only these items (at most 1,000), within the filter.
    #[serde(
        default,
        deserialize_with = "parley_types::fields::at_most::<_, _, 1000>"
    )]
    #[cfg_attr(feature = "openapi", schema(max_items = 1000))]
    pub ids: Vec<Uuid>,
    /// Items acted on at most (default and most: 100,000).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100000))]
    pub limit: Option<u32>,
}

parley_types::objects_only!(serialize: DeadFilter);
parley_types::objects_only!(DeadAction);

impl DeadAction {
    pub fn max_items(&self) -> Result<u32, AppError> {
        match self.limit {
            None => Ok(MAX_ACTION_ITEMS),
            Some(n) if (1..=MAX_ACTION_ITEMS).contains(&n) => Ok(n),
            Some(_) => Err(AppError::validation(
                "limit",
                "out_of_range",
                "from 1 to 100,000",
            )),
        }
    }
}

/// An operator action, as the audit log keeps it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct OperatorAction {
    pub id: Uuid,
    /// The operator key's name, or `token` (PARLEY_ADMIN_TOKEN), or `cli:<user>`.
    pub actor: String,
    pub action: ActionKind,
    pub queue: Option<String>,
    pub organization_id: Option<Uuid>,
    /// The dead-work filter a retry or discard applies.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub filter: serde_json::Value,
    pub status: ActionStatus,
    /// Items matched when the action was made, counted up to 10,000 (the action itself goes
    /// on to its limit).
    pub matched: i32,
    /// Items acted on so far.
    pub done: i32,
    pub error: Option<String>,
    pub created_at: Timestamp,
    pub finished_at: Option<Timestamp>,
}

/// A queue as an operator sees it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct QueueOverview {
    pub name: String,
    /// Jobs ready to run now (waiting in the ready list).
    pub ready: u64,
    /// Jobs waiting their turn in their organizations' lanes.
    pub parked: u64,
    /// Jobs due later.
    pub scheduled: u64,
    /// Jobs a worker is running.
    pub in_flight: u64,
    /// How long the oldest waiting job has waited, in seconds.
    pub oldest_ready_seconds: f64,
    /// Workers consuming the queue (seen in the last minute).
    pub consumers: u64,
    /// Jobs finished per second over the last minute.
    pub jobs_per_second: f64,
    /// Items finished per second over the last minute: recipients sent, webhook deliveries
    /// attempted (the other queues: jobs).
    pub items_per_second: f64,
    /// An operator paused it: its workers take none of its jobs.
    pub paused: bool,
}

/// An organization's work waiting to be sent.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct OrgBacklog {
    pub organization_id: Uuid,
    pub name: String,
    /// Recipients of its sending broadcasts not yet sent.
    pub pending_recipients: i64,
    /// Recipients held (local time, quiet hours, or its sending paused).
    pub held_recipients: i64,
    /// Webhook deliveries waiting (counted among the first 100,000 waiting in all).
    pub pending_webhook_deliveries: i64,
    pub sending_paused: bool,
}

/// The queues and the largest backlogs.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct QueuesOverview {
    pub queues: Vec<QueueOverview>,
    /// The organizations with the most waiting work, largest first.
    pub top_organizations: Vec<OrgBacklog>,
}

/// What is paused.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Pauses {
    pub queues: Vec<PausedQueue>,
    pub organizations: Vec<PausedOrganization>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PausedQueue {
    pub queue: String,
    pub paused_at: Timestamp,
    pub paused_by: String,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PausedOrganization {
    pub organization_id: Uuid,
    pub name: String,
    pub paused_at: Timestamp,
    /// Its recipients held by the pause.
    pub held_recipients: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_names_its_queue_and_only_fields_of_it() {
        let mut f = DeadFilter {
            queue: DeadQueue::WebhookDelivery,
            organization_id: None,
            broadcast_id: None,
            webhook_id: None,
            error_code: None,
            from: None,
            to: None,
        };
        assert_eq!(f.checked().unwrap(), DeadQueue::WebhookDelivery);
        f.broadcast_id = Some(Uuid::nil());
        assert!(f.checked().is_err());
        f.broadcast_id = None;
        f.error_code = Some("HTTP 500".into());
        assert!(f.checked().is_err());
        f.error_code = Some("http_500".into());
        assert!(f.checked().is_ok());
    }

    #[test]
    fn an_action_reads_its_filter_beside_ids_and_limit() {
        let a: DeadAction = serde_json::from_value(serde_json::json!({
            "filter": {"queue": "recipient-send", "errorCode": "rejected"}, "limit": 10
        }))
        .unwrap();
        assert_eq!(a.filter.queue, DeadQueue::RecipientSend);
        assert_eq!(a.max_items().unwrap(), 10);
        // The queue's former name is read, as JSON and as stored text, and never written.
        let former: DeadFilter =
            serde_json::from_value(serde_json::json!({"queue": "recipient-delivery"})).unwrap();
        assert_eq!(former.queue, DeadQueue::RecipientSend);
        assert_eq!("recipient-delivery".parse(), Ok(DeadQueue::RecipientSend));
        assert_eq!(
            serde_json::to_value(DeadQueue::RecipientSend).unwrap(),
            "recipient-send"
        );
        let ids: Vec<Uuid> = (0..1001).map(|_| Uuid::nil()).collect();
        assert!(
            serde_json::from_value::<DeadAction>(
                serde_json::json!({"filter": {"queue": "sla-check"}, "ids": ids})
            )
            .is_err()
        );
    }
}

//! Webhooks: subscriptions to events, their deliveries and the attempt log, and the payload
//! every delivery carries (docs/api.md, Webhooks).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngExt;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use parley_types::error::{AppError, FieldError};
use parley_types::fields::{Text, WebhookUrl, non_null, nullable};
use parley_types::time::Timestamp;

parley_types::text_enum!(
    /// An event a webhook can receive; `webhook.test` only comes from `POST /webhooks/{id}/test`.
    EventName {
        ConversationStarted = "conversation.started",
        ConversationEnded = "conversation.ended",
        ConversationAssigned = "conversation.assigned",
        MessageReceived = "message.received",
        MessageSent = "message.sent",
        TicketCreated = "ticket.created",
        TicketUpdated = "ticket.updated",
        TicketClosed = "ticket.closed",
        BroadcastSent = "broadcast.sent",
        BroadcastFailed = "broadcast.failed",
        BroadcastVariantPicked = "broadcast.variant_picked",
        UserCreated = "user.created",
        LeadCreated = "lead.created",
        SlaWarning = "sla.warning",
        SlaBreached = "sla.breached",
        WebhookDisabled = "webhook.disabled",
        ContactSuppressed = "contact.suppressed",
        ContactUnsubscribed = "contact.unsubscribed",
        WebhookTest = "webhook.test",
    }
);

impl EventName {
    /// Events a webhook may subscribe to, with what fires them.
    pub const SUBSCRIBABLE: &'static [(EventName, &'static str)] = &[
        (EventName::ConversationStarted, "a new conversation begins"),
        (EventName::ConversationEnded, "a conversation is closed"),
        (
            EventName::ConversationAssigned,
            "a conversation is assigned to a user or team",
        ),
        (EventName::MessageReceived, "an inbound message arrives"),
        (EventName::MessageSent, "an outbound message is sent"),
        (EventName::TicketCreated, "a ticket is created"),
        (EventName::TicketUpdated, "a ticket changes"),
        (EventName::TicketClosed, "a ticket is closed"),
        (
            EventName::BroadcastSent,
            "a broadcast ends with messages sent",
        ),
        (
            EventName::BroadcastFailed,
            "a broadcast ends with nothing sent",
        ),
        (
            EventName::BroadcastVariantPicked,
            "an A/B broadcast's winning variant is picked (its wait ended, or the caller picked it)",
        ),
        (EventName::UserCreated, "a workspace user is created"),
        (EventName::LeadCreated, "a lead is captured"),
        (
            EventName::SlaWarning,
            "an SLA deadline of a conversation or ticket is near (the policy's warning threshold)",
        ),
        (
            EventName::SlaBreached,
            "an SLA target of a conversation or ticket was not met by its deadline",
        ),
        (
            EventName::WebhookDisabled,
            "another webhook of the organization was disabled after failing for too long",
        ),
        (
            EventName::ContactSuppressed,
            "an entry is added to the organization's suppression ledger",
        ),
        (
            EventName::ContactUnsubscribed,
            "a contact unsubscribes through a message's unsubscribe link, from everything on the channel or from a topic",
        ),
    ];

    pub fn is_subscribable(self) -> bool {
        Self::SUBSCRIBABLE.iter().any(|(e, _)| *e == self)
    }
}

/// An entry of `GET /api/v1/webhooks/events`.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventInfo {
    pub name: EventName,
    pub description: &'static str,
}

/// `whsec_` and the base64 of 32 random bytes.
pub fn new_secret() -> SecretString {
    let bytes: [u8; 32] = rand::rng().random();
    format!("whsec_{}", STANDARD.encode(bytes)).into()
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub url: String,
    pub events: Vec<String>,
    pub description: Option<String>,
    /// False once disabled (by hand, or after 5 days of failed deliveries).
    pub is_active: bool,
    /// Since when every attempt has failed.
    pub failing_since: Option<Timestamp>,
    pub disabled_at: Option<Timestamp>,
    /// Why it is disabled, while it is.
    pub disabled_reason: Option<String>,
    /// Deliveries per second at most, across all workers; none when unset.
    pub rate_limit: Option<i32>,
    /// Until then deliveries are also signed with the secret before the last rotation.
    pub previous_secret_expires_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(Webhook);

impl Webhook {
    /// What a `webhook.disabled` event says of this webhook to its organization's other
    /// webhooks: all of it but its URL, which may carry a token; its host instead.
    pub fn disabled_event(&self) -> Result<serde_json::Value, serde_json::Error> {
        let mut data = serde_json::to_value(self)?;
        if let Some(w) = data.as_object_mut() {
            let host = url::Url::parse(&self.url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_owned));
            w.remove("url");
            w.insert("host".to_owned(), serde_json::json!(host));
        }
        Ok(data)
    }
}

/// The highest `rateLimit` a webhook takes (deliveries per second).
pub const MAX_RATE_LIMIT: i32 = 10_000;

struct RateLimit(i32);

impl<'de> Deserialize<'de> for RateLimit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        parley_types::fields::bounded_i32(d, 1, MAX_RATE_LIMIT).map(RateLimit)
    }
}

/// Absent: unchanged (`None`); `null`: no limit (`Some(None)`); else 1 to [`MAX_RATE_LIMIT`].
fn rate_limit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<i32>>, D::Error> {
    Option::<RateLimit>::deserialize(d).map(|v| Some(v.map(|r| r.0)))
}

/// A webhook with its signing secret: only in the answers of create and rotate-secret.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookWithSecret {
    #[serde(flatten)]
    pub webhook: Webhook,
    /// `whsec_...`: signs every delivery. Not shown again (and never in `Debug`).
    #[serde(serialize_with = "expose")]
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub secret: SecretString,
}

/// The secret itself, in the one answer that shows it.
fn expose<S: serde::Serializer>(secret: &SecretString, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(secret.expose_secret())
}

/// Events one webhook may list (repeats count).
const MAX_EVENTS: usize = 20;

#[cfg(feature = "openapi")]
/// The document's list of events: the subscribable names.
fn event_list() -> utoipa::openapi::schema::Array {
    parley_types::fields::choice_list(
        EventName::SUBSCRIBABLE.iter().map(|(e, _)| e.as_str()),
        MAX_EVENTS,
    )
}

/// Outside development a webhook URL is `https` to a host name ([`fields::HTTPS_URL`], what
/// the served document states): a literal address is refused, a name is checked against
/// private addresses each time it is resolved. `allow_private` (development, tests) admits
/// `http` and literal addresses too.
///
/// [`fields::HTTPS_URL`]: parley_types::fields::HTTPS_URL
pub fn check_url(url: &WebhookUrl, allow_private: bool) -> Result<(), AppError> {
    static PRODUCTION: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(parley_types::fields::HTTPS_URL).expect("the pattern compiles")
    });
    if allow_private {
        return url::Url::parse(url.as_str())
            .map(|_| ())
            .map_err(|_| AppError::validation("url", "invalid_format", "must be a URL"));
    }
    if !url.as_str().starts_with("https://") {
        return Err(AppError::validation(
            "url",
            "insecure",
            "must be an https URL",
        ));
    }
    if !PRODUCTION.is_match(url.as_str()) {
        return Err(AppError::validation(
            "url",
            "invalid_format",
            "must name a host; literal addresses are refused",
        ));
    }
    Ok(())
}

/// Parses event names for a subscription: at least one, each subscribable, no repeats.
fn parse_events(raw: &[String]) -> Result<Vec<String>, AppError> {
    if raw.is_empty() {
        return Err(AppError::validation(
            "events",
            "required",
            "at least one event",
        ));
    }
    let mut errors = Vec::new();
    let mut out: Vec<String> = Vec::new();
    for (i, name) in raw.iter().enumerate() {
        match name.parse::<EventName>() {
            Ok(e) if e.is_subscribable() => {
                if !out.contains(name) {
                    out.push(name.clone());
                }
            }
            _ => errors.push(FieldError::new(
                format!("events[{i}]"),
                "invalid_value",
                format!("{name:?} is not an event; see GET /api/v1/webhooks/events"),
            )),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(AppError::Validation(errors))
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "url": "https://hooks.example.com/parley", "events": ["lead.created", "broadcast.sent"],
    "description": "CRM sync"
})))]
pub struct CreateWebhook {
    /// `https` to a public address.
    pub url: WebhookUrl,
    /// Names from `GET /api/v1/webhooks/events`; repeats count once.
    #[cfg_attr(feature = "openapi", schema(schema_with = event_list))]
    pub events: Vec<String>,
    pub description: Option<Text>,
    pub is_active: Option<bool>,
    /// Deliveries per second at most (1 to 10,000), across all workers.
    #[serde(default, deserialize_with = "rate_limit")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<i32>, minimum = 1, maximum = 10000))]
    pub rate_limit: Option<Option<i32>>,
}

impl CreateWebhook {
    pub fn into_webhook(
        self,
        organization_id: Uuid,
        allow_private: bool,
    ) -> Result<(Webhook, SecretString), AppError> {
        check_url(&self.url, allow_private)?;
        parley_types::fields::check_len("events", self.events.len(), MAX_EVENTS)?;
        let events = parse_events(&self.events)?;
        let now = Timestamp::now();
        let webhook = Webhook {
            id: parley_types::ids::new_id(),
            organization_id,
            url: self.url.into(),
            events,
            description: self.description.map(Into::into),
            is_active: self.is_active.unwrap_or(true),
            failing_since: None,
            disabled_at: None,
            disabled_reason: None,
            rate_limit: self.rate_limit.flatten(),
            previous_secret_expires_at: None,
            created_at: now,
            updated_at: now,
        };
        Ok((webhook, new_secret()))
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"events": ["lead.created"], "isActive": true})))]
pub struct UpdateWebhook {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub url: Option<WebhookUrl>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false, schema_with = event_list))]
    pub events: Option<Vec<String>>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<Text>>,
    /// `true` enables a disabled webhook again (and forgets its failures).
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_active: Option<bool>,
    /// Deliveries per second at most (1 to 10,000); `null` removes the limit.
    #[serde(default, deserialize_with = "rate_limit")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<i32>, minimum = 1, maximum = 10000))]
    pub rate_limit: Option<Option<i32>>,
}

impl UpdateWebhook {
    pub fn apply(self, w: &mut Webhook, allow_private: bool) -> Result<(), AppError> {
        if let Some(url) = self.url {
            check_url(&url, allow_private)?;
            w.url = url.into();
        }
        if let Some(events) = self.events {
            parley_types::fields::check_len("events", events.len(), MAX_EVENTS)?;
            w.events = parse_events(&events)?;
        }
        if let Some(d) = self.description {
            w.description = d.map(Into::into);
        }
        if let Some(active) = self.is_active {
            if active && !w.is_active {
                w.failing_since = None;
                w.disabled_at = None;
                w.disabled_reason = None;
            }
            if !active && w.is_active {
                w.disabled_at = Some(Timestamp::now());
                w.disabled_reason = Some("disabled through the API".to_owned());
            }
            w.is_active = active;
        }
        if let Some(limit) = self.rate_limit {
            w.rate_limit = limit;
        }
        w.updated_at = Timestamp::now();
        Ok(())
    }
}

parley_types::text_enum!(
    /// How an attempt went.
    AttemptStatus { Succeeded = "succeeded", Failed = "failed" }
);

parley_types::text_enum!(
    /// Where a delivery stands.
    DeliveryStatus { Pending = "pending", Delivered = "delivered", Failed = "failed" }
);

/// One delivery attempt, as `GET /webhooks/{id}/logs` lists them.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WebhookAttempt {
    pub id: Uuid,
    /// The same for every attempt of one delivery (`X-Parley-Delivery`).
    pub delivery_id: Uuid,
    pub event: String,
    /// 1 for the first attempt, counting up.
    pub attempt: i32,
    pub status: AttemptStatus,
    /// The receiver's HTTP status, when it answered.
    pub response_status: Option<i32>,
    /// The first 4 KiB of the receiver's answer.
    pub response_body: Option<String>,
    pub duration_ms: i32,
    pub error: Option<String>,
    /// When the next attempt is due, if one will be made.
    pub next_attempt_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(WebhookAttempt);

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct AttemptFilter {
    pub status: Option<AttemptStatus>,
    pub event: Option<EventName>,
}

/// A delivery, as `test` and `redeliver` answer.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    pub delivery_id: Uuid,
    pub webhook_id: Uuid,
    pub event: String,
    pub status: DeliveryStatus,
    /// Attempts made so far.
    pub attempts: i32,
    pub next_attempt_at: Timestamp,
    pub delivered_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

parley_types::text_enum!(
    /// Where a recovery stands.
    RecoveryStatus { Running = "running", Completed = "completed" }
);

/// `POST /webhooks/{id}/recover`: the failed deliveries of events between `since` and `until`
/// (now when left out) are queued again.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"since": "2026-11-24T00:00:00.000Z"})))]
pub struct RecoverWebhook {
    pub since: Timestamp,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub until: Option<Timestamp>,
}

impl RecoverWebhook {
    /// The window, `since` before `until`.
    pub fn window(self) -> Result<(Timestamp, Timestamp), AppError> {
        let until = self.until.unwrap_or_else(Timestamp::now);
        if self.since >= until {
            return Err(AppError::validation(
                "since",
                "invalid_value",
                "must be before until (or now, when until is left out)",
            ));
        }
        Ok((self.since, until))
    }
}

/// A recovery: the webhook's failed deliveries of a window, queued again in the background
/// a batch at a time, then attempted at the endpoint's pace.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WebhookRecovery {
    pub id: Uuid,
    pub webhook_id: Uuid,
    pub since: Timestamp,
    pub until: Timestamp,
    pub status: RecoveryStatus,
    /// Failed deliveries queued again so far.
    pub recovered: i32,
    pub completed_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(WebhookRecovery);

/// The body of every webhook delivery (the specification fixes its snake_case fields).
#[derive(Debug, Serialize)]
pub struct WebhookBody<'a> {
    pub event: &'a str,
    /// When the event happened (ISO 8601, UTC).
    pub timestamp: Timestamp,
    pub organization_id: Uuid,
    pub data: &'a serde_json::value::RawValue,
    pub metadata: WebhookBodyMetadata,
}

#[derive(Debug, Serialize)]
pub struct WebhookBodyMetadata {
    pub delivery_id: Uuid,
    pub attempt: i32,
    pub version: &'static str,
}

/// The `metadata.version` every webhook body carries (a job's payload has its own version:
/// `parley_jobs::PAYLOAD_VERSION`).
pub const WEBHOOK_BODY_VERSION: &str = "1";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disabled_webhook_is_told_by_its_host_not_its_url() {
        let at = Timestamp::now();
        let webhook = Webhook {
            id: Uuid::nil(),
            organization_id: Uuid::nil(),
            url: "https://hooks.example.com/in?token=s3cret".to_owned(),
            events: vec!["broadcast.sent".to_owned()],
            description: None,
            is_active: false,
            failing_since: Some(at),
            disabled_at: Some(at),
            disabled_reason: Some("every attempt failed".to_owned()),
            rate_limit: None,
            previous_secret_expires_at: None,
            created_at: at,
            updated_at: at,
        };
        let data = webhook.disabled_event().unwrap();
        assert_eq!(data["host"], "hooks.example.com");
        assert!(data.get("url").is_none());
        assert!(!data.to_string().contains("s3cret"));
    }

    fn url(s: &str) -> WebhookUrl {
        WebhookUrl::parse(s).unwrap()
    }

    #[test]
    fn urls_must_be_https_to_host_names() {
        assert!(check_url(&url("https://hooks.example.com/x"), false).is_ok());
        for bad in [
            "http://hooks.example.com/x",
            "https://127.0.0.1/x",
            "https://10.0.0.1/x",
            "https://169.254.169.254/latest/meta-data",
            "https://[::1]/x",
            "https://[fd00:ec2::254]/x",
            "https://8.8.8.8/x",
        ] {
            assert!(check_url(&url(bad), false).is_err(), "{bad}");
            assert!(
                check_url(&url(bad), true).is_ok(),
                "{bad} with private addresses allowed"
            );
        }
    }

    #[test]
    fn events_are_checked_and_deduplicated() {
        let ok = parse_events(&[
            "lead.created".into(),
            "lead.created".into(),
            "user.created".into(),
        ]);
        assert_eq!(ok.unwrap(), vec!["lead.created", "user.created"]);
        assert!(parse_events(&[]).is_err());
        assert!(parse_events(&["lead.exploded".into()]).is_err());
        assert!(
            parse_events(&["webhook.test".into()]).is_err(),
            "not subscribable"
        );
        assert_eq!(
            EventName::SUBSCRIBABLE.len(),
            18,
            "the specification's 12, the two SLA events, webhook.disabled, \
             broadcast.variant_picked, contact.suppressed and contact.unsubscribed"
        );
    }

    #[test]
    fn secrets_have_the_contract_shape() {
        let secret = new_secret();
        let s = secret.expose_secret();
        assert!(s.starts_with("whsec_"));
        assert_eq!(STANDARD.decode(&s[6..]).unwrap().len(), 32);
        assert_ne!(s, new_secret().expose_secret());
        assert!(!format!("{secret:?}").contains(s));
    }
}

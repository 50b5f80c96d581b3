//! Broadcasts: campaigns that send a template to contacts, with one recipient record each.
//! The state machine is the one docs/api.md (Broadcasts) gives; the rules live here so the API and the worker agree.

use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use uuid::Uuid;

use crate::Channel;
use crate::ab_tests::{AbSettings, AbTest, AbTestRequest, Variant, VariantRow};
use crate::contacts::Contact;
use crate::send_rules::{PastTimePolicy, QuietHours, SendIn, wall_time_span};
use crate::suppressions::BounceType;
pub use crate::template_variables::{TemplateVariables, TypedValue};
use crate::templates::{
    MAX_PLACEHOLDERS, Placeholder, Segment, Template, check_rendered_length, max_message_chars,
    parse_body, rendered_bound,
};
use parley_types::error::{AppError, FieldError};
use parley_types::fields::{Name, ShortText, Text, non_null, nullable};
use parley_types::ids::TopicId;
use parley_types::time::{ScheduledTime, Timestamp};

/// Most contacts one broadcast may address.
pub const MAX_AUDIENCE: usize = 1_000_000;

parley_types::text_enum!(
    /// Where a broadcast stands (docs/api.md, Broadcasts).
    BroadcastStatus {
        Draft = "draft",
        Scheduled = "scheduled",
        Queued = "queued",
        Sending = "sending",
        Paused = "paused",
        Completed = "completed",
        Failed = "failed",
        Cancelled = "cancelled",
    }
);

parley_types::text_enum!(
    /// How a broadcast's messages take their turn: `high` (transactional: a one-time code, an
    /// order update) goes ahead of every organization's `normal` (bulk) work, within its own
    /// organization's limits.
    SendPriority {
        Normal = "normal",
        High = "high",
    }
);

parley_types::text_enum!(
    /// Where one recipient stands. Statuses only move forward: pending, then sent, delivered,
    /// read, replied; `failed` from pending or sent; `skipped` from pending. `held` waits for
    /// the recipient's local send time or the end of its quiet hours (`holdUntil`), then is
    /// pending again.
    RecipientStatus {
        Pending = "pending",
        Held = "held",
        Sent = "sent",
        Delivered = "delivered",
        Read = "read",
        Replied = "replied",
        Failed = "failed",
        Skipped = "skipped",
    }
);

impl RecipientStatus {
    /// Funnel rank: sent 1, delivered 2, read 3, replied 4; others 0.
    pub fn rank(self) -> u8 {
        match self {
            RecipientStatus::Sent => 1,
            RecipientStatus::Delivered => 2,
            RecipientStatus::Read => 3,
            RecipientStatus::Replied => 4,
            _ => 0,
        }
    }

    /// Whether a receipt saying `next` may move a recipient from `self`.
    pub fn may_become(self, next: RecipientStatus) -> bool {
        use RecipientStatus::*;
        match next {
            Failed => matches!(self, Pending | Sent),
            Delivered | Read | Replied => {
                matches!(self, Sent | Delivered | Read | Replied) && next.rank() > self.rank()
            }
            Pending | Held | Sent | Skipped => false,
        }
    }
}

/// An action on a broadcast and the states it is allowed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Update,
    Delete,
    Pause,
    Resume,
    Cancel,
    RetryFailed,
}

impl Action {
    pub fn allowed_from(self) -> &'static [BroadcastStatus] {
        use BroadcastStatus::*;
        match self {
            Action::Update => &[Draft, Scheduled],
            Action::Delete => &[Draft],
            Action::Pause => &[Queued, Sending],
            Action::Resume => &[Paused],
            Action::Cancel => &[Scheduled, Queued, Sending, Paused],
            Action::RetryFailed => &[Completed, Failed],
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Action::Update => "updated",
            Action::Delete => "deleted",
            Action::Pause => "paused",
            Action::Resume => "resumed",
            Action::Cancel => "cancelled",
            Action::RetryFailed => "retried",
        }
    }

    /// The 409 for a broadcast in `status`.
    pub fn refused(self, status: BroadcastStatus) -> AppError {
        let allowed: Vec<&str> = self.allowed_from().iter().map(|s| s.as_str()).collect();
        AppError::invalid_state(format!(
            "a {status} broadcast cannot be {}; only {} ones can",
            self.name(),
            allowed.join(", ")
        ))
    }
}

/// Error codes one retry may name.
pub const MAX_RETRY_CODES: usize = 50;

/// Which failed recipients `retry-failed` sends again: all, or those whose `errorCode` is one of
/// `errorCodes`.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"errorCodes": ["http_503", "timeout"]})))]
pub struct RetryFailed {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, min_items = 1, max_items = 50)
    )]
    pub error_codes: Option<Vec<ShortText>>,
}

impl RetryFailed {
    /// The codes to match, or `None` for every failed recipient.
    pub fn codes(self) -> Result<Option<Vec<String>>, AppError> {
        let Some(codes) = self.error_codes else {
            return Ok(None);
        };
        parley_types::fields::check_len("errorCodes", codes.len(), MAX_RETRY_CODES)?;
        if codes.is_empty() {
            return Err(AppError::validation(
                "errorCodes",
                "invalid_value",
                "name at least one error code, or leave errorCodes out to retry every failure",
            ));
        }
        Ok(Some(codes.into_iter().map(Into::into).collect()))
    }
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Broadcast {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub broadcast_name: String,
    pub description: Option<String>,
    pub template_id: Uuid,
    /// The template's channel.
    pub channel: Channel,
    pub template_channel: String,
    pub status: BroadcastStatus,
    pub is_draft: bool,
    pub send_now: bool,
    pub priority: SendPriority,
    /// When the broadcast is due; with `sendIn: contact_timezone`, the first instant its
    /// `localTime` comes in any zone (UTC+14), when it starts sending.
    pub scheduled_at: Option<Timestamp>,
    pub send_in: SendIn,
    /// With `sendIn: contact_timezone`: the wall time each contact is sent at in its own zone
    /// (the contact's `timezone`, else the organization's `workingHours.timezone`).
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, example = "2026-11-28T09:00:00")
    )]
    pub local_time: Option<chrono::NaiveDateTime>,
    /// For a local-time broadcast, a contact whose send time had passed when the broadcast
    /// was due (`scheduledAt`): sent at once (`send_now`) or skipped (`send_time_passed`).
    pub past_time_policy: PastTimePolicy,
    /// Replaces the organization's quiet hours for this broadcast (`start` equal to `end`:
    /// none); `null`: the organization's.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<QuietHours>))]
    pub quiet_hours: Option<Json<QuietHours>>,
    pub sender_email_address_id: Option<String>,
    pub subject_override: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<TemplateVariables>))]
    pub template_variables: Option<Json<TemplateVariables>>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub email_variables: Option<Json<serde_json::Value>>,
    /// Set when the broadcast failed or was paused by the service.
    pub error_message: Option<String>,
    /// Contacts asked for (without repeats); for a segment, the contacts it held when the
    /// fan-out wrote them (0 before).
    pub audience_size: i32,
    /// The segment that is the audience, instead of `contactIds`.
    pub segment_id: Option<Uuid>,
    /// Recipient records written so far.
    pub total_recipients: i32,
    /// Recipients that reached `sent` or beyond (delivered, read, replied).
    pub sent_count: i32,
    /// Recipients that reached `delivered` or beyond.
    pub delivered_count: i32,
    /// Recipients that reached `read` or beyond.
    pub read_count: i32,
    pub replied_count: i32,
    pub failed_count: i32,
    pub skipped_count: i32,
    pub pending_count: i32,
    /// Recipients waiting for their local send time or the end of their quiet hours.
    pub held_count: i32,
    /// Recipients whose message bounced (a `bounced` receipt; each is `failed`).
    pub bounced_count: i32,
    /// Recipients who reported the message as spam (a `complained` receipt).
    pub complained_count: i32,
    /// Contacts its messages' links unsubscribed (once each, when its link adds the entry).
    pub unsubscribed_count: i32,
    /// Characters of the template body.
    pub message_length: i32,
    pub has_emojis: bool,
    pub has_images: bool,
    pub has_links: bool,
    /// `readCount / sentCount` (0 when nothing was sent).
    pub open_rate: f64,
    /// `bouncedCount / (sentCount + bouncedCount)`: of the messages the provider took, the
    /// share that bounced (0 when none was taken).
    pub bounce_rate: f64,
    /// Whether this is an A/B broadcast (`abTest`).
    #[serde(rename = "isABTest")]
    pub is_ab_test: bool,
    /// An A/B broadcast's test: its settings, when it ends, and the winner once picked.
    pub ab_test: Option<AbTest>,
    /// An A/B broadcast's variants (A, the broadcast's own template, first) with their
    /// counters; empty for others.
    pub variants: Vec<Variant>,
    /// The name of the segment that is the audience (`segmentId`), if one is.
    pub audience_segment: Option<String>,
    /// The subscription topic its messages belong to: a marketing broadcast skips the contacts
    /// unsubscribed from it (`topic_unsubscribed`), and its links' one-click unsubscribes from
    /// it.
    pub topic_id: Option<TopicId>,
    /// Campaign figures the service does not measure are `null`.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub target_demographic: Option<()>,
    /// An A/B broadcast's winning variant's name, once picked.
    pub variant_name: Option<String>,
    /// An A/B broadcast: whether its winner has been picked; `null` for others.
    pub winning_variant: Option<bool>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub performance_trend: Option<()>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub peak_engagement_hour: Option<()>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub avg_response_time: Option<()>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub click_rate: Option<()>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub conversion_rate: Option<()>,
    /// `unsubscribedCount / deliveredCount`, or over `sentCount` while no delivery receipt
    /// came (a channel without them); 0 when that is 0.
    pub unsubscribe_rate: f64,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub cost: Option<()>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub revenue: Option<()>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub roi: Option<()>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub trend_percentage: Option<()>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub age_group_breakdown: Option<()>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub device_breakdown: Option<()>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub location_breakdown: Option<()>,
    pub queued_at: Option<Timestamp>,
    pub started_at: Option<Timestamp>,
    pub paused_at: Option<Timestamp>,
    pub completed_at: Option<Timestamp>,
    pub cancelled_at: Option<Timestamp>,
    /// When retention deleted the recipients' rows
    /// (`PARLEY_RECIPIENT_RETENTION_DAYS` after the broadcast ended); the counts stay.
    pub recipients_purged_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(Broadcast);

fn ratio(part: i32, whole: i32) -> f64 {
    if whole <= 0 {
        0.0
    } else {
        f64::from(part) / f64::from(whole)
    }
}

impl Broadcast {
    /// Fills the figures derived from the counters.
    pub fn fill_rates(&mut self) {
        self.open_rate = ratio(self.read_count, self.sent_count);
        self.bounce_rate = ratio(self.bounced_count, self.sent_count + self.bounced_count);
        let reached = if self.delivered_count > 0 {
            self.delivered_count
        } else {
            self.sent_count
        };
        self.unsubscribe_rate = ratio(self.unsubscribed_count, reached);
    }
}

/// What a template's message is like, recorded on the broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MessageTraits {
    pub length: i32,
    pub has_emojis: bool,
    pub has_images: bool,
    pub has_links: bool,
}

impl MessageTraits {
    pub fn of(template: &Template, vars: &TemplateVariables) -> Self {
        let text = format!(
            "{} {} {}",
            template.header.as_deref().unwrap_or(""),
            template.body,
            template.footer.as_deref().unwrap_or("")
        );
        MessageTraits {
            length: template.body.chars().count() as i32,
            has_emojis: text.chars().any(is_emoji),
            has_images: vars.header_media.is_some(),
            has_links: text.contains("http://")
                || text.contains("https://")
                || vars.url.is_some()
                || template
                    .buttons
                    .0
                    .iter()
                    .any(|b| b.kind == crate::templates::ButtonType::Url),
        }
    }
}

fn is_emoji(c: char) -> bool {
    matches!(c as u32, 0x1F300..=0x1FAFF | 0x2600..=0x27BF | 0x1F000..=0x1F2FF)
}

/// Header values a broadcast may give.
pub const MAX_HEADER_VALUES: usize = 10;
/// The largest `emailVariables`, as JSON: they travel with every message.
pub const MAX_EMAIL_VARIABLES_BYTES: usize = 16 * 1024;

/// Checks the variables: they fill every `{{n}}` of the template's body, their counts, and the
/// message they render (with the contact fields at their longest) fits `channel`.
pub fn check_variables(
    template: &Template,
    channel: Channel,
    vars: &TemplateVariables,
) -> Result<(), AppError> {
    parley_types::fields::check_len("templateVariables.body", vars.body.len(), MAX_PLACEHOLDERS)?;
    parley_types::fields::check_len(
        "templateVariables.header",
        vars.header.len(),
        MAX_HEADER_VALUES,
    )?;
    let values: Vec<&str> = vars.body.iter().map(|v| v.value.as_str()).collect();
    check_rendered_length(&template.body, channel, &values, "templateVariables.body")?;
    let needed = parse_body(&template.body)
        .unwrap_or_default()
        .iter()
        .filter_map(|s| match s {
            Segment::Placeholder(Placeholder::Positional(n)) => Some(*n),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    if vars.body.len() < needed {
        return Err(AppError::validation(
            "templateVariables.body",
            "too_few",
            format!("the template uses {{{{{needed}}}}}; give at least {needed} body values"),
        ));
    }
    Ok(())
}

/// Refuses a template change that would make the message of a broadcast not yet sending (its
/// id, channel and variables in `pending`) longer than its channel takes.
pub fn check_template_change(
    template: &Template,
    pending: &[(Uuid, Channel, Option<Json<TemplateVariables>>)],
) -> Result<(), AppError> {
    let Ok(segments) = parse_body(&template.body) else {
        return Ok(());
    };
    for (broadcast, channel, vars) in pending {
        let values: Vec<&str> = vars
            .iter()
            .flat_map(|v| v.0.body.iter().map(|b| b.value.as_str()))
            .collect();
        if rendered_bound(&segments, &values) > max_message_chars(*channel) {
            return Err(AppError::validation(
                "body",
                "too_long",
                format!("broadcast {broadcast} would render it longer than {channel} takes"),
            ));
        }
    }
    Ok(())
}

/// Refuses `emailVariables` longer than [`MAX_EMAIL_VARIABLES_BYTES`] as JSON.
fn check_email_variables(
    vars: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<(), AppError> {
    let size = vars.map_or(0, |v| serde_json::to_vec(v).map_or(usize::MAX, |b| b.len()));
    if size > MAX_EMAIL_VARIABLES_BYTES {
        return Err(AppError::validation(
            "emailVariables",
            "too_long",
            format!("must be at most {MAX_EMAIL_VARIABLES_BYTES} bytes as JSON"),
        ));
    }
    Ok(())
}

/// The status a create or an update leads to (docs/api.md, Broadcasts): `isDraft` (or nothing) is a
/// draft, `sendNow` is queued, a future `scheduledAt` is scheduled.
pub fn intended_status(
    is_draft: bool,
    send_now: bool,
    scheduled_at: Option<Timestamp>,
    now: Timestamp,
) -> Result<BroadcastStatus, AppError> {
    if send_now && scheduled_at.is_some() {
        return Err(AppError::Validation(vec![
            FieldError::new(
                "sendNow",
                "conflict",
                "sendNow and scheduledAt exclude each other",
            ),
            FieldError::new(
                "scheduledAt",
                "conflict",
                "sendNow and scheduledAt exclude each other",
            ),
        ]));
    }
    if is_draft && send_now {
        return Err(AppError::validation(
            "sendNow",
            "conflict",
            "a draft is not sent; drop isDraft or sendNow",
        ));
    }
    if let Some(at) = scheduled_at
        && at <= now
    {
        return Err(AppError::validation(
            "scheduledAt",
            "out_of_range",
            "must be in the future",
        ));
    }
    Ok(if is_draft {
        BroadcastStatus::Draft
    } else if send_now {
        BroadcastStatus::Queued
    } else if scheduled_at.is_some() {
        BroadcastStatus::Scheduled
    } else {
        BroadcastStatus::Draft
    })
}

/// A broadcast's status and due time, from a create's or an update's intent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    pub status: BroadcastStatus,
    pub scheduled_at: Option<Timestamp>,
    pub local_time: Option<chrono::NaiveDateTime>,
}

/// [`intended_status`] for `sendIn: utc` (`at` must carry an offset); a local-time broadcast
/// (`contact_timezone`) is scheduled (unless a draft) to start when its wall time first comes
/// anywhere, or now if that has passed, and is refused once the wall time has passed in every
/// zone. It has no `sendNow`: its time is its point.
pub fn schedule(
    is_draft: bool,
    send_now: bool,
    at: Option<ScheduledTime>,
    send_in: SendIn,
    now: Timestamp,
) -> Result<Schedule, AppError> {
    if send_in == SendIn::Utc {
        let instant = match at {
            Some(t) => Some(t.instant.ok_or_else(|| {
                AppError::validation(
                    "scheduledAt",
                    "invalid_format",
                    "needs an offset such as Z, unless sendIn is contact_timezone",
                )
            })?),
            None => None,
        };
        let status = intended_status(is_draft, send_now, instant, now)?;
        return Ok(Schedule {
            status,
            scheduled_at: instant,
            local_time: None,
        });
    }
    if send_now {
        return Err(AppError::validation(
            "sendNow",
            "conflict",
            "a local-time broadcast goes at its scheduledAt in each zone; drop sendNow",
        ));
    }
    let Some(at) = at else {
        if is_draft {
            return Ok(Schedule {
                status: BroadcastStatus::Draft,
                scheduled_at: None,
                local_time: None,
            });
        }
        return Err(AppError::validation(
            "scheduledAt",
            "required",
            "a local-time broadcast needs the wall time to send at",
        ));
    };
    let (first, last) = wall_time_span(at.wall);
    if last <= now.0 {
        return Err(AppError::validation(
            "scheduledAt",
            "out_of_range",
            "this local time has passed in every time zone",
        ));
    }
    use chrono::SubsecRound;
    Ok(Schedule {
        status: if is_draft {
            BroadcastStatus::Draft
        } else {
            BroadcastStatus::Scheduled
        },
        scheduled_at: Some(Timestamp(first.max(now.0).trunc_subsecs(6))),
        local_time: Some(at.wall),
    })
}

fn check_quiet_hours(q: Option<&QuietHours>) -> Result<(), AppError> {
    match q {
        Some(q) => q.window("quietHours").map(|_| ()),
        None => Ok(()),
    }
}

fn one_audience() -> AppError {
    AppError::validation(
        "segmentId",
        "invalid_value",
        "give contactIds or segmentId, not both",
    )
}

/// Removes repeated contacts, keeping the first of each, and checks the audience's size.
pub fn audience(ids: Vec<Uuid>) -> Result<Vec<Uuid>, AppError> {
    if ids.is_empty() {
        return Err(AppError::validation(
            "contactIds",
            "required",
            "at least one contact, or a segmentId",
        ));
    }
    parley_types::fields::check_len("contactIds", ids.len(), MAX_AUDIENCE)?;
    Ok(parley_types::ids::dedup(ids))
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "broadcastName": "November newsletter", "templateId": "0193a1f2-7c4e-7d2a-9b1c-2f3e4d5c6b7a",
    "contactIds": ["0193a1f2-7c4e-7d2a-9b1c-2f3e4d5c6b7b"], "description": "Monthly news",
    "isDraft": true, "templateVariables": {"body": [{"type": "text", "value": "A-1042"}]}
})))]
pub struct CreateBroadcast {
    pub broadcast_name: Name,
    /// Contacts of the organization, at most 1,000,000; repeats count once. Either this or
    /// `segmentId`.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 1_000_000))]
    pub contact_ids: Vec<Uuid>,
    /// A segment of the organization: the contacts it holds when sending starts.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub segment_id: Option<Uuid>,
    /// A template of the organization; the broadcast takes its channel.
    pub template_id: Uuid,
    /// A subscription topic of the organization: the contacts unsubscribed from it are
    /// skipped when its messages are marketing.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub topic_id: Option<TopicId>,
    pub description: Option<Text>,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub email_variables: Option<serde_json::Map<String, serde_json::Value>>,
    pub is_draft: Option<bool>,
    /// A future time to send at; with `sendIn: contact_timezone`, the wall time (date and time
    /// of day as written) to send at in each contact's zone.
    pub scheduled_at: Option<ScheduledTime>,
    pub send_now: Option<bool>,
    /// `utc` (the default) or `contact_timezone`: a local-time broadcast.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub send_in: Option<SendIn>,
    /// For a local-time broadcast: `send_now` (the default) or `skip` for contacts whose time
    /// has already passed.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub past_time_policy: Option<PastTimePolicy>,
    /// Replaces the organization's quiet hours for this broadcast (`start` equal to `end`:
    /// none).
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub quiet_hours: Option<QuietHours>,
    /// `high` for transactional messages, sent ahead of bulk work (`normal`, the default),
    /// and exempt from quiet hours and frequency caps.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub priority: Option<SendPriority>,
    pub sender_email_address_id: Option<ShortText>,
    pub subject_override: Option<ShortText>,
    pub template_variables: Option<TemplateVariables>,
    /// Makes this an A/B broadcast: `templateId` and `templateVariables` are variant A, and
    /// `abTest.variants` the others.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub ab_test: Option<AbTestRequest>,
}

/// A new broadcast, with what is written beside it.
#[derive(Debug)]
pub struct NewBroadcast {
    pub broadcast: Broadcast,
    /// Its contacts, repeats removed (none for a segment).
    pub audience: Vec<Uuid>,
    /// An A/B broadcast's settings and variants.
    pub ab: Option<(AbSettings, Vec<VariantRow>)>,
}

/// Checks an A/B broadcast's variants against their templates (`variant_templates`, in the
/// order of `abTest.variants`): on the broadcast's channel, with the variables they need.
fn check_variants(
    ab: &AbTestRequest,
    channel: crate::Channel,
    variant_templates: &[Template],
) -> Result<(), AppError> {
    for (i, (v, t)) in ab.variants.iter().zip(variant_templates).enumerate() {
        let field = format!("abTest.variants[{i}]");
        if t.channel != channel {
            return Err(AppError::validation(
                format!("{field}.templateId"),
                "invalid_value",
                format!("must be a template on the broadcast's channel ({channel})"),
            ));
        }
        let vars = v.template_variables.clone().unwrap_or_default();
        check_variables(t, channel, &vars).map_err(|e| e.under(&format!("{field}.")))?;
    }
    Ok(())
}

impl CreateBroadcast {
    /// The new broadcast and its audience (repeats removed), for `template` (and an A/B
    /// broadcast's `variant_templates`, in the order of `abTest.variants`).
    pub fn into_broadcast(
        self,
        organization_id: Uuid,
        template: &Template,
        variant_templates: &[Template],
        now: Timestamp,
    ) -> Result<NewBroadcast, AppError> {
        let is_draft = self.is_draft.unwrap_or(false);
        let send_now = self.send_now.unwrap_or(false);
        let audience = match self.segment_id {
            Some(_) if !self.contact_ids.is_empty() => return Err(one_audience()),
            Some(_) => Vec::new(),
            None => audience(self.contact_ids)?,
        };
        let send_in = self.send_in.unwrap_or(SendIn::Utc);
        let plan = schedule(is_draft, send_now, self.scheduled_at, send_in, now)?;
        let status = plan.status;
        check_quiet_hours(self.quiet_hours.as_ref())?;
        let ab = match &self.ab_test {
            Some(_) if send_in == SendIn::ContactTimezone => {
                return Err(AppError::validation(
                    "abTest",
                    "conflict",
                    "an A/B broadcast is sent in UTC time; drop sendIn contact_timezone",
                ));
            }
            Some(ab) => {
                let rows = ab.rows(template.id)?;
                check_variants(ab, template.channel, variant_templates)?;
                Some(rows)
            }
            None => None,
        };
        let ab_settings = ab.as_ref().map(|(s, _)| *s);
        let vars = self.template_variables.unwrap_or_default();
        check_variables(template, template.channel, &vars)?;
        check_email_variables(self.email_variables.as_ref())?;
        let traits = MessageTraits::of(template, &vars);
        let b = Broadcast {
            id: parley_types::ids::new_id(),
            organization_id,
            broadcast_name: self.broadcast_name.into(),
            description: self.description.map(Into::into),
            template_id: template.id,
            channel: template.channel,
            template_channel: template.channel.as_str().to_owned(),
            status,
            is_draft: status == BroadcastStatus::Draft,
            send_now: status == BroadcastStatus::Queued,
            priority: self.priority.unwrap_or(SendPriority::Normal),
            scheduled_at: plan.scheduled_at,
            send_in,
            local_time: plan.local_time,
            past_time_policy: self.past_time_policy.unwrap_or(PastTimePolicy::SendNow),
            quiet_hours: self.quiet_hours.map(Json),
            sender_email_address_id: self.sender_email_address_id.map(Into::into),
            subject_override: self.subject_override.map(Into::into),
            template_variables: Some(Json(vars)),
            email_variables: self
                .email_variables
                .map(|m| Json(serde_json::Value::Object(m))),
            error_message: None,
            audience_size: audience.len() as i32,
            segment_id: self.segment_id,
            total_recipients: 0,
            sent_count: 0,
            delivered_count: 0,
            read_count: 0,
            replied_count: 0,
            failed_count: 0,
            skipped_count: 0,
            pending_count: 0,
            held_count: 0,
            bounced_count: 0,
            complained_count: 0,
            unsubscribed_count: 0,
            message_length: traits.length,
            has_emojis: traits.has_emojis,
            has_images: traits.has_images,
            has_links: traits.has_links,
            open_rate: 0.0,
            bounce_rate: 0.0,
            is_ab_test: ab.is_some(),
            ab_test: ab_settings.map(|settings| AbTest {
                test_percent: settings.test_percent,
                winner_metric: settings.winner_metric,
                wait_minutes: settings.wait_minutes,
                test_ends_at: None,
                winner: None,
                picked_at: None,
                picked_by: None,
            }),
            variants: Vec::new(),
            audience_segment: None,
            topic_id: self.topic_id,
            target_demographic: None,
            variant_name: None,
            winning_variant: ab.as_ref().map(|_| false),
            performance_trend: None,
            peak_engagement_hour: None,
            avg_response_time: None,
            click_rate: None,
            conversion_rate: None,
            unsubscribe_rate: 0.0,
            cost: None,
            revenue: None,
            roi: None,
            trend_percentage: None,
            age_group_breakdown: None,
            device_breakdown: None,
            location_breakdown: None,
            queued_at: (status == BroadcastStatus::Queued).then_some(now),
            started_at: None,
            paused_at: None,
            completed_at: None,
            cancelled_at: None,
            recipients_purged_at: None,
            created_at: now,
            updated_at: now,
        };
        Ok(NewBroadcast {
            broadcast: b,
            audience,
            ab,
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"description": "Sent on Monday", "sendNow": true})))]
pub struct UpdateBroadcast {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub broadcast_name: Option<Name>,
    /// Replaces the audience.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, min_items = 1, max_items = 1_000_000)
    )]
    pub contact_ids: Option<Vec<Uuid>>,
    /// Makes a segment the audience instead (the contacts it holds when sending starts).
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub segment_id: Option<Uuid>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<Text>>,
    /// The subscription topic its messages belong to; `null`: none.
    #[serde(default, deserialize_with = "nullable")]
    pub topic_id: Option<Option<TopicId>>,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub email_variables: Option<Option<serde_json::Map<String, serde_json::Value>>>,
    /// `true` turns a scheduled broadcast back into a draft.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_draft: Option<bool>,
    /// A future time schedules the broadcast (with `sendIn: contact_timezone`, a wall time);
    /// `null` unschedules it (back to draft).
    #[serde(default, deserialize_with = "nullable")]
    pub scheduled_at: Option<Option<ScheduledTime>>,
    /// Changing it reads `scheduledAt` (given, or the one the broadcast has) anew.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub send_in: Option<SendIn>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub past_time_policy: Option<PastTimePolicy>,
    /// This broadcast's quiet hours; `null`: the organization's.
    #[serde(default, deserialize_with = "nullable")]
    pub quiet_hours: Option<Option<QuietHours>>,
    /// `true` sends the broadcast now.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub send_now: Option<bool>,
    #[serde(default, deserialize_with = "nullable")]
    pub sender_email_address_id: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "nullable")]
    pub subject_override: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "nullable")]
    pub template_variables: Option<Option<TemplateVariables>>,
}

impl UpdateBroadcast {
    /// Applies the patch to a draft or scheduled broadcast; returns the new audience, if any.
    pub fn apply(
        self,
        b: &mut Broadcast,
        template: &Template,
        now: Timestamp,
    ) -> Result<Option<Vec<Uuid>>, AppError> {
        if self.segment_id.is_some() && self.contact_ids.is_some() {
            return Err(one_audience());
        }
        let audience = self.contact_ids.map(audience).transpose()?;
        if audience.is_some() {
            b.segment_id = None;
        }
        if let Some(segment) = self.segment_id {
            b.segment_id = Some(segment);
            b.audience_size = 0;
        }
        if let Some(v) = self.broadcast_name {
            b.broadcast_name = v.into();
        }
        if let Some(v) = self.description {
            b.description = v.map(Into::into);
        }
        if let Some(v) = self.topic_id {
            b.topic_id = v;
        }
        if let Some(v) = self.email_variables {
            check_email_variables(v.as_ref())?;
            b.email_variables = v.map(|m| Json(serde_json::Value::Object(m)));
        }
        if let Some(v) = self.sender_email_address_id {
            b.sender_email_address_id = v.map(Into::into);
        }
        if let Some(v) = self.subject_override {
            b.subject_override = v.map(Into::into);
        }
        if let Some(v) = self.template_variables {
            b.template_variables = v.map(Json);
        }
        if let Some(v) = self.quiet_hours {
            check_quiet_hours(v.as_ref())?;
            b.quiet_hours = v.map(Json);
        }
        if let Some(v) = self.past_time_policy {
            b.past_time_policy = v;
        }
        let vars = b
            .template_variables
            .as_ref()
            .map(|j| j.0.clone())
            .unwrap_or_default();
        check_variables(template, b.channel, &vars)?;
        let traits = MessageTraits::of(template, &vars);
        (b.message_length, b.has_emojis, b.has_images, b.has_links) = (
            traits.length,
            traits.has_emojis,
            traits.has_images,
            traits.has_links,
        );

        let send_now = self.send_now == Some(true);
        let to_draft = self.is_draft == Some(true);
        // What the broadcast has: the wall time of a local-time one, else the instant.
        let kept = match b.local_time {
            Some(wall) => Some(ScheduledTime {
                instant: None,
                wall,
            }),
            None => b.scheduled_at.map(ScheduledTime::from),
        };
        let scheduled_at = match self.scheduled_at {
            Some(v) => v,
            None if send_now || to_draft => None,
            None => kept,
        };
        let send_in = self.send_in.unwrap_or(b.send_in);
        if b.is_ab_test && send_in == SendIn::ContactTimezone {
            return Err(AppError::validation(
                "sendIn",
                "conflict",
                "an A/B broadcast is sent in UTC time",
            ));
        }
        // The patch's own intent decides; without one, the status stays.
        let intent_given = send_now
            || to_draft
            || self.scheduled_at.is_some()
            || (self.send_in.is_some() && send_in != b.send_in);
        if intent_given {
            let plan = schedule(to_draft, send_now, scheduled_at, send_in, now)?;
            b.status = plan.status;
            b.send_in = send_in;
            b.scheduled_at = plan.scheduled_at;
            b.local_time = plan.local_time;
        }
        b.is_draft = b.status == BroadcastStatus::Draft;
        b.send_now = b.status == BroadcastStatus::Queued;
        if b.status == BroadcastStatus::Queued {
            b.queued_at = Some(now);
        }
        b.updated_at = now;
        Ok(audience)
    }
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct BroadcastRecipient {
    pub id: Uuid,
    pub broadcast_id: Uuid,
    /// The contact addressed; it may have been deleted since.
    pub contact_id: Uuid,
    /// The contact, unless it was deleted.
    #[sqlx(skip)]
    pub contact: Option<Contact>,
    pub status: RecipientStatus,
    /// The variant sent, in an A/B broadcast.
    pub variant: Option<String>,
    pub external_message_id: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// While `held`: when it goes to the queue (its local send time, or the end of its quiet
    /// hours).
    pub hold_until: Option<Timestamp>,
    pub sent_at: Option<Timestamp>,
    pub delivered_at: Option<Timestamp>,
    pub read_at: Option<Timestamp>,
    pub replied_at: Option<Timestamp>,
    pub failed_at: Option<Timestamp>,
    /// A `bounced` receipt's kind, once one came.
    pub bounce_type: Option<BounceType>,
    pub bounced_at: Option<Timestamp>,
    /// When the recipient reported the message as spam (a `complained` receipt).
    pub complained_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(BroadcastRecipient);

/// A message a broadcast sent (or was to send) a contact: its recipient record, with the
/// broadcast's name and channel.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContactMessage {
    /// The recipient record's id.
    pub id: Uuid,
    pub broadcast_id: Uuid,
    pub broadcast_name: String,
    pub channel: Channel,
    pub status: RecipientStatus,
    /// The variant sent, in an A/B broadcast.
    pub variant: Option<String>,
    /// The address it went to, as the contact had it then (`null` before it is sent, and
    /// after the contact's erasure).
    pub sent_to: Option<String>,
    pub external_message_id: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// While `held`: when it goes to the queue (its local send time, or the end of its quiet
    /// hours).
    pub hold_until: Option<Timestamp>,
    pub sent_at: Option<Timestamp>,
    pub delivered_at: Option<Timestamp>,
    pub read_at: Option<Timestamp>,
    pub replied_at: Option<Timestamp>,
    pub failed_at: Option<Timestamp>,
    pub bounce_type: Option<BounceType>,
    pub bounced_at: Option<Timestamp>,
    pub complained_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(ContactMessage);

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct BroadcastFilter {
    pub status: Option<BroadcastStatus>,
    pub channel: Option<Channel>,
    pub template_id: Option<Uuid>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct RecipientFilter {
    pub status: Option<RecipientStatus>,
}

parley_types::text_enum!(
    /// What a delivery receipt reports: a step of the message's way (`delivered`, `read`,
    /// `replied`, `failed`), or what the ledger follows (`bounced` with its `bounceType`,
    /// `complained`: docs/api.md, Suppressions).
    ReceiptStatus {
        Delivered = "delivered",
        Read = "read",
        Replied = "replied",
        Failed = "failed",
        Bounced = "bounced",
        Complained = "complained",
    }
);

impl ReceiptStatus {
    /// The recipient status it moves a recipient to, for the steps of a message's way.
    pub fn step(self) -> Option<RecipientStatus> {
        match self {
            ReceiptStatus::Delivered => Some(RecipientStatus::Delivered),
            ReceiptStatus::Read => Some(RecipientStatus::Read),
            ReceiptStatus::Replied => Some(RecipientStatus::Replied),
            ReceiptStatus::Failed => Some(RecipientStatus::Failed),
            ReceiptStatus::Bounced | ReceiptStatus::Complained => None,
        }
    }

    /// The order one recipient's receipts of a call are applied in, whatever their order of
    /// arrival: the steps up the funnel, then `failed`, then a bounce (which may end a
    /// delivered message), then a complaint.
    pub fn order(self) -> u8 {
        match self {
            ReceiptStatus::Delivered => 1,
            ReceiptStatus::Read => 2,
            ReceiptStatus::Replied => 3,
            ReceiptStatus::Failed => 4,
            ReceiptStatus::Bounced => 5,
            ReceiptStatus::Complained => 6,
        }
    }
}

impl RecipientStatus {
    /// Whether a bounce applies to a recipient in this status: one sent (its provider took
    /// it, and `delivered` may have been only a relay's acceptance) or failed; a message read
    /// or replied to did not bounce.
    pub fn may_bounce(self) -> bool {
        use RecipientStatus::*;
        matches!(self, Pending | Sent | Delivered | Failed)
    }
}

/// One delivery receipt from a channel's provider.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ReceiptIn {
    /// The `messageId` the provider answered the send with.
    pub message_id: ShortText,
    pub status: ReceiptStatus,
    /// A `bounced` receipt's kind; required with `bounced`, refused with any other status.
    pub bounce_type: Option<BounceType>,
    /// When it happened; now when absent.
    pub at: Option<Timestamp>,
    pub error_code: Option<ShortText>,
}

impl ReceiptIn {
    /// 422 unless `bounceType` comes exactly with `bounced`; `index` is its place in the call.
    pub fn check(&self, index: usize) -> Result<(), FieldError> {
        match (self.status, self.bounce_type) {
            (ReceiptStatus::Bounced, None) => Err(FieldError::new(
                format!("body[{index}].bounceType"),
                "required",
                "a bounced receipt needs its bounceType (hard or soft)",
            )),
            (ReceiptStatus::Bounced, Some(_)) | (_, None) => Ok(()),
            (_, Some(_)) => Err(FieldError::new(
                format!("body[{index}].bounceType"),
                "invalid_value",
                "bounceType goes only with the status bounced",
            )),
        }
    }
}

/// `data` of a receipts call.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReceiptsApplied {
    /// Receipts in the request.
    pub received: usize,
    /// Receipts that changed a recipient: moved it forward, or marked its bounce or
    /// complaint (the first of each per message).
    pub applied: usize,
    /// Receipts for messages not recorded yet (a receipt can beat the worker's write of the
    /// message id): kept, and applied within a second once the id is recorded; kept for ten
    /// minutes.
    /// The rest were late (a status never moves backwards).
    pub deferred: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use BroadcastStatus::*;

    fn at(offset_secs: i64) -> Timestamp {
        Timestamp(chrono::Utc::now() + chrono::Duration::seconds(offset_secs))
    }

    #[test]
    fn a_bounce_ends_a_message_not_read_and_its_kind_goes_with_bounced_only() {
        use RecipientStatus as R;
        for (status, bounces) in [
            (R::Pending, true),
            (R::Sent, true),
            (R::Delivered, true),
            (R::Failed, true),
            (R::Read, false),
            (R::Replied, false),
            (R::Skipped, false),
            (R::Held, false),
        ] {
            assert_eq!(status.may_bounce(), bounces, "{status}");
        }
        let receipt = |status, bounce_type| ReceiptIn {
            message_id: serde_json::from_value(serde_json::json!("m")).unwrap(),
            status,
            bounce_type,
            at: None,
            error_code: None,
        };
        assert!(
            receipt(ReceiptStatus::Bounced, Some(BounceType::Soft))
                .check(0)
                .is_ok()
        );
        assert!(receipt(ReceiptStatus::Complained, None).check(0).is_ok());
        let missing = receipt(ReceiptStatus::Bounced, None).check(3).unwrap_err();
        assert_eq!(missing.field, "body[3].bounceType");
        assert!(
            receipt(ReceiptStatus::Read, Some(BounceType::Hard))
                .check(0)
                .is_err()
        );
        let steps: Vec<u8> = ReceiptStatus::ALL.iter().map(|s| s.order()).collect();
        assert!(
            steps.windows(2).all(|w| w[0] < w[1]),
            "applied in a fixed order"
        );
    }

    #[test]
    fn create_flags_decide_the_first_status() {
        let now = at(0);
        assert_eq!(intended_status(true, false, None, now).unwrap(), Draft);
        assert_eq!(intended_status(false, false, None, now).unwrap(), Draft);
        assert_eq!(intended_status(false, true, None, now).unwrap(), Queued);
        assert_eq!(
            intended_status(false, false, Some(at(60)), now).unwrap(),
            Scheduled
        );
        assert_eq!(
            intended_status(true, false, Some(at(60)), now).unwrap(),
            Draft
        );
        assert!(intended_status(false, true, Some(at(60)), now).is_err());
        assert!(intended_status(false, false, Some(at(-1)), now).is_err());
        assert!(intended_status(true, true, None, now).is_err());
    }

    #[test]
    fn actions_are_allowed_from_their_states_only() {
        let all = BroadcastStatus::ALL;
        let allowed = |a: Action| all.iter().filter(|s| a.allowed_from().contains(s)).count();
        assert_eq!(allowed(Action::Delete), 1);
        assert_eq!(allowed(Action::Resume), 1);
        for terminal in [Completed, Failed, Cancelled] {
            for a in [
                Action::Update,
                Action::Delete,
                Action::Pause,
                Action::Resume,
                Action::Cancel,
            ] {
                assert!(
                    !a.allowed_from().contains(&terminal),
                    "{a:?} from {terminal}"
                );
            }
        }
    }

    #[test]
    fn recipients_only_move_forward() {
        use RecipientStatus::*;
        assert!(Sent.may_become(Delivered));
        assert!(Sent.may_become(Read), "read may arrive before delivered");
        assert!(!Read.may_become(Delivered));
        assert!(Delivered.may_become(Replied));
        assert!(!Replied.may_become(Read));
        assert!(Sent.may_become(Failed));
        assert!(!Delivered.may_become(Failed));
        assert!(!Pending.may_become(Delivered));
        assert!(!Skipped.may_become(Delivered));
    }
}

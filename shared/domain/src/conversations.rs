//! Conversations with a contact on a channel: their messages, assignees, teams, tags, handover
//! to a human agent, and SLA state.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::categories::ConversationCategory;
use crate::contacts::Contact;
use crate::files::{File, FileType};
use crate::sla::SlaState;
use crate::tags::Tag;
use crate::teams::TeamSummary;
use crate::users::UserSummary;
use crate::webhooks::EventName;
use crate::{Channel, Priority};
use parley_types::error::AppError;
use parley_types::fields::{
    Currency, Label, LongText, Money, ShortText, Text, non_null, nullable, optional_count,
};
use parley_types::time::Timestamp;

parley_types::text_enum!(
    /// `active`, `pending` (waiting on the customer) and `snoozed` (until `snoozeUntil`) move
    /// freely between each other; `closed` is final.
    ConversationStatus {
        Active = "active",
        Pending = "pending",
        Snoozed = "snoozed",
        Closed = "closed",
    }
);

parley_types::text_enum!(
    /// Where a handover to a human agent stands.
    HandoverStatus {
        None = "none",
        Requested = "requested",
        Accepted = "accepted",
        Completed = "completed",
        TimedOut = "timed_out",
    }
);

parley_types::text_enum!(
    HandoverReason {
        GuestRequest = "guest_request",
        AiEscalation = "ai_escalation",
        AgentRequest = "agent_request",
        Sentiment = "sentiment",
        Other = "other",
    }
);

parley_types::text_enum!(
    HandoverRequestedBy {
        Guest = "guest",
        Ai = "ai",
        Agent = "agent",
        System = "system",
    }
);

parley_types::text_enum!(
    /// What a handover call does: `request` (from `none`, `completed` or `timed_out`),
    /// `accept` or `timeout` (from `requested`), `complete` (from `accepted`).
    HandoverAction {
        Request = "request",
        Accept = "accept",
        Complete = "complete",
        Timeout = "timeout",
    }
);

parley_types::text_enum!(
    MessageType {
        Text = "text",
        Image = "image",
        Video = "video",
        Audio = "audio",
        File = "file",
        Template = "template",
        Location = "location",
    }
);

parley_types::text_enum!(
    /// `contact`: an inbound message from the customer; `user` (a human agent), `ai` and
    /// `system`: outbound.
    SenderType {
        Contact = "contact",
        User = "user",
        Ai = "ai",
        System = "system",
    }
);

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    pub id: Uuid,
    pub organization_id: Uuid,
    /// 1, 2, 3, ... per organization.
    pub reference_number: i64,
    pub contact_id: Uuid,
    pub category_id: Option<Uuid>,
    pub integration_id: Option<String>,
    pub channel: Channel,
    pub status: ConversationStatus,
    pub priority: Priority,
    pub subject: Option<String>,
    pub summary: Option<String>,
    pub language: Option<String>,
    pub channel_data: Option<String>,
    pub guest_mood: Option<String>,
    #[serde(with = "rust_decimal::serde::float_option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub deal_value: Option<rust_decimal::Decimal>,
    pub deal_currency: Option<String>,
    pub deal_description: Option<String>,
    pub deal_closed: bool,
    pub is_deal_related: bool,
    pub ai_handled: bool,
    pub ai_paused_at: Option<Timestamp>,
    pub is_read: bool,
    pub is_spam: bool,
    pub is_starred: bool,
    pub handover_status: HandoverStatus,
    pub handover_reason: Option<HandoverReason>,
    pub handover_requested_by: Option<HandoverRequestedBy>,
    pub handover_notes: Option<String>,
    pub handover_requested_at: Option<Timestamp>,
    pub handover_accepted_at: Option<Timestamp>,
    pub handover_completed_at: Option<Timestamp>,
    pub handover_timed_out_at: Option<Timestamp>,
    pub estimated_wait_seconds: Option<i32>,
    pub handover_queue_position: Option<i32>,
    pub message_count: i32,
    pub last_message_at: Option<Timestamp>,
    pub last_customer_message_at: Option<Timestamp>,
    pub snooze_until: Option<Timestamp>,
    pub snoozed_at: Option<Timestamp>,
    pub closed_at: Option<Timestamp>,
    pub category: Option<ConversationCategory>,
    pub contact: Option<Contact>,
    pub assignees: Vec<ConversationAssignee>,
    pub assigned_teams: Vec<ConversationTeam>,
    /// The latest messages (at most 50), oldest first; all of them at
    /// `GET /conversations/{id}/messages`.
    pub messages: Vec<Message>,
    pub tags: Vec<Tag>,
    pub sla_state: Option<SlaState>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(Conversation);

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConversationAssignee {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub user_id: Uuid,
    pub user: Option<UserSummary>,
    pub assigned_at: Timestamp,
    /// The user who assigned, when the request named one.
    pub assigned_by: Option<Uuid>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConversationTeam {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub team_id: Uuid,
    pub team: Option<TeamSummary>,
    pub assigned_at: Timestamp,
    pub assigned_by: Option<Uuid>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub content: Option<String>,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub sender_id: Option<Uuid>,
    pub sender_type: SenderType,
    pub external_id: Option<String>,
    pub email_message_id: Option<String>,
    pub source_node_id: Option<String>,
    pub suggested_replies: Option<String>,
    pub should_request_feedback: bool,
    pub template_context: Vec<i32>,
    pub attachments: Vec<MessageAttachment>,
    pub delivered_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(Message);

impl Message {
    pub fn is_inbound(&self) -> bool {
        self.sender_type == SenderType::Contact
    }

    /// `message.received` for a customer's message, `message.sent` for any other.
    pub fn event(&self) -> EventName {
        if self.is_inbound() {
            EventName::MessageReceived
        } else {
            EventName::MessageSent
        }
    }
}

impl Conversation {
    /// A closed conversation takes no more messages; the customer starts a new one.
    pub fn check_open(&self) -> Result<(), AppError> {
        if self.status == ConversationStatus::Closed {
            return Err(AppError::invalid_state(
                "the conversation is closed; start a new one",
            ));
        }
        Ok(())
    }

    /// A customer's message wakes a pending or snoozed conversation; returns whether it did.
    pub fn wake_on(&mut self, message: &Message, now: Timestamp) -> bool {
        let asleep = matches!(
            self.status,
            ConversationStatus::Pending | ConversationStatus::Snoozed
        );
        if !(message.is_inbound() && asleep) {
            return false;
        }
        self.status = ConversationStatus::Active;
        self.snooze_until = None;
        self.snoozed_at = None;
        self.updated_at = now;
        true
    }
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MessageAttachment {
    pub id: Uuid,
    pub message_id: Uuid,
    pub file_id: Uuid,
    pub file: Option<File>,
    #[serde(rename = "type")]
    pub kind: FileType,
    pub caption: Option<String>,
    pub external_media_id: Option<String>,
    pub thumbnail_url: Option<String>,
    pub duration: Option<i32>,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: sqlx::types::Json<serde_json::Value>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Fields a conversation takes at creation and in updates alike.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConversationDetails {
    pub subject: Option<ShortText>,
    pub summary: Option<Text>,
    pub language: Option<Label>,
    pub channel_data: Option<Text>,
    pub guest_mood: Option<Label>,
    pub deal_value: Option<Money>,
    pub deal_currency: Option<Currency>,
    pub deal_description: Option<Text>,
    pub is_deal_related: Option<bool>,
    pub ai_handled: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "contactId": "0194f2a0-7c1e-7000-8000-000000000001", "channel": "messaging_a",
    "subject": "Where is my order?", "priority": "high",
    "message": {"content": "Hello, my order has not arrived."}
})))]
pub struct CreateConversation {
    /// A contact of the organization.
    pub contact_id: Uuid,
    pub channel: Channel,
    pub priority: Option<Priority>,
    /// A conversation category of the organization.
    pub category_id: Option<Uuid>,
    pub integration_id: Option<Label>,
    #[serde(flatten)]
    pub details: ConversationDetails,
    #[cfg_attr(feature = "openapi", schema(max_items = 50))]
    pub tag_ids: Option<Vec<Uuid>>,
    /// The customer's first message, if the conversation starts with one.
    pub message: Option<CreateMessage>,
}

impl CreateConversation {
    pub fn into_conversation(
        self,
        organization_id: Uuid,
        reference_number: i64,
        now: Timestamp,
    ) -> Conversation {
        let d = self.details;
        Conversation {
            id: parley_types::ids::new_id(),
            organization_id,
            reference_number,
            contact_id: self.contact_id,
            category_id: self.category_id,
            integration_id: self.integration_id.map(Into::into),
            channel: self.channel,
            status: ConversationStatus::Active,
            priority: self.priority.unwrap_or(Priority::Medium),
            subject: d.subject.map(Into::into),
            summary: d.summary.map(Into::into),
            language: d.language.map(Into::into),
            channel_data: d.channel_data.map(Into::into),
            guest_mood: d.guest_mood.map(Into::into),
            deal_value: d.deal_value.map(Money::get),
            deal_currency: d.deal_currency.map(Into::into),
            deal_description: d.deal_description.map(Into::into),
            deal_closed: false,
            is_deal_related: d.is_deal_related.unwrap_or(false),
            ai_handled: d.ai_handled.unwrap_or(false),
            ai_paused_at: None,
            is_read: false,
            is_spam: false,
            is_starred: false,
            handover_status: HandoverStatus::None,
            handover_reason: None,
            handover_requested_by: None,
            handover_notes: None,
            handover_requested_at: None,
            handover_accepted_at: None,
            handover_completed_at: None,
            handover_timed_out_at: None,
            estimated_wait_seconds: None,
            handover_queue_position: None,
            message_count: 0,
            last_message_at: None,
            last_customer_message_at: None,
            snooze_until: None,
            snoozed_at: None,
            closed_at: None,
            category: None,
            contact: None,
            assignees: Vec::new(),
            assigned_teams: Vec::new(),
            messages: Vec::new(),
            tags: Vec::new(),
            sla_state: None,
            created_at: now,
            updated_at: now,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"status": "snoozed", "snoozeUntil": "2026-11-24T09:00:00.000Z", "isStarred": true})))]
pub struct UpdateConversation {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub status: Option<ConversationStatus>,
    /// Required with `status: snoozed`, in the future.
    #[serde(default, deserialize_with = "nullable")]
    pub snooze_until: Option<Option<Timestamp>>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub priority: Option<Priority>,
    #[serde(default, deserialize_with = "nullable")]
    pub category_id: Option<Option<Uuid>>,
    #[serde(default, deserialize_with = "nullable")]
    pub subject: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "nullable")]
    pub summary: Option<Option<Text>>,
    #[serde(default, deserialize_with = "nullable")]
    pub language: Option<Option<Label>>,
    #[serde(default, deserialize_with = "nullable")]
    pub guest_mood: Option<Option<Label>>,
    #[serde(default, deserialize_with = "nullable")]
    pub deal_value: Option<Option<Money>>,
    #[serde(default, deserialize_with = "nullable")]
    pub deal_currency: Option<Option<Currency>>,
    #[serde(default, deserialize_with = "nullable")]
    pub deal_description: Option<Option<Text>>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub deal_closed: Option<bool>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_deal_related: Option<bool>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub ai_handled: Option<bool>,
    /// `true` pauses the AI (sets `aiPausedAt`), `false` resumes it.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub ai_paused: Option<bool>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_read: Option<bool>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_spam: Option<bool>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_starred: Option<bool>,
    /// Replaces the conversation's tags.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_items = 50))]
    pub tag_ids: Option<Vec<Uuid>>,
}

/// What an update changed that others care about.
#[derive(Debug, Default, PartialEq)]
pub struct ConversationChange {
    /// The conversation was closed by this update.
    pub closed: bool,
    pub priority_changed: bool,
    pub tag_ids: Option<Vec<Uuid>>,
}

impl UpdateConversation {
    pub fn apply(
        self,
        c: &mut Conversation,
        now: Timestamp,
    ) -> Result<ConversationChange, AppError> {
        let mut change = ConversationChange {
            tag_ids: self.tag_ids,
            ..Default::default()
        };
        if let Some(status) = self.status
            && status != c.status
        {
            if c.status == ConversationStatus::Closed {
                return Err(AppError::invalid_state(
                    "a closed conversation stays closed",
                ));
            }
            c.status = status;
            match status {
                ConversationStatus::Snoozed => c.snoozed_at = Some(now),
                ConversationStatus::Closed => {
                    c.closed_at = Some(now);
                    change.closed = true;
                }
                _ => {}
            }
        }
        if let Some(until) = self.snooze_until {
            c.snooze_until = until;
        }
        if c.status == ConversationStatus::Snoozed {
            match c.snooze_until {
                Some(until) if until > now => {}
                _ => {
                    return Err(AppError::validation(
                        "snoozeUntil",
                        "invalid_value",
                        "a snoozed conversation needs a snoozeUntil in the future",
                    ));
                }
            }
        } else {
            c.snooze_until = None;
            c.snoozed_at = None;
        }
        if let Some(p) = self.priority {
            change.priority_changed = p != c.priority;
            c.priority = p;
        }
        if let Some(v) = self.category_id {
            c.category_id = v;
        }
        fn opt<F: Into<String>>(t: &mut Option<String>, v: Option<Option<F>>) {
            if let Some(v) = v {
                *t = v.map(Into::into);
            }
        }
        opt(&mut c.subject, self.subject);
        opt(&mut c.summary, self.summary);
        opt(&mut c.language, self.language);
        opt(&mut c.guest_mood, self.guest_mood);
        opt(&mut c.deal_currency, self.deal_currency);
        opt(&mut c.deal_description, self.deal_description);
        if let Some(v) = self.deal_value {
            c.deal_value = v.map(Money::get);
        }
        c.deal_closed = self.deal_closed.unwrap_or(c.deal_closed);
        c.is_deal_related = self.is_deal_related.unwrap_or(c.is_deal_related);
        c.ai_handled = self.ai_handled.unwrap_or(c.ai_handled);
        match self.ai_paused {
            Some(true) if c.ai_paused_at.is_none() => c.ai_paused_at = Some(now),
            Some(false) => c.ai_paused_at = None,
            _ => {}
        }
        c.is_read = self.is_read.unwrap_or(c.is_read);
        c.is_spam = self.is_spam.unwrap_or(c.is_spam);
        c.is_starred = self.is_starred.unwrap_or(c.is_starred);
        c.updated_at = now;
        Ok(change)
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct ConversationFilter {
    pub status: Option<ConversationStatus>,
    pub channel: Option<Channel>,
    pub priority: Option<Priority>,
    pub contact_id: Option<Uuid>,
    /// Conversations assigned to this user.
    pub assignee_id: Option<Uuid>,
    /// Conversations assigned to this team.
    pub team_id: Option<Uuid>,
    /// A tag id or a tag name (without case).
    pub tag: Option<ShortText>,
    pub category_id: Option<Uuid>,
    pub is_starred: Option<bool>,
    pub handover_status: Option<HandoverStatus>,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"userIds": ["0194f2a0-7c1e-7000-8000-000000000002"]})))]
pub struct AssignUsers {
    /// Users of the organization; already assigned ones are left as they are.
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 50))]
    pub user_ids: Vec<Uuid>,
    /// The user who assigns them.
    pub assigned_by: Option<Uuid>,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"teamIds": ["0194f2a0-7c1e-7000-8000-000000000003"]})))]
pub struct AssignTeams {
    /// Teams of the organization; already assigned ones are left as they are.
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 50))]
    pub team_ids: Vec<Uuid>,
    pub assigned_by: Option<Uuid>,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NewAttachment {
    /// A file of the organization.
    pub file_id: Uuid,
    /// Defaults to the file's type.
    #[serde(rename = "type")]
    pub kind: Option<FileType>,
    pub caption: Option<Text>,
    pub external_media_id: Option<Label>,
    #[serde(default, deserialize_with = "optional_count")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 2_147_483_647))]
    pub duration: Option<i32>,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"content": "Your parcel left our warehouse today.", "senderType": "user", "senderId": "0194f2a0-7c1e-7000-8000-000000000002"})))]
pub struct CreateMessage {
    /// Required unless the message has attachments.
    pub content: Option<LongText>,
    /// Defaults to `text`.
    #[serde(rename = "type")]
    pub kind: Option<MessageType>,
    /// Defaults to `contact` (inbound).
    pub sender_type: Option<SenderType>,
    /// The contact (inbound) or the user (`user`); defaults to the conversation's contact for
    /// inbound messages.
    pub sender_id: Option<Uuid>,
    pub external_id: Option<Label>,
    pub email_message_id: Option<Label>,
    pub source_node_id: Option<Label>,
    pub suggested_replies: Option<Text>,
    pub should_request_feedback: Option<bool>,
    #[serde(default, deserialize_with = "parley_types::fields::optional_i32_list")]
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub template_context: Option<Vec<i32>>,
    #[cfg_attr(feature = "openapi", schema(max_items = 10))]
    pub attachments: Option<Vec<NewAttachment>>,
}

impl CreateMessage {
    /// The message (without attachments) for a conversation.
    pub fn into_message(
        self,
        c: &Conversation,
        now: Timestamp,
    ) -> Result<(Message, Vec<NewAttachment>), AppError> {
        let attachments = self.attachments.unwrap_or_default();
        parley_types::fields::check_len("attachments", attachments.len(), 10)?;
        let template_context = self.template_context.unwrap_or_default();
        parley_types::fields::check_len("templateContext", template_context.len(), 20)?;
        if self.content.is_none() && attachments.is_empty() {
            return Err(AppError::validation(
                "content",
                "required",
                "a message needs content or attachments",
            ));
        }
        let sender_type = self.sender_type.unwrap_or(SenderType::Contact);
        let sender_id = match sender_type {
            SenderType::Contact => Some(self.sender_id.unwrap_or(c.contact_id)),
            _ => self.sender_id,
        };
        if sender_type == SenderType::Contact && sender_id != Some(c.contact_id) {
            return Err(AppError::validation(
                "senderId",
                "invalid_value",
                "an inbound message comes from the conversation's contact",
            ));
        }
        let message = Message {
            id: parley_types::ids::new_id(),
            conversation_id: c.id,
            content: self.content.map(Into::into),
            kind: self.kind.unwrap_or(MessageType::Text),
            sender_id,
            sender_type,
            external_id: self.external_id.map(Into::into),
            email_message_id: self.email_message_id.map(Into::into),
            source_node_id: self.source_node_id.map(Into::into),
            suggested_replies: self.suggested_replies.map(Into::into),
            should_request_feedback: self.should_request_feedback.unwrap_or(false),
            template_context,
            attachments: Vec::new(),
            delivered_at: None,
            created_at: now,
            updated_at: now,
        };
        Ok((message, attachments))
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"action": "request", "reason": "guest_request", "requestedBy": "guest", "estimatedWaitSeconds": 120})))]
pub struct Handover {
    pub action: HandoverAction,
    /// With `request`.
    pub reason: Option<HandoverReason>,
    /// With `request`.
    pub requested_by: Option<HandoverRequestedBy>,
    pub notes: Option<Text>,
    #[serde(default, deserialize_with = "optional_count")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 2_147_483_647))]
    pub estimated_wait_seconds: Option<i32>,
    #[serde(default, deserialize_with = "optional_count")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 2_147_483_647))]
    pub queue_position: Option<i32>,
}

impl Handover {
    pub fn apply(self, c: &mut Conversation, now: Timestamp) -> Result<(), AppError> {
        use HandoverAction as A;
        use HandoverStatus as S;
        let next = match (self.action, c.handover_status) {
            (A::Request, S::None | S::Completed | S::TimedOut) => S::Requested,
            (A::Accept, S::Requested) => S::Accepted,
            (A::Timeout, S::Requested) => S::TimedOut,
            (A::Complete, S::Accepted) => S::Completed,
            (action, status) => {
                return Err(AppError::invalid_state(format!(
                    "a handover cannot {action} when it is {status}"
                )));
            }
        };
        c.handover_status = next;
        match next {
            S::Requested => {
                c.handover_reason = Some(self.reason.unwrap_or(HandoverReason::Other));
                c.handover_requested_by =
                    Some(self.requested_by.unwrap_or(HandoverRequestedBy::Guest));
                c.handover_requested_at = Some(now);
                c.handover_accepted_at = None;
                c.handover_completed_at = None;
                c.handover_timed_out_at = None;
            }
            S::Accepted => c.handover_accepted_at = Some(now),
            S::Completed => c.handover_completed_at = Some(now),
            S::TimedOut => c.handover_timed_out_at = Some(now),
            S::None => {}
        }
        if let Some(notes) = self.notes {
            c.handover_notes = Some(notes.into());
        }
        if let Some(v) = self.estimated_wait_seconds {
            c.estimated_wait_seconds = Some(v);
        }
        if let Some(v) = self.queue_position {
            c.handover_queue_position = Some(v);
        }
        c.updated_at = now;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation() -> Conversation {
        let req: CreateConversation = serde_json::from_value(serde_json::json!({
            "contactId": Uuid::now_v7(), "channel": "email"}))
        .unwrap();
        req.into_conversation(Uuid::now_v7(), 1, Timestamp::now())
    }

    #[test]
    fn a_closed_conversation_stays_closed() {
        let mut c = conversation();
        let close: UpdateConversation =
            serde_json::from_value(serde_json::json!({"status": "closed"})).unwrap();
        assert!(close.apply(&mut c, Timestamp::now()).unwrap().closed);
        let reopen: UpdateConversation =
            serde_json::from_value(serde_json::json!({"status": "active"})).unwrap();
        assert!(matches!(
            reopen.apply(&mut c, Timestamp::now()),
            Err(AppError::InvalidState(_))
        ));
    }

    #[test]
    fn snoozing_needs_a_future_time() {
        let mut c = conversation();
        let snooze: UpdateConversation =
            serde_json::from_value(serde_json::json!({"status": "snoozed"})).unwrap();
        assert!(matches!(
            snooze.apply(&mut c, Timestamp::now()),
            Err(AppError::Validation(_))
        ));
    }

    #[test]
    fn handovers_follow_their_states() {
        let mut c = conversation();
        let h =
            |a: &str| serde_json::from_value::<Handover>(serde_json::json!({"action": a})).unwrap();
        assert!(h("accept").apply(&mut c, Timestamp::now()).is_err());
        h("request").apply(&mut c, Timestamp::now()).unwrap();
        h("accept").apply(&mut c, Timestamp::now()).unwrap();
        h("complete").apply(&mut c, Timestamp::now()).unwrap();
        assert_eq!(c.handover_status, HandoverStatus::Completed);
        assert!(c.handover_completed_at.is_some());
        h("request").apply(&mut c, Timestamp::now()).unwrap();
        assert_eq!(c.handover_accepted_at, None);
    }
}

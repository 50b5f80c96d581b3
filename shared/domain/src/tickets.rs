//! Support tickets: status and priority, assignees, replies from agents and customers, an
//! activity for every change, and SLA state.

use serde::{Deserialize, Serialize, Serializer};
use uuid::Uuid;

use crate::categories::ConversationCategory;
use crate::contacts::Contact;
use crate::files::{File, FileType};
use crate::sla::SlaState;
use crate::tags::Tag;
use crate::teams::TeamSummary;
use crate::users::UserSummary;
use crate::{Actor, Channel, Priority};
use parley_types::error::AppError;
use parley_types::fields::{Hours, Label, LongText, ShortText, Text, non_null, nullable};
use parley_types::time::Timestamp;

parley_types::text_enum!(
    /// `open`, `pending` (waiting on the customer), `on_hold`, `resolved` and `closed`; any
    /// may follow any but `closed`, which is final. `pending` and `on_hold` stop the SLA clock.
    TicketStatus {
        Open = "open",
        Pending = "pending",
        OnHold = "on_hold",
        Resolved = "resolved",
        Closed = "closed",
    }
);

impl TicketStatus {
    /// Whether the SLA clock stands still in this status.
    pub fn pauses_sla(self) -> bool {
        matches!(self, TicketStatus::Pending | TicketStatus::OnHold)
    }

    /// Whether the ticket counts as resolved for its SLA.
    pub fn resolves(self) -> bool {
        matches!(self, TicketStatus::Resolved | TicketStatus::Closed)
    }
}

parley_types::text_enum!(
    /// Who wrote a reply: an agent (a user of the organization) or the customer.
    AuthorType {
        Agent = "agent",
        Customer = "customer",
    }
);

/// `TKT-000042`: how a ticket's number reads.
pub fn reference(number: i64) -> String {
    format!("TKT-{number:06}")
}

fn as_reference<S: Serializer>(number: &i64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&reference(*number))
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Ticket {
    pub id: Uuid,
    pub organization_id: Uuid,
    /// `TKT-` and the ticket's number in the organization (1, 2, 3, ...).
    #[serde(serialize_with = "as_reference")]
    #[cfg_attr(feature = "openapi", schema(value_type = String, example = "TKT-000042"))]
    pub reference_number: i64,
    pub subject: String,
    pub description: Option<String>,
    /// The contact the ticket is for.
    pub customer_id: Option<Uuid>,
    pub category_id: Option<Uuid>,
    pub team_id: Option<Uuid>,
    pub conversation_id: Option<Uuid>,
    pub email_message_id: Option<String>,
    pub external_id: Option<String>,
    pub resolution_notes: Option<String>,
    /// Grants a read of this ticket's SLA (`X-Ticket-Access-Token` on
    /// `GET /tickets/{id}/sla`), for the customer's view.
    pub access_token: String,
    pub channel_data: Option<String>,
    pub channel: Channel,
    pub status: TicketStatus,
    pub priority: Priority,
    #[serde(with = "rust_decimal::serde::float_option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub estimated_hours: Option<rust_decimal::Decimal>,
    #[serde(with = "rust_decimal::serde::float_option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub actual_hours: Option<rust_decimal::Decimal>,
    pub reply_count: i32,
    pub email_thread_ids: Vec<String>,
    pub due_date: Option<Timestamp>,
    /// The first agent reply.
    pub first_response_at: Option<Timestamp>,
    pub last_reply_at: Option<Timestamp>,
    pub resolved_at: Option<Timestamp>,
    pub closed_at: Option<Timestamp>,
    pub customer: Option<Contact>,
    pub category: Option<ConversationCategory>,
    pub team: Option<TeamSummary>,
    pub sla_state: Option<SlaState>,
    pub assignees: Vec<TicketAssignee>,
    pub attachments: Vec<TicketAttachment>,
    /// The latest 100 activities, newest first (`GET /tickets/{id}` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activities: Option<Vec<TicketActivity>>,
    /// The latest 100 replies, oldest first (`GET /tickets/{id}` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replies: Option<Vec<TicketReply>>,
    pub tags: Vec<Tag>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(Ticket);

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TicketAssignee {
    pub id: Uuid,
    pub ticket_id: Uuid,
    pub user_id: Uuid,
    pub user: Option<UserSummary>,
    pub assigned_at: Timestamp,
    pub assigned_by: Option<Uuid>,
    pub assigned_by_user: Option<UserSummary>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TicketAttachment {
    pub id: Uuid,
    pub ticket_id: Uuid,
    pub file_id: Uuid,
    pub file: Option<File>,
    #[serde(rename = "type")]
    pub kind: FileType,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TicketActivity {
    pub id: Uuid,
    pub ticket_id: Uuid,
    /// Who: an API key's name, a user's or the customer's id, or `system`.
    pub actor: String,
    pub actor_id: Option<Uuid>,
    /// `api_key`, `user`, `contact` or `system`.
    pub actor_type: String,
    /// `created`, `status_changed`, `priority_changed`, `team_changed`, `updated`,
    /// `tags_changed`, `assigned`, `unassigned`, `replied`, `sla_warning`, `sla_breached`.
    #[serde(rename = "type")]
    pub kind: String,
    pub description: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: sqlx::types::Json<serde_json::Value>,
    pub old_value: Option<String>,
    pub new_value: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(TicketActivity);

impl TicketActivity {
    pub fn new(ticket_id: Uuid, actor: &Actor, kind: &str, description: String) -> Self {
        let now = Timestamp::now();
        TicketActivity {
            id: parley_types::ids::new_id(),
            ticket_id,
            actor: actor.name.clone(),
            actor_id: Some(actor.id),
            actor_type: actor.kind.to_owned(),
            kind: kind.to_owned(),
            description,
            metadata: sqlx::types::Json(serde_json::json!({})),
            old_value: None,
            new_value: None,
            created_at: now,
            updated_at: now,
        }
    }

    pub fn values(mut self, old: Option<String>, new: Option<String>) -> Self {
        self.old_value = old;
        self.new_value = new;
        self
    }
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TicketReply {
    pub id: Uuid,
    pub ticket_id: Uuid,
    pub content: String,
    pub author_type: AuthorType,
    /// The user (agent) or the contact (customer).
    pub author_id: Option<Uuid>,
    /// A note between agents: not a response to the customer.
    pub is_internal: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(TicketReply);

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "subject": "Refund for order 1042", "description": "The parcel arrived damaged.",
    "customerId": "0194f2a0-7c1e-7000-8000-000000000001", "priority": "high", "channel": "email"
})))]
pub struct CreateTicket {
    pub subject: ShortText,
    pub description: Option<LongText>,
    /// A contact of the organization.
    pub customer_id: Option<Uuid>,
    pub category_id: Option<Uuid>,
    pub team_id: Option<Uuid>,
    pub conversation_id: Option<Uuid>,
    /// Defaults to `email`.
    pub channel: Option<Channel>,
    /// Defaults to `medium`.
    pub priority: Option<Priority>,
    pub due_date: Option<Timestamp>,
    pub estimated_hours: Option<Hours>,
    pub external_id: Option<Label>,
    pub email_message_id: Option<Label>,
    pub channel_data: Option<Text>,
    #[cfg_attr(feature = "openapi", schema(max_items = 50))]
    pub tag_ids: Option<Vec<Uuid>>,
    /// Users of the organization.
    #[cfg_attr(feature = "openapi", schema(max_items = 50))]
    pub assignee_ids: Option<Vec<Uuid>>,
    /// Files of the organization, attached to the ticket.
    #[cfg_attr(feature = "openapi", schema(max_items = 20))]
    pub file_ids: Option<Vec<Uuid>>,
}

/// The lists a new ticket refers to.
pub struct TicketLinks {
    pub tag_ids: Vec<Uuid>,
    pub assignee_ids: Vec<Uuid>,
    pub file_ids: Vec<Uuid>,
}

impl CreateTicket {
    pub fn into_ticket(
        self,
        organization_id: Uuid,
        reference_number: i64,
        now: Timestamp,
    ) -> (Ticket, TicketLinks) {
        let links = TicketLinks {
            tag_ids: parley_types::ids::dedup(self.tag_ids.unwrap_or_default()),
            assignee_ids: parley_types::ids::dedup(self.assignee_ids.unwrap_or_default()),
            file_ids: parley_types::ids::dedup(self.file_ids.unwrap_or_default()),
        };
        let ticket = Ticket {
            id: parley_types::ids::new_id(),
            organization_id,
            reference_number,
            subject: self.subject.into(),
            description: self.description.map(Into::into),
            customer_id: self.customer_id,
            category_id: self.category_id,
            team_id: self.team_id,
            conversation_id: self.conversation_id,
            email_message_id: self.email_message_id.map(Into::into),
            external_id: self.external_id.map(Into::into),
            resolution_notes: None,
            access_token: crate::auth::random_token(32),
            channel_data: self.channel_data.map(Into::into),
            channel: self.channel.unwrap_or(Channel::Email),
            status: TicketStatus::Open,
            priority: self.priority.unwrap_or(Priority::Medium),
            estimated_hours: self.estimated_hours.map(Hours::get),
            actual_hours: None,
            reply_count: 0,
            email_thread_ids: Vec::new(),
            due_date: self.due_date,
            first_response_at: None,
            last_reply_at: None,
            resolved_at: None,
            closed_at: None,
            customer: None,
            category: None,
            team: None,
            sla_state: None,
            assignees: Vec::new(),
            attachments: Vec::new(),
            activities: None,
            replies: None,
            tags: Vec::new(),
            created_at: now,
            updated_at: now,
        };
        (ticket, links)
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"status": "resolved", "resolutionNotes": "Refund issued.", "actualHours": 0.5})))]
pub struct UpdateTicket {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub subject: Option<ShortText>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<LongText>>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub status: Option<TicketStatus>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub priority: Option<Priority>,
    #[serde(default, deserialize_with = "nullable")]
    pub customer_id: Option<Option<Uuid>>,
    #[serde(default, deserialize_with = "nullable")]
    pub category_id: Option<Option<Uuid>>,
    #[serde(default, deserialize_with = "nullable")]
    pub team_id: Option<Option<Uuid>>,
    #[serde(default, deserialize_with = "nullable")]
    pub due_date: Option<Option<Timestamp>>,
    #[serde(default, deserialize_with = "nullable")]
    pub resolution_notes: Option<Option<Text>>,
    #[serde(default, deserialize_with = "nullable")]
    pub estimated_hours: Option<Option<Hours>>,
    #[serde(default, deserialize_with = "nullable")]
    pub actual_hours: Option<Option<Hours>>,
    #[serde(default, deserialize_with = "nullable")]
    pub external_id: Option<Option<Label>>,
    /// Replaces the ticket's tags.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false, max_items = 50))]
    pub tag_ids: Option<Vec<Uuid>>,
}

/// One field an update changed: (activity type, field, old value, new value).
pub type FieldChange = (&'static str, &'static str, Option<String>, Option<String>);

/// What an update did.
#[derive(Debug, Default)]
pub struct TicketChange {
    pub fields: Vec<FieldChange>,
    /// (from, to) when the status changed.
    pub status: Option<(TicketStatus, TicketStatus)>,
    pub tag_ids: Option<Vec<Uuid>>,
}

impl TicketChange {
    /// Notes a field's change (nothing when the value stays the same).
    fn note(
        &mut self,
        kind: &'static str,
        field: &'static str,
        old: Option<String>,
        new: Option<String>,
    ) {
        if old != new {
            self.fields.push((kind, field, old, new));
        }
    }
}

impl Ticket {
    /// Moves the ticket to `status` with the timestamps it implies: resolved when resolved,
    /// closed (and resolved, if it was not) when closed; reopening clears `resolvedAt`. A
    /// closed ticket stays closed.
    pub fn move_to(&mut self, status: TicketStatus, now: Timestamp) -> Result<(), AppError> {
        if self.status == TicketStatus::Closed {
            return Err(AppError::invalid_state("a closed ticket stays closed"));
        }
        self.status = status;
        match status {
            TicketStatus::Resolved => self.resolved_at = Some(now),
            TicketStatus::Closed => {
                self.closed_at = Some(now);
                self.resolved_at = self.resolved_at.or(Some(now));
            }
            _ => self.resolved_at = None,
        }
        Ok(())
    }
}

impl UpdateTicket {
    /// Applies the update and says what changed; checks of referenced ids are the caller's.
    pub fn apply(mut self, t: &mut Ticket, now: Timestamp) -> Result<TicketChange, AppError> {
        let mut change = TicketChange {
            tag_ids: self.tag_ids.take(),
            ..Default::default()
        };
        if let Some(status) = self.status
            && status != t.status
        {
            let from = t.status;
            t.move_to(status, now)?;
            change.status = Some((from, status));
            change.note(
                "status_changed",
                "status",
                Some(from.to_string()),
                Some(status.to_string()),
            );
        }
        self.apply_routing(t, &mut change);
        self.apply_details(t, &mut change);
        t.updated_at = now;
        Ok(change)
    }

    /// Priority and team, each with an activity of its own.
    fn apply_routing(&self, t: &mut Ticket, change: &mut TicketChange) {
        if let Some(p) = self.priority {
            change.note(
                "priority_changed",
                "priority",
                Some(t.priority.to_string()),
                Some(p.to_string()),
            );
            t.priority = p;
        }
        if let Some(team) = self.team_id {
            change.note(
                "team_changed",
                "teamId",
                t.team_id.map(|v| v.to_string()),
                team.map(|v| v.to_string()),
            );
            t.team_id = team;
        }
    }

    /// The other fields, each noted as `updated`.
    fn apply_details(self, t: &mut Ticket, change: &mut TicketChange) {
        if let Some(v) = self.subject {
            let v: String = v.into();
            change.note(
                "updated",
                "subject",
                Some(t.subject.clone()),
                Some(v.clone()),
            );
            t.subject = v;
        }
        macro_rules! field {
            ($input:expr, $target:expr, $name:literal, $conv:expr) => {
                if let Some(v) = $input {
                    let v = v.map($conv);
                    change.note(
                        "updated",
                        $name,
                        $target.as_ref().map(|x| x.to_string()),
                        v.as_ref().map(|x| x.to_string()),
                    );
                    $target = v;
                }
            };
        }
        field!(self.description, t.description, "description", String::from);
        field!(self.customer_id, t.customer_id, "customerId", |v: Uuid| v);
        field!(self.category_id, t.category_id, "categoryId", |v: Uuid| v);
        field!(self.due_date, t.due_date, "dueDate", |v: Timestamp| v);
        field!(
            self.resolution_notes,
            t.resolution_notes,
            "resolutionNotes",
            String::from
        );
        field!(
            self.estimated_hours,
            t.estimated_hours,
            "estimatedHours",
            Hours::get
        );
        field!(self.actual_hours, t.actual_hours, "actualHours", Hours::get);
        field!(self.external_id, t.external_id, "externalId", String::from);
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct TicketFilter {
    pub status: Option<TicketStatus>,
    pub priority: Option<Priority>,
    pub channel: Option<Channel>,
    pub team_id: Option<Uuid>,
    /// Tickets assigned to this user.
    pub assignee_id: Option<Uuid>,
    pub customer_id: Option<Uuid>,
    pub category_id: Option<Uuid>,
    /// A tag id or a tag name (without case).
    pub tag: Option<ShortText>,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"content": "We have issued a refund.", "authorType": "agent", "authorId": "0194f2a0-7c1e-7000-8000-000000000002"})))]
pub struct CreateReply {
    pub content: LongText,
    pub author_type: AuthorType,
    /// A user of the organization (agent) or the ticket's customer; defaults to the customer
    /// for customer replies.
    pub author_id: Option<Uuid>,
    /// An internal note (agents only): neither a response nor counted as a reply.
    pub is_internal: Option<bool>,
}

impl CreateReply {
    pub fn into_reply(self, t: &Ticket) -> Result<TicketReply, AppError> {
        let is_internal = self.is_internal.unwrap_or(false);
        let author_id = match self.author_type {
            AuthorType::Customer => {
                if is_internal {
                    return Err(AppError::validation(
                        "isInternal",
                        "invalid_value",
                        "customers write no internal notes",
                    ));
                }
                let id = self.author_id.or(t.customer_id);
                if id.is_some() && id != t.customer_id {
                    return Err(AppError::validation(
                        "authorId",
                        "invalid_value",
                        "a customer reply comes from the ticket's customer",
                    ));
                }
                id
            }
            AuthorType::Agent => self.author_id,
        };
        let now = Timestamp::now();
        Ok(TicketReply {
            id: parley_types::ids::new_id(),
            ticket_id: t.id,
            content: self.content.into(),
            author_type: self.author_type,
            author_id,
            is_internal,
            created_at: now,
            updated_at: now,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket() -> Ticket {
        let req: CreateTicket =
            serde_json::from_value(serde_json::json!({"subject": "Help"})).unwrap();
        req.into_ticket(Uuid::now_v7(), 42, Timestamp::now()).0
    }

    #[test]
    fn references_read_tkt_and_six_digits() {
        let t = ticket();
        assert_eq!(
            serde_json::to_value(&t).unwrap()["referenceNumber"],
            "TKT-000042"
        );
        assert_eq!(t.access_token.len(), 32);
    }

    #[test]
    fn updates_list_what_changed_and_closed_is_final() {
        let mut t = ticket();
        let u: UpdateTicket = serde_json::from_value(serde_json::json!({
            "status": "resolved", "priority": "medium", "actualHours": 1.255}))
        .unwrap();
        let change = u.apply(&mut t, Timestamp::now()).unwrap();
        assert_eq!(
            change.status,
            Some((TicketStatus::Open, TicketStatus::Resolved))
        );
        let kinds: Vec<&str> = change.fields.iter().map(|f| f.0).collect();
        assert_eq!(
            kinds,
            ["status_changed", "updated"],
            "an unchanged priority is no change"
        );
        assert!(t.resolved_at.is_some());
        let close: UpdateTicket =
            serde_json::from_value(serde_json::json!({"status": "closed"})).unwrap();
        close.apply(&mut t, Timestamp::now()).unwrap();
        let reopen: UpdateTicket =
            serde_json::from_value(serde_json::json!({"status": "open"})).unwrap();
        assert!(matches!(
            reopen.apply(&mut t, Timestamp::now()),
            Err(AppError::InvalidState(_))
        ));
    }
}

//! A contact's data on request (docs/api.md, "A contact's data"): everything Parley keeps of one
//! contact in one document, and its erasure.

use serde::Serialize;

use crate::broadcasts::ContactMessage;
use crate::contacts::Contact;
use crate::conversations::{Conversation, Message};
use crate::leads::Lead;
use crate::suppressions::Suppression;
use crate::tickets::Ticket;
use crate::topics::Subscriptions;
use parley_types::ids::ContactId;
use parley_types::time::Timestamp;

/// The most of each section one export holds, newest first (a section cut there is named in
/// `truncated`; its paged route reads the rest).
pub const ACTIVITIES: i64 = 1000;
pub const MESSAGES: u32 = 1000;
pub const CONVERSATIONS: u32 = 100;
/// Conversation messages across all the conversations of an export, oldest first in each.
pub const CONVERSATION_MESSAGES: u32 = 1000;
pub const TICKETS: u32 = 100;
pub const LEADS: u32 = 100;
pub const SUPPRESSIONS: i64 = 1000;

parley_types::text_enum!(
    /// A section of an export.
    ExportSection {
        Activities = "activities",
        Messages = "messages",
        Conversations = "conversations",
        ConversationMessages = "conversationMessages",
        Tickets = "tickets",
        Leads = "leads",
        Suppressions = "suppressions",
    }
);

/// `GET /api/v1/contacts/{id}/export`: what the organization keeps of one contact.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContactExport {
    pub exported_at: Timestamp,
    /// Every field, its tags, and its activities (the newest 1,000).
    pub contact: Contact,
    /// Its recipient record in every broadcast, newest first (1,000 at most).
    pub messages: Vec<ContactMessage>,
    /// Its conversations, newest first (100 at most), each with its messages oldest first
    /// (1,000 across all of them at most).
    pub conversations: Vec<ConversationExport>,
    /// The tickets it is the customer of, newest first (100 at most).
    pub tickets: Vec<Ticket>,
    /// The leads converted into it, newest first (100 at most).
    pub leads: Vec<Lead>,
    /// Its consent: every topic's preference and each channel's unsubscribe.
    pub subscriptions: Subscriptions,
    /// The ledger's entries that name it or an address it has or its messages went to (an
    /// erased contact's hashed addresses included), oldest first (1,000 at most).
    pub suppressions: Vec<Suppression>,
    /// The sections cut at their limit; empty when the export holds everything.
    pub truncated: Vec<ExportSection>,
}

/// A conversation and its messages.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConversationExport {
    pub conversation: Conversation,
    pub messages: Vec<Message>,
}

/// `POST /api/v1/contacts/{id}/erase`: what the erasure kept.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContactErased {
    /// The erased contact (no longer found).
    pub id: ContactId,
    /// The addresses (its email, phone and external id, and those its messages went to; not
    /// those another contact has) now kept only as hashes in the suppression ledger.
    pub hashed_addresses: i64,
    /// The ledger's entries written for them: one `erased` entry for every channel per
    /// address, and each earlier entry of the contact or an address, by its hash.
    pub ledger_entries: i64,
}

//! The suppression ledger: who is not sent to, on which channel, and why (docs/api.md,
//! Suppressions). Which entries a message obeys depends on its template's category
//! ([`SuppressionReason::applies_to`]); the send decides it in one place
//! (`crate::sending::Claimed`).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Channel;
use crate::templates::TemplateCategory;
use parley_types::error::{AppError, FieldError};
use parley_types::fields::{Email, Phone};
use parley_types::ids::{ContactId, OrgId, RecipientId};
use parley_types::time::Timestamp;

parley_types::text_enum!(
    /// Why an address or a contact is not sent to. A send reports the first that applies,
    /// in this order.
    SuppressionReason {
        HardBounce = "hard_bounce",
        Complaint = "complaint",
        SoftBounceLimit = "soft_bounce_limit",
        Erased = "erased",
        Unsubscribed = "unsubscribed",
        Manual = "manual",
    }
);

parley_types::text_enum!(
    /// Where an entry came from.
    SuppressionSource { Api = "api", Receipt = "receipt", Unsubscribe = "unsubscribe", Import = "import" }
);

parley_types::text_enum!(
    /// A bounce's kind: `hard` (the address does not exist or refuses mail for good) or
    /// `soft` (a full mailbox, greylisting, a server down: it may work later).
    BounceType { Hard = "hard", Soft = "soft" }
);

impl SuppressionReason {
    /// Whether a message of `category` obeys an entry of this reason. Marketing messages
    /// obey every entry; transactional ones (`utility`, `authentication`) only the
    /// address's bounces and complaints and an erased contact's addresses, so an unsubscribed
    /// person still gets a receipt or a login code, and an address that bounces, complains or
    /// was erased gets nothing.
    pub fn applies_to(self, category: TemplateCategory) -> bool {
        match category {
            TemplateCategory::Marketing => true,
            TemplateCategory::Utility | TemplateCategory::Authentication => matches!(
                self,
                SuppressionReason::HardBounce
                    | SuppressionReason::Complaint
                    | SuppressionReason::SoftBounceLimit
                    | SuppressionReason::Erased
            ),
        }
    }

    /// The reasons a message of `category` obeys.
    pub fn obeyed_by(category: TemplateCategory) -> Vec<SuppressionReason> {
        Self::ALL
            .iter()
            .copied()
            .filter(|r| r.applies_to(category))
            .collect()
    }

    /// The recipient's `errorCode` when an entry of this reason skips it.
    pub fn error_code(self) -> String {
        format!("suppressed_{}", self.as_str())
    }
}

/// An entry of the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Suppression {
    pub id: Uuid,
    pub organization_id: Uuid,
    /// The address, lowercase, when the entry names one (lowercased when written).
    pub email: Option<String>,
    /// The number, in E.164, when the entry names one.
    pub phone: Option<String>,
    /// The contact, when the entry names one.
    pub contact_id: Option<Uuid>,
    /// Whether the entry names an erased contact's address, kept only as a one-way hash
    /// (`email`, `phone` and `contactId` are then `null`; the list's `email` and `phone`
    /// filters find it by the address).
    pub erased: bool,
    /// The channel it suppresses on; `null`: every channel.
    pub channel: Option<Channel>,
    pub reason: SuppressionReason,
    pub source: SuppressionSource,
    pub created_at: Timestamp,
}
parley_types::keyed!(Suppression);

/// The most entries one request adds.
pub const MAX_PER_REQUEST: usize = 1000;

/// One entry to add: exactly one of `email`, `phone` and `contactId`.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct NewSuppression {
    pub email: Option<Email>,
    pub phone: Option<Phone>,
    /// A contact of the organization.
    pub contact_id: Option<ContactId>,
    /// Left out: every channel.
    pub channel: Option<Channel>,
    /// `manual` when left out.
    pub reason: Option<SuppressionReason>,
}

/// `POST /api/v1/suppressions`.
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self", rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"entries": [
    {"email": "ada@example.com", "reason": "unsubscribed"},
    {"phone": "+4915112345678", "channel": "messaging_a", "reason": "complaint"}
]})))]
pub struct AddSuppressions {
    /// 1 to 1,000 entries; one already in the ledger (the same address or contact, channel
    /// and reason) is left as it is.
    #[serde(deserialize_with = "parley_types::fields::at_most::<_, _, 1000>")]
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 1000))]
    pub entries: Vec<NewSuppression>,
}

parley_types::objects_only!(NewSuppression, AddSuppressions);

/// What an entry names.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    Email(String),
    Phone(String),
    Contact(ContactId),
}

impl AddSuppressions {
    /// The entries to write, each checked, from `source` at `now`; 422 with each bad entry's
    /// index otherwise.
    pub fn into_entries(
        self,
        org: OrgId,
        source: SuppressionSource,
        now: Timestamp,
    ) -> Result<Vec<Suppression>, AppError> {
        if self.entries.is_empty() {
            return Err(AppError::validation(
                "entries",
                "too_few",
                "give at least one entry",
            ));
        }
        let mut errors = Vec::new();
        let mut out = Vec::with_capacity(self.entries.len());
        for (i, e) in self.entries.into_iter().enumerate() {
            let subject = match (e.email, e.phone, e.contact_id) {
                // Lowercased where it is written, by Postgres' `lower` (as the send compares).
                (Some(email), None, None) => Subject::Email(email.as_str().to_owned()),
                (None, Some(phone), None) => Subject::Phone(phone.as_str().to_owned()),
                (None, None, Some(contact)) => Subject::Contact(contact),
                _ => {
                    errors.push(FieldError::new(
                        format!("entries[{i}]"),
                        "invalid_value",
                        "give exactly one of email, phone and contactId",
                    ));
                    continue;
                }
            };
            if e.reason == Some(SuppressionReason::Erased) {
                errors.push(FieldError::new(
                    format!("entries[{i}].reason"),
                    "invalid_value",
                    "erased entries are made by erasing a contact",
                ));
                continue;
            }
            out.push(Suppression::new(
                org,
                subject,
                e.channel,
                e.reason.unwrap_or(SuppressionReason::Manual),
                source,
                now,
            ));
        }
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(AppError::Validation(errors))
        }
    }
}

impl Suppression {
    /// What the ledger's unique key compares: the organization, the address (lowercase, as
    /// Postgres writes it) or contact, the channel and the reason.
    pub fn entry_key(&self) -> (Uuid, String, &'static str, &'static str) {
        let subject = match (&self.email, &self.phone, self.contact_id) {
            (Some(e), _, _) => e.to_lowercase(),
            (_, Some(p), _) => p.clone(),
            (_, _, Some(c)) => c.to_string(),
            _ => String::new(),
        };
        (
            self.organization_id,
            subject,
            self.channel.map_or("", |c| c.as_str()),
            self.reason.as_str(),
        )
    }

    pub fn new(
        org: OrgId,
        subject: Subject,
        channel: Option<Channel>,
        reason: SuppressionReason,
        source: SuppressionSource,
        now: Timestamp,
    ) -> Suppression {
        let (email, phone, contact_id) = match subject {
            Subject::Email(e) => (Some(e), None, None),
            Subject::Phone(p) => (None, Some(p), None),
            Subject::Contact(c) => (None, None, Some(c.uuid())),
        };
        Suppression {
            id: parley_types::ids::new_id(),
            organization_id: org.uuid(),
            email,
            phone,
            contact_id,
            erased: false,
            channel,
            reason,
            source,
            created_at: now,
        }
    }
}

/// What `POST /api/v1/suppressions` did.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SuppressionsAdded {
    /// The entries written.
    pub added: Vec<Suppression>,
    /// Entries left as they were: already in the ledger.
    pub existing: u32,
}

/// The filters of `GET /api/v1/suppressions` and its export.
#[derive(Debug, Clone, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct SuppressionFilter {
    pub reason: Option<SuppressionReason>,
    /// Entries for this channel (entries for every channel are not included).
    pub channel: Option<Channel>,
    /// Entries of this address (any case).
    pub email: Option<Email>,
    pub phone: Option<Phone>,
    pub contact_id: Option<ContactId>,
}

/// The header of the CSV export.
pub const CSV_HEADER: &str =
    "id,email,phone,contact_id,channel,reason,source,created_at,erased\r\n";

impl Suppression {
    /// The entry as a line of the CSV export (RFC 4180). Ids, numbers (E.164), channels,
    /// reasons and times hold nothing to quote; an address may hold `,` or `"` (quoted, the
    /// quotes doubled), or start like a formula (`=`, `+`, `-`, `@`: a `'` goes first, so a
    /// spreadsheet shows it as text and runs nothing).
    pub fn csv_line(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{}\r\n",
            self.id,
            self.email.as_deref().map(csv_text).unwrap_or_default(),
            self.phone.as_deref().unwrap_or(""),
            self.contact_id.map(|c| c.to_string()).unwrap_or_default(),
            self.channel.map(|c| c.as_str()).unwrap_or(""),
            self.reason.as_str(),
            self.source.as_str(),
            self.created_at,
            self.erased,
        )
    }
}

/// Free text as one CSV field: kept from being read as a formula, quoted when it must be.
fn csv_text(text: &str) -> String {
    let guarded = if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}")
    } else {
        text.to_owned()
    };
    if guarded.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", guarded.replace('"', "\"\""))
    } else {
        guarded
    }
}

/// What a receipt reported of a message that the ledger follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reported {
    Bounce(BounceType),
    Complaint,
}

/// A bounce or a complaint a receipt reported of one message, the first for that message:
/// `parley_usecases::suppressions::from_receipts` turns these into entries.
#[derive(Debug, Clone)]
pub struct ReceiptReport {
    pub organization_id: OrgId,
    pub recipient_id: RecipientId,
    pub contact_id: ContactId,
    pub channel: Channel,
    /// The address the message went to; unknown for messages sent before it was recorded.
    pub sent_to: Option<String>,
    pub reported: Reported,
    pub at: Timestamp,
}

impl ReceiptReport {
    /// What its entry names: on channels the ledger holds addresses of (`email`, and
    /// `messaging_a`'s numbers), the address the message went to, else the contact's address
    /// now (a message sent before the address was recorded); else, and on the social channels,
    /// the contact. `None` when it would name a contact that was deleted since (`current`
    /// is the contact's email and phone, if it still exists).
    pub fn subject(&self, current: Option<(Option<&str>, Option<&str>)>) -> Option<Subject> {
        let (email, phone) = current.unwrap_or_default();
        let sent = self.sent_to.as_deref();
        let (email, phone) = match self.channel {
            Channel::Email => (sent.or(email), phone),
            Channel::MessagingA => (email, sent.or(phone)),
            Channel::SocialA | Channel::SocialB => (email, phone),
        };
        match Subject::on_channel(self.channel, self.contact_id, email, phone) {
            Subject::Contact(_) if current.is_none() => None,
            subject => Some(subject),
        }
    }
}

impl Subject {
    /// What an entry for `contact` names on `channel`: the address the channel sends to where
    /// the ledger holds that kind of address (`email`'s address, `messaging_a`'s number), else
    /// the contact (the social channels, or a contact without that address).
    pub fn on_channel(
        channel: Channel,
        contact: ContactId,
        email: Option<&str>,
        phone: Option<&str>,
    ) -> Subject {
        let address = match channel {
            Channel::Email => email.map(|e| Subject::Email(e.to_lowercase())),
            Channel::MessagingA => phone.map(|p| Subject::Phone(p.to_owned())),
            Channel::SocialA | Channel::SocialB => None,
        };
        address.unwrap_or(Subject::Contact(contact))
    }

    /// The text an entry of it is keyed by (as [`Suppression::entry_key`] compares it); soft
    /// bounces are counted by it.
    pub fn key(&self) -> String {
        match self {
            Subject::Email(e) => e.to_lowercase(),
            Subject::Phone(p) => p.clone(),
            Subject::Contact(c) => c.to_string(),
        }
    }
}

/// The longest window `softBounceLimit.days` may give.
pub const MAX_SOFT_BOUNCE_DAYS: u16 = 365;

/// An organization's rule for soft bounces: an address that soft-bounces `count` times within
/// `days` days is suppressed (`soft_bounce_limit`) on that channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SoftBounceLimit {
    /// 1 to 100.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 100))]
    pub count: u16,
    /// 1 to 365.
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 365))]
    pub days: u16,
}

impl Default for SoftBounceLimit {
    fn default() -> Self {
        SoftBounceLimit { count: 3, days: 7 }
    }
}

impl SoftBounceLimit {
    /// 422 under `field` unless both are in range.
    pub fn check(&self, field: &str) -> Result<(), AppError> {
        let mut errors = Vec::new();
        if !(1..=100).contains(&self.count) {
            errors.push(FieldError::new(
                format!("{field}.count"),
                "out_of_range",
                "count is 1 to 100",
            ));
        }
        if !(1..=MAX_SOFT_BOUNCE_DAYS).contains(&self.days) {
            errors.push(FieldError::new(
                format!("{field}.days"),
                "out_of_range",
                format!("days is 1 to {MAX_SOFT_BOUNCE_DAYS}"),
            ));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(AppError::Validation(errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receipt_entry_names_the_address_the_message_went_to_else_the_contact() {
        let c = ContactId::from(Uuid::nil());
        let report = |channel, sent_to: Option<&str>| ReceiptReport {
            organization_id: OrgId::from(Uuid::nil()),
            recipient_id: RecipientId::from(Uuid::nil()),
            contact_id: c,
            channel,
            sent_to: sent_to.map(str::to_owned),
            reported: Reported::Complaint,
            at: Timestamp::now(),
        };
        let now = Some((Some("Now@Example.com"), Some("+4915100000000")));
        assert_eq!(
            report(Channel::Email, Some("Then@Example.com")).subject(now),
            Some(Subject::Email("then@example.com".into())),
            "the address it went to, though the contact's changed since"
        );
        assert_eq!(
            report(Channel::Email, Some("then@example.com")).subject(None),
            Some(Subject::Email("then@example.com".into())),
            "though the contact was deleted since"
        );
        assert_eq!(
            report(Channel::Email, None).subject(now),
            Some(Subject::Email("now@example.com".into()))
        );
        assert_eq!(
            report(Channel::MessagingA, Some("+4915112345678")).subject(now),
            Some(Subject::Phone("+4915112345678".into()))
        );
        assert_eq!(
            report(Channel::SocialA, Some("ext-1")).subject(now),
            Some(Subject::Contact(c))
        );
        assert_eq!(
            report(Channel::Email, None).subject(Some((None, None))),
            Some(Subject::Contact(c))
        );
        assert_eq!(report(Channel::SocialA, Some("ext-1")).subject(None), None);
    }

    #[test]
    fn soft_bounce_limits_are_bounded() {
        assert!(SoftBounceLimit::default().check("l").is_ok());
        for (count, days) in [(0, 7), (101, 7), (3, 0), (3, MAX_SOFT_BOUNCE_DAYS + 1)] {
            assert!(SoftBounceLimit { count, days }.check("l").is_err());
        }
        assert!(
            SoftBounceLimit {
                count: 100,
                days: MAX_SOFT_BOUNCE_DAYS
            }
            .check("l")
            .is_ok()
        );
    }

    #[test]
    fn transactional_messages_obey_only_bounces_complaints_and_erasures() {
        for &reason in SuppressionReason::ALL {
            assert!(reason.applies_to(TemplateCategory::Marketing), "{reason:?}");
        }
        for category in [TemplateCategory::Utility, TemplateCategory::Authentication] {
            assert_eq!(
                SuppressionReason::obeyed_by(category),
                vec![
                    SuppressionReason::HardBounce,
                    SuppressionReason::Complaint,
                    SuppressionReason::SoftBounceLimit,
                    SuppressionReason::Erased
                ]
            );
        }
        assert_eq!(
            SuppressionReason::HardBounce.error_code(),
            "suppressed_hard_bounce"
        );
    }

    #[test]
    fn an_entry_names_exactly_one_subject() {
        let req: AddSuppressions = serde_json::from_value(serde_json::json!({"entries": [
            {"email": "Ada@Example.com"},
            {"email": "b@example.com", "phone": "+4915112345678"},
            {"channel": "email"},
            {"contactId": "0194f2a0-7c1e-7000-8000-000000000002", "reason": "complaint"}
        ]}))
        .unwrap();
        let err = req
            .into_entries(OrgId::generate(), SuppressionSource::Api, Timestamp::now())
            .unwrap_err();
        let AppError::Validation(fields) = err else {
            panic!("{err:?}")
        };
        let named: Vec<&str> = fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(named, ["entries[1]", "entries[2]"]);

        let ok: AddSuppressions = serde_json::from_value(serde_json::json!({"entries": [
            {"email": "Ada@Example.com"}
        ]}))
        .unwrap();
        let entries = ok
            .into_entries(OrgId::generate(), SuppressionSource::Api, Timestamp::now())
            .unwrap();
        assert_eq!(entries[0].email.as_deref(), Some("Ada@Example.com"));
        assert_eq!(entries[0].reason, SuppressionReason::Manual);
        assert_eq!(entries[0].channel, None);
    }

    #[test]
    fn an_address_in_the_export_is_quoted_and_never_a_formula() {
        assert_eq!(csv_text("ada@example.com"), "ada@example.com");
        assert_eq!(csv_text("a,b@example.com"), "\"a,b@example.com\"");
        assert_eq!(csv_text("\"a\"@example.com"), "\"\"\"a\"\"@example.com\"");
        assert_eq!(
            csv_text("=HYPERLINK(\"x\")@example.com"),
            "\"'=HYPERLINK(\"\"x\"\")@example.com\""
        );
        assert_eq!(csv_text("-1@example.com"), "'-1@example.com");
    }
}

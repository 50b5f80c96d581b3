//! The send pipeline: how one recipient of a broadcast goes from claimed to recorded, in typed
//! stages, and the one place a sending broadcast's end is decided ([`ending`]). Pure: the
//! worker's send job (`worker/src/send.rs`) is its adapter and does the I/O between the stages
//! (claims and frequency caps in Redis, the rate limit, the provider, the outcome writer);
//! the use case `parley_usecases::sending::finish_if_done` applies [`ending`] under the
//! broadcast's row lock. docs/glossary.md names the words.
//!
//! ```text
//! a pending recipient ── a send job claims it ──▶ Claimed
//! Claimed ── SendContext::decide ──▶ Decided::Send(Ready)
//!                                 └▶ Decided::Hold    (its local time, quiet hours, a pause)
//!                                 └▶ Decided::Settle  (skipped; failed: no address)
//! Ready ── under the frequency cap (else skipped), after its turn under the rate limit,
//!       its variant's message (Messages::of) rendered (Prepared::compose; too long: failed)
//!       ──▶ the provider ──▶ RecipientOutcome::{Sent, Failed, Unsent}
//! RecipientOutcome ── recorded, unless another job took the recipient over
//! SendingTotals ── ending ──▶ Completed | Failed, once nothing of it can still be sent
//! ```

use std::collections::HashMap;

use chrono::{DateTime, SubsecRound, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use crate::Channel;
use crate::broadcasts::{BroadcastStatus, SendPriority, TemplateVariables};
use crate::send_rules::{
    Decision, FrequencyCap, FrequencyCaps, HoldReason, LocalSend, PastTimePolicy, QuietHours,
    SendIn, SendPlan,
};
use crate::suppressions::SuppressionReason;
use crate::templates::{TemplateCategory, max_message_chars, render};
use crate::topics::TOPIC_UNSUBSCRIBED;
use parley_types::ids::{BroadcastId, ContactId, OrgId, RecipientId, TopicId};
use parley_types::time::Timestamp;

/// What sending needs to know about a broadcast.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct SendContext {
    pub id: BroadcastId,
    pub organization_id: OrgId,
    pub status: BroadcastStatus,
    pub channel: Channel,
    pub template_id: Uuid,
    pub message_body: Option<String>,
    pub message_subject: Option<String>,
    pub template_variables: Option<Json<TemplateVariables>>,
    pub email_variables: Option<Json<serde_json::Value>>,
    pub priority: SendPriority,
    pub send_in: SendIn,
    pub local_time: Option<chrono::NaiveDateTime>,
    pub past_time_policy: PastTimePolicy,
    /// When the broadcast was due: a local send time before it had passed.
    pub scheduled_at: Timestamp,
    /// The broadcast's own quiet hours, else the organization's.
    pub quiet_hours: Option<Json<QuietHours>>,
    /// The organization's caps.
    pub frequency_caps: Json<FrequencyCaps>,
    /// The organization's zone (`workingHours.timezone`).
    pub default_zone: Option<String>,
    /// An A/B broadcast: its recipients have variants (`variant_contents` in the use cases).
    pub ab_test: bool,
    /// An operator paused the organization's sending: its recipients are held.
    pub paused: bool,
    /// What its messages are, for the suppression ledger: `marketing` when its template or
    /// any variant's is, else its template's category.
    pub category: TemplateCategory,
    /// The subscription topic its messages belong to.
    pub topic_id: Option<TopicId>,
}

impl SendContext {
    /// The broadcast's timing rules: its local time, and its quiet hours unless it is `high`.
    pub fn send_plan(&self) -> SendPlan {
        let high = self.priority == SendPriority::High;
        SendPlan {
            default_zone: self
                .default_zone
                .as_deref()
                .and_then(|z| z.parse().ok())
                .unwrap_or(chrono_tz::UTC),
            local: match (self.send_in, self.local_time) {
                (SendIn::ContactTimezone, Some(wall)) => Some(LocalSend {
                    wall,
                    requested_at: self.scheduled_at.0,
                    policy: self.past_time_policy,
                }),
                _ => None,
            },
            quiet: self
                .quiet_hours
                .as_ref()
                .filter(|_| !high)
                .and_then(|q| q.window("quietHours").ok().flatten()),
        }
    }

    /// The ledger's reasons its messages obey, first reported first.
    pub fn suppression_reasons(&self) -> Vec<SuppressionReason> {
        SuppressionReason::obeyed_by(self.category)
    }

    /// The topic its recipients' unsubscribes are read for: its own, when its messages are
    /// marketing (transactional messages obey no topic).
    pub fn obeyed_topic(&self) -> Option<TopicId> {
        self.topic_id
            .filter(|_| self.category == TemplateCategory::Marketing)
    }

    /// The cap on the broadcast's channel, unless it is `high`.
    pub fn frequency_cap(&self) -> Option<FrequencyCap> {
        (self.priority != SendPriority::High)
            .then(|| self.frequency_caps.of(self.channel))
            .flatten()
    }
}

/// A variant's message, captured when sending started (B to D; A's is the broadcast's).
#[derive(Debug, Clone)]
pub struct VariantContent {
    pub variant_no: i16,
    pub template_id: Uuid,
    pub message_body: Option<String>,
    pub message_subject: Option<String>,
    pub template_variables: Option<Json<TemplateVariables>>,
}

/// A recipient this worker holds for sending, with what its message needs of the contact.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Claimed {
    pub id: RecipientId,
    /// Absent when the contact was deleted since the fan-out.
    pub contact_id: Option<ContactId>,
    pub name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub country: Option<String>,
    pub language: Option<String>,
    pub position: Option<String>,
    pub external_id: Option<String>,
    pub company_name: Option<String>,
    pub do_not_contact: Option<bool>,
    pub messaging_a_opted_out: Option<bool>,
    /// The contact's IANA zone, if it has one.
    pub timezone: Option<String>,
    /// Which send this is: 0, then N after the Nth `retry-failed`.
    pub send_generation: i32,
    /// The variant to send, in an A/B broadcast.
    pub variant_no: Option<i16>,
    /// The first entry of the suppression ledger its message obeys, on the broadcast's
    /// channel, by the contact, its email or its phone, or the hash an erasure kept of one of
    /// them or of its external id.
    pub suppressed: Option<SuppressionReason>,
    /// The contact unsubscribed from the topic its message obeys
    /// ([`SendContext::obeyed_topic`]).
    pub topic_unsubscribed: bool,
}

impl Claimed {
    /// The address a channel sends to.
    fn address(&self, channel: Channel) -> Option<&str> {
        match channel {
            Channel::Email => self.email.as_deref(),
            Channel::MessagingA => self.phone.as_deref(),
            Channel::SocialA | Channel::SocialB => {
                self.external_id.as_deref().or(self.phone.as_deref())
            }
        }
    }

    /// The contact and its address on `channel`; or why the message is not sent: the contact
    /// is gone, suppressed, unsubscribed from the topic, do-not-contact or opted out
    /// (skipped), or has no address (failed).
    fn reach(&self, channel: Channel) -> Result<(ContactId, String), RecipientOutcome> {
        let Some(contact) = self.contact_id else {
            return Err(RecipientOutcome::skipped(
                "contact_deleted",
                "the contact was deleted",
            ));
        };
        if let Some(reason) = self.suppressed {
            return Err(RecipientOutcome::Skipped {
                code: reason.error_code(),
                message: format!("the suppression list holds the contact ({reason})"),
            });
        }
        if self.topic_unsubscribed {
            return Err(RecipientOutcome::skipped(
                TOPIC_UNSUBSCRIBED,
                "the contact unsubscribed from the broadcast's topic",
            ));
        }
        if self.do_not_contact == Some(true) {
            return Err(RecipientOutcome::skipped(
                "do_not_contact",
                "the contact is marked do-not-contact",
            ));
        }
        if channel == Channel::MessagingA && self.messaging_a_opted_out == Some(true) {
            return Err(RecipientOutcome::skipped(
                "opted_out",
                "the contact opted out of this channel",
            ));
        }
        self.address(channel)
            .map(|to| (contact, to.to_owned()))
            .ok_or_else(|| RecipientOutcome::Failed {
                code: "no_address".to_owned(),
                message: format!("the contact has no address for {channel}"),
            })
    }
}

/// A claimed recipient, decided: sent to (once the cap and the rate limit let it go), held, or
/// settled without a send.
#[derive(Debug)]
pub enum Decided {
    Send(Box<Ready>),
    /// Not yet: until its local send time or the end of its quiet hours, or with no time
    /// (`None`) while its organization's sending is paused.
    Hold {
        id: RecipientId,
        until: Option<Timestamp>,
        reason: HoldReason,
    },
    /// Not to be sent, and why: skipped, or failed (no address).
    Settle {
        id: RecipientId,
        outcome: RecipientOutcome,
    },
}

/// A recipient to send to: its contact (who counts under the frequency cap) and the address
/// on the broadcast's channel.
#[derive(Debug)]
pub struct Ready {
    pub recipient: Claimed,
    pub contact: ContactId,
    pub to: String,
}

impl Decided {
    /// The outcome to write now; none for a recipient to send to.
    pub fn outcome(&self) -> Option<(RecipientId, RecipientOutcome)> {
        match self {
            Decided::Send(_) => None,
            Decided::Hold { id, until, .. } => {
                Some((*id, RecipientOutcome::Held { until: *until }))
            }
            Decided::Settle { id, outcome } => Some((*id, outcome.clone())),
        }
    }
}

impl SendContext {
    /// Decides a claimed recipient by `now`, in this order: held while the organization is
    /// paused; skipped when its local send time had passed and the broadcast skips those
    /// ([`SendPlan::decide`], `plan` being [`SendContext::send_plan`]); settled when its
    /// contact is gone, must not be contacted or has no address (at once, not held first:
    /// its time coming would not change that); held until its local time or the end of its
    /// quiet hours; else sent.
    pub fn decide(&self, plan: &SendPlan, r: Claimed, now: DateTime<Utc>) -> Decided {
        if self.paused {
            return Decided::Hold {
                id: r.id,
                until: None,
                reason: HoldReason::Paused,
            };
        }
        let timing = plan.decide(r.timezone.as_deref(), now);
        if timing == Decision::SkipPast {
            return Decided::Settle {
                id: r.id,
                outcome: RecipientOutcome::skipped(
                    "send_time_passed",
                    "the local send time had passed in the contact's time zone when the broadcast was created",
                ),
            };
        }
        let (contact, to) = match r.reach(self.channel) {
            Ok(reached) => reached,
            Err(outcome) => return Decided::Settle { id: r.id, outcome },
        };
        match timing {
            Decision::Hold { until, reason } => Decided::Hold {
                id: r.id,
                until: Some(Timestamp(until.trunc_subsecs(6))),
                reason,
            },
            // `SkipPast` settled it above.
            Decision::Send | Decision::SkipPast => Decided::Send(Box::new(Ready {
                recipient: r,
                contact,
                to,
            })),
        }
    }
}

/// The messages of a broadcast: its own, and an A/B broadcast's variants B to D.
pub struct Messages {
    own: Prepared,
    variants: HashMap<i16, Prepared>,
}

impl Messages {
    pub fn new(b: &SendContext, variants: &[VariantContent]) -> Self {
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
    pub fn of(&self, variant: Option<i16>) -> &Prepared {
        variant
            .and_then(|v| self.variants.get(&v))
            .unwrap_or(&self.own)
    }
}

/// The parts of one message shared by every recipient sent it.
pub struct Prepared {
    pub template_id: Uuid,
    body: String,
    /// The subject, on `email`.
    pub subject: Option<String>,
    values: Vec<String>,
    /// The template's variables as the provider gets them.
    pub variables: serde_json::Value,
}

impl Prepared {
    fn new(
        b: &SendContext,
        template_id: Uuid,
        body: Option<&str>,
        subject: Option<&str>,
        vars: Option<&Json<TemplateVariables>>,
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
            subject: subject
                .filter(|_| b.channel == Channel::Email)
                .map(str::to_owned),
            values,
            variables,
        }
    }

    /// The message rendered for this recipient, within the channel's length (checked when the
    /// broadcast and its template were written; this only guards the provider against a
    /// message that got past those checks).
    pub fn compose(
        &self,
        channel: Channel,
        r: &Claimed,
        unsubscribe_url: &str,
    ) -> Result<String, RecipientOutcome> {
        let values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        let content = render(
            &self.body,
            &values,
            |field| match field {
                "name" => r.name.as_deref(),
                "email" => r.email.as_deref(),
                "phone" => r.phone.as_deref(),
                "country" => r.country.as_deref(),
                "language" => r.language.as_deref(),
                "position" => r.position.as_deref(),
                "companyName" => r.company_name.as_deref(),
                "externalId" => r.external_id.as_deref(),
                _ => None,
            },
            unsubscribe_url,
        );
        if content.chars().count() > max_message_chars(channel) {
            return Err(RecipientOutcome::Failed {
                code: "message_too_long".to_owned(),
                message: format!("the message is longer than {channel} takes"),
            });
        }
        Ok(content)
    }
}

/// How one claimed recipient ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecipientOutcome {
    Sent {
        message_id: Option<String>,
        /// The address it went to.
        to: String,
    },
    Failed {
        code: String,
        message: String,
    },
    Skipped {
        code: String,
        message: String,
    },
    /// Not yet: `held` until then (its local send time, or the end of its quiet hours), or
    /// with no time (`None`) while its organization's sending is paused.
    Held {
        until: Option<Timestamp>,
    },
    /// Not sent (the broadcast paused or the worker is stopping): back to the pool, not
    /// written.
    Unsent,
}

impl RecipientOutcome {
    /// The status a written outcome counts as (`parley_recipients_total`); none for a held or
    /// unsent recipient, which is not done.
    pub fn counted_as(&self) -> Option<&'static str> {
        match self {
            RecipientOutcome::Sent { .. } => Some("sent"),
            RecipientOutcome::Failed { .. } => Some("failed"),
            RecipientOutcome::Skipped { .. } => Some("skipped"),
            RecipientOutcome::Held { .. } | RecipientOutcome::Unsent => None,
        }
    }

    fn skipped(code: &str, message: &str) -> Self {
        RecipientOutcome::Skipped {
            code: code.to_owned(),
            message: message.to_owned(),
        }
    }

    /// Skipped: the contact reached its organization's frequency cap on the channel.
    pub fn capped() -> Self {
        Self::skipped(
            "frequency_capped",
            "the contact reached the organization's frequency cap on this channel",
        )
    }
}

/// A sending broadcast whose audience is written, as its end is decided: its recipients'
/// totals, and whether its A/B test still waits for a winner.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendingTotals {
    pub sent: i64,
    pub pending: i64,
    pub held: i64,
    pub winner_awaited: bool,
}

/// How a sending broadcast ends, once nothing of it can still be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ending {
    /// `completed` when any recipient was sent, else `failed`.
    pub status: BroadcastStatus,
    /// The broadcast's `errorMessage`, when the ending sets one.
    pub error_message: Option<&'static str>,
}

/// Why a broadcast that sent to no recipient failed.
pub const NONE_SENT: &str = "no recipient could be sent to";

/// The end of a sending broadcast whose audience is written: none while a recipient is pending
/// or held or an A/B winner is awaited; then `completed` if any recipient was sent, else
/// `failed`.
pub fn ending(totals: SendingTotals) -> Option<Ending> {
    if totals.pending > 0 || totals.held > 0 || totals.winner_awaited {
        return None;
    }
    Some(if totals.sent > 0 {
        Ending {
            status: BroadcastStatus::Completed,
            error_message: None,
        }
    } else {
        Ending {
            status: BroadcastStatus::Failed,
            error_message: Some(NONE_SENT),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use BroadcastStatus::*;

    #[test]
    fn a_broadcast_ends_once_nothing_can_be_sent_and_fails_when_none_was() {
        let done = SendingTotals {
            sent: 3,
            ..Default::default()
        };
        assert_eq!(
            ending(done),
            Some(Ending {
                status: BroadcastStatus::Completed,
                error_message: None
            })
        );
        for waiting in [
            SendingTotals { pending: 1, ..done },
            SendingTotals { held: 1, ..done },
            SendingTotals {
                winner_awaited: true,
                ..done
            },
        ] {
            assert_eq!(ending(waiting), None, "{waiting:?}");
        }
        assert_eq!(
            ending(SendingTotals::default()),
            Some(Ending {
                status: BroadcastStatus::Failed,
                error_message: Some(NONE_SENT)
            })
        );
    }

    fn broadcast(channel: Channel) -> SendContext {
        SendContext {
            id: BroadcastId::generate(),
            organization_id: OrgId::generate(),
            status: Sending,
            channel,
            template_id: Uuid::nil(),
            message_body: Some("Hi {{contact.name}}".to_owned()),
            message_subject: Some("Hello".to_owned()),
            template_variables: None,
            email_variables: None,
            priority: SendPriority::Normal,
            send_in: SendIn::Utc,
            local_time: None,
            past_time_policy: PastTimePolicy::SendNow,
            scheduled_at: Timestamp(Utc::now()),
            quiet_hours: None,
            frequency_caps: Json(FrequencyCaps::default()),
            default_zone: None,
            ab_test: false,
            paused: false,
            category: TemplateCategory::Marketing,
            topic_id: None,
        }
    }

    fn contact() -> Claimed {
        Claimed {
            id: RecipientId::generate(),
            contact_id: Some(ContactId::generate()),
            name: Some("Ada".to_owned()),
            email: Some("ada@example.com".to_owned()),
            phone: None,
            country: None,
            language: None,
            position: None,
            external_id: None,
            company_name: None,
            do_not_contact: None,
            messaging_a_opted_out: None,
            timezone: None,
            send_generation: 0,
            variant_no: None,
            suppressed: None,
            topic_unsubscribed: false,
        }
    }

    fn decide(b: &SendContext, r: Claimed) -> Decided {
        b.decide(&b.send_plan(), r, Utc::now())
    }

    fn settled_code(d: &Decided) -> Option<&str> {
        match d {
            Decided::Settle {
                outcome:
                    RecipientOutcome::Skipped { code, .. } | RecipientOutcome::Failed { code, .. },
                ..
            } => Some(code),
            _ => None,
        }
    }

    #[test]
    fn a_reachable_contact_is_sent_to_its_channels_address() {
        let r = contact();
        let contact_id = r.contact_id;
        match decide(&broadcast(Channel::Email), r) {
            Decided::Send(ready) => {
                assert_eq!(ready.to, "ada@example.com");
                assert_eq!(Some(ready.contact), contact_id);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn who_left_the_topic_is_skipped_by_marketing_only() {
        let topic = Some(parley_types::ids::TopicId::generate());
        let marketing = SendContext {
            topic_id: topic,
            ..broadcast(Channel::Email)
        };
        assert_eq!(marketing.obeyed_topic(), topic);
        let left = Claimed {
            topic_unsubscribed: true,
            ..contact()
        };
        assert_eq!(
            settled_code(&decide(&marketing, left.clone())),
            Some("topic_unsubscribed")
        );
        let suppressed = Claimed {
            suppressed: Some(SuppressionReason::HardBounce),
            ..left
        };
        assert_eq!(
            settled_code(&decide(&marketing, suppressed)),
            Some("suppressed_hard_bounce"),
            "the ledger first"
        );
        let receipt = SendContext {
            category: TemplateCategory::Utility,
            ..marketing
        };
        assert_eq!(receipt.obeyed_topic(), None, "transactional obeys no topic");
    }

    #[test]
    fn who_must_not_be_contacted_is_settled_before_any_send() {
        let b = broadcast(Channel::Email);
        let gone = Claimed {
            contact_id: None,
            ..contact()
        };
        assert_eq!(settled_code(&decide(&b, gone)), Some("contact_deleted"));
        let dnc = Claimed {
            do_not_contact: Some(true),
            ..contact()
        };
        assert_eq!(settled_code(&decide(&b, dnc)), Some("do_not_contact"));
        let suppressed = Claimed {
            suppressed: Some(SuppressionReason::Complaint),
            do_not_contact: Some(true),
            ..contact()
        };
        assert_eq!(
            settled_code(&decide(&b, suppressed)),
            Some("suppressed_complaint"),
            "the ledger first"
        );
        let opted_out = Claimed {
            messaging_a_opted_out: Some(true),
            phone: Some("+15550100".to_owned()),
            ..contact()
        };
        assert_eq!(
            settled_code(&decide(&broadcast(Channel::MessagingA), opted_out)),
            Some("opted_out")
        );
        // No phone: the message cannot go, and fails.
        assert_eq!(
            settled_code(&decide(&broadcast(Channel::MessagingA), contact())),
            Some("no_address")
        );
    }

    fn noon() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-06-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn who_cannot_be_reached_is_settled_at_once_not_held_for_quiet_hours() {
        let b = SendContext {
            quiet_hours: Some(Json(QuietHours {
                start: "00:00".to_owned(),
                end: "23:59".to_owned(),
            })),
            ..broadcast(Channel::Email)
        };
        let plan = b.send_plan();
        assert!(matches!(
            b.decide(&plan, contact(), noon()),
            Decided::Hold {
                reason: HoldReason::QuietHours,
                ..
            }
        ));
        let dnc = Claimed {
            do_not_contact: Some(true),
            ..contact()
        };
        assert_eq!(
            settled_code(&b.decide(&plan, dnc, noon())),
            Some("do_not_contact")
        );
    }

    #[test]
    fn a_passed_local_time_skips_before_the_address_is_looked_at() {
        let b = SendContext {
            send_in: SendIn::ContactTimezone,
            local_time: Some(noon().naive_utc() - chrono::Duration::days(2)),
            past_time_policy: PastTimePolicy::Skip,
            scheduled_at: Timestamp(noon()),
            ..broadcast(Channel::Email)
        };
        let plan = b.send_plan();
        let no_email = Claimed {
            email: None,
            ..contact()
        };
        assert_eq!(
            settled_code(&b.decide(&plan, no_email, noon())),
            Some("send_time_passed")
        );
    }

    #[test]
    fn a_paused_organization_holds_every_recipient_without_a_time() {
        let b = SendContext {
            paused: true,
            ..broadcast(Channel::Email)
        };
        let gone = Claimed {
            contact_id: None,
            ..contact()
        };
        for r in [contact(), gone] {
            let id = r.id;
            let d = decide(&b, r);
            assert!(
                matches!(
                    d,
                    Decided::Hold {
                        until: None,
                        reason: HoldReason::Paused,
                        ..
                    }
                ),
                "{d:?}"
            );
            assert_eq!(
                d.outcome(),
                Some((id, RecipientOutcome::Held { until: None }))
            );
        }
    }

    #[test]
    fn a_local_time_not_come_holds_until_it_in_whole_microseconds() {
        let wall = (Utc::now() + chrono::Duration::days(2)).naive_utc();
        let b = SendContext {
            send_in: SendIn::ContactTimezone,
            local_time: Some(wall),
            ..broadcast(Channel::Email)
        };
        let r = Claimed {
            timezone: Some("Europe/Paris".to_owned()),
            ..contact()
        };
        match decide(&b, r) {
            Decided::Hold {
                until: Some(until),
                reason: HoldReason::LocalTime,
                ..
            } => assert_eq!(until.0.timestamp_subsec_nanos() % 1_000, 0),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_message_is_rendered_for_its_recipient_within_the_channels_length() {
        let b = broadcast(Channel::Email);
        let messages = Messages::new(&b, &[]);
        let prepared = messages.of(None);
        assert_eq!(
            prepared.compose(b.channel, &contact(), "").unwrap(),
            "Hi Ada"
        );
        assert_eq!(prepared.subject.as_deref(), Some("Hello"));
        // The subject is an email's only.
        let sms = broadcast(Channel::MessagingA);
        assert_eq!(Messages::new(&sms, &[]).of(None).subject, None);
        let long = SendContext {
            message_body: Some("x".repeat(max_message_chars(Channel::MessagingA) + 1)),
            ..sms
        };
        let outcome = Messages::new(&long, &[])
            .of(None)
            .compose(long.channel, &contact(), "")
            .unwrap_err();
        assert!(
            matches!(outcome, RecipientOutcome::Failed { code, .. } if code == "message_too_long")
        );
    }

    #[test]
    fn an_ab_recipient_gets_its_variants_message_and_variant_a_the_broadcasts() {
        let b = broadcast(Channel::Email);
        let variant = VariantContent {
            variant_no: 2,
            template_id: Uuid::now_v7(),
            message_body: Some("Variant B".to_owned()),
            message_subject: None,
            template_variables: None,
        };
        let messages = Messages::new(&b, std::slice::from_ref(&variant));
        assert_eq!(messages.of(Some(2)).template_id, variant.template_id);
        assert_eq!(messages.of(Some(1)).template_id, b.template_id);
        assert_eq!(messages.of(None).template_id, b.template_id);
    }
}

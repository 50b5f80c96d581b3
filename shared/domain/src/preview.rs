//! A send explained before it goes out (docs/api.md, "Previewing a send"): every contact of a
//! draft or scheduled broadcast's audience decided by the send's own rule
//! ([`SendContext::decide`](crate::sending::SendContext::decide)) and the frequency cap, and
//! counted by outcome, with a few contacts of each and the A/B split.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::sending::{Decided, RecipientOutcome};
use parley_types::ids::ContactId;
use parley_types::time::Timestamp;

/// The contacts each outcome shows.
pub const SAMPLES: usize = 5;

/// What a broadcast would do, recipient by recipient, counted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct BroadcastPreview {
    /// Contacts of the audience (a contact deleted since it was named included: it is skipped).
    pub audience: i64,
    /// Recipients that would be `sent` now (or when held ones are released, not counted here).
    pub would_send: i64,
    /// Recipients that would not be sent: skipped, failed or held.
    pub would_not_send: i64,
    /// One group per outcome (`sent` first, then by count), with its contacts' count.
    pub outcomes: Vec<PreviewOutcome>,
    /// An A/B broadcast's split of the recipients that would be sent; `null` for others.
    pub ab_split: Option<AbSplit>,
    /// The instant the rules were read at: now, or a scheduled broadcast's `scheduledAt` if
    /// later (frequency caps are read now).
    pub evaluated_at: Timestamp,
}

/// Recipients with one outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PreviewOutcome {
    /// The recipient status the send would write: `sent`, `skipped`, `failed` or `held`.
    pub status: String,
    /// As the recipient's `errorCode` would be (`suppressed_<reason>`, `topic_unsubscribed`,
    /// `do_not_contact`, `opted_out`, `no_address`, `frequency_capped`, `send_time_passed`,
    /// `contact_deleted`); `null` for `sent` and `held`.
    pub error_code: Option<String>,
    /// Why `held`: `local_time`, `quiet_hours` or `paused`.
    pub hold_reason: Option<String>,
    pub count: i64,
    /// The earliest and latest release of `held` recipients (none while paused).
    pub held_from: Option<Timestamp>,
    pub held_until: Option<Timestamp>,
    /// Up to five of its contacts, in the audience's order.
    pub sample_contact_ids: Vec<ContactId>,
}

/// How an A/B broadcast's recipients to send would split.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AbSplit {
    /// The test share per variant, A first.
    pub variants: Vec<AbSplitVariant>,
    /// The rest, sent the winner once it is picked.
    pub rest: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AbSplitVariant {
    pub name: String,
    pub count: i64,
}

/// The group key: status, code, hold reason.
type Key = (&'static str, Option<String>, Option<&'static str>);

/// The count of a preview, one decided contact at a time.
#[derive(Debug, Default)]
pub struct Tally {
    audience: i64,
    groups: BTreeMap<Key, PreviewOutcome>,
    /// Per variant number (1 is A), and the rest.
    split: Option<(Vec<(String, i64)>, i64)>,
}

impl Tally {
    /// An A/B broadcast's tally: its variants' names, A first.
    pub fn with_variants(names: Vec<String>) -> Self {
        Tally {
            split: Some((names.into_iter().map(|n| (n, 0)).collect(), 0)),
            ..Tally::default()
        }
    }

    /// Counts `contact`: its decision, capped (by the frequency cap, read apart) or not, and
    /// in an A/B broadcast its drawn variant (`None`: the rest).
    pub fn add(
        &mut self,
        contact: ContactId,
        decided: &Decided,
        capped: bool,
        variant: Option<i16>,
    ) {
        self.audience += 1;
        let (key, until) = match decided {
            Decided::Send(_) if capped => (outcome_key(&RecipientOutcome::capped()), None),
            Decided::Send(_) => {
                if let Some((variants, rest)) = &mut self.split {
                    match variant.and_then(|v| variants.get_mut(usize::try_from(v - 1).ok()?)) {
                        Some((_, n)) => *n += 1,
                        None => *rest += 1,
                    }
                }
                (("sent", None, None), None)
            }
            Decided::Hold { until, reason, .. } => (("held", None, Some(reason.as_str())), *until),
            Decided::Settle { outcome, .. } => (outcome_key(outcome), None),
        };
        let group = self
            .groups
            .entry(key.clone())
            .or_insert_with(|| PreviewOutcome {
                status: key.0.to_owned(),
                error_code: key.1.clone(),
                hold_reason: key.2.map(str::to_owned),
                count: 0,
                held_from: None,
                held_until: None,
                sample_contact_ids: Vec::new(),
            });
        group.count += 1;
        if let Some(until) = until {
            group.held_from = Some(group.held_from.map_or(until, |f| f.min(until)));
            group.held_until = Some(group.held_until.map_or(until, |u| u.max(until)));
        }
        if group.sample_contact_ids.len() < SAMPLES {
            group.sample_contact_ids.push(contact);
        }
    }

    pub fn finish(self, evaluated_at: Timestamp) -> BroadcastPreview {
        let mut outcomes: Vec<PreviewOutcome> = self.groups.into_values().collect();
        outcomes.sort_by(|a, b| {
            (b.status == "sent")
                .cmp(&(a.status == "sent"))
                .then(b.count.cmp(&a.count))
                .then_with(|| {
                    (&a.status, &a.error_code, &a.hold_reason).cmp(&(
                        &b.status,
                        &b.error_code,
                        &b.hold_reason,
                    ))
                })
        });
        let would_send = outcomes
            .iter()
            .filter(|o| o.status == "sent")
            .map(|o| o.count)
            .sum();
        BroadcastPreview {
            audience: self.audience,
            would_send,
            would_not_send: self.audience - would_send,
            outcomes,
            ab_split: self.split.map(|(variants, rest)| AbSplit {
                variants: variants
                    .into_iter()
                    .map(|(name, count)| AbSplitVariant { name, count })
                    .collect(),
                rest,
            }),
            evaluated_at,
        }
    }
}

/// The group of a settled recipient: its status and code.
fn outcome_key(outcome: &RecipientOutcome) -> Key {
    match outcome {
        RecipientOutcome::Skipped { code, .. } => ("skipped", Some(code.clone()), None),
        RecipientOutcome::Failed { code, .. } => ("failed", Some(code.clone()), None),
        RecipientOutcome::Sent { .. } => ("sent", None, None),
        RecipientOutcome::Held { .. } | RecipientOutcome::Unsent => ("held", None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::send_rules::HoldReason;
    use parley_types::ids::RecipientId;

    fn settled(code: &str) -> Decided {
        Decided::Settle {
            id: RecipientId::generate(),
            outcome: RecipientOutcome::Skipped {
                code: code.to_owned(),
                message: String::new(),
            },
        }
    }

    fn held(until: &str) -> Decided {
        Decided::Hold {
            id: RecipientId::generate(),
            until: Some(Timestamp(until.parse().unwrap())),
            reason: HoldReason::QuietHours,
        }
    }

    #[test]
    fn a_tally_groups_by_outcome_with_samples_windows_and_the_split() {
        let mut t = Tally::with_variants(vec!["A".into(), "B".into()]);
        let contacts: Vec<ContactId> = (0..9).map(|_| ContactId::generate()).collect();
        for c in &contacts[..7] {
            t.add(*c, &settled("do_not_contact"), false, None);
        }
        t.add(contacts[7], &held("2026-11-30T08:00:00Z"), false, None);
        t.add(contacts[8], &held("2026-11-30T06:00:00Z"), false, None);
        let p = t.finish(Timestamp(chrono::Utc::now()));
        assert_eq!((p.audience, p.would_send, p.would_not_send), (9, 0, 9));
        let dnc = &p.outcomes[0];
        assert_eq!(dnc.error_code.as_deref(), Some("do_not_contact"));
        assert_eq!(dnc.count, 7);
        assert_eq!(dnc.sample_contact_ids, contacts[..SAMPLES].to_vec());
        let held = &p.outcomes[1];
        assert_eq!(
            (held.status.as_str(), held.hold_reason.as_deref()),
            ("held", Some("quiet_hours"))
        );
        assert_eq!(
            held.held_from.map(|t| t.0.to_rfc3339()),
            Some("2026-11-30T06:00:00+00:00".to_owned())
        );
        assert_eq!(
            held.held_until.map(|t| t.0.to_rfc3339()),
            Some("2026-11-30T08:00:00+00:00".to_owned())
        );
        let split = p.ab_split.unwrap();
        assert_eq!(
            (split.variants[0].count, split.variants[1].count, split.rest),
            (0, 0, 0),
            "only recipients to send are split"
        );
    }
}

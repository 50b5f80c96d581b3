//! SLA policies, and the SLA state of a conversation or ticket: its deadlines for first
//! response, next response and resolution, counted on the wall clock or in business hours,
//! paused while a ticket waits, met when achieved in time and breached when not.
//!
//! The state changes here, as pure functions of the state, the time and the clock; the
//! database module stores the result and the checks that follow from it ([`SlaState::checks`]).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::business_hours::Clock;
use crate::{Channel, Priority};
use parley_types::fields::{Name, Text, non_null, nullable, target_seconds, warning_seconds};
use parley_types::time::Timestamp;

parley_types::text_enum!(
    /// A target of an SLA.
    SlaTarget {
        FirstResponse = "first_response",
        NextResponse = "next_response",
        Resolution = "resolution",
    }
);

parley_types::text_enum!(
    /// The target a state is counting down to now; `none` once resolved.
    #[derive(Default)]
    ActiveTarget {
        FirstResponse = "first_response",
        NextResponse = "next_response",
        Resolution = "resolution",
        #[default]
        None = "none",
    }
);

parley_types::text_enum!(
    /// What an SLA state belongs to.
    SubjectType {
        Conversation = "conversation",
        Ticket = "ticket",
    }
);

parley_types::text_enum!(
    /// A check at a warning time or at a deadline.
    CheckKind {
        Warning = "warning",
        Deadline = "deadline",
    }
);

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SlaPolicy {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub description: Option<String>,
    /// Applies to this priority only; `null`: any.
    pub priority: Option<Priority>,
    /// Applies to this channel only; `null`: any.
    pub channel: Option<Channel>,
    pub first_response_seconds: i32,
    pub next_response_seconds: i32,
    pub resolution_seconds: i32,
    /// Count only the organization's working hours.
    pub business_hours_only: bool,
    /// A warning fires this long before each deadline (0: none).
    pub warning_threshold_seconds: i32,
    pub is_active: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(SlaPolicy);

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "name": "Urgent email", "priority": "urgent", "channel": "email",
    "firstResponseSeconds": 900, "nextResponseSeconds": 3600, "resolutionSeconds": 14400,
    "businessHoursOnly": true, "warningThresholdSeconds": 300
})))]
pub struct CreateSlaPolicy {
    pub name: Name,
    pub description: Option<Text>,
    pub priority: Option<Priority>,
    pub channel: Option<Channel>,
    #[serde(deserialize_with = "target_seconds")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 31_622_400))]
    pub first_response_seconds: i32,
    #[serde(deserialize_with = "target_seconds")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 31_622_400))]
    pub next_response_seconds: i32,
    #[serde(deserialize_with = "target_seconds")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 31_622_400))]
    pub resolution_seconds: i32,
    pub business_hours_only: bool,
    #[serde(deserialize_with = "warning_seconds")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 31_622_400))]
    pub warning_threshold_seconds: i32,
    pub is_active: Option<bool>,
}

impl CreateSlaPolicy {
    pub fn into_policy(self, organization_id: Uuid) -> SlaPolicy {
        let now = Timestamp::now();
        SlaPolicy {
            id: parley_types::ids::new_id(),
            organization_id,
            name: self.name.into(),
            description: self.description.map(Into::into),
            priority: self.priority,
            channel: self.channel,
            first_response_seconds: self.first_response_seconds,
            next_response_seconds: self.next_response_seconds,
            resolution_seconds: self.resolution_seconds,
            business_hours_only: self.business_hours_only,
            warning_threshold_seconds: self.warning_threshold_seconds,
            is_active: self.is_active.unwrap_or(true),
            created_at: now,
            updated_at: now,
        }
    }
}

fn some_target<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    target_seconds(d).map(Some)
}

fn some_warning<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    warning_seconds(d).map(Some)
}

/// Changes apply to conversations and tickets created afterwards; running clocks keep the
/// targets they started with.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"resolutionSeconds": 28800, "isActive": false})))]
pub struct UpdateSlaPolicy {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub name: Option<Name>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<Text>>,
    #[serde(default, deserialize_with = "nullable")]
    pub priority: Option<Option<Priority>>,
    #[serde(default, deserialize_with = "nullable")]
    pub channel: Option<Option<Channel>>,
    #[serde(default, deserialize_with = "some_target")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 31_622_400))]
    pub first_response_seconds: Option<i32>,
    #[serde(default, deserialize_with = "some_target")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 31_622_400))]
    pub next_response_seconds: Option<i32>,
    #[serde(default, deserialize_with = "some_target")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 31_622_400))]
    pub resolution_seconds: Option<i32>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub business_hours_only: Option<bool>,
    #[serde(default, deserialize_with = "some_warning")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 31_622_400))]
    pub warning_threshold_seconds: Option<i32>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_active: Option<bool>,
}

impl UpdateSlaPolicy {
    pub fn apply(self, p: &mut SlaPolicy) {
        if let Some(v) = self.name {
            p.name = v.into();
        }
        if let Some(v) = self.description {
            p.description = v.map(Into::into);
        }
        if let Some(v) = self.priority {
            p.priority = v;
        }
        if let Some(v) = self.channel {
            p.channel = v;
        }
        p.first_response_seconds = self
            .first_response_seconds
            .unwrap_or(p.first_response_seconds);
        p.next_response_seconds = self
            .next_response_seconds
            .unwrap_or(p.next_response_seconds);
        p.resolution_seconds = self.resolution_seconds.unwrap_or(p.resolution_seconds);
        p.business_hours_only = self.business_hours_only.unwrap_or(p.business_hours_only);
        p.warning_threshold_seconds = self
            .warning_threshold_seconds
            .unwrap_or(p.warning_threshold_seconds);
        p.is_active = self.is_active.unwrap_or(p.is_active);
        p.updated_at = Timestamp::now();
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct SlaPolicyFilter {
    pub is_active: Option<bool>,
    pub priority: Option<Priority>,
    pub channel: Option<Channel>,
}

/// The SLA state of a conversation or ticket, as stored and as the API shows it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SlaState {
    pub id: Uuid,
    #[serde(skip)]
    pub organization_id: Uuid,
    pub subject_type: SubjectType,
    /// The conversation or ticket.
    pub subject_id: Uuid,
    pub conversation_id: Option<Uuid>,
    pub ticket_id: Option<Uuid>,
    /// The policy it started from (`null` once that policy is deleted).
    pub sla_policy_id: Option<Uuid>,
    pub priority: Priority,
    pub business_hours_only: bool,
    pub warning_threshold_seconds: i32,
    pub first_response_seconds: i32,
    pub next_response_seconds: i32,
    pub resolution_seconds: i32,
    pub active_target: ActiveTarget,
    /// Seconds to the active target's deadline (negative once past it), as of the request;
    /// while paused, what was left when the clock stopped. `null` when no target is active.
    pub seconds_remaining: Option<i64>,
    pub first_response_deadline: Timestamp,
    pub first_response_at: Option<Timestamp>,
    pub first_response_met: bool,
    pub first_response_breached: bool,
    pub first_response_breached_at: Option<Timestamp>,
    #[serde(skip)]
    pub first_response_warned_at: Option<Timestamp>,
    /// The deadline of the open next-response cycle (a customer message awaiting an agent).
    pub next_response_deadline: Option<Timestamp>,
    #[serde(skip)]
    pub next_response_started_at: Option<Timestamp>,
    pub next_response_at: Option<Timestamp>,
    #[serde(skip)]
    pub next_response_count: i32,
    #[serde(skip)]
    pub next_response_total_seconds: i64,
    pub next_response_met: bool,
    pub next_response_breached: bool,
    pub next_response_breached_at: Option<Timestamp>,
    #[serde(skip)]
    pub next_response_warned_at: Option<Timestamp>,
    pub resolution_deadline: Timestamp,
    pub resolved_at: Option<Timestamp>,
    pub resolution_met: bool,
    pub resolution_breached: bool,
    pub resolution_breached_at: Option<Timestamp>,
    #[serde(skip)]
    pub resolution_warned_at: Option<Timestamp>,
    pub paused_at: Option<Timestamp>,
    pub total_paused_seconds: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// What a check found: a warning given or a breach recorded, with the deadline it concerns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Finding {
    pub target: SlaTarget,
    pub kind: CheckKind,
    pub deadline: Timestamp,
}

/// The fields of one target, to read and write them alike.
struct TargetFields<'a> {
    deadline: Option<Timestamp>,
    achieved: bool,
    warned_at: &'a mut Option<Timestamp>,
    breached_at: &'a mut Option<Timestamp>,
}

impl SlaState {
    /// A new state for a subject created at `at` under `policy`, its deadlines on `clock`.
    pub fn start(
        policy: &SlaPolicy,
        subject: SubjectType,
        subject_id: Uuid,
        priority: Priority,
        at: Timestamp,
        clock: &Clock,
    ) -> SlaState {
        let (conversation_id, ticket_id) = match subject {
            SubjectType::Conversation => (Some(subject_id), None),
            SubjectType::Ticket => (None, Some(subject_id)),
        };
        let deadline =
            |secs: i32| Timestamp(clock.add(at.0, chrono::Duration::seconds(i64::from(secs))));
        let mut s = SlaState {
            id: parley_types::ids::new_id(),
            organization_id: policy.organization_id,
            subject_type: subject,
            subject_id,
            conversation_id,
            ticket_id,
            sla_policy_id: Some(policy.id),
            priority,
            business_hours_only: policy.business_hours_only,
            warning_threshold_seconds: policy.warning_threshold_seconds,
            first_response_seconds: policy.first_response_seconds,
            next_response_seconds: policy.next_response_seconds,
            resolution_seconds: policy.resolution_seconds,
            active_target: ActiveTarget::FirstResponse,
            seconds_remaining: None,
            first_response_deadline: deadline(policy.first_response_seconds),
            first_response_at: None,
            first_response_met: false,
            first_response_breached: false,
            first_response_breached_at: None,
            first_response_warned_at: None,
            next_response_deadline: None,
            next_response_started_at: None,
            next_response_at: None,
            next_response_count: 0,
            next_response_total_seconds: 0,
            next_response_met: false,
            next_response_breached: false,
            next_response_breached_at: None,
            next_response_warned_at: None,
            resolution_deadline: deadline(policy.resolution_seconds),
            resolved_at: None,
            resolution_met: false,
            resolution_breached: false,
            resolution_breached_at: None,
            resolution_warned_at: None,
            paused_at: None,
            total_paused_seconds: 0,
            created_at: at,
            updated_at: at,
        };
        s.finish(at);
        s
    }

    fn target(&mut self, t: SlaTarget) -> TargetFields<'_> {
        match t {
            SlaTarget::FirstResponse => TargetFields {
                deadline: Some(self.first_response_deadline),
                achieved: self.first_response_at.is_some(),
                warned_at: &mut self.first_response_warned_at,
                breached_at: &mut self.first_response_breached_at,
            },
            SlaTarget::NextResponse => TargetFields {
                deadline: self
                    .next_response_started_at
                    .and(self.next_response_deadline),
                achieved: false,
                warned_at: &mut self.next_response_warned_at,
                breached_at: &mut self.next_response_breached_at,
            },
            SlaTarget::Resolution => TargetFields {
                deadline: Some(self.resolution_deadline),
                achieved: self.resolved_at.is_some(),
                warned_at: &mut self.resolution_warned_at,
                breached_at: &mut self.resolution_breached_at,
            },
        }
    }

    /// The targets with a breach recorded.
    pub fn breached_targets(&self) -> Vec<SlaTarget> {
        [
            (SlaTarget::FirstResponse, self.first_response_breached_at),
            (SlaTarget::NextResponse, self.next_response_breached_at),
            (SlaTarget::Resolution, self.resolution_breached_at),
        ]
        .into_iter()
        .filter_map(|(t, at)| at.map(|_| t))
        .collect()
    }

    /// Whether a deadline has passed at `now`: while paused, whether it had when the clock
    /// stopped.
    fn past(&self, deadline: Timestamp, now: Timestamp) -> bool {
        self.paused_at.unwrap_or(now) > deadline
    }

    /// Fills the derived fields (`...Met`, `...Breached`, `activeTarget`,
    /// `secondsRemaining`) as of `now`.
    pub fn finish(&mut self, now: Timestamp) {
        self.subject_id = self.conversation_id.or(self.ticket_id).unwrap_or_default();
        self.first_response_breached = self.first_response_breached_at.is_some();
        self.first_response_met = self.first_response_at.is_some() && !self.first_response_breached;
        self.next_response_breached = self.next_response_breached_at.is_some();
        self.next_response_met = self.next_response_count > 0 && !self.next_response_breached;
        self.resolution_breached = self.resolution_breached_at.is_some();
        self.resolution_met = self.resolved_at.is_some() && !self.resolution_breached;
        let (active, deadline) = if self.resolved_at.is_some() {
            (ActiveTarget::None, None)
        } else if self.first_response_at.is_none() {
            (
                ActiveTarget::FirstResponse,
                Some(self.first_response_deadline),
            )
        } else if self.next_response_started_at.is_some() {
            (ActiveTarget::NextResponse, self.next_response_deadline)
        } else {
            (ActiveTarget::Resolution, Some(self.resolution_deadline))
        };
        self.active_target = active;
        let from = self.paused_at.unwrap_or(now);
        self.seconds_remaining = deadline.map(|d| (d.0 - from.0).num_seconds());
    }

    /// Records `target` achieved at `now`: breached then and there if it is late and no
    /// breach was recorded yet.
    fn achieve(&mut self, target: SlaTarget, now: Timestamp) {
        let Some(deadline) = self.target(target).deadline else {
            return;
        };
        let late = self.past(deadline, now);
        let f = self.target(target);
        if late && f.breached_at.is_none() {
            *f.breached_at = Some(now);
        }
    }

    /// An agent answered: the first response, or the close of an open next-response cycle.
    pub fn agent_replied(&mut self, now: Timestamp) {
        if self.resolved_at.is_some() {
            return;
        }
        if self.first_response_at.is_none() {
            self.achieve(SlaTarget::FirstResponse, now);
            self.first_response_at = Some(now);
        } else if let Some(started) = self.next_response_started_at {
            self.achieve(SlaTarget::NextResponse, now);
            self.next_response_count += 1;
            self.next_response_total_seconds += (now.0 - started.0).num_seconds().max(0);
            self.next_response_at = Some(now);
            self.next_response_started_at = None;
            self.next_response_deadline = None;
        }
        self.finish(now);
    }

    /// The customer wrote: after the first response, this opens a next-response cycle unless
    /// one is open.
    pub fn customer_wrote(&mut self, now: Timestamp, clock: &Clock) {
        if self.resolved_at.is_some()
            || self.first_response_at.is_none()
            || self.next_response_started_at.is_some()
        {
            return;
        }
        // While paused the cycle's clock starts when the clock resumes.
        let from = self.paused_at.unwrap_or(now);
        self.next_response_started_at = Some(now);
        let target = chrono::Duration::seconds(i64::from(self.next_response_seconds));
        self.next_response_deadline = Some(Timestamp(clock.add(from.0, target)));
        self.next_response_warned_at = None;
        self.finish(now);
    }

    /// Stops the clock.
    pub fn pause(&mut self, now: Timestamp) {
        if self.paused_at.is_none() && self.resolved_at.is_none() {
            self.paused_at = Some(now);
        }
        self.finish(now);
    }

    /// Restarts the clock: every deadline not yet passed when it stopped moves by the working
    /// time the pause took.
    pub fn resume(&mut self, now: Timestamp, clock: &Clock) {
        let Some(paused) = self.paused_at.take() else {
            return;
        };
        self.total_paused_seconds += (now.0 - paused.0).num_seconds().max(0);
        let moved = |deadline: Timestamp| {
            if deadline <= paused {
                return deadline;
            }
            Timestamp(clock.add(now.0, clock.between(paused.0, deadline.0)))
        };
        self.first_response_deadline = moved(self.first_response_deadline);
        self.next_response_deadline = self.next_response_deadline.map(moved);
        self.resolution_deadline = moved(self.resolution_deadline);
        self.finish(now);
    }

    /// Resolved (or closed, whichever comes first): the clock stops for good.
    pub fn resolve(&mut self, now: Timestamp, clock: &Clock) {
        if self.resolved_at.is_some() {
            return;
        }
        self.resume(now, clock);
        self.achieve(SlaTarget::Resolution, now);
        self.resolved_at = Some(now);
        self.next_response_started_at = None;
        self.finish(now);
    }

    /// The warning time of a deadline, when the policy asks for warnings.
    fn warning_at(&self, deadline: Timestamp) -> Option<Timestamp> {
        (self.warning_threshold_seconds > 0).then(|| {
            Timestamp(
                deadline.0 - chrono::Duration::seconds(i64::from(self.warning_threshold_seconds)),
            )
        })
    }

    /// A target's deadline while it is still to be achieved and has not breached, and whether
    /// its warning was given.
    fn open(&mut self, target: SlaTarget) -> Option<(Timestamp, bool)> {
        let f = self.target(target);
        let deadline = f
            .deadline
            .filter(|_| !f.achieved && f.breached_at.is_none())?;
        Some((deadline, f.warned_at.is_some()))
    }

    /// The checks this state needs: a deadline (and warning) check for every target still to
    /// be achieved that has not breached; none while paused or once resolved.
    pub fn checks(&mut self) -> Vec<(SlaTarget, CheckKind, Timestamp)> {
        let mut out = Vec::new();
        if self.paused_at.is_some() || self.resolved_at.is_some() {
            return out;
        }
        for target in SlaTarget::ALL {
            let Some((deadline, warned)) = self.open(*target) else {
                continue;
            };
            out.push((*target, CheckKind::Deadline, deadline));
            if let (Some(at), false) = (self.warning_at(deadline), warned) {
                out.push((*target, CheckKind::Warning, at));
            }
        }
        out
    }

    /// Runs the checks of `due` (target, kind) at `now`: gives the warnings and records the
    /// breaches whose time has come. A check whose deadline has moved, or whose target was
    /// met, finds nothing.
    pub fn run_checks(&mut self, due: &[(SlaTarget, CheckKind)], now: Timestamp) -> Vec<Finding> {
        let mut found = Vec::new();
        if self.paused_at.is_some() || self.resolved_at.is_some() {
            return found;
        }
        for (target, kind) in due {
            let Some((deadline, _)) = self.open(*target) else {
                continue;
            };
            let when = match kind {
                CheckKind::Deadline => Some(deadline),
                CheckKind::Warning => self.warning_at(deadline),
            };
            if when.is_none_or(|w| w > now) {
                continue;
            }
            let f = self.target(*target);
            let slot = match kind {
                CheckKind::Deadline => f.breached_at,
                CheckKind::Warning => f.warned_at,
            };
            if slot.is_none() {
                *slot = Some(now);
                found.push(Finding {
                    target: *target,
                    kind: *kind,
                    deadline,
                });
            }
        }
        self.finish(now);
        found
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct SlaStatsQuery {
    /// Count SLA states started at or after this time.
    pub from: Option<Timestamp>,
    /// Count SLA states started before this time. A `to` not after `from` is an empty range:
    /// every count is 0.
    pub to: Option<Timestamp>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TargetStats {
    pub met: i64,
    pub breached: i64,
    /// Average seconds from the start to the achievement (for next response: from the
    /// customer's message to the agent's answer); `null` when none was achieved.
    pub avg_seconds: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct OutcomeStats {
    pub total: i64,
    /// Resolved without a breach.
    pub met: i64,
    /// At least one target breached.
    pub breached: i64,
    pub in_progress: i64,
    /// `met / (met + breached)`; 0 when both are 0.
    pub compliance_rate: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SlaStats {
    #[serde(flatten)]
    pub outcome: OutcomeStats,
    pub first_response: TargetStats,
    pub next_response: TargetStats,
    pub resolution: TargetStats,
    /// The same figures per priority (`low`, `medium`, `high`, `urgent`).
    pub by_priority: std::collections::BTreeMap<String, OutcomeStats>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> SlaPolicy {
        CreateSlaPolicy {
            name: Name::parse("P").unwrap(),
            description: None,
            priority: None,
            channel: None,
            first_response_seconds: 60,
            next_response_seconds: 120,
            resolution_seconds: 600,
            business_hours_only: false,
            warning_threshold_seconds: 10,
            is_active: None,
        }
        .into_policy(Uuid::now_v7())
    }

    fn t(secs: i64) -> Timestamp {
        Timestamp(chrono::DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap())
    }

    fn state() -> SlaState {
        SlaState::start(
            &policy(),
            SubjectType::Ticket,
            Uuid::now_v7(),
            Priority::High,
            t(0),
            &Clock::Wall,
        )
    }

    #[test]
    fn a_reply_in_time_meets_and_a_late_one_breaches() {
        let mut s = state();
        s.agent_replied(t(30));
        assert!(s.first_response_met && !s.first_response_breached);
        let mut s = state();
        s.agent_replied(t(61));
        assert!(!s.first_response_met && s.first_response_breached);
        assert_eq!(s.first_response_breached_at, Some(t(61)));
    }

    #[test]
    fn customer_messages_open_next_response_cycles() {
        let mut s = state();
        s.customer_wrote(t(5), &Clock::Wall);
        assert_eq!(
            s.next_response_deadline, None,
            "before the first response nothing opens"
        );
        s.agent_replied(t(10));
        s.customer_wrote(t(20), &Clock::Wall);
        assert_eq!(s.active_target, ActiveTarget::NextResponse);
        assert_eq!(s.next_response_deadline, Some(t(140)));
        s.agent_replied(t(50));
        assert!(s.next_response_met);
        assert_eq!(
            (s.next_response_count, s.next_response_total_seconds),
            (1, 30)
        );
        assert_eq!(s.active_target, ActiveTarget::Resolution);
    }

    #[test]
    fn a_pause_moves_deadlines_by_its_length() {
        let mut s = state();
        s.pause(t(20));
        assert!(s.checks().is_empty());
        assert_eq!(s.seconds_remaining, Some(40));
        s.resume(t(120), &Clock::Wall);
        assert_eq!(s.first_response_deadline, t(160));
        assert_eq!(s.resolution_deadline, t(700));
        assert_eq!(s.total_paused_seconds, 100);
    }

    #[test]
    fn checks_warn_then_breach_and_find_nothing_once_met() {
        let mut s = state();
        let due = [(SlaTarget::FirstResponse, CheckKind::Warning)];
        assert!(s.run_checks(&due, t(49)).is_empty(), "too early");
        assert_eq!(s.run_checks(&due, t(50)).len(), 1);
        assert!(s.run_checks(&due, t(51)).is_empty(), "warned once");
        let due = [(SlaTarget::FirstResponse, CheckKind::Deadline)];
        let found = s.run_checks(&due, t(62));
        assert_eq!(
            found,
            vec![Finding {
                target: SlaTarget::FirstResponse,
                kind: CheckKind::Deadline,
                deadline: t(60)
            }]
        );
        assert!(
            s.checks()
                .iter()
                .all(|(target, _, _)| *target != SlaTarget::FirstResponse)
        );
        let mut met = state();
        met.agent_replied(t(10));
        assert!(met.run_checks(&due, t(62)).is_empty());
    }

    #[test]
    fn resolving_stops_every_check() {
        let mut s = state();
        assert_eq!(s.checks().len(), 4);
        s.resolve(t(100), &Clock::Wall);
        assert!(s.resolution_met);
        assert!(s.checks().is_empty());
        assert_eq!(s.active_target, ActiveTarget::None);
    }
}

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

/// One target's clock: the seconds its policy gives, when it falls due, and when its warning
/// was given and its breach recorded. The arithmetic of one target lives here; [`SlaState`]
/// holds three and knows which is active.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetClock {
    pub seconds: i32,
    /// When it falls due; `None` for next response while no customer message awaits an answer.
    pub deadline: Option<Timestamp>,
    pub warned_at: Option<Timestamp>,
    pub breached_at: Option<Timestamp>,
}

impl TargetClock {
    /// A target of `seconds`, due that many working seconds on `clock` after `from`.
    fn due_after(seconds: i32, from: Timestamp, clock: &Clock) -> TargetClock {
        TargetClock {
            seconds,
            deadline: Some(Timestamp(
                clock.add(from.0, chrono::Duration::seconds(i64::from(seconds))),
            )),
            warned_at: None,
            breached_at: None,
        }
    }

    pub fn breached(&self) -> bool {
        self.breached_at.is_some()
    }

    /// Its deadline while it is still to be achieved and has not breached, and whether its
    /// warning was given.
    fn open(&self, achieved: bool) -> Option<(Timestamp, bool)> {
        let deadline = self.deadline.filter(|_| !achieved && !self.breached())?;
        Some((deadline, self.warned_at.is_some()))
    }

    /// Achieved at `now`: breached then and there if it is late (as of `stopped_at` while the
    /// clock is stopped) and no breach was recorded yet.
    fn achieve(&mut self, now: Timestamp, stopped_at: Option<Timestamp>) {
        let late = self.deadline.is_some_and(|d| stopped_at.unwrap_or(now) > d);
        if late && self.breached_at.is_none() {
            self.breached_at = Some(now);
        }
    }

    /// After a pause from `paused` to `now`: a deadline not yet passed when the clock stopped
    /// moves by the working time the pause took.
    fn resume(&mut self, paused: Timestamp, now: Timestamp, clock: &Clock) {
        self.deadline = self.deadline.map(|d| {
            if d <= paused {
                d
            } else {
                Timestamp(clock.add(now.0, clock.between(paused.0, d.0)))
            }
        });
    }

    /// The time of a check of `kind` of an open `deadline`: the deadline, or `threshold`
    /// seconds before it (no warning when the threshold is 0).
    fn check_at(deadline: Timestamp, kind: CheckKind, threshold: i32) -> Option<Timestamp> {
        match kind {
            CheckKind::Deadline => Some(deadline),
            CheckKind::Warning => (threshold > 0)
                .then(|| Timestamp(deadline.0 - chrono::Duration::seconds(i64::from(threshold)))),
        }
    }

    /// Runs a check of `kind` at `now` while the target is open: gives the warning or records
    /// the breach once its time has come. Returns the deadline when it did.
    fn check(
        &mut self,
        kind: CheckKind,
        achieved: bool,
        now: Timestamp,
        threshold: i32,
    ) -> Option<Timestamp> {
        let (deadline, _) = self.open(achieved)?;
        if Self::check_at(deadline, kind, threshold).is_none_or(|at| at > now) {
            return None;
        }
        let slot = match kind {
            CheckKind::Deadline => &mut self.breached_at,
            CheckKind::Warning => &mut self.warned_at,
        };
        if slot.is_some() {
            return None;
        }
        *slot = Some(now);
        Some(deadline)
    }
}

/// The SLA state of a conversation or ticket, as stored. The API shows it flat
/// ([`SlaStateView`]: `firstResponseDeadline`, `firstResponseMet`, ...).
#[derive(Debug, Clone, Serialize)]
#[serde(into = "SlaStateView")]
pub struct SlaState {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub subject_type: SubjectType,
    /// The conversation or ticket.
    pub subject_id: Uuid,
    pub conversation_id: Option<Uuid>,
    pub ticket_id: Option<Uuid>,
    /// The policy it started from (`None` once that policy is deleted).
    pub sla_policy_id: Option<Uuid>,
    pub priority: Priority,
    pub business_hours_only: bool,
    pub warning_threshold_seconds: i32,
    pub first_response: TargetClock,
    pub first_response_at: Option<Timestamp>,
    /// The open cycle's clock: its deadline is set while a customer message awaits an agent.
    pub next_response: TargetClock,
    pub next_response_cycles: ResponseCycles,
    pub resolution: TargetClock,
    pub resolved_at: Option<Timestamp>,
    pub paused_at: Option<Timestamp>,
    pub total_paused_seconds: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Derived by [`SlaState::finish`] as of the request.
    pub active_target: ActiveTarget,
    /// Seconds to the active target's deadline (negative once past it) as of the request;
    /// while paused, what was left when the clock stopped.
    pub seconds_remaining: Option<i64>,
}

/// The next-response cycles of a state: each customer message after an answer opens one, the
/// next agent answer closes it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ResponseCycles {
    /// When the open cycle started (`None`: no cycle open).
    pub started_at: Option<Timestamp>,
    /// When the last cycle was closed.
    pub answered_at: Option<Timestamp>,
    pub count: i32,
    pub total_seconds: i64,
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
            first_response: TargetClock::due_after(policy.first_response_seconds, at, clock),
            first_response_at: None,
            next_response: TargetClock {
                seconds: policy.next_response_seconds,
                deadline: None,
                warned_at: None,
                breached_at: None,
            },
            next_response_cycles: ResponseCycles::default(),
            resolution: TargetClock::due_after(policy.resolution_seconds, at, clock),
            resolved_at: None,
            paused_at: None,
            total_paused_seconds: 0,
            created_at: at,
            updated_at: at,
            active_target: ActiveTarget::FirstResponse,
            seconds_remaining: None,
        };
        s.finish(at);
        s
    }

    pub fn clock(&self, t: SlaTarget) -> &TargetClock {
        match t {
            SlaTarget::FirstResponse => &self.first_response,
            SlaTarget::NextResponse => &self.next_response,
            SlaTarget::Resolution => &self.resolution,
        }
    }

    fn clock_mut(&mut self, t: SlaTarget) -> &mut TargetClock {
        match t {
            SlaTarget::FirstResponse => &mut self.first_response,
            SlaTarget::NextResponse => &mut self.next_response,
            SlaTarget::Resolution => &mut self.resolution,
        }
    }

    /// Whether the target is achieved for now: first response given, no next-response cycle
    /// open, resolved.
    fn achieved(&self, t: SlaTarget) -> bool {
        match t {
            SlaTarget::FirstResponse => self.first_response_at.is_some(),
            SlaTarget::NextResponse => self.next_response_cycles.started_at.is_none(),
            SlaTarget::Resolution => self.resolved_at.is_some(),
        }
    }

    /// Met: achieved (for next response, at least one cycle closed) without a breach.
    pub fn met(&self, t: SlaTarget) -> bool {
        let achieved = match t {
            SlaTarget::NextResponse => self.next_response_cycles.count > 0,
            _ => self.achieved(t),
        };
        achieved && !self.clock(t).breached()
    }

    /// The targets with a breach recorded.
    pub fn breached_targets(&self) -> Vec<SlaTarget> {
        SlaTarget::ALL
            .iter()
            .copied()
            .filter(|t| self.clock(*t).breached())
            .collect()
    }

    /// Fills what is derived as of `now`: the active target and the seconds left to it.
    pub fn finish(&mut self, now: Timestamp) {
        self.subject_id = self.conversation_id.or(self.ticket_id).unwrap_or_default();
        let (active, deadline) = if self.resolved_at.is_some() {
            (ActiveTarget::None, None)
        } else if self.first_response_at.is_none() {
            (ActiveTarget::FirstResponse, self.first_response.deadline)
        } else if self.next_response_cycles.started_at.is_some() {
            (ActiveTarget::NextResponse, self.next_response.deadline)
        } else {
            (ActiveTarget::Resolution, self.resolution.deadline)
        };
        self.active_target = active;
        let from = self.paused_at.unwrap_or(now);
        self.seconds_remaining = deadline.map(|d| (d.0 - from.0).num_seconds());
    }

    /// An agent answered: the first response, or the close of an open next-response cycle.
    pub fn agent_replied(&mut self, now: Timestamp) {
        if self.resolved_at.is_some() {
            return;
        }
        if self.first_response_at.is_none() {
            self.first_response.achieve(now, self.paused_at);
            self.first_response_at = Some(now);
        } else if let Some(started) = self.next_response_cycles.started_at {
            self.next_response.achieve(now, self.paused_at);
            let cycles = &mut self.next_response_cycles;
            cycles.count += 1;
            cycles.total_seconds += (now.0 - started.0).num_seconds().max(0);
            cycles.answered_at = Some(now);
            cycles.started_at = None;
            self.next_response.deadline = None;
        }
        self.finish(now);
    }

    /// The customer wrote: after the first response, this opens a next-response cycle unless
    /// one is open.
    pub fn customer_wrote(&mut self, now: Timestamp, clock: &Clock) {
        if self.resolved_at.is_some()
            || self.first_response_at.is_none()
            || self.next_response_cycles.started_at.is_some()
        {
            return;
        }
        // While paused the cycle's clock starts when the clock resumes.
        let from = self.paused_at.unwrap_or(now);
        self.next_response_cycles.started_at = Some(now);
        let breached_at = self.next_response.breached_at;
        self.next_response = TargetClock {
            breached_at,
            ..TargetClock::due_after(self.next_response.seconds, from, clock)
        };
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
        for t in SlaTarget::ALL {
            self.clock_mut(*t).resume(paused, now, clock);
        }
        self.finish(now);
    }

    /// Resolved (or closed, whichever comes first): the clock stops for good.
    pub fn resolve(&mut self, now: Timestamp, clock: &Clock) {
        if self.resolved_at.is_some() {
            return;
        }
        self.resume(now, clock);
        self.resolution.achieve(now, self.paused_at);
        self.resolved_at = Some(now);
        self.next_response_cycles.started_at = None;
        self.finish(now);
    }

    /// The checks this state needs: a deadline (and warning) check for every target still to
    /// be achieved that has not breached; none while paused or once resolved.
    pub fn checks(&self) -> Vec<(SlaTarget, CheckKind, Timestamp)> {
        let mut out = Vec::new();
        if self.paused_at.is_some() || self.resolved_at.is_some() {
            return out;
        }
        for target in SlaTarget::ALL {
            let Some((deadline, warned)) = self.clock(*target).open(self.achieved(*target)) else {
                continue;
            };
            out.push((*target, CheckKind::Deadline, deadline));
            let warning =
                TargetClock::check_at(deadline, CheckKind::Warning, self.warning_threshold_seconds);
            if let (Some(at), false) = (warning, warned) {
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
        let threshold = self.warning_threshold_seconds;
        for &(target, kind) in due {
            let achieved = self.achieved(target);
            if let Some(deadline) = self.clock_mut(target).check(kind, achieved, now, threshold) {
                found.push(Finding {
                    target,
                    kind,
                    deadline,
                });
            }
        }
        self.finish(now);
        found
    }
}

/// What a check found: a warning given or a breach recorded, with the deadline it concerns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Finding {
    pub target: SlaTarget,
    pub kind: CheckKind,
    pub deadline: Timestamp,
}

/// The SLA state of a conversation or ticket as the API shows it: each target's fields flat,
/// with what is derived (`...Met`, `...Breached`, `activeTarget`, `secondsRemaining`).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = SlaState))]
#[serde(rename_all = "camelCase")]
pub struct SlaStateView {
    pub id: Uuid,
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
    /// The deadline of the open next-response cycle (a customer message awaiting an agent).
    pub next_response_deadline: Option<Timestamp>,
    pub next_response_at: Option<Timestamp>,
    pub next_response_met: bool,
    pub next_response_breached: bool,
    pub next_response_breached_at: Option<Timestamp>,
    pub resolution_deadline: Timestamp,
    pub resolved_at: Option<Timestamp>,
    pub resolution_met: bool,
    pub resolution_breached: bool,
    pub resolution_breached_at: Option<Timestamp>,
    pub paused_at: Option<Timestamp>,
    pub total_paused_seconds: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl From<SlaState> for SlaStateView {
    fn from(s: SlaState) -> Self {
        let (fr, nr, r) = (
            SlaTarget::FirstResponse,
            SlaTarget::NextResponse,
            SlaTarget::Resolution,
        );
        SlaStateView {
            id: s.id,
            subject_type: s.subject_type,
            subject_id: s.subject_id,
            conversation_id: s.conversation_id,
            ticket_id: s.ticket_id,
            sla_policy_id: s.sla_policy_id,
            priority: s.priority,
            business_hours_only: s.business_hours_only,
            warning_threshold_seconds: s.warning_threshold_seconds,
            first_response_seconds: s.first_response.seconds,
            next_response_seconds: s.next_response.seconds,
            resolution_seconds: s.resolution.seconds,
            active_target: s.active_target,
            seconds_remaining: s.seconds_remaining,
            // Set from the start (`SlaState::start`, and NOT NULL in the table).
            first_response_deadline: s.first_response.deadline.unwrap_or(s.created_at),
            first_response_at: s.first_response_at,
            first_response_met: s.met(fr),
            first_response_breached: s.first_response.breached(),
            first_response_breached_at: s.first_response.breached_at,
            next_response_deadline: s.next_response.deadline,
            next_response_at: s.next_response_cycles.answered_at,
            next_response_met: s.met(nr),
            next_response_breached: s.next_response.breached(),
            next_response_breached_at: s.next_response.breached_at,
            resolution_deadline: s.resolution.deadline.unwrap_or(s.created_at),
            resolved_at: s.resolved_at,
            resolution_met: s.met(r),
            resolution_breached: s.resolution.breached(),
            resolution_breached_at: s.resolution.breached_at,
            paused_at: s.paused_at,
            total_paused_seconds: s.total_paused_seconds,
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}

/// The API documents a state as it shows it.
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for SlaState {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        SlaStateView::schema()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for SlaState {
    fn name() -> std::borrow::Cow<'static, str> {
        SlaStateView::name()
    }

    fn schemas(
        schemas: &mut Vec<(
            String,
            utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
        )>,
    ) {
        SlaStateView::schemas(schemas)
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
        assert!(s.met(SlaTarget::FirstResponse) && !s.first_response.breached());
        let mut s = state();
        s.agent_replied(t(61));
        assert!(!s.met(SlaTarget::FirstResponse) && s.first_response.breached());
        assert_eq!(s.first_response.breached_at, Some(t(61)));
    }

    #[test]
    fn customer_messages_open_next_response_cycles() {
        let mut s = state();
        s.customer_wrote(t(5), &Clock::Wall);
        assert_eq!(
            s.next_response.deadline, None,
            "before the first response nothing opens"
        );
        s.agent_replied(t(10));
        s.customer_wrote(t(20), &Clock::Wall);
        assert_eq!(s.active_target, ActiveTarget::NextResponse);
        assert_eq!(s.next_response.deadline, Some(t(140)));
        s.agent_replied(t(50));
        assert!(s.met(SlaTarget::NextResponse));
        assert_eq!(
            (
                s.next_response_cycles.count,
                s.next_response_cycles.total_seconds
            ),
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
        assert_eq!(s.first_response.deadline, Some(t(160)));
        assert_eq!(s.resolution.deadline, Some(t(700)));
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
        assert!(s.met(SlaTarget::Resolution));
        assert!(s.checks().is_empty());
        assert_eq!(s.active_target, ActiveTarget::None);
    }
}

//! The worker's side of broadcasts: claiming a broadcast for fan-out, writing recipients in
//! slices, claiming recipients for sending, recording outcomes and receipts, finishing, and
//! finding work that a lost job left behind. Every function is safe to run from any number of
//! worker processes at once.

use std::time::Duration;

use sqlx::types::Json;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use parley_domain::Channel;
use parley_domain::ab_tests::{AbSettings, PickedBy, draw};
use parley_domain::broadcasts::{
    BroadcastStatus, Ending, RecipientOutcome, RecipientStatus, SendPriority, SendingTotals,
    TemplateVariables,
};
use parley_domain::segments::SegmentFilter;
use parley_domain::send_rules::{
    FrequencyCap, FrequencyCaps, LocalSend, PastTimePolicy, QuietHours, SendIn, SendPlan,
};
use parley_types::ids::{BroadcastId, OrgId};
use parley_types::time::Timestamp;

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[derive(Debug, Clone, sqlx::FromRow)]
pub struct DispatchState {
    pub organization_id: OrgId,
    pub status: BroadcastStatus,
    pub fanout_done: bool,
    /// The audience is this segment's contacts, not `contact_ids`.
    pub segment_id: Option<Uuid>,
    pub priority: SendPriority,
    /// Some recipients are written already (an earlier job's turn).
    pub fanout_started: bool,
    /// An A/B broadcast: its variants' content is captured too ([`capture_variants`]).
    pub ab_test: bool,
}

/// Takes the broadcast's dispatch lease if it is queued or sending and nobody holds it; a
/// queued broadcast starts sending, with its template's content captured, unless
/// `per_org` broadcasts of its organization (or the number its operator set,
/// [`crate::org_limits`]) are sending already with work to do (one whose recipients are all
/// written and none pending, only `held` or waiting for an A/B winner, does not count) (it stays queued until one
/// ends: [`next_queued`]). `None` when the broadcast is not there, not sendable, waiting for
/// its organization's turn, or held by another dispatcher. Two broadcasts starting in the same
/// instant may both pass the count.
pub async fn begin_dispatch(
    db: impl PgExecutor<'_>,
    id: BroadcastId,
    lease: Duration,
    token: Uuid,
    per_org: i64,
) -> Result<Option<DispatchState>, sqlx::Error> {
    sqlx::query_as!(
        DispatchState,
        r#"UPDATE broadcasts b SET
            dispatch_lease_until = clock_timestamp() + make_interval(secs => $2),
            dispatch_lease_token = $3,
            status = 'sending',
            started_at = coalesce(b.started_at, clock_timestamp()),
            message_body = coalesce(b.message_body, t.body),
            message_subject = coalesce(b.message_subject, b.subject_override, t.subject)
         FROM templates t
         WHERE b.id = $1 AND t.id = b.template_id AND b.status IN ('queued', 'sending')
           AND (b.dispatch_lease_until IS NULL OR b.dispatch_lease_until < clock_timestamp())
           AND (b.status = 'sending'
                OR (SELECT count(*) FROM broadcasts o
                    LEFT JOIN broadcast_totals k ON k.broadcast_id = o.id
                    WHERE o.organization_id = b.organization_id AND o.status = 'sending'
                      AND NOT (o.fanout_done AND coalesce(k.pending, 0) = 0))
                   < coalesce((SELECT l.broadcasts FROM organization_limits l
                               WHERE l.organization_id = b.organization_id), $4::bigint))
         RETURNING b.organization_id AS "organization_id: OrgId", b.status, b.fanout_done,
            b.segment_id,
            b.priority AS "priority: SendPriority",
            (b.fanout_offset > 0 OR b.fanout_after IS NOT NULL) AS "fanout_started!",
            b.ab_test IS NOT NULL AS "ab_test!""#,
        id as _,
        secs(lease),
        token,
        per_org,
    )
    .fetch_optional(db)
    .await
}

/// Captures the content of an A/B broadcast's variants B to D from their templates, as
/// [`begin_dispatch`] does the broadcast's own (variant A): once, when sending starts.
pub async fn capture_variants(db: impl PgExecutor<'_>, id: BroadcastId) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE broadcast_variants v SET
            message_body = coalesce(v.message_body, t.body),
            message_subject = coalesce(v.message_subject, b.subject_override, t.subject)
         FROM templates t, broadcasts b
         WHERE v.broadcast_id = $1 AND v.variant_no > 1 AND b.id = v.broadcast_id
           AND t.id = v.template_id AND v.message_body IS NULL",
        id as _,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// An A/B broadcast's fan-out: the test share (its variant drawn per contact) until the
/// winner is picked, then the rest with the winner.
#[derive(Debug, Clone, Copy)]
struct Split {
    broadcast: Uuid,
    settings: AbSettings,
    winner: Option<i16>,
}

impl Split {
    fn of(
        broadcast: Uuid,
        settings: Option<Json<AbSettings>>,
        winner: Option<i16>,
    ) -> Option<Self> {
        settings.map(|Json(settings)| Split {
            broadcast,
            settings,
            winner,
        })
    }

    /// The contacts of this pass among `contacts`, with their variants.
    fn take(self, contacts: Vec<Uuid>) -> (Vec<Uuid>, Vec<Option<i16>>) {
        let mut taken = Vec::with_capacity(contacts.len());
        let mut variants = Vec::with_capacity(contacts.len());
        for c in contacts {
            let drawn = draw(
                self.broadcast,
                c,
                self.settings.test_percent,
                self.settings.variants as usize,
            );
            let variant = match (self.winner, drawn) {
                (None, Some(v)) => v,
                (Some(w), None) => w,
                _ => continue,
            };
            taken.push(c);
            variants.push(Some(variant));
        }
        (taken, variants)
    }

    /// The test share's pass: its end starts the wait.
    fn testing(this: Option<Self>) -> bool {
        this.is_some_and(|s| s.winner.is_none())
    }

    fn wait_minutes(this: Option<Self>) -> i32 {
        this.map_or(0, |s| s.settings.wait_minutes as i32)
    }
}

/// `contacts` of a slice and their variants (none outside A/B broadcasts).
fn split(ab: Option<Split>, contacts: Vec<Uuid>) -> (Vec<Uuid>, Vec<Option<i16>>) {
    match ab {
        Some(ab) => ab.take(contacts),
        None => {
            let none = vec![None; contacts.len()];
            (contacts, none)
        }
    }
}

/// The organization's broadcast queued longest that no dispatcher holds, its queue time
/// renewed: the caller enqueues its dispatch (a broadcast of the organization ended, so one
/// waiting for a sending spot may start).
pub async fn next_queued(
    db: impl PgExecutor<'_>,
    org: OrgId,
) -> Result<Option<BroadcastId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"UPDATE broadcasts SET queued_at = clock_timestamp()
         WHERE id = (
            SELECT id FROM broadcasts
            WHERE organization_id = $1 AND status = 'queued'
              AND (dispatch_lease_until IS NULL OR dispatch_lease_until < clock_timestamp())
            ORDER BY queued_at LIMIT 1 FOR UPDATE SKIP LOCKED)
         RETURNING id AS "id: BroadcastId""#,
        org as _,
    )
    .fetch_optional(db)
    .await
}

/// Gives the lease up, if `token` still holds it. `handed_on`: a new dispatch job is about
/// to take over (a turn ended), so the queue time is renewed and the reconciler does not take
/// the unfinished fan-out for lost meanwhile.
pub async fn end_dispatch_turn(
    db: impl PgExecutor<'_>,
    id: BroadcastId,
    token: Uuid,
    handed_on: bool,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE broadcasts SET dispatch_lease_until = NULL, dispatch_lease_token = NULL,
            queued_at = CASE WHEN $3 THEN clock_timestamp() ELSE queued_at END
         WHERE id = $1 AND dispatch_lease_token = $2",
        id as _,
        token,
        handed_on,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Writes recipient rows for the next `slice` contacts of the audience (the API checked that
/// they are the organization's and removed repeats; one deleted since is skipped at sending),
/// advances the fan-out and renews the lease. Returns the new recipients' ids and whether the
/// audience is done; or `None`, writing nothing, when `token` no longer holds the lease (it ran
/// out and another dispatcher took it).
///
/// Each call reads the whole `contact_ids` array (Postgres cannot read a slice of a stored
/// array without the rest), so callers take few, large slices: docs/benchmarks.md.
///
/// A slice's transaction holds the broadcast's row `FOR NO KEY UPDATE`, as a fan-out's own
/// update would: it keeps other fan-outs and updates off the row, and lets through the
/// foreign-key checks of writes that reference it (`FOR UPDATE` held back, for the whole
/// slice, every outcome write that added a counter shard of the broadcast).
pub async fn fan_out(
    tx: &mut PgConnection,
    id: BroadcastId,
    org: OrgId,
    slice: i32,
    lease: Duration,
    token: Uuid,
) -> Result<Option<(Vec<Uuid>, bool)>, sqlx::Error> {
    let audience = sqlx::query!(
        r#"SELECT fanout_offset,
                contact_ids[fanout_offset + 1 : fanout_offset + $2] AS "slice!",
                dispatch_lease_token IS NOT DISTINCT FROM $3 AS "holds_lease!",
                ab_test AS "ab_test: Json<AbSettings>", winning_variant
         FROM broadcasts WHERE id = $1 FOR NO KEY UPDATE"#,
        id as _,
        slice,
        token,
    )
    .fetch_one(&mut *tx)
    .await?;
    if !audience.holds_lease {
        return Ok(None);
    }
    let (offset, contacts) = (audience.fanout_offset, audience.slice);
    let next = offset + contacts.len() as i32;
    // A short slice is the audience's end (an exact fit ends with the next, empty one).
    let done = contacts.len() < usize::try_from(slice).unwrap_or(0);
    let ab = Split::of(id.uuid(), audience.ab_test, audience.winning_variant);
    let (contacts, variants) = split(ab, contacts);
    let ids = insert_recipients(tx, org, id, &contacts, &variants).await?;
    sqlx::query!(
        "UPDATE broadcasts SET fanout_offset = $2, fanout_done = $3,
            dispatch_lease_until = clock_timestamp() + make_interval(secs => $4),
            ab_test_ends_at = CASE WHEN $3 AND $5 THEN clock_timestamp() + make_interval(mins => $6)
                                   ELSE ab_test_ends_at END
         WHERE id = $1",
        id as _,
        next,
        done,
        secs(lease),
        Split::testing(ab),
        Split::wait_minutes(ab),
    )
    .execute(&mut *tx)
    .await?;
    Ok(Some((ids, done)))
}

/// Writes a recipient row for each of `contacts`, in their order, enqueued now; returns their
/// ids. No conflict to expect: an audience holds no repeats, and a slice's rows and the
/// progress past them commit together. (`ON CONFLICT DO NOTHING` cost a fifth of the insert.)
async fn insert_recipients(
    tx: &mut sqlx::PgConnection,
    org: OrgId,
    broadcast: BroadcastId,
    contacts: &[Uuid],
    variants: &[Option<i16>],
) -> Result<Vec<Uuid>, sqlx::Error> {
    let ids: Vec<Uuid> = contacts
        .iter()
        .map(|_| parley_types::ids::new_id())
        .collect();
    sqlx::query!(
        "INSERT INTO broadcast_recipients (id, organization_id, broadcast_id, contact_id,
            enqueued_at, variant_no)
         SELECT u.id, $1, $2, u.contact_id, clock_timestamp(), u.variant_no
         FROM unnest($3::uuid[], $4::uuid[], $5::int2[]) WITH ORDINALITY
            AS u(id, contact_id, variant_no, n)
         ORDER BY u.n",
        org as _,
        broadcast as _,
        &ids,
        contacts,
        variants as &[Option<i16>],
    )
    .execute(&mut *tx)
    .await?;
    Ok(ids)
}

/// [`fan_out`] for a broadcast whose audience is a segment: the next `slice` contacts the
/// segment holds, by id after the last written. The segment's filter is read when the first
/// slice is written and kept on the broadcast (`audience_filter`), so a change to the segment
/// during the fan-out does not split the audience between two filters; a change before
/// sending starts is what the broadcast sends to.
pub async fn fan_out_segment(
    tx: &mut PgConnection,
    id: BroadcastId,
    org: OrgId,
    slice: i32,
    lease: Duration,
    token: Uuid,
) -> Result<Option<(Vec<Uuid>, bool)>, sqlx::Error> {
    let b = sqlx::query!(
        r#"SELECT b.fanout_after,
                coalesce(b.audience_filter, s.filter) AS "filter: Json<SegmentFilter>",
                b.audience_filter IS NULL AS "first!",
                b.dispatch_lease_token IS NOT DISTINCT FROM $2 AS "holds_lease!",
                b.ab_test AS "ab_test: Json<AbSettings>", b.winning_variant
         FROM broadcasts b LEFT JOIN segments s ON s.id = b.segment_id
         WHERE b.id = $1 FOR NO KEY UPDATE OF b"#,
        id as _,
        token,
    )
    .fetch_one(&mut *tx)
    .await?;
    if !b.holds_lease {
        return Ok(None);
    }
    // The segment cannot be deleted while a broadcast names it: no filter is a broken row,
    // never "every contact".
    let Some(Json(filter)) = b.filter else {
        return Err(sqlx::Error::Protocol(format!(
            "broadcast {id} names no segment filter"
        )));
    };
    let contacts =
        crate::segments::contacts_after(tx, org.uuid(), &filter, b.fanout_after, i64::from(slice))
            .await?;
    let done = contacts.len() < usize::try_from(slice).unwrap_or(0);
    let last = contacts.last().copied();
    let ab = Split::of(id.uuid(), b.ab_test, b.winning_variant);
    let (contacts, variants) = split(ab, contacts);
    let ids = insert_recipients(tx, org, id, &contacts, &variants).await?;
    sqlx::query!(
        "UPDATE broadcasts SET fanout_after = coalesce($2, fanout_after), fanout_done = $3,
            audience_filter = CASE WHEN $5 THEN $6 ELSE audience_filter END,
            dispatch_lease_until = clock_timestamp() + make_interval(secs => $4),
            ab_test_ends_at = CASE WHEN $3 AND $7 THEN clock_timestamp() + make_interval(mins => $8)
                                   ELSE ab_test_ends_at END
         WHERE id = $1",
        id as _,
        last,
        done,
        secs(lease),
        b.first,
        Json(&filter) as _,
        Split::testing(ab),
        Split::wait_minutes(ab),
    )
    .execute(&mut *tx)
    .await?;
    Ok(Some((ids, done)))
}

/// The next pending recipients of a broadcast after `after` (by id), marked as enqueued now.
pub async fn take_pending(
    db: impl PgExecutor<'_>,
    broadcast: BroadcastId,
    after: Option<Uuid>,
    limit: i64,
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "UPDATE broadcast_recipients SET enqueued_at = clock_timestamp()
         WHERE id IN (
            SELECT id FROM broadcast_recipients
            WHERE broadcast_id = $1 AND status = 'pending' AND id > coalesce($2, '00000000-0000-0000-0000-000000000000'::uuid)
            ORDER BY id LIMIT $3)
         RETURNING id",
        broadcast as _,
        after,
        limit,
    )
    .fetch_all(db)
    .await
}

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
    /// An A/B broadcast: its recipients have variants ([`variant_contents`]).
    pub ab_test: bool,
    /// An operator paused the organization's sending: its recipients are held.
    pub paused: bool,
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

    /// The cap on the broadcast's channel, unless it is `high`.
    pub fn frequency_cap(&self) -> Option<FrequencyCap> {
        (self.priority != SendPriority::High)
            .then(|| self.frequency_caps.of(self.channel))
            .flatten()
    }
}

pub async fn send_context(
    db: impl PgExecutor<'_>,
    id: BroadcastId,
) -> Result<Option<SendContext>, sqlx::Error> {
    sqlx::query_as!(
        SendContext,
        r#"SELECT b.id AS "id: BroadcastId", b.organization_id AS "organization_id: OrgId",
                b.status, b.channel, b.template_id, b.message_body,
                b.message_subject, b.template_variables, b.email_variables,
                b.priority AS "priority: SendPriority", b.send_in AS "send_in: SendIn",
                b.local_time, b.past_time_policy AS "past_time_policy: PastTimePolicy",
                coalesce(b.scheduled_at, b.created_at) AS "scheduled_at!",
                coalesce(b.quiet_hours, o.quiet_hours) AS "quiet_hours: Json<QuietHours>",
                o.frequency_caps AS "frequency_caps: Json<FrequencyCaps>",
                o.working_hours->>'timezone' AS default_zone,
                b.ab_test IS NOT NULL AS "ab_test!",
                o.sending_paused_at IS NOT NULL AS "paused!"
         FROM broadcasts b JOIN organizations o ON o.id = b.organization_id
         WHERE b.id = $1"#,
        id as _,
    )
    .fetch_optional(db)
    .await
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

pub async fn variant_contents(
    db: impl PgExecutor<'_>,
    id: BroadcastId,
) -> Result<Vec<VariantContent>, sqlx::Error> {
    sqlx::query_as!(
        VariantContent,
        r#"SELECT variant_no, template_id, message_body, message_subject,
                template_variables AS "template_variables: Json<TemplateVariables>"
         FROM broadcast_variants WHERE broadcast_id = $1 AND variant_no > 1
         ORDER BY variant_no"#,
        id as _,
    )
    .fetch_all(db)
    .await
}

/// Picks variant `variant_no` as the winner of A/B broadcast `id`, if it is sending or
/// paused, its test share is written and no winner is picked yet: the fan-out starts again
/// for the rest of the audience (the caller enqueues its dispatch). Whether it was picked.
pub async fn pick_variant(
    db: impl PgExecutor<'_>,
    id: BroadcastId,
    variant_no: i16,
    by: PickedBy,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE broadcasts SET winning_variant = $2, variant_picked_at = clock_timestamp(),
            variant_picked_by = $3, fanout_done = false, fanout_offset = 0, fanout_after = NULL,
            queued_at = clock_timestamp()
         WHERE id = $1 AND ab_test IS NOT NULL AND winning_variant IS NULL
           AND ab_test_ends_at IS NOT NULL AND status IN ('sending', 'paused')",
        id as _,
        variant_no,
        by.as_str(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A/B broadcasts sending whose wait ended by `now` (the worker's clock) with no winner:
/// (organization, broadcast), at most `limit`.
pub async fn due_picks(
    db: impl PgExecutor<'_>,
    now: Timestamp,
    limit: i64,
) -> Result<Vec<(OrgId, BroadcastId)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT organization_id AS "organization_id: OrgId", id AS "id: BroadcastId"
         FROM broadcasts
         WHERE ab_test_ends_at <= $1 AND winning_variant IS NULL AND ab_test_ends_at IS NOT NULL
           AND status = 'sending'
         ORDER BY ab_test_ends_at LIMIT $2"#,
        now as _,
        limit,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.organization_id, r.id))
        .collect())
}

pub async fn status(
    db: impl PgExecutor<'_>,
    id: BroadcastId,
) -> Result<Option<BroadcastStatus>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT status AS "status: BroadcastStatus" FROM broadcasts WHERE id = $1"#,
        id as _,
    )
    .fetch_optional(db)
    .await
}

/// A recipient this worker holds for sending, with what its message needs of the contact.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct Claimed {
    pub id: Uuid,
    /// Absent when the contact was deleted since the fan-out.
    pub contact_id: Option<Uuid>,
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
}

/// The recipients among `ids` that are still pending, with what their message needs of the
/// contact. Read only: holding them is the worker's claim (in Redis), and the outcome is
/// written only while a recipient is still pending.
pub async fn pending_for_send(
    db: impl PgExecutor<'_>,
    org: OrgId,
    broadcast: BroadcastId,
    ids: &[Uuid],
) -> Result<Vec<Claimed>, sqlx::Error> {
    // Only the primary key leads to the rows: with the broadcast or the status in the WHERE
    // clause the planner may scan a broadcast-wide index instead, which costs as much as the
    // broadcast is big. The few rows are checked here.
    let rows: Vec<ClaimRow> = sqlx::query_as!(
        ClaimRow,
        r#"SELECT r.broadcast_id AS "broadcast_id: BroadcastId",
                r.status AS "status: RecipientStatus", r.id,
                k.id AS "contact_id?", k.name AS "name?", k.email AS "email?", k.phone AS "phone?",
                k.country AS "country?", k.language AS "language?", k.position AS "position?",
                k.external_id AS "external_id?", co.name AS "company_name?",
                k.do_not_contact AS "do_not_contact?",
                k.messaging_a_opted_out AS "messaging_a_opted_out?", k.timezone AS "timezone?",
                r.send_generation, r.variant_no
         FROM unnest($2::uuid[]) AS u(id)
         JOIN broadcast_recipients r ON r.id = u.id
         LEFT JOIN contacts k ON k.id = r.contact_id AND k.organization_id = $1
         LEFT JOIN companies co ON co.id = k.company_id
         ORDER BY r.id"#,
        org as _,
        ids,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .filter(|r| r.broadcast_id == broadcast && r.status == RecipientStatus::Pending)
        .map(|r| Claimed {
            id: r.id,
            contact_id: r.contact_id,
            name: r.name,
            email: r.email,
            phone: r.phone,
            country: r.country,
            language: r.language,
            position: r.position,
            external_id: r.external_id,
            company_name: r.company_name,
            do_not_contact: r.do_not_contact,
            messaging_a_opted_out: r.messaging_a_opted_out,
            timezone: r.timezone,
            send_generation: r.send_generation,
            variant_no: r.variant_no,
        })
        .collect())
}

/// A row of [`pending_for_send`]: the recipient's broadcast and status, checked here, and what
/// its message needs.
struct ClaimRow {
    broadcast_id: BroadcastId,
    status: RecipientStatus,
    id: Uuid,
    contact_id: Option<Uuid>,
    name: Option<String>,
    email: Option<String>,
    phone: Option<String>,
    country: Option<String>,
    language: Option<String>,
    position: Option<String>,
    external_id: Option<String>,
    company_name: Option<String>,
    do_not_contact: Option<bool>,
    messaging_a_opted_out: Option<bool>,
    timezone: Option<String>,
    send_generation: i32,
    variant_no: Option<i16>,
}

/// Records outcomes in one statement (the counters follow by trigger); a recipient no longer
/// pending keeps the outcome it has. Unsent recipients are not written.
pub async fn record<'a>(
    db: impl PgExecutor<'_>,
    outcomes: impl IntoIterator<Item = &'a (Uuid, RecipientOutcome)>,
) -> Result<(), sqlx::Error> {
    let outcomes: Vec<&(Uuid, RecipientOutcome)> = outcomes
        .into_iter()
        .filter(|(_, o)| *o != RecipientOutcome::Unsent)
        .collect();
    if outcomes.is_empty() {
        return Ok(());
    }
    let n = outcomes.len();
    let (mut ids, mut statuses, mut message_ids, mut codes, mut messages, mut holds) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for (id, outcome) in outcomes {
        let mut hold = None;
        let (status, message_id, code, message) = match outcome {
            RecipientOutcome::Sent { message_id } => {
                (RecipientStatus::Sent, message_id.clone(), None, None)
            }
            RecipientOutcome::Held { until } => {
                hold = *until;
                (RecipientStatus::Held, None, None, None)
            }
            RecipientOutcome::Failed { code, message } => (
                RecipientStatus::Failed,
                None,
                Some(code.clone()),
                Some(message.clone()),
            ),
            RecipientOutcome::Skipped { code, message } => (
                RecipientStatus::Skipped,
                None,
                Some(code.clone()),
                Some(message.clone()),
            ),
            RecipientOutcome::Unsent => continue,
        };
        ids.push(*id);
        statuses.push(status.as_str());
        message_ids.push(message_id);
        codes.push(code);
        messages.push(message);
        holds.push(hold);
    }
    sqlx::query!(
        "UPDATE broadcast_recipients r SET
            status = u.status,
            external_message_id = coalesce(u.message_id, r.external_message_id),
            error_code = u.code,
            error_message = u.message,
            sent_at = CASE WHEN u.status = 'sent' THEN clock_timestamp() ELSE r.sent_at END,
            failed_at = CASE WHEN u.status = 'failed' THEN clock_timestamp() ELSE r.failed_at END,
            hold_until = u.hold_until
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[],
                     $7::timestamptz[])
              AS u(id, status, message_id, code, message, hold_until)
         WHERE r.id = u.id AND r.status = $6",
        &ids,
        &statuses as _,
        &message_ids as _,
        &codes as _,
        &messages as _,
        // As a parameter, so that the only path to the rows is the primary key: with a
        // literal `'pending'` the planner may scan the partial index of pending recipients
        // instead, which looks small in the statistics and holds a whole broadcast while it
        // sends.
        RecipientStatus::Pending.as_str(),
        &holds as &[Option<Timestamp>],
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// A broadcast that is `sending` with its audience written, locked, and its totals read after
/// the lock (in a statement of their own: one statement that waited for the lock would read
/// totals from before the wait, and miss the pending recipients a retry under the lock has
/// just given it). `None` for any other broadcast.
pub async fn lock_sending_totals(
    tx: &mut PgConnection,
    id: BroadcastId,
) -> Result<Option<(OrgId, SendingTotals)>, sqlx::Error> {
    let Some(locked) = sqlx::query!(
        r#"SELECT organization_id AS "organization_id: OrgId",
            (ab_test IS NOT NULL AND winning_variant IS NULL) AS "winner_awaited!"
         FROM broadcasts WHERE id = $1 AND status = 'sending' AND fanout_done
         FOR UPDATE"#,
        id as _,
    )
    .fetch_optional(&mut *tx)
    .await?
    else {
        return Ok(None);
    };
    let totals = sqlx::query!(
        r#"SELECT coalesce(sent, 0)::int8 AS "sent!", coalesce(pending, 0)::int8 AS "pending!",
            coalesce(held, 0)::int8 AS "held!"
         FROM broadcast_totals WHERE broadcast_id = $1"#,
        id as _,
    )
    .fetch_optional(&mut *tx)
    .await?;
    let (sent, pending, held) = totals.map_or((0, 0, 0), |t| (t.sent, t.pending, t.held));
    Ok(Some((
        locked.organization_id,
        SendingTotals {
            sent,
            pending,
            held,
            winner_awaited: locked.winner_awaited,
        },
    )))
}

/// Ends a broadcast locked by [`lock_sending_totals`] as `ending` says.
pub async fn end_sending(
    tx: &mut PgConnection,
    id: BroadcastId,
    ending: Ending,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE broadcasts SET status = $2, error_message = coalesce($3, error_message),
            completed_at = clock_timestamp(),
            dispatch_lease_until = NULL, dispatch_lease_token = NULL
         WHERE id = $1",
        id as _,
        ending.status.as_str(),
        ending.error_message,
    )
    .execute(&mut *tx)
    .await
    .map(|_| ())
}

/// Pauses a sending broadcast on the service's own account.
pub async fn auto_pause(
    db: impl PgExecutor<'_>,
    id: BroadcastId,
    reason: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE broadcasts SET status = 'paused', paused_at = clock_timestamp(), error_message = $2
         WHERE id = $1 AND status = 'sending'",
        id as _,
        reason,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Scheduled broadcasts whose time has come, moved to `queued` (at most `limit`).
pub async fn queue_due(
    db: impl PgExecutor<'_>,
    limit: i64,
) -> Result<Vec<BroadcastId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"UPDATE broadcasts SET status = 'queued', queued_at = clock_timestamp(), send_now = true
         WHERE id IN (
            SELECT id FROM broadcasts WHERE status = 'scheduled' AND scheduled_at <= statement_timestamp()
            ORDER BY scheduled_at LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING id AS "id: BroadcastId""#,
        limit,
    )
    .fetch_all(db)
    .await
}

/// Broadcasts whose dispatch job seems lost: queued for longer than `after`, or sending with
/// an unfinished fan-out and no live dispatcher. Their queue time is renewed.
pub async fn stale_dispatches(
    db: impl PgExecutor<'_>,
    after: Duration,
    limit: i64,
) -> Result<Vec<BroadcastId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"UPDATE broadcasts SET queued_at = clock_timestamp()
         WHERE id IN (
            SELECT id FROM broadcasts
            WHERE status IN ('queued', 'sending')
              AND (dispatch_lease_until IS NULL OR dispatch_lease_until < statement_timestamp())
              AND (status = 'queued' OR NOT fanout_done)
              AND coalesce(queued_at, created_at) < statement_timestamp() - make_interval(secs => $1)
            LIMIT $2 FOR UPDATE SKIP LOCKED)
         RETURNING id AS "id: BroadcastId""#,
        secs(after),
        limit,
    )
    .fetch_all(db)
    .await
}

/// Postgres' clock, which writes `enqueued_at` and the like.
pub async fn now(db: impl PgExecutor<'_>) -> Result<Timestamp, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT statement_timestamp() AS "now!""#)
        .fetch_one(db)
        .await
}

/// Pending recipients of sending broadcasts whose job seems lost: enqueued longer than
/// `after` ago, before `before` when given, and, for a broadcast with jobs still waiting
/// (`waiting`: broadcast and its oldest waiting job's park time; `waiting_else` for any other
/// broadcast, when given), `wait` before that time (a job behind others of its broadcast is
/// late, not lost). Returns (broadcast, recipient). Read only: the caller leaves out those a
/// worker still holds a claim on, and passes the rest to [`requeue`].
pub async fn stale_recipients(
    db: impl PgExecutor<'_>,
    bounds: &StaleBounds,
    limit: i64,
) -> Result<Vec<(BroadcastId, Uuid)>, sqlx::Error> {
    let (broadcasts, since): (Vec<BroadcastId>, Vec<chrono::DateTime<chrono::Utc>>) =
        bounds.waiting.iter().map(|(b, t)| (*b, t.0)).unzip();
    // Every bound is stable within the statement and the broadcast: an index condition of
    // each broadcast's scan (see docs/jobs.md).
    let rows = sqlx::query!(
        r#"SELECT s.broadcast_id AS "broadcast_id!: BroadcastId", s.id AS "id!" FROM broadcasts b
         LEFT JOIN unnest($4::uuid[], $5::timestamptz[]) AS w(broadcast_id, since)
           ON w.broadcast_id = b.id
         CROSS JOIN LATERAL (
            SELECT r.broadcast_id, r.id FROM broadcast_recipients r
            WHERE r.broadcast_id = b.id AND r.status = 'pending'
              AND r.enqueued_at < least(statement_timestamp() - make_interval(secs => $1),
                                        coalesce($3, 'infinity'::timestamptz),
                                        coalesce(coalesce(w.since, $6) - make_interval(secs => $7),
                                                 'infinity'::timestamptz))
            LIMIT $2) s
         WHERE b.status = 'sending'
         LIMIT $2"#,
        secs(bounds.after),
        limit,
        bounds.before,
        &broadcasts as _,
        &since,
        bounds.waiting_else,
        secs(bounds.wait),
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.broadcast_id, r.id)).collect())
}

/// The bounds of [`stale_recipients`].
#[derive(Debug, Clone, Default)]
pub struct StaleBounds {
    pub after: Duration,
    pub before: Option<Timestamp>,
    pub waiting: Vec<(BroadcastId, Timestamp)>,
    pub waiting_else: Option<Timestamp>,
    pub wait: Duration,
}

/// Marks lost recipients (of [`stale_recipients`], still pending and stale) as enqueued
/// again, counting it. One enqueued `max_requeues` times already is failed instead
/// (`attempts_exhausted`): however its outcome fails to be written, it is not sent forever.
pub async fn requeue(
    db: impl PgExecutor<'_>,
    ids: &[Uuid],
    after: Duration,
    max_requeues: i16,
) -> Result<StaleRecipients, sqlx::Error> {
    let rows = sqlx::query!(
        r#"UPDATE broadcast_recipients SET enqueued_at = clock_timestamp(),
            requeues = requeues + 1,
            status = CASE WHEN requeues >= $3 THEN 'failed' ELSE status END,
            failed_at = CASE WHEN requeues >= $3 THEN clock_timestamp() ELSE failed_at END,
            error_code = CASE WHEN requeues >= $3 THEN 'attempts_exhausted' ELSE error_code END,
            error_message = CASE WHEN requeues >= $3
                THEN 'given up: no outcome could be recorded after ' || requeues + 1 || ' tries'
                ELSE error_message END
         WHERE id IN (
            SELECT r.id FROM unnest($1::uuid[]) AS u(id)
            JOIN broadcast_recipients r ON r.id = u.id
            WHERE r.status = 'pending'
              AND r.enqueued_at < statement_timestamp() - make_interval(secs => $2)
            FOR UPDATE OF r SKIP LOCKED)
         RETURNING broadcast_id AS "broadcast_id: BroadcastId", id,
            status AS "status: RecipientStatus""#,
        ids,
        secs(after),
        max_requeues,
    )
    .fetch_all(db)
    .await?;
    let mut out = StaleRecipients::default();
    for r in rows {
        if r.status == RecipientStatus::Pending {
            out.requeued.push((r.broadcast_id, r.id));
        } else {
            out.given_up.push(r.broadcast_id);
        }
    }
    Ok(out)
}

/// What [`requeue`] did: recipients to enqueue again, and the broadcasts of those it gave up
/// (one entry per recipient).
#[derive(Debug, Default)]
pub struct StaleRecipients {
    pub requeued: Vec<(BroadcastId, Uuid)>,
    pub given_up: Vec<BroadcastId>,
}

/// Where a broadcast's jobs take their turn: its organization, and whether it is `high`.
#[derive(Debug, Clone, Copy)]
pub struct BroadcastLane {
    pub organization_id: OrgId,
    pub high: bool,
}

/// The lanes of `broadcasts` (those that exist).
pub async fn lanes(
    db: impl PgExecutor<'_>,
    broadcasts: &[BroadcastId],
) -> Result<std::collections::HashMap<BroadcastId, BroadcastLane>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT id AS "id: BroadcastId", organization_id AS "organization_id: OrgId",
            priority AS "priority: SendPriority"
         FROM broadcasts WHERE id = ANY($1)"#,
        broadcasts as _,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let lane = BroadcastLane {
                organization_id: r.organization_id,
                high: r.priority == SendPriority::High,
            };
            (r.id, lane)
        })
        .collect())
}

/// Held recipients whose time has come by `now` (the worker's clock), at most `limit`, made
/// pending and enqueued now, oldest first: (broadcast, recipient). The caller enqueues them;
/// should that fail, the reconciler finds them as it finds any lost pending recipient.
pub async fn release_held(
    db: impl PgExecutor<'_>,
    now: Timestamp,
    limit: i64,
) -> Result<Vec<(BroadcastId, Uuid)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"UPDATE broadcast_recipients SET status = 'pending', hold_until = NULL,
            enqueued_at = clock_timestamp()
         WHERE id IN (
            SELECT id FROM broadcast_recipients
            WHERE status = 'held' AND hold_until <= $1
            ORDER BY hold_until LIMIT $2 FOR UPDATE SKIP LOCKED)
           AND status = 'held'
         RETURNING broadcast_id AS "broadcast_id: BroadcastId", id"#,
        now as _,
        limit,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.broadcast_id, r.id)).collect())
}

/// Sending broadcasts that are done but not yet ended (an ending check that was missed).
pub async fn done_but_sending(
    db: impl PgExecutor<'_>,
    limit: i64,
) -> Result<Vec<BroadcastId>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT b.id AS "id: BroadcastId" FROM broadcasts b
         LEFT JOIN broadcast_totals k ON k.broadcast_id = b.id
         WHERE b.status = 'sending' AND b.fanout_done AND coalesce(k.pending, 0) = 0
           AND coalesce(k.held, 0) = 0 AND (b.ab_test IS NULL OR b.winning_variant IS NOT NULL)
         LIMIT $1"#,
        limit,
    )
    .fetch_all(db)
    .await
}

/// Retention: deletes up to `limit` recipients of the broadcast that ended longest ago, more
/// than `after` ago, whose recipients are kept; marks it purged once none is left. Its counters
/// and the templates' daily figures stay (the delete trigger leaves them under
/// `parley.keep_counters`). Goes through the recipients' index of that one broadcast, so it
/// costs the rows it deletes whatever the table's size. Returns the rows deleted, and whether a
/// broadcast was found.
pub async fn purge_recipients(
    tx: &mut PgConnection,
    after: Duration,
    limit: i64,
) -> Result<(u64, bool), sqlx::Error> {
    let broadcast = sqlx::query_scalar!(
        "SELECT id FROM broadcasts
         WHERE recipients_purged_at IS NULL AND status IN ('completed', 'failed', 'cancelled')
           AND coalesce(completed_at, cancelled_at, updated_at)
               < now() - make_interval(secs => $1)
         ORDER BY coalesce(completed_at, cancelled_at, updated_at)
         LIMIT 1 FOR UPDATE SKIP LOCKED",
        after.as_secs_f64(),
    )
    .fetch_optional(&mut *tx)
    .await?;
    let Some(broadcast) = broadcast else {
        return Ok((0, false));
    };
    sqlx::query_scalar!("SELECT set_config('parley.keep_counters', 'on', true)")
        .fetch_one(&mut *tx)
        .await?;
    let deleted = sqlx::query!(
        "DELETE FROM broadcast_recipients WHERE id IN (
            SELECT id FROM broadcast_recipients WHERE broadcast_id = $1 LIMIT $2)",
        broadcast,
        limit,
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if deleted < limit as u64 {
        sqlx::query!(
            "UPDATE broadcasts SET recipients_purged_at = clock_timestamp() WHERE id = $1",
            broadcast,
        )
        .execute(&mut *tx)
        .await?;
    }
    Ok((deleted, true))
}

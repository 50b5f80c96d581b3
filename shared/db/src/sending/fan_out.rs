//! The dispatcher's statements: a broadcast's dispatch lease, its audience written as
//! recipients a slice at a time (its A/B split drawn as they are), the recipients taken for
//! send jobs, and an A/B test's winner picked (the ticker finds the tests due in `reconcile`).

use parley_types::ids::ContactId;
use std::time::Duration;

use parley_domain::ab_tests::{AbSettings, PickedBy, draw};
use parley_domain::broadcasts::{BroadcastStatus, SendPriority};
use parley_domain::segments::SegmentFilter;
use parley_types::ids::{BroadcastId, OrgId, RecipientId};
use sqlx::types::Json;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::secs;

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
    broadcast: BroadcastId,
    settings: AbSettings,
    winner: Option<i16>,
}

impl Split {
    fn of(
        broadcast: BroadcastId,
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
                ContactId::from(c),
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
) -> Result<Option<(Vec<RecipientId>, bool)>, sqlx::Error> {
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
    let ab = Split::of(id, audience.ab_test, audience.winning_variant);
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
) -> Result<Vec<RecipientId>, sqlx::Error> {
    let ids: Vec<RecipientId> = contacts.iter().map(|_| RecipientId::generate()).collect();
    sqlx::query!(
        "INSERT INTO broadcast_recipients (id, organization_id, broadcast_id, contact_id,
            enqueued_at, variant_no)
         SELECT u.id, $1, $2, u.contact_id, clock_timestamp(), u.variant_no
         FROM unnest($3::uuid[], $4::uuid[], $5::int2[]) WITH ORDINALITY
            AS u(id, contact_id, variant_no, n)
         ORDER BY u.n",
        org as _,
        broadcast as _,
        &ids as _,
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
) -> Result<Option<(Vec<RecipientId>, bool)>, sqlx::Error> {
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
        crate::segments::contacts_after(tx, org, &filter, b.fanout_after, i64::from(slice)).await?;
    let done = contacts.len() < usize::try_from(slice).unwrap_or(0);
    let last = contacts.last().copied();
    let ab = Split::of(id, b.ab_test, b.winning_variant);
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
    after: Option<RecipientId>,
    limit: i64,
) -> Result<Vec<RecipientId>, sqlx::Error> {
    sqlx::query_scalar!(
        "UPDATE broadcast_recipients SET enqueued_at = clock_timestamp()
         WHERE id IN (
            SELECT id FROM broadcast_recipients
            WHERE broadcast_id = $1 AND status = 'pending' AND id > coalesce($2, '00000000-0000-0000-0000-000000000000'::uuid)
            ORDER BY id LIMIT $3)
         RETURNING id AS \"id: RecipientId\"",
        broadcast as _,
        after as _,
        limit,
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

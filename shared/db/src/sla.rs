//! SLA policies, SLA states with their checks, and SLA statistics.

use parley_types::ids::{OrgId, SlaPolicyId};
use std::collections::HashMap;
use std::time::Duration;

use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::ListQuery;
use parley_domain::business_hours::{Calendar, Clock, WorkingHours};
use parley_domain::sla::{
    CheckKind, Finding, OutcomeStats, ResponseCycles, SlaPolicy, SlaPolicyFilter, SlaState,
    SlaStats, SlaTarget, SubjectType, TargetClock, TargetStats,
};
use parley_domain::{Channel, Priority};
use parley_types::list::{Page, PageRequest};
use parley_types::metric_names::SLA_BREACHES;
use parley_types::time::Timestamp;

pub async fn insert_policy(db: impl PgExecutor<'_>, p: &SlaPolicy) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO sla_policies (id, organization_id, name, description, priority, channel,
            first_response_seconds, next_response_seconds, resolution_seconds,
            business_hours_only, warning_threshold_seconds, is_active, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        p.id,
        p.organization_id,
        &p.name,
        p.description.as_deref(),
        p.priority.map(|v| v.as_str()),
        p.channel.map(|v| v.as_str()),
        p.first_response_seconds,
        p.next_response_seconds,
        p.resolution_seconds,
        p.business_hours_only,
        p.warning_threshold_seconds,
        p.is_active,
        p.created_at,
        p.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update_policy(db: impl PgExecutor<'_>, p: &SlaPolicy) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE sla_policies SET name = $3, description = $4, priority = $5, channel = $6,
            first_response_seconds = $7, next_response_seconds = $8, resolution_seconds = $9,
            business_hours_only = $10, warning_threshold_seconds = $11, is_active = $12,
            updated_at = $13
         WHERE organization_id = $1 AND id = $2",
        p.organization_id,
        p.id,
        &p.name,
        p.description.as_deref(),
        p.priority.map(|v| v.as_str()),
        p.channel.map(|v| v.as_str()),
        p.first_response_seconds,
        p.next_response_seconds,
        p.resolution_seconds,
        p.business_hours_only,
        p.warning_threshold_seconds,
        p.is_active,
        p.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn get_policy(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: SlaPolicyId,
    lock: bool,
) -> Result<Option<SlaPolicy>, sqlx::Error> {
    if lock {
        sqlx::query_as!(
            SlaPolicy,
            "SELECT * FROM sla_policies WHERE organization_id = $1 AND id = $2 FOR UPDATE",
            org.uuid(),
            id.uuid(),
        )
        .fetch_optional(db)
        .await
    } else {
        sqlx::query_as!(
            SlaPolicy,
            "SELECT * FROM sla_policies WHERE organization_id = $1 AND id = $2",
            org.uuid(),
            id.uuid(),
        )
        .fetch_optional(db)
        .await
    }
}

pub async fn delete_policy(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: SlaPolicyId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM sla_policies WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

fn push_policy_filter(qb: &mut QueryBuilder<Postgres>, org: OrgId, f: &SlaPolicyFilter) {
    qb.push(" WHERE p.organization_id = ").push_bind(org);
    if let Some(active) = f.is_active {
        qb.push(" AND p.is_active = ").push_bind(active);
    }
    if let Some(priority) = f.priority {
        qb.push(" AND p.priority = ").push_bind(priority);
    }
    if let Some(channel) = f.channel {
        qb.push(" AND p.channel = ").push_bind(channel);
    }
}

pub async fn list_policies(
    pool: &PgPool,
    org: OrgId,
    f: &SlaPolicyFilter,
    page: &PageRequest,
) -> Result<Page<SlaPolicy>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT p.* FROM sla_policies p".into(),
        count_from: "FROM sla_policies p",
        alias: "p",
    };
    super::page(pool, q, |qb| push_policy_filter(qb, org, f), page).await
}

/// The most specific active policy for a priority and channel: one naming both, then one
/// naming the priority, then one naming the channel, then one naming neither; among equals
/// the oldest.
pub async fn matching_policy(
    db: impl PgExecutor<'_>,
    org: OrgId,
    priority: Priority,
    channel: Channel,
) -> Result<Option<SlaPolicy>, sqlx::Error> {
    sqlx::query_as!(
        SlaPolicy,
        "SELECT * FROM sla_policies
         WHERE organization_id = $1 AND is_active
           AND (priority IS NULL OR priority = $2) AND (channel IS NULL OR channel = $3)
         ORDER BY priority IS NULL, channel IS NULL, created_at, id
         LIMIT 1",
        org.uuid(),
        priority.as_str(),
        channel.as_str(),
    )
    .fetch_optional(db)
    .await
}

/// The organization's business hours, parsed.
pub async fn calendar(
    db: impl PgExecutor<'_>,
    org: OrgId,
) -> Result<Option<Calendar>, sqlx::Error> {
    let hours: Option<sqlx::types::Json<WorkingHours>> = sqlx::query_scalar!(
        r#"SELECT working_hours AS "working_hours: sqlx::types::Json<WorkingHours>"
           FROM organizations WHERE id = $1"#,
        org.uuid(),
    )
    .fetch_optional(db)
    .await?;
    Ok(hours.and_then(|h| h.0.calendar("workingHours").ok()))
}

/// The clock a state counts on: the organization's business hours when its policy says so.
async fn clock(conn: &mut PgConnection, state: &SlaState) -> Result<Clock, sqlx::Error> {
    if !state.business_hours_only {
        return Ok(Clock::Wall);
    }
    Ok(
        match calendar(&mut *conn, OrgId::from(state.organization_id)).await? {
            Some(c) => Clock::Business(c),
            None => {
                tracing::warn!(organization_id = %state.organization_id, "working hours unreadable; SLA counts wall-clock time");
                Clock::Wall
            }
        },
    )
}

/// Starts the SLA of a new conversation or ticket, if a policy applies: the state and its
/// checks, in the caller's transaction.
pub async fn start(
    conn: &mut PgConnection,
    org: OrgId,
    subject: SubjectType,
    subject_id: Uuid,
    priority: Priority,
    channel: Channel,
    at: Timestamp,
) -> Result<Option<SlaState>, sqlx::Error> {
    let Some(policy) = matching_policy(&mut *conn, org, priority, channel).await? else {
        return Ok(None);
    };
    let clock = if policy.business_hours_only {
        calendar(&mut *conn, org)
            .await?
            .map_or(Clock::Wall, Clock::Business)
    } else {
        Clock::Wall
    };
    let mut s = SlaState::start(&policy, subject, subject_id, priority, at, &clock);
    sqlx::query!(
        "INSERT INTO sla_states (id, organization_id, subject_type, conversation_id, ticket_id,
            sla_policy_id, priority, business_hours_only, warning_threshold_seconds,
            first_response_seconds, next_response_seconds, resolution_seconds,
            first_response_deadline, resolution_deadline, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15)",
        s.id,
        s.organization_id,
        s.subject_type.as_str(),
        s.conversation_id,
        s.ticket_id,
        s.sla_policy_id,
        s.priority.as_str(),
        s.business_hours_only,
        s.warning_threshold_seconds,
        s.first_response.seconds,
        s.next_response.seconds,
        s.resolution.seconds,
        s.first_response.deadline,
        s.resolution.deadline,
        s.created_at,
    )
    .execute(&mut *conn)
    .await?;
    sync_checks(conn, &mut s).await?;
    Ok(Some(s))
}

/// The SLA states of these conversations or tickets, by subject id, as of `now`.
pub async fn states_of(
    db: impl PgExecutor<'_>,
    subject: SubjectType,
    ids: &[Uuid],
    now: Timestamp,
) -> Result<HashMap<Uuid, SlaState>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = read(db, Which::Subjects(subject, ids)).await?;
    Ok(rows
        .into_iter()
        .map(|mut s| {
            s.finish(now);
            (s.subject_id, s)
        })
        .collect())
}

/// Which SLA states a statement is about: these, or those of these conversations or tickets.
#[derive(Clone, Copy)]
enum Which<'a> {
    States(&'a [Uuid]),
    Subjects(SubjectType, &'a [Uuid]),
}

impl<'a> Which<'a> {
    /// The state ids, conversation ids and ticket ids to match (two of them empty).
    fn arrays(self) -> [&'a [Uuid]; 3] {
        match self {
            Which::States(ids) => [ids, &[], &[]],
            Which::Subjects(SubjectType::Conversation, ids) => [&[], ids, &[]],
            Which::Subjects(SubjectType::Ticket, ids) => [&[], &[], ids],
        }
    }
}

/// The states `which` names, as stored (`finish` fills what is derived).
async fn read(db: impl PgExecutor<'_>, which: Which<'_>) -> Result<Vec<SlaState>, sqlx::Error> {
    let [states, conversations, tickets] = which.arrays();
    let rows = sqlx::query_as!(
        SlaStateRow,
        "SELECT s.id, s.organization_id, s.subject_type, s.conversation_id, s.ticket_id,
            s.sla_policy_id, s.priority, s.business_hours_only, s.warning_threshold_seconds,
            s.first_response_seconds, s.next_response_seconds, s.resolution_seconds,
            s.first_response_deadline, s.first_response_at, s.first_response_breached_at,
            s.first_response_warned_at, s.next_response_deadline, s.next_response_started_at,
            s.next_response_at, s.next_response_count, s.next_response_total_seconds,
            s.next_response_breached_at, s.next_response_warned_at, s.resolution_deadline,
            s.resolved_at, s.resolution_breached_at, s.resolution_warned_at, s.paused_at,
            s.total_paused_seconds, s.created_at, s.updated_at
         FROM sla_states s
         WHERE s.id = ANY($1) OR s.conversation_id = ANY($2) OR s.ticket_id = ANY($3)",
        states,
        conversations,
        tickets,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(SlaState::from).collect())
}

/// Locks the states `which` names for the rest of the transaction, in id order (so that
/// transactions locking overlapping states cannot deadlock); returns their ids.
async fn lock(conn: &mut PgConnection, which: Which<'_>) -> Result<Vec<Uuid>, sqlx::Error> {
    let [states, conversations, tickets] = which.arrays();
    sqlx::query_scalar!(
        "SELECT id FROM sla_states
         WHERE id = ANY($1) OR conversation_id = ANY($2) OR ticket_id = ANY($3)
         ORDER BY id FOR UPDATE",
        states,
        conversations,
        tickets,
    )
    .fetch_all(conn)
    .await
}

/// Changes the SLA state of a conversation or ticket (when it has one) with `change`, given
/// the state's clock, and stores it with its checks; in the caller's transaction.
pub async fn update(
    conn: &mut PgConnection,
    subject: SubjectType,
    subject_id: Uuid,
    change: impl FnOnce(&mut SlaState, &Clock),
) -> Result<Option<SlaState>, sqlx::Error> {
    let which = Which::Subjects(subject, std::slice::from_ref(&subject_id));
    if lock(&mut *conn, which).await?.is_empty() {
        return Ok(None);
    }
    let Some(mut s) = read(&mut *conn, which).await?.pop() else {
        return Ok(None);
    };
    let clock = clock(conn, &s).await?;
    let before = s.breached_targets();
    change(&mut s, &clock);
    // A target achieved late is breached here rather than by the worker's check.
    for target in s
        .breached_targets()
        .into_iter()
        .filter(|t| !before.contains(t))
    {
        metrics::counter!(SLA_BREACHES, "target" => target.as_str()).increment(1);
    }
    s.updated_at = Timestamp::now();
    save(&mut *conn, &s).await?;
    sync_checks(conn, &mut s).await?;
    Ok(Some(s))
}

async fn save(db: impl PgExecutor<'_>, s: &SlaState) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE sla_states SET priority = $2,
            first_response_deadline = $3, first_response_at = $4, first_response_warned_at = $5,
            first_response_breached_at = $6,
            next_response_deadline = $7, next_response_started_at = $8, next_response_at = $9,
            next_response_count = $10, next_response_total_seconds = $11,
            next_response_warned_at = $12, next_response_breached_at = $13,
            resolution_deadline = $14, resolved_at = $15, resolution_warned_at = $16,
            resolution_breached_at = $17, paused_at = $18, total_paused_seconds = $19,
            updated_at = $20
         WHERE id = $1",
        s.id,
        s.priority.as_str(),
        s.first_response.deadline,
        s.first_response_at,
        s.first_response.warned_at,
        s.first_response.breached_at,
        s.next_response.deadline,
        s.next_response_cycles.started_at,
        s.next_response_cycles.answered_at,
        s.next_response_cycles.count,
        s.next_response_cycles.total_seconds,
        s.next_response.warned_at,
        s.next_response.breached_at,
        s.resolution.deadline,
        s.resolved_at,
        s.resolution.warned_at,
        s.resolution.breached_at,
        s.paused_at,
        s.total_paused_seconds,
        s.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Makes a state's check rows what the state needs: new ones added, moved ones moved (and
/// due to be enqueued again), others deleted.
async fn sync_checks(conn: &mut PgConnection, s: &mut SlaState) -> Result<(), sqlx::Error> {
    let wanted = s.checks();
    let targets: Vec<&str> = wanted.iter().map(|c| c.0.as_str()).collect();
    let kinds: Vec<&str> = wanted.iter().map(|c| c.1.as_str()).collect();
    let due: Vec<Timestamp> = wanted.iter().map(|c| c.2).collect();
    sqlx::query!(
        "DELETE FROM sla_checks c WHERE c.sla_state_id = $1 AND NOT EXISTS (
            SELECT 1 FROM unnest($2::text[], $3::text[]) AS w(target, kind)
            WHERE w.target = c.target AND w.kind = c.kind)",
        s.id,
        &targets as _,
        &kinds as _,
    )
    .execute(&mut *conn)
    .await?;
    if wanted.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "INSERT INTO sla_checks AS c (id, organization_id, sla_state_id, target, kind, due_at)
         SELECT uuid_v7(), $1, $2, w.target, w.kind, w.due_at
         FROM unnest($3::text[], $4::text[], $5::timestamptz[]) AS w(target, kind, due_at)
         ON CONFLICT (sla_state_id, target, kind) DO UPDATE SET
            due_at = excluded.due_at,
            enqueued_at = CASE WHEN c.due_at = excluded.due_at THEN c.enqueued_at END",
        s.organization_id,
        s.id,
        &targets as _,
        &kinds as _,
        &due as _,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Due checks one organization gives to one pass of the SLA scheduler, at most: one job's.
pub const DUE_PER_ORG: i64 = 250;

/// Checks whose time has come by `now` and that no job holds, marked enqueued, oldest first,
/// at most `limit` and at most [`DUE_PER_ORG`] of one organization. With `lost_after`, instead
/// those enqueued longer ago than that (their job was lost with Redis or with a worker).
pub async fn take_due_checks(
    db: impl PgExecutor<'_>,
    limit: i64,
    lost_after: Option<Duration>,
    now: Timestamp,
) -> Result<Vec<Uuid>, sqlx::Error> {
    match lost_after {
        Some(after) => {
            sqlx::query_scalar!(
                "UPDATE sla_checks SET enqueued_at = clock_timestamp() WHERE id IN (
                    SELECT id FROM sla_checks
                    WHERE enqueued_at < statement_timestamp() - make_interval(secs => $2)
                    ORDER BY enqueued_at LIMIT $1 FOR UPDATE SKIP LOCKED)
                 RETURNING id",
                limit,
                after.as_secs_f64(),
            )
            .fetch_all(db)
            .await
        }
        // Fair across organizations: each organization with unenqueued checks is found by a
        // skip scan of the index by organization (one descent each, with its first due time),
        // each gives at most DUE_PER_ORG of its due checks, oldest first, and the oldest of
        // those go. 100,000 deadlines of one organization falling due together no longer go
        // ahead of another's single one.
        None => {
            sqlx::query_scalar!(
                r#"WITH RECURSIVE orgs(org, first_due) AS (
                    (SELECT organization_id, due_at FROM sla_checks WHERE enqueued_at IS NULL
                     ORDER BY organization_id, due_at LIMIT 1)
                    UNION ALL
                    SELECT n.organization_id, n.due_at FROM orgs CROSS JOIN LATERAL (
                        SELECT organization_id, due_at FROM sla_checks
                        WHERE enqueued_at IS NULL AND organization_id > orgs.org
                        ORDER BY organization_id, due_at LIMIT 1) n
                 )
                 UPDATE sla_checks SET enqueued_at = clock_timestamp() WHERE id IN (
                    SELECT d.id FROM orgs CROSS JOIN LATERAL (
                        SELECT id, due_at FROM sla_checks
                        WHERE organization_id = orgs.org AND enqueued_at IS NULL AND due_at <= $2
                        ORDER BY due_at LIMIT $3 FOR UPDATE SKIP LOCKED) d
                    WHERE orgs.first_due <= $2
                    ORDER BY d.due_at LIMIT $1)
                 RETURNING id"#,
                limit,
                now,
                DUE_PER_ORG,
            )
            .fetch_all(db)
            .await
        }
    }
}

/// What a check job found for one state.
pub struct Checked {
    pub state: SlaState,
    pub findings: Vec<Finding>,
}

/// Runs the checks `ids` that are due: warnings given and breaches recorded in their states,
/// the checks deleted, all in `conn`'s transaction. Checks already run, or moved to a later
/// time, are left alone. Returns the states that changed.
pub async fn run_checks(
    conn: &mut PgConnection,
    ids: &[Uuid],
    now: Timestamp,
) -> Result<Vec<Checked>, sqlx::Error> {
    let due: Vec<(Uuid, SlaTarget, CheckKind)> = sqlx::query!(
        "DELETE FROM sla_checks WHERE id IN (
            SELECT c.id FROM unnest($1::uuid[]) AS x(id) JOIN sla_checks c ON c.id = x.id)
           AND due_at <= $2
         RETURNING sla_state_id, target, kind",
        ids,
        now,
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|r| (r.sla_state_id, r.target, r.kind))
    .collect();
    if due.is_empty() {
        return Ok(Vec::new());
    }
    let mut by_state: HashMap<Uuid, Vec<(SlaTarget, CheckKind)>> = HashMap::new();
    for (state, target, kind) in due {
        by_state.entry(state).or_default().push((target, kind));
    }
    let state_ids: Vec<Uuid> = by_state.keys().copied().collect();
    let locked = lock(&mut *conn, Which::States(&state_ids)).await?;
    let states = read(&mut *conn, Which::States(&locked)).await?;
    let mut changed = Vec::new();
    for mut state in states {
        let findings = state.run_checks(&by_state[&state.id], now);
        if !findings.is_empty() {
            changed.push(Checked { state, findings });
        }
    }
    if changed.is_empty() {
        return Ok(changed);
    }
    let col = |f: fn(&SlaState) -> Option<Timestamp>| {
        changed.iter().map(|c| f(&c.state)).collect::<Vec<_>>()
    };
    let ids: Vec<Uuid> = changed.iter().map(|c| c.state.id).collect();
    sqlx::query!(
        "UPDATE sla_states s SET
            first_response_warned_at = u.frw, first_response_breached_at = u.frb,
            next_response_warned_at = u.nrw, next_response_breached_at = u.nrb,
            resolution_warned_at = u.rw, resolution_breached_at = u.rb, updated_at = $8
         FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[],
                     $5::timestamptz[], $6::timestamptz[], $7::timestamptz[])
              AS u(id, frw, frb, nrw, nrb, rw, rb)
         WHERE s.id = u.id",
        &ids,
        col(|s| s.first_response.warned_at) as _,
        col(|s| s.first_response.breached_at) as _,
        col(|s| s.next_response.warned_at) as _,
        col(|s| s.next_response.breached_at) as _,
        col(|s| s.resolution.warned_at) as _,
        col(|s| s.resolution.breached_at) as _,
        now,
    )
    .execute(&mut *conn)
    .await?;
    for c in &mut changed {
        c.state.updated_at = now;
    }
    Ok(changed)
}

/// Checks not yet run: what the ticker has still to move into the queue.
pub async fn checks_backlog(db: impl PgExecutor<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM sla_checks
           WHERE enqueued_at IS NULL AND due_at <= statement_timestamp()"#,
    )
    .fetch_one(db)
    .await
}

/// The figures of the statistics, in the column order of `sla_stats_hourly`.
#[derive(Debug, Default)]
struct Tally {
    priority: String,
    total: i64,
    met: i64,
    breached: i64,
    in_progress: i64,
    fr_met: i64,
    fr_breached: i64,
    fr_count: i64,
    fr_seconds: i64,
    nr_met: i64,
    nr_breached: i64,
    nr_count: i64,
    nr_seconds: i64,
    res_met: i64,
    res_breached: i64,
    res_count: i64,
    res_seconds: i64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.total += o.total;
        self.met += o.met;
        self.breached += o.breached;
        self.in_progress += o.in_progress;
        self.fr_met += o.fr_met;
        self.fr_breached += o.fr_breached;
        self.fr_count += o.fr_count;
        self.fr_seconds += o.fr_seconds;
        self.nr_met += o.nr_met;
        self.nr_breached += o.nr_breached;
        self.nr_count += o.nr_count;
        self.nr_seconds += o.nr_seconds;
        self.res_met += o.res_met;
        self.res_breached += o.res_breached;
        self.res_count += o.res_count;
        self.res_seconds += o.res_seconds;
    }

    fn outcome(&self) -> OutcomeStats {
        let decided = self.met + self.breached;
        OutcomeStats {
            total: self.total,
            met: self.met,
            breached: self.breached,
            in_progress: self.in_progress,
            compliance_rate: if decided == 0 {
                0.0
            } else {
                self.met as f64 / decided as f64
            },
        }
    }
}

fn target(met: i64, breached: i64, count: i64, seconds: i64) -> TargetStats {
    TargetStats {
        met,
        breached,
        avg_seconds: (count > 0).then(|| seconds as f64 / count as f64),
    }
}

/// SLA statistics of the states started in `[from, to)`: whole hours from the hourly figures,
/// the partial hours at either end from the states themselves.
pub async fn stats(
    db: impl PgExecutor<'_>,
    org: OrgId,
    from: Option<Timestamp>,
    to: Option<Timestamp>,
) -> Result<SlaStats, sqlx::Error> {
    // Whole hours from the hourly figures; the edges (states in a partial hour at the start
    // or the end of the range) from the states themselves.
    let rows = sqlx::query_as!(
        Tally,
        r#"SELECT priority AS "priority!", sum(total)::int8 AS "total!", sum(met)::int8 AS "met!",
            sum(breached)::int8 AS "breached!", sum(in_progress)::int8 AS "in_progress!",
            sum(fr_met)::int8 AS "fr_met!", sum(fr_breached)::int8 AS "fr_breached!",
            sum(fr_count)::int8 AS "fr_count!", sum(fr_seconds)::int8 AS "fr_seconds!",
            sum(nr_met)::int8 AS "nr_met!", sum(nr_breached)::int8 AS "nr_breached!",
            sum(nr_count)::int8 AS "nr_count!", sum(nr_seconds)::int8 AS "nr_seconds!",
            sum(res_met)::int8 AS "res_met!", sum(res_breached)::int8 AS "res_breached!",
            sum(res_count)::int8 AS "res_count!", sum(res_seconds)::int8 AS "res_seconds!"
         FROM (
            SELECT h.priority, h.total, h.met, h.breached, h.in_progress, h.fr_met,
                h.fr_breached, h.fr_count, h.fr_seconds, h.nr_met, h.nr_breached, h.nr_count,
                h.nr_seconds, h.res_met, h.res_breached, h.res_count, h.res_seconds
            FROM sla_stats_hourly h
            WHERE h.organization_id = $1
              AND ($2::timestamptz IS NULL OR h.hour >= date_trunc('hour', $2::timestamptz + interval '59 minutes 59.999999 seconds', 'UTC'))
              AND ($3::timestamptz IS NULL OR h.hour + interval '1 hour' <= $3)
            UNION ALL
            SELECT s.priority, t.* FROM sla_states s CROSS JOIN LATERAL sla_tally(s) AS t
            WHERE s.organization_id = $1
              AND ($2::timestamptz IS NULL OR s.created_at >= $2)
              AND ($3::timestamptz IS NULL OR s.created_at < $3)
              AND (($2::timestamptz IS NOT NULL
                    AND s.created_at < date_trunc('hour', $2::timestamptz + interval '59 minutes 59.999999 seconds', 'UTC'))
                OR ($3::timestamptz IS NOT NULL AND s.created_at >= date_trunc('hour', $3::timestamptz, 'UTC')))
         ) u GROUP BY priority"#,
        org.uuid(),
        from as _,
        to as _,
    )
    .fetch_all(db)
    .await?;
    let mut all = Tally::default();
    let mut by_priority: std::collections::BTreeMap<String, Tally> = Priority::ALL
        .iter()
        .map(|p| (p.as_str().to_owned(), Tally::default()))
        .collect();
    for r in &rows {
        all.add(r);
        by_priority.entry(r.priority.clone()).or_default().add(r);
    }
    Ok(SlaStats {
        outcome: all.outcome(),
        first_response: target(all.fr_met, all.fr_breached, all.fr_count, all.fr_seconds),
        next_response: target(all.nr_met, all.nr_breached, all.nr_count, all.nr_seconds),
        resolution: target(
            all.res_met,
            all.res_breached,
            all.res_count,
            all.res_seconds,
        ),
        by_priority: by_priority
            .into_iter()
            .map(|(p, t)| (p, t.outcome()))
            .collect(),
    })
}

/// An SLA state as stored (`SlaState::finish` fills what is derived).
struct SlaStateRow {
    id: Uuid,
    organization_id: Uuid,
    subject_type: SubjectType,
    conversation_id: Option<Uuid>,
    ticket_id: Option<Uuid>,
    sla_policy_id: Option<Uuid>,
    priority: Priority,
    business_hours_only: bool,
    warning_threshold_seconds: i32,
    first_response_seconds: i32,
    next_response_seconds: i32,
    resolution_seconds: i32,
    first_response_deadline: Timestamp,
    first_response_at: Option<Timestamp>,
    first_response_breached_at: Option<Timestamp>,
    first_response_warned_at: Option<Timestamp>,
    next_response_deadline: Option<Timestamp>,
    next_response_started_at: Option<Timestamp>,
    next_response_at: Option<Timestamp>,
    next_response_count: i32,
    next_response_total_seconds: i64,
    next_response_breached_at: Option<Timestamp>,
    next_response_warned_at: Option<Timestamp>,
    resolution_deadline: Timestamp,
    resolved_at: Option<Timestamp>,
    resolution_breached_at: Option<Timestamp>,
    resolution_warned_at: Option<Timestamp>,
    paused_at: Option<Timestamp>,
    total_paused_seconds: i64,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<SlaStateRow> for SlaState {
    fn from(r: SlaStateRow) -> Self {
        let clock = |seconds, deadline, warned_at, breached_at| TargetClock {
            seconds,
            deadline,
            warned_at,
            breached_at,
        };
        Self {
            id: r.id,
            organization_id: r.organization_id,
            subject_type: r.subject_type,
            subject_id: Default::default(),
            conversation_id: r.conversation_id,
            ticket_id: r.ticket_id,
            sla_policy_id: r.sla_policy_id,
            priority: r.priority,
            business_hours_only: r.business_hours_only,
            warning_threshold_seconds: r.warning_threshold_seconds,
            first_response: clock(
                r.first_response_seconds,
                Some(r.first_response_deadline),
                r.first_response_warned_at,
                r.first_response_breached_at,
            ),
            first_response_at: r.first_response_at,
            next_response: clock(
                r.next_response_seconds,
                r.next_response_deadline,
                r.next_response_warned_at,
                r.next_response_breached_at,
            ),
            next_response_cycles: ResponseCycles {
                started_at: r.next_response_started_at,
                answered_at: r.next_response_at,
                count: r.next_response_count,
                total_seconds: r.next_response_total_seconds,
            },
            resolution: clock(
                r.resolution_seconds,
                Some(r.resolution_deadline),
                r.resolution_warned_at,
                r.resolution_breached_at,
            ),
            resolved_at: r.resolved_at,
            paused_at: r.paused_at,
            total_paused_seconds: r.total_paused_seconds,
            created_at: r.created_at,
            updated_at: r.updated_at,
            active_target: Default::default(),
            seconds_remaining: Default::default(),
        }
    }
}

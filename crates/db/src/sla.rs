//! SLA policies, SLA states with their checks, and SLA statistics.

use std::collections::HashMap;
use std::time::Duration;

use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::ListQuery;
use parley_domain::business_hours::{Calendar, Clock, WorkingHours};
use parley_domain::sla::{
    CheckKind, Finding, OutcomeStats, SlaPolicy, SlaPolicyFilter, SlaState, SlaStats, SlaTarget,
    SubjectType, TargetStats,
};
use parley_domain::{Channel, Priority};
use parley_types::list::{Page, PageRequest};
use parley_types::metric_names::SLA_BREACHES;
use parley_types::time::Timestamp;

pub async fn insert_policy(db: impl PgExecutor<'_>, p: &SlaPolicy) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO sla_policies (id, organization_id, name, description, priority, channel,
            first_response_seconds, next_response_seconds, resolution_seconds,
            business_hours_only, warning_threshold_seconds, is_active, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
    )
    .bind(p.id)
    .bind(p.organization_id)
    .bind(&p.name)
    .bind(&p.description)
    .bind(p.priority)
    .bind(p.channel)
    .bind(p.first_response_seconds)
    .bind(p.next_response_seconds)
    .bind(p.resolution_seconds)
    .bind(p.business_hours_only)
    .bind(p.warning_threshold_seconds)
    .bind(p.is_active)
    .bind(p.created_at)
    .bind(p.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update_policy(db: impl PgExecutor<'_>, p: &SlaPolicy) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE sla_policies SET name = $3, description = $4, priority = $5, channel = $6,
            first_response_seconds = $7, next_response_seconds = $8, resolution_seconds = $9,
            business_hours_only = $10, warning_threshold_seconds = $11, is_active = $12,
            updated_at = $13
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(p.organization_id)
    .bind(p.id)
    .bind(&p.name)
    .bind(&p.description)
    .bind(p.priority)
    .bind(p.channel)
    .bind(p.first_response_seconds)
    .bind(p.next_response_seconds)
    .bind(p.resolution_seconds)
    .bind(p.business_hours_only)
    .bind(p.warning_threshold_seconds)
    .bind(p.is_active)
    .bind(p.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn get_policy(
    db: impl PgExecutor<'_>,
    org: Uuid,
    id: Uuid,
    lock: bool,
) -> Result<Option<SlaPolicy>, sqlx::Error> {
    let sql = if lock {
        "SELECT * FROM sla_policies WHERE organization_id = $1 AND id = $2 FOR UPDATE"
    } else {
        "SELECT * FROM sla_policies WHERE organization_id = $1 AND id = $2"
    };
    sqlx::query_as(sql)
        .bind(org)
        .bind(id)
        .fetch_optional(db)
        .await
}

pub async fn delete_policy(
    db: impl PgExecutor<'_>,
    org: Uuid,
    id: Uuid,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("DELETE FROM sla_policies WHERE organization_id = $1 AND id = $2")
        .bind(org)
        .bind(id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

fn push_policy_filter(qb: &mut QueryBuilder<Postgres>, org: Uuid, f: &SlaPolicyFilter) {
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
    org: Uuid,
    f: &SlaPolicyFilter,
    page: &PageRequest,
) -> Result<Page<SlaPolicy>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT p.* FROM sla_policies p",
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
    org: Uuid,
    priority: Priority,
    channel: Channel,
) -> Result<Option<SlaPolicy>, sqlx::Error> {
    sqlx::query_as(
        "SELECT * FROM sla_policies
         WHERE organization_id = $1 AND is_active
           AND (priority IS NULL OR priority = $2) AND (channel IS NULL OR channel = $3)
         ORDER BY priority IS NULL, channel IS NULL, created_at, id
         LIMIT 1",
    )
    .bind(org)
    .bind(priority)
    .bind(channel)
    .fetch_optional(db)
    .await
}

/// The organization's business hours, parsed.
pub async fn calendar(db: impl PgExecutor<'_>, org: Uuid) -> Result<Option<Calendar>, sqlx::Error> {
    let hours: Option<sqlx::types::Json<WorkingHours>> =
        sqlx::query_scalar("SELECT working_hours FROM organizations WHERE id = $1")
            .bind(org)
            .fetch_optional(db)
            .await?;
    Ok(hours.and_then(|h| h.0.calendar("workingHours").ok()))
}

/// The clock a state counts on: the organization's business hours when its policy says so.
async fn clock(conn: &mut PgConnection, state: &SlaState) -> Result<Clock, sqlx::Error> {
    if !state.business_hours_only {
        return Ok(Clock::Wall);
    }
    Ok(match calendar(&mut *conn, state.organization_id).await? {
        Some(c) => Clock::Business(c),
        None => {
            tracing::warn!(organization_id = %state.organization_id, "working hours unreadable; SLA counts wall-clock time");
            Clock::Wall
        }
    })
}

/// Starts the SLA of a new conversation or ticket, if a policy applies: the state and its
/// checks, in the caller's transaction.
pub async fn start(
    conn: &mut PgConnection,
    org: Uuid,
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
    sqlx::query(
        "INSERT INTO sla_states (id, organization_id, subject_type, conversation_id, ticket_id,
            sla_policy_id, priority, business_hours_only, warning_threshold_seconds,
            first_response_seconds, next_response_seconds, resolution_seconds,
            first_response_deadline, resolution_deadline, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15)",
    )
    .bind(s.id)
    .bind(s.organization_id)
    .bind(s.subject_type)
    .bind(s.conversation_id)
    .bind(s.ticket_id)
    .bind(s.sla_policy_id)
    .bind(s.priority)
    .bind(s.business_hours_only)
    .bind(s.warning_threshold_seconds)
    .bind(s.first_response_seconds)
    .bind(s.next_response_seconds)
    .bind(s.resolution_seconds)
    .bind(s.first_response_deadline)
    .bind(s.resolution_deadline)
    .bind(s.created_at)
    .execute(&mut *conn)
    .await?;
    sync_checks(conn, &mut s).await?;
    Ok(Some(s))
}

fn subject_column(subject: SubjectType) -> &'static str {
    match subject {
        SubjectType::Conversation => "conversation_id",
        SubjectType::Ticket => "ticket_id",
    }
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
    let sql = format!(
        "SELECT * FROM sla_states WHERE {} = ANY($1)",
        subject_column(subject)
    );
    let rows: Vec<SlaState> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(ids)
        .fetch_all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|mut s| {
            s.finish(now);
            (s.subject_id, s)
        })
        .collect())
}

/// Changes the SLA state of a conversation or ticket (when it has one) with `change`, given
/// the state's clock, and stores it with its checks; in the caller's transaction.
pub async fn update(
    conn: &mut PgConnection,
    subject: SubjectType,
    subject_id: Uuid,
    change: impl FnOnce(&mut SlaState, &Clock),
) -> Result<Option<SlaState>, sqlx::Error> {
    let sql = format!(
        "SELECT * FROM sla_states WHERE {} = $1 FOR UPDATE",
        subject_column(subject)
    );
    let found: Option<SlaState> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(subject_id)
        .fetch_optional(&mut *conn)
        .await?;
    let Some(mut s) = found else { return Ok(None) };
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
    sqlx::query(
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
    )
    .bind(s.id)
    .bind(s.priority)
    .bind(s.first_response_deadline)
    .bind(s.first_response_at)
    .bind(s.first_response_warned_at)
    .bind(s.first_response_breached_at)
    .bind(s.next_response_deadline)
    .bind(s.next_response_started_at)
    .bind(s.next_response_at)
    .bind(s.next_response_count)
    .bind(s.next_response_total_seconds)
    .bind(s.next_response_warned_at)
    .bind(s.next_response_breached_at)
    .bind(s.resolution_deadline)
    .bind(s.resolved_at)
    .bind(s.resolution_warned_at)
    .bind(s.resolution_breached_at)
    .bind(s.paused_at)
    .bind(s.total_paused_seconds)
    .bind(s.updated_at)
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
    sqlx::query(
        "DELETE FROM sla_checks c WHERE c.sla_state_id = $1 AND NOT EXISTS (
            SELECT 1 FROM unnest($2::text[], $3::text[]) AS w(target, kind)
            WHERE w.target = c.target AND w.kind = c.kind)",
    )
    .bind(s.id)
    .bind(&targets)
    .bind(&kinds)
    .execute(&mut *conn)
    .await?;
    if wanted.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO sla_checks AS c (id, organization_id, sla_state_id, target, kind, due_at)
         SELECT uuid_v7(), $1, $2, w.target, w.kind, w.due_at
         FROM unnest($3::text[], $4::text[], $5::timestamptz[]) AS w(target, kind, due_at)
         ON CONFLICT (sla_state_id, target, kind) DO UPDATE SET
            due_at = excluded.due_at,
            enqueued_at = CASE WHEN c.due_at = excluded.due_at THEN c.enqueued_at END",
    )
    .bind(s.organization_id)
    .bind(s.id)
    .bind(&targets)
    .bind(&kinds)
    .bind(&due)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Checks whose time has come and that no job holds, marked enqueued now, oldest first, at
/// most `limit`. With `lost_after`, also those enqueued longer ago than that (their job was
/// lost with Redis or with a worker).
pub async fn take_due_checks(
    pool: &PgPool,
    limit: i64,
    lost_after: Option<Duration>,
) -> Result<Vec<Uuid>, sqlx::Error> {
    let sql = if lost_after.is_some() {
        "UPDATE sla_checks SET enqueued_at = clock_timestamp() WHERE id IN (
            SELECT id FROM sla_checks
            WHERE enqueued_at < clock_timestamp() - make_interval(secs => $2)
            ORDER BY enqueued_at LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING id"
    } else {
        "UPDATE sla_checks SET enqueued_at = clock_timestamp() WHERE id IN (
            SELECT id FROM sla_checks
            WHERE enqueued_at IS NULL AND due_at <= clock_timestamp()
            ORDER BY due_at LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING id"
    };
    sqlx::query_scalar(sql)
        .bind(limit)
        .bind(lost_after.map_or(0.0, |d| d.as_secs_f64()))
        .fetch_all(pool)
        .await
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
    let due: Vec<(Uuid, SlaTarget, CheckKind)> = sqlx::query_as(
        "DELETE FROM sla_checks WHERE id IN (
            SELECT c.id FROM unnest($1::uuid[]) AS x(id) JOIN sla_checks c ON c.id = x.id)
           AND due_at <= $2
         RETURNING sla_state_id, target, kind",
    )
    .bind(ids)
    .bind(now)
    .fetch_all(&mut *conn)
    .await?;
    if due.is_empty() {
        return Ok(Vec::new());
    }
    let mut by_state: HashMap<Uuid, Vec<(SlaTarget, CheckKind)>> = HashMap::new();
    for (state, target, kind) in due {
        by_state.entry(state).or_default().push((target, kind));
    }
    let mut state_ids: Vec<Uuid> = by_state.keys().copied().collect();
    state_ids.sort();
    // In id order, so jobs locking overlapping states cannot deadlock.
    let states: Vec<SlaState> = sqlx::query_as(
        "SELECT s.* FROM unnest($1::uuid[]) AS x(id) JOIN sla_states s ON s.id = x.id
         ORDER BY s.id FOR UPDATE OF s",
    )
    .bind(&state_ids)
    .fetch_all(&mut *conn)
    .await?;
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
    sqlx::query(
        "UPDATE sla_states s SET
            first_response_warned_at = u.frw, first_response_breached_at = u.frb,
            next_response_warned_at = u.nrw, next_response_breached_at = u.nrb,
            resolution_warned_at = u.rw, resolution_breached_at = u.rb, updated_at = $8
         FROM unnest($1::uuid[], $2::timestamptz[], $3::timestamptz[], $4::timestamptz[],
                     $5::timestamptz[], $6::timestamptz[], $7::timestamptz[])
              AS u(id, frw, frb, nrw, nrb, rw, rb)
         WHERE s.id = u.id",
    )
    .bind(&ids)
    .bind(col(|s| s.first_response_warned_at))
    .bind(col(|s| s.first_response_breached_at))
    .bind(col(|s| s.next_response_warned_at))
    .bind(col(|s| s.next_response_breached_at))
    .bind(col(|s| s.resolution_warned_at))
    .bind(col(|s| s.resolution_breached_at))
    .bind(now)
    .execute(&mut *conn)
    .await?;
    for c in &mut changed {
        c.state.updated_at = now;
    }
    Ok(changed)
}

/// Checks not yet run: what the ticker has still to move into the queue.
pub async fn checks_backlog(db: impl PgExecutor<'_>) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT count(*) FROM sla_checks WHERE enqueued_at IS NULL AND due_at <= clock_timestamp()",
    )
    .fetch_one(db)
    .await
}

/// The figures of the statistics, in the column order of `sla_stats_hourly`.
#[derive(Debug, Default, sqlx::FromRow)]
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

const TALLY_SUMS: &str = "sum(total)::int8 AS total, sum(met)::int8 AS met,
    sum(breached)::int8 AS breached, sum(in_progress)::int8 AS in_progress,
    sum(fr_met)::int8 AS fr_met, sum(fr_breached)::int8 AS fr_breached,
    sum(fr_count)::int8 AS fr_count, sum(fr_seconds)::int8 AS fr_seconds,
    sum(nr_met)::int8 AS nr_met, sum(nr_breached)::int8 AS nr_breached,
    sum(nr_count)::int8 AS nr_count, sum(nr_seconds)::int8 AS nr_seconds,
    sum(res_met)::int8 AS res_met, sum(res_breached)::int8 AS res_breached,
    sum(res_count)::int8 AS res_count, sum(res_seconds)::int8 AS res_seconds";

/// SLA statistics of the states started in `[from, to)`: whole hours from the hourly figures,
/// the partial hours at either end from the states themselves.
pub async fn stats(
    pool: &PgPool,
    org: Uuid,
    from: Option<Timestamp>,
    to: Option<Timestamp>,
) -> Result<SlaStats, sqlx::Error> {
    let hourly = format!(
        "SELECT priority, {TALLY_SUMS} FROM sla_stats_hourly
         WHERE organization_id = $1
           AND ($2::timestamptz IS NULL OR hour >= date_trunc('hour', $2::timestamptz + interval '59 minutes 59.999999 seconds', 'UTC'))
           AND ($3::timestamptz IS NULL OR hour + interval '1 hour' <= $3)
         GROUP BY priority"
    );
    // The edges: states in a partial hour at the start or the end of the range.
    let edges = format!(
        "SELECT priority, {TALLY_SUMS} FROM (
            SELECT s.priority, t.* FROM sla_states s CROSS JOIN LATERAL sla_tally(s) AS t
            WHERE s.organization_id = $1
              AND ($2::timestamptz IS NULL OR s.created_at >= $2)
              AND ($3::timestamptz IS NULL OR s.created_at < $3)
              AND (($2::timestamptz IS NOT NULL
                    AND s.created_at < date_trunc('hour', $2::timestamptz + interval '59 minutes 59.999999 seconds', 'UTC'))
                OR ($3::timestamptz IS NOT NULL AND s.created_at >= date_trunc('hour', $3::timestamptz, 'UTC')))
         ) t GROUP BY priority"
    );
    let mut rows: Vec<Tally> = Vec::new();
    for sql in [hourly, edges] {
        let part: Vec<Tally> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(org)
            .bind(from)
            .bind(to)
            .fetch_all(pool)
            .await?;
        rows.extend(part);
    }
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

use std::collections::HashMap;

use parley_types::ids::{OrgId, TeamId, UserId};
use parley_types::time::Timestamp;
use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::users;
use parley_domain::teams::{Team, TeamFilter, TeamSummary};
use parley_domain::users::UserSummary;
use parley_types::list::{Page, PageRequest};

pub async fn insert(db: impl PgExecutor<'_>, t: &Team) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO teams (id, organization_id, name, display_name, description, color, icon,
            created_by, is_active, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        t.id,
        t.organization_id,
        &t.name,
        t.display_name.as_deref(),
        t.description.as_deref(),
        t.color.as_deref(),
        t.icon.as_deref(),
        t.created_by,
        t.is_active,
        t.created_at,
        t.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update(db: impl PgExecutor<'_>, t: &Team) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE teams SET name = $3, display_name = $4, description = $5, color = $6, icon = $7,
            is_active = $8, updated_at = $9
         WHERE organization_id = $1 AND id = $2",
        t.organization_id,
        t.id,
        &t.name,
        t.display_name.as_deref(),
        t.description.as_deref(),
        t.color.as_deref(),
        t.icon.as_deref(),
        t.is_active,
        t.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Adds users to a team; ones already in it are left as they are.
pub async fn add_members(
    db: impl PgExecutor<'_>,
    org: OrgId,
    team: TeamId,
    users: &[Uuid],
    added_by: &str,
) -> Result<(), sqlx::Error> {
    let ids: Vec<Uuid> = users.iter().map(|_| parley_types::ids::new_id()).collect();
    sqlx::query!(
        "INSERT INTO team_members (id, organization_id, team_id, user_id, added_by)
         SELECT m.id, $1, $2, m.user_id, $5 FROM unnest($3::uuid[], $4::uuid[]) AS m(id, user_id)
         ON CONFLICT (team_id, user_id) DO NOTHING",
        org.uuid(),
        team.uuid(),
        &ids,
        users,
        added_by,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn remove_member(
    db: impl PgExecutor<'_>,
    org: OrgId,
    team: TeamId,
    user: UserId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM team_members WHERE organization_id = $1 AND team_id = $2 AND user_id = $3",
        org.uuid(),
        team.uuid(),
        user.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Several teams as conversations and tickets embed them, by id.
pub async fn summaries(
    db: impl PgExecutor<'_>,
    org: OrgId,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, TeamSummary>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<TeamSummary> = sqlx::query_as!(
        TeamSummary,
        "SELECT id, name, display_name, color, icon, is_active FROM teams
         WHERE organization_id = $1 AND id = ANY($2)",
        org.uuid(),
        ids,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|t| (t.id, t)).collect())
}

/// Fills `members` and `creator` of the given teams.
async fn embed(conn: &mut PgConnection, org: OrgId, teams: &mut [Team]) -> Result<(), sqlx::Error> {
    let ids: Vec<Uuid> = teams.iter().map(|t| t.id).collect();
    let members = sqlx::query!(
        "SELECT m.team_id, u.id, u.first_name, u.last_name, u.email, u.phone_number, u.avatar
         FROM team_members m JOIN users u ON u.id = m.user_id
         WHERE m.team_id = ANY($1) ORDER BY m.joined_at, u.id",
        &ids,
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut by_team: HashMap<Uuid, Vec<UserSummary>> = HashMap::new();
    for m in members {
        by_team.entry(m.team_id).or_default().push(UserSummary {
            id: m.id,
            first_name: m.first_name,
            last_name: m.last_name,
            email: m.email,
            phone_number: m.phone_number,
            avatar: m.avatar,
        });
    }
    let creators: Vec<Uuid> = teams.iter().filter_map(|t| t.created_by).collect();
    let creators = users::summaries(&mut *conn, org, &creators).await?;
    for t in teams {
        t.members = by_team.remove(&t.id).unwrap_or_default();
        t.creator = t.created_by.and_then(|c| creators.get(&c).cloned());
    }
    Ok(())
}

pub async fn get(
    conn: &mut PgConnection,
    org: OrgId,
    id: TeamId,
) -> Result<Option<Team>, sqlx::Error> {
    Ok(read(conn, org, &[id.uuid()]).await?.pop())
}

/// The teams of `org` among `ids`, in no particular order, with what they embed.
async fn read(conn: &mut PgConnection, org: OrgId, ids: &[Uuid]) -> Result<Vec<Team>, sqlx::Error> {
    let mut rows: Vec<Team> = sqlx::query_as!(
        TeamRow,
        r#"SELECT t.id, t.organization_id, t.name, t.display_name, t.description, t.color, t.icon,
            t.created_by, t.is_active,
            (SELECT count(*) FROM team_members m WHERE m.team_id = t.id) AS "member_count!",
            coalesce(k.conversation_count, 0) AS "conversation_count!",
            t.created_at, t.updated_at
         FROM teams t LEFT JOIN team_totals k ON k.team_id = t.id
         WHERE t.organization_id = $1 AND t.id = ANY($2)"#,
        org.uuid(),
        ids,
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(Team::from)
    .collect();
    embed(conn, org, &mut rows).await?;
    Ok(rows)
}

pub async fn lock(
    conn: &mut PgConnection,
    org: OrgId,
    id: TeamId,
) -> Result<Option<Team>, sqlx::Error> {
    let found: Option<Uuid> = sqlx::query_scalar!(
        "SELECT id FROM teams WHERE organization_id = $1 AND id = $2 FOR UPDATE",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(&mut *conn)
    .await?;
    match found {
        Some(_) => get(conn, org, id).await,
        None => Ok(None),
    }
}

fn push_filter(qb: &mut QueryBuilder<Postgres>, org: OrgId, f: &TeamFilter) {
    qb.push(" WHERE t.organization_id = ").push_bind(org);
    if let Some(active) = f.is_active {
        qb.push(" AND t.is_active = ").push_bind(active);
    }
}

pub async fn list(
    pool: &PgPool,
    org: OrgId,
    f: &TeamFilter,
    page: &PageRequest,
) -> Result<Page<Team>, sqlx::Error> {
    super::page_of(
        pool,
        "FROM teams t",
        "t",
        |qb| push_filter(qb, org, f),
        page,
        |ids| async move { read(&mut *pool.acquire().await?, org, &ids).await },
    )
    .await
}

pub async fn delete(db: impl PgExecutor<'_>, org: OrgId, id: TeamId) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM teams WHERE organization_id = $1 AND id = $2",
        org.uuid(),
        id.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A row of `teams` as the checked statement reads it (what it embeds is read apart).
struct TeamRow {
    id: Uuid,
    organization_id: Uuid,
    name: String,
    display_name: Option<String>,
    description: Option<String>,
    color: Option<String>,
    icon: Option<String>,
    created_by: Option<Uuid>,
    is_active: bool,
    member_count: i64,
    conversation_count: i64,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<TeamRow> for Team {
    fn from(r: TeamRow) -> Self {
        Self {
            id: r.id,
            organization_id: r.organization_id,
            name: r.name,
            display_name: r.display_name,
            description: r.description,
            color: r.color,
            icon: r.icon,
            created_by: r.created_by,
            is_active: r.is_active,
            member_count: r.member_count,
            conversation_count: r.conversation_count,
            creator: Default::default(),
            members: Default::default(),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

use std::collections::HashMap;

use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::ListQuery;

use super::users;
use parley_domain::teams::{Team, TeamFilter, TeamSummary};
use parley_domain::users::UserSummary;
use parley_types::list::{Page, PageRequest};

macro_rules! select {
    () => {
        "SELECT t.*, (SELECT count(*) FROM team_members m WHERE m.team_id = t.id) AS member_count,
            (SELECT count(*) FROM conversation_teams ct WHERE ct.team_id = t.id) AS conversation_count
         FROM teams t"
    };
}

pub async fn insert(db: impl PgExecutor<'_>, t: &Team) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO teams (id, organization_id, name, display_name, description, color, icon,
            created_by, is_active, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(t.id)
    .bind(t.organization_id)
    .bind(&t.name)
    .bind(&t.display_name)
    .bind(&t.description)
    .bind(&t.color)
    .bind(&t.icon)
    .bind(t.created_by)
    .bind(t.is_active)
    .bind(t.created_at)
    .bind(t.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update(db: impl PgExecutor<'_>, t: &Team) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE teams SET name = $3, display_name = $4, description = $5, color = $6, icon = $7,
            is_active = $8, updated_at = $9
         WHERE organization_id = $1 AND id = $2",
    )
    .bind(t.organization_id)
    .bind(t.id)
    .bind(&t.name)
    .bind(&t.display_name)
    .bind(&t.description)
    .bind(&t.color)
    .bind(&t.icon)
    .bind(t.is_active)
    .bind(t.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

/// Adds users to a team; ones already in it are left as they are.
pub async fn add_members(
    db: impl PgExecutor<'_>,
    org: Uuid,
    team: Uuid,
    users: &[Uuid],
    added_by: &str,
) -> Result<(), sqlx::Error> {
    let ids: Vec<Uuid> = users.iter().map(|_| parley_types::ids::new_id()).collect();
    sqlx::query(
        "INSERT INTO team_members (id, organization_id, team_id, user_id, added_by)
         SELECT m.id, $1, $2, m.user_id, $5 FROM unnest($3::uuid[], $4::uuid[]) AS m(id, user_id)
         ON CONFLICT (team_id, user_id) DO NOTHING",
    )
    .bind(org)
    .bind(team)
    .bind(&ids)
    .bind(users)
    .bind(added_by)
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn remove_member(
    db: impl PgExecutor<'_>,
    org: Uuid,
    team: Uuid,
    user: Uuid,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "DELETE FROM team_members WHERE organization_id = $1 AND team_id = $2 AND user_id = $3",
    )
    .bind(org)
    .bind(team)
    .bind(user)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Several teams as conversations and tickets embed them, by id.
pub async fn summaries(
    db: impl PgExecutor<'_>,
    org: Uuid,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, TeamSummary>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<TeamSummary> = sqlx::query_as(
        "SELECT id, name, display_name, color, icon, is_active FROM teams
         WHERE organization_id = $1 AND id = ANY($2)",
    )
    .bind(org)
    .bind(ids)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|t| (t.id, t)).collect())
}

/// Fills `members` and `creator` of the given teams.
async fn embed(conn: &mut PgConnection, org: Uuid, teams: &mut [Team]) -> Result<(), sqlx::Error> {
    let ids: Vec<Uuid> = teams.iter().map(|t| t.id).collect();
    #[derive(sqlx::FromRow)]
    struct Member {
        team_id: Uuid,
        #[sqlx(flatten)]
        user: UserSummary,
    }
    let members: Vec<Member> = sqlx::query_as(
        "SELECT m.team_id, u.id, u.first_name, u.last_name, u.email, u.phone_number, u.avatar
         FROM team_members m JOIN users u ON u.id = m.user_id
         WHERE m.team_id = ANY($1) ORDER BY m.joined_at, u.id",
    )
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?;
    let mut by_team: HashMap<Uuid, Vec<UserSummary>> = HashMap::new();
    for m in members {
        by_team.entry(m.team_id).or_default().push(m.user);
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
    org: Uuid,
    id: Uuid,
) -> Result<Option<Team>, sqlx::Error> {
    let row: Option<Team> = sqlx::query_as(concat!(
        select!(),
        " WHERE t.organization_id = $1 AND t.id = $2"
    ))
    .bind(org)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(team) = row else { return Ok(None) };
    let mut teams = [team];
    embed(conn, org, &mut teams).await?;
    let [team] = teams;
    Ok(Some(team))
}

pub async fn lock(
    conn: &mut PgConnection,
    org: Uuid,
    id: Uuid,
) -> Result<Option<Team>, sqlx::Error> {
    let found: Option<Uuid> = sqlx::query_scalar(
        "SELECT id FROM teams WHERE organization_id = $1 AND id = $2 FOR UPDATE",
    )
    .bind(org)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    match found {
        Some(_) => get(conn, org, id).await,
        None => Ok(None),
    }
}

fn push_filter(qb: &mut QueryBuilder<Postgres>, org: Uuid, f: &TeamFilter) {
    qb.push(" WHERE t.organization_id = ").push_bind(org);
    if let Some(active) = f.is_active {
        qb.push(" AND t.is_active = ").push_bind(active);
    }
}

pub async fn list(
    pool: &PgPool,
    org: Uuid,
    f: &TeamFilter,
    page: &PageRequest,
) -> Result<Page<Team>, sqlx::Error> {
    let q = ListQuery {
        select: select!(),
        count_from: "FROM teams t",
        alias: "t",
    };
    let mut page = super::page(pool, q, |qb| push_filter(qb, org, f), page).await?;
    let mut conn = pool.acquire().await?;
    embed(&mut conn, org, page.items_mut()).await?;
    Ok(page)
}

pub async fn delete(db: impl PgExecutor<'_>, org: Uuid, id: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("DELETE FROM teams WHERE organization_id = $1 AND id = $2")
        .bind(org)
        .bind(id)
        .execute(db)
        .await?;
    Ok(done.rows_affected() == 1)
}

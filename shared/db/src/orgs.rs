use parley_types::ids::OrgId;
use sqlx::{PgConnection, PgExecutor};

use parley_domain::orgs::Organization;
use parley_domain::send_rules::{FrequencyCaps, QuietHours};
use parley_domain::suppressions::SoftBounceLimit;
use sqlx::types::Json;

/// Creates an organization; its slug is derived from the name, with the id's tail when the
/// plain one is taken.
pub async fn create(conn: &mut PgConnection, name: &str) -> Result<Organization, sqlx::Error> {
    let id = parley_types::ids::new_id();
    let base = parley_types::fields::slugify(name);
    let tail = &id.simple().to_string()[24..];
    for slug in [base.clone(), format!("{base}-{tail}")] {
        let created: Option<Organization> = sqlx::query_as!(
            Organization,
            r#"INSERT INTO organizations (id, name, slug) VALUES ($1, $2, $3)
             ON CONFLICT (slug) DO NOTHING RETURNING id, name, slug, working_hours, created_at, updated_at,
                quiet_hours AS "quiet_hours: Json<QuietHours>",
                frequency_caps AS "frequency_caps: Json<FrequencyCaps>",
                soft_bounce_limit AS "soft_bounce_limit: Json<SoftBounceLimit>""#,
            id,
            name,
            &slug,
        )
        .fetch_optional(&mut *conn)
        .await?;
        if let Some(org) = created {
            return Ok(org);
        }
    }
    Err(sqlx::Error::Protocol(format!("no free slug for {name:?}")))
}

pub async fn get(db: impl PgExecutor<'_>, id: OrgId) -> Result<Option<Organization>, sqlx::Error> {
    sqlx::query_as!(
        Organization,
        r#"SELECT id, name, slug, working_hours, created_at, updated_at,
                quiet_hours AS "quiet_hours: Json<QuietHours>",
                frequency_caps AS "frequency_caps: Json<FrequencyCaps>",
                soft_bounce_limit AS "soft_bounce_limit: Json<SoftBounceLimit>"
         FROM organizations WHERE id = $1"#,
        id.uuid(),
    )
    .fetch_optional(db)
    .await
}

/// What a changed or deleted organization's id is notified with on
/// [`crate::api_keys::REVOKED_CHANNEL`] when the change commits (migration
/// `organization_changes`): the API processes that keep organizations in memory drop it.
pub const CHANGED_PREFIX: &str = "organization:";

/// Writes an organization's name, working hours and sending rules.
pub async fn update(db: impl PgExecutor<'_>, o: &Organization) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE organizations SET name = $2, working_hours = $3, updated_at = $4,
            quiet_hours = $5, frequency_caps = $6, soft_bounce_limit = $7
         WHERE id = $1",
        o.id,
        &o.name,
        &o.working_hours as _,
        o.updated_at,
        &o.quiet_hours as _,
        &o.frequency_caps as _,
        &o.soft_bounce_limit as _,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn lock(db: impl PgExecutor<'_>, id: OrgId) -> Result<Option<Organization>, sqlx::Error> {
    sqlx::query_as!(
        Organization,
        r#"SELECT id, name, slug, working_hours, created_at, updated_at,
                quiet_hours AS "quiet_hours: Json<QuietHours>",
                frequency_caps AS "frequency_caps: Json<FrequencyCaps>",
                soft_bounce_limit AS "soft_bounce_limit: Json<SoftBounceLimit>"
         FROM organizations WHERE id = $1 FOR UPDATE"#,
        id.uuid(),
    )
    .fetch_optional(db)
    .await
}

/// The next number of the organization's counter `name` (1, 2, 3, ...). The counter's row
/// stays locked until the transaction ends, so numbers are given in commit order, without
/// gaps.
pub async fn next_number(
    conn: &mut PgConnection,
    org: OrgId,
    name: &str,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO organization_counters AS c (organization_id, name, value) VALUES ($1, $2, 1)
         ON CONFLICT (organization_id, name) DO UPDATE SET value = c.value + 1
         RETURNING value",
        org.uuid(),
        name,
    )
    .fetch_one(conn)
    .await
}

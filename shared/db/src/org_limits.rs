//! Limits an operator set for one organization in place of the deployment's defaults
//! (`parley-api org limits`); read by the workers every few seconds.

use parley_types::ids::OrgId;
use std::collections::HashMap;

use parley_types::enums::Channel;
use parley_types::time::Timestamp;
use serde::Serialize;
use sqlx::PgExecutor;
use sqlx::types::Json;
use uuid::Uuid;

/// One organization's limits; `None` is the deployment's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OrgLimits {
    pub organization_id: Uuid,
    /// Send jobs ready or running at once, across all workers (stored in the column
    /// `delivery_jobs`, its former name).
    pub send_jobs: Option<i32>,
    /// Webhook delivery jobs ready or running at once.
    pub webhook_jobs: Option<i32>,
    /// Imports running at once.
    pub imports: Option<i32>,
    /// Broadcasts sending at once.
    pub broadcasts: Option<i32>,
    /// Messages per second, by channel.
    pub rates: HashMap<Channel, i32>,
    pub updated_at: Option<Timestamp>,
}

/// A change to one limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Setting {
    /// Leave it as it is.
    #[default]
    Keep,
    /// Back to the deployment's default.
    Default,
    Value(i32),
}

/// Changes to an organization's limits.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    pub send_jobs: Setting,
    pub webhook_jobs: Setting,
    pub imports: Setting,
    pub broadcasts: Setting,
    pub rates: Vec<(Channel, Setting)>,
}

impl Changes {
    fn is_empty(&self) -> bool {
        [
            self.send_jobs,
            self.webhook_jobs,
            self.imports,
            self.broadcasts,
        ]
        .iter()
        .chain(self.rates.iter().map(|(_, s)| s))
        .all(|s| *s == Setting::Keep)
    }
}

impl Setting {
    /// (keep it, the new value).
    fn bind(self) -> (bool, Option<i32>) {
        match self {
            Setting::Keep => (true, None),
            Setting::Default => (false, None),
            Setting::Value(n) => (false, Some(n)),
        }
    }
}

struct Row {
    organization_id: Uuid,
    send_jobs: Option<i32>,
    webhook_jobs: Option<i32>,
    imports: Option<i32>,
    broadcasts: Option<i32>,
    rates: Json<HashMap<Channel, i32>>,
    updated_at: Timestamp,
}

impl From<Row> for OrgLimits {
    fn from(r: Row) -> Self {
        OrgLimits {
            organization_id: r.organization_id,
            send_jobs: r.send_jobs,
            webhook_jobs: r.webhook_jobs,
            imports: r.imports,
            broadcasts: r.broadcasts,
            rates: r.rates.0,
            updated_at: Some(r.updated_at),
        }
    }
}

/// The organization's limits (all defaults when none was set).
pub async fn get(db: impl PgExecutor<'_>, org: OrgId) -> Result<OrgLimits, sqlx::Error> {
    let row = sqlx::query_as!(
        Row,
        r#"SELECT organization_id, delivery_jobs AS send_jobs, webhook_jobs, imports, broadcasts,
            rates AS "rates: Json<HashMap<Channel, i32>>", updated_at
         FROM organization_limits WHERE organization_id = $1"#,
        org.uuid(),
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map_or_else(
        || OrgLimits {
            organization_id: org.uuid(),
            ..OrgLimits::default()
        },
        OrgLimits::from,
    ))
}

/// Applies `changes` to the organization's limits and returns them (no change: only reads
/// them); `None` when the organization does not exist. Limits all back to their defaults
/// remove its row. Changes to one organization are applied one at a time (its row is locked),
/// so two operators changing different limits at once both have their way. In the caller's
/// transaction (`parley_usecases::org_limits::set`).
pub async fn set(
    conn: &mut sqlx::PgConnection,
    org: OrgId,
    changes: &Changes,
) -> Result<Option<OrgLimits>, sqlx::Error> {
    let exists = sqlx::query_scalar!(
        "SELECT id FROM organizations WHERE id = $1 FOR UPDATE",
        org.uuid()
    )
    .fetch_optional(&mut *conn)
    .await?
    .is_some();
    if !exists {
        return Ok(None);
    }
    if changes.is_empty() {
        return Ok(Some(get(&mut *conn, org).await?));
    }
    let current = get(&mut *conn, org).await?;
    let pick = |s: Setting, now: Option<i32>| match s.bind() {
        (true, _) => now,
        (false, v) => v,
    };
    let mut rates = current.rates.clone();
    for (channel, setting) in &changes.rates {
        match setting.bind() {
            (true, _) => {}
            (false, None) => {
                rates.remove(channel);
            }
            (false, Some(n)) => {
                rates.insert(*channel, n);
            }
        }
    }
    let next = OrgLimits {
        organization_id: org.uuid(),
        send_jobs: pick(changes.send_jobs, current.send_jobs),
        webhook_jobs: pick(changes.webhook_jobs, current.webhook_jobs),
        imports: pick(changes.imports, current.imports),
        broadcasts: pick(changes.broadcasts, current.broadcasts),
        rates,
        updated_at: None,
    };
    let all_default = next.send_jobs.is_none()
        && next.webhook_jobs.is_none()
        && next.imports.is_none()
        && next.broadcasts.is_none()
        && next.rates.is_empty();
    if all_default {
        sqlx::query!(
            "DELETE FROM organization_limits WHERE organization_id = $1",
            org.uuid()
        )
        .execute(&mut *conn)
        .await?;
    } else {
        sqlx::query!(
            "INSERT INTO organization_limits
                (organization_id, delivery_jobs, webhook_jobs, imports, broadcasts, rates)
             VALUES ($1, $2, $3, $4, $5, $6)
             ON CONFLICT (organization_id) DO UPDATE SET
                delivery_jobs = $2, webhook_jobs = $3, imports = $4, broadcasts = $5,
                rates = $6, updated_at = now()",
            org.uuid(),
            next.send_jobs,
            next.webhook_jobs,
            next.imports,
            next.broadcasts,
            Json(&next.rates) as _,
        )
        .execute(&mut *conn)
        .await?;
    }
    let stored = get(&mut *conn, org).await?;
    Ok(Some(stored))
}

/// Organizations whose limits are not all the defaults, at most `limit` (the most recently
/// changed first).
pub async fn all(db: impl PgExecutor<'_>, limit: i64) -> Result<Vec<OrgLimits>, sqlx::Error> {
    let rows = sqlx::query_as!(
        Row,
        r#"SELECT organization_id, delivery_jobs AS send_jobs, webhook_jobs, imports, broadcasts,
            rates AS "rates: Json<HashMap<Channel, i32>>", updated_at
         FROM organization_limits ORDER BY updated_at DESC LIMIT $1"#,
        limit,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(OrgLimits::from).collect())
}

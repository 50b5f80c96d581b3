//! SLA policies and the organization's SLA settings: each change under its row lock; and the
//! worker's SLA checks, run a batch per transaction.

use std::collections::HashMap;

use parley_db as db;
use parley_domain::Actor;
use parley_domain::orgs::{Organization, UpdateOrganization};
use parley_domain::sla::{
    CheckKind, CreateSlaPolicy, Finding, SlaPolicy, SlaPolicyFilter, SlaStats, SubjectType,
    UpdateSlaPolicy,
};
use parley_domain::tickets::TicketActivity;
use parley_domain::webhooks::EventName;
use parley_types::error::AppError;
use parley_types::ids::{OrgId, SlaPolicyId};
use parley_types::list::{Page, PageRequest};
use parley_types::time::Timestamp;
use std::time::Duration;
use uuid::Uuid;

use crate::{Caller, Ctx, Result, changed, found};

/// Changes an SLA policy.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: SlaPolicyId,
    req: UpdateSlaPolicy,
) -> Result<SlaPolicy> {
    let mut tx = ctx.pool.begin().await?;
    let mut policy = db::sla::get_policy(&mut *tx, caller.org_id, id, true)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut policy);
    db::sla::update_policy(&mut *tx, &policy).await?;
    tx.commit().await?;
    Ok(policy)
}

/// Changes the organization's SLA settings.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn update_organization(
    ctx: Ctx<'_>,
    caller: &Caller,
    req: UpdateOrganization,
) -> Result<Organization> {
    let mut tx = ctx.pool.begin().await?;
    let mut org = db::orgs::lock(&mut *tx, caller.org_id)
        .await?
        .ok_or(AppError::NotFound)?;
    req.apply(&mut org)?;
    db::orgs::update(&mut *tx, &org).await?;
    tx.commit().await?;
    Ok(org)
}

/// Runs the checks `ids` whose time has come, as of `now`: a warning given or a breach
/// recorded in the state, with its `sla.warning` or `sla.breached` event and, for a ticket, an
/// activity, all in one transaction. Checks of targets met meanwhile, or of deadlines moved
/// later, find nothing. Returns what was found.
#[tracing::instrument(skip_all, fields(checks = ids.len()))]
pub async fn run_checks(ctx: Ctx<'_>, ids: &[Uuid], now: Timestamp) -> Result<Vec<Finding>> {
    let mut tx = ctx.pool.begin().await?;
    let checked = db::sla::run_checks(&mut tx, ids, now).await?;
    let mut events = Vec::new();
    let mut activities: HashMap<Uuid, Vec<TicketActivity>> = HashMap::new();
    let mut found = Vec::new();
    for c in checked {
        let mut data = serde_json::to_value(&c.state)?;
        for f in c.findings {
            let (event, kind) = match f.kind {
                CheckKind::Warning => (EventName::SlaWarning, "sla_warning"),
                CheckKind::Deadline => (EventName::SlaBreached, "sla_breached"),
            };
            data["target"] = serde_json::json!(f.target);
            events.push((c.state.organization_id, event, data.clone()));
            if c.state.subject_type == SubjectType::Ticket {
                let what = match f.kind {
                    CheckKind::Warning => "is near its deadline",
                    CheckKind::Deadline => "was breached",
                };
                let activity = TicketActivity::new(
                    c.state.subject_id,
                    &Actor::system(),
                    kind,
                    format!(
                        "the {} SLA target {what}",
                        f.target.as_str().replace('_', " ")
                    ),
                )
                .values(None, Some(f.target.to_string()));
                activities
                    .entry(c.state.organization_id)
                    .or_default()
                    .push(activity);
            }
            found.push(f);
        }
    }
    db::outbox::emit_many(&mut tx, &events).await?;
    for (org, list) in activities {
        db::tickets::add_activities(&mut tx, OrgId::from(org), &list).await?;
    }
    tx.commit().await?;
    Ok(found)
}

// The SLA scheduler's single statements, through to `parley_db::sla`.

pub async fn take_due_checks(
    ctx: Ctx<'_>,
    limit: i64,
    lost_after: Option<Duration>,
    now: Timestamp,
) -> std::result::Result<Vec<Uuid>, sqlx::Error> {
    db::sla::take_due_checks(ctx.pool, limit, lost_after, now).await
}

pub async fn checks_backlog(ctx: Ctx<'_>) -> std::result::Result<i64, sqlx::Error> {
    db::sla::checks_backlog(ctx.pool).await
}

/// Deletes the organization's SLA policy; 404 when there is none.
pub async fn delete_policy(ctx: Ctx<'_>, caller: &Caller, id: SlaPolicyId) -> Result<()> {
    changed(db::sla::delete_policy(ctx.pool, caller.org_id, id).await?)
}

/// A page of the organization's SLA policies.
pub async fn list_policies(
    ctx: Ctx<'_>,
    org: OrgId,
    f: &SlaPolicyFilter,
    page: &PageRequest,
) -> Result<Page<SlaPolicy>> {
    Ok(db::sla::list_policies(ctx.pool, org, f, page).await?)
}

/// The organization's SLA policy.
pub async fn read_policy(ctx: Ctx<'_>, org: OrgId, id: SlaPolicyId) -> Result<SlaPolicy> {
    found(db::sla::get_policy(ctx.pool, org, id, false).await?)
}

/// Creates an SLA policy.
pub async fn create_policy(
    ctx: Ctx<'_>,
    caller: &Caller,
    req: CreateSlaPolicy,
) -> Result<SlaPolicy> {
    let policy = req.into_policy(caller.org_id.uuid());
    db::sla::insert_policy(ctx.pool, &policy).await?;
    Ok(policy)
}

/// SLA compliance of the conversations and tickets whose SLA started in `[from, to)`.
pub async fn stats(
    ctx: Ctx<'_>,
    org: OrgId,
    from: Option<Timestamp>,
    to: Option<Timestamp>,
) -> Result<SlaStats> {
    Ok(db::sla::stats(ctx.pool, org, from, to).await?)
}

//! The SLA check job: runs a batch of checks whose time has come. A warning is given or a
//! breach recorded in the state, with its `sla.warning` or `sla.breached` event and, for a
//! ticket, an activity, all in one transaction. Checks of targets met meanwhile, or of
//! deadlines moved later, find nothing.

use std::collections::HashMap;

use parley_db as db;
use parley_domain::Actor;
use parley_domain::sla::{CheckKind, SubjectType};
use parley_domain::tickets::TicketActivity;
use parley_domain::webhooks::EventName;
use parley_jobs::CheckSla;
use parley_types::metric_names::{SLA_BREACH_LAG, SLA_BREACHES, SLA_CHECKS, SLA_WARNINGS};
use uuid::Uuid;

use crate::context::Ctx;
use crate::job::{Job, JobResult};

/// The checks of a failed job stay in Postgres, marked enqueued; the scheduler enqueues them
/// again.
impl Job for CheckSla {
    const NAME: &'static str = "SLA check job";

    fn span(&self) -> tracing::Span {
        tracing::info_span!("sla_checks", checks = self.check_ids.len())
    }

    async fn run(self, ctx: &Ctx) -> JobResult {
        Ok(run(ctx, &self.check_ids).await?)
    }
}

#[tracing::instrument(skip_all, fields(checks = ids.len()))]
async fn run(ctx: &Ctx, ids: &[Uuid]) -> anyhow::Result<()> {
    let now = ctx.clock.now();
    let mut tx = ctx.pool.begin().await?;
    let checked = db::sla::run_checks(&mut tx, ids, now).await?;
    let mut events = Vec::new();
    let mut activities: HashMap<Uuid, Vec<TicketActivity>> = HashMap::new();
    let mut found = 0;
    for c in &checked {
        let mut data = serde_json::to_value(&c.state)?;
        for f in &c.findings {
            found += 1;
            let (event, name, kind) = match f.kind {
                CheckKind::Warning => (EventName::SlaWarning, SLA_WARNINGS, "sla_warning"),
                CheckKind::Deadline => (EventName::SlaBreached, SLA_BREACHES, "sla_breached"),
            };
            metrics::counter!(name, "target" => f.target.as_str()).increment(1);
            if f.kind == CheckKind::Deadline {
                let lag = (now.0 - f.deadline.0).num_microseconds().unwrap_or(0) as f64 / 1e6;
                metrics::histogram!(SLA_BREACH_LAG).record(lag.max(0.0));
            }
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
        }
    }
    db::outbox::emit_many(&mut tx, &events).await?;
    for (org, list) in activities {
        db::tickets::add_activities(&mut tx, org, &list).await?;
    }
    tx.commit().await?;
    metrics::counter!(SLA_CHECKS, "outcome" => "recorded").increment(found as u64);
    metrics::counter!(SLA_CHECKS, "outcome" => "nothing")
        .increment(ids.len().saturating_sub(found) as u64);
    Ok(())
}

//! `parley-api admin ...`: the operator API's actions from a shell, through the same use cases
//! (`parley_usecases::operator`), against Postgres and Redis directly. Prints tables, or JSON
//! with `--json`. Actions are logged in the audit log as `cli:<user>`.

use anyhow::Context;
use parley_config::Config;
use parley_domain::auth;
use parley_domain::operator::{ActionKind, DeadAction, DeadFilter, OperatorAction};

use crate::cli::{ActArgs, AdminCommand, FilterArgs, OperatorKeyCommand};
use parley_types::error::AppError;
use parley_types::list::Cursor;
use parley_usecases::operator;
use serde::Serialize;

impl FilterArgs {
    fn filter(&self) -> DeadFilter {
        DeadFilter {
            queue: self.queue,
            organization_id: self.org,
            broadcast_id: self.broadcast,
            webhook_id: self.webhook,
            error_code: self.error_code.clone(),
            from: self.from,
            to: self.to,
        }
    }
}

/// `cli:<user>`, the audit log's name of an action made from a shell.
fn actor() -> String {
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "unknown".to_owned());
    format!("cli:{user}")
}

fn app_error(err: AppError) -> anyhow::Error {
    crate::cli::describe(err)
}

fn cursor(raw: Option<&str>) -> anyhow::Result<Option<Cursor>> {
    raw.map(|c| Cursor::decode(c).context("not a cursor this command printed"))
        .transpose()
}

pub async fn run(command: AdminCommand, json: bool, config: Config) -> anyhow::Result<()> {
    run_to(command, json, config, &mut std::io::stdout()).await
}

/// [`run`], printing to `out`.
pub async fn run_to(
    command: AdminCommand,
    json: bool,
    config: Config,
    out: &mut (dyn std::io::Write + Send),
) -> anyhow::Result<()> {
    let services = crate::cli::services(&config)?;
    let ctx = services.ctx();
    let who = actor();
    match command {
        AdminCommand::Queues => {
            let q = operator::queues(ctx).await.map_err(|e| app_error(e.0))?;
            if json {
                return print_json(out, &q);
            }
            table(
                out,
                &[
                    "queue",
                    "ready",
                    "parked",
                    "scheduled",
                    "in flight",
                    "oldest s",
                    "consumers",
                    "jobs/s",
                    "items/s",
                    "paused",
                ],
                q.queues.iter().map(|q| {
                    vec![
                        q.name.clone(),
                        q.ready.to_string(),
                        q.parked.to_string(),
                        q.scheduled.to_string(),
                        q.in_flight.to_string(),
                        format!("{:.1}", q.oldest_ready_seconds),
                        q.consumers.to_string(),
                        format!("{:.2}", q.jobs_per_second),
                        format!("{:.2}", q.items_per_second),
                        if q.paused {
                            "paused".into()
                        } else {
                            String::new()
                        },
                    ]
                }),
            )?;
            writeln!(out)?;
            table(
                out,
                &[
                    "organization",
                    "name",
                    "pending",
                    "held",
                    "webhooks",
                    "sending",
                ],
                q.top_organizations.iter().map(|o| {
                    vec![
                        o.organization_id.to_string(),
                        o.name.clone(),
                        o.pending_recipients.to_string(),
                        o.held_recipients.to_string(),
                        o.pending_webhook_deliveries.to_string(),
                        if o.sending_paused {
                            "paused".into()
                        } else {
                            "on".into()
                        },
                    ]
                }),
            )?;
        }
        AdminCommand::Dead {
            filter,
            page_size,
            cursor: after,
        } => {
            let (items, next) = operator::dead(
                ctx,
                &filter.filter(),
                cursor(after.as_deref())?,
                i64::from(page_size),
            )
            .await
            .map_err(|e| app_error(e.0))?;
            let next = next.map(|c| c.encode());
            if json {
                return print_json(
                    out,
                    &serde_json::json!({"items": items, "nextCursor": next}),
                );
            }
            table(
                out,
                &[
                    "given up",
                    "id",
                    "organization",
                    "broadcast/webhook",
                    "error",
                    "attempts",
                ],
                items.iter().map(|d| {
                    vec![
                        d.failed_at.0.to_rfc3339(),
                        d.id.to_string(),
                        d.organization_id.to_string(),
                        d.broadcast_id
                            .or(d.webhook_id)
                            .map(|i| i.to_string())
                            .unwrap_or_default(),
                        format!(
                            "{} {}",
                            d.error_code.as_deref().unwrap_or(""),
                            d.error_message.as_deref().unwrap_or("")
                        ),
                        d.attempts.map(|a| a.to_string()).unwrap_or_default(),
                    ]
                }),
            )?;
            if let Some(next) = next {
                writeln!(out, "\nnext page: --cursor {next}")?;
            }
        }
        AdminCommand::Retry(args) => act(out, ctx, &who, ActionKind::Retry, args, json).await?,
        AdminCommand::Discard(args) => act(out, ctx, &who, ActionKind::Discard, args, json).await?,
        AdminCommand::Action { id } => {
            let a = operator::action(ctx, id).await.map_err(|e| match e.0 {
                AppError::NotFound => anyhow::anyhow!("no action {id}"),
                err => app_error(err),
            })?;
            print_actions(out, &[a], json)?;
        }
        AdminCommand::PauseOrg { org } => {
            let a = operator::set_org_paused(ctx, &who, org, true)
                .await
                .map_err(|e| app_error(e.0))?;
            print_actions(out, &[a], json)?;
        }
        AdminCommand::ResumeOrg { org } => {
            let a = operator::set_org_paused(ctx, &who, org, false)
                .await
                .map_err(|e| app_error(e.0))?;
            print_actions(out, &[a], json)?;
        }
        AdminCommand::PauseQueue { queue } => {
            let a = operator::set_queue_paused(ctx, &who, &queue, true)
                .await
                .map_err(|e| app_error(e.0))?;
            print_actions(out, &[a], json)?;
        }
        AdminCommand::ResumeQueue { queue } => {
            let a = operator::set_queue_paused(ctx, &who, &queue, false)
                .await
                .map_err(|e| app_error(e.0))?;
            print_actions(out, &[a], json)?;
        }
        AdminCommand::Pauses => {
            let p = operator::pauses(ctx).await.map_err(|e| app_error(e.0))?;
            if json {
                return print_json(out, &p);
            }
            table(
                out,
                &["queue", "paused at", "by"],
                p.queues.iter().map(|q| {
                    vec![
                        q.queue.clone(),
                        q.paused_at.0.to_rfc3339(),
                        q.paused_by.clone(),
                    ]
                }),
            )?;
            writeln!(out)?;
            table(
                out,
                &["organization", "name", "paused at", "held recipients"],
                p.organizations.iter().map(|o| {
                    vec![
                        o.organization_id.to_string(),
                        o.name.clone(),
                        o.paused_at.0.to_rfc3339(),
                        o.held_recipients.to_string(),
                    ]
                }),
            )?;
        }
        AdminCommand::Audit {
            page_size,
            cursor: after,
        } => {
            let (items, next) =
                operator::audit(ctx, cursor(after.as_deref())?, i64::from(page_size))
                    .await
                    .map_err(|e| app_error(e.0))?;
            if json {
                return print_json(
                    out,
                    &serde_json::json!({"items": items, "nextCursor": next.map(|c| c.encode())}),
                );
            }
            print_actions(out, &items, false)?;
            if let Some(next) = next {
                writeln!(out, "\nnext page: --cursor {}", next.encode())?;
            }
        }
        AdminCommand::Key {
            command: OperatorKeyCommand::Create { name },
        } => {
            let name = name.trim().to_owned();
            anyhow::ensure!(
                !name.is_empty() && name.len() <= 100 && !name.contains('\0'),
                "a name of 1 to 100 characters"
            );
            let key = auth::generate_operator_key();
            anyhow::ensure!(
                operator::create_operator_key(ctx, &name, &auth::hash_key(&key))
                    .await
                    .map_err(|e| app_error(e.0))?,
                "an operator key named {name:?} exists"
            );
            writeln!(
                out,
                "{}",
                serde_json::json!({"name": name, "operatorKey": key})
            )?;
        }
        AdminCommand::Key {
            command: OperatorKeyCommand::Revoke { name },
        } => {
            anyhow::ensure!(
                operator::revoke_operator_key(ctx, &name)
                    .await
                    .map_err(|e| app_error(e.0))?,
                "no active operator key named {name:?}"
            );
            eprintln!("operator key {name:?} revoked");
        }
    }
    Ok(())
}

async fn act(
    out: &mut (dyn std::io::Write + Send),
    ctx: parley_usecases::Ctx<'_>,
    who: &str,
    kind: ActionKind,
    args: ActArgs,
    json: bool,
) -> anyhow::Result<()> {
    let req = DeadAction {
        filter: args.filter.filter(),
        ids: args.ids,
        limit: args.limit,
    };
    let mut a = operator::act(ctx, who, kind, &req)
        .await
        .map_err(|e| app_error(e.0))?;
    if args.wait {
        while a.status == parley_domain::operator::ActionStatus::Running {
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            a = operator::action(ctx, a.id).await.map_err(|e| match e.0 {
                AppError::NotFound => anyhow::anyhow!("the action is gone"),
                err => app_error(err),
            })?;
        }
    }
    print_actions(out, &[a], json)
}

fn print_json(out: &mut dyn std::io::Write, value: &impl Serialize) -> anyhow::Result<()> {
    writeln!(out, "{}", serde_json::to_string_pretty(value)?)?;
    Ok(())
}

fn print_actions(
    out: &mut dyn std::io::Write,
    actions: &[OperatorAction],
    json: bool,
) -> anyhow::Result<()> {
    if json {
        return if let [one] = actions {
            print_json(out, one)
        } else {
            print_json(out, &actions)
        };
    }
    table(
        out,
        &[
            "when", "who", "what", "target", "status", "done", "matched", "id",
        ],
        actions.iter().map(|a| {
            vec![
                a.created_at.0.to_rfc3339(),
                a.actor.clone(),
                a.action.as_str().to_owned(),
                a.queue
                    .clone()
                    .or(a.organization_id.map(|o| o.to_string()))
                    .unwrap_or_default(),
                a.status.as_str().to_owned(),
                a.done.to_string(),
                a.matched.to_string(),
                a.id.to_string(),
            ]
        }),
    )?;
    Ok(())
}

/// Prints rows under their headers, each column as wide as its widest cell.
fn table(
    out: &mut dyn std::io::Write,
    headers: &[&str],
    rows: impl Iterator<Item = Vec<String>>,
) -> std::io::Result<()> {
    // Names and error messages come from tenants and providers: no control character of
    // theirs reaches the operator's terminal.
    let rows: Vec<Vec<String>> = rows
        .map(|row| {
            row.into_iter()
                .map(|c| {
                    c.chars()
                        .map(|ch| if ch.is_control() { '\u{fffd}' } else { ch })
                        .collect()
                })
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |out: &mut dyn std::io::Write, cells: Vec<&str>| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        writeln!(out, "{}", parts.join("  ").trim_end())
    };
    line(out, headers.to_vec())?;
    for row in &rows {
        line(out, row.iter().map(String::as_str).collect())?;
    }
    if rows.is_empty() {
        writeln!(out, "(none)")?;
    }
    Ok(())
}

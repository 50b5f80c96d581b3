//! The operator API (`/admin/v1`), on the operator's credential
//! (`middleware::operator_auth`): queues and backlogs, dead work, retries and discards,
//! pauses, the audit log. The rules are `parley_usecases::operator`'s, which the CLI calls too;
//! the operator page (`/admin`, `crate::admin_page`) calls only these routes.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use parley_domain::operator::{
    ActionKind, DeadAction, DeadFilter, DeadItem, OperatorAction, Pauses, QueuesOverview,
};
use parley_types::error::AppError;
use parley_types::ids::OrgId;
use parley_types::list::Cursor;
use parley_usecases::operator;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::envelope::{Envelope, ErrorEnvelope, Reply};
use crate::error::{ApiError, AppResult};
use crate::extract::{Json, Operator, Path, Query, parse_query};
use crate::state::AppState;

/// Where the operator API's routes start.
pub const PREFIX: &str = "/admin/v1/";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(queues))
        .routes(routes!(dead))
        .routes(routes!(retry))
        .routes(routes!(discard))
        .routes(routes!(action))
        .routes(routes!(audit))
        .routes(routes!(pauses))
        .routes(routes!(pause_organization))
        .routes(routes!(resume_organization))
        .routes(routes!(pause_queue))
        .routes(routes!(resume_queue))
}

/// A keyset page: `pageSize` items after `cursor`.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct KeysetParams {
    /// Items per page, 1 to 100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub page_size: Option<u32>,
    /// The `nextCursor` of the previous page.
    #[param(
        pattern = r"^[0-9]{1,17}_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
        max_length = 54
    )]
    pub cursor: Option<String>,
}

impl KeysetParams {
    fn parts(&self) -> Result<(Option<Cursor>, i64), AppError> {
        let cursor = match &self.cursor {
            None => None,
            Some(raw) => Some(Cursor::decode(raw).ok_or_else(|| {
                AppError::validation("cursor", "invalid_format", "not a cursor this API gave")
            })?),
        };
        let size = match self.page_size {
            None => 50,
            Some(n @ 1..=100) => i64::from(n),
            Some(_) => {
                return Err(AppError::validation(
                    "pageSize",
                    "out_of_range",
                    "from 1 to 100",
                ));
            }
        };
        Ok((cursor, size))
    }
}

/// A page of dead work.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeadPage {
    pub items: Vec<DeadItem>,
    /// The next page's `cursor`; null on the last page.
    pub next_cursor: Option<String>,
}

/// A page of the audit log.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditPage {
    pub items: Vec<OperatorAction>,
    /// The next page's `cursor`; null on the last page.
    pub next_cursor: Option<String>,
}

/// Every queue (ready, parked, scheduled, in flight, oldest waiting age, consumers, rates over
/// the last minute, paused) and the organizations with the most waiting work.
#[utoipa::path(get, path = "/admin/v1/queues", tag = "admin",
    responses((status = 200, description = "The queues", body = Envelope<QueuesOverview>)))]
async fn queues(State(state): State<AppState>, _: Operator) -> AppResult<Reply<QueuesOverview>> {
    Ok(Reply::ok(operator::queues(state.use_cases()).await?))
}

/// Dead work of one queue, newest first: recipients failed, webhook deliveries exhausted,
/// imports failed, SLA checks not run 10 minutes after they were due.
#[utoipa::path(get, path = "/admin/v1/dead", tag = "admin",
    params(DeadFilter, KeysetParams),
    responses(
        (status = 200, description = "A page of dead work", body = Envelope<DeadPage>),
        (status = 422, description = "No `queue`, or a filter it does not take", body = ErrorEnvelope),
    ))]
async fn dead(
    State(state): State<AppState>,
    _: Operator,
    RawQuery(query): RawQuery,
    Query(page): Query<KeysetParams>,
) -> AppResult<Reply<DeadPage>> {
    let (after, size) = page.parts()?;
    // The filter is read strictly (an unknown field is refused), from the parameters the page's
    // own leave.
    let query = query.unwrap_or_default();
    let rest = form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| !matches!(k.as_ref(), "pageSize" | "cursor"));
    let filter: DeadFilter = parse_query(
        &form_urlencoded::Serializer::new(String::new())
            .extend_pairs(rest)
            .finish(),
    )?;
    let (items, next) = operator::dead(state.use_cases(), &filter, after, size).await?;
    Ok(Reply::ok(DeadPage {
        items,
        next_cursor: next.map(|c| c.encode()),
    }))
}

fn accepted(action: OperatorAction) -> impl IntoResponse {
    let mut reply = Reply::ok(action).with_message("Accepted").into_response();
    *reply.status_mut() = StatusCode::ACCEPTED;
    reply
}

/// Retries the dead work a filter (and `ids`, if given) selects, at most `limit` items: run
/// by the workers a batch at a time; follow it at `/admin/v1/actions/{id}`.
#[utoipa::path(post, path = "/admin/v1/dead/retry", tag = "admin",
    request_body = DeadAction,
    responses(
        (status = 202, description = "The action, running (completed if nothing matched)", body = Envelope<OperatorAction>),
        (status = 422, description = "No `queue`, a filter it does not take, or a `limit` out of range", body = ErrorEnvelope),
    ))]
async fn retry(
    State(state): State<AppState>,
    who: Operator,
    Json(req): Json<DeadAction>,
) -> Result<impl IntoResponse, ApiError> {
    let action = operator::act(state.use_cases(), &who.0, ActionKind::Retry, &req).await?;
    Ok(accepted(action))
}

/// Discards the dead work a filter (and `ids`) selects: out of the dead list, its records
/// kept (an SLA check is deleted).
#[utoipa::path(post, path = "/admin/v1/dead/discard", tag = "admin",
    request_body = DeadAction,
    responses(
        (status = 202, description = "The action, running (completed if nothing matched)", body = Envelope<OperatorAction>),
        (status = 422, description = "No `queue`, a filter it does not take, or a `limit` out of range", body = ErrorEnvelope),
    ))]
async fn discard(
    State(state): State<AppState>,
    who: Operator,
    Json(req): Json<DeadAction>,
) -> Result<impl IntoResponse, ApiError> {
    let action = operator::act(state.use_cases(), &who.0, ActionKind::Discard, &req).await?;
    Ok(accepted(action))
}

/// One action and its progress (`done` of `matched`).
#[utoipa::path(get, path = "/admin/v1/actions/{id}", tag = "admin",
    params(("id" = Uuid, Path, description = "Action id")),
    responses((status = 200, description = "The action", body = Envelope<OperatorAction>)))]
async fn action(
    State(state): State<AppState>,
    _: Operator,
    Path(id): Path<Uuid>,
) -> AppResult<Reply<OperatorAction>> {
    Ok(Reply::ok(operator::action(state.use_cases(), id).await?))
}

/// The audit log: every operator action, newest first.
#[utoipa::path(get, path = "/admin/v1/audit", tag = "admin",
    params(KeysetParams),
    responses((status = 200, description = "A page of the audit log", body = Envelope<AuditPage>)))]
async fn audit(
    State(state): State<AppState>,
    _: Operator,
    Query(page): Query<KeysetParams>,
) -> AppResult<Reply<AuditPage>> {
    let (after, size) = page.parts()?;
    let (items, next) = operator::audit(state.use_cases(), after, size).await?;
    Ok(Reply::ok(AuditPage {
        items,
        next_cursor: next.map(|c| c.encode()),
    }))
}

/// The paused queues and organizations.
#[utoipa::path(get, path = "/admin/v1/pauses", tag = "admin",
    responses((status = 200, description = "What is paused", body = Envelope<Pauses>)))]
async fn pauses(State(state): State<AppState>, _: Operator) -> AppResult<Reply<Pauses>> {
    Ok(Reply::ok(operator::pauses(state.use_cases()).await?))
}

/// Pauses an organization's sending: its recipients are held (`held`, no `holdUntil`, counted
/// in its broadcasts' `heldCount`) as their jobs come, `high` ones too; no one else's.
#[utoipa::path(post, path = "/admin/v1/organizations/{id}/pause", tag = "admin",
    params(("id" = Uuid, Path, description = "Organization id")),
    responses(
        (status = 200, description = "The action", body = Envelope<OperatorAction>),
        (status = 409, description = "Already paused (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn pause_organization(
    State(state): State<AppState>,
    who: Operator,
    Path(id): Path<OrgId>,
) -> AppResult<Reply<OperatorAction>> {
    Ok(Reply::ok(
        operator::set_org_paused(state.use_cases(), &who.0, id, true).await?,
    ))
}

/// Resumes an organization's sending: the recipients its pause held are released (each sent
/// once) by the workers; the action runs until all are.
#[utoipa::path(post, path = "/admin/v1/organizations/{id}/resume", tag = "admin",
    params(("id" = Uuid, Path, description = "Organization id")),
    responses(
        (status = 200, description = "The action", body = Envelope<OperatorAction>),
        (status = 409, description = "Not paused (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn resume_organization(
    State(state): State<AppState>,
    who: Operator,
    Path(id): Path<OrgId>,
) -> AppResult<Reply<OperatorAction>> {
    Ok(Reply::ok(
        operator::set_org_paused(state.use_cases(), &who.0, id, false).await?,
    ))
}

/// The queues an operator can pause.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum QueueParam {
    BroadcastDispatch,
    /// Also read under its former name, `recipient-delivery`, for one release.
    #[serde(alias = "recipient-delivery")]
    RecipientSend,
    WebhookDelivery,
    SlaCheck,
    ContactImport,
}

impl QueueParam {
    fn name(self) -> &'static str {
        match self {
            QueueParam::BroadcastDispatch => "broadcast-dispatch",
            QueueParam::RecipientSend => "recipient-send",
            QueueParam::WebhookDelivery => "webhook-delivery",
            QueueParam::SlaCheck => "sla-check",
            QueueParam::ContactImport => "contact-import",
        }
    }
}

/// Pauses a queue: its workers stop taking its jobs (those running finish); they wait in
/// Redis.
#[utoipa::path(post, path = "/admin/v1/queues/{name}/pause", tag = "admin",
    params(("name" = inline(QueueParam), Path, description = "Queue")),
    responses(
        (status = 200, description = "The action", body = Envelope<OperatorAction>),
        (status = 409, description = "Already paused (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn pause_queue(
    State(state): State<AppState>,
    who: Operator,
    Path(name): Path<QueueParam>,
) -> AppResult<Reply<OperatorAction>> {
    Ok(Reply::ok(
        operator::set_queue_paused(state.use_cases(), &who.0, name.name(), true).await?,
    ))
}

/// Resumes a queue.
#[utoipa::path(post, path = "/admin/v1/queues/{name}/resume", tag = "admin",
    params(("name" = inline(QueueParam), Path, description = "Queue")),
    responses(
        (status = 200, description = "The action", body = Envelope<OperatorAction>),
        (status = 409, description = "Not paused (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn resume_queue(
    State(state): State<AppState>,
    who: Operator,
    Path(name): Path<QueueParam>,
) -> AppResult<Reply<OperatorAction>> {
    Ok(Reply::ok(
        operator::set_queue_paused(state.use_cases(), &who.0, name.name(), false).await?,
    ))
}

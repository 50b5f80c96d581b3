//! Tickets: replies, assignees, an activity for
//! every change, and the SLA clock. Every change and its event (`ticket.*`) commit together.

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::conversations::AssignUsers;
use parley_domain::sla::{SlaState, SlaStateView};
use parley_domain::tickets::{
    CreateReply, CreateTicket, Ticket, TicketFilter, TicketReply, UpdateTicket,
};
use parley_types::ids::{TicketId, UserId};
use parley_types::list::PageParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Query, Tenant, TicketReader};
use crate::state::AppState;
use parley_usecases::tickets;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update))
        .routes(routes!(add_reply, replies))
        .routes(routes!(assign))
        .routes(routes!(unassign))
        .routes(routes!(sla))
}

/// Create a ticket; the most specific SLA policy starts its clock.
#[utoipa::path(post, path = "/api/v1/tickets", tag = "tickets",
    request_body = CreateTicket,
    responses((status = 201, description = "The new ticket, with its `accessToken`", body = Envelope<Ticket>)))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateTicket>,
) -> AppResult<Reply<Ticket>> {
    Ok(Reply::created(
        tickets::create(state.use_cases(), &tenant.caller(), req).await?,
    ))
}

/// List tickets with their customer, category, team, SLA state, assignees, attachments and
/// tags (activities and replies: `GET /tickets/{id}`).
#[utoipa::path(get, path = "/api/v1/tickets", tag = "tickets",
    params(PageParams, TicketFilter),
    responses((status = 200, description = "A page of tickets", body = ListEnvelope<Ticket>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
    Query(filter): Query<TicketFilter>,
) -> AppResult<Reply<Vec<Ticket>>> {
    Ok(Reply::page(
        tickets::list(state.use_cases(), tenant.org_id, &filter, &page).await?,
    ))
}

/// Get a ticket with everything it embeds, its latest activities and replies included.
#[utoipa::path(get, path = "/api/v1/tickets/{id}", tag = "tickets",
    params(("id" = Uuid, Path, description = "Ticket id")),
    responses((status = 200, description = "The ticket", body = Envelope<Ticket>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TicketId>,
) -> AppResult<Reply<Ticket>> {
    Ok(Reply::ok(
        tickets::read(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update a ticket. Each changed field is an activity; `closed` is final.
#[utoipa::path(patch, path = "/api/v1/tickets/{id}", tag = "tickets",
    params(("id" = Uuid, Path, description = "Ticket id")),
    request_body = UpdateTicket,
    responses(
        (status = 200, description = "The updated ticket", body = Envelope<Ticket>),
        (status = 409, description = "The ticket is closed (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TicketId>,
    Json(req): Json<UpdateTicket>,
) -> AppResult<Reply<Ticket>> {
    Ok(Reply::ok(
        tickets::update(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Reply on a ticket, as an agent or as the customer. An agent's reply is a response for the
/// SLA (an internal note is not); a customer's opens a next-response cycle, and moves a
/// `pending` ticket back to `open`.
#[utoipa::path(post, path = "/api/v1/tickets/{id}/replies", tag = "tickets",
    params(("id" = Uuid, Path, description = "Ticket id")),
    request_body = CreateReply,
    responses(
        (status = 201, description = "The reply", body = Envelope<TicketReply>),
        (status = 409, description = "The ticket is closed (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn add_reply(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TicketId>,
    Json(req): Json<CreateReply>,
) -> AppResult<Reply<TicketReply>> {
    Ok(Reply::created(
        tickets::add_reply(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// A ticket's replies.
#[utoipa::path(get, path = "/api/v1/tickets/{id}/replies", tag = "tickets",
    params(("id" = Uuid, Path, description = "Ticket id"), PageParams),
    responses((status = 200, description = "A page of replies", body = ListEnvelope<TicketReply>)))]
async fn replies(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TicketId>,
    Paging(page): Paging,
) -> AppResult<Reply<Vec<TicketReply>>> {
    Ok(Reply::page(
        tickets::replies(state.use_cases(), tenant.org_id, id, &page).await?,
    ))
}

/// Assign users; users already assigned stay as they are.
#[utoipa::path(post, path = "/api/v1/tickets/{id}/assignees", tag = "tickets",
    params(("id" = Uuid, Path, description = "Ticket id")),
    request_body = AssignUsers,
    responses((status = 200, description = "The ticket", body = Envelope<Ticket>)))]
async fn assign(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<TicketId>,
    Json(req): Json<AssignUsers>,
) -> AppResult<Reply<Ticket>> {
    Ok(Reply::ok(
        tickets::assign(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Unassign a user.
#[utoipa::path(delete, path = "/api/v1/tickets/{id}/assignees/{userId}", tag = "tickets",
    params(("id" = Uuid, Path, description = "Ticket id"), ("userId" = Uuid, Path, description = "The assigned user")),
    responses((status = 200, description = "The assignment is gone; `id` is the user's", body = Envelope<Deleted>)))]
async fn unassign(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((id, user)): Path<(TicketId, UserId)>,
) -> AppResult<Reply<Deleted>> {
    Ok(Reply::deleted(
        tickets::unassign(state.use_cases(), &tenant.caller(), id, user).await?,
    ))
}

/// The ticket's SLA state, `secondsRemaining` as of now; `null` when no policy
/// applies. Takes an API key with `tickets:read`, or the ticket's own `accessToken` in
/// `X-Ticket-Access-Token` (which grants this read only).
#[utoipa::path(get, path = "/api/v1/tickets/{id}/sla", tag = "tickets",
    params(
        ("id" = Uuid, Path, description = "Ticket id"),
        ("X-Ticket-Access-Token" = Option<String>, Header, description = "The ticket's `accessToken`, instead of an API key"),
    ),
    responses((status = 200, description = "The SLA state", body = Envelope<Option<SlaStateView>>)))]
async fn sla(
    State(state): State<AppState>,
    reader: TicketReader,
    Path(id): Path<TicketId>,
) -> AppResult<Reply<Option<SlaState>>> {
    let ctx = state.use_cases();
    Ok(Reply::ok(match reader {
        TicketReader::Key(tenant) => tickets::sla_state(ctx, tenant.org_id, id).await?,
        // The token was checked against this path's ticket.
        TicketReader::Token(access) => tickets::sla_state_of(ctx, &access.ticket).await?,
    }))
}

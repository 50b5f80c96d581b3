//! Conversations: messages, assignees, teams,
//! handover. Every change and its event (`conversation.*`, `message.*`) commit together.

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::AppResult;
use axum::extract::State;
use parley_domain::conversations::{
    AssignTeams, AssignUsers, Conversation, ConversationFilter, CreateConversation, CreateMessage,
    Handover, Message, UpdateConversation,
};
use parley_types::ids::{ConversationId, TeamId, UserId};
use parley_types::list::PageParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;
use parley_usecases::conversations;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update))
        .routes(routes!(add_message, messages))
        .routes(routes!(assign_users))
        .routes(routes!(unassign_user))
        .routes(routes!(assign_teams))
        .routes(routes!(unassign_team))
        .routes(routes!(handover))
}

/// Start a conversation with a contact on a channel, optionally with its first message.
#[utoipa::path(post, path = "/api/v1/conversations", tag = "conversations",
    request_body = CreateConversation,
    responses((status = 201, description = "The new conversation, with its SLA state when a policy applies", body = Envelope<Conversation>)))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateConversation>,
) -> AppResult<Reply<Conversation>> {
    Ok(Reply::created(
        conversations::create(state.use_cases(), &tenant.caller(), req).await?,
    ))
}

/// List conversations with their category, contact, assignees, teams, latest
/// messages, tags and SLA state.
#[utoipa::path(get, path = "/api/v1/conversations", tag = "conversations",
    params(PageParams, ConversationFilter),
    responses((status = 200, description = "A page of conversations", body = ListEnvelope<Conversation>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
    Query(filter): Query<ConversationFilter>,
) -> AppResult<Reply<Vec<Conversation>>> {
    Ok(Reply::page(
        conversations::list(state.use_cases(), tenant.org_id, &filter, &page).await?,
    ))
}

/// Get a conversation with everything it embeds.
#[utoipa::path(get, path = "/api/v1/conversations/{id}", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id")),
    responses((status = 200, description = "The conversation", body = Envelope<Conversation>)))]
async fn get(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ConversationId>,
) -> AppResult<Reply<Conversation>> {
    Ok(Reply::ok(
        conversations::read(state.use_cases(), tenant.org_id, id).await?,
    ))
}

/// Update a conversation: status (`closed` ends it and resolves its SLA), priority, snooze,
/// flags, deal fields, category, tags.
#[utoipa::path(patch, path = "/api/v1/conversations/{id}", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id")),
    request_body = UpdateConversation,
    responses(
        (status = 200, description = "The updated conversation", body = Envelope<Conversation>),
        (status = 409, description = "The conversation is closed (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn update(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ConversationId>,
    Json(req): Json<UpdateConversation>,
) -> AppResult<Reply<Conversation>> {
    Ok(Reply::ok(
        conversations::update(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Add a message: inbound (`senderType: contact`, the default) or outbound (`user`, `ai`,
/// `system`). An agent's (`user`) message is a response for the SLA; a customer's opens a
/// next-response cycle.
#[utoipa::path(post, path = "/api/v1/conversations/{id}/messages", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id")),
    request_body = CreateMessage,
    responses(
        (status = 201, description = "The message", body = Envelope<Message>),
        (status = 409, description = "The conversation is closed (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn add_message(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ConversationId>,
    Json(req): Json<CreateMessage>,
) -> AppResult<Reply<Message>> {
    Ok(Reply::created(
        conversations::add_message(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// A conversation's messages.
#[utoipa::path(get, path = "/api/v1/conversations/{id}/messages", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id"), PageParams),
    responses((status = 200, description = "A page of messages", body = ListEnvelope<Message>)))]
async fn messages(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ConversationId>,
    Paging(page): Paging,
) -> AppResult<Reply<Vec<Message>>> {
    Ok(Reply::page(
        conversations::messages(state.use_cases(), tenant.org_id, id, &page).await?,
    ))
}

/// Assign users; users already assigned stay as they are. Emits `conversation.assigned` when
/// someone new is assigned.
#[utoipa::path(post, path = "/api/v1/conversations/{id}/assignees", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id")),
    request_body = AssignUsers,
    responses((status = 200, description = "The conversation", body = Envelope<Conversation>)))]
async fn assign_users(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ConversationId>,
    Json(req): Json<AssignUsers>,
) -> AppResult<Reply<Conversation>> {
    Ok(Reply::ok(
        conversations::assign_users(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Assign teams; teams already assigned stay as they are. Emits `conversation.assigned` when
/// a team is newly assigned.
#[utoipa::path(post, path = "/api/v1/conversations/{id}/teams", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id")),
    request_body = AssignTeams,
    responses((status = 200, description = "The conversation", body = Envelope<Conversation>)))]
async fn assign_teams(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ConversationId>,
    Json(req): Json<AssignTeams>,
) -> AppResult<Reply<Conversation>> {
    Ok(Reply::ok(
        conversations::assign_teams(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

/// Unassign a user.
#[utoipa::path(delete, path = "/api/v1/conversations/{id}/assignees/{userId}", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id"), ("userId" = Uuid, Path, description = "The assigned user")),
    responses((status = 200, description = "The assignment is gone; `id` is the user's", body = Envelope<Deleted>)))]
async fn unassign_user(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((id, user)): Path<(ConversationId, UserId)>,
) -> AppResult<Reply<Deleted>> {
    Ok(Reply::deleted(
        conversations::unassign_user(state.use_cases(), &tenant.caller(), id, user).await?,
    ))
}

/// Unassign a team.
#[utoipa::path(delete, path = "/api/v1/conversations/{id}/teams/{teamId}", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id"), ("teamId" = Uuid, Path, description = "The assigned team")),
    responses((status = 200, description = "The assignment is gone; `id` is the team's", body = Envelope<Deleted>)))]
async fn unassign_team(
    State(state): State<AppState>,
    tenant: Tenant,
    Path((id, team)): Path<(ConversationId, TeamId)>,
) -> AppResult<Reply<Deleted>> {
    Ok(Reply::deleted(
        conversations::unassign_team(state.use_cases(), &tenant.caller(), id, team).await?,
    ))
}

/// Move the handover to a human agent along: `request`, `accept`, `complete`, `timeout`.
#[utoipa::path(post, path = "/api/v1/conversations/{id}/handover", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id")),
    request_body = Handover,
    responses(
        (status = 200, description = "The conversation", body = Envelope<Conversation>),
        (status = 409, description = "The handover's state does not allow the action (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn handover(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<ConversationId>,
    Json(req): Json<Handover>,
) -> AppResult<Reply<Conversation>> {
    Ok(Reply::ok(
        conversations::handover(state.use_cases(), &tenant.caller(), id, req).await?,
    ))
}

//! Conversations (endpoint 16 and the operations beside it): messages, assignees, teams,
//! handover. Every change and its event (`conversation.*`, `message.*`) commit together.

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::{AppError, AppResult};
use axum::extract::State;
use parley_db as db;
use parley_db::conversations::AttachmentRow;
use parley_db::refs::{self, RefTable};
use parley_db::tags::{TagLink, set_tags};
use parley_domain::conversations::{
    AssignTeams, AssignUsers, Conversation, ConversationFilter, ConversationStatus,
    CreateConversation, CreateMessage, Handover, Message, SenderType, UpdateConversation,
};
use parley_domain::sla::SubjectType;
use parley_domain::webhooks::EventName;
use parley_types::list::PageParams;
use parley_types::time::Timestamp;
use sqlx::PgConnection;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::extract::{Json, Paging, Path, Query, Tenant};
use crate::state::AppState;

const MAX_TAGS: usize = 50;
const MAX_PER_CALL: usize = 50;

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

/// The conversation with everything it embeds, as the API and its events show it.
async fn read(conn: &mut PgConnection, org: Uuid, id: Uuid) -> AppResult<Conversation> {
    db::conversations::get(conn, org, id)
        .await?
        .ok_or(AppError::NotFound.into())
}

async fn lock(conn: &mut PgConnection, org: Uuid, id: Uuid) -> AppResult<Conversation> {
    db::conversations::lock(conn, org, id)
        .await?
        .ok_or(AppError::NotFound.into())
}

/// Writes a message of a locked conversation with its attachments, its effects (an inbound
/// message wakes a pending or snoozed conversation; SLA clocks) and its event.
async fn write_message(
    conn: &mut PgConnection,
    c: &mut Conversation,
    req: CreateMessage,
    field: &str,
) -> AppResult<Message> {
    let now = Timestamp::now();
    if c.status == ConversationStatus::Closed {
        return Err(AppError::invalid_state("the conversation is closed; start a new one").into());
    }
    let (message, attachments) = req.into_message(c, now).map_err(|e| e.under(field))?;
    let org = c.organization_id;
    if message.sender_type == SenderType::User {
        refs::check_id(
            conn,
            RefTable::Users,
            org,
            &format!("{field}senderId"),
            message.sender_id,
        )
        .await?;
    }
    for (i, a) in attachments.iter().enumerate() {
        refs::check_id(
            conn,
            RefTable::Files,
            org,
            &format!("{field}attachments[{i}].fileId"),
            Some(a.file_id),
        )
        .await?;
    }
    let file_ids: Vec<Uuid> = attachments.iter().map(|a| a.file_id).collect();
    let files = db::files::get_many(&mut *conn, org, &file_ids).await?;
    let rows: Vec<AttachmentRow> = attachments
        .into_iter()
        .map(|a| AttachmentRow {
            kind: a
                .kind
                .or(files.get(&a.file_id).map(|f| f.file_type))
                .unwrap_or(parley_domain::files::FileType::Other),
            file_id: a.file_id,
            caption: a.caption.map(Into::into),
            external_media_id: a.external_media_id.map(Into::into),
            duration: a.duration,
            metadata: serde_json::Value::Object(a.metadata.unwrap_or_default()),
        })
        .collect();
    db::conversations::insert_message(conn, org, &message, &rows).await?;
    if message.is_inbound()
        && matches!(
            c.status,
            ConversationStatus::Pending | ConversationStatus::Snoozed
        )
    {
        c.status = ConversationStatus::Active;
        c.snooze_until = None;
        c.snoozed_at = None;
        c.updated_at = now;
        db::conversations::update(&mut *conn, c).await?;
    }
    match message.sender_type {
        SenderType::Contact => {
            db::sla::update(conn, SubjectType::Conversation, c.id, |s, clock| {
                s.customer_wrote(now, clock)
            })
            .await?;
        }
        SenderType::User => {
            db::sla::update(conn, SubjectType::Conversation, c.id, |s, _| {
                s.agent_replied(now)
            })
            .await?;
        }
        SenderType::Ai | SenderType::System => {}
    }
    let message = db::conversations::message(conn, org, message.id)
        .await?
        .ok_or(AppError::NotFound)?;
    let event = if message.is_inbound() {
        EventName::MessageReceived
    } else {
        EventName::MessageSent
    };
    db::outbox::emit(conn, org, event, &message).await?;
    Ok(message)
}

/// Start a conversation with a contact on a channel, optionally with its first message.
#[utoipa::path(post, path = "/api/v1/conversations", tag = "conversations",
    request_body = CreateConversation,
    responses((status = 201, description = "The new conversation, with its SLA state when a policy applies", body = Envelope<Conversation>)))]
async fn create(
    State(s): State<AppState>,
    t: Tenant,
    Json(req): Json<CreateConversation>,
) -> AppResult<Reply<Conversation>> {
    let mut tx = s.pool.begin().await?;
    refs::check_id(
        &mut tx,
        RefTable::Contacts,
        t.org_id,
        "contactId",
        Some(req.contact_id),
    )
    .await?;
    refs::check_id(
        &mut tx,
        RefTable::Categories,
        t.org_id,
        "categoryId",
        req.category_id,
    )
    .await?;
    let tag_ids = parley_types::ids::dedup(req.tag_ids.clone().unwrap_or_default());
    refs::check_ids(
        &mut tx,
        RefTable::Tags,
        t.org_id,
        "tagIds",
        &tag_ids,
        MAX_TAGS,
    )
    .await?;
    let number = db::orgs::next_number(&mut tx, t.org_id, "conversation").await?;
    let mut req = req;
    let first = req.message.take();
    let mut c = req.into_conversation(t.org_id, number);
    db::conversations::insert(&mut *tx, &c).await?;
    set_tags(&mut tx, TagLink::Conversation, t.org_id, c.id, &tag_ids).await?;
    db::sla::start(
        &mut tx,
        t.org_id,
        SubjectType::Conversation,
        c.id,
        c.priority,
        c.channel,
        c.created_at,
    )
    .await?;
    let started = read(&mut tx, t.org_id, c.id).await?;
    db::outbox::emit(&mut tx, t.org_id, EventName::ConversationStarted, &started).await?;
    if let Some(first) = first {
        write_message(&mut tx, &mut c, first, "message.").await?;
    }
    let c = read(&mut tx, t.org_id, c.id).await?;
    tx.commit().await?;
    Ok(Reply::created(c))
}

/// List conversations (endpoint 16) with their category, contact, assignees, teams, latest
/// messages, tags and SLA state.
#[utoipa::path(get, path = "/api/v1/conversations", tag = "conversations",
    params(PageParams, ConversationFilter),
    responses((status = 200, description = "A page of conversations", body = ListEnvelope<Conversation>)))]
async fn list(
    State(s): State<AppState>,
    t: Tenant,
    Paging(page): Paging,
    Query(filter): Query<ConversationFilter>,
) -> AppResult<Reply<Vec<Conversation>>> {
    let tag = match &filter.tag {
        Some(tag) => db::contacts::resolve_tag(&s.pool, t.org_id, tag.as_str()).await?,
        None => None,
    };
    Ok(Reply::page(
        db::conversations::list(&s.pool, t.org_id, &filter, tag, &page).await?,
    ))
}

/// Get a conversation with everything it embeds.
#[utoipa::path(get, path = "/api/v1/conversations/{id}", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id")),
    responses((status = 200, description = "The conversation", body = Envelope<Conversation>)))]
async fn get(
    State(s): State<AppState>,
    t: Tenant,
    Path(id): Path<Uuid>,
) -> AppResult<Reply<Conversation>> {
    let mut conn = s.pool.acquire().await?;
    Ok(Reply::ok(read(&mut conn, t.org_id, id).await?))
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
    State(s): State<AppState>,
    t: Tenant,
    Path(id): Path<Uuid>,
    Json(req): Json<UpdateConversation>,
) -> AppResult<Reply<Conversation>> {
    let now = Timestamp::now();
    let mut tx = s.pool.begin().await?;
    let mut c = lock(&mut tx, t.org_id, id).await?;
    let change = req.apply(&mut c, now)?;
    refs::check_id(
        &mut tx,
        RefTable::Categories,
        t.org_id,
        "categoryId",
        c.category_id,
    )
    .await?;
    if let Some(tag_ids) = &change.tag_ids {
        let tag_ids = parley_types::ids::dedup(tag_ids.clone());
        refs::check_ids(
            &mut tx,
            RefTable::Tags,
            t.org_id,
            "tagIds",
            &tag_ids,
            MAX_TAGS,
        )
        .await?;
        set_tags(&mut tx, TagLink::Conversation, t.org_id, id, &tag_ids).await?;
    }
    db::conversations::update(&mut *tx, &c).await?;
    if change.priority_changed {
        let priority = c.priority;
        db::sla::update(&mut tx, SubjectType::Conversation, id, |s, _| {
            s.priority = priority
        })
        .await?;
    }
    if change.closed {
        db::sla::update(&mut tx, SubjectType::Conversation, id, |s, clock| {
            s.resolve(now, clock)
        })
        .await?;
    }
    let c = read(&mut tx, t.org_id, id).await?;
    if change.closed {
        db::outbox::emit(&mut tx, t.org_id, EventName::ConversationEnded, &c).await?;
    }
    tx.commit().await?;
    Ok(Reply::ok(c))
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
    State(s): State<AppState>,
    t: Tenant,
    Path(id): Path<Uuid>,
    Json(req): Json<CreateMessage>,
) -> AppResult<Reply<Message>> {
    let mut tx = s.pool.begin().await?;
    let mut c = lock(&mut tx, t.org_id, id).await?;
    let message = write_message(&mut tx, &mut c, req, "").await?;
    tx.commit().await?;
    Ok(Reply::created(message))
}

/// A conversation's messages.
#[utoipa::path(get, path = "/api/v1/conversations/{id}/messages", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id"), PageParams),
    responses((status = 200, description = "A page of messages", body = ListEnvelope<Message>)))]
async fn messages(
    State(s): State<AppState>,
    t: Tenant,
    Path(id): Path<Uuid>,
    Paging(page): Paging,
) -> AppResult<Reply<Vec<Message>>> {
    if !db::conversations::exists(&s.pool, t.org_id, id).await? {
        return Err(AppError::NotFound.into());
    }
    Ok(Reply::page(
        db::conversations::messages(&s.pool, t.org_id, id, &page).await?,
    ))
}

/// Assign users; users already assigned stay as they are. Emits `conversation.assigned` when
/// someone new is assigned.
#[utoipa::path(post, path = "/api/v1/conversations/{id}/assignees", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id")),
    request_body = AssignUsers,
    responses((status = 200, description = "The conversation", body = Envelope<Conversation>)))]
async fn assign_users(
    State(s): State<AppState>,
    t: Tenant,
    Path(id): Path<Uuid>,
    Json(req): Json<AssignUsers>,
) -> AppResult<Reply<Conversation>> {
    let mut tx = s.pool.begin().await?;
    lock(&mut tx, t.org_id, id).await?;
    let users = non_empty("userIds", req.user_ids)?;
    refs::check_ids(
        &mut tx,
        RefTable::Users,
        t.org_id,
        "userIds",
        &users,
        MAX_PER_CALL,
    )
    .await?;
    refs::check_id(
        &mut tx,
        RefTable::Users,
        t.org_id,
        "assignedBy",
        req.assigned_by,
    )
    .await?;
    let added =
        db::conversations::add_assignees(&mut tx, t.org_id, id, &users, req.assigned_by).await?;
    let c = assigned(&mut tx, t.org_id, id, added).await?;
    tx.commit().await?;
    Ok(Reply::ok(c))
}

/// Assign teams; teams already assigned stay as they are. Emits `conversation.assigned` when
/// a team is newly assigned.
#[utoipa::path(post, path = "/api/v1/conversations/{id}/teams", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id")),
    request_body = AssignTeams,
    responses((status = 200, description = "The conversation", body = Envelope<Conversation>)))]
async fn assign_teams(
    State(s): State<AppState>,
    t: Tenant,
    Path(id): Path<Uuid>,
    Json(req): Json<AssignTeams>,
) -> AppResult<Reply<Conversation>> {
    let mut tx = s.pool.begin().await?;
    lock(&mut tx, t.org_id, id).await?;
    let teams = non_empty("teamIds", req.team_ids)?;
    refs::check_ids(
        &mut tx,
        RefTable::Teams,
        t.org_id,
        "teamIds",
        &teams,
        MAX_PER_CALL,
    )
    .await?;
    refs::check_id(
        &mut tx,
        RefTable::Users,
        t.org_id,
        "assignedBy",
        req.assigned_by,
    )
    .await?;
    let added =
        db::conversations::add_teams(&mut tx, t.org_id, id, &teams, req.assigned_by).await?;
    let c = assigned(&mut tx, t.org_id, id, added).await?;
    tx.commit().await?;
    Ok(Reply::ok(c))
}

fn non_empty(field: &str, ids: Vec<Uuid>) -> AppResult<Vec<Uuid>> {
    if ids.is_empty() {
        return Err(AppError::validation(field, "required", "at least one id").into());
    }
    Ok(parley_types::ids::dedup(ids))
}

/// The conversation after an assignment, with its event when something was added.
async fn assigned(
    conn: &mut PgConnection,
    org: Uuid,
    id: Uuid,
    added: u64,
) -> AppResult<Conversation> {
    let c = read(conn, org, id).await?;
    if added > 0 {
        db::outbox::emit(conn, org, EventName::ConversationAssigned, &c).await?;
    }
    Ok(c)
}

/// Unassign a user.
#[utoipa::path(delete, path = "/api/v1/conversations/{id}/assignees/{userId}", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id"), ("userId" = Uuid, Path, description = "The assigned user")),
    responses((status = 200, description = "The assignment is gone; `id` is the user's", body = Envelope<Deleted>)))]
async fn unassign_user(
    State(s): State<AppState>,
    t: Tenant,
    Path((id, user)): Path<(Uuid, Uuid)>,
) -> AppResult<Reply<Deleted>> {
    let mut tx = s.pool.begin().await?;
    lock(&mut tx, t.org_id, id).await?;
    if !db::conversations::remove_assignee(&mut *tx, id, user).await? {
        return Err(AppError::NotFound.into());
    }
    tx.commit().await?;
    Ok(Reply::deleted(user))
}

/// Unassign a team.
#[utoipa::path(delete, path = "/api/v1/conversations/{id}/teams/{teamId}", tag = "conversations",
    params(("id" = Uuid, Path, description = "Conversation id"), ("teamId" = Uuid, Path, description = "The assigned team")),
    responses((status = 200, description = "The assignment is gone; `id` is the team's", body = Envelope<Deleted>)))]
async fn unassign_team(
    State(s): State<AppState>,
    t: Tenant,
    Path((id, team)): Path<(Uuid, Uuid)>,
) -> AppResult<Reply<Deleted>> {
    let mut tx = s.pool.begin().await?;
    lock(&mut tx, t.org_id, id).await?;
    if !db::conversations::remove_team(&mut *tx, id, team).await? {
        return Err(AppError::NotFound.into());
    }
    tx.commit().await?;
    Ok(Reply::deleted(team))
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
    State(s): State<AppState>,
    t: Tenant,
    Path(id): Path<Uuid>,
    Json(req): Json<Handover>,
) -> AppResult<Reply<Conversation>> {
    let mut tx = s.pool.begin().await?;
    let mut c = lock(&mut tx, t.org_id, id).await?;
    req.apply(&mut c, Timestamp::now())?;
    db::conversations::update(&mut *tx, &c).await?;
    let c = read(&mut tx, t.org_id, id).await?;
    tx.commit().await?;
    Ok(Reply::ok(c))
}

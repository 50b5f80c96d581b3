//! Conversations: read, listed, with their messages; their changes, each in one transaction
//! with its effects (SLA clocks, wake-ups) and its event.

use crate::{Caller, Ctx, Result, exists};
use parley_db as db;
use parley_db::conversations::AttachmentRow;
use parley_db::refs::{self, RefTable};
use parley_db::tags::{TagLink, set_tags};
use parley_domain::conversations::{
    AssignTeams, AssignUsers, Conversation, ConversationFilter, CreateConversation, CreateMessage,
    Handover, Message, NewAttachment, SenderType, UpdateConversation,
};
use parley_domain::sla::SubjectType;
use parley_domain::webhooks::EventName;
use parley_types::error::AppError;
use parley_types::ids::{ConversationId, OrgId, TeamId, UserId};
use parley_types::list::{Page, PageRequest};
use parley_types::time::Timestamp;
use sqlx::PgConnection;
use uuid::Uuid;

const MAX_PER_CALL: usize = 50;

/// The conversation with everything it embeds, as the API and its events show it.
pub async fn read(ctx: Ctx<'_>, org: OrgId, id: ConversationId) -> Result<Conversation> {
    read_in(&mut *ctx.pool.acquire().await?, org, id, ctx.clock.now()).await
}

async fn read_in(
    conn: &mut PgConnection,
    org: OrgId,
    id: ConversationId,
    now: Timestamp,
) -> Result<Conversation> {
    db::conversations::get(conn, org, id, now)
        .await?
        .ok_or(AppError::NotFound.into())
}

/// The conversation, locked for the rest of the transaction.
async fn lock(conn: &mut PgConnection, org: OrgId, id: ConversationId) -> Result<Conversation> {
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
    now: Timestamp,
) -> Result<Message> {
    c.check_open()?;
    let (message, attachments) = req.into_message(c, now).map_err(|e| e.under(field))?;
    let org = OrgId::from(c.organization_id);
    check_message_refs(conn, org, &message, &attachments, field).await?;
    let rows = attachment_rows(conn, org, attachments).await?;
    db::conversations::insert_message(&mut *conn, org, &message, &rows).await?;
    if c.wake_on(&message, now) {
        db::conversations::update(&mut *conn, c).await?;
    }
    follow_sla(conn, c.id, message.sender_type, now).await?;
    let message = db::conversations::message(&mut *conn, org, message.id)
        .await?
        .ok_or(AppError::NotFound)?;
    db::outbox::emit(conn, org, message.event(), &message).await?;
    Ok(message)
}

/// An agent's message names a user of the organization, and attachments name its files.
async fn check_message_refs(
    conn: &mut PgConnection,
    org: OrgId,
    message: &Message,
    attachments: &[NewAttachment],
    field: &str,
) -> Result<()> {
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
    Ok(())
}

/// The attachments as stored: a kind not given is the file's.
async fn attachment_rows(
    conn: &mut PgConnection,
    org: OrgId,
    attachments: Vec<NewAttachment>,
) -> Result<Vec<AttachmentRow>> {
    let file_ids: Vec<Uuid> = attachments.iter().map(|a| a.file_id).collect();
    let files = db::files::get_many(conn, org, &file_ids).await?;
    Ok(attachments
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
        .collect())
}

/// A customer's message opens a response cycle on the conversation's SLA clock; an agent's
/// answers it; an AI's or the system's does neither.
async fn follow_sla(
    conn: &mut PgConnection,
    id: Uuid,
    sender: SenderType,
    now: Timestamp,
) -> Result<()> {
    match sender {
        SenderType::Contact => {
            db::sla::update(conn, SubjectType::Conversation, id, |s, clock| {
                s.customer_wrote(now, clock)
            })
            .await?;
        }
        SenderType::User => {
            db::sla::update(conn, SubjectType::Conversation, id, |s, _| {
                s.agent_replied(now)
            })
            .await?;
        }
        SenderType::Ai | SenderType::System => {}
    }
    Ok(())
}

/// The conversation after an assignment, with its event when something was added.
async fn assigned(
    conn: &mut PgConnection,
    org: OrgId,
    id: ConversationId,
    added: u64,
    now: Timestamp,
) -> Result<Conversation> {
    let c = read_in(conn, org, id, now).await?;
    if added > 0 {
        db::outbox::emit(conn, org, EventName::ConversationAssigned, &c).await?;
    }
    Ok(c)
}

/// Starts a conversation with its tags, SLA state, `conversation.started` event and, when
/// given, its first message.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn create(
    ctx: Ctx<'_>,
    caller: &Caller,
    req: CreateConversation,
) -> Result<Conversation> {
    let now = ctx.clock.now();
    let mut tx = ctx.pool.begin().await?;
    refs::check_id(
        &mut tx,
        RefTable::Contacts,
        caller.org_id,
        "contactId",
        Some(req.contact_id),
    )
    .await?;
    refs::check_id(
        &mut tx,
        RefTable::Categories,
        caller.org_id,
        "categoryId",
        req.category_id,
    )
    .await?;
    let tag_ids = parley_types::ids::dedup(req.tag_ids.clone().unwrap_or_default());
    refs::check_tag_ids(&mut tx, caller.org_id, &tag_ids).await?;
    let number = db::orgs::next_number(&mut tx, caller.org_id, "conversation").await?;
    let mut req = req;
    let first = req.message.take();
    let mut c = req.into_conversation(caller.org_id.uuid(), number, now);
    db::conversations::insert(&mut *tx, &c).await?;
    set_tags(
        &mut tx,
        TagLink::Conversation,
        caller.org_id,
        c.id,
        &tag_ids,
    )
    .await?;
    db::sla::start(
        &mut tx,
        caller.org_id,
        SubjectType::Conversation,
        c.id,
        c.priority,
        c.channel,
        c.created_at,
    )
    .await?;
    let started = read_in(&mut tx, caller.org_id, ConversationId::from(c.id), now).await?;
    db::outbox::emit(
        &mut tx,
        caller.org_id,
        EventName::ConversationStarted,
        &started,
    )
    .await?;
    if let Some(first) = first {
        write_message(&mut tx, &mut c, first, "message.", now).await?;
    }
    let c = read_in(&mut tx, caller.org_id, ConversationId::from(c.id), now).await?;
    tx.commit().await?;
    Ok(c)
}

/// Applies an update (status, snooze, priority, category, tags) with its SLA effects and event.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, conversation_id = %id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: ConversationId,
    req: UpdateConversation,
) -> Result<Conversation> {
    let now = ctx.clock.now();
    let mut tx = ctx.pool.begin().await?;
    let mut c = lock(&mut tx, caller.org_id, id).await?;
    let change = req.apply(&mut c, now)?;
    refs::check_id(
        &mut tx,
        RefTable::Categories,
        caller.org_id,
        "categoryId",
        c.category_id,
    )
    .await?;
    if let Some(tag_ids) = &change.tag_ids {
        let tag_ids = parley_types::ids::dedup(tag_ids.clone());
        refs::check_tag_ids(&mut tx, caller.org_id, &tag_ids).await?;
        set_tags(
            &mut tx,
            TagLink::Conversation,
            caller.org_id,
            id.uuid(),
            &tag_ids,
        )
        .await?;
    }
    db::conversations::update(&mut *tx, &c).await?;
    if change.priority_changed {
        let priority = c.priority;
        db::sla::update(&mut tx, SubjectType::Conversation, id.uuid(), |s, _| {
            s.priority = priority
        })
        .await?;
    }
    if change.closed {
        db::sla::update(&mut tx, SubjectType::Conversation, id.uuid(), |s, clock| {
            s.resolve(now, clock)
        })
        .await?;
    }
    let c = read_in(&mut tx, caller.org_id, id, now).await?;
    if change.closed {
        db::outbox::emit(&mut tx, caller.org_id, EventName::ConversationEnded, &c).await?;
    }
    tx.commit().await?;
    Ok(c)
}

/// Adds a message to the conversation, with its effects and event.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, conversation_id = %id))]
pub async fn add_message(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: ConversationId,
    req: CreateMessage,
) -> Result<Message> {
    let now = ctx.clock.now();
    let mut tx = ctx.pool.begin().await?;
    let mut c = lock(&mut tx, caller.org_id, id).await?;
    let message = write_message(&mut tx, &mut c, req, "", now).await?;
    tx.commit().await?;
    Ok(message)
}

/// Assigns users (those already assigned stay).
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, conversation_id = %id))]
pub async fn assign_users(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: ConversationId,
    req: AssignUsers,
) -> Result<Conversation> {
    let now = ctx.clock.now();
    let mut tx = ctx.pool.begin().await?;
    lock(&mut tx, caller.org_id, id).await?;
    let users = refs::check_assignment(
        &mut tx,
        RefTable::Users,
        caller.org_id,
        "userIds",
        req.user_ids,
        req.assigned_by,
        MAX_PER_CALL,
    )
    .await?;
    let added =
        db::conversations::add_assignees(&mut tx, caller.org_id, id, &users, req.assigned_by)
            .await?;
    let c = assigned(&mut tx, caller.org_id, id, added, now).await?;
    tx.commit().await?;
    Ok(c)
}

/// Assigns teams (those already assigned stay).
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, conversation_id = %id))]
pub async fn assign_teams(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: ConversationId,
    req: AssignTeams,
) -> Result<Conversation> {
    let now = ctx.clock.now();
    let mut tx = ctx.pool.begin().await?;
    lock(&mut tx, caller.org_id, id).await?;
    let teams = refs::check_assignment(
        &mut tx,
        RefTable::Teams,
        caller.org_id,
        "teamIds",
        req.team_ids,
        req.assigned_by,
        MAX_PER_CALL,
    )
    .await?;
    let added =
        db::conversations::add_teams(&mut tx, caller.org_id, id, &teams, req.assigned_by).await?;
    let c = assigned(&mut tx, caller.org_id, id, added, now).await?;
    tx.commit().await?;
    Ok(c)
}

/// Unassigns a user; returns the user's id.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, conversation_id = %id))]
pub async fn unassign_user(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: ConversationId,
    user: UserId,
) -> Result<Uuid> {
    let mut tx = ctx.pool.begin().await?;
    lock(&mut tx, caller.org_id, id).await?;
    if !db::conversations::remove_assignee(&mut *tx, id, user).await? {
        return Err(AppError::NotFound.into());
    }
    tx.commit().await?;
    Ok(user.uuid())
}

/// Unassigns a team; returns the team's id.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, conversation_id = %id))]
pub async fn unassign_team(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: ConversationId,
    team: TeamId,
) -> Result<Uuid> {
    let mut tx = ctx.pool.begin().await?;
    lock(&mut tx, caller.org_id, id).await?;
    if !db::conversations::remove_team(&mut *tx, id, team).await? {
        return Err(AppError::NotFound.into());
    }
    tx.commit().await?;
    Ok(team.uuid())
}

/// Moves the handover along (the state machine is `Handover::apply`'s).
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, conversation_id = %id))]
pub async fn handover(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: ConversationId,
    req: Handover,
) -> Result<Conversation> {
    let now = ctx.clock.now();
    let mut tx = ctx.pool.begin().await?;
    let mut c = lock(&mut tx, caller.org_id, id).await?;
    req.apply(&mut c, now)?;
    db::conversations::update(&mut *tx, &c).await?;
    let c = read_in(&mut tx, caller.org_id, id, now).await?;
    tx.commit().await?;
    Ok(c)
}

// The ticker's statement: snoozed conversations whose time came, through to
// `parley_db::conversations`.

pub async fn wake_snoozed(ctx: Ctx<'_>, limit: i64) -> std::result::Result<u64, sqlx::Error> {
    db::conversations::wake_snoozed(ctx.pool, limit).await
}

/// A page of the organization's conversations; a `tag` filter names a tag or gives its id.
pub async fn list(
    ctx: Ctx<'_>,
    org: OrgId,
    f: &ConversationFilter,
    page: &PageRequest,
) -> Result<Page<Conversation>> {
    let tag = crate::contacts::tag_filter(ctx, org, f.tag.as_ref().map(|t| t.as_str())).await?;
    let now = ctx.clock.now();
    Ok(db::conversations::list(ctx.pool, org, f, tag, page, now).await?)
}

/// A page of a conversation's messages (404 for another organization's conversation).
pub async fn messages(
    ctx: Ctx<'_>,
    org: OrgId,
    id: ConversationId,
    page: &PageRequest,
) -> Result<Page<Message>> {
    exists(db::conversations::exists(ctx.pool, org, id).await?)?;
    Ok(db::conversations::messages(ctx.pool, org, id, page).await?)
}

//! Conversations, their messages, assignees, teams and tags.

use parley_types::ids::{ConversationId, OrgId, TeamId, UserId};
use std::collections::HashMap;

use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::tags::{TagLink, tags_of};
use parley_domain::Channel;
use parley_domain::conversations::{
    Conversation, ConversationAssignee, ConversationFilter, ConversationStatus, ConversationTeam,
    HandoverReason, HandoverRequestedBy, HandoverStatus, Message, MessageAttachment, MessageType,
    SenderType,
};
use parley_domain::files::FileType;
use parley_domain::sla::SubjectType;
use parley_types::enums::Priority;
use parley_types::list::{Page, PageRequest};
use parley_types::time::Timestamp;

/// Messages a conversation embeds: the latest ones.
pub const EMBEDDED_MESSAGES: i64 = 50;

pub async fn insert(db: impl PgExecutor<'_>, c: &Conversation) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO conversations (id, organization_id, reference_number, contact_id, category_id,
            integration_id, channel, status, priority, subject, summary, language, channel_data,
            guest_mood, deal_value, deal_currency, deal_description, is_deal_related, ai_handled,
            created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
            $15, $16, $17, $18, $19, $20, $20)",
        c.id,
        c.organization_id,
        c.reference_number,
        c.contact_id,
        c.category_id,
        c.integration_id.as_deref(),
        c.channel.as_str(),
        c.status.as_str(),
        c.priority.as_str(),
        c.subject.as_deref(),
        c.summary.as_deref(),
        c.language.as_deref(),
        c.channel_data.as_deref(),
        c.guest_mood.as_deref(),
        c.deal_value,
        c.deal_currency.as_deref(),
        c.deal_description.as_deref(),
        c.is_deal_related,
        c.ai_handled,
        c.created_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// Writes every field an update or a handover may change.
pub async fn update(db: impl PgExecutor<'_>, c: &Conversation) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE conversations SET category_id = $3, status = $4, priority = $5, subject = $6,
            summary = $7, language = $8, guest_mood = $9, deal_value = $10,
            deal_currency = $11, deal_description = $12, deal_closed = $13, is_deal_related = $14,
            ai_handled = $15, ai_paused_at = $16, is_read = $17, is_spam = $18, is_starred = $19,
            handover_status = $20, handover_reason = $21, handover_requested_by = $22,
            handover_notes = $23, handover_requested_at = $24, handover_accepted_at = $25,
            handover_completed_at = $26, handover_timed_out_at = $27,
            estimated_wait_seconds = $28, handover_queue_position = $29, snooze_until = $30,
            snoozed_at = $31, closed_at = $32, updated_at = $33
         WHERE organization_id = $1 AND id = $2",
        c.organization_id,
        c.id,
        c.category_id,
        c.status.as_str(),
        c.priority.as_str(),
        c.subject.as_deref(),
        c.summary.as_deref(),
        c.language.as_deref(),
        c.guest_mood.as_deref(),
        c.deal_value,
        c.deal_currency.as_deref(),
        c.deal_description.as_deref(),
        c.deal_closed,
        c.is_deal_related,
        c.ai_handled,
        c.ai_paused_at,
        c.is_read,
        c.is_spam,
        c.is_starred,
        c.handover_status.as_str(),
        c.handover_reason.map(|v| v.as_str()),
        c.handover_requested_by.map(|v| v.as_str()),
        c.handover_notes.as_deref(),
        c.handover_requested_at,
        c.handover_accepted_at,
        c.handover_completed_at,
        c.handover_timed_out_at,
        c.estimated_wait_seconds,
        c.handover_queue_position,
        c.snooze_until,
        c.snoozed_at,
        c.closed_at,
        c.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// The conversation's row, locked for the rest of the transaction (without embeds).
pub async fn lock(
    conn: &mut PgConnection,
    org: OrgId,
    id: ConversationId,
) -> Result<Option<Conversation>, sqlx::Error> {
    let found = sqlx::query_scalar!(
        "SELECT id FROM conversations WHERE organization_id = $1 AND id = $2 FOR UPDATE",
        org.uuid(),
        id.uuid(),
    )
    .fetch_optional(&mut *conn)
    .await?;
    match found {
        Some(_) => Ok(rows(conn, org, &[id.uuid()]).await?.pop()),
        None => Ok(None),
    }
}

pub async fn exists(
    db: impl PgExecutor<'_>,
    org: OrgId,
    id: ConversationId,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM conversations WHERE organization_id = $1 AND id = $2) AS "exists!""#,
        org.uuid(),
        id.uuid(),
    )
    .fetch_one(db)
    .await
}

pub async fn get(
    conn: &mut PgConnection,
    org: OrgId,
    id: ConversationId,
    now: Timestamp,
) -> Result<Option<Conversation>, sqlx::Error> {
    Ok(read(conn, org, &[id.uuid()], now).await?.pop())
}

/// The conversations of `org` among `ids`, in no particular order, with what they embed.
async fn read(
    conn: &mut PgConnection,
    org: OrgId,
    ids: &[Uuid],
    now: Timestamp,
) -> Result<Vec<Conversation>, sqlx::Error> {
    let mut found = rows(&mut *conn, org, ids).await?;
    embed(conn, org, &mut found, now).await?;
    Ok(found)
}

/// The rows alone of the conversations of `org` among `ids`.
async fn rows(
    db: impl PgExecutor<'_>,
    org: OrgId,
    ids: &[Uuid],
) -> Result<Vec<Conversation>, sqlx::Error> {
    let rows = sqlx::query_as!(
        ConversationRow,
        "SELECT c.id, c.organization_id, c.reference_number, c.contact_id, c.category_id,
            c.integration_id, c.channel, c.status, c.priority, c.subject, c.summary, c.language,
            c.channel_data, c.guest_mood, c.deal_value, c.deal_currency, c.deal_description,
            c.deal_closed, c.is_deal_related, c.ai_handled, c.ai_paused_at, c.is_read, c.is_spam,
            c.is_starred, c.handover_status, c.handover_reason, c.handover_requested_by,
            c.handover_notes, c.handover_requested_at, c.handover_accepted_at,
            c.handover_completed_at, c.handover_timed_out_at, c.estimated_wait_seconds,
            c.handover_queue_position, c.message_count, c.last_message_at,
            c.last_customer_message_at, c.snooze_until, c.snoozed_at, c.closed_at, c.created_at,
            c.updated_at
         FROM conversations c WHERE c.organization_id = $1 AND c.id = ANY($2)",
        org.uuid(),
        ids,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Conversation::from).collect())
}

/// Fills the embedded category, contact, assignees, teams, latest messages, tags and SLA state.
pub async fn embed(
    conn: &mut PgConnection,
    org: OrgId,
    items: &mut [Conversation],
    now: Timestamp,
) -> Result<(), sqlx::Error> {
    if items.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = items.iter().map(|c| c.id).collect();
    let contact_ids: Vec<Uuid> = items.iter().map(|c| c.contact_id).collect();
    let category_ids: Vec<Uuid> = items.iter().filter_map(|c| c.category_id).collect();
    let contacts = super::contacts::get_many(&mut *conn, org, &contact_ids).await?;
    let categories = super::categories::get_many(&mut *conn, org, &category_ids).await?;
    let mut assignees = assignees_of(&mut *conn, org, &ids).await?;
    let mut teams = teams_of(&mut *conn, org, &ids).await?;
    let mut messages = latest_messages(&mut *conn, org, &ids).await?;
    let mut tags = tags_of(&mut *conn, TagLink::Conversation, &ids).await?;
    let mut states =
        super::sla::states_of(&mut *conn, SubjectType::Conversation, &ids, now).await?;
    for c in items {
        c.contact = contacts.get(&c.contact_id).cloned();
        c.category = c.category_id.and_then(|id| categories.get(&id).cloned());
        c.assignees = assignees.remove(&c.id).unwrap_or_default();
        c.assigned_teams = teams.remove(&c.id).unwrap_or_default();
        c.messages = messages.remove(&c.id).unwrap_or_default();
        c.tags = tags.remove(&c.id).unwrap_or_default();
        c.sla_state = states.remove(&c.id);
    }
    Ok(())
}

async fn assignees_of(
    conn: &mut PgConnection,
    org: OrgId,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Vec<ConversationAssignee>>, sqlx::Error> {
    let rows = sqlx::query_as!(
        ConversationAssigneeRow,
        "SELECT a.id, a.conversation_id, a.user_id, a.assigned_at, a.assigned_by FROM conversation_assignees a
         WHERE a.conversation_id = ANY($1) ORDER BY a.assigned_at, a.id",
        ids,
    )
    .fetch_all(&mut *conn)
    .await?;
    let user_ids: Vec<Uuid> = rows.iter().map(|r| r.user_id).collect();
    let users = super::users::summaries(&mut *conn, org, &user_ids).await?;
    let mut out: HashMap<Uuid, Vec<ConversationAssignee>> = HashMap::new();
    for r in rows {
        let mut r = ConversationAssignee::from(r);
        r.user = users.get(&r.user_id).cloned();
        out.entry(r.conversation_id).or_default().push(r);
    }
    Ok(out)
}

async fn teams_of(
    conn: &mut PgConnection,
    org: OrgId,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Vec<ConversationTeam>>, sqlx::Error> {
    let rows = sqlx::query_as!(
        ConversationTeamRow,
        "SELECT t.id, t.conversation_id, t.team_id, t.assigned_at, t.assigned_by FROM conversation_teams t
         WHERE t.conversation_id = ANY($1) ORDER BY t.assigned_at, t.id",
        ids,
    )
    .fetch_all(&mut *conn)
    .await?;
    let team_ids: Vec<Uuid> = rows.iter().map(|r| r.team_id).collect();
    let teams = super::teams::summaries(&mut *conn, org, &team_ids).await?;
    let mut out: HashMap<Uuid, Vec<ConversationTeam>> = HashMap::new();
    for r in rows {
        let mut r = ConversationTeam::from(r);
        r.team = teams.get(&r.team_id).cloned();
        out.entry(r.conversation_id).or_default().push(r);
    }
    Ok(out)
}

/// The latest messages of each conversation, oldest first, with their attachments.
async fn latest_messages(
    conn: &mut PgConnection,
    org: OrgId,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Vec<Message>>, sqlx::Error> {
    let mut rows: Vec<Message> = sqlx::query_as!(
        MessageRow,
        r#"SELECT m.id, m.conversation_id, m.content, m.type AS kind, m.sender_id, m.sender_type,
            m.external_id, m.email_message_id, m.source_node_id, m.suggested_replies,
            m.should_request_feedback, m.template_context, m.delivered_at, m.created_at,
            m.updated_at
         FROM unnest($1::uuid[]) AS x(id) CROSS JOIN LATERAL (
            SELECT * FROM messages WHERE conversation_id = x.id
            ORDER BY created_at DESC, id DESC LIMIT $2) m
         ORDER BY m.created_at, m.id"#,
        ids,
        EMBEDDED_MESSAGES,
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(Message::from)
    .collect();
    attach(conn, org, &mut rows).await?;
    let mut out: HashMap<Uuid, Vec<Message>> = HashMap::new();
    for m in rows {
        out.entry(m.conversation_id).or_default().push(m);
    }
    Ok(out)
}

/// Fills the attachments (with their files) of messages.
async fn attach(
    conn: &mut PgConnection,
    org: OrgId,
    messages: &mut [Message],
) -> Result<(), sqlx::Error> {
    let ids: Vec<Uuid> = messages.iter().map(|m| m.id).collect();
    if ids.is_empty() {
        return Ok(());
    }
    let rows = sqlx::query_as!(
        MessageAttachmentRow,
        "SELECT a.id, a.message_id, a.file_id, a.type AS kind, a.caption, a.external_media_id,
            a.thumbnail_url, a.duration, a.metadata, a.created_at, a.updated_at
         FROM message_attachments a WHERE a.message_id = ANY($1) ORDER BY a.created_at, a.id",
        &ids,
    )
    .fetch_all(&mut *conn)
    .await?;
    let file_ids: Vec<Uuid> = rows.iter().map(|a| a.file_id).collect();
    let files = super::files::get_many(&mut *conn, org, &file_ids).await?;
    let mut by_message: HashMap<Uuid, Vec<MessageAttachment>> = HashMap::new();
    for a in rows {
        let mut a = MessageAttachment::from(a);
        a.file = files.get(&a.file_id).cloned();
        by_message.entry(a.message_id).or_default().push(a);
    }
    for m in messages {
        m.attachments = by_message.remove(&m.id).unwrap_or_default();
    }
    Ok(())
}

fn push_filter(
    qb: &mut QueryBuilder<Postgres>,
    org: OrgId,
    f: &ConversationFilter,
    tag: Option<Uuid>,
) {
    qb.push(" WHERE c.organization_id = ").push_bind(org);
    if let Some(v) = f.status {
        qb.push(" AND c.status = ").push_bind(v);
    }
    if let Some(v) = f.channel {
        qb.push(" AND c.channel = ").push_bind(v);
    }
    if let Some(v) = f.priority {
        qb.push(" AND c.priority = ").push_bind(v);
    }
    if let Some(v) = f.contact_id {
        qb.push(" AND c.contact_id = ").push_bind(v);
    }
    if let Some(v) = f.category_id {
        qb.push(" AND c.category_id = ").push_bind(v);
    }
    if let Some(v) = f.is_starred {
        qb.push(" AND c.is_starred = ").push_bind(v);
    }
    if let Some(v) = f.handover_status {
        qb.push(" AND c.handover_status = ").push_bind(v);
    }
    if let Some(v) = f.assignee_id {
        qb.push(
            " AND c.id IN (SELECT conversation_id FROM conversation_assignees WHERE user_id = ",
        )
        .push_bind(v)
        .push(")");
    }
    if let Some(v) = f.team_id {
        qb.push(" AND c.id IN (SELECT conversation_id FROM conversation_teams WHERE team_id = ")
            .push_bind(v)
            .push(")");
    }
    if f.tag.is_some() {
        // An unknown tag matches nothing.
        qb.push(" AND c.id IN (SELECT conversation_id FROM conversation_tags WHERE tag_id = ")
            .push_bind(tag.unwrap_or_default())
            .push(")");
    }
}

/// `f.tag` is resolved by the caller into `tag` (a tag id) first.
pub async fn list(
    pool: &PgPool,
    org: OrgId,
    f: &ConversationFilter,
    tag: Option<Uuid>,
    page: &PageRequest,
    now: Timestamp,
) -> Result<Page<Conversation>, sqlx::Error> {
    super::page_of(
        pool,
        "FROM conversations c",
        "c",
        |qb| push_filter(qb, org, f, tag),
        page,
        |ids| async move { read(&mut *pool.acquire().await?, org, &ids, now).await },
    )
    .await
}

/// Assigns users (already assigned ones stay as they are); returns how many were new.
pub async fn add_assignees(
    conn: &mut PgConnection,
    org: OrgId,
    conversation: ConversationId,
    users: &[Uuid],
    by: Option<Uuid>,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "INSERT INTO conversation_assignees (id, organization_id, conversation_id, user_id, assigned_by)
         SELECT uuid_v7(), $1, $2, u, $4 FROM unnest($3::uuid[]) AS u
         ON CONFLICT (conversation_id, user_id) DO NOTHING",
        org.uuid(),
        conversation.uuid(),
        users,
        by,
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

pub async fn remove_assignee(
    db: impl PgExecutor<'_>,
    conversation: ConversationId,
    user: UserId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM conversation_assignees WHERE conversation_id = $1 AND user_id = $2",
        conversation.uuid(),
        user.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Assigns teams (already assigned ones stay as they are); returns how many were new.
pub async fn add_teams(
    conn: &mut PgConnection,
    org: OrgId,
    conversation: ConversationId,
    teams: &[Uuid],
    by: Option<Uuid>,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "INSERT INTO conversation_teams (id, organization_id, conversation_id, team_id, assigned_by)
         SELECT uuid_v7(), $1, $2, t, $4 FROM unnest($3::uuid[]) AS t
         ON CONFLICT (conversation_id, team_id) DO NOTHING",
        org.uuid(),
        conversation.uuid(),
        teams,
        by,
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

pub async fn remove_team(
    db: impl PgExecutor<'_>,
    conversation: ConversationId,
    team: TeamId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM conversation_teams WHERE conversation_id = $1 AND team_id = $2",
        conversation.uuid(),
        team.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// An attachment to write: the file and its type.
pub struct AttachmentRow {
    pub file_id: Uuid,
    pub kind: parley_domain::files::FileType,
    pub caption: Option<String>,
    pub external_media_id: Option<String>,
    pub duration: Option<i32>,
    pub metadata: serde_json::Value,
}

/// Writes a message and its attachments, and counts it on its conversation.
pub async fn insert_message(
    conn: &mut PgConnection,
    org: OrgId,
    m: &Message,
    attachments: &[AttachmentRow],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO messages (id, organization_id, conversation_id, content, type, sender_type,
            sender_id, external_id, email_message_id, source_node_id, suggested_replies,
            should_request_feedback, template_context, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14)",
        m.id,
        org.uuid(),
        m.conversation_id,
        m.content.as_deref(),
        m.kind.as_str(),
        m.sender_type.as_str(),
        m.sender_id,
        m.external_id.as_deref(),
        m.email_message_id.as_deref(),
        m.source_node_id.as_deref(),
        m.suggested_replies.as_deref(),
        m.should_request_feedback,
        &m.template_context,
        m.created_at,
    )
    .execute(&mut *conn)
    .await?;
    for a in attachments {
        sqlx::query!(
            "INSERT INTO message_attachments (id, organization_id, message_id, file_id, type,
                caption, external_media_id, duration, metadata)
             VALUES (uuid_v7(), $1, $2, $3, $4, $5, $6, $7, $8)",
            org.uuid(),
            m.id,
            a.file_id,
            a.kind.as_str(),
            a.caption.as_deref(),
            a.external_media_id.as_deref(),
            a.duration,
            sqlx::types::Json(&a.metadata) as _,
        )
        .execute(&mut *conn)
        .await?;
    }
    sqlx::query!(
        "UPDATE conversations SET message_count = message_count + 1, last_message_at = $2,
            last_customer_message_at = CASE WHEN $3 THEN $2 ELSE last_customer_message_at END,
            updated_at = $2
         WHERE id = $1",
        m.conversation_id,
        m.created_at,
        m.is_inbound(),
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub async fn message(
    conn: &mut PgConnection,
    org: OrgId,
    id: Uuid,
) -> Result<Option<Message>, sqlx::Error> {
    Ok(read_messages(conn, org, &[id]).await?.pop())
}

/// The messages of `org` among `ids`, in no particular order, with their attachments.
async fn read_messages(
    conn: &mut PgConnection,
    org: OrgId,
    ids: &[Uuid],
) -> Result<Vec<Message>, sqlx::Error> {
    let mut found: Vec<Message> = sqlx::query_as!(
        MessageRow,
        "SELECT m.id, m.conversation_id, m.content, m.type AS kind, m.sender_id, m.sender_type,
            m.external_id, m.email_message_id, m.source_node_id, m.suggested_replies,
            m.should_request_feedback, m.template_context, m.delivered_at, m.created_at,
            m.updated_at
         FROM messages m WHERE m.organization_id = $1 AND m.id = ANY($2)",
        org.uuid(),
        ids,
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(Message::from)
    .collect();
    attach(conn, org, &mut found).await?;
    Ok(found)
}

/// A conversation's messages, a page at a time.
pub async fn messages(
    pool: &PgPool,
    org: OrgId,
    conversation: ConversationId,
    page: &PageRequest,
) -> Result<Page<Message>, sqlx::Error> {
    super::page_of(
        pool,
        "FROM messages m",
        "m",
        |qb| {
            qb.push(" WHERE m.conversation_id = ")
                .push_bind(conversation);
        },
        page,
        |ids| async move { read_messages(&mut *pool.acquire().await?, org, &ids).await },
    )
    .await
}

/// Snoozed conversations whose time has come become active again; returns how many.
pub async fn wake_snoozed(db: impl PgExecutor<'_>, limit: i64) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE conversations SET status = 'active', snooze_until = NULL, snoozed_at = NULL
         WHERE id IN (SELECT id FROM conversations
                      WHERE status = 'snoozed' AND snooze_until <= statement_timestamp()
                      ORDER BY snooze_until LIMIT $1 FOR UPDATE SKIP LOCKED)",
        limit,
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// Conversation as its checked statements read it (what it embeds is read apart).
struct ConversationRow {
    id: Uuid,
    organization_id: Uuid,
    reference_number: i64,
    contact_id: Uuid,
    category_id: Option<Uuid>,
    integration_id: Option<String>,
    channel: Channel,
    status: ConversationStatus,
    priority: Priority,
    subject: Option<String>,
    summary: Option<String>,
    language: Option<String>,
    channel_data: Option<String>,
    guest_mood: Option<String>,
    deal_value: Option<sqlx::types::Decimal>,
    deal_currency: Option<String>,
    deal_description: Option<String>,
    deal_closed: bool,
    is_deal_related: bool,
    ai_handled: bool,
    ai_paused_at: Option<Timestamp>,
    is_read: bool,
    is_spam: bool,
    is_starred: bool,
    handover_status: HandoverStatus,
    handover_reason: Option<HandoverReason>,
    handover_requested_by: Option<HandoverRequestedBy>,
    handover_notes: Option<String>,
    handover_requested_at: Option<Timestamp>,
    handover_accepted_at: Option<Timestamp>,
    handover_completed_at: Option<Timestamp>,
    handover_timed_out_at: Option<Timestamp>,
    estimated_wait_seconds: Option<i32>,
    handover_queue_position: Option<i32>,
    message_count: i32,
    last_message_at: Option<Timestamp>,
    last_customer_message_at: Option<Timestamp>,
    snooze_until: Option<Timestamp>,
    snoozed_at: Option<Timestamp>,
    closed_at: Option<Timestamp>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<ConversationRow> for Conversation {
    fn from(r: ConversationRow) -> Self {
        Self {
            id: r.id,
            organization_id: r.organization_id,
            reference_number: r.reference_number,
            contact_id: r.contact_id,
            category_id: r.category_id,
            integration_id: r.integration_id,
            channel: r.channel,
            status: r.status,
            priority: r.priority,
            subject: r.subject,
            summary: r.summary,
            language: r.language,
            channel_data: r.channel_data,
            guest_mood: r.guest_mood,
            deal_value: r.deal_value,
            deal_currency: r.deal_currency,
            deal_description: r.deal_description,
            deal_closed: r.deal_closed,
            is_deal_related: r.is_deal_related,
            ai_handled: r.ai_handled,
            ai_paused_at: r.ai_paused_at,
            is_read: r.is_read,
            is_spam: r.is_spam,
            is_starred: r.is_starred,
            handover_status: r.handover_status,
            handover_reason: r.handover_reason,
            handover_requested_by: r.handover_requested_by,
            handover_notes: r.handover_notes,
            handover_requested_at: r.handover_requested_at,
            handover_accepted_at: r.handover_accepted_at,
            handover_completed_at: r.handover_completed_at,
            handover_timed_out_at: r.handover_timed_out_at,
            estimated_wait_seconds: r.estimated_wait_seconds,
            handover_queue_position: r.handover_queue_position,
            message_count: r.message_count,
            last_message_at: r.last_message_at,
            last_customer_message_at: r.last_customer_message_at,
            snooze_until: r.snooze_until,
            snoozed_at: r.snoozed_at,
            closed_at: r.closed_at,
            category: Default::default(),
            contact: Default::default(),
            assignees: Default::default(),
            assigned_teams: Default::default(),
            messages: Default::default(),
            tags: Default::default(),
            sla_state: Default::default(),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// ConversationAssignee as its checked statements read it (what it embeds is read apart).
struct ConversationAssigneeRow {
    id: Uuid,
    conversation_id: Uuid,
    user_id: Uuid,
    assigned_at: Timestamp,
    assigned_by: Option<Uuid>,
}

impl From<ConversationAssigneeRow> for ConversationAssignee {
    fn from(r: ConversationAssigneeRow) -> Self {
        Self {
            id: r.id,
            conversation_id: r.conversation_id,
            user_id: r.user_id,
            user: Default::default(),
            assigned_at: r.assigned_at,
            assigned_by: r.assigned_by,
        }
    }
}

/// ConversationTeam as its checked statements read it (what it embeds is read apart).
struct ConversationTeamRow {
    id: Uuid,
    conversation_id: Uuid,
    team_id: Uuid,
    assigned_at: Timestamp,
    assigned_by: Option<Uuid>,
}

impl From<ConversationTeamRow> for ConversationTeam {
    fn from(r: ConversationTeamRow) -> Self {
        Self {
            id: r.id,
            conversation_id: r.conversation_id,
            team_id: r.team_id,
            team: Default::default(),
            assigned_at: r.assigned_at,
            assigned_by: r.assigned_by,
        }
    }
}

/// Message as its checked statements read it (what it embeds is read apart).
struct MessageRow {
    id: Uuid,
    conversation_id: Uuid,
    content: Option<String>,
    kind: MessageType,
    sender_id: Option<Uuid>,
    sender_type: SenderType,
    external_id: Option<String>,
    email_message_id: Option<String>,
    source_node_id: Option<String>,
    suggested_replies: Option<String>,
    should_request_feedback: bool,
    template_context: Vec<i32>,
    delivered_at: Option<Timestamp>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<MessageRow> for Message {
    fn from(r: MessageRow) -> Self {
        Self {
            id: r.id,
            conversation_id: r.conversation_id,
            content: r.content,
            kind: r.kind,
            sender_id: r.sender_id,
            sender_type: r.sender_type,
            external_id: r.external_id,
            email_message_id: r.email_message_id,
            source_node_id: r.source_node_id,
            suggested_replies: r.suggested_replies,
            should_request_feedback: r.should_request_feedback,
            template_context: r.template_context,
            attachments: Default::default(),
            delivered_at: r.delivered_at,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// MessageAttachment as its checked statements read it (what it embeds is read apart).
struct MessageAttachmentRow {
    id: Uuid,
    message_id: Uuid,
    file_id: Uuid,
    kind: FileType,
    caption: Option<String>,
    external_media_id: Option<String>,
    thumbnail_url: Option<String>,
    duration: Option<i32>,
    metadata: sqlx::types::Json<serde_json::Value>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<MessageAttachmentRow> for MessageAttachment {
    fn from(r: MessageAttachmentRow) -> Self {
        Self {
            id: r.id,
            message_id: r.message_id,
            file_id: r.file_id,
            file: Default::default(),
            kind: r.kind,
            caption: r.caption,
            external_media_id: r.external_media_id,
            thumbnail_url: r.thumbnail_url,
            duration: r.duration,
            metadata: r.metadata,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

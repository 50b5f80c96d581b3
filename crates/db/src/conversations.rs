//! Conversations, their messages, assignees, teams and tags.

use std::collections::HashMap;

use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::ListQuery;
use super::tags::{TagLink, tags_of};
use parley_domain::conversations::{
    Conversation, ConversationAssignee, ConversationFilter, ConversationTeam, Message,
    MessageAttachment,
};
use parley_domain::sla::SubjectType;
use parley_types::list::{Page, PageRequest};
use parley_types::time::Timestamp;

/// Messages a conversation embeds: the latest ones.
pub const EMBEDDED_MESSAGES: i64 = 50;

macro_rules! select {
    () => {
        "SELECT c.id, c.organization_id, c.reference_number, c.contact_id, c.category_id,
                c.integration_id, c.channel, c.status, c.priority, c.subject, c.summary,
                c.language, c.channel_data, c.guest_mood, c.deal_value,
                c.deal_currency, c.deal_description, c.deal_closed, c.is_deal_related,
                c.ai_handled, c.ai_paused_at, c.is_read, c.is_spam, c.is_starred,
                c.handover_status, c.handover_reason, c.handover_requested_by, c.handover_notes,
                c.handover_requested_at, c.handover_accepted_at, c.handover_completed_at,
                c.handover_timed_out_at, c.estimated_wait_seconds, c.handover_queue_position,
                c.message_count, c.last_message_at, c.last_customer_message_at, c.snooze_until,
                c.snoozed_at, c.closed_at, c.created_at, c.updated_at
         FROM conversations c"
    };
}

pub async fn insert(db: impl PgExecutor<'_>, c: &Conversation) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO conversations (id, organization_id, reference_number, contact_id, category_id,
            integration_id, channel, status, priority, subject, summary, language, channel_data,
            guest_mood, deal_value, deal_currency, deal_description, is_deal_related, ai_handled,
            created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,
            $15, $16, $17, $18, $19, $20, $20)",
    )
    .bind(c.id)
    .bind(c.organization_id)
    .bind(c.reference_number)
    .bind(c.contact_id)
    .bind(c.category_id)
    .bind(&c.integration_id)
    .bind(c.channel)
    .bind(c.status)
    .bind(c.priority)
    .bind(&c.subject)
    .bind(&c.summary)
    .bind(&c.language)
    .bind(&c.channel_data)
    .bind(&c.guest_mood)
    .bind(c.deal_value)
    .bind(&c.deal_currency)
    .bind(&c.deal_description)
    .bind(c.is_deal_related)
    .bind(c.ai_handled)
    .bind(c.created_at)
    .execute(db)
    .await
    .map(|_| ())
}

/// Writes every field an update or a handover may change.
pub async fn update(db: impl PgExecutor<'_>, c: &Conversation) -> Result<(), sqlx::Error> {
    sqlx::query(
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
    )
    .bind(c.organization_id)
    .bind(c.id)
    .bind(c.category_id)
    .bind(c.status)
    .bind(c.priority)
    .bind(&c.subject)
    .bind(&c.summary)
    .bind(&c.language)
    .bind(&c.guest_mood)
    .bind(c.deal_value)
    .bind(&c.deal_currency)
    .bind(&c.deal_description)
    .bind(c.deal_closed)
    .bind(c.is_deal_related)
    .bind(c.ai_handled)
    .bind(c.ai_paused_at)
    .bind(c.is_read)
    .bind(c.is_spam)
    .bind(c.is_starred)
    .bind(c.handover_status)
    .bind(c.handover_reason)
    .bind(c.handover_requested_by)
    .bind(&c.handover_notes)
    .bind(c.handover_requested_at)
    .bind(c.handover_accepted_at)
    .bind(c.handover_completed_at)
    .bind(c.handover_timed_out_at)
    .bind(c.estimated_wait_seconds)
    .bind(c.handover_queue_position)
    .bind(c.snooze_until)
    .bind(c.snoozed_at)
    .bind(c.closed_at)
    .bind(c.updated_at)
    .execute(db)
    .await
    .map(|_| ())
}

/// The conversation's row, locked for the rest of the transaction (without embeds).
pub async fn lock(
    conn: &mut PgConnection,
    org: Uuid,
    id: Uuid,
) -> Result<Option<Conversation>, sqlx::Error> {
    sqlx::query_as(concat!(
        select!(),
        " WHERE c.organization_id = $1 AND c.id = $2 FOR UPDATE"
    ))
    .bind(org)
    .bind(id)
    .fetch_optional(conn)
    .await
}

pub async fn exists(db: impl PgExecutor<'_>, org: Uuid, id: Uuid) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM conversations WHERE organization_id = $1 AND id = $2)",
    )
    .bind(org)
    .bind(id)
    .fetch_one(db)
    .await
}

pub async fn get(
    conn: &mut PgConnection,
    org: Uuid,
    id: Uuid,
) -> Result<Option<Conversation>, sqlx::Error> {
    let row: Option<Conversation> = sqlx::query_as(concat!(
        select!(),
        " WHERE c.organization_id = $1 AND c.id = $2"
    ))
    .bind(org)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(c) = row else { return Ok(None) };
    let mut all = [c];
    embed(conn, org, &mut all).await?;
    let [c] = all;
    Ok(Some(c))
}

/// Fills the embedded category, contact, assignees, teams, latest messages, tags and SLA state.
pub async fn embed(
    conn: &mut PgConnection,
    org: Uuid,
    items: &mut [Conversation],
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
    let mut states = super::sla::states_of(
        &mut *conn,
        SubjectType::Conversation,
        &ids,
        Timestamp::now(),
    )
    .await?;
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
    org: Uuid,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Vec<ConversationAssignee>>, sqlx::Error> {
    let rows: Vec<ConversationAssignee> = sqlx::query_as(
        "SELECT id, conversation_id, user_id, assigned_at, assigned_by FROM conversation_assignees
         WHERE conversation_id = ANY($1) ORDER BY assigned_at, id",
    )
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    let user_ids: Vec<Uuid> = rows.iter().map(|r| r.user_id).collect();
    let users = super::users::summaries(&mut *conn, org, &user_ids).await?;
    let mut out: HashMap<Uuid, Vec<ConversationAssignee>> = HashMap::new();
    for mut r in rows {
        r.user = users.get(&r.user_id).cloned();
        out.entry(r.conversation_id).or_default().push(r);
    }
    Ok(out)
}

async fn teams_of(
    conn: &mut PgConnection,
    org: Uuid,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Vec<ConversationTeam>>, sqlx::Error> {
    let rows: Vec<ConversationTeam> = sqlx::query_as(
        "SELECT id, conversation_id, team_id, assigned_at, assigned_by FROM conversation_teams
         WHERE conversation_id = ANY($1) ORDER BY assigned_at, id",
    )
    .bind(ids)
    .fetch_all(&mut *conn)
    .await?;
    let team_ids: Vec<Uuid> = rows.iter().map(|r| r.team_id).collect();
    let teams = super::teams::summaries(&mut *conn, org, &team_ids).await?;
    let mut out: HashMap<Uuid, Vec<ConversationTeam>> = HashMap::new();
    for mut r in rows {
        r.team = teams.get(&r.team_id).cloned();
        out.entry(r.conversation_id).or_default().push(r);
    }
    Ok(out)
}

/// The latest messages of each conversation, oldest first, with their attachments.
async fn latest_messages(
    conn: &mut PgConnection,
    org: Uuid,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Vec<Message>>, sqlx::Error> {
    let mut rows: Vec<Message> = sqlx::query_as(
        "SELECT m.* FROM unnest($1::uuid[]) AS x(id) CROSS JOIN LATERAL (
            SELECT * FROM messages WHERE conversation_id = x.id
            ORDER BY created_at DESC, id DESC LIMIT $2) m
         ORDER BY m.created_at, m.id",
    )
    .bind(ids)
    .bind(EMBEDDED_MESSAGES)
    .fetch_all(&mut *conn)
    .await?;
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
    org: Uuid,
    messages: &mut [Message],
) -> Result<(), sqlx::Error> {
    let ids: Vec<Uuid> = messages.iter().map(|m| m.id).collect();
    if ids.is_empty() {
        return Ok(());
    }
    let rows: Vec<MessageAttachment> = sqlx::query_as(
        "SELECT * FROM message_attachments WHERE message_id = ANY($1) ORDER BY created_at, id",
    )
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?;
    let file_ids: Vec<Uuid> = rows.iter().map(|a| a.file_id).collect();
    let files = super::files::get_many(&mut *conn, org, &file_ids).await?;
    let mut by_message: HashMap<Uuid, Vec<MessageAttachment>> = HashMap::new();
    for mut a in rows {
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
    org: Uuid,
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
    org: Uuid,
    f: &ConversationFilter,
    tag: Option<Uuid>,
    page: &PageRequest,
) -> Result<Page<Conversation>, sqlx::Error> {
    let q = ListQuery {
        select: select!(),
        count_from: "FROM conversations c",
        alias: "c",
    };
    let mut page = super::page(pool, q, |qb| push_filter(qb, org, f, tag), page).await?;
    let mut conn = pool.acquire().await?;
    embed(&mut conn, org, page.items_mut()).await?;
    Ok(page)
}

/// Assigns users (already assigned ones stay as they are); returns how many were new.
pub async fn add_assignees(
    conn: &mut PgConnection,
    org: Uuid,
    conversation: Uuid,
    users: &[Uuid],
    by: Option<Uuid>,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(
        "INSERT INTO conversation_assignees (id, organization_id, conversation_id, user_id, assigned_by)
         SELECT uuid_v7(), $1, $2, u, $4 FROM unnest($3::uuid[]) AS u
         ON CONFLICT (conversation_id, user_id) DO NOTHING",
    )
    .bind(org)
    .bind(conversation)
    .bind(users)
    .bind(by)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

pub async fn remove_assignee(
    db: impl PgExecutor<'_>,
    conversation: Uuid,
    user: Uuid,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "DELETE FROM conversation_assignees WHERE conversation_id = $1 AND user_id = $2",
    )
    .bind(conversation)
    .bind(user)
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Assigns teams (already assigned ones stay as they are); returns how many were new.
pub async fn add_teams(
    conn: &mut PgConnection,
    org: Uuid,
    conversation: Uuid,
    teams: &[Uuid],
    by: Option<Uuid>,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(
        "INSERT INTO conversation_teams (id, organization_id, conversation_id, team_id, assigned_by)
         SELECT uuid_v7(), $1, $2, t, $4 FROM unnest($3::uuid[]) AS t
         ON CONFLICT (conversation_id, team_id) DO NOTHING",
    )
    .bind(org)
    .bind(conversation)
    .bind(teams)
    .bind(by)
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

pub async fn remove_team(
    db: impl PgExecutor<'_>,
    conversation: Uuid,
    team: Uuid,
) -> Result<bool, sqlx::Error> {
    let done =
        sqlx::query("DELETE FROM conversation_teams WHERE conversation_id = $1 AND team_id = $2")
            .bind(conversation)
            .bind(team)
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
    org: Uuid,
    m: &Message,
    attachments: &[AttachmentRow],
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO messages (id, organization_id, conversation_id, content, type, sender_type,
            sender_id, external_id, email_message_id, source_node_id, suggested_replies,
            should_request_feedback, template_context, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14)",
    )
    .bind(m.id)
    .bind(org)
    .bind(m.conversation_id)
    .bind(&m.content)
    .bind(m.kind)
    .bind(m.sender_type)
    .bind(m.sender_id)
    .bind(&m.external_id)
    .bind(&m.email_message_id)
    .bind(&m.source_node_id)
    .bind(&m.suggested_replies)
    .bind(m.should_request_feedback)
    .bind(&m.template_context)
    .bind(m.created_at)
    .execute(&mut *conn)
    .await?;
    for a in attachments {
        sqlx::query(
            "INSERT INTO message_attachments (id, organization_id, message_id, file_id, type,
                caption, external_media_id, duration, metadata)
             VALUES (uuid_v7(), $1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(org)
        .bind(m.id)
        .bind(a.file_id)
        .bind(a.kind)
        .bind(&a.caption)
        .bind(&a.external_media_id)
        .bind(a.duration)
        .bind(sqlx::types::Json(&a.metadata))
        .execute(&mut *conn)
        .await?;
    }
    sqlx::query(
        "UPDATE conversations SET message_count = message_count + 1, last_message_at = $2,
            last_customer_message_at = CASE WHEN $3 THEN $2 ELSE last_customer_message_at END,
            updated_at = $2
         WHERE id = $1",
    )
    .bind(m.conversation_id)
    .bind(m.created_at)
    .bind(m.is_inbound())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub async fn message(
    conn: &mut PgConnection,
    org: Uuid,
    id: Uuid,
) -> Result<Option<Message>, sqlx::Error> {
    let row: Option<Message> =
        sqlx::query_as("SELECT * FROM messages WHERE organization_id = $1 AND id = $2")
            .bind(org)
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some(m) = row else { return Ok(None) };
    let mut all = [m];
    attach(conn, org, &mut all).await?;
    let [m] = all;
    Ok(Some(m))
}

/// A conversation's messages, a page at a time.
pub async fn messages(
    pool: &PgPool,
    org: Uuid,
    conversation: Uuid,
    page: &PageRequest,
) -> Result<Page<Message>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT m.* FROM messages m",
        count_from: "FROM messages m",
        alias: "m",
    };
    let mut page = super::page(
        pool,
        q,
        |qb| {
            qb.push(" WHERE m.conversation_id = ")
                .push_bind(conversation);
        },
        page,
    )
    .await?;
    let mut conn = pool.acquire().await?;
    attach(&mut conn, org, page.items_mut()).await?;
    Ok(page)
}

/// Snoozed conversations whose time has come become active again; returns how many.
pub async fn wake_snoozed(pool: &PgPool, limit: i64) -> Result<u64, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE conversations SET status = 'active', snooze_until = NULL, snoozed_at = NULL
         WHERE id IN (SELECT id FROM conversations
                      WHERE status = 'snoozed' AND snooze_until <= clock_timestamp()
                      ORDER BY snooze_until LIMIT $1 FOR UPDATE SKIP LOCKED)",
    )
    .bind(limit)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

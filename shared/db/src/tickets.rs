//! Tickets, their assignees, attachments, replies, activities and tags.

use parley_types::ids::{OrgId, TicketId, UserId};
use std::collections::HashMap;

use super::ListQuery;

use sqlx::{PgConnection, PgExecutor, PgPool, Postgres, QueryBuilder};
use uuid::Uuid;

use super::tags::{TagLink, tags_of};
use parley_domain::Channel;
use parley_domain::files::FileType;
use parley_domain::sla::SubjectType;
use parley_domain::tickets::{
    Ticket, TicketActivity, TicketAssignee, TicketAttachment, TicketFilter, TicketReply,
    TicketStatus,
};
use parley_types::enums::Priority;
use parley_types::list::{Page, PageRequest};
use parley_types::time::Timestamp;

/// Activities and replies `GET /tickets/{id}` embeds: the latest ones.
pub const EMBEDDED: i64 = 100;

pub async fn insert(db: impl PgExecutor<'_>, t: &Ticket) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO tickets (id, organization_id, reference_number, subject, description,
            customer_id, category_id, team_id, conversation_id, email_message_id, external_id,
            access_token, channel_data, channel, status, priority, estimated_hours, due_date,
            created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
            $17, $18, $19, $19)",
        t.id,
        t.organization_id,
        t.reference_number,
        &t.subject,
        t.description.as_deref(),
        t.customer_id,
        t.category_id,
        t.team_id,
        t.conversation_id,
        t.email_message_id.as_deref(),
        t.external_id.as_deref(),
        &t.access_token,
        t.channel_data.as_deref(),
        t.channel.as_str(),
        t.status.as_str(),
        t.priority.as_str(),
        t.estimated_hours,
        t.due_date,
        t.created_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

pub async fn update(db: impl PgExecutor<'_>, t: &Ticket) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE tickets SET subject = $3, description = $4, customer_id = $5, category_id = $6,
            team_id = $7, external_id = $8, resolution_notes = $9, status = $10, priority = $11,
            estimated_hours = $12, actual_hours = $13,
            due_date = $14, resolved_at = $15, closed_at = $16, updated_at = $17
         WHERE organization_id = $1 AND id = $2",
        t.organization_id,
        t.id,
        &t.subject,
        t.description.as_deref(),
        t.customer_id,
        t.category_id,
        t.team_id,
        t.external_id.as_deref(),
        t.resolution_notes.as_deref(),
        t.status.as_str(),
        t.priority.as_str(),
        t.estimated_hours,
        t.actual_hours,
        t.due_date,
        t.resolved_at,
        t.closed_at,
        t.updated_at,
    )
    .execute(db)
    .await
    .map(|_| ())
}

/// The ticket's row, locked for the rest of the transaction (without embeds).
pub async fn lock(
    conn: &mut PgConnection,
    org: OrgId,
    id: TicketId,
) -> Result<Option<Ticket>, sqlx::Error> {
    let found = sqlx::query_scalar!(
        "SELECT id FROM tickets WHERE organization_id = $1 AND id = $2 FOR UPDATE",
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

/// The ticket's row only, by id in any organization: for a read with its access token.
pub async fn find(pool: &PgPool, id: TicketId) -> Result<Option<Ticket>, sqlx::Error> {
    let org = sqlx::query_scalar!(
        "SELECT organization_id FROM tickets WHERE id = $1",
        id.uuid()
    )
    .fetch_optional(pool)
    .await?;
    match org {
        Some(org) => Ok(rows(pool, OrgId::from(org), &[id.uuid()]).await?.pop()),
        None => Ok(None),
    }
}

/// The rows alone of the tickets of `org` among `ids`, in no particular order.
async fn rows(
    db: impl PgExecutor<'_>,
    org: OrgId,
    ids: &[Uuid],
) -> Result<Vec<Ticket>, sqlx::Error> {
    let rows = sqlx::query_as!(
        TicketRow,
        "SELECT t.id, t.organization_id, t.reference_number, t.subject, t.description,
            t.customer_id, t.category_id, t.team_id, t.conversation_id, t.email_message_id,
            t.external_id, t.resolution_notes, t.access_token, t.channel_data, t.channel, t.status,
            t.priority, t.estimated_hours, t.actual_hours, t.reply_count, t.email_thread_ids,
            t.due_date, t.first_response_at, t.last_reply_at, t.resolved_at, t.closed_at,
            t.created_at, t.updated_at
         FROM tickets t WHERE t.organization_id = $1 AND t.id = ANY($2)",
        org.uuid(),
        ids,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Ticket::from).collect())
}

/// The tickets of `org` among `ids`, in no particular order, with what lists embed.
async fn read(
    conn: &mut PgConnection,
    org: OrgId,
    ids: &[Uuid],
    now: Timestamp,
) -> Result<Vec<Ticket>, sqlx::Error> {
    let mut found = rows(&mut *conn, org, ids).await?;
    embed(conn, org, &mut found, now).await?;
    Ok(found)
}

/// A ticket with everything it embeds, its latest activities and replies included.
pub async fn get(
    conn: &mut PgConnection,
    org: OrgId,
    id: TicketId,
    now: Timestamp,
) -> Result<Option<Ticket>, sqlx::Error> {
    let Some(mut t) = read(&mut *conn, org, &[id.uuid()], now).await?.pop() else {
        return Ok(None);
    };
    let activities: Vec<TicketActivity> = sqlx::query_as!(
        TicketActivity,
        "SELECT id, ticket_id, actor, actor_id, actor_type, type AS kind, description, metadata,
                old_value, new_value, created_at, updated_at
         FROM ticket_activities WHERE ticket_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2",
        id.uuid(),
        EMBEDDED,
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut replies: Vec<TicketReply> = sqlx::query_as!(
        TicketReply,
        "SELECT id, ticket_id, content, author_type, author_id, is_internal, created_at, updated_at
         FROM ticket_replies WHERE ticket_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2",
        id.uuid(),
        EMBEDDED,
    )
    .fetch_all(&mut *conn)
    .await?;
    replies.reverse();
    t.activities = Some(activities);
    t.replies = Some(replies);
    Ok(Some(t))
}

/// Fills the embedded customer, category, team, SLA state, assignees, attachments and tags.
pub async fn embed(
    conn: &mut PgConnection,
    org: OrgId,
    items: &mut [Ticket],
    now: Timestamp,
) -> Result<(), sqlx::Error> {
    if items.is_empty() {
        return Ok(());
    }
    let ids: Vec<Uuid> = items.iter().map(|t| t.id).collect();
    let customers: Vec<Uuid> = items.iter().filter_map(|t| t.customer_id).collect();
    let categories: Vec<Uuid> = items.iter().filter_map(|t| t.category_id).collect();
    let teams: Vec<Uuid> = items.iter().filter_map(|t| t.team_id).collect();
    let customers = super::contacts::get_many(&mut *conn, org, &customers).await?;
    let categories = super::categories::get_many(&mut *conn, org, &categories).await?;
    let teams = super::teams::summaries(&mut *conn, org, &teams).await?;
    let mut states = super::sla::states_of(&mut *conn, SubjectType::Ticket, &ids, now).await?;
    let mut assignees = assignees_of(&mut *conn, org, &ids).await?;
    let mut attachments = attachments_of(&mut *conn, org, &ids).await?;
    let mut tags = tags_of(&mut *conn, TagLink::Ticket, &ids).await?;
    for t in items {
        t.customer = t.customer_id.and_then(|id| customers.get(&id).cloned());
        t.category = t.category_id.and_then(|id| categories.get(&id).cloned());
        t.team = t.team_id.and_then(|id| teams.get(&id).cloned());
        t.sla_state = states.remove(&t.id);
        t.assignees = assignees.remove(&t.id).unwrap_or_default();
        t.attachments = attachments.remove(&t.id).unwrap_or_default();
        t.tags = tags.remove(&t.id).unwrap_or_default();
    }
    Ok(())
}

async fn assignees_of(
    conn: &mut PgConnection,
    org: OrgId,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Vec<TicketAssignee>>, sqlx::Error> {
    let rows = sqlx::query_as!(
        TicketAssigneeRow,
        "SELECT a.id, a.ticket_id, a.user_id, a.assigned_at, a.assigned_by, a.created_at,
            a.updated_at
         FROM ticket_assignees a WHERE a.ticket_id = ANY($1) ORDER BY a.assigned_at, a.id",
        ids,
    )
    .fetch_all(&mut *conn)
    .await?;
    let users: Vec<Uuid> = rows
        .iter()
        .flat_map(|r| [Some(r.user_id), r.assigned_by])
        .flatten()
        .collect();
    let users = super::users::summaries(&mut *conn, org, &users).await?;
    let mut out: HashMap<Uuid, Vec<TicketAssignee>> = HashMap::new();
    for r in rows {
        let mut r = TicketAssignee::from(r);
        r.user = users.get(&r.user_id).cloned();
        r.assigned_by_user = r.assigned_by.and_then(|u| users.get(&u).cloned());
        out.entry(r.ticket_id).or_default().push(r);
    }
    Ok(out)
}

async fn attachments_of(
    conn: &mut PgConnection,
    org: OrgId,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, Vec<TicketAttachment>>, sqlx::Error> {
    let rows = sqlx::query_as!(
        TicketAttachmentRow,
        "SELECT a.id, a.ticket_id, a.file_id, a.type AS kind, a.created_at, a.updated_at
         FROM ticket_attachments a WHERE a.ticket_id = ANY($1) ORDER BY a.created_at, a.id",
        ids,
    )
    .fetch_all(&mut *conn)
    .await?;
    let files: Vec<Uuid> = rows.iter().map(|a| a.file_id).collect();
    let files = super::files::get_many(&mut *conn, org, &files).await?;
    let mut out: HashMap<Uuid, Vec<TicketAttachment>> = HashMap::new();
    for a in rows {
        let mut a = TicketAttachment::from(a);
        a.file = files.get(&a.file_id).cloned();
        out.entry(a.ticket_id).or_default().push(a);
    }
    Ok(out)
}

fn push_filter(qb: &mut QueryBuilder<Postgres>, org: OrgId, f: &TicketFilter, tag: Option<Uuid>) {
    qb.push(" WHERE t.organization_id = ").push_bind(org);
    if let Some(v) = f.status {
        qb.push(" AND t.status = ").push_bind(v);
    }
    if let Some(v) = f.priority {
        qb.push(" AND t.priority = ").push_bind(v);
    }
    if let Some(v) = f.channel {
        qb.push(" AND t.channel = ").push_bind(v);
    }
    if let Some(v) = f.team_id {
        qb.push(" AND t.team_id = ").push_bind(v);
    }
    if let Some(v) = f.customer_id {
        qb.push(" AND t.customer_id = ").push_bind(v);
    }
    if let Some(v) = f.category_id {
        qb.push(" AND t.category_id = ").push_bind(v);
    }
    if let Some(v) = f.assignee_id {
        qb.push(" AND t.id IN (SELECT ticket_id FROM ticket_assignees WHERE user_id = ")
            .push_bind(v)
            .push(")");
    }
    if f.tag.is_some() {
        // An unknown tag matches nothing.
        qb.push(" AND t.id IN (SELECT ticket_id FROM ticket_tags WHERE tag_id = ")
            .push_bind(tag.unwrap_or_default())
            .push(")");
    }
}

/// `f.tag` is resolved by the caller into `tag` (a tag id) first. Lists leave activities and
/// replies out.
pub async fn list(
    pool: &PgPool,
    org: OrgId,
    f: &TicketFilter,
    tag: Option<Uuid>,
    page: &PageRequest,
    now: Timestamp,
) -> Result<Page<Ticket>, sqlx::Error> {
    super::page_of(
        pool,
        "FROM tickets t",
        "t",
        |qb| push_filter(qb, org, f, tag),
        page,
        |ids| async move { read(&mut *pool.acquire().await?, org, &ids, now).await },
    )
    .await
}

/// Assigns users (already assigned ones stay as they are); returns the ones that were new.
pub async fn add_assignees(
    conn: &mut PgConnection,
    org: OrgId,
    ticket: TicketId,
    users: &[Uuid],
    by: Option<Uuid>,
) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO ticket_assignees (id, organization_id, ticket_id, user_id, assigned_by)
         SELECT uuid_v7(), $1, $2, u, $4 FROM unnest($3::uuid[]) AS u
         ON CONFLICT (ticket_id, user_id) DO NOTHING
         RETURNING user_id",
        org.uuid(),
        ticket.uuid(),
        users,
        by,
    )
    .fetch_all(conn)
    .await
}

pub async fn remove_assignee(
    db: impl PgExecutor<'_>,
    ticket: TicketId,
    user: UserId,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM ticket_assignees WHERE ticket_id = $1 AND user_id = $2",
        ticket.uuid(),
        user.uuid(),
    )
    .execute(db)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Attaches files (each with its file's type).
pub async fn add_attachments(
    conn: &mut PgConnection,
    org: OrgId,
    ticket: TicketId,
    files: &[Uuid],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO ticket_attachments (id, organization_id, ticket_id, file_id, type)
         SELECT uuid_v7(), $1, $2, f.id, f.file_type
         FROM unnest($3::uuid[]) AS x(id) JOIN files f ON f.id = x.id AND f.organization_id = $1
         ON CONFLICT (ticket_id, file_id) DO NOTHING",
        org.uuid(),
        ticket.uuid(),
        files,
    )
    .execute(conn)
    .await
    .map(|_| ())
}

/// Writes a reply; a reply to the customer (an agent's, not internal) counts on the ticket.
pub async fn insert_reply(
    conn: &mut PgConnection,
    org: OrgId,
    r: &TicketReply,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO ticket_replies (id, organization_id, ticket_id, content, author_type, author_id,
            is_internal, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
        r.id,
        org.uuid(),
        r.ticket_id,
        &r.content,
        r.author_type.as_str(),
        r.author_id,
        r.is_internal,
        r.created_at,
    )
    .execute(&mut *conn)
    .await?;
    if r.is_internal {
        return Ok(());
    }
    sqlx::query!(
        "UPDATE tickets SET reply_count = reply_count + 1, last_reply_at = $2,
            first_response_at = CASE WHEN $3 THEN coalesce(first_response_at, $2)
                                     ELSE first_response_at END,
            updated_at = $2
         WHERE id = $1",
        r.ticket_id,
        r.created_at,
        r.author_type == parley_domain::tickets::AuthorType::Agent,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A ticket's replies, a page at a time.
pub async fn replies(
    pool: &PgPool,
    ticket: TicketId,
    page: &PageRequest,
) -> Result<Page<TicketReply>, sqlx::Error> {
    let q = ListQuery {
        select: "SELECT r.* FROM ticket_replies r".into(),
        count_from: "FROM ticket_replies r",
        alias: "r",
    };
    super::page(
        pool,
        q,
        |qb| {
            qb.push(" WHERE r.ticket_id = ").push_bind(ticket);
        },
        page,
    )
    .await
}

pub async fn add_activities(
    conn: &mut PgConnection,
    org: OrgId,
    activities: &[TicketActivity],
) -> Result<(), sqlx::Error> {
    if activities.is_empty() {
        return Ok(());
    }
    let mut qb = QueryBuilder::new(
        "INSERT INTO ticket_activities (id, organization_id, ticket_id, actor, actor_id, actor_type,
            type, description, metadata, old_value, new_value, created_at, updated_at) ",
    );
    qb.push_values(activities, |mut b, a| {
        b.push_bind(a.id)
            .push_bind(org)
            .push_bind(a.ticket_id)
            .push_bind(&a.actor)
            .push_bind(a.actor_id)
            .push_bind(&a.actor_type)
            .push_bind(&a.kind)
            .push_bind(&a.description)
            .push_bind(&a.metadata)
            .push_bind(&a.old_value)
            .push_bind(&a.new_value)
            .push_bind(a.created_at)
            .push_bind(a.updated_at);
    });
    qb.build().execute(conn).await.map(|_| ())
}

/// Ticket as its checked statements read it (what it embeds is read apart).
struct TicketRow {
    id: Uuid,
    organization_id: Uuid,
    reference_number: i64,
    subject: String,
    description: Option<String>,
    customer_id: Option<Uuid>,
    category_id: Option<Uuid>,
    team_id: Option<Uuid>,
    conversation_id: Option<Uuid>,
    email_message_id: Option<String>,
    external_id: Option<String>,
    resolution_notes: Option<String>,
    access_token: String,
    channel_data: Option<String>,
    channel: Channel,
    status: TicketStatus,
    priority: Priority,
    estimated_hours: Option<sqlx::types::Decimal>,
    actual_hours: Option<sqlx::types::Decimal>,
    reply_count: i32,
    email_thread_ids: Vec<String>,
    due_date: Option<Timestamp>,
    first_response_at: Option<Timestamp>,
    last_reply_at: Option<Timestamp>,
    resolved_at: Option<Timestamp>,
    closed_at: Option<Timestamp>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<TicketRow> for Ticket {
    fn from(r: TicketRow) -> Self {
        Self {
            id: r.id,
            organization_id: r.organization_id,
            reference_number: r.reference_number,
            subject: r.subject,
            description: r.description,
            customer_id: r.customer_id,
            category_id: r.category_id,
            team_id: r.team_id,
            conversation_id: r.conversation_id,
            email_message_id: r.email_message_id,
            external_id: r.external_id,
            resolution_notes: r.resolution_notes,
            access_token: r.access_token,
            channel_data: r.channel_data,
            channel: r.channel,
            status: r.status,
            priority: r.priority,
            estimated_hours: r.estimated_hours,
            actual_hours: r.actual_hours,
            reply_count: r.reply_count,
            email_thread_ids: r.email_thread_ids,
            due_date: r.due_date,
            first_response_at: r.first_response_at,
            last_reply_at: r.last_reply_at,
            resolved_at: r.resolved_at,
            closed_at: r.closed_at,
            customer: Default::default(),
            category: Default::default(),
            team: Default::default(),
            sla_state: Default::default(),
            assignees: Default::default(),
            attachments: Default::default(),
            activities: Default::default(),
            replies: Default::default(),
            tags: Default::default(),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// TicketAssignee as its checked statements read it (what it embeds is read apart).
struct TicketAssigneeRow {
    id: Uuid,
    ticket_id: Uuid,
    user_id: Uuid,
    assigned_at: Timestamp,
    assigned_by: Option<Uuid>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<TicketAssigneeRow> for TicketAssignee {
    fn from(r: TicketAssigneeRow) -> Self {
        Self {
            id: r.id,
            ticket_id: r.ticket_id,
            user_id: r.user_id,
            user: Default::default(),
            assigned_at: r.assigned_at,
            assigned_by: r.assigned_by,
            assigned_by_user: Default::default(),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// TicketAttachment as its checked statements read it (what it embeds is read apart).
struct TicketAttachmentRow {
    id: Uuid,
    ticket_id: Uuid,
    file_id: Uuid,
    kind: FileType,
    created_at: Timestamp,
    updated_at: Timestamp,
}

impl From<TicketAttachmentRow> for TicketAttachment {
    fn from(r: TicketAttachmentRow) -> Self {
        Self {
            id: r.id,
            ticket_id: r.ticket_id,
            file_id: r.file_id,
            file: Default::default(),
            kind: r.kind,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

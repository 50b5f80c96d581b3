//! Tickets: read, listed, with their replies and SLA state; their changes, each in one
//! transaction with its activities, SLA effects and event.

use crate::{Caller, Ctx, Result, found};
use parley_db as db;
use parley_db::refs::{self, RefTable};
use parley_db::tags::{TagLink, set_tags};
use parley_domain::Actor;
use parley_domain::conversations::AssignUsers;
use parley_domain::sla::{SlaState, SubjectType};
use parley_domain::tickets::{
    AuthorType, CreateReply, CreateTicket, Ticket, TicketActivity, TicketChange, TicketFilter,
    TicketLinks, TicketReply, TicketStatus, UpdateTicket,
};
use parley_domain::webhooks::EventName;
use parley_types::error::AppError;
use parley_types::ids::{OrgId, TicketId, UserId};
use parley_types::list::{Page, PageRequest};
use parley_types::time::Timestamp;
use sqlx::PgConnection;
use uuid::Uuid;

const MAX_PER_CALL: usize = 50;
const MAX_FILES: usize = 20;

/// The ticket with everything it embeds, as the API and its events show it.
pub async fn read(ctx: Ctx<'_>, org: OrgId, id: TicketId) -> Result<Ticket> {
    read_in(&mut *ctx.pool.acquire().await?, org, id, ctx.clock.now()).await
}

/// The ticket with this id, whatever its organization: for the check of an access token
/// (`X-Ticket-Access-Token`), which names no organization.
pub async fn find_for_token(ctx: Ctx<'_>, id: TicketId) -> Result<Option<Ticket>> {
    Ok(db::tickets::find(ctx.pool, id).await?)
}

/// The organization's ticket, or 404.
async fn of_org(ctx: Ctx<'_>, org: OrgId, id: TicketId) -> Result<Ticket> {
    found(
        find_for_token(ctx, id)
            .await?
            .filter(|t| t.organization_id == org.uuid()),
    )
}

/// A page of the ticket's replies.
pub async fn replies(
    ctx: Ctx<'_>,
    org: OrgId,
    id: TicketId,
    page: &PageRequest,
) -> Result<Page<TicketReply>> {
    of_org(ctx, org, id).await?;
    Ok(db::tickets::replies(ctx.pool, id, page).await?)
}

/// The organization's ticket's SLA state; `None` when no policy applies to it.
pub async fn sla_state(ctx: Ctx<'_>, org: OrgId, id: TicketId) -> Result<Option<SlaState>> {
    sla_state_of(ctx, &of_org(ctx, org, id).await?).await
}

/// The SLA state of a ticket read already (by its access token); `None` when no policy
/// applies to it.
pub async fn sla_state_of(ctx: Ctx<'_>, ticket: &Ticket) -> Result<Option<SlaState>> {
    let mut states =
        db::sla::states_of(ctx.pool, SubjectType::Ticket, &[ticket.id], ctx.clock.now()).await?;
    Ok(states.remove(&ticket.id))
}

async fn read_in(
    conn: &mut PgConnection,
    org: OrgId,
    id: TicketId,
    now: Timestamp,
) -> Result<Ticket> {
    db::tickets::get(conn, org, id, now)
        .await?
        .ok_or(AppError::NotFound.into())
}

/// The ticket, locked for the rest of the transaction.
async fn lock(conn: &mut PgConnection, org: OrgId, id: TicketId) -> Result<Ticket> {
    db::tickets::lock(conn, org, id)
        .await?
        .ok_or(AppError::NotFound.into())
}

/// The ticket as it now reads, with its `ticket.updated` event.
async fn updated(
    conn: &mut PgConnection,
    org: OrgId,
    id: TicketId,
    now: Timestamp,
) -> Result<Ticket> {
    let ticket = read_in(conn, org, id, now).await?;
    db::outbox::emit(conn, org, EventName::TicketUpdated, &ticket).await?;
    Ok(ticket)
}

/// Moves the SLA clock with a status change: `pending` and `on_hold` stop it, other statuses
/// run it, `resolved` and `closed` end it.
async fn follow_status(
    conn: &mut PgConnection,
    id: Uuid,
    to: TicketStatus,
    now: Timestamp,
) -> Result<()> {
    db::sla::update(conn, SubjectType::Ticket, id, |s, clock| {
        if to.resolves() {
            s.resolve(now, clock);
        } else if to.pauses_sla() {
            s.pause(now);
        } else {
            s.resume(now, clock);
        }
    })
    .await?;
    Ok(())
}

/// Creates a ticket with its tags, assignees, attachments, `created` activity, SLA state (when a
/// policy applies) and `ticket.created` event.
/// The records a new ticket refers to are the organization's.
async fn check_refs(conn: &mut PgConnection, org: OrgId, req: &CreateTicket) -> Result<()> {
    refs::check_id(
        &mut *conn,
        RefTable::Contacts,
        org,
        "customerId",
        req.customer_id,
    )
    .await?;
    refs::check_id(
        &mut *conn,
        RefTable::Categories,
        org,
        "categoryId",
        req.category_id,
    )
    .await?;
    refs::check_id(&mut *conn, RefTable::Teams, org, "teamId", req.team_id).await?;
    refs::check_id(
        &mut *conn,
        RefTable::Conversations,
        org,
        "conversationId",
        req.conversation_id,
    )
    .await?;
    Ok(())
}

/// The tags, assignees and files a new ticket links to are the organization's, and few enough.
async fn check_links(conn: &mut PgConnection, org: OrgId, links: &TicketLinks) -> Result<()> {
    refs::check_tag_ids(&mut *conn, org, &links.tag_ids).await?;
    refs::check_ids(
        &mut *conn,
        RefTable::Users,
        org,
        "assigneeIds",
        &links.assignee_ids,
        MAX_PER_CALL,
    )
    .await?;
    refs::check_ids(
        &mut *conn,
        RefTable::Files,
        org,
        "fileIds",
        &links.file_ids,
        MAX_FILES,
    )
    .await?;
    Ok(())
}

#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id))]
pub async fn create(ctx: Ctx<'_>, caller: &Caller, req: CreateTicket) -> Result<Ticket> {
    let now = ctx.clock.now();
    let mut tx = ctx.pool.begin().await?;
    let org = caller.org_id;
    check_refs(&mut tx, org, &req).await?;
    let number = db::orgs::next_number(&mut tx, org, "ticket").await?;
    let (ticket, links) = req.into_ticket(org.uuid(), number, now);
    check_links(&mut tx, org, &links).await?;
    db::tickets::insert(&mut *tx, &ticket).await?;
    set_tags(&mut tx, TagLink::Ticket, org, ticket.id, &links.tag_ids).await?;
    db::tickets::add_assignees(
        &mut tx,
        org,
        TicketId::from(ticket.id),
        &links.assignee_ids,
        None,
    )
    .await?;
    db::tickets::add_attachments(&mut tx, org, TicketId::from(ticket.id), &links.file_ids).await?;
    let created = TicketActivity::new(
        ticket.id,
        &caller.actor(),
        "created",
        format!("{} created the ticket", caller.key_name),
    );
    db::tickets::add_activities(&mut tx, org, &[created]).await?;
    db::sla::start(
        &mut tx,
        org,
        SubjectType::Ticket,
        ticket.id,
        ticket.priority,
        ticket.channel,
        ticket.created_at,
    )
    .await?;
    let ticket = read_in(&mut tx, org, TicketId::from(ticket.id), now).await?;
    db::outbox::emit(&mut tx, org, EventName::TicketCreated, &ticket).await?;
    tx.commit().await?;
    Ok(ticket)
}

/// Applies an update: an activity per changed field, the SLA clock following the status, and
/// `ticket.closed` or `ticket.updated`.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, ticket_id = %id))]
pub async fn update(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: TicketId,
    req: UpdateTicket,
) -> Result<Ticket> {
    let now = ctx.clock.now();
    let org = caller.org_id;
    let mut tx = ctx.pool.begin().await?;
    let mut ticket = lock(&mut tx, org, id).await?;
    let change = req.apply(&mut ticket, now)?;
    check_update_refs(&mut tx, org, &ticket).await?;
    let mut activities = field_activities(caller, &ticket, &change);
    if let Some(tag_ids) = change.tag_ids.clone()
        && replace_tags(&mut tx, org, id, tag_ids).await?
    {
        activities.push(TicketActivity::new(
            ticket.id,
            &caller.actor(),
            "tags_changed",
            format!("{} changed the tags", caller.key_name),
        ));
    }
    db::tickets::update(&mut *tx, &ticket).await?;
    db::tickets::add_activities(&mut tx, org, &activities).await?;
    let priority = ticket.priority;
    db::sla::update(&mut tx, SubjectType::Ticket, id.uuid(), |s, _| {
        s.priority = priority
    })
    .await?;
    if let Some((_, to)) = change.status {
        follow_status(&mut tx, id.uuid(), to, now).await?;
    }
    let ticket = read_in(&mut tx, org, id, now).await?;
    if change
        .status
        .is_some_and(|(_, to)| to == TicketStatus::Closed)
    {
        db::outbox::emit(&mut tx, org, EventName::TicketClosed, &ticket).await?;
    } else if !activities.is_empty() {
        db::outbox::emit(&mut tx, org, EventName::TicketUpdated, &ticket).await?;
    }
    tx.commit().await?;
    Ok(ticket)
}

/// The customer, category and team an updated ticket names are the organization's.
async fn check_update_refs(conn: &mut PgConnection, org: OrgId, ticket: &Ticket) -> Result<()> {
    refs::check_id(
        &mut *conn,
        RefTable::Contacts,
        org,
        "customerId",
        ticket.customer_id,
    )
    .await?;
    refs::check_id(
        &mut *conn,
        RefTable::Categories,
        org,
        "categoryId",
        ticket.category_id,
    )
    .await?;
    refs::check_id(conn, RefTable::Teams, org, "teamId", ticket.team_id).await?;
    Ok(())
}

/// One activity per field the update changed, by the calling key.
fn field_activities(
    caller: &Caller,
    ticket: &Ticket,
    change: &TicketChange,
) -> Vec<TicketActivity> {
    let actor = caller.actor();
    change
        .fields
        .iter()
        .map(|(kind, field, old, new)| {
            TicketActivity::new(
                ticket.id,
                &actor,
                kind,
                format!("{} changed {field}", caller.key_name),
            )
            .values(old.clone(), new.clone())
        })
        .collect()
}

/// Replaces the ticket's tags; whether any was added or removed.
async fn replace_tags(
    conn: &mut PgConnection,
    org: OrgId,
    id: TicketId,
    tag_ids: Vec<Uuid>,
) -> Result<bool> {
    let tag_ids = parley_types::ids::dedup(tag_ids);
    refs::check_tag_ids(&mut *conn, org, &tag_ids).await?;
    let (added, removed) = set_tags(conn, TagLink::Ticket, org, id.uuid(), &tag_ids).await?;
    Ok(!added.is_empty() || !removed.is_empty())
}

/// Adds a reply with its activity and SLA effect; a customer's reply moves a `pending` ticket
/// back to `open`.
/// A customer's reply to a `pending` ticket opens it again (and its SLA clock runs); the
/// activity that says so.
async fn reopen(
    conn: &mut PgConnection,
    ticket: &mut Ticket,
    actor: &Actor,
    now: Timestamp,
) -> Result<TicketActivity> {
    ticket.status = TicketStatus::Open;
    ticket.updated_at = now;
    db::tickets::update(&mut *conn, ticket).await?;
    follow_status(conn, ticket.id, TicketStatus::Open, now).await?;
    Ok(TicketActivity::new(
        ticket.id,
        actor,
        "status_changed",
        "the customer's reply reopened the ticket".to_owned(),
    )
    .values(
        Some(TicketStatus::Pending.to_string()),
        Some(TicketStatus::Open.to_string()),
    ))
}

#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, ticket_id = %id))]
pub async fn add_reply(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: TicketId,
    req: CreateReply,
) -> Result<TicketReply> {
    let now = ctx.clock.now();
    let org = caller.org_id;
    let mut tx = ctx.pool.begin().await?;
    let mut ticket = lock(&mut tx, org, id).await?;
    if ticket.status == TicketStatus::Closed {
        return Err(AppError::invalid_state("the ticket is closed").into());
    }
    let mut reply = req.into_reply(&ticket)?;
    reply.created_at = now;
    reply.updated_at = now;
    if reply.author_type == AuthorType::Agent {
        refs::check_id(&mut tx, RefTable::Users, org, "authorId", reply.author_id).await?;
    }
    db::tickets::insert_reply(&mut tx, org, &reply).await?;
    let actor = match (reply.author_type, reply.author_id) {
        (AuthorType::Customer, Some(c)) => Actor::contact(c),
        _ => caller.actor(),
    };
    let what = if reply.is_internal {
        "added an internal note"
    } else {
        "replied"
    };
    let mut activities = vec![TicketActivity::new(
        ticket.id,
        &actor,
        "replied",
        format!("{} {what}", actor.name),
    )];
    match (reply.author_type, reply.is_internal) {
        (AuthorType::Agent, false) => {
            db::sla::update(&mut tx, SubjectType::Ticket, id.uuid(), |s, _| {
                s.agent_replied(now)
            })
            .await?;
        }
        (AuthorType::Customer, _) => {
            if ticket.status == TicketStatus::Pending {
                activities.push(reopen(&mut tx, &mut ticket, &actor, now).await?);
            }
            db::sla::update(&mut tx, SubjectType::Ticket, id.uuid(), |s, clock| {
                s.customer_wrote(now, clock)
            })
            .await?;
        }
        (AuthorType::Agent, true) => {}
    }
    db::tickets::add_activities(&mut tx, org, &activities).await?;
    updated(&mut tx, org, id, now).await?;
    tx.commit().await?;
    Ok(reply)
}

/// Assigns users (those already assigned stay), an activity per user newly assigned.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, ticket_id = %id))]
pub async fn assign(
    ctx: Ctx<'_>,
    caller: &Caller,
    id: TicketId,
    req: AssignUsers,
) -> Result<Ticket> {
    let now = ctx.clock.now();
    let org = caller.org_id;
    let mut tx = ctx.pool.begin().await?;
    let ticket = lock(&mut tx, org, id).await?;
    let users = refs::check_assignment(
        &mut tx,
        RefTable::Users,
        org,
        "userIds",
        req.user_ids,
        req.assigned_by,
        MAX_PER_CALL,
    )
    .await?;
    let added = db::tickets::add_assignees(&mut tx, org, id, &users, req.assigned_by).await?;
    if added.is_empty() {
        let ticket = read_in(&mut tx, org, id, now).await?;
        tx.commit().await?;
        return Ok(ticket);
    }
    let actor = caller.actor();
    let activities: Vec<TicketActivity> = added
        .iter()
        .map(|u| {
            TicketActivity::new(
                ticket.id,
                &actor,
                "assigned",
                format!("{} assigned a user", caller.key_name),
            )
            .values(None, Some(u.to_string()))
        })
        .collect();
    db::tickets::add_activities(&mut tx, org, &activities).await?;
    let ticket = updated(&mut tx, org, id, now).await?;
    tx.commit().await?;
    Ok(ticket)
}

/// Unassigns a user, with its activity; returns the user's id.
#[tracing::instrument(skip_all, fields(organization_id = %caller.org_id, ticket_id = %id))]
pub async fn unassign(ctx: Ctx<'_>, caller: &Caller, id: TicketId, user: UserId) -> Result<Uuid> {
    let now = ctx.clock.now();
    let org = caller.org_id;
    let mut tx = ctx.pool.begin().await?;
    let ticket = lock(&mut tx, org, id).await?;
    if !db::tickets::remove_assignee(&mut *tx, id, user).await? {
        return Err(AppError::NotFound.into());
    }
    let activity = TicketActivity::new(
        ticket.id,
        &caller.actor(),
        "unassigned",
        format!("{} unassigned a user", caller.key_name),
    )
    .values(Some(user.to_string()), None);
    db::tickets::add_activities(&mut tx, org, &[activity]).await?;
    updated(&mut tx, org, id, now).await?;
    tx.commit().await?;
    Ok(user.uuid())
}

/// A page of the organization's tickets; a `tag` filter names a tag or gives its id.
pub async fn list(
    ctx: Ctx<'_>,
    org: OrgId,
    f: &TicketFilter,
    page: &PageRequest,
) -> Result<Page<Ticket>> {
    let tag = crate::contacts::tag_filter(ctx, org, f.tag.as_ref().map(|t| t.as_str())).await?;
    let now = ctx.clock.now();
    Ok(db::tickets::list(ctx.pool, org, f, tag, page, now).await?)
}

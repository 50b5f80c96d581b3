//! Tickets (endpoint 15 and the operations beside it): replies, assignees, an activity for
//! every change, and the SLA clock. Every change and its event (`ticket.*`) commit together.

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::{AppError, AppResult};
use axum::extract::State;
use parley_db as db;
use parley_db::refs::{self, RefTable};
use parley_db::tags::{TagLink, set_tags};
use parley_domain::Actor;
use parley_domain::conversations::AssignUsers;
use parley_domain::sla::{SlaState, SubjectType};
use parley_domain::tickets::{
    AuthorType, CreateReply, CreateTicket, Ticket, TicketActivity, TicketFilter, TicketReply,
    TicketStatus, UpdateTicket,
};
use parley_domain::webhooks::EventName;
use parley_types::list::PageParams;
use parley_types::time::Timestamp;
use sqlx::PgConnection;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::extract::{Json, Paging, Path, Query, Tenant, TicketReader};
use crate::state::AppState;

const MAX_TAGS: usize = 50;
const MAX_PER_CALL: usize = 50;
const MAX_FILES: usize = 20;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get, update))
        .routes(routes!(add_reply, replies))
        .routes(routes!(assign))
        .routes(routes!(unassign))
        .routes(routes!(sla))
}

async fn read(conn: &mut PgConnection, org: Uuid, id: Uuid) -> AppResult<Ticket> {
    db::tickets::get(conn, org, id)
        .await?
        .ok_or(AppError::NotFound.into())
}

async fn lock(conn: &mut PgConnection, org: Uuid, id: Uuid) -> AppResult<Ticket> {
    db::tickets::lock(conn, org, id)
        .await?
        .ok_or(AppError::NotFound.into())
}

/// The ticket as it now reads, with its `ticket.updated` event.
async fn updated(conn: &mut PgConnection, org: Uuid, id: Uuid) -> AppResult<Ticket> {
    let ticket = read(conn, org, id).await?;
    db::outbox::emit(conn, org, EventName::TicketUpdated, &ticket).await?;
    Ok(ticket)
}

/// Create a ticket; the most specific SLA policy starts its clock.
#[utoipa::path(post, path = "/api/v1/tickets", tag = "tickets",
    request_body = CreateTicket,
    responses((status = 201, description = "The new ticket, with its `accessToken`", body = Envelope<Ticket>)))]
async fn create(
    State(s): State<AppState>,
    t: Tenant,
    Json(req): Json<CreateTicket>,
) -> AppResult<Reply<Ticket>> {
    let mut tx = s.pool.begin().await?;
    let org = t.org_id;
    refs::check_id(
        &mut tx,
        RefTable::Contacts,
        org,
        "customerId",
        req.customer_id,
    )
    .await?;
    refs::check_id(
        &mut tx,
        RefTable::Categories,
        org,
        "categoryId",
        req.category_id,
    )
    .await?;
    refs::check_id(&mut tx, RefTable::Teams, org, "teamId", req.team_id).await?;
    refs::check_id(
        &mut tx,
        RefTable::Conversations,
        org,
        "conversationId",
        req.conversation_id,
    )
    .await?;
    let number = db::orgs::next_number(&mut tx, org, "ticket").await?;
    let (ticket, links) = req.into_ticket(org, number);
    refs::check_ids(
        &mut tx,
        RefTable::Tags,
        org,
        "tagIds",
        &links.tag_ids,
        MAX_TAGS,
    )
    .await?;
    refs::check_ids(
        &mut tx,
        RefTable::Users,
        org,
        "assigneeIds",
        &links.assignee_ids,
        MAX_PER_CALL,
    )
    .await?;
    refs::check_ids(
        &mut tx,
        RefTable::Files,
        org,
        "fileIds",
        &links.file_ids,
        MAX_FILES,
    )
    .await?;
    db::tickets::insert(&mut *tx, &ticket).await?;
    set_tags(&mut tx, TagLink::Ticket, org, ticket.id, &links.tag_ids).await?;
    db::tickets::add_assignees(&mut tx, org, ticket.id, &links.assignee_ids, None).await?;
    db::tickets::add_attachments(&mut tx, org, ticket.id, &links.file_ids).await?;
    let created = TicketActivity::new(
        ticket.id,
        &t.actor(),
        "created",
        format!("{} created the ticket", t.key_name),
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
    let ticket = read(&mut tx, org, ticket.id).await?;
    db::outbox::emit(&mut tx, org, EventName::TicketCreated, &ticket).await?;
    tx.commit().await?;
    Ok(Reply::created(ticket))
}

/// List tickets with their customer, category, team, SLA state, assignees, attachments and
/// tags (activities and replies: `GET /tickets/{id}`).
#[utoipa::path(get, path = "/api/v1/tickets", tag = "tickets",
    params(PageParams, TicketFilter),
    responses((status = 200, description = "A page of tickets", body = ListEnvelope<Ticket>)))]
async fn list(
    State(s): State<AppState>,
    t: Tenant,
    Paging(page): Paging,
    Query(filter): Query<TicketFilter>,
) -> AppResult<Reply<Vec<Ticket>>> {
    let tag = match &filter.tag {
        Some(tag) => db::contacts::resolve_tag(&s.pool, t.org_id, tag.as_str()).await?,
        None => None,
    };
    Ok(Reply::page(
        db::tickets::list(&s.pool, t.org_id, &filter, tag, &page).await?,
    ))
}

/// Get a ticket with everything it embeds, its latest activities and replies included.
#[utoipa::path(get, path = "/api/v1/tickets/{id}", tag = "tickets",
    params(("id" = Uuid, Path, description = "Ticket id")),
    responses((status = 200, description = "The ticket", body = Envelope<Ticket>)))]
async fn get(
    State(s): State<AppState>,
    t: Tenant,
    Path(id): Path<Uuid>,
) -> AppResult<Reply<Ticket>> {
    let mut conn = s.pool.acquire().await?;
    Ok(Reply::ok(read(&mut conn, t.org_id, id).await?))
}

/// Moves the SLA clock with a status change: `pending` and `on_hold` stop it, other statuses
/// run it, `resolved` and `closed` end it.
async fn follow_status(
    conn: &mut PgConnection,
    id: Uuid,
    to: TicketStatus,
    now: Timestamp,
) -> AppResult<()> {
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

/// Update a ticket. Each changed field is an activity; `closed` is final.
#[utoipa::path(patch, path = "/api/v1/tickets/{id}", tag = "tickets",
    params(("id" = Uuid, Path, description = "Ticket id")),
    request_body = UpdateTicket,
    responses(
        (status = 200, description = "The updated ticket", body = Envelope<Ticket>),
        (status = 409, description = "The ticket is closed (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn update(
    State(s): State<AppState>,
    t: Tenant,
    Path(id): Path<Uuid>,
    Json(req): Json<UpdateTicket>,
) -> AppResult<Reply<Ticket>> {
    let now = Timestamp::now();
    let org = t.org_id;
    let mut tx = s.pool.begin().await?;
    let mut ticket = lock(&mut tx, org, id).await?;
    let change = req.apply(&mut ticket, now)?;
    refs::check_id(
        &mut tx,
        RefTable::Contacts,
        org,
        "customerId",
        ticket.customer_id,
    )
    .await?;
    refs::check_id(
        &mut tx,
        RefTable::Categories,
        org,
        "categoryId",
        ticket.category_id,
    )
    .await?;
    refs::check_id(&mut tx, RefTable::Teams, org, "teamId", ticket.team_id).await?;
    let actor = t.actor();
    let mut activities: Vec<TicketActivity> = change
        .fields
        .iter()
        .map(|(kind, field, old, new)| {
            TicketActivity::new(
                ticket.id,
                &actor,
                kind,
                format!("{} changed {field}", t.key_name),
            )
            .values(old.clone(), new.clone())
        })
        .collect();
    if let Some(tag_ids) = change.tag_ids {
        let tag_ids = parley_types::ids::dedup(tag_ids);
        refs::check_ids(&mut tx, RefTable::Tags, org, "tagIds", &tag_ids, MAX_TAGS).await?;
        let (added, removed) = set_tags(&mut tx, TagLink::Ticket, org, id, &tag_ids).await?;
        if !added.is_empty() || !removed.is_empty() {
            activities.push(TicketActivity::new(
                ticket.id,
                &actor,
                "tags_changed",
                format!("{} changed the tags", t.key_name),
            ));
        }
    }
    db::tickets::update(&mut *tx, &ticket).await?;
    db::tickets::add_activities(&mut tx, org, &activities).await?;
    let priority = ticket.priority;
    db::sla::update(&mut tx, SubjectType::Ticket, id, |s, _| {
        s.priority = priority
    })
    .await?;
    if let Some((_, to)) = change.status {
        follow_status(&mut tx, id, to, now).await?;
    }
    let ticket = read(&mut tx, org, id).await?;
    if change
        .status
        .is_some_and(|(_, to)| to == TicketStatus::Closed)
    {
        db::outbox::emit(&mut tx, org, EventName::TicketClosed, &ticket).await?;
    } else if !activities.is_empty() {
        db::outbox::emit(&mut tx, org, EventName::TicketUpdated, &ticket).await?;
    }
    tx.commit().await?;
    Ok(Reply::ok(ticket))
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
    State(s): State<AppState>,
    t: Tenant,
    Path(id): Path<Uuid>,
    Json(req): Json<CreateReply>,
) -> AppResult<Reply<TicketReply>> {
    let now = Timestamp::now();
    let org = t.org_id;
    let mut tx = s.pool.begin().await?;
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
        _ => t.actor(),
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
            db::sla::update(&mut tx, SubjectType::Ticket, id, |s, _| {
                s.agent_replied(now)
            })
            .await?;
        }
        (AuthorType::Customer, _) => {
            if ticket.status == TicketStatus::Pending {
                activities.push(
                    TicketActivity::new(
                        ticket.id,
                        &actor,
                        "status_changed",
                        "the customer's reply reopened the ticket".to_owned(),
                    )
                    .values(
                        Some(TicketStatus::Pending.to_string()),
                        Some(TicketStatus::Open.to_string()),
                    ),
                );
                ticket.status = TicketStatus::Open;
                ticket.updated_at = now;
                db::tickets::update(&mut *tx, &ticket).await?;
                follow_status(&mut tx, id, TicketStatus::Open, now).await?;
            }
            db::sla::update(&mut tx, SubjectType::Ticket, id, |s, clock| {
                s.customer_wrote(now, clock)
            })
            .await?;
        }
        (AuthorType::Agent, true) => {}
    }
    db::tickets::add_activities(&mut tx, org, &activities).await?;
    updated(&mut tx, org, id).await?;
    tx.commit().await?;
    Ok(Reply::created(reply))
}

/// A ticket's replies.
#[utoipa::path(get, path = "/api/v1/tickets/{id}/replies", tag = "tickets",
    params(("id" = Uuid, Path, description = "Ticket id"), PageParams),
    responses((status = 200, description = "A page of replies", body = ListEnvelope<TicketReply>)))]
async fn replies(
    State(s): State<AppState>,
    t: Tenant,
    Path(id): Path<Uuid>,
    Paging(page): Paging,
) -> AppResult<Reply<Vec<TicketReply>>> {
    if db::tickets::find(&s.pool, id)
        .await?
        .is_none_or(|tk| tk.organization_id != t.org_id)
    {
        return Err(AppError::NotFound.into());
    }
    Ok(Reply::page(db::tickets::replies(&s.pool, id, &page).await?))
}

/// Assign users; users already assigned stay as they are.
#[utoipa::path(post, path = "/api/v1/tickets/{id}/assignees", tag = "tickets",
    params(("id" = Uuid, Path, description = "Ticket id")),
    request_body = AssignUsers,
    responses((status = 200, description = "The ticket", body = Envelope<Ticket>)))]
async fn assign(
    State(s): State<AppState>,
    t: Tenant,
    Path(id): Path<Uuid>,
    Json(req): Json<AssignUsers>,
) -> AppResult<Reply<Ticket>> {
    let org = t.org_id;
    let mut tx = s.pool.begin().await?;
    let ticket = lock(&mut tx, org, id).await?;
    if req.user_ids.is_empty() {
        return Err(AppError::validation("userIds", "required", "at least one id").into());
    }
    let users = parley_types::ids::dedup(req.user_ids);
    refs::check_ids(
        &mut tx,
        RefTable::Users,
        org,
        "userIds",
        &users,
        MAX_PER_CALL,
    )
    .await?;
    refs::check_id(&mut tx, RefTable::Users, org, "assignedBy", req.assigned_by).await?;
    let added = db::tickets::add_assignees(&mut tx, org, id, &users, req.assigned_by).await?;
    if added.is_empty() {
        let ticket = read(&mut tx, org, id).await?;
        tx.commit().await?;
        return Ok(Reply::ok(ticket));
    }
    let actor = t.actor();
    let activities: Vec<TicketActivity> = added
        .iter()
        .map(|u| {
            TicketActivity::new(
                ticket.id,
                &actor,
                "assigned",
                format!("{} assigned a user", t.key_name),
            )
            .values(None, Some(u.to_string()))
        })
        .collect();
    db::tickets::add_activities(&mut tx, org, &activities).await?;
    let ticket = updated(&mut tx, org, id).await?;
    tx.commit().await?;
    Ok(Reply::ok(ticket))
}

/// Unassign a user.
#[utoipa::path(delete, path = "/api/v1/tickets/{id}/assignees/{userId}", tag = "tickets",
    params(("id" = Uuid, Path, description = "Ticket id"), ("userId" = Uuid, Path, description = "The assigned user")),
    responses((status = 200, description = "The assignment is gone; `id` is the user's", body = Envelope<Deleted>)))]
async fn unassign(
    State(s): State<AppState>,
    t: Tenant,
    Path((id, user)): Path<(Uuid, Uuid)>,
) -> AppResult<Reply<Deleted>> {
    let org = t.org_id;
    let mut tx = s.pool.begin().await?;
    let ticket = lock(&mut tx, org, id).await?;
    if !db::tickets::remove_assignee(&mut *tx, id, user).await? {
        return Err(AppError::NotFound.into());
    }
    let activity = TicketActivity::new(
        ticket.id,
        &t.actor(),
        "unassigned",
        format!("{} unassigned a user", t.key_name),
    )
    .values(Some(user.to_string()), None);
    db::tickets::add_activities(&mut tx, org, &[activity]).await?;
    updated(&mut tx, org, id).await?;
    tx.commit().await?;
    Ok(Reply::deleted(user))
}

/// The ticket's SLA state (endpoint 15), `secondsRemaining` as of now; `null` when no policy
/// applies. Takes an API key with `tickets:read`, or the ticket's own `accessToken` in
/// `X-Ticket-Access-Token` (which grants this read only).
#[utoipa::path(get, path = "/api/v1/tickets/{id}/sla", tag = "tickets",
    params(
        ("id" = Uuid, Path, description = "Ticket id"),
        ("X-Ticket-Access-Token" = Option<String>, Header, description = "The ticket's `accessToken`, instead of an API key"),
    ),
    responses((status = 200, description = "The SLA state", body = Envelope<Option<SlaState>>)))]
async fn sla(
    State(s): State<AppState>,
    reader: TicketReader,
    Path(id): Path<Uuid>,
) -> AppResult<Reply<Option<SlaState>>> {
    let ticket = db::tickets::find(&s.pool, id).await?;
    let ticket = match reader {
        TicketReader::Key(t) => ticket
            .filter(|tk| tk.organization_id == t.org_id)
            .ok_or(AppError::NotFound)?,
        TicketReader::Token(token) => ticket
            .filter(|tk| parley_domain::auth::same_secret(&tk.access_token, &token.0))
            .ok_or(AppError::Unauthorized)?,
    };
    let mut states =
        db::sla::states_of(&s.pool, SubjectType::Ticket, &[ticket.id], Timestamp::now()).await?;
    Ok(Reply::ok(states.remove(&ticket.id)))
}

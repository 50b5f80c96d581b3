//! Bearer API keys: 401 for no, unknown or revoked keys; the daily counter and its 429; the
//! route's scope and its 403 ([`authenticate`]). A ticket's SLA may be read with the ticket's
//! access token instead, checked here too, so that every request knows its organization before
//! its body is read. Then, once its body has arrived, the request takes its organization's
//! turn ([`take_turn`]) and an in-flight slot; only then does a handler run, with the
//! [`Tenant`] (or [`TicketAccess`]) it serves.

use crate::error::{ApiError, AppError};
use crate::{envelope, usage};

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use parley_domain::api_keys::KeyIdentity;
use parley_domain::auth;
use parley_types::ids::{OrgId, TicketId};
use uuid::Uuid;

use crate::client_addr::ClientAddr;
use crate::extract::{Tenant, TicketAccess};
use crate::scopes::required_scope;
use crate::scopes::{TICKET_SLA_ROUTE, TICKET_TOKEN_HEADER};
use crate::state::AppState;

/// The key whose secret this is: from this process's cache, else read (and kept).
async fn identify(
    state: &AppState,
    secret: &str,
    now: std::time::Instant,
) -> Result<Option<KeyIdentity>, ApiError> {
    let hash = auth::hash_key(secret);
    if let Some(key) = state.keys.get(&hash, now) {
        return Ok(Some(key));
    }
    let generation = state.keys.generation();
    let key = parley_usecases::api_keys::identify(state.use_cases(), &hash).await?;
    if let Some(key) = &key {
        state.keys.put(hash, key.clone(), generation, now);
    }
    Ok(key)
}

fn bearer(req: &Request) -> Option<&str> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The organization a request acts for, once authenticated: its key's, or its ticket's.
pub fn org_of(req: &Request) -> Option<Uuid> {
    let ext = req.extensions();
    ext.get::<Tenant>()
        .map(|t| t.org_id.uuid())
        .or_else(|| ext.get::<TicketAccess>().map(|t| t.ticket.organization_id))
}

pub async fn authenticate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    match admit(&state, req).await {
        Ok(req) => next.run(req).await,
        Err(err) => err.into_response(),
    }
}

/// The organization's turn, held until the answer: its requests past its share wait in its own
/// queue (`org_permits::OrgTurns`), before they take an in-flight slot. Requests with a
/// ticket's token take turns in a lane of their own beside their organization's.
pub async fn take_turn(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let ext = req.extensions();
    let lane = match (ext.get::<Tenant>(), ext.get::<TicketAccess>()) {
        (Some(tenant), _) => (&state.turns, tenant.org_id.uuid()),
        (None, Some(access)) => (&state.ticket_turns, access.ticket.organization_id),
        (None, None) => return ApiError(AppError::Unauthorized).into_response(),
    };
    let _turn = match lane.0.take(lane.1).await {
        Ok(turn) => turn,
        Err(err) => return ApiError(err).into_response(),
    };
    next.run(req).await
}

/// The ticket a request's access token opens, or 401 (counted as a failed authentication of
/// its address). The token is compared in constant time with the ticket's.
async fn ticket_access(
    state: &AppState,
    path: &str,
    token: &str,
    client: Option<ClientAddr>,
    now: std::time::Instant,
) -> Result<TicketAccess, ApiError> {
    // The route's `{id}`: a path id that is not a UUID names no ticket.
    let (before, after) = TICKET_SLA_ROUTE.split_once("{id}").unwrap_or_default();
    let id = path
        .strip_prefix(before)
        .and_then(|rest| rest.strip_suffix(after))
        .and_then(|id| id.parse::<TicketId>().ok())
        .ok_or(AppError::NotFound)?;
    match parley_usecases::tickets::find_for_token(state.use_cases(), id).await? {
        Some(ticket) if auth::same_secret(&ticket.access_token, token) => Ok(TicketAccess {
            ticket: Box::new(ticket),
        }),
        _ => {
            if let Some(client) = client {
                state.auth_failures.failed(client.0, now);
            }
            Err(AppError::Unauthorized.into())
        }
    }
}

async fn admit(state: &AppState, mut req: Request) -> Result<Request, ApiError> {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let client = req.extensions().get::<ClientAddr>().copied();
    let peer = client.map(|c| c.0);
    let now = std::time::Instant::now();
    // A ticket's SLA may be read with the ticket's own access token instead of a key: a lookup,
    // so an address that failed too often this minute is refused before it, and a wrong token
    // counts as a failure.
    if route == TICKET_SLA_ROUTE
        && bearer(&req).is_none()
        && let Some(token) = req
            .headers()
            .get(TICKET_TOKEN_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    {
        state.auth_failures.admit(peer, now)?;
        let path = req.uri().path().to_owned();
        let access = ticket_access(state, &path, &token, client, now).await?;
        tracing::Span::current().record(
            "organization_id",
            tracing::field::display(access.ticket.organization_id),
        );
        req.extensions_mut().insert(access);
        return Ok(req);
    }
    let secret = bearer(&req)
        .filter(|s| auth::looks_like_key(s))
        .ok_or(AppError::Unauthorized)?;
    // A key-shaped token costs a lookup: an address that failed too often this minute is
    // refused before it.
    state.auth_failures.admit(peer, now)?;
    let Some(key) = identify(state, secret, now).await? else {
        if let Some(ip) = peer {
            state.auth_failures.failed(ip, now);
        }
        return Err(AppError::Unauthorized.into());
    };
    tracing::Span::current().record(
        "organization_id",
        tracing::field::display(key.organization_id),
    );

    let outcome = usage::count_or_skip(
        &state.redis,
        &state.unlimited_usage,
        key.id,
        key.daily_limit,
        chrono::Utc::now(),
    )
    .await;
    let ctx = envelope::context();
    match outcome {
        // Redis did not answer: served uncounted, `meta.apiKeyUsage` is null.
        usage::Admission::Uncounted => {}
        usage::Admission::Counted(u) => {
            if let Some(ctx) = &ctx {
                ctx.set_usage(u);
            }
        }
        usage::Admission::LimitReached { usage, retry_after } => {
            if let Some(ctx) = &ctx {
                ctx.set_usage(usage);
            }
            return Err(AppError::RateLimited {
                message: "the key's daily request limit is reached".to_owned(),
                retry_after,
            }
            .into());
        }
    }

    let needed = required_scope(req.method(), &route);
    if !auth::allows(&key.scopes, &needed) {
        return Err(AppError::Forbidden(format!("this key lacks the scope {needed}")).into());
    }

    req.extensions_mut().insert(Tenant {
        org_id: OrgId::from(key.organization_id),
        key_id: key.id,
        key_name: key.name,
        scopes: key.scopes,
    });
    Ok(req)
}

//! Bearer API keys: 401 for no, unknown or revoked keys; the daily counter and its 429; the
//! route's scope and its 403. Only then does a handler run, with the [`Tenant`] it serves.

use crate::error::{ApiError, AppError};
use crate::{envelope, usage};
use std::future::ready;

use axum::body::{Body, Bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use parley_db as db;
use parley_domain::api_keys::KeyIdentity;
use parley_domain::auth;

use crate::extract::{Tenant, TicketToken};
use crate::scopes::required_scope;
use crate::scopes::{TICKET_SLA_ROUTE, TICKET_TOKEN_HEADER};
use crate::serve::Peer;
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
    let key = db::api_keys::identify_hash(&state.pool, &hash).await?;
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

/// The lane of the requests that carry a ticket's access token instead of a key.
const TICKET_TOKEN_LANE: uuid::Uuid = uuid::Uuid::nil();

pub async fn authenticate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let req = match admit(&state, req).await {
        Ok(req) => req,
        Err(err) => return err.into_response(),
    };
    // The organization's turn, held until the answer: its requests past its share wait in its
    // own queue (`org_permits::OrgTurns`). Requests with a ticket's access token instead of a
    // key (no organization known before the handler's lookup) share one lane of their own.
    // A body is read first, so that a client sending it slowly does so outside the turn.
    let req = body_first(req, state.config.max_body_bytes).await;
    let lane = req
        .extensions()
        .get::<Tenant>()
        .map_or(TICKET_TOKEN_LANE, |t| t.org_id);
    let _turn = match state.turns.take(lane).await {
        Ok(turn) => turn,
        Err(err) => return ApiError(err).into_response(),
    };
    next.run(req).await
}

/// The request with its body read into memory when it is at most `limit` bytes (every body
/// but an upload's or a long audience's). A longer one is handed on as it comes, its first
/// bytes read: its handler reads the rest, inside the turn. An error while reading is handed
/// on too, for the handler's extractor to answer as it would have.
async fn body_first(req: Request, limit: usize) -> Request {
    let (parts, body) = req.into_parts();
    let mut stream = body.into_data_stream();
    let mut read = Vec::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(chunk) => {
                read.extend_from_slice(&chunk);
                if read.len() > limit {
                    let first = futures::stream::once(ready(Ok(Bytes::from(read))));
                    return Request::from_parts(parts, Body::from_stream(first.chain(stream)));
                }
            }
            Err(err) => {
                let first = futures::stream::iter([Ok(Bytes::from(read)), Err(err)]);
                return Request::from_parts(parts, Body::from_stream(first));
            }
        }
    }
    Request::from_parts(parts, Body::from(read))
}

async fn admit(state: &AppState, mut req: Request) -> Result<Request, ApiError> {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let peer = req.extensions().get::<Peer>().map(|p| p.0);
    let now = std::time::Instant::now();
    // A ticket's SLA may be read with the ticket's own access token instead of a key; the
    // handler checks it (a lookup: an address that failed too often this minute is refused
    // before it, and the handler counts a wrong token as a failure).
    if route == TICKET_SLA_ROUTE
        && bearer(&req).is_none()
        && let Some(token) = req
            .headers()
            .get(TICKET_TOKEN_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    {
        state.auth_failures.admit(peer, now)?;
        req.extensions_mut().insert(TicketToken {
            secret: token,
            peer,
        });
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
        org_id: key.organization_id,
        key_id: key.id,
        key_name: key.name,
        scopes: key.scopes,
    });
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use futures::channel::mpsc;

    type Chunks = mpsc::UnboundedSender<Result<Bytes, std::io::Error>>;

    fn request() -> (Chunks, Request) {
        let (tx, rx) = mpsc::unbounded();
        let req = Request::builder()
            .uri("/")
            .body(Body::from_stream(rx))
            .unwrap();
        (tx, req)
    }

    #[tokio::test]
    async fn a_body_within_the_limit_is_read_before_the_request_goes_on() {
        let (tx, req) = request();
        let mut first = Box::pin(body_first(req, 100));
        tx.unbounded_send(Ok(Bytes::from_static(b"hello ")))
            .unwrap();
        assert!((&mut first).now_or_never().is_none(), "not before its end");
        tx.unbounded_send(Ok(Bytes::from_static(b"world"))).unwrap();
        drop(tx);
        let req = first.await;
        let body = axum::body::to_bytes(req.into_body(), usize::MAX).await;
        assert_eq!(body.unwrap(), "hello world");
    }

    #[tokio::test]
    async fn a_longer_body_goes_on_as_it_comes_and_an_error_is_handed_on() {
        let (tx, req) = request();
        tx.unbounded_send(Ok(Bytes::from_static(b"hello"))).unwrap();
        // Past 4 bytes the request goes on before the body's end.
        let req = body_first(req, 4).now_or_never().expect("on at once");
        tx.unbounded_send(Ok(Bytes::from_static(b" world")))
            .unwrap();
        drop(tx);
        let body = axum::body::to_bytes(req.into_body(), usize::MAX).await;
        assert_eq!(body.unwrap(), "hello world");

        let (tx, req) = request();
        tx.unbounded_send(Ok(Bytes::from_static(b"ab"))).unwrap();
        tx.unbounded_send(Err(std::io::Error::other("cut")))
            .unwrap();
        let req = body_first(req, 100).await;
        assert!(
            axum::body::to_bytes(req.into_body(), usize::MAX)
                .await
                .is_err()
        );
    }
}

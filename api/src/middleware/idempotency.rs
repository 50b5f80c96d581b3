//! `Idempotency-Key` on every `POST` that takes an API key: the first request with a key runs
//! and its answer (status and body) is kept for 24 hours; the same request again with the
//! same key gets that answer, byte for byte, without running again, even while the first is
//! still running (it waits for it). The same key with another request (method, path, query or
//! body) is 422 `idempotency_key_reused`. Keys are per organization.
//!
//! A key whose request reached the handler is never given to a second execution (as Stripe
//! keeps keys): the handler's answer is kept, whatever it is. A 2xx, 3xx or 4xx is given
//! again; a 5xx (the handler may have written before it failed) and a request that never
//! answered (its client went away or it timed out, so the handler was dropped; it panicked;
//! its process died; or its answer could not be stored) leave a repeat 409
//! `idempotency_outcome_unknown`, once the request cannot still be running or committing, for
//! the rest of the key's 24 hours. The client checks what the first request did and, if it did
//! nothing, retries under a new key.
//!
//! An answer that shows a secret once (a new API key, a webhook's signing secret, a presigned
//! upload URL) is kept without it, and a repeat is 409 `idempotency_replay_secret` naming
//! what the first request made (`error.details.id`): the secret is never stored, and an
//! answer without it would not be the answer the operation documents.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use parley_usecases::idempotency::{self, Claim};
use sha2::{Digest, Sha256};

use std::sync::Arc;

use crate::body_spool::{Handed, Spool};
use crate::error::{ApiError, AppError};
use crate::extract::Tenant;
use crate::extract::is_json_type;
use crate::state::AppState;
use parking_lot::Mutex;

pub const HEADER: &str = "idempotency-key";
/// Set on an answer given again.
pub const REPLAYED: &str = "idempotent-replayed";
pub const MAX_KEY_LEN: usize = 255;
/// How long a request waits for another with its key to answer before 409.
const WAIT_FOR: Duration = Duration::from_secs(10);
/// The first look again at a running key; each next one waits twice as long, up to the cap.
const POLL_FIRST: Duration = Duration::from_millis(25);
const POLL_CAP: Duration = Duration::from_millis(500);
/// Routes whose answer shows a secret once (an API key, a webhook's signing secret, an upload
/// URL, which is a credential while it lives): the answer kept leaves it out (`key`, `secret`,
/// `uploadUrl`, in `data` or, for the presigned upload's bare answer, at the top), and a
/// repeat is refused with the id of what was made.
pub const SECRET_ROUTES: &[&str] = &[
    "/api/v1/api-keys",
    "/api/v1/webhooks",
    "/api/v1/webhooks/{id}/rotate-secret",
    "/api/v1/files/presigned-upload",
];
/// The fields of [`SECRET_ROUTES`]' answers that hold the secret.
const SECRET_FIELDS: &[&str] = &["key", "secret", "uploadUrl"];
/// Answers longer than this are not kept (the key stays without an answer: a repeat gets
/// `idempotency_outcome_unknown`).
const MAX_KEPT_BODY: usize = 1 << 20;
/// The route whose bodies may be as long as `PARLEY_MAX_BROADCAST_BODY_BYTES`.
const LONG_BODY_ROUTE: &str = "/api/v1/broadcasts";

pub async fn idempotency(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if req.method() != Method::POST || !req.headers().contains_key(HEADER) {
        return next.run(req).await;
    }
    let Some(tenant) = req.extensions().get::<Tenant>().cloned() else {
        return next.run(req).await;
    };
    match run(&state, &tenant, req, next).await {
        Ok(response) => response,
        Err(err) => err.into_response(),
    }
}

/// A key as sent: 1 to 255 visible ASCII characters.
fn parse_key(value: &HeaderValue) -> Result<String, ApiError> {
    value
        .to_str()
        .ok()
        .filter(|k| (1..=MAX_KEY_LEN).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .ok_or_else(|| {
            ApiError(AppError::validation(
                "Idempotency-Key",
                "invalid",
                format!("must be 1 to {MAX_KEY_LEN} visible ASCII characters"),
            ))
        })
}

async fn run(
    state: &AppState,
    tenant: &Tenant,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let key = parse_key(&req.headers()[HEADER])?;
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let content_type = crate::extract::content_type(req.headers());
    let (mut parts, body) = req.into_parts();
    let mut hash = Sha256::new();
    hash.update(parts.method.as_str());
    hash.update(" ");
    hash.update(parts.uri.path_and_query().map_or("", |p| p.as_str()));
    hash.update("\n");
    // An import's body is read as its type says (the same bytes as CSV or as NDJSON are two
    // requests).
    if route == crate::routes::imports::PATH {
        hash.update(&content_type);
        hash.update("\n");
    }
    let body = if route == crate::routes::imports::PATH && !is_json_type(&content_type) {
        // An import's file is read once, as its handler reads it (to disk past the body
        // limit), hashed on the way, and handed to the handler.
        let hasher = Arc::new(Mutex::new(hash));
        let hashing = hasher.clone();
        let sent = crate::routes::imports::read_sent(
            state,
            tenant.org_id.uuid(),
            &content_type,
            body,
            move |chunk| hashing.lock().update(chunk),
        )
        .await?;
        parts.extensions.insert(Handed::new(sent));
        hash = hasher.lock().clone();
        Body::empty()
    } else {
        let max = if route == LONG_BODY_ROUTE {
            state.config.max_broadcast_body_bytes
        } else {
            state.config.max_body_bytes
        };
        Body::from(Spool::read_in_memory(body, max, |chunk| hash.update(chunk)).await?)
    };
    let hash = hash.finalize().to_vec();

    // A request cut off may still have a statement running in Postgres, which may commit up
    // to its statement timeout later (the API's connections have the request timeout as
    // theirs; docs/operations.md, PgBouncer): only then is its outcome settled.
    let abandoned_after = state.config.http.request_timeout * 2 + Duration::from_secs(5);
    let waited = tokio::time::Instant::now();
    let mut poll = POLL_FIRST;
    let token = loop {
        match idempotency::claim(
            state.use_cases(),
            tenant.org_id,
            &key,
            &hash,
            abandoned_after,
        )
        .await?
        {
            Claim::Taken { token } => break token,
            Claim::Answered {
                same_request: false,
                ..
            }
            | Claim::Running {
                same_request: false,
                ..
            } => return Err(ApiError(AppError::IdempotencyKeyReused)),
            Claim::Running {
                abandoned: true, ..
            } => return Err(ApiError(AppError::IdempotencyOutcomeUnknown)),
            // A 5xx the handler gave: it may have written before it failed, and its answer
            // ("retry shortly") would send the client round again under the same key.
            Claim::Answered { status, .. } if status >= 500 => {
                return Err(ApiError(AppError::IdempotencyOutcomeUnknown));
            }
            Claim::Answered { status, body, .. } => {
                if SECRET_ROUTES.contains(&route.as_str()) && (200..300).contains(&status) {
                    return Err(ApiError(AppError::IdempotencyReplaySecret {
                        created: created_id(&body),
                    }));
                }
                return Ok(replay(status, body));
            }
            Claim::Running { .. } if waited.elapsed() < WAIT_FOR => {
                tokio::time::sleep(poll).await;
                poll = (poll * 2).min(POLL_CAP);
            }
            Claim::Running { .. } => {
                return Err(ApiError(AppError::IdempotencyKeyInUse));
            }
        }
    };

    // Dropped here (a timeout, a client gone), the request leaves its key running: a repeat
    // gets `idempotency_outcome_unknown` once it cannot still be running.
    let response = next.run(Request::from_parts(parts, body)).await;
    let status = response.status();
    let (parts, body) = response.into_parts();
    // The handlers' answers are in memory already: reading one costs nothing more.
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .unwrap_or_default();
    // Every answer is kept, a 5xx too: the handler ran, and may have written before it
    // failed. One too long to keep leaves the key running (its outcome unknown to a repeat).
    if body.len() <= MAX_KEPT_BODY {
        let kept = if SECRET_ROUTES.contains(&route.as_str()) {
            without_secrets(&body)
        } else {
            body.to_vec()
        };
        let stored = idempotency::complete(
            state.use_cases(),
            tenant.org_id,
            &key,
            token,
            status.as_u16(),
            &kept,
        )
        .await;
        if let Err(err) = stored {
            // The answer stands; a repeat gets `idempotency_outcome_unknown`.
            tracing::warn!(%err, "idempotency key not completed");
        }
    }
    Ok(Response::from_parts(parts, Body::from(body)))
}

/// The answer without the secret it shows once.
fn without_secrets(body: &[u8]) -> Vec<u8> {
    let Ok(mut json) = serde_json::from_slice::<serde_json::Value>(body) else {
        return b"{}".to_vec();
    };
    let strip = |fields: Option<&mut serde_json::Value>| {
        if let Some(fields) = fields.and_then(|d| d.as_object_mut()) {
            for field in SECRET_FIELDS {
                fields.remove(*field);
            }
        }
    };
    strip(json.get_mut("data"));
    strip(Some(&mut json));
    serde_json::to_vec(&json).unwrap_or_default()
}

/// The id of what an answer kept made: `data.id`, or the bare answer's `fileId`.
fn created_id(body: &[u8]) -> Option<String> {
    let json = serde_json::from_slice::<serde_json::Value>(body).ok()?;
    let id = json
        .get("data")
        .and_then(|d| d.get("id"))
        .or_else(|| json.get("fileId"))?;
    id.as_str().map(str::to_owned)
}

fn replay(status: u16, body: Vec<u8>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

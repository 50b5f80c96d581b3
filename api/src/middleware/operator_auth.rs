//! The operator API's credential (`/admin/v1`): `PARLEY_ADMIN_TOKEN`, or an operator key made
//! by `parley-api admin key create`. A tenant's API key is never one: 401. Only a token of an
//! operator key's shape is looked up; every token that opens nothing (a guess at the admin
//! token included) counts toward the client address's limit on failed authentications, as a
//! tenant key's does, so the token cannot be guessed at speed. The handler gets the
//! [`Operator`] whose name the audit log records.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use parley_domain::auth;
use secrecy::ExposeSecret;

use crate::client_addr::ClientAddr;
use crate::error::{ApiError, AppError};
use crate::extract::Operator;
use crate::state::AppState;

/// Longest bearer token read: an operator key or token is at most 256 characters.
const MAX_TOKEN: usize = 256;

pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let token = bearer(&req);
    let peer = req.extensions().get::<ClientAddr>().map(|c| c.0);
    match identify(&state, token, peer).await {
        Ok(name) => {
            req.extensions_mut().insert(Operator(name));
            next.run(req).await
        }
        Err(err) => err.into_response(),
    }
}

/// The bearer token, if the request has one of a credible length.
fn bearer(req: &Request) -> Option<String> {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim())
        .filter(|t| !t.is_empty() && t.len() <= MAX_TOKEN)
        .map(str::to_owned)
}

async fn identify(
    state: &AppState,
    token: Option<String>,
    peer: Option<std::net::IpAddr>,
) -> Result<String, ApiError> {
    let token = token.ok_or(AppError::Unauthorized)?;
    let token = token.as_str();
    let now = std::time::Instant::now();
    state.auth_failures.admit(peer, now)?;
    if let Some(admin) = &state.config.http.admin_token
        && auth::same_secret(admin.expose_secret(), token)
    {
        return Ok("token".to_owned());
    }
    // Only a token of an operator key's shape costs a lookup; any token that opens nothing
    // counts as a failure.
    if auth::looks_like_operator_key(token)
        && let Some(name) =
            parley_usecases::operator::operator_named(state.use_cases(), &auth::hash_key(token))
                .await?
    {
        return Ok(name);
    }
    if let Some(ip) = peer {
        state.auth_failures.failed(ip, now);
    }
    Err(AppError::Unauthorized.into())
}

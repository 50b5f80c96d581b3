//! `/api/v1/api-keys`: issue, list and revoke keys (scope `api-keys:manage`).

use crate::envelope::{Deleted, Envelope, ErrorEnvelope, ListEnvelope, Reply};
use crate::error::{AppError, AppResult};
use axum::extract::State;
use parley_domain::api_keys::{ApiKey, CreateApiKey, CreatedApiKey, NewApiKey};
use parley_domain::auth;
use parley_types::list::PageParams;
use parley_usecases::api_keys;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::extract::{Json, Paging, Path, Tenant};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(revoke))
}

/// Issue a key. The secret is in this response only. A key can grant only scopes it holds.
#[utoipa::path(post, path = "/api/v1/api-keys", tag = "api-keys",
    request_body = CreateApiKey,
    responses(
        (status = 201, description = "The key, with its secret `key`", body = Envelope<CreatedApiKey>),
        (status = 409, description = "The organization holds 1,000 active keys (`invalid_state`)", body = ErrorEnvelope),
    ))]
async fn create(
    State(state): State<AppState>,
    tenant: Tenant,
    Json(req): Json<CreateApiKey>,
) -> AppResult<Reply<CreatedApiKey>> {
    let new = NewApiKey::try_from(req)?;
    if let Some(beyond) = new.scopes.iter().find(|s| !auth::allows(&tenant.scopes, s)) {
        return Err(AppError::Forbidden(format!(
            "a key cannot grant the scope {beyond}, which it does not hold"
        ))
        .into());
    }
    let key = api_keys::create(state.use_cases(), &tenant.caller(), new).await?;
    Ok(Reply::created(key))
}

/// List the organization's keys, revoked ones included (never their secrets).
#[utoipa::path(get, path = "/api/v1/api-keys", tag = "api-keys",
    params(PageParams),
    responses((status = 200, description = "A page of keys", body = ListEnvelope<ApiKey>)))]
async fn list(
    State(state): State<AppState>,
    tenant: Tenant,
    Paging(page): Paging,
) -> AppResult<Reply<Vec<ApiKey>>> {
    Ok(Reply::page(
        api_keys::list(state.use_cases(), tenant.org_id, &page).await?,
    ))
}

/// Revoke a key: it gets 401 from the next request on.
#[utoipa::path(delete, path = "/api/v1/api-keys/{id}", tag = "api-keys",
    params(("id" = Uuid, Path, description = "API key id")),
    responses((status = 200, description = "The key is revoked", body = Envelope<Deleted>)))]
async fn revoke(
    State(state): State<AppState>,
    tenant: Tenant,
    Path(id): Path<Uuid>,
) -> AppResult<Reply<Deleted>> {
    let revoked = api_keys::revoke(state.use_cases(), &tenant.caller(), id).await?;
    // This process drops it now; the others when the notification reaches them.
    state.keys.revoke(revoked);
    Ok(Reply::deleted(revoked))
}

//! API keys as a resource: `/api/v1/api-keys` and the CLI.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::auth;
use parley_types::error::{AppError, FieldError};
use parley_types::fields::Name;
use parley_types::time::Timestamp;

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApiKey {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    /// The first characters of the key, to tell keys apart.
    pub prefix: String,
    pub scopes: Vec<String>,
    /// Requests allowed per UTC day; absent for no limit.
    #[sqlx(rename = "daily_limit")]
    pub limit: Option<i64>,
    pub revoked_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(ApiKey);

/// A new key: the only time `key` is shown.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreatedApiKey {
    #[serde(flatten)]
    pub api_key: ApiKey,
    /// The secret to send as `Authorization: Bearer <key>`. Not retrievable later.
    pub key: String,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"name": "CRM sync", "scopes": ["contacts:read", "contacts:write"], "limit": 10000})))]
pub struct CreateApiKey {
    pub name: Name,
    /// `<resource>:read`, `<resource>:write`, `webhooks:manage`, `api-keys:manage` or `*`.
    #[cfg_attr(feature = "openapi", schema(schema_with = scope_list))]
    pub scopes: Vec<String>,
    /// Requests allowed per UTC day.
    #[serde(default, deserialize_with = "daily_limit")]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, maximum = 1_000_000_000_000_i64)
    )]
    pub limit: Option<i64>,
}

/// Scopes one key may list (there are fewer scopes than this; repeats count).
const MAX_SCOPES: usize = 40;

#[cfg(feature = "openapi")]
/// The document's list of scopes: every one there is.
fn scope_list() -> utoipa::openapi::schema::Array {
    parley_types::fields::choice_list(auth::all_scopes(), MAX_SCOPES)
}

/// Requests per day: 1 to a trillion (past that, leave the key unlimited), or `null`.
fn daily_limit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    struct Limit(i64);
    impl<'de> serde::Deserialize<'de> for Limit {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            let v = parley_types::fields::whole(d)?;
            if !(1..=1_000_000_000_000).contains(&v) {
                return Err(parley_types::fields::invalid(
                    "out_of_range",
                    "must be between 1 and 1000000000000",
                ));
            }
            Ok(Limit(v))
        }
    }
    Ok(Option::<Limit>::deserialize(d)?.map(|l| l.0))
}

/// A key being made, whatever asked for it (the HTTP API or the CLI).
#[derive(Debug, Clone)]
pub struct NewApiKey {
    pub name: String,
    pub scopes: Vec<String>,
    pub limit: Option<i64>,
}

impl NewApiKey {
    pub fn parse(name: String, scopes: Vec<String>, limit: Option<i64>) -> Result<Self, AppError> {
        parley_types::fields::check_len("scopes", scopes.len(), MAX_SCOPES)?;
        let mut errors = Vec::new();
        if scopes.is_empty() {
            errors.push(FieldError::new(
                "scopes",
                "required",
                "at least one scope is required",
            ));
        }
        for (i, s) in scopes.iter().enumerate() {
            if !auth::is_valid_scope(s) {
                errors.push(FieldError::new(
                    format!("scopes[{i}]"),
                    "invalid_value",
                    format!("{s:?} is not a scope"),
                ));
            }
        }
        if limit.is_some_and(|l| l < 1) {
            errors.push(FieldError::new(
                "limit",
                "out_of_range",
                "must be 1 or more",
            ));
        }
        if !errors.is_empty() {
            return Err(AppError::Validation(errors));
        }
        let mut scopes = scopes;
        scopes.sort();
        scopes.dedup();
        Ok(NewApiKey {
            name,
            scopes,
            limit,
        })
    }
}

impl TryFrom<CreateApiKey> for NewApiKey {
    type Error = AppError;
    fn try_from(r: CreateApiKey) -> Result<Self, AppError> {
        NewApiKey::parse(r.name.into_inner(), r.scopes, r.limit)
    }
}

/// What authentication knows about the calling key.
#[derive(Debug, Clone)]
pub struct KeyIdentity {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub scopes: Vec<String>,
    pub daily_limit: Option<i64>,
}

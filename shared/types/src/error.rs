//! The one error type of the service's rules. Every failure a rule, a handler or an extractor
//! can meet becomes an [`AppError`]; the API turns it into the envelope with the status and
//! `error.code` of the error table in docs/api.md (`parley-api`'s `error` module), the database layer maps
//! Postgres errors onto it (`parley-db`'s `error` module).

use serde::Serialize;

pub type AppResult<T> = Result<T, AppError>;

/// Validation details one answer lists; a rule that finds more says how many more in one
/// last detail (see `db::refs::check_ids`), and anything longer is cut here.
pub const MAX_DETAILS: usize = 100;

/// One broken field rule, as listed in `error.details` of a 422.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FieldError {
    /// Path of the field in the request, e.g. `email` or `tagIds[1]`.
    pub field: String,
    /// Machine-readable rule name, e.g. `required`, `too_long`, `invalid_type`, `not_found`.
    pub code: String,
    pub message: String,
}

/// The longest field path or message a detail shows: both may quote what was sent.
const MAX_DETAIL_CHARS: usize = 200;

impl FieldError {
    /// The detail as answered: its field and message cut to [`MAX_DETAIL_CHARS`].
    pub fn bounded(&self) -> FieldError {
        let cut = |s: &str| {
            if s.chars().count() <= MAX_DETAIL_CHARS {
                s.to_owned()
            } else {
                let mut out: String = s.chars().take(MAX_DETAIL_CHARS).collect();
                out.push('…');
                out
            }
        };
        FieldError {
            field: cut(&self.field),
            code: self.code.clone(),
            message: cut(&self.message),
        }
    }

    pub fn new(field: impl Into<String>, code: &str, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("the request body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("missing, unknown or revoked API key")]
    Unauthorized,
    #[error("{0}")]
    Forbidden(String),
    #[error("not found")]
    NotFound,
    #[error("no route matches this path")]
    RouteNotFound,
    #[error("this method is not allowed on this path")]
    MethodNotAllowed,
    #[error("{0}")]
    InvalidState(String),
    #[error("{message}")]
    Conflict {
        field: Option<String>,
        message: String,
    },
    #[error("the request body is larger than this route accepts")]
    PayloadTooLarge,
    /// A body that stopped coming, or came slower than the API's minimum rate: 408, and the
    /// connection is closed.
    #[error("{0}")]
    BodyTooSlow(String),
    #[error("requests with a body must have Content-Type: application/json")]
    UnsupportedMediaType,
    #[error("the request has invalid fields")]
    Validation(Vec<FieldError>),
    #[error("{message}")]
    RateLimited { message: String, retry_after: u64 },
    #[error("this Idempotency-Key was used with another request (method, path or body)")]
    IdempotencyKeyReused,
    #[error("a request with this Idempotency-Key is still running; retry shortly")]
    IdempotencyKeyInUse,
    /// A repeat of a request whose answer showed a secret once (a new API key, a webhook's
    /// signing secret, an upload URL): the secret is not kept, so the answer is not given
    /// again; `created` names what the first request made.
    #[error(
        "the first request with this Idempotency-Key succeeded and showed a secret, which is not kept: read what it made instead"
    )]
    IdempotencyReplaySecret { created: Option<String> },
    /// A repeat of a request that took its key and never answered (its client went away, its
    /// process died, or its answer could not be stored): it may have done what it does, so it
    /// is not run again under that key.
    #[error(
        "the first request with this Idempotency-Key did not answer, and may have done what it does: check, then retry under a new key if it did not"
    )]
    IdempotencyOutcomeUnknown,
    #[error("object storage is not configured")]
    StorageUnavailable,
    #[error("a dependency is unavailable: {0}")]
    ServiceUnavailable(String),
    /// The service itself is busy (a request timed out, or too many are in flight): 503
    /// `service_unavailable` with `Retry-After`, the message as given.
    #[error("{0}")]
    Overloaded(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl AppError {
    pub fn validation(field: impl Into<String>, code: &str, message: impl Into<String>) -> Self {
        AppError::Validation(vec![FieldError::new(field, code, message)])
    }

    pub fn conflict(field: &str, message: impl Into<String>) -> Self {
        AppError::Conflict {
            field: Some(field.to_owned()),
            message: message.into(),
        }
    }

    pub fn invalid_state(message: impl Into<String>) -> Self {
        AppError::InvalidState(message.into())
    }

    /// The same error with its fields named under `prefix` (`message.` + `content`), for a
    /// body nested in another.
    pub fn under(self, prefix: &str) -> Self {
        match self {
            AppError::Validation(errors) => AppError::Validation(
                errors
                    .into_iter()
                    .map(|mut e| {
                        e.field = format!("{prefix}{}", e.field);
                        e
                    })
                    .collect(),
            ),
            other => other,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            AppError::InvalidJson(_) => "invalid_json",
            AppError::Unauthorized => "unauthorized",
            AppError::Forbidden(_) => "forbidden",
            AppError::NotFound => "not_found",
            AppError::RouteNotFound => "route_not_found",
            AppError::MethodNotAllowed => "method_not_allowed",
            AppError::InvalidState(_) => "invalid_state",
            AppError::Conflict { .. } => "conflict",
            AppError::PayloadTooLarge => "payload_too_large",
            AppError::BodyTooSlow(_) => "request_timeout",
            AppError::UnsupportedMediaType => "unsupported_media_type",
            AppError::Validation(_) => "validation_error",
            AppError::RateLimited { .. } => "rate_limited",
            AppError::IdempotencyKeyReused => "idempotency_key_reused",
            AppError::IdempotencyKeyInUse => "idempotency_key_in_use",
            AppError::IdempotencyReplaySecret { .. } => "idempotency_replay_secret",
            AppError::IdempotencyOutcomeUnknown => "idempotency_outcome_unknown",
            AppError::StorageUnavailable => "storage_unavailable",
            AppError::ServiceUnavailable(_) | AppError::Overloaded(_) => "service_unavailable",
            AppError::Internal(_) => "internal_error",
        }
    }
}

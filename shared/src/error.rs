//! The one error type of the service. Every failure a handler, extractor or middleware can meet
//! becomes an [`AppError`], and every `AppError` becomes the envelope with the status and
//! `error.code` of CONTRACT.md's table.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::envelope::{self, ErrorBody};

pub type AppResult<T> = Result<T, AppError>;

/// Validation details one answer lists; a rule that finds more says how many more in one
/// last detail (see `db::refs::check_ids`), and anything longer is cut here.
pub const MAX_DETAILS: usize = 100;

/// One broken field rule, as listed in `error.details` of a 422.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
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
    fn bounded(&self) -> FieldError {
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
    #[error("requests with a body must have Content-Type: application/json")]
    UnsupportedMediaType,
    #[error("the request has invalid fields")]
    Validation(Vec<FieldError>),
    #[error("{message}")]
    RateLimited { message: String, retry_after: u64 },
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

    pub fn status(&self) -> StatusCode {
        match self {
            AppError::InvalidJson(_) => StatusCode::BAD_REQUEST,
            AppError::Unauthorized => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound | AppError::RouteNotFound => StatusCode::NOT_FOUND,
            AppError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            AppError::InvalidState(_) | AppError::Conflict { .. } => StatusCode::CONFLICT,
            AppError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            AppError::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            AppError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            AppError::StorageUnavailable
            | AppError::ServiceUnavailable(_)
            | AppError::Overloaded(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
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
            AppError::UnsupportedMediaType => "unsupported_media_type",
            AppError::Validation(_) => "validation_error",
            AppError::RateLimited { .. } => "rate_limited",
            AppError::StorageUnavailable => "storage_unavailable",
            AppError::ServiceUnavailable(_) | AppError::Overloaded(_) => "service_unavailable",
            AppError::Internal(_) => "internal_error",
        }
    }

    fn body(&self) -> ErrorBody {
        let details = match self {
            AppError::Validation(errors) => serde_json::to_value(
                errors
                    .iter()
                    .take(MAX_DETAILS + 1)
                    .map(FieldError::bounded)
                    .collect::<Vec<_>>(),
            )
            .ok(),
            AppError::Conflict {
                field: Some(field), ..
            } => Some(serde_json::json!([{ "field": field, "code": "taken" }])),
            _ => None,
        };
        let message = match self {
            // Internals stay in the log; the client gets the request id to quote.
            AppError::Internal(_) => match envelope::request_id() {
                Some(id) => format!("internal error; quote request id {id} when reporting it"),
                None => "internal error".to_owned(),
            },
            AppError::ServiceUnavailable(_) => {
                "a dependency of the service is unavailable; retry shortly".to_owned()
            }
            other => other.to_string(),
        };
        ErrorBody {
            code: self.code().to_owned(),
            message,
            details,
        }
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        match &self {
            AppError::Internal(err) => tracing::error!(error = ?err, "internal error"),
            AppError::ServiceUnavailable(cause) => {
                tracing::warn!(%cause, "dependency unavailable")
            }
            _ => {}
        }
        let status = self.status();
        let mut response = envelope::error_response(status, self.body());
        match self {
            AppError::RateLimited { retry_after, .. } => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
            }
            AppError::Unauthorized => {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            AppError::ServiceUnavailable(_) | AppError::Overloaded(_) => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
            }
            _ => {}
        }
        response
    }
}

/// Which field a unique index or foreign key stands for, so a clash names the field.
const CONSTRAINT_FIELDS: &[(&str, &str)] = &[
    ("contacts_email_key", "email"),
    ("users_email_key", "email"),
    ("tags_name_key", "name"),
    ("companies_name_key", "name"),
    ("teams_name_key", "name"),
    ("faq_collections_slug_key", "slug"),
    ("faq_categories_name_key", "name"),
    ("faqs_slug_key", "slug"),
    ("conversation_categories_slug_key", "slug"),
    ("message_attributes_key_key", "key"),
    ("contacts_company_fkey", "companyId"),
    ("contact_tags_tag_fkey", "tagIds"),
    ("lead_tags_tag_fkey", "tagIds"),
    ("leads_assignee_fkey", "assigneeId"),
    ("teams_created_by_fkey", "createdBy"),
    ("team_members_user_fkey", "userIds"),
    ("faqs_category_fkey", "categoryId"),
];

/// Foreign keys that refuse to delete a record still in use: a 409, not a 422.
const IN_USE: &[(&str, &str)] = &[(
    "broadcasts_template_fkey",
    "the template is used by broadcasts",
)];

fn constraint_field(constraint: Option<&str>) -> Option<&'static str> {
    let constraint = constraint?;
    CONSTRAINT_FIELDS
        .iter()
        .find(|(name, _)| *name == constraint)
        .map(|(_, field)| *field)
}

impl From<sqlx::Error> for AppError {
    fn from(err: sqlx::Error) -> Self {
        match &err {
            sqlx::Error::RowNotFound => AppError::NotFound,
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed => AppError::ServiceUnavailable(err.to_string()),
            sqlx::Error::Database(db) => {
                let field = constraint_field(db.constraint());
                match db.code().as_deref() {
                    // unique_violation
                    Some("23505") => AppError::Conflict {
                        field: field.map(str::to_owned),
                        message: match field {
                            Some(f) => format!("another record already has this {f}"),
                            None => "the record clashes with an existing one".to_owned(),
                        },
                    },
                    Some("23503")
                        if let Some((_, why)) =
                            IN_USE.iter().find(|(c, _)| Some(*c) == db.constraint()) =>
                    {
                        AppError::Conflict {
                            field: None,
                            message: (*why).to_owned(),
                        }
                    }
                    // foreign_key_violation: an id that is not in the organization
                    Some("23503") => AppError::validation(
                        field.unwrap_or("id"),
                        "not_found",
                        "refers to a record that does not exist in this organization",
                    ),
                    Some(code) if is_transient(code) => {
                        AppError::ServiceUnavailable(err.to_string())
                    }
                    // A value Postgres cannot hold reached it unchecked (too long, out of
                    // range, NUL). Every input is checked before; should one slip through,
                    // the client still gets a 4xx and the log an error to fix. Other data
                    // errors are the service's own: 500.
                    Some("22001" | "22003" | "22007" | "22008" | "22021" | "22P05") => {
                        tracing::error!(error = %err, "a value reached Postgres unchecked");
                        AppError::validation(
                            "body",
                            "invalid_value",
                            "a value does not fit where it is stored",
                        )
                    }
                    _ => AppError::Internal(err.into()),
                }
            }
            _ => AppError::Internal(err.into()),
        }
    }
}

/// Postgres errors that pass: the same request may succeed when retried.
fn is_transient(code: &str) -> bool {
    matches!(
        code,
        // serialization_failure, deadlock_detected, read_only_sql_transaction (a replica, or
        // a primary being demoted), lock_not_available (lock timeout), query_canceled
        // (statement timeout)
        "40001" | "40P01" | "25006" | "55P03" | "57014"
        // admin_shutdown, crash_shutdown, cannot_connect_now
        | "57P01" | "57P02" | "57P03"
    )
        // connection_exception, insufficient_resources (too many connections, out of memory,
        // disk full)
        || code.starts_with("08")
        || code.starts_with("53")
}

/// Seconds a client is asked to wait after a 503.
pub const RETRY_AFTER_SECS: u64 = 1;

impl From<redis::RedisError> for AppError {
    fn from(err: redis::RedisError) -> Self {
        if err.is_io_error()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_timeout()
        {
            AppError::ServiceUnavailable(err.to_string())
        } else {
            AppError::Internal(err.into())
        }
    }
}

/// The store is down or refused us: a dependency failure, logged with its cause, 503.
impl From<crate::storage::StorageError> for AppError {
    fn from(err: crate::storage::StorageError) -> Self {
        AppError::ServiceUnavailable(err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(response: Response) -> serde_json::Value {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn an_internal_error_is_a_500_that_hides_its_cause() {
        let response =
            AppError::Internal(anyhow::anyhow!("password=hunter2 leaked")).into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = body_of(response).await;
        assert_eq!(body["success"], false);
        assert_eq!(body["error"]["code"], "internal_error");
        assert!(!body.to_string().contains("hunter2"));
    }

    #[tokio::test]
    async fn a_rate_limit_carries_retry_after() {
        let response = AppError::RateLimited {
            message: "daily limit reached".into(),
            retry_after: 42,
        }
        .into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "42");
        assert_eq!(body_of(response).await["error"]["code"], "rate_limited");
    }

    #[test]
    fn retryable_postgres_errors_are_transient() {
        for code in [
            "40001", "40P01", "25006", "57014", "57P01", "08006", "53300",
        ] {
            assert!(is_transient(code), "{code}");
        }
        for code in ["23505", "22021", "42P01", "XX000"] {
            assert!(!is_transient(code), "{code}");
        }
    }

    #[tokio::test]
    async fn a_503_asks_to_retry() {
        let response = AppError::ServiceUnavailable("pool timed out".into()).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        let body = body_of(response).await;
        assert_eq!(body["error"]["code"], "service_unavailable");
        assert!(
            !body.to_string().contains("pool"),
            "the cause stays in the log"
        );
    }

    #[test]
    fn every_constraint_maps_to_a_field() {
        assert_eq!(constraint_field(Some("contacts_email_key")), Some("email"));
        assert_eq!(constraint_field(Some("unknown")), None);
    }
}

//! Errors as HTTP answers: every [`AppError`] becomes the envelope with the status and
//! `error.code` of the error table in docs/api.md; Postgres, Redis and object-storage errors become
//! `AppError`s first. Handlers return [`AppResult`], so `?` does the conversions.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
pub use parley_types::error::AppError;
use parley_types::error::{FieldError, MAX_DETAILS};

use crate::envelope::{self, ErrorBody};

/// An [`AppError`] on its way to the client.
#[derive(Debug)]
pub struct ApiError(pub AppError);

pub type AppResult<T> = Result<T, ApiError>;

/// Seconds a client is asked to wait after a 503.
pub const RETRY_AFTER_SECS: u64 = 1;

impl From<AppError> for ApiError {
    fn from(err: AppError) -> Self {
        ApiError(err)
    }
}

impl From<parley_usecases::Error> for ApiError {
    fn from(err: parley_usecases::Error) -> Self {
        ApiError(err.0)
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(err: sqlx::Error) -> Self {
        ApiError(parley_usecases::postgres::app_error(err))
    }
}

impl From<redis::RedisError> for ApiError {
    fn from(err: redis::RedisError) -> Self {
        if err.is_io_error()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_timeout()
        {
            ApiError(AppError::ServiceUnavailable(err.to_string()))
        } else {
            ApiError(AppError::Internal(err.into()))
        }
    }
}

/// The store is down or refused us: a dependency failure, logged with its cause, 503.
impl From<parley_storage::StorageError> for ApiError {
    fn from(err: parley_storage::StorageError) -> Self {
        ApiError(AppError::ServiceUnavailable(err.to_string()))
    }
}

impl ApiError {
    fn status(&self) -> StatusCode {
        match &self.0 {
            AppError::InvalidJson(_) => StatusCode::BAD_REQUEST,
            AppError::Unauthorized => StatusCode::UNAUTHORIZED,
            AppError::Forbidden(_) => StatusCode::FORBIDDEN,
            AppError::NotFound | AppError::RouteNotFound => StatusCode::NOT_FOUND,
            AppError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            AppError::InvalidState(_)
            | AppError::Conflict { .. }
            | AppError::IdempotencyKeyInUse
            | AppError::IdempotencyReplaySecret { .. }
            | AppError::IdempotencyOutcomeUnknown => StatusCode::CONFLICT,
            AppError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            AppError::BodyTooSlow(_) => StatusCode::REQUEST_TIMEOUT,
            AppError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            AppError::Validation(_) | AppError::IdempotencyKeyReused => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            AppError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            AppError::StorageUnavailable
            | AppError::ServiceUnavailable(_)
            | AppError::Overloaded(_) => StatusCode::SERVICE_UNAVAILABLE,
            AppError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn body(&self) -> ErrorBody {
        let details = match &self.0 {
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
            AppError::IdempotencyReplaySecret { created: Some(id) } => {
                Some(serde_json::json!({ "id": id }))
            }
            _ => None,
        };
        let message = match &self.0 {
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
            code: self.0.code().to_owned(),
            message,
            details,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match &self.0 {
            AppError::Internal(err) => tracing::error!(error = ?err, "internal error"),
            AppError::ServiceUnavailable(cause) => {
                tracing::warn!(%cause, "dependency unavailable")
            }
            _ => {}
        }
        let status = self.status();
        let mut response = envelope::error_response(status, self.body());
        match self.0 {
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
            AppError::ServiceUnavailable(_)
            | AppError::Overloaded(_)
            | AppError::IdempotencyKeyInUse => {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
            }
            // The rest of the body may still come: where it ends is unknown.
            AppError::BodyTooSlow(_) => {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        response
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
        let response = ApiError(AppError::Internal(anyhow::anyhow!(
            "password=hunter2 leaked"
        )))
        .into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = body_of(response).await;
        assert_eq!(body["success"], false);
        assert_eq!(body["error"]["code"], "internal_error");
        assert!(!body.to_string().contains("hunter2"));
    }

    #[tokio::test]
    async fn a_rate_limit_carries_retry_after() {
        let response = ApiError(AppError::RateLimited {
            message: "daily limit reached".into(),
            retry_after: 42,
        })
        .into_response();
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()[header::RETRY_AFTER], "42");
        assert_eq!(body_of(response).await["error"]["code"], "rate_limited");
    }

    #[tokio::test]
    async fn a_503_asks_to_retry() {
        let response =
            ApiError(AppError::ServiceUnavailable("pool timed out".into())).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        let body = body_of(response).await;
        assert_eq!(body["error"]["code"], "service_unavailable");
        assert!(
            !body.to_string().contains("pool"),
            "the cause stays in the log"
        );
    }
}

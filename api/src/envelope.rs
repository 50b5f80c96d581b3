//! The specification's response envelope (docs/api.md, Envelope and errors) `{success, data, message, error, meta}` and the request-scoped
//! context (request id, the key's daily usage) that every response reports in it.

use std::sync::{Arc, OnceLock};

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use parley_types::list::PageMeta;

/// `meta.apiKeyUsage`: requests made by the calling key in the current UTC day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
pub struct ApiKeyUsage {
    pub used: i64,
    /// The key's daily limit; `null` when `unlimited`.
    pub limit: Option<i64>,
    pub unlimited: bool,
}

/// `meta` of a response that is not a list.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// `null` on 401 and on routes without an API key.
    pub api_key_usage: Option<ApiKeyUsage>,
}

/// `meta` of a list: the key's usage and the page.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    pub api_key_usage: Option<ApiKeyUsage>,
    #[serde(flatten)]
    pub page: PageMeta,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    /// Stable machine-readable code from the contract's error table.
    pub code: String,
    pub message: String,
    /// For `validation_error`: a list of `{field, code, message}`.
    pub details: Option<serde_json::Value>,
}

/// The envelope of a successful response.
#[derive(Debug, Serialize, ToSchema)]
pub struct Envelope<T> {
    /// Always `true` here.
    pub success: bool,
    pub data: T,
    pub message: String,
    /// Always `null` here.
    #[schema(value_type = Option<ErrorBody>)]
    pub error: Option<ErrorBody>,
    pub meta: Meta,
}

/// The envelope of a page of a list.
#[derive(Debug, Serialize, ToSchema)]
pub struct ListEnvelope<T> {
    /// Always `true` here.
    pub success: bool,
    pub data: Vec<T>,
    pub message: String,
    /// Always `null` here.
    #[schema(value_type = Option<ErrorBody>)]
    pub error: Option<ErrorBody>,
    pub meta: ListMeta,
}

/// The envelope of an error response.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorEnvelope {
    /// Always `false`.
    pub success: bool,
    /// Always `null`.
    #[schema(value_type = Option<Object>)]
    pub data: Option<()>,
    pub message: String,
    pub error: ErrorBody,
    pub meta: Meta,
}

/// What a request knows about itself, readable by any response built while it runs.
#[derive(Debug, Default)]
pub struct RequestContext {
    pub request_id: String,
    usage: OnceLock<ApiKeyUsage>,
}

impl RequestContext {
    pub fn new(request_id: String) -> Arc<Self> {
        Arc::new(RequestContext {
            request_id,
            usage: OnceLock::new(),
        })
    }

    pub fn set_usage(&self, usage: ApiKeyUsage) {
        let _ = self.usage.set(usage);
    }
}

tokio::task_local! {
    static CONTEXT: Arc<RequestContext>;
}

/// Runs `fut` (the rest of the request) with `ctx` as its request context.
pub async fn scope<F: Future>(ctx: Arc<RequestContext>, fut: F) -> F::Output {
    CONTEXT.scope(ctx, fut).await
}

pub fn context() -> Option<Arc<RequestContext>> {
    CONTEXT.try_with(Arc::clone).ok()
}

pub fn request_id() -> Option<String> {
    context().map(|c| c.request_id.clone())
}

fn usage() -> Option<ApiKeyUsage> {
    context().and_then(|c| c.usage.get().copied())
}

fn json_response<T: Serialize>(status: StatusCode, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => {
            let mut response = (status, bytes).into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(err) => {
            tracing::error!(error = %err, "could not serialize a response");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

pub(crate) fn error_response(status: StatusCode, error: ErrorBody) -> Response {
    let body = ErrorEnvelope {
        success: false,
        data: None,
        message: error.message.clone(),
        error,
        meta: Meta {
            api_key_usage: usage(),
        },
    };
    json_response(status, &body)
}

/// A successful response: `data` wrapped in the envelope.
pub struct Reply<T> {
    status: StatusCode,
    data: T,
    message: &'static str,
    page: Option<PageMeta>,
}

impl<T: Serialize> Reply<T> {
    pub fn ok(data: T) -> Self {
        Reply {
            status: StatusCode::OK,
            data,
            message: "OK",
            page: None,
        }
    }

    pub fn created(data: T) -> Self {
        Reply {
            status: StatusCode::CREATED,
            data,
            message: "Created",
            page: None,
        }
    }

    pub fn with_message(mut self, message: &'static str) -> Self {
        self.message = message;
        self
    }
}

impl<T: Serialize> Reply<Vec<T>> {
    /// A page of a list: answered as a [`ListEnvelope`].
    pub fn page(page: parley_types::list::Page<T>) -> Self {
        let (items, meta) = page.into_parts();
        Reply {
            status: StatusCode::OK,
            data: items,
            message: "OK",
            page: Some(meta),
        }
    }
}

/// `data` of a delete: the id of the record that is gone.
#[derive(Debug, Serialize, ToSchema)]
pub struct Deleted {
    pub id: uuid::Uuid,
}

impl Reply<Deleted> {
    pub fn deleted(id: uuid::Uuid) -> Self {
        Reply::ok(Deleted { id }).with_message("Deleted")
    }
}

/// What [`Envelope`] and [`ListEnvelope`] document, as written.
#[derive(Serialize)]
struct Success<'a, T, M> {
    success: bool,
    data: T,
    message: &'a str,
    error: Option<ErrorBody>,
    meta: M,
}

impl<T: Serialize> IntoResponse for Reply<T> {
    fn into_response(self) -> Response {
        let api_key_usage = usage();
        match self.page {
            // Only `Reply::page` sets a page, on a `Reply<Vec<_>>`: a `ListEnvelope`.
            Some(page) => success(
                self.status,
                self.data,
                self.message,
                ListMeta {
                    api_key_usage,
                    page,
                },
            ),
            None => success(self.status, self.data, self.message, Meta { api_key_usage }),
        }
    }
}

fn success<T: Serialize, M: Serialize>(
    status: StatusCode,
    data: T,
    message: &str,
    meta: M,
) -> Response {
    let body = Success {
        success: true,
        data,
        message,
        error: None,
        meta,
    };
    json_response(status, &body)
}

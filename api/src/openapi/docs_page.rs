//! `/docs`: Swagger UI over the served document, its files compiled into the binary. It shares
//! its origin with the operator page (`/admin`), whose token sits in the browser's session
//! storage, so it is served under a content security policy that lets it run only this
//! origin's own scripts and call only this origin: a script smuggled into the document (a
//! description is text, but Swagger UI renders Markdown) could neither run nor send the token
//! anywhere.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use utoipa_swagger_ui::{Config, SwaggerUi};

/// Swagger UI's own scripts and styles (it sets styles inline, and draws icons from `data:`
/// images); nothing else.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
    img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// `/docs`, over the document served at `document`.
pub fn router<S: Clone + Send + Sync + 'static>(document: &'static str) -> Router<S> {
    Router::from(SwaggerUi::new("/docs").config(Config::new([document])))
        .layer(axum::middleware::map_response(protected))
}

async fn protected(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

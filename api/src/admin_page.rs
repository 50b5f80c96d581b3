//! The operator page (`/admin`): static files compiled into the binary (no build step, no
//! CDN), which call only the operator API (`/admin/v1`) with the token the operator types in.
//! Served with a content security policy that allows nothing but this origin's own files and
//! calls.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

const INDEX: &str = include_str!("admin_page/index.html");
const SCRIPT: &str = include_str!("admin_page/app.js");
const STYLE: &str = include_str!("admin_page/app.css");

const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn file(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}

pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/admin",
            get(|| async { file("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/admin/app.js",
            get(|| async { file("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/admin/app.css",
            get(|| async { file("text/css; charset=utf-8", STYLE) }),
        )
}

//! One module per resource; each gives an [`OpenApiRouter`] of its routes.

pub mod admin;
pub mod api_keys;
pub mod broadcasts;
pub mod categories;
pub mod contacts;
pub mod conversations;
pub mod faq;
pub mod files;
pub mod imports;
pub mod leads;
pub mod message_attributes;
pub mod receipts;
pub mod segments;
pub mod sla;
pub mod suppressions;
pub mod tags;
pub mod teams;
pub mod templates;
pub mod tickets;
pub mod topics;
pub mod unsubscribe;
pub mod users;
pub mod webhooks;

use axum::extract::DefaultBodyLimit;
use utoipa_axum::router::OpenApiRouter;

use crate::state::AppState;

/// Every `/api/v1` route that takes an API key. Bodies are limited to
/// `PARLEY_MAX_BODY_BYTES` (the layer in `startup`), except broadcast create and update,
/// whose audiences may be long (`PARLEY_MAX_BROADCAST_BODY_BYTES`).
pub fn api(max_broadcast_body_bytes: usize) -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(broadcasts::audience_router().layer(DefaultBodyLimit::max(max_broadcast_body_bytes)))
        .merge(broadcasts::router())
        .merge(api_keys::router())
        .merge(faq::router())
        .merge(contacts::router())
        .merge(imports::router())
        .merge(tags::router())
        .merge(segments::router())
        .merge(templates::router())
        .merge(leads::router())
        .merge(teams::router())
        .merge(users::router())
        .merge(categories::router())
        .merge(message_attributes::router())
        .merge(webhooks::router())
        .merge(conversations::router())
        .merge(tickets::router())
        .merge(sla::router())
        .merge(files::router())
        .merge(suppressions::router())
        .merge(topics::router())
}

/// Routes that authenticate by signature instead of an API key. A receipt batch (10,000
/// receipts) may be longer than the default limit.
pub fn signed() -> OpenApiRouter<AppState> {
    receipts::router().layer(DefaultBodyLimit::max(receipts::MAX_BODY_BYTES))
}

//! Which scope each route needs: one rule for the authentication middleware and the OpenAPI
//! document alike. `GET` reads, every other method writes.

use axum::http::Method;
use parley_domain::auth;

/// The resource of a route template such as `/api/v1/contacts/{id}`.
fn resource(route: &str) -> Option<&'static str> {
    // A contact's messages are its recipient records: broadcasts' data, read as
    // `/broadcasts/{id}/recipients` reads it.
    if route == "/api/v1/contacts/{id}/messages" {
        return Some("broadcasts");
    }
    // A contact's topic preferences are consent, as the suppression ledger is.
    if route == "/api/v1/contacts/{id}/subscriptions" {
        return Some("suppressions");
    }
    // A contact's data on request reads or erases every resource that holds the contact: a
    // scope of its own, which no other scope includes.
    if route == "/api/v1/contacts/{id}/export" || route == "/api/v1/contacts/{id}/erase" {
        return Some("privacy");
    }
    let first = route.strip_prefix("/api/v1/")?.split('/').next()?;
    Some(match first {
        "faq-collections" => "faq",
        "broadcasts" => "broadcasts",
        "contacts" | "tags" | "companies" | "segments" => "contacts",
        "leads" => "leads",
        "templates" => "templates",
        "teams" => "teams",
        "users" => "users",
        "categories" => "categories",
        "message-attributes" => "message-attributes",
        "conversations" => "conversations",
        "tickets" => "tickets",
        "statistics" => "statistics",
        "files" => "files",
        "sla-policies" => "sla-policies",
        "organization" => "organization",
        "suppressions" | "topics" => "suppressions",
        "webhooks" => return Some(auth::WEBHOOKS_MANAGE),
        "api-keys" => return Some(auth::API_KEYS_MANAGE),
        _ => return None,
    })
}

/// Endpoint 15, which also admits a ticket's access token in [`TICKET_TOKEN_HEADER`].
pub const TICKET_SLA_ROUTE: &str = "/api/v1/tickets/{id}/sla";
pub const TICKET_TOKEN_HEADER: &str = "x-ticket-access-token";

/// Routes under this prefix authenticate by signature, not by API key.
pub const SIGNED_PREFIX: &str = "/api/v1/channels/";

/// The scope a request to `route` with `method` needs. A route this table does not know
/// needs `*`, so a forgotten entry fails closed.
pub fn required_scope(method: &Method, route: &str) -> String {
    match resource(route) {
        Some(manage) if manage.contains(':') => manage.to_owned(),
        Some(res) if method == Method::GET || method == Method::HEAD => format!("{res}:read"),
        Some(res) => format!("{res}:write"),
        None => auth::ALL.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes() {
        assert_eq!(
            required_scope(&Method::GET, "/api/v1/contacts/{id}"),
            "contacts:read"
        );
        assert_eq!(
            required_scope(&Method::GET, "/api/v1/contacts/{id}/messages"),
            "broadcasts:read"
        );
        assert_eq!(
            required_scope(&Method::PATCH, "/api/v1/contacts/{id}"),
            "contacts:write"
        );
        assert_eq!(
            required_scope(&Method::GET, "/api/v1/contacts/{id}/export"),
            "privacy:read"
        );
        assert_eq!(
            required_scope(&Method::POST, "/api/v1/contacts/{id}/erase"),
            "privacy:write"
        );
        assert_eq!(
            required_scope(&Method::POST, "/api/v1/tags"),
            "contacts:write"
        );
        assert_eq!(
            required_scope(&Method::GET, "/api/v1/faq-collections"),
            "faq:read"
        );
        assert_eq!(
            required_scope(&Method::GET, "/api/v1/webhooks/{id}/logs"),
            "webhooks:manage"
        );
        assert_eq!(
            required_scope(&Method::DELETE, "/api/v1/api-keys/{id}"),
            "api-keys:manage"
        );
        assert_eq!(required_scope(&Method::GET, "/api/v1/unknown"), "*");
    }

    #[test]
    fn every_scope_named_here_exists() {
        for route in [
            "faq-collections",
            "broadcasts",
            "contacts",
            "leads",
            "templates",
            "teams",
            "users",
            "categories",
            "message-attributes",
            "conversations",
            "tickets",
            "statistics",
            "files",
            "sla-policies",
            "organization",
            "suppressions",
            "webhooks",
            "api-keys",
        ] {
            for m in [Method::GET, Method::POST] {
                let s = required_scope(&m, &format!("/api/v1/{route}"));
                assert!(auth::is_valid_scope(&s) && s != "*", "{route}: {s}");
            }
        }
    }
}

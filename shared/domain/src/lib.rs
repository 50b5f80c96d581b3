//! The service's resources and their rules, without I/O: what the API returns (`Serialize`,
//! read from rows with `FromRow`) and what it accepts (`Deserialize` into validated field
//! types), the rules that turn a request into a change, business hours, API keys and scopes,
//! and signatures. With the `openapi` feature the types also describe themselves for the API's
//! OpenAPI document.

pub mod ab_tests;
pub mod analytics;
pub mod api_keys;
pub mod auth;
pub mod broadcasts;
pub mod business_hours;
pub mod categories;
pub mod contact_data;
pub mod contacts;
pub mod conversations;
pub mod faq;
pub mod files;
pub mod imports;
pub mod leads;
pub mod message_attributes;
pub mod operator;
pub mod orgs;
pub mod preview;
pub mod segments;
pub mod send_rules;
pub mod sending;
pub mod signature;
pub mod sla;
pub mod suppressions;
pub mod tags;
pub mod teams;
pub mod template_variables;
pub mod templates;
pub mod tickets;
pub mod topics;
pub mod unsubscribe;
pub mod users;
pub mod webhooks;

use uuid::Uuid;

pub use parley_types::enums::{Channel, Priority};

/// Who made a change: recorded in activities and delivery logs.
#[derive(Debug, Clone)]
pub struct Actor {
    pub kind: &'static str,
    pub id: Uuid,
    pub name: String,
}

impl Actor {
    pub fn api_key(id: Uuid, name: &str) -> Self {
        Actor {
            kind: "api_key",
            id,
            name: name.to_owned(),
        }
    }

    /// The customer, a contact of the organization.
    pub fn contact(id: Uuid) -> Self {
        Actor {
            kind: "contact",
            id,
            name: id.to_string(),
        }
    }

    /// The service itself (the worker's SLA checks).
    pub fn system() -> Self {
        Actor {
            kind: "system",
            id: Uuid::nil(),
            name: "system".to_owned(),
        }
    }
}

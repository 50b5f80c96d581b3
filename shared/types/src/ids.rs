//! Identifiers are UUID v7: time-ordered, so they index well and sort by creation. The
//! organization and most resources have an id type of their own ([`OrgId`], [`BroadcastId`],
//! [`ContactId`], ...; docs/glossary.md, "Typed ids" says where they are used), so that a
//! function taking two of them cannot be called with the pair swapped. Each is its UUID in
//! JSON, in Postgres and in the OpenAPI document. In a checked statement it is bound as
//! `id.uuid()`, which keeps the compiler's check of the parameter's type, or as `id as _`
//! (a slice of ids always so), and read as `"id: BroadcastId"`.
//!
//! ```
//! use parley_types::ids::{BroadcastId, OrgId};
//! fn end(_org: OrgId, _broadcast: BroadcastId) {}
//! let (org, broadcast) = (OrgId::generate(), BroadcastId::generate());
//! end(org, broadcast);
//! ```
//!
//! The same call with the pair swapped does not compile:
//!
//! ```compile_fail
//! use parley_types::ids::{BroadcastId, OrgId};
//! fn end(_org: OrgId, _broadcast: BroadcastId) {}
//! let (org, broadcast) = (OrgId::generate(), BroadcastId::generate());
//! end(broadcast, org);
//! ```

use uuid::Uuid;

pub fn new_id() -> Uuid {
    Uuid::now_v7()
}

/// Removes repeated ids, keeping the first of each in order.
pub fn dedup<T: Copy + Eq + std::hash::Hash>(ids: Vec<T>) -> Vec<T> {
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    ids.into_iter().filter(|id| seen.insert(*id)).collect()
}

macro_rules! id_type {
    ($($(#[$doc:meta])* $name:ident;)+) => {$(
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize, sqlx::Type,
        )]
        #[serde(transparent)]
        #[sqlx(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// A new id (UUID v7).
            pub fn generate() -> Self {
                $name(Uuid::now_v7())
            }

            /// The UUID it is.
            pub const fn uuid(self) -> Uuid {
                self.0
            }
        }

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                $name(id)
            }
        }

        impl From<$name> for Uuid {
            fn from(id: $name) -> Self {
                id.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = uuid::Error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                s.parse().map($name)
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
                use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
                // As the derive writes a `Uuid`.
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
                    .into()
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {}
    )+};
}

id_type! {
    /// An organization's id.
    OrgId;
    /// A broadcast's id.
    BroadcastId;
    /// A recipient's id: one contact of one broadcast.
    RecipientId;
    /// A contact's id.
    ContactId;
    /// A message template's id.
    TemplateId;
    /// A webhook's id.
    WebhookId;
    /// A conversation's id.
    ConversationId;
    /// A ticket's id.
    TicketId;
    /// A user's id (an agent of the organization).
    UserId;
    /// A team's id.
    TeamId;
    /// A lead's id.
    LeadId;
    /// A conversation category's id.
    CategoryId;
    /// A segment's id.
    SegmentId;
    /// A message attribute's id.
    MessageAttributeId;
    /// An SLA policy's id.
    SlaPolicyId;
    /// A file's id.
    FileId;
    /// A contact import's id.
    ImportId;
    /// A tag's id.
    TagId;
    /// A company's id.
    CompanyId;
    /// A suppression entry's id.
    SuppressionId;
    /// An FAQ collection's id.
    FaqCollectionId;
    /// An FAQ category's id (a category of one collection).
    FaqCategoryId;
    /// An FAQ's id.
    FaqId;
    /// A subscription topic's id.
    TopicId;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_its_uuid_in_json_and_text() {
        let uuid = Uuid::now_v7();
        let id = BroadcastId::from(uuid);
        assert_eq!(
            serde_json::to_value(id).unwrap(),
            serde_json::json!(uuid.to_string())
        );
        assert_eq!(
            serde_json::from_value::<BroadcastId>(serde_json::json!(uuid.to_string())).unwrap(),
            id
        );
        assert_eq!(id.to_string(), uuid.to_string());
        assert_eq!(uuid.to_string().parse::<BroadcastId>().unwrap(), id);
        assert_eq!(Uuid::from(id), uuid);
        assert!("nope".parse::<OrgId>().is_err());
    }

    #[test]
    fn dedup_keeps_the_first_of_each_in_order() {
        let (a, b) = (RecipientId::generate(), RecipientId::generate());
        assert_eq!(dedup(vec![a, b, a, b, a]), vec![a, b]);
    }
}

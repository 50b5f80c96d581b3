//! The service's resources: what the API returns (`Serialize`, read from rows with `FromRow`)
//! and what it accepts (`Deserialize` into validated field types), with the rules that turn a
//! request into a change.

pub mod analytics;
pub mod api_keys;
pub mod broadcasts;
pub mod categories;
pub mod contacts;
pub mod conversations;
pub mod faq;
pub mod files;
pub mod leads;
pub mod message_attributes;
pub mod orgs;
pub mod sla;
pub mod tags;
pub mod teams;
pub mod templates;
pub mod tickets;
pub mod users;
pub mod webhooks;

use uuid::Uuid;

/// Declares an enumeration stored as text: serde names, OpenAPI enum, and the sqlx mapping.
#[macro_export]
macro_rules! text_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$attr:meta])* $variant:ident = $text:tt),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
        pub enum $name {
            $($(#[$attr])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(format!("unknown {} {s:?}", stringify!($name))),
                }
            }
        }

        impl sqlx::Type<sqlx::Postgres> for $name {
            fn type_info() -> sqlx::postgres::PgTypeInfo {
                <&str as sqlx::Type<sqlx::Postgres>>::type_info()
            }
            fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
                <&str as sqlx::Type<sqlx::Postgres>>::compatible(ty)
            }
        }

        impl<'r> sqlx::Decode<'r, sqlx::Postgres> for $name {
            fn decode(value: sqlx::postgres::PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
                let s = <&str as sqlx::Decode<sqlx::Postgres>>::decode(value)?;
                Ok(s.parse::<$name>()?)
            }
        }

        impl sqlx::Encode<'_, sqlx::Postgres> for $name {
            fn encode_by_ref(
                &self,
                buf: &mut sqlx::postgres::PgArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <&str as sqlx::Encode<sqlx::Postgres>>::encode(self.as_str(), buf)
            }
        }
    };
}

text_enum!(
    /// A message channel.
    Channel {
        MessagingA = "messaging_a",
        Email = "email",
        SocialA = "social_a",
        SocialB = "social_b",
    }
);

text_enum!(
    /// How urgent a conversation or ticket is.
    Priority {
        Low = "low",
        Medium = "medium",
        High = "high",
        Urgent = "urgent",
    }
);

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

/// Implements [`crate::list::Keyed`] for a type with `id` and `created_at` fields.
#[macro_export]
macro_rules! keyed {
    ($($t:ty),+) => {
        $(impl $crate::list::Keyed for $t {
            fn cursor(&self) -> $crate::list::Cursor {
                $crate::list::Cursor { created_at: self.created_at, id: self.id }
            }
        })+
    };
}

//! Enumerations stored as text, and the two every layer speaks of: channels and priorities.

/// Declares an enumeration stored as text: serde names, the sqlx mapping, and (with the calling
/// crate's `openapi` feature) its OpenAPI enum. The calling crate needs `serde` and `sqlx`.
/// A variant may list former names after its text (`A = "a" | "old-a"`): they are read (from
/// JSON and from Postgres) as that variant, never written, and not in the OpenAPI enum.
#[macro_export]
macro_rules! text_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$attr:meta])* $variant:ident = $text:tt $(| $former:literal)*),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        pub enum $name {
            $($(#[$attr])* #[serde(rename = $text $(, alias = $former)*)] $variant),+
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
                    $($text $(| $former)* => Ok($name::$variant),)+
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

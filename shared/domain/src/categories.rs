//! Conversation categories.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use parley_types::fields::{Name, ShortText, Slug, Text, non_null, nullable};
use parley_types::time::Timestamp;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConversationCategory {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    /// Unique in the organization; derived from `name` when not given.
    pub slug: String,
    pub description: Option<String>,
    pub icon: Option<String>,
    pub is_active: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(ConversationCategory);

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"name": "Billing", "description": "Invoices and payments", "icon": "receipt"})))]
pub struct CreateCategory {
    pub name: Name,
    pub slug: Option<Slug>,
    pub description: Option<Text>,
    pub icon: Option<ShortText>,
    pub is_active: Option<bool>,
}

impl CreateCategory {
    /// The category, and whether its slug was derived.
    pub fn into_category(self, organization_id: Uuid) -> (ConversationCategory, bool) {
        let now = Timestamp::now();
        let derived = self.slug.is_none();
        let slug = self.slug.map_or_else(
            || parley_types::fields::slugify(self.name.as_str()),
            Into::into,
        );
        let c = ConversationCategory {
            id: parley_types::ids::new_id(),
            organization_id,
            name: self.name.into(),
            slug,
            description: self.description.map(Into::into),
            icon: self.icon.map(Into::into),
            is_active: self.is_active.unwrap_or(true),
            created_at: now,
            updated_at: now,
        };
        (c, derived)
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"isActive": false})))]
pub struct UpdateCategory {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub name: Option<Name>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub slug: Option<Slug>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<Text>>,
    #[serde(default, deserialize_with = "nullable")]
    pub icon: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_active: Option<bool>,
}

impl UpdateCategory {
    pub fn apply(self, c: &mut ConversationCategory) {
        if let Some(v) = self.name {
            c.name = v.into();
        }
        if let Some(v) = self.slug {
            c.slug = v.into();
        }
        if let Some(v) = self.description {
            c.description = v.map(Into::into);
        }
        if let Some(v) = self.icon {
            c.icon = v.map(Into::into);
        }
        if let Some(v) = self.is_active {
            c.is_active = v;
        }
        c.updated_at = Timestamp::now();
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct CategoryFilter {
    pub is_active: Option<bool>,
}

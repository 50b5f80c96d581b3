//! Tags and companies: small records contacts and leads refer to.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use parley_types::fields::{Color, Name, ShortText, non_null, nullable};
use parley_types::time::Timestamp;

#[derive(Debug, Clone, PartialEq, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Tag {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub display_name: Option<String>,
    pub color: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(Tag);

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"name": "vip", "displayName": "VIP", "color": "#d4af37"})))]
pub struct CreateTag {
    /// Unique in the organization, compared without case.
    pub name: Name,
    pub display_name: Option<ShortText>,
    pub color: Option<Color>,
}

impl CreateTag {
    pub fn into_tag(self, organization_id: Uuid) -> Tag {
        let now = Timestamp::now();
        Tag {
            id: parley_types::ids::new_id(),
            organization_id,
            name: self.name.into(),
            display_name: self.display_name.map(Into::into),
            color: self.color.map(Into::into),
            created_at: now,
            updated_at: now,
        }
    }
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Company {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub domain: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(Company);

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"name": "Analytical Engines Ltd", "domain": "engines.example"})))]
pub struct CreateCompany {
    /// Unique in the organization, compared without case.
    pub name: Name,
    pub domain: Option<ShortText>,
}

impl CreateCompany {
    pub fn into_company(self, organization_id: Uuid) -> Company {
        let now = Timestamp::now();
        Company {
            id: parley_types::ids::new_id(),
            organization_id,
            name: self.name.into(),
            domain: self.domain.map(Into::into),
            created_at: now,
            updated_at: now,
        }
    }
}

/// A change to a tag: only the fields sent change; `null` clears an optional one.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"displayName": "Very important", "color": "#c0ffee"})))]
pub struct UpdateTag {
    /// Unique in the organization, compared without case.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub name: Option<Name>,
    #[serde(default, deserialize_with = "nullable")]
    pub display_name: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "nullable")]
    pub color: Option<Option<Color>>,
}

impl UpdateTag {
    pub fn apply(self, tag: &mut Tag) {
        if let Some(name) = self.name {
            tag.name = name.into();
        }
        if let Some(v) = self.display_name {
            tag.display_name = v.map(Into::into);
        }
        if let Some(v) = self.color {
            tag.color = v.map(Into::into);
        }
        tag.updated_at = Timestamp::now();
    }
}

/// A change to a company: only the fields sent change; `null` clears `domain`.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"domain": "engines.example"})))]
pub struct UpdateCompany {
    /// Unique in the organization, compared without case.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub name: Option<Name>,
    #[serde(default, deserialize_with = "nullable")]
    pub domain: Option<Option<ShortText>>,
}

impl UpdateCompany {
    pub fn apply(self, company: &mut Company) {
        if let Some(name) = self.name {
            company.name = name.into();
        }
        if let Some(v) = self.domain {
            company.domain = v.map(Into::into);
        }
        company.updated_at = Timestamp::now();
    }
}

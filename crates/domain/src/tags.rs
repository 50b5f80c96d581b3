//! Tags and companies: small records contacts and leads refer to.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use parley_types::fields::{Color, Name, ShortText};
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

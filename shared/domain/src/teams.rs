//! Teams of users.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::users::UserSummary;
use parley_types::fields::{Color, Name, ShortText, Text, non_null, nullable};
use parley_types::time::Timestamp;

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Team {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub display_name: Option<String>,
    pub description: Option<String>,
    pub color: Option<String>,
    pub icon: Option<String>,
    /// The user who made the team, when one was named.
    pub created_by: Option<Uuid>,
    pub is_active: bool,
    pub member_count: i64,
    /// Conversations assigned to the team.
    pub conversation_count: i64,
    pub creator: Option<UserSummary>,
    pub members: Vec<UserSummary>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(Team);

/// A team as conversations and tickets embed it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TeamSummary {
    pub id: Uuid,
    pub name: String,
    pub display_name: Option<String>,
    pub color: Option<String>,
    pub icon: Option<String>,
    pub is_active: bool,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "name": "support-emea", "displayName": "Support EMEA", "description": "First-line support",
    "color": "#0b8043", "icon": "headset"
})))]
pub struct CreateTeam {
    /// Unique in the organization, compared without case.
    pub name: Name,
    pub display_name: Option<ShortText>,
    pub description: Option<Text>,
    pub color: Option<Color>,
    pub icon: Option<ShortText>,
    pub is_active: Option<bool>,
    /// A user of the organization recorded as the team's creator.
    pub created_by: Option<Uuid>,
    /// Users of the organization to add as members.
    #[cfg_attr(feature = "openapi", schema(max_items = 100))]
    pub member_ids: Option<Vec<Uuid>>,
}

impl CreateTeam {
    pub fn into_team(self, organization_id: Uuid) -> (Team, Vec<Uuid>) {
        let now = Timestamp::now();
        let team = Team {
            id: parley_types::ids::new_id(),
            organization_id,
            name: self.name.into(),
            display_name: self.display_name.map(Into::into),
            description: self.description.map(Into::into),
            color: self.color.map(Into::into),
            icon: self.icon.map(Into::into),
            created_by: self.created_by,
            is_active: self.is_active.unwrap_or(true),
            member_count: 0,
            conversation_count: 0,
            creator: None,
            members: Vec::new(),
            created_at: now,
            updated_at: now,
        };
        (team, self.member_ids.unwrap_or_default())
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"description": "Second-line support", "isActive": true})))]
pub struct UpdateTeam {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub name: Option<Name>,
    #[serde(default, deserialize_with = "nullable")]
    pub display_name: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "nullable")]
    pub description: Option<Option<Text>>,
    #[serde(default, deserialize_with = "nullable")]
    pub color: Option<Option<Color>>,
    #[serde(default, deserialize_with = "nullable")]
    pub icon: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_active: Option<bool>,
}

impl UpdateTeam {
    pub fn apply(self, t: &mut Team) {
        if let Some(v) = self.name {
            t.name = v.into();
        }
        if let Some(v) = self.display_name {
            t.display_name = v.map(Into::into);
        }
        if let Some(v) = self.description {
            t.description = v.map(Into::into);
        }
        if let Some(v) = self.color {
            t.color = v.map(Into::into);
        }
        if let Some(v) = self.icon {
            t.icon = v.map(Into::into);
        }
        if let Some(v) = self.is_active {
            t.is_active = v;
        }
        t.updated_at = Timestamp::now();
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"userIds": ["0193a1f2-7c4e-7d2a-9b1c-2f3e4d5c6b7a"]})))]
pub struct AddMembers {
    /// Users of the organization; ones already in the team are left as they are.
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 100))]
    pub user_ids: Vec<Uuid>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct TeamFilter {
    pub is_active: Option<bool>,
}

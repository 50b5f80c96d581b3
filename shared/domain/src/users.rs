//! Workspace users (agents).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use parley_types::fields::{
    Email, HttpUrl, Locale, Name, Phone, ShortText, TimeZone, non_null, nullable,
};
use parley_types::time::Timestamp;

parley_types::text_enum!(
    /// Whether an agent is taking conversations.
    AgentStatus { Online = "online", Away = "away", Busy = "busy", Offline = "offline" }
);

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct User {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub first_name: String,
    pub last_name: String,
    pub email: String,
    pub phone_number: Option<String>,
    pub avatar: Option<String>,
    pub job_title: Option<String>,
    pub language: String,
    pub timezone: String,
    pub agent_status: AgentStatus,
    pub role_id: Option<Uuid>,
    pub is_active: bool,
    pub provisioned_by_sso: bool,
    pub max_concurrent_chats: i32,
    pub email_verified_at: Option<Timestamp>,
    pub phone_verified_at: Option<Timestamp>,
    pub last_active_at: Option<Timestamp>,
    pub last_login_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(User);

/// A user as embedded in teams (`creator`, `members`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UserSummary {
    pub id: Uuid,
    pub first_name: String,
    pub last_name: String,
    pub email: String,
    pub phone_number: Option<String>,
    pub avatar: Option<String>,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"firstName": "Grace", "lastName": "Hopper", "email": "grace@example.com", "jobTitle": "Support lead", "timezone": "Europe/Berlin", "maxConcurrentChats": 8})))]
pub struct CreateUser {
    pub first_name: Name,
    pub last_name: Name,
    pub email: Email,
    pub phone_number: Option<Phone>,
    pub avatar: Option<HttpUrl>,
    pub job_title: Option<ShortText>,
    pub language: Option<Locale>,
    pub timezone: Option<TimeZone>,
    pub agent_status: Option<AgentStatus>,
    pub is_active: Option<bool>,
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000))]
    #[serde(default, deserialize_with = "max_chats")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub max_concurrent_chats: Option<i32>,
}

fn max_chats<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    parley_types::fields::bounded_i32(d, 0, 1000).map(Some)
}

impl CreateUser {
    pub fn into_user(self, organization_id: Uuid) -> User {
        let now = Timestamp::now();
        User {
            id: parley_types::ids::new_id(),
            organization_id,
            first_name: self.first_name.into(),
            last_name: self.last_name.into(),
            email: self.email.into(),
            phone_number: self.phone_number.map(Into::into),
            avatar: self.avatar.map(Into::into),
            job_title: self.job_title.map(Into::into),
            language: self.language.map_or_else(|| "en".to_owned(), Into::into),
            timezone: self.timezone.map_or_else(|| "UTC".to_owned(), Into::into),
            agent_status: self.agent_status.unwrap_or(AgentStatus::Offline),
            role_id: None,
            is_active: self.is_active.unwrap_or(true),
            provisioned_by_sso: false,
            max_concurrent_chats: self.max_concurrent_chats.unwrap_or(5),
            email_verified_at: None,
            phone_verified_at: None,
            last_active_at: None,
            last_login_at: None,
            created_at: now,
            updated_at: now,
        }
    }
}

/// A change to a user: only the fields sent change; `null` clears an optional one.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"jobTitle": "Head of support", "agentStatus": "away"})))]
pub struct UpdateUser {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub first_name: Option<Name>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub last_name: Option<Name>,
    /// Unique in the organization, compared without case.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub email: Option<Email>,
    #[serde(default, deserialize_with = "nullable")]
    pub phone_number: Option<Option<Phone>>,
    #[serde(default, deserialize_with = "nullable")]
    pub avatar: Option<Option<HttpUrl>>,
    #[serde(default, deserialize_with = "nullable")]
    pub job_title: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub language: Option<Locale>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub timezone: Option<TimeZone>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub agent_status: Option<AgentStatus>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_active: Option<bool>,
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000))]
    #[serde(default, deserialize_with = "max_chats")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub max_concurrent_chats: Option<i32>,
}

impl UpdateUser {
    pub fn apply(self, user: &mut User) {
        fn set<F: Into<T>, T>(target: &mut T, v: Option<F>) {
            if let Some(v) = v {
                *target = v.into();
            }
        }
        fn opt<F: Into<String>>(target: &mut Option<String>, v: Option<Option<F>>) {
            if let Some(v) = v {
                *target = v.map(Into::into);
            }
        }
        set(&mut user.first_name, self.first_name);
        set(&mut user.last_name, self.last_name);
        set(&mut user.email, self.email);
        opt(&mut user.phone_number, self.phone_number);
        opt(&mut user.avatar, self.avatar);
        opt(&mut user.job_title, self.job_title);
        set(&mut user.language, self.language);
        set(&mut user.timezone, self.timezone);
        set(&mut user.agent_status, self.agent_status);
        set(&mut user.is_active, self.is_active);
        set(&mut user.max_concurrent_chats, self.max_concurrent_chats);
        user.updated_at = Timestamp::now();
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct UserFilter {
    pub is_active: Option<bool>,
    pub agent_status: Option<AgentStatus>,
}

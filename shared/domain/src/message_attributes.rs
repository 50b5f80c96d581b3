//! Message attributes: named values that messages and automations can refer to.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use parley_types::fields::{AttributeKey, Label, Name, ShortText, Text, non_null, nullable};
use parley_types::time::Timestamp;

parley_types::text_enum!(
    /// What an attribute describes.
    AttributeType { Guest = "guest", Contact = "contact", Conversation = "conversation", System = "system" }
);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MessageAttribute {
    pub id: Uuid,
    pub organization_id: Uuid,
    /// Unique in the organization.
    pub key: String,
    pub label: String,
    pub category: Option<String>,
    pub data_source: Option<String>,
    pub default_value: Option<String>,
    pub attribute_type: AttributeType,
    pub is_active: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(MessageAttribute);

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "key": "order_number", "label": "Order number", "category": "commerce",
    "dataSource": "shop", "defaultValue": "unknown", "attributeType": "guest"
})))]
pub struct CreateMessageAttribute {
    pub key: AttributeKey,
    pub label: Name,
    pub category: Option<Label>,
    pub data_source: Option<ShortText>,
    pub default_value: Option<Text>,
    pub attribute_type: Option<AttributeType>,
    pub is_active: Option<bool>,
}

impl CreateMessageAttribute {
    pub fn into_attribute(self, organization_id: Uuid) -> MessageAttribute {
        let now = Timestamp::now();
        MessageAttribute {
            id: parley_types::ids::new_id(),
            organization_id,
            key: self.key.into(),
            label: self.label.into(),
            category: self.category.map(Into::into),
            data_source: self.data_source.map(Into::into),
            default_value: self.default_value.map(Into::into),
            attribute_type: self.attribute_type.unwrap_or(AttributeType::Guest),
            is_active: self.is_active.unwrap_or(true),
            created_at: now,
            updated_at: now,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"label": "Order no.", "isActive": false})))]
pub struct UpdateMessageAttribute {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub key: Option<AttributeKey>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub label: Option<Name>,
    #[serde(default, deserialize_with = "nullable")]
    pub category: Option<Option<Label>>,
    #[serde(default, deserialize_with = "nullable")]
    pub data_source: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "nullable")]
    pub default_value: Option<Option<Text>>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub attribute_type: Option<AttributeType>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_active: Option<bool>,
}

impl UpdateMessageAttribute {
    pub fn apply(self, a: &mut MessageAttribute) {
        if let Some(v) = self.key {
            a.key = v.into();
        }
        if let Some(v) = self.label {
            a.label = v.into();
        }
        if let Some(v) = self.category {
            a.category = v.map(Into::into);
        }
        if let Some(v) = self.data_source {
            a.data_source = v.map(Into::into);
        }
        if let Some(v) = self.default_value {
            a.default_value = v.map(Into::into);
        }
        if let Some(v) = self.attribute_type {
            a.attribute_type = v;
        }
        if let Some(v) = self.is_active {
            a.is_active = v;
        }
        a.updated_at = Timestamp::now();
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct MessageAttributeFilter {
    pub attribute_type: Option<AttributeType>,
    pub is_active: Option<bool>,
}

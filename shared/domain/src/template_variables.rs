//! The values a broadcast (or an A/B variant) fills its template's placeholders with.

use serde::{Deserialize, Serialize};

use parley_types::fields::{ShortText, VariableValue};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TypedValue {
    #[serde(rename = "type")]
    pub kind: ShortText,
    pub value: VariableValue,
}

/// Values for the template's placeholders: `body[n-1]` fills `{{n}}`. At most
/// [`crate::templates::MAX_PLACEHOLDERS`] body values and
/// [`crate::broadcasts::MAX_HEADER_VALUES`] header values, each at most
/// 1,000 characters; the message they render must fit the channel.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TemplateVariables {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 100))]
    pub body: Vec<TypedValue>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 10))]
    pub header: Vec<TypedValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_media: Option<ShortText>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<TypedValue>,
}

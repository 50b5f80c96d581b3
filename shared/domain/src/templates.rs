//! Message templates, their placeholders, and duplication.

use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use uuid::Uuid;

use crate::Channel;
use parley_types::error::{AppError, FieldError};
use parley_types::fields::{Locale, LongText, Name, ShortText, non_null, nullable};
use parley_types::time::Timestamp;

parley_types::text_enum!(
    /// A template's lifecycle: only `active` templates are meant for sending.
    TemplateStatus { Draft = "draft", Active = "active", Archived = "archived" }
);

parley_types::text_enum!(
    /// What a template is for, as messaging providers classify it.
    TemplateCategory { Marketing = "marketing", Utility = "utility", Authentication = "authentication" }
);

parley_types::text_enum!(
    /// What a template button does.
    ButtonType { Url = "url", PhoneNumber = "phone_number", QuickReply = "quick_reply" }
);

/// A button: `url` and `phone_number` buttons carry their `value`, `quick_reply` ones may.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateButton {
    #[serde(rename = "type")]
    pub kind: ButtonType,
    pub text: ShortText,
    /// The URL or phone number, for those button types.
    pub value: Option<ShortText>,
}

#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for TemplateButton {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        let text = ShortText::schema();
        let button = |types: &[&str], value_required: bool| {
            let mut required = vec!["type", "text"];
            let value = if value_required {
                required.push("value");
                serde_json::to_value(&text).expect("a schema serializes")
            } else {
                serde_json::json!({"oneOf": [text, {"type": "null"}]})
            };
            serde_json::json!({
                "type": "object",
                "required": required,
                "properties": {"type": {"type": "string", "enum": types}, "text": text, "value": value},
            })
        };
        serde_json::from_value(serde_json::json!({
            "description": "A button: `url` and `phone_number` buttons need their `value`.",
            "oneOf": [button(&["quick_reply"], false), button(&["url", "phone_number"], true)],
        }))
        .expect("a schema reads back")
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for TemplateButton {}

/// Contact fields a body may use as `{{contact.<field>}}`, with the most characters each can
/// hold (their field types' limits), for the bound on a rendered message.
pub const CONTACT_PLACEHOLDERS: &[&str] = &[
    "name",
    "email",
    "phone",
    "country",
    "language",
    "position",
    "companyName",
    "externalId",
];

fn contact_field_max_chars(field: &str) -> usize {
    use parley_types::fields::{Email, Locale, Name, ShortText};
    match field {
        "name" | "companyName" => Name::MAX_CHARS,
        "email" => Email::MAX_CHARS,
        "phone" => 16,
        "language" => Locale::MAX_CHARS,
        _ => ShortText::MAX_CHARS,
    }
}

/// Placeholders one body may hold, and the highest `{{n}}`: every one may be filled with up to
/// a value's length, so their number bounds the work of rendering.
pub const MAX_PLACEHOLDERS: usize = 100;

/// The longest message a channel takes, in characters: a broadcast whose message could render
/// longer is refused when it is written, never found by the worker.
pub fn max_message_chars(channel: Channel) -> usize {
    match channel {
        Channel::MessagingA => 4_096,
        Channel::Email => 100_000,
        Channel::SocialA => 2_000,
        Channel::SocialB => 1_000,
    }
}

/// The most characters `segments` can render to with `values` for `{{n}}`: the text, each
/// `{{n}}`'s value, and each `{{contact.<field>}}` at its field's longest.
pub fn rendered_bound(segments: &[Segment<'_>], values: &[&str]) -> usize {
    segments
        .iter()
        .map(|s| match s {
            Segment::Text(t) => t.chars().count(),
            Segment::Placeholder(Placeholder::Positional(n)) => {
                values.get(n - 1).map_or(0, |v| v.chars().count())
            }
            Segment::Placeholder(Placeholder::Contact(field)) => contact_field_max_chars(field),
            Segment::Placeholder(Placeholder::UnsubscribeUrl) => crate::unsubscribe::MAX_URL_CHARS,
        })
        .sum()
}

/// Refuses a body that could render longer than its channel takes with `values`.
pub fn check_rendered_length(
    body: &str,
    channel: Channel,
    values: &[&str],
    field: &str,
) -> Result<(), AppError> {
    let Ok(segments) = parse_body(body) else {
        return Ok(());
    };
    let bound = rendered_bound(&segments, values);
    let max = max_message_chars(channel);
    if bound > max {
        return Err(AppError::validation(
            field,
            "too_long",
            format!(
                "the message could render to {bound} characters (the contact fields at their \
                 longest); {channel} takes at most {max}"
            ),
        ));
    }
    Ok(())
}

/// A `{{...}}` in a template body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placeholder {
    /// `{{1}}`, `{{2}}`, ...: the n-th value of `templateVariables.body`.
    Positional(usize),
    /// `{{contact.name}}` and the other fields of [`CONTACT_PLACEHOLDERS`].
    Contact(String),
    /// `{{unsubscribe_url}}`: the recipient's own unsubscribe link.
    UnsubscribeUrl,
}

/// Splits a body into literal text and placeholders, or says what is wrong with it.
pub fn parse_body(body: &str) -> Result<Vec<Segment<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = body;
    let mut placeholders = 0;
    while let Some(start) = rest.find("{{") {
        placeholders += 1;
        if placeholders > MAX_PLACEHOLDERS {
            return Err(format!("has more than {MAX_PLACEHOLDERS} placeholders"));
        }
        if start > 0 {
            out.push(Segment::Text(&rest[..start]));
        }
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| "has a {{ without a closing }}".to_owned())?;
        let inner = after[..end].trim();
        let placeholder = if inner == UNSUBSCRIBE_URL {
            Placeholder::UnsubscribeUrl
        } else if let Some(field) = inner.strip_prefix("contact.") {
            if !CONTACT_PLACEHOLDERS.contains(&field) {
                return Err(format!(
                    "uses {{{{contact.{field}}}}}; contact fields are {}",
                    CONTACT_PLACEHOLDERS.join(", ")
                ));
            }
            Placeholder::Contact(field.to_owned())
        } else {
            match inner.parse::<usize>() {
                Ok(n) if (1..=MAX_PLACEHOLDERS).contains(&n) => Placeholder::Positional(n),
                _ => {
                    return Err(format!(
                        "uses {{{{{inner}}}}}; placeholders are {{{{1}}}}, {{{{2}}}}, ..., {{{{contact.<field>}}}} or {{{{unsubscribe_url}}}}"
                    ));
                }
            }
        };
        out.push(Segment::Placeholder(placeholder));
        rest = &after[end + 2..];
    }
    if !rest.is_empty() {
        out.push(Segment::Text(rest));
    }
    Ok(out)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment<'a> {
    Text(&'a str),
    Placeholder(Placeholder),
}

/// The placeholder of the recipient's unsubscribe link.
pub const UNSUBSCRIBE_URL: &str = "unsubscribe_url";

/// Fills a body: `{{n}}` with `values[n-1]`, `{{contact.<field>}}` with `contact(field)`,
/// `{{unsubscribe_url}}` with `unsubscribe_url`; a value that is missing becomes empty. A body
/// that does not parse is sent as written.
pub fn render<'c>(
    body: &str,
    values: &[&str],
    contact: impl Fn(&str) -> Option<&'c str>,
    unsubscribe_url: &str,
) -> String {
    let Ok(segments) = parse_body(body) else {
        return body.to_owned();
    };
    let mut out = String::with_capacity(body.len() + 32);
    for segment in segments {
        match segment {
            Segment::Text(t) => out.push_str(t),
            Segment::Placeholder(Placeholder::Positional(n)) => {
                out.push_str(values.get(n - 1).copied().unwrap_or(""));
            }
            Segment::Placeholder(Placeholder::Contact(field)) => {
                out.push_str(contact(&field).unwrap_or(""));
            }
            Segment::Placeholder(Placeholder::UnsubscribeUrl) => out.push_str(unsubscribe_url),
        }
    }
    out
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Template {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub channel: Channel,
    pub language: String,
    pub category: TemplateCategory,
    /// Email subject.
    pub subject: Option<String>,
    pub header: Option<String>,
    /// The message; may use `{{1}}`, `{{2}}`, ... and `{{contact.<field>}}`.
    pub body: String,
    pub footer: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<TemplateButton>))]
    pub buttons: Json<Vec<TemplateButton>>,
    pub status: TemplateStatus,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(Template);

impl Template {
    /// The copy `POST /templates/{id}/duplicate` makes: new id, ` (Copy)`, `draft`.
    pub fn duplicate(&self, channel: Option<Channel>) -> Template {
        let now = Timestamp::now();
        Template {
            id: parley_types::ids::new_id(),
            name: format!("{} (Copy)", self.name),
            channel: channel.unwrap_or(self.channel),
            status: TemplateStatus::Draft,
            created_at: now,
            updated_at: now,
            ..self.clone()
        }
    }
}

/// The body's placeholders, and its length on `channel` with every `{{n}}` empty (broadcasts
/// check it again with their values).
fn check_body(body: &str, channel: Channel) -> Result<(), AppError> {
    parse_body(body).map_err(|m| AppError::validation("body", "invalid_placeholder", m))?;
    check_rendered_length(body, channel, &[], "body")
}

fn check_buttons(buttons: &[TemplateButton]) -> Result<(), AppError> {
    if buttons.len() > 10 {
        return Err(AppError::validation(
            "buttons",
            "too_many",
            "at most 10 buttons",
        ));
    }
    let errors: Vec<FieldError> = buttons
        .iter()
        .enumerate()
        .filter(|(_, b)| b.kind != ButtonType::QuickReply && b.value.is_none())
        .map(|(i, _)| {
            FieldError::new(
                format!("buttons[{i}].value"),
                "required",
                "url and phone_number buttons need a value",
            )
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(AppError::Validation(errors))
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "name": "Order shipped", "channel": "messaging_a", "language": "en", "category": "utility",
    "body": "Hello {{contact.name}}, your order {{1}} has shipped.", "status": "active"
})))]
pub struct CreateTemplate {
    pub name: Name,
    pub channel: Channel,
    pub language: Option<Locale>,
    pub category: Option<TemplateCategory>,
    pub subject: Option<ShortText>,
    pub header: Option<ShortText>,
    pub body: LongText,
    pub footer: Option<ShortText>,
    #[cfg_attr(feature = "openapi", schema(max_items = 10))]
    pub buttons: Option<Vec<TemplateButton>>,
    pub status: Option<TemplateStatus>,
}

impl CreateTemplate {
    pub fn into_template(self, organization_id: Uuid) -> Result<Template, AppError> {
        check_body(self.body.as_str(), self.channel)?;
        let buttons = self.buttons.unwrap_or_default();
        check_buttons(&buttons)?;
        let now = Timestamp::now();
        Ok(Template {
            id: parley_types::ids::new_id(),
            organization_id,
            name: self.name.into(),
            channel: self.channel,
            language: self.language.map_or_else(|| "en".to_owned(), Into::into),
            category: self.category.unwrap_or(TemplateCategory::Marketing),
            subject: self.subject.map(Into::into),
            header: self.header.map(Into::into),
            body: self.body.into(),
            footer: self.footer.map(Into::into),
            buttons: Json(buttons),
            status: self.status.unwrap_or(TemplateStatus::Draft),
            created_at: now,
            updated_at: now,
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"status": "archived"})))]
pub struct UpdateTemplate {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub name: Option<Name>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub channel: Option<Channel>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub language: Option<Locale>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub category: Option<TemplateCategory>,
    #[serde(default, deserialize_with = "nullable")]
    pub subject: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "nullable")]
    pub header: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub body: Option<LongText>,
    #[serde(default, deserialize_with = "nullable")]
    pub footer: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[cfg_attr(feature = "openapi", schema(max_items = 10))]
    pub buttons: Option<Vec<TemplateButton>>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub status: Option<TemplateStatus>,
}

impl UpdateTemplate {
    pub fn apply(self, t: &mut Template) -> Result<(), AppError> {
        // A template written before today's limits stays editable in its other fields.
        let recheck = self.body.is_some() || self.channel.is_some_and(|c| c != t.channel);
        if let Some(body) = self.body {
            t.body = body.into();
        }
        if let Some(buttons) = self.buttons {
            check_buttons(&buttons)?;
            t.buttons = Json(buttons);
        }
        if let Some(v) = self.name {
            t.name = v.into();
        }
        if let Some(v) = self.channel {
            t.channel = v;
        }
        if let Some(v) = self.language {
            t.language = v.into();
        }
        if let Some(v) = self.category {
            t.category = v;
        }
        if let Some(v) = self.status {
            t.status = v;
        }
        if let Some(v) = self.subject {
            t.subject = v.map(Into::into);
        }
        if let Some(v) = self.header {
            t.header = v.map(Into::into);
        }
        if let Some(v) = self.footer {
            t.footer = v.map(Into::into);
        }
        if recheck {
            check_body(&t.body, t.channel)?;
        }
        t.updated_at = Timestamp::now();
        Ok(())
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct TemplateFilter {
    pub channel: Option<Channel>,
    pub status: Option<TemplateStatus>,
    pub category: Option<TemplateCategory>,
    pub language: Option<ShortText>,
}

/// `?channel=` of duplicate and analytics.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct ChannelParam {
    pub channel: Option<Channel>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_split_into_text_and_placeholders() {
        let segs = parse_body("Hi {{contact.name}}, order {{ 1 }} shipped").unwrap();
        assert_eq!(
            segs,
            vec![
                Segment::Text("Hi "),
                Segment::Placeholder(Placeholder::Contact("name".into())),
                Segment::Text(", order "),
                Segment::Placeholder(Placeholder::Positional(1)),
                Segment::Text(" shipped"),
            ]
        );
    }

    #[test]
    fn rendering_fills_positional_and_contact_values() {
        let body = "Hi {{contact.name}}, order {{1}} ships {{2}}.{{3}} {{ unsubscribe_url }}";
        let out = render(
            body,
            &["A-1", "today"],
            |f| (f == "name").then_some("Ada"),
            "https://u",
        );
        assert_eq!(out, "Hi Ada, order A-1 ships today. https://u");
        let segments = parse_body("{{unsubscribe_url}}").unwrap();
        assert_eq!(
            rendered_bound(&segments, &[]),
            crate::unsubscribe::MAX_URL_CHARS
        );
    }

    #[test]
    fn broken_placeholders_are_refused() {
        for bad in [
            "Hi {{contact.password}}",
            "Hi {{0}}",
            "Hi {{name}}",
            "Hi {{1",
            "Hi {{101}}",
        ] {
            assert!(parse_body(bad).is_err(), "{bad}");
        }
        assert!(parse_body(&"{{1}}".repeat(MAX_PLACEHOLDERS)).is_ok());
        assert!(parse_body(&"{{1}}".repeat(MAX_PLACEHOLDERS + 1)).is_err());
    }

    #[test]
    fn the_rendered_length_is_bounded_per_channel() {
        let body = format!("{} {{{{contact.name}}}} {{{{1}}}}", "x".repeat(1_000));
        let segments = parse_body(&body).unwrap();
        assert_eq!(rendered_bound(&segments, &["abc"]), 1_000 + 2 + 200 + 3);
        assert!(check_rendered_length(&body, Channel::SocialB, &["abc"], "body").is_err());
        assert!(check_rendered_length(&body, Channel::SocialA, &["abc"], "body").is_ok());
        let long = "y".repeat(700);
        assert!(check_rendered_length(&body, Channel::SocialA, &[&long], "body").is_ok());
        let longer = "y".repeat(900);
        assert!(check_rendered_length(&body, Channel::SocialA, &[&longer], "body").is_err());
    }
}

//! Contacts, their tags, company and activity history.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::Actor;
use crate::tags::Tag;
use parley_types::fields::{
    Email, HttpUrl, Label, Locale, Name, Phone, ShortText, Text, TimeZone, non_null, nullable,
};
use parley_types::time::Timestamp;

parley_types::text_enum!(
    /// What kind of contact this is.
    ContactType { Contact = "contact", Visitor = "visitor" }
);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompanyRef {
    pub id: Uuid,
    pub name: String,
    pub domain: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Contact {
    pub id: Uuid,
    pub organization_id: Uuid,
    #[serde(rename = "type")]
    pub kind: ContactType,
    pub name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub avatar: Option<String>,
    pub country: Option<String>,
    pub language: Option<String>,
    pub position: Option<String>,
    /// An IANA time zone name, e.g. `Europe/Berlin`.
    pub timezone: Option<String>,
    pub source: String,
    pub external_id: Option<String>,
    pub channel_data: Option<String>,
    pub company_id: Option<Uuid>,
    /// Read from the company; not stored on the contact.
    pub company_name: Option<String>,
    pub company: Option<CompanyRef>,
    #[serde(skip)]
    pub company_domain: Option<String>,
    pub widget_guest_id: Option<String>,
    pub do_not_contact: bool,
    pub is_anonymous: bool,
    pub is_potential_client: bool,
    pub messaging_a_opted_out: bool,
    pub messaging_a_opted_out_at: Option<Timestamp>,
    pub tags: Vec<Tag>,
    /// The history, newest first; only when one contact is read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activities: Option<Vec<ContactActivity>>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(Contact);

impl Contact {
    /// Fills `company` from the joined company columns.
    pub fn fill_company(&mut self) {
        self.company = match (self.company_id, &self.company_name) {
            (Some(id), Some(name)) => Some(CompanyRef {
                id,
                name: name.clone(),
                domain: self.company_domain.clone(),
            }),
            _ => None,
        };
    }
}

parley_types::text_enum!(
    /// What happened to a contact.
    ActivityType {
        Created = "created",
        Updated = "updated",
        TagAdded = "tag_added",
        TagRemoved = "tag_removed",
        ConvertedFromLead = "converted_from_lead",
    }
);

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ContactActivity {
    pub id: Uuid,
    pub contact_id: Uuid,
    #[serde(rename = "type")]
    pub kind: ActivityType,
    pub actor_id: Option<String>,
    pub actor_name: Option<String>,
    pub actor_type: String,
    pub description: String,
    /// For `updated`: the name of the field that changed.
    pub metadata: Option<String>,
    pub old_value: Option<String>,
    pub new_value: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl ContactActivity {
    pub fn new(contact_id: Uuid, kind: ActivityType, actor: &Actor, description: String) -> Self {
        let now = Timestamp::now();
        ContactActivity {
            id: parley_types::ids::new_id(),
            contact_id,
            kind,
            actor_id: Some(actor.id.to_string()),
            actor_name: Some(actor.name.clone()),
            actor_type: actor.kind.to_owned(),
            description,
            metadata: None,
            old_value: None,
            new_value: None,
            created_at: now,
            updated_at: now,
        }
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "source": "website", "name": "Ada Lovelace", "email": "ada@example.com",
    "phone": "+4915112345678", "country": "DE", "language": "en", "position": "CTO",
    "timezone": "Europe/Berlin"
})))]
pub struct CreateContact {
    /// Where the contact came from, e.g. `website`, `import`, `widget`.
    pub source: Label,
    pub name: Option<Name>,
    pub email: Option<Email>,
    pub phone: Option<Phone>,
    pub avatar: Option<HttpUrl>,
    pub country: Option<ShortText>,
    pub language: Option<Locale>,
    pub position: Option<ShortText>,
    /// An IANA time zone name, e.g. `Europe/Berlin`.
    pub timezone: Option<TimeZone>,
    pub external_id: Option<ShortText>,
    pub channel_data: Option<Text>,
    /// A company of the organization.
    pub company_id: Option<Uuid>,
    pub do_not_contact: Option<bool>,
    pub is_anonymous: Option<bool>,
    pub is_potential_client: Option<bool>,
    /// Tags of the organization.
    #[cfg_attr(feature = "openapi", schema(max_items = 50))]
    pub tag_ids: Option<Vec<Uuid>>,
}

impl CreateContact {
    pub fn into_contact(self, organization_id: Uuid) -> (Contact, Vec<Uuid>) {
        let now = Timestamp::now();
        let contact = Contact {
            id: parley_types::ids::new_id(),
            organization_id,
            kind: ContactType::Contact,
            name: self.name.map(Into::into),
            email: self.email.map(Into::into),
            phone: self.phone.map(Into::into),
            avatar: self.avatar.map(Into::into),
            country: self.country.map(Into::into),
            language: self.language.map(Into::into),
            position: self.position.map(Into::into),
            timezone: self.timezone.map(Into::into),
            source: self.source.into(),
            external_id: self.external_id.map(Into::into),
            channel_data: self.channel_data.map(Into::into),
            company_id: self.company_id,
            company_name: None,
            company: None,
            company_domain: None,
            widget_guest_id: None,
            do_not_contact: self.do_not_contact.unwrap_or(false),
            is_anonymous: self.is_anonymous.unwrap_or(false),
            is_potential_client: self.is_potential_client.unwrap_or(false),
            messaging_a_opted_out: false,
            messaging_a_opted_out_at: None,
            tags: Vec::new(),
            activities: None,
            created_at: now,
            updated_at: now,
        };
        (contact, self.tag_ids.unwrap_or_default())
    }
}

/// PATCH body: absent fields are left alone; `null` clears an optional field.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"position": "CEO", "doNotContact": true})))]
pub struct UpdateContact {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub source: Option<Label>,
    #[serde(default, deserialize_with = "nullable")]
    pub name: Option<Option<Name>>,
    #[serde(default, deserialize_with = "nullable")]
    pub email: Option<Option<Email>>,
    #[serde(default, deserialize_with = "nullable")]
    pub phone: Option<Option<Phone>>,
    #[serde(default, deserialize_with = "nullable")]
    pub avatar: Option<Option<HttpUrl>>,
    #[serde(default, deserialize_with = "nullable")]
    pub country: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "nullable")]
    pub language: Option<Option<Locale>>,
    #[serde(default, deserialize_with = "nullable")]
    pub position: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "nullable")]
    pub timezone: Option<Option<TimeZone>>,
    #[serde(default, deserialize_with = "nullable")]
    pub external_id: Option<Option<ShortText>>,
    #[serde(default, deserialize_with = "nullable")]
    pub channel_data: Option<Option<Text>>,
    #[serde(default, deserialize_with = "nullable")]
    pub company_id: Option<Option<Uuid>>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub do_not_contact: Option<bool>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_anonymous: Option<bool>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub is_potential_client: Option<bool>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub messaging_a_opted_out: Option<bool>,
    /// Replaces the contact's tags.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[cfg_attr(feature = "openapi", schema(max_items = 50))]
    pub tag_ids: Option<Vec<Uuid>>,
}

/// One changed field, for the activity log.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldChange {
    pub field: &'static str,
    pub old: Option<String>,
    pub new: Option<String>,
}

fn set<T: PartialEq + Clone, F: Into<T>>(target: &mut T, value: Option<F>) {
    if let Some(v) = value {
        *target = v.into();
    }
}

fn set_opt<F: Into<String>>(target: &mut Option<String>, value: Option<Option<F>>) {
    if let Some(v) = value {
        *target = v.map(Into::into);
    }
}

impl UpdateContact {
    /// Applies the patch; returns the changed fields, and the new tag set if one was given.
    pub fn apply(self, c: &mut Contact, now: Timestamp) -> (Vec<FieldChange>, Option<Vec<Uuid>>) {
        let before = c.clone();
        set(&mut c.source, self.source.map(String::from));
        set_opt(&mut c.name, self.name);
        set_opt(&mut c.email, self.email);
        set_opt(&mut c.phone, self.phone);
        set_opt(&mut c.avatar, self.avatar);
        set_opt(&mut c.country, self.country);
        set_opt(&mut c.language, self.language);
        set_opt(&mut c.position, self.position);
        set_opt(&mut c.timezone, self.timezone);
        set_opt(&mut c.external_id, self.external_id);
        set_opt(&mut c.channel_data, self.channel_data);
        if let Some(company) = self.company_id {
            c.company_id = company;
        }
        set(&mut c.do_not_contact, self.do_not_contact);
        set(&mut c.is_anonymous, self.is_anonymous);
        set(&mut c.is_potential_client, self.is_potential_client);
        if let Some(opted_out) = self.messaging_a_opted_out
            && opted_out != c.messaging_a_opted_out
        {
            c.messaging_a_opted_out = opted_out;
            c.messaging_a_opted_out_at = opted_out.then_some(now);
        }
        let changes = diff(&before, c);
        if !changes.is_empty() {
            c.updated_at = now;
        }
        (changes, self.tag_ids)
    }
}

fn text<T: ToString>(v: &Option<T>) -> Option<String> {
    v.as_ref().map(ToString::to_string)
}

/// The fields that differ between two versions of a contact, in API names.
pub fn diff(a: &Contact, b: &Contact) -> Vec<FieldChange> {
    let mut out = Vec::new();
    let mut push = |field, old: Option<String>, new: Option<String>| {
        if old != new {
            out.push(FieldChange { field, old, new });
        }
    };
    push("source", Some(a.source.clone()), Some(b.source.clone()));
    push("name", a.name.clone(), b.name.clone());
    push("email", a.email.clone(), b.email.clone());
    push("phone", a.phone.clone(), b.phone.clone());
    push("avatar", a.avatar.clone(), b.avatar.clone());
    push("country", a.country.clone(), b.country.clone());
    push("language", a.language.clone(), b.language.clone());
    push("position", a.position.clone(), b.position.clone());
    push("timezone", a.timezone.clone(), b.timezone.clone());
    push("externalId", a.external_id.clone(), b.external_id.clone());
    push(
        "channelData",
        a.channel_data.clone(),
        b.channel_data.clone(),
    );
    push("companyId", text(&a.company_id), text(&b.company_id));
    push(
        "doNotContact",
        Some(a.do_not_contact.to_string()),
        Some(b.do_not_contact.to_string()),
    );
    push(
        "isAnonymous",
        Some(a.is_anonymous.to_string()),
        Some(b.is_anonymous.to_string()),
    );
    push(
        "isPotentialClient",
        Some(a.is_potential_client.to_string()),
        Some(b.is_potential_client.to_string()),
    );
    push(
        "messagingAOptedOut",
        Some(a.messaging_a_opted_out.to_string()),
        Some(b.messaging_a_opted_out.to_string()),
    );
    out
}

impl FieldChange {
    pub fn into_activity(self, contact_id: Uuid, actor: &Actor) -> ContactActivity {
        let mut a = ContactActivity::new(
            contact_id,
            ActivityType::Updated,
            actor,
            format!("{} changed", self.field),
        );
        a.metadata = Some(self.field.to_owned());
        a.old_value = self.old;
        a.new_value = self.new;
        a
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct ContactFilter {
    /// A tag id or a tag name.
    pub tag: Option<ShortText>,
    pub company_id: Option<Uuid>,
    pub source: Option<ShortText>,
    #[serde(rename = "type")]
    #[cfg_attr(feature = "openapi", param(rename = "type"))]
    pub kind: Option<ContactType>,
    /// Exact email, compared without case.
    pub email: Option<ShortText>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contact() -> Contact {
        let req: CreateContact =
            serde_json::from_value(serde_json::json!({"source": "web", "name": "Ada"})).unwrap();
        req.into_contact(Uuid::now_v7()).0
    }

    #[test]
    fn a_patch_reports_only_what_changed() {
        let mut c = contact();
        let patch: UpdateContact = serde_json::from_value(
            serde_json::json!({"name": "Ada", "position": "CTO", "email": null}),
        )
        .unwrap();
        let (changes, tags) = patch.apply(&mut c, Timestamp::now());
        assert_eq!(
            changes,
            vec![FieldChange {
                field: "position",
                old: None,
                new: Some("CTO".into())
            }]
        );
        assert!(tags.is_none());
    }

    #[test]
    fn null_clears_and_absent_keeps() {
        let mut c = contact();
        let patch: UpdateContact =
            serde_json::from_value(serde_json::json!({"name": null})).unwrap();
        let (changes, _) = patch.apply(&mut c, Timestamp::now());
        assert_eq!(c.name, None);
        assert_eq!(changes[0].field, "name");
        assert_eq!(c.source, "web");
    }

    #[test]
    fn a_required_field_cannot_be_nulled() {
        assert!(
            serde_json::from_value::<UpdateContact>(serde_json::json!({"source": null})).is_err()
        );
    }
}

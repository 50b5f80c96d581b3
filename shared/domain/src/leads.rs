//! Leads: prospects that can be converted into contacts.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::contacts::{Contact, ContactType};
use crate::tags::Tag;
use crate::users::UserSummary;
use parley_types::error::{AppError, FieldError};
use parley_types::fields::{
    Currency, Email, Label, Money, Name, Phone, ShortText, Text, non_null, nullable,
};
use parley_types::time::Timestamp;

parley_types::text_enum!(
    /// Where a lead stands. `converted` is only reached through `POST /leads/{id}/convert`.
    LeadStatus {
        New = "new",
        Contacted = "contacted",
        Qualified = "qualified",
        Unqualified = "unqualified",
        Converted = "converted",
    }
);

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Lead {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub source: Option<String>,
    pub notes: Option<String>,
    /// The deal value, with two decimals.
    #[serde(with = "rust_decimal::serde::float_option")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub value: Option<rust_decimal::Decimal>,
    pub currency: Option<String>,
    pub status: LeadStatus,
    pub assignee_id: Option<Uuid>,
    pub assignee: Option<UserSummary>,
    /// The contact this lead became.
    pub contact_id: Option<Uuid>,
    pub converted_at: Option<Timestamp>,
    pub tags: Vec<Tag>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(Lead);

parley_types::text_enum!(
    /// The statuses an update may give a lead: all but `converted`, which only
    /// `POST /leads/{id}/convert` reaches.
    LeadStatusUpdate {
        New = "new",
        Contacted = "contacted",
        Qualified = "qualified",
        Unqualified = "unqualified",
    }
);

impl From<LeadStatusUpdate> for LeadStatus {
    fn from(status: LeadStatusUpdate) -> Self {
        match status {
            LeadStatusUpdate::New => LeadStatus::New,
            LeadStatusUpdate::Contacted => LeadStatus::Contacted,
            LeadStatusUpdate::Qualified => LeadStatus::Qualified,
            LeadStatusUpdate::Unqualified => LeadStatus::Unqualified,
        }
    }
}

impl Lead {
    /// The contact a lead becomes when no contact has its email or phone.
    pub fn new_contact(&self, now: Timestamp) -> Contact {
        Contact {
            id: parley_types::ids::new_id(),
            organization_id: self.organization_id,
            kind: ContactType::Contact,
            name: self.name.clone(),
            email: self.email.clone(),
            phone: self.phone.clone(),
            avatar: None,
            country: None,
            language: None,
            position: None,
            timezone: None,
            source: self.source.clone().unwrap_or_else(|| "lead".to_owned()),
            external_id: None,
            channel_data: None,
            company_id: None,
            company_name: None,
            company: None,
            company_domain: None,
            widget_guest_id: None,
            do_not_contact: false,
            is_anonymous: false,
            is_potential_client: true,
            messaging_a_opted_out: false,
            messaging_a_opted_out_at: None,
            tags: Vec::new(),
            activities: None,
            created_at: now,
            updated_at: now,
        }
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "name": "Charles Babbage", "email": "charles@example.com", "phone": "+442071234567",
    "source": "website", "notes": "Asked for a demo", "value": 12500.5, "currency": "GBP"
})))]
pub struct CreateLead {
    pub name: Option<Name>,
    pub email: Option<Email>,
    pub phone: Option<Phone>,
    pub source: Option<Label>,
    pub notes: Option<Text>,
    pub value: Option<Money>,
    pub currency: Option<Currency>,
    /// A user of the organization.
    pub assignee_id: Option<Uuid>,
    /// Tags of the organization.
    #[cfg_attr(feature = "openapi", schema(max_items = 50))]
    pub tag_ids: Option<Vec<Uuid>>,
}

impl CreateLead {
    pub fn into_lead(self, organization_id: Uuid) -> Result<(Lead, Vec<Uuid>), AppError> {
        if self.name.is_none() && self.email.is_none() && self.phone.is_none() {
            return Err(AppError::Validation(
                ["name", "email", "phone"]
                    .into_iter()
                    .map(|f| {
                        FieldError::new(f, "required", "one of name, email or phone is required")
                    })
                    .collect(),
            ));
        }
        let now = Timestamp::now();
        let lead = Lead {
            id: parley_types::ids::new_id(),
            organization_id,
            name: self.name.map(Into::into),
            email: self.email.map(Into::into),
            phone: self.phone.map(Into::into),
            source: self.source.map(Into::into),
            notes: self.notes.map(Into::into),
            value: self.value.map(Money::get),
            currency: self.currency.map(Into::into),
            status: LeadStatus::New,
            assignee_id: self.assignee_id,
            assignee: None,
            contact_id: None,
            converted_at: None,
            tags: Vec::new(),
            created_at: now,
            updated_at: now,
        };
        Ok((lead, self.tag_ids.unwrap_or_default()))
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"status": "qualified", "value": 15000})))]
pub struct UpdateLead {
    #[serde(default, deserialize_with = "nullable")]
    pub name: Option<Option<Name>>,
    #[serde(default, deserialize_with = "nullable")]
    pub email: Option<Option<Email>>,
    #[serde(default, deserialize_with = "nullable")]
    pub phone: Option<Option<Phone>>,
    #[serde(default, deserialize_with = "nullable")]
    pub source: Option<Option<Label>>,
    #[serde(default, deserialize_with = "nullable")]
    pub notes: Option<Option<Text>>,
    #[serde(default, deserialize_with = "nullable")]
    pub value: Option<Option<Money>>,
    #[serde(default, deserialize_with = "nullable")]
    pub currency: Option<Option<Currency>>,
    /// `new`, `contacted`, `qualified` or `unqualified` (a converted lead keeps its status).
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub status: Option<LeadStatusUpdate>,
    #[serde(default, deserialize_with = "nullable")]
    pub assignee_id: Option<Option<Uuid>>,
    /// Replaces the lead's tags.
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    #[cfg_attr(feature = "openapi", schema(max_items = 50))]
    pub tag_ids: Option<Vec<Uuid>>,
}

impl UpdateLead {
    /// Applies the patch; returns the new tag set if one was given.
    pub fn apply(self, lead: &mut Lead) -> Result<Option<Vec<Uuid>>, AppError> {
        if let Some(status) = self.status {
            let status = LeadStatus::from(status);
            if lead.status == LeadStatus::Converted && status != lead.status {
                return Err(AppError::invalid_state("a converted lead keeps its status"));
            }
            lead.status = status;
        }
        fn opt<F: Into<String>>(t: &mut Option<String>, v: Option<Option<F>>) {
            if let Some(v) = v {
                *t = v.map(Into::into);
            }
        }
        opt(&mut lead.name, self.name);
        opt(&mut lead.email, self.email);
        opt(&mut lead.phone, self.phone);
        opt(&mut lead.source, self.source);
        opt(&mut lead.notes, self.notes);
        opt(&mut lead.currency, self.currency);
        if let Some(v) = self.value {
            lead.value = v.map(Money::get);
        }
        if let Some(a) = self.assignee_id {
            lead.assignee_id = a;
        }
        if lead.name.is_none() && lead.email.is_none() && lead.phone.is_none() {
            return Err(AppError::validation(
                "name",
                "required",
                "a lead keeps at least one of name, email or phone",
            ));
        }
        lead.updated_at = Timestamp::now();
        Ok(self.tag_ids)
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct LeadFilter {
    pub status: Option<LeadStatus>,
    pub assignee_id: Option<Uuid>,
    pub source: Option<ShortText>,
    /// Leads converted into this contact.
    pub contact_id: Option<Uuid>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contact_takes_the_leads_identity() {
        let req: CreateLead =
            serde_json::from_value(serde_json::json!({"name": "Ada", "email": "ada@example.com"}))
                .unwrap();
        let (lead, _) = req.into_lead(Uuid::now_v7()).unwrap();
        let c = lead.new_contact(Timestamp::now());
        assert_eq!(
            (c.name, c.email, c.source.as_str()),
            (lead.name, lead.email, "lead")
        );
    }

    #[test]
    fn a_lead_needs_a_name_email_or_phone() {
        let req: CreateLead = serde_json::from_value(serde_json::json!({"notes": "hi"})).unwrap();
        assert!(
            matches!(req.into_lead(Uuid::now_v7()), Err(AppError::Validation(e)) if e.len() == 3)
        );
    }
}

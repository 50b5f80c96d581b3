//! Organizations: the tenants. Every other record belongs to one.

use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use uuid::Uuid;

use parley_types::time::Timestamp;

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Organization {
    pub id: Uuid,
    #[serde(rename = "organizationName")]
    pub name: String,
    pub slug: String,
    /// `{timezone, days, holidays}`: the business hours SLA targets count in.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub working_hours: Json<serde_json::Value>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"workingHours": {"timezone": "Europe/Berlin", "days": {
    "monday": [{"start": "09:00", "end": "17:00"}], "tuesday": [{"start": "09:00", "end": "17:00"}],
    "wednesday": [{"start": "09:00", "end": "17:00"}], "thursday": [{"start": "09:00", "end": "17:00"}],
    "friday": [{"start": "09:00", "end": "15:00"}]},
    "holidays": [{"startDate": "2026-12-24", "endDate": "2026-12-26", "label": "Christmas"}]}})))]
pub struct UpdateOrganization {
    #[serde(rename = "organizationName")]
    pub name: Option<parley_types::fields::Name>,
    /// Business hours for SLA policies with `businessHoursOnly`. Changing them changes the
    /// deadlines of conversations and tickets started afterwards.
    pub working_hours: Option<crate::business_hours::WorkingHours>,
}

impl UpdateOrganization {
    pub fn apply(self, o: &mut Organization) -> Result<(), parley_types::error::AppError> {
        if let Some(name) = self.name {
            o.name = name.into();
        }
        if let Some(hours) = self.working_hours {
            hours.calendar("workingHours")?;
            o.working_hours = Json(serde_json::to_value(&hours).unwrap_or_default());
        }
        o.updated_at = Timestamp::now();
        Ok(())
    }
}

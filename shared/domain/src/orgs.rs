//! Organizations: the tenants. Every other record belongs to one.

use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use uuid::Uuid;

use crate::send_rules::{FrequencyCaps, QuietHours};
use crate::suppressions::SoftBounceLimit;
use parley_types::fields::nullable;
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
    /// Bulk sends wait outside this daily window of each contact's local time (the contact's
    /// `timezone`, else `workingHours.timezone`); `null`: none.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<QuietHours>))]
    pub quiet_hours: Option<Json<QuietHours>>,
    /// At most this many bulk messages per contact per rolling day and week, per channel.
    #[cfg_attr(feature = "openapi", schema(value_type = FrequencyCaps))]
    pub frequency_caps: Json<FrequencyCaps>,
    /// An address that soft-bounces `count` times within `days` days is suppressed on that
    /// channel (`soft_bounce_limit`).
    #[cfg_attr(feature = "openapi", schema(value_type = SoftBounceLimit))]
    pub soft_bounce_limit: Json<SoftBounceLimit>,
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
    /// A daily window of quiet time in each contact's local time; `null` removes it.
    #[serde(default, deserialize_with = "nullable")]
    pub quiet_hours: Option<Option<QuietHours>>,
    /// Replaces the caps; `{}` removes them all.
    #[serde(default, deserialize_with = "parley_types::fields::non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub frequency_caps: Option<FrequencyCaps>,
    /// Replaces the soft-bounce rule (default `{"count": 3, "days": 7}`).
    #[serde(default, deserialize_with = "parley_types::fields::non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub soft_bounce_limit: Option<SoftBounceLimit>,
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
        if let Some(quiet) = self.quiet_hours {
            if let Some(q) = &quiet {
                q.window("quietHours")?;
            }
            o.quiet_hours = quiet.map(Json);
        }
        if let Some(caps) = self.frequency_caps {
            caps.check("frequencyCaps")?;
            o.frequency_caps = Json(caps);
        }
        if let Some(limit) = self.soft_bounce_limit {
            limit.check("softBounceLimit")?;
            o.soft_bounce_limit = Json(limit);
        }
        o.updated_at = Timestamp::now();
        Ok(())
    }
}

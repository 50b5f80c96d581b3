//! Segments: saved contact filters, usable as a broadcast's audience.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::contacts::ContactType;
use parley_types::error::AppError;
use parley_types::fields::{Locale, Name, ShortText, non_null};
use parley_types::time::Timestamp;

/// Tags one filter may name.
pub const MAX_TAGS: usize = 50;

/// Which contacts a segment holds: every condition given must hold (an empty filter holds
/// every contact of the organization).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"tagIds": ["0193a1f2-7c4e-7d2a-9b1c-2f3e4d5c6b7c"], "source": "website", "createdAfter": "2026-01-01T00:00:00.000Z"})))]
pub struct SegmentFilter {
    /// Contacts with at least one of these tags (ids of the organization's tags).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(max_items = 50))]
    pub tag_ids: Vec<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<ShortText>,
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<ContactType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub company_id: Option<Uuid>,
    /// Two-letter country code as stored on contacts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<ShortText>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<Locale>,
    /// Contacts created at or after this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_after: Option<Timestamp>,
    /// Contacts created before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_before: Option<Timestamp>,
}

impl SegmentFilter {
    /// Checks the filter's own rules (the tags' existence is checked against the database).
    pub fn check(self) -> Result<Self, AppError> {
        parley_types::fields::check_len("filter.tagIds", self.tag_ids.len(), MAX_TAGS)?;
        if let (Some(after), Some(before)) = (self.created_after, self.created_before)
            && after >= before
        {
            return Err(AppError::validation(
                "filter.createdAfter",
                "invalid_value",
                "must be before createdBefore",
            ));
        }
        let mut f = self;
        f.tag_ids = parley_types::ids::dedup(f.tag_ids);
        Ok(f)
    }
}

#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Segment {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub name: String,
    pub filter: SegmentFilter,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
parley_types::keyed!(Segment);

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"name": "Website sign-ups", "filter": {"source": "website"}})))]
pub struct CreateSegment {
    /// Unique in the organization, compared without case.
    pub name: Name,
    pub filter: SegmentFilter,
}

impl CreateSegment {
    pub fn into_segment(self, organization_id: Uuid) -> Result<Segment, AppError> {
        let now = Timestamp::now();
        Ok(Segment {
            id: parley_types::ids::new_id(),
            organization_id,
            name: self.name.into(),
            filter: self.filter.check()?,
            created_at: now,
            updated_at: now,
        })
    }
}

/// A change to a segment: only the fields sent change; `filter` is replaced whole.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({"filter": {"source": "ads"}})))]
pub struct UpdateSegment {
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub name: Option<Name>,
    #[serde(default, deserialize_with = "non_null")]
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub filter: Option<SegmentFilter>,
}

impl UpdateSegment {
    pub fn apply(self, s: &mut Segment) -> Result<(), AppError> {
        if let Some(name) = self.name {
            s.name = name.into();
        }
        if let Some(filter) = self.filter {
            s.filter = filter.check()?;
        }
        s.updated_at = Timestamp::now();
        Ok(())
    }
}

/// `GET /segments/{id}/count`: the contacts the segment holds now, and of them those a
/// broadcast would skip. Counted like list totals: exact up to 10,000; past that `contacts` is
/// 10,000, `totalExact` false, and the two figures below count among the first 10,001 only.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SegmentCount {
    pub contacts: i64,
    /// False when the segment holds more than `contacts`.
    pub total_exact: bool,
    /// Marked do-not-contact: skipped on every channel.
    pub do_not_contact: i64,
    /// Opted out of `messaging_a` (and not do-not-contact): skipped on that channel.
    pub messaging_a_opted_out: i64,
}

//! Timestamps as docs/api.md fixes them: RFC 3339, UTC, milliseconds (`2026-11-22T14:27:27.123Z`).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Datelike, SecondsFormat, SubsecRound, Utc};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
#[cfg(feature = "openapi")]
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
#[cfg(feature = "openapi")]
use utoipa::openapi::{RefOr, Schema};
#[cfg(feature = "openapi")]
use utoipa::{PartialSchema, ToSchema};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, sqlx::Type)]
#[sqlx(transparent)]
pub struct Timestamp(pub DateTime<Utc>);

/// Where the SLA rules read the time: the system's clock, which tests may move forward
/// (`advance`) so that deadlines fall due without waiting for them. Clones share one clock.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    /// Microseconds this clock runs ahead of the system's; zero outside tests.
    ahead_us: Arc<AtomicI64>,
}

impl Clock {
    /// The system's clock.
    pub fn system() -> Self {
        Clock::default()
    }

    /// Now on this clock, to the microsecond.
    pub fn now(&self) -> Timestamp {
        let ahead = chrono::Duration::microseconds(self.ahead_us.load(Ordering::Relaxed));
        Timestamp(Timestamp::now().0 + ahead)
    }

    /// Moves this clock (and every clone of it) forward by `by`.
    pub fn advance(&self, by: std::time::Duration) {
        let us = i64::try_from(by.as_micros()).unwrap_or(i64::MAX);
        self.ahead_us.fetch_add(us, Ordering::Relaxed);
    }
}

impl Timestamp {
    /// Now, to the microsecond: what Postgres keeps, so a value read back equals the one written.
    pub fn now() -> Self {
        Timestamp(Utc::now().trunc_subsecs(6))
    }

    /// An RFC 3339 date-time whose UTC instant is in the years 0000 to 9999: what RFC 3339
    /// can write back (a `9999-12-31T23:00:00-05:00` would be in the year 10000) and far
    /// inside Postgres' range.
    pub fn parse(s: &str) -> Option<Self> {
        let t = DateTime::parse_from_rfc3339(s).ok()?.with_timezone(&Utc);
        (0..=9999).contains(&t.year()).then_some(Timestamp(t))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.to_rfc3339_opts(SecondsFormat::Millis, true))
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(t: DateTime<Utc>) -> Self {
        Timestamp(t)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Timestamp::parse(&s).ok_or_else(|| {
            crate::fields::invalid::<D::Error>(
                "invalid_format",
                "must be an RFC 3339 date-time such as 2026-11-22T14:27:27.123Z, in the years 0000 to 9999 (UTC)",
            )
        })
    }
}

#[cfg(feature = "openapi")]
impl PartialSchema for Timestamp {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some(
                "RFC 3339; the instant must fall in the years 0000 to 9999 (UTC). Answers use UTC \
                 with milliseconds.",
            ))
            .examples(["2026-11-22T14:27:27.123Z"])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl ToSchema for Timestamp {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_milliseconds_and_z() {
        let t = Timestamp::parse("2026-11-22T15:27:27.123456+01:00").unwrap();
        assert_eq!(t.to_string(), "2026-11-22T14:27:27.123Z");
    }

    #[test]
    fn rejects_a_date_without_time() {
        assert!(Timestamp::parse("2026-11-22").is_none());
    }

    #[test]
    fn instants_past_what_rfc_3339_writes_are_refused() {
        assert!(Timestamp::parse("9999-12-31T23:59:59.999Z").is_some());
        assert!(Timestamp::parse("9999-12-31T23:00:00-05:00").is_none());
        assert_eq!(
            Timestamp::parse("0001-01-01T00:00:00+01:00")
                .unwrap()
                .to_string(),
            "0000-12-31T23:00:00.000Z"
        );
    }
}

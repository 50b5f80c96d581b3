//! Timestamps as docs/api.md fixes them: RFC 3339, UTC, milliseconds (`2026-11-22T14:27:27.123Z`).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use chrono::{DateTime, Datelike, SecondsFormat, SubsecRound, Timelike, Utc};
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

    /// The instant as answers write it, into `buf`: digits written in place, no allocation
    /// and no formatting machinery (every answer writes its records' times). An instant
    /// outside the years 0000 to 9999, or in a leap second, is written by chrono instead.
    fn write<'a>(&self, buf: &'a mut [u8; 24]) -> Option<&'a str> {
        let t = &self.0;
        let year = u32::try_from(t.year()).ok().filter(|y| *y <= 9999)?;
        let nanos = t.timestamp_subsec_nanos();
        if nanos >= 1_000_000_000 {
            return None;
        }
        let secs = t.num_seconds_from_midnight();
        let mut put = |at: usize, value: u32, digits: usize| {
            let mut v = value;
            for i in (at..at + digits).rev() {
                buf[i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
        };
        put(0, year, 4);
        put(5, t.month(), 2);
        put(8, t.day(), 2);
        put(11, secs / 3600, 2);
        put(14, secs / 60 % 60, 2);
        put(17, secs % 60, 2);
        put(20, nanos / 1_000_000, 3);
        for (i, c) in [
            (4, b'-'),
            (7, b'-'),
            (10, b'T'),
            (13, b':'),
            (16, b':'),
            (19, b'.'),
            (23, b'Z'),
        ] {
            buf[i] = c;
        }
        std::str::from_utf8(buf).ok()
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.write(&mut [0; 24]) {
            Some(s) => f.write_str(s),
            None => f.write_str(&self.0.to_rfc3339_opts(SecondsFormat::Millis, true)),
        }
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(t: DateTime<Utc>) -> Self {
        Timestamp(t)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.write(&mut [0; 24]) {
            Some(text) => s.serialize_str(text),
            None => s.collect_str(self),
        }
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

/// A `scheduledAt` as written: the instant it names, if it has an offset, and its date and time
/// of day as written, which a local-time broadcast sends at in each contact's zone
/// (`2026-11-28T09:00:00Z`, `2026-11-28T09:00:00+05:00` and `2026-11-28T09:00:00` all read
/// 09:00 there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduledTime {
    pub instant: Option<Timestamp>,
    pub wall: chrono::NaiveDateTime,
}

impl ScheduledTime {
    pub fn parse(s: &str) -> Option<Self> {
        if let Ok(t) = DateTime::parse_from_rfc3339(s) {
            let instant = Timestamp::parse(s)?;
            return Some(ScheduledTime {
                instant: Some(instant),
                wall: t.naive_local(),
            });
        }
        let wall = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
            .or_else(|_| chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M"))
            .ok()?;
        (1..=9998).contains(&wall.year()).then_some(ScheduledTime {
            instant: None,
            wall,
        })
    }
}

impl From<Timestamp> for ScheduledTime {
    fn from(t: Timestamp) -> Self {
        ScheduledTime {
            instant: Some(t),
            wall: t.0.naive_utc(),
        }
    }
}

impl<'de> Deserialize<'de> for ScheduledTime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ScheduledTime::parse(&s).ok_or_else(|| {
            crate::fields::invalid::<D::Error>(
                "invalid_format",
                "must be an RFC 3339 date-time such as 2026-11-22T14:27:27Z in the years 0001 to 9998; \
                 with sendIn contact_timezone the offset may be left out",
            )
        })
    }
}

#[cfg(feature = "openapi")]
impl PartialSchema for ScheduledTime {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some(
                "RFC 3339. With `sendIn: contact_timezone` only the date and time of day as \
                 written count (the wall time each contact is sent at in its own zone; the offset \
                 is disregarded and may be left out).",
            ))
            .examples(["2026-11-28T09:00:00Z"])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl ToSchema for ScheduledTime {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_milliseconds_and_z() {
        let t = Timestamp::parse("2026-11-22T15:27:27.123456+01:00").unwrap();
        assert_eq!(t.to_string(), "2026-11-22T14:27:27.123Z");
    }

    #[test]
    fn a_scheduled_time_keeps_its_wall_time_as_written() {
        let t = ScheduledTime::parse("2026-11-28T09:00:00+05:00").unwrap();
        assert_eq!(t.wall.to_string(), "2026-11-28 09:00:00");
        assert_eq!(t.instant.unwrap().to_string(), "2026-11-28T04:00:00.000Z");
        let local = ScheduledTime::parse("2026-11-28T09:30").unwrap();
        assert_eq!(
            (local.instant, local.wall.to_string().as_str()),
            (None, "2026-11-28 09:30:00")
        );
        assert!(ScheduledTime::parse("2026-11-28").is_none());
        assert!(ScheduledTime::parse("9999-12-31T23:00:00").is_none());
    }

    #[test]
    fn writes_what_chrono_writes() {
        use chrono::TimeZone;
        let chrono = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::Millis, true);
        let mut times: Vec<DateTime<Utc>> = [
            "0000-01-01T00:00:00Z",
            "0000-03-01T00:00:00.999999Z",
            "1969-12-31T23:59:59.999Z",
            "1970-01-01T00:00:00Z",
            "2000-02-29T12:34:56.007Z",
            "2026-11-22T14:27:27.123456Z",
            "9999-12-31T23:59:59.999999Z",
        ]
        .iter()
        .map(|s| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc))
        .collect();
        // Every day of a leap year and a common one, at a spread of times of day.
        let mut t = Utc.with_ymd_and_hms(2023, 1, 1, 0, 0, 0).unwrap();
        while t.year() < 2025 {
            times.push(t);
            t += chrono::Duration::microseconds(86_400_000_000 + 3_723_456_789);
        }
        for t in times {
            assert_eq!(Timestamp(t).to_string(), chrono(t));
            assert_eq!(
                serde_json::to_string(&Timestamp(t)).unwrap(),
                format!("\"{}\"", chrono(t))
            );
        }
        // Outside the years 0000 to 9999 and in a leap second, chrono writes it.
        let outside = [
            Utc.with_ymd_and_hms(-1, 6, 1, 0, 0, 0).unwrap(),
            Utc.with_ymd_and_hms(10000, 1, 1, 0, 0, 0).unwrap(),
            chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
                .and_then(|d| d.and_hms_milli_opt(23, 59, 59, 1_500))
                .unwrap()
                .and_utc(),
        ];
        for t in outside {
            assert_eq!(Timestamp(t).to_string(), chrono(t));
        }
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

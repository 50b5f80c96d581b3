//! Business hours: an organization's `workingHours` (time zone, working intervals per weekday,
//! holidays) and the clock SLA deadlines are counted on. A business-hours deadline is the
//! instant when that much working time has passed; local times are converted with the
//! zone's rules on each day, so a deadline across a daylight-saving change lands on the right
//! wall-clock time.

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use parley_types::error::{AppError, FieldError};
use parley_types::fields::{ShortText, TimeZone as TimeZoneName};

/// How far ahead a calendar looks for working time before it gives up (and counts wall-clock
/// time instead): ten years.
const HORIZON_DAYS: i64 = 3_660;
const MAX_INTERVALS_PER_DAY: usize = 10;
const MAX_HOLIDAYS: usize = 500;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", schema(example = json!({
    "timezone": "Europe/Berlin",
    "days": {"monday": [{"start": "09:00", "end": "17:00"}], "tuesday": [{"start": "09:00", "end": "12:30"}, {"start": "13:30", "end": "18:00"}]},
    "holidays": [{"startDate": "2026-12-24", "endDate": "2026-12-26", "label": "Christmas"}]
})))]
pub struct WorkingHours {
    /// IANA time zone the intervals and holidays are in.
    pub timezone: TimeZoneName,
    pub days: Days,
    #[serde(default)]
    pub holidays: Vec<Holiday>,
}

/// Working intervals per weekday; a day left out has none.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Days {
    #[serde(default)]
    pub monday: Vec<Interval>,
    #[serde(default)]
    pub tuesday: Vec<Interval>,
    #[serde(default)]
    pub wednesday: Vec<Interval>,
    #[serde(default)]
    pub thursday: Vec<Interval>,
    #[serde(default)]
    pub friday: Vec<Interval>,
    #[serde(default)]
    pub saturday: Vec<Interval>,
    #[serde(default)]
    pub sunday: Vec<Interval>,
}

/// `HH:MM` to `HH:MM` local time, the end after the start (`24:00` ends at midnight).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Interval {
    #[cfg_attr(
        feature = "openapi",
        schema(example = "09:00", pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$")
    )]
    pub start: String,
    #[cfg_attr(
        feature = "openapi",
        schema(example = "17:00", pattern = "^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$")
    )]
    pub end: String,
}

/// Days off, from `startDate` to `endDate` inclusive.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Holiday {
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = Date))]
    pub start_date: NaiveDate,
    #[cfg_attr(feature = "openapi", schema(value_type = String, format = Date))]
    pub end_date: NaiveDate,
    pub label: Option<ShortText>,
}

/// A working interval of one day: from `start` for `seconds`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Span {
    start: NaiveTime,
    seconds: i64,
}

/// Parsed, checked business hours.
#[derive(Debug, Clone)]
pub struct Calendar {
    tz: Tz,
    /// Monday first.
    days: [Vec<Span>; 7],
    holidays: Vec<(NaiveDate, NaiveDate)>,
}

/// Seconds since midnight of `HH:MM` (or `24:00` for an end), as the document's patterns
/// state.
fn parse_time(raw: &str, end: bool) -> Option<i64> {
    let (h, m) = raw.split_once(':')?;
    let two_digits = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
    if !two_digits(h) || !two_digits(m) {
        return None;
    }
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    let ok = (h < 24 && m < 60) || (end && h == 24 && m == 0);
    ok.then_some(h * 3600 + m * 60)
}

impl WorkingHours {
    /// Checks the hours and parses them; errors name fields under `field`
    /// (`workingHours.days.monday[0].end`).
    pub fn calendar(&self, field: &str) -> Result<Calendar, AppError> {
        let tz: Tz = self.timezone.as_str().parse().map_err(|_| {
            AppError::validation(
                format!("{field}.timezone"),
                "invalid_format",
                "unknown time zone",
            )
        })?;
        let named = [
            ("monday", &self.days.monday),
            ("tuesday", &self.days.tuesday),
            ("wednesday", &self.days.wednesday),
            ("thursday", &self.days.thursday),
            ("friday", &self.days.friday),
            ("saturday", &self.days.saturday),
            ("sunday", &self.days.sunday),
        ];
        let mut days: [Vec<Span>; 7] = Default::default();
        for (i, (name, intervals)) in named.into_iter().enumerate() {
            let at = format!("{field}.days.{name}");
            parley_types::fields::check_len(&at, intervals.len(), MAX_INTERVALS_PER_DAY)?;
            let mut previous_end = 0;
            for (j, interval) in intervals.iter().enumerate() {
                let bad = |part: &str, message: &str| {
                    AppError::Validation(vec![FieldError::new(
                        format!("{at}[{j}].{part}"),
                        "invalid_value",
                        message,
                    )])
                };
                let start = parse_time(&interval.start, false)
                    .ok_or_else(|| bad("start", "must be a time HH:MM"))?;
                let end = parse_time(&interval.end, true)
                    .ok_or_else(|| bad("end", "must be a time HH:MM (24:00 for midnight)"))?;
                if end <= start {
                    return Err(bad("end", "must be after start"));
                }
                if start < previous_end {
                    return Err(bad(
                        "start",
                        "intervals of a day must be in order and not overlap",
                    ));
                }
                previous_end = end;
                let seconds = end - start;
                let start = NaiveTime::from_num_seconds_from_midnight_opt(start as u32, 0)
                    .ok_or_else(|| bad("start", "must be a time HH:MM"))?;
                days[i].push(Span { start, seconds });
            }
        }
        if days.iter().all(Vec::is_empty) {
            return Err(AppError::validation(
                format!("{field}.days"),
                "required",
                "at least one day needs working hours",
            ));
        }
        parley_types::fields::check_len(
            &format!("{field}.holidays"),
            self.holidays.len(),
            MAX_HOLIDAYS,
        )?;
        let mut holidays = Vec::new();
        for (i, h) in self.holidays.iter().enumerate() {
            if h.end_date < h.start_date {
                return Err(AppError::validation(
                    format!("{field}.holidays[{i}].endDate"),
                    "invalid_value",
                    "must not be before startDate",
                ));
            }
            holidays.push((h.start_date, h.end_date));
        }
        Ok(Calendar { tz, days, holidays })
    }
}

impl Calendar {
    fn is_holiday(&self, date: NaiveDate) -> bool {
        self.holidays
            .iter()
            .any(|(from, to)| (*from..=*to).contains(&date))
    }

    /// The instant of a local time on a date: the earlier one when the time happens twice (the
    /// clock goes back), and the first instant after the gap when it does not happen (the
    /// clock goes forward).
    fn instant(&self, date: NaiveDate, time: NaiveTime, plus: i64) -> DateTime<Utc> {
        let local = date.and_time(time) + Duration::seconds(plus);
        let mut probe = local;
        for _ in 0..(4 * 60) {
            if let Some(t) = self.tz.from_local_datetime(&probe).earliest() {
                return t.with_timezone(&Utc);
            }
            probe += Duration::minutes(1);
        }
        Utc.from_utc_datetime(&local)
    }

    /// The working intervals (in UTC) that end after `from`, in order, the first one clipped
    /// to start at `from`.
    fn intervals_from(
        &self,
        from: DateTime<Utc>,
    ) -> impl Iterator<Item = (DateTime<Utc>, DateTime<Utc>)> + '_ {
        let first = from.with_timezone(&self.tz).date_naive() - Duration::days(1);
        (0..HORIZON_DAYS)
            .map(move |n| first + Duration::days(n))
            .filter(|date| !self.is_holiday(*date))
            .flat_map(move |date| {
                let weekday = date.weekday().num_days_from_monday() as usize;
                self.days[weekday].iter().map(move |span| {
                    let start = self.instant(date, span.start, 0);
                    let end = self.instant(date, span.start, span.seconds);
                    (start.max(from), end)
                })
            })
            .filter(|(start, end)| end > start)
    }

    /// The instant when `work` of working time has passed since `from`.
    pub fn add(&self, from: DateTime<Utc>, work: Duration) -> DateTime<Utc> {
        let mut left = work.max(Duration::zero());
        let mut last = from;
        for (start, end) in self.intervals_from(from) {
            let span = end - start;
            if left <= span {
                return start + left;
            }
            left -= span;
            last = end;
        }
        // No working time within the horizon: count what is left on the wall clock.
        last + left
    }

    /// Working time between `from` and `to` (zero when `to` is not after `from`).
    pub fn between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Duration {
        let mut total = Duration::zero();
        for (start, end) in self.intervals_from(from) {
            if start >= to {
                break;
            }
            total += end.min(to) - start;
        }
        total
    }
}

/// What SLA time is counted on.
#[derive(Debug, Clone)]
pub enum Clock {
    Wall,
    Business(Calendar),
}

impl Clock {
    pub fn add(&self, from: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
        match self {
            Clock::Wall => from + d,
            Clock::Business(c) => c.add(from, d),
        }
    }

    pub fn between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> Duration {
        match self {
            Clock::Wall => (to - from).max(Duration::zero()),
            Clock::Business(c) => c.between(from, to),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn calendar(v: serde_json::Value) -> Calendar {
        serde_json::from_value::<WorkingHours>(v)
            .unwrap()
            .calendar("workingHours")
            .unwrap()
    }

    fn nine_to_five(tz: &str) -> Calendar {
        let day = json!([{"start": "09:00", "end": "17:00"}]);
        calendar(json!({"timezone": tz, "days": {
            "monday": day, "tuesday": day, "wednesday": day, "thursday": day, "friday": day},
            "holidays": [{"startDate": "2026-12-24", "endDate": "2026-12-26", "label": "Christmas"}]}))
    }

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn deadlines_count_working_seconds_only() {
        let h = 3600;
        // (zone, start, working seconds, deadline)
        let cases = [
            // Inside a working day.
            ("UTC", "2026-11-23T10:00:00Z", 2 * h, "2026-11-23T12:00:00Z"),
            // Before opening: counting starts at 09:00.
            ("UTC", "2026-11-23T06:00:00Z", h, "2026-11-23T10:00:00Z"),
            // Past closing on Friday: the rest is on Monday.
            ("UTC", "2026-11-27T16:00:00Z", 2 * h, "2026-11-30T10:00:00Z"),
            // Started on a Saturday.
            (
                "UTC",
                "2026-11-28T12:00:00Z",
                30 * 60,
                "2026-11-30T09:30:00Z",
            ),
            // Over the Christmas holidays (Thursday 24 to Saturday 26 off).
            ("UTC", "2026-12-23T16:00:00Z", 2 * h, "2026-12-28T10:00:00Z"),
            // East of UTC: Tokyo's 09:00 is 00:00 UTC.
            (
                "Asia/Tokyo",
                "2026-11-23T23:30:00Z",
                h,
                "2026-11-24T01:00:00Z",
            ),
            // West of UTC: Los Angeles' Friday 16:00 is 00:00 UTC Saturday; Monday 09:00 is 17:00 UTC.
            (
                "America/Los_Angeles",
                "2026-11-28T00:00:00Z",
                2 * h,
                "2026-11-30T18:00:00Z",
            ),
            // Across the spring change in Berlin (29 March 2026): Friday 16:00 CET is 15:00 UTC,
            // Monday 10:00 CEST is 08:00 UTC.
            (
                "Europe/Berlin",
                "2026-03-27T15:00:00Z",
                2 * h,
                "2026-03-30T08:00:00Z",
            ),
            // Across the autumn change in New York (1 November 2026): Friday 16:00 EDT is
            // 20:00 UTC, Monday 10:00 EST is 15:00 UTC.
            (
                "America/New_York",
                "2026-10-30T20:00:00Z",
                2 * h,
                "2026-11-02T15:00:00Z",
            ),
            // Longer than a week: 60 working hours is seven and a half working days.
            (
                "UTC",
                "2026-11-02T09:00:00Z",
                60 * h,
                "2026-11-11T13:00:00Z",
            ),
        ];
        for (tz, start, secs, deadline) in cases {
            let c = nine_to_five(tz);
            let secs = Duration::seconds(secs);
            assert_eq!(
                c.add(at(start), secs),
                at(deadline),
                "{tz} {start} + {secs}"
            );
            assert_eq!(
                c.between(at(start), at(deadline)),
                secs,
                "{tz} {start} .. {deadline}"
            );
        }
    }

    #[test]
    fn a_working_day_that_the_clock_changes_on_is_shorter() {
        // Sunday 29 March 2026 in Berlin, 00:00 to 06:00 local: 02:00-03:00 does not exist.
        let c = calendar(json!({"timezone": "Europe/Berlin",
            "days": {"sunday": [{"start": "00:00", "end": "06:00"}]}}));
        let from = at("2026-03-28T23:00:00Z"); // Sunday 00:00 CET
        assert_eq!(c.add(from, Duration::hours(5)), at("2026-03-29T04:00:00Z")); // 06:00 CEST
        assert_eq!(
            c.between(from, at("2026-03-29T04:00:00Z")),
            Duration::hours(5)
        );
    }

    #[test]
    fn intervals_may_split_a_day_and_end_at_midnight() {
        let c = calendar(json!({"timezone": "UTC", "days": {"monday": [
            {"start": "08:00", "end": "12:00"}, {"start": "13:00", "end": "24:00"}]}}));
        assert_eq!(
            c.add(at("2026-11-23T11:00:00Z"), Duration::hours(2)),
            at("2026-11-23T14:00:00Z")
        );
        assert_eq!(
            c.add(at("2026-11-23T23:00:00Z"), Duration::hours(2)),
            at("2026-11-30T09:00:00Z")
        );
    }

    #[test]
    fn bad_hours_name_their_field() {
        let cases = [
            (json!({"timezone": "UTC", "days": {}}), "workingHours.days"),
            (
                json!({"timezone": "UTC", "days": {"monday": [{"start": "9am", "end": "17:00"}]}}),
                "workingHours.days.monday[0].start",
            ),
            (
                json!({"timezone": "UTC", "days": {"monday": [{"start": "10:00", "end": "09:00"}]}}),
                "workingHours.days.monday[0].end",
            ),
            (
                json!({"timezone": "UTC", "days": {"monday": [{"start": "09:00", "end": "12:00"}, {"start": "11:00", "end": "13:00"}]}}),
                "workingHours.days.monday[1].start",
            ),
            (
                json!({"timezone": "UTC", "days": {"friday": [{"start": "09:00", "end": "10:00"}]},
                    "holidays": [{"startDate": "2026-12-26", "endDate": "2026-12-24"}]}),
                "workingHours.holidays[0].endDate",
            ),
        ];
        for (v, field) in cases {
            let hours: WorkingHours = serde_json::from_value(v).unwrap();
            match hours.calendar("workingHours") {
                Err(AppError::Validation(e)) => assert_eq!(e[0].field, field),
                other => panic!("{field}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_wall_clock_counts_every_second() {
        let from = at("2026-11-28T12:00:00Z");
        assert_eq!(
            Clock::Wall.add(from, Duration::seconds(90)),
            at("2026-11-28T12:01:30Z")
        );
        assert_eq!(
            Clock::Wall.between(from, at("2026-11-28T12:01:30Z")),
            Duration::seconds(90)
        );
    }
}

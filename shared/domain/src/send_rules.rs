//! When a broadcast's message may go to one contact: at a wall time in the contact's
//! own zone (`sendIn: contact_timezone`), outside the quiet hours, and within the frequency cap.
//! The worker decides at sending time ([`SendPlan::decide`]); a recipient whose time has not
//! come is `held` until it does. `priority: high` broadcasts are exempt from quiet hours and
//! caps (not from their own local time). The caps themselves are counted in Redis by the
//! worker (`worker/src/frequency_caps.rs`); their settings are here.

use chrono::{DateTime, Duration, NaiveDateTime, NaiveTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::Channel;
use parley_types::error::AppError;

parley_types::text_enum!(
    /// Whose clock `scheduledAt` is read on: `utc` (the instant written) or `contact_timezone`
    /// (the date and time of day as written, in each contact's zone).
    SendIn {
        Utc = "utc",
        ContactTimezone = "contact_timezone",
    }
);

parley_types::text_enum!(
    /// What a local-time broadcast does for a contact whose local send time had passed when
    /// the broadcast was created: send at once, or skip it (`send_time_passed`).
    PastTimePolicy {
        SendNow = "send_now",
        Skip = "skip",
    }
);

/// The zones furthest ahead of and behind UTC (Pacific/Kiritimati, Etc/GMT+12): a wall time
/// comes first at `wall - 14 h` and last at `wall + 12 h`.
const AHEAD_HOURS: i64 = 14;
const BEHIND_HOURS: i64 = 12;

/// The first and the last instant a wall time comes in some zone.
pub fn wall_time_span(wall: NaiveDateTime) -> (DateTime<Utc>, DateTime<Utc>) {
    let as_utc = wall.and_utc();
    (
        as_utc - Duration::hours(AHEAD_HOURS),
        as_utc + Duration::hours(BEHIND_HOURS),
    )
}

/// The instant `wall` is in `tz`: the earlier of two in a repeated hour, and the time after
/// a skipped hour (a daylight-saving gap) as that many minutes later.
pub fn instant_in(tz: Tz, wall: NaiveDateTime) -> DateTime<Utc> {
    let mut at = wall;
    // No gap in the tz database is longer than a day.
    for _ in 0..48 {
        if let Some(t) = tz.from_local_datetime(&at).earliest() {
            return t.with_timezone(&Utc);
        }
        at += Duration::minutes(30);
    }
    wall.and_utc()
}

/// A daily window of quiet time in each contact's local time, from `start` to `end` (`HH:MM`;
/// across midnight when `end` is earlier; `start` equal to `end` is no quiet time at all).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self", deny_unknown_fields)]
#[cfg_attr(feature = "openapi", schema(example = json!({"start": "21:00", "end": "08:00"})))]
pub struct QuietHours {
    #[cfg_attr(
        feature = "openapi",
        schema(example = "21:00", pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$")
    )]
    pub start: String,
    #[cfg_attr(
        feature = "openapi",
        schema(example = "08:00", pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$")
    )]
    pub end: String,
}

fn time_of_day(raw: &str) -> Option<NaiveTime> {
    let two = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
    let (h, m) = raw.split_once(':')?;
    if !two(h) || !two(m) {
        return None;
    }
    NaiveTime::from_hms_opt(h.parse().ok()?, m.parse().ok()?, 0)
}

impl QuietHours {
    /// The window, checked (errors name `field.start` / `field.end`); `None` for an empty one.
    pub fn window(&self, field: &str) -> Result<Option<(NaiveTime, NaiveTime)>, AppError> {
        let parse = |raw: &str, part: &str| {
            time_of_day(raw).ok_or_else(|| {
                AppError::validation(
                    format!("{field}.{part}"),
                    "invalid_format",
                    "must be a time of day HH:MM (00:00 to 23:59)",
                )
            })
        };
        let (start, end) = (parse(&self.start, "start")?, parse(&self.end, "end")?);
        Ok((start != end).then_some((start, end)))
    }
}

/// Caps on one channel's bulk messages to one contact, over a rolling day and a rolling week.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self", rename_all = "camelCase", deny_unknown_fields)]
pub struct FrequencyCap {
    /// At most this many in any 24 hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub per_day: Option<u32>,
    /// At most this many in any 7 days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub per_week: Option<u32>,
}

/// The most one cap may allow: a contact's sends over a week are kept (one entry each).
pub const MAX_CAP: u32 = 1_000;

/// Frequency caps per channel (keyed by the channel's name); a channel left out has none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(remote = "Self", rename_all = "snake_case", deny_unknown_fields)]
#[cfg_attr(feature = "openapi", schema(example = json!({"email": {"perDay": 1, "perWeek": 3}})))]
pub struct FrequencyCaps {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messaging_a: Option<FrequencyCap>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<FrequencyCap>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub social_a: Option<FrequencyCap>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub social_b: Option<FrequencyCap>,
}

parley_types::objects_only!(serialize: QuietHours, FrequencyCap, FrequencyCaps);

impl FrequencyCaps {
    pub fn of(&self, channel: Channel) -> Option<FrequencyCap> {
        match channel {
            Channel::MessagingA => self.messaging_a,
            Channel::Email => self.email,
            Channel::SocialA => self.social_a,
            Channel::SocialB => self.social_b,
        }
    }

    /// Checks every cap: 1 to [`MAX_CAP`], at least one of the two per channel.
    pub fn check(&self, field: &str) -> Result<(), AppError> {
        for channel in Channel::ALL {
            let Some(cap) = self.of(*channel) else {
                continue;
            };
            let name = channel.as_str();
            if cap.per_day.is_none() && cap.per_week.is_none() {
                return Err(AppError::validation(
                    format!("{field}.{name}"),
                    "required",
                    "give perDay, perWeek or both",
                ));
            }
            for (part, n) in [("perDay", cap.per_day), ("perWeek", cap.per_week)] {
                if n.is_some_and(|n| !(1..=MAX_CAP).contains(&n)) {
                    return Err(AppError::validation(
                        format!("{field}.{name}.{part}"),
                        "out_of_range",
                        format!("must be 1 to {MAX_CAP}"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Why a recipient is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldReason {
    LocalTime,
    QuietHours,
    /// An operator paused the organization's sending.
    Paused,
}

impl HoldReason {
    pub fn as_str(self) -> &'static str {
        match self {
            HoldReason::LocalTime => "local_time",
            HoldReason::QuietHours => "quiet_hours",
            HoldReason::Paused => "paused",
        }
    }
}

/// What to do with one recipient now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Send,
    Hold {
        until: DateTime<Utc>,
        reason: HoldReason,
    },
    /// Its local send time had passed when the broadcast was scheduled, and it skips.
    SkipPast,
}

/// A local-time broadcast's send time.
#[derive(Debug, Clone, Copy)]
pub struct LocalSend {
    pub wall: NaiveDateTime,
    /// When the broadcast was due (`scheduledAt`: when the wall time first came anywhere, or
    /// when it was scheduled, if later): a send time before it had passed.
    pub requested_at: DateTime<Utc>,
    pub policy: PastTimePolicy,
}

/// A broadcast's timing rules, read once per job.
#[derive(Debug, Clone)]
pub struct SendPlan {
    /// The organization's zone (`workingHours.timezone`), for contacts without one.
    pub default_zone: Tz,
    pub local: Option<LocalSend>,
    /// Quiet hours that apply (none for `priority: high`).
    pub quiet: Option<(NaiveTime, NaiveTime)>,
}

impl SendPlan {
    /// Whether any recipient could be held or skipped: else every one is sent.
    pub fn is_free(&self) -> bool {
        self.local.is_none() && self.quiet.is_none()
    }

    /// The decision for a contact in `zone` (the default when absent or unknown) at `now`.
    pub fn decide(&self, zone: Option<&str>, now: DateTime<Utc>) -> Decision {
        if self.is_free() {
            return Decision::Send;
        }
        let tz = zone
            .and_then(|z| z.parse::<Tz>().ok())
            .unwrap_or(self.default_zone);
        if let Some(local) = self.local {
            let at = instant_in(tz, local.wall);
            if at > now {
                return Decision::Hold {
                    until: at,
                    reason: HoldReason::LocalTime,
                };
            }
            if at < local.requested_at && local.policy == PastTimePolicy::Skip {
                return Decision::SkipPast;
            }
        }
        if let Some((start, end)) = self.quiet
            && let Some(until) = quiet_until(tz, start, end, now)
        {
            return Decision::Hold {
                until,
                reason: HoldReason::QuietHours,
            };
        }
        Decision::Send
    }
}

/// When the quiet window `start`..`end` around `now` ends in `tz`, if `now` is in it.
fn quiet_until(
    tz: Tz,
    start: NaiveTime,
    end: NaiveTime,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let local = now.with_timezone(&tz).naive_local();
    let (date, time) = (local.date(), local.time());
    let end_date = if start < end {
        (start <= time && time < end).then_some(date)?
    } else if time >= start {
        date.succ_opt()?
    } else if time < end {
        date
    } else {
        return None;
    };
    // Never earlier than a minute from now, so a zone's odd day cannot hold it for no time.
    Some(instant_in(tz, end_date.and_time(end)).max(now + Duration::minutes(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn wall(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M").unwrap()
    }

    fn plan(local: Option<LocalSend>, quiet: Option<(&str, &str)>) -> SendPlan {
        SendPlan {
            default_zone: chrono_tz::UTC,
            local,
            quiet: quiet.map(|(s, e)| (time_of_day(s).unwrap(), time_of_day(e).unwrap())),
        }
    }

    #[test]
    fn a_local_time_comes_zone_by_zone() {
        let p = plan(
            Some(LocalSend {
                wall: wall("2026-11-28T09:00"),
                requested_at: utc("2026-11-27T00:00:00Z"),
                policy: PastTimePolicy::Skip,
            }),
            None,
        );
        let now = utc("2026-11-28T08:30:00Z");
        // Berlin (UTC+1): 09:00 came at 08:00Z; New York (UTC-5): comes at 14:00Z.
        assert_eq!(p.decide(Some("Europe/Berlin"), now), Decision::Send);
        assert_eq!(
            p.decide(Some("America/New_York"), now),
            Decision::Hold {
                until: utc("2026-11-28T14:00:00Z"),
                reason: HoldReason::LocalTime
            }
        );
        // No zone (or an unknown one): the organization's (UTC here).
        assert!(matches!(p.decide(None, now), Decision::Hold { .. }));
        assert!(matches!(
            p.decide(Some("Mars/Base"), now),
            Decision::Hold { .. }
        ));
    }

    #[test]
    fn a_local_time_past_at_creation_is_skipped_or_sent_as_asked() {
        let mut local = LocalSend {
            wall: wall("2026-11-28T09:00"),
            requested_at: utc("2026-11-28T12:00:00Z"),
            policy: PastTimePolicy::Skip,
        };
        let now = utc("2026-11-28T12:00:01Z");
        assert_eq!(
            plan(Some(local), None).decide(Some("Europe/Berlin"), now),
            Decision::SkipPast
        );
        local.policy = PastTimePolicy::SendNow;
        assert_eq!(
            plan(Some(local), None).decide(Some("Europe/Berlin"), now),
            Decision::Send
        );
    }

    #[test]
    fn quiet_hours_across_midnight_hold_until_their_end() {
        let p = plan(None, Some(("21:00", "08:00")));
        // 22:30 in Berlin: held until 08:00 Berlin the next day.
        assert_eq!(
            p.decide(Some("Europe/Berlin"), utc("2026-11-28T21:30:00Z")),
            Decision::Hold {
                until: utc("2026-11-29T07:00:00Z"),
                reason: HoldReason::QuietHours
            }
        );
        // 06:00 in Berlin: held until 08:00 the same day.
        assert_eq!(
            p.decide(Some("Europe/Berlin"), utc("2026-11-28T05:00:00Z")),
            Decision::Hold {
                until: utc("2026-11-28T07:00:00Z"),
                reason: HoldReason::QuietHours
            }
        );
        assert_eq!(
            p.decide(Some("Europe/Berlin"), utc("2026-11-28T12:00:00Z")),
            Decision::Send
        );
    }

    #[test]
    fn quiet_hours_within_a_day_and_an_empty_window() {
        let p = plan(None, Some(("12:00", "14:00")));
        assert!(matches!(
            p.decide(None, utc("2026-11-28T13:59:00Z")),
            Decision::Hold { .. }
        ));
        assert_eq!(p.decide(None, utc("2026-11-28T14:00:00Z")), Decision::Send);
        let empty = QuietHours {
            start: "09:00".into(),
            end: "09:00".into(),
        };
        assert_eq!(empty.window("quietHours").unwrap(), None);
        let bad = QuietHours {
            start: "24:00".into(),
            end: "9:00".into(),
        };
        assert!(bad.window("quietHours").is_err());
    }

    #[test]
    fn a_local_time_in_a_skipped_hour_is_sent_after_it() {
        // 2026-03-29 02:30 does not exist in Berlin (02:00 -> 03:00): sent at 03:00 local.
        let at = instant_in(chrono_tz::Europe::Berlin, wall("2026-03-29T02:30"));
        assert_eq!(at, utc("2026-03-29T01:00:00Z"));
    }

    #[test]
    fn caps_are_checked() {
        let caps: FrequencyCaps =
            serde_json::from_value(serde_json::json!({"email": {"perDay": 0}})).unwrap();
        assert!(caps.check("frequencyCaps").is_err());
        let caps: FrequencyCaps = serde_json::from_value(serde_json::json!({"email": {}})).unwrap();
        assert!(caps.check("frequencyCaps").is_err());
        let caps: FrequencyCaps =
            serde_json::from_value(serde_json::json!({"email": {"perWeek": 3}})).unwrap();
        // Objects only: serde's structs would read an array by position.
        assert!(serde_json::from_value::<FrequencyCaps>(serde_json::json!([null, null])).is_err());
        assert!(
            serde_json::from_value::<QuietHours>(serde_json::json!(["21:00", "08:00"])).is_err()
        );
        assert_eq!(
            serde_json::to_value(&caps).unwrap(),
            serde_json::json!({"email": {"perWeek": 3}})
        );
        caps.check("frequencyCaps").unwrap();
        assert_eq!(caps.of(Channel::Email).unwrap().per_week, Some(3));
        assert!(caps.of(Channel::SocialA).is_none());
    }
}

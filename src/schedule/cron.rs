//! Five-field cron expressions (`minute hour day-of-month month day-of-week`), read in a
//! time zone, as Gardener's hibernation schedules are (`00 20 * * 1-5`,
//! `location: Europe/Berlin`). Each field takes `*`, a value, a range `a-b`, a step
//! (`*/15`, `a-b/2`) and comma lists; months and days also take their English names
//! (`JAN`, `mon-fri`). When both day fields are restricted, a day matching either
//! matches, as in Vixie cron.
//!
//! Times are local to the zone: at a daylight-saving gap a time that does not exist
//! (02:30 on the spring change in Europe/Berlin) fires at the same distance after the gap
//! (03:30), and one that exists twice (the autumn change) fires at its first occurrence.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{expr:?}: {why}")]
pub struct CronError {
    pub expr: String,
    pub why: String,
}

/// A parsed expression: each field as the set of values it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Whether each day field was restricted (not `*`), for the either-day rule.
    days_restricted: bool,
    weekdays_restricted: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: [&str; 7] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

/// How far back or ahead an occurrence is looked for: four years and a day, so that a
/// schedule on 29 February is found.
const SEARCH_DAYS: i64 = 4 * 366 + 1;

impl std::str::FromStr for Cron {
    type Err = CronError;

    fn from_str(expr: &str) -> Result<Self, CronError> {
        let err = |why: String| CronError {
            expr: expr.to_string(),
            why,
        };
        let fields: Vec<&str> = expr.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = fields[..] else {
            return Err(err(format!(
                "{} fields; a schedule has five (minute hour day-of-month month day-of-week)",
                fields.len()
            )));
        };
        let minutes = field(minute, "minute", 0, 59, &[]).map_err(err)?;
        let hours = field(hour, "hour", 0, 23, &[]).map_err(err)?;
        let days = field(day, "day of month", 1, 31, &[]).map_err(err)?;
        let months = field(month, "month", 1, 12, &MONTHS).map_err(err)?;
        // 7 is Sunday too.
        let weekdays = field(weekday, "day of week", 0, 7, &WEEKDAYS).map_err(err)?;
        let weekdays = (weekdays | (weekdays >> 7)) & 0x7f;
        Ok(Self {
            minutes,
            hours: hours as u32,
            days: days as u32,
            months: months as u16,
            weekdays: weekdays as u8,
            days_restricted: day != "*",
            weekdays_restricted: weekday != "*",
        })
    }
}

/// The set of values `spec` names, as bits; `names` spell values from `min` on.
fn field(spec: &str, what: &str, min: u32, max: u32, names: &[&str]) -> Result<u64, String> {
    let value = |s: &str| -> Result<u32, String> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(s)) {
            // Months are named from 1, days of the week from 0.
            return Ok(i as u32 + min);
        }
        let v: u32 = s
            .parse()
            .map_err(|_| format!("{what} {s:?} is not a number"))?;
        if v < min || v > max {
            return Err(format!("{what} {v} is not between {min} and {max}"));
        }
        Ok(v)
    };
    let mut bits = 0u64;
    for part in spec.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("{what} step {s:?} is not a positive number"))?;
                (r, step)
            }
            None => (part, 1),
        };
        let (from, to) = match range {
            "*" => (min, max),
            r => match r.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                // `5/15` means from 5 to the end, every 15.
                None if step > 1 => (value(r)?, max),
                None => {
                    let v = value(r)?;
                    (v, v)
                }
            },
        };
        if from > to {
            return Err(format!("{what} range {range:?} runs backwards"));
        }
        for v in (from..=to).step_by(step as usize) {
            bits |= 1 << v;
        }
    }
    Ok(bits)
}

impl Cron {
    fn day_matches(&self, date: Date) -> bool {
        if self.months & (1 << date.month()) == 0 {
            return false;
        }
        let dom = self.days & (1 << date.day()) != 0;
        let dow = self.weekdays & (1 << date.weekday().to_sunday_zero_offset()) != 0;
        match (self.days_restricted, self.weekdays_restricted) {
            (true, true) => dom || dow,
            _ => dom && dow,
        }
    }

    /// The times of day it fires, latest first.
    fn times_desc(&self) -> impl Iterator<Item = Time> + '_ {
        (0..24i8)
            .rev()
            .filter(move |h| self.hours & (1 << h) != 0)
            .flat_map(move |h| {
                (0..60i8)
                    .rev()
                    .filter(move |m| self.minutes & (1 << m) != 0)
                    .map(move |m| Time::constant(h, m, 0, 0))
            })
    }

    /// The instant a local time of `date` falls on in `zone`.
    fn instant(date: Date, time: Time, zone: &TimeZone) -> Option<Timestamp> {
        DateTime::from_parts(date, time)
            .to_zoned(zone.clone())
            .ok()
            .map(|z| z.timestamp())
    }

    /// Its latest firing at or before `at`, read in `zone`; `None` when it has not fired
    /// in the last four years.
    pub fn last_at_or_before(&self, at: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        let today = at.to_zoned(zone.clone()).date();
        (0..=SEARCH_DAYS).find_map(|back| {
            let date = today.checked_sub(back.days()).ok()?;
            if !self.day_matches(date) {
                return None;
            }
            self.times_desc()
                .filter_map(|t| Self::instant(date, t, zone))
                .find(|t| *t <= at)
        })
    }

    /// Its first firing after `at`, read in `zone`; `None` when it does not fire in the
    /// next four years.
    pub fn next_after(&self, at: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        let today = at.to_zoned(zone.clone()).date();
        (0..=SEARCH_DAYS).find_map(|ahead| {
            let date = today.checked_add(ahead.days()).ok()?;
            if !self.day_matches(date) {
                return None;
            }
            let mut times: Vec<Time> = self.times_desc().collect();
            times.reverse();
            times
                .into_iter()
                .filter_map(|t| Self::instant(date, t, zone))
                .find(|t| *t > at)
        })
    }
}

/// One schedule (Gardener's shape): asleep from each `start`, awake from each `end`, read
/// in `zone`. Either may be absent (asleep every evening, woken only by use).
#[derive(Debug, Clone)]
pub struct Schedule {
    pub start: Option<Cron>,
    pub end: Option<Cron>,
    pub zone: TimeZone,
}

impl Schedule {
    /// A schedule from its spelling; the zone is an IANA name (`UTC` when absent).
    pub fn parse(
        start: Option<&str>,
        end: Option<&str>,
        location: Option<&str>,
    ) -> Result<Self, ScheduleError> {
        let cron = |s: Option<&str>, field: &'static str| {
            s.map(|s| {
                s.parse::<Cron>()
                    .map_err(|e| ScheduleError::Cron { field, source: e })
            })
            .transpose()
        };
        let zone = match location {
            None | Some("") => TimeZone::UTC,
            Some(name) => TimeZone::get(name).map_err(|e| ScheduleError::Location {
                name: name.to_string(),
                why: e.to_string(),
            })?,
        };
        let (start, end) = (cron(start, "start")?, cron(end, "end")?);
        if start.is_none() && end.is_none() {
            return Err(ScheduleError::Empty);
        }
        Ok(Self { start, end, zone })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("{field}: {source}")]
    Cron {
        field: &'static str,
        source: CronError,
    },
    #[error("location {name:?} is not a time zone: {why}")]
    Location { name: String, why: String },
    #[error("a schedule needs a start, an end or both")]
    Empty,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn zone(name: &str) -> TimeZone {
        TimeZone::get(name).expect("zone")
    }

    fn cron(s: &str) -> Cron {
        s.parse().expect("cron")
    }

    #[test]
    fn weekday_evenings_in_berlin() {
        let c = cron("00 20 * * 1-5");
        let berlin = zone("Europe/Berlin");
        // Sunday 2026-11-29 12:00 UTC: the last firing was Friday 20:00 CET (19:00 UTC).
        let at = ts("2026-11-29T12:00:00Z");
        assert_eq!(
            c.last_at_or_before(at, &berlin),
            Some(ts("2026-11-27T19:00:00Z"))
        );
        assert_eq!(c.next_after(at, &berlin), Some(ts("2026-11-30T19:00:00Z")));
        // At the very minute it fires, that firing is the last.
        let on = ts("2026-11-30T19:00:00Z");
        assert_eq!(c.last_at_or_before(on, &berlin), Some(on));
        assert_eq!(c.next_after(on, &berlin), Some(ts("2026-12-01T19:00:00Z")));
    }

    #[test]
    fn lists_steps_and_names() {
        let c = cron("*/15 8-18/2 * jan,JUL MON,fri");
        // Friday 2027-01-01 10:45 local (UTC here).
        let utc = TimeZone::UTC;
        assert_eq!(
            c.last_at_or_before(ts("2027-01-01T11:59:00Z"), &utc),
            Some(ts("2027-01-01T10:45:00Z"))
        );
        assert_eq!(
            c.next_after(ts("2027-01-01T18:45:00Z"), &utc),
            Some(ts("2027-01-04T08:00:00Z"))
        );
        // 7 is Sunday, as 0 is; `5/20` is 5, 25, 45.
        let sunday = cron("5/20 0 * * 7");
        assert_eq!(
            sunday.next_after(ts("2026-11-28T00:00:00Z"), &utc),
            Some(ts("2026-11-29T00:05:00Z"))
        );
        assert_eq!(
            sunday.last_at_or_before(ts("2026-11-29T00:50:00Z"), &utc),
            Some(ts("2026-11-29T00:45:00Z"))
        );
    }

    #[test]
    fn either_day_field_matches_when_both_are_restricted() {
        // The 1st of the month or any Monday.
        let c = cron("0 0 1 * mon");
        let utc = TimeZone::UTC;
        assert_eq!(
            c.next_after(ts("2026-11-27T00:00:00Z"), &utc),
            Some(ts("2026-11-30T00:00:00Z"))
        );
        assert_eq!(
            c.next_after(ts("2026-11-30T00:00:00Z"), &utc),
            Some(ts("2026-12-01T00:00:00Z"))
        );
        // Only one restricted: both must hold (the 29th of February).
        let leap = cron("30 6 29 2 *");
        assert_eq!(
            leap.next_after(ts("2026-11-29T00:00:00Z"), &utc),
            Some(ts("2028-02-29T06:30:00Z"))
        );
    }

    #[test]
    fn daylight_saving_changes_fire_once() {
        let berlin = zone("Europe/Berlin");
        // 02:30 does not exist on 2027-03-28 in Berlin: it fires at 03:30 CEST (01:30 UTC).
        let c = cron("30 2 * * *");
        assert_eq!(
            c.next_after(ts("2027-03-27T12:00:00Z"), &berlin),
            Some(ts("2027-03-28T01:30:00Z"))
        );
        // 02:30 exists twice on 2027-10-31: it fires at the first (CEST, 00:30 UTC) only.
        let first = c.next_after(ts("2027-10-30T12:00:00Z"), &berlin);
        assert_eq!(first, Some(ts("2027-10-31T00:30:00Z")));
        assert_eq!(
            c.next_after(ts("2027-10-31T00:30:00Z"), &berlin),
            Some(ts("2027-11-01T01:30:00Z"))
        );
        // New York's evening schedule stays at 20:00 local across its change.
        let ny = zone("America/New_York");
        let evening = cron("0 20 * * *");
        assert_eq!(
            evening.next_after(ts("2027-03-13T12:00:00Z"), &ny),
            Some(ts("2027-03-14T01:00:00Z"))
        );
        assert_eq!(
            evening.next_after(ts("2027-03-14T12:00:00Z"), &ny),
            Some(ts("2027-03-15T00:00:00Z"))
        );
    }

    #[test]
    fn bad_expressions_name_what_is_wrong() {
        for (expr, says) in [
            ("0 20 * *", "4 fields"),
            ("60 20 * * *", "minute 60 is not between 0 and 59"),
            ("0 24 * * *", "hour 24"),
            ("0 20 0 * *", "day of month 0"),
            ("0 20 * 13 *", "month 13"),
            ("0 20 * * 8", "day of week 8"),
            ("0 20 * * fri-mon", "runs backwards"),
            ("*/0 20 * * *", "step \"0\""),
            ("0 x * * *", "hour \"x\" is not a number"),
        ] {
            let e = expr.parse::<Cron>().expect_err(expr);
            assert!(e.to_string().contains(says), "{expr}: {e}");
        }
    }
}

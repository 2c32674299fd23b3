//! Maintenance windows: when an instance may be changed. A window opens on some days of
//! the week at a local time in a time zone and stays open for a duration (at most a day),
//! as Gardener's maintenance window does; a rollout waits for each instance's window
//! unless told to ignore it.

use jiff::civil::{Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan};

/// One weekly window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The days it opens on (local to `zone`); empty means every day.
    pub days: Vec<Weekday>,
    /// When it opens, local time.
    pub start: Time,
    /// How long it stays open (30 minutes to 24 hours).
    pub duration: SignedDuration,
    pub zone: TimeZone,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    #[error("{field}: {why}")]
    Invalid { field: &'static str, why: String },
}

fn invalid(field: &'static str, why: impl Into<String>) -> WindowError {
    WindowError::Invalid {
        field,
        why: why.into(),
    }
}

/// The shortest and longest window: shorter ones cannot fit an upgrade, longer ones are
/// not windows.
pub const MIN: SignedDuration = SignedDuration::from_mins(30);
pub const MAX: SignedDuration = SignedDuration::from_hours(24);

impl Window {
    /// A window from its spelling: days (`Mon`..`Sun`, any case), `HH:MM`, a duration in
    /// jiff's or Go's form (`2h`, `90m`, `PT2H`), and an IANA time zone (`Europe/Berlin`,
    /// `UTC`).
    pub fn parse(
        days: &[String],
        start: &str,
        duration: &str,
        zone: &str,
    ) -> Result<Self, WindowError> {
        let days = days
            .iter()
            .map(|d| {
                weekday(d).ok_or_else(|| {
                    invalid("days", format!("{d:?} is not a day (Mon, Tue, ... Sun)"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let start: Time = start.parse().map_err(|e| {
            invalid(
                "start",
                format!("{start:?} is not a time of day (HH:MM): {e}"),
            )
        })?;
        let duration: SignedDuration = duration.parse().map_err(|e| {
            invalid(
                "duration",
                format!("{duration:?} is not a duration (2h, 90m): {e}"),
            )
        })?;
        if duration < MIN || duration > MAX {
            return Err(invalid(
                "duration",
                format!("{duration:?} is not between {MIN:?} and {MAX:?}"),
            ));
        }
        let zone = TimeZone::get(zone)
            .map_err(|e| invalid("timeZone", format!("{zone:?} is not a time zone: {e}")))?;
        Ok(Self {
            days,
            start,
            duration,
            zone,
        })
    }

    /// The opening of the window that contains `at`, if one does.
    fn open_since(&self, at: Timestamp) -> Option<Timestamp> {
        let local = at.to_zoned(self.zone.clone());
        // A window that opened yesterday may still be open (it may run past midnight).
        for back in 0..=1 {
            let day = local.date().checked_sub(back.days()).ok()?;
            if !self.days.is_empty() && !self.days.contains(&day.weekday()) {
                continue;
            }
            let opens = day
                .to_datetime(self.start)
                .to_zoned(self.zone.clone())
                .ok()?;
            let opens = opens.timestamp();
            let closes = opens.checked_add(self.duration).ok()?;
            if opens <= at && at < closes {
                return Some(opens);
            }
        }
        None
    }

    pub fn is_open(&self, at: Timestamp) -> bool {
        self.open_since(at).is_some()
    }

    /// When an instance with this window may next be changed: `at` itself while it is
    /// open, else its next opening (within the next eight days).
    pub fn next_open(&self, at: Timestamp) -> Option<Timestamp> {
        if self.is_open(at) {
            return Some(at);
        }
        let local = at.to_zoned(self.zone.clone());
        (0..=8)
            .filter_map(|ahead| {
                let day = local.date().checked_add(ahead.days()).ok()?;
                if !self.days.is_empty() && !self.days.contains(&day.weekday()) {
                    return None;
                }
                let opens = day
                    .to_datetime(self.start)
                    .to_zoned(self.zone.clone())
                    .ok()?;
                Some(opens.timestamp())
            })
            .find(|t| *t > at)
    }
}

fn weekday(s: &str) -> Option<Weekday> {
    Some(match s.to_ascii_lowercase().get(..3)? {
        "mon" => Weekday::Monday,
        "tue" => Weekday::Tuesday,
        "wed" => Weekday::Wednesday,
        "thu" => Weekday::Thursday,
        "fri" => Weekday::Friday,
        "sat" => Weekday::Saturday,
        "sun" => Weekday::Sunday,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn windows_open_on_their_days_in_their_zone() {
        // Tuesdays and Thursdays 02:00-04:00 in Berlin (UTC+1 in winter).
        let w = Window::parse(
            &["Tue".into(), "thu".into()],
            "02:00",
            "2h",
            "Europe/Berlin",
        )
        .expect("window");
        // 2026-12-01 is a Tuesday: 01:30 UTC is 02:30 in Berlin.
        assert!(w.is_open(at("2026-12-01T01:30:00Z")));
        assert!(
            !w.is_open(at("2026-12-01T03:00:00Z")),
            "04:00 in Berlin: closed"
        );
        assert!(!w.is_open(at("2026-12-02T01:30:00Z")), "a Wednesday");
        assert_eq!(
            w.next_open(at("2026-12-01T05:00:00Z")),
            Some(at("2026-12-03T01:00:00Z")),
            "Thursday 02:00 in Berlin"
        );
        assert_eq!(
            w.next_open(at("2026-12-01T01:30:00Z")),
            Some(at("2026-12-01T01:30:00Z"))
        );
    }

    #[test]
    fn a_window_runs_past_midnight() {
        let w = Window::parse(&["Sat".into()], "23:00", "3h", "UTC").expect("window");
        // 2026-12-05 is a Saturday.
        assert!(
            w.is_open(at("2026-12-06T01:00:00Z")),
            "Sunday 01:00, opened Saturday"
        );
        assert!(!w.is_open(at("2026-12-06T02:00:00Z")));
    }

    #[test]
    fn bad_windows_name_what_is_wrong() {
        let e = |d: &[&str], s: &str, dur: &str, z: &str| {
            let days: Vec<String> = d.iter().map(|x| x.to_string()).collect();
            Window::parse(&days, s, dur, z)
                .expect_err("invalid")
                .to_string()
        };
        assert!(e(&["Funday"], "02:00", "2h", "UTC").starts_with("days:"));
        assert!(e(&[], "25:00", "2h", "UTC").starts_with("start:"));
        assert!(e(&[], "02:00", "10m", "UTC").starts_with("duration:"));
        assert!(e(&[], "02:00", "2h", "Mars/Olympus").starts_with("timeZone:"));
    }
}

//! Apply windows: when a NEW bundle may be applied. A window is a cron schedule (when it
//! opens, five fields as in crontab and Argo CD's sync windows), a duration (how long it
//! stays open) and a time zone (IANA name, default UTC) the schedule is read in. With
//! windows set, a new bundle is applied only while at least one is open; outside, the
//! hold gate ([`crate::hold::Gate`]) holds the agent (it verifies and shows the bundle
//! waiting, and the next window's start). The resync of the applied bundle is not
//! restricted.
//!
//! Given as the config field `applyWindows: [{schedule, duration, timeZone}]` or the
//! repeatable flag `--apply-window "SCHEDULE;DURATION[;TIME_ZONE]"` ([`WindowSpec`]).
//! Schedules are evaluated with `croner` on `jiff` zoned times, so daylight saving time
//! moves a window with the wall clock as cron does. Time zones come from the system's
//! tzdb when it has one, else from the copy built into the agent (air-gapped hosts,
//! minimal images).

use std::str::FromStr;
use std::time::Duration;

use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use jiff::tz::TimeZone;
use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// One window as written in the config file or on the command line (not yet checked).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WindowSpec {
    /// Cron schedule of the window's start, five fields (`0 22 * * 1-5`).
    pub schedule: String,
    /// How long it stays open, e.g. `6h`.
    pub duration: String,
    /// IANA time zone of the schedule (default `UTC`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

impl FromStr for WindowSpec {
    type Err = String;

    /// `SCHEDULE;DURATION[;TIME_ZONE]`, e.g. `0 22 * * 1-5;6h;Europe/Berlin`.
    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(';').map(str::trim).collect();
        match parts.as_slice() {
            [schedule, duration] | [schedule, duration, ""] => Ok(WindowSpec { schedule: schedule.to_string(), duration: duration.to_string(), time_zone: None }),
            [schedule, duration, zone] => Ok(WindowSpec { schedule: schedule.to_string(), duration: duration.to_string(), time_zone: Some(zone.to_string()) }),
            _ => Err(format!("{s:?} is not SCHEDULE;DURATION[;TIME_ZONE], e.g. \"0 22 * * 1-5;6h;Europe/Berlin\"")),
        }
    }
}

impl std::fmt::Display for WindowSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{};{}", self.schedule, self.duration)?;
        match &self.time_zone {
            Some(z) => write!(f, ";{z}"),
            None => Ok(()),
        }
    }
}

/// One checked window.
#[derive(Debug, Clone)]
struct Window {
    /// As written (for messages).
    spec: WindowSpec,
    cron: Cron,
    duration: Duration,
    zone: TimeZone,
}

impl Window {
    /// The schedule's latest start at or before `now`: the window is open when it ends
    /// after `now` (an earlier start ends no later).
    fn last_start(&self, now: Timestamp) -> Option<Timestamp> {
        Some(self.cron.find_previous_occurrence(&now.to_zoned(self.zone.clone()), true).ok()?.timestamp())
    }

    fn end(&self, start: Timestamp) -> Timestamp {
        start.checked_add(self.duration).unwrap_or(Timestamp::MAX)
    }

    fn next_start(&self, now: Timestamp) -> Option<Timestamp> {
        Some(self.cron.find_next_occurrence(&now.to_zoned(self.zone.clone()), false).ok()?.timestamp())
    }
}

/// Where `now` is with respect to the windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowState {
    /// No windows are set: applying is not restricted.
    Unrestricted,
    /// At least one window is open, until the given time (the latest end of the open ones).
    Open {
        /// When the last open window closes.
        until: Timestamp,
    },
    /// No window is open.
    Closed {
        /// When the last window closed (unknown when the schedules never ran before).
        since: Option<Timestamp>,
        /// When the next window opens (unknown when no schedule matches again).
        next: Option<Timestamp>,
    },
}

/// The configured apply windows (empty: unrestricted).
#[derive(Debug, Clone, Default)]
pub struct Windows {
    windows: Vec<Window>,
}

impl Windows {
    /// Checks the specs; the error names the window (1-based) and its bad field.
    pub fn parse(specs: &[WindowSpec]) -> Result<Windows, String> {
        let parser = CronParser::builder().seconds(Seconds::Disallowed).year(Year::Disallowed).build();
        let mut windows = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let at = format!("window {} ({spec})", i + 1);
            let cron = parser
                .parse(&spec.schedule)
                .map_err(|e| format!("{at}: schedule {:?} is not a cron schedule of five fields (minute hour day-of-month month day-of-week, e.g. \"0 22 * * 1-5\"): {e}", spec.schedule))?;
            let duration = humantime::parse_duration(&spec.duration)
                .map_err(|e| format!("{at}: duration {:?} is not a duration like 30m or 6h: {e}", spec.duration))?;
            if duration.is_zero() {
                return Err(format!("{at}: duration must be greater than zero"));
            }
            let zone_name = spec.time_zone.as_deref().unwrap_or("UTC");
            let zone = TimeZone::get(zone_name)
                .map_err(|e| format!("{at}: timeZone {zone_name:?} is not an IANA time zone name like Europe/Berlin or UTC: {e}"))?;
            let window = Window { spec: spec.clone(), cron, duration, zone };
            if window.next_start(Timestamp::now()).is_none() {
                return Err(format!(
                    "{at}: schedule {:?} never opens (no date matches it, such as 30 February): an agent held by it would apply nothing, ever",
                    spec.schedule
                ));
            }
            windows.push(window);
        }
        Ok(Windows { windows })
    }

    /// Refuses a window shorter than twice the poll interval: polls are up to 1.1 x the
    /// interval apart (jitter) plus the poll's own time, so a poll lands in a shorter
    /// window only by chance and a bundle could wait for a window forever. The error
    /// names the window (1-based), its duration and the interval.
    pub fn polled_every(&self, interval: Duration) -> Result<(), String> {
        for (i, w) in self.windows.iter().enumerate() {
            if w.duration < interval.saturating_mul(2) {
                return Err(format!(
                    "window {} ({}): duration {} is shorter than twice the poll interval (interval {}): a poll lands in it only by chance, \
                     so a new bundle could wait for a window forever. Make the window at least {} long, or poll more often (--interval)",
                    i + 1,
                    w.spec,
                    humantime::format_duration(w.duration),
                    humantime::format_duration(interval),
                    humantime::format_duration(interval.saturating_mul(2))
                ));
            }
        }
        Ok(())
    }

    /// True when no windows are set.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// The state at `now`.
    pub fn at(&self, now: Timestamp) -> WindowState {
        if self.windows.is_empty() {
            return WindowState::Unrestricted;
        }
        let mut open_until: Option<Timestamp> = None;
        let mut closed_since: Option<Timestamp> = None;
        for w in &self.windows {
            let Some(start) = w.last_start(now) else { continue };
            let end = w.end(start);
            if end > now {
                open_until = open_until.max(Some(end));
            } else {
                closed_since = closed_since.max(Some(end));
            }
        }
        if let Some(until) = open_until {
            return WindowState::Open { until };
        }
        let next = self.windows.iter().filter_map(|w| w.next_start(now)).min();
        WindowState::Closed { since: closed_since, next }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn windows(specs: &[&str]) -> Windows {
        Windows::parse(&specs.iter().map(|s| s.parse().unwrap()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn weekday_nights_in_berlin() {
        let w = windows(&["0 22 * * 1-5;6h;Europe/Berlin"]);
        // Monday 2025-01-06 22:30 CET = 21:30Z: open until Tuesday 04:00 CET.
        assert_eq!(w.at(ts("2025-01-06T21:30:00Z")), WindowState::Open { until: ts("2025-01-07T03:00:00Z") });
        // Tuesday 05:00 CET: closed since 04:00 CET, next Tuesday 22:00 CET.
        assert_eq!(
            w.at(ts("2025-01-07T04:00:00Z")),
            WindowState::Closed { since: Some(ts("2025-01-07T03:00:00Z")), next: Some(ts("2025-01-07T21:00:00Z")) }
        );
        // Saturday noon: Friday's window has closed; the next opens Monday 22:00 CET.
        assert_eq!(
            w.at(ts("2025-01-11T11:00:00Z")),
            WindowState::Closed { since: Some(ts("2025-01-11T03:00:00Z")), next: Some(ts("2025-01-13T21:00:00Z")) }
        );
        // Summer time: 22:00 CEST = 20:00Z.
        assert!(matches!(w.at(ts("2025-07-07T20:00:00Z")), WindowState::Open { .. }));
        assert!(matches!(w.at(ts("2025-07-07T19:59:59Z")), WindowState::Closed { .. }));
    }

    #[test]
    fn several_windows_and_none() {
        assert_eq!(windows(&[]).at(ts("2025-01-06T21:30:00Z")), WindowState::Unrestricted);
        let w = windows(&["0 1 * * *;1h", "30 0 * * *;2h"]);
        assert_eq!(w.at(ts("2025-01-06T01:10:00Z")), WindowState::Open { until: ts("2025-01-06T02:30:00Z") });
    }

    #[test]
    fn windows_shorter_than_two_polls_are_refused() {
        let w = windows(&["*/5 * * * *;1s", "0 22 * * *;1m"]);
        let e = w.polled_every(Duration::from_secs(30)).unwrap_err();
        assert!(e.contains("window 1 (*/5 * * * *;1s)") && e.contains("duration 1s") && e.contains("interval 30s") && e.contains("at least 1m"), "{e}");
        assert!(windows(&["0 22 * * *;1m"]).polled_every(Duration::from_secs(30)).is_ok());
        assert!(windows(&["0 22 * * *;1m"]).polled_every(Duration::from_secs(31)).is_err());
    }

    #[test]
    fn zones_are_built_in() {
        // An air-gapped host or a minimal image has no /usr/share/zoneinfo.
        assert!(jiff::tz::TimeZoneDatabase::bundled().get("Europe/Berlin").is_ok());
    }

    #[test]
    fn bad_specs_name_the_field() {
        let e = |s: &str| Windows::parse(&[s.parse().unwrap()]).unwrap_err();
        assert!(e("0 25 * * *;1h").contains("schedule \"0 25 * * *\""), "{}", e("0 25 * * *;1h"));
        assert!(e("0 0 0 * * *;1h").contains("schedule"), "seconds are not allowed");
        assert!(e("0 1 * * *;soon").contains("duration \"soon\""));
        assert!(e("0 1 * * *;0s").contains("greater than zero"));
        assert!(e("0 1 * * *;1h;Mars/Olympus").contains("timeZone \"Mars/Olympus\""));
        assert!("0 1 * * *".parse::<WindowSpec>().unwrap_err().contains("SCHEDULE;DURATION"));
    }
}

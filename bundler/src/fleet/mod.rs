//! The fleet as its reports show it (docs/fleet.md): which clusters must be ready
//! ([`members`]: declared in a reviewed Fleet file, or else the registry roster), reading
//! and judging their reports ([`read`]), the one classification of a cluster for a channel
//! ([`classify`]) over the clusters of each channel ([`groups`]), and what is built on
//! it: the rows and summary of `drover fleet status` ([`status`]), the health gate of
//! `drover promote --require-healthy` and `drover fleet wait` ([`gate`]), the page of
//! `drover fleet view` ([`page`]), what `drover fleet enroll` changes ([`enroll`]), and which agents are too old for a
//! bundle ([`agents`]).
//! Fleet logic returns its own errors ([`FleetError`]); the commands print.

pub mod agents;
pub mod classify;
pub mod enroll;
pub mod gate;
pub mod groups;
pub mod members;
pub mod page;
pub mod read;
pub mod status;

use std::time::Duration;

use drover_proto::error::StoreError;
use drover_proto::report;

/// Why a fleet reader could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// A flag or argument that cannot be used as given.
    #[error("{0}")]
    Usage(String),
    /// The reports could not be read.
    #[error("{what}: {source}")]
    Store {
        /// What was being read.
        what: String,
        /// Why it failed.
        #[source]
        source: StoreError,
    },
    /// The page could not be rendered.
    #[error("rendering the fleet page: {0}")]
    Page(#[from] minijinja::Error),
}

/// The reports repositories named by `--registry PREFIX` (each `PREFIX/drover-reports`)
/// and `--reports REF` (as given). At least one is required.
pub fn sources(prefixes: &[String], reports: &[String]) -> Result<Vec<String>, FleetError> {
    let mut out = Vec::new();
    for p in prefixes {
        out.push(report::prefix_repository(p).map_err(FleetError::Usage)?.to_string());
    }
    out.extend(reports.iter().cloned());
    if out.is_empty() {
        return Err(FleetError::Usage("name the reports: --registry PREFIX (reads PREFIX/drover-reports) or --reports HOST/REPO|oci:DIR|oci-archive:FILE".into()));
    }
    Ok(out)
}

/// Parses a duration flag (`15m`, `30s`, `0s`).
pub fn parse_duration(flag: &str, text: &str) -> Result<Duration, FleetError> {
    humantime::parse_duration(text.trim()).map_err(|_| FleetError::Usage(format!("{flag} {text:?} is not a duration like 30s, 15m or 1h")))
}

/// Seconds as a short human duration: the two largest units (`45s`, `4m 10s`, `3h 5m`, `2d 4h`).
pub fn human(secs: i64) -> String {
    let s = secs.max(0);
    let units = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];
    let Some(i) = units.iter().position(|(n, _)| s >= *n) else { return "0s".into() };
    let (big, b) = units[i];
    let mut out = format!("{}{b}", s / big);
    if let Some((small, u)) = units.get(i + 1) {
        let rest = (s % big) / small;
        if rest > 0 {
            out.push_str(&format!(" {rest}{u}"));
        }
    }
    out
}

/// Seconds since `rfc3339` at `now` (`None` when it does not parse).
pub fn age(rfc3339: &str, now: i64) -> Option<i64> {
    drover_proto::time::parse_rfc3339(rfc3339).ok().map(|t| now - t)
}

/// The first 12 hex digits of a digest (for tables and the page).
pub fn short_digest(d: &str) -> String {
    d.strip_prefix("sha256:").unwrap_or(d).chars().take(12).collect()
}

/// Environments in promotion order when the names are the usual ones (dev, test, qa,
/// staging, preprod, prod), others after them alphabetically.
pub fn environment_rank(env: &str) -> (usize, String) {
    const ORDER: [&str; 9] = ["dev", "development", "test", "qa", "int", "staging", "stage", "preprod", "prod"];
    let rank = ORDER.iter().position(|e| *e == env).unwrap_or(ORDER.len());
    let rank = if rank == ORDER.len() && env.starts_with("prod") { ORDER.len() - 1 } else { rank };
    (rank, env.to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn human_durations() {
        assert_eq!(super::human(0), "0s");
        assert_eq!(super::human(59), "59s");
        assert_eq!(super::human(250), "4m 10s");
        assert_eq!(super::human(3600), "1h");
        assert_eq!(super::human(3 * 86_400 + 5 * 3600 + 7), "3d 5h");
    }
}

//! Timestamps as drover writes them: RFC 3339 in UTC with whole seconds
//! (`2026-01-02T03:04:05Z`), the form of the `org.opencontainers.image.created`
//! annotation, release records and the agent's state. The calendar is jiff's.

use jiff::Timestamp;

/// A time drover cannot represent.
#[derive(Debug, thiserror::Error)]
pub enum TimeError {
    /// Unix seconds outside jiff's range (years -9999..=9999).
    #[error("{0} seconds since 1970 is out of range")]
    OutOfRange(i64),
    /// Text that is not RFC 3339 with an offset.
    #[error("not RFC 3339 (e.g. 2026-01-02T03:04:05Z)")]
    NotRfc3339,
}

/// The current time, e.g. `2026-01-02T03:04:05Z`.
pub fn now_rfc3339() -> String {
    format_timestamp(Timestamp::now())
}

/// Unix seconds as RFC 3339 UTC.
pub fn format_rfc3339(secs: i64) -> Result<String, TimeError> {
    Timestamp::from_second(secs).map(format_timestamp).map_err(|_| TimeError::OutOfRange(secs))
}

/// Parses RFC 3339 with any offset (`Z`, `+01:00`, fractions allowed) and returns it in
/// UTC with whole seconds (a fraction is dropped, never rounded up).
pub fn normalize_rfc3339(s: &str) -> Result<String, TimeError> {
    let t: Timestamp = s.trim().parse().map_err(|_| TimeError::NotRfc3339)?;
    Ok(format_timestamp(t))
}

/// Parses RFC 3339 with any offset into Unix seconds (a fraction is dropped).
pub fn parse_rfc3339(s: &str) -> Result<i64, TimeError> {
    let t: Timestamp = s.trim().parse().map_err(|_| TimeError::NotRfc3339)?;
    Ok(t.as_second() - i64::from(t.subsec_nanosecond() < 0))
}

/// The current time in Unix seconds.
pub fn now_unix() -> i64 {
    Timestamp::now().as_second()
}

fn format_timestamp(t: Timestamp) -> String {
    let floor = t.as_second() - i64::from(t.subsec_nanosecond() < 0);
    let whole = Timestamp::from_second(floor).unwrap_or(t);
    whole.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_seconds_in_utc() {
        assert_eq!(format_rfc3339(0).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(1_700_000_000).unwrap(), "2023-11-14T22:13:20Z");
        assert_eq!(normalize_rfc3339("2023-11-14T23:13:20+01:00").unwrap(), "2023-11-14T22:13:20Z");
        assert_eq!(normalize_rfc3339("2024-02-29T00:00:00.9Z").unwrap(), "2024-02-29T00:00:00Z");
        assert_eq!(normalize_rfc3339("1969-12-31T23:59:59.5Z").unwrap(), "1969-12-31T23:59:59Z");
        assert!(normalize_rfc3339("yesterday").is_err());
        assert!(normalize_rfc3339("2024-02-30T00:00:00Z").is_err());
        assert!(format_rfc3339(i64::MAX).is_err());
        assert_eq!(parse_rfc3339("2023-11-14T23:13:20+01:00").unwrap(), 1_700_000_000);
        assert!(parse_rfc3339("soon").is_err());
        let now = now_rfc3339();
        assert_eq!(now.len(), 20, "{now}");
        assert_eq!(normalize_rfc3339(&now).unwrap(), now);
    }
}

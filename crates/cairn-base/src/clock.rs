//! Timestamps: RFC 3339 UTC with millisecond precision, fixed width so that string order is
//! time order (SQLite compares them as text).

use std::sync::Arc;
use time::{OffsetDateTime, UtcOffset, format_description::FormatItem, macros::format_description};

const FORMAT: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// Source of "now", injectable so tests can move time (the 15-minute dedupe window).
pub trait Clock: Send + Sync {
    fn now(&self) -> OffsetDateTime;
}

#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

pub type SharedClock = Arc<dyn Clock>;

/// The current time as cairn stores it.
pub fn now_ts() -> String {
    format_ts(OffsetDateTime::now_utc())
}

/// Format a time as cairn stores it.
pub fn format_ts(t: OffsetDateTime) -> String {
    t.to_offset(UtcOffset::UTC).format(FORMAT).unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".into())
}

/// Parse any RFC 3339 time, or engram's `YYYY-MM-DD HH:MM:SS` (UTC, no zone), into cairn's
/// format. Returns `None` for anything else.
pub fn normalize_ts(raw: &str) -> Option<String> {
    let raw = raw.trim();
    if let Ok(t) = OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339) {
        return Some(format_ts(t));
    }
    let sqlite_fmt = format_description!("[year]-[month]-[day] [hour]:[minute]:[second]");
    time::PrimitiveDateTime::parse(raw, &sqlite_fmt).ok().map(|t| format_ts(t.assume_utc()))
}

/// Parse a stored timestamp back.
pub fn parse_ts(raw: &str) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(raw, &time::format_description::well_known::Rfc3339).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_fixed_width_utc() {
        let t = OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap();
        assert_eq!(format_ts(t), "2023-11-14T22:13:20.000Z");
    }

    #[test]
    fn normalizes_engram_and_rfc3339() {
        assert_eq!(normalize_ts("2026-02-01 10:00:00").unwrap(), "2026-02-01T10:00:00.000Z");
        assert_eq!(normalize_ts("2026-02-01T12:00:00+02:00").unwrap(), "2026-02-01T10:00:00.000Z");
        assert!(normalize_ts("yesterday").is_none());
    }
}

//! The order of versions of one synced row: a hybrid logical clock stamp (wall milliseconds,
//! a counter, the writing store's node id). A store that receives a stamp moves its own clock
//! past it, so an edit made after seeing a remote edit always wins, even from a machine whose
//! clock is hours behind. Rows without a stamp (engram's chunks, rows older than sync) are
//! ordered by their `updated_at` with counter 0 and an empty node.

use std::cmp::Ordering;

use crate::clock::parse_ts;

/// A version stamp; ordered by wall time, then counter, then node id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    pub wall_ms: i64,
    pub counter: i64,
    pub node: String,
}

impl Version {
    /// The row's stamp when it has one, else its `updated_at`.
    pub fn of(hlc: Option<&str>, updated_at: &str) -> Version {
        hlc.and_then(Version::parse).unwrap_or_else(|| Version::from_time(updated_at))
    }

    /// `<wall ms>-<counter>-<node>` as the triggers write it.
    pub fn parse(stamp: &str) -> Option<Version> {
        let mut parts = stamp.splitn(3, '-');
        let wall_ms = parts.next()?.parse().ok()?;
        let counter = parts.next()?.parse().ok()?;
        let node = parts.next()?.to_owned();
        Some(Version { wall_ms, counter, node })
    }

    fn from_time(ts: &str) -> Version {
        let wall_ms = parse_ts(ts).map_or(0, |t| i64::try_from(t.unix_timestamp_nanos() / 1_000_000).unwrap_or(0));
        Version { wall_ms, counter: 0, node: String::new() }
    }

    /// The text form, whose string order is the version order.
    pub fn stamp(&self) -> String {
        format!("{:015}-{:06}-{}", self.wall_ms, self.counter, self.node)
    }
}

/// Which of two versions of one row wins: the newer version; two versions with the same stamp
/// (only possible without a stamp) are ordered by their text, so every store picks the same.
pub(crate) fn compare(a: (&Version, &str), b: (&Version, &str)) -> Ordering {
    a.0.cmp(b.0).then_with(|| a.1.cmp(b.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_order_as_versions_and_parse_back() {
        let a = Version { wall_ms: 1_780_000_000_000, counter: 2, node: "ab".into() };
        let b = Version { wall_ms: 1_780_000_000_000, counter: 10, node: "aa".into() };
        let c = Version { wall_ms: 1_780_000_000_001, counter: 0, node: String::new() };
        assert!(a < b && b < c);
        assert!(a.stamp() < b.stamp() && b.stamp() < c.stamp());
        assert_eq!(Version::parse(&b.stamp()), Some(b));
        assert_eq!(Version::of(None, "2026-05-28T20:26:40.001Z").wall_ms, 1_780_000_000_001);
    }
}

//! Warnings before a size cap is reached: the disk use of a data dir (`store::disk_use`)
//! against the caps the settings set, one warning per cap at [`WARN_AT_PERCENT`] or more.
//! `cairn stats` (text and JSON), `GET /stats`, the web page's disk block and `cairn doctor`
//! all show what this module says.
//!
//! The one cap so far is `[history] max_bytes`: the daemon prunes the archive back under it
//! once a day, so a warning says it is filling faster than that, or that the daemon is not
//! running to prune it.

use std::path::Path;

use crate::doctor::{Check, CheckStatus};
use crate::settings::HistorySettings;
pub use crate::store::disk_use::{DiskUse, DiskWarning};

/// A cap this full or fuller gets a warning.
pub const WARN_AT_PERCENT: u64 = 90;

/// The caps `disk` is near or past.
#[must_use]
pub fn cap_warnings(disk: &DiskUse, history: &HistorySettings) -> Vec<DiskWarning> {
    let mut warnings = Vec::new();
    if history.max_bytes > 0 {
        // The archive's files as they take the disk: pages a prune freed count until `cairn gc`.
        let used = disk.history_bytes + disk.history_index_bytes;
        if let Some(warning) = near_cap("history.max_bytes", "the history archive", used, history.max_bytes) {
            warnings.push(warning);
        }
    }
    warnings
}

fn near_cap(cap: &str, what: &str, used: u64, cap_bytes: u64) -> Option<DiskWarning> {
    let percent = u64::try_from(u128::from(used) * 100 / u128::from(cap_bytes)).unwrap_or(u64::MAX);
    if percent < WARN_AT_PERCENT {
        return None;
    }
    Some(DiskWarning {
        cap: cap.to_owned(),
        used_bytes: used,
        cap_bytes,
        percent,
        message: format!("{what} is at {percent} % of its cap ({used} of {cap_bytes} bytes, [{cap}])"),
        hint: "the daemon prunes it once a day; now: `cairn history prune --max-bytes N`, then `cairn gc`".to_owned(),
    })
}

/// `cairn doctor`'s line: a warning per cap near or past, an ok line when caps are set and
/// far, nothing when none is set.
#[must_use]
pub fn doctor_check(data_dir: &Path, history: &HistorySettings) -> Option<Check> {
    if history.max_bytes == 0 {
        return None;
    }
    let store = crate::store::Store::open_for_inspection(&data_dir.join(crate::settings::DB_FILE)).ok();
    let Some(Ok(disk)) = store.map(|s| s.disk_use()) else { return None };
    let warnings = cap_warnings(&disk, history);
    Some(match warnings.first() {
        Some(w) => Check {
            id: "disk_caps".into(),
            status: CheckStatus::Warning,
            message: warnings.iter().map(|w| w.message.as_str()).collect::<Vec<_>>().join("; "),
            hint: Some(w.hint.clone()),
        },
        None => Check {
            id: "disk_caps".into(),
            status: CheckStatus::Ok,
            message: format!("every size cap is under {WARN_AT_PERCENT} %"),
            hint: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(history: u64, index: u64) -> DiskUse {
        DiskUse { history_bytes: history, history_index_bytes: index, ..DiskUse::default() }
    }

    fn capped(max_bytes: u64) -> HistorySettings {
        HistorySettings { max_bytes, ..HistorySettings::default() }
    }

    #[test]
    fn a_cap_warns_from_ninety_percent() {
        assert!(cap_warnings(&disk(800, 99), &capped(1000)).is_empty(), "89.9 % is no warning");
        let at = cap_warnings(&disk(800, 100), &capped(1000));
        assert_eq!(at.len(), 1);
        assert_eq!((at[0].cap.as_str(), at[0].percent, at[0].used_bytes), ("history.max_bytes", 90, 900));
        let past = cap_warnings(&disk(5000, 0), &capped(1000));
        assert_eq!(past[0].percent, 500);
        assert!(past[0].message.contains("500 %"), "{}", past[0].message);
    }

    #[test]
    fn no_cap_no_warning() {
        assert!(cap_warnings(&disk(u64::MAX / 2, 0), &HistorySettings::default()).is_empty());
    }
}

//! `[search]` in config.toml: what a search does when its caller does not say.
//!
//! ```toml
//! [search]
//! deep = false            # deep recall: a language model re-ranks the best candidates
//! deep_timeout_ms = 60000 # longest deep recall waits for the model, then the first stage answers
//! ```

use serde::{Deserialize, Serialize};

use super::{Setting, Source};
use crate::error::{CairnError, ErrorCode, Result};

/// How long deep recall waits for the model unless `deep_timeout_ms` says otherwise: a small
/// local model reads 20 candidates in seconds on an idle machine, tens of seconds on a busy one.
pub const DEFAULT_DEEP_TIMEOUT_MS: u64 = 60_000;
/// Bounds of `deep_timeout_ms`: under 100 ms no model answers; over ten minutes is a typo.
const DEEP_TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 100..=600_000;

/// `[search]` as written in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchFile {
    deep: Option<bool>,
    deep_timeout_ms: Option<u64>,
}

/// The effective `[search]`, each value with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchSettings {
    /// Deep recall when a search does not say (`deep` on `/search`, `mem_search`, `--deep`).
    pub deep: Setting<bool>,
    /// Milliseconds deep recall waits for the model before it answers the first stage's order.
    pub deep_timeout_ms: Setting<u64>,
}

impl Default for SearchSettings {
    fn default() -> Self {
        SearchSettings { deep: Setting::default(false), deep_timeout_ms: Setting::default(DEFAULT_DEEP_TIMEOUT_MS) }
    }
}

/// `[search]` from the file.
pub(crate) fn load(table: Option<toml::Table>) -> Result<SearchSettings> {
    let file: SearchFile = match table {
        Some(table) => SearchFile::deserialize(toml::Value::Table(table)).map_err(|e| {
            CairnError::new(ErrorCode::InvalidArgument, format!("[search]: {}", e.message()))
                .with_hint("keys: deep (true|false), deep_timeout_ms")
        })?,
        None => SearchFile::default(),
    };
    let mut s = SearchSettings::default();
    if let Some(deep) = file.deep {
        s.deep = Setting { value: deep, source: Source::ConfigFile };
    }
    if let Some(ms) = file.deep_timeout_ms {
        if !DEEP_TIMEOUT_RANGE.contains(&ms) {
            return Err(CairnError::new(
                ErrorCode::InvalidArgument,
                format!("[search] deep_timeout_ms = {ms} is out of range"),
            )
            .with_hint(format!("use a value in {DEEP_TIMEOUT_RANGE:?}")));
        }
        s.deep_timeout_ms = Setting { value: ms, source: Source::ConfigFile };
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_recall_is_off_unless_the_file_turns_it_on() {
        assert_eq!(load(None).unwrap(), SearchSettings::default());
        let table: toml::Table = toml::from_str("deep = true\ndeep_timeout_ms = 5000").unwrap();
        let s = load(Some(table)).unwrap();
        assert!(s.deep.value && s.deep.source == Source::ConfigFile);
        assert_eq!(s.deep_timeout_ms.value, 5000);
        for bad in ["deep_timeout_ms = 5", "deep = \"yes\"", "deeep = true"] {
            assert!(load(Some(toml::from_str(bad).unwrap())).is_err(), "{bad}");
        }
    }
}

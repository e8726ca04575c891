//! The retention keys of `[history]`: `keep_days` and `max_bytes`, checked before the typed
//! decode so that a bad value is refused with the key's name (serde's own message names none).

use serde_json::Value;

use crate::error::{CairnError, ErrorCode, Result};

/// The longest retention a day count may ask for (a century; `cairn history prune` has the same bound).
pub const MAX_KEEP_DAYS: u64 = 36_500;

/// `keep_days` a whole number of days up to [`MAX_KEEP_DAYS`]; `max_bytes` a byte count or a
/// size string (`"2GB"`, `"500 MiB"`) turned into one. 0 leaves either off.
pub(super) fn normalise(tree: &mut Value) -> Result<()> {
    let keep_days = &mut tree["keep_days"];
    match keep_days.as_u64() {
        Some(days) if days <= MAX_KEEP_DAYS => {}
        _ => {
            return Err(refused(format!(
                "history.keep_days must be a whole number of days from 0 (off) to {MAX_KEEP_DAYS} (got {keep_days})"
            )));
        }
    }
    let max_bytes = &mut tree["max_bytes"];
    let bytes = match &*max_bytes {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => parse_size(s),
        _ => None,
    };
    let Some(bytes) = bytes else {
        return Err(refused(format!(
            "history.max_bytes must be a size in bytes, or with a unit such as \"2GB\" or \"500MiB\" (got {max_bytes})"
        )));
    };
    *max_bytes = Value::from(bytes);
    Ok(())
}

/// A size: a whole number of bytes, optionally followed by a unit (`B`, `KB`, `MB`, `GB`, `TB`
/// in powers of 1000; `KiB`, `MiB`, `GiB`, `TiB` in powers of 1024; case ignored). `None` when
/// it is not one or does not fit in 64 bits.
pub fn parse_size(raw: &str) -> Option<u64> {
    let raw = raw.trim();
    let split = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (digits, unit) = raw.split_at(split);
    let number: u64 = digits.parse().ok()?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        "tb" | "t" => 1_000_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        _ => return None,
    };
    number.checked_mul(factor)
}

fn refused(message: String) -> CairnError {
    CairnError::new(ErrorCode::InvalidConfig, message)
        .with_hint("set [history] keep_days = 90 or max_bytes = \"2GB\" in config.toml, or 0 for off")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::HistorySettingsLoaded;

    fn table(text: &str) -> Option<serde_json::Map<String, Value>> {
        let file: std::collections::BTreeMap<String, serde_json::Map<String, Value>> = toml::from_str(text).unwrap();
        file.get("history").cloned()
    }

    #[test]
    fn retention_is_off_by_default() {
        let s = HistorySettingsLoaded::load(None, &|_| None).unwrap();
        assert_eq!((s.config.keep_days, s.config.max_bytes), (0, 0));
    }

    #[test]
    fn keep_days_and_max_bytes_from_the_file_then_the_environment() {
        let s =
            HistorySettingsLoaded::load(table("[history]\nkeep_days = 90\nmax_bytes = \"2GB\"\n"), &|_| None).unwrap();
        assert_eq!((s.config.keep_days, s.config.max_bytes), (90, 2_000_000_000));
        assert_eq!(s.sources["keep_days"], crate::settings::Source::ConfigFile);

        let env = |n: &str| match n {
            "CAIRN_HISTORY_KEEP_DAYS" => Some("30".to_owned()),
            "CAIRN_HISTORY_MAX_BYTES" => Some("500MiB".to_owned()),
            _ => None,
        };
        let s = HistorySettingsLoaded::load(table("[history]\nkeep_days = 90\n"), &env).unwrap();
        assert_eq!((s.config.keep_days, s.config.max_bytes), (30, 500 << 20));
        assert_eq!(s.sources["max_bytes"], crate::settings::Source::Env("CAIRN_HISTORY_MAX_BYTES".into()));
    }

    #[test]
    fn bad_retention_values_are_invalid_config_naming_the_key() {
        let cases = [
            ("[history]\nkeep_days = -1\n", "history.keep_days"),
            ("[history]\nkeep_days = 36501\n", "history.keep_days"),
            ("[history]\nkeep_days = \"forever\"\n", "history.keep_days"),
            ("[history]\nmax_bytes = \"lots\"\n", "history.max_bytes"),
            ("[history]\nmax_bytes = -5\n", "history.max_bytes"),
            ("[history]\nmax_bytes = 1.5\n", "history.max_bytes"),
        ];
        for (text, key) in cases {
            let err = HistorySettingsLoaded::load(table(text), &|_| None).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidConfig, "{text}");
            assert!(err.message.contains(key), "{text}: {}", err.message);
        }
        let env = |n: &str| (n == "CAIRN_HISTORY_KEEP_DAYS").then(|| "soon".to_owned());
        let err = HistorySettingsLoaded::load(None, &env).unwrap_err();
        assert!(err.message.contains("history.keep_days"), "{}", err.message);
    }

    #[test]
    fn sizes_with_units() {
        assert_eq!(parse_size("1024"), Some(1024));
        assert_eq!(parse_size("2GB"), Some(2_000_000_000));
        assert_eq!(parse_size("3 gib"), Some(3 << 30));
        assert_eq!(parse_size("10kb"), Some(10_000));
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("GB"), None);
        assert_eq!(parse_size("5 parsecs"), None);
        assert_eq!(parse_size("99999999999TB"), None);
    }
}

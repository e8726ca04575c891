//! The `[history]` block of `cairn config`: the keys with an environment variable (retention,
//! scans, what the history tools show), each with its value and where it came from.

use std::fmt::Write;

use cairn_core::settings::{HISTORY_ENV_KEYS, HistorySettingsLoaded};

pub(crate) fn history_settings(history: &HistorySettingsLoaded) -> String {
    let tree = serde_json::to_value(&history.config).unwrap_or_default();
    let mut text = String::from("\nHistory ([history], `cairn history`):\n");
    for (key, _, _) in HISTORY_ENV_KEYS {
        let value = key.split('.').fold(&tree, |node, name| &node[name]);
        let shown = match (*key, value.as_u64()) {
            ("keep_days" | "max_bytes", Some(0)) => "0 (off)".to_owned(),
            ("max_bytes", Some(bytes)) => format!("{bytes} ({})", crate::disk::bytes(bytes)),
            _ => value.to_string(),
        };
        let source = history.sources.get(*key).map_or_else(|| "default".to_owned(), ToString::to_string);
        let _ = writeln!(text, "history.{key:<28} {shown:<27} ({source})");
    }
    text
}

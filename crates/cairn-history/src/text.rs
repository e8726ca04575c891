//! Rules both readers apply to what they read: cleaning text, refusing ids, counting skips,
//! naming a directory's project.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{LazyLock, Mutex};

use regex::Regex;

static SYSTEM_REMINDER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)<system-reminder>.*?</system-reminder>\s*").expect("valid regex"));

/// Host-injected `<system-reminder>` blocks stripped (they are the host's, not the
/// conversation's, and would drown search), then `<private>` redacted.
pub fn clean_text(text: &str) -> String {
    if text.contains("<system-reminder>") {
        let stripped = SYSTEM_REMINDER.replace_all(text, "");
        return cairn_base::text::redact(&stripped).0;
    }
    cairn_base::text::redact(text).0
}

/// Whether a text the host marks as injected (OpenCode's `synthetic` part, Claude Code's hook
/// context) is one of cairn's, by its exact leading line: the host's word alone would take in
/// OpenCode's own synthetic parts, the leading line alone a user who typed it.
pub fn is_cairn_injection(text: &str) -> bool {
    super::injected::cairn_injection(text).is_some()
}

/// An id becomes part of keys and may be shown as a path segment: one with a path separator,
/// a `..` or a NUL is refused, as is an empty one.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 256 && !id.contains(['/', '\\', '\0']) && !id.contains("..")
}

/// cairn's project name for a session's directory, cached per directory: project detection
/// may run git, and a backfill sees the same few directories thousands of times.
pub fn project_of(directory: &str) -> Option<String> {
    static CACHE: LazyLock<Mutex<HashMap<String, Option<String>>>> = LazyLock::new(|| Mutex::new(HashMap::new()));
    if let Some(hit) = CACHE.lock().ok().and_then(|c| c.get(directory).cloned()) {
        return hit;
    }
    let project =
        cairn_base::project::detect_project(Path::new(directory)).ok().map(|d| d.project).filter(|p| !p.is_empty());
    if let Ok(mut cache) = CACHE.lock() {
        cache.insert(directory.to_owned(), project.clone());
    }
    project
}

/// Skipped lines/rows by reason code.
#[derive(Debug, Default)]
pub struct SkipCounter(BTreeMap<&'static str, u64>);

impl SkipCounter {
    pub fn add(&mut self, reason: &'static str) {
        *self.0.entry(reason).or_default() += 1;
    }

    pub fn into_vec(self) -> Vec<(String, u64)> {
        self.0.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }
}

/// Whether `text` holds characters of a script written without spaces between words (Han,
/// Hiragana, Katakana; Hangul syllables are spaced but compounds are not split either): the
/// word index's tokenizer (unicode61) keeps such a run as one word, so these are searched as
/// substrings, through the trigram index (`history_cjk`).
pub fn has_unsegmented_script(text: &str) -> bool {
    // the common case, checked a word at a time: every indexed part passes through here
    !text.is_ascii()
        && text.chars().any(|c| {
            matches!(c as u32,
            0x3040..=0x30FF    // Hiragana, Katakana
            | 0x3400..=0x4DBF  // CJK Extension A
            | 0x4E00..=0x9FFF  // CJK Unified Ideographs
            | 0xAC00..=0xD7AF  // Hangul syllables
            | 0xF900..=0xFAFF  // CJK Compatibility Ideographs
            | 0x20000..=0x2FA1F)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_reminders_and_redacts() {
        let t = clean_text("a <system-reminder>x\ny</system-reminder> b <private>s</private>");
        assert_eq!(t, "a b [REDACTED]");
    }

    #[test]
    fn refuses_ids_with_path_characters() {
        for bad in ["", "a/b", "a\\b", "..", "a..b", "a\0b"] {
            assert!(!valid_id(bad), "{bad:?}");
        }
        assert!(valid_id("3f0c2a4e-9b1d-4c55-8a77-0d2e6f1b9c01"));
        assert!(valid_id("ses_abc"));
    }
}

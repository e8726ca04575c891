//! Secrets found by pattern: one table of kinds, each a regex whose capture group 1 is the
//! secret (what is around it, such as a URL's user and host, is kept), an allowlist of the
//! placeholders documentation is full of, and a literal gate that lets the text with no
//! candidate (nearly all of it) through after one pass.
//!
//! Hand-written rather than a crate: the ones on crates.io are whole scanners for repositories
//! (with their own async runtimes and git clients), still in beta, or replace with their own
//! numbered tokens; none names the kind in the replacement or takes an allowlist of ours.

use std::borrow::Cow;
use std::sync::LazyLock;

use aho_corasick::AhoCorasick;
use regex::{Captures, Regex};

/// One kind of secret.
struct Pattern {
    /// Named in the replacement: `[REDACTED:<kind>]`.
    kind: &'static str,
    /// Group 1 is the secret; the rest of the match is kept.
    regex: Regex,
}

/// The table, in the order applied: a block or a specific token before the generic shapes, so
/// `Authorization: Bearer ghp_…` is named a GitHub token, and `sk-ant-…` is not taken for an
/// OpenAI key.
const PATTERNS: &[(&str, &str)] = &[
    ("private-key", r"(?s)(-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\z))"),
    ("aws-access-key", r"\b((?:AKIA|ASIA)[0-9A-Z]{16})\b"),
    ("github-token", r"\b((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,255}|github_pat_[A-Za-z0-9_]{20,255})\b"),
    ("slack-token", r"\b(xox[baprs]-[A-Za-z0-9-]{10,})"),
    ("stripe-key", r"\b(sk_live_[A-Za-z0-9]{16,})"),
    ("anthropic-key", r"\b(sk-ant-[A-Za-z0-9_-]{20,})"),
    ("openai-key", r"\b(sk-(?:proj-)?[A-Za-z0-9_-]{20,})"),
    ("google-api-key", r"\b(AIza[0-9A-Za-z_-]{35})"),
    ("jwt", r"\b(eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"),
    ("bearer-token", r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)"),
    ("url-password", r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@]+:([^\s@/]+)@"),
    (
        "env-secret",
        r#"(?im)^[ \t]*(?:export[ \t]+)?[a-z0-9_.-]*(?:secret|token|password|passwd|api_?key|private_?key|credential)[a-z0-9_.-]*[ \t]*[=:][ \t]*["']?([^\s"'#]{8,})"#,
    ),
];

/// Literals, each with the patterns of [`PATTERNS`] (a bit per index) whose every match holds
/// it, found in one case-insensitive pass: a text runs only the patterns whose literal it holds
/// (most hold none; a word like "token" runs only the `NAME=value` pattern). Matches do not
/// overlap, so a literal that starts another (`sk-`, `sk-ant-`) names both patterns.
const GATE: &[(&str, u32)] = &[
    ("-----BEGIN", 1 << 0),
    ("AKIA", 1 << 1),
    ("ASIA", 1 << 1),
    ("ghp_", 1 << 2),
    ("gho_", 1 << 2),
    ("ghu_", 1 << 2),
    ("ghs_", 1 << 2),
    ("ghr_", 1 << 2),
    ("github_pat_", 1 << 2),
    ("xox", 1 << 3),
    ("sk_live_", 1 << 4),
    ("sk-ant-", 1 << 5),
    ("sk-", 1 << 5 | 1 << 6),
    ("AIza", 1 << 7),
    ("eyJ", 1 << 8),
    ("bearer", 1 << 9),
    ("://", 1 << 10),
    ("secret", 1 << 11),
    ("token", 1 << 11),
    ("passw", 1 << 11),
    ("api_key", 1 << 11),
    ("apikey", 1 << 11),
    ("private_key", 1 << 11),
    ("privatekey", 1 << 11),
    ("credential", 1 << 11),
];

static TABLE: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    PATTERNS.iter().map(|(kind, re)| Pattern { kind, regex: Regex::new(re).expect("valid secret pattern") }).collect()
});

static GATE_MATCHER: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(GATE.iter().map(|(literal, _)| literal))
        .expect("valid gate literals")
});

/// The `NAME=value` pattern's bit: its names ("token", "secret") are common words, and its
/// regex, anchored at line starts, has no literal prefix to skip ahead with.
const ENV_SECRET: u32 = 1 << 11;

/// The patterns (a bit per index of [`PATTERNS`]) whose literal `text` holds.
fn candidates(text: &str) -> u32 {
    let mask = GATE_MATCHER.find_iter(text).fold(0, |mask, m| mask | GATE[m.pattern().as_usize()].1);
    // No `=` or `:` anywhere: no `NAME=value` line, whatever words the text uses.
    if mask & ENV_SECRET != 0 && memchr::memchr2(b'=', b':', text.as_bytes()).is_none() {
        return mask & !ENV_SECRET;
    }
    mask
}

/// The kinds cairn redacts, in the order applied (for docs and tests).
pub fn secret_kinds() -> impl Iterator<Item = &'static str> {
    PATTERNS.iter().map(|(kind, _)| *kind)
}

/// `text` with every secret replaced by `[REDACTED:<kind>]`, and whether any was.
pub(super) fn redact_secrets(text: &str) -> (Cow<'_, str>, bool) {
    let candidates = candidates(text);
    if candidates == 0 {
        return (Cow::Borrowed(text), false);
    }
    let mut current = Cow::Borrowed(text);
    let mut found = false;
    for (_, pattern) in TABLE.iter().enumerate().filter(|(i, _)| candidates & 1 << i != 0) {
        let mut hit = false;
        let replaced =
            pattern.regex.replace_all(&current, |caps: &Captures<'_>| replace_secret(caps, pattern.kind, &mut hit));
        if hit {
            found = true;
            current = Cow::Owned(replaced.into_owned());
        }
    }
    (current, found)
}

/// The match with its secret named instead, or as it was when the secret is a placeholder.
fn replace_secret(caps: &Captures<'_>, kind: &str, hit: &mut bool) -> String {
    let whole = caps.get(0).expect("group 0 always matches");
    let Some(secret) = caps.get(1) else { return whole.as_str().to_owned() };
    if is_placeholder(secret.as_str()) || (kind == "env-secret" && !looks_random(secret.as_str())) {
        return whole.as_str().to_owned();
    }
    *hit = true;
    let before = &whole.as_str()[..secret.start() - whole.start()];
    let after = &whole.as_str()[secret.end() - whole.start()..];
    format!("{before}[REDACTED:{kind}]{after}")
}

/// What documentation and templates put where a secret goes: `AKIAIOSFODNN7EXAMPLE`,
/// `ghp_xxxxxxxx…`, `<your-token>`, `${VAR}`, `$VAR`, `changeme`, `****`, and what is already
/// redacted.
fn is_placeholder(secret: &str) -> bool {
    let lower = secret.to_ascii_lowercase();
    secret.starts_with(['$', '<', '[', '{', '%'])
        || lower.contains("example")
        || lower.contains("xxxxxx")
        || lower.contains("****")
        || lower.contains("changeme")
        || lower.contains("placeholder")
        || lower.starts_with("your")
        || lower.contains("redacted")
}

/// A value of a `NAME=value` line is a secret when it is not a word: at least 12 characters
/// of two or more kinds (lower, upper, digit, symbol) with at least 3 bits of entropy per
/// character (`hunter2hunter2` has 2.6; a random key of this length has over 4). The length
/// and the mix keep prose out: "Passwords: argon2id." names a scheme, not a secret.
fn looks_random(value: &str) -> bool {
    const MIN_LEN: usize = 12;
    let kinds = [
        value.bytes().any(|b| b.is_ascii_lowercase()),
        value.bytes().any(|b| b.is_ascii_uppercase()),
        value.bytes().any(|b| b.is_ascii_digit()),
        value.bytes().any(|b| !b.is_ascii_alphanumeric()),
    ];
    value.len() >= MIN_LEN && kinds.iter().filter(|&&k| k).count() >= 2 && shannon_entropy(value) >= 3.0
}

#[allow(clippy::cast_precision_loss)]
fn shannon_entropy(value: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in value.bytes() {
        counts[usize::from(b)] += 1;
    }
    let len = value.len() as f64;
    counts.iter().filter(|&&c| c > 0).map(|&c| f64::from(c) / len).map(|p| -p * p.log2()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pattern with no literal in the gate would never run.
    #[test]
    fn every_pattern_has_a_gate_literal_and_fits_the_mask() {
        assert!(PATTERNS.len() <= 32);
        for (i, (kind, _)) in PATTERNS.iter().enumerate() {
            assert!(GATE.iter().any(|(_, mask)| mask & 1 << i != 0), "{kind}");
        }
        assert!(GATE.iter().all(|(_, mask)| mask >> PATTERNS.len() == 0));
        assert_eq!(PATTERNS[ENV_SECRET.trailing_zeros() as usize].0, "env-secret");
        assert_eq!(candidates("a token: here"), ENV_SECRET, "only the NAME=value pattern");
        assert_eq!(candidates("a token here"), 0, "no = or :, no NAME=value line");
        assert_eq!(candidates("plain words"), 0);
    }
}

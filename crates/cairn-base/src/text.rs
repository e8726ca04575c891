//! Text rules applied before anything is stored: privacy redaction, size limits, normalisation
//! of project / scope / topic_key, and the content hash used for dedupe.

use regex::Regex;
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::sync::LazyLock;

mod nul;
mod private;
pub use private::PRIVATE_TAG;
pub mod secrets;

pub use nul::{nul_path, refuse_nul, refuse_nul_in_json};

use crate::error::{CairnError, ErrorCode, Result};

/// Content longer than this is cut (on a UTF-8 boundary) and the cut is reported.
pub const MAX_CONTENT_BYTES: usize = 50_000;
/// Input longer than this is refused outright: nobody means to store 4 MiB in one memory, and
/// accepting it would only let one bad call bloat the store.
pub const MAX_INPUT_BYTES: usize = 4 * 1024 * 1024;
/// Titles are one line; a longer one is cut like content.
pub const MAX_TITLE_BYTES: usize = 500;
/// Cap of a normalised topic key (engram's).
pub const MAX_TOPIC_KEY_BYTES: usize = 120;

/// What a `<private>` block (or a secret) is replaced with.
pub const REDACTED: &str = "[REDACTED]";
const TRUNCATED_SUFFIX: &str = "... [truncated]";

static WHITESPACE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\s+").expect("valid regex"));

/// Replace every `<private>…</private>` block (any case, any attributes, nested, spread over
/// lines) with `[REDACTED]`, failing closed: an opener with no closer redacts to the end of the
/// text, a stray closer the whole of it (see `text::private`). Returns the text and whether
/// anything was redacted.
pub fn redact(text: &str) -> (String, bool) {
    let (out, hit) = private::redact_private(text);
    (out.into_owned(), hit)
}

/// What a text is redacted of before it is written: `<private>` blocks always, and secrets by
/// pattern ([`secrets`]) when `secrets` is on (the `[privacy] redact_secrets` setting on save;
/// always on whatever leaves the machine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Redaction {
    pub secrets: bool,
}

impl Default for Redaction {
    /// Secrets too: the setting's default.
    fn default() -> Self {
        Redaction::OUTBOUND
    }
}

impl Redaction {
    /// `<private>` blocks only.
    pub const PRIVATE: Redaction = Redaction { secrets: false };
    /// `<private>` blocks and secrets: what leaves the machine.
    pub const OUTBOUND: Redaction = Redaction { secrets: true };

    /// `text` redacted, and whether anything was; unallocated when nothing was.
    pub fn apply(self, text: &str) -> (Cow<'_, str>, bool) {
        let (private, private_hit) = private::redact_private(text);
        if !self.secrets {
            return (private, private_hit);
        }
        match secrets::redact_secrets(&private) {
            (Cow::Borrowed(_), false) => (private, private_hit),
            (out, secret_hit) => (Cow::Owned(out.into_owned()), private_hit || secret_hit),
        }
    }

    /// Redact a field in place; whether anything was.
    pub fn field(self, text: &mut String) -> bool {
        let (out, hit) = self.apply(text);
        if hit {
            // Owned or not: a stray closer answers the borrowed `[REDACTED]`.
            let out = out.into_owned();
            *text = out;
        }
        hit
    }

    /// Redact an optional field in place; whether anything was.
    pub fn opt(self, text: &mut Option<String>) -> bool {
        text.as_mut().is_some_and(|t| self.field(t))
    }
}

/// A write's input: every text field of it goes through one [`Redaction`], applied where the
/// core accepts the write, so no door can forget a field. Returns whether anything was
/// redacted. Redacting twice changes nothing more (`[REDACTED…]` holds no tag and no secret), so
/// an id redacted here matches the same id redacted on a later write.
pub trait RedactFields {
    fn redact_fields(&mut self, with: Redaction) -> bool;
}

/// Redact every field with `with`; whether any was (every field is redacted, none skipped).
pub fn redact_all(with: Redaction, fields: &mut [&mut String]) -> bool {
    fields.iter_mut().fold(false, |hit, field| with.field(field) | hit)
}

/// Redact every optional field with `with`; whether any was.
pub fn redact_all_opt(with: Redaction, fields: &mut [&mut Option<String>]) -> bool {
    fields.iter_mut().fold(false, |hit, field| with.opt(field) | hit)
}

/// `<private>` blocks and secrets out of `text`: what every path that leaves the machine (git
/// chunks, a hub push, `cairn export`, a model's prompt) sends, whatever the save setting.
pub fn redact_outbound(text: &str) -> Cow<'_, str> {
    Redaction::OUTBOUND.apply(text).0
}

/// Whether `text` still holds a `<private>` tag or a secret (what `cairn doctor` counts).
pub fn holds_private_or_secret(text: &str) -> bool {
    Redaction::OUTBOUND.apply(text).1
}

/// Redact an optional field.
pub fn redact_opt(text: Option<&str>) -> Option<String> {
    text.map(|t| redact(t).0)
}

/// Cut `text` to at most `max` bytes without splitting a UTF-8 sequence.
pub fn cut_at_char_boundary(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Outcome of fitting content to [`MAX_CONTENT_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fitted {
    pub text: String,
    /// Original length in bytes when the text was cut.
    pub truncated_from: Option<usize>,
}

/// Refuse absurd input, cut long input. Content must not be blank.
pub fn fit_content(field: &str, text: &str, limit: usize) -> Result<Fitted> {
    if text.len() > MAX_INPUT_BYTES {
        return Err(CairnError::new(
            ErrorCode::ContentTooLarge,
            format!("{field} is {} bytes; cairn accepts at most {MAX_INPUT_BYTES}", text.len()),
        )
        .with_hint(format!("split it into several memories of under {limit} bytes")));
    }
    if text.len() <= limit {
        return Ok(Fitted { text: text.to_owned(), truncated_from: None });
    }
    let room = limit - TRUNCATED_SUFFIX.len();
    let mut cut = cut_at_char_boundary(text, room).to_owned();
    cut.push_str(TRUNCATED_SUFFIX);
    Ok(Fitted { text: cut, truncated_from: Some(text.len()) })
}

/// Require a non-blank value.
pub fn require(field: &str, text: &str) -> Result<()> {
    if text.trim().is_empty() {
        return Err(CairnError::empty(field));
    }
    Ok(())
}

/// Project names: lowercase, trimmed, runs of `--` and `__` collapsed (engram §4.2). Hyphen and
/// underscore stay distinct. Returns the name and whether it changed.
pub fn normalize_project(raw: &str) -> (String, bool) {
    let mut name = raw.trim().to_lowercase();
    while name.contains("--") || name.contains("__") {
        name = name.replace("--", "-").replace("__", "_");
    }
    let changed = name != raw;
    (name, changed)
}

/// Memory scope: `personal` (follows the user across projects) or `project` (everything else).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Project,
    #[serde(alias = "user", alias = "global")]
    Personal,
}

impl Scope {
    /// Lenient (saves): `personal` and its aliases `user` and `global` (opencode-memory's and
    /// mem0's names for it), anything else is `project`.
    pub fn parse(raw: &str) -> Scope {
        if Self::is_personal(raw) { Scope::Personal } else { Scope::Project }
    }

    fn is_personal(raw: &str) -> bool {
        matches!(raw.trim().to_ascii_lowercase().as_str(), "personal" | "user" | "global")
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Project => "project",
            Scope::Personal => "personal",
        }
    }

    /// A scope *filter*, the same for every door: blank means no filter; anything but
    /// `project` or `personal` is refused. (Saves normalise leniently with [`Scope::parse`];
    /// a filter that quietly became `project` would hide the memories asked for.)
    pub fn parse_filter(raw: Option<&str>) -> Result<Option<Scope>> {
        match raw.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
            None | Some("") => Ok(None),
            Some("project") => Ok(Some(Scope::Project)),
            Some(personal) if Self::is_personal(personal) => Ok(Some(Scope::Personal)),
            Some(other) => Err(CairnError::invalid(format!("scope {other:?} is not a scope"))
                .with_hint("use project or personal (alias user, global), or leave it out")),
        }
    }
}

/// Fenced code blocks (``` or ~~~, an unclosed one runs to the end) and inline code spans:
/// a prompt that pastes code saying "remember" is not asking to remember anything.
static FENCED_CODE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?s)(```|~~~).*?(```|~~~|\z)").expect("valid regex"));
static INLINE_CODE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"`[^`\n]*`").expect("valid regex"));
/// The built-in memory triggers, whole words only.
static MEMORY_TRIGGERS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(remember|memorize|memorise|save this|note this|keep in mind|don['’]?t forget|learn this|store this|recuerda|recordar|no olvides)\b",
    )
    .expect("valid regex")
});

/// `text` without its fenced code blocks (``` or ~~~; an unclosed one runs to the end), each
/// replaced by `with`: what a person wrote, not what they pasted.
pub fn without_code_blocks<'a>(text: &'a str, with: &str) -> std::borrow::Cow<'a, str> {
    FENCED_CODE.replace_all(text, with)
}

/// Whether a user's message asks the agent to remember something: fenced and inline code
/// removed, then the built-in list or one of `extra_patterns` (case-insensitive regexes; a
/// bad one is skipped, settings refuse them at load) on word boundaries.
///
/// Whole words only: "remembered", "remembering" and "memorized" narrate, they do not ask.
/// "do you remember ..." (any "you remember") asks to *recall*, which the Memory Protocol's
/// SEARCH rule covers, so it does not trigger a save either.
pub fn memory_trigger(text: &str, extra_patterns: &[String]) -> bool {
    let without_fences = without_code_blocks(text, " ");
    let prose = INLINE_CODE.replace_all(&without_fences, " ");
    let built_in = MEMORY_TRIGGERS.find_iter(&prose).any(|m| !asks_to_recall(&prose[..m.start()], m.as_str()));
    built_in
        || extra_patterns.iter().any(|pattern| match regex::RegexBuilder::new(pattern).case_insensitive(true).build() {
            Ok(re) => re.is_match(&prose),
            Err(e) => {
                tracing::warn!(pattern, error = %e, "skipping a bad memory trigger pattern");
                false
            }
        })
}

/// "... you remember" is a question about the past, not a request to save.
fn asks_to_recall(before: &str, word: &str) -> bool {
    word.eq_ignore_ascii_case("remember") && before.trim_end().to_lowercase().ends_with("you")
}

/// Topic keys: trimmed, lowercase, whitespace runs → `-`, at most 120 bytes; empty → none.
pub fn normalize_topic_key(raw: &str) -> Option<String> {
    let lowered = raw.trim().to_lowercase();
    let dashed = WHITESPACE.replace_all(&lowered, "-");
    let key = cut_at_char_boundary(&dashed, MAX_TOPIC_KEY_BYTES).trim_end_matches('-');
    (!key.is_empty()).then(|| key.to_owned())
}

/// sha256 hex of the lowercased content with whitespace runs collapsed: two saves that differ
/// only in case or spacing are the same memory.
///
/// On every save: whitespace is collapsed by hand (a regex pass and 32 `format!` calls were
/// 5 % of the writer's time). Lowercasing stays whole-string, for its final-sigma rule.
pub fn normalized_hash(content: &str) -> String {
    let mut collapsed = String::with_capacity(content.len());
    for word in content.split_whitespace() {
        if !collapsed.is_empty() {
            collapsed.push(' ');
        }
        collapsed.push_str(word);
    }
    hex::encode(Sha256::digest(collapsed.to_lowercase().as_bytes()))
}

/// Cut `text` to `max` characters, appending `...` when cut (for previews).
pub fn preview(text: &str, max_chars: usize) -> String {
    let flat = WHITESPACE.replace_all(text.trim(), " ");
    match flat.char_indices().nth(max_chars) {
        None => flat.into_owned(),
        Some((idx, _)) => format!("{}...", flat[..idx].trim_end()),
    }
}

/// Levenshtein distance on chars, for similar project names.
pub fn levenshtein(a: &str, b: &str) -> usize {
    let b_chars: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b_chars.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b_chars.len() + 1];
        for (j, cb) in b_chars.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b_chars.len()]
}

/// `text` cut to at most `max` bytes on a character boundary, with `…` when cut.
pub fn cut_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_private_blocks_case_insensitive_multiline() {
        let (out, hit) = redact("key: <PRIVATE>sk-123\nline2</Private> done");
        assert!(hit);
        assert_eq!(out, "key: [REDACTED] done");
        let (out, _) = redact("<private>a</private> and <private>b</private>");
        assert_eq!(out, "[REDACTED] and [REDACTED]");
    }

    #[test]
    fn unclosed_private_redacts_to_end() {
        let (out, hit) = redact("token <private>sk-live-999 and more");
        assert!(hit);
        assert_eq!(out, "token [REDACTED]");
    }

    #[test]
    fn text_without_tags_is_untouched() {
        assert_eq!(redact("  plain  ").0, "  plain  ");
        // `<`s that do not open `<private`, one cut short at the end of the text
        for text in ["a < b <pri", "<p> <privat", "x <<PRIVAT", "é<"] {
            assert_eq!(redact(text).0, text);
        }
    }

    /// The cases shared with the OpenCode plugin's tests (`tests/fixtures/redaction-cases.json`).
    #[test]
    fn every_shared_tag_shape_redacts_as_the_fixture_says() {
        let fixture: serde_json::Value =
            serde_json::from_str(include_str!("../../../tests/fixtures/redaction-cases.json")).unwrap();
        let cases = fixture["cases"].as_array().unwrap();
        assert!(cases.len() >= 20);
        for case in cases {
            let (name, input) = (case["name"].as_str().unwrap(), case["input"].as_str().unwrap());
            let (out, hit) = redact(input);
            assert_eq!(out, case["expected"].as_str().unwrap(), "{name}");
            assert_eq!(hit, case["redacted"].as_bool().unwrap(), "{name}: redacted flag");
            assert!(!out.contains("SECRET"), "{name}: leaked");
            assert_eq!(redact(&out).0, out, "{name}: redacting again changes nothing");
        }
    }

    /// Any text with `SECRET` after an opener, however the tags around it are mangled, loses it.
    #[test]
    fn no_arrangement_of_tags_leaks_what_follows_an_opener() {
        let pieces =
            ["<private>", "</private>", "<PRIVATE note='a'>", "</private >", "<private/>", "< /private>", "x", "\n"];
        for a in pieces {
            for b in pieces {
                for c in pieces {
                    let text = format!("{a}{b}<private>SECRET{c}");
                    assert!(!redact(&text).0.contains("SECRET"), "{text:?}");
                }
            }
        }
    }

    fn secret(text: &str) -> String {
        Redaction::OUTBOUND.apply(text).0.into_owned()
    }

    #[test]
    fn each_secret_kind_is_redacted_by_name() {
        let cases = [
            ("id AKIAQWERTYUIOPASDFGH here", "id [REDACTED:aws-access-key] here"),
            ("ASIAQWERTYUIOPASDFGH", "[REDACTED:aws-access-key]"),
            ("ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5", "[REDACTED:github-token]"),
            ("gho_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5", "[REDACTED:github-token]"),
            ("ghu_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5", "[REDACTED:github-token]"),
            ("ghs_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5", "[REDACTED:github-token]"),
            ("ghr_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5", "[REDACTED:github-token]"),
            ("github_pat_11ABCDEFG0aB3dE5gH7jK9_mN1pQ3sT5vW7yZ9", "[REDACTED:github-token]"),
            ("Authorization: Bearer abc123DEF456ghi789.jkl", "Authorization: Bearer [REDACTED:bearer-token]"),
            (
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nafter",
                "[REDACTED:private-key]\nafter",
            ),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNz and no end", "[REDACTED:private-key]"),
            ("postgres://app:s3cr3tPw@db.local:5432/x", "postgres://app:[REDACTED:url-password]@db.local:5432/x"),
            ("xoxb-1234567890-abcdefghij", "[REDACTED:slack-token]"),
            ("sk_live_aB3dE5gH7jK9mN1pQ3sT", "[REDACTED:stripe-key]"),
            ("sk-aB3dE5gH7jK9mN1pQ3sT5vW7", "[REDACTED:openai-key]"),
            ("sk-proj-aB3dE5gH7jK9mN1pQ3sT5vW7", "[REDACTED:openai-key]"),
            ("sk-ant-api03-aB3dE5gH7jK9mN1pQ3sT5vW7", "[REDACTED:anthropic-key]"),
            ("AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "[REDACTED:google-api-key]"),
            (
                "t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "t=[REDACTED:jwt]",
            ),
            ("DB_PASSWORD=Zq8%vL2!pR5w", "DB_PASSWORD=[REDACTED:env-secret]"),
            ("export API_KEY=\"f9K2mQ7xL4pW8zR1\"", "export API_KEY=\"[REDACTED:env-secret]\""),
            ("client_secret: 9fK2mQ7xL4pW8zR1", "client_secret: [REDACTED:env-secret]"),
        ];
        for (input, expected) in cases {
            let (out, hit) = Redaction::OUTBOUND.apply(input);
            assert_eq!(out, expected, "{input}");
            assert!(hit, "{input}");
        }
    }

    #[test]
    fn placeholders_and_plain_text_are_not_secrets() {
        for text in [
            "AKIAIOSFODNN7EXAMPLE",
            "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
            "sk-proj-xxxxxxxxxxxxxxxxxxxxxxxx",
            "Authorization: Bearer <your-token>",
            "Authorization: Bearer ${GITHUB_TOKEN}",
            "API_KEY=${API_KEY}",
            "API_KEY=$API_KEY",
            "PASSWORD=changeme123",
            "TOKEN=**************",
            "SECRET=your-secret-here",
            "PASSWORD=hunter2hunter2",
            "Passwords: argon2id.",
            "token: refreshed every hour",
            "postgres://app:$DB_PASS@db.local/x",
            "postgres://app:****@db.local/x",
            "see https://example.com/a:b@c and http://host:8080/",
            "the bearer of bad news",
            "a token bucket of 100 tokens; password rules; the secret sauce",
            "sk-short",
            "",
        ] {
            let (out, hit) = Redaction::OUTBOUND.apply(text);
            assert_eq!(out, text);
            assert!(!hit, "{text}");
        }
    }

    #[test]
    fn secrets_only_when_asked_private_always() {
        let text = "<private>p</private> AKIAQWERTYUIOPASDFGH";
        assert_eq!(Redaction::PRIVATE.apply(text), (Cow::Owned("[REDACTED] AKIAQWERTYUIOPASDFGH".into()), true));
        assert_eq!(redact_outbound(text), "[REDACTED] [REDACTED:aws-access-key]");
        assert!(holds_private_or_secret(text) && !holds_private_or_secret("plain"));
        assert_eq!(secret(&redact_outbound(text)), redact_outbound(text), "twice changes nothing more");
        let mut fields = (String::from("AKIAQWERTYUIOPASDFGH"), Some(String::from("ok")));
        assert!(redact_all(Redaction::OUTBOUND, &mut [&mut fields.0]));
        assert!(!redact_all_opt(Redaction::OUTBOUND, &mut [&mut fields.1]));
        assert_eq!(fields.0, "[REDACTED:aws-access-key]");
    }

    #[test]
    fn the_private_mark_is_found_after_many_other_tags() {
        let text = format!("{}<PrIvAtE>secret</private>", "<b>".repeat(10_000));
        let (out, hit) = redact(&text);
        assert!(hit && !out.contains("secret"));
    }

    #[test]
    fn content_cut_on_char_boundary_and_reported() {
        let text = "é".repeat(MAX_CONTENT_BYTES); // 2 bytes each
        let fitted = fit_content("content", &text, MAX_CONTENT_BYTES).unwrap();
        assert_eq!(fitted.truncated_from, Some(MAX_CONTENT_BYTES * 2));
        assert!(fitted.text.len() <= MAX_CONTENT_BYTES);
        assert!(fitted.text.ends_with(TRUNCATED_SUFFIX));
    }

    #[test]
    fn absurd_input_refused() {
        let text = "x".repeat(MAX_INPUT_BYTES + 1);
        let err = fit_content("content", &text, MAX_CONTENT_BYTES).unwrap_err();
        assert_eq!(err.code, ErrorCode::ContentTooLarge);
    }

    #[test]
    fn project_normalization() {
        assert_eq!(normalize_project("  My--App__x "), ("my-app_x".into(), true));
        assert_eq!(normalize_project("ok"), ("ok".into(), false));
        assert_eq!(normalize_project("a---b"), ("a-b".into(), true));
    }

    #[test]
    fn scope_and_topic_normalization() {
        assert_eq!(Scope::parse(" Personal "), Scope::Personal);
        assert_eq!(Scope::parse("team"), Scope::Project);
        assert_eq!(normalize_topic_key("  Auth  Flow\tv2 ").as_deref(), Some("auth-flow-v2"));
        assert_eq!(normalize_topic_key("   "), None);
        assert_eq!(normalize_topic_key(&"k".repeat(300)).unwrap().len(), MAX_TOPIC_KEY_BYTES);
    }

    #[test]
    fn scope_filters_are_strict_saves_lenient() {
        assert_eq!(Scope::parse_filter(None).unwrap(), None);
        assert_eq!(Scope::parse_filter(Some(" ")).unwrap(), None);
        assert_eq!(Scope::parse_filter(Some("Personal")).unwrap(), Some(Scope::Personal));
        assert_eq!(Scope::parse_filter(Some("team")).unwrap_err().code, ErrorCode::InvalidArgument);
        assert_eq!(Scope::parse("team"), Scope::Project);
        for alias in ["user", " Global ", "USER"] {
            assert_eq!(Scope::parse(alias), Scope::Personal, "{alias}");
            assert_eq!(Scope::parse_filter(Some(alias)).unwrap(), Some(Scope::Personal), "{alias}");
        }
    }

    #[test]
    fn hash_ignores_case_and_spacing() {
        assert_eq!(normalized_hash("Hello   World\n"), normalized_hash("hello world"));
        // Stored in every row: the digest of a text must never change between versions.
        assert_eq!(
            normalized_hash(" Hello\t\u{3000}WORLD "),
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
        );
        assert_ne!(normalized_hash("hello world"), normalized_hash("hello there"));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, failure_persistence: None, ..Default::default() })]
        /// The hand-written collapse hashes exactly what the regex version did (rows stored by
        /// earlier versions must still match as duplicates).
        #[test]
        fn hash_matches_the_regex_definition(text in "[ \t\n\u{a0}\u{3000}aAΣσς É.]{0,40}") {
            let reference = WHITESPACE.replace_all(text.trim(), " ").to_lowercase();
            proptest::prop_assert_eq!(normalized_hash(&text), hex::encode(Sha256::digest(reference.as_bytes())));
        }
    }

    #[test]
    fn levenshtein_basics() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("", "abc"), 3);
    }

    #[test]
    fn memory_triggers_match_whole_words_outside_code() {
        let none: &[String] = &[];
        for yes in [
            "remember that we use pnpm",
            "Please REMEMBER: tabs, not spaces",
            "memorize this port number",
            "save this for later",
            "note this down",
            "keep in mind the API is v2",
            "don't forget the migration",
            "don’t forget the migration",
            "dont forget",
            "learn this pattern",
            "store this config",
            "recuerda que usamos pnpm",
            "hay que recordar esto",
            "no olvides el puerto",
            "ok.\n```\ncode\n```\nremember the flag",
        ] {
            assert!(memory_trigger(yes, none), "{yes:?}");
        }
        for no in [
            "I remembered to run the tests",
            "remembering things is hard",
            "the memorized value",
            "do you remember what we decided?",
            "you remember the port?",
            "fix the `remember_me` cookie",
            "see `remember this`",
            "```rust\n// remember to free\n```",
            "~~~\nsave this\n",
            "notes on the design",
            "restore this backup",
            "",
        ] {
            assert!(!memory_trigger(no, none), "{no:?}");
        }
        let extra = vec!["merk dir".to_owned(), "(".to_owned()];
        assert!(memory_trigger("Bitte merk dir das", &extra));
        assert!(!memory_trigger("nothing here", &extra), "a bad pattern is skipped");
    }
}

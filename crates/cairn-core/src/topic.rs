//! Topic-key suggestion (engram §4.8): `family/segment`, so agents revise one memory per topic
//! instead of piling up near-duplicates.

use crate::text::cut_at_char_boundary;

const FAMILIES: &[(&str, &[&str])] = &[
    ("architecture", &["architecture", "design", "adr", "refactor"]),
    ("bug", &["bug", "bugfix", "fix", "incident", "hotfix"]),
    ("decision", &["decision"]),
    ("pattern", &["pattern", "convention", "guideline"]),
    ("config", &["config", "setup", "infra", "infrastructure", "ci"]),
    ("discovery", &["discovery", "investigation", "root_cause", "root-cause"]),
    ("learning", &["learning", "learn"]),
    ("session", &["session_summary"]),
];

/// Keywords sniffed from title and content when the type says nothing, in priority order.
const SNIFF: &[(&str, &[&str])] = &[
    ("bug", &["bug", "fix", "fixed", "crash", "error", "regression", "broken"]),
    ("architecture", &["architecture", "design", "refactor", "module", "layer"]),
    ("decision", &["decided", "decision", "chose", "choose", "instead of"]),
    ("pattern", &["pattern", "convention", "always", "never", "guideline"]),
    ("config", &["config", "setting", "env", "environment", "ci", "deploy"]),
    ("discovery", &["discovered", "found out", "turns out", "root cause"]),
    ("learning", &["learned", "learning", "til"]),
];

/// Suggest a topic key from a memory's type, title and content.
pub fn suggest_topic_key(kind: Option<&str>, title: &str, content: &str) -> String {
    let family = family_for(kind.unwrap_or_default(), &format!("{title}\n{content}"));
    let mut segment = slug(title, 100);
    if segment.is_empty() {
        let first_words: Vec<&str> = content.split_whitespace().take(8).collect();
        segment = slug(&first_words.join(" "), 100);
    }
    if segment.is_empty() {
        segment = "general".into();
    }
    let prefix = format!("{family}-");
    if let Some(rest) = segment.strip_prefix(&prefix).filter(|r| !r.is_empty()) {
        segment = rest.to_owned();
    }
    format!("{family}/{segment}")
}

fn family_for(kind: &str, text: &str) -> String {
    let kind = kind.trim().to_lowercase();
    if let Some((family, _)) = FAMILIES.iter().find(|(_, kinds)| kinds.contains(&kind.as_str())) {
        return (*family).to_owned();
    }
    let lowered = text.to_lowercase();
    let words: Vec<&str> = lowered.split(|c: char| !c.is_alphanumeric()).collect();
    let has = |kw: &str| if kw.contains(' ') { lowered.contains(kw) } else { words.contains(&kw) };
    if let Some((family, _)) = SNIFF.iter().find(|(_, kws)| kws.iter().any(|k| has(k))) {
        return (*family).to_owned();
    }
    if !kind.is_empty() && kind != "manual" {
        return slug(&kind, 40);
    }
    "topic".into()
}

/// Lowercase, runs of non-alphanumerics → one `-`, at most `max` bytes.
fn slug(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.to_lowercase().chars() {
        if c.is_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    cut_at_char_boundary(out.trim_end_matches('-'), max).trim_end_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn family_from_type_and_slug_from_title() {
        assert_eq!(suggest_topic_key(Some("bugfix"), "Fix: N+1 query in /orders", ""), "bug/fix-n-1-query-in-orders");
        assert_eq!(suggest_topic_key(Some("ADR"), "Architecture decisions", ""), "architecture/decisions");
    }

    #[test]
    fn sniffs_keywords_and_falls_back() {
        assert_eq!(suggest_topic_key(None, "Login crash", "it crashed"), "bug/login-crash");
        assert_eq!(suggest_topic_key(Some("manual"), "", "Hello there world"), "topic/hello-there-world");
        assert_eq!(suggest_topic_key(None, "", ""), "topic/general");
        assert_eq!(suggest_topic_key(Some("recipe"), "Bread", ""), "recipe/bread");
    }
}

//! Passive capture (engram §8): pull "Key Learnings" out of an agent's final message and save
//! each one, skipping learnings already known in the project. Purely lexical, no model.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::memory::NewObservation;
use crate::store::Store;
use crate::text::{normalize_project, require};

/// Learnings shorter than this (bytes or words) are noise, not knowledge.
const MIN_BYTES: usize = 20;
const MIN_WORDS: usize = 4;

static HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?im)^#{2,3}\s+(key\s+learnings?|learnings?|aprendizajes(\s+clave)?)\s*:?\s*$").expect("valid regex")
});
static NEXT_SECTION: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^#{1,3}\s").expect("valid regex"));
static NUMBERED: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^\s*\d+[.)]\s+(.+)$").expect("valid regex"));
static BULLET: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?m)^\s*[-*]\s+(.+)$").expect("valid regex"));
static MARKUP: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\*\*|`|(^|\s)\*|\*(\s|$)").expect("valid regex"));

/// What to capture.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassiveCapture {
    pub content: String,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub project: Option<String>,
    /// Where the host runs: with no `project`, the project is detected from it here (cached
    /// per directory), so a hook process runs no git of its own.
    #[serde(default)]
    pub directory: Option<String>,
    /// Where the text came from (`subagent-stop`, `task-complete`, `mcp-passive`...).
    #[serde(default)]
    pub source: Option<String>,
}

/// What passive capture found and saved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PassiveOutcome {
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub extracted: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub saved: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub duplicates: usize,
    pub ids: Vec<i64>,
}

/// The learnings of the last "Key Learnings" section that has any.
pub fn extract_learnings(text: &str) -> Vec<String> {
    let headers: Vec<_> = HEADER.find_iter(text).collect();
    for header in headers.iter().rev() {
        let body = &text[header.end()..];
        let section = NEXT_SECTION.find(body).map_or(body, |m| &body[..m.start()]);
        let mut items: Vec<String> = NUMBERED.captures_iter(section).map(|c| c[1].to_owned()).collect();
        if items.is_empty() {
            items = BULLET.captures_iter(section).map(|c| c[1].to_owned()).collect();
        }
        let cleaned: Vec<String> = items.iter().map(|i| clean(i)).filter(|i| is_substantial(i)).collect();
        if !cleaned.is_empty() {
            return cleaned;
        }
    }
    Vec::new()
}

fn clean(item: &str) -> String {
    let stripped = MARKUP.replace_all(item, " ");
    stripped.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_substantial(item: &str) -> bool {
    item.len() >= MIN_BYTES && item.split_whitespace().count() >= MIN_WORDS
}

impl Store {
    /// Extract and save learnings; one already known in the project counts as a duplicate.
    pub fn capture_passive(&mut self, capture: &PassiveCapture) -> Result<PassiveOutcome> {
        require("content", &capture.content)?;
        let (capture, _) = self.redacted(capture);
        let capture = &capture;
        let learnings = extract_learnings(&capture.content);
        let mut outcome = PassiveOutcome { extracted: learnings.len(), ..PassiveOutcome::default() };
        let source = capture.source.clone().unwrap_or_else(|| "mcp-passive".to_owned());
        let given = crate::agent::project_or_detected(capture.project.as_deref(), capture.directory.as_deref())?;
        for learning in learnings {
            let project = given.as_deref().map(|p| normalize_project(p).0);
            if self.known_in_project(project.as_deref(), &learning)? {
                outcome.duplicates += 1;
                continue;
            }
            let title = match learning.char_indices().nth(60) {
                Some((cut, _)) => format!("{}...", &learning[..cut]),
                None => learning.clone(),
            };
            let saved = self.save(&NewObservation {
                title,
                content: learning,
                kind: Some("passive".into()),
                session_id: capture.session_id.clone(),
                project: given.clone(),
                tool_name: Some(source.clone()),
                ..NewObservation::default()
            })?;
            outcome.saved += 1;
            outcome.ids.push(saved.id);
        }
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPLY: &str = "Done.\n\n## Key Learnings:\n1. **Always** run `cargo fmt` before pushing to CI\n2) short one\n3. The integration tests need a real Postgres on port 5433\n\n## Next\n- nothing\n";

    #[test]
    fn extracts_numbered_items_of_the_last_section() {
        assert_eq!(
            extract_learnings(REPLY),
            vec![
                "Always run cargo fmt before pushing to CI",
                "The integration tests need a real Postgres on port 5433"
            ]
        );
        let spanish = "### Aprendizajes clave\n- Los tests de integración necesitan Redis en local\n";
        assert_eq!(extract_learnings(spanish).len(), 1);
        assert!(extract_learnings("no sections here").is_empty());
    }

    #[test]
    fn saves_once_then_counts_duplicates() {
        let mut s = Store::open_in_memory().unwrap();
        let capture = PassiveCapture { content: REPLY.into(), project: Some("p".into()), ..Default::default() };
        let first = s.capture_passive(&capture).unwrap();
        assert_eq!((first.extracted, first.saved, first.duplicates), (2, 2, 0));
        let again = s.capture_passive(&capture).unwrap();
        assert_eq!((again.saved, again.duplicates), (0, 2));
        assert_eq!(s.get(first.ids[0]).unwrap().tool_name.as_deref(), Some("mcp-passive"));
    }

    #[test]
    fn a_capture_with_only_a_directory_lands_in_its_project() {
        let mut s = Store::open_in_memory().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let project_dir = dir.path().join("Ledger-Service");
        std::fs::create_dir(&project_dir).unwrap();
        let capture = PassiveCapture {
            content: REPLY.into(),
            directory: Some(project_dir.display().to_string()),
            ..Default::default()
        };
        let saved = s.capture_passive(&capture).unwrap();
        assert_eq!(saved.saved, 2);
        assert_eq!(s.get(saved.ids[0]).unwrap().project, "ledger-service");
        // a named project wins over the directory
        let named = PassiveCapture { project: Some("billing".into()), ..capture };
        let again = s.capture_passive(&named).unwrap();
        assert_eq!((again.saved, s.get(again.ids[0]).unwrap().project.as_str()), (2, "billing"));
    }
}

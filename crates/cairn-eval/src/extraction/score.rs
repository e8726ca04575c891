//! How an extracted memory is judged against a session's annotation, without a model:
//!
//! - A memory **states** a fact when its title and content (lowercased) hold, for every keyword
//!   group of the fact, at least one of the group's alternatives as a substring.
//! - **Recall**: the share of annotated facts that at least one memory states.
//! - **Precision**: the share of memories that state an annotated fact or an acceptable one (a
//!   true detail the annotation does not require). A memory that states neither is **wrong**
//!   (made up, trivial, or about the conversation rather than the project). A memory that
//!   states only facts earlier memories already stated is **redundant**: counted as correct,
//!   and reported.
//! - **Noise**: a memory that carries transcript rather than a fact: a speaker line, a tool
//!   note (`(ran bash: …)`), a code block of more than six lines, or 60 characters or more
//!   copied from a tool's output.

use super::data::Session;

/// The verdict on one memory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Verdict {
    /// The annotated facts it states (ids).
    pub states: Vec<String>,
    /// It states an acceptable detail.
    pub acceptable: bool,
    /// It states no fact no earlier memory stated.
    pub redundant: bool,
    /// Why it is transcript noise, if it is.
    pub noise: Option<String>,
}

impl Verdict {
    pub fn correct(&self) -> bool {
        !self.states.is_empty() || self.acceptable
    }
}

/// Whether `text` states the fact of `groups`.
pub fn states(text: &str, groups: &[Vec<String>]) -> bool {
    let text = text.to_lowercase();
    !groups.is_empty() && groups.iter().all(|group| group.iter().any(|alt| text.contains(alt.as_str())))
}

/// Judge `memories` (`(title, content)`, in the order they were saved) against `session`.
pub fn judge(session: &Session, memories: &[(String, String)]) -> Vec<Verdict> {
    let mut stated: Vec<String> = Vec::new();
    memories
        .iter()
        .map(|(title, content)| {
            let text = format!("{title}\n{content}");
            let states: Vec<String> =
                session.facts.iter().filter(|f| self::states(&text, &f.keywords)).map(|f| f.id.clone()).collect();
            let redundant = !states.is_empty() && states.iter().all(|id| stated.contains(id));
            stated.extend(states.iter().cloned());
            Verdict {
                acceptable: session.acceptable.iter().any(|a| self::states(&text, &a.keywords)),
                redundant,
                noise: noise(session, content),
                states,
            }
        })
        .collect()
}

/// Characters copied from a tool's output that make a memory a tool dump.
const COPIED_CHARS: usize = 60;

/// Why `content` is transcript noise, if it is.
pub fn noise(session: &Session, content: &str) -> Option<String> {
    if cairn_llm::extract::is_noise(content) {
        return Some("speaker line, long code block or shell session".into());
    }
    if content.contains("(ran ") {
        return Some("tool note".into());
    }
    let chars: Vec<char> = content.chars().collect();
    if chars.len() >= COPIED_CHARS {
        for output in session.messages.iter().flat_map(|m| &m.tools).map(|t| t.output.as_str()) {
            let copied = chars.windows(COPIED_CHARS).any(|w| output.contains(&w.iter().collect::<String>()));
            if copied {
                return Some("copied tool output".into());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extraction::data::{Acceptable, Fact, Message, ToolCall};

    fn session() -> Session {
        let groups = |g: &[&[&str]]| g.iter().map(|a| a.iter().map(|s| (*s).to_owned()).collect()).collect();
        Session {
            id: "s99".into(),
            split: "dev".into(),
            host: "opencode".into(),
            project: "p".into(),
            title: "t".into(),
            messages: vec![Message {
                role: "assistant".into(),
                text: "ran it".into(),
                tools: vec![ToolCall {
                    tool: "bash".into(),
                    input: serde_json::json!({"command": "cargo test"}),
                    output: "running 6 tests\ntest result: ok. 6 passed; 0 failed; 0 ignored; finished in 1.92s".into(),
                }],
            }],
            facts: vec![
                Fact {
                    id: "f1".into(),
                    kind: "bugfix".into(),
                    note: String::new(),
                    keywords: groups(&[&["port 0", "ephemeral"], &["flaky", "addrinuse"]]),
                },
                Fact { id: "f2".into(), kind: "config".into(), note: String::new(), keywords: groups(&[&["9411"]]) },
            ],
            acceptable: vec![Acceptable { keywords: groups(&[&["local_addr"]]) }],
            questions: Vec::new(),
        }
    }

    fn memory(title: &str, content: &str) -> (String, String) {
        (title.to_owned(), content.to_owned())
    }

    #[test]
    fn a_memory_states_a_fact_only_with_every_group() {
        let verdicts = judge(
            &session(),
            &[
                memory("Flaky tests", "Bind to Port 0 instead of 9411."),
                memory("Tests", "Bind to port 0."),
                memory("Helper", "IngestServer::local_addr returns the bound port."),
                memory("Again", "The ADDRINUSE flake is gone with an ephemeral port."),
            ],
        );
        assert_eq!(verdicts[0].states, ["f1", "f2"], "case-insensitive, both facts");
        assert!(verdicts[1].states.is_empty() && !verdicts[1].correct(), "one group is not the fact");
        assert!(verdicts[2].correct() && verdicts[2].states.is_empty(), "an acceptable detail");
        assert!(verdicts[3].redundant && verdicts[3].correct(), "said before: redundant, not wrong");
    }

    #[test]
    fn transcript_and_tool_output_are_noise() {
        let s = session();
        assert!(noise(&s, "user: fix the tests\nassistant: done").is_some());
        assert!(noise(&s, "Checked with (ran bash: cargo test).").is_some());
        assert_eq!(
            noise(&s, "Result: test result: ok. 6 passed; 0 failed; 0 ignored; finished in 1.92s").as_deref(),
            Some("copied tool output")
        );
        assert_eq!(noise(&s, "All 6 ingest tests pass in 1.9 s after binding port 0."), None);
    }
}

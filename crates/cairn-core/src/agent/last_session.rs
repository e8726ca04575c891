//! The Last Session record: what a session did, kept for the next one, built without a model
//! from what cairn already holds: the user's requests (the session's prompts, else its archived
//! user messages), the tools it called and the files they touched (the history archive's tool
//! parts and their inputs), its Key Learnings (passive capture) and the memories it saved, and
//! where it stopped (the last assistant text).
//!
//! One memory per session (type `session_record`, topic `session/<id>/record`), revised each
//! time the session stops, ends or compacts. A memory, not a column of `sessions`: it has a
//! sync id, so exports, imports and sync carry it like any memory; search finds it; `mem_context`
//! lists it among the recent memories. The `[MEMORY]` block shows it as "Last Session".

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::history::HistoryArchive;
use crate::memory::{NewObservation, SaveOutcome};
use crate::sessions::{catch_all_sessions_like, validate_session_id};
use crate::store::Store;
use crate::text::{normalize_project, preview, redact};

pub use crate::model::SESSION_RECORD;
pub(crate) use crate::model::record_says_compacted;
use crate::model::{SESSION_RECORD_SOURCE as SOURCE, SESSION_RECORD_SOURCE_COMPACTED as SOURCE_COMPACTED};
pub(crate) use crate::text::cut_bytes;
/// Most bytes of a record: it is read in full at every first prompt of the project.
pub const MAX_RECORD_BYTES: usize = 2_000;
/// The user's requests kept (the newest), and the characters of each.
const REQUESTS: usize = 3;
const REQUEST_CHARS: usize = 200;
/// Tools named (most called first), files listed per line, learnings and saved memories kept.
const TOOLS: usize = 8;
const FILES: usize = 8;
const LEARNINGS: usize = 5;
const LEARNING_CHARS: usize = 200;
const SAVED: usize = 5;
const STOPPED_CHARS: usize = 400;
/// Tool calls read from the archive (the newest): a long session has thousands.
const TOOL_PARTS: usize = 300;
/// Memory types that are about the session rather than learned in it.
const SESSION_KINDS: [&str; 4] = ["passive", SESSION_RECORD, "session_summary", super::COMPACTION_SUMMARY];

/// The topic of a session's record: one memory per session, revised in place.
pub fn session_record_topic(session_id: &str) -> String {
    format!("session/{session_id}/record")
}

/// The arguments of `record_session`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordSession {
    pub session_id: String,
    /// The project when cairn does not know the session yet.
    #[serde(default)]
    pub project: Option<String>,
    /// The host compacted the session just now (its archive may not show it yet).
    #[serde(default)]
    pub compacted: bool,
}

/// What a session did, as read from the stores.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFacts {
    pub session_id: String,
    pub agent: String,
    pub title: Option<String>,
    pub started_at: String,
    /// The user's requests, oldest first.
    pub requests: Vec<String>,
    /// Tool names with their call counts, most called first.
    pub tools: Vec<(String, usize)>,
    pub files_changed: Vec<String>,
    pub files_read: Vec<String>,
    pub learnings: Vec<String>,
    /// `#id title` of the memories saved in the session.
    pub saved: Vec<String>,
    pub stopped_at: Option<String>,
    pub compactions: usize,
}

impl SessionFacts {
    fn is_empty(&self) -> bool {
        self.requests.is_empty()
            && self.tools.is_empty()
            && self.learnings.is_empty()
            && self.saved.is_empty()
            && self.stopped_at.is_none()
    }
}

/// The record's text: plain labelled lines, within [`MAX_RECORD_BYTES`].
pub fn render_record(f: &SessionFacts, now: &str) -> String {
    let mut head = format!("Session {}", f.session_id);
    if !f.agent.is_empty() {
        head.push_str(&format!(" ({})", f.agent));
    }
    if let Some(title) = f.title.as_deref().filter(|t| !t.trim().is_empty()) {
        head.push_str(&format!(" \"{}\"", preview(title, 80)));
    }
    head.push_str(&format!(", {} to {}", minute(&f.started_at), minute(now)));
    if f.compactions > 0 {
        head.push_str(&format!(", compacted {}×", f.compactions));
    }
    let mut lines = vec![head];
    if !f.requests.is_empty() {
        lines.push("Asked:".to_owned());
        lines.extend(f.requests.iter().map(|r| format!("- {}", preview(r, REQUEST_CHARS))));
    }
    if !f.tools.is_empty() {
        let tools: Vec<String> = f.tools.iter().take(TOOLS).map(|(name, n)| format!("{n}× {name}")).collect();
        lines.push(format!("Tools: {}", tools.join(", ")));
    }
    if !f.files_changed.is_empty() {
        lines.push(format!("Files changed: {}", list(&f.files_changed)));
    }
    if !f.files_read.is_empty() {
        lines.push(format!("Files read: {}", list(&f.files_read)));
    }
    if !f.learnings.is_empty() {
        lines.push("Key Learnings:".to_owned());
        lines.extend(f.learnings.iter().take(LEARNINGS).map(|l| format!("- {}", preview(l, LEARNING_CHARS))));
    }
    if !f.saved.is_empty() {
        lines.push(format!("Saved: {}", f.saved.iter().take(SAVED).cloned().collect::<Vec<_>>().join("; ")));
    }
    if let Some(stopped) = &f.stopped_at {
        lines.push(format!("Stopped at: {}", preview(stopped, STOPPED_CHARS)));
    }
    cut_bytes(&lines.join("\n"), MAX_RECORD_BYTES)
}

fn list(files: &[String]) -> String {
    let mut shown: Vec<String> = files.iter().take(FILES).cloned().collect();
    if files.len() > FILES {
        shown.push(format!("and {} more", files.len() - FILES));
    }
    shown.join(", ")
}

fn minute(ts: &str) -> String {
    ts.get(..16).unwrap_or(ts).replace('T', " ")
}

impl Store {
    /// Build the session's record and revise its one memory; `None` when there is nothing to
    /// record (an unknown or empty session, a sub-agent's, the catch-all one). What the
    /// history archive holds of the session fills in what the store lacks.
    pub fn record_session(&mut self, req: &RecordSession, history: &mut HistoryArchive) -> Result<Option<SaveOutcome>> {
        validate_session_id(&req.session_id)?;
        let id = req.session_id.trim();
        if is_catch_all(id) {
            return Ok(None);
        }
        let session = self.find_session(id)?;
        if session.as_ref().is_some_and(|s| s.parent_id.is_some()) {
            return Ok(None);
        }
        let mut facts = SessionFacts {
            session_id: id.to_owned(),
            agent: session.as_ref().map(|s| s.agent.clone()).unwrap_or_default(),
            title: session.as_ref().and_then(|s| s.title.clone()),
            started_at: session.as_ref().map_or_else(|| self.now(), |s| s.started_at.clone()),
            ..SessionFacts::default()
        };
        facts.requests = self.session_requests(id, REQUESTS)?;
        facts.learnings = self.session_learnings(id, LEARNINGS)?;
        facts.saved = self
            .session_saved(id, &SESSION_KINDS, SAVED)?
            .into_iter()
            .map(|(id, title)| format!("#{id} {}", preview(&title, 80)))
            .collect();
        let directory = session.as_ref().map(|s| s.directory.clone()).unwrap_or_default();
        let archived = match history.db().and_then(|db| db.session_facts(id, &directory, REQUESTS, TOOL_PARTS)) {
            Ok(archived) => archived,
            Err(err) => {
                // The record is still worth having without the archive.
                tracing::debug!(session = id, error = %err, "no history for the session record");
                None
            }
        };
        let mut project = session.as_ref().map(|s| s.project.clone()).filter(|p| !p.is_empty());
        if let Some(a) = archived {
            if a.parent {
                return Ok(None);
            }
            if facts.requests.is_empty() {
                facts.requests = a.requests;
            }
            if facts.agent.is_empty() {
                facts.agent = a.host;
            }
            facts.title = facts.title.or(a.title);
            facts.tools = a.tools;
            facts.files_changed = a.files_changed;
            facts.files_read = a.files_read;
            facts.stopped_at = a.stopped_at;
            facts.compactions = a.compactions;
            project = project.or(a.project);
        }
        if facts.is_empty() {
            return Ok(None);
        }
        let project = project.or_else(|| req.project.as_deref().map(|p| normalize_project(p).0));
        let topic = session_record_topic(id);
        let compacted = req.compacted
            || facts.compactions > 0
            || record_says_compacted(self.newest_tool_name(&topic, SESSION_RECORD)?.as_deref());
        if compacted && facts.compactions == 0 {
            facts.compactions = 1;
        }
        let content = redact(&render_record(&facts, &self.now())).0;
        let title = match project.as_deref().filter(|p| !p.is_empty()) {
            Some(p) => format!("Last session: {p} ({id})"),
            None => format!("Last session ({id})"),
        };
        let saved = self.save(&NewObservation {
            title,
            content,
            kind: Some(SESSION_RECORD.into()),
            session_id: Some(id.to_owned()),
            project,
            topic_key: Some(topic),
            tool_name: Some(if compacted { SOURCE_COMPACTED } else { SOURCE }.to_owned()),
            ..NewObservation::default()
        })?;
        Ok(Some(saved))
    }

    /// Revise the record after the session ended or compacted; a failure is logged, never
    /// passed on (what the caller did is done, and the record is the next session's help).
    pub fn record_session_quietly(&mut self, session_id: &str, compacted: bool, history: &mut HistoryArchive) {
        let req = RecordSession { session_id: session_id.to_owned(), project: None, compacted };
        if let Err(err) = self.record_session(&req, history) {
            tracing::warn!(session = session_id, error = %err, "the session's Last Session record was not revised");
        }
    }
}

fn is_catch_all(id: &str) -> bool {
    let prefix = catch_all_sessions_like();
    id.starts_with(prefix.trim_end_matches('%'))
}

#[cfg(test)]
#[path = "last_session_tests.rs"]
mod tests;

//! What host plugins and hooks store for the agent without it asking: the summary a host wrote
//! when it compacted a session (the compaction summary), and the user's profile they inject.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::memory::{NewObservation, SaveOutcome};
use crate::model::Observation;
use crate::sessions::validate_session_id;
use crate::store::Store;
use crate::text::{normalize_project, require};

pub use crate::model::COMPACTION_SUMMARY;
/// Most profile items anyone may ask for.
const MAX_PROFILE: usize = 50;

/// Why the host compacted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompactionTrigger {
    /// The host ran out of room.
    #[default]
    Auto,
    /// The user (or a plugin command) asked.
    Manual,
}

/// The arguments of `save_compaction`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionSave {
    pub session_id: String,
    #[serde(default)]
    pub project: Option<String>,
    /// Where the host runs: a new session with no `project` gets the one detected from it.
    #[serde(default)]
    pub directory: Option<String>,
    pub summary: String,
    #[serde(default)]
    pub trigger: CompactionTrigger,
    /// The context had already overflowed when the host compacted.
    #[serde(default)]
    pub overflow: bool,
}

/// The topic of a session's compaction summary: one memory per session, revised each time.
pub fn compaction_topic(session_id: &str) -> String {
    format!("session/{session_id}/compaction")
}

impl Store {
    /// Store the summary a host wrote when compacting a session, revising the session's
    /// earlier one. It is the "Last Session" of the `[MEMORY]` block until a newer summary.
    pub fn save_compaction(&mut self, c: &CompactionSave) -> Result<SaveOutcome> {
        validate_session_id(&c.session_id)?;
        require("summary", &c.summary)?;
        // A known session keeps its project; a new one is created with the one given.
        let project = match self.session_project(&c.session_id)? {
            Some(project) => Some(project),
            None => crate::agent::project_or_detected(c.project.as_deref(), c.directory.as_deref())?
                .map(|p| normalize_project(&p).0),
        };
        let title = match project.as_deref().filter(|p| !p.is_empty()) {
            Some(p) => format!("Compaction summary: {p} ({})", c.session_id),
            None => format!("Compaction summary ({})", c.session_id),
        };
        let trigger = match c.trigger {
            CompactionTrigger::Auto => "auto",
            CompactionTrigger::Manual => "manual",
        };
        let overflow = if c.overflow { ":overflow" } else { "" };
        self.save(&NewObservation {
            title,
            content: c.summary.clone(),
            kind: Some(COMPACTION_SUMMARY.into()),
            session_id: Some(c.session_id.clone()),
            project,
            topic_key: Some(compaction_topic(&c.session_id)),
            // Where it came from, for `get` and exports; the content stays the host's words.
            tool_name: Some(format!("compaction:{trigger}{overflow}")),
            ..NewObservation::default()
        })
    }

    /// The user's profile: personal memories (they follow the user everywhere) and, with a
    /// project, that project's `preference` memories; pinned first, then preferences, then the
    /// most recently seen.
    pub fn profile(&self, project: Option<&str>, limit: usize) -> Result<Vec<Observation>> {
        let project = project.map(|p| normalize_project(p).0).filter(|p| !p.is_empty());
        let limit = if limit == 0 { 5 } else { limit.min(MAX_PROFILE) };
        self.profile_memories(project.as_deref(), limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;
    use crate::memory::SaveAction;

    fn save(s: &mut Store, title: &str, kind: &str, scope: &str, project: &str) -> i64 {
        let new = NewObservation {
            title: title.into(),
            content: format!("{title} content"),
            kind: Some(kind.into()),
            scope: Some(scope.into()),
            project: Some(project.into()),
            ..NewObservation::default()
        };
        s.save(&new).unwrap().id
    }

    #[test]
    fn one_compaction_summary_per_session_revised() {
        let mut s = Store::open_in_memory().unwrap();
        let c = CompactionSave {
            session_id: "ses-1".into(),
            project: Some("Cairn".into()),
            summary: "## Goal\nfirst".into(),
            ..CompactionSave::default()
        };
        let first = s.save_compaction(&c).unwrap();
        assert_eq!((first.action, first.kind.as_str()), (SaveAction::Created, COMPACTION_SUMMARY));
        assert_eq!(first.topic_key.as_deref(), Some("session/ses-1/compaction"));
        assert_eq!(first.project, "cairn");
        let again = CompactionSave {
            summary: "## Goal\nsecond".into(),
            trigger: CompactionTrigger::Manual,
            overflow: true,
            project: None,
            ..c.clone()
        };
        let second = s.save_compaction(&again).unwrap();
        assert_eq!((second.id, second.action), (first.id, SaveAction::Revised));
        let stored = s.get(first.id).unwrap();
        assert!(stored.content.contains("second"));
        assert_eq!(stored.tool_name.as_deref(), Some("compaction:manual:overflow"));
        assert_eq!(stored.project, "cairn", "the session's project");
    }

    #[test]
    fn a_new_sessions_compaction_takes_the_project_of_its_directory() {
        let mut s = Store::open_in_memory().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let project_dir = dir.path().join("shop-api");
        std::fs::create_dir(&project_dir).unwrap();
        let c = CompactionSave {
            session_id: "ses-dir".into(),
            directory: Some(project_dir.display().to_string()),
            summary: "## Goal\nrefunds".into(),
            ..CompactionSave::default()
        };
        assert_eq!(s.save_compaction(&c).unwrap().project, "shop-api");
    }

    #[test]
    fn compaction_bad_input_is_clear() {
        let mut s = Store::open_in_memory().unwrap();
        let empty = CompactionSave { session_id: "s".into(), summary: " ".into(), ..CompactionSave::default() };
        assert_eq!(s.save_compaction(&empty).unwrap_err().code, ErrorCode::EmptyField);
        let no_session = CompactionSave { summary: "x".into(), ..CompactionSave::default() };
        assert!(s.save_compaction(&no_session).is_err());
    }

    #[test]
    fn profile_is_personal_then_preferences_pinned_first() {
        let mut s = Store::open_in_memory().unwrap();
        let older = save(&mut s, "tabs", "preference", "personal", "a");
        let note = save(&mut s, "uses fish shell", "discovery", "personal", "b");
        let project_pref = save(&mut s, "pnpm here", "preference", "project", "a");
        save(&mut s, "other project pref", "preference", "project", "z");
        save(&mut s, "a decision", "decision", "project", "a");
        s.set_pinned(note, true).unwrap();
        let ids = |p: Option<&str>, n| s.profile(p, n).unwrap().iter().map(|o| o.id).collect::<Vec<_>>();
        assert_eq!(ids(Some("a"), 5), [note, project_pref, older]);
        assert_eq!(ids(None, 5), [note, older]);
        assert_eq!(ids(Some("a"), 1), [note]);
    }
}

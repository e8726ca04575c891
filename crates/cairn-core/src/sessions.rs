//! Sessions: created on first use, ended with a (redacted) summary, listed by recent activity.

use serde::{Deserialize, Serialize};

use crate::error::{CairnError, ErrorCode, Result};
use crate::text::require;

/// Who opens a session and where.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewSession {
    pub id: String,
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub directory: Option<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub parent_id: Option<String>,
    /// The host's name for the session; a later start with a title renames it.
    #[serde(default)]
    pub title: Option<String>,
}

pub(crate) use crate::model::catch_all_sessions_like;
pub use crate::model::default_session_id;
pub(crate) fn session_not_found(id: &str) -> CairnError {
    CairnError::new(ErrorCode::SessionNotFound, format!("session {id:?} not found"))
        .with_hint("start it first (POST /sessions or mem_session_start), or omit the session id")
}

/// Session ids are agent-supplied; refuse the ones that would break paths, logs or terminals.
pub(crate) fn validate_session_id(id: &str) -> Result<()> {
    require("session id", id)?;
    if id.len() > 256 || id.chars().any(char::is_control) {
        return Err(CairnError::invalid("session id must be at most 256 bytes with no control characters"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::store::sessions::ensure_session;

    fn store() -> Store {
        Store::open_in_memory().unwrap()
    }

    #[test]
    fn start_is_idempotent_and_fills_blanks() {
        let mut s = store();
        s.start_session(&NewSession { id: "s1".into(), ..Default::default() }).unwrap();
        let got = s
            .start_session(&NewSession {
                id: "s1".into(),
                project: Some("Cairn".into()),
                directory: Some("/w".into()),
                agent: Some("opencode".into()),
                parent_id: Some("p0".into()),
                title: None,
            })
            .unwrap();
        assert_eq!(got.project, "cairn");
        assert_eq!(got.directory, "/w");
        assert_eq!(got.parent_id.as_deref(), Some("p0"));
        // A later start does not overwrite what is set.
        let again = s
            .start_session(&NewSession { id: "s1".into(), project: Some("other".into()), ..Default::default() })
            .unwrap();
        assert_eq!(again.project, "cairn");
    }

    /// A session with nothing left to fill is not rewritten (a save names one every time).
    #[test]
    fn a_complete_session_is_left_untouched() {
        let s = store();
        // Rows inserted or updated, triggers included.
        let writes = |session: NewSession| {
            let before = s.conn().total_changes();
            ensure_session(s.conn(), &session, "2026-11-22T00:00:00Z").unwrap();
            s.conn().total_changes() > before
        };
        let full = || NewSession {
            id: "s1".into(),
            project: Some("cairn".into()),
            directory: Some("/w".into()),
            agent: Some("opencode".into()),
            parent_id: Some("p0".into()),
            title: Some("Fix the build".into()),
        };
        assert!(writes(full()), "created");
        assert!(!writes(NewSession { id: "s1".into(), ..Default::default() }), "nothing given");
        assert!(!writes(full()), "everything already set");
        assert!(writes(NewSession { id: "s2".into(), ..Default::default() }), "created blank");
        let agent = NewSession { id: "s2".into(), agent: Some("codex".into()), ..Default::default() };
        assert!(writes(agent), "a blank filled");
        let renamed = NewSession { id: "s1".into(), title: Some("Fix the tests".into()), ..Default::default() };
        assert!(writes(renamed), "a new title replaces the old one");
    }

    #[test]
    fn titles_are_kept_and_renamed_children_listed_on_request() {
        let mut s = store();
        let titled = |id: &str, title: Option<&str>, parent: Option<&str>| NewSession {
            id: id.into(),
            project: Some("p".into()),
            title: title.map(str::to_owned),
            parent_id: parent.map(str::to_owned),
            ..Default::default()
        };
        assert_eq!(
            s.start_session(&titled("main", Some("Auth <private>x</private>"), None)).unwrap().title.as_deref(),
            Some("Auth [REDACTED]")
        );
        assert_eq!(
            s.start_session(&titled("main", None, None)).unwrap().title.as_deref(),
            Some("Auth [REDACTED]"),
            "kept"
        );
        assert_eq!(
            s.start_session(&titled("main", Some("Auth flow"), None)).unwrap().title.as_deref(),
            Some("Auth flow")
        );
        s.start_session(&titled("child", None, Some("main"))).unwrap();
        let ids = |children| {
            s.recent_sessions(Some("p"), 10, children).unwrap().into_iter().map(|x| x.session.id).collect::<Vec<_>>()
        };
        assert_eq!(ids(false), ["main"]);
        assert_eq!(ids(true).len(), 2);
    }

    #[test]
    fn end_unknown_is_not_found_and_summary_redacted() {
        let mut s = store();
        assert_eq!(s.end_session("nope", None).unwrap_err().code, ErrorCode::SessionNotFound);
        s.start_session(&NewSession { id: "s1".into(), ..Default::default() }).unwrap();
        let ended = s.end_session("s1", Some("did it <private>pw=1</private>")).unwrap();
        assert_eq!(ended.summary.as_deref(), Some("did it [REDACTED]"));
        assert!(ended.ended_at.is_some());
    }

    #[test]
    fn bad_ids_rejected() {
        let mut s = store();
        assert_eq!(s.start_session(&NewSession::default()).unwrap_err().code, ErrorCode::EmptyField);
        let bad = NewSession { id: "a\nb".into(), ..Default::default() };
        assert_eq!(s.start_session(&bad).unwrap_err().code, ErrorCode::InvalidArgument);
    }

    #[test]
    fn repeated_summaries_revise_one_memory() {
        let mut s = store();
        let a = s.save_session_summary(Some("s9"), Some("p"), "Goal: fix auth").unwrap();
        let b = s.save_session_summary(Some("s9"), Some("p"), "Goal: fix auth. Done: token refresh").unwrap();
        assert_eq!(a.id, b.id);
        assert_eq!(s.get_session("s9").unwrap().summary.as_deref(), Some("Goal: fix auth. Done: token refresh"));
    }

    #[test]
    fn default_session_names() {
        assert_eq!(default_session_id(""), "manual-save");
        assert_eq!(default_session_id("cairn"), "manual-save-cairn");
    }
}

//! Per-server memory of what the agent did (engram §12.4): tool calls and saves, for a gentle
//! save reminder, plus the last prompt recorded per project, to attach to later saves.
//!
//! One server instance serves one stdio process or one MCP-over-HTTP session, so counts are
//! per agent session. Times are passed in, so the rules are testable without waiting.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// Quiet period before the first reminder, and between reminders.
pub const NUDGE_AFTER: Duration = Duration::from_secs(10 * 60);
/// Calls that count as "working" even before any save.
const BUSY_CALLS: u64 = 5;

#[derive(Debug)]
pub struct Activity {
    started: Instant,
    tool_calls: u64,
    saves: u64,
    last_save: Option<Instant>,
    last_nudge: Option<Instant>,
}

impl Activity {
    pub fn new(now: Instant) -> Self {
        Self { started: now, tool_calls: 0, saves: 0, last_save: None, last_nudge: None }
    }

    pub fn record_call(&mut self) {
        self.tool_calls += 1;
    }

    pub fn record_save(&mut self, now: Instant) {
        self.saves += 1;
        self.last_save = Some(now);
    }

    /// A session ended: the next one starts from zero.
    pub fn reset(&mut self, now: Instant) {
        *self = Self::new(now);
    }

    /// A reminder to save, when the agent has been working for a while without saving. At most
    /// one per [`NUDGE_AFTER`], worded as a side note so it never displaces the answer to the
    /// user (engram #584).
    pub fn nudge(&mut self, now: Instant) -> Option<String> {
        let working = self.saves > 0 || self.tool_calls > BUSY_CALLS;
        let quiet_since = self.last_save.unwrap_or(self.started);
        let quiet = now.duration_since(quiet_since);
        let recently_nudged = self.last_nudge.is_some_and(|t| now.duration_since(t) < NUDGE_AFTER);
        if now.duration_since(self.started) < NUDGE_AFTER || !working || quiet < NUDGE_AFTER || recently_nudged {
            return None;
        }
        self.last_nudge = Some(now);
        Some(format!(
            "(side note: nothing saved to memory for {} min. If this work produced a decision, fix or \
             discovery worth keeping, call mem_save after answering the user. No action needed otherwise.)",
            quiet.as_secs() / 60
        ))
    }

    /// The line appended to a session summary.
    pub fn summary_line(&self) -> String {
        let mut line = format!("Session activity: {} tool calls, {} saves.", self.tool_calls, self.saves);
        if self.saves == 0 && self.tool_calls > BUSY_CALLS {
            line.push_str(
                " No memories were saved in this session; save any decision or fix worth keeping with mem_save.",
            );
        }
        line
    }
}

/// The last prompt recorded per project, and the sessions it is already stored in.
#[derive(Debug, Default)]
pub struct Prompts {
    by_project: HashMap<String, (String, HashSet<String>)>,
}

impl Prompts {
    pub fn remember(&mut self, project: &str, content: &str, session_id: &str) {
        let sessions = HashSet::from([session_id.to_owned()]);
        self.by_project.insert(project.to_owned(), (content.to_owned(), sessions));
    }

    /// The current prompt of `project` if it is not yet stored in `session_id`.
    pub fn pending_for(&self, project: &str, session_id: &str) -> Option<String> {
        let (content, sessions) = self.by_project.get(project)?;
        (!sessions.contains(session_id)).then(|| content.clone())
    }

    pub fn mark_stored(&mut self, project: &str, session_id: &str) {
        if let Some((_, sessions)) = self.by_project.get_mut(project) {
            sessions.insert(session_id.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn no_nudge_while_fresh_idle_or_recently_saved() {
        let t0 = Instant::now();
        let mut a = Activity::new(t0);
        assert_eq!(a.nudge(t0 + 5 * MIN), None, "too early");
        assert_eq!(a.nudge(t0 + 30 * MIN), None, "idle: no calls, no saves");
        a.record_save(t0 + 25 * MIN);
        assert_eq!(a.nudge(t0 + 30 * MIN), None, "saved 5 minutes ago");
    }

    #[test]
    fn nudges_once_per_period_when_working_without_saving() {
        let t0 = Instant::now();
        let mut a = Activity::new(t0);
        for _ in 0..6 {
            a.record_call();
        }
        let text = a.nudge(t0 + 12 * MIN).expect("due");
        assert!(text.contains("12 min") && text.contains("after answering the user"), "{text}");
        assert_eq!(a.nudge(t0 + 15 * MIN), None, "not again so soon");
        assert!(a.nudge(t0 + 23 * MIN).is_some());
        a.reset(t0 + 24 * MIN);
        assert_eq!((a.tool_calls, a.saves), (0, 0));
    }

    #[test]
    fn summary_line_warns_only_when_busy_without_saves() {
        let mut a = Activity::new(Instant::now());
        assert!(!a.summary_line().contains("No memories"));
        for _ in 0..6 {
            a.record_call();
        }
        assert!(a.summary_line().contains("No memories"));
    }

    #[test]
    fn prompt_is_pending_until_stored_in_the_session() {
        let mut p = Prompts::default();
        p.remember("proj", "fix the login", "manual-save-proj");
        assert_eq!(p.pending_for("proj", "manual-save-proj"), None);
        assert_eq!(p.pending_for("proj", "s2").as_deref(), Some("fix the login"));
        p.mark_stored("proj", "s2");
        assert_eq!(p.pending_for("proj", "s2"), None);
        assert_eq!(p.pending_for("other", "s2"), None);
    }
}

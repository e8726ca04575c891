//! The agent protocol: the rules every door (HTTP, MCP, the CLI, hooks) applies the same way
//! when an agent calls. Which project a call works in ([`resolve_project`]), what "the current
//! project" says ([`current_project`]), the small input rules ([`given`],
//! [`SAVE_FINDS_CANDIDATES`]), and each session's activity with its save reminders
//! ([`activity`]), the texts put in front of agents ([`mod@protocol`]) and what host plugins store
//! for them ([`host`]: compaction summaries, the user's profile; [`last_session`]: each session's
//! Last Session record, built without a model), and the rules of Claude Code's
//! hooks ([`hooks`]).

pub mod activity;
pub mod hooks;
pub mod host;
pub mod intent;
pub mod last_session;
pub mod meter;
pub mod protocol;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{CairnError, ErrorCode, Result};
use crate::project::{ProjectDetection, ProjectSource, detect_project, explicit_project};

pub use activity::{
    ActivityEvent, ActivityRecord, ActivityUpdate, PendingPrompt, SaveActivity, SessionActivity, UserPrompt,
    UserPromptOutcome,
};
pub use host::{COMPACTION_SUMMARY, CompactionSave, CompactionTrigger};
pub use last_session::{RecordSession, SESSION_RECORD};
pub use protocol::{ProtocolRequest, ProtocolText, mcp_instructions, protocol};

/// `Some` only for a value with something in it: agents and engram's clients send `""` (or
/// `project=`) for "not set".
pub fn given(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}

/// [`given`] for borrowed text.
pub fn given_str(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.trim().is_empty())
}

/// Saves made by agents (the `mem_save` tool, the router's `save`) look for memories they may
/// duplicate or contradict, so the agent can judge them while it still has the context.
pub const SAVE_FINDS_CANDIDATES: bool = true;

/// What a call says about its project, from the most to the least specific. Blank values
/// count as absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProjectHints {
    /// The call's own `project` argument.
    pub explicit: Option<String>,
    /// The session the call belongs to (its `session_id` argument, or the door's session).
    pub session_id: Option<String>,
    /// The `X-Cairn-Project` header of an HTTP or MCP-over-HTTP call.
    pub header: Option<String>,
    /// `--project` / `CAIRN_PROJECT` of the process serving the call.
    pub process: Option<String>,
    /// The directory the caller reports working in (a hook's `cwd`, `mem_session_start`'s
    /// `directory`, `?cwd=`).
    pub dir: Option<PathBuf>,
    /// The serving process's own working directory: the last resort.
    pub process_cwd: PathBuf,
}

impl ProjectHints {
    /// The directory detection runs in: the caller's, else the process's.
    pub fn detection_dir(&self) -> PathBuf {
        self.dir.clone().filter(|d| !d.as_os_str().is_empty()).unwrap_or_else(|| self.process_cwd.clone())
    }

    /// Whether resolving will look up the session's project (no explicit name outranks it).
    pub fn needs_session_project(&self) -> bool {
        given_str(self.explicit.as_deref()).is_none() && given_str(self.session_id.as_deref()).is_some()
    }
}

/// The project of a call, the one rule for every door. First match wins:
///
/// 1. the call's `project` argument (`explicit_override`);
/// 2. the project of the call's session, when that session is registered with one
///    (`session`): a session never drifts between projects mid-way;
/// 3. the `X-Cairn-Project` header (`request_header`);
/// 4. `--project` / `CAIRN_PROJECT` (`process_override`);
/// 5. detection from the caller's directory, else the process's (engram §11:
///    `config`, `git_remote`, `git_root`, `git_child`, `dir_basename`). An ambiguous directory
///    is an [`ErrorCode::AmbiguousProject`] error here; [`current_project`] lists the candidates.
///
/// `session_project` looks a session's project up (the store, or what the door already knows);
/// it is only called when step 2 can apply. Detection may run git: call this off async threads,
/// or call [`named_project`] first and detect only when it answers `None`.
pub fn resolve_project(
    hints: &ProjectHints,
    session_project: impl FnOnce(&str) -> Result<Option<String>>,
) -> Result<ProjectDetection> {
    match named_project(hints, session_project)? {
        Some(named) => Ok(named),
        None => detected_project(hints),
    }
}

/// Steps 1–4 of [`resolve_project`]: `None` when nothing names the project.
pub fn named_project(
    hints: &ProjectHints,
    session_project: impl FnOnce(&str) -> Result<Option<String>>,
) -> Result<Option<ProjectDetection>> {
    let cwd = hints.detection_dir();
    if let Some(name) = given_str(hints.explicit.as_deref()) {
        return named(name, &cwd, ProjectSource::ExplicitOverride).map(Some);
    }
    if let Some(id) = given_str(hints.session_id.as_deref())
        && let Some(project) = given(session_project(id)?)
    {
        return named(&project, &cwd, ProjectSource::Session).map(Some);
    }
    for (name, source) in
        [(&hints.header, ProjectSource::RequestHeader), (&hints.process, ProjectSource::ProcessOverride)]
    {
        if let Some(name) = given_str(name.as_deref()) {
            return named(name, &cwd, source).map(Some);
        }
    }
    Ok(None)
}

/// Step 5 of [`resolve_project`]: detection, with an ambiguous directory as an error.
pub fn detected_project(hints: &ProjectHints) -> Result<ProjectDetection> {
    let found = detect_project(&hints.detection_dir())?;
    if found.project_source == ProjectSource::Ambiguous {
        return Err(ambiguous(&found));
    }
    Ok(found)
}

fn named(name: &str, cwd: &Path, source: ProjectSource) -> Result<ProjectDetection> {
    explicit_project(name, cwd, source).map_err(|e| {
        CairnError::invalid(e.message).with_hint("a project is a plain name: no slashes, no control characters")
    })
}

fn ambiguous(found: &ProjectDetection) -> CairnError {
    CairnError::new(
        ErrorCode::AmbiguousProject,
        format!("{} holds several repositories: {}", found.cwd, found.available_projects.join(", ")),
    )
    .with_hint("name the project (a `project` argument, --project or CAIRN_PROJECT), or work inside one repository")
}

/// "Which project am I in?" as every door answers it (engram's `mem_current_project` and
/// `GET /project/current`): never an error, the problem is described instead, since an agent
/// asks precisely when something about the project looks wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CurrentProject {
    /// Empty when there is none (ambiguous directory, broken config).
    pub project: String,
    /// `explicit_override`, `session`, `request_header`, `process_override`, a detection
    /// source, `ambiguous`, or `error`.
    pub project_source: String,
    pub project_path: String,
    pub cwd: String,
    /// The repositories to choose from when the directory is ambiguous, else empty.
    pub available_projects: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// Why there is no project (`ambiguous_project`, `invalid_project_config`...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// The problem and what to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_hint: Option<String>,
}

/// The current project for these hints ([`resolve_project`]'s order, made total).
pub fn current_project(
    hints: &ProjectHints,
    session_project: impl FnOnce(&str) -> Result<Option<String>>,
) -> CurrentProject {
    let cwd = hints.detection_dir().display().to_string();
    let found = named_project(hints, session_project)
        .and_then(|named| named.map_or_else(|| detect_project(&hints.detection_dir()), Ok));
    match found {
        Ok(found) if found.project_source == ProjectSource::Ambiguous => {
            let err = ambiguous(&found);
            CurrentProject {
                project: String::new(),
                project_source: ProjectSource::Ambiguous.as_str().into(),
                project_path: String::new(),
                cwd,
                available_projects: found.available_projects,
                warning: None,
                error_code: Some(err.code.as_str().into()),
                error_hint: Some(hint_text(&err)),
            }
        }
        Ok(found) => CurrentProject {
            project: found.project,
            project_source: found.project_source.as_str().into(),
            project_path: found.project_path,
            cwd,
            available_projects: Vec::new(),
            warning: found.warning,
            error_code: None,
            error_hint: None,
        },
        Err(err) => CurrentProject {
            project: String::new(),
            project_source: "error".into(),
            project_path: String::new(),
            cwd,
            available_projects: Vec::new(),
            warning: None,
            error_code: Some(err.code.as_str().into()),
            error_hint: Some(hint_text(&err)),
        },
    }
}

fn hint_text(err: &CairnError) -> String {
    match &err.hint {
        Some(h) => format!("{}; {h}", err.message),
        None => err.message.clone(),
    }
}

/// The project of a call that names none: detected from the `directory` the host reports
/// (a git root, else its name), here in the daemon, which caches it per directory, so a hook
/// process does not run git at every event. `None` without a directory.
pub fn project_or_detected(project: Option<&str>, directory: Option<&str>) -> Result<Option<String>> {
    if let Some(project) = given_str(project) {
        return Ok(Some(project.to_owned()));
    }
    let Some(dir) = given_str(directory).map(PathBuf::from) else { return Ok(None) };
    let hints = ProjectHints { dir: Some(dir.clone()), process_cwd: dir, ..ProjectHints::default() };
    Ok(Some(resolve_project(&hints, |_| Ok(None))?.project))
}

#[cfg(test)]
mod injected_tests;
#[cfg(test)]
mod intent_tests;
#[cfg(test)]
mod tests;

//! A host's archived sessions recorded in the memory store as its hooks would have: for a
//! host whose hooks did not run (Codex before the user trusts cairn's hooks), the session with
//! its directory, project, start and end, and each user prompt, read back from the
//! conversation-history archive. The door that runs it passes how it runs an operation (the
//! daemon, else the file); the rules of what is recorded, and when it is skipped, are here.

use std::path::{Path, PathBuf};

use crate::error::{ErrorCode, Result};
use crate::history::model::HistoryHost;
use crate::history::query::{PulledMessage, SessionListing};
use crate::ops::{EndSessionRequest, GetSessionRequest, ImportRequest, Op, OpOutput, Request};

/// How the caller runs one operation (a client of the daemon, or of the file).
pub type RunOp<'a> = dyn Fn(Op) -> Result<OpOutput> + 'a;

/// One operation, its answer as the request's output type.
fn call<R: Request>(run: &RunOp<'_>, request: R) -> Result<R::Output> {
    R::output(run(request.into_op())?)
}

/// The newest archived sessions [`record`] looks at: a server starts with each session, so
/// earlier ones were looked at by earlier servers.
const RECORDED_SESSIONS: usize = 10;

/// Record the newest archived sessions of `host` (main sessions; a sub-agent's prompts are the
/// model's) in the memory store: the session with its directory, project, start and end, and
/// each user prompt. Idempotent: a session whose recorded end is not older than its newest
/// archived message is skipped, and the store keeps a prompt once per session and text. How
/// many sessions were recorded; a failure is a log line (the next server tries again).
pub fn record(run: &RunOp<'_>, host: HistoryHost, project: Option<&str>, cwd: &Path) -> usize {
    use crate::history::query::{SessionListing, SessionsRequest};
    let request = SessionsRequest {
        host: Some(host.as_str().to_owned()),
        limit: RECORDED_SESSIONS,
        ..SessionsRequest::default()
    };
    let sessions: Vec<SessionListing> = match call(run, request) {
        Ok(sessions) => sessions,
        Err(e) => {
            tracing::debug!(error = %e, "listing the archived sessions failed");
            return 0;
        }
    };
    let mut recorded = 0;
    for session in &sessions {
        match record_session(run, session, project, cwd) {
            Ok(true) => recorded += 1,
            Ok(false) => {}
            Err(e) => {
                tracing::debug!(session = %session.session_id, error = %e, "recording an archived session failed");
            }
        }
    }
    recorded
}

/// One archived session into the memory store; whether anything had to be recorded.
fn record_session(run: &RunOp<'_>, archived: &SessionListing, project: Option<&str>, cwd: &Path) -> Result<bool> {
    let id = &archived.session_id;
    if archived.messages == 0 {
        // a rollout Codex has only just opened (this server's own session, at its start)
        return Ok(false);
    }
    let known = match call(run, GetSessionRequest { id: id.clone() }) {
        Ok(session) => Some(session),
        Err(e) if e.code == ErrorCode::SessionNotFound => None,
        Err(e) => return Err(e),
    };
    let last_message = crate::clock::normalize_ts(&archived.updated).unwrap_or_else(|| archived.updated.clone());
    let ended = known.as_ref().and_then(|s| s.ended_at.clone());
    if ended.as_ref().is_some_and(|end| *end >= last_message) {
        return Ok(false);
    }
    let prompts = archived_prompts(run, id)?;
    // Op::Import, not StartSession: it keeps the rollout's times (the session started at its
    // first prompt and ended at its last message, not when this server saw it), and fills only
    // what a session a hook started lacks, as StartSession does. The end goes in last: a
    // server Codex kills half-way leaves the session open, and the next one records the rest.
    let mut record = serde_json::json!({
        "id": id,
        "project": session_project(archived, project, cwd)?,
        "directory": archived.directory,
        "agent": "codex",
        "started_at": prompts.first().and_then(|p| crate::clock::normalize_ts(&p.time)).unwrap_or(last_message.clone()),
    });
    let import = |record: &serde_json::Value| {
        let data = serde_json::json!({ "sessions": [record] });
        call(run, ImportRequest { data }).map(drop)
    };
    import(&record)?;
    for prompt in prompts {
        // no project: the session's, as the hook's prompt goes
        let new = crate::prompts::NewPrompt {
            content: prompt.text,
            session_id: Some(id.clone()),
            ..crate::prompts::NewPrompt::default()
        };
        call(run, new)?;
    }
    if ended.is_some() {
        // ended before and resumed since (`codex resume`): it ends again now
        call(run, EndSessionRequest { id: id.clone(), summary: None, keep_activity: true })?;
    } else {
        record["ended_at"] = serde_json::Value::String(last_message);
        import(&record)?;
        // the next session's "Last Session", which EndSession revises (and the Stop hook)
        let last_session = crate::agent::RecordSession { session_id: id.clone(), project: None, compacted: false };
        if let Err(e) = call(run, last_session) {
            tracing::debug!(session = %id, error = %e, "the Last Session record of an archived session was not revised");
        }
    }
    Ok(true)
}

/// The project a hook would give the session: `CAIRN_PROJECT`, else its directory's.
fn session_project(archived: &SessionListing, project: Option<&str>, cwd: &Path) -> Result<String> {
    let hints = crate::agent::ProjectHints {
        process: project.map(str::to_owned),
        dir: archived.directory.as_ref().map(PathBuf::from),
        process_cwd: cwd.to_owned(),
        ..crate::agent::ProjectHints::default()
    };
    Ok(crate::agent::resolve_project(&hints, |_| Ok(None))?.project)
}

/// A user prompt as the archive holds it.
struct ArchivedPrompt {
    time: String,
    text: String,
}

/// The most turns one history request returns.
const TURNS_PER_PAGE: usize = 50;

/// The session's user prompts, oldest first, as the UserPromptSubmit hook stores them:
/// Codex's own context and cairn's injected texts left out, trimmed, too short ones dropped,
/// long ones cut ([`crate::agent::activity`]'s limits), so a prompt a hook stored is the
/// same text and not stored twice.
fn archived_prompts(run: &RunOp<'_>, session_id: &str) -> Result<Vec<ArchivedPrompt>> {
    use crate::agent::activity::{MAX_PROMPT_CHARS, MIN_PROMPT_CHARS};
    use crate::history::query::{MessageRequest, PulledMessage, TurnsPage, TurnsRequest};
    let mut prompts = Vec::new();
    let mut first_turn = 1;
    loop {
        let page = TurnsRequest {
            session_id: session_id.to_owned(),
            turn_number: Some(first_turn),
            num_before: 0,
            num_after: TURNS_PER_PAGE,
            caller_session_id: None,
        };
        let page: TurnsPage = match call(run, page) {
            Ok(page) => page,
            // past the last turn (or none at all)
            Err(e) if e.code == ErrorCode::TurnOutOfRange => break,
            Err(e) => return Err(e),
        };
        for turn in &page.turns {
            let request = MessageRequest {
                session_id: session_id.to_owned(),
                message_id: turn.user.message_id.clone(),
                caller_session_id: None,
            };
            let message: PulledMessage = call(run, request)?;
            let text = user_text(run, session_id, &message)?;
            let text = crate::agent::hooks::clean(&crate::agent::hooks::without_hook_context(&text));
            let trimmed = text.trim();
            if trimmed.chars().count() > MIN_PROMPT_CHARS {
                prompts.push(ArchivedPrompt {
                    time: message.time.clone(),
                    text: trimmed.chars().take(MAX_PROMPT_CHARS).collect(),
                });
            }
        }
        match page.turns.last() {
            Some(last) if page.turns.len() > TURNS_PER_PAGE => first_turn = last.turn_number + 1,
            _ => break,
        }
    }
    Ok(prompts)
}

/// The user's own text of a message, whole (a section cut for the preview is pulled in full).
fn user_text(run: &RunOp<'_>, session_id: &str, message: &PulledMessage) -> Result<String> {
    use crate::history::query::{PartRequest, Section};
    let mut texts = Vec::new();
    for section in &message.sections {
        let Section::Text { content, part_id, injected: false } = section else { continue };
        let whole = match part_id {
            None => content.clone(),
            Some(part_id) => {
                let request = PartRequest {
                    session_id: session_id.to_owned(),
                    message_id: message.message_id.clone(),
                    part_id: part_id.clone(),
                    offset: 0,
                    max_chars: 100_000,
                    caller_session_id: None,
                };
                call(run, request)?.content
            }
        };
        texts.push(whole);
    }
    Ok(texts.join("\n"))
}

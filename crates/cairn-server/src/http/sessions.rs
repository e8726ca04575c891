//! Sessions and prompts.

use axum::extract::State;
use cairn_core::ErrorCode;
use cairn_core::agent::{ActivityEvent, ActivityRecord};
use cairn_core::ops::{
    DeletePromptRequest, DeleteSessionRequest, EndSessionRequest, GetSessionRequest, Op, RecentPromptsRequest,
    RecentSessionsRequest, SearchPromptsRequest, SessionActivityRequest,
};
use cairn_core::prompts::NewPrompt;
use cairn_core::sessions::NewSession;
use serde::Deserialize;
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use super::error::ErrorBody;
use super::extract::{ApiJson, ApiQuery, OptionalJson, PathId, PathText};
use super::schema;
use super::{ApiResult, AppState, created, given, ok, run, with_fields};

/// A session to open. Opening a known id again only fills what it lacks (idempotent).
/// Unknown fields (engram's `ownership_mode`) are ignored.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SessionBody {
    /// The agent's own session id.
    #[schema(pattern = r"\S")]
    pub id: String,
    pub project: Option<String>,
    pub directory: Option<String>,
    /// opencode, claude-code...
    pub agent: Option<String>,
    /// The parent session of a sub-agent.
    pub parent_id: Option<String>,
    /// The host's name for the session; a later call with a title renames it.
    pub title: Option<String>,
}

/// Open a session (or fill in what a known one lacks).
#[utoipa::path(post, operation_id = "create_session", path = "/sessions", tag = "sessions", request_body = SessionBody,
    responses(
        (status = 201, description = "The session, `status: created`", body = schema::SessionWithStatus),
        (status = 400, description = "Missing, empty or malformed id", body = ErrorBody)))]
pub(super) async fn create(State(state): State<AppState>, ApiJson(b): ApiJson<SessionBody>) -> ApiResult {
    let new = NewSession {
        id: b.id,
        project: b.project,
        directory: b.directory,
        agent: b.agent,
        parent_id: b.parent_id,
        title: given(b.title),
    };
    let session = run(&state, Op::StartSession(new)).await?;
    Ok(created(with_fields(session, [("status", json!("created"))])))
}

/// How a session ended. The body may be empty.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct EndBody {
    /// What was done (`<private>` parts are redacted).
    pub summary: Option<String>,
}

/// End a session.
#[utoipa::path(post, operation_id = "end_session", path = "/sessions/{id}/end", tag = "sessions",
    request_body(content = Option<EndBody>),
    params(("id" = String, Path, description = "Session id", min_length = 1)),
    responses(
        (status = 200, description = "The session, `status: completed`; for an unknown id just `{id, status}` (engram's answer)",
            body = schema::EndedSession),
        (status = 400, description = "Malformed body, or a summary holding a NUL character (`nul_character`)",
            body = ErrorBody)))]
pub(super) async fn end(
    State(state): State<AppState>,
    PathText(id): PathText,
    OptionalJson(b): OptionalJson<EndBody>,
) -> ApiResult {
    match state
        .engine
        .execute(Op::EndSession(EndSessionRequest { id: id.clone(), summary: b.summary, keep_activity: false }))
        .await
    {
        Ok(session) => Ok(ok(with_fields(session.into_value()?, [("status", json!("completed"))]))),
        // engram's plugins end sessions they may never have registered (a start that failed,
        // a sub-agent skipped on purpose): engram answers 200, and they treat anything else as
        // a failure to retry. Nothing is created.
        Err(e) if e.code == ErrorCode::SessionNotFound => Ok(ok(json!({"id": id, "status": "completed"}))),
        Err(e) => Err(e.into()),
    }
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RecentSessionsParams {
    /// Only this project (empty: every project).
    project: Option<String>,
    /// Default 5, at most 500.
    limit: Option<usize>,
    /// Sub-agent sessions (with a parent) too (default false).
    include_children: Option<bool>,
}

/// Sessions by latest activity, with memory counts.
#[utoipa::path(get, operation_id = "recent_sessions", path = "/sessions/recent", tag = "sessions",
    params(RecentSessionsParams),
    responses(
        (status = 200, description = "Sessions, most recently active first (`[]` when none)",
            body = Vec<cairn_core::model::SessionSummary>),
        (status = 400, description = "Bad parameter", body = ErrorBody)))]
pub(super) async fn recent(State(state): State<AppState>, ApiQuery(p): ApiQuery<RecentSessionsParams>) -> ApiResult {
    let op = Op::Sessions(RecentSessionsRequest {
        project: given(p.project),
        limit: p.limit.unwrap_or(5),
        include_children: p.include_children.unwrap_or(false),
    });
    Ok(ok(run(&state, op).await?))
}

/// One session.
#[utoipa::path(get, operation_id = "get_session", path = "/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id", min_length = 1)),
    responses(
        (status = 200, description = "The session", body = cairn_core::model::Session),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(super) async fn get_one(State(state): State<AppState>, PathText(id): PathText) -> ApiResult {
    Ok(ok(run(&state, Op::GetSession(GetSessionRequest { id })).await?))
}

/// Delete a session and its prompts; refused while it has memories.
#[utoipa::path(delete, operation_id = "delete_session", path = "/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id", min_length = 1)),
    responses(
        (status = 200, description = "Deleted", body = schema::SessionDeleted),
        (status = 404, description = "No such session", body = ErrorBody),
        (status = 409, description = "The session still has memories", body = ErrorBody)))]
pub(super) async fn delete(State(state): State<AppState>, PathText(id): PathText) -> ApiResult {
    Ok(ok(run(&state, Op::DeleteSession(DeleteSessionRequest { id })).await?))
}

/// A session's activity: tool calls, saves, reminders sent, the pending prompt.
#[utoipa::path(get, operation_id = "session_activity", path = "/sessions/{id}/activity", tag = "sessions",
    params(("id" = String, Path, description = "Session id", min_length = 1)),
    responses(
        (status = 200, description = "The activity (zero counts for a session with none yet)",
            body = cairn_core::agent::activity::SessionActivity),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(super) async fn activity(State(state): State<AppState>, PathText(id): PathText) -> ApiResult {
    Ok(ok(run(&state, Op::SessionActivity(SessionActivityRequest { session_id: id })).await?))
}

/// An event of a session, as core reads it (`event` names the kind).
#[derive(Debug, Deserialize)]
pub struct ActivityBody {
    #[serde(default)]
    project: Option<String>,
    #[serde(flatten)]
    event: ActivityEvent,
}

/// Record what happened in a session (a tool call, a save, a prompt, a context injection).
///
/// Answers the activity after it, the save reminder due now (`tool_call` with `remind`) and the
/// prompt a `save` attached.
#[utoipa::path(post, operation_id = "record_activity", path = "/sessions/{id}/activity", tag = "sessions",
    request_body = schema::ActivityBody,
    params(("id" = String, Path, description = "Session id", min_length = 1)),
    responses(
        (status = 200, description = "The activity after the event", body = cairn_core::agent::activity::ActivityUpdate),
        (status = 400, description = "Unknown event, missing or malformed field", body = ErrorBody),
        (status = 404, description = "No such session, and no project to open it with", body = ErrorBody)))]
pub(super) async fn record_activity(
    State(state): State<AppState>,
    PathText(id): PathText,
    ApiJson(b): ApiJson<ActivityBody>,
) -> ApiResult {
    let record = ActivityRecord { session_id: id, project: given(b.project), event: b.event };
    Ok(ok(run(&state, Op::RecordActivity(record)).await?))
}

/// A user prompt to record.
#[derive(Debug, Deserialize, ToSchema)]
pub struct PromptBody {
    #[schema(pattern = r"\S")]
    pub content: String,
    /// Default: `manual-save-<project>` (created when missing).
    pub session_id: Option<String>,
    pub project: Option<String>,
    pub directory: Option<String>,
}

/// Record what the user asked (an identical prompt in the same session is kept once).
#[utoipa::path(post, operation_id = "add_prompt", path = "/prompts", tag = "prompts", request_body = PromptBody,
    responses(
        (status = 201, description = "The prompt, `status: saved`", body = schema::PromptSaved),
        (status = 400, description = "Missing or empty content", body = ErrorBody)))]
pub(super) async fn add_prompt(State(state): State<AppState>, ApiJson(b): ApiJson<PromptBody>) -> ApiResult {
    let new = NewPrompt { content: b.content, session_id: b.session_id, project: b.project, directory: b.directory };
    let prompt = run(&state, Op::AddPrompt(new)).await?;
    Ok(created(with_fields(prompt, [("status", json!("saved"))])))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RecentPromptsParams {
    /// Only this project (empty: every project).
    project: Option<String>,
    /// Default 20, at most 500.
    limit: Option<usize>,
}

/// The most recent prompts.
#[utoipa::path(get, operation_id = "recent_prompts", path = "/prompts/recent", tag = "prompts",
    params(RecentPromptsParams),
    responses(
        (status = 200, description = "Prompts, newest first (`[]` when none)", body = Vec<cairn_core::model::Prompt>),
        (status = 400, description = "Bad parameter", body = ErrorBody)))]
pub(super) async fn recent_prompts(
    State(state): State<AppState>,
    ApiQuery(p): ApiQuery<RecentPromptsParams>,
) -> ApiResult {
    Ok(ok(run(
        &state,
        Op::RecentPrompts(RecentPromptsRequest { project: given(p.project), limit: p.limit.unwrap_or(20) }),
    )
    .await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct SearchPromptsParams {
    /// What to look for (required).
    #[param(required = true, pattern = r"\S")]
    q: Option<String>,
    /// Only this project (empty: every project).
    project: Option<String>,
    /// Default 10, at most 100.
    limit: Option<usize>,
}

/// Full-text search over prompts.
#[utoipa::path(get, operation_id = "search_prompts", path = "/prompts/search", tag = "prompts",
    params(SearchPromptsParams),
    responses(
        (status = 200, description = "Prompts, best first (`[]` when none)", body = Vec<cairn_core::model::Prompt>),
        (status = 400, description = "Missing or empty q", body = ErrorBody)))]
pub(super) async fn search_prompts(
    State(state): State<AppState>,
    ApiQuery(p): ApiQuery<SearchPromptsParams>,
) -> ApiResult {
    // An absent q is the same mistake as an empty one; the core names it.
    let op = Op::SearchPrompts(SearchPromptsRequest {
        query: p.q.unwrap_or_default(),
        project: given(p.project),
        limit: p.limit.unwrap_or(0),
    });
    Ok(ok(run(&state, op).await?))
}

/// Delete a prompt for good.
#[utoipa::path(delete, operation_id = "delete_prompt", path = "/prompts/{id}", tag = "prompts",
    params(("id" = i64, Path, description = "Prompt id (positive integer)", minimum = 1)),
    responses(
        (status = 200, description = "Deleted", body = schema::PromptDeleted),
        (status = 400, description = "Bad id", body = ErrorBody),
        (status = 404, description = "No such prompt", body = ErrorBody)))]
pub(super) async fn delete_prompt(State(state): State<AppState>, PathId(id): PathId) -> ApiResult {
    Ok(ok(run(&state, Op::DeletePrompt(DeletePromptRequest { id })).await?))
}

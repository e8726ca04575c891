//! The conversation-history archive (browse, pull, search, chart, sessions and the router's history
//! ops): query parameters are the ops' arguments; the `X-Cairn-Session` header names the caller's
//! own session (seen only up to its latest compaction) when the query does not.

use axum::extract::State;
use axum::http::HeaderMap;
use cairn_core::history::query::{
    CompactionsRequest, MessageRequest, MessagesRequest, PartRequest, SearchRequest, SessionRef, SessionsRequest,
    TurnsRequest,
};
use cairn_core::ops::{HistoryChartRequest, HistoryChildrenRequest, HistoryForgetRequest, Op};
use serde::Deserialize;
use utoipa::IntoParams;

use super::error::ErrorBody;
use super::extract::{ApiQuery, OptionalJson, PathText};
use super::{ApiResult, AppState, given, ok, run};

/// The header naming the caller's own session.
pub const SESSION_HEADER: &str = "x-cairn-session";

/// `caller_session_id` from the query, else the `X-Cairn-Session` header.
fn caller(query: Option<String>, headers: &HeaderMap) -> Option<String> {
    given(query).or_else(|| given(headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_owned)))
}

/// Conversation-history sessions of every host, newest first.
#[utoipa::path(get, operation_id = "history_sessions", path = "/history/sessions", tag = "history",
    params(SessionsRequest),
    responses(
        (status = 200, description = "Sessions, newest first (`[]` when none)",
            body = Vec<cairn_core::history::query::SessionListing>),
        (status = 400, description = "Bad parameter (unknown host)", body = ErrorBody)))]
pub(super) async fn sessions(State(state): State<AppState>, ApiQuery(req): ApiQuery<SessionsRequest>) -> ApiResult {
    Ok(ok(run(&state, Op::HistorySessions(req)).await?))
}

/// Turn previews of a session.
#[utoipa::path(get, operation_id = "history_browse_turns", path = "/history/turns", tag = "history",
    params(TurnsRequest),
    responses(
        (status = 200, description = "The turns, ascending", body = cairn_core::history::query::TurnsPage),
        (status = 400, description = "Bad parameter or id", body = ErrorBody),
        (status = 404, description = "No such session, or a turn out of range", body = ErrorBody)))]
pub(super) async fn turns(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(mut req): ApiQuery<TurnsRequest>,
) -> ApiResult {
    req.caller_session_id = caller(req.caller_session_id, &headers);
    Ok(ok(run(&state, Op::HistoryBrowseTurns(req)).await?))
}

/// Message previews around a message.
#[utoipa::path(get, operation_id = "history_browse_messages", path = "/history/messages", tag = "history",
    params(MessagesRequest),
    responses(
        (status = 200, description = "The window, with ids to page on", body = cairn_core::history::query::MessagesPage),
        (status = 400, description = "Bad parameter or id", body = ErrorBody),
        (status = 404, description = "No such session or message, or one hidden from the caller", body = ErrorBody)))]
pub(super) async fn messages(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(mut req): ApiQuery<MessagesRequest>,
) -> ApiResult {
    req.caller_session_id = caller(req.caller_session_id, &headers);
    Ok(ok(run(&state, Op::HistoryBrowseMessages(req)).await?))
}

/// One message's parts, long ones cut.
#[utoipa::path(get, operation_id = "history_pull_message", path = "/history/message", tag = "history",
    params(MessageRequest),
    responses(
        (status = 200, description = "The message", body = cairn_core::history::query::PulledMessage),
        (status = 400, description = "Bad parameter or id", body = ErrorBody),
        (status = 404, description = "No such session or message, or one hidden from the caller", body = ErrorBody)))]
pub(super) async fn message(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(mut req): ApiQuery<MessageRequest>,
) -> ApiResult {
    req.caller_session_id = caller(req.caller_session_id, &headers);
    Ok(ok(run(&state, Op::HistoryPullMessage(req)).await?))
}

/// One part in full, a page at a time.
#[utoipa::path(get, operation_id = "history_pull_part", path = "/history/part", tag = "history",
    params(PartRequest),
    responses(
        (status = 200, description = "One page of the part", body = cairn_core::history::query::PulledPart),
        (status = 400, description = "Bad parameter, id, offset past the end or max_chars out of range", body = ErrorBody),
        (status = 404, description = "No such session, message or part", body = ErrorBody)))]
pub(super) async fn part(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(mut req): ApiQuery<PartRequest>,
) -> ApiResult {
    req.caller_session_id = caller(req.caller_session_id, &headers);
    Ok(ok(run(&state, Op::HistoryPullPart(req)).await?))
}

/// Search the history's parts, grouped by message.
#[utoipa::path(get, operation_id = "history_search", path = "/history/search", tag = "history",
    params(SearchRequest),
    responses(
        (status = 200, description = "Matching messages, best first", body = cairn_core::history::query::SearchResults),
        (status = 400, description = "Empty or too long query, unknown type, bad id", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(super) async fn search(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(mut req): ApiQuery<SearchRequest>,
) -> ApiResult {
    req.caller_session_id = caller(req.caller_session_id, &headers);
    Ok(ok(run(&state, Op::HistorySearch(req)).await?))
}

/// The navigation chart of a session before its latest compaction.
#[utoipa::path(get, operation_id = "history_chart", path = "/history/chart", tag = "history",
    params(SessionRef),
    responses(
        (status = 200, description = "`{session_id, chart}`", body = cairn_core::history::query::Chart),
        (status = 400, description = "Bad id", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(super) async fn chart(State(state): State<AppState>, ApiQuery(req): ApiQuery<SessionRef>) -> ApiResult {
    Ok(ok(run(&state, Op::HistoryChart(HistoryChartRequest(req))).await?))
}

/// A session's compactions.
#[utoipa::path(get, operation_id = "history_compactions", path = "/history/compactions", tag = "history",
    params(CompactionsRequest),
    responses(
        (status = 200, description = "The compactions, oldest first", body = cairn_core::history::query::Compactions),
        (status = 400, description = "Bad id, or no such compaction to read", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(super) async fn compactions(
    State(state): State<AppState>,
    ApiQuery(req): ApiQuery<CompactionsRequest>,
) -> ApiResult {
    Ok(ok(run(&state, Op::HistoryCompactions(req)).await?))
}

/// A session's sub-agent sessions.
#[utoipa::path(get, operation_id = "history_children", path = "/history/children", tag = "history",
    params(SessionRef),
    responses(
        (status = 200, description = "Child sessions, oldest first", body = Vec<cairn_core::history::query::SessionListing>),
        (status = 400, description = "Bad id", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(super) async fn children(State(state): State<AppState>, ApiQuery(req): ApiQuery<SessionRef>) -> ApiResult {
    Ok(ok(run(&state, Op::HistoryChildren(HistoryChildrenRequest(req))).await?))
}

/// What the history archive holds per host.
#[utoipa::path(get, operation_id = "history_stats", path = "/history/stats", tag = "history",
    responses((status = 200, description = "Per host", body = cairn_core::history::query::HistoryStats)))]
pub(super) async fn stats(State(state): State<AppState>) -> ApiResult {
    Ok(ok(run(&state, Op::HistoryStats).await?))
}

/// Erase one session from the history archive (not its sub-agents).
#[utoipa::path(delete, operation_id = "history_forget", path = "/history/sessions/{id}", tag = "history",
    params(("id" = String, Path, description = "Session id", min_length = 1, pattern = r"\S")),
    responses(
        (status = 200, description = "Erased", body = cairn_core::history::query::Forgotten),
        (status = 400, description = "Bad id", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(super) async fn forget(State(state): State<AppState>, PathText(id): PathText) -> ApiResult {
    Ok(ok(run(&state, Op::HistoryForget(HistoryForgetRequest::new(id))).await?))
}

/// Read the hosts' conversations into the archive now (the daemon also scans on its own).
///
/// No body, or `{}`: every source. `path`: one Claude Code transcript (under the Claude Code
/// config dir) or one OpenCode database; `session_id` (with `host`): one session.
#[utoipa::path(post, operation_id = "history_ingest", path = "/history/ingest", tag = "history",
    request_body(content = Option<cairn_core::history::ingest::PokeRequest>, description = "What to read; empty: everything"),
    responses(
        (status = 200, description = "What was read", body = cairn_core::history::ingest::ScanReport),
        (status = 400, description = "Not a JSON object, or an unknown host", body = ErrorBody),
        (status = 404, description = "No transcript of that session, or not a host's transcript or database", body = ErrorBody),
        (status = 422, description = "A source of an unknown shape or unreadable", body = ErrorBody),
        (status = 503, description = "A host database stayed locked", body = ErrorBody)))]
pub(super) async fn ingest(
    State(state): State<AppState>,
    OptionalJson(poke): OptionalJson<cairn_core::history::ingest::PokeRequest>,
) -> ApiResult {
    Ok(ok(run(&state, Op::HistoryIngest(poke)).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PlansParams {
    /// One plan's file name (from the listing): its text instead of the list.
    #[param(pattern = r"^\s*[^./\\\s][^/\\\x00-\x1f]*\.md\s*$", max_length = 255)]
    read: Option<String>,
    /// A project directory (absolute): its git worktree's `.opencode/plans` is searched too.
    directory: Option<String>,
    /// Without `directory`: the session whose archived directory is the project's (else the
    /// `X-Cairn-Session` header's).
    session_id: Option<String>,
}

/// OpenCode's saved plans, newest first, or one plan's text. Read-only.
#[utoipa::path(get, operation_id = "history_plans", path = "/history/plans", tag = "history",
    params(PlansParams),
    responses(
        (status = 200, description = "The plans of the project's `.opencode/plans` and OpenCode's data dir \
            (`plans: []` when none), or with `read` the one plan", body = cairn_core::history::plans::Plans),
        (status = 400, description = "`read` is not a plain `.md` file name in a plans directory", body = ErrorBody),
        (status = 404, description = "No plan of that name, or a session id that cannot exist (a path)", body = ErrorBody),
        (status = 422, description = "The plan exists but cannot be read", body = ErrorBody)))]
pub(super) async fn plans(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(p): ApiQuery<PlansParams>,
) -> ApiResult {
    let req = cairn_core::history::plans::PlansRequest {
        read: p.read,
        directory: given(p.directory).map(std::path::PathBuf::from),
        session_id: caller(p.session_id, &headers),
    };
    Ok(ok(run(&state, Op::Plans(req)).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ContextUsageParams {
    /// The session to measure; default: the caller's (`X-Cairn-Session`), else the most
    /// recently updated one.
    session_id: Option<String>,
    caller_session_id: Option<String>,
    /// The model's context window in tokens, when the caller knows it; default: 1M for a `[1m]`
    /// model, else `[context_meter] default_limit`.
    #[param(minimum = 0, maximum = 100_000_000)]
    limit: Option<u64>,
}

/// How full a session's context window is: the context meter's numbers from the archive.
#[utoipa::path(get, operation_id = "history_context_usage", path = "/history/context-usage", tag = "history",
    params(ContextUsageParams),
    responses(
        (status = 200, description = "`{percent, used, limit, model, status, trend, note, ...}`; the numbers \
            are null when the session has no assistant usage yet",
            body = cairn_core::history::context_usage::ContextUsageReport),
        (status = 400, description = "A bad session id, or a limit above 100,000,000", body = ErrorBody),
        (status = 404, description = "No such session", body = ErrorBody)))]
pub(super) async fn context_usage(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(p): ApiQuery<ContextUsageParams>,
) -> ApiResult {
    let req = cairn_core::history::context_usage::ContextUsageRequest {
        session_id: given(p.session_id),
        caller_session_id: caller(p.caller_session_id, &headers),
        limit: p.limit,
    };
    Ok(ok(run(&state, Op::ContextUsage(req)).await?))
}

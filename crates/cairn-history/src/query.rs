//! Reading the archive (every history op): sessions, turns, messages,
//! parts, search, the compaction chart, compactions, children, stats, forget. Pure functions
//! over a [`HistoryDb`]; the doors call them through ops.
//!
//! Visibility: when `caller_session_id` is the session asked about, only what came before
//! its latest compaction is visible (the rest is in the caller's context already), and the
//! compaction records themselves are hidden. Other sessions are shown in full.

use std::collections::{BTreeMap, HashMap, HashSet};

use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::model::{HistoryHost, PartKind};
use super::store::{HistoryDb, indexed_kind, parse_kind};
use cairn_base::error::{CairnError, ErrorCode, Result};
use cairn_base::lenient;
use cairn_base::query::{self, Term};
use cairn_base::settings::HistorySettings;

/// Tools whose input `history_pull_message` shows unless configured otherwise.
pub const DEFAULT_INPUT_TOOLS: &[&str] =
    &["bash", "grep", "glob", "task", "websearch", "webfetch", "question", "skill"];
/// Tools whose output it shows.
pub const DEFAULT_OUTPUT_TOOLS: &[&str] =
    &["question", "bash", "task", "apply_patch", "grep", "todowrite", "edit", "glob"];
/// Largest page `history_pull_part` serves (Claude Code caps an MCP answer near 25k tokens).
pub const MAX_PART_CHARS: usize = 100_000;
/// Longest `history_search` query.
pub const MAX_QUERY_CHARS: usize = 500;
/// Most turns or messages one browse shows on each side of its anchor.
const MAX_WINDOW: usize = 50;

// ---------------------------------------------------------------- requests

// One shape per request, for every door: the MCP tools' input schemas (feature `schema`) and
// the HTTP API's query parameters (feature `openapi`) are derived from these types, and the
// lenient readers (`cairn_base::lenient`) make a number sent as text, or a blank string, read
// the same everywhere. Doc comments are the descriptions an agent and the OpenAPI reader see.

/// `history_sessions`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct SessionsRequest {
    /// Only this project's sessions.
    #[serde(default, alias = "projectPath", deserialize_with = "lenient::given")]
    pub project: Option<String>,
    /// Words of the title, directory or id.
    #[serde(default, deserialize_with = "lenient::given")]
    pub query: Option<String>,
    /// opencode, claude-code, codex or gemini.
    #[serde(default, deserialize_with = "lenient::given")]
    #[cfg_attr(feature = "openapi", param(pattern = r"^\s*(opencode|claude-code|claude)?\s*$"))]
    pub host: Option<String>,
    /// Most sessions (default 10, at most 500).
    #[serde(default = "ten", deserialize_with = "lenient::count_or::<_, 10>")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u32>"))]
    #[cfg_attr(feature = "openapi", param(minimum = 0))]
    pub limit: usize,
    /// Sub-agent sessions too.
    #[serde(default, deserialize_with = "lenient::flag")]
    pub include_children: bool,
}

/// `history_browse_turns`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct TurnsRequest {
    /// `ses_…` (OpenCode) or a Claude Code session UUID.
    #[serde(alias = "sessionId")]
    #[cfg_attr(feature = "openapi", param(min_length = 1, pattern = r"\S"))]
    pub session_id: String,
    /// The turn to center on (default: the newest visible).
    #[serde(default, deserialize_with = "lenient::opt_number")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u32>"))]
    #[cfg_attr(feature = "openapi", param(minimum = 1))]
    pub turn_number: Option<i64>,
    #[serde(default, deserialize_with = "lenient::count_or::<_, 0>")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u32>"))]
    #[cfg_attr(feature = "openapi", param(minimum = 0))]
    pub num_before: usize,
    #[serde(default, deserialize_with = "lenient::count_or::<_, 0>")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u32>"))]
    #[cfg_attr(feature = "openapi", param(minimum = 0))]
    pub num_after: usize,
    /// Your own session id: your session is shown as before its latest compaction.
    #[serde(default, deserialize_with = "lenient::given")]
    pub caller_session_id: Option<String>,
}

/// `history_browse_messages`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct MessagesRequest {
    #[serde(alias = "sessionId")]
    #[cfg_attr(feature = "openapi", param(min_length = 1, pattern = r"\S"))]
    pub session_id: String,
    /// The message to center on (default: the latest visible).
    #[serde(default, alias = "messageId", deserialize_with = "lenient::given")]
    pub message_id: Option<String>,
    #[serde(default, deserialize_with = "lenient::count_or::<_, 0>")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u32>"))]
    #[cfg_attr(feature = "openapi", param(minimum = 0))]
    pub num_before: usize,
    #[serde(default, deserialize_with = "lenient::count_or::<_, 0>")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u32>"))]
    #[cfg_attr(feature = "openapi", param(minimum = 0))]
    pub num_after: usize,
    #[serde(default, deserialize_with = "lenient::given")]
    pub caller_session_id: Option<String>,
}

/// `history_pull_message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct MessageRequest {
    #[serde(alias = "sessionId")]
    #[cfg_attr(feature = "openapi", param(min_length = 1, pattern = r"\S"))]
    pub session_id: String,
    #[serde(alias = "messageId")]
    #[cfg_attr(feature = "openapi", param(min_length = 1, pattern = r"\S"))]
    pub message_id: String,
    #[serde(default, deserialize_with = "lenient::given")]
    pub caller_session_id: Option<String>,
}

/// `history_pull_part`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct PartRequest {
    #[serde(alias = "sessionId")]
    #[cfg_attr(feature = "openapi", param(min_length = 1, pattern = r"\S"))]
    pub session_id: String,
    #[serde(alias = "messageId")]
    #[cfg_attr(feature = "openapi", param(min_length = 1, pattern = r"\S"))]
    pub message_id: String,
    #[serde(alias = "partId")]
    #[cfg_attr(feature = "openapi", param(min_length = 1, pattern = r"\S"))]
    pub part_id: String,
    /// Where to start (next_offset of the previous page); must be inside the part.
    #[serde(default, deserialize_with = "lenient::count_or::<_, 0>")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u32>"))]
    #[cfg_attr(feature = "openapi", param(minimum = 0))]
    pub offset: usize,
    /// Page size in characters (default 20000, at most 100000).
    #[serde(default = "twenty_thousand", deserialize_with = "lenient::count_or::<_, 20_000>")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u32>"))]
    #[cfg_attr(feature = "openapi", param(minimum = 1, maximum = 100_000))]
    pub max_chars: usize,
    #[serde(default, deserialize_with = "lenient::given")]
    pub caller_session_id: Option<String>,
}

/// `history_search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct SearchRequest {
    /// Keywords or a tool name (at most 500 characters).
    #[cfg_attr(feature = "openapi", param(min_length = 1, max_length = 500, pattern = r"\S"))]
    pub query: String,
    /// One session; omitted: the project's sessions, newest first.
    #[serde(default, alias = "sessionId", deserialize_with = "lenient::given")]
    pub session_id: Option<String>,
    /// The project (an MCP call without a session defaults to its own).
    #[serde(default, deserialize_with = "lenient::given")]
    pub project: Option<String>,
    /// Case-insensitive substring instead of ranked keywords.
    #[serde(default, deserialize_with = "lenient::flag")]
    pub literal: bool,
    /// Pipe-separated: text, tool, reasoning (default text|tool).
    #[serde(default, rename = "type", deserialize_with = "lenient::given")]
    #[cfg_attr(
        feature = "openapi",
        param(rename = "type", pattern = r"^\s*(text|tool|reasoning)?\s*([|,]\s*(text|tool|reasoning)?\s*)*$")
    )]
    pub kinds: Option<String>,
    #[serde(default, deserialize_with = "lenient::given")]
    pub caller_session_id: Option<String>,
}

/// `history_chart`, `history_children`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct SessionRef {
    #[serde(alias = "sessionId")]
    #[cfg_attr(feature = "openapi", param(min_length = 1, pattern = r"\S"))]
    pub session_id: String,
}

/// `history_compactions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct CompactionsRequest {
    #[serde(alias = "sessionId")]
    #[cfg_attr(feature = "openapi", param(min_length = 1, pattern = r"\S"))]
    pub session_id: String,
    /// 1-based: that compaction's full summary.
    #[serde(default, deserialize_with = "lenient::opt_number")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u32>"))]
    #[cfg_attr(feature = "openapi", param(minimum = 1))]
    pub read: Option<usize>,
}

fn ten() -> usize {
    10
}
fn twenty_thousand() -> usize {
    20_000
}

// ---------------------------------------------------------------- results

/// One session in a listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionListing {
    pub session_id: String,
    pub host: String,
    pub title: Option<String>,
    pub directory: Option<String>,
    pub project: Option<String>,
    pub updated: String,
    pub messages: u64,
    pub parent_id: Option<String>,
}

/// How a turn's or message's tool calls went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolSummary {
    /// `"2× grep"`, in order of first call.
    pub calls: Vec<String>,
    /// `completed`, `recovered` (an error, then success), `error` or `running`.
    pub outcome: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TurnUser {
    pub preview: Option<String>,
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TurnAssistant {
    pub preview: Option<String>,
    pub total_messages: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolSummary>,
    /// Files written by completed write/edit/apply_patch calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TurnPreview {
    pub turn_number: i64,
    pub user: TurnUser,
    pub assistant: TurnAssistant,
}

/// The answer to `history_browse_turns`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TurnsPage {
    pub turns: Vec<TurnPreview>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessagePreview {
    pub role: String,
    pub turn_number: i64,
    pub message_id: String,
    pub preview: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachment: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolSummary>,
    /// Only text cairn injected (a Claude Code hook's context): the preview is of that text.
    #[serde(default, skip_serializing_if = "is_false")]
    pub injected: bool,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
fn is_false(b: &bool) -> bool {
    !*b
}

/// The answer to `history_browse_messages`: page on with the ids either side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MessagesPage {
    pub before_message_id: Option<String>,
    pub messages: Vec<MessagePreview>,
    pub after_message_id: Option<String>,
}

/// One part of a pulled message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Section {
    Text {
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        part_id: Option<String>,
        /// Text cairn put into the conversation (the `[MEMORY]` block, its guidance and notes),
        /// not the user's: left out of previews, the chart and search.
        #[serde(default, skip_serializing_if = "is_false")]
        injected: bool,
    },
    Reasoning {
        content: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        part_id: Option<String>,
    },
    Tool {
        tool: String,
        status: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
        input: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        part_id: Option<String>,
    },
    Image {
        mime: Option<String>,
    },
    File {
        path: Option<String>,
        mime: Option<String>,
    },
}

/// The answer to `history_pull_message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PulledMessage {
    pub message_id: String,
    pub role: String,
    pub turn_number: i64,
    /// ISO-8601, or `unknown`.
    pub time: String,
    pub sections: Vec<Section>,
}

/// The answer to `history_pull_part`: one page of a part's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PulledPart {
    #[serde(rename = "type")]
    pub kind: String,
    pub content: String,
    /// Characters of the whole content, and where this page starts.
    pub total_chars: u64,
    pub offset: u64,
    /// Where the next page starts, when there is more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<u64>,
    /// Text cairn put into the conversation, not the user's.
    #[serde(default, skip_serializing_if = "is_false")]
    pub injected: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchHitPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    pub part_id: String,
    pub snippets: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchMessage {
    pub session_id: String,
    pub role: String,
    pub turn_number: i64,
    pub message_id: String,
    pub hits: Vec<SearchHitPart>,
    /// Hits in this message beyond the ones shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remain_hits: Option<u64>,
}

/// The answer to `history_search`, best first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchResults {
    pub messages: Vec<SearchMessage>,
}

/// The answer to `history_chart`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Chart {
    pub session_id: String,
    pub chart: String,
}

/// One compaction of a session: the trigger and the summary after it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompactionEntry {
    /// 1-based, oldest first (`read` takes it).
    pub index: u64,
    pub time: String,
    pub trigger_message_id: Option<String>,
    pub summary_message_id: Option<String>,
    /// The summary's first 60 characters.
    pub preview: String,
}

/// The answer to `history_compactions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Compactions {
    pub session_id: String,
    pub compactions: Vec<CompactionEntry>,
    /// The full summary of compaction `read`, when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// The archive of one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HostHistoryStats {
    pub host: String,
    pub sessions: u64,
    pub messages: u64,
    pub parts: u64,
    /// Characters of text, tool input and output stored.
    pub bytes: u64,
    pub oldest: Option<String>,
    pub newest: Option<String>,
    /// Records the readers could not use, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Sources whose last read failed.
    pub errors: u64,
}

/// The answer to `history_stats`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistoryStats {
    pub hosts: Vec<HostHistoryStats>,
}

/// The answer to `history_forget`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Forgotten {
    pub session_id: String,
    /// Always `forgotten`.
    pub status: String,
    /// Rows removed (session, messages, parts).
    pub removed: u64,
}

// ---------------------------------------------------------------- rows and visibility

#[derive(Debug, Clone)]
struct MessageRow {
    id: String,
    role: String,
    seq: i64,
    turn: i64,
    summary: bool,
    compaction: bool,
    synthetic: bool,
    created_at: String,
}

impl MessageRow {
    fn opens_turn(&self) -> bool {
        self.role == "user" && !self.summary && !self.compaction && !self.synthetic
    }
}

#[derive(Debug, Clone)]
struct PartRow {
    id: String,
    kind: PartKind,
    text: Option<String>,
    tool: Option<String>,
    status: Option<String>,
    input: Option<String>,
    output: Option<String>,
    mime: Option<String>,
    path: Option<String>,
    injected: bool,
}

const MESSAGE_COLUMNS: &str = "id, role, seq, coalesce(turn_number, 0), summary, compaction, synthetic, created_at";
const PART_COLUMNS: &str = "id, kind, text, tool, status, input, output, mime, path, injected";

fn message_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<MessageRow> {
    Ok(MessageRow {
        id: r.get(0)?,
        role: r.get(1)?,
        seq: r.get(2)?,
        turn: r.get(3)?,
        summary: r.get(4)?,
        compaction: r.get(5)?,
        synthetic: r.get(6)?,
        created_at: r.get(7)?,
    })
}

fn part_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<PartRow> {
    Ok(PartRow {
        id: r.get(0)?,
        kind: parse_kind(&r.get::<_, String>(1)?),
        text: r.get(2)?,
        tool: r.get(3)?,
        status: r.get(4)?,
        input: r.get(5)?,
        output: r.get(6)?,
        mime: r.get(7)?,
        path: r.get(8)?,
        injected: r.get(9)?,
    })
}

/// What of one session the caller may see.
struct View {
    session_id: String,
    /// Own session with a compaction: only messages ordered before this (seq, id), and no
    /// compaction records.
    boundary: Option<(i64, String)>,
}

impl View {
    /// The SQL condition on `history_messages` (parameters `?2`, `?3`), empty when all is visible.
    fn filter(&self) -> &'static str {
        if self.boundary.is_some() { " AND (seq, id) < (?2, ?3) AND summary = 0 AND compaction = 0" } else { "" }
    }

    fn params(&self) -> Vec<rusqlite::types::Value> {
        let mut values = vec![rusqlite::types::Value::Text(self.session_id.clone())];
        if let Some((seq, id)) = &self.boundary {
            values.push(rusqlite::types::Value::Integer(*seq));
            values.push(rusqlite::types::Value::Text(id.clone()));
        }
        values
    }

    fn shows(&self, m: &MessageRow) -> bool {
        match &self.boundary {
            None => true,
            Some((seq, id)) => (m.seq, m.id.as_str()) < (*seq, id.as_str()) && !m.summary && !m.compaction,
        }
    }
}

/// Ids come from agents: refuse the empty, the huge and anything shaped like a path.
pub fn check_id(what: &str, id: &str) -> Result<()> {
    if id.trim().is_empty() {
        return Err(CairnError::empty(what));
    }
    // No such id can exist (the readers refuse them on ingest), so it is not found, with why.
    if id.len() > 200 || id.contains(['/', '\\', '\0']) || id.contains("..") {
        let code = match what {
            "message_id" => cairn_base::ErrorCode::MessageNotFound,
            "part_id" => cairn_base::ErrorCode::PartNotFound,
            _ => cairn_base::ErrorCode::HistorySessionNotFound,
        };
        return Err(CairnError::new(
            code,
            format!("no {what} {id:?}: ids hold no /, \\, .. or NUL and are at most 200 bytes"),
        )
        .with_hint("use an id from history_sessions, history_browse_turns or history_browse_messages"));
    }
    Ok(())
}

fn view(conn: &Connection, session_id: &str, caller: Option<&str>) -> Result<View> {
    check_id("session_id", session_id)?;
    let exists: bool = conn
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM history_sessions WHERE id = ?1)")?
        .query_row([session_id], |r| r.get(0))?;
    if !exists {
        return Err(session_not_found(session_id));
    }
    let boundary = if caller == Some(session_id) { latest_compaction(conn, session_id)? } else { None };
    Ok(View { session_id: session_id.to_owned(), boundary })
}

fn latest_compaction(conn: &Connection, session_id: &str) -> Result<Option<(i64, String)>> {
    Ok(conn
        .prepare_cached(
            "SELECT seq, id FROM history_messages WHERE session_id = ?1 AND (compaction = 1 OR summary = 1)
             ORDER BY seq DESC, id DESC LIMIT 1",
        )?
        .query_row([session_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

fn session_not_found(id: &str) -> CairnError {
    CairnError::new(ErrorCode::HistorySessionNotFound, format!("no history for session {id:?}"))
        .with_hint("list sessions with history_sessions; a new session appears after the next scan (history_ingest)")
}

fn message_not_found(session_id: &str, id: &str) -> CairnError {
    CairnError::new(ErrorCode::MessageNotFound, format!("no message {id:?} in session {session_id:?}"))
        .with_hint("find message ids with history_browse_turns or history_browse_messages")
}

fn message_not_visible(id: &str) -> CairnError {
    CairnError::new(
        ErrorCode::MessageNotVisible,
        format!("message {id:?} is after this session's latest compaction: it is in your context already"),
    )
    .with_hint("history_browse_turns shows the turns before the compaction")
}

/// A message of the session, checked against the view.
fn visible_message(conn: &Connection, view: &View, message_id: &str) -> Result<MessageRow> {
    check_id("message_id", message_id)?;
    let row = conn
        .prepare_cached(&format!("SELECT {MESSAGE_COLUMNS} FROM history_messages WHERE session_id = ?1 AND id = ?2"))?
        .query_row(params![view.session_id, message_id], message_row)
        .optional()?
        .ok_or_else(|| message_not_found(&view.session_id, message_id))?;
    if !view.shows(&row) {
        return Err(message_not_visible(message_id));
    }
    Ok(row)
}

fn parts_of(conn: &Connection, session_id: &str, message_id: &str) -> Result<Vec<PartRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {PART_COLUMNS} FROM history_parts WHERE session_id = ?1 AND message_id = ?2 ORDER BY idx"
    ))?;
    Ok(stmt.query_map(params![session_id, message_id], part_row)?.collect::<rusqlite::Result<_>>()?)
}

// ---------------------------------------------------------------- sessions, children

/// Sessions newest first: main sessions unless `include_children`.
pub fn sessions(db: &HistoryDb, req: &SessionsRequest) -> Result<Vec<SessionListing>> {
    let mut sql = String::from(
        "SELECT s.id, s.host, s.title, s.directory, s.project, s.updated_at, s.parent_id,
             (SELECT count(*) FROM history_messages m WHERE m.session_id = s.id)
         FROM history_sessions s WHERE 1 = 1",
    );
    let mut values: Vec<String> = Vec::new();
    if !req.include_children {
        sql.push_str(" AND s.parent_id IS NULL");
    }
    if let Some(project) = req.project.as_deref().filter(|p| !p.is_empty()) {
        values.push(project.to_owned());
        sql.push_str(&format!(" AND s.project = ?{}", values.len()));
    }
    if let Some(host) = req.host.as_deref().filter(|h| !h.is_empty()) {
        let host = HistoryHost::parse(host.trim()).ok_or_else(|| {
            CairnError::invalid(format!("unknown host {host:?}"))
                .with_hint("use opencode, claude-code, codex or gemini")
        })?;
        values.push(host.as_str().to_owned());
        sql.push_str(&format!(" AND s.host = ?{}", values.len()));
    }
    for word in req.query.as_deref().unwrap_or("").split_whitespace().take(8) {
        values.push(format!("%{}%", word.to_lowercase().replace(['%', '_'], "")));
        let n = values.len();
        sql.push_str(&format!(
            " AND (lower(coalesce(s.title, '')) LIKE ?{n} OR lower(coalesce(s.directory, '')) LIKE ?{n}
                   OR lower(s.id) LIKE ?{n})"
        ));
    }
    sql.push_str(&format!(" ORDER BY s.updated_at DESC, s.id LIMIT {}", clamp(req.limit, 10)));
    listing(db.conn(), &sql, values)
}

/// A session's sub-agent sessions, oldest first.
pub fn children(db: &HistoryDb, session_id: &str) -> Result<Vec<SessionListing>> {
    view(db.conn(), session_id, None)?;
    listing(
        db.conn(),
        "SELECT s.id, s.host, s.title, s.directory, s.project, s.updated_at, s.parent_id,
             (SELECT count(*) FROM history_messages m WHERE m.session_id = s.id)
         FROM history_sessions s WHERE s.parent_id = ?1 ORDER BY s.created_at, s.id LIMIT 500",
        vec![session_id.to_owned()],
    )
}

fn listing(conn: &Connection, sql: &str, values: Vec<String>) -> Result<Vec<SessionListing>> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map(params_from_iter(values), |r| {
        Ok(SessionListing {
            session_id: r.get(0)?,
            host: r.get(1)?,
            title: r.get(2)?,
            directory: r.get(3)?,
            project: r.get(4)?,
            updated: r.get(5)?,
            parent_id: r.get(6)?,
            messages: r.get::<_, i64>(7)? as u64,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn clamp(limit: usize, default: usize) -> usize {
    if limit == 0 { default } else { limit.min(500) }
}

// ---------------------------------------------------------------- turns

/// Turn previews around `turn_number` (default: the newest visible turn), ascending.
pub fn browse_turns(db: &HistoryDb, req: &TurnsRequest, cfg: &HistorySettings) -> Result<TurnsPage> {
    let conn = db.conn();
    let view = view(conn, &req.session_id, req.caller_session_id.as_deref())?;
    let last: Option<i64> = conn
        .prepare_cached(&format!(
            "SELECT max(turn_number) FROM history_messages WHERE session_id = ?1 AND turn_number > 0{}",
            view.filter()
        ))?
        .query_row(params_from_iter(view.params()), |r| r.get(0))?;
    let Some(last) = last else {
        if let Some(asked) = req.turn_number {
            return Err(turn_out_of_range(asked, None));
        }
        return Ok(TurnsPage { turns: Vec::new() });
    };
    let turn = req.turn_number.unwrap_or(last);
    if !(1..=last).contains(&turn) {
        return Err(turn_out_of_range(turn, Some(last)));
    }
    let first = (turn - req.num_before.min(MAX_WINDOW) as i64).max(1);
    let end = (turn + req.num_after.min(MAX_WINDOW) as i64).min(last);
    let mut values = view.params();
    values.push(rusqlite::types::Value::Integer(first));
    values.push(rusqlite::types::Value::Integer(end));
    let (lo, hi) = if view.boundary.is_some() { (4, 5) } else { (2, 3) };
    let messages: Vec<MessageRow> = {
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM history_messages
             WHERE session_id = ?1 AND turn_number BETWEEN ?{lo} AND ?{hi}{} ORDER BY seq, id",
            view.filter()
        ))?;
        stmt.query_map(params_from_iter(values), message_row)?.collect::<rusqlite::Result<_>>()?
    };
    let mut turns: Vec<TurnPreview> = Vec::new();
    let mut current: Vec<(MessageRow, Vec<PartRow>)> = Vec::new();
    for message in messages {
        if message.opens_turn() && !current.is_empty() {
            turns.extend(turn_preview(std::mem::take(&mut current), cfg));
        }
        let parts = parts_of(conn, &view.session_id, &message.id)?;
        current.push((message, parts));
    }
    turns.extend(turn_preview(current, cfg));
    Ok(TurnsPage { turns })
}

fn turn_out_of_range(asked: i64, last: Option<i64>) -> CairnError {
    let hint = match last {
        Some(last) => format!("visible turns are 1..={last}; omit turn_number for the newest"),
        None => "this session has no visible turns yet".to_owned(),
    };
    CairnError::new(ErrorCode::TurnOutOfRange, format!("turn {asked} is out of range")).with_hint(hint)
}

/// One turn's preview from its messages (the user message first); `None` for messages
/// before the session's first turn.
fn turn_preview(messages: Vec<(MessageRow, Vec<PartRow>)>, cfg: &HistorySettings) -> Option<TurnPreview> {
    let (user, user_parts) = messages.iter().find(|(m, _)| m.opens_turn())?;
    let lengths = &cfg.browse_turns;
    let assistants: Vec<&(MessageRow, Vec<PartRow>)> = messages.iter().filter(|(m, _)| m.role == "assistant").collect();
    let assistant_preview = assistants
        .iter()
        .rev()
        .flat_map(|(_, parts)| parts.iter().rev())
        .find_map(|p| p.text.as_deref().filter(|t| p.kind == PartKind::Text && !p.injected && !t.trim().is_empty()))
        .map(|t| cairn_base::text::preview(t, lengths.assistant_preview_length));
    let tool_parts: Vec<&PartRow> = assistants.iter().flat_map(|(_, parts)| parts.iter()).collect();
    let modified = modified_files(&tool_parts);
    Some(TurnPreview {
        turn_number: user.turn,
        user: TurnUser {
            preview: text_of(user_parts).map(|t| cairn_base::text::preview(&t, lengths.user_preview_length)),
            message_id: user.id.clone(),
            attachment: attachments(user_parts),
        },
        assistant: TurnAssistant {
            preview: assistant_preview,
            total_messages: assistants.len() as u64,
            tool: tool_summary(&tool_parts),
            modified: (!modified.is_empty()).then_some(modified),
        },
    })
}

/// The message's text parts (not the ones cairn injected), joined; `None` when it has none.
fn text_of(parts: &[PartRow]) -> Option<String> {
    texts_joined(parts.iter().filter(|p| !p.injected))
}

/// The text parts cairn injected, joined; `None` when there are none.
fn injected_text_of(parts: &[PartRow]) -> Option<String> {
    texts_joined(parts.iter().filter(|p| p.injected))
}

fn texts_joined<'a>(parts: impl Iterator<Item = &'a PartRow>) -> Option<String> {
    let texts: Vec<&str> = parts
        .filter(|p| p.kind == PartKind::Text)
        .filter_map(|p| p.text.as_deref())
        .filter(|t| !t.trim().is_empty())
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

fn attachments(parts: &[PartRow]) -> Option<Vec<String>> {
    let images = parts.iter().filter(|p| p.kind == PartKind::Image).count();
    let mut list = Vec::new();
    if images > 0 {
        list.push(if images == 1 { "1 image".to_owned() } else { format!("{images} images") });
    }
    list.extend(
        parts
            .iter()
            .filter(|p| p.kind == PartKind::File)
            .map(|p| p.path.clone().or_else(|| p.mime.clone()).unwrap_or_else(|| "file".to_owned())),
    );
    (!list.is_empty()).then_some(list)
}

fn tool_summary(parts: &[&PartRow]) -> Option<ToolSummary> {
    let tools: Vec<&&PartRow> = parts.iter().filter(|p| p.kind == PartKind::Tool).collect();
    if tools.is_empty() {
        return None;
    }
    let mut counts: Vec<(String, usize)> = Vec::new();
    for part in &tools {
        let name = part.tool.clone().unwrap_or_else(|| "tool".to_owned());
        match counts.iter_mut().find(|(n, _)| *n == name) {
            Some((_, count)) => *count += 1,
            None => counts.push((name, 1)),
        }
    }
    let status = |p: &&&PartRow| p.status.as_deref().unwrap_or("completed").to_owned();
    let statuses: Vec<String> = tools.iter().map(status).collect();
    let outcome = if statuses.iter().any(|s| s == "running" || s == "pending") {
        "running"
    } else if !statuses.iter().any(|s| s == "error") {
        "completed"
    } else if statuses.last().is_some_and(|s| s == "completed") {
        "recovered"
    } else {
        "error"
    };
    Some(ToolSummary {
        calls: counts.into_iter().map(|(name, n)| format!("{n}× {name}")).collect(),
        outcome: outcome.to_owned(),
    })
}

/// Paths touched by completed writing tools, in order, once each.
fn modified_files(parts: &[&PartRow]) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for part in parts.iter().filter(|p| p.kind == PartKind::Tool && p.status.as_deref() == Some("completed")) {
        let tool = canonical_tool(part.tool.as_deref().unwrap_or(""));
        if !matches!(tool.as_str(), "edit" | "write" | "apply_patch") {
            continue;
        }
        let input: Value = part.input.as_deref().and_then(|i| serde_json::from_str(i).ok()).unwrap_or(Value::Null);
        let mut found: Vec<String> = ["filePath", "file_path", "path", "notebook_path"]
            .iter()
            .filter_map(|k| input.get(k).and_then(Value::as_str).map(str::to_owned))
            .take(1)
            .collect();
        if let Some(patch) = input.get("patchText").or_else(|| input.get("patch")).and_then(Value::as_str) {
            found.extend(patch.lines().filter_map(|line| {
                ["*** Add File: ", "*** Update File: ", "*** Delete File: "]
                    .iter()
                    .find_map(|marker| line.strip_prefix(marker))
                    .map(|p| p.trim().to_owned())
            }));
        }
        for file in found {
            if !files.contains(&file) {
                files.push(file);
            }
        }
    }
    files
}

// ---------------------------------------------------------------- messages

/// A window of message previews around `message_id` (default: the latest visible).
pub fn browse_messages(db: &HistoryDb, req: &MessagesRequest, cfg: &HistorySettings) -> Result<MessagesPage> {
    let conn = db.conn();
    let view = view(conn, &req.session_id, req.caller_session_id.as_deref())?;
    let anchor = match req.message_id.as_deref() {
        Some(id) => visible_message(conn, &view, id)?,
        None => match latest_visible(conn, &view)? {
            Some(row) => row,
            None => return Ok(MessagesPage { before_message_id: None, messages: Vec::new(), after_message_id: None }),
        },
    };
    let num_before = req.num_before.min(MAX_WINDOW);
    let num_after = req.num_after.min(MAX_WINDOW);
    let mut before = neighbours(conn, &view, &anchor, true, num_before + 1)?;
    let mut after = neighbours(conn, &view, &anchor, false, num_after + 1)?;
    let before_message_id = (before.len() > num_before).then(|| before.pop().map(|m| m.id)).flatten();
    let after_message_id = (after.len() > num_after).then(|| after.pop().map(|m| m.id)).flatten();
    before.reverse();
    let mut messages = Vec::with_capacity(before.len() + 1 + after.len());
    for row in before.into_iter().chain(std::iter::once(anchor)).chain(after) {
        let parts = parts_of(conn, &view.session_id, &row.id)?;
        messages.push(message_preview(&row, &parts, cfg));
    }
    Ok(MessagesPage { before_message_id, messages, after_message_id })
}

fn latest_visible(conn: &Connection, view: &View) -> Result<Option<MessageRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM history_messages WHERE session_id = ?1{} ORDER BY seq DESC, id DESC LIMIT 1",
            view.filter()
        ))?
        .query_row(params_from_iter(view.params()), message_row)
        .optional()?)
}

/// Up to `limit` visible messages before (nearest first) or after the anchor.
fn neighbours(
    conn: &Connection,
    view: &View,
    anchor: &MessageRow,
    before: bool,
    limit: usize,
) -> Result<Vec<MessageRow>> {
    let (cmp, order) = if before { ("<", "DESC") } else { (">", "ASC") };
    let mut values = view.params();
    let n = values.len();
    values.push(rusqlite::types::Value::Integer(anchor.seq));
    values.push(rusqlite::types::Value::Text(anchor.id.clone()));
    let sql = format!(
        "SELECT {MESSAGE_COLUMNS} FROM history_messages WHERE session_id = ?1{} AND (seq, id) {cmp} (?{}, ?{})
         ORDER BY seq {order}, id {order} LIMIT {limit}",
        view.filter(),
        n + 1,
        n + 2
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    Ok(stmt.query_map(params_from_iter(values), message_row)?.collect::<rusqlite::Result<_>>()?)
}

fn message_preview(row: &MessageRow, parts: &[PartRow], cfg: &HistorySettings) -> MessagePreview {
    let length = if row.role == "user" {
        cfg.browse_messages.user_preview_length
    } else {
        cfg.browse_messages.assistant_preview_length
    };
    let tool_parts: Vec<&PartRow> = parts.iter().collect();
    MessagePreview {
        role: row.role.clone(),
        turn_number: row.turn,
        message_id: row.id.clone(),
        preview: preview_label(row, parts, length),
        attachment: attachments(parts),
        tool: tool_summary(&tool_parts),
        injected: !parts.is_empty() && parts.iter().all(|p| p.injected),
    }
}

/// The message's text, cut; or a label saying what it holds instead.
fn preview_label(row: &MessageRow, parts: &[PartRow], length: usize) -> String {
    if row.summary {
        return "[compacted summary]".to_owned();
    }
    if row.compaction {
        return "[compaction trigger]".to_owned();
    }
    // a message of only cairn's text (a hook's context) is shown as that, marked by the caller
    if let Some(text) = text_of(parts).or_else(|| injected_text_of(parts)) {
        return cairn_base::text::preview(&text, length);
    }
    let has = |kind: PartKind| parts.iter().any(|p| p.kind == kind);
    let label = if has(PartKind::Subtask) {
        "[subtask request]"
    } else if has(PartKind::Tool) {
        "[tool calls only]"
    } else if has(PartKind::Reasoning) {
        "[reasoning only]"
    } else if has(PartKind::File) || has(PartKind::Image) {
        "[attachments only]"
    } else {
        "[empty]"
    };
    label.to_owned()
}

// ---------------------------------------------------------------- pull a message

/// One message split into sections, long ones cut with their part id to pull in full.
pub fn pull_message(db: &HistoryDb, req: &MessageRequest, cfg: &HistorySettings) -> Result<PulledMessage> {
    let conn = db.conn();
    let view = view(conn, &req.session_id, req.caller_session_id.as_deref())?;
    let row = visible_message(conn, &view, &req.message_id)?;
    let parts = parts_of(conn, &view.session_id, &row.id)?;
    let lengths = &cfg.pull_message;
    let sections = parts
        .iter()
        .map(|part| {
            let cut_text = |text: &str, max: usize| {
                let (content, cut) = cut_chars(text, max);
                (content, cut.then(|| part.id.clone()))
            };
            match part.kind {
                PartKind::Text | PartKind::Subtask | PartKind::Compaction => {
                    let text = part.text.as_deref().unwrap_or("");
                    let text = match part.kind {
                        PartKind::Subtask => format!("[subtask request] {text}"),
                        PartKind::Compaction => "[compaction trigger]".to_owned(),
                        _ => text.to_owned(),
                    };
                    let (content, part_id) = cut_text(&text, lengths.text_length);
                    Section::Text { content, part_id, injected: part.injected }
                }
                PartKind::Reasoning => {
                    let (content, part_id) = cut_text(part.text.as_deref().unwrap_or(""), lengths.reasoning_length);
                    Section::Reasoning { content, part_id }
                }
                PartKind::Tool => tool_section(part, cfg),
                PartKind::Image => Section::Image { mime: part.mime.clone() },
                PartKind::File => Section::File { path: part.path.clone(), mime: part.mime.clone() },
            }
        })
        .collect();
    Ok(PulledMessage {
        message_id: row.id,
        role: row.role,
        turn_number: row.turn,
        time: if row.created_at.is_empty() { "unknown".to_owned() } else { row.created_at },
        sections,
    })
}

fn tool_section(part: &PartRow, cfg: &HistorySettings) -> Section {
    let name = part.tool.clone().unwrap_or_else(|| "tool".to_owned());
    let lengths = &cfg.pull_message;
    let mut cut_any = false;
    let input = tool_shown(&name, DEFAULT_INPUT_TOOLS, &cfg.show_tool_input)
        .then(|| part.input.as_deref().map(|raw| cut_input(raw, lengths.tool_input_length, &mut cut_any)))
        .flatten();
    let content = tool_shown(&name, DEFAULT_OUTPUT_TOOLS, &cfg.show_tool_output)
        .then(|| {
            part.output.as_deref().map(|out| {
                let (content, cut) = cut_chars(out, lengths.tool_output_length);
                cut_any |= cut;
                content
            })
        })
        .flatten();
    // Whatever was cut or left out can be pulled whole by its part id.
    let withheld = cut_any || (input.is_none() && part.input.is_some()) || (content.is_none() && part.output.is_some());
    Section::Tool {
        tool: name,
        status: part.status.clone().unwrap_or_else(|| "completed".to_owned()),
        input,
        content,
        part_id: withheld.then(|| part.id.clone()),
    }
}

/// `text` cut at `max` characters, ending with `[N chars more]` when cut.
fn cut_chars(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        None => (text.to_owned(), false),
        Some((at, _)) => {
            let more = text[at..].chars().count();
            (format!("{} [{more} chars more]", &text[..at]), true)
        }
    }
}

/// A tool's input as JSON with each string field cut (a string if it is not JSON).
fn cut_input(raw: &str, max: usize, cut_any: &mut bool) -> Value {
    fn walk(value: Value, max: usize, cut_any: &mut bool) -> Value {
        match value {
            Value::String(s) => {
                let (text, cut) = cut_chars(&s, max);
                *cut_any |= cut;
                Value::String(text)
            }
            Value::Array(items) => Value::Array(items.into_iter().map(|v| walk(v, max, cut_any)).collect()),
            Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, walk(v, max, cut_any))).collect()),
            other => other,
        }
    }
    let value = serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()));
    walk(value, max, cut_any)
}

/// OpenCode's name for a tool Claude Code spells its own way, so one selector covers both.
pub fn canonical_tool(name: &str) -> String {
    match name {
        "Agent" | "Task" => "task".to_owned(),
        "Write" | "MultiEdit" | "NotebookEdit" => "edit".to_owned(),
        "AskUserQuestion" => "question".to_owned(),
        other => other.to_lowercase(),
    }
}

/// Whether a tool's input (or output) is shown: configured selectors first (`!name` and `!`
/// exclusions win), then the defaults.
pub fn tool_shown(name: &str, defaults: &[&str], selectors: &[String]) -> bool {
    let canonical = canonical_tool(name);
    let lower = name.to_lowercase();
    let matches = |selector: &str| {
        let selector = selector.trim().to_lowercase();
        glob_match(&selector, &lower) || glob_match(&selector, &canonical)
    };
    let mut hide_all = false;
    for selector in selectors {
        match selector.trim().strip_prefix('!') {
            Some("") => hide_all = true,
            Some(excluded) if matches(excluded) => return false,
            _ => {}
        }
    }
    if selectors.iter().any(|s| !s.trim().starts_with('!') && matches(s)) {
        return true;
    }
    !hide_all && defaults.contains(&canonical.as_str())
}

/// `*` (any run) and `?` (one character) globbing.
fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

// ---------------------------------------------------------------- pull a part

/// One part in full, a page at a time.
pub fn pull_part(db: &HistoryDb, req: &PartRequest) -> Result<PulledPart> {
    if req.max_chars == 0 || req.max_chars > MAX_PART_CHARS {
        return Err(CairnError::invalid(format!("max_chars must be between 1 and {MAX_PART_CHARS}"))
            .with_hint("page through a long part with offset and next_offset"));
    }
    let conn = db.conn();
    let view = view(conn, &req.session_id, req.caller_session_id.as_deref())?;
    let message = visible_message(conn, &view, &req.message_id)?;
    check_id("part_id", &req.part_id)?;
    let part = parts_of(conn, &view.session_id, &message.id)?
        .into_iter()
        .find(|p| p.id == req.part_id)
        .ok_or_else(|| part_not_found(&req.part_id, &message.id, "no such part in the message"))?;
    let (kind, content) = match part.kind {
        PartKind::Image | PartKind::File => {
            return Err(part_not_found(&req.part_id, &message.id, "an attachment has no content to pull"));
        }
        PartKind::Reasoning => ("reasoning", part.text.clone().unwrap_or_default()),
        PartKind::Tool => ("tool", tool_content(&part)),
        _ => ("text", part.text.clone().unwrap_or_default()),
    };
    let content = if content.trim().is_empty() { format!("Section '{}' has no content.", part.id) } else { content };
    Ok(PulledPart { injected: part.injected, ..page(kind, &content, req.offset, req.max_chars)? })
}

fn part_not_found(part_id: &str, message_id: &str, why: &str) -> CairnError {
    CairnError::new(ErrorCode::PartNotFound, format!("part {part_id:?} of message {message_id:?}: {why}"))
        .with_hint("history_pull_message lists the message's parts with their part_id")
}

/// A tool call as text: its signature, `---`, its output.
fn tool_content(part: &PartRow) -> String {
    let name = part.tool.as_deref().unwrap_or("tool");
    let header = match part.input.as_deref().map(serde_json::from_str::<Value>) {
        Some(Ok(Value::Object(args))) => {
            let args: Vec<String> = args.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{name}({})", args.join(", "))
        }
        Some(_) => format!("{name}({})", part.input.as_deref().unwrap_or("")),
        None => format!("{name}()"),
    };
    match (&part.output, part.status.as_deref()) {
        (Some(output), _) => format!("{header}\n---\n{output}"),
        (None, Some(status @ ("running" | "pending"))) => {
            format!("{header}\n---\nSection '{}' has no content yet (status: {status})", part.id)
        }
        (None, _) => format!("{header}\n---\nSection '{}' has no content.", part.id),
    }
}

fn page(kind: &str, content: &str, offset: usize, max_chars: usize) -> Result<PulledPart> {
    let total = content.chars().count();
    if offset > 0 && offset >= total {
        return Err(CairnError::invalid(format!("offset {offset} is past the end of the part ({total} chars)"))
            .with_hint("start at 0, then follow next_offset"));
    }
    let text: String = content.chars().skip(offset).take(max_chars).collect();
    let end = offset + text.chars().count();
    Ok(PulledPart {
        kind: kind.to_owned(),
        content: text,
        total_chars: total as u64,
        offset: offset as u64,
        next_offset: (end < total).then_some(end as u64),
        injected: false,
    })
}

// ---------------------------------------------------------------- search

/// Candidates one search ranks per hit it may show (`search.message_limit` ×
/// `search.max_hits_per_message`), within [`MIN_RANKED`, `MAX_RANKED`].
const RANKED_PER_HIT: usize = 4;
const MIN_RANKED: usize = 100;
const MAX_RANKED: usize = 2_000;
/// Parts (by rowid, newest first) the first ranking looks at; each retry looks at 8× more.
const FIRST_WINDOW: i64 = 20_000;

/// A part that matched, with what ranks it. Only what grouping needs: the text of a part is
/// read for the hits shown, not for every candidate.
struct Candidate {
    session_id: String,
    message: MessageRow,
    part: HitPart,
    rank: f64,
}

struct HitPart {
    rowid: i64,
    id: String,
    kind: PartKind,
    tool: Option<String>,
}

/// Parts matching the query, grouped by message, best first.
pub fn search(db: &HistoryDb, req: &SearchRequest, cfg: &HistorySettings) -> Result<SearchResults> {
    let conn = db.conn();
    let text = req.query.trim();
    if text.is_empty() {
        return Err(CairnError::empty("query"));
    }
    if text.chars().count() > MAX_QUERY_CHARS {
        return Err(CairnError::invalid(format!("query is longer than {MAX_QUERY_CHARS} characters")));
    }
    let kinds = parse_kinds(req.kinds.as_deref())?;
    let views = search_scope(conn, req)?;
    // The index's tokenizer (unicode61) keeps a run of Chinese or Japanese characters as one
    // word, so a word inside a sentence is never found by it: such queries are substrings,
    // looked up in the trigram index (3 characters or more; shorter ones scan the parts).
    let unsegmented = super::text::has_unsegmented_script(text);
    let literal = req.literal || unsegmented;
    // FTS5's query syntax ends a string at a NUL ("unterminated string"): such a query scans.
    let indexable = text.chars().count() >= 3 && !text.contains('\0');
    let candidates = if unsegmented && !req.literal && indexable {
        trigram_candidates(conn, db.fts(), &views, &kinds, text)?
    } else if literal {
        literal_candidates(conn, &views, &kinds, text)?
    } else {
        let shown = cfg.search.message_limit.saturating_mul(cfg.search.max_hits_per_message);
        let ranked = shown.saturating_mul(RANKED_PER_HIT).clamp(MIN_RANKED, MAX_RANKED);
        ranked_candidates(conn, db.fts(), &views, &kinds, text, ranked)?
    };
    let needles: Vec<String> = if literal { vec![text.to_lowercase()] } else { needles_of(&query::parse(text)) };
    group_hits(conn, candidates, &needles, cfg)
}

fn parse_kinds(raw: Option<&str>) -> Result<Vec<&'static str>> {
    let raw = raw.filter(|r| !r.trim().is_empty()).unwrap_or("text|tool");
    let mut kinds = Vec::new();
    for name in raw.split(['|', ',']).map(str::trim).filter(|n| !n.is_empty()) {
        let kind = ["text", "tool", "reasoning"].into_iter().find(|k| *k == name).ok_or_else(|| {
            CairnError::invalid(format!("unknown type {name:?}"))
                .with_hint("type is a |-separated subset of text|tool|reasoning")
        })?;
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    // only separators ("| |"): the default, not an empty filter
    if kinds.is_empty() {
        kinds = vec!["text", "tool"];
    }
    Ok(kinds)
}

/// The sessions searched: the one asked for, else the project's (all, without a project),
/// newest first.
fn search_scope(conn: &Connection, req: &SearchRequest) -> Result<Vec<View>> {
    if let Some(session_id) = req.session_id.as_deref().filter(|s| !s.is_empty()) {
        return Ok(vec![view(conn, session_id, req.caller_session_id.as_deref())?]);
    }
    let (sql, values): (&str, Vec<String>) = match req.project.as_deref().filter(|p| !p.is_empty()) {
        Some(project) => (
            "SELECT id FROM history_sessions WHERE project = ?1 ORDER BY updated_at DESC LIMIT 5000",
            vec![project.to_owned()],
        ),
        None => ("SELECT id FROM history_sessions ORDER BY updated_at DESC LIMIT 5000", Vec::new()),
    };
    let ids: Vec<String> = {
        let mut stmt = conn.prepare_cached(sql)?;
        stmt.query_map(params_from_iter(values), |r| r.get(0))?.collect::<rusqlite::Result<_>>()?
    };
    let caller = req.caller_session_id.as_deref();
    ids.into_iter()
        .map(|id| {
            let boundary = if caller == Some(id.as_str()) { latest_compaction(conn, &id)? } else { None };
            Ok(View { session_id: id, boundary })
        })
        .collect()
}

/// FTS5 BM25 over the parts, filtered inside the index by session (for one session); the type
/// is checked on the ranked rows, not in the index.
///
/// Two costs of FTS5's ranking are kept bounded:
/// - BM25 counts, at each query, the rows holding each phrase: a word in most rows costs a walk
///   over most of the index. Such a word adds little or nothing to BM25 (FTS5 floors the IDF of
///   a word in half the rows or more at 1e-6), so a word found in half of the newest
///   [`SAMPLE_WINDOW`] parts, or estimated in more than [`COMMON_ROWS`] parts, is left out of the
///   ranking ([`split_common`]). Rows that match only such words come after the ranked ones,
///   newest first (a query of common words only: its newest matches).
/// - FTS5 ranks every row that matches before it sorts, about a microsecond each: the ranking
///   starts with the newest parts (a rowid range, which FTS5 applies in the index), the newest
///   [`FIRST_WINDOW`] parts of the scope, then 8× as many, until enough candidates are found or
///   the whole scope was ranked. A query of rare words ranks every match (few rows, cheap).
fn ranked_candidates(
    conn: &Connection,
    fts: &Connection,
    views: &[View],
    kinds: &[&str],
    text: &str,
    ranked: usize,
) -> Result<Vec<Candidate>> {
    let terms = query::parse(text);
    // Only symbols or stop characters: nothing to rank by, so nothing found (the memory
    // search answers the same); `literal` finds punctuation.
    let Some(all_words) = query::to_fts(&terms) else {
        return Ok(Vec::new());
    };
    let session_filter = match views {
        [one] => format!(" AND {{session}} : \"{}\"", one.session_id.replace('"', "")),
        _ => String::new(),
    };
    // Two statements: each is one step down the table's b-tree, where both in one scan it.
    let all: (Option<i64>, Option<i64>) = (
        conn.prepare_cached("SELECT min(rowid) FROM history_parts")?.query_row([], |r| r.get(0))?,
        conn.prepare_cached("SELECT max(rowid) FROM history_parts")?.query_row([], |r| r.get(0))?,
    );
    let (Some(first), Some(last)) = all else { return Ok(Vec::new()) };
    let (oldest, newest) = match views {
        [one] => {
            let span: (Option<i64>, Option<i64>) = conn
                .prepare_cached("SELECT min(rowid), max(rowid) FROM history_parts WHERE session_id = ?1")?
                .query_row([&one.session_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let (Some(oldest), Some(newest)) = span else { return Ok(Vec::new()) };
            (oldest, newest)
        }
        _ => (first, last),
    };
    let mut found = Found {
        conn,
        views: views.iter().map(|v| (v.session_id.as_str(), v)).collect(),
        kinds,
        seen: HashSet::new(),
        candidates: Vec::new(),
    };
    let (rare, common) = split_common(fts, terms, first, last)?;
    if let Some(words) = query::to_fts(&rare) {
        let expression = format!("{{body}} : ({words}){session_filter}");
        let mut window = FIRST_WINDOW;
        loop {
            let from = newest.saturating_sub(window);
            let mut stmt = fts.prepare_cached(
                "SELECT rowid, rank FROM history_fts WHERE history_fts MATCH ?1 AND rowid > ?2 ORDER BY rank LIMIT ?3",
            )?;
            let hits: Vec<(i64, f64)> = stmt
                .query_map(params![expression, from, ranked as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            // A row ranks the same in every window (BM25's statistics are the whole index's):
            // the rows of a smaller window are kept, not hydrated again.
            found.add(&hits)?;
            // Enough left after the type, scope and visibility (half the ranked), or nothing
            // more to rank.
            if from < oldest || found.candidates.len() >= ranked / 2 {
                break;
            }
            // Few matches so far (rare words): rank the whole scope at once when it should
            // hold no more than a few thousand.
            let expected = (hits.len() as i64).max(1).saturating_mul((newest - oldest) / window.max(1) + 1);
            window = if expected <= FULL_RANK_ROWS { i64::MAX } else { window.saturating_mul(8) };
        }
    }
    if !common.is_empty() && found.candidates.len() < ranked / 2 {
        let expression = format!("{{body}} : ({all_words}){session_filter}");
        let mut stmt = fts.prepare_cached(
            "SELECT rowid, 0.0 FROM history_fts WHERE history_fts MATCH ?1 ORDER BY rowid DESC LIMIT ?2",
        )?;
        let hits: Vec<(i64, f64)> = stmt
            .query_map(params![expression, ranked as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        found.add(&hits)?;
    }
    let mut candidates = found.candidates;
    // Best first (FTS5's rank is negative; the unranked have 0); ties broken by time, newest first.
    candidates.sort_by(|a, b| a.rank.total_cmp(&b.rank).then_with(|| b.message.created_at.cmp(&a.message.created_at)));
    Ok(candidates)
}

/// Matches FTS5 ranks in one go (about a microsecond each) when widening the window.
const FULL_RANK_ROWS: i64 = 5_000;
/// A word estimated in more rows than this is not ranked by BM25 (counting its rows at every
/// query would cost about 0.1 µs each).
const COMMON_ROWS: i64 = 50_000;
/// Parts (by rowid, newest first) in which [`split_common`] counts a word.
const SAMPLE_WINDOW: i64 = 2_000;

/// The query's terms that rank (`.0`), and the common ones (`.1`): in half the newest parts or
/// more (BM25 gives them no weight), or estimated in more than [`COMMON_ROWS`] parts (the
/// costly ones to count). Nothing is left out of a small archive. `first` and `last` are the archive's lowest and highest part rowids (the
/// sample counts rowids, not rows: parts of a forgotten session only make a word look rarer).
fn split_common(conn: &Connection, terms: Vec<Term>, first: i64, last: i64) -> Result<(Vec<Term>, Vec<Term>)> {
    if last - first < SAMPLE_WINDOW {
        return Ok((terms, Vec::new()));
    }
    let (from, sampled) = (last - SAMPLE_WINDOW, SAMPLE_WINDOW);
    let mut split = (Vec::new(), Vec::new());
    for term in terms {
        let Some(words) = query::to_fts(std::slice::from_ref(&term)) else { continue };
        let matched: i64 = conn
            .prepare_cached("SELECT count(*) FROM history_fts WHERE history_fts MATCH ?1 AND rowid > ?2")?
            .query_row(params![format!("{{body}} : ({words})"), from], |r| r.get(0))?;
        // In half the rows (BM25 weighs it 0), or in more rows than one query should walk.
        let rows = last - first + 1;
        let estimated = matched.saturating_mul(rows) / sampled;
        if estimated >= (rows / 2).min(COMMON_ROWS) { split.1.push(term) } else { split.0.push(term) }
    }
    Ok(split)
}

/// The candidates of one search as they are found: hydrated, checked against the type, the
/// scope and the visibility, each part once.
struct Found<'a> {
    conn: &'a Connection,
    views: HashMap<&'a str, &'a View>,
    kinds: &'a [&'a str],
    seen: HashSet<i64>,
    candidates: Vec<Candidate>,
}

impl Found<'_> {
    fn add(&mut self, hits: &[(i64, f64)]) -> Result<()> {
        for &(rowid, rank) in hits {
            if !self.seen.insert(rowid) {
                continue;
            }
            let Some((session_id, message, part)) = hydrate(self.conn, rowid)? else { continue };
            let Some(view) = self.views.get(session_id.as_str()) else { continue };
            let kind_ok = indexed_kind(part.kind).is_some_and(|k| self.kinds.contains(&k));
            if kind_ok && view.shows(&message) {
                self.candidates.push(Candidate { session_id, message, part, rank });
            }
        }
        Ok(())
    }
}

/// The message and the kind of a matching part (not its text).
fn hydrate(conn: &Connection, rowid: i64) -> Result<Option<(String, MessageRow, HitPart)>> {
    Ok(conn
        .prepare_cached(
            "SELECT p.session_id, m.id, m.role, m.seq, coalesce(m.turn_number, 0), m.summary, m.compaction,
                 m.synthetic, m.created_at, p.id, p.kind, p.tool
             FROM history_parts p JOIN history_messages m ON m.session_id = p.session_id AND m.id = p.message_id
             WHERE p.rowid = ?1",
        )?
        .query_row([rowid], |r| {
            let message = MessageRow {
                id: r.get(1)?,
                role: r.get(2)?,
                seq: r.get(3)?,
                turn: r.get(4)?,
                summary: r.get(5)?,
                compaction: r.get(6)?,
                synthetic: r.get(7)?,
                created_at: r.get(8)?,
            };
            let part = HitPart { rowid, id: r.get(9)?, kind: parse_kind(&r.get::<_, String>(10)?), tool: r.get(11)? };
            Ok((r.get(0)?, message, part))
        })
        .optional()?)
}

/// Parts looked at per trigram lookup, newest first, until [`LITERAL_CANDIDATES`] are found.
const TRIGRAM_PAGE: i64 = 2_000;
/// Candidates a substring search gathers (as the scan does).
const LITERAL_CANDIDATES: usize = 300;

/// A substring in Chinese or Japanese (3 characters or more), through the trigram index: only
/// the parts that hold such characters are in it (what the word index holds of each, see
/// [`super::store::indexed_body`]; `literal` scans whole parts). Newest parts first; for one
/// session, within its rowids.
fn trigram_candidates(
    conn: &Connection,
    fts: &Connection,
    views: &[View],
    kinds: &[&str],
    text: &str,
) -> Result<Vec<Candidate>> {
    let by_session: HashMap<&str, (usize, &View)> =
        views.iter().enumerate().map(|(i, v)| (v.session_id.as_str(), (i, v))).collect();
    let (oldest, mut below) = match views {
        [one] => {
            let span: (Option<i64>, Option<i64>) = conn
                .prepare_cached("SELECT min(rowid), max(rowid) FROM history_parts WHERE session_id = ?1")?
                .query_row([&one.session_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let (Some(oldest), Some(newest)) = span else { return Ok(Vec::new()) };
            (oldest, newest.saturating_add(1))
        }
        _ => (i64::MIN, i64::MAX),
    };
    // the whole query as one phrase: with trigrams, a substring match
    let phrase = format!("\"{}\"", text.replace('"', "\"\""));
    let mut lookup = fts.prepare_cached(
        "SELECT rowid FROM history_cjk WHERE history_cjk MATCH ?1 AND rowid >= ?2 AND rowid < ?3
         ORDER BY rowid DESC LIMIT ?4",
    )?;
    let mut candidates = Vec::new();
    loop {
        let rowids: Vec<i64> = lookup
            .query_map(params![phrase, oldest, below, TRIGRAM_PAGE], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for &rowid in &rowids {
            let Some((session_id, message, part)) = hydrate(conn, rowid)? else { continue };
            let Some(&(order, view)) = by_session.get(session_id.as_str()) else { continue };
            let kind_ok = indexed_kind(part.kind).is_some_and(|k| kinds.contains(&k));
            if kind_ok && view.shows(&message) {
                candidates.push((order, Candidate { session_id, message, part, rank: 0.0 }));
            }
        }
        match rowids.last() {
            Some(&last) if rowids.len() as i64 == TRIGRAM_PAGE && candidates.len() < LITERAL_CANDIDATES => {
                below = last;
            }
            _ => break,
        }
    }
    // The scan's order: sessions as the scope lists them, newest messages first, parts in order.
    candidates.sort_by(|(a_order, a), (b_order, b)| {
        a_order
            .cmp(b_order)
            .then_with(|| (b.message.seq, &b.message.id).cmp(&(a.message.seq, &a.message.id)))
            .then_with(|| a.part.rowid.cmp(&b.part.rowid))
    });
    Ok(candidates.into_iter().take(LITERAL_CANDIDATES).map(|(_, c)| c).collect())
}

/// Case-insensitive substring over the scope's parts, newest sessions and messages first.
fn literal_candidates(conn: &Connection, views: &[View], kinds: &[&str], text: &str) -> Result<Vec<Candidate>> {
    let needle = text.to_lowercase();
    let mut candidates = Vec::new();
    for view in views {
        let mut stmt = conn.prepare_cached(
            "SELECT p.rowid FROM history_parts p JOIN history_messages m
                 ON m.session_id = p.session_id AND m.id = p.message_id
             WHERE p.session_id = ?1 AND p.kind IN ('text', 'subtask', 'reasoning', 'tool') AND p.injected = 0
               AND instr(lower(coalesce(p.text, '') || char(10) || coalesce(p.tool, '') || char(10)
                   || coalesce(p.input, '') || char(10) || coalesce(p.output, '')), ?2) > 0
             ORDER BY m.seq DESC, m.id DESC, p.idx LIMIT 300",
        )?;
        let rowids: Vec<i64> =
            stmt.query_map(params![view.session_id, needle], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?;
        for rowid in rowids {
            let Some((session_id, message, part)) = hydrate(conn, rowid)? else { continue };
            let kind_ok = indexed_kind(part.kind).is_some_and(|k| kinds.contains(&k));
            if kind_ok && view.shows(&message) {
                candidates.push(Candidate { session_id, message, part, rank: 0.0 });
            }
        }
        if candidates.len() >= 300 {
            break;
        }
    }
    Ok(candidates)
}

/// The words of the query, lowercased, to place snippets.
fn needles_of(terms: &[Term]) -> Vec<String> {
    terms
        .iter()
        .map(|t| match t {
            Term::Word(w) | Term::Prefix(w) | Term::Phrase(w) => w.to_lowercase(),
        })
        .collect()
}

fn group_hits(
    conn: &Connection,
    candidates: Vec<Candidate>,
    needles: &[String],
    cfg: &HistorySettings,
) -> Result<SearchResults> {
    let limits = &cfg.search;
    let mut messages: Vec<SearchMessage> = Vec::new();
    let mut seen_parts: HashSet<(String, String)> = HashSet::new();
    for c in candidates {
        if c.part.kind == PartKind::Tool && !tool_searchable(c.part.tool.as_deref(), cfg) {
            continue;
        }
        if !seen_parts.insert((c.session_id.clone(), c.part.id.clone())) {
            continue;
        }
        let index = messages.iter().position(|m| m.session_id == c.session_id && m.message_id == c.message.id);
        let index = match index {
            Some(i) => i,
            None if messages.len() < limits.message_limit => {
                messages.push(SearchMessage {
                    session_id: c.session_id.clone(),
                    role: c.message.role.clone(),
                    turn_number: c.message.turn,
                    message_id: c.message.id.clone(),
                    hits: Vec::new(),
                    remain_hits: None,
                });
                messages.len() - 1
            }
            None => continue,
        };
        let message = &mut messages[index];
        if message.hits.len() < limits.max_hits_per_message {
            message.hits.push(hit_of(conn, &c.part, needles, cfg)?);
        } else {
            *message.remain_hits.get_or_insert(0) += 1;
        }
    }
    Ok(SearchResults { messages })
}

/// Tool I/O is searchable only where it would be shown.
fn tool_searchable(tool: Option<&str>, cfg: &HistorySettings) -> bool {
    let name = tool.unwrap_or("");
    tool_shown(name, DEFAULT_INPUT_TOOLS, &cfg.show_tool_input)
        || tool_shown(name, DEFAULT_OUTPUT_TOOLS, &cfg.show_tool_output)
}

fn hit_of(conn: &Connection, part: &HitPart, needles: &[String], cfg: &HistorySettings) -> Result<SearchHitPart> {
    let (text, input, output): (Option<String>, Option<String>, Option<String>) = conn
        .prepare_cached("SELECT text, input, output FROM history_parts WHERE rowid = ?1")?
        .query_row([part.rowid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    let body = match part.kind {
        PartKind::Tool => [part.tool.as_deref(), input.as_deref(), output.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("\n"),
        _ => text.unwrap_or_default(),
    };
    Ok(SearchHitPart {
        kind: indexed_kind(part.kind).unwrap_or("text").to_owned(),
        tool_name: part.tool.clone(),
        part_id: part.id.clone(),
        snippets: snippets(&body, needles, cfg.search.snippet_length, cfg.search.max_snippets_per_hit),
    })
}

/// Windows of `length` characters around the first matches of the needles (ASCII
/// case-insensitive); the text's start when none is found (a stemmed match).
fn snippets(text: &str, needles: &[String], length: usize, max: usize) -> Vec<String> {
    let lower = text.to_ascii_lowercase();
    let mut starts: Vec<usize> = needles
        .iter()
        .filter(|n| !n.is_empty())
        .flat_map(|n| lower.match_indices(n.as_str()).map(|(i, _)| i).take(max))
        .collect();
    starts.sort_unstable();
    let mut windows: Vec<String> = Vec::new();
    let mut covered_until = 0;
    for start in starts {
        if windows.len() >= max {
            break;
        }
        if start < covered_until && !windows.is_empty() {
            continue;
        }
        let (window, end) = window_around(text, start, length);
        covered_until = end;
        windows.push(window);
    }
    if windows.is_empty() && !text.trim().is_empty() {
        windows.push(window_around(text, 0, length).0);
    }
    windows
}

/// About `length` characters of `text` around byte `at` (a third before it), with `…` where
/// cut; and the byte where the window ends.
fn window_around(text: &str, at: usize, length: usize) -> (String, usize) {
    let before_chars = length / 3;
    let start = text[..at].char_indices().rev().nth(before_chars.saturating_sub(1)).map_or(0, |(i, _)| i);
    let start = if at == 0 { 0 } else { start };
    let end = text[start..].char_indices().nth(length).map_or(text.len(), |(i, _)| start + i);
    let flat = text[start..end].split_whitespace().collect::<Vec<_>>().join(" ");
    let lead = if start > 0 { "…" } else { "" };
    let tail = if end < text.len() { "…" } else { "" };
    (format!("{lead}{flat}{tail}"), end)
}

// ---------------------------------------------------------------- the chart

/// The navigation chart left at a compaction, built as the session sees itself: the turns
/// before its latest compaction (all of it when it has none yet).
pub fn chart(db: &HistoryDb, session_id: &str, cfg: &HistorySettings) -> Result<Chart> {
    let charting = &cfg.context_charting;
    let turns = browse_turns(
        db,
        &TurnsRequest {
            session_id: session_id.to_owned(),
            turn_number: None,
            num_before: charting.recent_turns,
            num_after: 0,
            caller_session_id: Some(session_id.to_owned()),
        },
        cfg,
    )?;
    let mut chart = format!(
        "I lost context from my prior conversation. What remains is a lossy index of session {session_id}: \
         previews of what was said, not the conversation itself.\n\n"
    );
    let Some(latest) = turns.turns.last() else {
        chart.push_str(
            "The session has no turns recorded before this compaction yet. I use history_search and \
             history_browse_messages on this session if I need anything from before.\n",
        );
        return Ok(Chart { session_id: session_id.to_owned(), chart });
    };
    let first = turns.turns.first().map_or(1, |t| t.turn_number);
    chart.push_str(&format!(
        "To see where I was, I called history_browse_turns with num_before={} and num_after=0:\n\n```json\n{}\n```\n\n",
        charting.recent_turns,
        serde_json::to_string_pretty(&turns)?
    ));
    if first > 1 {
        chart.push_str(&format!(
            "Turns 1 to {} are not shown: I page back with history_browse_turns (turn_number={}, num_before={}).\n",
            first - 1,
            first - 1,
            charting.recent_turns
        ));
    }
    chart.push_str(
        "Each turn is one user message and the work after it; history_browse_messages with a turn's user \
         message_id shows its messages.\n\n",
    );
    let messages = browse_messages(
        db,
        &MessagesRequest {
            session_id: session_id.to_owned(),
            message_id: None,
            num_before: charting.recent_messages,
            num_after: 0,
            caller_session_id: Some(session_id.to_owned()),
        },
        cfg,
    )?;
    // the chart is what was said: a message of only cairn's own text is not in it
    let mut messages = messages;
    messages.messages.retain(|m| !m.injected);
    chart.push_str(&format!(
        "I called history_browse_messages on the latest turn ({}) with num_before={} and num_after=0:\n\n```json\n{}\n```\n\n",
        latest.turn_number,
        charting.recent_messages,
        serde_json::to_string_pretty(&messages)?
    ));
    chart.push_str(
        "To go on, I page with before_message_id / after_message_id (history_browse_messages), read a message \
         in full with history_pull_message and a long part with history_pull_part, and find anything else \
         with history_search. Previews omit qualifiers and details: before I act on something critical (a \
         path, a command, a constraint the user set), I pull the message and verify it.\n",
    );
    Ok(Chart { session_id: session_id.to_owned(), chart })
}

// ---------------------------------------------------------------- compactions

/// A session's compactions, oldest first; with `read`, that one's full summary.
pub fn compactions(db: &HistoryDb, req: &CompactionsRequest) -> Result<Compactions> {
    let conn = db.conn();
    let view = view(conn, &req.session_id, None)?;
    let rows: Vec<MessageRow> = {
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {MESSAGE_COLUMNS} FROM history_messages
             WHERE session_id = ?1 AND (compaction = 1 OR summary = 1) ORDER BY seq, id"
        ))?;
        stmt.query_map([&view.session_id], message_row)?.collect::<rusqlite::Result<_>>()?
    };
    // Pair each trigger with the summary after it (either may be missing).
    let mut pairs: Vec<(Option<MessageRow>, Option<MessageRow>)> = Vec::new();
    for row in rows {
        match pairs.last_mut() {
            Some((_, summary @ None)) if row.summary => *summary = Some(row),
            _ if row.summary => pairs.push((None, Some(row))),
            _ => pairs.push((Some(row), None)),
        }
    }
    let mut entries = Vec::new();
    let mut summary_text = None;
    for (i, (trigger, summary)) in pairs.iter().enumerate() {
        let text = match summary {
            Some(s) => text_of(&parts_of(conn, &view.session_id, &s.id)?).unwrap_or_default(),
            None => String::new(),
        };
        if req.read == Some(i + 1) {
            summary_text = Some(text.clone());
        }
        let time = trigger.as_ref().or(summary.as_ref()).map(|m| m.created_at.clone()).unwrap_or_default();
        entries.push(CompactionEntry {
            index: (i + 1) as u64,
            time,
            trigger_message_id: trigger.as_ref().map(|m| m.id.clone()),
            summary_message_id: summary.as_ref().map(|m| m.id.clone()),
            preview: cairn_base::text::preview(&text, 60),
        });
    }
    if let Some(read) = req.read
        && summary_text.is_none()
    {
        return Err(CairnError::invalid(format!("the session has no compaction {read}"))
            .with_hint(format!("read is 1..={}", entries.len())));
    }
    Ok(Compactions { session_id: view.session_id, compactions: entries, summary: summary_text })
}

// ---------------------------------------------------------------- stats, forget

/// Per host: what the archive holds, what the readers skipped, which sources fail.
pub fn stats(db: &HistoryDb) -> Result<HistoryStats> {
    let conn = db.conn();
    // Every host always, so an empty archive says so per host.
    let mut hosts: BTreeMap<String, HostHistoryStats> =
        HistoryHost::ALL.into_iter().map(|h| (h.as_str().to_owned(), empty_host_stats(h.as_str()))).collect();
    type SessionRow = (String, i64, Option<String>, Option<String>);
    let sessions: Vec<SessionRow> = collect(
        conn,
        "SELECT host, count(*), min(created_at), max(updated_at) FROM history_sessions GROUP BY host",
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    for (name, count, oldest, newest) in sessions {
        let h = host_entry(&mut hosts, name);
        (h.sessions, h.oldest, h.newest) = (count as u64, oldest, newest);
    }
    let messages: Vec<(String, i64)> = collect(
        conn,
        "SELECT s.host, count(*) FROM history_messages m JOIN history_sessions s ON s.id = m.session_id GROUP BY s.host",
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    for (name, count) in messages {
        host_entry(&mut hosts, name).messages = count as u64;
    }
    let parts: Vec<(String, i64, i64)> = collect(
        conn,
        "SELECT s.host, count(*), coalesce(sum(length(p.text)), 0) + coalesce(sum(length(p.input)), 0)
             + coalesce(sum(length(p.output)), 0)
         FROM history_parts p JOIN history_sessions s ON s.id = p.session_id GROUP BY s.host",
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    for (name, count, bytes) in parts {
        let h = host_entry(&mut hosts, name);
        (h.parts, h.bytes) = (count as u64, bytes as u64);
    }
    let skips: Vec<(String, String, i64)> =
        collect(conn, "SELECT host, reason, sum(count) FROM history_skips GROUP BY host, reason", |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    for (name, reason, count) in skips {
        host_entry(&mut hosts, name).skipped.insert(reason, count as u64);
    }
    let errors: Vec<(String, i64)> = collect(
        conn,
        "SELECT host, count(*) FROM history_sources WHERE last_error_code IS NOT NULL GROUP BY host",
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    for (name, count) in errors {
        host_entry(&mut hosts, name).errors = count as u64;
    }
    // The hosts in their order (`HistoryHost::ALL`), then anything else by name.
    let mut hosts: Vec<HostHistoryStats> = hosts.into_values().collect();
    hosts.sort_by_key(|h| {
        (HistoryHost::parse(&h.host).map_or(HistoryHost::ALL.len() as u8, |h| h as u8), h.host.clone())
    });
    Ok(HistoryStats { hosts })
}

fn host_entry(hosts: &mut BTreeMap<String, HostHistoryStats>, name: String) -> &mut HostHistoryStats {
    hosts.entry(name.clone()).or_insert_with(|| empty_host_stats(&name))
}

fn empty_host_stats(host: &str) -> HostHistoryStats {
    HostHistoryStats {
        host: host.to_owned(),
        sessions: 0,
        messages: 0,
        parts: 0,
        bytes: 0,
        oldest: None,
        newest: None,
        skipped: BTreeMap::new(),
        errors: 0,
    }
}

fn collect<T>(
    conn: &Connection,
    sql: &str,
    map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    Ok(stmt.query_map([], map)?.collect::<rusqlite::Result<_>>()?)
}

/// Erase one session from the archive (not its children).
pub fn forget(db: &mut HistoryDb, session_id: &str) -> Result<Forgotten> {
    check_id("session_id", session_id)?;
    let removed = db.forget_session(session_id)?;
    if removed == 0 {
        return Err(session_not_found(session_id));
    }
    Ok(Forgotten { session_id: session_id.to_owned(), status: "forgotten".to_owned(), removed })
}

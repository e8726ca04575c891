//! The requests, one shape per request for every door.

use cairn_base::lenient;
use serde::{Deserialize, Serialize};

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

pub(super) fn ten() -> usize {
    10
}
pub(super) fn twenty_thousand() -> usize {
    20_000
}

//! The request of every operation that has no request type of its own elsewhere: what were
//! struct variants of [`Op`](super::Op) are named here, so each operation has one type that names its
//! answer ([`Request`](super::Request)). They serialise exactly as the variants did (`{"op": .., "args": ..}`).
//!
//! The ops without arguments (`stats`, `doctor`...) stay unit variants of [`Op`](super::Op) (their JSON has
//! no `args`); their request types here are unit structs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::history::query::SessionRef;
use crate::memory::ObservationPatch;

fn yes() -> bool {
    true
}
fn five() -> usize {
    5
}
fn twenty() -> usize {
    20
}
fn thirty() -> usize {
    30
}

/// `get`: one memory, optionally with its revisions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetRequest {
    pub id: i64,
    #[serde(default)]
    pub revisions: bool,
}

/// `update`: the fields of a memory to change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateRequest {
    pub id: i64,
    #[serde(flatten)]
    pub patch: ObservationPatch,
}

/// `delete`: soft by default, for good with `hard`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteRequest {
    pub id: i64,
    #[serde(default)]
    pub hard: bool,
}

/// `restore`: bring back a soft-deleted memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreRequest {
    pub id: i64,
}

/// `pin`: pin (the default) or unpin a memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PinRequest {
    pub id: i64,
    #[serde(default = "yes")]
    pub pinned: bool,
}

/// `timeline`: the memories saved around one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineRequest {
    pub id: i64,
    #[serde(default = "five")]
    pub before: usize,
    #[serde(default = "five")]
    pub after: usize,
}

/// `sessions`: recent sessions of the memory store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentSessionsRequest {
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default = "five")]
    pub limit: usize,
    /// Sub-agent sessions (with a parent) too.
    #[serde(default)]
    pub include_children: bool,
}

/// `session_summary`: the end-of-session summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSummaryRequest {
    pub content: String,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub project: Option<String>,
}

/// `end_session`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndSessionRequest {
    pub id: String,
    #[serde(default)]
    pub summary: Option<String>,
    /// Keep the activity (first prompt, last injection, counts): a host whose sessions go on
    /// after they stop (OpenCode ends one at each idle) must not see the next prompt as a
    /// session's first.
    #[serde(default)]
    pub keep_activity: bool,
}

/// `get_session`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetSessionRequest {
    pub id: String,
}

/// `delete_session`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteSessionRequest {
    pub id: String,
}

/// `recent_prompts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentPromptsRequest {
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default = "twenty")]
    pub limit: usize,
}

/// `search_prompts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchPromptsRequest {
    #[serde(alias = "q")]
    pub query: String,
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub limit: usize,
}

/// `delete_prompt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletePromptRequest {
    pub id: i64,
}

/// `memories_per_day`: live memories created per day over the last `days` days (default 30).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoriesPerDayRequest {
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default = "thirty")]
    pub days: usize,
}

/// `export`: everything, or one project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportMemoriesRequest {
    #[serde(default)]
    pub project: Option<String>,
}

/// `import`: an export to load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportRequest {
    pub data: Value,
}

/// `suggest_topic_key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuggestTopicKeyRequest {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub title: String,
    #[serde(default)]
    pub content: String,
}

/// `relation_stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelationStatsRequest {
    #[serde(default)]
    pub project: Option<String>,
}

/// `get_relation`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetRelationRequest {
    pub id: i64,
}

/// `migrate_project`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrateProjectRequest {
    pub old_project: String,
    pub new_project: String,
}

/// `merge_projects`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeProjectsRequest {
    pub from: Vec<String>,
    pub to: String,
}

/// `privacy_rewrite` (`crate::privacy`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrivacyRewriteRequest {
    #[serde(default)]
    pub dry_run: bool,
}

/// `session_activity` (`crate::agent::activity`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionActivityRequest {
    pub session_id: String,
}

/// `reindex`: `force` drops the stored vectors first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReindexRequest {
    #[serde(default)]
    pub force: bool,
}

/// `import_engram`: an engram database file (read only; engram may be running).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportEngramRequest {
    pub path: std::path::PathBuf,
}

/// `profile`: personal memories and the project's preferences.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileRequest {
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default = "five")]
    pub limit: usize,
}

/// `sync_import`: apply the chunks of `directory` not applied yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncImportRequest {
    pub directory: std::path::PathBuf,
    /// Stop between chunks after this long (the rest waits for the next run).
    #[serde(default)]
    pub time_limit_ms: Option<u64>,
}

/// `sync_status`: enrolled projects, targets and pending counts, `directory`'s chunk folders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncStatusRequest {
    #[serde(default)]
    pub directory: Option<std::path::PathBuf>,
}

/// The history ops that name only a session share [`SessionRef`]'s JSON; each has its own
/// type so that its answer is known from the type.
macro_rules! session_requests {
    ($($name:ident: $op:literal,)*) => {$(
        #[doc = concat!("`", $op, "`: one session's.")]
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub SessionRef);

        impl $name {
            pub fn new(session_id: impl Into<String>) -> Self {
                Self(SessionRef { session_id: session_id.into() })
            }
        }
    )*};
}

session_requests! {
    HistoryChartRequest: "history_chart",
    HistoryChildrenRequest: "history_children",
    HistoryForgetRequest: "history_forget",
    ContextUsageTurnsRequest: "context_usage_turns",
}

/// The ops without arguments: unit structs, each the request of one unit variant of [`Op`](super::Op)
/// (the catalogue's `Kind[Request]` rows).
macro_rules! unit_requests {
    ($($name:ident => $variant:ident,)*) => {$(
        #[doc = concat!("`", stringify!($variant), "`, which takes no arguments.")]
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct $name;
    )*};
}

unit_requests! {
    StatsRequest => Stats,
    DoctorRequest => Doctor,
    RepairIndexesRequest => RepairIndexes,
    PluginConfigRequest => PluginConfig,
    HistoryStatsRequest => HistoryStats,
    ExtractionStatusRequest => ExtractionStatus,
}

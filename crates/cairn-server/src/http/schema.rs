//! The HTTP-only shapes of the OpenAPI document: what the routes add around the core's answers
//! (a `status` field, engram's aliases, the relation notes of a hit, fixed zero counters), the
//! request bodies read as loose JSON (an import file, an activity event with its `project`),
//! enums the core keeps as strings (`Sort`, `Verdict`), and the daemon's own answers (health,
//! sync, the op envelope). Everything else is the core's own result type, whose schema is
//! derived behind cairn-core's `openapi` feature, so the document cannot drift from what is
//! served. The integration tests check real responses against these schemas, key by key.

// Never constructed: they exist for their derived schemas.
#![allow(dead_code)]

use cairn_core::model::{Observation, Prompt, Relation, Revision, Session};
use cairn_core::ops::SaveResponse;
use cairn_core::views::ProjectStats;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// The only sort order of a listing.
#[derive(Serialize, ToSchema)]
pub enum Sort {
    #[serde(rename = "created_at:desc")]
    CreatedAtDesc,
}

/// A verdict between two memories.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Related,
    Compatible,
    Scoped,
    ConflictsWith,
    Supersedes,
    NotConflict,
}

/// A memory, with its earlier versions when asked (`?revisions=true`).
#[derive(Serialize, ToSchema)]
pub struct ObservationDetail {
    #[serde(flatten)]
    pub observation: Observation,
    pub revisions: Option<Vec<Revision>>,
    /// Where a memory a model wrote came from (session, messages, provider, model); absent for
    /// a memory an agent or a person saved.
    pub provenance: Option<cairn_core::extract::Provenance>,
}

/// A search result: the memory plus its ranking.
#[derive(Serialize, ToSchema)]
pub struct SearchHit {
    #[serde(flatten)]
    pub hit: cairn_core::search::SearchHit,
    /// Relation notes (supersedes, conflicts, pending review).
    pub annotations: Vec<String>,
}

/// The answer to `POST /observations`.
#[derive(Serialize, ToSchema)]
pub struct SaveResult {
    #[serde(flatten)]
    pub saved: SaveResponse,
    /// Always `saved`.
    pub status: String,
}

#[derive(Serialize, ToSchema)]
pub struct ObservationDeleted {
    pub id: i64,
    /// Always `deleted`.
    pub status: String,
    pub hard_delete: bool,
}

/// A session after a write, with what happened (`created`, `completed`).
#[derive(Serialize, ToSchema)]
pub struct SessionWithStatus {
    #[serde(flatten)]
    pub session: Session,
    pub status: String,
}

/// The answer to ending a session. For a session cairn never heard of, only `id` and `status`
/// (as engram answers: a host ending a session it failed to register must not see an error).
#[derive(Serialize, ToSchema)]
pub struct EndedSession {
    pub id: String,
    /// Always `completed`.
    pub status: String,
    pub project: Option<String>,
    pub directory: Option<String>,
    pub agent: Option<String>,
    pub parent_id: Option<String>,
    pub started_at: Option<String>,
    pub ended_at: Option<String>,
    pub summary: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct SessionDeleted {
    pub id: String,
    /// Always `deleted`.
    pub status: String,
}

#[derive(Serialize, ToSchema)]
pub struct PromptSaved {
    #[serde(flatten)]
    pub prompt: Prompt,
    /// Always `saved`.
    pub status: String,
}

#[derive(Serialize, ToSchema)]
pub struct PromptDeleted {
    pub id: i64,
    /// Always `deleted`.
    pub status: String,
}

#[derive(Serialize, ToSchema)]
pub struct ProjectList {
    /// Most recently active first.
    pub projects: Vec<ProjectStats>,
    pub count: u64,
}

/// One event of a session. `project` opens an unknown session with that project (as a save
/// would); without it an unknown session is `session_not_found`.
#[derive(ToSchema)]
#[allow(dead_code)] // documentation only: the route reads core's own type
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ActivityBody {
    /// The agent called a tool; with `remind`, the answer carries the save reminder when due.
    ToolCall { project: Option<String>, remind: Option<bool> },
    /// A memory was saved (into `saved_session_id`, default this session); the pending prompt
    /// is attached there unless `attach_prompt` is false.
    Save {
        project: Option<String>,
        #[schema(max_length = 256)]
        saved_session_id: Option<String>,
        attach_prompt: Option<bool>,
    },
    /// The user typed a prompt (redacted before it is kept), already stored in `stored_in`.
    Prompt {
        project: Option<String>,
        #[schema(pattern = r"\S")]
        content: String,
        #[schema(max_length = 256)]
        stored_in: Option<String>,
    },
    /// A context block was injected; `fingerprint` is a hash of it.
    ContextInjected {
        project: Option<String>,
        #[schema(pattern = r"\S", max_length = 128)]
        fingerprint: String,
    },
    /// The caller showed a save reminder itself.
    ReminderSent { project: Option<String> },
}

/// An import file: cairn's export or engram's. Records need only the fields marked required;
/// unknown fields are ignored; text fields are redacted and capped like saves. Timestamps are
/// RFC 3339, or engram's `YYYY-MM-DD HH:MM:SS` (UTC); blank means absent.
#[derive(Serialize, ToSchema)]
pub struct ImportFile {
    pub sessions: Option<Vec<ImportSession>>,
    pub observations: Option<Vec<ImportObservation>>,
    pub prompts: Option<Vec<ImportPrompt>>,
    pub relations: Option<Vec<ImportRelation>>,
}

#[derive(Serialize, ToSchema)]
pub struct ImportSession {
    #[schema(pattern = r"\S")]
    pub id: String,
    pub project: Option<String>,
    pub directory: Option<String>,
    pub agent: Option<String>,
    pub parent_id: Option<String>,
    #[schema(pattern = r"^(\s*|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?)$")]
    pub started_at: Option<String>,
    #[schema(pattern = r"^(\s*|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?)$")]
    pub ended_at: Option<String>,
    pub summary: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct ImportObservation {
    pub id: Option<i64>,
    pub sync_id: Option<String>,
    #[schema(pattern = r"\S")]
    pub session_id: String,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    #[schema(pattern = r"\S")]
    pub title: String,
    #[schema(pattern = r"\S")]
    pub content: String,
    pub tool_name: Option<String>,
    pub project: Option<String>,
    pub scope: Option<String>,
    pub topic_key: Option<String>,
    pub revision_count: Option<i64>,
    pub duplicate_count: Option<i64>,
    pub pinned: Option<bool>,
    #[schema(pattern = r"^(\s*|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?)$")]
    pub last_seen_at: Option<String>,
    #[schema(pattern = r"^(\s*|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?)$")]
    pub created_at: Option<String>,
    #[schema(pattern = r"^(\s*|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?)$")]
    pub updated_at: Option<String>,
    #[schema(pattern = r"^(\s*|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?)$")]
    pub deleted_at: Option<String>,
    #[schema(pattern = r"^(\s*|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?)$")]
    pub review_after: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct ImportPrompt {
    pub id: Option<i64>,
    pub sync_id: Option<String>,
    #[schema(pattern = r"\S")]
    pub session_id: String,
    #[schema(pattern = r"\S")]
    pub content: String,
    pub project: Option<String>,
    #[schema(pattern = r"^(\s*|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?)$")]
    pub created_at: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct ImportRelation {
    #[schema(pattern = r"\S")]
    pub sync_id: String,
    #[schema(pattern = r"\S")]
    pub source_id: String,
    #[schema(pattern = r"\S")]
    pub target_id: String,
    pub relation: Option<String>,
    pub reason: Option<String>,
    pub evidence: Option<String>,
    pub confidence: Option<f64>,
    pub judgment_status: Option<String>,
    pub marked_by_actor: Option<String>,
    pub marked_by_kind: Option<String>,
    pub marked_by_model: Option<String>,
    pub session_id: Option<String>,
    #[schema(pattern = r"^(\s*|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?)$")]
    pub created_at: Option<String>,
    #[schema(pattern = r"^(\s*|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})?)$")]
    pub updated_at: Option<String>,
}

/// One relation. `relation_id`, `source_snippet` and `target_snippet` are engram's names for
/// `id`, `source_title` and `target_title`.
#[derive(Serialize, ToSchema)]
pub struct RelationDetail {
    pub relation_id: i64,
    #[serde(flatten)]
    pub detail: cairn_core::relations::RelationDetail,
    pub source_snippet: Option<String>,
    pub target_snippet: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct Judged {
    pub relation: Relation,
}

#[derive(Serialize, ToSchema)]
pub struct Compared {
    pub sync_id: String,
    pub relation: Relation,
}

/// Sync-deferred relations (none: sync is not available yet).
#[derive(Serialize, ToSchema)]
pub struct DeferredPage {
    pub total: i64,
    pub limit: u64,
    pub rows: Vec<Value>,
}

#[derive(Serialize, ToSchema)]
pub struct ReplayResult {
    pub retried: u64,
    pub succeeded: u64,
    pub failed: u64,
    pub dead: u64,
}

/// The daemon is up. `data_dir` lets a client check it is the daemon of its own store.
#[derive(Serialize, ToSchema)]
pub struct Health {
    /// `ok`, or `degraded` when the store failed its check or a background worker died.
    pub status: String,
    /// Always `cairn`.
    pub service: String,
    pub version: String,
    pub schema_version: i64,
    /// Absolute path of the data directory (null for an in-memory store).
    pub data_dir: Option<String>,
    /// `ok`, `busy` (a long write holds the store), or `{code, message}`.
    pub store: Value,
    /// `ready`, or `building` while the in-memory search index is built or rebuilt (searches
    /// are then answered by FTS5: correct, slower). Wait for `ready` before measuring.
    pub search_index: String,
    /// The engine's background threads (writer, checkpointer, index follower and builder,
    /// embedder) and their state.
    pub workers: Vec<Worker>,
    /// Events hooks and plugins kept on disk while no daemon answered (`null` when this
    /// daemon drains no spool).
    pub spool: Option<SpoolHealth>,
}

/// The spool of the data dir: what waits, and what was lost on the way (kept across restarts).
#[derive(Serialize, ToSchema)]
pub struct SpoolHealth {
    /// Events waiting to be applied.
    pub pending: u64,
    /// Their bytes on disk.
    pub bytes: u64,
    /// Events refused because the spool was full, a record too large or the disk full.
    pub dropped: u64,
    /// Unreadable records (truncated, corrupt, from a newer cairn), skipped.
    pub corrupt: u64,
    /// Events the store refused when applied (bad arguments).
    pub rejected: u64,
    /// Events that kept failing when applied, set aside in `spool/failed/` for a bug report.
    pub failed: u64,
}

/// One background thread of the engine.
#[derive(Serialize, ToSchema)]
pub struct Worker {
    /// Thread name, e.g. `cairn-writer`.
    pub name: String,
    /// `running`; `done` (one-off work that finished, or any worker after a stop); `dead` (it
    /// panicked, or a loop ended by itself).
    #[schema(pattern = "^(running|done|dead)$")]
    pub state: String,
}

/// Any operation of cairn as data (the daemon RPC used by `cairn mcp` and the CLI).
/// The names below are `cairn_core::ops::CATALOGUE`'s, in its order (a doc comment cannot be
/// generated; a test in `docs.rs` holds them equal).
#[derive(Serialize, ToSchema)]
pub struct OpRequest {
    /// Operation name: save, search, get, update, delete, restore, pin, list, context, timeline,
    /// sessions, start_session, session_summary, end_session, get_session, delete_session,
    /// add_prompt, recent_prompts, search_prompts, delete_prompt, stats, memories_per_day, export, import,
    /// capture_passive, suggest_topic_key, judge, compare, relations, relation_stats,
    /// get_relation, scan_relations, migrate_project, merge_projects, doctor, privacy_rewrite, gc, import_engram,
    /// repair_indexes, reindex,
    /// session_activity, record_activity, protocol, user_prompt, save_compaction,
    /// record_session, profile, plugin_config, history_sessions, history_browse_turns,
    /// history_browse_messages, history_pull_message, history_pull_part, history_search,
    /// history_chart, history_compactions, history_children, history_stats, history_forget,
    /// history_ingest, plans, context_usage, context_usage_turns, session_start, tool_call,
    /// context_meter, sync_export, sync_import, sync_status, extraction_status.
    pub op: String,
    /// The operation's arguments (omit for operations without any).
    pub args: Option<Value>,
}

//! Response shapes, for the OpenAPI document only. Handlers return the JSON the core
//! operations produce; these structs describe it (cairn-core's types stay free of OpenAPI
//! derives). The integration tests check real responses against these schemas, key by key, so
//! a field added in the core and forgotten here fails a test.

// Never constructed: they exist for their derived schemas.
#![allow(dead_code)]

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// `project` (the default) or `personal` (follows the user across projects).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Project,
    Personal,
}

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

/// A memory.
#[derive(Serialize, ToSchema)]
pub struct Observation {
    /// Local id, shown as `#id`.
    pub id: i64,
    /// Global id (UUID v7).
    pub sync_id: String,
    pub session_id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub content: String,
    pub tool_name: Option<String>,
    /// Empty when the memory belongs to no project.
    pub project: String,
    pub scope: Scope,
    pub topic_key: Option<String>,
    pub revision_count: i64,
    pub duplicate_count: i64,
    pub pinned: bool,
    pub last_seen_at: Option<String>,
    /// RFC 3339 UTC.
    pub created_at: String,
    pub updated_at: String,
    pub deleted_at: Option<String>,
    /// When a decision, policy or preference should be reviewed.
    pub review_after: Option<String>,
}

/// An earlier version of a memory.
#[derive(Serialize, ToSchema)]
pub struct Revision {
    pub revision: i64,
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub content: String,
    pub replaced_at: String,
}

/// A memory, with its earlier versions when asked (`?revisions=true`).
#[derive(Serialize, ToSchema)]
pub struct ObservationDetail {
    #[serde(flatten)]
    pub observation: Observation,
    pub revisions: Option<Vec<Revision>>,
}

/// How a search hit was found.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MatchKind {
    TopicKey,
    Lexical,
    Semantic,
    Hybrid,
    /// Saved right next to a hit in the same session.
    Context,
}

/// A search result: the memory plus its ranking.
#[derive(Serialize, ToSchema)]
pub struct SearchHit {
    #[serde(flatten)]
    pub observation: Observation,
    /// engram-compatible BM25 rank: more negative is better (topic_key hits: -1000).
    pub rank: f64,
    /// Higher is better.
    pub score: f64,
    /// Best passage, matches in `**bold**`.
    pub snippet: String,
    pub matched: MatchKind,
    pub scores: HitScores,
    /// Relation notes (supersedes, conflicts, pending review).
    pub annotations: Vec<String>,
}

/// The scores behind a hit's place.
#[derive(Serialize, ToSchema)]
pub struct HitScores {
    /// BM25, higher is better (when the words matched).
    pub lexical: Option<f64>,
    /// Cosine similarity with the query (when semantic search ran).
    pub semantic: Option<f32>,
    /// What the hit is ordered by: in hybrid search the re-ranking model's relevance (0–1),
    /// otherwise BM25 or the cosine (topic-key hits: 1000).
    pub fused: f64,
}

/// What a save did.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SaveAction {
    Created,
    Revised,
    Duplicate,
}

/// A memory that may duplicate or contradict the one just saved.
#[derive(Serialize, ToSchema)]
pub struct Candidate {
    pub id: i64,
    pub sync_id: String,
    pub title: String,
    #[serde(rename = "type")]
    pub kind: String,
    /// 0..1.
    pub score: f64,
    /// The pending relation to judge (`POST /conflicts/judge`).
    pub judgment_id: String,
    pub topic_key: Option<String>,
}

/// The answer to `POST /observations`.
#[derive(Serialize, ToSchema)]
pub struct SaveResult {
    /// The id of the created, revised or deduplicated memory.
    pub id: i64,
    /// Always `saved`.
    pub status: String,
    pub sync_id: String,
    pub action: SaveAction,
    pub project: String,
    pub session_id: String,
    /// The title as stored (redacted, first line, within limits).
    pub title: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub topic_key: Option<String>,
    /// A key to pass next time so the memory can be revised instead of duplicated.
    pub suggested_topic_key: Option<String>,
    pub revision_count: i64,
    pub duplicate_count: i64,
    /// Original content length in bytes when it was cut to the limit.
    pub truncated_from: Option<u64>,
    /// Whether `<private>` content was removed.
    pub redacted: bool,
    pub warnings: Vec<String>,
    /// Look-alikes, when `find_candidates` was set.
    pub candidates: Vec<Candidate>,
}

#[derive(Serialize, ToSchema)]
pub struct ObservationDeleted {
    pub id: i64,
    /// Always `deleted`.
    pub status: String,
    pub hard_delete: bool,
}

/// What passive capture found and saved.
#[derive(Serialize, ToSchema)]
pub struct PassiveOutcome {
    pub extracted: u64,
    pub saved: u64,
    pub duplicates: u64,
    pub ids: Vec<i64>,
}

/// A coding session.
#[derive(Serialize, ToSchema)]
pub struct Session {
    pub id: String,
    pub project: String,
    pub directory: String,
    pub agent: String,
    pub parent_id: Option<String>,
    pub started_at: String,
    pub ended_at: Option<String>,
    pub summary: Option<String>,
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

/// A session in a listing.
#[derive(Serialize, ToSchema)]
pub struct SessionSummary {
    #[serde(flatten)]
    pub session: Session,
    pub observation_count: i64,
    pub last_activity_at: String,
}

#[derive(Serialize, ToSchema)]
pub struct SessionDeleted {
    pub id: String,
    /// Always `deleted`.
    pub status: String,
}

/// What a user asked.
#[derive(Serialize, ToSchema)]
pub struct Prompt {
    pub id: i64,
    pub sync_id: String,
    pub session_id: String,
    pub content: String,
    pub project: String,
    pub created_at: String,
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
pub struct TimelineEntry {
    #[serde(flatten)]
    pub observation: Observation,
    pub is_focus: bool,
}

/// The memories around one memory in its session.
#[derive(Serialize, ToSchema)]
pub struct Timeline {
    pub focus: TimelineEntry,
    /// Oldest first.
    pub before: Vec<TimelineEntry>,
    /// Oldest first.
    pub after: Vec<TimelineEntry>,
    pub session_info: Option<Session>,
    pub total_in_range: i64,
}

/// Context for an agent, as markdown within a byte budget.
#[derive(Serialize, ToSchema)]
pub struct Context {
    /// Markdown; empty when there is nothing to say.
    pub context: String,
    pub project: Option<String>,
    pub bytes: u64,
    pub budget_bytes: u64,
    pub memory_ids: Vec<i64>,
    pub session_ids: Vec<String>,
    pub prompt_ids: Vec<i64>,
    /// Whether items were left out to respect the budget.
    pub truncated: bool,
}

#[derive(Serialize, ToSchema)]
pub struct ProjectStats {
    pub project: String,
    pub observations: i64,
    pub sessions: i64,
    pub prompts: i64,
    pub last_activity_at: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct Stats {
    pub total_sessions: i64,
    /// Live memories.
    pub total_observations: i64,
    pub total_prompts: i64,
    pub total_relations: i64,
    pub deleted_observations: i64,
    pub pinned_observations: i64,
    /// Project names, most recently active first.
    pub projects: Vec<String>,
    pub by_project: Vec<ProjectStats>,
    pub by_type: BTreeMap<String, i64>,
    pub schema_version: i64,
    pub db_path: Option<String>,
    pub db_bytes: u64,
    /// The model whose vectors semantic search uses (`null`: semantic search is off).
    pub embedding_model: Option<String>,
    /// Live memories still waiting for their vector; poll until 0 after a bulk change.
    pub embeddings_pending: i64,
    pub embeddings_stored: i64,
    /// `ready`, or why semantic search is not answering.
    pub semantic_search: String,
}

/// What `/reindex` queued.
#[derive(Serialize, ToSchema)]
pub struct ReindexReport {
    pub model: Option<String>,
    /// Vectors dropped.
    pub cleared: usize,
    /// Memories waiting for a vector now.
    pub pending: i64,
}

#[derive(Serialize, ToSchema)]
pub struct ProjectList {
    /// Most recently active first.
    pub projects: Vec<ProjectStats>,
    pub count: u64,
}

/// Which project a directory belongs to. Failures are reported in `error_hint`, never as an
/// error status.
#[derive(Serialize, ToSchema)]
pub struct ProjectDetection {
    /// Empty when detection failed.
    pub project: String,
    /// `config`, `engram_config`, `git_remote`, `git_root`, `git_child`, `dir_basename`,
    /// `ambiguous`, or `error`.
    pub project_source: String,
    pub project_path: String,
    pub cwd: String,
    pub warning: Option<String>,
    /// The repositories to choose from when the directory holds several, else empty.
    pub available_projects: Vec<String>,
    /// Why there is no project: `ambiguous_project`, `invalid_project_config`...
    pub error_code: Option<String>,
    pub error_hint: Option<String>,
}

/// The last prompt recorded in a session, waiting to be attached to the next save.
#[derive(Serialize, ToSchema)]
pub struct PendingPrompt {
    pub content: String,
    pub project: String,
    /// The session it is already stored in.
    pub stored_in: Option<String>,
}

/// What an agent did in a session.
#[derive(Serialize, ToSchema)]
pub struct SessionActivity {
    pub session_id: String,
    /// The session's project (empty when it has none).
    pub project: String,
    /// When counting started (the first event, or the restart after two quiet hours).
    pub started_at: String,
    pub updated_at: String,
    pub tool_calls: i64,
    pub saves: i64,
    pub last_save_at: Option<String>,
    pub reminders: i64,
    pub last_reminder_at: Option<String>,
    pub pending_prompt: Option<PendingPrompt>,
    pub context_fingerprint: Option<String>,
}

/// A session's activity after an event.
#[derive(Serialize, ToSchema)]
pub struct ActivityUpdate {
    pub activity: SessionActivity,
    /// The save reminder due now (`tool_call` with `remind`).
    pub reminder: Option<String>,
    /// The prompt a `save` attached to the saved session.
    pub attached_prompt_id: Option<i64>,
    /// Whether `context_injected` saw a fingerprint other than the previous one.
    pub context_changed: Option<bool>,
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

#[derive(Serialize, ToSchema)]
pub struct MigrateOutcome {
    /// `migrated` or `skipped`.
    pub status: String,
    pub old_project: String,
    pub new_project: String,
    pub observations: u64,
    pub sessions: u64,
    pub prompts: u64,
    pub reason: Option<String>,
}

/// A verdict between two memories (by sync id).
#[derive(Serialize, ToSchema)]
pub struct Relation {
    pub id: i64,
    pub sync_id: String,
    pub source_id: String,
    pub target_id: String,
    /// `pending` or a verdict: related, compatible, scoped, conflicts_with, supersedes, not_conflict.
    pub relation: String,
    pub reason: Option<String>,
    pub evidence: Option<String>,
    pub confidence: Option<f64>,
    /// `pending`, `judged` or `orphaned`.
    pub judgment_status: String,
    pub marked_by_actor: Option<String>,
    pub marked_by_kind: Option<String>,
    pub marked_by_model: Option<String>,
    pub session_id: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// Everything in the store (or one project), soft-deleted memories included.
#[derive(Serialize, ToSchema)]
pub struct ExportData {
    pub version: String,
    pub generator: String,
    pub exported_at: String,
    pub sessions: Vec<Session>,
    pub observations: Vec<Observation>,
    pub prompts: Vec<Prompt>,
    pub relations: Vec<Relation>,
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

/// What an import did. Importing the same file twice changes nothing.
#[derive(Serialize, ToSchema)]
pub struct ImportReport {
    pub sessions_imported: u64,
    pub observations_imported: u64,
    pub observations_updated: u64,
    pub prompts_imported: u64,
    pub relations_imported: u64,
    pub skipped: u64,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    Ok,
    Warning,
    Error,
}

#[derive(Serialize, ToSchema)]
pub struct DoctorCheck {
    pub id: String,
    pub status: CheckStatus,
    pub message: String,
    pub hint: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct DoctorReport {
    /// The worst status of any check.
    pub status: CheckStatus,
    pub checks: Vec<DoctorCheck>,
}

#[derive(Serialize, ToSchema)]
pub struct SyncStatus {
    pub enabled: bool,
    pub message: String,
}

/// A relation in a listing, with both memories' titles.
#[derive(Serialize, ToSchema)]
pub struct RelationRow {
    pub id: i64,
    pub sync_id: String,
    pub relation: String,
    pub judgment_status: String,
    pub source_id: String,
    pub source_title: Option<String>,
    pub target_id: String,
    pub target_title: Option<String>,
    pub confidence: Option<f64>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Serialize, ToSchema)]
pub struct RelationPage {
    pub total: i64,
    pub limit: u64,
    pub offset: u64,
    pub relations: Vec<RelationRow>,
}

#[derive(Serialize, ToSchema)]
pub struct RelationStats {
    pub project: Option<String>,
    pub by_relation: BTreeMap<String, i64>,
    pub by_judgment_status: BTreeMap<String, i64>,
    pub deferred: i64,
    pub dead: i64,
}

/// One relation. `relation_id`, `source_snippet` and `target_snippet` are engram's names for
/// `id`, `source_title` and `target_title`.
#[derive(Serialize, ToSchema)]
pub struct RelationDetail {
    pub relation_id: i64,
    #[serde(flatten)]
    pub relation: Relation,
    pub source_title: Option<String>,
    pub target_title: Option<String>,
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

/// A retroactive relation scan. `semantic_*` are engram's LLM-scan counters (always 0).
#[derive(Serialize, ToSchema)]
pub struct ScanResult {
    pub project: String,
    pub inspected: u64,
    pub candidates_found: u64,
    pub already_related: u64,
    pub inserted: u64,
    pub capped: bool,
    pub dry_run: bool,
    pub warning: Option<String>,
    pub semantic_judged: u64,
    pub semantic_skipped: u64,
    pub semantic_errors: u64,
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
    /// Operation name: save, search, get, update, delete, pin, list, context, timeline,
    /// sessions, start_session, session_summary, end_session, get_session, delete_session,
    /// add_prompt, recent_prompts, search_prompts, delete_prompt, stats, export, import,
    /// capture_passive, suggest_topic_key, judge, compare, relations, relation_stats,
    /// get_relation, scan_relations, migrate_project, merge_projects, doctor, reindex,
    /// session_activity, record_activity.
    pub op: String,
    /// The operation's arguments (omit for operations without any).
    pub args: Option<Value>,
}

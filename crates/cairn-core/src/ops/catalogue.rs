//! The catalogue of operations: one row per [`Op`] variant with its name, what it writes,
//! whether it is safe to replay, its argument hint, whether `project` defaults to the caller's,
//! a one-line description and its result type. Everything that lists operations (the `memory` router tool, replay safety
//! in the daemon client, the docs) reads this table, so an operation is added in one place.
//!
//! The `catalogue!` macro turns the rows into [`OpKind`], [`CATALOGUE`], [`Op::kind`],
//! [`OpOutput`] and each request type's [`Request`] impl. `Op::kind` matches every variant, so
//! a variant without a row does not compile. A row reads `Kind(Request) -> Output` (the
//! variant holds its request) or `Kind[Request] -> Output` (a unit variant: no arguments).

use serde::Serialize;
use serde_json::Value;

#[allow(clippy::wildcard_imports, reason = "the catalogue names every request type of `requests.rs`")]
use super::requests::*;
use super::{
    CompareResponse, DeleteResponse, Deleted, GetResponse, JudgeResponse, Op, ReindexReport, RepairReport, SaveRequest,
    SaveResponse, SearchResponse, TopicKeySuggestion,
};
use crate::agent::intent::{SessionStart, SessionStartOutcome, ToolCall, ToolCallOutcome};
use crate::agent::meter::{MeterReading, MeterRequest};
use crate::agent::{
    ActivityRecord, ActivityUpdate, CompactionSave, ProtocolRequest, ProtocolText, RecordSession, SessionActivity,
    UserPrompt, UserPromptOutcome,
};
use crate::context::{Context, ContextRequest};
use crate::doctor::DoctorReport;
use crate::extract::ExtractionStatus;
use crate::gc::{GcReport, GcRequest};
use crate::history::context_usage::{ContextUsageReport, ContextUsageRequest, ContextUsageTurns};
use crate::history::ingest::{PokeRequest, ScanReport};
use crate::history::plans::{Plans, PlansRequest};
use crate::history::query::{
    Chart, Compactions, CompactionsRequest, Forgotten, HistoryStats, MessageRequest, MessagesPage, MessagesRequest,
    PartRequest, PulledMessage, PulledPart, SearchRequest as HistorySearchRequest, SearchResults, SessionListing,
    SessionsRequest, TurnsPage, TurnsRequest,
};
use crate::memory::{ListFilter, SaveOutcome};
use crate::model::{Observation, Prompt, Session, SessionSummary};
use crate::passive::{PassiveCapture, PassiveOutcome};
use crate::privacy::PrivacyRewrite;
use crate::projects::MigrateOutcome;
use crate::prompts::NewPrompt;
use crate::relations::{
    Comparison, Judgment, RelationDetail, RelationFilter, RelationPage, RelationStats, ScanRequest, ScanResult,
};
use crate::search::SearchQuery;
use crate::sessions::NewSession;
use crate::settings::PluginConfig;
use crate::sync::SyncStatus;
use crate::sync::git::{ExportRequest as SyncExportRequest, ExportSummary, ImportSummary};
use crate::transfer::{ExportData, ImportReport};
use crate::views::{MemoriesPerDay, Stats, Timeline};

/// What the catalogue knows about one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpSpec {
    pub kind: OpKind,
    /// The `op` tag on the wire (`save`, `search`...).
    pub name: &'static str,
    /// What it writes, if anything: the daemon sends the memory store's writes to its one
    /// writer connection; the history archive has writers of its own.
    pub writes: Writes,
    /// Whether running it twice does what running it once does, so the daemon client may send
    /// it again when its answer was lost (every read; a write only when repeating it is
    /// harmless, like erasing a session already erased).
    pub replay_safe: bool,
    /// Whether a door fills `project` with the caller's current project when none is given.
    /// Not `update` (a project there moves the memory) nor the store-wide admin listings.
    pub project_defaulted: bool,
    /// Its arguments as the router tool shows them (`*` = required), sometimes with a note.
    pub args: &'static str,
    /// What it does, in one line.
    pub about: &'static str,
    /// The Rust type of its result (the [`OpOutput`] variant of the same name holds it).
    pub output: &'static str,
}

/// What an operation writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// Nothing: it only reads.
    Nothing,
    /// The memory store (`cairn.db`), through the daemon's one writer connection.
    MemoryStore,
    /// The conversation-history archive (`history.db` and its index), not the memory store.
    HistoryArchive,
}

impl Writes {
    /// How the router tool's help says it: `read-only`, or what it writes.
    pub fn describe(self) -> &'static str {
        match self {
            Writes::Nothing => "read-only",
            Writes::MemoryStore => "writes the memory store",
            Writes::HistoryArchive => "writes the history archive",
        }
    }
}

impl OpSpec {
    /// The catalogue row named `name`, if any.
    pub fn named(name: &str) -> Option<&'static OpSpec> {
        CATALOGUE.iter().find(|spec| spec.name == name)
    }

    /// The argument names marked required (`*`) in [`OpSpec::args`].
    pub fn required_args(&self) -> impl Iterator<Item = &'static str> {
        self.args.split(',').filter_map(|part| part.split_whitespace().next()?.strip_suffix('*'))
    }
}

/// An operation's request: which [`Op`] it makes and the type of its answer, so a door that
/// runs one gets that type back without a run-time type check (`Client::call`,
/// `ops::execute_request`). Implemented by the catalogue, one type per operation.
pub trait Request: Sized {
    /// What the operation answers (its catalogue row's `output`).
    type Output;

    /// The operation, to run or to send.
    fn into_op(self) -> Op;

    /// The answer out of what running [`Request::into_op`] returned. Only an executor that
    /// answered another operation gets an error here: an internal one naming both.
    fn output(output: OpOutput) -> crate::Result<Self::Output>;
}

/// The internal error of an [`OpOutput`] that answers another operation than the one asked.
fn answered_another(asked: OpKind, answered: OpKind) -> crate::CairnError {
    crate::CairnError::internal(format!(
        "`{}` was answered with `{}`'s result",
        asked.spec().name,
        answered.spec().name
    ))
}

/// A row's [`Request`] impl: `(Type)` is a variant holding its request, `[Type]` a unit variant.
macro_rules! request_impl {
    ($kind:ident, ($request:ty), $output:ty) => {
        request_impl!(@impl $kind, $request, $output, |request| Op::$kind(request));
    };
    ($kind:ident, [$request:ty], $output:ty) => {
        request_impl!(@impl $kind, $request, $output, |_request| Op::$kind);
    };
    (@impl $kind:ident, $request:ty, $output:ty, |$bound:ident| $op:expr) => {
        impl Request for $request {
            type Output = $output;

            fn into_op(self) -> Op {
                let $bound = self;
                $op
            }

            fn output(output: OpOutput) -> crate::Result<$output> {
                match output {
                    OpOutput::$kind(output) => Ok(output),
                    other => Err(answered_another(OpKind::$kind, other.kind())),
                }
            }
        }

        impl From<$request> for Op {
            fn from(request: $request) -> Op {
                request.into_op()
            }
        }
    };
}

macro_rules! catalogue {
    ($(
        $kind:ident $request:tt -> $output:ty {
            name: $name:literal,
            writes: $writes:ident,
            replay_safe: $replay_safe:literal,
            project_defaulted: $project_defaulted:literal,
            args: $args:literal,
            about: $about:literal $(,)?
        }
    )*) => {
        /// Which operation an [`Op`] is, without its arguments.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum OpKind {
            $(#[doc = $about] $kind,)*
        }

        /// Every operation, in the order the router tool lists them.
        pub const CATALOGUE: &[OpSpec] = &[$(
            OpSpec {
                kind: OpKind::$kind,
                name: $name,
                writes: Writes::$writes,
                replay_safe: $replay_safe,
                project_defaulted: $project_defaulted,
                args: $args,
                about: $about,
                output: stringify!($output),
            },
        )*];

        impl Op {
            /// Which operation this is.
            pub fn kind(&self) -> OpKind {
                match self {
                    $(Op::$kind { .. } => OpKind::$kind,)*
                }
            }
        }

        /// The typed result of an operation: one variant per [`Op`] variant, of the same name.
        /// It serialises untagged, as the bare result: the JSON every door sends.
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(untagged)]
        #[allow(
            clippy::large_enum_variant,
            reason = "one per operation, moved once into the reply: boxing buys nothing"
        )]
        pub enum OpOutput {
            $(#[doc = concat!("The result of `", $name, "`.")] $kind($output),)*
        }

        impl OpOutput {
            /// Which operation produced it.
            pub fn kind(&self) -> OpKind {
                match self {
                    $(OpOutput::$kind(_) => OpKind::$kind,)*
                }
            }

            /// Decode the JSON answer to an operation of this kind (untagged JSON alone
            /// cannot say which operation it answers).
            pub fn from_value(kind: OpKind, value: Value) -> crate::Result<OpOutput> {
                Ok(match kind {
                    $(OpKind::$kind => OpOutput::$kind(serde_json::from_value(value)?),)*
                })
            }
        }

        $(request_impl!($kind, $request, $output);)*
    };
}

catalogue! {
    Save (SaveRequest) -> SaveResponse {
        name: "save", writes: MemoryStore, replay_safe: false, project_defaulted: true,
        args: "title*, content*, type, topic_key, scope (project|personal), session_id, project",
        about: "Save a memory, or revise the one with the same topic_key.",
    }
    Search (SearchQuery) -> SearchResponse {
        name: "search", writes: Nothing, replay_safe: true, project_defaulted: true,
        args: "query*, type, scope, limit, all_projects, mode (lexical|semantic|hybrid), min_score (0-1), deep",
        about: "Search memories, with relation notes on the hits.",
    }
    Get (GetRequest) -> GetResponse {
        name: "get", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "id*, revisions",
        about: "One memory, optionally with its earlier revisions.",
    }
    Update (UpdateRequest) -> Observation {
        name: "update", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "id*, title, content, type, scope, topic_key, project",
        about: "Change fields of a memory (a project moves it).",
    }
    Delete (DeleteRequest) -> DeleteResponse {
        name: "delete", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "id*, hard",
        about: "Delete a memory: soft by default, for good with `hard`.",
    }
    Restore (RestoreRequest) -> Observation {
        name: "restore", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "id*",
        about: "Bring back a soft-deleted memory (`list` with `deleted` shows them).",
    }
    Pin (PinRequest) -> Observation {
        name: "pin", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "id*, pinned",
        about: "Pin or unpin a memory (pinned ones lead the context).",
    }
    List (ListFilter) -> Vec<Observation> {
        name: "list", writes: Nothing, replay_safe: true, project_defaulted: true,
        args: "project, scope, kind, limit, offset, deleted",
        about: "List memories, newest first (`deleted`: the trash, latest deletion first).",
    }
    Context (ContextRequest) -> Context {
        name: "context", writes: Nothing, replay_safe: true, project_defaulted: true,
        args: "project, scope, include_children, layout (recent|memory_block), query, similarity_threshold, \
               max_relevant, max_profile",
        about: "What to know at the start of a session: recent sessions, memories, prompts.",
    }
    Timeline (TimelineRequest) -> Timeline {
        name: "timeline", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "id*, before, after",
        about: "The memories saved around one memory.",
    }
    Sessions (RecentSessionsRequest) -> Vec<SessionSummary> {
        name: "sessions", writes: Nothing, replay_safe: true, project_defaulted: true,
        args: "project, limit, include_children",
        about: "Recent sessions (sub-agent sessions only with include_children).",
    }
    StartSession (NewSession) -> Session {
        name: "start_session", writes: MemoryStore, replay_safe: false, project_defaulted: true,
        args: "id*, project, directory, agent, parent_id, title",
        about: "Register a session.",
    }
    SessionSummary (SessionSummaryRequest) -> SaveOutcome {
        name: "session_summary", writes: MemoryStore, replay_safe: false, project_defaulted: true,
        args: "content*, session_id — once, at the end, main agent only",
        about: "Save the end-of-session summary (a repeated one revises it).",
    }
    EndSession (EndSessionRequest) -> Session {
        name: "end_session", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "id*, summary, keep_activity",
        about: "End a session, clearing its activity counters (unless keep_activity).",
    }
    GetSession (GetSessionRequest) -> Session {
        name: "get_session", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "id*",
        about: "One session.",
    }
    DeleteSession (DeleteSessionRequest) -> Deleted<String> {
        name: "delete_session", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "id*",
        about: "Delete a session with its prompts and activity.",
    }
    AddPrompt (NewPrompt) -> Prompt {
        name: "add_prompt", writes: MemoryStore, replay_safe: false, project_defaulted: true,
        args: "content*, session_id",
        about: "Record a user prompt.",
    }
    RecentPrompts (RecentPromptsRequest) -> Vec<Prompt> {
        name: "recent_prompts", writes: Nothing, replay_safe: true, project_defaulted: true,
        args: "project, limit",
        about: "Recent user prompts.",
    }
    SearchPrompts (SearchPromptsRequest) -> Vec<Prompt> {
        name: "search_prompts", writes: Nothing, replay_safe: true, project_defaulted: true,
        args: "query*, project, limit",
        about: "Search user prompts.",
    }
    DeletePrompt (DeletePromptRequest) -> Deleted<i64> {
        name: "delete_prompt", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "id*",
        about: "Delete a user prompt.",
    }
    Stats [StatsRequest] -> Stats {
        name: "stats", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "-",
        about: "Counts of memories, sessions, prompts and pending embeddings.",
    }
    MemoriesPerDay (MemoriesPerDayRequest) -> MemoriesPerDay {
        name: "memories_per_day", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "project, days (default 30, at most 366)",
        about: "Live memories created per day, every day of the window listed.",
    }
    Export (ExportMemoriesRequest) -> ExportData {
        name: "export", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "project",
        about: "Everything (or one project) as engram-compatible JSON.",
    }
    Import (ImportRequest) -> ImportReport {
        name: "import", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "data*",
        about: "Load an export; what is already there is skipped.",
    }
    CapturePassive (PassiveCapture) -> PassiveOutcome {
        name: "capture_passive", writes: MemoryStore, replay_safe: false, project_defaulted: true,
        args: "content*, session_id, source — saves a '## Key Learnings' list",
        about: "Save each item of a '## Key Learnings' list as a memory.",
    }
    SuggestTopicKey (SuggestTopicKeyRequest) -> TopicKeySuggestion {
        name: "suggest_topic_key", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "type, title, content",
        about: "A stable topic_key for a memory about to be saved.",
    }
    Judge (Judgment) -> JudgeResponse {
        name: "judge", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "judgment_id*, relation*, reason, evidence, confidence",
        about: "Decide a pending relation between two memories.",
    }
    Compare (Comparison) -> CompareResponse {
        name: "compare", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "memory_id_a*, memory_id_b*, relation*, confidence*, reasoning*, model",
        about: "Record an agent's verdict on how two memories relate.",
    }
    Relations (RelationFilter) -> RelationPage {
        name: "relations", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "project, status, since, limit, offset, memory_id",
        about: "List relations between memories.",
    }
    RelationStats (RelationStatsRequest) -> RelationStats {
        name: "relation_stats", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "project",
        about: "Counts of relations by kind and status.",
    }
    GetRelation (GetRelationRequest) -> RelationDetail {
        name: "get_relation", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "id*",
        about: "One relation with both memories.",
    }
    ScanRelations (ScanRequest) -> ScanResult {
        name: "scan_relations", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "project*, since, apply, max_insert",
        about: "Look for memories that may duplicate or contradict each other.",
    }
    MigrateProject (MigrateProjectRequest) -> MigrateOutcome {
        name: "migrate_project", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "old_project*, new_project*",
        about: "Rename a project everywhere.",
    }
    MergeProjects (MergeProjectsRequest) -> Vec<MigrateOutcome> {
        name: "merge_projects", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "from* (list), to*",
        about: "Fold several projects into one.",
    }
    Doctor [DoctorRequest] -> DoctorReport {
        name: "doctor", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "-",
        about: "Checks of the data dir and database.",
    }
    PrivacyRewrite (PrivacyRewriteRequest) -> PrivacyRewrite {
        name: "privacy_rewrite", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "dry_run",
        about: "Redact stored text that still holds private content or a secret, then rebuild the file.",
    }
    Gc (GcRequest) -> GcReport {
        name: "gc", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "dry_run",
        about: "Drop what no rule needs any more (other models' vectors, old spool ids), then rebuild the files.",
    }
    ImportEngram (ImportEngramRequest) -> ImportReport {
        name: "import_engram", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "path* (an engram.db file, read only)",
        about: "Import an engram database; what is already there is skipped.",
    }
    RepairIndexes [RepairIndexesRequest] -> RepairReport {
        name: "repair_indexes", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "-",
        about: "Rebuild the full-text indexes of memories and prompts from their tables.",
    }
    Reindex (ReindexRequest) -> ReindexReport {
        name: "reindex", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "force — queue memories for (re-)embedding; poll stats.embeddings_pending",
        about: "Queue every memory for (re-)embedding; `force` drops the stored vectors first.",
    }
    SessionActivity (SessionActivityRequest) -> SessionActivity {
        name: "session_activity", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "session_id* — tool calls, saves, reminders, pending prompt",
        about: "A session's activity: counts, reminders, the pending prompt.",
    }
    RecordActivity (ActivityRecord) -> ActivityUpdate {
        name: "record_activity", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "session_id*, event* (tool_call|save|prompt|context_injected|reminder_sent), project, remind, \
               saved_session_id, attach_prompt, content, stored_in, fingerprint",
        about: "Record a session event; answers the activity and any reminder or attached prompt due.",
    }
    Protocol (ProtocolRequest) -> ProtocolText {
        name: "protocol", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "host (mcp|opencode|claude-code|codex|gemini), tools (agent|admin|all|router), \
               part (memory|compaction_note|continuity|trigger)",
        about: "The Memory Protocol, or another text cairn shows agents.",
    }
    UserPrompt (UserPrompt) -> UserPromptOutcome {
        name: "user_prompt", writes: MemoryStore, replay_safe: false, project_defaulted: true,
        args: "session_id*, content*, project, agent, directory, host (claude-code|opencode), remind, \
               usage {used, limit, model}",
        about: "A user's message: stores it, says whether it is the session's first and asks to remember.",
    }
    SaveCompaction (CompactionSave) -> SaveOutcome {
        name: "save_compaction", writes: MemoryStore, replay_safe: false, project_defaulted: true,
        args: "session_id*, summary*, project, trigger (auto|manual), overflow",
        about: "Store the summary of a compacted session (one per session, revised).",
    }
    RecordSession (RecordSession) -> Option<SaveOutcome> {
        name: "record_session", writes: MemoryStore, replay_safe: false, project_defaulted: true,
        args: "session_id*, project, compacted",
        about: "Revise a session's Last Session record (its requests, tools, files, learnings, where it stopped).",
    }
    Profile (ProfileRequest) -> Vec<Observation> {
        name: "profile", writes: Nothing, replay_safe: true, project_defaulted: true,
        args: "project, limit",
        about: "The user's profile: personal memories and the project's preferences.",
    }
    PluginConfig [PluginConfigRequest] -> PluginConfig {
        name: "plugin_config", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "-",
        about: "The settings host plugins follow (the inject, triggers, compaction and context_meter tables).",
    }
    HistorySessions (SessionsRequest) -> Vec<SessionListing> {
        name: "history_sessions", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "project, query, host (opencode|claude-code), limit, include_children",
        about: "Conversation-history sessions of every host and project, newest first.",
    }
    HistoryBrowseTurns (TurnsRequest) -> TurnsPage {
        name: "history_browse_turns", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "session_id*, turn_number, num_before, num_after, caller_session_id",
        about: "Turn previews of a session (default: the newest visible turn).",
    }
    HistoryBrowseMessages (MessagesRequest) -> MessagesPage {
        name: "history_browse_messages", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "session_id*, message_id, num_before, num_after, caller_session_id",
        about: "Message previews around a message (default: the latest visible), with ids to page on.",
    }
    HistoryPullMessage (MessageRequest) -> PulledMessage {
        name: "history_pull_message", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "session_id*, message_id*, caller_session_id",
        about: "One message's parts, long ones cut with a part_id to pull in full.",
    }
    HistoryPullPart (PartRequest) -> PulledPart {
        name: "history_pull_part", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "session_id*, message_id*, part_id*, offset, max_chars (1-100000), caller_session_id",
        about: "One part of a message in full, a page at a time (next_offset).",
    }
    HistorySearch (HistorySearchRequest) -> SearchResults {
        name: "history_search", writes: Nothing, replay_safe: true, project_defaulted: true,
        args: "query*, session_id, project, literal, type (text|tool|reasoning), caller_session_id",
        about: "Search conversation history (one session, or the project's newest first).",
    }
    HistoryChart (HistoryChartRequest) -> Chart {
        name: "history_chart", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "session_id*",
        about: "The navigation chart of a session before its latest compaction.",
    }
    HistoryCompactions (CompactionsRequest) -> Compactions {
        name: "history_compactions", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "session_id*, read (1-based)",
        about: "A session's compactions with summary previews; `read` gives one summary in full.",
    }
    HistoryChildren (HistoryChildrenRequest) -> Vec<SessionListing> {
        name: "history_children", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "session_id*",
        about: "A session's sub-agent sessions.",
    }
    HistoryStats [HistoryStatsRequest] -> HistoryStats {
        name: "history_stats", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "-",
        about: "What the history archive holds per host: sessions, messages, bytes, skips, errors.",
    }
    HistoryForget (HistoryForgetRequest) -> Forgotten {
        name: "history_forget", writes: HistoryArchive, replay_safe: true, project_defaulted: false,
        args: "session_id* — erases it from the history archive (not its sub-agents)",
        about: "Erase one session from the history archive.",
    }
    HistoryIngest (PokeRequest) -> ScanReport {
        name: "history_ingest", writes: HistoryArchive, replay_safe: true, project_defaulted: false,
        args: "host (opencode|claude-code), path (a transcript or database), session_id — none: every source",
        about: "Read the hosts' conversation storage now: one file or session (a poke), or everything.",
    }
    Plans (PlansRequest) -> Plans {
        name: "plans", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "read (a plan's file name), directory, session_id — OpenCode's saved plans, read-only",
        about: "OpenCode's saved plans (the project's and the global ones), newest first; `read` gives one in full.",
    }
    ContextUsage (ContextUsageRequest) -> ContextUsageReport {
        name: "context_usage", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "session_id (default: yours, else the latest), caller_session_id",
        about: "How full a session's context window is: percent, used, limit, model, status, trend.",
    }
    ContextUsageTurns (ContextUsageTurnsRequest) -> ContextUsageTurns {
        name: "context_usage_turns", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "session_id*",
        about: "A session's context use at the end of each turn, with its compacted turns.",
    }
    SessionStart (SessionStart) -> SessionStartOutcome {
        name: "session_start", writes: MemoryStore, replay_safe: false, project_defaulted: true,
        args: "session_id*, project, directory, agent, host (claude-code|opencode), \
               source (startup|resume|clear|compact), transcript_path, parent_id, title, usage {used, limit, model}",
        about: "A session starts in a host: registers it and answers the texts the host injects.",
    }
    ToolCall (ToolCall) -> ToolCallOutcome {
        name: "tool_call", writes: MemoryStore, replay_safe: false, project_defaulted: true,
        args: "session_id*, tool*, project, host (claude-code|opencode), remind",
        about: "Count one of the agent's tool calls (cairn's own are not); the reminder when asked.",
    }
    ContextMeter (MeterRequest) -> MeterReading {
        name: "context_meter", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "used*, limit, model, host (claude-code|opencode)",
        about: "The context meter of a host's numbers: line, status, percent, the compaction decisions.",
    }
    SyncExport (SyncExportRequest) -> ExportSummary {
        name: "sync_export", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "directory* (the repository), project, all, engram_layout",
        about: "Git sync: write the project's changes as chunks under .cairn/ (or .engram/) in the repository.",
    }
    SyncImport (SyncImportRequest) -> ImportSummary {
        name: "sync_import", writes: MemoryStore, replay_safe: false, project_defaulted: false,
        args: "directory* (the repository), time_limit_ms",
        about: "Git sync: apply the repository's chunks not applied yet; bad chunks are listed, the rest applied.",
    }
    SyncStatus (SyncStatusRequest) -> SyncStatus {
        name: "sync_status", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "directory",
        about: "Projects that sync, export targets and pending changes, the repository's chunk folders.",
    }
    ExtractionStatus [ExtractionStatusRequest] -> ExtractionStatus {
        name: "extraction_status", writes: Nothing, replay_safe: true, project_defaulted: false,
        args: "-",
        about: "Memories a model extracted from conversations: counts, and the conversations failing (retried with backoff).",
    }
}

impl OpKind {
    /// This operation's catalogue row.
    pub fn spec(self) -> &'static OpSpec {
        // The table is generated in variant order, so the discriminant indexes it.
        &CATALOGUE[self as usize]
    }
}

impl OpOutput {
    /// The result as the JSON the doors send.
    pub fn into_value(self) -> crate::Result<Value> {
        Ok(serde_json::to_value(self)?)
    }
}

/// What a write sent with an event id did: it ran, or that id was applied before (a host's
/// retry, a spooled event met again) and it did not run again.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant, reason = "moved once from the writer to the door, like OpOutput itself")]
pub enum EventOutcome {
    Applied(OpOutput),
    Duplicate(super::EventId),
}

impl EventOutcome {
    /// The JSON the doors send: the result, or `{"duplicate_event": id}`.
    pub fn into_value(self) -> crate::Result<Value> {
        match self {
            EventOutcome::Applied(output) => output.into_value(),
            EventOutcome::Duplicate(id) => Ok(serde_json::json!({ "duplicate_event": id.as_str() })),
        }
    }

    /// Read the JSON answer to `kind` sent with an event id.
    pub fn from_value(kind: OpKind, value: Value) -> crate::Result<EventOutcome> {
        if let Some(id) = value.get("duplicate_event").and_then(Value::as_str) {
            return Ok(EventOutcome::Duplicate(super::EventId::parse(id)?));
        }
        Ok(EventOutcome::Applied(OpOutput::from_value(kind, value)?))
    }
}

//! Every operation of cairn as data: `{"op": "save", "args": {...}}`. One `execute` runs them
//! against a store. Doors build an [`Op`] and render the JSON it returns; the daemon accepts
//! them over loopback so `cairn mcp` and the CLI can forward instead of opening the database;
//! the MCP router tool exposes them as one `memory` tool.
//!
//! What each operation is called, whether it writes, its arguments and its result type are
//! listed once, in [`CATALOGUE`] (`ops/catalogue.rs`); `execute` answers an [`OpOutput`].

pub mod call_log;
mod catalogue;
pub(crate) mod events;
mod requests;
mod search_response;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::event_id::EventId;
pub use catalogue::{CATALOGUE, EventOutcome, OpKind, OpOutput, OpSpec, Request, Writes};
pub use events::{DrainTarget, drain, waits_for_the_store};
pub use requests::*;
pub use search_response::SearchResponse;

use crate::agent::{ActivityRecord, CompactionSave, ProtocolRequest, RecordSession, UserPrompt};
use crate::context::ContextRequest;
use crate::doctor::{CheckStatus, DoctorReport};
use crate::error::{CairnError, ErrorCode, Result};
use crate::history::HistoryArchive;
use crate::history::query::{
    CompactionsRequest, MessageRequest, MessagesRequest, PartRequest, SearchRequest as HistorySearchRequest,
    SessionsRequest, TurnsRequest,
};
use crate::memory::{ListFilter, NewObservation, SaveOutcome};
use crate::model::{Observation, Relation, Revision};
use crate::owners::Core;
use crate::passive::PassiveCapture;
use crate::prompts::NewPrompt;
use crate::relations::{CANDIDATE_LIMIT, Candidate, Comparison, Judgment, RelationFilter, ScanRequest};
use crate::search::{AnnotatedHit, SearchQuery};
use crate::sessions::NewSession;
use crate::settings::RuleSettings;
use crate::store::Store;

/// One operation. Names and argument fields are a stable contract (router tool, daemon RPC).
/// A new variant needs its row in [`CATALOGUE`] (`ops/catalogue.rs`), or nothing compiles.
/// Each variant holds its request type ([`Request`]), which names the answer; the ops without
/// arguments are unit variants (their JSON has no `args`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", content = "args", rename_all = "snake_case")]
pub enum Op {
    Save(SaveRequest),
    Search(SearchQuery),
    Get(GetRequest),
    Update(UpdateRequest),
    Delete(DeleteRequest),
    Restore(RestoreRequest),
    Pin(PinRequest),
    List(ListFilter),
    Context(ContextRequest),
    Timeline(TimelineRequest),
    Sessions(RecentSessionsRequest),
    StartSession(NewSession),
    SessionSummary(SessionSummaryRequest),
    EndSession(EndSessionRequest),
    GetSession(GetSessionRequest),
    DeleteSession(DeleteSessionRequest),
    AddPrompt(NewPrompt),
    RecentPrompts(RecentPromptsRequest),
    SearchPrompts(SearchPromptsRequest),
    DeletePrompt(DeletePromptRequest),
    Stats,
    /// Live memories created per day over the last `days` days (default 30), for charts.
    MemoriesPerDay(MemoriesPerDayRequest),
    Export(ExportMemoriesRequest),
    Import(ImportRequest),
    CapturePassive(PassiveCapture),
    SuggestTopicKey(SuggestTopicKeyRequest),
    Judge(Judgment),
    Compare(Comparison),
    Relations(RelationFilter),
    RelationStats(RelationStatsRequest),
    GetRelation(GetRelationRequest),
    ScanRelations(ScanRequest),
    MigrateProject(MigrateProjectRequest),
    MergeProjects(MergeProjectsRequest),
    /// Checks of the data dir and database.
    Doctor,
    /// Redact stored text that still holds private content or a secret (`crate::privacy`).
    PrivacyRewrite(PrivacyRewriteRequest),
    /// Give back the space of what is no longer needed, then rebuild the files (`crate::gc`).
    Gc(crate::gc::GcRequest),
    /// A session's activity: counts, reminders, the pending prompt (`crate::agent::activity`).
    SessionActivity(SessionActivityRequest),
    /// Record what happened in a session: `{session_id, project?, event: tool_call | save |
    /// prompt | context_injected | reminder_sent, ...}`; answers the activity after it and,
    /// where relevant, the reminder due now or the prompt attached to a save.
    RecordActivity(ActivityRecord),
    /// Queue every memory for (re-)embedding: `force` drops the stored vectors first. The
    /// daemon's background indexer does the work; poll `stats.embeddings_pending`.
    Reindex(ReindexRequest),
    /// Import an engram database file (read only; engram may be running). Idempotent.
    ImportEngram(ImportEngramRequest),
    /// Rebuild the full-text indexes of memories and prompts from their tables.
    RepairIndexes,
    /// The Memory Protocol or another agent-facing text (`crate::agent::protocol`).
    Protocol(ProtocolRequest),
    /// A user's message, from a host plugin: one round trip per prompt.
    UserPrompt(UserPrompt),
    /// The summary a host wrote when it compacted a session (one memory per session).
    SaveCompaction(CompactionSave),
    /// Revise the session's Last Session record (`crate::agent::last_session`) now.
    RecordSession(RecordSession),
    /// The user's profile: personal memories and the project's preferences.
    Profile(ProfileRequest),
    /// The plugin-facing settings (never a secret).
    PluginConfig,
    /// Conversation-history sessions of every host, newest first.
    HistorySessions(SessionsRequest),
    /// Turn previews of one session.
    HistoryBrowseTurns(TurnsRequest),
    /// A window of message previews.
    HistoryBrowseMessages(MessagesRequest),
    /// One message's parts, long ones cut.
    HistoryPullMessage(MessageRequest),
    /// One part in full, paged.
    HistoryPullPart(PartRequest),
    /// Search the history's parts.
    HistorySearch(HistorySearchRequest),
    /// The navigation chart left at a compaction.
    HistoryChart(HistoryChartRequest),
    /// A session's compactions.
    HistoryCompactions(CompactionsRequest),
    /// A session's sub-agent sessions.
    HistoryChildren(HistoryChildrenRequest),
    /// What the history archive holds, per host.
    HistoryStats,
    /// Erase one session from the history archive.
    HistoryForget(HistoryForgetRequest),
    /// Read the hosts' conversation storage now: one file, one session, or (no argument)
    /// everything (`crate::history::ingest`).
    HistoryIngest(crate::history::ingest::PokeRequest),
    /// OpenCode's saved plans: the list, or one plan's text.
    Plans(crate::history::plans::PlansRequest),
    /// How full a session's context window is, from the archive (the context meter's numbers).
    ContextUsage(crate::history::context_usage::ContextUsageRequest),
    /// A session's context use at the end of each turn, and the turns it was compacted in.
    ContextUsageTurns(ContextUsageTurnsRequest),
    /// A session starts in a host: registered, and what the host injects (one round trip).
    SessionStart(crate::agent::intent::SessionStart),
    /// One of the agent's tool calls, counted (cairn's own are not).
    ToolCall(crate::agent::intent::ToolCall),
    /// The context meter of a host's numbers: the line, the status, the compaction decisions.
    ContextMeter(crate::agent::meter::MeterRequest),
    /// Git sync: write the journal of a project (or `all` enrolled and known projects) as
    /// chunks under `directory`'s `.cairn/` (or `.engram/`), enrolling it first.
    SyncExport(crate::sync::git::ExportRequest),
    /// Git sync: apply the chunks of `directory`'s `.cairn/` and `.engram/` not applied yet.
    SyncImport(SyncImportRequest),
    /// Sync status: enrolled projects, targets and pending counts, `directory`'s chunk folders.
    SyncStatus(SyncStatusRequest),
    /// Where extraction stands: what models wrote, the conversations failing and when each is
    /// retried (`crate::extract`; `cairn llm status` shows it).
    ExtractionStatus,
}

/// A save, optionally looking for memories it may duplicate or contradict.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaveRequest {
    #[serde(flatten)]
    pub observation: NewObservation,
    #[serde(default)]
    pub find_candidates: bool,
    /// The agent's session to count the save in, in the save's own transaction (an agent's
    /// `mem_save`); absent for a save nobody's session counts.
    #[serde(default)]
    pub activity: Option<crate::agent::SaveActivity>,
}

/// The answer to a save.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SaveResponse {
    #[serde(flatten)]
    pub outcome: SaveOutcome,
    /// Look-alikes, when `find_candidates` was set.
    pub candidates: Vec<Candidate>,
    /// The session's activity after the save, when the request named one it was counted in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity: Option<crate::agent::ActivityUpdate>,
}

impl Op {
    /// Whether the operation writes the memory store: the daemon sends those to its one writer
    /// connection.
    pub fn writes_memory_store(&self) -> bool {
        self.spec().writes == Writes::MemoryStore
    }

    /// Whether running it again is harmless: the daemon client replays only these when an
    /// answer was lost.
    pub fn is_replay_safe(&self) -> bool {
        self.spec().replay_safe
    }

    /// The operation's name (`save`, `search`...): its `op` tag.
    pub fn name(&self) -> &'static str {
        self.spec().name
    }

    /// This operation's catalogue row.
    pub fn spec(&self) -> &'static OpSpec {
        self.kind().spec()
    }

    /// Parse `{"op": ..., "args": ...}` with an error that names what is wrong.
    /// Operations without arguments (`stats`, `plugin_config`) also take `"args": {}` or
    /// `null`, which generic clients send for "no arguments".
    pub fn from_value(mut value: Value) -> Result<Op> {
        let name = value.get("op").and_then(Value::as_str).map(str::to_owned);
        let takes_none = name.as_deref().and_then(OpSpec::named).is_some_and(|spec| spec.args == "-");
        let empty = |args: &Value| args.is_null() || args.as_object().is_some_and(serde_json::Map::is_empty);
        if takes_none && value.get("args").is_some_and(empty) {
            value.as_object_mut().map(|o| o.remove("args"));
        }
        serde_json::from_value(value).map_err(|e| {
            let what = name.map_or_else(|| "the operation".to_owned(), |n| format!("arguments of {n:?}"));
            CairnError::invalid(format!("{what}: {e}"))
                .with_hint("send {\"op\": NAME, \"args\": {...}}; see the `memory` tool's description for names")
        })
    }
}

/// The archive as `session_start` reads it after a compaction: through the history ops.
impl crate::agent::intent::SessionArchive for HistoryArchive {
    fn ingest(&mut self, rules: &RuleSettings, poke: crate::history::ingest::PokeRequest) -> Result<()> {
        run_history_op(self, rules, Op::HistoryIngest(poke)).map(drop)
    }

    fn chart(&mut self, rules: &RuleSettings, session_id: &str) -> Result<String> {
        let output = run_history_op(self, rules, Op::HistoryChart(HistoryChartRequest::new(session_id)))?;
        Ok(HistoryChartRequest::output(output)?.chart)
    }
}

/// Run an operation against the core's context; its typed result.
pub fn execute(core: &mut Core, op: Op) -> Result<OpOutput> {
    refuse_nul_in_writes(&op)?;
    Ok(match op {
        Op::Search(q) => OpOutput::Search(search(core, &q)?),
        Op::Context(req) => OpOutput::Context(core.context(&req)?),
        Op::Stats => OpOutput::Stats(core.stats()?),
        Op::Reindex(ReindexRequest { force }) => OpOutput::Reindex(reindex(core, force)?),
        Op::Gc(req) => OpOutput::Gc(core.gc(&req)?),
        Op::UserPrompt(prompt) => OpOutput::UserPrompt(core.user_prompt_op(&prompt)?),
        Op::SessionStart(req) => OpOutput::SessionStart(core.session_start(&req)?),
        Op::ContextMeter(req) => {
            OpOutput::ContextMeter(crate::agent::meter::context_meter(&req, &core.settings.plugin)?)
        }
        Op::PluginConfig => OpOutput::PluginConfig(core.settings.plugin_config()),
        Op::Save(req) => OpOutput::Save(save(core, &req)?),
        // The model lives in the daemon's engine, which runs a semantic scan itself (off the
        // writer); a store alone has none.
        Op::ScanRelations(req) if req.semantic => return Err(crate::relations::judge::no_model_here()),
        Op::ScanRelations(req) => OpOutput::ScanRelations(core.store.scan_relations(&req, core.index.as_ref())?),
        other => {
            let Core { store, history, settings, .. } = core;
            execute_on_store(store, history, settings, other)?
        }
    })
}

/// Run a request against the core's context; its answer, typed by the request.
pub fn execute_request<R: Request>(core: &mut Core, request: R) -> Result<R::Output> {
    R::output(execute(core, request.into_op())?)
}

/// A write whose text holds a NUL character (U+0000) is refused before it runs, the field
/// named (`content`, `observations[2].title`): every door's write passes here, so none stores
/// one (no hub could take it). Reads store nothing, and the names a write only looks up (the
/// session to end or delete, the project to rename) are not checked: a row stored with a NUL
/// before this rule stays reachable, to be cleaned up.
fn refuse_nul_in_writes(op: &Op) -> Result<()> {
    use crate::text::refuse_nul;
    if op.spec().writes == Writes::Nothing {
        return Ok(());
    }
    match op {
        Op::DeleteSession(DeleteSessionRequest { .. }) | Op::HistoryForget(_) => Ok(()),
        Op::EndSession(EndSessionRequest { summary, .. }) => {
            summary.as_deref().map_or(Ok(()), |s| refuse_nul("summary", s))
        }
        Op::MigrateProject(MigrateProjectRequest { new_project, .. }) => refuse_nul("new_project", new_project),
        Op::MergeProjects(MergeProjectsRequest { to, .. }) => refuse_nul("to", to),
        Op::Import(ImportRequest { data }) => crate::text::refuse_nul_in_json("", data),
        // An op that does not serialise holds a path that is not UTF-8, and no text.
        other => serde_json::to_value(other).map_or(Ok(()), |op| crate::text::refuse_nul_in_json("", &op["args"])),
    }
}

/// The operations the memory store answers alone, and the history archive's.
fn execute_on_store(
    store: &mut Store,
    history: &mut HistoryArchive,
    settings: &RuleSettings,
    op: Op,
) -> Result<OpOutput> {
    Ok(match op {
        Op::Get(GetRequest { id, revisions }) => OpOutput::Get(get(store, id, revisions)?),
        Op::Update(UpdateRequest { id, patch }) => OpOutput::Update(store.update(id, &patch)?),
        Op::Delete(DeleteRequest { id, hard }) => {
            store.delete(id, hard)?;
            OpOutput::Delete(DeleteResponse { id, status: DELETED.into(), hard_delete: hard })
        }
        Op::Restore(RestoreRequest { id }) => OpOutput::Restore(store.restore(id)?),
        Op::Pin(PinRequest { id, pinned }) => OpOutput::Pin(store.set_pinned(id, pinned)?),
        Op::List(filter) => OpOutput::List(store.list(&ListFilter { limit: clamp(filter.limit, 20), ..filter })?),
        Op::Timeline(TimelineRequest { id, before, after }) => {
            OpOutput::Timeline(store.timeline(id, before.min(50), after.min(50))?)
        }
        Op::Sessions(RecentSessionsRequest { project, limit, include_children }) => {
            OpOutput::Sessions(store.recent_sessions(project.as_deref(), clamp(limit, 5), include_children)?)
        }
        Op::StartSession(new) => OpOutput::StartSession(store.start_session(&new)?),
        Op::SessionSummary(SessionSummaryRequest { content, session_id, project }) => {
            OpOutput::SessionSummary(store.save_session_summary(session_id.as_deref(), project.as_deref(), &content)?)
        }
        Op::EndSession(EndSessionRequest { id, summary, keep_activity }) => {
            let ended = store.end_session(&id, summary.as_deref())?;
            // The next session's "Last Session": what this one did, as of now.
            store.record_session_quietly(&id, false, history);
            // The next session under this id counts from zero (engram clears its counters),
            // unless the host goes on with this one.
            if !keep_activity {
                store.clear_activity(&id)?;
            }
            OpOutput::EndSession(ended)
        }
        Op::GetSession(GetSessionRequest { id }) => OpOutput::GetSession(store.get_session(&id)?),
        Op::DeleteSession(DeleteSessionRequest { id }) => {
            store.delete_session(&id)?;
            OpOutput::DeleteSession(Deleted { id, status: DELETED.into() })
        }
        Op::AddPrompt(new) => OpOutput::AddPrompt(store.add_prompt(&new)?),
        Op::RecentPrompts(RecentPromptsRequest { project, limit }) => {
            OpOutput::RecentPrompts(store.recent_prompts(project.as_deref(), clamp(limit, 20))?)
        }
        Op::SearchPrompts(SearchPromptsRequest { query, project, limit }) => {
            OpOutput::SearchPrompts(store.search_prompts(&query, project.as_deref(), limit)?)
        }
        Op::DeletePrompt(DeletePromptRequest { id }) => {
            store.delete_prompt(id)?;
            OpOutput::DeletePrompt(Deleted { id, status: DELETED.into() })
        }
        Op::MemoriesPerDay(MemoriesPerDayRequest { project, days }) => {
            OpOutput::MemoriesPerDay(store.memories_per_day(crate::agent::given_str(project.as_deref()), days)?)
        }
        Op::Export(ExportMemoriesRequest { project }) => OpOutput::Export(store.export(project.as_deref())?),
        Op::Import(ImportRequest { data }) => OpOutput::Import(store.import_bytes(&serde_json::to_vec(&data)?)?),
        Op::CapturePassive(capture) => OpOutput::CapturePassive(store.capture_passive(&capture)?),
        Op::SuggestTopicKey(SuggestTopicKeyRequest { kind, title, content }) => {
            OpOutput::SuggestTopicKey(suggest_topic_key(kind.as_deref(), &title, &content)?)
        }
        Op::Judge(j) => OpOutput::Judge(JudgeResponse { relation: store.judge(&j)? }),
        Op::Compare(c) => {
            let relation = store.compare(&c)?;
            OpOutput::Compare(CompareResponse { sync_id: relation.sync_id.clone(), relation })
        }
        Op::Relations(filter) => OpOutput::Relations(store.list_relations(&filter)?),
        Op::RelationStats(RelationStatsRequest { project }) => {
            OpOutput::RelationStats(store.relation_stats(project.as_deref())?)
        }
        Op::GetRelation(GetRelationRequest { id }) => OpOutput::GetRelation(store.relation_detail(id)?),
        Op::MigrateProject(MigrateProjectRequest { old_project, new_project }) => {
            OpOutput::MigrateProject(store.migrate_project(&old_project, &new_project)?)
        }
        Op::MergeProjects(MergeProjectsRequest { from, to }) => {
            OpOutput::MergeProjects(store.merge_projects(&from, &to)?)
        }
        Op::ImportEngram(ImportEngramRequest { path }) => OpOutput::ImportEngram(store.import_engram_db(&path)?),
        Op::RepairIndexes => {
            store.rebuild_fts()?;
            store.rewrite_stats_counts()?;
            OpOutput::RepairIndexes(RepairReport {
                rebuilt: vec!["observations_fts".into(), "prompts_fts".into(), "stats_counts".into()],
            })
        }
        Op::SessionActivity(SessionActivityRequest { session_id }) => {
            OpOutput::SessionActivity(store.session_activity(&session_id)?)
        }
        Op::RecordActivity(record) => OpOutput::RecordActivity(store.record_activity(&record)?),
        Op::Doctor => OpOutput::Doctor(doctor(store)),
        Op::PrivacyRewrite(PrivacyRewriteRequest { dry_run }) => {
            OpOutput::PrivacyRewrite(store.privacy_rewrite(dry_run)?)
        }
        Op::Protocol(req) => OpOutput::Protocol(crate::agent::protocol::protocol_checked(req)?),
        Op::SaveCompaction(summary) => {
            let saved = store.save_compaction(&summary)?;
            store.record_session_quietly(&summary.session_id, true, history);
            OpOutput::SaveCompaction(saved)
        }
        Op::RecordSession(req) => OpOutput::RecordSession(store.record_session(&req, history)?),
        Op::ToolCall(call) => OpOutput::ToolCall(store.tool_call(&call)?),
        Op::SyncExport(req) => OpOutput::SyncExport(store.sync_export_request(&req)?),
        Op::SyncImport(SyncImportRequest { directory, time_limit_ms }) => {
            OpOutput::SyncImport(store.sync_import(&directory, time_limit_ms.map(std::time::Duration::from_millis))?)
        }
        Op::SyncStatus(SyncStatusRequest { directory }) => {
            OpOutput::SyncStatus(store.sync_status(directory.as_deref())?)
        }
        Op::ExtractionStatus => OpOutput::ExtractionStatus(store.extraction_status()?),
        Op::Profile(ProfileRequest { project, limit }) => OpOutput::Profile(store.profile(project.as_deref(), limit)?),
        history_op => run_history_op(history, settings, history_op)?,
    })
}

/// The history ops: reads and the one erase of `history.db` (through its own owner, not the
/// memory store's writer), with the `[history]` settings of `rules` under the read session's
/// project override; each call logged when `debug_log_tool_calls` is on.
fn run_history_op(history: &mut HistoryArchive, rules: &RuleSettings, op: Op) -> Result<OpOutput> {
    let global = &rules.history;
    if !global.debug_log_tool_calls {
        return run_history(history, rules, op);
    }
    let started = std::time::Instant::now();
    let (name, args) = (op.name(), serde_json::to_value(&op).map(|v| v["args"].clone()).unwrap_or_default());
    let result = run_history(history, rules, op);
    if let Some(dir) = history.data_dir() {
        call_log::append(dir, name, &args, &result, started.elapsed());
    }
    result
}

fn run_history(history: &mut HistoryArchive, rules: &RuleSettings, op: Op) -> Result<OpOutput> {
    use crate::history::query as q;
    let meter = rules.plugin.context_meter.clone();
    let dir = {
        let db = history.db()?;
        history_session_of(&op).and_then(|id| db.session_directory(id))
    };
    let cfg = match dir {
        Some(dir) => history.settings_for(&rules.history, &dir)?,
        None => rules.history.clone(),
    };
    let db = history.db()?;
    Ok(match op {
        Op::HistorySessions(req) => OpOutput::HistorySessions(q::sessions(db, &req)?),
        Op::HistoryBrowseTurns(req) => OpOutput::HistoryBrowseTurns(q::browse_turns(db, &req, &cfg)?),
        Op::HistoryBrowseMessages(req) => OpOutput::HistoryBrowseMessages(q::browse_messages(db, &req, &cfg)?),
        Op::HistoryPullMessage(req) => OpOutput::HistoryPullMessage(q::pull_message(db, &req, &cfg)?),
        Op::HistoryPullPart(req) => OpOutput::HistoryPullPart(q::pull_part(db, &req)?),
        Op::HistorySearch(req) => OpOutput::HistorySearch(q::search(db, &req, &cfg)?),
        Op::HistoryChart(HistoryChartRequest(req)) => OpOutput::HistoryChart(q::chart(db, &req.session_id, &cfg)?),
        Op::HistoryCompactions(req) => OpOutput::HistoryCompactions(q::compactions(db, &req)?),
        Op::HistoryChildren(HistoryChildrenRequest(req)) => {
            OpOutput::HistoryChildren(q::children(db, &req.session_id)?)
        }
        Op::HistoryStats => OpOutput::HistoryStats(q::stats(db)?),
        Op::HistoryForget(HistoryForgetRequest(req)) => OpOutput::HistoryForget(q::forget(db, &req.session_id)?),
        Op::HistoryIngest(req) => {
            use crate::history::ingest::{check_host_source, poke, process_env};
            // blank fields are absent ones, as in every other op
            let req = crate::history::ingest::PokeRequest {
                path: req.path.filter(|p| !p.as_os_str().to_string_lossy().trim().is_empty()),
                session_id: crate::agent::given(req.session_id),
                ..req
            };
            check_host_source(&process_env, &req)?;
            OpOutput::HistoryIngest(poke(db, &process_env, &req)?)
        }
        Op::Plans(req) => {
            refresh_session(db, req.session_id.as_deref());
            OpOutput::Plans(plans(db, &req)?)
        }
        Op::ContextUsage(req) => {
            refresh_session(db, req.session_id.as_deref().or(req.caller_session_id.as_deref()));
            OpOutput::ContextUsage(crate::history::context_usage::context_usage(db, &req, &meter)?)
        }
        Op::ContextUsageTurns(ContextUsageTurnsRequest(req)) => {
            refresh_session(db, Some(&req.session_id));
            OpOutput::ContextUsageTurns(crate::history::context_usage::context_usage_turns(
                db,
                &req.session_id,
                &meter,
            )?)
        }
        other => return Err(CairnError::internal(format!("{} is not a history op", other.name()))),
    })
}

/// How long an op that wants its session fresh may spend reading the host's files first.
const REFRESH_BUDGET: std::time::Duration = std::time::Duration::from_millis(300);

/// Read what the host wrote to a session since the last poke, before an op that measures it:
/// an agent asking mid-session for its context usage wants its last answer counted, and `plans`
/// finds a new session's project through its archived directory. Best effort (~1 ms when
/// little is new), within [`REFRESH_BUDGET`] (a first read of a large host database is a
/// backfill, which the daemon's scan finishes): a session no host has, or a host file that cannot
/// be read, leaves the archive as it is, and the op answers from that.
fn refresh_session(db: &mut crate::history::HistoryDb, session_id: Option<&str>) {
    use crate::history::ingest::{PokeRequest, check_host_source, poke_until, process_env};
    let Some(id) = crate::agent::given_str(session_id) else { return };
    let req = PokeRequest { host: None, path: None, session_id: Some(id.trim().to_owned()) };
    let deadline = std::time::Instant::now() + REFRESH_BUDGET;
    if check_host_source(&process_env, &req).is_ok()
        && let Err(err) = poke_until(db, &process_env, &req, &|| std::time::Instant::now() >= deadline)
    {
        tracing::debug!(session = id, error = %err, "refreshing a session before measuring it");
    }
}

/// `plans`: OpenCode's global plans, and the project's of `directory`, else of the session's
/// archived directory.
fn plans(
    db: &crate::history::HistoryDb,
    req: &crate::history::plans::PlansRequest,
) -> Result<crate::history::plans::Plans> {
    use crate::history::plans as p;
    if let Some(id) = crate::agent::given_str(req.session_id.as_deref()) {
        crate::history::query::check_id("session_id", id.trim())?;
    }
    let directory = req
        .directory
        .clone()
        .filter(|d| !d.as_os_str().to_string_lossy().trim().is_empty())
        .or_else(|| crate::agent::given(req.session_id.clone()).and_then(|id| db.session_directory(&id)));
    let dirs = p::plan_dirs(&crate::history::ingest::process_env, directory.as_deref());
    p::plans(&dirs, req.read.as_deref())
}

/// The session whose project's `[history]` override applies to a history op.
fn history_session_of(op: &Op) -> Option<&str> {
    match op {
        Op::HistoryBrowseTurns(r) => Some(&r.session_id),
        Op::HistoryBrowseMessages(r) => Some(&r.session_id),
        Op::HistoryPullMessage(r) => Some(&r.session_id),
        Op::HistoryPullPart(r) => Some(&r.session_id),
        Op::HistoryChart(r) => Some(&r.0.session_id),
        Op::HistorySearch(r) => r.session_id.as_deref().or(r.caller_session_id.as_deref()),
        _ => None,
    }
}

/// Run an operation; its result as the JSON the doors send (tests compare JSON; doors get
/// the typed [`OpOutput`] and turn it into JSON at their edge).
#[cfg(test)]
pub(crate) fn execute_value(core: &mut Core, op: Op) -> Result<Value> {
    execute(core, op)?.into_value()
}

const DELETED: &str = "deleted";

/// The answer to `delete`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteResponse {
    pub id: i64,
    /// Always `deleted`.
    pub status: String,
    pub hard_delete: bool,
}

/// The answer to `delete_session` (`Deleted<String>`) and `delete_prompt` (`Deleted<i64>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deleted<Id> {
    pub id: Id,
    /// Always `deleted`.
    pub status: String,
}

/// The answer to `get`: the memory, and its revisions when they were asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetResponse {
    #[serde(flatten)]
    pub observation: Observation,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revisions: Option<Vec<Revision>>,
    /// Where a memory a model wrote came from (extraction); absent for one an agent saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<crate::extract::Provenance>,
}

/// The answer to `suggest_topic_key`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicKeySuggestion {
    pub topic_key: String,
}

/// The answer to `judge`: the relation as decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeResponse {
    pub relation: Relation,
}

/// The answer to `compare`: the recorded relation, and its sync id up front.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareResponse {
    pub sync_id: String,
    pub relation: Relation,
}

fn get(store: &Store, id: i64, revisions: bool) -> Result<GetResponse> {
    let observation = store.get(id)?;
    let revisions = if revisions { Some(store.revisions(id)?) } else { None };
    let provenance = store.provenance(id)?;
    Ok(GetResponse { observation, revisions, provenance })
}

/// Op `suggest_topic_key` (the CLI's `suggest-topic` calls it directly: it needs no store).
pub fn suggest_topic_key(kind: Option<&str>, title: &str, content: &str) -> Result<TopicKeySuggestion> {
    if title.trim().is_empty() && content.trim().is_empty() {
        return Err(CairnError::empty("title or content"));
    }
    Ok(TopicKeySuggestion { topic_key: crate::topic::suggest_topic_key(kind, title, content) })
}

/// The checks of the store's data dir; an in-memory store has none to run.
fn doctor(store: &Store) -> DoctorReport {
    match store.path().and_then(std::path::Path::parent) {
        Some(dir) => crate::doctor::run(dir),
        None => DoctorReport { status: CheckStatus::Ok, checks: Vec::new() },
    }
}

/// Listing sizes: a default for 0, at most 500.
fn clamp(limit: usize, default: usize) -> usize {
    if limit == 0 { default } else { limit.min(500) }
}

/// A save, and with `find_candidates` its look-alikes, ranked on the daemon's index when it has
/// one (FTS5 took ~1 s a save at a million memories).
fn save(core: &mut Core, req: &SaveRequest) -> Result<SaveResponse> {
    let Core { store, index, .. } = core;
    let (outcome, activity) = match &req.activity {
        Some(session) => store.save_counted(&req.observation, session)?,
        None => (store.save(&req.observation)?, None),
    };
    // Looking for look-alikes is advice: it never fails a save that already happened.
    let candidates = if req.find_candidates && outcome.action == crate::memory::SaveAction::Created {
        store.find_candidates(outcome.id, CANDIDATE_LIMIT, true, index.as_ref()).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "relation candidate search failed");
            Vec::new()
        })
    } else {
        Vec::new()
    };
    Ok(SaveResponse { outcome, candidates, activity })
}

/// What `repair_indexes` rebuilt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RepairReport {
    /// The full-text indexes rebuilt from their tables.
    pub rebuilt: Vec<String>,
}

/// What `reindex` queued.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReindexReport {
    pub model: Option<String>,
    /// Vectors dropped (with `force`).
    pub cleared: usize,
    /// Memories waiting for a vector now.
    pub pending: i64,
}

fn reindex(core: &mut Core, force: bool) -> Result<ReindexReport> {
    let store = &mut core.store;
    let Some(semantic) = core.semantic.clone() else {
        return Err(CairnError::new(ErrorCode::ModelMissing, "semantic search is off: there is no embedding model")
            .with_hint("run `cairn model install`, or configure an endpoint (CAIRN_EMBEDDER=http)"));
    };
    let cleared =
        if force { store.clear_embeddings(None)? } else { store.clear_embeddings(Some(semantic.model_id()))? };
    if force {
        semantic.forget_all();
    }
    let pending = store.count_pending_embeddings(semantic.model_id())?;
    Ok(ReindexReport { model: Some(semantic.model_id().to_owned()), cleared, pending })
}

fn search(core: &Core, q: &SearchQuery) -> Result<SearchResponse> {
    let mut results = core.search(q)?;
    // Deep recall needs a model, which only the daemon's engine holds (it runs deep searches
    // itself, `cairn_engine::deep`): here the first stage answers and says so.
    let deep = (q.deep == Some(true)).then(|| crate::search::deep::DeepReport::no_model(0));
    results.notices.extend(deep.as_ref().and_then(crate::search::deep::DeepReport::notice));
    let ids: Vec<String> = results.hits.iter().map(|h| h.observation.sync_id.clone()).collect();
    let mut notes = core.store.relation_annotations(&ids)?;
    let hits = results
        .hits
        .into_iter()
        .map(|hit| AnnotatedHit { annotations: notes.remove(&hit.observation.sync_id).unwrap_or_default(), hit })
        .collect();
    Ok(SearchResponse { hits, notices: results.notices, mode: Some(results.mode), deep })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ops_round_trip_as_op_args() {
        let mut s = Core::new(Store::open_in_memory().unwrap());
        let save =
            Op::from_value(json!({"op": "save", "args": {"title": "t", "content": "c", "project": "p"}})).unwrap();
        assert!(save.writes_memory_store() && !save.is_replay_safe());
        assert_eq!(save.name(), "save");
        let saved = execute_value(&mut s, save).unwrap();
        assert_eq!(saved["id"], 1);
        let search = Op::from_value(json!({"op": "search", "args": {"query": "t", "project": "p"}})).unwrap();
        let found = execute_value(&mut s, search).unwrap();
        assert_eq!(found["hits"][0]["id"], 1);
        let patched = Op::from_value(json!({"op": "update", "args": {"id": 1, "title": "new"}})).unwrap();
        assert_eq!(execute_value(&mut s, patched).unwrap()["title"], "new");
        assert!(!Op::Stats.writes_memory_store() && Op::Stats.is_replay_safe());
    }

    /// A NUL in text a write would store is refused, the field named, nothing stored; a
    /// project named with one before the rule (stored here straight through the store) can
    /// still be renamed, and its session ended.
    #[test]
    fn a_nul_in_stored_text_is_refused_and_old_rows_holding_one_stay_reachable() {
        let mut core = Core::new(Store::open_in_memory().unwrap());
        let refused = execute(
            &mut core,
            Op::from_value(json!({"op": "save", "args": {"title": "t", "content": "a\u{0}b"}})).unwrap(),
        );
        let err = refused.unwrap_err();
        assert_eq!(
            (err.code, err.message.starts_with("content holds a NUL")),
            (ErrorCode::NulCharacter, true),
            "{err:?}"
        );
        let session =
            NewSession { id: "old-session".into(), project: Some("old\0project".into()), ..NewSession::default() };
        core.store.start_session(&session).unwrap();
        let saved = crate::testutil::obs("old\0project", "kept", "stored before the rule");
        core.store.save(&NewObservation { session_id: Some(session.id.clone()), ..saved }).unwrap();
        let rename = Op::MigrateProject(MigrateProjectRequest {
            old_project: "old\0project".into(),
            new_project: "clean\0".into(),
        });
        assert_eq!(execute(&mut core, rename).unwrap_err().code, ErrorCode::NulCharacter);
        execute(
            &mut core,
            Op::MigrateProject(MigrateProjectRequest {
                old_project: "old\0project".into(),
                new_project: "clean".into(),
            }),
        )
        .unwrap();
        let end = |summary: &str| {
            Op::EndSession(EndSessionRequest {
                id: session.id.clone(),
                summary: Some(summary.into()),
                keep_activity: false,
            })
        };
        assert_eq!(execute(&mut core, end("s\0")).unwrap_err().code, ErrorCode::NulCharacter);
        execute(&mut core, end("done")).unwrap();
        // The old memory, now in `clean`, and the session's summary; nothing of the refusals.
        let stats = core.store.stats().unwrap();
        assert_eq!((stats.total_observations, stats.by_project.len()), (2, 1), "{stats:?}");
    }

    #[test]
    fn bad_ops_name_the_problem() {
        let err = Op::from_value(json!({"op": "save", "args": {"title": 3}})).unwrap_err();
        assert!(err.message.contains("\"save\""), "{}", err.message);
        assert!(Op::from_value(json!({"op": "frobnicate"})).is_err());
        assert!(Op::from_value(json!([])).is_err());
    }

    /// The smallest arguments each operation accepts (`None`: it takes no `args` at all).
    /// A `match`, so a new operation needs an example here too.
    fn minimal_args(kind: OpKind) -> Option<Value> {
        use OpKind as K;
        Some(match kind {
            K::Save => json!({"title": "t", "content": "c"}),
            K::Search | K::SearchPrompts => json!({"query": "q"}),
            K::Get | K::Update | K::Delete | K::Restore | K::Pin | K::Timeline | K::DeletePrompt | K::GetRelation => {
                json!({"id": 1})
            }
            K::StartSession | K::EndSession | K::GetSession | K::DeleteSession => json!({"id": "s"}),
            K::SessionSummary | K::AddPrompt | K::CapturePassive => json!({"content": "c"}),
            K::List
            | K::Context
            | K::Sessions
            | K::RecentPrompts
            | K::Export
            | K::SuggestTopicKey
            | K::Relations
            | K::RelationStats
            | K::MemoriesPerDay
            | K::Reindex => json!({}),
            K::Import => json!({"data": {}}),
            K::ImportEngram => json!({"path": "/nonexistent/engram.db"}),
            K::Judge => json!({"judgment_id": "j", "relation": "related"}),
            K::Compare => json!({
                "memory_id_a": 1, "memory_id_b": 2, "relation": "related", "confidence": 0.5, "reasoning": "r"
            }),
            K::ScanRelations => json!({"project": "p"}),
            K::MigrateProject => json!({"old_project": "a", "new_project": "b"}),
            K::MergeProjects => json!({"from": ["a"], "to": "b"}),
            K::SessionActivity => json!({"session_id": "s"}),
            K::Protocol | K::Profile => json!({}),
            K::UserPrompt => json!({"session_id": "s", "content": "c"}),
            K::SaveCompaction => json!({"session_id": "s", "summary": "c"}),
            K::RecordSession => json!({"session_id": "s"}),
            K::RecordActivity => json!({"session_id": "s", "event": "tool_call"}),
            K::HistorySessions => json!({}),
            K::HistoryBrowseTurns
            | K::HistoryBrowseMessages
            | K::HistoryChart
            | K::HistoryCompactions
            | K::HistoryChildren
            | K::HistoryForget
            | K::ContextUsageTurns => json!({"session_id": "s"}),
            K::HistoryPullMessage => json!({"session_id": "s", "message_id": "m"}),
            K::HistoryPullPart => json!({"session_id": "s", "message_id": "m", "part_id": "p"}),
            K::HistorySearch => json!({"query": "q"}),
            K::HistoryIngest | K::Plans | K::ContextUsage => json!({}),
            K::SessionStart => json!({"session_id": "s"}),
            K::ToolCall => json!({"session_id": "s", "tool": "Bash"}),
            K::ContextMeter => json!({"used": 1}),
            K::SyncExport | K::SyncImport => json!({"directory": "/nonexistent/repo"}),
            K::SyncStatus => json!({}),
            K::PrivacyRewrite | K::Gc => json!({"dry_run": true}),
            K::Stats | K::Doctor | K::PluginConfig | K::HistoryStats | K::RepairIndexes | K::ExtractionStatus => {
                return None;
            }
        })
    }

    #[test]
    fn every_catalogue_name_is_the_serde_tag_of_its_op() {
        for spec in CATALOGUE {
            let args = minimal_args(spec.kind);
            for required in spec.required_args() {
                let given = args.as_ref().and_then(|a| a.get(required));
                assert!(given.is_some(), "{}: the hint's required {required:?} is not in the example", spec.name);
            }
            let request = match args {
                Some(args) => json!({"op": spec.name, "args": args}),
                None => json!({"op": spec.name}),
            };
            let op = Op::from_value(request).unwrap_or_else(|e| panic!("{}: {}", spec.name, e.message));
            assert_eq!(op.kind(), spec.kind, "{}", spec.name);
            assert_eq!(op.name(), spec.name);
            assert_eq!(serde_json::to_value(&op).unwrap()["op"], spec.name);
        }
    }

    #[test]
    fn the_catalogue_has_one_row_per_kind_in_order() {
        for (i, spec) in CATALOGUE.iter().enumerate() {
            assert_eq!(spec.kind as usize, i, "{}", spec.name);
            assert_eq!(OpSpec::named(spec.name), Some(spec));
            assert!(!spec.about.is_empty() && !spec.args.is_empty(), "{}", spec.name);
        }
        assert_eq!(OpSpec::named("frobnicate"), None);
        let required: Vec<_> = OpKind::RecordActivity.spec().required_args().collect();
        assert_eq!(required, ["session_id", "event"]);
    }

    /// The daemon client replays an operation whose answer was lost only when that is
    /// harmless: every read, and the history archive's writes, which repeat to the same end.
    #[test]
    fn the_replay_safe_ops_are_the_reads_and_the_history_archives_writes() {
        let named = |keep: fn(&OpSpec) -> bool| -> Vec<&'static str> {
            CATALOGUE.iter().filter(|spec| keep(spec)).map(|spec| spec.name).collect()
        };
        let reads = [
            "search",
            "get",
            "list",
            "context",
            "timeline",
            "sessions",
            "get_session",
            "recent_prompts",
            "search_prompts",
            "stats",
            "memories_per_day",
            "export",
            "suggest_topic_key",
            "relations",
            "relation_stats",
            "get_relation",
            "doctor",
            "session_activity",
            "protocol",
            "profile",
            "plugin_config",
            "history_sessions",
            "history_browse_turns",
            "history_browse_messages",
            "history_pull_message",
            "history_pull_part",
            "history_search",
            "history_chart",
            "history_compactions",
            "history_children",
            "history_stats",
            "plans",
            "context_usage",
            "context_usage_turns",
            "context_meter",
            "sync_status",
            "extraction_status",
        ];
        assert_eq!(named(|spec| spec.writes == Writes::Nothing), reads);
        // history.db is written through its own owner (`HistoryArchive`), never the memory store's writer: a
        // replayed `history_forget` answers history_session_not_found, changing nothing, and a
        // replayed `history_ingest` reads nothing new from the hosts' files.
        assert_eq!(named(|spec| spec.writes == Writes::HistoryArchive), ["history_forget", "history_ingest"]);
        // No write to the memory store is replayed: it may have been committed already.
        assert_eq!(named(|spec| spec.replay_safe), named(|spec| spec.writes != Writes::MemoryStore));
    }

    #[test]
    fn typed_results_serialise_to_the_same_json() {
        let mut s = Core::new(Store::open_in_memory().unwrap());
        let save = Op::Save(SaveRequest {
            observation: NewObservation { title: "t".into(), content: "c".into(), ..Default::default() },
            ..SaveRequest::default()
        });
        let saved = execute(&mut s, save).unwrap();
        assert_eq!(saved.kind(), OpKind::Save);
        let decoded = OpOutput::from_value(OpKind::Save, saved.clone().into_value().unwrap()).unwrap();
        assert_eq!(decoded, saved);
        let OpOutput::Save(saved) = saved else { panic!("not a save") };
        let id = saved.outcome.id;
        let plain = execute_value(&mut s, Op::Get(GetRequest { id, revisions: false })).unwrap();
        assert!(plain.get("revisions").is_none() && plain["id"] == id);
        let with_revisions = execute_value(&mut s, Op::Get(GetRequest { id, revisions: true })).unwrap();
        assert!(with_revisions["revisions"].is_array());
        let key = Op::SuggestTopicKey(SuggestTopicKeyRequest {
            kind: None,
            title: "Auth bug".into(),
            content: String::new(),
        });
        assert!(execute_value(&mut s, key).unwrap()["topic_key"].is_string());
        assert_eq!(execute_value(&mut s, Op::Doctor).unwrap(), json!({"status": "ok", "checks": []}));
        assert_eq!(
            execute_value(&mut s, Op::Delete(DeleteRequest { id, hard: false })).unwrap(),
            json!({"id": id, "status": "deleted", "hard_delete": false})
        );
    }

    /// A request gets its own answer back typed; an answer to another op is an internal error
    /// naming both (only a broken executor could pair them: the types rule it out elsewhere).
    #[test]
    fn a_request_takes_its_answer_and_refuses_another_ops() {
        let mut core = Core::new(Store::open_in_memory().unwrap());
        let stats = execute_request(&mut core, StatsRequest).unwrap();
        assert_eq!(stats.total_observations, 0);
        let err = GetRequest::output(OpOutput::Stats(stats)).unwrap_err();
        assert_eq!(err.code, ErrorCode::Internal);
        assert!(err.message.contains("`get`") && err.message.contains("`stats`"), "{}", err.message);
    }

    /// `search` answers each hit with its relation notes; its JSON keeps the shape it had
    /// (bare hits, the notes in `annotations` by sync id, only for hits that have some), and
    /// reading that JSON puts the notes back on their hits.
    #[test]
    fn search_hits_carry_their_notes_and_the_json_keeps_the_map() {
        let mut core = Core::new(Store::open_in_memory().unwrap());
        let save = |core: &mut Core, title: &str| {
            let observation = crate::testutil::obs("p", title, &format!("{title}: pool settings"));
            execute_request(core, SaveRequest { observation, ..SaveRequest::default() }).unwrap().outcome
        };
        let (old, new, alone) =
            (save(&mut core, "old zanzibar"), save(&mut core, "new zanzibar"), save(&mut core, "lone zanzibar"));
        let verdict = Comparison {
            memory_id_a: new.id,
            memory_id_b: old.id,
            relation: "supersedes".into(),
            confidence: 0.9,
            reasoning: "newer".into(),
            model: None,
        };
        execute_request(&mut core, verdict).unwrap();
        let found = execute_request(&mut core, SearchQuery::new("zanzibar")).unwrap();
        let notes = |id: i64| found.hits.iter().find(|h| h.hit.observation.id == id).unwrap().annotations.clone();
        assert!(notes(new.id)[0].starts_with("supersedes: "), "{:?}", notes(new.id));
        assert!(notes(old.id)[0].starts_with("superseded_by: "), "{:?}", notes(old.id));
        assert!(notes(alone.id).is_empty());

        let json = OpOutput::Search(found.clone()).into_value().unwrap();
        assert!(json["hits"].as_array().unwrap().iter().all(|hit| hit.get("annotations").is_none()));
        let map = json["annotations"].as_object().unwrap();
        assert_eq!(map.len(), 2, "only hits with notes: {map:?}");
        assert_eq!(map[&new.sync_id], json!(notes(new.id)));
        assert_eq!(OpOutput::from_value(OpKind::Search, json).unwrap(), OpOutput::Search(found));
    }
}

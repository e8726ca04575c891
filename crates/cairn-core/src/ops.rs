//! Every operation of cairn as data: `{"op": "save", "args": {...}}`. One `execute` runs them
//! against a store. Doors build an [`Op`] and render the JSON it returns; the daemon accepts
//! them over loopback so `cairn mcp` and the CLI can forward instead of opening the database;
//! the MCP router tool exposes them as one `memory` tool.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::agent::ActivityRecord;
use crate::context::ContextRequest;
use crate::error::{CairnError, ErrorCode, Result};
use crate::memory::{ListFilter, NewObservation, ObservationPatch, SaveOutcome};
use crate::passive::PassiveCapture;
use crate::prompts::NewPrompt;
use crate::relations::{CANDIDATE_LIMIT, Candidate, Comparison, Judgment, RelationFilter, ScanRequest};
use crate::search::{SearchHit, SearchQuery};
use crate::sessions::NewSession;
use crate::store::Store;

/// One operation. Names and argument fields are a stable contract (router tool, daemon RPC).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", content = "args", rename_all = "snake_case")]
pub enum Op {
    Save(SaveRequest),
    Search(SearchQuery),
    Get {
        id: i64,
        #[serde(default)]
        revisions: bool,
    },
    Update {
        id: i64,
        #[serde(flatten)]
        patch: ObservationPatch,
    },
    Delete {
        id: i64,
        #[serde(default)]
        hard: bool,
    },
    Pin {
        id: i64,
        #[serde(default = "yes")]
        pinned: bool,
    },
    List(ListFilter),
    Context(ContextRequest),
    Timeline {
        id: i64,
        #[serde(default = "five")]
        before: usize,
        #[serde(default = "five")]
        after: usize,
    },
    Sessions {
        #[serde(default)]
        project: Option<String>,
        #[serde(default = "five")]
        limit: usize,
    },
    StartSession(NewSession),
    SessionSummary {
        content: String,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        project: Option<String>,
    },
    EndSession {
        id: String,
        #[serde(default)]
        summary: Option<String>,
    },
    GetSession {
        id: String,
    },
    DeleteSession {
        id: String,
    },
    AddPrompt(NewPrompt),
    RecentPrompts {
        #[serde(default)]
        project: Option<String>,
        #[serde(default = "twenty")]
        limit: usize,
    },
    SearchPrompts {
        #[serde(alias = "q")]
        query: String,
        #[serde(default)]
        project: Option<String>,
        #[serde(default)]
        limit: usize,
    },
    DeletePrompt {
        id: i64,
    },
    Stats,
    Export {
        #[serde(default)]
        project: Option<String>,
    },
    Import {
        data: Value,
    },
    CapturePassive(PassiveCapture),
    SuggestTopicKey {
        #[serde(default, rename = "type")]
        kind: Option<String>,
        #[serde(default)]
        title: String,
        #[serde(default)]
        content: String,
    },
    Judge(Judgment),
    Compare(Comparison),
    Relations(RelationFilter),
    RelationStats {
        #[serde(default)]
        project: Option<String>,
    },
    GetRelation {
        id: i64,
    },
    ScanRelations(ScanRequest),
    MigrateProject {
        old_project: String,
        new_project: String,
    },
    MergeProjects {
        from: Vec<String>,
        to: String,
    },
    /// Checks of the data dir and database.
    Doctor,
    /// A session's activity: counts, reminders, the pending prompt (`crate::agent::activity`).
    SessionActivity {
        session_id: String,
    },
    /// Record what happened in a session: `{session_id, project?, event: tool_call | save |
    /// prompt | context_injected | reminder_sent, ...}`; answers the activity after it and,
    /// where relevant, the reminder due now or the prompt attached to a save.
    RecordActivity(ActivityRecord),
    /// Queue every memory for (re-)embedding: `force` drops the stored vectors first. The
    /// daemon's background indexer does the work; poll `stats.embeddings_pending`.
    Reindex {
        #[serde(default)]
        force: bool,
    },
}

fn yes() -> bool {
    true
}
fn five() -> usize {
    5
}
fn twenty() -> usize {
    20
}

/// A save, optionally looking for memories it may duplicate or contradict.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaveRequest {
    #[serde(flatten)]
    pub observation: NewObservation,
    #[serde(default)]
    pub find_candidates: bool,
}

/// The answer to a save.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SaveResponse {
    #[serde(flatten)]
    pub outcome: SaveOutcome,
    /// Look-alikes, when `find_candidates` was set.
    pub candidates: Vec<Candidate>,
}

/// Search results with their relation notes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SearchResponse {
    pub hits: Vec<SearchHit>,
    pub notices: Vec<String>,
    /// Relation lines per memory sync id (supersedes, conflicts, pending review).
    pub annotations: std::collections::HashMap<String, Vec<String>>,
    /// The ranking used (lexical, semantic, hybrid).
    #[serde(default)]
    pub mode: Option<crate::search::SearchMode>,
}

impl Op {
    /// Whether the operation writes (the daemon sends writes to its one writer connection).
    pub fn is_write(&self) -> bool {
        !matches!(
            self,
            Op::Search(_)
                | Op::Get { .. }
                | Op::List(_)
                | Op::Context(_)
                | Op::Timeline { .. }
                | Op::Sessions { .. }
                | Op::GetSession { .. }
                | Op::RecentPrompts { .. }
                | Op::SearchPrompts { .. }
                | Op::Stats
                | Op::Export { .. }
                | Op::SuggestTopicKey { .. }
                | Op::Relations(_)
                | Op::RelationStats { .. }
                | Op::GetRelation { .. }
                | Op::Doctor
                | Op::SessionActivity { .. }
        )
    }

    /// The operation's name (`save`, `search`...).
    pub fn name(&self) -> String {
        serde_json::to_value(self).ok().and_then(|v| v["op"].as_str().map(str::to_owned)).unwrap_or_default()
    }

    /// Parse `{"op": ..., "args": ...}` with an error that names what is wrong.
    pub fn from_value(value: Value) -> Result<Op> {
        let name = value.get("op").and_then(Value::as_str).map(str::to_owned);
        serde_json::from_value(value).map_err(|e| {
            let what = name.map_or_else(|| "the operation".to_owned(), |n| format!("arguments of {n:?}"));
            CairnError::invalid(format!("{what}: {e}"))
                .with_hint("send {\"op\": NAME, \"args\": {...}}; see the `memory` tool's description for names")
        })
    }
}

/// Run an operation; its result as JSON.
pub fn execute(store: &mut Store, op: Op) -> Result<Value> {
    Ok(match op {
        Op::Save(req) => json(save(store, &req)?),
        Op::Search(q) => json(search(store, &q)?),
        Op::Get { id, revisions } => {
            let mut value = json(store.get(id)?);
            if revisions {
                value["revisions"] = json(store.revisions(id)?);
            }
            value
        }
        Op::Update { id, patch } => json(store.update(id, &patch)?),
        Op::Delete { id, hard } => {
            store.delete(id, hard)?;
            json!({ "id": id, "status": "deleted", "hard_delete": hard })
        }
        Op::Pin { id, pinned } => json(store.set_pinned(id, pinned)?),
        Op::List(filter) => json(store.list(&ListFilter { limit: clamp(filter.limit, 20), ..filter })?),
        Op::Context(req) => json(store.context(&req)?),
        Op::Timeline { id, before, after } => json(store.timeline(id, before.min(50), after.min(50))?),
        Op::Sessions { project, limit } => json(store.recent_sessions(project.as_deref(), clamp(limit, 5))?),
        Op::StartSession(new) => json(store.start_session(&new)?),
        Op::SessionSummary { content, session_id, project } => {
            json(store.save_session_summary(session_id.as_deref(), project.as_deref(), &content)?)
        }
        Op::EndSession { id, summary } => {
            let ended = store.end_session(&id, summary.as_deref())?;
            // The next session under this id counts from zero (engram clears its counters).
            store.clear_activity(&id)?;
            json(ended)
        }
        Op::GetSession { id } => json(store.get_session(&id)?),
        Op::DeleteSession { id } => {
            store.delete_session(&id)?;
            json!({ "id": id, "status": "deleted" })
        }
        Op::AddPrompt(new) => json(store.add_prompt(&new)?),
        Op::RecentPrompts { project, limit } => json(store.recent_prompts(project.as_deref(), clamp(limit, 20))?),
        Op::SearchPrompts { query, project, limit } => json(store.search_prompts(&query, project.as_deref(), limit)?),
        Op::DeletePrompt { id } => {
            store.delete_prompt(id)?;
            json!({ "id": id, "status": "deleted" })
        }
        Op::Stats => json(store.stats()?),
        Op::Export { project } => json(store.export(project.as_deref())?),
        Op::Import { data } => json(store.import_bytes(&serde_json::to_vec(&data)?)?),
        Op::CapturePassive(capture) => json(store.capture_passive(&capture)?),
        Op::SuggestTopicKey { kind, title, content } => {
            if title.trim().is_empty() && content.trim().is_empty() {
                return Err(CairnError::empty("title or content"));
            }
            json!({ "topic_key": crate::topic::suggest_topic_key(kind.as_deref(), &title, &content) })
        }
        Op::Judge(j) => json!({ "relation": store.judge(&j)? }),
        Op::Compare(c) => {
            let relation = store.compare(&c)?;
            json!({ "sync_id": relation.sync_id, "relation": relation })
        }
        Op::Relations(filter) => json(store.list_relations(&filter)?),
        Op::RelationStats { project } => json(store.relation_stats(project.as_deref())?),
        Op::GetRelation { id } => json(store.relation_detail(id)?),
        Op::ScanRelations(req) => json(store.scan_relations(&req)?),
        Op::MigrateProject { old_project, new_project } => json(store.migrate_project(&old_project, &new_project)?),
        Op::MergeProjects { from, to } => json(store.merge_projects(&from, &to)?),
        Op::Reindex { force } => json(reindex(store, force)?),
        Op::SessionActivity { session_id } => json(store.session_activity(&session_id)?),
        Op::RecordActivity(record) => json(store.record_activity(&record)?),
        Op::Doctor => {
            let dir = store.path().and_then(std::path::Path::parent).map(std::path::Path::to_owned);
            match dir {
                Some(dir) => json(crate::doctor::run(&dir)),
                None => json!({ "status": "ok", "checks": [] }),
            }
        }
    })
}

fn json<T: Serialize>(value: T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Listing sizes: a default for 0, at most 500.
fn clamp(limit: usize, default: usize) -> usize {
    if limit == 0 { default } else { limit.min(500) }
}

fn save(store: &mut Store, req: &SaveRequest) -> Result<SaveResponse> {
    let outcome = store.save(&req.observation)?;
    // Looking for look-alikes is advice: it never fails a save that already happened.
    let candidates = if req.find_candidates && outcome.action == crate::memory::SaveAction::Created {
        store.find_candidates(outcome.id, CANDIDATE_LIMIT, true).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "relation candidate search failed");
            Vec::new()
        })
    } else {
        Vec::new()
    };
    Ok(SaveResponse { outcome, candidates })
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

fn reindex(store: &mut Store, force: bool) -> Result<ReindexReport> {
    let Some(semantic) = store.semantic().cloned() else {
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

fn search(store: &Store, q: &SearchQuery) -> Result<SearchResponse> {
    let results = store.search(q)?;
    let ids: Vec<String> = results.hits.iter().map(|h| h.observation.sync_id.clone()).collect();
    let annotations = store.relation_annotations(&ids)?;
    Ok(SearchResponse { hits: results.hits, notices: results.notices, annotations, mode: Some(results.mode) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_round_trip_as_op_args() {
        let mut s = Store::open_in_memory().unwrap();
        let save =
            Op::from_value(json!({"op": "save", "args": {"title": "t", "content": "c", "project": "p"}})).unwrap();
        assert!(save.is_write());
        assert_eq!(save.name(), "save");
        let saved = execute(&mut s, save).unwrap();
        assert_eq!(saved["id"], 1);
        let found =
            execute(&mut s, Op::from_value(json!({"op": "search", "args": {"query": "t", "project": "p"}})).unwrap())
                .unwrap();
        assert_eq!(found["hits"][0]["id"], 1);
        let patched = Op::from_value(json!({"op": "update", "args": {"id": 1, "title": "new"}})).unwrap();
        assert_eq!(execute(&mut s, patched).unwrap()["title"], "new");
        assert!(!Op::Stats.is_write());
    }

    #[test]
    fn bad_ops_name_the_problem() {
        let err = Op::from_value(json!({"op": "save", "args": {"title": 3}})).unwrap_err();
        assert!(err.message.contains("\"save\""), "{}", err.message);
        assert!(Op::from_value(json!({"op": "frobnicate"})).is_err());
        assert!(Op::from_value(json!([])).is_err());
    }
}

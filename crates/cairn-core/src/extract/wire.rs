//! opencode-memory's wire (seed 002): its plugin sends conversations to `POST /memories` for a
//! model to extract, searches with `POST /memories/search`, lists with `GET /memories` and
//! forgets with `DELETE /memories/{id}`, each naming a container tag as `user_id`.
//!
//! Tags map to cairn's scopes and projects: `<prefix>_user_<hash>` is the user's `personal`
//! scope; `<prefix>_project_<sha256(directory)[:16]>` is the cairn project of the directory
//! whose hash it is, among those cairn has seen sessions run in (else the tag itself names the
//! project); any other tag names a project.
//!
//! Without a model, an explicit add (one short user message, no summary or init mode) is kept
//! as written; anything that needs a model to read it is refused with `llm_not_configured`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use cairn_llm::extract::{self as prompts, TranscriptMessage};
use cairn_llm::{LlmProvider, Role};

use super::{Extracted, Origin, already_said, fact_memory, redact_for_model};
use crate::error::{CairnError, ErrorCode, Result};
use crate::memory::{ListFilter, NewObservation, SaveAction};
use crate::model::Observation;
use crate::owners::Core;
use crate::search::SearchQuery;
use crate::store::Store;
use crate::store::extraction::{self, ProvenanceRow};
use crate::text::Scope;

/// The longest text an explicit add keeps as written when no model is configured.
pub const VERBATIM_MAX_BYTES: usize = 4 * 1024;

/// One message of a conversation, as the plugin sends it (`content`: a string, or a list of
/// `{type: "text", text}` parts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WireMessage {
    pub role: String,
    /// A string, or a list of `{type: "text", text}` parts (any JSON value is read; what holds
    /// no text adds nothing).
    #[cfg_attr(feature = "openapi", schema(value_type = Value))]
    pub content: Value,
}

/// `POST /memories`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AddRequest {
    pub messages: Vec<WireMessage>,
    /// The container tag: the user's or a project's (not blank).
    #[cfg_attr(feature = "openapi", schema(pattern = r"\S"))]
    pub user_id: String,
    /// Kept with the memories; `type` sets their type.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub metadata: Option<Map<String, Value>>,
    /// One `session-summary` of the messages instead of facts.
    #[serde(default)]
    pub summary_mode: Option<bool>,
    /// The messages are project files: one `project-brief` of them.
    #[serde(default)]
    pub init_mode: Option<bool>,
}

/// One memory an add wrote (or found already said).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AddResult {
    pub id: String,
    pub memory: String,
    /// `ADD` (a new memory), `UPDATE` (a summary or brief revised), `NONE` (already said).
    pub event: String,
}

/// The answer to `POST /memories`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AddResponse {
    pub results: Vec<AddResult>,
}

/// What a model (or, for an explicit add, the user) wrote for an add, before it is saved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub memories: Vec<Extracted>,
    pub provider: String,
    pub model: String,
}

/// `POST /memories/search`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SearchRequest {
    #[cfg_attr(feature = "openapi", schema(pattern = r"\S"))]
    pub query: String,
    /// The container tag (not blank).
    #[cfg_attr(feature = "openapi", schema(pattern = r"\S"))]
    pub user_id: String,
    /// Default 5.
    #[serde(default)]
    pub limit: Option<usize>,
    /// Least similarity (0–1), default 0.3.
    #[serde(default)]
    pub threshold: Option<f64>,
    /// Only memories of these types.
    #[serde(default)]
    pub types: Option<Vec<String>>,
    /// Accepted; cairn's ranking already weighs recency.
    #[serde(default)]
    pub recency_weight: Option<f64>,
}

/// One memory as the wire shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WireMemory {
    pub id: String,
    pub memory: String,
    pub user_id: String,
    /// `type`, `title`, `project`, `scope` and the `session_id` it came from.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: Value,
    pub created_at: String,
    pub updated_at: String,
    /// The day it was written (`YYYY-MM-DD`).
    pub date: String,
    /// Search only: how similar to the query, 0–1 (`score` is the same number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Search only: the raw passage (cairn keeps none apart from the memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk: Option<String>,
}

/// The answer to a search or a listing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MemoriesResponse {
    pub results: Vec<WireMemory>,
}

/// Where a container tag's memories live.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Container {
    /// The user's memories, across projects (`personal` scope).
    Personal,
    Project(String),
}

/// Check a container tag (`user_id`): what the plugin builds is short and printable.
pub fn check_tag(tag: &str) -> Result<()> {
    if tag.trim().is_empty() {
        return Err(CairnError::empty("user_id"));
    }
    if tag.len() > 200 || tag.chars().any(char::is_control) {
        return Err(CairnError::invalid("user_id must be at most 200 bytes with no control characters"));
    }
    Ok(())
}

/// The 16 hex digits opencode-memory names a directory by.
pub fn directory_tag_hash(directory: &str) -> String {
    let digest = Sha256::digest(directory.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

impl Core {
    /// Where a container tag's memories live.
    pub fn wire_container(&mut self, tag: &str) -> Result<Container> {
        check_tag(tag)?;
        if tag.contains("_user_") {
            return Ok(Container::Personal);
        }
        let Some((_, hash)) = tag.rsplit_once("_project_") else {
            return Ok(Container::Project(tag.to_owned()));
        };
        let mut directories = self.store.session_directories()?;
        directories.extend(self.history.db()?.session_directories()?);
        let found = directories.into_iter().find(|(dir, _)| directory_tag_hash(dir) == hash);
        let project = found.and_then(|(dir, project)| {
            project
                .filter(|p| !p.is_empty())
                .or_else(|| crate::project::detect_project(std::path::Path::new(&dir)).ok().map(|d| d.project))
        });
        Ok(Container::Project(project.unwrap_or_else(|| tag.to_owned())))
    }

    /// `POST /memories/search`: the container's memories ranked against the query.
    pub fn wire_search(&mut self, request: &SearchRequest) -> Result<MemoriesResponse> {
        let container = self.wire_container(&request.user_id)?;
        let limit = request.limit.unwrap_or(5).clamp(1, 100);
        let threshold = request.threshold.unwrap_or(0.3).clamp(0.0, 1.0);
        let types = request.types.clone().unwrap_or_default();
        let query = SearchQuery {
            text: request.query.clone(),
            project: match &container {
                Container::Personal => None,
                Container::Project(p) => Some(p.clone()),
            },
            all_projects: container == Container::Personal,
            scope: Some(scope_of(&container)),
            // Filtered by type below: fetch more so a page of other types does not crowd them out.
            limit: if types.is_empty() { limit } else { limit * 4 },
            min_score: Some(threshold),
            ..SearchQuery::default()
        };
        let results = self
            .search(&query)?
            .hits
            .into_iter()
            .filter(|hit| types.is_empty() || types.contains(&hit.observation.kind))
            .take(limit)
            .map(|hit| {
                let similarity = (hit.relevance * 10_000.0).round() / 10_000.0;
                WireMemory {
                    similarity: Some(similarity),
                    score: Some(similarity),
                    chunk: Some(String::new()),
                    ..wire_memory(&hit.observation, &request.user_id)
                }
            })
            .collect();
        Ok(MemoriesResponse { results })
    }

    /// `GET /memories`: the container's memories, newest first.
    pub fn wire_list(&mut self, user_id: &str, limit: Option<usize>) -> Result<MemoriesResponse> {
        let container = self.wire_container(user_id)?;
        let filter = ListFilter {
            project: match &container {
                Container::Personal => None,
                Container::Project(p) => Some(p.clone()),
            },
            scope: Some(scope_of(&container)),
            limit: limit.unwrap_or(20).clamp(1, 500),
            ..ListFilter::default()
        };
        let results = self.store.list(&filter)?.iter().map(|o| wire_memory(o, user_id)).collect();
        Ok(MemoriesResponse { results })
    }

    /// `POST /memories`, once a model wrote the memories: saved in the container in one
    /// transaction, each fact the container already holds answered `NONE`.
    pub fn wire_save(&mut self, user_id: &str, written: &Written) -> Result<AddResponse> {
        let container = self.wire_container(user_id)?;
        self.store.save_wire(&container, written)
    }
}

fn scope_of(container: &Container) -> Scope {
    match container {
        Container::Personal => Scope::Personal,
        Container::Project(_) => Scope::Project,
    }
}

fn wire_memory(o: &Observation, user_id: &str) -> WireMemory {
    WireMemory {
        id: o.id.to_string(),
        memory: o.content.clone(),
        user_id: user_id.to_owned(),
        metadata: serde_json::json!({
            "type": o.kind,
            "title": o.title,
            "project": o.project,
            "scope": o.scope.as_str(),
            "session_id": o.session_id,
        }),
        created_at: o.created_at.clone(),
        updated_at: o.updated_at.clone(),
        date: o.created_at.chars().take(10).collect(),
        similarity: None,
        score: None,
        chunk: None,
    }
}

/// The text of a wire message (a string, or the text of its parts).
fn message_text(message: &WireMessage) -> String {
    match &message.content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str).or_else(|| p.as_str()))
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// What an add asks a model for, and what it answered (the model call: no store involved, so
/// a door runs it off the store's threads). `provider` is `None` when no model is configured.
pub fn write_memories(provider: Option<&dyn LlmProvider>, request: &AddRequest) -> Result<Written> {
    check_tag(&request.user_id)?;
    let messages: Vec<TranscriptMessage> = request
        .messages
        .iter()
        .enumerate()
        .map(|(i, m)| TranscriptMessage {
            id: format!("{}", i + 1),
            role: if m.role.eq_ignore_ascii_case("assistant") { Role::Assistant } else { Role::User },
            text: redact_for_model(&message_text(m)),
        })
        .filter(|m| !m.text.trim().is_empty())
        .collect();
    if messages.is_empty() {
        return Err(CairnError::empty("messages").with_hint("send at least one message with text"));
    }
    let summary_mode = request.summary_mode.unwrap_or(false);
    let init_mode = request.init_mode.unwrap_or(false);
    let asked_type = request.metadata.as_ref().and_then(|m| m.get("type")).and_then(Value::as_str).map(str::to_owned);
    let Some(provider) = provider else {
        let explicit = !summary_mode && !init_mode && messages.len() == 1 && messages[0].role == Role::User;
        if explicit && messages[0].text.len() <= VERBATIM_MAX_BYTES {
            return Ok(verbatim(&messages[0].text, asked_type));
        }
        return Err(CairnError::new(
            ErrorCode::LlmNotConfigured,
            "extracting memories from a conversation needs a model, and none is configured",
        )
        .with_hint("cairn llm use local (or openai, anthropic, agent-cli); explicit short adds are kept without one"));
    };
    let chat = |request| provider.chat(request).map_err(CairnError::from);
    let mut memories = if init_mode {
        let files = [("project files".to_owned(), joined(&messages))];
        let reply = chat(&prompts::brief_request(&files))?;
        let written = prompts::parse_brief(&reply.text).map_err(CairnError::from)?;
        vec![super::brief_memory("", written)]
    } else if summary_mode {
        let reply = chat(&prompts::summary_request(None, &messages))?;
        let written = prompts::parse_summary(&reply.text).map_err(CairnError::from)?;
        let opening = messages.iter().find(|m| m.role == Role::User).and_then(|m| super::request_line(&m.text));
        vec![Extracted {
            topic_key: None,
            kind: "session-summary".into(),
            ..super::summary_memory("", written, opening.as_deref())
        }]
    } else {
        let (mut memories, set) = super::said_outright(&messages);
        let facts = super::ask_facts(provider, &messages).map_err(CairnError::from)?;
        memories.extend(facts.into_iter().filter(|f| super::holds_up(f, &messages, &set)).map(fact_memory));
        memories
    };
    if let Some(kind) = asked_type.filter(|_| !init_mode && !summary_mode) {
        for memory in &mut memories {
            memory.kind.clone_from(&kind);
        }
    }
    Ok(Written { memories, provider: provider.kind().to_owned(), model: provider.model().to_owned() })
}

fn joined(messages: &[TranscriptMessage]) -> String {
    messages.iter().map(|m| m.text.as_str()).collect::<Vec<_>>().join("\n\n")
}

/// An explicit add kept as the user wrote it (no model to read it).
fn verbatim(text: &str, kind: Option<String>) -> Written {
    let title = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let title = crate::text::cut_at_char_boundary(&title, 80).to_owned();
    Written {
        memories: vec![Extracted {
            origin: Origin::Fact,
            kind: kind.unwrap_or_else(|| "manual".into()),
            title,
            content: text.trim().to_owned(),
            message_ids: Vec::new(),
            topic_key: None,
        }],
        provider: String::new(),
        model: String::new(),
    }
}

impl Store {
    fn save_wire(&mut self, container: &Container, written: &Written) -> Result<AddResponse> {
        let now = self.now();
        let (project, scope) = match container {
            Container::Personal => (String::new(), Scope::Personal),
            Container::Project(p) => (crate::text::normalize_project(p).0, Scope::Project),
        };
        self.in_transaction(|store| {
            let mut results = Vec::new();
            for memory in &written.memories {
                if memory.origin.is_fact()
                    && let Some(id) = already_said(store, &project, &memory.content)?
                {
                    results.push(AddResult {
                        id: id.to_string(),
                        memory: memory.content.clone(),
                        event: "NONE".into(),
                    });
                    continue;
                }
                let new = NewObservation {
                    title: memory.title.clone(),
                    content: memory.content.clone(),
                    kind: Some(memory.kind.clone()),
                    project: Some(project.clone()),
                    scope: Some(scope.as_str().to_owned()),
                    topic_key: memory.topic_key.clone(),
                    ..NewObservation::default()
                };
                let from_model = !written.provider.is_empty();
                let saved = store.save_then(&new, |tx, saved| {
                    if from_model && saved.action != SaveAction::Duplicate {
                        extraction::replace_provenance(
                            tx,
                            &ProvenanceRow {
                                observation_id: saved.id,
                                origin: memory.origin.as_str().to_owned(),
                                session_id: None,
                                message_ids: "[]".to_owned(),
                                provider: written.provider.clone(),
                                model: written.model.clone(),
                                created_at: now.clone(),
                            },
                        )?;
                    }
                    Ok(())
                })?;
                let event = match saved.action {
                    SaveAction::Created => "ADD",
                    SaveAction::Revised => "UPDATE",
                    SaveAction::Duplicate => "NONE",
                };
                results.push(AddResult {
                    id: saved.id.to_string(),
                    memory: memory.content.clone(),
                    event: event.into(),
                });
            }
            Ok(AddResponse { results })
        })
    }
}

/// A wire id (`DELETE /memories/{id}`): cairn's memory id.
pub fn parse_id(id: &str) -> Result<i64> {
    id.trim()
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| CairnError::new(ErrorCode::ObservationNotFound, format!("no memory with id {id:?}")))
}

//! Memories: save, list, get, update, delete, pin, passive capture, search, timeline, context.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderValue;
use axum::response::IntoResponse;
use cairn_core::context::{ContextLayout, ContextRequest};
use cairn_core::memory::{ListFilter, NewObservation, ObservationPatch};
use cairn_core::ops::{
    DeleteRequest, GetRequest, Op, PinRequest, RestoreRequest, SaveRequest, SearchResponse, TimelineRequest,
    UpdateRequest,
};
use cairn_core::passive::PassiveCapture;
use cairn_core::search::SearchQuery;
use cairn_core::text::Scope;
use cairn_core::{CairnError, ErrorCode};
use serde::Deserialize;
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::{ApiJson, ApiQuery, PathId, require_id};
use super::schema;
use super::{ApiResult, AppState, created, given, ok, run, run_typed, with_fields};

/// A memory to save: engram's fields plus cairn's (`pinned`, `directory`, `find_candidates`).
/// Unknown fields are ignored, so newer engram clients keep working.
#[derive(Debug, Deserialize, ToSchema)]
pub struct SaveBody {
    /// Short, searchable title (first line kept).
    #[schema(pattern = r"\S")]
    pub title: String,
    #[schema(pattern = r"\S")]
    pub content: String,
    /// decision, architecture, bugfix, pattern, config, discovery, learning, preference... (default `manual`).
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Default: `manual-save-<project>` (created when missing).
    pub session_id: Option<String>,
    pub project: Option<String>,
    /// `project` (default) or `personal`.
    pub scope: Option<String>,
    /// Saving again with the same key (project, scope) revises the memory.
    pub topic_key: Option<String>,
    pub tool_name: Option<String>,
    pub pinned: Option<bool>,
    /// Working directory, recorded on a session created for this save.
    pub directory: Option<String>,
    /// Also look for memories this one may duplicate or contradict.
    pub find_candidates: Option<bool>,
}

impl From<SaveBody> for SaveRequest {
    fn from(b: SaveBody) -> Self {
        SaveRequest {
            observation: NewObservation {
                title: b.title,
                content: b.content,
                kind: b.kind,
                session_id: b.session_id,
                project: b.project,
                scope: b.scope,
                topic_key: b.topic_key,
                tool_name: b.tool_name,
                pinned: b.pinned.unwrap_or(false),
                directory: b.directory,
            },
            find_candidates: b.find_candidates.unwrap_or(false),
            activity: None,
        }
    }
}

/// Save a memory: create it, revise the memory with the same topic_key, or count a duplicate.
#[utoipa::path(post, operation_id = "save_observation", path = "/observations", tag = "memories",
    request_body = SaveBody,
    responses(
        (status = 201, description = "Saved; `action` says whether it was created, revised or a duplicate",
            body = schema::SaveResult),
        (status = 400, description = "Missing or empty title/content, or the session belongs to another project",
            body = ErrorBody)))]
pub(super) async fn save(State(state): State<AppState>, ApiJson(body): ApiJson<SaveBody>) -> ApiResult {
    let saved = run(&state, Op::Save(body.into())).await?;
    Ok(created(with_fields(saved, [("status", json!("saved"))])))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only this project (empty: every project).
    project: Option<String>,
    /// `project` or `personal` (empty: both).
    #[param(schema_with = super::docs::scope_filter)]
    scope: Option<String>,
    /// Only this type.
    #[serde(rename = "type")]
    kind: Option<String>,
    /// Default 20, at most 500.
    limit: Option<usize>,
    offset: Option<usize>,
    /// The trash instead: soft-deleted memories, latest deletion first.
    deleted: Option<bool>,
    /// Only `created_at:desc` (newest first).
    #[param(value_type = Option<schema::Sort>, inline)]
    sort: Option<String>,
}

/// Live memories, newest first.
#[utoipa::path(get, operation_id = "list_observations", path = "/observations", tag = "memories", params(ListParams),
    responses(
        (status = 200, description = "Memories, newest first (`[]` when none)", body = Vec<cairn_core::model::Observation>),
        (status = 400, description = "Bad parameter (sort other than created_at:desc, unknown scope)",
            body = ErrorBody)))]
pub(super) async fn list(State(state): State<AppState>, ApiQuery(p): ApiQuery<ListParams>) -> ApiResult {
    if let Some(sort) = p.sort.as_deref().filter(|s| *s != "created_at:desc") {
        return Err(ApiError::new(ErrorCode::InvalidArgument, format!("sort {sort:?} is not supported"))
            .with_hint("use sort=created_at:desc or omit it"));
    }
    let filter = ListFilter {
        project: given(p.project),
        scope: Scope::parse_filter(p.scope.as_deref())?,
        kind: given(p.kind),
        limit: p.limit.unwrap_or(0),
        offset: p.offset.unwrap_or(0),
        deleted: p.deleted.unwrap_or(false),
    };
    Ok(ok(run(&state, Op::List(filter)).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RecentParams {
    /// Only this project (empty: every project).
    project: Option<String>,
    /// `project` or `personal` (empty: both).
    #[param(schema_with = super::docs::scope_filter)]
    scope: Option<String>,
    /// Default 20, at most 500.
    limit: Option<usize>,
}

/// The most recent memories.
#[utoipa::path(get, operation_id = "recent_observations", path = "/observations/recent", tag = "memories",
    params(RecentParams),
    responses(
        (status = 200, description = "Memories, newest first (`[]` when none)", body = Vec<cairn_core::model::Observation>),
        (status = 400, description = "Bad parameter", body = ErrorBody)))]
pub(super) async fn recent(State(state): State<AppState>, ApiQuery(p): ApiQuery<RecentParams>) -> ApiResult {
    let filter = ListFilter {
        project: given(p.project),
        scope: Scope::parse_filter(p.scope.as_deref())?,
        limit: p.limit.unwrap_or(0),
        ..ListFilter::default()
    };
    Ok(ok(run(&state, Op::List(filter)).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct GetParams {
    /// Include earlier versions.
    revisions: Option<bool>,
}

/// One memory.
#[utoipa::path(get, operation_id = "get_observation", path = "/observations/{id}", tag = "memories",
    params(("id" = i64, Path, description = "Memory id (positive integer)", minimum = 1), GetParams),
    responses(
        (status = 200, description = "The memory", body = schema::ObservationDetail),
        (status = 400, description = "Bad id", body = ErrorBody),
        (status = 404, description = "No such memory, or it was deleted", body = ErrorBody)))]
pub(super) async fn get_one(
    State(state): State<AppState>,
    PathId(id): PathId,
    ApiQuery(p): ApiQuery<GetParams>,
) -> ApiResult {
    Ok(ok(run(&state, Op::Get(GetRequest { id, revisions: p.revisions.unwrap_or(false) })).await?))
}

/// Fields to change; omitted fields are kept. At least one is required.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(min_properties = 1)]
pub struct PatchBody {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    #[schema(pattern = r"\S")]
    pub title: Option<String>,
    #[schema(pattern = r"\S")]
    pub content: Option<String>,
    pub project: Option<String>,
    pub scope: Option<String>,
    /// `""` clears the key.
    pub topic_key: Option<String>,
    pub tool_name: Option<String>,
}

impl From<PatchBody> for ObservationPatch {
    fn from(b: PatchBody) -> Self {
        ObservationPatch {
            kind: b.kind,
            title: b.title,
            content: b.content,
            project: b.project,
            scope: b.scope,
            topic_key: b.topic_key,
            tool_name: b.tool_name,
        }
    }
}

/// Change a memory (the replaced version is kept as a revision).
#[utoipa::path(patch, operation_id = "update_observation", path = "/observations/{id}", tag = "memories",
    request_body = PatchBody,
    params(("id" = i64, Path, description = "Memory id (positive integer)", minimum = 1)),
    responses(
        (status = 200, description = "The updated memory", body = cairn_core::model::Observation),
        (status = 400, description = "Bad id, bad JSON, or no field to change", body = ErrorBody),
        (status = 404, description = "No such memory", body = ErrorBody)))]
pub(super) async fn update(
    State(state): State<AppState>,
    PathId(id): PathId,
    ApiJson(body): ApiJson<PatchBody>,
) -> ApiResult {
    Ok(ok(run(&state, Op::Update(UpdateRequest { id, patch: body.into() })).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeleteParams {
    /// Erase the row for good (default: soft delete, hidden from every read).
    #[serde(alias = "hard_delete")]
    hard: Option<bool>,
}

/// Delete a memory.
#[utoipa::path(delete, operation_id = "delete_observation", path = "/observations/{id}", tag = "memories",
    params(("id" = i64, Path, description = "Memory id (positive integer)", minimum = 1), DeleteParams),
    responses(
        (status = 200, description = "Deleted", body = schema::ObservationDeleted),
        (status = 400, description = "Bad id", body = ErrorBody),
        (status = 404, description = "No such memory (or already soft-deleted)", body = ErrorBody)))]
pub(super) async fn delete(
    State(state): State<AppState>,
    PathId(id): PathId,
    ApiQuery(p): ApiQuery<DeleteParams>,
) -> ApiResult {
    Ok(ok(run(&state, Op::Delete(DeleteRequest { id, hard: p.hard.unwrap_or(false) })).await?))
}

/// Bring back a soft-deleted memory (a live one is answered as it is).
#[utoipa::path(post, operation_id = "restore_observation", path = "/observations/{id}/restore", tag = "memories",
    params(("id" = i64, Path, description = "Memory id (positive integer)", minimum = 1)),
    responses(
        (status = 200, description = "The restored memory", body = cairn_core::model::Observation),
        (status = 400, description = "Bad id", body = ErrorBody),
        (status = 404, description = "No such memory (or hard-deleted)", body = ErrorBody)))]
pub(super) async fn restore(State(state): State<AppState>, PathId(id): PathId) -> ApiResult {
    Ok(ok(run(&state, Op::Restore(RestoreRequest { id })).await?))
}

/// Pin a memory: pinned memories lead their project's context.
#[utoipa::path(post, operation_id = "pin_observation", path = "/observations/{id}/pin", tag = "memories",
    params(("id" = i64, Path, description = "Memory id (positive integer)", minimum = 1)),
    responses(
        (status = 200, description = "The pinned memory", body = cairn_core::model::Observation),
        (status = 400, description = "Bad id", body = ErrorBody),
        (status = 404, description = "No such memory", body = ErrorBody)))]
pub(super) async fn pin(State(state): State<AppState>, PathId(id): PathId) -> ApiResult {
    Ok(ok(run(&state, Op::Pin(PinRequest { id, pinned: true })).await?))
}

/// Unpin a memory.
#[utoipa::path(post, operation_id = "unpin_observation", path = "/observations/{id}/unpin", tag = "memories",
    params(("id" = i64, Path, description = "Memory id (positive integer)", minimum = 1)),
    responses(
        (status = 200, description = "The unpinned memory", body = cairn_core::model::Observation),
        (status = 400, description = "Bad id", body = ErrorBody),
        (status = 404, description = "No such memory", body = ErrorBody)))]
pub(super) async fn unpin(State(state): State<AppState>, PathId(id): PathId) -> ApiResult {
    Ok(ok(run(&state, Op::Pin(PinRequest { id, pinned: false })).await?))
}

/// An agent's final message, to mine for "Key Learnings".
#[derive(Debug, Deserialize, ToSchema)]
pub struct PassiveBody {
    #[schema(pattern = r"\S")]
    pub content: String,
    pub session_id: Option<String>,
    pub project: Option<String>,
    /// Where the text came from (`subagent-stop`, `task-complete`...; default `mcp-passive`).
    pub source: Option<String>,
}

/// Save the learnings listed under a "Key Learnings" heading, skipping known ones.
#[utoipa::path(post, operation_id = "capture_passive", path = "/observations/passive", tag = "memories",
    request_body = PassiveBody,
    responses(
        (status = 200, description = "What was found and saved", body = cairn_core::passive::PassiveOutcome),
        (status = 400, description = "Empty content, or the session belongs to another project", body = ErrorBody)))]
pub(super) async fn passive(State(state): State<AppState>, ApiJson(b): ApiJson<PassiveBody>) -> ApiResult {
    let capture = PassiveCapture {
        content: b.content,
        session_id: b.session_id,
        project: b.project,
        directory: None,
        source: b.source,
    };
    Ok(ok(run(&state, Op::CapturePassive(capture)).await?))
}

/// Search memories.
///
/// The answer is an array (engram's shape); explanations of an empty or shaped answer come in
/// `X-Cairn-Notice` headers.
#[utoipa::path(get, operation_id = "search", path = "/search", tag = "memories", params(SearchQuery),
    responses(
        (status = 200, description = "Hits, best first (`[]` when none)", body = Vec<schema::SearchHit>,
            headers(("X-Cairn-Notice" = String,
                description = "Why the answer is empty or was shaped by a rule (one header per notice)"),
                ("X-Cairn-Deep" = String,
                description = "Deep recall's report as JSON: reranked, candidates, model, llm_ms, code (why not)"))),
        (status = 400, description = "Missing or empty q, or a bad parameter", body = ErrorBody)))]
pub(super) async fn search(State(state): State<AppState>, ApiQuery(query): ApiQuery<SearchQuery>) -> ApiResult {
    // No project (or a blank one) searches every project, as engram's API did.
    // Each hit comes with its relation notes: the JSON array is the hits as they are.
    let SearchResponse { hits, notices, deep, .. } = run_typed(&state, query).await?;
    let mut response = Json(hits).into_response();
    for notice in &notices {
        response.headers_mut().append("x-cairn-notice", header_text(notice));
    }
    if let Some(report) = deep.and_then(|d| serde_json::to_string(&d).ok()) {
        response.headers_mut().insert("x-cairn-deep", header_text(&report));
    }
    Ok(response)
}

/// Header values are visible ASCII; anything else (a project name in another script) is escaped.
fn header_text(text: &str) -> HeaderValue {
    let ascii: String = text
        .chars()
        .map(|c| if c.is_ascii_graphic() || c == ' ' { c.to_string() } else { c.escape_unicode().to_string() })
        .collect();
    HeaderValue::from_str(&ascii).unwrap_or_else(|_| HeaderValue::from_static("notice not representable"))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TimelineParams {
    /// The memory to centre on (required).
    #[param(required = true, minimum = 1)]
    observation_id: Option<i64>,
    /// Memories before it in its session (default 5, at most 50).
    before: Option<usize>,
    /// Memories after it (default 5, at most 50).
    after: Option<usize>,
}

/// What happened around a memory in its session.
#[utoipa::path(get, operation_id = "timeline", path = "/timeline", tag = "memories", params(TimelineParams),
    responses(
        (status = 200, description = "The memory and its neighbours", body = cairn_core::views::Timeline),
        (status = 400, description = "Missing or bad observation_id", body = ErrorBody),
        (status = 404, description = "No such memory", body = ErrorBody)))]
pub(super) async fn timeline(State(state): State<AppState>, ApiQuery(p): ApiQuery<TimelineParams>) -> ApiResult {
    let id = require_id("observation_id", p.observation_id)?;
    Ok(ok(run(
        &state,
        Op::Timeline(TimelineRequest { id, before: p.before.unwrap_or(5), after: p.after.unwrap_or(5) }),
    )
    .await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ContextParams {
    /// The project (empty: every project).
    project: Option<String>,
    /// `project` or `personal` (memories only; empty: both).
    #[param(schema_with = super::docs::scope_filter)]
    scope: Option<String>,
    /// `recent` (default) or `memory_block`: the `[MEMORY]` block a host plugin injects.
    #[param(schema_with = super::docs::context_layout)]
    layout: Option<String>,
    /// `memory_block`: what the user asks, for the "Relevant to Current Task" section.
    query: Option<String>,
    /// `memory_block`: least relevance (0–1) of a relevant memory (default from the settings).
    #[param(minimum = 0, maximum = 1)]
    similarity_threshold: Option<f64>,
    /// Sub-agent sessions too (default false).
    include_children: Option<bool>,
}

/// What an agent should know at the start of a session, as markdown.
#[utoipa::path(get, operation_id = "context", path = "/context", tag = "memories", params(ContextParams),
    responses(
        (status = 200, description = "Markdown context and what went into it", body = cairn_core::context::Context),
        (status = 400, description = "Bad scope, layout or similarity_threshold", body = ErrorBody)))]
pub(super) async fn context(State(state): State<AppState>, ApiQuery(p): ApiQuery<ContextParams>) -> ApiResult {
    let request = ContextRequest {
        project: given(p.project),
        scope: Scope::parse_filter(p.scope.as_deref())?,
        budget_bytes: state.config.context_budget,
        layout: match given(p.layout).map(|l| l.trim().to_ascii_lowercase()).as_deref() {
            None | Some("recent") => ContextLayout::Recent,
            Some("memory_block") => ContextLayout::MemoryBlock,
            Some(other) => {
                return Err(CairnError::invalid(format!("layout {other:?} is not known"))
                    .with_hint("use recent or memory_block")
                    .into());
            }
        },
        query: given(p.query),
        similarity_threshold: p.similarity_threshold,
        include_children: p.include_children.unwrap_or(false),
        ..ContextRequest::default()
    };
    Ok(ok(run(&state, Op::Context(request)).await?))
}

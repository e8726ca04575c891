//! Relations between memories (engram §7): listing, stats, verdicts, retroactive scans. The
//! sync-deferred queue does not exist yet, so its routes answer empty.

use axum::Json;
use axum::extract::State;
use axum::response::IntoResponse;
use cairn_core::ops::{GetRelationRequest, Op, RelationStatsRequest};
use cairn_core::relations::{Comparison, Judgment, RelationDetail, RelationFilter, ScanRequest};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use super::error::ErrorBody;
use super::extract::{ApiJson, ApiQuery, PathId};
use super::schema;
use super::{ApiResult, AppState, given, ok, run, run_typed};

/// Listing sizes of the deferred queue (engram: default 50, at most 500).
const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 500;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Relations touching this project's memories.
    project: Option<String>,
    /// `pending`, `judged` or `orphaned`.
    status: Option<String>,
    /// RFC 3339: created at or after.
    #[param(schema_with = super::docs::date_time_or_empty)]
    since: Option<String>,
    /// Default 50, at most 500.
    limit: Option<usize>,
    offset: Option<usize>,
}

/// Relations, newest first.
#[utoipa::path(get, operation_id = "list_conflicts", path = "/conflicts", tag = "conflicts", params(ListParams),
    responses(
        (status = 200, description = "A page of relations", body = cairn_core::relations::RelationPage),
        (status = 400, description = "`since` is not RFC 3339, or a bad parameter", body = ErrorBody)))]
pub(super) async fn list(State(state): State<AppState>, ApiQuery(p): ApiQuery<ListParams>) -> ApiResult {
    let filter = RelationFilter {
        project: given(p.project),
        status: given(p.status),
        // Only an empty `since` means "no limit"; a blank one is a bad time, which core refuses.
        since: p.since.filter(|s| !s.is_empty()),
        limit: p.limit,
        offset: p.offset,
        memory_id: None,
    };
    Ok(ok(run(&state, Op::Relations(filter)).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StatsParams {
    /// Only relations touching this project's memories.
    project: Option<String>,
}

/// Relation counts by verdict and by status.
#[utoipa::path(get, operation_id = "conflict_stats", path = "/conflicts/stats", tag = "conflicts", params(StatsParams),
    responses((status = 200, description = "Counts", body = cairn_core::relations::RelationStats)))]
pub(super) async fn stats(State(state): State<AppState>, ApiQuery(p): ApiQuery<StatsParams>) -> ApiResult {
    Ok(ok(run(&state, Op::RelationStats(RelationStatsRequest { project: given(p.project) })).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeferredParams {
    /// `deferred` or `dead` (engram's queue states).
    #[allow(dead_code)]
    status: Option<String>,
    /// Default 50, at most 500.
    limit: Option<usize>,
    #[allow(dead_code)]
    offset: Option<usize>,
}

/// Relations whose sync was deferred: always empty until sync exists.
#[utoipa::path(get, operation_id = "deferred_conflicts", path = "/conflicts/deferred", tag = "conflicts",
    params(DeferredParams),
    responses((status = 200, description = "An empty page", body = schema::DeferredPage)))]
pub(super) async fn deferred(ApiQuery(p): ApiQuery<DeferredParams>) -> ApiResult {
    let limit = p.limit.filter(|l| *l > 0).unwrap_or(DEFAULT_PAGE).min(MAX_PAGE);
    Ok(ok(json!({ "total": 0, "limit": limit, "rows": [] })))
}

/// Retry deferred relations: nothing to retry until sync exists.
#[utoipa::path(post, operation_id = "replay_deferred_conflicts", path = "/conflicts/deferred/replay", tag = "conflicts",
    responses((status = 200, description = "Zero counts", body = schema::ReplayResult)))]
pub(super) async fn replay() -> ApiResult {
    Ok(ok(json!({ "retried": 0, "succeeded": 0, "failed": 0, "dead": 0 })))
}

/// A retroactive scan of a project's memories for relation candidates.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ScanBody {
    #[schema(pattern = r"\S")]
    pub project: String,
    /// RFC 3339: only memories created at or after.
    #[schema(schema_with = super::docs::date_time_or_empty)]
    pub since: Option<String>,
    /// Record what is found (default: dry run). With `semantic`, the verdicts.
    pub apply: Option<bool>,
    /// Most pairs recorded in one run (default 100).
    pub max_insert: Option<usize>,
    /// Judge the pairs with the configured model (and the certain rules): 503
    /// `llm_not_configured` without one.
    pub semantic: Option<bool>,
    /// Semantic: most pairs judged in this call (default 100).
    pub max_semantic: Option<usize>,
    /// Semantic: pairs to skip (the previous call's `next_offset`), to go on in batches.
    pub offset: Option<usize>,
    /// engram's LLM-scan tuning; accepted (old clients send it) and unused: cairn judges one
    /// pair at a time, with the model's own time limit.
    #[allow(dead_code)]
    pub concurrency: Option<u32>,
    #[allow(dead_code)]
    pub timeout_per_call_seconds: Option<u32>,
}

/// Look for relation candidates across a project (with `semantic`, judge them).
///
/// With `apply`, the pairs are recorded as pending. With `semantic`, each pair without a verdict
/// is judged (the certain rules, then the model) and, with `apply`, the verdicts are recorded; a
/// pair no judge is sure of stays pending.
#[utoipa::path(post, operation_id = "scan_conflicts", path = "/conflicts/scan", tag = "conflicts",
    request_body = ScanBody,
    responses(
        (status = 200, description = "What the scan found (and recorded)", body = cairn_core::relations::ScanResult),
        (status = 400, description = "Missing project, or `since` is not a time", body = ErrorBody),
        (status = 503, description = "`semantic` without a configured model", body = ErrorBody)))]
pub(super) async fn scan(State(state): State<AppState>, ApiJson(b): ApiJson<ScanBody>) -> ApiResult {
    let request = ScanRequest {
        project: b.project,
        since: given(b.since),
        apply: b.apply.unwrap_or(false),
        max_insert: b.max_insert,
        semantic: b.semantic.unwrap_or(false),
        max_semantic: b.max_semantic,
        offset: b.offset,
    };
    Ok(ok(run(&state, Op::ScanRelations(request)).await?))
}

/// A verdict on a pending relation (re-judging overwrites).
#[derive(Debug, Deserialize, ToSchema)]
pub struct JudgeBody {
    /// The relation's sync id (from a save's `candidates[].judgment_id`).
    #[schema(pattern = r"\S")]
    pub judgment_id: String,
    /// related, compatible, scoped, conflicts_with, supersedes or not_conflict.
    #[schema(value_type = schema::Verdict)]
    pub relation: String,
    pub reason: Option<String>,
    pub evidence: Option<String>,
    /// 0..1.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub confidence: Option<f64>,
    pub session_id: Option<String>,
}

/// Record a verdict on a pending relation.
#[utoipa::path(post, operation_id = "judge_conflict", path = "/conflicts/judge", tag = "conflicts",
    request_body = JudgeBody,
    responses(
        (status = 200, description = "The judged relation", body = schema::Judged),
        (status = 400, description = "Unknown verdict, confidence outside 0..1, or memories of different projects",
            body = ErrorBody),
        (status = 404, description = "No such relation", body = ErrorBody)))]
pub(super) async fn judge(State(state): State<AppState>, ApiJson(b): ApiJson<JudgeBody>) -> ApiResult {
    let judgment = Judgment {
        judgment_id: b.judgment_id,
        relation: b.relation,
        reason: b.reason,
        evidence: b.evidence,
        confidence: b.confidence,
        session_id: b.session_id,
        by_person: false,
    };
    Ok(ok(run(&state, Op::Judge(judgment)).await?))
}

/// A direct verdict between two memories.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CompareBody {
    #[schema(minimum = 1)]
    pub memory_id_a: i64,
    #[schema(minimum = 1)]
    pub memory_id_b: i64,
    #[schema(value_type = schema::Verdict)]
    pub relation: String,
    /// 0..1.
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub confidence: f64,
    /// Why (a sentence).
    #[schema(pattern = r"\S")]
    pub reasoning: String,
    pub model: Option<String>,
}

/// Record a verdict between two memories (one relation per pair, updated in place).
#[utoipa::path(post, operation_id = "compare_memories", path = "/conflicts/compare", tag = "conflicts",
    request_body = CompareBody,
    responses(
        (status = 200, description = "The relation", body = schema::Compared),
        (status = 400, description = "Bad verdict, confidence, reasoning, or memories of different projects",
            body = ErrorBody),
        (status = 404, description = "No such memory", body = ErrorBody)))]
pub(super) async fn compare(State(state): State<AppState>, ApiJson(b): ApiJson<CompareBody>) -> ApiResult {
    let comparison = Comparison {
        memory_id_a: b.memory_id_a,
        memory_id_b: b.memory_id_b,
        relation: b.relation,
        confidence: b.confidence,
        reasoning: b.reasoning,
        model: b.model,
    };
    Ok(ok(run(&state, Op::Compare(comparison)).await?))
}

/// One relation, with the titles of both memories.
#[utoipa::path(get, operation_id = "get_conflict", path = "/conflicts/{relation_id}", tag = "conflicts",
    params(("relation_id" = i64, Path, description = "Relation id (positive integer)", minimum = 1)),
    responses(
        (status = 200, description = "The relation", body = schema::RelationDetail),
        (status = 400, description = "Bad id", body = ErrorBody),
        (status = 404, description = "No such relation", body = ErrorBody)))]
pub(super) async fn get_one(State(state): State<AppState>, PathId(id): PathId) -> ApiResult {
    let detail: RelationDetail = run_typed(&state, GetRelationRequest { id }).await?;
    // engram's names for the same facts.
    let (source_snippet, target_snippet) = (detail.source_title.clone(), detail.target_title.clone());
    Ok(Json(EngramRelationDetail { detail, relation_id: id, source_snippet, target_snippet }).into_response())
}

/// A relation as `/conflicts/{id}` sends it: cairn's detail and engram's names for it.
#[derive(Serialize)]
struct EngramRelationDetail {
    #[serde(flatten)]
    detail: RelationDetail,
    relation_id: i64,
    source_snippet: Option<String>,
    target_snippet: Option<String>,
}

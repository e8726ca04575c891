//! opencode-memory's wire (seed 002: `/memories`, mem0-shaped) and `POST /extract`. The rules
//! (tags to scopes and projects, dedupe, what needs a model) are `cairn_core::extract`'s; the
//! model is called on a blocking thread, never on the store's writer.

use axum::extract::State;
use axum::response::IntoResponse;
use cairn_core::extract::wire::{self, AddRequest, AddResponse, MemoriesResponse, SearchRequest};
use cairn_core::extract::{ExtractionReport, Selection};
use cairn_core::ops::{DeleteRequest, Op};
use serde::Deserialize;
use serde_json::json;
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::{ApiJson, ApiQuery, OptionalJson, PathText};
use super::{ApiResult, AppState, ok, run};

/// Run blocking work (a model's call, a pass) off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> cairn_core::Result<T> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::from(cairn_core::CairnError::internal(format!("worker failed: {e}"))))?
        .map_err(ApiError::from)
}

/// Extract memories from messages (opencode-memory's `POST /memories`).
///
/// Atomic facts, or one `session-summary` (`summary_mode`), or one `project-brief`
/// (`init_mode`), each saved in the container `user_id` names unless one already says it.
#[utoipa::path(post, operation_id = "wire_add_memories", path = "/memories", tag = "opencode-memory",
    request_body = AddRequest,
    responses(
        (status = 200, description = "What was saved (`ADD`), revised (`UPDATE`) or already said (`NONE`)",
            body = AddResponse),
        (status = 400, description = "No message with text, or a bad `user_id`", body = ErrorBody),
        (status = 503, description = "`llm_not_configured`: reading a conversation needs a model \
            (`cairn llm use …`); `llm_unavailable`: the model is down or answered badly", body = ErrorBody)))]
pub(super) async fn add(State(state): State<AppState>, ApiJson(body): ApiJson<AddRequest>) -> ApiResult {
    let provider = state.engine.llm();
    let user_id = body.user_id.clone();
    let written = blocking(move || wire::write_memories(provider.as_deref(), &body)).await?;
    let engine = std::sync::Arc::clone(&state.engine);
    let saved = blocking(move || engine.with_writer(move |core| core.wire_save(&user_id, &written))).await?;
    Ok(ok(serde_json::to_value(saved).map_err(cairn_core::CairnError::from)?))
}

/// Search a container's memories (opencode-memory's `POST /memories/search`).
#[utoipa::path(post, operation_id = "wire_search_memories", path = "/memories/search", tag = "opencode-memory",
    request_body = SearchRequest,
    responses(
        (status = 200, description = "Hits at or above `threshold`, best first", body = MemoriesResponse),
        (status = 400, description = "Empty query, bad `user_id`", body = ErrorBody)))]
pub(super) async fn search(State(state): State<AppState>, ApiJson(body): ApiJson<SearchRequest>) -> ApiResult {
    let engine = std::sync::Arc::clone(&state.engine);
    let found = blocking(move || engine.with_reader(move |core| core.wire_search(&body))).await?;
    Ok(ok(serde_json::to_value(found).map_err(cairn_core::CairnError::from)?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// The container tag (not blank).
    #[param(pattern = r"\S")]
    user_id: String,
    /// Default 20, at most 500.
    limit: Option<usize>,
}

/// A container's memories, newest first (opencode-memory's `GET /memories`).
#[utoipa::path(get, operation_id = "wire_list_memories", path = "/memories", tag = "opencode-memory",
    params(ListParams),
    responses(
        (status = 200, description = "Memories, newest first", body = MemoriesResponse),
        (status = 400, description = "No or bad `user_id`", body = ErrorBody)))]
pub(super) async fn list(State(state): State<AppState>, ApiQuery(p): ApiQuery<ListParams>) -> ApiResult {
    let engine = std::sync::Arc::clone(&state.engine);
    let listed = blocking(move || engine.with_reader(move |core| core.wire_list(&p.user_id, p.limit))).await?;
    Ok(ok(serde_json::to_value(listed).map_err(cairn_core::CairnError::from)?))
}

/// Forget a memory (opencode-memory's `DELETE /memories/{id}`), softly.
///
/// A soft delete, as `cairn delete` does: `cairn restore` brings it back.
#[utoipa::path(delete, operation_id = "wire_delete_memory", path = "/memories/{id}", tag = "opencode-memory",
    params(("id" = String, Path, description = "The memory's id, as the other `/memories` routes give it")),
    responses(
        (status = 200, description = "`{success: true, message}`"),
        (status = 404, description = "No such memory", body = ErrorBody)))]
pub(super) async fn delete(State(state): State<AppState>, PathText(id): PathText) -> ApiResult {
    let id = wire::parse_id(&id)?;
    run(&state, Op::Delete(DeleteRequest { id, hard: false })).await?;
    Ok(ok(json!({"success": true, "message": "Memory deleted"})))
}

/// Which conversations `POST /extract` runs over (nothing: every one with something new).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct ExtractBody {
    /// One conversation (a history session id).
    session_id: Option<String>,
    /// Answer when the pass is done, with its report (default); `false`: start it and answer
    /// 202 at once.
    wait: Option<bool>,
}

/// Extract memories from archived conversations now (`cairn extract`).
///
/// It runs after any pass already running and answers when done, unless `wait` is `false`.
#[utoipa::path(post, operation_id = "extract", path = "/extract", tag = "daemon",
    request_body(content = Option<ExtractBody>),
    responses(
        (status = 200, description = "What the pass did", body = ExtractionReport),
        (status = 202, description = "Started (`wait: false`): `{\"status\": \"started\"}`"),
        (status = 404, description = "`history_session_not_found`", body = ErrorBody),
        (status = 503, description = "`llm_not_configured`", body = ErrorBody)))]
pub(super) async fn extract(State(state): State<AppState>, OptionalJson(body): OptionalJson<ExtractBody>) -> ApiResult {
    let selection = body.session_id.map_or(Selection::All, Selection::Session);
    let engine = std::sync::Arc::clone(&state.engine);
    if body.wait == Some(false) {
        engine.require_llm()?;
        tokio::task::spawn_blocking(move || {
            if let Err(e) = engine.extract_now(&selection) {
                tracing::warn!(error = %e, "extraction asked for failed");
            }
        });
        return Ok((axum::http::StatusCode::ACCEPTED, axum::Json(json!({"status": "started"}))).into_response());
    }
    let report = blocking(move || engine.extract_now(&selection)).await?;
    Ok(ok(serde_json::to_value(report).map_err(cairn_core::CairnError::from)?))
}

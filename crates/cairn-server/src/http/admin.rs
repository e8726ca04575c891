//! The daemon and the store as a whole: health, stats, export/import, doctor, projects, sync
//! status, the operation RPC and the OpenAPI document.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::{Extension, Json};
use cairn_core::agent::ProjectHints;
use cairn_core::ops::{
    ExportMemoriesRequest, ImportRequest, MigrateProjectRequest, Op, ReindexRequest, StatsRequest, SyncImportRequest,
    SyncStatusRequest,
};
use cairn_core::spool::EventId;
use cairn_core::store::SCHEMA_VERSION;
use cairn_core::views::Stats;
use cairn_core::{CairnError, ErrorCode};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::extract::{ApiJson, ApiQuery, body_bytes};
use super::schema;
use super::{ApiResult, AppState, given, ok, run, run_typed};

/// How long `/health` waits for the store. Clients probe with a short timeout; a long import
/// holding the writer must not make the daemon look dead.
const HEALTH_STORE_WAIT: Duration = Duration::from_millis(250);

/// Is the daemon up, and which data directory does it serve? Needs no token.
#[utoipa::path(get, operation_id = "health", path = "/health", tag = "daemon", security(()),
    responses((status = 200, description = "The daemon answers", body = schema::Health)))]
pub(super) async fn health(State(state): State<AppState>) -> Json<Value> {
    let engine = Arc::clone(&state.engine);
    let probe = tokio::task::spawn_blocking(move || engine.with_writer(|core| core.store.schema_version()));
    let (schema_version, store) = match tokio::time::timeout(HEALTH_STORE_WAIT, probe).await {
        Ok(Ok(Ok(version))) => (version, json!("ok")),
        Ok(Ok(Err(e))) => (SCHEMA_VERSION, json!({ "code": e.code.as_str(), "message": e.message })),
        Ok(Err(e)) => (SCHEMA_VERSION, json!({ "code": ErrorCode::Internal.as_str(), "message": e.to_string() })),
        Err(_) => (SCHEMA_VERSION, json!("busy")),
    };
    // A background worker that died (the writer, the checkpointer) is as bad as a failed store.
    let status = if store.is_object() || state.engine.degraded() { "degraded" } else { "ok" };
    Json(json!({
        "status": status,
        "service": "cairn",
        "version": state.config.version,
        "schema_version": schema_version,
        "data_dir": state.config.data_dir.as_ref().map(|d| d.display().to_string()),
        "store": store,
        "search_index": state.engine.index_state(),
        "workers": state.engine.workers(),
        "spool": spool_health(&state).await,
    }))
}

/// The spool's pending events and counters (`null` when this daemon does not drain one).
async fn spool_health(state: &AppState) -> Value {
    let engine = Arc::clone(&state.engine);
    let Ok(Some((status, counts))) = tokio::task::spawn_blocking(move || engine.spool_health()).await else {
        return Value::Null;
    };
    let counts = counts.unwrap_or_default();
    json!({
        "pending": status.pending,
        "bytes": status.bytes,
        "dropped": counts.dropped + status.dropped_uncounted,
        "corrupt": counts.corrupt,
        "rejected": counts.rejected,
        "failed": counts.failed,
    })
}

/// Apply what hooks and plugins spooled while no daemon answered.
///
/// In order, each event once; answers when done. Hooks and the plugin call it when they find
/// the daemon and the spool not empty, so their next write does not overtake what waits.
#[utoipa::path(post, operation_id = "drain_spool", path = "/spool/drain", tag = "daemon",
    responses((status = 200, description = "What the drain did", body = cairn_core::spool::DrainReport)))]
pub(super) async fn drain_spool(State(state): State<AppState>) -> ApiResult {
    let engine = Arc::clone(&state.engine);
    let report = tokio::task::spawn_blocking(move || engine.drain_spool())
        .await
        .map_err(|e| CairnError::internal(format!("worker failed: {e}")))?;
    Ok(ok(serde_json::to_value(report).map_err(CairnError::from)?))
}

/// Counts of the store.
#[utoipa::path(get, operation_id = "stats", path = "/stats", tag = "daemon",
    responses((status = 200, description = "Counts and projects", body = cairn_core::views::Stats)))]
pub(super) async fn stats(State(state): State<AppState>) -> ApiResult {
    Ok(ok(run(&state, Op::Stats).await?))
}

/// Every project with its counts.
#[utoipa::path(get, operation_id = "list_projects", path = "/projects", tag = "projects",
    responses((status = 200, description = "Projects, most recently active first", body = schema::ProjectList)))]
pub(super) async fn projects(State(state): State<AppState>) -> ApiResult {
    let stats: Stats = run_typed(&state, StatsRequest).await?;
    Ok(ok(json!({ "count": stats.by_project.len(), "projects": stats.by_project })))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CurrentProjectParams {
    /// The directory to identify (default: the daemon's working directory).
    cwd: Option<String>,
}

/// Which project a directory belongs to. Never an error status: problems are in `error_code`.
///
/// core's current-project view, the same JSON as MCP's `mem_current_project`; the candidates
/// are listed when the directory holds several repositories.
#[utoipa::path(get, operation_id = "current_project", path = "/project/current", tag = "projects",
    params(CurrentProjectParams),
    responses((status = 200, description = "The detection result", body = cairn_core::agent::CurrentProject)))]
pub(super) async fn current_project(ApiQuery(p): ApiQuery<CurrentProjectParams>) -> Json<Value> {
    let hints = ProjectHints {
        dir: given(p.cwd).map(PathBuf::from),
        process_cwd: std::env::current_dir().unwrap_or_default(),
        ..ProjectHints::default()
    };
    let cwd = hints.detection_dir().display().to_string();
    // Detection may run git: off the async threads.
    let view = tokio::task::spawn_blocking(move || cairn_core::agent::current_project(&hints, |_| Ok(None))).await;
    Json(match view {
        Ok(view) => json!(view),
        Err(e) => json!({
            "project": "", "project_source": "error", "project_path": "", "cwd": cwd, "available_projects": [],
            "error_code": ErrorCode::Internal.as_str(), "error_hint": format!("project detection failed: {e}"),
        }),
    })
}

/// Rename a project everywhere.
#[derive(Debug, Deserialize, ToSchema)]
pub struct MigrateBody {
    #[schema(pattern = r"\S")]
    pub old_project: String,
    #[schema(pattern = r"\S")]
    pub new_project: String,
}

/// Move everything of one project into another (plugins call it when detection changes a name).
#[utoipa::path(post, operation_id = "migrate_project", path = "/projects/migrate", tag = "projects",
    request_body = MigrateBody,
    responses(
        (status = 200, description = "`migrated` with counts, or `skipped` with a reason",
            body = cairn_core::projects::MigrateOutcome),
        (status = 400, description = "A name is missing or empty", body = ErrorBody)))]
pub(super) async fn migrate_project(State(state): State<AppState>, ApiJson(b): ApiJson<MigrateBody>) -> ApiResult {
    Ok(ok(run(
        &state,
        Op::MigrateProject(MigrateProjectRequest { old_project: b.old_project, new_project: b.new_project }),
    )
    .await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportParams {
    /// Only this project (its sessions, memories, prompts, relations). Empty is an error.
    #[param(pattern = r"\S")]
    project: Option<String>,
}

/// Everything in the store (soft-deleted memories included), as a file to download.
#[utoipa::path(get, operation_id = "export", path = "/export", tag = "daemon", params(ExportParams),
    responses(
        (status = 200, description = "The export", body = cairn_core::transfer::ExportData,
            headers(("Content-Disposition" = String, description = "attachment; filename=cairn-export.json"))),
        (status = 400, description = "Empty project parameter", body = ErrorBody)))]
pub(super) async fn export(State(state): State<AppState>, ApiQuery(p): ApiQuery<ExportParams>) -> ApiResult {
    if p.project.as_deref().is_some_and(|name| name.trim().is_empty()) {
        return Err(CairnError::empty("project").with_hint("omit it to export every project").into());
    }
    let mut response = ok(run(&state, Op::Export(ExportMemoriesRequest { project: p.project })).await?);
    response
        .headers_mut()
        .insert(header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment; filename=cairn-export.json"));
    Ok(response)
}

/// Import an export file (cairn's or engram's). All or nothing; importing twice changes nothing.
#[utoipa::path(post, operation_id = "import", path = "/import", tag = "daemon",
    request_body(content = schema::ImportFile,
        description = "An export file (up to the import size limit, 50 MiB by default)"),
    responses(
        (status = 200, description = "What was imported", body = cairn_core::transfer::ImportReport),
        (status = 400, description = "Not UTF-8, not JSON, or not shaped like an export", body = ErrorBody),
        (status = 413, description = "Larger than the import limit", body = ErrorBody)))]
pub(super) async fn import(State(state): State<AppState>, req: Request) -> ApiResult {
    let bytes = body_bytes(req, &state).await?;
    let data = cairn_core::transfer::parse_import_value(&bytes)?;
    Ok(ok(run(&state, Op::Import(ImportRequest { data })).await?))
}

/// Checks of the data directory and database (read-only).
#[utoipa::path(get, operation_id = "doctor", path = "/doctor", tag = "daemon",
    responses((status = 200, description = "The report; `status` is the worst check", body = cairn_core::doctor::DoctorReport)))]
pub(super) async fn doctor(State(state): State<AppState>) -> ApiResult {
    Ok(ok(run(&state, Op::Doctor).await?))
}

/// Queue memories for (re-)embedding; `force=true` drops every stored vector first.
///
/// Returns at once; the daemon embeds in the background. Poll `/stats` until
/// `embeddings_pending` is 0.
#[utoipa::path(post, operation_id = "reindex", path = "/reindex", tag = "daemon", params(ReindexParams),
    responses(
        (status = 200, description = "What was queued", body = cairn_core::ops::ReindexReport),
        (status = 503, description = "No embedding model (semantic search is off)", body = ErrorBody)))]
pub(super) async fn reindex(State(state): State<AppState>, ApiQuery(p): ApiQuery<ReindexParams>) -> ApiResult {
    Ok(ok(run(&state, Op::Reindex(ReindexRequest { force: p.force.unwrap_or(false) })).await?))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ReindexParams {
    /// Drop every stored vector first.
    force: Option<bool>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ProtocolParams {
    /// The host that shows the text (default `mcp`).
    #[param(schema_with = super::docs::protocol_host)]
    host: Option<String>,
    /// The MCP tool profile the agent has (default `agent`).
    #[param(schema_with = super::docs::protocol_tools)]
    tools: Option<String>,
    /// Which text (default `memory`, the Memory Protocol).
    #[param(schema_with = super::docs::protocol_part)]
    part: Option<String>,
    /// For `part=upstream`: the parent session's id.
    session_id: Option<String>,
}

/// The Memory Protocol, or another text cairn shows agents.
///
/// What plugins and `setup` inject; for `host=mcp` the MCP server's `instructions`.
#[utoipa::path(get, operation_id = "protocol", path = "/protocol", tag = "daemon", params(ProtocolParams),
    responses(
        (status = 200, description = "The text", body = cairn_core::agent::ProtocolText),
        (status = 400, description = "Unknown host, tools or part; upstream without session_id", body = ErrorBody)))]
pub(super) async fn protocol(State(state): State<AppState>, ApiQuery(p): ApiQuery<ProtocolParams>) -> ApiResult {
    let mut request =
        cairn_core::agent::ProtocolRequest::parse(p.host.as_deref(), p.tools.as_deref(), p.part.as_deref())?;
    request.session_id = p.session_id.filter(|s| !s.trim().is_empty());
    Ok(ok(run(&state, Op::Protocol(request)).await?))
}

/// The settings host plugins follow.
///
/// `[inject]`, `[triggers]`, `[compaction]` and `[context_meter]` of config.toml (or their
/// `CAIRN_*` variables). No secret is ever in it.
#[utoipa::path(get, operation_id = "plugin_config", path = "/config", tag = "daemon",
    responses((status = 200, description = "The plugin settings", body = cairn_core::settings::PluginConfig)))]
pub(super) async fn plugin_config(State(state): State<AppState>) -> ApiResult {
    Ok(ok(run(&state, Op::PluginConfig).await?))
}

/// Sync status.
///
/// The projects that sync, each export target with its pending changes and last error,
/// relations waiting for their memories; with `directory`, that repository's chunk folders
/// (manifest chunks, applied, pending import).
#[utoipa::path(get, operation_id = "sync_status", path = "/sync/status", tag = "daemon", params(SyncStatusParams),
    responses((status = 200, description = "Sync status; `enabled` is whether any project syncs", body = cairn_core::sync::SyncStatus)))]
pub(super) async fn sync_status(State(state): State<AppState>, ApiQuery(p): ApiQuery<SyncStatusParams>) -> ApiResult {
    let directory = given(p.directory).map(PathBuf::from);
    Ok(ok(run(&state, Op::SyncStatus(SyncStatusRequest { directory })).await?))
}

/// How long `POST /sync/remote` waits for its round (a round that takes longer goes on).
const REMOTE_ROUND_WAIT: Duration = Duration::from_secs(120);

/// Sync with the hub now.
///
/// One push of what the hub has not acknowledged and one pull of what this store has not
/// applied yet (`cairn remote sync`), through the daemon's autosync so two rounds never
/// overlap. 200 with the round's report when it ended: `in_sync` is true when nothing is left
/// to push or pull and no project was refused. 409 `remote_not_configured` with no hub set
/// (`cairn remote add`), 409 `remote_refused` when the hub refused the token, 409 `sync_busy`
/// when another process holds the sync lease, 503 `remote_unreachable` when the hub did not answer.
#[utoipa::path(post, operation_id = "remote_sync", path = "/sync/remote", tag = "daemon",
    responses(
        (status = 200, description = "The round's report", body = cairn_core::sync::remote::RoundReport),
        (status = 409, description = "No hub set, the hub refused, or another process syncs", body = ErrorBody),
        (status = 503, description = "The hub did not answer", body = ErrorBody)))]
pub(super) async fn remote_sync(State(state): State<AppState>) -> ApiResult {
    let engine = Arc::clone(&state.engine);
    let report = tokio::task::spawn_blocking(move || engine.remote_sync_now(REMOTE_ROUND_WAIT))
        .await
        .map_err(|e| CairnError::internal(format!("sync round failed: {e}")))??;
    Ok(ok(serde_json::to_value(report).map_err(|e| CairnError::internal(e.to_string()))?))
}

/// The longest a session-start import runs; the rest waits for the next session.
const BACKGROUND_IMPORT_CAP_MS: u64 = 8_000;

/// Import a repository's git sync chunks in the background.
///
/// Hosts call it at session start.
/// Answers 202 at once when `.cairn/manifest.json` or `.engram/manifest.json` exists in
/// `directory` (200 `{started: false}` otherwise). The import runs at most 8 s per call; an
/// import of the same repository already running makes this one a no-op.
#[utoipa::path(post, operation_id = "start_sync_import", path = "/sync/import", tag = "daemon",
    request_body = SyncImportBody,
    responses(
        (status = 202, description = "The import started", body = Value),
        (status = 200, description = "Nothing to import there", body = Value),
        (status = 400, description = "Not a JSON body with a directory", body = ErrorBody)))]
pub(super) async fn start_sync_import(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<SyncImportBody>,
) -> ApiResult {
    let directory = PathBuf::from(&body.directory);
    let has_manifest = [".cairn", ".engram"].iter().any(|f| directory.join(f).join("manifest.json").is_file());
    if !has_manifest {
        return Ok(ok(json!({ "started": false, "reason": "no .cairn/manifest.json or .engram/manifest.json there" })));
    }
    let cap = body.time_limit_ms.unwrap_or(BACKGROUND_IMPORT_CAP_MS).min(BACKGROUND_IMPORT_CAP_MS);
    tokio::spawn(async move {
        let op = Op::SyncImport(SyncImportRequest { directory, time_limit_ms: Some(cap) });
        if let Err(e) = run(&state, op).await {
            tracing::info!(error = %e.message(), "background sync import");
        }
    });
    Ok(axum::response::IntoResponse::into_response((
        axum::http::StatusCode::ACCEPTED,
        Json(json!({ "started": true })),
    )))
}

#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct SyncImportBody {
    /// The repository (its `.cairn/` and `.engram/` folders are read).
    directory: String,
    /// How long the import may run, in whole milliseconds (at most 8000, the default).
    #[serde(default, deserialize_with = "import_time_limit")]
    #[schema(value_type = Option<u64>, minimum = 0, maximum = 8000)]
    time_limit_ms: Option<u64>,
}

/// `time_limit_ms` as JSON Schema reads an integer: `250` and `250.0` alike, nothing above the
/// cap (refused, not silently clamped: the document says 8000 at most).
fn import_time_limit<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    let Some(ms) = Option::<f64>::deserialize(deserializer)? else { return Ok(None) };
    if !(ms.fract() == 0.0 && (0.0..=BACKGROUND_IMPORT_CAP_MS as f64).contains(&ms)) {
        return Err(serde::de::Error::custom(format!(
            "time_limit_ms must be a whole number of milliseconds from 0 to {BACKGROUND_IMPORT_CAP_MS}, not {ms}"
        )));
    }
    Ok(Some(ms as u64))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct SyncStatusParams {
    /// A repository whose `.cairn/` and `.engram/` chunk folders to report.
    directory: Option<String>,
}

/// Run any operation.
///
/// The daemon RPC behind `cairn mcp` and the CLI: `{"op": NAME, "args": {...}}`. 200 with the
/// operation's JSON result, or the error body with the code's status.
#[utoipa::path(post, operation_id = "run_op", path = "/v1/op", tag = "daemon", request_body = schema::OpRequest,
    params(("Idempotency-Key" = Option<String>, Header, pattern = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-7[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$",
        description = "A UUID v7 naming this write: a write sent again with the same key (a retry, an event from the spool) is applied once and answers `{\"duplicate_event\": key}`")),
    responses(
        (status = 200, description = "The operation's result", body = Value),
        (status = 400, description = "Not an operation, or bad arguments", body = ErrorBody),
        (status = 404, description = "What the operation names does not exist", body = ErrorBody),
        (status = 409, description = "The operation conflicts with the store's state", body = ErrorBody),
        (status = 413, description = "Larger than the import limit", body = ErrorBody)))]
pub(super) async fn op(State(state): State<AppState>, headers: HeaderMap, ApiJson(value): ApiJson<Value>) -> ApiResult {
    let event = match headers.get(IDEMPOTENCY_KEY) {
        None => None,
        Some(key) => Some(EventId::parse(key.to_str().unwrap_or_default())?),
    };
    let op = Op::from_value(value)?;
    Ok(ok(state.engine.execute_event(op, event).await?.into_value()?))
}

/// The header naming a write, so sending it again applies it once.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// This document.
#[utoipa::path(get, operation_id = "openapi", path = "/openapi.json", tag = "daemon",
    responses((status = 200, description = "The OpenAPI 3.1 description of this API", body = Value)))]
pub(super) async fn openapi(Extension(doc): Extension<Arc<super::docs::ApiDoc>>) -> Json<Value> {
    Json(doc.json().clone())
}

/// Unknown route.
pub(super) async fn no_route(req: Request) -> ApiError {
    ApiError::new(ErrorCode::RouteNotFound, format!("no route {} {}", req.method(), req.uri().path()))
        .with_hint("see /openapi.json for the routes")
}

/// Known route, wrong method (axum adds the `Allow` header).
pub(super) async fn wrong_method(req: Request) -> ApiError {
    ApiError::new(ErrorCode::MethodNotAllowed, format!("{} is not allowed on {}", req.method(), req.uri().path()))
        .with_hint("the Allow header lists the methods of this route")
}

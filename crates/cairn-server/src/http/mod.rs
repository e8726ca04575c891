//! The HTTP API of `cairn serve`: engram's routes (its plugins and scripts work unchanged, minus
//! its quirks) plus cairn's own, the operation RPC the CLI and `cairn mcp` forward to, the
//! OpenAPI document, and the MCP endpoint when one is given.
//!
//! Every handler parses its input, builds one [`Op`] (or calls one core function), runs it on
//! the daemon's store and shapes the JSON. Rules live in cairn-core.
//!
//! - `error`: [`ErrorBody`], the one error body, for every failure of every route.
//! - `extract`: extractors that turn bad input into that body with a stable code.
//! - `guard`: Host / Origin / token checks, who may change anything, and body limits, on every
//!   route including `/mcp`.
//! - `docs`: the OpenAPI 3.1 document, generated from the handlers.
//! - routes: `memories`, `sessions` (and prompts), `conflicts`, `admin`, `wire` (opencode-memory's
//!   `/memories`, and `/extract`).
//! - `ui`: the web page at `/ui` (server-rendered HTML over the same operations; not in the
//!   OpenAPI document).

mod admin;
mod conflicts;
mod docs;
mod error;
mod extract;
mod guard;
mod history;
mod memories;
mod schema;
mod sessions;
mod ui;
mod wire;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, DefaultBodyLimit, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json, Router, middleware};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
// engram's clients send `project=` for "no project": an empty filter means no filter (core's
// blank-means-absent rule, the same in every door).
use cairn_core::agent::given;
use cairn_core::ops::Op;
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use cairn_engine::Engine;

pub use error::{ApiError, ErrorBody, ErrorDetail};
pub use guard::is_loopback;

/// Default cap on a request body.
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// Default cap on an import (`POST /import`, and `POST /v1/op` which may carry one).
pub const DEFAULT_IMPORT_MAX_BODY_BYTES: usize = 50 * 1024 * 1024;
/// Default time a client has to send a request's head (and the time an idle kept-alive
/// connection stays open): a client that trickles its headers cannot hold a connection longer.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How the HTTP door is set up.
#[derive(Clone)]
pub struct HttpConfig {
    /// When set, every route but `GET /health` requires `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// The data directory served, reported by `/health` (clients check it is theirs).
    pub data_dir: Option<PathBuf>,
    /// Reported by `/health` and the OpenAPI document.
    pub version: String,
    pub max_body_bytes: usize,
    pub import_max_body_bytes: usize,
    /// The MCP endpoint, nested at `/mcp` behind the same security checks.
    pub mcp: Option<Router>,
    /// `context_budget` / `CAIRN_CONTEXT_BUDGET`: bytes of a `GET /context` block.
    pub context_budget: usize,
    /// Cancelled when the daemon stops: the web page's live streams end then, or a graceful
    /// shutdown would wait for them forever.
    pub shutdown: tokio_util::sync::CancellationToken,
    /// How long a connection may take to send a request's head, and stay idle between
    /// requests, before it is closed.
    pub header_read_timeout: Duration,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            token: None,
            data_dir: None,
            version: cairn_core::VERSION.to_owned(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            import_max_body_bytes: DEFAULT_IMPORT_MAX_BODY_BYTES,
            mcp: None,
            context_budget: cairn_core::context::DEFAULT_BUDGET_BYTES,
            shutdown: tokio_util::sync::CancellationToken::new(),
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
        }
    }
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("data_dir", &self.data_dir)
            .field("version", &self.version)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("import_max_body_bytes", &self.import_max_body_bytes)
            .field("mcp", &self.mcp.is_some())
            .field("context_budget", &self.context_budget)
            .field("header_read_timeout", &self.header_read_timeout)
            .finish_non_exhaustive()
    }
}

/// What every handler gets.
#[derive(Debug, Clone)]
pub struct AppState {
    pub engine: Arc<Engine>,
    pub config: Arc<HttpConfig>,
}

/// Serve until `shutdown` resolves, then finish the requests in flight and return.
///
/// hyper's HTTP/1 server directly rather than `axum::serve`, which sets no timer: without one a
/// client that never finishes its request head holds its connection (and task) forever.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(state.config.header_read_timeout);
    let app = router(state);
    let connections = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    wait_after_accept_error(&e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(local) = stream.local_addr() else { continue };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(peer));
            req.extensions_mut().insert(guard::ServedOn(local));
            tower_service::Service::call(&mut app.clone(), req)
        });
        // No upgrades: nothing here speaks WebSocket (the live list and `/mcp` stream with SSE).
        let connection = connections.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::trace!("connection from {peer} ended: {e}");
            }
        });
    }
    drop(listener);
    connections.shutdown().await;
    Ok(())
}

/// An accept that failed for the connection's own reason (reset before accept) is retried at
/// once; one that failed for the process's (out of file descriptors) after a pause, as
/// `axum::serve` does, so the loop does not spin.
async fn wait_after_accept_error(error: &std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(error.kind(), ConnectionAborted | ConnectionRefused | ConnectionReset) {
        return;
    }
    tracing::warn!("accepting a connection failed: {error}");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Every route, the fallbacks and the security layers.
pub fn router(state: AppState) -> Router {
    let (routes, doc) = api().split_for_parts();
    let doc = Arc::new(docs::ApiDoc::new(doc, Arc::clone(&state.config)));
    let mut app = routes.merge(ui::routes());
    if let Some(mcp) = state.config.mcp.clone() {
        app = app.nest_service("/mcp", mcp);
    }
    // Layers run outside-in from the last added: security first, then the size limit.
    app.fallback(admin::no_route)
        .method_not_allowed_fallback(admin::wrong_method)
        .layer(DefaultBodyLimit::disable()) // `guard::limit_body` sets the limit per route
        .layer(middleware::from_fn_with_state(state.clone(), guard::limit_body))
        .layer(middleware::from_fn_with_state(state.clone(), guard::security))
        .layer(middleware::from_fn(access_log))
        .layer(Extension(doc))
        .with_state(state)
}

/// The routes with their documentation (one `routes!` per path).
fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(docs::base())
        .routes(routes!(admin::health))
        .routes(routes!(sessions::create))
        .routes(routes!(sessions::end))
        .routes(routes!(sessions::recent))
        .routes(routes!(sessions::get_one, sessions::delete))
        .routes(routes!(sessions::activity, sessions::record_activity))
        .routes(routes!(memories::save, memories::list))
        .routes(routes!(memories::recent))
        .routes(routes!(memories::get_one, memories::update, memories::delete))
        .routes(routes!(memories::restore))
        .routes(routes!(memories::pin))
        .routes(routes!(memories::unpin))
        .routes(routes!(memories::passive))
        .routes(routes!(memories::search))
        .routes(routes!(memories::timeline))
        .routes(routes!(memories::context))
        .routes(routes!(sessions::add_prompt))
        .routes(routes!(sessions::recent_prompts))
        .routes(routes!(sessions::search_prompts))
        .routes(routes!(sessions::delete_prompt))
        .routes(routes!(admin::export))
        .routes(routes!(admin::import))
        .routes(routes!(admin::stats))
        .routes(routes!(admin::doctor))
        .routes(routes!(admin::reindex))
        .routes(routes!(admin::projects))
        .routes(routes!(admin::current_project))
        .routes(routes!(admin::migrate_project))
        .routes(routes!(admin::sync_status))
        .routes(routes!(admin::start_sync_import))
        .routes(routes!(admin::remote_sync))
        .routes(routes!(admin::protocol))
        .routes(routes!(admin::plugin_config))
        .routes(routes!(conflicts::list))
        .routes(routes!(conflicts::stats))
        .routes(routes!(conflicts::deferred))
        .routes(routes!(conflicts::replay))
        .routes(routes!(conflicts::scan))
        .routes(routes!(conflicts::judge))
        .routes(routes!(conflicts::compare))
        .routes(routes!(conflicts::get_one))
        .routes(routes!(history::sessions))
        .routes(routes!(history::turns))
        .routes(routes!(history::messages))
        .routes(routes!(history::message))
        .routes(routes!(history::part))
        .routes(routes!(history::search))
        .routes(routes!(history::chart))
        .routes(routes!(history::compactions))
        .routes(routes!(history::children))
        .routes(routes!(history::stats))
        .routes(routes!(history::forget))
        .routes(routes!(history::ingest))
        .routes(routes!(history::plans))
        .routes(routes!(history::context_usage))
        .routes(routes!(admin::op))
        .routes(routes!(admin::drain_spool))
        .routes(routes!(wire::add, wire::list))
        .routes(routes!(wire::search))
        .routes(routes!(wire::delete))
        .routes(routes!(wire::extract))
        .routes(routes!(admin::openapi))
}

type ApiResult = Result<Response, ApiError>;

/// One debug line per request: method, path, status, time. Never the query string or a body:
/// they carry what agents save and search for (`<private>` text included).
async fn access_log(req: axum::extract::Request, next: middleware::Next) -> Response {
    let (method, path) = (req.method().clone(), req.uri().path().to_owned());
    let started = std::time::Instant::now();
    let response = next.run(req).await;
    tracing::debug!(%method, path, status = response.status().as_u16(), elapsed = ?started.elapsed(), "request");
    response
}

/// Run one operation on the daemon's store; its result as the JSON this door sends.
async fn run(state: &AppState, op: Op) -> Result<Value, ApiError> {
    Ok(state.engine.execute(op).await?.into_value()?)
}

/// Run one request; its answer, of the type the request names.
async fn run_typed<R: cairn_core::ops::Request>(state: &AppState, request: R) -> Result<R::Output, ApiError> {
    Ok(R::output(state.engine.execute(request.into_op()).await?)?)
}

fn ok(value: Value) -> Response {
    Json(value).into_response()
}

fn created(value: Value) -> Response {
    (StatusCode::CREATED, Json(value)).into_response()
}

/// Add fields to an operation's result object (engram's `status`, aliases).
fn with_fields<const N: usize>(mut value: Value, fields: [(&str, Value); N]) -> Value {
    if let Some(object) = value.as_object_mut() {
        for (key, field) in fields {
            object.insert(key.to_owned(), field);
        }
    }
    value
}

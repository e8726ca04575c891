//! The MCP server (engram §12): engram's 19 `mem_*` tools plus cairn's one-tool `memory`
//! router, over stdio (`cairn mcp`) or streamable HTTP (`/mcp` in `cairn serve`).
//!
//! Tools are thin: parse arguments → build an [`Op`](cairn_core::ops::Op) → run it through the
//! [`Client`] (usually the daemon) → render text. Every failure, bad arguments included, is a
//! tool result with `isError: true` and a stable error code, never a protocol error.
//!
//! - [`profile`]: which tools a server exposes.
//! - `tools`: the tool list (names, descriptions, annotations); `handlers`: what each does.
//! - `reply`: envelopes and errors; the text of results is `cairn_render::agent`'s.
//!
//! Each call's activity (tool calls, saves, the pending prompt, save reminders) is kept per
//! session by cairn-core (`cairn_core::agent::activity`, through the client, so hooks and the
//! HTTP API of the same session see it). The session of a call: its `session_id` argument,
//! else the session this server instance opened with
//! `mem_session_start`, else `manual-save-<project>`, the session its saves go to by default.

mod args;
mod handlers;
mod jsonrpc;
pub mod profile;
mod reply;
mod router_tool;
mod stdio;
mod tools;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::http::request::Parts;
use cairn_core::CairnError;
use cairn_core::agent::protocol::Host;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolRequestParams, CallToolResponse, Implementation, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt, tool_handler};
use tokio_util::sync::CancellationToken;

pub use profile::{ADMIN_TOOLS, AGENT_TOOLS, HISTORY_TOOLS, ROUTER_TOOL, ToolSelection};

use cairn_client::Client;

/// Header an HTTP client may send to name the project of its calls (the daemon's own working
/// directory says nothing about the agent's).
pub const PROJECT_HEADER: &str = "x-cairn-project";

/// How a server is set up.
#[derive(Debug, Clone)]
pub struct McpOptions {
    pub tools: ToolSelection,
    /// `--project` / `CAIRN_PROJECT`: used when a call names no project.
    pub project: Option<String>,
    /// Where the project is detected from when nothing names it.
    pub cwd: PathBuf,
    /// Reported as the server's version.
    pub version: String,
    /// `context_budget` / `CAIRN_CONTEXT_BUDGET`: bytes of a `mem_context` block.
    pub context_budget: usize,
    /// `cairn mcp --host`: the agent host this server was started for. Where cairn's plugin or
    /// hooks already give the agent the protocol, the instructions are one line, not a copy.
    pub host: Option<Host>,
    /// The project's recent context, added to the instructions when the host's hooks cannot
    /// give it at the session's start (Codex before the user trusted cairn's hooks).
    pub instructions_context: Option<String>,
}

impl McpOptions {
    /// Every tool, project detected from `cwd`.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        Self {
            tools: ToolSelection::default(),
            project: None,
            cwd: cwd.into(),
            version: cairn_core::VERSION.into(),
            context_budget: cairn_core::context::DEFAULT_BUDGET_BYTES,
            host: None,
            instructions_context: None,
        }
    }
}

/// What one server instance keeps: one per stdio process, one per MCP-over-HTTP session.
struct State {
    client: Client,
    opts: McpOptions,
    /// The session opened with `mem_session_start` (id, project): later calls belong to it.
    session: Mutex<Option<(String, String)>>,
}

/// Per-call facts from the transport, handed to tools as an rmcp extension.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallCtx {
    /// The `X-Cairn-Project` header (HTTP only).
    header_project: Option<String>,
    /// The session whose activity this call counts in (see the module doc); `None` when the
    /// call could not be recorded.
    activity_session: Option<String>,
    /// The session the call names or this server opened, with its project: it outranks the
    /// header and `--project` (`cairn_core::agent::resolve_project`).
    session: Option<(String, Option<String>)>,
    /// The save reminder due now, for the tools that show one.
    reminder: Option<String>,
}

/// The MCP server. Build it with [`CairnMcp::new`] and serve it over any rmcp transport.
#[derive(Clone)]
pub struct CairnMcp {
    state: Arc<State>,
    tool_router: ToolRouter<CairnMcp>,
}

impl std::fmt::Debug for CairnMcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CairnMcp").field("tools", &self.state.opts.tools).finish_non_exhaustive()
    }
}

impl CairnMcp {
    pub fn new(client: Client, opts: McpOptions) -> Self {
        let mut tool_router = Self::tool_router();
        tool_router.map.retain(|name, _| opts.tools.contains(name));
        for route in tool_router.map.values_mut() {
            route.attr.input_schema = Arc::new(args::slim_schema(&route.attr.input_schema));
        }
        let state = State { client, opts, session: Mutex::new(None) };
        Self { state: Arc::new(state), tool_router }
    }

    fn opened_session(&self) -> MutexGuard<'_, Option<(String, String)>> {
        self.state.session.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CairnMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cairn", self.state.opts.version.clone()).with_title("cairn memory"))
            .with_instructions(match &self.state.opts.instructions_context {
                Some(context) => format!("{}\n\n{context}", instructions(&self.state.opts.tools, self.state.opts.host)),
                None => instructions(&self.state.opts.tools, self.state.opts.host),
            })
    }

    /// rmcp answers an unknown tool with a protocol error; agents handle a readable tool
    /// error better, and the call counts toward the activity the save reminder looks at.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.tool_router.has_route(&request.name) {
            let offered: Vec<String> = self.tool_router.list_all().into_iter().map(|t| t.name.into_owned()).collect();
            let err = CairnError::invalid(format!("unknown tool {:?}", request.name))
                .with_hint(format!("this server offers: {}", offered.join(", ")));
            return Ok(reply::error(&err).into());
        }
        let header_project = context
            .extensions
            .get::<Parts>()
            .and_then(|p| p.headers.get(PROJECT_HEADER))
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned);
        let mut call = CallCtx { header_project, ..CallCtx::default() };
        self.record_call(&request, &mut call).await;
        context.extensions.insert(call);
        self.tool_router.call(ToolCallContext::new(self, request, context)).await
    }
}

/// The memory protocol sent once per session (one line where the host's cairn plugin gives it
/// already). Short: it costs tokens in every session.
fn instructions(tools: &ToolSelection, host: Option<Host>) -> String {
    cairn_core::agent::mcp_instructions(host, tools.profile())
}

/// Serve MCP on stdin/stdout until the client leaves or Ctrl-C. stdout carries JSON-RPC only:
/// log through `tracing` (to stderr), never print. When stdin ends, the requests already read
/// are finished and their answers written before this returns.
pub async fn serve_stdio(client: Client, opts: McpOptions) -> cairn_core::Result<()> {
    let pipes = stdio::guarded(tokio::io::stdin(), tokio::io::stdout());
    let service = CairnMcp::new(client, opts)
        .serve((pipes.read, pipes.write))
        .await
        .map_err(|e| CairnError::internal(format!("MCP handshake failed: {e}")))?;
    let cancel = service.cancellation_token();
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
    let reason = service.waiting().await;
    ctrl_c.abort();
    // rmcp has closed its end: what it wrote is still being copied to stdout.
    let _ = pipes.finished.await;
    tracing::debug!(?reason, "MCP stdio session ended");
    reason.map(|_| ()).map_err(|e| CairnError::internal(format!("MCP server stopped: {e}")))
}

/// Streamable HTTP MCP as a router, for the daemon to mount with `.nest("/mcp", ...)`.
/// Cancel `cancel` on shutdown: open SSE streams otherwise keep a graceful shutdown waiting.
/// Calls may name their project with the `X-Cairn-Project` header. Hosts are limited to
/// loopback names (rmcp's DNS-rebinding guard).
pub fn http_router(client: Client, opts: McpOptions, cancel: CancellationToken) -> axum::Router {
    let config = StreamableHttpServerConfig::default()
        .with_cancellation_token(cancel)
        .with_sse_keep_alive(Some(std::time::Duration::from_secs(15)));
    let service = StreamableHttpService::new(
        move || Ok(CairnMcp::new(client.clone(), opts.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    axum::Router::new().route_service("/", service).layer(axum::middleware::from_fn(jsonrpc::judge_http_message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::agent::protocol::{Part, ProtocolRequest, ToolProfile};

    #[test]
    fn instructions_are_the_protocol_of_the_profile() {
        for (spec, profile) in [
            ("", ToolProfile::All),
            ("all", ToolProfile::All),
            ("agent", ToolProfile::Agent),
            ("agent,mem_stats", ToolProfile::Agent),
            ("router", ToolProfile::Router),
            ("admin", ToolProfile::Admin),
        ] {
            let tools = ToolSelection::parse(spec).unwrap();
            assert_eq!(tools.profile(), profile, "{spec:?}");
            let expected = cairn_core::agent::protocol(ProtocolRequest {
                host: Host::Mcp,
                tools: profile,
                part: Part::Memory,
                session_id: None,
            });
            assert_eq!(instructions(&tools, None), expected.text, "{spec:?}");
        }
        let all = instructions(&ToolSelection::default(), None);
        assert!(
            all.contains("mem_search") && all.contains("never replace your reply") && all.contains("Sub-agents never")
        );
        let router = instructions(&ToolSelection::parse("router").unwrap(), None);
        assert!(router.contains("memory {op: \"save\"}") && !router.contains("mem_save"), "{router}");
        assert!(all.len() < 1500, "instructions cost tokens in every session: {} bytes", all.len());
    }

    /// A host whose cairn plugin or hooks inject the protocol gets one line from the server, so
    /// the agent does not read the protocol twice; other hosts get the protocol.
    #[test]
    fn a_host_with_a_cairn_plugin_gets_one_line() {
        let agent = ToolSelection::parse("agent").unwrap();
        let full = instructions(&agent, None);
        for host in [Host::Opencode, Host::ClaudeCode] {
            let line = instructions(&agent, Some(host));
            assert!(!line.contains('\n') && line.contains("mem_save") && line.len() < 200, "{host:?}: {line}");
            assert!(!line.contains("cairn is your persistent memory"), "no second copy: {line}");
        }
        for host in [Host::Mcp, Host::Codex, Host::Gemini] {
            assert_eq!(instructions(&agent, Some(host)), full, "{host:?}");
        }
        let router = instructions(&ToolSelection::parse("router").unwrap(), Some(Host::Opencode));
        assert!(router.contains("memory {op: \"save\"}"), "{router}");
    }
}

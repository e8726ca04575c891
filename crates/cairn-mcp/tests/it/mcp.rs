//! The MCP server through rmcp's own client, over an in-process duplex pipe (and once over
//! streamable HTTP): tool lists per profile, every tool's success path, errors as `isError`
//! results with stable codes, and the server staying up after them.

use std::time::Duration;

use cairn_client::Client;
use cairn_client::DaemonClient;
use cairn_engine::Engine;
use cairn_mcp::{ADMIN_TOOLS, AGENT_TOOLS, CairnMcp, HISTORY_TOOLS, McpOptions, ToolSelection};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

struct Mcp {
    client: RunningService<RoleClient, ()>,
    _dir: tempfile::TempDir,
}

/// A server on a fresh in-memory store, project `it-proj` unless `project` says otherwise.
async fn start_with(tools: &str, project: Option<&str>, client: Client) -> Mcp {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = McpOptions::new(dir.path());
    opts.tools = ToolSelection::parse(tools).unwrap();
    opts.project = project.map(str::to_owned);
    opts.version = "9.9.9-test".into();
    connect(opts, client, dir).await
}

/// A server with these options, reached by an rmcp client over an in-process duplex.
async fn connect(opts: McpOptions, client: Client, dir: tempfile::TempDir) -> Mcp {
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let server = CairnMcp::new(client, opts);
    tokio::spawn(async move {
        if let Ok(running) = server.serve(server_io).await {
            let _ = running.waiting().await;
        }
    });
    let client = ().serve(client_io).await.expect("initialize");
    Mcp { client, _dir: dir }
}

/// An agent-profile server on a fresh in-memory store whose working directory is `cwd`.
async fn start_in(cwd: &std::path::Path) -> Mcp {
    let mut opts = McpOptions::new(cwd);
    opts.tools = ToolSelection::parse("agent").unwrap();
    connect(opts, Client::in_process(Engine::in_memory().unwrap()), tempfile::tempdir().unwrap()).await
}

async fn start(tools: &str) -> Mcp {
    start_with(tools, Some("it-proj"), Client::in_process(Engine::in_memory().unwrap())).await
}

impl Mcp {
    async fn call(&self, name: &str, args: Value) -> CallToolResult {
        let args = args.as_object().cloned().expect("arguments are an object");
        self.client
            .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(args))
            .await
            .unwrap_or_else(|e| panic!("{name}: protocol error {e}"))
    }

    /// A successful call's text.
    async fn ok(&self, name: &str, args: Value) -> String {
        let r = self.call(name, args).await;
        let text = text(&r);
        assert_ne!(r.is_error, Some(true), "{name} failed: {text}");
        text
    }

    /// A successful call's JSON body.
    async fn ok_json(&self, name: &str, args: Value) -> Value {
        let text = self.ok(name, args).await;
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {text}"))
    }

    /// A failed call's error code (and the whole error body).
    async fn err(&self, name: &str, args: Value) -> (String, Value) {
        let r = self.call(name, args).await;
        assert_eq!(r.is_error, Some(true), "{name} should fail: {}", text(&r));
        let body: Value = serde_json::from_str(&text(&r)).expect("error bodies are JSON");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
        assert!(body["hint"].as_str().is_some_and(|h| !h.is_empty()), "{body}");
        (body["error_code"].as_str().unwrap_or_default().to_owned(), body)
    }

    async fn save(&self, title: &str, content: &str, extra: Value) -> i64 {
        let mut args = json!({"title": title, "content": content});
        args.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
        self.ok_json("mem_save", args).await["id"].as_i64().expect("mem_save answers an id")
    }

    async fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> =
            self.client.list_all_tools().await.unwrap().into_iter().map(|t| t.name.into_owned()).collect();
        names.sort();
        names
    }
}

fn text(r: &CallToolResult) -> String {
    r.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.as_str()).collect::<Vec<_>>().join("\n")
}

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
    v.sort();
    v
}

#[tokio::test]
async fn tool_lists_per_profile() {
    let all: Vec<&str> = AGENT_TOOLS.iter().chain(ADMIN_TOOLS).chain(HISTORY_TOOLS).copied().collect();
    let agent: Vec<&str> = AGENT_TOOLS.iter().chain(HISTORY_TOOLS).copied().collect();
    for (spec, expected) in [
        ("agent", agent),
        ("admin", ADMIN_TOOLS.to_vec()),
        ("history", HISTORY_TOOLS.to_vec()),
        ("all", all.clone()),
        ("", all.clone()),
        ("router", vec!["memory"]),
        ("mem_search,mem_save", vec!["mem_search", "mem_save"]),
    ] {
        let mcp = start(spec).await;
        assert_eq!(mcp.tool_names().await, sorted(&expected), "profile {spec:?}");
    }
    assert_eq!((AGENT_TOOLS.len(), ADMIN_TOOLS.len(), HISTORY_TOOLS.len(), all.len()), (15, 4, 6, 25));
}

#[tokio::test]
async fn tools_carry_schemas_annotations_and_server_info() {
    let mcp = start("all,router").await;
    let info = mcp.client.peer_info().expect("initialized");
    let server = info.server_info.clone().expect("server info");
    assert_eq!((server.name.as_str(), server.version.as_str()), ("cairn", "9.9.9-test"));
    let instructions = info.instructions.clone().unwrap_or_default();
    assert!(instructions.contains("never replace your reply"), "{instructions}");
    // The handshake's instructions are the Memory Protocol of op `protocol` (one source for every
    // host).
    let protocol = cairn_core::agent::protocol(cairn_core::agent::ProtocolRequest {
        tools: cairn_core::agent::protocol::ToolProfile::Agent,
        ..Default::default()
    });
    assert_eq!(instructions, protocol.text);
    let tools = mcp.client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 19 + 6 + 1, "the engram tools, the history tools, the router");
    for tool in &tools {
        let name = &tool.name;
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")), "{name}");
        assert!(tool.description.as_deref().is_some_and(|d| d.len() > 20), "{name} has a description");
        let a = tool.annotations.as_ref().unwrap_or_else(|| panic!("{name} has annotations"));
        assert!(a.title.is_some() && a.read_only_hint.is_some() && a.destructive_hint.is_some(), "{name}");
        assert!(a.idempotent_hint.is_some(), "{name}");
        assert_eq!(a.open_world_hint, Some(false), "{name}");
    }
    let router = tools.iter().find(|t| t.name == "memory").unwrap();
    let description = router.description.as_deref().unwrap();
    assert!(description.contains("\nsave: ") && description.contains("\nmerge_projects: "), "{description}");
    let save = tools.iter().find(|t| t.name == "mem_save").unwrap();
    assert_eq!(save.input_schema["required"], json!(["title", "content"]));
}

/// One call of every tool, in the order an agent's session would make them.
#[tokio::test]
async fn every_tool_succeeds() {
    let mcp = start("all,router").await;

    let current = mcp.ok_json("mem_current_project", json!({})).await;
    assert_eq!(
        (current["project"].as_str(), current["project_source"].as_str()),
        (Some("it-proj"), Some("process_override"))
    );

    let started =
        mcp.ok_json("mem_session_start", json!({"id": "s1", "agent": "test", "parent_session_id": "p0"})).await;
    assert!(started["result"].as_str().unwrap().contains("Session started: s1 (project it-proj), sub-session of p0"));

    let prompt = mcp.ok_json("mem_save_prompt", json!({"content": "please fix the login flow"})).await;
    assert!(prompt["result"].as_str().unwrap().starts_with("Prompt saved: #"), "{prompt}");

    let first = mcp
        .ok_json(
            "mem_save",
            json!({"title": "Auth uses JWT access tokens", "type": "decision", "session_id": "s1",
                   "content": "What: JWT access tokens with refresh. Why: stateless API. Where: src/auth."}),
        )
        .await;
    let id1 = first["id"].as_i64().unwrap();
    assert_eq!((first["project"].as_str(), first["action"].as_str()), (Some("it-proj"), Some("created")));
    assert!(
        first["result"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Memory saved: #{id1} \"Auth uses JWT access tokens\" (decision)"))
    );
    assert!(first["suggested_topic_key"].as_str().is_some_and(|k| k.starts_with("decision/")), "{first}");
    assert_eq!(first["judgment_required"], false);

    // The prompt recorded in the default session is attached to s1, where this memory went.
    let prompts = mcp.ok("memory", json!({"op": "recent_prompts", "args": {}})).await;
    let prompts: Value = serde_json::from_str(&prompts).unwrap();
    let sessions: Vec<&str> = prompts.as_array().unwrap().iter().filter_map(|p| p["session_id"].as_str()).collect();
    assert!(sessions.contains(&"s1") && sessions.contains(&"manual-save-it-proj"), "{prompts}");

    let second = mcp
        .ok_json(
            "mem_save",
            json!({"title": "Auth uses JWT access tokens and refresh tokens", "type": "decision",
                   "content": "What: JWT access tokens with refresh rotation. Why: stateless API. Where: src/auth."}),
        )
        .await;
    let id2 = second["id"].as_i64().unwrap();
    assert_eq!(second["judgment_required"], true, "{second}");
    assert_eq!(second["candidates"][0]["id"].as_i64(), Some(id1));
    assert!(second["result"].as_str().unwrap().contains("mem_judge"));
    let judgment_id = second["judgment_id"].as_str().unwrap().to_owned();

    let judged = mcp
        .ok_json("mem_judge", json!({"judgment_id": judgment_id, "relation": "supersedes", "confidence": 0.9}))
        .await;
    assert_eq!(judged["relation"]["judgment_status"], "judged");

    let found = mcp.ok_json("mem_search", json!({"query": "JWT refresh"})).await;
    let result = found["result"].as_str().unwrap();
    assert!(result.starts_with("Found 2 memories:") && result.contains(&format!("#{id1} (decision)")), "{result}");
    assert!(result.contains(&format!("superseded_by: #{id2}")), "relation annotations: {result}");

    let context = mcp.ok_json("mem_context", json!({})).await;
    let result = context["result"].as_str().unwrap();
    assert!(result.contains("Auth uses JWT") && result.contains("Memory stats:"), "{result}");

    let full = mcp.ok_json("mem_get_observation", json!({"id": id1})).await;
    assert!(full["result"].as_str().unwrap().contains("Where: src/auth.") && full["id"] == id1);

    let updated = mcp.ok_json("mem_update", json!({"id": id1, "title": "Auth: JWT access tokens"})).await;
    assert!(
        updated["result"].as_str().unwrap().starts_with(&format!("Memory updated: #{id1} \"Auth: JWT access tokens\""))
    );

    let key =
        mcp.ok("mem_suggest_topic_key", json!({"type": "bugfix", "title": "Login crash on empty password"})).await;
    assert_eq!(key, "Suggested topic_key: bug/login-crash-on-empty-password");

    let learnings = "Done.\n\n## Key Learnings:\n1. Always run schema migrations inside one transaction\n\
                     2. The login form must trim the email before validating it";
    let captured = mcp.ok_json("mem_capture_passive", json!({"content": learnings, "source": "test"})).await;
    assert_eq!((captured["extracted"].as_u64(), captured["saved"].as_u64()), (Some(2), Some(2)), "{captured}");

    let compared = mcp
        .ok_json(
            "mem_compare",
            json!({"memory_id_a": id2, "memory_id_b": id1, "relation": "related", "confidence": 0.8, "reasoning": "same topic"}),
        )
        .await;
    assert!(compared["sync_id"].as_str().is_some_and(|s| !s.is_empty()), "{compared}");

    let doctor = mcp.ok_json("mem_doctor", json!({})).await;
    assert_eq!(doctor["status"], "ok");

    let stats = mcp.ok_json("mem_stats", json!({})).await;
    assert!(stats["result"].as_str().unwrap().contains("- it-proj: 4 memories"), "{stats}");

    let timeline = mcp.ok_json("mem_timeline", json!({"observation_id": id1})).await;
    assert!(timeline["result"].as_str().unwrap().contains("─── Focus ───"), "{timeline}");

    let summary = mcp
        .ok_json("mem_session_summary", json!({"content": "Goal: auth. Accomplished: JWT.", "session_id": "s1"}))
        .await;
    let result = summary["result"].as_str().unwrap();
    assert!(result.starts_with("Session summary saved: #") && result.contains("Session activity:"), "{result}");

    let ended = mcp.ok_json("mem_session_end", json!({"id": "s1"})).await;
    assert_eq!(ended["result"], "Session ended: s1");

    mcp.save("Old project note", "Lives under a misspelled project name", json!({"project": "it-proj-old"})).await;
    let merged = mcp.ok("mem_merge_projects", json!({"from": "it-proj-old", "to": "it-proj"})).await;
    assert!(merged.starts_with("Merged into it-proj:\n- it-proj-old: migrated (1 memories"), "{merged}");

    let deleted = mcp.ok("mem_delete", json!({"id": id2})).await;
    assert_eq!(deleted, format!("Memory #{id2} soft-deleted"));

    let stats = mcp.ok("memory", json!({"op": "stats"})).await;
    assert!(stats.starts_with("Memory stats:"), "{stats}");
}

#[tokio::test]
async fn bad_calls_are_tool_errors_with_codes_and_the_server_keeps_working() {
    let mcp = start("all").await;
    let (code, body) = mcp.err("mem_save", json!({})).await;
    assert_eq!(code, "invalid_argument");
    assert!(body["message"].as_str().unwrap().contains("title"), "{body}");
    let (code, body) = mcp.err("mem_get_observation", json!({"id": "not-a-number"})).await;
    assert_eq!(code, "invalid_argument");
    assert!(body["message"].as_str().unwrap().starts_with("id: "), "{body}");
    assert_eq!(mcp.err("mem_save", json!({"title": 5, "content": "c"})).await.0, "invalid_argument");
    assert_eq!(mcp.err("mem_save", json!({"title": " ", "content": "c"})).await.0, "empty_field");
    assert_eq!(mcp.err("mem_search", json!({"query": ""})).await.0, "empty_field");
    assert_eq!(mcp.err("mem_search", json!({"query": "x", "mode": "fuzzy"})).await.0, "invalid_argument");
    assert_eq!(mcp.err("mem_update", json!({"id": 1})).await.0, "invalid_argument");
    assert_eq!(
        mcp.err("mem_save", json!({"title": "t", "content": "c", "project": "a/b"})).await.0,
        "invalid_argument"
    );
    assert_eq!(mcp.err("mem_judge", json!({"judgment_id": "x", "relation": "maybe"})).await.0, "invalid_argument");
    assert_eq!(mcp.err("mem_session_end", json!({"id": "never-started"})).await.0, "session_not_found");
    for (tool, args) in [
        ("mem_get_observation", json!({"id": 424_242})),
        ("mem_update", json!({"id": 424_242, "title": "x"})),
        ("mem_delete", json!({"id": 424_242})),
        ("mem_timeline", json!({"observation_id": 424_242})),
    ] {
        let (code, body) = mcp.err(tool, args).await;
        assert_eq!(code, "observation_not_found", "{tool}: {body}");
        assert!(body["hint"].as_str().unwrap().contains("mem_search"), "{body}");
    }
    // Unknown tools are readable tool errors too, not protocol errors.
    let (code, body) = mcp.err("mem_no_such_tool", json!({})).await;
    assert_eq!(code, "invalid_argument");
    assert!(body["hint"].as_str().unwrap().contains("mem_save"), "{body}");
    let admin_only = start("agent").await;
    assert_eq!(admin_only.err("mem_delete", json!({"id": 1})).await.0, "invalid_argument");

    let id = mcp.save("Still alive", "the server keeps answering after errors", json!({})).await;
    let found = mcp.ok_json("mem_search", json!({"query": "alive"})).await;
    assert!(found["result"].as_str().unwrap().contains(&format!("#{id}")));
}

#[tokio::test]
async fn topic_key_revises_and_search_round_trips() {
    let mcp = start("all").await;
    let key = "architecture/auth-model";
    let first = mcp
        .ok_json(
            "mem_save",
            json!({"title": "Auth model", "content": "Sessions in cookies", "topic_key": key, "type": "architecture"}),
        )
        .await;
    let second = mcp
        .ok_json("mem_save", json!({"title": "Auth model", "content": "JWT with refresh rotation", "topic_key": key, "type": "architecture"}))
        .await;
    assert_eq!(first["id"], second["id"]);
    assert_eq!((second["action"].as_str(), second["revision_count"].as_i64()), (Some("revised"), Some(2)));
    assert!(second["result"].as_str().unwrap().contains(&format!("revision 2 of topic {key}")), "{second}");
    let again = mcp
        .ok_json("mem_save", json!({"title": "Auth model", "content": "JWT with refresh rotation", "topic_key": key, "type": "architecture"}))
        .await;
    assert_eq!(again["action"], "duplicate");

    let by_key = mcp.ok_json("mem_search", json!({"query": key})).await;
    let result = by_key["result"].as_str().unwrap();
    assert!(result.starts_with("Found 1 memory:") && result.contains("JWT with refresh rotation"), "{result}");
    assert!(!result.contains("Sessions in cookies"));
    assert_eq!(by_key["ids"], json!([first["id"]]));

    // Long content: search shows a preview, get shows everything.
    let long = format!("{} END-MARKER", "word ".repeat(200));
    let id = mcp.save("Long memory", &long, json!({})).await;
    let found = mcp.ok_json("mem_search", json!({"query": "long memory"})).await;
    let result = found["result"].as_str().unwrap();
    assert!(
        result.contains("[preview]") && !result.contains("END-MARKER") && result.contains("mem_get_observation"),
        "{result}"
    );
    let full = mcp.ok_json("mem_get_observation", json!({"id": id})).await;
    assert!(full["result"].as_str().unwrap().contains("END-MARKER"));
}

#[tokio::test]
async fn empty_search_says_where_the_memories_are() {
    let mcp = start("all").await;
    mcp.save("Zebra crossing rule", "Only in the other project", json!({"project": "elsewhere"})).await;
    let missed = mcp.ok_json("mem_search", json!({"query": "zebra"})).await;
    let result = missed["result"].as_str().unwrap();
    assert!(result.starts_with("No memories found for \"zebra\" in project it-proj."), "{result}");
    assert!(result.contains("1 in other projects") && result.contains("all_projects: true"), "{result}");
    let everywhere = mcp.ok_json("mem_search", json!({"query": "zebra", "all_projects": true})).await;
    assert!(everywhere["result"].as_str().unwrap().contains("project: elsewhere"), "{everywhere}");
    let there = mcp.ok_json("mem_search", json!({"query": "zebra", "project": "Elsewhere"})).await;
    assert_eq!(
        (there["project"].as_str(), there["project_source"].as_str()),
        (Some("elsewhere"), Some("explicit_override"))
    );
    assert_eq!(there["count"], 1);
}

#[tokio::test]
async fn router_tool_runs_any_operation() {
    let mcp = start("router").await;
    let saved =
        mcp.ok("memory", json!({"op": "save", "args": {"title": "Router save", "content": "through one tool"}})).await;
    let saved: Value = serde_json::from_str(&saved).unwrap();
    let id = saved["id"].as_i64().unwrap();
    assert_eq!((saved["project"].as_str(), saved["action"].as_str()), (Some("it-proj"), Some("created")));
    let found = mcp.ok("memory", json!({"op": "search", "args": {"query": "router"}})).await;
    assert!(found.starts_with("Found 1 memory:") && found.contains(&format!("#{id}")), "{found}");
    let got = mcp.ok("memory", json!({"tool": "get", "args": {"id": id}})).await;
    assert!(got.contains("through one tool"), "{got}");

    let (code, body) = mcp.err("memory", json!({"op": "nope"})).await;
    assert_eq!(code, "invalid_argument");
    assert!(body["message"].as_str().unwrap().contains("unknown op \"nope\""), "{body}");
    assert_eq!(mcp.err("memory", json!({"op": "get", "args": {"id": 9999}})).await.0, "observation_not_found");
    assert_eq!(mcp.err("memory", json!({"args": {}})).await.0, "invalid_argument");

    // open-memory's calls: help, then its history names with its keys.
    let help = mcp.ok("memory", json!({"tool": "help", "args": {"tool": "compactions"}})).await;
    assert!(help.starts_with("history_compactions: "), "{help}");
    assert!(mcp.ok("memory", json!({"op": "help"})).await.contains("\nhistory_search: "));
    let summary: Value = serde_json::from_str(&mcp.ok("memory", json!({"tool": "summary"})).await).unwrap();
    assert!(summary["hosts"].is_array(), "{summary}");
    let (code, _) = mcp.err("memory", json!({"tool": "messages", "args": {"sessionId": "ses_none", "limit": 5}})).await;
    assert_eq!(code, "history_session_not_found");
}

/// The router's `plans` and `context_usage` ops: `plans` lists and reads the working directory's
/// git project's OpenCode plans and refuses paths; `context_usage` (open-memory's `context` with a
/// `sessionId`) answers for the caller's session, else the latest, and with no usage says so.
#[tokio::test]
async fn router_plans_and_context_usage() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let plans = repo.join(".opencode").join("plans");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(&plans).unwrap();
    std::fs::write(plans.join("1767000000000-calm-owl.md"), "# Route the plans\n\n1. list\n2. read\n").unwrap();
    std::fs::write(dir.path().join("outside.md"), "# not a plan").unwrap();
    let mut opts = McpOptions::new(&repo);
    opts.tools = ToolSelection::parse("router").unwrap();
    let mcp = connect(opts, Client::in_process(Engine::in_memory().unwrap()), tempfile::tempdir().unwrap()).await;

    let listing = mcp.ok("memory", json!({"op": "plans"})).await;
    assert!(listing.starts_with("| name | where | size | modified | first heading |"), "{listing}");
    assert!(listing.contains("| 1767000000000-calm-owl.md | project | 35 | "), "{listing}");
    assert!(listing.contains("| Route the plans |"), "{listing}");
    let plan = mcp.ok("memory", json!({"tool": "plans", "args": {"read": "1767000000000-calm-owl.md"}})).await;
    assert!(plan.starts_with("# Plan 1767000000000-calm-owl.md (project, 35 bytes, modified "), "{plan}");
    assert!(plan.ends_with("1. list\n2. read"), "{plan}");
    for bad in ["../../outside.md", "/etc/passwd", "x/../1767000000000-calm-owl.md", "calm-owl.txt"] {
        let (code, body) = mcp.err("memory", json!({"op": "plans", "args": {"read": bad}})).await;
        assert_eq!(code, "invalid_argument", "{bad}: {body}");
    }
    // An agent's empty optional argument lists.
    assert_eq!(mcp.ok("memory", json!({"op": "plans", "args": {"read": " "}})).await, listing);
    let (code, _) = mcp.err("memory", json!({"op": "plans", "args": {"read": "1767000000001-gone.md"}})).await;
    assert_eq!(code, "file_not_found");
    assert!(mcp.ok("memory", json!({"op": "help", "args": {"op": "plans"}})).await.contains("read-only"));

    // An empty archive: an answer, not an error; a named unknown session is not found.
    let usage = mcp.ok("memory", json!({"op": "context_usage"})).await;
    assert!(usage.starts_with("the history archive holds no session yet"), "{usage}");
    let own = mcp.ok("memory", json!({"op": "context_usage", "session_id": "ses_me"})).await;
    assert!(own.starts_with("Your session ses_me is not in the history archive yet"), "{own}");
    let (code, _) = mcp.err("memory", json!({"tool": "context", "args": {"sessionId": "ses_none"}})).await;
    assert_eq!(code, "history_session_not_found", "open-memory's context with a session is context_usage");
    let help = mcp.ok("memory", json!({"op": "help", "args": {"op": "context_usage"}})).await;
    assert!(help.contains("percent, used, limit, model, status, trend"), "{help}");
    // Without a session, `context` is still cairn's memory context.
    let context = mcp.ok("memory", json!({"op": "context"})).await;
    assert!(!context.contains("history archive"), "{context}");
}

#[tokio::test]
async fn project_comes_from_the_working_directory_when_nothing_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("My_Repo");
    std::fs::create_dir_all(&repo).unwrap();
    let mcp = start_in(&repo).await;
    let current = mcp.ok_json("mem_current_project", json!({})).await;
    assert_eq!(
        (current["project"].as_str(), current["project_source"].as_str()),
        (Some("my_repo"), Some("dir_basename"))
    );
    let saved = mcp.ok_json("mem_save", json!({"title": "t", "content": "c"})).await;
    assert_eq!(saved["project"], "my_repo");
    assert_eq!(saved["session_id"], "manual-save-my_repo");

    // A broken project config: saves fail with its code; mem_current_project still answers.
    std::fs::create_dir_all(repo.join("sub/.cairn")).unwrap();
    std::fs::write(repo.join("sub/.cairn/config.json"), "{broken").unwrap();
    let started = mcp.err("mem_session_start", json!({"id": "s", "directory": repo.join("sub")})).await;
    assert_eq!(started.0, "invalid_project_config");
}

#[tokio::test]
async fn daemon_down_is_a_tool_error_and_current_project_still_answers() {
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let mcp = start_with("all", Some("it-proj"), Client::of_daemon(DaemonClient::new(addr, None))).await;
    assert_eq!(mcp.err("mem_search", json!({"query": "x"})).await.0, "daemon_unavailable");
    assert_eq!(mcp.err("mem_save", json!({"title": "t", "content": "c"})).await.0, "daemon_unavailable");
    let current = mcp.ok_json("mem_current_project", json!({})).await;
    assert_eq!((current["project"].as_str(), current["available_projects"].clone()), (Some("it-proj"), json!([])));
}

/// Streamable HTTP at /mcp with the project named by a header.
#[tokio::test]
async fn streamable_http_with_project_header() {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;

    let dir = tempfile::tempdir().unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let mut opts = McpOptions::new(dir.path());
    opts.project = Some("process-proj".into());
    let client = cairn_client::Client::in_process(Engine::in_memory().unwrap());
    let app = axum::Router::new().nest("/mcp", cairn_mcp::http_router(client, opts, cancel.clone()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = cancel.clone();
    let server = tokio::spawn(async move {
        axum::serve(listener, app).with_graceful_shutdown(async move { shutdown.cancelled().await }).await.unwrap();
    });

    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let url = format!("http://{addr}/mcp");
    let post = |body: Value, session: Option<String>, project: Option<&'static str>| {
        let mut req = hyper::Request::post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18");
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        if let Some(p) = project {
            req = req.header("x-cairn-project", p);
        }
        let req = req.body(Full::new(Bytes::from(body.to_string()))).unwrap();
        let client = client.clone();
        async move {
            let res = tokio::time::timeout(Duration::from_secs(10), client.request(req)).await.unwrap().unwrap();
            let status = res.status();
            let session = res.headers().get("mcp-session-id").map(|v| v.to_str().unwrap().to_owned());
            let body = tokio::time::timeout(Duration::from_secs(10), res.into_body().collect()).await.unwrap().unwrap();
            (status, session, String::from_utf8(body.to_bytes().to_vec()).unwrap())
        }
    };
    // The JSON-RPC answer inside an SSE stream (or a plain JSON body).
    let answer = |body: &str| -> Value {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .chain(std::iter::once(body))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v.get("id").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC answer in {body:?}"))
    };

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "it", "version": "0"}}});
    let (status, session, body) = post(init, None, None).await;
    assert!(status.is_success(), "{status}: {body}");
    assert_eq!(answer(&body)["result"]["serverInfo"]["name"], "cairn");
    let session = session.expect("a session id");
    let (status, _, _) =
        post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), Some(session.clone()), None).await;
    assert!(status.is_success(), "{status}");

    let call = |id: i64, project| {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "mem_save", "arguments": {"title": "Over HTTP", "content": "saved through /mcp"}}});
        post(body, Some(session.clone()), project)
    };
    let (_, _, body) = call(2, Some("hdr-proj")).await;
    let result = answer(&body)["result"].clone();
    assert_eq!(result["isError"], false, "{result}");
    let envelope: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        (envelope["project"].as_str(), envelope["project_source"].as_str()),
        (Some("hdr-proj"), Some("request_header"))
    );
    let (_, _, body) = call(3, None).await;
    let envelope: Value =
        serde_json::from_str(answer(&body)["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        (envelope["project"].as_str(), envelope["project_source"].as_str()),
        (Some("process-proj"), Some("process_override"))
    );

    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(10), server).await.expect("shutdown after cancel").unwrap();
}

/// `POST /mcp` with a body that is no JSON gets the JSON-RPC parse error (rmcp alone answers
/// 415 in plain text), and `tools/call` with array `arguments` gets invalid params.
#[tokio::test]
async fn streamable_http_answers_bad_json_with_json_rpc_errors() {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;

    let dir = tempfile::tempdir().unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let client = cairn_client::Client::in_process(Engine::in_memory().unwrap());
    let router = cairn_mcp::http_router(client, McpOptions::new(dir.path()), cancel.clone());
    let app = axum::Router::new().nest("/mcp", router);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = cancel.clone();
    let server = tokio::spawn(async move {
        axum::serve(listener, app).with_graceful_shutdown(async move { shutdown.cancelled().await }).await.unwrap();
    });
    let http: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    for (body, id, code) in [
        (&b"this is not json"[..], Value::Null, -32700),
        (b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\"}", Value::Null, -32700),
        (
            br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"mem_stats","arguments":[1]}}"#,
            json!(4),
            -32602,
        ),
    ] {
        let req = hyper::Request::post(format!("http://{addr}/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Full::new(Bytes::copy_from_slice(body)))
            .unwrap();
        let res = tokio::time::timeout(Duration::from_secs(10), http.request(req)).await.unwrap().unwrap();
        let status = res.status().as_u16();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        let answer: Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{status} {e}: {:?}", String::from_utf8_lossy(&bytes)));
        assert_eq!((status, answer["id"].clone(), answer["error"]["code"].as_i64()), (400, id, Some(code)), "{answer}");
    }
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(10), server).await.expect("shutdown after cancel").unwrap();
}

/// A minimal HTTP client for the daemon's API next to an MCP server.
struct Http {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Http {
    /// The HTTP API on port 0 over its own runtime (`Db`) on the store file at `db`.
    async fn start(db: &std::path::Path) -> Http {
        let state = cairn_server::http::AppState {
            engine: Engine::open(db).unwrap(),
            config: std::sync::Arc::new(cairn_server::http::HttpConfig::default()),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(cairn_server::http::serve(listener, state, async {
            let _ = stopped.await;
        }));
        Http { addr, stop: Some(stop) }
    }

    async fn send(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        use http_body_util::{BodyExt, Full};
        use hyper::body::Bytes;
        let client: hyper_util::client::legacy::Client<_, Full<Bytes>> =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build_http();
        let req = hyper::Request::builder()
            .method(method)
            .uri(format!("http://{}{path}", self.addr))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.map(|b| b.to_string()).unwrap_or_default())))
            .unwrap();
        let res = tokio::time::timeout(Duration::from_secs(10), client.request(req)).await.unwrap().unwrap();
        let status = res.status().as_u16();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    async fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, value) = self.send(method, path, body).await;
        assert!((200..300).contains(&status), "{method} {path}: {status} {value}");
        value
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A session's activity lives in the store, not in one process: counts and the pending prompt
/// written over HTTP (as a hook would) are what the MCP server of that session sees.
#[tokio::test]
async fn session_activity_written_over_http_is_seen_over_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cairn.db");
    let http = Http::start(&db).await;
    // The MCP server has a runtime of its own on the same file, as a second process would.
    let mcp = start_with("all", Some("it-proj"), Client::in_process(Engine::open(&db).unwrap())).await;

    http.ok("POST", "/sessions", Some(json!({"id": "agent-1", "project": "it-proj"}))).await;
    for _ in 0..6 {
        http.ok("POST", "/sessions/agent-1/activity", Some(json!({"event": "tool_call"}))).await;
    }
    let prompt = json!({"event": "prompt", "content": "fix the flaky login test <private>tok-123</private>"});
    let recorded = http.ok("POST", "/sessions/agent-1/activity", Some(prompt)).await;
    assert_eq!(recorded["activity"]["pending_prompt"]["content"], "fix the flaky login test [REDACTED]");

    // A save over MCP in that session attaches the prompt typed there and counts in its activity.
    mcp.save(
        "Login test was flaky",
        "What: a race in the fixture. Fix: await the server.",
        json!({"session_id": "agent-1"}),
    )
    .await;
    let prompts = http.ok("GET", "/prompts/recent?project=it-proj", None).await;
    let attached: Vec<(&str, &str)> = prompts
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["session_id"].as_str().unwrap(), p["content"].as_str().unwrap()))
        .collect();
    assert_eq!(attached, [("agent-1", "fix the flaky login test [REDACTED]")]);
    let activity = http.ok("GET", "/sessions/agent-1/activity", None).await;
    assert_eq!((activity["tool_calls"].as_i64(), activity["saves"].as_i64()), (Some(7), Some(1)), "{activity}");
    assert_eq!(activity["pending_prompt"]["stored_in"], "agent-1");

    // The summary's activity line adds up both processes' calls.
    let summary = mcp
        .ok_json("mem_session_summary", json!({"content": "Goal: fix the login test.", "session_id": "agent-1"}))
        .await;
    assert!(summary["result"].as_str().unwrap().contains("Session activity: 8 tool calls, 2 saves."), "{summary}");
}

/// HTTP's `GET /project/current?cwd=D` and MCP's `mem_current_project` in D are one view.
#[tokio::test]
async fn http_and_mcp_answer_the_same_current_project() {
    let dir = tempfile::tempdir().unwrap();
    let http = Http::start(&dir.path().join("cairn.db")).await;
    let plain = dir.path().join("Plain_Dir");
    let multi = dir.path().join("multi");
    std::fs::create_dir_all(&plain).unwrap();
    for sub in ["api/.git", "web/.git"] {
        std::fs::create_dir_all(multi.join(sub)).unwrap();
    }
    for cwd in [&plain, &multi] {
        let mcp = start_in(cwd).await;
        let over_mcp = mcp.ok_json("mem_current_project", json!({})).await;
        let over_http = http.ok("GET", &format!("/project/current?cwd={}", cwd.display()), None).await;
        assert_eq!(over_mcp, over_http);
        if cwd == &multi {
            assert_eq!(over_mcp["available_projects"], json!(["api", "web"]));
            assert_eq!(over_mcp["error_code"], "ambiguous_project");
        }
    }
}

/// The history tools answer pretty-printed JSON, and their failures carry the stable codes.
#[tokio::test]
async fn history_tools_answer_json_and_typed_errors() {
    let mcp = start("history").await;
    let sessions = mcp.ok("history_sessions", json!({})).await;
    assert_eq!(serde_json::from_str::<Value>(&sessions).unwrap(), json!([]));
    let (code, body) = mcp.err("history_browse_turns", json!({"session_id": "ses_nope"})).await;
    assert_eq!(code, "history_session_not_found", "{body}");
    let (code, _) = mcp.err("history_pull_message", json!({"session_id": "../etc", "message_id": "m"})).await;
    assert_eq!(code, "history_session_not_found", "a path is never a session id");
    let (code, _) = mcp
        .err(
            "history_pull_part",
            json!({"session_id": "s", "message_id": "m", "part_id": "p", "max_chars": 10_000_000}),
        )
        .await;
    assert_eq!(code, "invalid_argument");
    let found = mcp.ok_json("history_search", json!({"query": "anything"})).await;
    assert_eq!(found, json!({"messages": []}));
    let (code, _) = mcp.err("history_search", json!({"query": "x", "type": "images"})).await;
    assert_eq!(code, "invalid_argument");
}

/// A NUL character in a tool's text is an `isError` result with `nul_character` naming the
/// field, through the named tools and the router tool alike; nothing is saved.
#[tokio::test]
async fn a_nul_character_is_a_tool_error_naming_the_field() {
    let mcp = start("all,router").await;
    let id = mcp.save("kept", "stays as it is", json!({})).await;
    let calls = [
        ("mem_save", json!({"title": "t", "content": "a\u{0}b"}), "content"),
        ("mem_save", json!({"title": "t\u{0}", "content": "c"}), "title"),
        ("mem_update", json!({"id": id, "content": "x\u{0}"}), "content"),
        ("mem_save_prompt", json!({"content": "p\u{0}"}), "content"),
        ("mem_session_summary", json!({"content": "s\u{0}", "session_id": "s1"}), "content"),
        ("memory", json!({"op": "save", "args": {"title": "t", "content": "r\u{0}"}}), "content"),
    ];
    for (tool, args, field) in calls {
        let (code, body) = mcp.err(tool, args).await;
        assert_eq!(code, "nul_character", "{tool}: {body}");
        assert!(body["message"].as_str().unwrap().contains(field), "{tool}: {body}");
    }
    let stats = mcp.ok("memory", json!({"op": "stats"})).await;
    assert!(stats.contains(" 1 memories (") && stats.contains(" 0 prompts"), "{stats}");
    assert!(mcp.ok("mem_get_observation", json!({"id": id})).await.contains("stays as it is"));
}

/// `mem_search` takes `deep`: without a model the usual ranking answers, with the code; with
/// one, the hits come in its order and the answer says how long it took.
#[tokio::test]
async fn mem_search_takes_deep() {
    let engine = Engine::in_memory().unwrap();
    let mcp = start_with("all", Some("it-proj"), Client::in_process(std::sync::Arc::clone(&engine))).await;
    let tools = mcp.client.list_all_tools().await.unwrap();
    let search = tools.iter().find(|t| t.name == "mem_search").unwrap();
    assert!(search.input_schema["properties"].get("deep").is_some(), "{:?}", search.input_schema);
    let first = mcp.save("Redis pool size", "raised the redis pool to 50", json!({})).await;
    let second = mcp.save("Redis pool leak", "a leaked connection emptied the redis pool", json!({})).await;

    let plain = mcp.ok_json("mem_search", json!({"query": "redis pool", "deep": true})).await;
    assert_eq!(plain["deep"]["code"], "llm_not_configured", "{plain}");
    assert!(plain["result"].as_str().unwrap().contains("deep recall skipped"), "{plain}");

    let order = plain["ids"].as_array().unwrap().clone();
    let last = order.last().unwrap().as_i64().unwrap();
    let answer = if last == second { r#"{"ranking": [2]}"# } else { r#"{"ranking": [2, 1]}"# };
    engine
        .set_llm(Some(std::sync::Arc::new(cairn_llm::scripted::ScriptedProvider::new(move |_, _| Ok(answer.into())))));
    let deep = mcp.ok_json("mem_search", json!({"query": "redis pool", "deep": true})).await;
    assert_eq!(deep["deep"]["reranked"], true, "{deep}");
    assert!(deep["deep"]["llm_ms"].is_u64(), "{deep}");
    assert_eq!(deep["ids"][0].as_i64(), Some(last), "the model's first is first: {deep}");
    assert!([first, second].contains(&last));
}

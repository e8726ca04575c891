//! The `memory` router tool: `{op, args}` runs any [`Op`], so a prompt carries one schema
//! instead of nineteen (open-memory's router pattern, seed 004). The description is the
//! manual: one line per operation, from the catalogue in `cairn_core::ops`.
//!
//! open-memory's router names for its history browser work too, with its
//! camelCase keys: `summary`, `messages`, `message`, `children`, `compactions`, `plans`,
//! `sessions` when it names a `projectPath` and `context` when it names a `sessionId` (then it is
//! `context_usage`); `help {op?}` explains the operations. open-memory's `search`, and `context`
//! without a session, stay cairn's memory operations of those names.

use cairn_core::CairnError;
use cairn_core::ops::{CATALOGUE, GetRequest, Op, OpOutput, OpSpec};
use serde_json::{Map, Value};

use cairn_render::agent as render;

/// The tool's description.
pub fn description() -> String {
    let mut out = String::from(
        "cairn memory, every operation in one tool: {\"op\": NAME, \"args\": {...}}. project defaults to the \
         current one. Save decisions, fixes and discoveries (What/Why/Where/Learned, stable topic_key); \
         search before work that may touch earlier decisions. help {op?} explains one op; open-memory's \
         summary, messages, message, children, compactions, plans and context {sessionId} work as history \
         ops. Ops (args, * = required):",
    );
    for spec in CATALOGUE {
        out.push_str(&format!("\n{}: {}", spec.name, spec.args));
    }
    out
}

/// Whether the operation will take the current project (it defaults one and names none), as
/// the mem_* tools do.
pub fn wants_current_project(name: &str, args: &Map<String, Value>) -> bool {
    OpSpec::named(name.trim()).is_some_and(|spec| spec.project_defaulted) && project_absent(args)
}

fn project_absent(args: &Map<String, Value>) -> bool {
    args.get("project").is_none_or(|p| p.is_null() || p.as_str().is_some_and(|s| s.trim().is_empty()))
}

/// `help {op?}`: the whole manual, or one operation's arguments and what it does.
pub fn help(args: &Map<String, Value>) -> Result<String, CairnError> {
    let Some(name) = args.get("op").or_else(|| args.get("tool")).and_then(Value::as_str).map(str::trim) else {
        return Ok(description());
    };
    let name = open_memory_alias(name, args).unwrap_or(name);
    let spec = OpSpec::named(name).ok_or_else(|| unknown_op(name))?;
    Ok(format!("{}: {} ({})\nargs (* = required): {}", spec.name, spec.about, spec.writes.describe(), spec.args))
}

/// The cairn operation an open-memory router name stands for, when it is not cairn's own.
fn open_memory_alias(name: &str, args: &Map<String, Value>) -> Option<&'static str> {
    Some(match name {
        "summary" => "history_stats",
        "messages" => "history_browse_messages",
        "message" => "history_pull_message",
        "children" => "history_children",
        "compactions" => "history_compactions",
        // cairn's `sessions` lists memory sessions; open-memory's names a project directory.
        "sessions" if args.contains_key("projectPath") => "history_sessions",
        // cairn's `context` is the memory context; open-memory's names the session to measure.
        "context" if args.contains_key("sessionId") || args.contains_key("session_id") => "context_usage",
        _ => return None,
    })
}

/// open-memory's arguments as the history op's: `projectPath` is a directory (words of it
/// find the sessions that ran there), and `messages`' `limit` is how many of the newest.
fn open_memory_args(op: &str, mut args: Map<String, Value>) -> Map<String, Value> {
    if let Some(path) = args.remove("projectPath") {
        args.insert("query".into(), path);
    }
    if op == "history_browse_messages"
        && let Some(limit) = args.remove("limit").and_then(|l| l.as_u64())
    {
        args.insert("num_before".into(), Value::from(limit.saturating_sub(1)));
    }
    args
}

fn unknown_op(name: &str) -> CairnError {
    CairnError::invalid(format!("unknown op {name:?}"))
        .with_hint(format!("ops: {}", CATALOGUE.iter().map(|spec| spec.name).collect::<Vec<_>>().join(", ")))
}

/// What a door knows of the caller, for the ops that default to it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Caller<'a> {
    /// The caller's own session (named by the call, or opened on this server).
    pub session_id: Option<&'a str>,
    /// The directory the caller works in.
    pub directory: Option<&'a std::path::Path>,
}

/// Fill what `plans` and `context_usage` take from the caller when the call does not say:
/// `context_usage` measures the caller's session, `plans` lists the caller's project's plans
/// (found through its session's archived directory, else the working directory).
pub fn with_caller(op: &str, mut args: Map<String, Value>, caller: Caller<'_>) -> Map<String, Value> {
    let absent = |args: &Map<String, Value>, key: &str| {
        args.get(key).is_none_or(|v| v.is_null() || v.as_str().is_some_and(|s| s.trim().is_empty()))
    };
    // Agents fill the optional arguments they do not use with "": for `plans`, a blank `read`
    // means "list" (the op itself refuses a blank file name, as HTTP and the CLI pass it).
    if op == "plans" && args.contains_key("read") && absent(&args, "read") {
        args.remove("read");
    }
    match op {
        "context_usage" => {
            if let Some(id) = caller.session_id.filter(|_| absent(&args, "caller_session_id")) {
                args.insert("caller_session_id".into(), Value::from(id));
            }
        }
        "plans" if absent(&args, "directory") && absent(&args, "session_id") && absent(&args, "sessionId") => {
            if let Some(id) = caller.session_id {
                args.insert("session_id".into(), Value::from(id));
            } else if let Some(dir) = caller.directory {
                args.insert("directory".into(), Value::from(dir.display().to_string()));
            }
        }
        _ => {}
    }
    args
}

/// Build the operation, filling the current project where the mem_* tools would.
pub fn build_op(name: &str, mut args: Map<String, Value>, project: Option<&str>) -> Result<Op, CairnError> {
    let mut name = name.trim();
    if let Some(alias) = open_memory_alias(name, &args) {
        args = open_memory_args(alias, args);
        name = alias;
    }
    if let Some(project) = project.filter(|_| wants_current_project(name, &args)) {
        args.insert("project".into(), Value::String(project.to_owned()));
    }
    if name == "save" && !args.contains_key("find_candidates") {
        args.insert("find_candidates".into(), Value::Bool(cairn_core::agent::SAVE_FINDS_CANDIDATES));
    }
    let empty = args.is_empty();
    let with_args = serde_json::json!({"op": name, "args": args});
    match Op::from_value(with_args) {
        // Operations without arguments (`stats`, `doctor`) reject an `args` object.
        Err(_) if empty => Op::from_value(serde_json::json!({"op": name})),
        other => other,
    }
    .map_err(|e| if OpSpec::named(name).is_some() { e } else { unknown_op(name) })
}

/// Text for the operations that read best as text; compact JSON for the rest. The result
/// stays typed up to here: only what is sent as JSON becomes JSON.
pub fn render_result(op: &Op, output: OpOutput) -> cairn_core::Result<String> {
    Ok(match (op, output) {
        (Op::Search(q), OpOutput::Search(found)) => {
            let label = match &q.project {
                Some(p) if !q.all_projects => format!("project {p}"),
                _ => "all projects".to_owned(),
            };
            render::search(&q.text, &label, &found)
        }
        (_, OpOutput::Context(context)) => render::context(&context, None),
        (Op::Get(GetRequest { revisions: false, .. }), OpOutput::Get(got)) => render::observation(&got.observation),
        (_, OpOutput::Timeline(timeline)) => render::timeline(&timeline),
        (_, OpOutput::Stats(stats)) => render::stats(&stats),
        // The chart is text for the agent to read, not JSON to parse.
        (_, OpOutput::HistoryChart(chart)) => chart.chart,
        (_, OpOutput::Plans(plans)) => plans.to_markdown(),
        // The line first, then the numbers for an agent that compares them.
        (_, OpOutput::ContextUsage(usage)) => {
            let note = usage.note.clone();
            format!("{note}\n{}", OpOutput::ContextUsage(usage).into_value()?)
        }
        (_, other) => other.into_value()?.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::ops::{RecentSessionsRequest, UpdateRequest};
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    /// Every operation of the catalogue has its line, and each line parses back to it.
    #[test]
    fn description_lists_every_op() {
        let text = description();
        for spec in CATALOGUE {
            assert!(text.contains(&format!("\n{}: {}", spec.name, spec.args)), "op {} missing", spec.name);
        }
        let listed: Vec<&str> = text.lines().skip(1).filter_map(|line| line.split(": ").next()).collect();
        assert_eq!(listed.len(), CATALOGUE.len());
        assert!(listed.iter().all(|name| OpSpec::named(name).is_some()));
    }

    #[test]
    fn the_mem_tools_project_defaults_are_kept() {
        let defaulted: Vec<&str> = CATALOGUE.iter().filter(|s| s.project_defaulted).map(|s| s.name).collect();
        let expected = [
            "save",
            "search",
            "list",
            "context",
            "sessions",
            "start_session",
            "session_summary",
            "add_prompt",
            "recent_prompts",
            "search_prompts",
            "capture_passive",
            "user_prompt",
            "save_compaction",
            "record_session",
            "profile",
            "history_search",
            "session_start",
            "tool_call",
        ];
        assert_eq!(defaulted, expected);
    }

    #[test]
    fn builds_ops_with_defaults() {
        let op = build_op("save", obj(json!({"title": "t", "content": "c"})), Some("p")).unwrap();
        let Op::Save(req) = op else { panic!("not a save") };
        assert_eq!(req.observation.project.as_deref(), Some("p"));
        assert!(req.find_candidates);
        let op = build_op("update", obj(json!({"id": 1, "title": "t"})), Some("p")).unwrap();
        assert!(matches!(op, Op::Update(UpdateRequest { ref patch, .. }) if patch.project.is_none()));
        assert_eq!(build_op("stats", Map::new(), Some("p")).unwrap(), Op::Stats);
        assert_eq!(build_op("doctor", Map::new(), None).unwrap(), Op::Doctor);
        assert!(matches!(build_op("list", Map::new(), None).unwrap(), Op::List(_)));
        assert!(wants_current_project("search", &obj(json!({"query": "q", "project": ""}))));
        assert!(!wants_current_project("search", &obj(json!({"query": "q", "project": "x"}))));
        assert!(!wants_current_project("stats", &Map::new()));
    }

    #[test]
    fn open_memory_names_are_history_ops() {
        let op = build_op("messages", obj(json!({"sessionId": "ses_1", "limit": 20})), None).unwrap();
        let Op::HistoryBrowseMessages(req) = op else { panic!("{op:?}") };
        assert_eq!((req.session_id.as_str(), req.num_before, req.message_id), ("ses_1", 19, None));
        let op = build_op("message", obj(json!({"sessionId": "s", "messageId": "m", "showTools": true})), None);
        assert!(matches!(op.unwrap(), Op::HistoryPullMessage(r) if r.message_id == "m"));
        let op = build_op("compactions", obj(json!({"sessionId": "s", "read": 2})), None).unwrap();
        assert!(matches!(op, Op::HistoryCompactions(ref r) if r.read == Some(2)), "{op:?}");
        assert_eq!(build_op("summary", Map::new(), None).unwrap(), Op::HistoryStats);
        assert!(matches!(build_op("children", obj(json!({"sessionId": "s"})), None).unwrap(), Op::HistoryChildren(_)));
        let op = build_op("sessions", obj(json!({"projectPath": "/nonexistent/shop", "limit": 3})), None).unwrap();
        let Op::HistorySessions(req) = op else { panic!("{op:?}") };
        assert_eq!((req.query.as_deref(), req.project, req.limit), (Some("/nonexistent/shop"), None, 3));
        // Without open-memory's key, `sessions` is still cairn's memory sessions.
        assert!(matches!(
            build_op("sessions", Map::new(), Some("p")).unwrap(),
            Op::Sessions(RecentSessionsRequest { .. })
        ));
        // open-memory's `context` with a session is context_usage; without one, the memory context.
        let op = build_op("context", obj(json!({"sessionId": "ses_1"})), Some("p")).unwrap();
        assert!(matches!(op, Op::ContextUsage(ref r) if r.session_id.as_deref() == Some("ses_1")), "{op:?}");
        assert!(matches!(build_op("context", Map::new(), Some("p")).unwrap(), Op::Context(_)));
        let op = build_op("plans", obj(json!({"read": "1-a.md"})), None).unwrap();
        assert!(matches!(op, Op::Plans(ref r) if r.read.as_deref() == Some("1-a.md")), "{op:?}");
        // A bad call of an alias says what the history op needs.
        let err = build_op("message", obj(json!({"messageId": "m"})), None).unwrap_err();
        assert!(err.message.contains("session_id"), "{}", err.message);
    }

    #[test]
    fn the_caller_fills_what_plans_and_context_usage_default_to() {
        let dir = std::path::Path::new("/srv/shop");
        let me = Caller { session_id: Some("ses_me"), directory: Some(dir) };
        let nobody = Caller { session_id: None, directory: Some(dir) };
        assert_eq!(with_caller("context_usage", Map::new(), me), obj(json!({"caller_session_id": "ses_me"})));
        let named = obj(json!({"session_id": "ses_x", "caller_session_id": "ses_y"}));
        assert_eq!(with_caller("context_usage", named.clone(), me), named, "what the call says stays");
        assert_eq!(with_caller("plans", Map::new(), me), obj(json!({"session_id": "ses_me"})));
        assert_eq!(with_caller("plans", Map::new(), nobody), obj(json!({"directory": "/srv/shop"})));
        let given = obj(json!({"directory": "/elsewhere"}));
        assert_eq!(with_caller("plans", given.clone(), me), given);
        assert_eq!(with_caller("search", Map::new(), me), Map::new());
    }

    #[test]
    fn help_explains_all_or_one_op() {
        assert_eq!(help(&Map::new()).unwrap(), description());
        let one = help(&obj(json!({"op": "history_pull_part"}))).unwrap();
        assert!(one.starts_with("history_pull_part: ") && one.contains("read-only") && one.contains("offset"), "{one}");
        assert!(help(&obj(json!({"tool": "messages"}))).unwrap().starts_with("history_browse_messages: "));
        assert!(help(&obj(json!({"op": "save"}))).unwrap().contains("(writes the memory store)"));
        let forget = help(&obj(json!({"op": "history_forget"}))).unwrap();
        assert!(forget.contains("Erase") && forget.contains("(writes the history archive)"), "{forget}");
        assert!(!forget.contains("read-only"), "{forget}");
        let err = help(&obj(json!({"op": "teleport"}))).unwrap_err();
        assert_eq!(err.code, cairn_core::ErrorCode::InvalidArgument);
    }

    #[test]
    fn unknown_and_malformed_ops_are_invalid_arguments() {
        let err = build_op("nope", Map::new(), None).unwrap_err();
        assert!(err.message.contains("unknown op \"nope\"") && err.hint.unwrap().contains("save"));
        let err = build_op("get", obj(json!({"id": "x"})), None).unwrap_err();
        assert_eq!(err.code, cairn_core::ErrorCode::InvalidArgument);
        assert!(err.message.contains("\"get\""), "{}", err.message);
    }
}

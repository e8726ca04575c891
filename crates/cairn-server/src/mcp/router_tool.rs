//! The `memory` router tool: `{op, args}` runs any [`Op`], so a prompt carries one schema
//! instead of nineteen (open-memory's router pattern, seed 004). The description is the
//! manual: one line per operation.

use cairn_core::CairnError;
use cairn_core::ops::{Op, SearchResponse};
use serde_json::{Map, Value};

use super::render;

/// Every operation with its arguments (`*` = required) and, where not obvious, what it does.
const OPS: &[(&str, &str)] = &[
    ("save", "title*, content*, type, topic_key, scope (project|personal), session_id, project"),
    ("search", "query*, type, scope, limit, all_projects, mode (lexical|semantic|hybrid)"),
    ("get", "id*, revisions"),
    ("update", "id*, title, content, type, scope, topic_key, project"),
    ("delete", "id*, hard"),
    ("pin", "id*, pinned"),
    ("list", "project, scope, kind, limit, offset"),
    ("context", "project, scope — recent sessions, memories, prompts"),
    ("timeline", "id*, before, after"),
    ("sessions", "project, limit"),
    ("start_session", "id*, project, directory, agent, parent_id"),
    ("session_summary", "content*, session_id — once, at the end, main agent only"),
    ("end_session", "id*, summary"),
    ("get_session", "id*"),
    ("delete_session", "id*"),
    ("add_prompt", "content*, session_id"),
    ("recent_prompts", "project, limit"),
    ("search_prompts", "query*, project, limit"),
    ("delete_prompt", "id*"),
    ("stats", "-"),
    ("export", "project"),
    ("import", "data*"),
    ("capture_passive", "content*, session_id, source — saves a '## Key Learnings' list"),
    ("suggest_topic_key", "type, title, content"),
    ("judge", "judgment_id*, relation*, reason, evidence, confidence"),
    ("compare", "memory_id_a*, memory_id_b*, relation*, confidence*, reasoning*, model"),
    ("relations", "project, status, since, limit, offset"),
    ("relation_stats", "project"),
    ("get_relation", "id*"),
    ("scan_relations", "project*, since, apply, max_insert"),
    ("migrate_project", "old_project*, new_project*"),
    ("merge_projects", "from* (list), to*"),
    ("doctor", "-"),
    ("reindex", "force — queue memories for (re-)embedding; poll stats.embeddings_pending"),
    ("session_activity", "session_id* — tool calls, saves, reminders, pending prompt"),
    (
        "record_activity",
        "session_id*, event* (tool_call|save|prompt|context_injected|reminder_sent), project, remind, \
         saved_session_id, attach_prompt, content, stored_in, fingerprint",
    ),
];

/// Operations whose `project` defaults to the current one, as the mem_* tools do. Not
/// `update` (a project there moves the memory) nor the store-wide admin listings.
const PROJECT_DEFAULTED: &[&str] = &[
    "save",
    "search",
    "context",
    "session_summary",
    "start_session",
    "add_prompt",
    "capture_passive",
    "list",
    "sessions",
    "recent_prompts",
    "search_prompts",
];

/// The tool's description.
pub fn description() -> String {
    let mut out = String::from(
        "cairn memory, every operation in one tool: {\"op\": NAME, \"args\": {...}}. project defaults to the \
         current one. Save decisions, fixes and discoveries (What/Why/Where/Learned, stable topic_key); \
         search before work that may touch earlier decisions. Ops (args, * = required):",
    );
    for (name, args) in OPS {
        out.push_str(&format!("\n{name}: {args}"));
    }
    out
}

/// Whether the operation will take the current project (it defaults one and names none).
pub fn wants_current_project(name: &str, args: &Map<String, Value>) -> bool {
    PROJECT_DEFAULTED.contains(&name.trim()) && project_absent(args)
}

fn project_absent(args: &Map<String, Value>) -> bool {
    args.get("project").is_none_or(|p| p.is_null() || p.as_str().is_some_and(|s| s.trim().is_empty()))
}

/// Build the operation, filling the current project where the mem_* tools would.
pub fn build_op(name: &str, mut args: Map<String, Value>, project: Option<&str>) -> Result<Op, CairnError> {
    let name = name.trim();
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
    .map_err(|e| {
        if OPS.iter().any(|(n, _)| *n == name) {
            e
        } else {
            CairnError::invalid(format!("unknown op {name:?}"))
                .with_hint(format!("ops: {}", OPS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")))
        }
    })
}

/// Text for the operations that read best as text; compact JSON for the rest.
pub fn render_result(op: &Op, result: &Value) -> String {
    let rendered = match op {
        Op::Search(q) => serde_json::from_value::<SearchResponse>(result.clone()).ok().map(|r| {
            let label = match &q.project {
                Some(p) if !q.all_projects => format!("project {p}"),
                _ => "all projects".to_owned(),
            };
            render::search(&q.text, &label, &r)
        }),
        Op::Context(_) => serde_json::from_value(result.clone()).ok().map(|c| render::context(&c, None)),
        Op::Get { revisions: false, .. } => {
            serde_json::from_value(result.clone()).ok().map(|o| render::observation(&o))
        }
        Op::Timeline { .. } => serde_json::from_value(result.clone()).ok().map(|t| render::timeline(&t)),
        Op::Stats => serde_json::from_value(result.clone()).ok().map(|s| render::stats(&s)),
        _ => None,
    };
    rendered.unwrap_or_else(|| result.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    /// The op list is complete: serde names every variant when an unknown one is asked for.
    #[test]
    fn description_lists_every_op() {
        let err = serde_json::from_value::<Op>(json!({"op": "zzz"})).unwrap_err().to_string();
        let listed = err.split("expected one of").nth(1).expect("serde lists the variants");
        let variants: Vec<&str> =
            listed.split(',').map(|s| s.trim().trim_matches('`')).filter(|s| !s.is_empty()).collect();
        assert!(variants.len() > 20, "{err}");
        let text = description();
        for v in variants {
            assert!(text.contains(&format!("\n{v}: ")), "op {v} missing from the router description");
        }
    }

    #[test]
    fn builds_ops_with_defaults() {
        let op = build_op("save", obj(json!({"title": "t", "content": "c"})), Some("p")).unwrap();
        let Op::Save(req) = op else { panic!("not a save") };
        assert_eq!(req.observation.project.as_deref(), Some("p"));
        assert!(req.find_candidates);
        let op = build_op("update", obj(json!({"id": 1, "title": "t"})), Some("p")).unwrap();
        assert!(matches!(op, Op::Update { ref patch, .. } if patch.project.is_none()));
        assert_eq!(build_op("stats", Map::new(), Some("p")).unwrap(), Op::Stats);
        assert_eq!(build_op("doctor", Map::new(), None).unwrap(), Op::Doctor);
        assert!(matches!(build_op("list", Map::new(), None).unwrap(), Op::List(_)));
        assert!(wants_current_project("search", &obj(json!({"query": "q", "project": ""}))));
        assert!(!wants_current_project("search", &obj(json!({"query": "q", "project": "x"}))));
        assert!(!wants_current_project("stats", &Map::new()));
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

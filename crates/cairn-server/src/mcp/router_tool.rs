//! The `memory` router tool: `{op, args}` runs any [`Op`], so a prompt carries one schema
//! instead of nineteen (open-memory's router pattern, seed 004). The description is the
//! manual: one line per operation, from the catalogue in `cairn_core::ops`.

use cairn_core::CairnError;
use cairn_core::ops::{CATALOGUE, Op, OpSpec, SearchResponse};
use serde_json::{Map, Value};

use super::render;

/// The tool's description.
pub fn description() -> String {
    let mut out = String::from(
        "cairn memory, every operation in one tool: {\"op\": NAME, \"args\": {...}}. project defaults to the \
         current one. Save decisions, fixes and discoveries (What/Why/Where/Learned, stable topic_key); \
         search before work that may touch earlier decisions. Ops (args, * = required):",
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
        if OpSpec::named(name).is_some() {
            e
        } else {
            CairnError::invalid(format!("unknown op {name:?}"))
                .with_hint(format!("ops: {}", CATALOGUE.iter().map(|spec| spec.name).collect::<Vec<_>>().join(", ")))
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
        // The chart is text for the agent to read, not JSON to parse.
        Op::HistoryChart(_) => result["chart"].as_str().map(str::to_owned),
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
            "profile",
            "history_search",
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

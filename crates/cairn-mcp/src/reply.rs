//! Tool results on the wire (engram §12.2): most tools answer one text block holding a JSON
//! envelope `{project, project_source, project_path, result: "<human text>", ...}`; a few
//! answer bare JSON or plain text; every failure is `isError: true` with
//! `{"error_code", "message", "hint"}`, the same stable codes HTTP and the CLI use.

use cairn_core::{CairnError, ErrorCode};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

/// The project a call worked in and where that name came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scoped {
    pub project: String,
    /// `explicit_override`, `request_header`, `process_override`, or a detection source
    /// (`git_remote`, `config`...).
    pub source: String,
    pub path: String,
    pub warning: Option<String>,
}

/// An envelope. `scope` adds the project fields; `extra` (an object) adds tool-specific
/// fields such as `id`.
pub fn envelope(scope: Option<&Scoped>, text: String, extra: Value) -> CallToolResult {
    let mut body = Map::new();
    if let Some(s) = scope {
        body.insert("project".into(), json!(s.project));
        body.insert("project_source".into(), json!(s.source));
        body.insert("project_path".into(), json!(s.path));
    }
    body.insert("result".into(), Value::String(text));
    if let Value::Object(extra) = extra {
        body.extend(extra);
    }
    if let Some(warning) = scope.and_then(|s| s.warning.as_deref()) {
        match body.get_mut("warning") {
            Some(Value::String(existing)) => *existing = format!("{warning}; {existing}"),
            _ => {
                body.insert("warning".into(), json!(warning));
            }
        }
    }
    json_text(&Value::Object(body))
}

/// Bare JSON (mem_current_project, mem_doctor, mem_judge, mem_compare).
pub fn json_text(value: &Value) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(value.to_string())])
}

/// Plain text (mem_delete, mem_suggest_topic_key, mem_merge_projects, the router tool).
pub fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

/// A failure as a tool result the agent can read and act on.
pub fn error(err: &CairnError) -> CallToolResult {
    let body = json!({
        "error_code": err.code.as_str(),
        "message": err.message,
        "hint": mcp_hint(err),
    });
    CallToolResult::error(vec![ContentBlock::text(body.to_string())])
}

/// Hints phrased for an agent holding these tools, rather than a person at a shell.
fn mcp_hint(err: &CairnError) -> String {
    let own = err.hint.clone();
    match err.code {
        ErrorCode::ObservationNotFound => "find the id with mem_search; deleted memories are not shown".into(),
        ErrorCode::DaemonUnavailable => {
            "the cairn daemon is not reachable; retry, or restart the MCP server (it starts the daemon)".into()
        }
        ErrorCode::InvalidArgument | ErrorCode::EmptyField => {
            own.unwrap_or_else(|| "check the tool's input schema for names and types".into())
        }
        _ => own.unwrap_or_else(|| "see the message; run mem_doctor if it persists".into()),
    }
}

/// A result's text.
#[cfg(test)]
pub fn first_text(result: &CallToolResult) -> &str {
    result.content.first().and_then(|c| c.as_text()).map_or("", |t| t.text.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(r: &CallToolResult) -> Value {
        serde_json::from_str(first_text(r)).unwrap()
    }

    #[test]
    fn envelope_carries_project_result_and_extras() {
        let scope = Scoped {
            project: "p".into(),
            source: "git_remote".into(),
            path: "/r".into(),
            warning: Some("normalized".into()),
        };
        let r = envelope(Some(&scope), "Memory saved: #1".into(), json!({"id": 1, "warning": "similar"}));
        assert_eq!(r.is_error, Some(false));
        let b = body(&r);
        assert_eq!((b["project"].as_str(), b["id"].as_i64()), (Some("p"), Some(1)));
        assert_eq!(b["result"], "Memory saved: #1");
        assert_eq!(b["warning"], "normalized; similar");
    }

    #[test]
    fn errors_have_code_message_hint() {
        let r = error(&CairnError::observation_not_found(9));
        assert_eq!(r.is_error, Some(true));
        let b = body(&r);
        assert_eq!(b["error_code"], "observation_not_found");
        assert!(b["hint"].as_str().unwrap().contains("mem_search"));
    }
}

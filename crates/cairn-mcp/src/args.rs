//! Tool arguments. Field names are engram's (its agents and scripts send them); doc comments
//! become the schema descriptions an agent reads, so they stay short.
//!
//! Arguments go through [`Args`], whose deserialisation never fails at rmcp's layer: a bad
//! argument becomes our `invalid_argument` error (with the field's path) instead of rmcp's text.
//! Unknown fields are ignored, so engram-only extras (`project_choice_reason`, `recovery_token`)
//! do not break a call.

use cairn_core::CairnError;
use rmcp::schemars::{self, JsonSchema};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Parsed arguments, or the reason they could not be parsed.
pub struct Args<T>(pub Result<T, CairnError>);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Args<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Ok(Args(parse(value)))
    }
}

impl<T: JsonSchema> JsonSchema for Args<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
}

/// Decode arguments, naming the field at fault (`id: expected an integer...`).
pub fn parse<T: DeserializeOwned>(value: Value) -> Result<T, CairnError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let message = if path == "." { inner.to_string() } else { format!("{path}: {inner}") };
        CairnError::invalid(message).with_hint("check the tool's input schema for names and types")
    })
}

/// A tool's input schema without what only costs tokens: the root `$schema` (MCP assumes
/// draft 2020-12) and `"default": null` on every optional field.
pub fn slim_schema(schema: &serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
    let mut slim = schema.clone();
    slim.remove("$schema");
    if let Some(Value::Object(properties)) = slim.get_mut("properties") {
        for property in properties.values_mut().filter_map(Value::as_object_mut) {
            if property.get("default") == Some(&Value::Null) {
                property.remove("default");
            }
        }
    }
    slim
}

/// Integers may come as JSON numbers or as numeric strings (`"42"`): models send both, and
/// engram's server accepted both. The same readers serve every door (`cairn_core::lenient`).
pub use cairn_core::lenient::{int, opt_int};

/// A list given as a JSON array or as one comma-separated string.
fn list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let items = match Value::deserialize(d)? {
        Value::String(s) => s.split(',').map(str::to_owned).collect(),
        Value::Array(items) => items
            .into_iter()
            .map(|v| v.as_str().map(str::to_owned).ok_or_else(|| D::Error::custom("expected a list of names")))
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(D::Error::custom("expected names separated by commas")),
    };
    Ok(items.into_iter().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect())
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SaveArgs {
    /// Short, searchable title: what happened (e.g. "Switched auth to JWT").
    pub title: String,
    /// What / Why / Where / Learned. `observation` is accepted as an alias.
    #[serde(alias = "observation")]
    pub content: String,
    /// decision, bugfix, discovery, pattern, config, architecture, learning, preference (default manual).
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Stable key (family/subject, e.g. architecture/auth-model): a later save with it revises this memory.
    #[serde(default)]
    pub topic_key: Option<String>,
    /// project (default) or personal (follows the user into every project).
    #[serde(default)]
    pub scope: Option<String>,
    /// Defaults to the current project.
    #[serde(default)]
    pub project: Option<String>,
    /// Defaults to manual-save-<project>.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Attach the prompt recorded with mem_save_prompt to this session (default true).
    #[serde(default)]
    pub capture_prompt: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ContextArgs {
    /// Defaults to the current project.
    #[serde(default)]
    pub project: Option<String>,
    /// project or personal.
    #[serde(default)]
    pub scope: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SessionSummaryArgs {
    /// Goal, Discoveries, Accomplished, Next steps, Relevant files.
    pub content: String,
    /// Defaults to manual-save-<project>.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Defaults to the current project.
    #[serde(default)]
    pub project: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SessionStartArgs {
    /// Session id (your host's session id).
    pub id: String,
    /// Working directory; the project is detected from it.
    #[serde(default)]
    pub directory: Option<String>,
    /// Defaults to the project of `directory` (or the current one).
    #[serde(default)]
    pub project: Option<String>,
    /// Agent name (opencode, claude-code...).
    #[serde(default)]
    pub agent: Option<String>,
    /// The parent session, for a sub-agent.
    #[serde(default)]
    pub parent_session_id: Option<String>,
    /// The session's title (a later call renames it).
    #[serde(default)]
    pub title: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SessionEndArgs {
    /// Session id.
    pub id: String,
    /// Optional closing summary.
    #[serde(default)]
    pub summary: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct IdArgs {
    /// Memory id (the number after #).
    #[serde(deserialize_with = "int")]
    #[schemars(with = "i64")]
    pub id: i64,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct UpdateArgs {
    /// Memory id.
    #[serde(deserialize_with = "int")]
    #[schemars(with = "i64")]
    pub id: i64,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// project or personal.
    #[serde(default)]
    pub scope: Option<String>,
    /// Empty string clears it.
    #[serde(default)]
    pub topic_key: Option<String>,
    /// Move the memory to this project.
    #[serde(default)]
    pub project: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DeleteArgs {
    /// Memory id.
    #[serde(deserialize_with = "int")]
    #[schemars(with = "i64")]
    pub id: i64,
    /// Erase the row for good (default: soft delete, hidden everywhere).
    #[serde(default, alias = "hard")]
    pub hard_delete: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SuggestTopicKeyArgs {
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub content: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CapturePassiveArgs {
    /// Text with a "## Key Learnings" section (numbered or bulleted items).
    pub content: String,
    #[serde(default)]
    pub session_id: Option<String>,
    /// Where the text came from (default mcp-passive).
    #[serde(default)]
    pub source: Option<String>,
    /// Defaults to the current project.
    #[serde(default)]
    pub project: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SavePromptArgs {
    /// What the user asked.
    pub content: String,
    #[serde(default)]
    pub session_id: Option<String>,
    /// Defaults to the current project.
    #[serde(default)]
    pub project: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct StatsArgs {
    /// Echoed back; the counts cover every project.
    #[serde(default)]
    pub project: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TimelineArgs {
    /// The memory to center on.
    #[serde(alias = "id", deserialize_with = "int")]
    #[schemars(with = "i64")]
    pub observation_id: i64,
    /// Memories before it (default 5).
    #[serde(default, deserialize_with = "opt_int")]
    #[schemars(with = "Option<u32>")]
    pub before: Option<usize>,
    /// Memories after it (default 5).
    #[serde(default, deserialize_with = "opt_int")]
    #[schemars(with = "Option<u32>")]
    pub after: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct MergeProjectsArgs {
    /// Project names to merge away, comma separated.
    #[serde(deserialize_with = "list")]
    #[schemars(with = "String")]
    pub from: Vec<String>,
    /// The name to keep.
    pub to: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct NoArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct DoctorArgs {
    /// Echoed back.
    #[serde(default)]
    pub project: Option<String>,
    /// Only the check with this id.
    #[serde(default)]
    pub check: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct JudgeArgs {
    /// judgment_id from a mem_save candidate.
    pub judgment_id: String,
    /// related, compatible, scoped, conflicts_with, supersedes or not_conflict.
    pub relation: String,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub evidence: Option<String>,
    /// 0..1; below 0.7, ask the user first.
    #[serde(default)]
    pub confidence: Option<f64>,
    #[serde(default)]
    pub session_id: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CompareArgs {
    #[serde(deserialize_with = "int")]
    #[schemars(with = "i64")]
    pub memory_id_a: i64,
    #[serde(deserialize_with = "int")]
    #[schemars(with = "i64")]
    pub memory_id_b: i64,
    /// related, compatible, scoped, conflicts_with, supersedes or not_conflict.
    pub relation: String,
    /// 0..1.
    pub confidence: f64,
    /// One sentence (max ~200 chars).
    pub reasoning: String,
    #[serde(default)]
    pub model: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RouterArgs {
    /// Operation name (see the list above).
    #[serde(alias = "tool")]
    pub op: String,
    /// The operation's arguments.
    #[serde(default)]
    pub args: serde_json::Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_accept_numbers_and_numeric_strings() {
        assert_eq!(parse::<IdArgs>(json!({"id": 7})).unwrap().id, 7);
        assert_eq!(parse::<IdArgs>(json!({"id": " 7 "})).unwrap().id, 7);
        let err = parse::<IdArgs>(json!({"id": "not-a-number"})).err().unwrap();
        assert!(err.message.starts_with("id: "), "{}", err.message);
        assert_eq!(err.code, cairn_core::ErrorCode::InvalidArgument);
    }

    #[test]
    fn missing_fields_and_aliases() {
        let err = parse::<SaveArgs>(json!({})).err().unwrap();
        assert!(err.message.contains("title"), "{}", err.message);
        let legacy = parse::<SaveArgs>(json!({"title": "t", "observation": "c", "extra": 1})).unwrap();
        assert_eq!(legacy.content, "c");
        let limit = parse::<cairn_core::search::SearchQuery>(json!({"query": "q", "limit": "5"})).unwrap();
        assert_eq!(limit.limit, 5);
    }

    #[test]
    fn slim_schemas_keep_types_and_required() {
        let full = rmcp::handler::server::common::schema_for_input::<SaveArgs>().unwrap();
        let slim = slim_schema(&full);
        assert!(full.contains_key("$schema") && !slim.contains_key("$schema"));
        assert_eq!(slim["required"], json!(["title", "content"]));
        assert_eq!(slim["properties"]["topic_key"]["type"], json!(["string", "null"]));
        assert!(slim["properties"]["topic_key"].get("default").is_none());
    }

    #[test]
    fn merge_sources_as_text_or_list() {
        let a = parse::<MergeProjectsArgs>(json!({"from": "a, b,", "to": "c"})).unwrap();
        let b = parse::<MergeProjectsArgs>(json!({"from": ["a", "b"], "to": "c"})).unwrap();
        assert_eq!(a.from, b.from);
    }
}

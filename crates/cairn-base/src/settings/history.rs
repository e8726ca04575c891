//! The `[history]` table of `config.toml`: how the conversation-history
//! tools preview, truncate and search, which tools' input and output they show, charting at
//! compaction, and how often the daemon scans the hosts' storage. The simple keys also have a
//! `CAIRN_HISTORY_*` variable.
//!
//! Unknown keys are warned about and ignored, unlike the plugin tables: a config written
//! for a later cairn must not stop this one from starting.
//!
//! A project may override the display keys in its own `.cairn/config.toml` (project wins over
//! the global file and the environment): [`ProjectConfigs::for_directory`], applied by the history ops to the
//! session they read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Source, Switch};
#[path = "retention.rs"]
mod retention;
use crate::error::{CairnError, ErrorCode, Result};
pub use retention::{MAX_KEEP_DAYS, parse_size};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpstreamHistory {
    pub enable: bool,
    pub disable_for_agents: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContextCharting {
    pub enable: bool,
    /// Turns the chart previews (`history_browse_turns` `num_before`).
    pub recent_turns: usize,
    /// Messages of the latest turn the chart previews (`history_browse_messages` `num_before`).
    pub recent_messages: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviewLengths {
    pub user_preview_length: usize,
    pub assistant_preview_length: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullLengths {
    pub text_length: usize,
    pub reasoning_length: usize,
    pub tool_output_length: usize,
    /// Each string field of a tool's input.
    pub tool_input_length: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchLimits {
    pub message_limit: usize,
    pub max_hits_per_message: usize,
    pub max_snippets_per_hit: usize,
    pub snippet_length: usize,
}

/// Everything `[history]` sets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistorySettings {
    /// Seconds between two scans of the hosts' storage by the daemon (0: never; the first
    /// backfill at start still runs).
    pub scan_interval_secs: u64,
    /// Log each history tool call to `<data dir>/logs/history-calls.jsonl`.
    pub debug_log_tool_calls: bool,
    pub upstream_history: UpstreamHistory,
    pub context_charting: ContextCharting,
    pub browse_turns: PreviewLengths,
    pub browse_messages: PreviewLengths,
    pub pull_message: PullLengths,
    pub search: SearchLimits,
    /// Tool selectors added to the defaults whose input `history_pull_message` shows: names,
    /// globs (`mcp__*`), `!name` to hide one, `!` to hide all; exclusions win.
    pub show_tool_input: Vec<String>,
    /// The same for tool output.
    pub show_tool_output: Vec<String>,
    /// Retention: the daemon removes sessions not updated for this many days (0: keep all).
    #[serde(default)]
    pub keep_days: u64,
    /// Retention: the archive's live bytes the daemon keeps it under, oldest sessions going
    /// first (0: no cap). `config.toml` may write a size (`"2GB"`, `"500MiB"`).
    #[serde(default)]
    pub max_bytes: u64,
}

impl Default for HistorySettings {
    fn default() -> Self {
        HistorySettings {
            scan_interval_secs: 60,
            debug_log_tool_calls: false,
            upstream_history: UpstreamHistory { enable: true, disable_for_agents: Vec::new() },
            context_charting: ContextCharting { enable: true, recent_turns: 10, recent_messages: 5 },
            browse_turns: PreviewLengths { user_preview_length: 280, assistant_preview_length: 140 },
            browse_messages: PreviewLengths { user_preview_length: 280, assistant_preview_length: 140 },
            pull_message: PullLengths {
                text_length: 400,
                reasoning_length: 200,
                tool_output_length: 400,
                tool_input_length: 140,
            },
            search: SearchLimits {
                message_limit: 5,
                max_hits_per_message: 5,
                max_snippets_per_hit: 5,
                snippet_length: 140,
            },
            show_tool_input: Vec::new(),
            show_tool_output: Vec::new(),
            keep_days: 0,
            max_bytes: 0,
        }
    }
}

/// The keys with an environment variable: (dotted key, variable, what it sets).
pub const HISTORY_ENV_KEYS: &[(&str, &str, &str)] = &[
    ("scan_interval_secs", "CAIRN_HISTORY_SCAN_INTERVAL_SECS", "seconds between scans of the hosts' history (0: off)"),
    ("debug_log_tool_calls", "CAIRN_HISTORY_DEBUG_LOG", "log history tool calls to logs/history-calls.jsonl"),
    ("context_charting.enable", "CAIRN_HISTORY_CHARTING", "leave a navigation chart at compaction"),
    ("upstream_history.enable", "CAIRN_HISTORY_UPSTREAM", "tell sub-agents their parent's session"),
    ("show_tool_input", "CAIRN_HISTORY_SHOW_TOOL_INPUT", "tool selectors whose input is shown, comma-separated"),
    ("show_tool_output", "CAIRN_HISTORY_SHOW_TOOL_OUTPUT", "tool selectors whose output is shown, comma-separated"),
    ("keep_days", "CAIRN_HISTORY_KEEP_DAYS", "the daemon prunes sessions older than this many days (0: off)"),
    ("max_bytes", "CAIRN_HISTORY_MAX_BYTES", "the daemon keeps the archive under this size, e.g. 2GB (0: off)"),
];

/// The `[history]` settings with where each set key came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct HistorySettingsLoaded {
    pub config: HistorySettings,
    /// Dotted key → source, for the keys not at their default.
    pub sources: std::collections::BTreeMap<String, Source>,
}

impl HistorySettingsLoaded {
    /// Defaults < `[history]` of config.toml < environment; lengths checked at the end.
    pub(super) fn load(
        table: Option<serde_json::Map<String, Value>>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<HistorySettingsLoaded> {
        let mut loaded = HistorySettingsLoaded::default();
        let mut tree = serde_json::to_value(&loaded.config)?;
        if let Some(table) = table {
            merge_known(&mut tree, Value::Object(table), "", &mut |key| {
                loaded.sources.insert(key, Source::ConfigFile);
            });
        }
        for (key, var, _) in HISTORY_ENV_KEYS {
            let Some(raw) = env(var) else { continue };
            let slot = key.split('.').fold(&mut tree, |node, name| &mut node[name]);
            *slot = env_value(slot, &raw);
            loaded.sources.insert((*key).to_owned(), Source::Env((*var).to_owned()));
        }
        retention::normalise(&mut tree)?;
        loaded.config = serde_json::from_value(tree).map_err(|e| bad_config(format!("[history]: {e}")))?;
        validate(&loaded.config)?;
        Ok(loaded)
    }
}

/// Copy the keys of `given` that exist in `tree` (the defaults); warn about the others.
fn merge_known(tree: &mut Value, given: Value, prefix: &str, set: &mut dyn FnMut(String)) {
    let Value::Object(given) = given else { return };
    for (name, value) in given {
        let key = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        match tree.get_mut(&name) {
            None => tracing::warn!(key = %format!("history.{key}"), "config.toml: unknown key ignored"),
            Some(slot @ Value::Object(_)) if value.is_object() => merge_known(slot, value, &key, set),
            Some(slot) => {
                *slot = value;
                set(key);
            }
        }
    }
}

/// An environment string as the JSON type of its key (the typed decode then checks it).
fn env_value(current: &Value, raw: &str) -> Value {
    let raw = raw.trim();
    match current {
        Value::Bool(_) => raw.parse::<Switch>().map_or_else(|()| Value::String(raw.to_owned()), |s| Value::Bool(s.0)),
        Value::Number(_) => raw.parse::<u64>().map_or_else(|_| Value::String(raw.to_owned()), Value::from),
        Value::Array(_) => {
            Value::Array(raw.split(',').map(str::trim).filter(|s| !s.is_empty()).map(Value::from).collect())
        }
        _ => Value::String(raw.to_owned()),
    }
}

fn validate(c: &HistorySettings) -> Result<()> {
    let lengths = [
        ("context_charting.recent_turns", c.context_charting.recent_turns),
        ("context_charting.recent_messages", c.context_charting.recent_messages),
        ("browse_turns.user_preview_length", c.browse_turns.user_preview_length),
        ("browse_turns.assistant_preview_length", c.browse_turns.assistant_preview_length),
        ("browse_messages.user_preview_length", c.browse_messages.user_preview_length),
        ("browse_messages.assistant_preview_length", c.browse_messages.assistant_preview_length),
        ("pull_message.text_length", c.pull_message.text_length),
        ("pull_message.reasoning_length", c.pull_message.reasoning_length),
        ("pull_message.tool_output_length", c.pull_message.tool_output_length),
        ("pull_message.tool_input_length", c.pull_message.tool_input_length),
        ("search.message_limit", c.search.message_limit),
        ("search.max_hits_per_message", c.search.max_hits_per_message),
        ("search.max_snippets_per_hit", c.search.max_snippets_per_hit),
        ("search.snippet_length", c.search.snippet_length),
    ];
    for (key, value) in lengths {
        if !(1..=10_000).contains(&value) {
            return Err(bad_config(format!("history.{key} must be between 1 and 10000 (got {value})")));
        }
    }
    Ok(())
}

fn bad_config(message: String) -> CairnError {
    CairnError::new(ErrorCode::InvalidConfig, message).with_hint("see `cairn config` for the keys of [history]")
}

/// Where a project's own settings live, under its root.
pub const PROJECT_CONFIG: &str = ".cairn/config.toml";
/// Keys a project may not set: they are the daemon's, not a project's.
const DAEMON_ONLY_KEYS: [&str; 4] = ["scan_interval_secs", "debug_log_tool_calls", "keep_days", "max_bytes"];

/// The projects' `[history]` tables read so far, by file (each store keeps its own: a file is
/// re-read when its size or mtime changes).
#[derive(Debug, Default)]
pub struct ProjectConfigs {
    tables: HashMap<PathBuf, (Stamp, ProjectTable)>,
}

impl ProjectConfigs {
    /// `global` with the `[history]` table of the project holding `dir` on top (project
    /// wins): the nearest `.cairn/config.toml` from `dir` up to its repository root. Unknown
    /// keys warn; a broken file is an `invalid_config` error naming it. Read at most once per
    /// change of the file.
    pub fn for_directory(&mut self, global: &HistorySettings, dir: &Path) -> Result<HistorySettings> {
        let Some(path) = project_config_file(dir) else { return Ok(global.clone()) };
        let Some(table) = self.table(&path)? else { return Ok(global.clone()) };
        merged_with_project(global, table, &path)
    }

    /// The file's `[history]` table without the daemon-only keys, re-read only when it changed.
    fn table(&mut self, path: &Path) -> Result<ProjectTable> {
        let stamp = Stamp::of(path);
        if let Some((seen, table)) = self.tables.get(path)
            && *seen == stamp
        {
            return Ok(table.clone());
        }
        let table = read_project_table(path)?;
        if self.tables.len() >= 256 {
            self.tables.clear();
        }
        self.tables.insert(path.to_owned(), (stamp, table.clone()));
        Ok(table)
    }
}

fn merged_with_project(
    global: &HistorySettings,
    table: serde_json::Map<String, Value>,
    path: &Path,
) -> Result<HistorySettings> {
    let mut tree = serde_json::to_value(global)?;
    merge_known(&mut tree, Value::Object(table), "", &mut |_| {});
    let bad = |why: String| {
        CairnError::new(ErrorCode::InvalidConfig, format!("{}: [history]: {why}", path.display()))
            .with_hint("fix or remove the project's [history] table")
    };
    let merged: HistorySettings = serde_json::from_value(tree).map_err(|e| bad(e.to_string()))?;
    validate(&merged).map_err(|e| bad(e.message))?;
    Ok(merged)
}

/// The nearest `.cairn/config.toml` at or above `dir`, not above the repository root.
fn project_config_file(dir: &Path) -> Option<PathBuf> {
    for ancestor in dir.ancestors().take(64) {
        let candidate = ancestor.join(PROJECT_CONFIG);
        if candidate.is_file() {
            return Some(candidate);
        }
        if ancestor.join(".git").exists() {
            return None;
        }
    }
    None
}

type ProjectTable = Option<serde_json::Map<String, Value>>;

/// Size and mtime: a change of either re-reads the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp(Option<(u64, std::time::SystemTime)>);

impl Stamp {
    fn of(path: &Path) -> Stamp {
        Stamp(std::fs::metadata(path).ok().and_then(|m| Some((m.len(), m.modified().ok()?))))
    }
}

fn read_project_table(path: &Path) -> Result<ProjectTable> {
    let bad = |why: String| {
        CairnError::new(ErrorCode::InvalidConfig, format!("{}: {why}", path.display()))
            .with_hint("a project's .cairn/config.toml may hold a [history] table")
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read: {e}")))?;
    let mut file: serde_json::Map<String, Value> = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let Some(history) = file.remove("history") else { return Ok(None) };
    let Value::Object(mut table) = history else { return Err(bad("[history] must be a table".into())) };
    for key in DAEMON_ONLY_KEYS {
        if table.remove(key).is_some() {
            tracing::warn!(file = %path.display(), key = %format!("history.{key}"), "a project cannot set this key; ignored");
        }
    }
    Ok(Some(table))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Option<serde_json::Map<String, Value>> {
        let file: std::collections::BTreeMap<String, serde_json::Map<String, Value>> = toml::from_str(text).unwrap();
        file.get("history").cloned()
    }

    #[test]
    fn file_then_env_unknown_keys_ignored() {
        let t = table(
            "[history]\nscan_interval_secs = 5\nshow_tool_output = [\"read\"]\nfuture_key = 1\n\
             [history.pull_message]\ntext_length = 1000\n[history.browse_turns]\nsomething = 2\n",
        );
        let env = |name: &str| match name {
            "CAIRN_HISTORY_SCAN_INTERVAL_SECS" => Some("0".to_owned()),
            "CAIRN_HISTORY_CHARTING" => Some("off".to_owned()),
            "CAIRN_HISTORY_SHOW_TOOL_INPUT" => Some("read, !bash".to_owned()),
            _ => None,
        };
        let s = HistorySettingsLoaded::load(t, &env).unwrap();
        assert_eq!(s.config.scan_interval_secs, 0);
        assert_eq!(s.config.pull_message.text_length, 1000);
        assert_eq!(s.config.pull_message.reasoning_length, 200);
        assert_eq!(s.config.show_tool_output, ["read"]);
        assert_eq!(s.config.show_tool_input, ["read", "!bash"]);
        assert!(!s.config.context_charting.enable);
        assert_eq!(s.sources["pull_message.text_length"], Source::ConfigFile);
        assert_eq!(s.sources["scan_interval_secs"], Source::Env("CAIRN_HISTORY_SCAN_INTERVAL_SECS".into()));
    }

    #[test]
    fn lengths_out_of_range_are_invalid_config() {
        for text in ["[history.search]\nsnippet_length = 0\n", "[history.pull_message]\ntext_length = 10001\n"] {
            let err = HistorySettingsLoaded::load(table(text), &|_| None).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidConfig, "{text}");
        }
        let env = |n: &str| (n == "CAIRN_HISTORY_SCAN_INTERVAL_SECS").then(|| "soon".to_owned());
        assert_eq!(HistorySettingsLoaded::load(None, &env).unwrap_err().code, ErrorCode::InvalidConfig);
    }
}

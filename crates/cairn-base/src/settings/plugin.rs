//! The plugin-facing settings: `[inject]`, `[triggers]`, `[compaction]`
//! and `[context_meter]` in `config.toml`, each key with a `CAIRN_*` variable. Plugins read
//! them through op `plugin_config` / `GET /config`; nothing here is secret.
//!
//! The keys are handled as JSON leaves (`inject.mode`...) so one table lists each key with its
//! variable, and one typed decode at the end validates the lot, whatever set it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Source, Switch};
use crate::error::{CairnError, ErrorCode, Result};

/// Default similarity threshold of the `[MEMORY]` block's relevant section (hybrid re-ranker
/// relevance, 0–1). Measured on the coding eval set: see docs/BENCHMARKS.md "Similarity threshold".
pub const DEFAULT_SIMILARITY_THRESHOLD: f64 = 0.4;

/// Which agents get the Memory Protocol: all (`true`), none (`false`) or those named.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ProtocolAgents {
    All(bool),
    Named(Vec<String>),
}

/// Where the plugin puts the `[MEMORY]` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum InjectMode {
    /// A synthetic part before the session's first message.
    FirstMessage,
    /// Re-rendered into the last system entry at every request.
    System,
}

/// What the plugin does when the host compacts a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum CompactionMode {
    /// Push cairn's context and the `compaction_note`; the summary is stored as a memory.
    Context,
    /// engram's "FIRST ACTION REQUIRED" wording.
    Engram,
    /// Replace the compaction prompt with the self-continuity one.
    Continuity,
    /// The summary is a chart of the conversation history (the default): recent turns and
    /// messages as previews, and how to page and pull the rest. Falls back to `context` when
    /// the history of the session cannot be charted (Claude Code: the chart comes with the
    /// context after the compaction, its own summary cannot be replaced).
    Chart,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct InjectSettings {
    pub protocol: ProtocolAgents,
    pub mode: InjectMode,
    pub similarity_threshold: f64,
    pub max_relevant: usize,
    pub budget_bytes: usize,
    /// Whether the block has the user's profile (personal memories).
    pub profile: bool,
    pub max_profile: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TriggerSettings {
    /// Extra trigger patterns (regular expressions, case-insensitive) besides the built-in list.
    pub keyword_patterns: Vec<String>,
    /// Whether a rule the developer states in a prompt ("from now on …", "always use pnpm") is
    /// saved at once, in their words, as a preference: no model needed.
    #[serde(default = "saves_rules")]
    pub save_rules: bool,
}

fn saves_rules() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompactionSettings {
    pub mode: CompactionMode,
    /// Compact on the plugin's own at this fraction of the context window (null: never).
    pub auto_at: Option<f64>,
    /// The context meter never schedules a compaction below this percentage.
    pub min_percent: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ContextMeterSettings {
    pub enabled: bool,
    pub yellow: u32,
    pub red: u32,
    pub critical: u32,
    /// The context window assumed when the host does not say.
    pub default_limit: u64,
}

/// Everything a plugin is configured with (the answer to `plugin_config`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PluginConfig {
    pub inject: InjectSettings,
    pub triggers: TriggerSettings,
    pub compaction: CompactionSettings,
    pub context_meter: ContextMeterSettings,
    /// What a host plugin needs of `[history]` (upstream history, the chart); filled in from those
    /// settings when served, never read from the plugin tables.
    #[serde(default)]
    pub history: PluginHistory,
}

/// The `[history]` keys a host plugin follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PluginHistory {
    pub upstream_history: super::history::UpstreamHistory,
    pub context_charting: super::history::ContextCharting,
}

impl Default for PluginHistory {
    fn default() -> Self {
        let history = super::history::HistorySettings::default();
        PluginHistory { upstream_history: history.upstream_history, context_charting: history.context_charting }
    }
}

impl Default for PluginConfig {
    fn default() -> Self {
        PluginConfig {
            inject: InjectSettings {
                protocol: ProtocolAgents::All(true),
                mode: InjectMode::FirstMessage,
                similarity_threshold: DEFAULT_SIMILARITY_THRESHOLD,
                max_relevant: 10,
                budget_bytes: 8_000,
                profile: true,
                max_profile: 5,
            },
            triggers: TriggerSettings { keyword_patterns: Vec::new(), save_rules: saves_rules() },
            compaction: CompactionSettings { mode: CompactionMode::Chart, auto_at: None, min_percent: 50 },
            context_meter: ContextMeterSettings {
                enabled: true,
                yellow: 70,
                red: 85,
                critical: 92,
                default_limit: 200_000,
            },
            history: PluginHistory::default(),
        }
    }
}

/// Each key (`section.name`), its environment variable and what it sets.
pub const PLUGIN_KEYS: &[(&str, &str, &str)] = &[
    ("inject.protocol", "CAIRN_INJECT_PROTOCOL", "inject the Memory Protocol: true, false or agent names (a,b)"),
    ("inject.mode", "CAIRN_INJECT_MODE", "where the [MEMORY] block goes: first_message or system"),
    ("inject.similarity_threshold", "CAIRN_SIMILARITY_THRESHOLD", "least relevance (0-1) of a relevant memory"),
    ("inject.max_relevant", "CAIRN_INJECT_MAX_RELEVANT", "most relevant memories in the [MEMORY] block"),
    ("inject.budget_bytes", "CAIRN_INJECT_BUDGET", "size of the [MEMORY] block in bytes"),
    ("inject.profile", "CAIRN_INJECT_PROFILE", "whether the block has the user's preferences"),
    ("inject.max_profile", "CAIRN_INJECT_MAX_PROFILE", "most preferences in the block"),
    ("triggers.keyword_patterns", "CAIRN_TRIGGER_PATTERNS", "extra memory-trigger regexes, comma-separated"),
    ("triggers.save_rules", "CAIRN_SAVE_RULES", "save the rules a prompt states (\"from now on …\") as said"),
    ("compaction.mode", "CAIRN_COMPACTION_MODE", "on compaction: context, engram, continuity or chart"),
    ("compaction.auto_at", "CAIRN_COMPACTION_AUTO_AT", "compact at this fraction of the window (off: never)"),
    ("compaction.min_percent", "CAIRN_COMPACTION_MIN_PERCENT", "never compact below this percentage"),
    ("context_meter.enabled", "CAIRN_CONTEXT_METER", "show the context meter line"),
    ("context_meter.yellow", "CAIRN_CONTEXT_METER_YELLOW", "percentage shown yellow"),
    ("context_meter.red", "CAIRN_CONTEXT_METER_RED", "percentage shown red"),
    ("context_meter.critical", "CAIRN_CONTEXT_METER_CRITICAL", "percentage shown critical"),
    ("context_meter.default_limit", "CAIRN_CONTEXT_METER_LIMIT", "context window in tokens when the host says none"),
];

/// The four tables as read from `config.toml`, still untyped.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct PluginFile {
    pub inject: Option<serde_json::Map<String, Value>>,
    pub triggers: Option<serde_json::Map<String, Value>>,
    pub compaction: Option<serde_json::Map<String, Value>>,
    pub context_meter: Option<serde_json::Map<String, Value>>,
}

/// The plugin settings with where each key's value came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginSettings {
    pub config: PluginConfig,
    /// `section.key` → source.
    pub sources: BTreeMap<String, Source>,
}

impl Default for PluginSettings {
    fn default() -> Self {
        let sources = PLUGIN_KEYS.iter().map(|(key, _, _)| ((*key).to_owned(), Source::Default)).collect();
        PluginSettings { config: PluginConfig::default(), sources }
    }
}

impl PluginSettings {
    /// Defaults < `config.toml` tables < environment; validated once at the end.
    pub(super) fn load(file: PluginFile, env: &dyn Fn(&str) -> Option<String>) -> Result<PluginSettings> {
        let mut settings = PluginSettings::default();
        let mut tree = serde_json::to_value(&settings.config)?;
        let tables = [
            ("inject", file.inject),
            ("triggers", file.triggers),
            ("compaction", file.compaction),
            ("context_meter", file.context_meter),
        ];
        for (section, table) in tables {
            for (name, value) in table.into_iter().flatten() {
                let key = format!("{section}.{name}");
                if !PLUGIN_KEYS.iter().any(|(k, _, _)| *k == key) {
                    return Err(bad_config(format!("config.toml: unknown key {key}")));
                }
                tree[section][&name] = value;
                settings.sources.insert(key, Source::ConfigFile);
            }
        }
        for (key, var, _) in PLUGIN_KEYS {
            let Some(raw) = env(var) else { continue };
            let (section, name) = key.split_once('.').expect("keys are section.name");
            tree[section][name] = env_value(key, &tree[section][name], &raw);
            settings.sources.insert((*key).to_owned(), Source::Env((*var).to_owned()));
        }
        // `history` is served from `[history]`, not read here
        if let Some(tree) = tree.as_object_mut() {
            tree.remove("history");
        }
        settings.config = serde_json::from_value(tree).map_err(|e| bad_config(format!("plugin settings: {e}")))?;
        validate(&settings.config)?;
        Ok(settings)
    }
}

/// An environment string as the JSON type of its key (the typed decode then checks it).
fn env_value(key: &str, current: &Value, raw: &str) -> Value {
    let raw = raw.trim();
    let text = || Value::String(raw.to_owned());
    let switch = || raw.parse::<Switch>().ok().map(|s| Value::Bool(s.0));
    let number = || raw.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(Value::Number);
    let list = || Value::Array(raw.split(',').map(str::trim).filter(|s| !s.is_empty()).map(Value::from).collect());
    match current {
        // A switch, or the names of the agents that get the protocol.
        _ if key == "inject.protocol" => switch().unwrap_or_else(list),
        // `auto_at`: null is off.
        _ if key == "compaction.auto_at" => {
            if matches!(raw.to_ascii_lowercase().as_str(), "off" | "none" | "never") {
                Value::Null
            } else {
                number().unwrap_or_else(text)
            }
        }
        Value::Bool(_) => switch().unwrap_or_else(text),
        Value::Number(n) if n.is_u64() => raw.parse::<u64>().map_or_else(|_| text(), Value::from),
        Value::Number(_) => number().unwrap_or_else(text),
        Value::Array(_) => list(),
        _ => text(),
    }
}

fn validate(c: &PluginConfig) -> Result<()> {
    let unit = |name: &str, v: f64| {
        if (0.0..=1.0).contains(&v) { Ok(()) } else { Err(bad_config(format!("{name} must be between 0 and 1"))) }
    };
    unit("inject.similarity_threshold", c.inject.similarity_threshold)?;
    if let Some(at) = c.compaction.auto_at {
        unit("compaction.auto_at", at)?;
    }
    let m = &c.context_meter;
    if !(m.yellow <= m.red && m.red <= m.critical && m.critical <= 100) {
        return Err(bad_config("context_meter: need yellow <= red <= critical <= 100".to_owned()));
    }
    for pattern in &c.triggers.keyword_patterns {
        regex::RegexBuilder::new(pattern)
            .case_insensitive(true)
            .build()
            .map_err(|e| bad_config(format!("triggers.keyword_patterns: {pattern:?} is not a valid pattern: {e}")))?;
    }
    Ok(())
}

fn bad_config(message: String) -> CairnError {
    CairnError::new(ErrorCode::InvalidConfig, message)
        .with_hint("see `cairn config` for the keys of [inject], [triggers], [compaction], [context_meter]")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(toml_text: &str) -> PluginFile {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn file_then_env_with_sources() {
        let f = file("[inject]\nmode = \"system\"\nprotocol = [\"build\"]\n[compaction]\nauto_at = 0.8\n");
        let env = |name: &str| match name {
            "CAIRN_SIMILARITY_THRESHOLD" => Some("0.5".to_owned()),
            "CAIRN_TRIGGER_PATTERNS" => Some("acuerdate, merk dir".to_owned()),
            "CAIRN_CONTEXT_METER" => Some("off".to_owned()),
            _ => None,
        };
        let s = PluginSettings::load(f, &env).unwrap();
        assert_eq!(s.config.inject.mode, InjectMode::System);
        assert_eq!(s.config.inject.protocol, ProtocolAgents::Named(vec!["build".into()]));
        assert_eq!(s.config.compaction.auto_at, Some(0.8));
        assert_eq!(s.config.inject.similarity_threshold, 0.5);
        assert_eq!(s.config.triggers.keyword_patterns, ["acuerdate", "merk dir"]);
        assert!(!s.config.context_meter.enabled);
        assert_eq!(s.sources["inject.mode"], Source::ConfigFile);
        assert_eq!(s.sources["inject.similarity_threshold"], Source::Env("CAIRN_SIMILARITY_THRESHOLD".into()));
        assert_eq!(s.sources["compaction.mode"], Source::Default);
    }

    #[test]
    fn protocol_from_env_is_a_switch_or_names() {
        let with = |v: &'static str| move |n: &str| (n == "CAIRN_INJECT_PROTOCOL").then(|| v.to_owned());
        let load = |v| PluginSettings::load(PluginFile::default(), &with(v)).unwrap().config.inject.protocol;
        assert_eq!(load("false"), ProtocolAgents::All(false));
        assert_eq!(load("build,plan"), ProtocolAgents::Named(vec!["build".into(), "plan".into()]));
        assert_eq!(load("build"), ProtocolAgents::Named(vec!["build".into()]));
    }

    #[test]
    fn bad_values_are_invalid_config() {
        let bad = [
            "[inject]\nsimilarity_threshold = 2.0\n",
            "[inject]\nmode = \"sometimes\"\n",
            "[inject]\ncolour = 1\n",
            "[triggers]\nkeyword_patterns = [\"(\"]\n",
            "[context_meter]\nyellow = 95\n",
        ];
        for text in bad {
            let err = PluginSettings::load(file(text), &|_| None).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidConfig, "{text}");
        }
        let env = |n: &str| (n == "CAIRN_INJECT_MAX_RELEVANT").then(|| "many".to_owned());
        assert_eq!(PluginSettings::load(PluginFile::default(), &env).unwrap_err().code, ErrorCode::InvalidConfig);
    }
}

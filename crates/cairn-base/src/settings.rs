//! Every path, port and switch, declared once with its environment variable. Precedence:
//! defaults < `config.toml` in the data dir < environment < flags; each value remembers where
//! it came from so `cairn config` can say.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{CairnError, ErrorCode, Result};

/// File name of the database inside the data dir.
pub const DB_FILE: &str = "cairn.db";
/// The directory inside the data dir where hooks and plugins keep what no daemon took yet.
pub const SPOOL_DIR: &str = "spool";
/// How long a connection to the store waits for another process's lock before giving up.
pub const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// Default size of a context block: large enough to be useful, small next to a context window.
pub const DEFAULT_BUDGET_BYTES: usize = 16 * 1024;

pub mod history;
pub mod llm;
pub mod plugin;
pub mod search;
pub mod sync;

pub use history::{HISTORY_ENV_KEYS, HistorySettings, HistorySettingsLoaded};
pub use llm::{LLM_ENV_VARS, LlmProviderKind, LlmSettings, load_llm};
pub use plugin::{PLUGIN_KEYS, PluginConfig, PluginSettings};
pub use sync::{RemoteSettings, load_remote};

/// Default HTTP port: engram's, so engram's plugins can point at cairn unchanged.
pub const DEFAULT_PORT: u16 = 7437;
pub const DEFAULT_BIND: &str = "127.0.0.1";
pub const CONFIG_FILE: &str = "config.toml";

/// The environment variables cairn reads, with what each sets.
pub const ENV_VARS: &[(&str, &str)] = &[
    ("CAIRN_DATA_DIR", "data directory (database, config.toml)"),
    ("CAIRN_PORT", "HTTP port of `cairn serve`"),
    ("ENGRAM_PORT", "HTTP port when CAIRN_PORT is unset (engram's plugins start `serve` and call this port)"),
    ("CAIRN_BIND", "address `cairn serve` binds"),
    ("CAIRN_HTTP_TOKEN", "bearer token required by the HTTP API (mandatory beyond loopback)"),
    ("CAIRN_PROJECT", "project name, overriding detection"),
    ("CAIRN_CONTEXT_BUDGET", "size of a context block in bytes"),
    ("CAIRN_LOG", "log filter (e.g. info, cairn_core=debug)"),
    ("CAIRN_AUTOSTART", "who starts the daemon when none runs: mcp (default), all (CLI too), never"),
    ("CAIRN_DIRECT", "1: never use a daemon, open the database file directly"),
    ("CAIRN_EMBEDDER", "semantic search model: local (default; files from `cairn model install`), http, none"),
    ("CAIRN_MODEL", "local embedding model by name: multilingual-e5-small (default), all-MiniLM-L6-v2"),
    ("CAIRN_MODEL_DIR", "directory of the local embedding model (default <data dir>/models/<model>)"),
    ("CAIRN_EMBED_URL", "OpenAI-compatible API root for CAIRN_EMBEDDER=http (e.g. http://localhost:11434/v1)"),
    ("CAIRN_EMBED_MODEL", "model name sent to the embedding endpoint"),
    ("CAIRN_EMBED_API_KEY", "bearer key for the embedding endpoint"),
    ("CAIRN_EMBED_TIMEOUT_SECS", "seconds one request to the embedding endpoint may take (default 15)"),
    ("CAIRN_EMBED_BATCH_SIZE", "most texts per request to the embedding endpoint (default 64)"),
    ("CAIRN_SYNC_REMOTE", "the hub this data dir syncs with (overrides [sync] remote)"),
    ("CAIRN_SYNC_TOKEN", "the hub token (overrides [sync] token)"),
];

/// Default of `embed_timeout_secs`.
pub const DEFAULT_EMBED_TIMEOUT_SECS: u64 = 15;
/// Default of `embed_batch_size`.
pub const DEFAULT_EMBED_BATCH_SIZE: usize = 64;
/// Bounds of the endpoint limits: a timeout of an hour or a batch of thousands is a typo.
const EMBED_TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 1..=3600;
const EMBED_BATCH_RANGE: std::ops::RangeInclusive<usize> = 1..=2048;

/// Which model embeds memories for semantic search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EmbedderKind {
    /// The local model in `model_dir` (when its files are there).
    Local,
    /// An OpenAI-compatible endpoint.
    Http,
    /// Lexical search only.
    None,
}

impl std::str::FromStr for EmbedderKind {
    type Err = ();
    fn from_str(s: &str) -> std::result::Result<Self, ()> {
        match s.trim().to_ascii_lowercase().as_str() {
            "local" => Ok(EmbedderKind::Local),
            "http" | "openai" | "remote" => Ok(EmbedderKind::Http),
            "none" | "off" | "0" | "false" => Ok(EmbedderKind::None),
            _ => Err(()),
        }
    }
}

/// Everything needed to build the embedder (passed to whoever opens the store).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbedderConfig {
    pub kind: EmbedderKind,
    pub model_dir: PathBuf,
    pub url: Option<String>,
    pub model: Option<String>,
    pub api_key: Option<String>,
    /// Seconds one request to the endpoint may take.
    pub timeout_secs: u64,
    /// Most texts per request to the endpoint (a failed batch is retried in halves).
    pub batch_size: usize,
}

/// The local model used when none is chosen (`cairn model use`, `model`, `CAIRN_MODEL`) and no
/// earlier default is kept ([`EARLIER_DEFAULTS`]).
pub const DEFAULT_MODEL: &str = "multilingual-e5-small";

/// Models that were the default of an earlier cairn. An install of one, made when it was the
/// default, is kept in use while no model is chosen: an upgrade never changes the model the
/// store's vectors are of (that is a re-embedding of every memory, with search partly lexical
/// meanwhile), the user does, with `cairn model use`.
pub const EARLIER_DEFAULTS: &[&str] = &["all-MiniLM-L6-v2"];

/// The files a model directory needs (cairn-embed's `REQUIRED_FILES`, which a test of the
/// `cairn` crate compares): what "installed" means here.
pub const MODEL_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];

/// The manifest `cairn model install` writes last in a model directory (cairn-embed's
/// `install.rs`); its `id` names the model.
const MODEL_MANIFEST: &str = "cairn-model.json";

/// Where `cairn model install` puts the default model.
pub fn default_model_dir(data_dir: &Path) -> PathBuf {
    model_dir_for(data_dir, DEFAULT_MODEL)
}

/// Whether `dir` holds a model's files.
pub fn is_model_installed(dir: &Path) -> bool {
    MODEL_FILES.iter().all(|f| dir.join(f).is_file())
}

/// The earlier default to keep in use when no model is chosen and the model files are in the
/// data dir, or `None` for [`DEFAULT_MODEL`]. An earlier default that is installed is kept
/// unless the default is installed too and the store's vectors are not the earlier one's (a
/// store with no vector, or the default's): both installed is the user's download of the
/// default, but not yet their choice while every vector is the earlier model's. When the
/// store cannot be read, the earlier model is kept: a re-embedding is never started on a guess.
fn kept_earlier_default(data_dir: &Path) -> Option<&'static str> {
    let earlier = EARLIER_DEFAULTS.iter().copied().find(|m| is_model_installed(&model_dir_for(data_dir, m)))?;
    if !is_model_installed(&default_model_dir(data_dir)) {
        return Some(earlier);
    }
    match vectors_model(&data_dir.join(DB_FILE)) {
        Ok(Some(model)) if model == earlier => Some(earlier),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(error = %e, model = earlier, "cannot read which model the stored vectors are of; keeping");
            Some(earlier)
        }
    }
}

/// The model of the store's vectors (one row read: the daemon keeps the vectors of one model
/// only, dropping the others when it starts), `None` without a store or a vector.
fn vectors_model(db: &Path) -> rusqlite::Result<Option<String>> {
    use rusqlite::OptionalExtension;
    if !db.is_file() {
        return Ok(None);
    }
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    conn.query_row("SELECT model FROM embeddings LIMIT 1", [], |r| r.get(0)).optional()
}

/// The earlier default a directory set by `model_dir` / `CAIRN_MODEL_DIR` holds, by its
/// install manifest or else its name, so that with no model chosen that directory is also named
/// for what it is (`cairn model status`, `cairn model install`).
fn earlier_default_in(dir: &Path) -> Option<&'static str> {
    let by_manifest = std::fs::read(dir.join(MODEL_MANIFEST))
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|manifest| manifest["id"].as_str().map(str::to_owned));
    let name = by_manifest.or_else(|| dir.file_name().map(|n| n.to_string_lossy().into_owned()))?;
    EARLIER_DEFAULTS.iter().copied().find(|m| *m == name)
}

/// Where `cairn model install NAME` puts a model: `<data dir>/models/NAME`.
pub fn model_dir_for(data_dir: &Path, model: &str) -> PathBuf {
    data_dir.join("models").join(model)
}

/// The tracing filter for the log setting (`log` in config.toml, `CAIRN_LOG`). The MCP library logs every message
/// whole at `debug` (tool arguments: memory contents, `<private>` text included), so it stays
/// at `info` unless the filter names it: `CAIRN_LOG=debug` never writes what agents sent.
pub fn log_filter(raw: &str) -> String {
    let raw = raw.trim();
    if raw.is_empty() {
        return "warn".to_owned();
    }
    let directives = || raw.split(',').map(str::trim);
    if directives().any(|d| d.starts_with("rmcp")) {
        return raw.to_owned();
    }
    let verbose_default =
        directives().any(|d| !d.contains('=') && matches!(d.to_ascii_lowercase().as_str(), "debug" | "trace"));
    if verbose_default { format!("{raw},rmcp=info") } else { raw.to_owned() }
}

/// Who starts the daemon when none is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Autostart {
    /// `cairn mcp` starts it (agents benefit most from one shared writer).
    Mcp,
    /// The CLI too.
    All,
    /// Nobody: every process opens the database itself when no daemon runs.
    Never,
}

impl std::str::FromStr for Autostart {
    type Err = ();
    fn from_str(s: &str) -> std::result::Result<Self, ()> {
        match s.trim().to_ascii_lowercase().as_str() {
            "mcp" | "1" | "true" | "yes" => Ok(Autostart::Mcp),
            "all" => Ok(Autostart::All),
            "never" | "0" | "false" | "no" => Ok(Autostart::Never),
            _ => Err(()),
        }
    }
}

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "name")]
pub enum Source {
    Default,
    ConfigFile,
    Env(String),
    Flag,
    /// No model is chosen and an earlier default is installed: it is kept
    /// ([`EARLIER_DEFAULTS`]).
    InstalledDefault,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::ConfigFile => f.write_str("config.toml"),
            Source::Env(name) => write!(f, "env {name}"),
            Source::Flag => f.write_str("flag"),
            Source::InstalledDefault => f.write_str("default (installed)"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

impl<T> Setting<T> {
    fn default(value: T) -> Self {
        Self { value, source: Source::Default }
    }
}

/// Values given on the command line (highest precedence).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub data_dir: Option<PathBuf>,
    pub port: Option<u16>,
    pub bind: Option<String>,
    pub project: Option<String>,
}

/// What `config.toml` may set.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    port: Option<u16>,
    bind: Option<String>,
    http_token: Option<String>,
    context_budget: Option<usize>,
    log: Option<String>,
    autostart: Option<Autostart>,
    direct: Option<bool>,
    embedder: Option<EmbedderKind>,
    model: Option<String>,
    model_dir: Option<PathBuf>,
    embed_url: Option<String>,
    embed_model: Option<String>,
    embed_api_key: Option<String>,
    embed_timeout_secs: Option<u64>,
    embed_batch_size: Option<usize>,
    // The plugin tables, checked key by key in `plugin.rs`.
    inject: Option<serde_json::Map<String, serde_json::Value>>,
    triggers: Option<serde_json::Map<String, serde_json::Value>>,
    compaction: Option<serde_json::Map<String, serde_json::Value>>,
    context_meter: Option<serde_json::Map<String, serde_json::Value>>,
    // `[history]`, checked in `history.rs`.
    history: Option<serde_json::Map<String, serde_json::Value>>,
    privacy: Option<PrivacyFile>,
    // `[sync]`, the hub this data dir syncs with, checked in `settings/sync.rs` (its mistakes stop
    // only sync, never the rest of cairn).
    sync: Option<toml::Table>,
    // `[llm]`, checked in `llm.rs` (its mistakes turn only the LLM off).
    llm: Option<toml::Table>,
    // `[search]`, checked in `search.rs`.
    search: Option<toml::Table>,
}

/// The effective configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub data_dir: Setting<PathBuf>,
    pub port: Setting<u16>,
    pub bind: Setting<String>,
    /// Never printed in full.
    #[serde(serialize_with = "masked")]
    pub http_token: Setting<Option<String>>,
    pub project: Setting<Option<String>>,
    pub context_budget: Setting<usize>,
    /// The tracing filter's directives (see [`log_filter`]).
    pub log: Setting<String>,
    pub autostart: Setting<Autostart>,
    /// Never use a daemon: every process opens the database file itself.
    pub direct: Setting<bool>,
    pub embedder: Setting<EmbedderKind>,
    /// The local model's name (`cairn model use`); its files are in `model_dir`.
    pub model: Setting<String>,
    /// `<data dir>/models/<model>` unless set (`model_dir`, `CAIRN_MODEL_DIR`).
    pub model_dir: Setting<PathBuf>,
    pub embed_url: Setting<Option<String>>,
    pub embed_model: Setting<Option<String>>,
    /// Never printed in full.
    #[serde(serialize_with = "masked")]
    pub embed_api_key: Setting<Option<String>>,
    /// Seconds one request to the embedding endpoint may take.
    pub embed_timeout_secs: Setting<u64>,
    /// Most texts per request to the embedding endpoint.
    pub embed_batch_size: Setting<usize>,
    /// `[inject]`, `[triggers]`, `[compaction]`, `[context_meter]`: what plugins are told.
    pub plugin: PluginSettings,
    /// `[history]`: the conversation-history tools and scans.
    pub history: HistorySettingsLoaded,
    /// `[privacy] redact_secrets` (`CAIRN_REDACT_SECRETS`): secrets found by pattern are
    /// redacted on save (what leaves the machine is redacted of them whatever this says).
    pub redact_secrets: Setting<bool>,
    /// `[sync]`: the hub this data dir syncs with, when one is set.
    pub remote: Option<RemoteSettings>,
    /// `[llm]`: the language model of background extraction, and its daily budget.
    pub llm: LlmSettings,
    /// `[search]`: deep recall by default, and how long it waits for the model.
    #[serde(default)]
    pub search: search::SearchSettings,
}

/// What the rules read of the settings: the plugin tables and `[history]`. A door hands it to
/// every core context it opens (`Core::with_settings`), so an op runs under its process's
/// settings with no global; a context given none runs under the defaults (unit tests).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleSettings {
    pub plugin: PluginConfig,
    pub history: HistorySettings,
    pub privacy: PrivacySettings,
}

/// `[privacy]` as the rules read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrivacySettings {
    /// Redact secrets found by pattern on save, not only `<private>` blocks.
    pub redact_secrets: bool,
}

impl Default for PrivacySettings {
    fn default() -> Self {
        PrivacySettings { redact_secrets: true }
    }
}

/// What `[privacy]` may set.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PrivacyFile {
    redact_secrets: Option<bool>,
}

impl RuleSettings {
    /// The plugin settings as `plugin_config` answers them: the two history switches a plugin
    /// acts on come from `[history]`.
    pub fn plugin_config(&self) -> PluginConfig {
        PluginConfig {
            history: plugin::PluginHistory {
                upstream_history: self.history.upstream_history.clone(),
                context_charting: self.history.context_charting.clone(),
            },
            ..self.plugin.clone()
        }
    }
}

impl Settings {
    /// Resolve settings from flags, the process environment and the config file.
    pub fn load(overrides: &Overrides) -> Result<Settings> {
        Self::load_with(overrides, &|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// What the rules of this process read ([`RuleSettings`]).
    pub fn rules(&self) -> RuleSettings {
        RuleSettings {
            plugin: self.plugin.config.clone(),
            history: self.history.config.clone(),
            privacy: PrivacySettings { redact_secrets: self.redact_secrets.value },
        }
    }

    /// Same, with an injectable environment (tests).
    pub fn load_with(overrides: &Overrides, env: &dyn Fn(&str) -> Option<String>) -> Result<Settings> {
        let data_dir = match (&overrides.data_dir, env("CAIRN_DATA_DIR")) {
            (Some(dir), _) => Setting { value: dir.clone(), source: Source::Flag },
            (None, Some(dir)) => Setting { value: PathBuf::from(dir), source: Source::Env("CAIRN_DATA_DIR".into()) },
            (None, None) => Setting::default(default_data_dir()?),
        };
        let mut file = read_config_file(&data_dir.value)?;
        let plugin_file = plugin::PluginFile {
            inject: file.inject.take(),
            triggers: file.triggers.take(),
            compaction: file.compaction.take(),
            context_meter: file.context_meter.take(),
        };
        let mut s = Settings {
            plugin: PluginSettings::load(plugin_file, env)?,
            history: HistorySettingsLoaded::load(file.history.take(), env)?,
            // A mistake in `[sync]` must not keep the daemon (and so the hooks' capture) from
            // starting: sync reports it (`cairn remote status`, `cairn doctor`) and stays off.
            remote: sync::load(file.sync.take(), env).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "[sync] is ignored");
                None
            }),
            llm: llm::load(file.llm.take(), env),
            search: search::load(file.search.take())?,
            port: Setting::default(DEFAULT_PORT),
            bind: Setting::default(DEFAULT_BIND.to_owned()),
            http_token: Setting::default(None),
            project: Setting::default(None),
            context_budget: Setting::default(DEFAULT_BUDGET_BYTES),
            log: Setting::default("warn".to_owned()),
            autostart: Setting::default(Autostart::Mcp),
            direct: Setting::default(false),
            redact_secrets: Setting::default(true),
            embedder: Setting::default(EmbedderKind::Local),
            model: Setting::default(DEFAULT_MODEL.to_owned()),
            model_dir: Setting::default(default_model_dir(&data_dir.value)),
            embed_url: Setting::default(None),
            embed_model: Setting::default(None),
            embed_api_key: Setting::default(None),
            embed_timeout_secs: Setting::default(DEFAULT_EMBED_TIMEOUT_SECS),
            embed_batch_size: Setting::default(DEFAULT_EMBED_BATCH_SIZE),
            data_dir,
        };
        s.apply_file(file);
        s.apply_env(env)?;
        s.apply_flags(overrides);
        s.check_embed_limits()?;
        s.model.value = parse_model_name(&s.model.value)?;
        s.keep_an_earlier_default();
        if s.model_dir.source == Source::Default {
            s.model_dir.value = model_dir_for(&s.data_dir.value, &s.model.value);
        }
        Ok(s)
    }

    /// With no model chosen, an earlier default installed (or named by the model directory
    /// that is set) stays the model: see [`EARLIER_DEFAULTS`].
    fn keep_an_earlier_default(&mut self) {
        if self.model.source != Source::Default || self.embedder.value != EmbedderKind::Local {
            return;
        }
        let kept = match self.model_dir.source {
            Source::Default => kept_earlier_default(&self.data_dir.value),
            _ => earlier_default_in(&self.model_dir.value),
        };
        if let Some(model) = kept {
            self.model = Setting { value: model.to_owned(), source: Source::InstalledDefault };
        }
    }

    /// When an earlier default is kept ([`Source::InstalledDefault`]): that the default changed,
    /// and the commands that switch to it.
    pub fn kept_model_note(&self) -> Option<String> {
        if self.model.source != Source::InstalledDefault || self.model_dir.source != Source::Default {
            return None;
        }
        let switch = if is_model_installed(&default_model_dir(&self.data_dir.value)) {
            format!("cairn model use {DEFAULT_MODEL}")
        } else {
            format!("cairn model install {DEFAULT_MODEL} && cairn model use {DEFAULT_MODEL}")
        };
        Some(format!(
            "{DEFAULT_MODEL} is now cairn's default; {}, installed before, stays in use until you switch \
             (every memory is then embedded again, in the background): {switch}",
            self.model.value
        ))
    }

    fn apply_file(&mut self, file: FileConfig) {
        let from_file = |v| Setting { value: v, source: Source::ConfigFile };
        if let Some(v) = file.port {
            self.port = from_file(v);
        }
        if let Some(v) = file.bind {
            self.bind = Setting { value: v, source: Source::ConfigFile };
        }
        if let Some(v) = file.http_token {
            self.http_token = Setting { value: Some(v), source: Source::ConfigFile };
        }
        if let Some(v) = file.context_budget {
            self.context_budget = Setting { value: v, source: Source::ConfigFile };
        }
        if let Some(v) = file.log {
            self.log = Setting { value: v, source: Source::ConfigFile };
        }
        if let Some(v) = file.autostart {
            self.autostart = Setting { value: v, source: Source::ConfigFile };
        }
        if let Some(v) = file.direct {
            self.direct = Setting { value: v, source: Source::ConfigFile };
        }
        if let Some(v) = file.privacy.and_then(|p| p.redact_secrets) {
            self.redact_secrets = Setting { value: v, source: Source::ConfigFile };
        }
        if let Some(v) = file.embedder {
            self.embedder = Setting { value: v, source: Source::ConfigFile };
        }
        if let Some(v) = file.model {
            self.model = Setting { value: v, source: Source::ConfigFile };
        }
        if let Some(v) = file.model_dir {
            self.model_dir = Setting { value: v, source: Source::ConfigFile };
        }
        if let Some(v) = file.embed_timeout_secs {
            self.embed_timeout_secs = Setting { value: v, source: Source::ConfigFile };
        }
        if let Some(v) = file.embed_batch_size {
            self.embed_batch_size = Setting { value: v, source: Source::ConfigFile };
        }
        for (value, setting) in [
            (file.embed_url, &mut self.embed_url),
            (file.embed_model, &mut self.embed_model),
            (file.embed_api_key, &mut self.embed_api_key),
        ] {
            if let Some(v) = value {
                *setting = Setting { value: Some(v), source: Source::ConfigFile };
            }
        }
    }

    fn apply_env(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<()> {
        let from_env = |name: &str| Source::Env(name.to_owned());
        // engram's OpenCode plugin starts `$ENGRAM_BIN serve` with no port, then calls
        // ENGRAM_PORT: honoured when cairn's own variable is unset (and only then read).
        if let Some((name, v)) = ["CAIRN_PORT", "ENGRAM_PORT"].into_iter().find_map(|name| Some((name, env(name)?))) {
            self.port = Setting { value: parse_env(name, &v)?, source: from_env(name) };
        }
        if let Some(v) = env("CAIRN_BIND") {
            self.bind = Setting { value: v, source: from_env("CAIRN_BIND") };
        }
        if let Some(v) = env("CAIRN_HTTP_TOKEN") {
            self.http_token = Setting { value: Some(v), source: from_env("CAIRN_HTTP_TOKEN") };
        }
        if let Some(v) = env("CAIRN_PROJECT") {
            self.project = Setting { value: Some(v), source: from_env("CAIRN_PROJECT") };
        }
        if let Some(v) = env("CAIRN_CONTEXT_BUDGET") {
            self.context_budget =
                Setting { value: parse_env("CAIRN_CONTEXT_BUDGET", &v)?, source: from_env("CAIRN_CONTEXT_BUDGET") };
        }
        if let Some(v) = env("CAIRN_LOG") {
            self.log = Setting { value: v, source: from_env("CAIRN_LOG") };
        }
        if let Some(v) = env("CAIRN_AUTOSTART") {
            self.autostart = Setting { value: parse_env("CAIRN_AUTOSTART", &v)?, source: from_env("CAIRN_AUTOSTART") };
        }
        if let Some(v) = env("CAIRN_DIRECT") {
            let value = parse_env::<Switch>("CAIRN_DIRECT", &v)?.0;
            self.direct = Setting { value, source: from_env("CAIRN_DIRECT") };
        }
        if let Some(v) = env("CAIRN_REDACT_SECRETS") {
            let value = parse_env::<Switch>("CAIRN_REDACT_SECRETS", &v)?.0;
            self.redact_secrets = Setting { value, source: from_env("CAIRN_REDACT_SECRETS") };
        }
        if let Some(v) = env("CAIRN_EMBEDDER") {
            self.embedder = Setting { value: parse_env("CAIRN_EMBEDDER", &v)?, source: from_env("CAIRN_EMBEDDER") };
        }
        if let Some(v) = env("CAIRN_MODEL") {
            self.model = Setting { value: parse_model_name(&v)?, source: from_env("CAIRN_MODEL") };
        }
        if let Some(v) = env("CAIRN_MODEL_DIR") {
            self.model_dir = Setting { value: PathBuf::from(v), source: from_env("CAIRN_MODEL_DIR") };
        }
        if let Some(v) = env("CAIRN_EMBED_TIMEOUT_SECS") {
            self.embed_timeout_secs = Setting {
                value: parse_env("CAIRN_EMBED_TIMEOUT_SECS", &v)?,
                source: from_env("CAIRN_EMBED_TIMEOUT_SECS"),
            };
        }
        if let Some(v) = env("CAIRN_EMBED_BATCH_SIZE") {
            self.embed_batch_size =
                Setting { value: parse_env("CAIRN_EMBED_BATCH_SIZE", &v)?, source: from_env("CAIRN_EMBED_BATCH_SIZE") };
        }
        for (name, setting) in [
            ("CAIRN_EMBED_URL", &mut self.embed_url),
            ("CAIRN_EMBED_MODEL", &mut self.embed_model),
            ("CAIRN_EMBED_API_KEY", &mut self.embed_api_key),
        ] {
            if let Some(v) = env(name) {
                *setting = Setting { value: Some(v), source: from_env(name) };
            }
        }
        Ok(())
    }

    /// The endpoint limits within their bounds, or which one is not and where it was set.
    fn check_embed_limits(&self) -> Result<()> {
        let out_of_range = |name: &str, value: String, source: &Source, range: String| {
            CairnError::new(ErrorCode::InvalidConfig, format!("{name} = {value} (from {source}) is out of range"))
                .with_hint(format!("use a value in {range}"))
        };
        let t = &self.embed_timeout_secs;
        if !EMBED_TIMEOUT_RANGE.contains(&t.value) {
            return Err(out_of_range(
                "embed_timeout_secs",
                t.value.to_string(),
                &t.source,
                format!("{EMBED_TIMEOUT_RANGE:?}"),
            ));
        }
        let b = &self.embed_batch_size;
        if !EMBED_BATCH_RANGE.contains(&b.value) {
            return Err(out_of_range(
                "embed_batch_size",
                b.value.to_string(),
                &b.source,
                format!("{EMBED_BATCH_RANGE:?}"),
            ));
        }
        Ok(())
    }

    fn apply_flags(&mut self, o: &Overrides) {
        if let Some(v) = o.port {
            self.port = Setting { value: v, source: Source::Flag };
        }
        if let Some(v) = &o.bind {
            self.bind = Setting { value: v.clone(), source: Source::Flag };
        }
        if let Some(v) = &o.project {
            self.project = Setting { value: Some(v.clone()), source: Source::Flag };
        }
    }

    /// Path of the database file.
    pub fn db_path(&self) -> PathBuf {
        self.data_dir.value.join(DB_FILE)
    }

    pub fn embedder_config(&self) -> EmbedderConfig {
        EmbedderConfig {
            kind: self.embedder.value,
            model_dir: self.model_dir.value.clone(),
            url: self.embed_url.value.clone(),
            model: self.embed_model.value.clone(),
            api_key: self.embed_api_key.value.clone(),
            timeout_secs: self.embed_timeout_secs.value,
            batch_size: self.embed_batch_size.value,
        }
    }
}

/// A secret as `cairn config` shows it: whether it is set and its last four characters.
pub fn mask_secret(secret: Option<&str>) -> String {
    match secret {
        Some(t) if t.chars().count() > 12 => {
            let tail: String = t.chars().rev().take(4).collect::<Vec<_>>().into_iter().rev().collect();
            format!("set (…{tail})")
        }
        Some(_) => "set".to_owned(),
        None => "not set".to_owned(),
    }
}

fn masked<S: serde::Serializer>(
    setting: &Setting<Option<String>>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let mut s = serializer.serialize_struct("Setting", 2)?;
    s.serialize_field("value", &setting.value.as_deref().map(|v| mask_secret(Some(v))))?;
    s.serialize_field("source", &setting.source)?;
    s.end()
}

/// An on/off environment variable: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off`.
struct Switch(bool);

impl std::str::FromStr for Switch {
    type Err = ();
    fn from_str(s: &str) -> std::result::Result<Self, ()> {
        match s.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(Switch(true)),
            "0" | "false" | "no" | "off" => Ok(Switch(false)),
            _ => Err(()),
        }
    }
}

/// A model name is a directory name under `<data dir>/models/`: no separators, no dots first.
fn parse_model_name(raw: &str) -> Result<String> {
    let name = raw.trim();
    if name.is_empty() || name.starts_with('.') || name.contains(['/', '\\']) {
        return Err(CairnError::new(ErrorCode::InvalidConfig, format!("model {raw:?} is not a model name"))
            .with_hint("`cairn model list` shows the models cairn knows"));
    }
    Ok(name.to_owned())
}

fn parse_env<T: std::str::FromStr>(name: &str, raw: &str) -> Result<T> {
    raw.trim().parse().map_err(|_| {
        CairnError::new(ErrorCode::InvalidConfig, format!("{name}={raw:?} is not a valid value"))
            .with_hint(format!("fix or unset {name}"))
    })
}

fn default_data_dir() -> Result<PathBuf> {
    use etcetera::BaseStrategy;
    let strategy = etcetera::choose_base_strategy().map_err(|e| {
        CairnError::new(ErrorCode::InvalidConfig, format!("cannot find a home directory: {e}"))
            .with_hint("set CAIRN_DATA_DIR or pass --data-dir")
    })?;
    Ok(strategy.data_dir().join("cairn"))
}

pub(crate) fn read_config_file(data_dir: &Path) -> Result<FileConfig> {
    let path = data_dir.join(CONFIG_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        // No config yet, or no data dir at all: `ensure_data_dir` reports the latter clearly.
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
            return Ok(FileConfig::default());
        }
        Err(e) => {
            return Err(CairnError::new(ErrorCode::InvalidConfig, format!("cannot read {}: {e}", path.display())));
        }
    };
    toml::from_str(&text).map_err(|e| {
        CairnError::new(ErrorCode::InvalidConfig, format!("{} is invalid: {e}", path.display())).with_hint(
            "keys: port, bind, http_token, context_budget, log, autostart, direct, embedder, model, model_dir, \
             embed_url, embed_model, embed_api_key, embed_timeout_secs, embed_batch_size, and the tables \
             [inject], [triggers], [compaction], [context_meter], [history], [privacy], [sync], [llm], [search]",
        )
    })
}

/// Create the data dir (0700) if needed and check it can be written.
pub fn ensure_data_dir(dir: &Path) -> Result<()> {
    let not_writable = |why: String| {
        CairnError::new(ErrorCode::DataDirNotWritable, format!("data dir {}: {why}", dir.display()))
            .with_hint("choose a writable directory with --data-dir or CAIRN_DATA_DIR")
    };
    if !dir.exists() {
        create_private_dir(dir).map_err(|e| not_writable(format!("cannot create it: {e}")))?;
    }
    if !dir.is_dir() {
        return Err(not_writable("it is not a directory".into()));
    }
    let probe = dir.join(".cairn-write-probe");
    std::fs::write(&probe, b"").map_err(|e| not_writable(format!("cannot write in it: {e}")))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_logs_keep_mcp_messages_out() {
        assert_eq!(log_filter("debug"), "debug,rmcp=info");
        assert_eq!(log_filter(" TRACE "), "TRACE,rmcp=info");
        assert_eq!(log_filter("info,cairn_server=debug"), "info,cairn_server=debug");
        assert_eq!(log_filter("debug,rmcp=trace"), "debug,rmcp=trace", "named explicitly: the user asked");
        assert_eq!(log_filter("warn"), "warn");
        assert_eq!(log_filter(""), "warn");
    }

    #[test]
    fn precedence_default_file_env_flag() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(CONFIG_FILE), "port = 8000\nbind = \"0.0.0.0\"\n").unwrap();
        let dir = tmp.path().display().to_string();
        let env = move |name: &str| match name {
            "CAIRN_DATA_DIR" => Some(dir.clone()),
            "CAIRN_PORT" => Some("9000".into()),
            _ => None,
        };
        let s = Settings::load_with(&Overrides::default(), &env).unwrap();
        assert_eq!((s.port.value, &s.port.source), (9000, &Source::Env("CAIRN_PORT".into())));
        assert_eq!((s.bind.value.as_str(), &s.bind.source), ("0.0.0.0", &Source::ConfigFile));
        assert_eq!(s.context_budget.source, Source::Default);
        let flags = Overrides { port: Some(1234), ..Overrides::default() };
        assert_eq!(Settings::load_with(&flags, &env).unwrap().port.source, Source::Flag);
    }

    #[test]
    fn a_mistake_in_sync_stops_only_sync() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(CONFIG_FILE), "port = 8000\n[sync]\nremote = \"ftp://hub\"\ntokn = 1\n")
            .unwrap();
        let dir = tmp.path().display().to_string();
        let env = move |name: &str| (name == "CAIRN_DATA_DIR").then(|| dir.clone());
        let s = Settings::load_with(&Overrides::default(), &env).unwrap();
        assert_eq!((s.port.value, &s.remote), (8000, &None));
        let err = load_remote(tmp.path()).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidConfig);
        assert!(err.message.contains("tokn"), "{err:?}");
    }

    #[test]
    fn engram_port_is_the_port_unless_cairn_port_says() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join(CONFIG_FILE), "port = 8000\n").unwrap();
        let dir = tmp.path().display().to_string();
        let with = |cairn_port: Option<&str>| {
            let dir = dir.clone();
            let cairn_port = cairn_port.map(str::to_owned);
            move |name: &str| match name {
                "CAIRN_DATA_DIR" => Some(dir.clone()),
                "ENGRAM_PORT" => Some("7555".into()),
                "CAIRN_PORT" => cairn_port.clone(),
                _ => None,
            }
        };
        let s = Settings::load_with(&Overrides::default(), &with(None)).unwrap();
        assert_eq!((s.port.value, &s.port.source), (7555, &Source::Env("ENGRAM_PORT".into())));
        let s = Settings::load_with(&Overrides::default(), &with(Some("9000"))).unwrap();
        assert_eq!((s.port.value, &s.port.source), (9000, &Source::Env("CAIRN_PORT".into())));
    }

    #[test]
    fn direct_comes_from_the_file_or_cairn_direct() {
        let tmp = tempfile::tempdir().unwrap();
        let flags = Overrides { data_dir: Some(tmp.path().into()), ..Overrides::default() };
        let s = Settings::load_with(&flags, &|_| None).unwrap();
        assert_eq!((s.direct.value, &s.direct.source), (false, &Source::Default));
        std::fs::write(tmp.path().join(CONFIG_FILE), "direct = true\n").unwrap();
        assert_eq!(Settings::load_with(&flags, &|_| None).unwrap().direct.source, Source::ConfigFile);
        let off = |name: &str| (name == "CAIRN_DIRECT").then(|| "0".to_owned());
        let s = Settings::load_with(&flags, &off).unwrap();
        assert_eq!((s.direct.value, &s.direct.source), (false, &Source::Env("CAIRN_DIRECT".into())));
        let bad = |name: &str| (name == "CAIRN_DIRECT").then(|| "sometimes".to_owned());
        assert_eq!(Settings::load_with(&flags, &bad).unwrap_err().code, ErrorCode::InvalidConfig);
    }

    #[test]
    fn the_model_dir_follows_the_model_unless_it_is_set() {
        let tmp = tempfile::tempdir().unwrap();
        let flags = Overrides { data_dir: Some(tmp.path().into()), ..Overrides::default() };
        let s = Settings::load_with(&flags, &|_| None).unwrap();
        assert_eq!((s.model.value.as_str(), &s.model.source), (DEFAULT_MODEL, &Source::Default));
        assert_eq!(s.model_dir.value, tmp.path().join("models/multilingual-e5-small"));
        std::fs::write(tmp.path().join(CONFIG_FILE), "model = \"all-MiniLM-L6-v2\"\n").unwrap();
        let s = Settings::load_with(&flags, &|_| None).unwrap();
        assert_eq!((s.model.value.as_str(), &s.model.source), ("all-MiniLM-L6-v2", &Source::ConfigFile));
        assert_eq!(
            (s.model_dir.value, s.model_dir.source),
            (tmp.path().join("models/all-MiniLM-L6-v2"), Source::Default)
        );
        let dir = |name: &str| (name == "CAIRN_MODEL_DIR").then(|| "/elsewhere".to_owned());
        assert_eq!(Settings::load_with(&flags, &dir).unwrap().model_dir.value, PathBuf::from("/elsewhere"));
        let env = |name: &str| (name == "CAIRN_MODEL").then(|| "multilingual-e5-small".to_owned());
        let s = Settings::load_with(&flags, &env).unwrap();
        assert_eq!(s.model_dir.value, tmp.path().join("models/multilingual-e5-small"));
        for bad in ["../x", "a/b", " ", ".hidden"] {
            let env = move |name: &str| (name == "CAIRN_MODEL").then(|| bad.to_owned());
            assert_eq!(Settings::load_with(&flags, &env).unwrap_err().code, ErrorCode::InvalidConfig, "{bad}");
        }
    }

    /// A model directory with the files a model needs (empty: only their presence is read).
    fn install(dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        for file in MODEL_FILES {
            std::fs::write(dir.join(file), b"").unwrap();
        }
    }

    /// A store whose one vector is `model`'s (only the column the rule reads).
    fn store_with_vectors_of(data_dir: &Path, model: &str) {
        let conn = rusqlite::Connection::open(data_dir.join(DB_FILE)).unwrap();
        conn.execute_batch("DROP TABLE IF EXISTS embeddings; CREATE TABLE embeddings (model TEXT NOT NULL)").unwrap();
        conn.execute("INSERT INTO embeddings (model) VALUES (?1)", [model]).unwrap();
    }

    #[test]
    fn an_install_of_the_earlier_default_stays_in_use_until_a_model_is_chosen() {
        const MINILM: &str = "all-MiniLM-L6-v2";
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path();
        let flags = Overrides { data_dir: Some(data.into()), ..Overrides::default() };
        let load = |env: &dyn Fn(&str) -> Option<String>| Settings::load_with(&flags, env).unwrap();
        let model = |s: &Settings| (s.model.value.clone(), s.model.source.clone(), s.model_dir.value.clone());
        // A fresh data dir: the default, to be installed.
        let fresh = load(&|_| None);
        assert_eq!(model(&fresh), (DEFAULT_MODEL.into(), Source::Default, data.join("models").join(DEFAULT_MODEL)));
        assert_eq!(fresh.kept_model_note(), None);
        // Upgraded with MiniLM installed: MiniLM stays, and the user is told how to switch.
        install(&data.join("models").join(MINILM));
        store_with_vectors_of(data, MINILM);
        let kept = load(&|_| None);
        assert_eq!(model(&kept), (MINILM.into(), Source::InstalledDefault, data.join("models").join(MINILM)));
        assert_eq!(kept.model.source.to_string(), "default (installed)");
        let note = kept.kept_model_note().unwrap();
        assert!(
            note.ends_with("cairn model install multilingual-e5-small && cairn model use multilingual-e5-small"),
            "{note}"
        );
        assert_eq!(kept.embedder_config().model_dir, data.join("models").join(MINILM));
        // The default installed too while every vector is MiniLM's: still MiniLM (no
        // re-embedding until `cairn model use`), and the switch is one command.
        install(&default_model_dir(data));
        let both = load(&|_| None);
        assert_eq!(model(&both).1, Source::InstalledDefault);
        assert!(both.kept_model_note().unwrap().ends_with(": cairn model use multilingual-e5-small"));
        // A store that cannot tell keeps MiniLM too.
        std::fs::write(data.join(DB_FILE), b"not a database").unwrap();
        assert_eq!(load(&|_| None).model.value, MINILM);
        // No vector yet, or the default's: nothing to keep, the default.
        std::fs::remove_file(data.join(DB_FILE)).unwrap();
        assert_eq!(model(&load(&|_| None)).1, Source::Default);
        store_with_vectors_of(data, DEFAULT_MODEL);
        assert_eq!(load(&|_| None).model.value, DEFAULT_MODEL);
        store_with_vectors_of(data, MINILM);
        // A model chosen anywhere is that model.
        let env = |name: &str| (name == "CAIRN_MODEL").then(|| DEFAULT_MODEL.to_owned());
        assert_eq!(model(&load(&env)).1, Source::Env("CAIRN_MODEL".into()));
        // Semantic search switched off: nothing is kept, nothing said.
        let off = |name: &str| (name == "CAIRN_EMBEDDER").then(|| "none".to_owned());
        assert_eq!(model(&load(&off)).1, Source::Default);
    }

    #[test]
    fn a_model_dir_set_to_the_earlier_default_is_named_for_it() {
        let tmp = tempfile::tempdir().unwrap();
        let flags = Overrides { data_dir: Some(tmp.path().join("data")), ..Overrides::default() };
        let minilm = tmp.path().join("all-MiniLM-L6-v2");
        install(&minilm);
        let set = |dir: PathBuf| move |name: &str| (name == "CAIRN_MODEL_DIR").then(|| dir.display().to_string());
        let s = Settings::load_with(&flags, &set(minilm.clone())).unwrap();
        assert_eq!((s.model.value.as_str(), &s.model.source), ("all-MiniLM-L6-v2", &Source::InstalledDefault));
        assert_eq!(s.embedder_config().model_dir, minilm, "the directory set is the one read");
        assert_eq!(s.kept_model_note(), None, "set explicitly: nothing to say");
        // Named by its install manifest whatever the directory is called.
        let elsewhere = tmp.path().join("embedder");
        install(&elsewhere);
        std::fs::write(elsewhere.join(MODEL_MANIFEST), br#"{"id": "all-MiniLM-L6-v2", "source": "x", "files": []}"#)
            .unwrap();
        assert_eq!(Settings::load_with(&flags, &set(elsewhere)).unwrap().model.value, "all-MiniLM-L6-v2");
        let other = tmp.path().join("my-model");
        install(&other);
        let s = Settings::load_with(&flags, &set(other)).unwrap();
        assert_eq!((s.model.value.as_str(), &s.model.source), (DEFAULT_MODEL, &Source::Default));
    }

    #[test]
    fn bad_values_are_clear_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().display().to_string();
        let env = move |name: &str| match name {
            "CAIRN_DATA_DIR" => Some(dir.clone()),
            "CAIRN_PORT" => Some("http".into()),
            _ => None,
        };
        assert_eq!(Settings::load_with(&Overrides::default(), &env).unwrap_err().code, ErrorCode::InvalidConfig);
        std::fs::write(tmp.path().join(CONFIG_FILE), "colour = 1").unwrap();
        let flags = Overrides { data_dir: Some(tmp.path().into()), ..Overrides::default() };
        let err = Settings::load_with(&flags, &|_| None).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidConfig);
    }

    #[test]
    fn embedding_endpoint_limits_come_from_file_or_env_within_bounds() {
        let tmp = tempfile::tempdir().unwrap();
        let flags = Overrides { data_dir: Some(tmp.path().into()), ..Overrides::default() };
        let config = Settings::load_with(&flags, &|_| None).unwrap().embedder_config();
        assert_eq!((config.timeout_secs, config.batch_size), (DEFAULT_EMBED_TIMEOUT_SECS, DEFAULT_EMBED_BATCH_SIZE));
        std::fs::write(tmp.path().join(CONFIG_FILE), "embed_timeout_secs = 120\nembed_batch_size = 8\n").unwrap();
        let s = Settings::load_with(&flags, &|_| None).unwrap();
        assert_eq!((s.embed_timeout_secs.value, &s.embed_timeout_secs.source), (120, &Source::ConfigFile));
        assert_eq!(s.embedder_config().batch_size, 8);
        let env = |name: &str| (name == "CAIRN_EMBED_BATCH_SIZE").then(|| "16".to_owned());
        assert_eq!(Settings::load_with(&flags, &env).unwrap().embed_batch_size.value, 16);
        for (name, bad) in
            [("CAIRN_EMBED_BATCH_SIZE", "0"), ("CAIRN_EMBED_TIMEOUT_SECS", "0"), ("CAIRN_EMBED_TIMEOUT_SECS", "soon")]
        {
            let env = |n: &str| (n == name).then(|| bad.to_owned());
            let err = Settings::load_with(&flags, &env).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidConfig, "{name}={bad}");
            assert!(
                err.message.contains(if bad == "soon" { "CAIRN_EMBED_TIMEOUT_SECS" } else { "out of range" }),
                "{}",
                err.message
            );
        }
    }
}

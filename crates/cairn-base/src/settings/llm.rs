//! `[llm]` in config.toml: the language model cairn's background work (extraction of facts from
//! sessions, judging, re-ranking) asks, and what it may spend. `cairn llm use …` writes it.
//!
//! ```toml
//! [llm]
//! provider = "openai"               # off (default), local, openai, anthropic, agent-cli
//! model = "qwen2.5:1.5b"            # local: a model of cairn's catalogue; agent-cli: a label
//! base_url = "http://localhost:11434/v1"
//! api_key_env = "OPENAI_API_KEY"    # the NAME of the variable holding the key, never the key
//! command = "claude"                # agent-cli: claude, opencode, or a command line
//! daily_token_budget = 200000       # remote providers; 0: no limit
//! timeout_secs = 120                # one call; default per provider
//! ```
//!
//! Every key also has a `CAIRN_LLM_*` variable. A mistake here turns the LLM off and says why
//! (`cairn llm status`, `cairn doctor`): it never keeps the daemon, and so capture, from starting.

use serde::{Deserialize, Serialize};

use super::{Setting, Source};
use crate::error::{CairnError, ErrorCode, Result};

/// Tokens a remote provider may spend per day (UTC) unless `daily_token_budget` says otherwise:
/// a few dozen extracted sessions, far from the hundreds of millions claude-mem's users paid for.
pub const DEFAULT_DAILY_TOKEN_BUDGET: u64 = 200_000;
/// Bounds of `timeout_secs`: more than an hour for one call is a typo.
const TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 1..=3600;

/// The environment variables of `[llm]`, with what each sets.
pub const LLM_ENV_VARS: &[(&str, &str)] = &[
    ("CAIRN_LLM_PROVIDER", "the LLM of background extraction: off (default), local, openai, anthropic, agent-cli"),
    ("CAIRN_LLM_MODEL", "the LLM's model (local: a catalogue name; openai/anthropic: the model id)"),
    ("CAIRN_LLM_BASE_URL", "API root of the openai or anthropic provider"),
    ("CAIRN_LLM_API_KEY_ENV", "name of the variable holding the LLM's API key (never the key itself)"),
    ("CAIRN_LLM_COMMAND", "agent-cli: claude, opencode or a command line (the prompt goes on stdin)"),
    ("CAIRN_LLM_DAILY_TOKEN_BUDGET", "tokens remote LLM calls may spend per UTC day (0: no limit)"),
    ("CAIRN_LLM_TIMEOUT_SECS", "seconds one LLM call may take"),
];

/// Which model answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LlmProviderKind {
    /// No LLM: everything else works, nothing is extracted.
    Off,
    /// A GGUF model run in-process.
    Local,
    /// Any OpenAI-compatible chat endpoint (Ollama, llama.cpp's server, LM Studio, vLLM,
    /// OpenRouter, OpenAI).
    #[serde(rename = "openai")]
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
    /// The user's own agent CLI (`claude -p`, `opencode run`).
    AgentCli,
}

impl LlmProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LlmProviderKind::Off => "off",
            LlmProviderKind::Local => "local",
            LlmProviderKind::OpenAi => "openai",
            LlmProviderKind::Anthropic => "anthropic",
            LlmProviderKind::AgentCli => "agent-cli",
        }
    }

    /// Whether calls leave this process for someone's servers, and so spend the daily budget.
    pub fn is_remote(self) -> bool {
        matches!(self, LlmProviderKind::OpenAi | LlmProviderKind::Anthropic | LlmProviderKind::AgentCli)
    }
}

impl std::fmt::Display for LlmProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for LlmProviderKind {
    type Err = ();
    fn from_str(s: &str) -> std::result::Result<Self, ()> {
        match s.trim().to_ascii_lowercase().as_str() {
            "off" | "none" | "0" | "false" => Ok(LlmProviderKind::Off),
            "local" => Ok(LlmProviderKind::Local),
            "openai" | "openai-compatible" => Ok(LlmProviderKind::OpenAi),
            "anthropic" => Ok(LlmProviderKind::Anthropic),
            "agent-cli" | "agent_cli" => Ok(LlmProviderKind::AgentCli),
            _ => Err(()),
        }
    }
}

/// `[llm]` as written in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LlmFile {
    provider: Option<String>,
    model: Option<String>,
    base_url: Option<String>,
    api_key_env: Option<String>,
    command: Option<String>,
    daily_token_budget: Option<u64>,
    timeout_secs: Option<u64>,
}

/// The effective `[llm]`, each value with where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LlmSettings {
    pub provider: Setting<LlmProviderKind>,
    pub model: Setting<Option<String>>,
    pub base_url: Setting<Option<String>>,
    /// The variable the key is read from; the key itself is never in a file.
    pub api_key_env: Setting<Option<String>>,
    pub command: Setting<Option<String>>,
    /// Tokens per UTC day for remote providers; 0: no limit.
    pub daily_token_budget: Setting<u64>,
    /// Seconds one call may take; `None`: the provider's default.
    pub timeout_secs: Setting<Option<u64>>,
    /// Why `[llm]` or a `CAIRN_LLM_*` variable could not be used: the provider is then off.
    pub problem: Option<String>,
}

impl Default for LlmSettings {
    fn default() -> Self {
        LlmSettings {
            provider: Setting::default(LlmProviderKind::Off),
            model: Setting::default(None),
            base_url: Setting::default(None),
            api_key_env: Setting::default(None),
            command: Setting::default(None),
            daily_token_budget: Setting::default(DEFAULT_DAILY_TOKEN_BUDGET),
            timeout_secs: Setting::default(None),
            problem: None,
        }
    }
}

impl LlmSettings {
    /// The daily budget, `None` when unlimited (0).
    pub fn budget(&self) -> Option<u64> {
        Some(self.daily_token_budget.value).filter(|b| *b > 0)
    }
}

/// `[llm]` from the file and the environment. Never fails: a mistake turns the LLM off and is
/// kept in [`LlmSettings::problem`].
pub(crate) fn load(table: Option<toml::Table>, env: &dyn Fn(&str) -> Option<String>) -> LlmSettings {
    match try_load(table, env) {
        Ok(settings) => settings,
        Err(e) => {
            tracing::warn!(error = %e.message, "[llm] is ignored: the LLM is off");
            let problem = match &e.hint {
                Some(hint) => format!("{} ({hint})", e.message),
                None => e.message,
            };
            LlmSettings { problem: Some(problem), ..LlmSettings::default() }
        }
    }
}

/// Read only `[llm]` of a data dir's config.toml and the environment: a daemon reads it again
/// before background work, so `cairn llm use` takes effect without a restart. A config.toml that
/// cannot be read at all is a problem of the LLM too (the daemon reports the file elsewhere).
pub fn load_llm(data_dir: &std::path::Path) -> LlmSettings {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match super::read_config_file(data_dir) {
        Ok(file) => load(file.llm, &env),
        Err(e) => LlmSettings { problem: Some(e.message), ..LlmSettings::default() },
    }
}

fn try_load(table: Option<toml::Table>, env: &dyn Fn(&str) -> Option<String>) -> Result<LlmSettings> {
    let file: LlmFile = match table {
        Some(table) => LlmFile::deserialize(toml::Value::Table(table)).map_err(|e| {
            invalid(format!("[llm]: {}", e.message()))
                .with_hint("keys: provider, model, base_url, api_key_env, command, daily_token_budget, timeout_secs")
        })?,
        None => LlmFile::default(),
    };
    let mut s = LlmSettings::default();
    if let Some(raw) = file.provider {
        s.provider = from_file(parse_provider("[llm] provider", &raw)?);
    }
    for (value, setting) in [
        (file.model, &mut s.model),
        (file.base_url, &mut s.base_url),
        (file.api_key_env, &mut s.api_key_env),
        (file.command, &mut s.command),
    ] {
        if let Some(v) = value.filter(|v| !v.trim().is_empty()) {
            *setting = from_file(Some(v.trim().to_owned()));
        }
    }
    if let Some(v) = file.daily_token_budget {
        s.daily_token_budget = from_file(v);
    }
    if let Some(v) = file.timeout_secs {
        s.timeout_secs = from_file(Some(v));
    }
    apply_env(&mut s, env)?;
    check(&s)?;
    Ok(s)
}

fn apply_env(s: &mut LlmSettings, env: &dyn Fn(&str) -> Option<String>) -> Result<()> {
    if let Some(raw) = env("CAIRN_LLM_PROVIDER") {
        s.provider = from_env("CAIRN_LLM_PROVIDER", parse_provider("CAIRN_LLM_PROVIDER", &raw)?);
    }
    for (name, setting) in [
        ("CAIRN_LLM_MODEL", &mut s.model),
        ("CAIRN_LLM_BASE_URL", &mut s.base_url),
        ("CAIRN_LLM_API_KEY_ENV", &mut s.api_key_env),
        ("CAIRN_LLM_COMMAND", &mut s.command),
    ] {
        if let Some(v) = env(name).filter(|v| !v.trim().is_empty()) {
            *setting = from_env(name, Some(v.trim().to_owned()));
        }
    }
    if let Some(raw) = env("CAIRN_LLM_DAILY_TOKEN_BUDGET") {
        s.daily_token_budget =
            from_env("CAIRN_LLM_DAILY_TOKEN_BUDGET", parse_number("CAIRN_LLM_DAILY_TOKEN_BUDGET", &raw)?);
    }
    if let Some(raw) = env("CAIRN_LLM_TIMEOUT_SECS") {
        s.timeout_secs = from_env("CAIRN_LLM_TIMEOUT_SECS", Some(parse_number("CAIRN_LLM_TIMEOUT_SECS", &raw)?));
    }
    Ok(())
}

/// The values within their bounds and of their shape, or which one is not and where it was set.
fn check(s: &LlmSettings) -> Result<()> {
    if let Some(t) = s.timeout_secs.value
        && !TIMEOUT_RANGE.contains(&t)
    {
        return Err(invalid(format!("llm timeout_secs = {t} (from {}) is out of range", s.timeout_secs.source))
            .with_hint(format!("use a value in {TIMEOUT_RANGE:?}")));
    }
    if let Some(name) = &s.api_key_env.value {
        check_env_var_name(name, &s.api_key_env.source)?;
    }
    if let Some(url) = &s.base_url.value
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(invalid(format!("llm base_url {url:?} (from {}) is not an http(s) address", s.base_url.source))
            .with_hint("give the API root, e.g. http://localhost:11434/v1 or https://api.openai.com/v1"));
    }
    Ok(())
}

/// `api_key_env` names a variable. A value that is not a variable's name may be the key itself,
/// pasted in the wrong place: refused without repeating it (it would land in logs).
pub fn check_env_var_name(name: &str, source: &Source) -> Result<()> {
    let mut chars = name.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        return Ok(());
    }
    Err(invalid(format!("llm api_key_env (from {source}) is not the name of an environment variable"))
        .with_hint("api_key_env names the variable that holds the key (e.g. OPENAI_API_KEY); never put the key itself in config.toml"))
}

fn from_file<T>(value: T) -> Setting<T> {
    Setting { value, source: Source::ConfigFile }
}

fn from_env<T>(name: &str, value: T) -> Setting<T> {
    Setting { value, source: Source::Env(name.to_owned()) }
}

fn parse_provider(what: &str, raw: &str) -> Result<LlmProviderKind> {
    raw.parse().map_err(|()| {
        invalid(format!("{what} = {raw:?} is not a provider"))
            .with_hint("use off, local, openai, anthropic or agent-cli")
    })
}

fn parse_number(name: &str, raw: &str) -> Result<u64> {
    raw.trim()
        .parse()
        .map_err(|_| invalid(format!("{name}={raw:?} is not a number")).with_hint(format!("fix or unset {name}")))
}

fn invalid(message: String) -> CairnError {
    CairnError::new(ErrorCode::InvalidConfig, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Option<toml::Table> {
        Some(toml::from_str(text).unwrap())
    }

    #[test]
    fn off_by_default_with_the_default_budget() {
        let s = load(None, &|_| None);
        assert_eq!((s.provider.value, &s.provider.source), (LlmProviderKind::Off, &Source::Default));
        assert_eq!(s.budget(), Some(DEFAULT_DAILY_TOKEN_BUDGET));
        assert_eq!(s.problem, None);
    }

    #[test]
    fn the_file_then_the_environment() {
        let file = table(
            "provider = \"openai\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:1/v1\"\napi_key_env = \"MY_KEY\"\n\
             daily_token_budget = 0\ntimeout_secs = 30",
        );
        let s = load(file.clone(), &|_| None);
        assert_eq!((s.provider.value, &s.provider.source), (LlmProviderKind::OpenAi, &Source::ConfigFile));
        assert_eq!(s.api_key_env.value.as_deref(), Some("MY_KEY"));
        assert_eq!(s.budget(), None, "0 is no limit");
        assert_eq!(s.timeout_secs.value, Some(30));
        let env = |k: &str| match k {
            "CAIRN_LLM_PROVIDER" => Some("agent-cli".to_owned()),
            "CAIRN_LLM_DAILY_TOKEN_BUDGET" => Some("500".to_owned()),
            _ => None,
        };
        let s = load(file, &env);
        assert_eq!(s.provider.source, Source::Env("CAIRN_LLM_PROVIDER".into()));
        assert_eq!((s.provider.value, s.daily_token_budget.value), (LlmProviderKind::AgentCli, 500));
    }

    #[test]
    fn a_mistake_turns_the_llm_off_and_says_why_without_echoing_a_key() {
        for (text, said) in [
            ("provider = \"gpt\"", "not a provider"),
            ("provider = \"openai\"\ncolour = 1", "colour"),
            ("provider = \"openai\"\ntimeout_secs = 0", "out of range"),
            ("provider = \"openai\"\nbase_url = \"localhost:11434\"", "http(s)"),
        ] {
            let s = load(table(text), &|_| None);
            assert_eq!(s.provider.value, LlmProviderKind::Off, "{text}");
            assert!(s.problem.as_deref().unwrap_or_default().contains(said), "{text}: {:?}", s.problem);
        }
        let s = load(table("provider = \"openai\"\napi_key_env = \"sk-proj-abcdef123456\""), &|_| None);
        let problem = s.problem.unwrap();
        assert!(problem.contains("never put the key itself") && !problem.contains("sk-proj"), "{problem}");
    }
}

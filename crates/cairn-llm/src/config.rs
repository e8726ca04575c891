//! From `[llm]` to a provider: the one place that reads the settings, the key's variable and the
//! data dir, so the daemon's background work, `cairn extract` and `cairn llm status` open the
//! same provider the same way, metered and budgeted (`Metered`).
//!
//! A provider that lacks what it needs (its key, its model file, its command) is refused here,
//! before anything is sent, with `LlmError::NotConfigured` naming the fix.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cairn_base::error::{CairnError, ErrorCode};
use cairn_base::settings::{LlmProviderKind, LlmSettings};

use crate::agent_cli::{AgentCliConfig, AgentCliProvider};
use crate::budget::{Budget, Ledger, Metered};
use crate::{LlmError, LlmProvider};

/// Where the local models' GGUF files live: `<data dir>/models/llm/`.
pub fn local_models_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models").join("llm")
}

/// Where the agent CLI runs: its host records that session under this directory, apart from
/// the user's projects.
pub fn agent_cli_workdir(data_dir: &Path) -> PathBuf {
    data_dir.join("llm-agent-cli")
}

/// How long one call may take unless `timeout_secs` says: an HTTP API answers an extraction in
/// seconds, an agent CLI starts a whole agent first.
pub fn default_timeout(kind: LlmProviderKind) -> Duration {
    match kind {
        LlmProviderKind::OpenAi | LlmProviderKind::Anthropic => Duration::from_secs(120),
        LlmProviderKind::AgentCli => Duration::from_secs(300),
        LlmProviderKind::Local | LlmProviderKind::Off => Duration::from_secs(600),
    }
}

/// The variable the key is read from: `api_key_env`, else the provider's usual one.
pub fn key_env(settings: &LlmSettings) -> Option<String> {
    let default = match settings.provider.value {
        LlmProviderKind::OpenAi => "OPENAI_API_KEY",
        LlmProviderKind::Anthropic => "ANTHROPIC_API_KEY",
        _ => return None,
    };
    Some(settings.api_key_env.value.clone().unwrap_or_else(|| default.to_owned()))
}

/// The provider `settings` name, unmetered; `Ok(None)` when the LLM is off. Nothing is sent:
/// a remote provider is only configured, a local model is loaded.
pub fn open_provider(
    settings: &LlmSettings,
    data_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Box<dyn LlmProvider>>, LlmError> {
    if let Some(problem) = &settings.problem {
        return Err(LlmError::NotConfigured(format!("[llm] is not usable: {problem}")));
    }
    let kind = settings.provider.value;
    let timeout = settings.timeout_secs.value.map_or_else(|| default_timeout(kind), Duration::from_secs);
    let model = settings.model.value.clone();
    let provider: Box<dyn LlmProvider> = match kind {
        LlmProviderKind::Off => return Ok(None),
        LlmProviderKind::Local => open_local(model.as_deref(), data_dir, env)?,
        LlmProviderKind::OpenAi => open_openai(settings, model, timeout, env)?,
        LlmProviderKind::Anthropic => open_anthropic(settings, model, timeout, env)?,
        LlmProviderKind::AgentCli => Box::new(AgentCliProvider::new(&AgentCliConfig {
            command: settings.command.value.clone().unwrap_or_else(|| crate::agent_cli::DEFAULT_COMMAND.to_owned()),
            model,
            timeout,
            workdir: Some(agent_cli_workdir(data_dir)),
        })?),
    };
    Ok(Some(provider))
}

/// The provider `settings` name, metered in the data dir's ledger and, when remote, held to the
/// daily budget; `Ok(None)` when the LLM is off.
pub fn open(
    settings: &LlmSettings,
    data_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Metered>, LlmError> {
    let Some(provider) = open_provider(settings, data_dir, env)? else { return Ok(None) };
    let ledger = Arc::new(Ledger::open(data_dir)?);
    let budget = Budget::new(ledger, settings.budget());
    Ok(Some(Metered::new(provider, budget, settings.provider.value.is_remote())))
}

/// `open` with the process's environment.
pub fn open_from_env(settings: &LlmSettings, data_dir: &Path) -> Result<Option<Metered>, LlmError> {
    open(settings, data_dir, &process_env)
}

/// The process's environment as the port reads it: a variable set to nothing is unset.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The local model: in this process when it carries the forward pass (the feature `local`),
/// unless `CAIRN_LLM_WORKER` names a worker; else in `cairn-llm-worker` (`crate::worker`).
fn open_local(
    model: Option<&str>,
    data_dir: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn LlmProvider>, LlmError> {
    let spec = local_spec(model)?;
    let dir = local_models_dir(data_dir);
    let path = crate::local::installed_path(spec, &dir).ok_or_else(|| {
        LlmError::NotConfigured(format!(
            "the local model {} is not installed in {}: cairn llm use local --model {}",
            spec.name,
            dir.display(),
            spec.name
        ))
    })?;
    match local_worker(env).map_err(LlmError::NotConfigured)? {
        Some(worker) => Ok(Box::new(crate::worker::WorkerProvider::open(&worker, &path, spec)?)),
        None => open_in_process(&path, spec),
    }
}

#[cfg(feature = "local")]
fn open_in_process(path: &Path, spec: &crate::local::LocalModelSpec) -> Result<Box<dyn LlmProvider>, LlmError> {
    Ok(Box::new(crate::local::LocalProvider::open(path, spec)?))
}

#[cfg(not(feature = "local"))]
fn open_in_process(_path: &Path, _spec: &crate::local::LocalModelSpec) -> Result<Box<dyn LlmProvider>, LlmError> {
    // Not reached: `local_worker` always names a worker in a build without the forward pass.
    Err(LlmError::NotConfigured(format!("this cairn runs the local model in {}", crate::worker::WORKER_NAME)))
}

/// The worker that would run the local model, or why there is none (what to build): `Ok(None)`
/// when this build runs it in-process. For `cairn llm status` and `cairn llm use local`.
pub fn local_worker(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<PathBuf>, String> {
    if cfg!(feature = "local") && env(crate::worker::WORKER_ENV).is_none() {
        return Ok(None);
    }
    crate::worker::locate(env).map(Some)
}

/// The catalogue's model `name` (the default when none is named), or which ones there are.
pub fn local_spec(name: Option<&str>) -> Result<&'static crate::local::LocalModelSpec, LlmError> {
    let Some(name) = name else { return Ok(crate::local::default_model()) };
    crate::local::find(name).ok_or_else(|| {
        let known: Vec<&str> = crate::local::catalogue().iter().map(|s| s.name).collect();
        LlmError::NotConfigured(format!("no local model called {name:?}; cairn knows {}", known.join(", ")))
    })
}

#[cfg(feature = "remote")]
fn open_openai(
    settings: &LlmSettings,
    model: Option<String>,
    timeout: Duration,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn LlmProvider>, LlmError> {
    let base_url = settings.base_url.value.clone().ok_or_else(|| {
        LlmError::NotConfigured(
            "the openai provider needs a base URL: cairn llm use openai --base-url URL --model M".into(),
        )
    })?;
    let config = crate::openai::OpenAiConfig {
        base_url,
        model: model.unwrap_or_default(),
        api_key_env: settings.api_key_env.value.clone(),
        timeout,
    };
    let key = env(&key_env(settings).unwrap_or_default());
    Ok(Box::new(crate::openai::OpenAiProvider::new(&config, key)?))
}

#[cfg(feature = "remote")]
fn open_anthropic(
    settings: &LlmSettings,
    model: Option<String>,
    timeout: Duration,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn LlmProvider>, LlmError> {
    let api_key_env = key_env(settings).unwrap_or_default();
    let config = crate::anthropic::AnthropicConfig {
        base_url: settings.base_url.value.clone().unwrap_or_else(|| crate::anthropic::DEFAULT_BASE_URL.to_owned()),
        model: model.unwrap_or_default(),
        api_key_env: api_key_env.clone(),
        timeout,
    };
    Ok(Box::new(crate::anthropic::AnthropicProvider::new(&config, env(&api_key_env))?))
}

#[cfg(not(feature = "remote"))]
fn open_openai(
    _settings: &LlmSettings,
    _model: Option<String>,
    _timeout: Duration,
    _env: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn LlmProvider>, LlmError> {
    Err(not_built("openai"))
}

#[cfg(not(feature = "remote"))]
fn open_anthropic(
    _settings: &LlmSettings,
    _model: Option<String>,
    _timeout: Duration,
    _env: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn LlmProvider>, LlmError> {
    Err(not_built("anthropic"))
}

#[cfg(not(feature = "remote"))]
fn not_built(kind: &str) -> LlmError {
    LlmError::NotConfigured(format!("this cairn was built without HTTPS (the `remote` feature): no {kind} provider"))
}

/// The port's failure as cairn's error table says it, with what to do.
impl From<LlmError> for CairnError {
    fn from(error: LlmError) -> CairnError {
        let message = error.to_string();
        match error {
            LlmError::NotConfigured(_) | LlmError::ModelFile(_) => CairnError::new(
                ErrorCode::LlmNotConfigured,
                message,
            )
            .with_hint(
                "`cairn llm status` shows the provider; `cairn llm use …` sets one up, `cairn llm off` turns it off",
            ),
            LlmError::Unavailable(_) | LlmError::Timeout(_) | LlmError::Malformed(_) => {
                CairnError::new(ErrorCode::LlmUnavailable, message)
                    .with_hint("background work retries later by itself; `cairn llm status --check` tries it now")
            }
            LlmError::Refused(_) | LlmError::ContextFull { .. } => CairnError::new(ErrorCode::LlmRefused, message),
            LlmError::BudgetSpent { .. } => CairnError::new(ErrorCode::LlmBudgetSpent, message).with_hint(
                "remote calls resume tomorrow (UTC); raise [llm] daily_token_budget in config.toml, or 0 for no limit",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use cairn_base::settings::{Setting, Source};

    use super::*;

    fn settings(kind: LlmProviderKind) -> LlmSettings {
        LlmSettings { provider: Setting { value: kind, source: Source::ConfigFile }, ..LlmSettings::default() }
    }

    #[test]
    fn off_is_no_provider_and_a_broken_table_says_why() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(open(&settings(LlmProviderKind::Off), tmp.path(), &|_| None).unwrap().is_none());
        let broken = LlmSettings { problem: Some("[llm]: unknown field `colour`".into()), ..LlmSettings::default() };
        let err = open(&broken, tmp.path(), &|_| None).unwrap_err();
        assert!(matches!(&err, LlmError::NotConfigured(m) if m.contains("colour")), "{err}");
        assert!(!tmp.path().join(crate::budget::LEDGER_FILE).exists(), "nothing opened for nothing");
    }

    #[test]
    fn errors_map_to_the_table() {
        let code = |e: LlmError| CairnError::from(e).code;
        assert_eq!(code(LlmError::NotConfigured(String::new())), ErrorCode::LlmNotConfigured);
        assert_eq!(code(LlmError::Timeout(3)), ErrorCode::LlmUnavailable);
        assert_eq!(code(LlmError::Refused(String::new())), ErrorCode::LlmRefused);
        assert_eq!(code(LlmError::BudgetSpent { spent: 2, budget: 1 }), ErrorCode::LlmBudgetSpent);
    }
}

//! `cairn llm`: the LLM of background extraction. `use` writes `[llm]` in config.toml (for
//! `local`, after installing the model), `status` shows the provider, whether it answers, what
//! today's calls spent against the budget and the last failure, `off` turns it off. Opening,
//! metering and the budget are cairn-llm's (`config`, `budget`); this door parses and renders.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use cairn_core::doctor::{Check, CheckStatus};
use cairn_core::extract::ExtractionStatus;
use cairn_core::ops::ExtractionStatusRequest;
use cairn_core::settings::llm::check_env_var_name;
use cairn_core::settings::{CONFIG_FILE, LlmProviderKind, LlmSettings, Setting, Source, load_llm};
use cairn_core::{CairnError, ErrorCode};
use cairn_llm::budget::{Budget, BudgetStatus, DaySpend, Failure, Ledger};
use cairn_llm::config::{local_worker, process_env};
use cairn_llm::{ChatMessage, ChatRequest, LlmError, LlmProvider, Usage};
use serde::Serialize;
use toml_edit::{DocumentMut, Item, Table, value};

use crate::cli::{LlmAction, LlmUse};
use crate::env::Env;
use crate::output::note;

/// How long `status` waits for a remote provider's cheap answer (its model list).
const PROBE_TIMEOUT_SECS: u64 = 10;

pub fn llm(env: &Env, action: LlmAction) -> Result<()> {
    match action {
        LlmAction::Use { provider } => use_provider(env, provider),
        LlmAction::Status { check } => status(env, check),
        LlmAction::Off => off(env),
    }
}

/// The keys `use` writes in `[llm]`: a value sets the key, `None` removes it (a key of another
/// provider must not linger), a key not listed is kept (`timeout_secs`, the budget unless given).
struct Choice {
    provider: LlmProviderKind,
    model: Option<String>,
    base_url: Option<String>,
    api_key_env: Option<String>,
    command: Option<String>,
    daily_token_budget: Option<u64>,
}

fn use_provider(env: &Env, chosen: LlmUse) -> Result<()> {
    let data_dir = env.settings.data_dir.value.clone();
    cairn_core::settings::ensure_data_dir(&data_dir)?;
    let (choice, installed) = match chosen {
        LlmUse::Local { model, from } => {
            let installed = install_local(&data_dir, model.as_deref(), from.as_deref())?;
            if let Err(missing) = local_worker(&process_env) {
                note(&missing);
            }
            let choice = Choice {
                provider: LlmProviderKind::Local,
                model: Some(installed.model.clone()),
                base_url: None,
                api_key_env: None,
                command: None,
                daily_token_budget: None,
            };
            (choice, Some(installed))
        }
        LlmUse::Openai { base_url, model, api_key_env, daily_token_budget } => {
            let base_url = checked_url(&base_url)?;
            (
                Choice {
                    provider: LlmProviderKind::OpenAi,
                    model: Some(non_empty("--model", &model)?),
                    base_url: Some(base_url),
                    api_key_env: api_key_env.map(|v| checked_var(&v)).transpose()?,
                    command: None,
                    daily_token_budget,
                },
                None,
            )
        }
        LlmUse::Anthropic { model, api_key_env, base_url, daily_token_budget } => (
            Choice {
                provider: LlmProviderKind::Anthropic,
                model: Some(non_empty("--model", &model)?),
                base_url: base_url.map(|u| checked_url(&u)).transpose()?,
                api_key_env: api_key_env.map(|v| checked_var(&v)).transpose()?,
                command: None,
                daily_token_budget,
            },
            None,
        ),
        LlmUse::AgentCli { command, model, daily_token_budget } => (
            Choice {
                provider: LlmProviderKind::AgentCli,
                model,
                base_url: None,
                api_key_env: None,
                command: command.map(|c| non_empty("--command", &c)).transpose()?,
                daily_token_budget,
            },
            None,
        ),
    };
    let config = data_dir.join(CONFIG_FILE);
    let mut doc = crate::config_file::read(&config)?;
    write_choice(&mut doc, &choice);
    crate::config_file::write(&config, &doc)?;
    // Read back through the same rules the daemon uses, so what was written is what runs.
    let settings = load_llm(&data_dir);
    warn_about_overrides(&settings);
    warn_about_the_key(&settings);
    #[derive(Serialize)]
    struct Used {
        provider: LlmProviderKind,
        model: Option<String>,
        config: String,
        /// The local model's file, when `local`.
        installed: Option<Installed>,
        daily_token_budget: u64,
    }
    let used = Used {
        provider: settings.provider.value,
        model: settings.model.value.clone(),
        config: config.display().to_string(),
        installed,
        daily_token_budget: settings.daily_token_budget.value,
    };
    env.emit(&used, |u| {
        let what = match (&u.model, u.provider) {
            (Some(model), kind) => format!("{kind} ({model})"),
            (None, kind) => kind.to_string(),
        };
        let spend = if u.provider.is_remote() {
            format!("; it may spend {} per UTC day", budget_words(settings.budget()))
        } else {
            String::new()
        };
        format!("cairn's LLM is now {what}{spend}; `cairn llm status` shows it, `cairn llm status --check` tries it")
    })
}

fn non_empty(flag: &str, raw: &str) -> Result<String> {
    let v = raw.trim();
    if v.is_empty() {
        return Err(CairnError::empty(flag).into());
    }
    Ok(v.to_owned())
}

fn checked_url(raw: &str) -> Result<String> {
    let url = raw.trim().trim_end_matches('/');
    if !(url.starts_with("http://") || url.starts_with("https://")) || url.contains(char::is_whitespace) {
        return Err(CairnError::invalid(format!("{raw:?} is not an http(s) address"))
            .with_hint("give the API root, e.g. http://localhost:11434/v1 or https://api.openai.com/v1")
            .into());
    }
    Ok(url.to_owned())
}

fn checked_var(raw: &str) -> Result<String> {
    let name = raw.trim().trim_start_matches('$');
    check_env_var_name(name, &Source::Flag).map_err(|e| CairnError { code: ErrorCode::InvalidArgument, ..e })?;
    Ok(name.to_owned())
}

/// `[llm]` with the choice; comments, other tables and the keys the choice does not name stay.
fn write_choice(doc: &mut DocumentMut, choice: &Choice) {
    let table = llm_table(doc);
    table["provider"] = value(choice.provider.as_str());
    for (key, setting) in [
        ("model", &choice.model),
        ("base_url", &choice.base_url),
        ("api_key_env", &choice.api_key_env),
        ("command", &choice.command),
    ] {
        match setting {
            Some(v) => table[key] = value(v.as_str()),
            None => {
                table.remove(key);
            }
        }
    }
    if let Some(budget) = choice.daily_token_budget {
        table["daily_token_budget"] = value(i64::try_from(budget).unwrap_or(i64::MAX));
    }
}

fn llm_table(doc: &mut DocumentMut) -> &mut Table {
    // `llm = {…}` inline: rewritten as a table of its own, under a fresh key.
    if let Some(inline) = doc.get("llm").and_then(Item::as_inline_table).cloned() {
        doc.remove("llm");
        doc.insert("llm", Item::Table(inline.into_table()));
    }
    let item = doc.entry("llm").or_insert(Item::Table(Table::new()));
    if !item.is_table() {
        *item = Item::Table(Table::new());
    }
    item.as_table_mut().expect("made a table above")
}

fn off(env: &Env) -> Result<()> {
    let data_dir = &env.settings.data_dir.value;
    cairn_core::settings::ensure_data_dir(data_dir)?;
    let config = data_dir.join(CONFIG_FILE);
    let mut doc = crate::config_file::read(&config)?;
    llm_table(&mut doc)["provider"] = value("off");
    crate::config_file::write(&config, &doc)?;
    let settings = load_llm(data_dir);
    warn_about_overrides(&settings);
    #[derive(Serialize)]
    struct Off {
        provider: LlmProviderKind,
        config: String,
    }
    let off = Off { provider: settings.provider.value, config: config.display().to_string() };
    env.emit(&off, |_| {
        "the LLM is off: nothing is extracted, everything else works as before (memories already extracted \
         stay); turn it on again with `cairn llm use …`"
            .to_owned()
    })
}

/// A `CAIRN_LLM_*` variable wins over what was just written: say so.
fn warn_about_overrides(settings: &LlmSettings) {
    if let Source::Env(var) = &settings.provider.source {
        note(&format!("warning: {var} is set and overrides config.toml's [llm] provider"));
    }
    if let Some(problem) = &settings.problem {
        note(&format!("warning: [llm] is not usable, so the LLM is off: {problem}"));
    }
}

/// The key is read from the environment of the process that calls the model (the daemon, or
/// `cairn extract`): a shell without it is worth a word.
fn warn_about_the_key(settings: &LlmSettings) {
    let Some(var) = cairn_llm::config::key_env(settings) else { return };
    if std::env::var_os(&var).is_some_and(|v| !v.is_empty()) {
        return;
    }
    if key_required(settings) {
        note(&format!(
            "warning: {var} is not set in this shell; the daemon reads the key from its own environment \
             (export {var} where cairn runs), and calls nothing without it"
        ));
    }
}

/// Whether calls need the key: an openai provider on this machine goes without one while no
/// variable is named (cairn-llm's rule, said here before anything is opened).
fn key_required(settings: &LlmSettings) -> bool {
    !(settings.provider.value == LlmProviderKind::OpenAi
        && settings.api_key_env.value.is_none()
        && settings.base_url.value.as_deref().is_some_and(is_loopback_url))
}

fn is_loopback_url(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let host = rest.split(['/', ':']).next().unwrap_or_default();
    host.eq_ignore_ascii_case("localhost") || host.starts_with("127.") || rest.starts_with("[::1]")
}

fn budget_words(budget: Option<u64>) -> String {
    match budget {
        Some(b) => format!("{b} tokens"),
        None => "any number of tokens (no budget)".to_owned(),
    }
}

/// The local model installed: what `use local` reports.
#[derive(Debug, Serialize)]
struct Installed {
    model: String,
    file: String,
    bytes: u64,
}

/// Install `model` (the default one when `None`) from `from`, or download it unless it is
/// installed already.
fn install_local(data_dir: &Path, model: Option<&str>, from: Option<&Path>) -> Result<Installed> {
    use cairn_llm::local;
    let spec = cairn_llm::config::local_spec(model)
        .map_err(|e| CairnError::invalid(e.to_string()).with_hint("`cairn model list` shows the models cairn knows"))?;
    let dir = cairn_llm::config::local_models_dir(data_dir);
    let path = match (from, local::installed_path(spec, &dir)) {
        (Some(file), _) => {
            note(&format!("checking and copying {} into {}", file.display(), dir.display()));
            local::install_from_file(spec, file, &dir).map_err(install_error)?
        }
        (None, Some(path)) => path,
        (None, None) => download_local(spec, &dir)?,
    };
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or_default();
    Ok(Installed { model: spec.name.to_owned(), file: path.display().to_string(), bytes })
}

#[cfg(feature = "remote")]
fn download_local(spec: &cairn_llm::local::LocalModelSpec, dir: &Path) -> Result<std::path::PathBuf> {
    note(&format!(
        "downloading {} ({}, {}) from {}",
        spec.name,
        spec.file_name,
        crate::output::human_bytes(spec.bytes),
        spec.url
    ));
    let progress = std::cell::RefCell::new(crate::output::Progress::on_stderr());
    let downloaded = cairn_llm::local::install_download(spec, dir, &|done, total| {
        progress.borrow_mut().show(spec.file_name, done, total);
    });
    progress.borrow().finish();
    Ok(downloaded.map_err(|e| {
        install_error(e).with_hint(format!(
            "or install it from a copy of {}: cairn llm use local --model {} --from FILE",
            spec.file_name, spec.name
        ))
    })?)
}

#[cfg(not(feature = "remote"))]
fn download_local(spec: &cairn_llm::local::LocalModelSpec, _dir: &Path) -> Result<std::path::PathBuf> {
    Err(CairnError::from(LlmError::NotConfigured(format!(
        "this cairn was built without downloads (the `remote` feature): cairn llm use local --model {} --from FILE",
        spec.name
    )))
    .into())
}

/// An install's failure: a file that is not the pinned one is `checksum_mismatch`, as for the
/// embedding models (the local provider says so in its message, which names the fix).
fn install_error(error: LlmError) -> CairnError {
    match error {
        LlmError::ModelFile(message) if message.contains("sha256") => {
            CairnError::new(ErrorCode::ChecksumMismatch, message)
        }
        other => CairnError::from(other),
    }
}

/// A local LLM of the catalogue, as `cairn model list` shows it beside the embedding models.
#[derive(Debug, Serialize)]
pub struct LocalModelRow {
    name: &'static str,
    description: &'static str,
    /// The default of `cairn llm use local`.
    default: bool,
    installed: bool,
    /// `[llm]` runs it (`provider = "local"` naming it, or naming none while it is the default).
    in_use: bool,
    file: String,
    bytes: u64,
    /// Whether `cairn llm use local --model NAME` can download it (else `--from FILE`).
    downloadable: bool,
    measured: Option<LocalMeasuredRow>,
}

/// What was measured of a local model (its catalogue entry; docs/benchmarks/llm.md).
#[derive(Debug, Serialize)]
struct LocalMeasuredRow {
    /// The whole extraction of a 20-turn coding session, seconds, on 2 cores.
    session_seconds: f32,
    prompt_tokens_per_s: f32,
    output_tokens_per_s: f32,
    peak_rss_mb: u32,
    quality: &'static str,
}

/// The catalogue's local LLMs, installed or not.
pub fn local_model_rows(env: &Env) -> Vec<LocalModelRow> {
    let llm = &env.settings.llm;
    let dir = cairn_llm::config::local_models_dir(&env.settings.data_dir.value);
    let chosen = (llm.provider.value == LlmProviderKind::Local && llm.problem.is_none())
        .then(|| cairn_llm::config::local_spec(llm.model.value.as_deref()).ok())
        .flatten();
    cairn_llm::local::catalogue()
        .iter()
        .map(|spec| {
            let installed = cairn_llm::local::installed_path(spec, &dir);
            LocalModelRow {
                name: spec.name,
                description: spec.description,
                default: spec.name == cairn_llm::local::default_model().name,
                installed: installed.is_some(),
                in_use: chosen.is_some_and(|c| c.name == spec.name),
                file: installed.unwrap_or_else(|| dir.join(spec.file_name)).display().to_string(),
                bytes: spec.bytes,
                downloadable: !spec.url.is_empty(),
                measured: spec.measured.map(|m| LocalMeasuredRow {
                    session_seconds: m.session_seconds,
                    prompt_tokens_per_s: m.prompt_tokens_per_s,
                    output_tokens_per_s: m.output_tokens_per_s,
                    peak_rss_mb: m.peak_rss_mb,
                    quality: m.quality,
                }),
            }
        })
        .collect()
}

/// The local LLM rows of `cairn model list`'s text.
pub fn render_local_model_rows(rows: &[LocalModelRow]) -> String {
    use std::fmt::Write as _;
    if rows.is_empty() {
        return String::new();
    }
    let mut text = String::from("Local LLMs (memories extracted from sessions; cairn llm use local --model NAME):\n");
    for m in rows {
        let state = match (m.in_use, m.installed) {
            (true, true) => "in use",
            (true, false) => "in use, not installed",
            (false, true) => "installed",
            (false, false) => "not installed",
        };
        let _ = writeln!(text, "{} {:<29} {:<22} {}", if m.in_use { "*" } else { " " }, m.name, state, m.description);
        let size = crate::output::human_bytes(m.bytes);
        let size = match (m.installed, m.downloadable) {
            (true, _) => format!("{size} on disk"),
            (false, true) => format!("{size} download"),
            (false, false) => format!("{size}, install with --from FILE"),
        };
        let figures = m.measured.as_ref().map_or_else(
            || "not measured".to_owned(),
            |f| {
                format!(
                    "{:.0} s per 20-turn session, prompt {:.1} tokens/s, output {:.1} tokens/s, peak RSS {} MB; {}",
                    f.session_seconds, f.prompt_tokens_per_s, f.output_tokens_per_s, f.peak_rss_mb, f.quality
                )
            },
        );
        let _ = writeln!(text, "    {size}; {figures}");
    }
    text.push_str(
        "Extraction of a 20-turn coding session on 2 shared cores, candle on the CPU (docs/benchmarks/llm.md). \
         `cairn llm status` shows the LLM in use, whichever provider.\n",
    );
    text
}

/// The local model `[llm]` names, where its file is (or would be), and what runs it.
#[derive(Debug, Serialize)]
struct LocalFile {
    model: String,
    path: String,
    installed: bool,
    bytes: Option<u64>,
    /// `in-process`, or the `cairn-llm-worker` the daemon starts; `None` when there is none.
    runs_in: Option<String>,
    /// Why nothing can run it (the worker is not built), naming the fix.
    runner_problem: Option<String>,
}

fn local_file(settings: &LlmSettings, data_dir: &Path) -> Result<LocalFile, LlmError> {
    let spec = cairn_llm::config::local_spec(settings.model.value.as_deref())?;
    let dir = cairn_llm::config::local_models_dir(data_dir);
    let installed = cairn_llm::local::installed_path(spec, &dir);
    let path = installed.clone().unwrap_or_else(|| dir.join(spec.file_name));
    let (runs_in, runner_problem) = match local_worker(&process_env) {
        Ok(None) => (Some("in-process".to_owned()), None),
        Ok(Some(worker)) => (Some(worker.display().to_string()), None),
        Err(missing) => (None, Some(missing)),
    };
    Ok(LocalFile {
        model: spec.name.to_owned(),
        path: path.display().to_string(),
        installed: installed.is_some(),
        bytes: std::fs::metadata(&path).ok().map(|m| m.len()),
        runs_in,
        runner_problem,
    })
}

/// What `status --check` did.
#[derive(Debug, Serialize)]
struct Checked {
    ok: bool,
    answer: Option<String>,
    usage: Option<Usage>,
    error: Option<String>,
}

#[derive(Debug, Serialize)]
struct Status {
    provider: LlmProviderKind,
    /// Where the provider came from: default, config.toml, env VAR.
    source: Source,
    model: Option<String>,
    base_url: Option<String>,
    /// The variable the key is read from (openai, anthropic).
    api_key_env: Option<String>,
    /// Whether that variable is set in this process (a daemon reads its own environment).
    api_key_set: Option<bool>,
    /// Whether calls need it: not for a server on this machine while no variable is named.
    api_key_required: Option<bool>,
    /// agent-cli: the command line as it runs.
    command: Option<String>,
    local: Option<LocalFile>,
    /// `None` when there is nothing to reach (off).
    reachable: Option<bool>,
    /// Why it cannot be used, or was not reached.
    problem: Option<String>,
    /// Whether the daily budget applies (remote providers).
    budgeted: bool,
    today: BudgetStatus,
    last_failure: Option<Failure>,
    check: Option<Checked>,
    /// What extraction wrote, and the conversations whose extraction fails (retried later, with
    /// backoff); `None` when there is no store yet.
    extraction: Option<ExtractionStatus>,
}

fn status(env: &Env, check: bool) -> Result<()> {
    let settings = &env.settings.llm;
    let data_dir = &env.settings.data_dir.value;
    let mut report = describe(settings, data_dir)?;
    report.extraction = extraction_status(env);
    let mut failed = None;
    let usable = settings.provider.value != LlmProviderKind::Off && settings.problem.is_none();
    if check && usable {
        // Tried even when the cheap look failed: the check says why in the call's own terms.
        let checked = check_now(settings, data_dir);
        if let Err(e) = &checked {
            failed = Some(CairnError::from(clone_error(e)));
        }
        report.check = Some(match checked {
            Ok((text, usage)) => Checked { ok: true, answer: Some(text), usage: Some(usage), error: None },
            Err(e) => Checked { ok: false, answer: None, usage: None, error: Some(e.to_string()) },
        });
        report.reachable = Some(report.check.as_ref().is_some_and(|c| c.ok));
        // What the check spent, and its failure, are in the ledger now.
        (report.today, report.last_failure) = describe_spend(settings, data_dir)?;
    } else if check {
        let why = settings.problem.clone().map_or_else(|| "the LLM is off".to_owned(), |p| format!("[llm]: {p}"));
        failed = Some(CairnError::from(LlmError::NotConfigured(why)));
    }
    match failed {
        // With --json stdout holds one document: the error (its code, message and hint).
        Some(e) if env.json => Err(e.into()),
        Some(e) => {
            env.emit(&report, render_status)?;
            Err(e.into())
        }
        None => env.emit(&report, render_status),
    }
}

/// Where extraction stands in the store (through the daemon when one runs); `None` when the data
/// dir has no store yet: a look creates none.
fn extraction_status(env: &Env) -> Option<ExtractionStatus> {
    if !env.settings.data_dir.value.join(cairn_core::store::DB_FILE).is_file() {
        return None;
    }
    env.call(ExtractionStatusRequest).map_err(|e| tracing::debug!(error = %e, "extraction status unavailable")).ok()
}

/// The same failure again (LlmError is not `Clone`: it may later carry sources).
fn clone_error(error: &LlmError) -> LlmError {
    match error {
        LlmError::Unavailable(m) => LlmError::Unavailable(m.clone()),
        LlmError::Timeout(s) => LlmError::Timeout(*s),
        LlmError::Malformed(m) => LlmError::Malformed(m.clone()),
        LlmError::Refused(m) => LlmError::Refused(m.clone()),
        LlmError::NotConfigured(m) => LlmError::NotConfigured(m.clone()),
        LlmError::BudgetSpent { spent, budget } => LlmError::BudgetSpent { spent: *spent, budget: *budget },
        LlmError::ModelFile(m) => LlmError::ModelFile(m.clone()),
        LlmError::ContextFull { tokens, limit } => LlmError::ContextFull { tokens: *tokens, limit: *limit },
    }
}

/// One tiny request through the metered provider, as background work would send it.
fn check_now(settings: &LlmSettings, data_dir: &Path) -> Result<(String, Usage), LlmError> {
    let provider = cairn_llm::config::open_from_env(settings, data_dir)?
        .ok_or_else(|| LlmError::NotConfigured("the LLM is off".into()))?;
    let request = ChatRequest {
        messages: vec![ChatMessage::user("Reply with the single word: ok")],
        max_tokens: 8,
        temperature: 0.0,
        json: false,
    };
    let reply = provider.chat(&request)?;
    Ok((reply.text.trim().chars().take(200).collect(), reply.usage))
}

/// Everything `status` says without calling the model (a remote provider is asked for its model
/// list only).
fn describe(settings: &LlmSettings, data_dir: &Path) -> Result<Status> {
    let kind = settings.provider.value;
    let key_env = cairn_llm::config::key_env(settings);
    let (today, last_failure) = describe_spend(settings, data_dir)?;
    let mut report = Status {
        provider: kind,
        source: settings.provider.source.clone(),
        model: settings.model.value.clone(),
        base_url: match kind {
            LlmProviderKind::OpenAi => settings.base_url.value.clone(),
            LlmProviderKind::Anthropic => {
                Some(settings.base_url.value.clone().unwrap_or_else(|| "https://api.anthropic.com".to_owned()))
            }
            _ => None,
        },
        api_key_set: key_env.as_ref().map(|v| std::env::var_os(v).is_some_and(|k| !k.is_empty())),
        api_key_required: key_env.as_ref().map(|_| key_required(settings)),
        api_key_env: key_env,
        command: None,
        local: None,
        reachable: None,
        problem: settings.problem.clone(),
        budgeted: kind.is_remote() && settings.budget().is_some(),
        today,
        last_failure,
        check: None,
        extraction: None,
    };
    if report.problem.is_some() {
        return Ok(report);
    }
    match kind {
        LlmProviderKind::Off => {}
        LlmProviderKind::Local => match local_file(settings, data_dir) {
            Ok(file) => {
                report.reachable = Some(file.installed && file.runner_problem.is_none());
                if !file.installed {
                    report.problem =
                        Some(format!("{} is not installed: cairn llm use local --model {}", file.model, file.model));
                } else if let Some(missing) = &file.runner_problem {
                    report.problem = Some(missing.clone());
                }
                report.model = Some(file.model.clone());
                report.local = Some(file);
            }
            Err(e) => report.problem = Some(e.to_string()),
        },
        LlmProviderKind::OpenAi | LlmProviderKind::Anthropic | LlmProviderKind::AgentCli => {
            let quick = LlmSettings {
                timeout_secs: Setting { value: Some(PROBE_TIMEOUT_SECS), source: Source::Default },
                ..settings.clone()
            };
            match cairn_llm::config::open_provider(&quick, data_dir, &process_env) {
                Ok(Some(provider)) => {
                    report.model = Some(provider.model().to_owned());
                    if kind == LlmProviderKind::AgentCli {
                        report.command = Some(agent_command_line(settings, data_dir));
                    }
                    match provider.probe() {
                        Ok(()) => report.reachable = Some(true),
                        Err(e) => {
                            report.reachable = Some(false);
                            report.problem = Some(e.to_string());
                        }
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    report.reachable = Some(false);
                    report.problem = Some(e.to_string());
                }
            }
        }
    }
    Ok(report)
}

fn agent_command_line(settings: &LlmSettings, data_dir: &Path) -> String {
    let config = cairn_llm::agent_cli::AgentCliConfig {
        command: settings.command.value.clone().unwrap_or_else(|| cairn_llm::agent_cli::DEFAULT_COMMAND.to_owned()),
        model: settings.model.value.clone(),
        timeout: std::time::Duration::from_secs(1),
        workdir: Some(PathBuf::from(data_dir)),
    };
    cairn_llm::agent_cli::AgentCliProvider::new(&config).map(|p| p.command_line()).unwrap_or_default()
}

/// Today's spend against the budget, and the last failure; zeros when nothing was ever called
/// (no ledger file is made for a look).
fn describe_spend(settings: &LlmSettings, data_dir: &Path) -> Result<(BudgetStatus, Option<Failure>)> {
    let budget = settings.budget().filter(|_| settings.provider.value.is_remote());
    let Some(ledger) = Ledger::open_existing(data_dir).map_err(CairnError::from)? else {
        let today = DaySpend { day: cairn_core::clock::now_ts()[..10].to_owned(), ..DaySpend::default() };
        return Ok((BudgetStatus { today, budget, remaining: budget }, None));
    };
    let budget = Budget::new(Arc::new(ledger), budget);
    let status = budget.status().map_err(CairnError::from)?;
    let failure = budget.ledger().last_failure().map_err(CairnError::from)?;
    Ok((status, failure))
}

fn render_status(s: &Status) -> String {
    let mut lines = Vec::new();
    let mut row = |name: &str, text: String| lines.push(format!("{name:<13} {text}"));
    row("provider", format!("{} ({})", s.provider, s.source));
    if s.provider == LlmProviderKind::Off {
        row(
            "",
            "nothing is extracted; everything else works. Choose one: cairn llm use local | openai --base-url URL \
             --model M | anthropic --model M | agent-cli"
                .to_owned(),
        );
    }
    if let Some(model) = &s.model {
        row("model", model.clone());
    }
    if let Some(file) = &s.local {
        let size = file.bytes.map_or_else(String::new, |b| format!(" ({})", crate::output::human_bytes(b)));
        let state = if file.installed { "" } else { ", not installed" };
        row("file", format!("{}{size}{state}", file.path));
        if let Some(runs_in) = &file.runs_in {
            row("runs in", runs_in.clone());
        }
    }
    if let Some(url) = &s.base_url {
        row("base_url", url.clone());
    }
    if let Some(var) = &s.api_key_env {
        let set = match (s.api_key_set, s.api_key_required) {
            (Some(true), _) => "set in this shell",
            (_, Some(false)) => "not set (a server on this machine needs none)",
            _ => "not set in this shell",
        };
        row("api key", format!("${var}: {set}"));
    }
    if let Some(command) = &s.command {
        row("command", command.clone());
    }
    if let Some(reachable) = s.reachable {
        row("reachable", if reachable { "yes".to_owned() } else { "no".to_owned() });
    }
    if let Some(problem) = &s.problem {
        row("problem", problem.clone());
    }
    let t = &s.today.today;
    let spent = if s.provider.is_remote() { t.remote_tokens } else { t.local_tokens };
    let mut today = format!("{} tokens in {} call(s) ({} in, {} out)", spent, t.calls, t.input_tokens, t.output_tokens);
    match (s.provider, s.today.budget, s.today.remaining) {
        (LlmProviderKind::Local, _, _) => today.push_str("; no budget applies to a local model"),
        (LlmProviderKind::Off, _, _) => {}
        (_, Some(budget), Some(left)) => today.push_str(&format!("; budget {budget}, {left} left")),
        (_, _, _) => today.push_str("; no budget"),
    }
    if s.provider != LlmProviderKind::Off || t.calls > 0 {
        row("today", format!("{}: {today}", t.day));
    }
    if let Some(f) = &s.last_failure {
        let later = if f.retryable { "retried later" } else { "needs you" };
        row("last failure", format!("{} {} {} ({later}): {}", f.at, f.provider, f.kind, f.message));
    }
    if let Some(x) = s.extraction.as_ref().filter(|x| x.sessions > 0 || !x.failing.is_empty()) {
        let last = x.last_extracted_at.as_deref().map_or_else(String::new, |at| format!(", the last at {at}"));
        row(
            "extracted",
            format!(
                "{} memories from {} conversation(s) ({} fact(s) saved, {} duplicate(s) skipped){last}",
                x.extracted_memories, x.sessions, x.facts_saved, x.duplicates_skipped
            ),
        );
        for f in &x.failing {
            let code = f.last_error_code.as_deref().unwrap_or("failed");
            let next = f.next_attempt_at.as_deref().unwrap_or("-");
            let error = f.last_error.as_deref().unwrap_or_default();
            row("failing", format!("{} ({code}, {} attempt(s), next at {next}): {error}", f.session_id, f.attempts));
        }
    }
    if let Some(c) = &s.check {
        match (&c.answer, &c.error) {
            (Some(answer), _) => row("check", format!("answered {answer:?}")),
            (_, Some(error)) => row("check", format!("failed: {error}")),
            _ => {}
        }
    }
    lines.join("\n")
}

/// The `llm` line of `cairn doctor`: provider, today's spend against the budget; a warning when
/// `[llm]` is broken, the provider lacks what it needs, or the budget is spent. Nothing is sent.
pub fn doctor_check(env: &Env) -> Check {
    let settings = &env.settings.llm;
    let data_dir = &env.settings.data_dir.value;
    let check = |status, message: String, hint: Option<&str>| Check {
        id: "llm".to_owned(),
        status,
        message,
        hint: hint.map(str::to_owned),
    };
    if let Some(problem) = &settings.problem {
        return check(
            CheckStatus::Warning,
            format!("[llm] is not usable, the LLM is off: {problem}"),
            Some("fix [llm] in config.toml, or run `cairn llm off`"),
        );
    }
    let kind = settings.provider.value;
    if kind == LlmProviderKind::Off {
        return check(
            CheckStatus::Ok,
            "off: no memory is extracted from sessions".to_owned(),
            Some("cairn llm use local (offline) or cairn llm use openai|anthropic|agent-cli"),
        );
    }
    // Nothing is loaded or sent: a local model's file is looked at, a remote one only configured.
    let opened = if kind == LlmProviderKind::Local {
        local_file(settings, data_dir).and_then(|f| match (f.installed, f.runner_problem) {
            (false, _) => Err(LlmError::NotConfigured(format!("{} is not installed", f.model))),
            (true, Some(missing)) => Err(LlmError::NotConfigured(missing)),
            (true, None) => Ok(()),
        })
    } else {
        cairn_llm::config::open_provider(settings, data_dir, &process_env).map(|_| ())
    };
    let model = settings.model.value.as_deref().map_or_else(String::new, |m| format!(" {m}"));
    if let Err(e) = opened {
        return check(
            CheckStatus::Warning,
            format!("{kind}{model}: {e}"),
            Some("`cairn llm status` says more; `cairn llm use …` sets it up"),
        );
    }
    let spend = describe_spend(settings, data_dir).ok();
    let (message, spent) = match spend.as_ref().map(|(s, _)| s) {
        Some(BudgetStatus { today, budget: Some(budget), .. }) if kind.is_remote() => (
            format!("{kind}{model}: {} of {budget} tokens spent today", today.remote_tokens),
            today.remote_tokens >= *budget,
        ),
        Some(status) if kind.is_remote() => {
            (format!("{kind}{model}: {} tokens spent today (no budget)", status.today.remote_tokens), false)
        }
        Some(status) => (format!("{kind}{model}: {} tokens today", status.today.local_tokens), false),
        None => (format!("{kind}{model}"), false),
    };
    if spent {
        return check(
            CheckStatus::Warning,
            format!("{message}: the budget is spent, extraction waits for tomorrow (UTC)"),
            Some("raise [llm] daily_token_budget in config.toml (0: no limit)"),
        );
    }
    check(CheckStatus::Ok, message, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_choice_replaces_the_other_providers_keys_and_keeps_the_rest() {
        let mut doc: DocumentMut =
            "# mine\nport = 7999\n\n[llm]\n# which one\nprovider = \"agent-cli\"\ncommand = \"opencode\"\ntimeout_secs = 60\n"
                .parse()
                .unwrap();
        write_choice(
            &mut doc,
            &Choice {
                provider: LlmProviderKind::OpenAi,
                model: Some("m".into()),
                base_url: Some("http://localhost:11434/v1".into()),
                api_key_env: None,
                command: None,
                daily_token_budget: Some(5000),
            },
        );
        let text = doc.to_string();
        assert!(text.starts_with("# mine\nport = 7999\n\n[llm]\n# which one\nprovider = \"openai\"\n"), "{text}");
        assert!(text.contains("timeout_secs = 60") && text.contains("daily_token_budget = 5000"), "{text}");
        assert!(!text.contains("command"), "{text}");
        let mut inline: DocumentMut = "llm = { provider = \"local\", timeout_secs = 9 }\n".parse().unwrap();
        llm_table(&mut inline)["provider"] = value("off");
        assert_eq!(inline.to_string(), "[llm]\nprovider = \"off\"\ntimeout_secs = 9\n");
    }
}

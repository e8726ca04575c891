//! The `cairn` binary: parse, run, map errors to documented exit codes.

mod alloc;
mod cli;
mod completions_cmd;
mod config_file;
mod conflicts_cmd;
mod daemon;
mod env;
mod extract_cmd;
mod history_cmd;
mod hook;
mod hook_log;
#[cfg(feature = "hub")]
mod hub_cmd;
mod llm_cmd;
mod model_cmd;
mod obsidian_cmd;
mod output;
mod remote_cmd;
mod run;
mod setup;

use std::process::ExitCode;

/// glibc's allocator for a hook, mimalloc for the rest (see `alloc`).
#[global_allocator]
static ALLOCATOR: alloc::ByProcess = alloc::ByProcess;

use cairn_core::CairnError;
use clap::Parser;

/// Exit codes (docs/CLI.md "Exit codes"): 0 ok · 1 unexpected · 2 usage · 3 invalid input ·
/// 4 not found · 5 conflict · 6 store unavailable.
fn main() -> ExitCode {
    // A hook runs on every agent event and its budget is milliseconds: `cairn hook <event>` as
    // Claude Code runs it skips building the whole CLI (clap's tree of every command).
    if let Some((host, event)) = bare_hook_event(std::env::args_os().skip(1)) {
        let _ = hook::run(&event, &host, cairn_core::settings::Overrides::default());
        return ExitCode::SUCCESS;
    }
    let cli = cli::Cli::parse();
    let json = cli.global.json;
    match run::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if err.is::<output::BrokenPipe>() => ExitCode::SUCCESS,
        Err(err) => report(&err, json),
    }
}

/// The host and event of exactly `hook <event>` or `hook --host=<host> <event>` (as setup
/// writes them; no other flag anywhere); anything else goes through clap.
fn bare_hook_event(mut args: impl Iterator<Item = std::ffi::OsString>) -> Option<(String, String)> {
    let (command, mut event) = (args.next()?, args.next()?.into_string().ok()?);
    let mut host = "claude-code".to_owned();
    if let Some(name) = event.strip_prefix("--host=") {
        name.clone_into(&mut host);
        event = args.next()?.into_string().ok()?;
    }
    (command == "hook" && !event.starts_with('-') && args.next().is_none()).then_some((host, event))
}

/// Log to stderr with the `log` setting (defaults < config.toml < `CAIRN_LOG`): called once
/// the settings are loaded, so config.toml's `log` applies too.
pub(crate) fn init_logging(log: &str) {
    let filter = cairn_core::settings::log_filter(log);
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_new(filter).unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::env::var_os("NO_COLOR").is_none())
        .try_init();
}

fn report(err: &anyhow::Error, json: bool) -> ExitCode {
    let (code, message, hint, exit) = match err.downcast_ref::<CairnError>() {
        Some(e) => (e.code.as_str(), e.message.clone(), e.hint.clone(), e.code.exit_code()),
        #[cfg(feature = "hub")]
        None if err.is::<cairn_hub::HubError>() => hub_cmd::error_parts(err),
        None => ("internal", format!("{err:#}"), None, 1),
    };
    if json {
        let value = serde_json::json!({ "error": { "code": code, "message": message, "hint": hint } });
        let _ = output::out(&value.to_string());
    }
    output::note(&format!("error[{code}]: {message}"));
    if let Some(hint) = hint {
        output::note(&format!("hint: {hint}"));
    }
    ExitCode::from(u8::try_from(exit).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::bare_hook_event;

    #[test]
    fn only_a_bare_hook_skips_the_cli_parser() {
        let event = |args: &[&str]| bare_hook_event(args.iter().map(std::ffi::OsString::from));
        let bare = |host: &str, e: &str| Some((host.to_owned(), e.to_owned()));
        assert_eq!(event(&["hook", "SessionStart"]), bare("claude-code", "SessionStart"));
        assert_eq!(event(&["hook", "--host=gemini", "BeforeAgent"]), bare("gemini", "BeforeAgent"));
        assert_eq!(event(&["hook", "--host=codex"]), None, "clap answers the missing event");
        assert_eq!(event(&["hook", "--host", "codex", "Stop"]), None);
        assert_eq!(event(&["hook"]), None, "clap answers the missing event");
        assert_eq!(event(&["hook", "--help"]), None);
        assert_eq!(event(&["hook", "Stop", "--data-dir", "x"]), None);
        assert_eq!(event(&["--data-dir", "x", "hook", "Stop"]), None);
        assert_eq!(event(&["save", "Stop"]), None);
    }
}

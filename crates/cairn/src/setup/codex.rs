//! `cairn setup codex`: `[mcp_servers.cairn]` in Codex's
//! `config.toml` and cairn's compaction prompt as `experimental_compact_prompt_file`, edited
//! with toml_edit so comments and layout stay; cairn's lifecycle hooks in `hooks.json` beside it.
//!
//! Hooks (checked against Codex 0.171): `$CODEX_HOME/hooks.json` holds Claude Code's shape
//! (`hooks.<Event>: [{matcher?, hooks: [{type, command, timeout}]}]`), with the same payloads
//! and answers, so `cairn hook --host=codex` runs them: SessionStart injects the project's
//! context, UserPromptSubmit stores the prompt, Stop archives the rollout, SessionEnd ends the
//! session. Codex runs a new or changed hook only once the user has trusted it (`/hooks` in
//! Codex, or `--dangerously-bypass-hook-trust` for automation): setup does not trust hooks on
//! the user's behalf, it says so. Until then `cairn mcp --host=codex` puts the project's context
//! in its instructions, archives the rollouts itself and records the archived sessions and their
//! prompts in the memory store ([`mcp_context`], [`Rollouts`]). SessionEnd's time limit is
//! clamped to 3 s by Codex. `--permissions` sets the server's
//! `default_tools_approval_mode = "approve"` (Codex asks before each MCP tool call otherwise, and
//! `codex exec` refuses one).
//!
//! Host facts (Codex config reference, developers.openai.com/codex): the user config is
//! `$CODEX_HOME/config.toml` (`~/.codex/config.toml`); a stdio server is `[mcp_servers.<name>]`
//! with `command`, `args` (`enabled = false` turns one off); Codex reads an MCP server's
//! `instructions` at initialization, so `cairn mcp --host=codex` (the whole Memory Protocol in
//! its instructions) is how the protocol reaches the agent. `model_instructions_file` is not
//! used: it *replaces* Codex's built-in instructions (engram's setup sets it; setup here
//! removes engram's with `--disable-engram`). `experimental_compact_prompt_file` replaces the
//! compaction prompt, which is what cairn's continuity text is for.

use std::path::{Path, PathBuf};

use anyhow::Result;
use cairn_core::agent::ProtocolRequest;
use cairn_core::{CairnError, ErrorCode};
use toml_edit::{Array, DocumentMut, Item, Table, value};

use super::hook_groups::{self, HookSpec};
use super::jsonc::{self, Config};
use super::{Answers, FileOp, Plan, Status, Step, path_str, read_config};
use crate::cli::SetupArgs;

const MCP_ARGS: [&str; 3] = ["mcp", "--tools=agent", "--host=codex"];
/// The compaction prompt setup writes beside `config.toml`.
pub const COMPACT_FILE: &str = "cairn-compact-prompt.md";
const COMPACT_KEY: &str = "experimental_compact_prompt_file";
/// What `--permissions` sets on cairn's server: its tools run without asking.
const APPROVAL_KEY: &str = "default_tools_approval_mode";

/// The hooks setup writes into `hooks.json` (time limits in seconds, as Claude Code's).
const HOOKS: &[HookSpec] = &[
    HookSpec { event: "SessionStart", matcher: None, timeout: 5 },
    HookSpec { event: "UserPromptSubmit", matcher: None, timeout: 5 },
    HookSpec { event: "PreToolUse", matcher: Some("mcp__cairn__.*"), timeout: 5 },
    HookSpec { event: "PostToolUse", matcher: None, timeout: 5 },
    HookSpec { event: "Stop", matcher: None, timeout: 5 },
    HookSpec { event: "PreCompact", matcher: None, timeout: 5 },
    HookSpec { event: "SessionEnd", matcher: None, timeout: 2 },
];

pub struct Options {
    pub binary: PathBuf,
    /// `$CODEX_HOME`, else `~/.codex`.
    pub codex_home: PathBuf,
    pub uninstall: bool,
    pub disable_engram: bool,
    /// cairn's MCP tools without asking (`default_tools_approval_mode = "approve"`).
    pub permissions: bool,
    /// cairn's variables setup runs with, passed on to the MCP server (see [`PINNED_VARS`]).
    pub pinned_env: Vec<(String, String)>,
}

/// Codex starts an MCP server with a cleared environment (HOME, PATH and a few more): the store
/// and port setup runs with are passed on in the entry's `env`, so `cairn mcp` uses the store
/// the hooks (which get Codex's whole environment) use.
pub const PINNED_VARS: [&str; 2] = ["CAIRN_DATA_DIR", "CAIRN_PORT"];

impl Options {
    pub fn from_env(args: &SetupArgs, binary: &Path) -> Result<Options> {
        Ok(Options {
            binary: binary.to_path_buf(),
            codex_home: codex_home()?,
            uninstall: args.uninstall,
            disable_engram: args.disable_engram,
            permissions: args.permissions,
            pinned_env: PINNED_VARS
                .iter()
                .filter_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()).map(|v| ((*k).to_owned(), v)))
                .collect(),
        })
    }
}

pub fn codex_home() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("CODEX_HOME").map(PathBuf::from)
        && dir.is_absolute()
    {
        return Ok(dir);
    }
    Ok(super::home_dir()?.join(".codex"))
}

/// The compaction prompt: `cairn protocol --host codex --part continuity`.
pub fn compact_prompt() -> String {
    let req = ProtocolRequest::parse(Some("codex"), Some("agent"), Some("continuity")).expect("known names");
    let mut text = cairn_core::agent::protocol(req).text;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

fn invalid(path: &Path, what: &str) -> anyhow::Error {
    super::jsonc::invalid(path, what.into(), "fix the file by hand (or move it away) and run again; it was not changed")
}

/// Everything `cairn setup codex` would do.
pub fn plan(o: &Options, answers: &Answers) -> Result<Plan> {
    let mut plan = Plan::default();
    let bin = path_str(&o.binary)?;
    if !o.uninstall && !o.codex_home.is_dir() {
        return Err(CairnError::new(
            ErrorCode::FileNotFound,
            format!("Codex is not set up here: {} does not exist", o.codex_home.display()),
        )
        .with_hint("install Codex and start it once (it creates it), or set CODEX_HOME")
        .into());
    }
    let config = o.codex_home.join("config.toml");
    let before = read_config(&config)?;
    let mut doc: DocumentMut = before
        .as_deref()
        .unwrap_or("")
        .parse()
        .map_err(|e: toml_edit::TomlError| invalid(&config, &format!("is not valid TOML: {}", e.message())))?;
    let compact = o.codex_home.join(COMPACT_FILE);
    let compact_str = path_str(&compact)?.to_string();
    // parsed before anything is planned: a bad one stops the run with nothing changed
    let hooks = Config::open(o.codex_home.join("hooks.json"))?;

    // 1. [mcp_servers.cairn]
    let servers_ok = match doc.get("mcp_servers") {
        None => true,
        Some(item) => item.is_table_like(),
    };
    if !servers_ok {
        return Err(invalid(&config, "has `mcp_servers` but it is not a table"));
    }
    let status = if o.uninstall {
        let servers = doc.get_mut("mcp_servers").and_then(Item::as_table_like_mut);
        match servers.and_then(|s| s.remove("cairn")) {
            Some(_) => {
                if doc.get("mcp_servers").and_then(Item::as_table_like).is_some_and(toml_edit::TableLike::is_empty) {
                    doc.remove("mcp_servers");
                }
                Status::Removed
            }
            None => Status::Absent,
        }
    } else {
        let status = register_cairn(&config, &mut doc, bin)?;
        if pin_env(&mut doc, &o.pinned_env) && status == Status::Unchanged { Status::Updated } else { status }
    };
    plan.steps.push(Step::new("mcp.cairn", status, Some(&config)));
    if let Some(status) = permissions(o, &mut doc, answers) {
        plan.steps
            .push(Step::new("permissions", status, Some(&config)).detail(format!("{APPROVAL_KEY} = \"approve\"")));
    }

    // 1b. the lifecycle hooks
    let status = hook_groups::plan(&hooks.path, &hooks.root(), hook_groups::groups(bin, "codex", HOOKS), o.uninstall)?;
    plan.steps.push(Step::new("hooks", status, Some(&hooks.path)));
    if matches!(status, Status::Created | Status::Updated) {
        plan.warnings.push(
            "Codex runs new hooks only once you trust them: start `codex` and trust cairn's in /hooks \
             (until then cairn's MCP server gives the agent the project's context, and records the \
             sessions and prompts when Codex closes it or starts it next)"
                .into(),
        );
    }
    plan.ops.extend(hooks.op());

    // 2. engram's server and instructions: before the compaction prompt, which may be engram's
    if !o.uninstall {
        engram(o, &config, &mut doc, answers, &mut plan);
    }

    // 3. the compaction prompt and its key
    let current_key = doc.get(COMPACT_KEY).map(|i| i.as_str().map(String::from));
    let prompt = compact_prompt();
    let on_disk = std::fs::read_to_string(&compact).ok();
    if o.uninstall {
        if current_key == Some(Some(compact_str.clone())) {
            doc.remove(COMPACT_KEY);
        }
        match on_disk {
            Some(_) => {
                plan.steps.push(Step::new("compact prompt", Status::Removed, Some(&compact)));
                plan.ops.push(FileOp::Remove { path: compact.clone() });
            }
            None => plan.steps.push(Step::new("compact prompt", Status::Absent, Some(&compact))),
        }
    } else {
        match &current_key {
            Some(Some(p)) if *p != compact_str => {
                plan.steps.push(
                    Step::new("compact prompt", Status::Skipped, Some(&config))
                        .detail(format!("{COMPACT_KEY} is already set (to {p}): left as it is")),
                );
            }
            Some(None) => return Err(invalid(&config, &format!("has `{COMPACT_KEY}` but it is not a string"))),
            _ => {
                let status = match &on_disk {
                    None => Status::Created,
                    Some(t) if *t == prompt => Status::Unchanged,
                    Some(_) => Status::Updated,
                };
                if status != Status::Unchanged {
                    plan.ops.push(FileOp::Write { path: compact.clone(), contents: prompt.into_bytes() });
                }
                let status = if current_key.is_none() {
                    // a top-level key goes before the first table, where toml_edit puts it
                    doc.insert(COMPACT_KEY, value(compact_str.as_str()));
                    if status == Status::Unchanged { Status::Updated } else { status }
                } else {
                    status
                };
                plan.steps.push(Step::new("compact prompt", status, Some(&compact)).detail(COMPACT_KEY));
            }
        }
    }

    let after = doc.to_string();
    match &before {
        Some(b) if *b == after => {}
        Some(_) if after.trim().is_empty() && o.uninstall => plan.ops.push(FileOp::Remove { path: config }),
        Some(_) => plan.ops.push(FileOp::Write { path: config, contents: after.into_bytes() }),
        None if after.trim().is_empty() => {}
        None => plan.ops.push(FileOp::Write { path: config, contents: after.into_bytes() }),
    }
    // the config names the prompt file: write the file first
    plan.ops.sort_by_key(|op| matches!(op, FileOp::Write { path, .. } if path.ends_with("config.toml")));
    Ok(plan)
}

fn wanted_args() -> Array {
    MCP_ARGS.iter().copied().collect()
}

/// Add `[mcp_servers.cairn]`, or point an existing stdio entry at this binary (keeping the
/// user's other keys and arguments).
fn register_cairn(config: &Path, doc: &mut DocumentMut, bin: &str) -> Result<Status> {
    if doc.get("mcp_servers").is_none() {
        let mut servers = Table::new();
        servers.set_implicit(true);
        doc.insert("mcp_servers", Item::Table(servers));
    }
    let servers = doc["mcp_servers"].as_table_like_mut().expect("checked to be a table");
    let Some(entry) = servers.get_mut("cairn") else {
        let mut table = Table::new();
        table.insert("command", value(bin));
        table.insert("args", value(wanted_args()));
        servers.insert("cairn", Item::Table(table));
        return Ok(Status::Created);
    };
    let Some(entry) = entry.as_table_like_mut() else {
        return Err(invalid(config, "has `mcp_servers.cairn` but it is not a table"));
    };
    if entry.contains_key("url") {
        // cairn's daemon over HTTP: the user's choice
        return Ok(Status::Unchanged);
    }
    let mut status = Status::Unchanged;
    if entry.get("command").and_then(Item::as_str) != Some(bin) {
        entry.insert("command", value(bin));
        status = Status::Updated;
    }
    if let Some(args) = entry.get_mut("args").and_then(Item::as_array_mut) {
        let strs: Vec<&str> = args.iter().filter_map(|v| v.as_str()).collect();
        if strs.first() == Some(&"mcp") && !strs.iter().any(|a| *a == "--host" || a.starts_with("--host=")) {
            args.push("--host=codex");
            status = Status::Updated;
        }
    } else {
        entry.insert("args", value(wanted_args()));
        status = Status::Updated;
    }
    Ok(status)
}

/// The pinned variables in cairn's entry's `env` (kept beside the user's own); whether any
/// was added or changed.
fn pin_env(doc: &mut DocumentMut, vars: &[(String, String)]) -> bool {
    let Some(entry) = doc.get_mut("mcp_servers").and_then(|s| s.get_mut("cairn")).and_then(Item::as_table_like_mut)
    else {
        return false;
    };
    if vars.is_empty() || entry.contains_key("url") {
        return false;
    }
    if entry.get("env").is_none() {
        entry.insert("env", value(toml_edit::InlineTable::new()));
    }
    let Some(env) = entry.get_mut("env").and_then(Item::as_table_like_mut) else { return false };
    let mut changed = false;
    for (key, val) in vars {
        if env.get(key).and_then(Item::as_str) != Some(val.as_str()) {
            env.insert(key, value(val.as_str()));
            changed = true;
        }
    }
    if changed && let Some(inline) = entry.get_mut("env").and_then(Item::as_inline_table_mut) {
        // the spacing of an inline table the user wrote on one line stays one line
        inline.fmt();
    }
    changed
}

/// `--permissions`: cairn's server runs its tools without asking; uninstall removes the server
/// with it. `None`: not asked for and not there.
fn permissions(o: &Options, doc: &mut DocumentMut, answers: &Answers) -> Option<Status> {
    if o.uninstall {
        return None;
    }
    let entry = doc.get_mut("mcp_servers")?.get_mut("cairn")?.as_table_like_mut()?;
    if entry.get(APPROVAL_KEY).and_then(Item::as_str) == Some("approve") {
        return Some(Status::Unchanged);
    }
    if !answers.ask(o.permissions, "Let Codex use cairn's memory tools without asking?") {
        return None;
    }
    entry.insert(APPROVAL_KEY, value("approve"));
    Some(Status::Created)
}

/// engram's `[mcp_servers.engram]` (turned off with `enabled = false`) and its
/// `model_instructions_file` / compaction prompt (removed: they replace Codex's own).
fn engram(o: &Options, config: &Path, doc: &mut DocumentMut, answers: &Answers, plan: &mut Plan) {
    let server_on = doc
        .get("mcp_servers")
        .and_then(|s| s.get("engram"))
        .and_then(Item::as_table_like)
        .map(|t| t.get("enabled").and_then(Item::as_bool).unwrap_or(true));
    let engram_keys: Vec<&str> = ["model_instructions_file", COMPACT_KEY]
        .into_iter()
        .filter(|k| doc.get(k).and_then(Item::as_str).is_some_and(|p| p.contains("engram")))
        .collect();
    if server_on != Some(true) && engram_keys.is_empty() {
        if server_on == Some(false) {
            plan.steps.push(Step::new("mcp.engram", Status::AlreadyDisabled, Some(config)));
        }
        return;
    }
    let disable = answers.ask(
        o.disable_engram,
        "engram is set up in Codex too: disable its MCP server and instructions so sessions are not captured twice?",
    );
    let status = if disable { Status::Disabled } else { Status::Found };
    if server_on == Some(true) {
        plan.steps.push(Step::new("mcp.engram", status, Some(config)).detail("enabled = false"));
        if disable && let Some(t) = doc["mcp_servers"]["engram"].as_table_like_mut() {
            t.insert("enabled", value(false));
        }
    }
    for key in engram_keys {
        plan.steps.push(Step::new("engram instructions", status, Some(config)).detail(key));
        if disable {
            doc.remove(key);
        }
    }
    if !disable {
        plan.warnings.push(
            "engram is still active in Codex: two memory servers, and its model_instructions_file replaces Codex's own instructions; \
             run `cairn setup codex --disable-engram`"
                .into(),
        );
    }
}

/// How Codex is wired to cairn, for `cairn doctor`: the MCP entry and the hooks (Codex reads
/// the protocol from the MCP server's instructions: no file of its own).
pub fn wiring(binary: &Path) -> Option<super::Wiring> {
    let home = codex_home().ok()?;
    if !home.is_dir() {
        return None;
    }
    let config = home.join("config.toml");
    let doc: Option<DocumentMut> = std::fs::read_to_string(&config).ok().and_then(|t| t.parse().ok());
    let command = doc.and_then(|d| d.get("mcp_servers")?.get("cairn")?.get("command")?.as_str().map(String::from));
    let hooks_path = home.join("hooks.json");
    let hooks: Option<serde_json::Value> = std::fs::read_to_string(&hooks_path)
        .ok()
        .and_then(|t| jsonc::Doc::parse(&hooks_path, &t).ok()?.root.to_serde_value());
    let events: Vec<&str> = HOOKS.iter().map(|h| h.event).collect();
    Some(super::Wiring::new(
        "codex",
        vec![
            super::wiring::Piece::running("mcp", &config, command, binary),
            hook_groups::piece(&hooks_path, hooks.as_ref().and_then(|v| v.get("hooks")), &events, binary),
        ],
    ))
}

/// Whether Codex will run cairn's SessionStart hook without asking: the user trusted it in
/// `/hooks`, which Codex (0.171) records as `[hooks.state."<hooks.json>:session_start:<group>:<hook>"]`
/// `trusted_hash = "sha256:…"` in `config.toml`. Setup never writes that record (trusting a
/// hook is the user's review, not a setup step); this only reads it. A record of an older
/// definition (Codex asks again after the hook changed) still counts: the hash is Codex's
/// own, and a second copy of the context costs less than none.
pub fn session_start_hook_trusted(codex_home: &Path) -> bool {
    let hooks_path = codex_home.join("hooks.json");
    let Some(hooks) = std::fs::read_to_string(&hooks_path)
        .ok()
        .and_then(|t| jsonc::Doc::parse(&hooks_path, &t).ok()?.root.to_serde_value())
    else {
        return false;
    };
    let Some(group) = hooks["hooks"]["SessionStart"]
        .as_array()
        .and_then(|groups| groups.iter().position(hook_groups::is_cairn_group))
    else {
        return false;
    };
    let Some(doc) =
        std::fs::read_to_string(codex_home.join("config.toml")).ok().and_then(|t| t.parse::<DocumentMut>().ok())
    else {
        return false;
    };
    let Some(states) = doc.get("hooks").and_then(|h| h.get("state")).and_then(Item::as_table_like) else {
        return false;
    };
    let suffix = format!(":session_start:{group}:0");
    states.iter().any(|(key, state)| {
        key.ends_with(&suffix)
            && Path::new(&key[..key.len() - suffix.len()]).file_name().is_some_and(|n| n == "hooks.json")
            && state.get("trusted_hash").and_then(Item::as_str).is_some()
            && state.get("enabled").and_then(Item::as_bool) != Some(false)
    })
}

/// The most of the project's context `cairn mcp --host=codex` puts in its instructions: Codex
/// sends them with every request of the session.
const MCP_CONTEXT_BYTES: usize = 4_000;

/// The project's recent context for `cairn mcp --host=codex` to add to its instructions when
/// Codex will not run cairn's SessionStart hook (the user has not trusted it yet). Codex reads
/// a server's instructions once, when it starts the server at the session's start, and sends
/// them with every request as the description of the server's tools: so memory reaches the
/// model from the first request without the model asking, hooks or not. `None` when the hook
/// gives it (trusted), the project holds nothing, or the store cannot be reached (the server
/// starts all the same).
pub fn mcp_context(
    client: &cairn_client::Client,
    project: Option<String>,
    cwd: &Path,
    budget: usize,
) -> Option<String> {
    if session_start_hook_trusted(&codex_home().ok()?) {
        return None;
    }
    let hints = cairn_core::agent::ProjectHints {
        explicit: None,
        session_id: None,
        header: None,
        process: project,
        dir: None,
        process_cwd: cwd.to_path_buf(),
    };
    let project = cairn_core::agent::resolve_project(&hints, |_| Ok(None)).ok()?.project;
    let request = cairn_core::context::ContextRequest {
        project: Some(project),
        budget_bytes: budget.min(MCP_CONTEXT_BYTES),
        ..cairn_core::context::ContextRequest::default()
    };
    let context: cairn_core::context::Context = client.call(request).ok()?;
    let empty = context.memory_ids.is_empty() && context.session_ids.is_empty() && context.prompt_ids.is_empty();
    (!empty && !context.context.trim().is_empty()).then_some(context.context)
}

/// Archive Codex's rollouts now rather than at the daemon's next scan: without trusted hooks
/// no Stop hook does it. Best effort: the periodic scan reads them later all the same.
pub fn archive_rollouts(client: &cairn_client::Client) {
    use cairn_core::history::ingest::PokeRequest;
    let poke = PokeRequest { host: Some(cairn_core::history::model::HistoryHost::Codex), path: None, session_id: None };
    if let Err(e) = client.call(poke) {
        tracing::debug!(error = %e, "archiving Codex's rollouts after the session failed");
    }
}

/// What `cairn mcp --host=codex` does with Codex's rollouts when Codex starts it (what earlier
/// sessions wrote) and when Codex closes it (when Codex lets it finish): archive them, and,
/// while Codex does not run cairn's hooks, record the archived sessions and their prompts in
/// the memory store as the SessionStart, UserPromptSubmit and SessionEnd hooks would.
pub struct Rollouts {
    /// Record the sessions: cairn's SessionStart hook is not trusted, so no hook records them.
    /// Once it is, the hooks record every session as it runs, and a second recording of
    /// the same prompt by another path is left to them (the store keeps a prompt once per
    /// session and text, so a recording by both would add nothing, but the hook's is the one
    /// that sees the prompt as it was typed).
    record: bool,
    /// `--project` / `CAIRN_PROJECT` of `cairn mcp`, which a hook would name too.
    project: Option<String>,
}

impl Rollouts {
    /// Whether to record is decided once, as Codex decides which hooks to run at its start.
    pub fn new(project: Option<String>) -> Rollouts {
        let record = codex_home().is_ok_and(|home| !session_start_hook_trusted(&home));
        Rollouts { record, project }
    }

    pub fn archive(&self, client: &cairn_client::Client) {
        archive_rollouts(client);
        if self.record {
            let run = |op| client.run(op);
            let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
            let codex = cairn_core::history::model::HistoryHost::Codex;
            let recorded = cairn_core::archived_sessions::record(&run, codex, self.project.as_deref(), &cwd);
            tracing::debug!(recorded, "Codex sessions recorded from their rollouts");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Codex home whose hooks.json has the user's SessionStart group first and cairn's second,
    /// and whose config.toml holds `state` (Codex's trust records).
    fn home(state: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let hooks = r#"{"hooks": {"SessionStart": [
            {"hooks": [{"type": "command", "command": "notify-send hi"}]},
            {"hooks": [{"type": "command", "command": "/usr/bin/cairn hook --host=codex SessionStart"}]}
        ]}}"#;
        std::fs::write(dir.path().join("hooks.json"), hooks).unwrap();
        std::fs::write(
            dir.path().join("config.toml"),
            state.replace("HOOKS", &dir.path().join("hooks.json").display().to_string()),
        )
        .unwrap();
        dir
    }

    #[test]
    fn only_a_trust_record_of_cairns_session_start_hook_counts() {
        let trusted = "[hooks.state.\"HOOKS:session_start:1:0\"]\ntrusted_hash = \"sha256:ab\"\n";
        assert!(session_start_hook_trusted(home(trusted).path()));
        let the_users = "[hooks.state.\"HOOKS:session_start:0:0\"]\ntrusted_hash = \"sha256:ab\"\n";
        assert!(!session_start_hook_trusted(home(the_users).path()), "the user's hook, not cairn's");
        let off = format!("{trusted}enabled = false\n");
        assert!(!session_start_hook_trusted(home(&off).path()), "turned off in /hooks");
        assert!(!session_start_hook_trusted(home("model = \"m\"\n").path()), "never reviewed");
        let other_event = "[hooks.state.\"HOOKS:stop:1:0\"]\ntrusted_hash = \"sha256:ab\"\n";
        assert!(!session_start_hook_trusted(home(other_event).path()));
    }
}

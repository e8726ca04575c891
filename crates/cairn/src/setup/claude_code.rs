//! `cairn setup claude-code`: cairn's hooks in Claude Code's user
//! settings and its MCP server at user scope, both running this binary by its absolute path,
//! without the plugin (`plugins/claude-code`, which finds `cairn` on PATH).
//!
//! Host facts (checked against Claude Code 2.1.330, `claude mcp add --scope user`): user
//! settings are `~/.claude/settings.json`, or `$CLAUDE_CONFIG_DIR/settings.json`; user-scope
//! MCP servers are `mcpServers` in `~/.claude.json` (beside `~/.claude`, not in it), or in
//! `$CLAUDE_CONFIG_DIR/.claude.json`; an entry is `{type: "stdio", command, args, env}`.
//! Claude Code creates both files itself, so setup refuses a HOME where it never ran.

use std::path::{Path, PathBuf};

use anyhow::Result;
use cairn_core::{CairnError, ErrorCode};
use jsonc_parser::cst::{CstArray, CstNode};
use serde_json::Value;

use super::hook_groups::{self, array_prop, is_cairn_group, is_engram_group, prop_names, shell_quote};
use super::jsonc::{self, Config, Doc, drop_if_empty};
use super::{Answers, Plan, Status, Step, path_str};
use crate::cli::SetupArgs;

/// The plugin's hooks (`plugins/claude-code/hooks/hooks.json`), embedded so the events,
/// matchers and timeouts setup writes are the plugin's.
const HOOKS_JSON: &str = include_str!("../../../../plugins/claude-code/hooks/hooks.json");

/// What the MCP entry runs after the binary (as the plugin's `.mcp.json`).
const MCP_ARGS: [&str; 3] = ["mcp", "--tools=agent", "--host=claude-code"];

/// The allow rule `--permissions` adds: every tool of the `cairn` server.
pub const ALLOW_RULE: &str = "mcp__cairn__*";

/// Inputs of one run.
pub struct Options {
    pub binary: PathBuf,
    /// `$CLAUDE_CONFIG_DIR`, else `~/.claude`: holds `settings.json`.
    pub config_dir: PathBuf,
    /// `$CLAUDE_CONFIG_DIR/.claude.json`, else `~/.claude.json`: user-scope MCP servers.
    pub state_file: PathBuf,
    pub uninstall: bool,
    pub disable_engram: bool,
    pub permissions: bool,
}

impl Options {
    pub fn from_env(args: &SetupArgs, binary: &Path) -> Result<Options> {
        let (config_dir, state_file) = paths()?;
        Ok(Options {
            binary: binary.to_path_buf(),
            config_dir,
            state_file,
            uninstall: args.uninstall,
            disable_engram: args.disable_engram,
            permissions: args.permissions,
        })
    }
}

/// Claude Code's config dir and its state file (user-scope MCP servers).
pub fn paths() -> Result<(PathBuf, PathBuf)> {
    if let Some(dir) = std::env::var_os("CLAUDE_CONFIG_DIR").map(PathBuf::from)
        && dir.is_absolute()
    {
        let state = dir.join(".claude.json");
        return Ok((dir, state));
    }
    let home = super::home_dir()?;
    Ok((home.join(".claude"), home.join(".claude.json")))
}

/// The hook groups setup writes: the plugin's, each command running `bin`.
pub fn wanted_hooks(bin: &str) -> Vec<(String, Vec<Value>)> {
    let template: Value = serde_json::from_str(HOOKS_JSON).expect("hooks.json is JSON (a unit test checks it)");
    let program = shell_quote(bin);
    // the events in the file's order (serde_json sorts them)
    let doc = Doc::parse(Path::new("hooks.json"), HOOKS_JSON).expect("hooks.json parses");
    let events =
        doc.root_object(Path::new("hooks.json")).ok().and_then(|r| r.object_value("hooks")).map(|h| prop_names(&h));
    let mut out = Vec::new();
    for event in events.expect("hooks.json has `hooks`") {
        let mut groups = template["hooks"][&event].as_array().cloned().unwrap_or_default();
        for group in &mut groups {
            for hook in group["hooks"].as_array_mut().into_iter().flatten() {
                let command = hook["command"].as_str().unwrap_or_default();
                let rest = command.strip_prefix("cairn ").expect("hooks.json commands start with `cairn `");
                hook["command"] = Value::from(format!("{program} {rest}"));
            }
        }
        out.push((event, groups));
    }
    out
}

/// Everything `cairn setup claude-code` would do.
pub fn plan(o: &Options, answers: &Answers) -> Result<Plan> {
    let mut plan = Plan::default();
    let bin = path_str(&o.binary)?;
    if !o.uninstall && !o.config_dir.is_dir() && !o.state_file.is_file() {
        return Err(CairnError::new(
            ErrorCode::FileNotFound,
            format!(
                "Claude Code is not set up here: neither {} nor {} exists",
                o.config_dir.display(),
                o.state_file.display()
            ),
        )
        .with_hint("install Claude Code and start it once (it creates them), or set CLAUDE_CONFIG_DIR")
        .into());
    }

    // Parse both files before planning anything: a bad one stops the run with nothing changed.
    let settings = Config::open(o.config_dir.join("settings.json"))?;
    let state = Config::open(o.state_file.clone())?;
    let settings_root = settings.root();
    jsonc::object_prop(&settings.path, &settings_root, "hooks", "hooks")?;
    let servers = jsonc::object_prop(&state.path, &state.root(), "mcpServers", "mcpServers")?;

    // 1. hooks
    let status = hook_groups::plan(&settings.path, &settings_root, wanted_hooks(bin), o.uninstall)?;
    plan.steps.push(Step::new("hooks", status, Some(&settings.path)));
    // cairn's plugin runs the same hooks: both at once would run every hook twice
    if !o.uninstall
        && let Some(enabled) = settings_root.object_value("enabledPlugins")
    {
        for name in prop_names(&enabled).into_iter().filter(|n| n.starts_with("cairn@")) {
            if jsonc::value(&enabled, &name) == Some(Value::Bool(true)) {
                plan.warnings.push(format!(
                    "cairn's Claude Code plugin ({name}) is enabled too: every hook would run twice; keep one: \
                     `claude plugin disable {name}`, or `cairn setup claude-code --uninstall`"
                ));
            }
        }
    }

    // 2. permissions
    let allow_status = permissions(o, &settings, answers)?;
    if let Some(status) = allow_status {
        plan.steps.push(Step::new("permissions", status, Some(&settings.path)).detail(format!("allow {ALLOW_RULE}")));
    }

    // 3. mcpServers.cairn
    let status = if o.uninstall {
        match servers.as_ref().and_then(|s| s.get("cairn")) {
            Some(prop) => {
                prop.remove();
                drop_if_empty(&state.root(), "mcpServers");
                Status::Removed
            }
            None => Status::Absent,
        }
    } else {
        let servers = servers.clone().unwrap_or_else(|| state.root().object_value_or_set("mcpServers"));
        super::register_mcp_servers_entry(&state.path, &servers, bin, &MCP_ARGS, Some("stdio"))?
    };
    plan.steps.push(Step::new("mcp.cairn", status, Some(&state.path)));

    // 4. engram's Claude Code pieces: they would capture every session a second time.
    if !o.uninstall {
        engram(o, &settings, &state, answers, &mut plan)?;
    }

    plan.ops.extend(settings.op());
    plan.ops.extend(state.op());
    Ok(plan)
}

/// `permissions.allow` gains [`ALLOW_RULE`] when asked; uninstall takes it out again.
fn permissions(o: &Options, settings: &Config, answers: &Answers) -> Result<Option<Status>> {
    let root = settings.root();
    let perms = jsonc::object_prop(&settings.path, &root, "permissions", "permissions")?;
    let allow = match &perms {
        Some(p) => array_prop(&settings.path, p, "allow", "permissions.allow")?,
        None => None,
    };
    let ours: Vec<CstNode> = allow
        .iter()
        .flat_map(CstArray::elements)
        .filter(|e| e.to_serde_value().as_ref().and_then(Value::as_str) == Some(ALLOW_RULE))
        .collect();
    if o.uninstall {
        if ours.is_empty() {
            return Ok(None);
        }
        for node in ours {
            node.remove();
        }
        if let Some(p) = &perms {
            drop_if_empty(p, "allow");
        }
        drop_if_empty(&root, "permissions");
        return Ok(Some(Status::Removed));
    }
    if !ours.is_empty() {
        return Ok(Some(Status::Unchanged));
    }
    if !answers.ask(o.permissions, &format!("Let Claude Code use cairn's memory tools without asking ({ALLOW_RULE})?"))
    {
        return Ok(None);
    }
    let perms = perms.unwrap_or_else(|| root.object_value_or_set("permissions"));
    let allow = allow.unwrap_or_else(|| perms.array_value_or_set("allow"));
    allow.append(ALLOW_RULE.into());
    Ok(Some(Status::Created))
}

/// engram's MCP server, plugin and hooks: turned off when asked, else a warning that says how.
fn engram(o: &Options, settings: &Config, state: &Config, answers: &Answers, plan: &mut Plan) -> Result<()> {
    let servers = state.root().object_value("mcpServers");
    let server = servers.as_ref().and_then(|s| s.get("engram"));
    let plugins: Vec<String> = settings
        .root()
        .object_value("enabledPlugins")
        .map(|p| {
            prop_names(&p)
                .into_iter()
                .filter(|n| n.starts_with("engram@") && jsonc::value(&p, n) == Some(Value::Bool(true)))
                .collect()
        })
        .unwrap_or_default();
    let hooks = settings.root().object_value("hooks");
    let mut engram_groups: Vec<CstNode> = Vec::new();
    for event in hooks.as_ref().map(prop_names).unwrap_or_default() {
        if let Some(array) = hooks.as_ref().and_then(|h| h.array_value(&event)) {
            engram_groups.extend(
                array.elements().into_iter().filter(|e| e.to_serde_value().is_some_and(|v| is_engram_group(&v))),
            );
        }
    }
    if server.is_none() && plugins.is_empty() && engram_groups.is_empty() {
        return Ok(());
    }
    let disable = answers.ask(
        o.disable_engram,
        "engram is set up in Claude Code too: disable its MCP server, plugin and hooks so sessions are not captured twice?",
    );
    let status = if disable { Status::Disabled } else { Status::Found };
    if let Some(prop) = server {
        plan.steps.push(Step::new("mcp.engram", status, Some(&state.path)).detail(if disable {
            "removed (the backup keeps it)"
        } else {
            ""
        }));
        if disable {
            prop.remove();
        }
    }
    if let Some(enabled) = settings.root().object_value("enabledPlugins") {
        for name in &plugins {
            plan.steps.push(
                Step::new("engram plugin", status, Some(&settings.path)).detail(format!("enabledPlugins.\"{name}\"")),
            );
            if disable && let Some(p) = enabled.get(name) {
                p.set_value(false.into());
            }
        }
    }
    if !engram_groups.is_empty() {
        plan.steps.push(
            Step::new("engram hooks", status, Some(&settings.path))
                .detail(format!("{} matcher group(s) running engram", engram_groups.len())),
        );
        if disable {
            for node in engram_groups {
                node.remove();
            }
            if let Some(h) = &hooks {
                for event in prop_names(h) {
                    drop_if_empty(h, &event);
                }
            }
        }
    }
    for step in &mut plan.steps {
        if step.detail.as_deref() == Some("") {
            step.detail = None;
        }
    }
    if !disable {
        plan.warnings.push(
            "engram is still active in Claude Code: every session would be captured twice and the agent offered two sets of memory tools; \
             run `cairn setup claude-code --disable-engram`"
                .into(),
        );
    }
    Ok(())
}

/// `--plugin`: nothing changes; the steps are the commands that install cairn's plugin (they
/// need the network, so setup only prints them), and a warning when setup's own hooks are in
/// place too.
pub fn plugin_plan(config_dir: &Path) -> Plan {
    let mut plan = Plan::default();
    for command in [
        "claude plugin marketplace add <path or owner/repo of cairn's repository>",
        "claude plugin install cairn@cairn",
    ] {
        plan.steps.push(Step::new("plugin", Status::Skipped, None).detail(format!("run: {command}")));
    }
    let settings = config_dir.join("settings.json");
    let has_hooks = std::fs::read_to_string(&settings)
        .ok()
        .and_then(|t| Doc::parse(&settings, &t).ok()?.root.to_serde_value())
        .and_then(|v| v.get("hooks")?.as_object().cloned())
        .is_some_and(|h| h.values().filter_map(Value::as_array).flatten().any(is_cairn_group));
    if has_hooks {
        plan.warnings.push(format!(
            "cairn's hooks from `cairn setup claude-code` are in {}: with the plugin too every hook would run twice; \
             remove them with `cairn setup claude-code --uninstall`",
            settings.display()
        ));
    }
    plan.warnings.push("the plugin runs `cairn` from PATH: put the binary on it".into());
    plan
}

/// How Claude Code is wired to cairn, for `cairn doctor`: the MCP entry and the hooks.
pub fn wiring(binary: &Path) -> Option<super::Wiring> {
    let (config_dir, state_file) = paths().ok()?;
    if !config_dir.is_dir() && !state_file.is_file() {
        return None;
    }
    let read = |p: &Path| -> Option<Value> { serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok() };
    let command = read(&state_file).and_then(|v| v["mcpServers"]["cairn"]["command"].as_str().map(String::from));
    let settings_path = config_dir.join("settings.json");
    let settings = read(&settings_path);
    let events: Vec<String> = wanted_hooks("cairn").into_iter().map(|(event, _)| event).collect();
    let events: Vec<&str> = events.iter().map(String::as_str).collect();
    Some(super::Wiring::new(
        "claude-code",
        vec![
            super::wiring::Piece::running("mcp", &state_file, command, binary),
            hook_groups::piece(&settings_path, settings.as_ref().and_then(|v| v.get("hooks")), &events, binary),
        ],
    ))
}

#[cfg(test)]
mod tests {
    use super::super::hook_groups::hook_program;
    use super::*;

    #[test]
    fn the_plugins_hooks_become_commands_of_this_binary() {
        let hooks = wanted_hooks("/opt/my cairn/cairn");
        let events: Vec<&str> = hooks.iter().map(|(e, _)| e.as_str()).collect();
        assert!(events.contains(&"SessionStart") && events.contains(&"PostToolUse"), "{events:?}");
        for (event, groups) in &hooks {
            for g in groups {
                assert!(is_cairn_group(g), "{g}");
                assert_eq!(g["hooks"][0]["command"], format!("'/opt/my cairn/cairn' hook {event}"));
            }
        }
        assert_eq!(hook_program("'/a b/it'\\''s/cairn' hook Stop").as_deref(), Some("/a b/it's/cairn"));
        assert_eq!(hook_program("/usr/bin/cairn hook SessionStart").as_deref(), Some("/usr/bin/cairn"));
        assert!(!is_cairn_group(&serde_json::json!({"hooks": [{"command": "engram hook x"}]})));
        assert!(!is_cairn_group(&serde_json::json!({"hooks": [{"command": "echo hi"}]})));
        assert!(is_engram_group(&serde_json::json!({"hooks": [{"command": "bash ~/.engram/session-start.sh"}]})));
    }
}

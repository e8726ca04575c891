//! `cairn setup gemini` (Gemini CLI) and `cairn setup cursor`: cairn's MCP
//! server in the host's global `mcpServers` (JSON with comments, edited in place) and the
//! Memory Protocol where the host reads global instructions.
//!
//! Host facts (geminicli.com docs: configuration, GEMINI.md): user settings are
//! `~/.gemini/settings.json`, a stdio server is `mcpServers.<name>` `{command, args}`; the
//! global context file `~/.gemini/GEMINI.md` is added to every prompt (setup keeps its text in
//! a marked block there; `system.md` through `GEMINI_SYSTEM_MD` would *replace* the system
//! prompt, so it is not used). Cursor: the global `~/.cursor/mcp.json` holds `mcpServers`;
//! Cursor has no global rules file (rules are per project, `.cursor/rules/*.mdc`, or set in
//! its settings UI), so the protocol reaches it as the MCP server's instructions.
//!
//! Gemini CLI's lifecycle hooks (checked against 0.61) are `hooks` in the same settings.json,
//! in Claude Code's shape with its own event names and time limits in milliseconds; the
//! payloads are Claude Code's (`session_id`, `transcript_path`, `cwd`, `prompt`), and
//! `hookSpecificOutput.additionalContext` reaches the model (SessionStart's in front of the
//! first prompt as `<hook_context>`). `cairn hook --host=gemini` runs them: SessionStart
//! injects the project's context, BeforeAgent stores the prompt, AfterAgent archives the chat,
//! SessionEnd ends the session. `--permissions` sets `trust: true` on cairn's server (Gemini
//! CLI asks before each MCP tool call otherwise, and a headless `gemini -p` cannot ask).

use std::path::{Path, PathBuf};

use anyhow::Result;
use cairn_core::agent::ProtocolRequest;
use cairn_core::{CairnError, ErrorCode};

use super::hook_groups::{self, HookSpec};
use super::jsonc::{self, Config, drop_if_empty};
use super::{Answers, Plan, Status, Step, mdblock, path_str};

/// Gemini CLI's hooks setup writes (time limits in milliseconds).
const GEMINI_HOOKS: &[HookSpec] = &[
    HookSpec { event: "SessionStart", matcher: None, timeout: 5_000 },
    HookSpec { event: "BeforeAgent", matcher: None, timeout: 5_000 },
    HookSpec { event: "AfterAgent", matcher: None, timeout: 5_000 },
    HookSpec { event: "PreCompress", matcher: None, timeout: 5_000 },
    HookSpec { event: "SessionEnd", matcher: None, timeout: 2_000 },
];

/// One host of this shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Host {
    Gemini,
    Cursor,
}

impl Host {
    pub fn name(self) -> &'static str {
        match self {
            Self::Gemini => "gemini",
            Self::Cursor => "cursor",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Self::Gemini => "Gemini CLI",
            Self::Cursor => "Cursor",
        }
    }

    fn dir(self, home: &Path) -> PathBuf {
        match self {
            Self::Gemini => home.join(".gemini"),
            Self::Cursor => home.join(".cursor"),
        }
    }

    fn config(self, dir: &Path) -> PathBuf {
        match self {
            Self::Gemini => dir.join("settings.json"),
            Self::Cursor => dir.join("mcp.json"),
        }
    }

    fn args(self) -> [&'static str; 3] {
        match self {
            // (`--host=gemini` and `--host=mcp` give the whole protocol as instructions)
            Self::Gemini => ["mcp", "--tools=agent", "--host=gemini"],
            Self::Cursor => ["mcp", "--tools=agent", "--host=mcp"],
        }
    }
}

pub struct Options {
    pub host: Host,
    pub binary: PathBuf,
    /// `~/.gemini` or `~/.cursor`.
    pub dir: PathBuf,
    pub uninstall: bool,
    pub disable_engram: bool,
    /// Gemini CLI: cairn's MCP tools without asking (`trust: true` on its server).
    pub permissions: bool,
}

impl Options {
    pub fn from_env(host: Host, args: &crate::cli::SetupArgs, binary: &Path) -> Result<Options> {
        Ok(Options {
            host,
            binary: binary.to_path_buf(),
            dir: host.dir(&super::home_dir()?),
            uninstall: args.uninstall,
            disable_engram: args.disable_engram,
            permissions: args.permissions,
        })
    }
}

/// The Memory Protocol as `cairn protocol --host gemini` prints it.
pub fn protocol_text() -> String {
    let req = ProtocolRequest::parse(Some("gemini"), Some("agent"), Some("memory")).expect("known names");
    cairn_core::agent::protocol(req).text
}

/// Everything `cairn setup gemini|cursor` would do.
pub fn plan(o: &Options, answers: &Answers) -> Result<Plan> {
    let mut plan = Plan::default();
    let bin = path_str(&o.binary)?;
    if !o.uninstall && !o.dir.is_dir() {
        return Err(CairnError::new(
            ErrorCode::FileNotFound,
            format!("{} is not set up here: {} does not exist", o.host.title(), o.dir.display()),
        )
        .with_hint(format!("install {} and start it once (it creates it)", o.host.title()))
        .into());
    }
    let config = Config::open(o.host.config(&o.dir))?;
    let root = config.root();
    let servers = jsonc::object_prop(&config.path, &root, "mcpServers", "mcpServers")?;
    let status = if o.uninstall {
        match servers.as_ref().and_then(|s| s.get("cairn")) {
            Some(prop) => {
                prop.remove();
                drop_if_empty(&root, "mcpServers");
                Status::Removed
            }
            None => Status::Absent,
        }
    } else {
        let servers = servers.clone().unwrap_or_else(|| root.object_value_or_set("mcpServers"));
        super::register_mcp_servers_entry(&config.path, &servers, bin, &o.host.args(), None)?
    };
    plan.steps.push(Step::new("mcp.cairn", status, Some(&config.path)));
    if o.host == Host::Gemini {
        if let Some(status) = trust(o, &root, answers) {
            plan.steps.push(Step::new("permissions", status, Some(&config.path)).detail("mcpServers.cairn.trust"));
        }
        let wanted = hook_groups::groups(bin, "gemini", GEMINI_HOOKS);
        let status = hook_groups::plan(&config.path, &root, wanted, o.uninstall)?;
        plan.steps.push(Step::new("hooks", status, Some(&config.path)));
    }

    if !o.uninstall
        && let Some(servers) = &servers
        && let Some(engram) = servers.get("engram")
    {
        let disable = answers.ask(
            o.disable_engram,
            &format!("engram is set up in {} too: remove its MCP server so the agent has one memory?", o.host.title()),
        );
        if disable {
            engram.remove();
            plan.steps.push(
                Step::new("mcp.engram", Status::Disabled, Some(&config.path)).detail("removed (the backup keeps it)"),
            );
        } else {
            plan.steps.push(Step::new("mcp.engram", Status::Found, Some(&config.path)));
            plan.warnings.push(format!(
                "engram is still set up in {}: the agent is offered two memories; run `cairn setup {} --disable-engram`",
                o.host.title(),
                o.host.name()
            ));
        }
    }
    plan.ops.extend(config.op());

    if o.host == Host::Gemini {
        mdblock::plan(&mut plan, "GEMINI.md", &o.dir.join("GEMINI.md"), &protocol_text(), o.uninstall)?;
    }
    Ok(plan)
}

/// `--permissions` (Gemini CLI): `trust: true` on cairn's server, so its tools run without a
/// confirmation. `None`: not asked for and not there.
fn trust(o: &Options, root: &jsonc_parser::cst::CstObject, answers: &Answers) -> Option<Status> {
    if o.uninstall {
        return None;
    }
    let entry = root.object_value("mcpServers")?.object_value("cairn")?;
    if jsonc::value(&entry, "trust") == Some(serde_json::Value::Bool(true)) {
        return Some(Status::Unchanged);
    }
    if !answers.ask(o.permissions, "Let Gemini CLI use cairn's memory tools without asking?") {
        return None;
    }
    match entry.get("trust") {
        Some(prop) => prop.set_value(true.into()),
        None => {
            entry.append("trust", true.into());
        }
    }
    Some(Status::Created)
}

/// How the host is wired to cairn, for `cairn doctor`: the MCP entry, and Gemini CLI's hooks
/// and GEMINI.md block.
pub fn wiring(host: Host, binary: &Path) -> Option<super::Wiring> {
    use super::wiring::{Piece, block_is_current};
    let dir = host.dir(&super::home_dir().ok()?);
    if !dir.is_dir() {
        return None;
    }
    let path = host.config(&dir);
    let value =
        std::fs::read_to_string(&path).ok().and_then(|t| jsonc::Doc::parse(&path, &t).ok()?.root.to_serde_value());
    let command = value.as_ref().and_then(|v| v["mcpServers"]["cairn"]["command"].as_str().map(String::from));
    let mut pieces = vec![Piece::running("mcp", &path, command, binary)];
    if host == Host::Gemini {
        let events: Vec<&str> = GEMINI_HOOKS.iter().map(|h| h.event).collect();
        pieces.push(hook_groups::piece(&path, value.as_ref().and_then(|v| v.get("hooks")), &events, binary));
        let md = dir.join("GEMINI.md");
        let text = std::fs::read_to_string(&md).ok();
        pieces.push(Piece::instructions(&md, block_is_current(text.as_deref(), &protocol_text())));
    }
    Some(super::Wiring::new(host.name(), pieces))
}

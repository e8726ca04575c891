//! `cairn setup <host>` for the rest of the hosts engram's setup knows: each only needs cairn's
//! MCP server in its JSON config and the Memory Protocol where it reads global instructions,
//! so each is a row of [`HOSTS`] (paths and shapes as engram's setup writes them, checked
//! against each host's documentation) planned by one function. None of them is run in its real
//! binary by cairn's tests: golden files prove what setup writes (docs/CONNECTING-AGENTS.md).
//!
//! Pi has no MCP client (engram ships a Pi package of its own): setup plans nothing for it and
//! says so.

use std::path::{Path, PathBuf};

use anyhow::Result;
use cairn_core::agent::ProtocolRequest;
use cairn_core::{CairnError, ErrorCode};
use jsonc_parser::cst::CstObject;
use serde_json::Value;

use super::jsonc::{self, Config, drop_if_empty};
use super::{FileOp, Plan, Status, Step, mdblock, path_str, read_config};

/// What the MCP entry runs after the binary: the whole protocol as the server's instructions.
const MCP_ARGS: [&str; 3] = ["mcp", "--tools=agent", "--host=mcp"];

/// How a host keeps its MCP servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `mcpServers.<name>: {command, args}` (most hosts).
    McpServers,
    /// `servers.<name>: {type: "stdio", command, args}` (VS Code).
    Servers,
    /// `mcp.<name>: {type: "local", command: [bin, ...args], enabled: true}` (Kilo Code, OpenCode's shape).
    OpenCodeMcp,
    /// `mcpServers.<name>: {transport: "stdio", enabled: true, command, args}` (CommandCode).
    CommandCode,
}

impl Shape {
    fn key(self) -> &'static str {
        match self {
            Self::Servers => "servers",
            Self::OpenCodeMcp => "mcp",
            Self::McpServers | Self::CommandCode => "mcpServers",
        }
    }
}

/// How the protocol reaches the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instructions {
    /// cairn's marked block in a file the user may also write in.
    Block(&'static str),
    /// A file of cairn's own (with a header the host needs before the text, if any).
    Whole(&'static str, &'static str),
}

/// Where a host's files live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// A directory under HOME.
    Home(&'static str),
    /// A directory under the XDG config home (`~/.config`).
    XdgConfig(&'static str),
    /// `$<VAR>` when absolute, else a directory under HOME.
    EnvOrHome(&'static str, &'static str),
}

/// One host.
#[derive(Debug, Clone, Copy)]
pub struct HostSpec {
    /// Its name on the command line (engram's).
    pub name: &'static str,
    pub title: &'static str,
    /// Its directory: it must exist (the host ran here) before setup writes into it.
    pub root: Root,
    /// The MCP config, relative to the directory; `None`: the host has no MCP client.
    pub config: Option<&'static str>,
    pub shape: Shape,
    pub instructions: Option<Instructions>,
}

/// engram's hosts beyond the five with modules of their own.
pub const HOSTS: &[HostSpec] = &[
    HostSpec {
        name: "pi",
        title: "Pi",
        root: Root::EnvOrHome("PI_CODING_AGENT_DIR", ".pi/agent"),
        config: None,
        shape: Shape::McpServers,
        instructions: None,
    },
    HostSpec {
        name: "antigravity-cli",
        title: "Antigravity",
        root: Root::Home(".gemini"),
        config: Some("config/mcp_config.json"),
        shape: Shape::McpServers,
        instructions: Some(Instructions::Block("GEMINI.md")),
    },
    HostSpec {
        name: "windsurf",
        title: "Windsurf",
        root: Root::Home(".codeium/windsurf"),
        config: Some("mcp_config.json"),
        shape: Shape::McpServers,
        instructions: Some(Instructions::Block("memories/global_rules.md")),
    },
    HostSpec {
        name: "qwen",
        title: "Qwen Code",
        root: Root::Home(".qwen"),
        config: Some("settings.json"),
        shape: Shape::McpServers,
        instructions: Some(Instructions::Block("QWEN.md")),
    },
    HostSpec {
        name: "kiro",
        title: "Kiro",
        root: Root::Home(".kiro"),
        config: Some("settings/mcp.json"),
        shape: Shape::McpServers,
        instructions: Some(Instructions::Whole("steering/cairn.md", "")),
    },
    HostSpec {
        name: "vscode-copilot",
        title: "VS Code (Copilot)",
        root: Root::XdgConfig("Code/User"),
        config: Some("mcp.json"),
        shape: Shape::Servers,
        instructions: Some(Instructions::Whole("prompts/cairn.instructions.md", "---\napplyTo: \"**\"\n---\n\n")),
    },
    HostSpec {
        name: "kilocode",
        title: "Kilo Code",
        root: Root::XdgConfig("kilo"),
        config: Some("opencode.json"),
        shape: Shape::OpenCodeMcp,
        instructions: Some(Instructions::Block("AGENTS.md")),
    },
    HostSpec {
        name: "commandcode",
        title: "CommandCode",
        root: Root::Home(".commandcode"),
        config: Some("mcp.json"),
        shape: Shape::CommandCode,
        instructions: Some(Instructions::Block("AGENTS.md")),
    },
    HostSpec {
        name: "cline",
        title: "Cline",
        root: Root::Home(".cline"),
        config: Some("data/settings/cline_mcp_settings.json"),
        shape: Shape::McpServers,
        instructions: Some(Instructions::Whole("rules/cairn.md", "")),
    },
    HostSpec {
        name: "kimi",
        title: "Kimi Code",
        root: Root::EnvOrHome("KIMI_CODE_HOME", ".kimi-code"),
        config: Some("mcp.json"),
        shape: Shape::McpServers,
        instructions: Some(Instructions::Block("AGENTS.md")),
    },
];

/// The host named `name`.
pub fn spec(name: &str) -> &'static HostSpec {
    HOSTS.iter().find(|h| h.name == name).expect("every SetupAgent of this module has a row")
}

impl HostSpec {
    /// The host's directory in this HOME.
    pub fn dir(&self) -> Result<PathBuf> {
        Ok(match self.root {
            Root::Home(rel) => super::home_dir()?.join(rel),
            Root::XdgConfig(rel) => super::config_home()?.join(rel),
            Root::EnvOrHome(var, rel) => match std::env::var_os(var).map(PathBuf::from) {
                Some(dir) if dir.is_absolute() => dir,
                _ => super::home_dir()?.join(rel),
            },
        })
    }
}

/// The text the instructions hold: the protocol as any MCP client gets it (Antigravity shares
/// Gemini CLI's GEMINI.md, so it gets Gemini's text: the two setups keep one block).
fn protocol_text(spec: &HostSpec) -> String {
    if spec.name == "antigravity-cli" {
        return super::gemini_cursor::protocol_text();
    }
    let req = ProtocolRequest::parse(Some("mcp"), Some("agent"), Some("memory")).expect("known names");
    cairn_core::agent::protocol(req).text
}

/// Everything `cairn setup <host>` would do for a host of [`HOSTS`].
pub fn plan(spec: &HostSpec, binary: &Path, uninstall: bool) -> Result<Plan> {
    let mut plan = Plan::default();
    let bin = path_str(binary)?;
    let dir = spec.dir()?;
    if !uninstall && !dir.is_dir() {
        return Err(CairnError::new(
            ErrorCode::FileNotFound,
            format!("{} is not set up here: {} does not exist", spec.title, dir.display()),
        )
        .with_hint(format!("install {} and start it once (it creates it)", spec.title))
        .into());
    }
    let Some(config) = spec.config else {
        plan.steps.push(Step::new("mcp.cairn", Status::Skipped, Some(&dir)).detail("Pi has no MCP client"));
        plan.warnings.push(format!(
            "{} has no MCP client: cairn has no package for it yet, so nothing is written (cairn's CLI works from its shell)",
            spec.title
        ));
        return Ok(plan);
    };
    let config = Config::open(dir.join(config))?;
    let root = config.root();
    let servers = jsonc::object_prop(&config.path, &root, spec.shape.key(), spec.shape.key())?;
    let status = if uninstall {
        match servers.as_ref().and_then(|s| s.get("cairn")) {
            Some(prop) => {
                prop.remove();
                drop_if_empty(&root, spec.shape.key());
                Status::Removed
            }
            None => Status::Absent,
        }
    } else {
        let servers = servers.unwrap_or_else(|| root.object_value_or_set(spec.shape.key()));
        register(spec.shape, &config.path, &servers, bin)?
    };
    plan.steps.push(Step::new("mcp.cairn", status, Some(&config.path)));
    plan.ops.extend(config.op());
    match spec.instructions {
        Some(Instructions::Block(rel)) => {
            mdblock::plan(&mut plan, "instructions", &dir.join(rel), &protocol_text(spec), uninstall)?;
        }
        Some(Instructions::Whole(rel, header)) => {
            whole_file(&mut plan, &dir.join(rel), &format!("{header}{}", protocol_text(spec)), uninstall)?;
        }
        None => {}
    }
    Ok(plan)
}

/// cairn's entry in `servers`, in the host's shape; an entry of cairn's pointing at another
/// binary is repointed, anything else of the user's in it is kept.
fn register(shape: Shape, path: &Path, servers: &CstObject, bin: &str) -> Result<Status> {
    match shape {
        Shape::McpServers => super::register_mcp_servers_entry(path, servers, bin, &MCP_ARGS, None),
        Shape::Servers => super::register_mcp_servers_entry(path, servers, bin, &MCP_ARGS, Some("stdio")),
        Shape::OpenCodeMcp | Shape::CommandCode => {
            let wanted = entry(shape, bin);
            let Some(prop) = servers.get("cairn") else {
                servers.append(
                    "cairn",
                    jsonc::to_input_ordered(&wanted, &["type", "transport", "enabled", "command", "args"]),
                );
                return Ok(Status::Created);
            };
            let Some(current) = prop.object_value() else {
                return Err(jsonc::invalid(
                    path,
                    format!("has `{}.cairn` but it is not an object", shape.key()),
                    "fix it by hand (or delete it) and run again; the file was not changed",
                ));
            };
            if jsonc::value(&current, "command") == wanted.get("command").cloned() {
                return Ok(Status::Unchanged);
            }
            match current.get("command") {
                Some(c) => c.set_value(jsonc::to_input(&wanted["command"])),
                None => {
                    current.append("command", jsonc::to_input(&wanted["command"]));
                }
            }
            Ok(Status::Updated)
        }
    }
}

/// A new entry of `shape` (the shapes with fields beyond `command` and `args`).
fn entry(shape: Shape, bin: &str) -> Value {
    match shape {
        Shape::OpenCodeMcp => {
            let mut command = vec![Value::from(bin)];
            command.extend(MCP_ARGS.iter().map(|a| Value::from(*a)));
            serde_json::json!({"type": "local", "command": command, "enabled": true})
        }
        _ => serde_json::json!({"transport": "stdio", "enabled": true, "command": bin, "args": MCP_ARGS}),
    }
}

/// A file of cairn's own: written when absent or different, removed by uninstall.
fn whole_file(plan: &mut Plan, path: &Path, text: &str, uninstall: bool) -> Result<()> {
    let before = read_config(path)?;
    if uninstall {
        let status = if before.is_some() { Status::Removed } else { Status::Absent };
        if before.is_some() {
            plan.ops.push(FileOp::Remove { path: path.to_path_buf() });
        }
        plan.steps.push(Step::new("instructions", status, Some(path)));
        return Ok(());
    }
    let status = match &before {
        None => Status::Created,
        Some(b) if b == text => Status::Unchanged,
        Some(_) => Status::Updated,
    };
    if status != Status::Unchanged {
        plan.ops.push(FileOp::Write { path: path.to_path_buf(), contents: text.as_bytes().to_vec() });
    }
    plan.steps.push(Step::new("instructions", status, Some(path)));
    Ok(())
}

/// How a host of [`HOSTS`] is wired to cairn, for `cairn doctor`: the MCP entry and the
/// instructions.
pub fn wiring(spec: &'static HostSpec, binary: &Path) -> Option<super::Wiring> {
    use super::wiring::{Piece, block_is_current};
    let dir = spec.dir().ok()?;
    if !dir.is_dir() {
        return None;
    }
    let path = dir.join(spec.config?);
    let value =
        std::fs::read_to_string(&path).ok().and_then(|t| jsonc::Doc::parse(&path, &t).ok()?.root.to_serde_value());
    let entry = value.as_ref().map(|v| &v[spec.shape.key()]["cairn"]);
    let command = entry.and_then(|e| match &e["command"] {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => parts.first().and_then(Value::as_str).map(str::to_owned),
        _ => None,
    });
    let mut pieces = vec![Piece::running("mcp", &path, command, binary)];
    match spec.instructions {
        Some(Instructions::Block(rel)) => {
            let text = std::fs::read_to_string(dir.join(rel)).ok();
            pieces.push(Piece::instructions(&dir.join(rel), block_is_current(text.as_deref(), &protocol_text(spec))));
        }
        Some(Instructions::Whole(rel, header)) => {
            let text = std::fs::read_to_string(dir.join(rel)).ok();
            let wanted = format!("{header}{}", protocol_text(spec));
            pieces.push(Piece::instructions(&dir.join(rel), text.map(|t| t == wanted)));
        }
        None => {}
    }
    Some(super::Wiring::new(spec.name, pieces))
}

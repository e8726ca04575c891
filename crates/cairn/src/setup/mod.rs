//! `cairn setup <agent>`: connect an agent host to cairn.
//!
//! Every host follows the same shape: read what is there, plan every change as data
//! ([`Plan`]: steps for people and `--json`, file operations for the machine), then apply the
//! plan or, with `--dry-run`, only show it. Applying writes every new file to a temporary file
//! beside its target first, so a directory that cannot be written fails before anything
//! changed; each file that is edited or removed is copied to `<file>.cairn-backup-<time>`
//! first. A run that finds everything in place changes nothing and says so.
//!
//! One module per host (`opencode.rs`, `claude_code.rs`, `codex.rs`; `gemini_cursor.rs` does
//! Gemini CLI and Cursor; `more_hosts.rs` the rest of engram's hosts, one table row each), each
//! with a [`crate::cli::SetupAgent`] variant and a `wiring` function for `cairn doctor`;
//! `hook_groups.rs` is the hooks object Claude Code, Codex and Gemini CLI share.

pub mod claude_code;
pub mod codex;
pub mod engram_history;
pub mod gemini_cursor;
pub mod hook_groups;
pub mod jsonc;
pub mod mdblock;
pub mod more_hosts;
pub mod opencode;
pub mod wiring;

pub use wiring::Wiring;

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Result;
use cairn_core::{CairnError, ErrorCode};
use serde::Serialize;

use crate::cli::{SetupAgent, SetupArgs};
use crate::env::Env;
use crate::output::note;

/// What became (or would become) of one thing setup looks after.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Created,
    Updated,
    Unchanged,
    Removed,
    /// Not there, nothing to do.
    Absent,
    /// Found and left alone (engram's pieces without `--disable-engram`).
    Found,
    Disabled,
    AlreadyDisabled,
    Imported,
    Skipped,
}

impl Status {
    fn changes(self) -> bool {
        matches!(self, Self::Created | Self::Updated | Self::Removed | Self::Disabled | Self::Imported)
    }

    fn label(self, dry_run: bool) -> &'static str {
        match (self, dry_run) {
            (Self::Created, false) => "created",
            (Self::Created, true) => "would create",
            (Self::Updated, false) => "updated",
            (Self::Updated, true) => "would update",
            (Self::Removed, false) => "removed",
            (Self::Removed, true) => "would remove",
            (Self::Disabled, false) => "disabled",
            (Self::Disabled, true) => "would disable",
            (Self::Imported, false) => "imported",
            (Self::Imported, true) => "would import",
            (Self::Unchanged, _) => "unchanged",
            (Self::Absent, _) => "absent",
            (Self::Found, _) => "found",
            (Self::AlreadyDisabled, _) => "already off",
            (Self::Skipped, _) => "skipped",
        }
    }
}

/// One line of the plan.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    /// What it is about: `plugin`, `mcp.cairn`, `engram plugin`, `mcp.engram`, `engram import`.
    pub item: String,
    pub status: Status,
    pub path: Option<PathBuf>,
    /// Where the file was copied before it was edited or removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backup: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Step {
    pub fn new(item: &str, status: Status, path: Option<&Path>) -> Step {
        Step { item: item.into(), status, path: path.map(Path::to_path_buf), backup: None, detail: None }
    }

    pub fn detail(mut self, detail: impl Into<String>) -> Step {
        self.detail = Some(detail.into());
        self
    }
}

/// A change to the file system.
#[derive(Debug, Clone)]
pub enum FileOp {
    /// Create or replace the file with these bytes (parent directories are created).
    Write { path: PathBuf, contents: Vec<u8> },
    /// Delete the file (after a backup).
    Remove { path: PathBuf },
    /// Move the file aside (engram's plugin → `.disabled`); nothing is lost, so no backup.
    Rename { from: PathBuf, to: PathBuf },
}

impl FileOp {
    fn target(&self) -> &Path {
        match self {
            Self::Write { path, .. } | Self::Remove { path } => path,
            Self::Rename { from, .. } => from,
        }
    }
}

/// Everything one `cairn setup` run does, before it does it.
#[derive(Debug, Default)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub ops: Vec<FileOp>,
    pub warnings: Vec<String>,
    /// engram's database, to import after the files are in place.
    pub import_engram: Option<PathBuf>,
}

/// The result `--json` prints.
#[derive(Debug, Serialize)]
pub struct Report {
    pub agent: &'static str,
    pub action: &'static str,
    pub dry_run: bool,
    /// Whether anything changed (or, with `--dry-run`, would change).
    pub changed: bool,
    /// The cairn binary the host is pointed at.
    pub binary: PathBuf,
    pub steps: Vec<Step>,
    pub warnings: Vec<String>,
    /// With `--dry-run`: a unified diff of each config file that would be edited.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub diffs: Vec<FileDiff>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engram_import: Option<serde_json::Value>,
}

#[derive(Debug, Serialize)]
pub struct FileDiff {
    pub path: PathBuf,
    pub diff: String,
}

/// A new file longer than this (a plugin's source) is not shown in full; nor is a new
/// TypeScript file (the OpenCode plugin's modules, short or not: cairn's code, not a config).
const NEW_FILE_LINES: usize = 60;

/// The unified diff of each file the plan writes: edits, and new config files, in full.
fn diffs(plan: &Plan) -> Vec<FileDiff> {
    plan.ops
        .iter()
        .filter_map(|op| match op {
            FileOp::Write { path, contents } => {
                let new = String::from_utf8_lossy(contents);
                let old = std::fs::read(path).ok();
                let source = path.extension().is_some_and(|e| e == "ts");
                let diff = if old.is_none() && source {
                    "new file (not shown: the plugin's source)\n".to_owned()
                } else if old.is_none() && new.lines().count() > NEW_FILE_LINES {
                    format!("new file (not shown: over {NEW_FILE_LINES} lines)\n")
                } else {
                    let old = String::from_utf8_lossy(old.as_deref().unwrap_or_default());
                    let name = path.display().to_string();
                    similar::TextDiff::from_lines(&old, &new)
                        .unified_diff()
                        .context_radius(3)
                        .header(if old.is_empty() { "/dev/null" } else { &name }, &name)
                        .to_string()
                };
                Some(FileDiff { path: path.clone(), diff })
            }
            FileOp::Remove { .. } | FileOp::Rename { .. } => None,
        })
        .collect()
}

/// How questions are answered: flags first, then the user when stdin is a terminal.
pub struct Answers {
    pub yes: bool,
    pub interactive: bool,
}

impl Answers {
    /// `flag` set or `--yes` → yes; a terminal → ask; else no.
    pub fn ask(&self, flag: bool, question: &str) -> bool {
        if flag || self.yes {
            return true;
        }
        if !self.interactive {
            return false;
        }
        let _ = write!(std::io::stderr().lock(), "{question} [y/N] ");
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line).is_err() {
            return false;
        }
        matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
    }
}

/// Where the host configs live: `$XDG_CONFIG_HOME`, else `~/.config` (OpenCode uses the XDG
/// layout on every platform).
pub fn config_home() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from)
        && dir.is_absolute()
    {
        return Ok(dir);
    }
    Ok(home_dir()?.join(".config"))
}

pub fn home_dir() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .ok_or_else(|| {
            CairnError::new(ErrorCode::InvalidConfig, "cannot find the home directory: HOME is not set").into()
        })
}

/// The running binary, absolute and with symlinks resolved: hosts start it by this path, so
/// it must not depend on their PATH (engram #100).
pub fn current_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    Ok(std::fs::canonicalize(&exe).unwrap_or(exe))
}

/// The path as a UTF-8 string, as host configs need it.
pub fn path_str(path: &Path) -> Result<&str> {
    path.to_str().ok_or_else(|| {
        CairnError::new(ErrorCode::InvalidArgument, format!("path is not valid UTF-8: {}", path.display())).into()
    })
}

/// Add `servers.cairn` = `{type?, command: bin, args}` (the `mcpServers` shape of Claude
/// Code, Gemini CLI and Cursor), or point an existing local entry at this binary, keeping the
/// user's other arguments and fields (an entry of cairn's `cairn mcp` without `--host` gains
/// the last of `args`). An entry with a `url` (cairn's daemon over HTTP) is left alone.
pub fn register_mcp_servers_entry(
    path: &Path,
    servers: &jsonc_parser::cst::CstObject,
    bin: &str,
    args: &[&str],
    kind: Option<&str>,
) -> Result<Status> {
    use jsonc_parser::cst::CstInputValue;
    use serde_json::Value;
    let args_input = || CstInputValue::Array(args.iter().map(|a| (*a).into()).collect());
    let Some(prop) = servers.get("cairn") else {
        let mut fields: Vec<(String, CstInputValue)> = Vec::new();
        if let Some(kind) = kind {
            fields.push(("type".into(), kind.into()));
        }
        fields.push(("command".into(), bin.into()));
        fields.push(("args".into(), args_input()));
        servers.append("cairn", CstInputValue::Object(fields));
        return Ok(Status::Created);
    };
    let Some(entry) = prop.object_value() else {
        return Err(jsonc::invalid(
            path,
            "has `mcpServers.cairn` but it is not an object".into(),
            "fix it by hand (or delete it) and run again; the file was not changed",
        ));
    };
    if entry.get("url").is_some()
        || entry.get("httpUrl").is_some()
        || jsonc::value(&entry, "type").as_ref().and_then(Value::as_str).is_some_and(|t| t != "stdio")
    {
        return Ok(Status::Unchanged);
    }
    let mut status = Status::Unchanged;
    if jsonc::value(&entry, "command").as_ref().and_then(Value::as_str) != Some(bin) {
        match entry.get("command") {
            Some(c) => c.set_value(bin.into()),
            None => {
                entry.append("command", bin.into());
            }
        }
        status = Status::Updated;
    }
    let current = jsonc::value(&entry, "args");
    let wanted = match &current {
        Some(Value::Array(items)) => {
            let strs: Vec<&str> = items.iter().filter_map(Value::as_str).collect();
            let has_host = strs.iter().any(|a| *a == "--host" || a.starts_with("--host="));
            (strs.first() == Some(&"mcp") && !has_host).then(|| {
                let mut v = items.clone();
                v.extend(args.last().map(|a| Value::from(*a)));
                Value::Array(v)
            })
        }
        _ => Some(args.iter().map(|a| Value::from(*a)).collect()),
    };
    if let Some(wanted) = wanted {
        match entry.get("args") {
            Some(a) => a.set_value(jsonc::to_input(&wanted)),
            None => {
                entry.append("args", jsonc::to_input(&wanted));
            }
        }
        status = Status::Updated;
    }
    Ok(status)
}

/// Read a config file setup may edit: `None` when absent. A file setup could not replace
/// in place (a symlink, which a rename would turn into a plain file; a read-only file) or
/// cannot read is refused before anything is planned.
pub fn read_config(path: &Path) -> Result<Option<String>> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(jsonc::invalid(path, format!("cannot be read: {e}"), "check its permissions")),
    };
    if meta.file_type().is_symlink() {
        return Err(jsonc::invalid(
            path,
            "is a symbolic link".into(),
            "setup replaces files whole and would turn the link into a copy: edit the file it points to by hand, or run setup with the link replaced by the file",
        ));
    }
    if !meta.is_file() {
        return Err(jsonc::invalid(path, "is not a file".into(), "move it away and run again"));
    }
    if meta.permissions().readonly() {
        return Err(CairnError::new(ErrorCode::DataDirNotWritable, format!("{} is read-only", path.display()))
            .with_hint("make it writable (chmod u+w) and run again; nothing was changed")
            .into());
    }
    let bytes = std::fs::read(path)
        .map_err(|e| jsonc::invalid(path, format!("cannot be read: {e}"), "check its permissions"))?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| jsonc::invalid(path, "is not UTF-8".into(), "fix the file (or move it away) and run again"))
}

/// The wiring of every host installed in this HOME.
pub fn wirings() -> Vec<Wiring> {
    let Ok(binary) = current_binary() else { return Vec::new() };
    [
        claude_code::wiring(&binary),
        codex::wiring(&binary),
        gemini_cursor::wiring(gemini_cursor::Host::Gemini, &binary),
        gemini_cursor::wiring(gemini_cursor::Host::Cursor, &binary),
        opencode::wiring(&binary),
    ]
    .into_iter()
    .chain(more_hosts::HOSTS.iter().map(|spec| more_hosts::wiring(spec, &binary)))
    .flatten()
    .collect()
}

/// `cairn setup <agent>`.
pub fn run(env: &Env, args: SetupArgs) -> Result<()> {
    let binary = current_binary()?;
    let answers = Answers {
        yes: args.yes,
        interactive: !args.dry_run && !env.json && std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
    };
    if args.plugin && !matches!(args.agent, SetupAgent::ClaudeCode) {
        return Err(CairnError::new(ErrorCode::InvalidArgument, "--plugin is for claude-code only").into());
    }
    let (agent, mut plan) = match args.agent {
        SetupAgent::Opencode => ("opencode", {
            let options = opencode::Options::from_env(&args, &binary, &env.settings.data_dir.value)?;
            opencode::plan(&options, &answers)?
        }),
        SetupAgent::ClaudeCode if args.plugin => ("claude-code", claude_code::plugin_plan(&claude_code::paths()?.0)),
        SetupAgent::ClaudeCode => {
            ("claude-code", claude_code::plan(&claude_code::Options::from_env(&args, &binary)?, &answers)?)
        }
        SetupAgent::Codex => ("codex", codex::plan(&codex::Options::from_env(&args, &binary)?, &answers)?),
        SetupAgent::Gemini | SetupAgent::Cursor => {
            let host = if matches!(args.agent, SetupAgent::Gemini) {
                gemini_cursor::Host::Gemini
            } else {
                gemini_cursor::Host::Cursor
            };
            (host.name(), gemini_cursor::plan(&gemini_cursor::Options::from_env(host, &args, &binary)?, &answers)?)
        }
        SetupAgent::Pi
        | SetupAgent::AntigravityCli
        | SetupAgent::Windsurf
        | SetupAgent::Qwen
        | SetupAgent::Kiro
        | SetupAgent::VscodeCopilot
        | SetupAgent::Kilocode
        | SetupAgent::Commandcode
        | SetupAgent::Cline
        | SetupAgent::Kimi => {
            let spec = more_hosts::spec(args.agent.more_host().unwrap_or_default());
            (spec.name, more_hosts::plan(spec, &binary, args.uninstall)?)
        }
    };
    let changed = plan.steps.iter().any(|s| s.status.changes());
    let diffs = if args.dry_run { diffs(&plan) } else { Vec::new() };
    if !args.dry_run {
        apply(&mut plan)?;
    }
    let mut engram_import = None;
    if let Some(db) = plan.import_engram.take()
        && !args.dry_run
    {
        let report: cairn_core::transfer::ImportReport = env.call(cairn_core::ops::ImportEngramRequest { path: db })?;
        engram_import = Some(serde_json::to_value(&report)?);
    }
    let report = Report {
        agent,
        action: if args.plugin {
            "plugin"
        } else if args.uninstall {
            "uninstall"
        } else {
            "install"
        },
        dry_run: args.dry_run,
        changed,
        binary,
        steps: plan.steps,
        warnings: plan.warnings,
        diffs,
        engram_import,
    };
    for w in &report.warnings {
        note(&format!("warning: {w}"));
    }
    env.emit(&report, render)
}

/// The human summary: one line per step, then what to do next.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    if report.action == "plugin" {
        out.push_str(&format!("cairn setup {} --plugin: nothing is changed; install the plugin with\n", report.agent));
        for step in &report.steps {
            if let Some(command) = step.detail.as_deref().and_then(|d| d.strip_prefix("run: ")) {
                out.push_str(&format!("  {command}\n"));
            }
        }
        return out;
    }
    let uninstall = if report.action == "uninstall" { " --uninstall" } else { "" };
    let dry = if report.dry_run { " (dry run: nothing is changed)" } else { "" };
    out.push_str(&format!("cairn setup {}{uninstall}{dry}\n", report.agent));
    out.push_str(&format!("  binary: {}\n", report.binary.display()));
    for step in &report.steps {
        let path = step.path.as_ref().map(|p| format!("  {}", p.display())).unwrap_or_default();
        out.push_str(&format!("  {:<13} {:<14}{path}\n", step.status.label(report.dry_run), step.item));
        if let Some(detail) = &step.detail {
            out.push_str(&format!("                {detail}\n"));
        }
        if let Some(backup) = &step.backup {
            out.push_str(&format!("                backup: {}\n", backup.display()));
        }
    }
    for d in &report.diffs {
        out.push_str(&format!("\n{}:\n{}", d.path.display(), d.diff));
    }
    let (host, what) = match report.agent {
        "claude-code" => ("Claude Code", "the hooks and the MCP server"),
        "codex" => ("Codex", "the MCP server, the hooks and the compaction prompt"),
        "gemini" => ("Gemini CLI", "the MCP server, the hooks and GEMINI.md"),
        "cursor" => ("Cursor", "the MCP server"),
        "opencode" => ("OpenCode", "the plugin and the MCP server"),
        other => (
            more_hosts::HOSTS.iter().find(|h| h.name == other).map_or(other, |h| h.title),
            "the MCP server and the instructions",
        ),
    };
    if !report.changed {
        out.push_str("Nothing to change: everything is already in place.\n");
    } else if report.dry_run {
        out.push_str("Run again without --dry-run to apply.\n");
    } else if report.action == "install" {
        out.push_str(&format!("Restart {host} to load {what}.\n"));
    } else {
        out.push_str(&format!("Restart {host} to unload cairn.\n"));
    }
    out
}

/// Apply the file operations: temporary files first (a directory that cannot be written
/// fails here, before anything changed), then backups, then the moves into place.
fn apply(plan: &mut Plan) -> Result<()> {
    let stamp = backup_stamp();
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
    let cleanup = |staged: &[(PathBuf, PathBuf)]| {
        for (tmp, _) in staged {
            let _ = std::fs::remove_file(tmp);
        }
    };
    for op in &plan.ops {
        if let FileOp::Write { path, contents } = op {
            match stage(path, contents) {
                Ok(tmp) => staged.push((tmp, path.clone())),
                Err(e) => {
                    cleanup(&staged);
                    return Err(e);
                }
            }
        }
    }
    let mut backups: Vec<(PathBuf, PathBuf)> = Vec::new();
    for op in &plan.ops {
        let target = op.target();
        if matches!(op, FileOp::Rename { .. }) || !target.exists() {
            continue;
        }
        match backup(target, &stamp) {
            Ok(b) => backups.push((target.to_path_buf(), b)),
            Err(e) => {
                cleanup(&staged);
                return Err(e);
            }
        }
    }
    for op in &plan.ops {
        match op {
            FileOp::Write { path, .. } => {
                let (tmp, _) = staged.iter().find(|(_, p)| p == path).expect("staged above");
                std::fs::rename(tmp, path).map_err(|e| not_writable(path, &e))?;
            }
            FileOp::Remove { path } => std::fs::remove_file(path).map_err(|e| not_writable(path, &e))?,
            FileOp::Rename { from, to } => std::fs::rename(from, to).map_err(|e| not_writable(from, &e))?,
        }
    }
    for step in &mut plan.steps {
        if let Some(path) = &step.path
            && step.status.changes()
        {
            step.backup = backups.iter().find(|(p, _)| p == path).map(|(_, b)| b.clone());
        }
    }
    Ok(())
}

/// Write `contents` to a temporary file beside `path`.
fn stage(path: &Path, contents: &[u8]) -> Result<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| not_writable(dir, &e))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.cairn-tmp-{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(contents)?;
        file.sync_all()?;
        // keep the mode of the file it replaces (a config may be private)
        if let Ok(meta) = std::fs::metadata(path) {
            std::fs::set_permissions(&tmp, meta.permissions())?;
        }
        Ok(())
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        not_writable(dir, &e)
    })?;
    Ok(tmp)
}

/// Copy `path` to `<path>.cairn-backup-<UTC time>` (a new name if that exists). The name does
/// not end in `.ts`/`.js`/`.json`, so no host loads a backup as a plugin or config.
fn backup(path: &Path, stamp: &str) -> Result<PathBuf> {
    let base = format!("{}.cairn-backup-{stamp}", path.display());
    let mut candidate = PathBuf::from(&base);
    let mut n = 1;
    while candidate.exists() {
        n += 1;
        candidate = PathBuf::from(format!("{base}-{n}"));
    }
    std::fs::copy(path, &candidate).map_err(|e| not_writable(&candidate, &e))?;
    Ok(candidate)
}

/// `20261125T012345Z`: sortable, and valid in a file name on every platform.
fn backup_stamp() -> String {
    let ts = cairn_core::clock::now_ts(); // 2026-11-25T01:23:45.678Z
    let digits: String = ts.chars().take(19).filter(|c| *c != '-' && *c != ':').collect();
    format!("{digits}Z")
}

fn not_writable(path: &Path, err: &std::io::Error) -> anyhow::Error {
    CairnError::new(ErrorCode::DataDirNotWritable, format!("cannot write {}: {err}", path.display()))
        .with_hint("check that the directory can be written (and is a directory)")
        .into()
}

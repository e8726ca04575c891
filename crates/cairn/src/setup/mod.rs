//! `cairn setup <agent>`: connect an agent host to cairn (host-integration E35).
//!
//! Every host follows the same shape: read what is there, plan every change as data
//! ([`Plan`]: steps for people and `--json`, file operations for the machine), then apply the
//! plan or, with `--dry-run`, only show it. Applying writes every new file to a temporary file
//! beside its target first, so a directory that cannot be written fails before anything
//! changed; each file that is edited or removed is copied to `<file>.cairn-backup-<time>`
//! first. A run that finds everything in place changes nothing and says so.
//!
//! One module per host: `opencode.rs` now; claude-code, codex and gemini-cli (issue 14) add
//! theirs and a [`crate::cli::SetupAgent`] variant.

pub mod jsonc;
pub mod opencode;

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::Result;
use cairn_core::{CairnError, ErrorCode};
use serde::Serialize;

use crate::cli::{SetupAgent, SetupArgs};
use crate::output::note;
use crate::run::Env;

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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engram_import: Option<serde_json::Value>,
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

/// `cairn setup <agent>`.
pub fn run(env: &Env, args: SetupArgs) -> Result<()> {
    let binary = current_binary()?;
    let answers = Answers {
        yes: args.yes,
        interactive: !args.dry_run && !env.json && std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
    };
    let (agent, mut plan) = match args.agent {
        SetupAgent::Opencode => ("opencode", opencode::plan(&opencode::Options::from_env(&args, &binary)?, &answers)?),
    };
    let changed = plan.steps.iter().any(|s| s.status.changes());
    if !args.dry_run {
        apply(&mut plan)?;
    }
    let mut engram_import = None;
    if let Some(db) = plan.import_engram.take()
        && !args.dry_run
    {
        let report = env.open_store()?.import_engram_db(&db)?;
        engram_import = Some(serde_json::to_value(&report)?);
    }
    let report = Report {
        agent,
        action: if args.uninstall { "uninstall" } else { "install" },
        dry_run: args.dry_run,
        changed,
        binary,
        steps: plan.steps,
        warnings: plan.warnings,
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
    if !report.changed {
        out.push_str("Nothing to change: everything is already in place.\n");
    } else if report.dry_run {
        out.push_str("Run again without --dry-run to apply.\n");
    } else if report.action == "install" {
        out.push_str("Restart OpenCode to load the plugin and the MCP server.\n");
    } else {
        out.push_str("Restart OpenCode to unload cairn.\n");
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

//! OpenCode's saved plans (op `plans`, also open-memory's router name): list them, or read one,
//! strictly read-only.
//!
//! Where OpenCode writes a plan (checked in the installed opencode-ai 1.18.33 and in
//! `packages/opencode/src/session/session.ts`, `Session.plan`):
//! `<worktree>/.opencode/plans/<time.created>-<slug>.md` when the project is a git repository, else
//! `<Global.Path.data>/plans/<time.created>-<slug>.md`, the data dir being
//! `$XDG_DATA_HOME/opencode` (default `~/.local/share/opencode`). The spec named only the second;
//! both are searched: the project's (the git worktree above the caller's directory) first, then the
//! global one.
//!
//! A plan is named by its plain file name: anything else (a path, `..`, a hidden file, a name not
//! ending in `.md`, a NUL byte) and a symlink leading out of its directory are refused with
//! `invalid_argument`, so the op can never read outside those two directories.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use cairn_base::error::{CairnError, ErrorCode, Result};

/// Most bytes of a plan `read` returns (the rest is announced, not sent).
pub const MAX_READ_BYTES: usize = 64 * 1024;
/// Most plans a listing shows (newest first); `total` counts them all.
pub const MAX_LISTED: usize = 200;
/// How much of a plan is read for its first heading.
const HEADING_PROBE_BYTES: u64 = 8 * 1024;
/// Longest heading shown in a listing, in characters.
const MAX_HEADING_CHARS: usize = 120;

/// `plans {read?, directory?, session_id?}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlansRequest {
    /// One plan's file name (`1767000000000-brave-river.md`): its text instead of the list. A
    /// blank name is refused (`invalid_argument`); leave it out to list.
    #[serde(default)]
    pub read: Option<String>,
    /// A project directory: the `.opencode/plans` of its git worktree is searched too.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub directory: Option<PathBuf>,
    /// Without `directory`: the session whose archived directory is the project's.
    #[serde(default, alias = "sessionId")]
    pub session_id: Option<String>,
}

/// Which of OpenCode's two plan directories a plan is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum PlanLocation {
    /// `<worktree>/.opencode/plans` (a git project's).
    Project,
    /// `<OpenCode data dir>/plans` (projects outside git).
    Global,
}

impl PlanLocation {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanLocation::Project => "project",
            PlanLocation::Global => "global",
        }
    }
}

/// A directory searched, and whether it exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanDirectory {
    pub location: PlanLocation,
    pub path: String,
    pub exists: bool,
}

/// One plan of a listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanInfo {
    /// The file name, what `read` takes.
    pub name: String,
    pub location: PlanLocation,
    pub size: u64,
    /// RFC 3339 UTC.
    pub modified: String,
    /// Its first Markdown heading, without the `#`s.
    pub heading: Option<String>,
}

/// One plan's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PlanText {
    pub name: String,
    pub location: PlanLocation,
    pub size: u64,
    pub modified: String,
    /// At most [`MAX_READ_BYTES`] of it (cut on a character boundary).
    pub text: String,
    /// Whether `text` is only the start of the plan.
    pub truncated: bool,
}

/// The answer to `plans`: the list (newest first), or with `read` the one plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Plans {
    pub directories: Vec<PlanDirectory>,
    /// Newest first, at most [`MAX_LISTED`]; empty when reading one.
    pub plans: Vec<PlanInfo>,
    /// How many plans there are in all.
    pub total: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanText>,
}

/// The directories searched: the project's (when `directory` is inside a git worktree), then
/// OpenCode's global one (when the data dir can be named).
pub fn plan_dirs(env: &dyn Fn(&str) -> Option<String>, directory: Option<&Path>) -> Vec<(PlanLocation, PathBuf)> {
    let mut dirs = Vec::new();
    if let Some(root) = directory.filter(|d| d.is_absolute()).and_then(git_worktree) {
        dirs.push((PlanLocation::Project, root.join(".opencode").join("plans")));
    }
    if let Some(data) = super::opencode::data_dir(env) {
        dirs.push((PlanLocation::Global, data.join("plans")));
    }
    // A data dir inside the worktree is one directory, listed once.
    let mut seen = Vec::new();
    dirs.retain(|(_, d)| {
        let key = d.canonicalize().unwrap_or_else(|_| d.clone());
        let new = !seen.contains(&key);
        seen.push(key);
        new
    });
    dirs
}

/// OpenCode's `Instance.worktree` for a git project: the nearest ancestor with a `.git`.
fn git_worktree(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().find(|a| a.join(".git").exists()).map(Path::to_path_buf)
}

/// `plans`: the listing, or with `read` one plan.
pub fn plans(dirs: &[(PlanLocation, PathBuf)], read: Option<&str>) -> Result<Plans> {
    let directories = dirs
        .iter()
        .map(|(location, path)| PlanDirectory {
            location: *location,
            path: path.display().to_string(),
            exists: path.is_dir(),
        })
        .collect();
    if let Some(name) = read {
        let plan = read_plan(dirs, name)?;
        return Ok(Plans { directories, plans: Vec::new(), total: 1, plan: Some(plan) });
    }
    let mut all = Vec::new();
    for (location, dir) in dirs {
        all.extend(list_dir(*location, dir)?);
    }
    all.sort_by(|a, b| b.modified.cmp(&a.modified).then_with(|| b.name.cmp(&a.name)));
    let total = all.len();
    all.truncate(MAX_LISTED);
    Ok(Plans { directories, plans: all, total, plan: None })
}

/// A plan's name must be a plain file name ending in `.md`.
fn check_name(name: &str) -> Result<&str> {
    let bad = |why: &str| {
        CairnError::invalid(format!("plan name {name:?}: {why}"))
            .with_hint("give a file name from the `plans` listing, e.g. 1767000000000-brave-river.md")
    };
    if name.is_empty() {
        return Err(
            CairnError::invalid("read: a plan's file name, not blank").with_hint("leave read out to list the plans")
        );
    }
    if name.contains(['/', '\\', '\0']) || name.chars().any(char::is_control) {
        return Err(bad("not a plain file name (a path, or a control character)"));
    }
    let stem = name.strip_suffix(".md").ok_or_else(|| bad("not a .md file name"))?;
    if stem.is_empty() || name.starts_with('.') {
        return Err(bad("a hidden file or no name"));
    }
    if name.len() > 255 {
        return Err(bad("longer than a file name can be"));
    }
    Ok(name)
}

/// The file `name` stands for in `dir`, if any: a regular file, or a symlink to one in the same
/// directory. Anything leading out is refused.
fn resolve(dir: &Path, name: &str) -> Result<Option<(PathBuf, std::fs::Metadata)>> {
    let path = dir.join(name);
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(&path, &e)),
        Ok(_) => {}
    }
    let refused = |why: &str| CairnError::invalid(format!("plan {name:?} {why}"));
    let real = path.canonicalize().map_err(|_| refused("is a symlink that leads nowhere"))?;
    let real_dir = dir.canonicalize().map_err(|e| io_error(dir, &e))?;
    if real.parent() != Some(real_dir.as_path()) {
        return Err(refused("leads out of the plans directory"));
    }
    let meta = std::fs::metadata(&real).map_err(|e| io_error(&real, &e))?;
    if !meta.is_file() {
        return Err(refused("is not a plain file"));
    }
    Ok(Some((real, meta)))
}

fn read_plan(dirs: &[(PlanLocation, PathBuf)], name: &str) -> Result<PlanText> {
    let name = check_name(name.trim())?;
    for (location, dir) in dirs {
        let Some((path, meta)) = resolve(dir, name)? else { continue };
        let (bytes, truncated) = read_prefix(&path, MAX_READ_BYTES as u64)?;
        let text = cairn_base::text::redact(&utf8_prefix(&bytes, truncated)).0;
        return Ok(PlanText {
            name: name.to_owned(),
            location: *location,
            size: meta.len(),
            modified: modified(&meta),
            text,
            truncated,
        });
    }
    let looked: Vec<String> = dirs.iter().map(|(_, d)| d.display().to_string()).collect();
    Err(CairnError::new(ErrorCode::FileNotFound, format!("no plan {name:?} in {}", looked.join(" or ")))
        .with_hint("list the plans with `plans` (no arguments)"))
}

fn list_dir(location: PlanLocation, dir: &Path) -> Result<Vec<PlanInfo>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        // An absent directory (no plan saved yet, or no OpenCode) is an empty list; so is one
        // this process may not read (`directories` still names it).
        Err(e) => {
            if !matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) {
                tracing::warn!(dir = %dir.display(), error = %e, "plans directory unreadable");
            }
            return Ok(Vec::new());
        }
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        if check_name(&name).is_err() {
            continue;
        }
        // What `read` would refuse is not listed.
        let Ok(Some((path, meta))) = resolve(dir, &name) else { continue };
        let heading =
            read_prefix(&path, HEADING_PROBE_BYTES).ok().and_then(|(b, cut)| first_heading(&utf8_prefix(&b, cut)));
        out.push(PlanInfo { name, location, size: meta.len(), modified: modified(&meta), heading });
    }
    Ok(out)
}

/// The first `limit` bytes of a file, and whether there was more.
fn read_prefix(path: &Path, limit: u64) -> Result<(Vec<u8>, bool)> {
    let file = std::fs::File::open(path).map_err(|e| io_error(path, &e))?;
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes).map_err(|e| io_error(path, &e))?;
    let truncated = bytes.len() as u64 > limit;
    bytes.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    Ok((bytes, truncated))
}

/// Text of a prefix: a character cut by the limit is dropped, other bad bytes replaced.
fn utf8_prefix(bytes: &[u8], cut: bool) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(e) if cut && e.error_len().is_none() => String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

fn first_heading(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| l.starts_with('#'))?;
    let heading = cairn_base::text::redact(line.trim_start_matches('#').trim()).0;
    if heading.is_empty() {
        return None;
    }
    let mut short: String = heading.chars().take(MAX_HEADING_CHARS).collect();
    if short.len() < heading.len() {
        short.push('…');
    }
    Some(short)
}

fn modified(meta: &std::fs::Metadata) -> String {
    meta.modified().map_or_else(|_| String::new(), |t| cairn_base::clock::format_ts(OffsetDateTime::from(t)))
}

/// A plan or its directory that exists but cannot be read: the host's file, not cairn's fault.
fn io_error(path: &Path, e: &std::io::Error) -> CairnError {
    CairnError::new(ErrorCode::HistorySourceUnreadable, format!("cannot read {}: {e}", path.display()))
        .with_hint("check the file's permissions")
}

impl Plans {
    /// The answer as Markdown: a table (name, where, size, modified, first heading), or the plan.
    pub fn to_markdown(&self) -> String {
        if let Some(plan) = &self.plan {
            let mut out = format!(
                "# Plan {} ({}, {} bytes, modified {})\n\n{}",
                plan.name,
                plan.location.as_str(),
                plan.size,
                plan.modified,
                plan.text.trim_end()
            );
            if plan.truncated {
                out.push_str(&format!(
                    "\n\n[truncated: the first {} of {} bytes shown]",
                    cairn_base::context_window::thousands(plan.text.len() as u64),
                    cairn_base::context_window::thousands(plan.size)
                ));
            }
            return out;
        }
        let dirs: Vec<String> =
            self.directories.iter().map(|d| format!("{} ({})", d.path, d.location.as_str())).collect();
        if self.plans.is_empty() {
            return format!(
                "No OpenCode plans in {}.",
                if dirs.is_empty() { "any directory".into() } else { dirs.join(" or ") }
            );
        }
        let mut out = String::from("| name | where | size | modified | first heading |\n|---|---|---|---|---|\n");
        for p in &self.plans {
            let heading = p.heading.as_deref().unwrap_or("").replace('|', "\\|");
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                p.name,
                p.location.as_str(),
                p.size,
                p.modified,
                heading
            ));
        }
        let shown = if self.total > self.plans.len() {
            format!("{} of {} plans, newest first", self.plans.len(), self.total)
        } else {
            format!("{} plan{}, newest first", self.total, if self.total == 1 { "" } else { "s" })
        };
        out.push_str(&format!("\n{shown}, from {}. Read one by its name (`read`).", dirs.join(" and ")));
        out
    }
}

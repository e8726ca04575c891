//! Project identity (engram §11, with its gaps closed): one name per repository whichever door
//! asks, resolved once per process.
//!
//! Order: `.cairn/config.json` (or engram's `.engram/config.json`) in the directory or a parent
//! up to the repository root → the git remote `origin`'s repository name → the git root's
//! basename (a worktree resolves to its main repository) → the one repository directly inside
//! the directory (engram's `git_child`; two or more are `ambiguous`, with the candidates listed)
//! → the directory's basename. Which of a call's hints wins over detection is
//! `cairn_core::agent::resolve_project`'s rule.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{LazyLock, Mutex};

use serde::{Deserialize, Serialize};

use crate::error::{CairnError, ErrorCode, Result};
use crate::text::{normalize_project, redact};

/// Where a project name came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProjectSource {
    /// The call's own `project` argument.
    ExplicitOverride,
    /// The project of the session the call belongs to.
    Session,
    /// The `X-Cairn-Project` header of an HTTP call.
    RequestHeader,
    /// `--project` or `CAIRN_PROJECT`.
    ProcessOverride,
    /// `.cairn/config.json`.
    Config,
    /// `.engram/config.json` (users coming from engram).
    EngramConfig,
    GitRemote,
    GitRoot,
    /// The only repository directly inside the directory.
    GitChild,
    /// Several repositories inside the directory: no project (see `available_projects`).
    Ambiguous,
    DirBasename,
}

impl ProjectSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ExplicitOverride => "explicit_override",
            Self::Session => "session",
            Self::RequestHeader => "request_header",
            Self::ProcessOverride => "process_override",
            Self::Config => "config",
            Self::EngramConfig => "engram_config",
            Self::GitRemote => "git_remote",
            Self::GitRoot => "git_root",
            Self::GitChild => "git_child",
            Self::Ambiguous => "ambiguous",
            Self::DirBasename => "dir_basename",
        }
    }
}

/// The answer to "which project is this directory?".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectDetection {
    pub project: String,
    pub project_source: ProjectSource,
    /// The file or directory the name was read from.
    pub project_path: String,
    pub cwd: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// The candidates when detection is ambiguous (engram §11), else empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub available_projects: Vec<String>,
}

static CACHE: LazyLock<Mutex<HashMap<PathBuf, ProjectDetection>>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Detect the project of `dir`, cached for the life of the process (engram spawned two git
/// processes per MCP call).
pub fn detect_project(dir: &Path) -> Result<ProjectDetection> {
    // A directory an agent sends is text it typed: `<private>` parts must not become the
    // project name (stored with every memory) nor be echoed back as its path.
    let dir = match redact(&dir.to_string_lossy()) {
        (clean, true) => PathBuf::from(clean),
        _ => dir.to_owned(),
    };
    let dir = dir.canonicalize().unwrap_or(dir);
    if let Some(hit) = CACHE.lock().ok().and_then(|c| c.get(&dir).cloned()) {
        return Ok(hit);
    }
    let detection = detect_uncached(&dir)?;
    if let Ok(mut cache) = CACHE.lock() {
        cache.insert(dir, detection.clone());
    }
    Ok(detection)
}

/// A name given by the caller (argument, header, flag or environment), normalised; `source`
/// says which.
pub fn explicit_project(name: &str, cwd: &Path, source: ProjectSource) -> Result<ProjectDetection> {
    let (project, changed) = normalize_project(name);
    validate_name(&project, "the project name")?;
    Ok(ProjectDetection {
        warning: changed.then(|| format!("project name normalized from {name:?} to {project:?}")),
        project,
        project_source: source,
        project_path: String::new(),
        cwd: cwd.display().to_string(),
        available_projects: Vec::new(),
    })
}

fn detect_uncached(dir: &Path) -> Result<ProjectDetection> {
    let git = GitInfo::probe(dir);
    let cwd = dir.display().to_string();
    let stop_at = git.as_ref().map(|g| g.toplevel.clone());
    if let Some((project, source, path)) = config_name(dir, stop_at.as_deref())? {
        return Ok(ProjectDetection {
            project,
            project_source: source,
            project_path: path,
            cwd,
            warning: None,
            available_projects: Vec::new(),
        });
    }
    if let Some(git) = git {
        if let Some(name) = git.remote_url.as_deref().and_then(repo_name_from_url) {
            let project = normalize_project(&name).0;
            return Ok(ProjectDetection {
                project,
                project_source: ProjectSource::GitRemote,
                project_path: git.main_root.display().to_string(),
                cwd,
                warning: None,
                available_projects: Vec::new(),
            });
        }
        let name = basename(&git.main_root);
        return Ok(ProjectDetection {
            project: normalize_project(&name).0,
            project_source: ProjectSource::GitRoot,
            project_path: git.main_root.display().to_string(),
            cwd,
            warning: None,
            available_projects: Vec::new(),
        });
    }
    if let Some(found) = child_repositories(dir, cwd.clone()) {
        return Ok(found);
    }
    let name = basename(dir);
    Ok(ProjectDetection {
        project: if name.is_empty() { "unknown".into() } else { normalize_project(&name).0 },
        project_source: ProjectSource::DirBasename,
        project_path: cwd.clone(),
        cwd,
        warning: None,
        available_projects: Vec::new(),
    })
}

/// Directories never taken for a project's repository.
const NOISE_DIRS: &[&str] =
    &["node_modules", "vendor", ".venv", "__pycache__", "target", "dist", "build", ".idea", ".vscode"];
/// How many child directories are looked into: a home directory must not cost a long scan.
const CHILD_SCAN_LIMIT: usize = 20;

/// engram's rows 4 and 5: outside any repository, one repository directly inside `dir` names
/// the project (with a warning); two or more make detection ambiguous, listing them (the scan
/// stops at the second).
fn child_repositories(dir: &Path, cwd: String) -> Option<ProjectDetection> {
    let mut children: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(std::result::Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|p| {
            let name = basename(p);
            !name.starts_with('.') && !NOISE_DIRS.contains(&name.as_str())
        })
        .collect();
    children.sort();
    let repos: Vec<PathBuf> =
        children.into_iter().take(CHILD_SCAN_LIMIT).filter(|p| p.join(".git").exists()).take(2).collect();
    let names: Vec<String> = repos.iter().map(|p| normalize_project(&basename(p)).0).collect();
    match repos.as_slice() {
        [] => None,
        [only] => Some(ProjectDetection {
            warning: Some(format!("{} is not a repository; using the only repository inside it, {:?}", cwd, names[0])),
            project: names[0].clone(),
            project_source: ProjectSource::GitChild,
            project_path: only.display().to_string(),
            cwd,
            available_projects: Vec::new(),
        }),
        _ => Some(ProjectDetection {
            project: String::new(),
            project_source: ProjectSource::Ambiguous,
            project_path: String::new(),
            warning: Some(format!("{cwd} holds several repositories; name the project")),
            cwd,
            available_projects: names,
        }),
    }
}

fn basename(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The nearest config file from `dir` up to `stop_at` (the repository root), or only `dir`
/// outside a repository.
fn config_name(dir: &Path, stop_at: Option<&Path>) -> Result<Option<(String, ProjectSource, String)>> {
    let mut current = Some(dir);
    while let Some(here) = current {
        for (folder, source) in [(".cairn", ProjectSource::Config), (".engram", ProjectSource::EngramConfig)] {
            let file = here.join(folder).join("config.json");
            if file.is_file() {
                let name = read_config(&file)?;
                return Ok(Some((name, source, file.display().to_string())));
            }
        }
        match stop_at {
            Some(root) if here != root => current = here.parent(),
            _ => current = None,
        }
    }
    Ok(None)
}

fn read_config(file: &Path) -> Result<String> {
    let bad = |why: String| {
        CairnError::new(ErrorCode::InvalidProjectConfig, format!("{}: {why}", file.display()))
            .with_hint(r#"it should look like {"project_name": "my-project"}"#)
    };
    let text = std::fs::read_to_string(file).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
    let name = value
        .get("project_name")
        .or_else(|| value.get("project"))
        .and_then(|v| v.as_str())
        .ok_or_else(|| bad("no \"project_name\" string".into()))?;
    let project = normalize_project(name).0;
    validate_name(&project, &file.display().to_string())?;
    Ok(project)
}

fn validate_name(project: &str, origin: &str) -> Result<()> {
    if project.is_empty() || project.contains(['/', '\\']) || project.chars().any(char::is_control) {
        return Err(CairnError::new(
            ErrorCode::InvalidProjectConfig,
            format!("{origin}: {project:?} is not a valid project name (empty, a path, or control characters)"),
        ));
    }
    Ok(())
}

/// `git@host:owner/name.git`, `https://host/owner/name/` → `name`.
pub fn repo_name_from_url(url: &str) -> Option<String> {
    let trimmed = url.trim().trim_end_matches('/');
    let last = trimmed.rsplit(['/', ':']).next()?;
    let name = last.strip_suffix(".git").unwrap_or(last);
    (!name.is_empty()).then(|| name.to_owned())
}

struct GitInfo {
    toplevel: PathBuf,
    /// The main repository's root (differs from `toplevel` in a linked worktree).
    main_root: PathBuf,
    remote_url: Option<String>,
}

impl GitInfo {
    fn probe(dir: &Path) -> Option<GitInfo> {
        let out = git(dir, &["rev-parse", "--path-format=absolute", "--show-toplevel", "--git-common-dir"])?;
        let mut lines = out.lines();
        let toplevel = PathBuf::from(lines.next()?);
        let common = PathBuf::from(lines.next()?);
        let main_root = if common.file_name().is_some_and(|n| n == ".git") {
            common.parent().map_or_else(|| toplevel.clone(), Path::to_owned)
        } else {
            toplevel.clone()
        };
        let remote_url = git(dir, &["config", "--get", "remote.origin.url"]).filter(|s| !s.trim().is_empty());
        Some(GitInfo { toplevel, main_root, remote_url })
    }
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output =
        Command::new("git").arg("-C").arg(dir).args(args).stdin(Stdio::null()).stderr(Stdio::null()).output().ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_text_in_a_directory_never_names_the_project() {
        for dir in [
            "/nonexistent/<private>acme-secret</private>",
            "/nonexistent/<private>acme-secret",
            "/w/<PRIVATE>\nacme-secret",
        ] {
            let found = detect_project(Path::new(dir)).unwrap();
            let shown = serde_json::to_string(&found).unwrap();
            assert!(!shown.contains("acme-secret"), "{dir:?} → {shown}");
        }
    }

    #[test]
    fn repo_names_from_urls() {
        assert_eq!(repo_name_from_url("git@github.com:acme/Widget.git").as_deref(), Some("Widget"));
        assert_eq!(repo_name_from_url("https://host/acme/widget/").as_deref(), Some("widget"));
        assert_eq!(repo_name_from_url("/srv/git/tool.git").as_deref(), Some("tool"));
        assert_eq!(repo_name_from_url("").as_deref(), None);
    }

    #[test]
    fn plain_directory_uses_basename_and_config_wins() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("My_Tool");
        std::fs::create_dir_all(dir.join(".cairn")).unwrap();
        let found = detect_uncached(&dir).unwrap();
        assert_eq!(found.project, "my_tool");
        assert_eq!(found.project_source, ProjectSource::DirBasename);
        std::fs::write(dir.join(".cairn/config.json"), r#"{"project_name": "Real-Name"}"#).unwrap();
        let found = detect_uncached(&dir).unwrap();
        assert_eq!((found.project.as_str(), found.project_source), ("real-name", ProjectSource::Config));
    }

    #[test]
    fn repositories_inside_a_plain_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("work");
        for sub in ["node_modules/x/.git", "Alpha/.git", ".hidden/.git", "notes"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let found = detect_uncached(&dir).unwrap();
        assert_eq!((found.project.as_str(), found.project_source), ("alpha", ProjectSource::GitChild));
        assert!(found.warning.is_some() && found.available_projects.is_empty());
        std::fs::create_dir_all(dir.join("beta/.git")).unwrap();
        let found = detect_uncached(&dir).unwrap();
        assert_eq!((found.project.as_str(), found.project_source), ("", ProjectSource::Ambiguous));
        assert_eq!(found.available_projects, ["alpha", "beta"]);
    }

    #[test]
    fn broken_config_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tmp.path().join(".engram")).unwrap();
        std::fs::write(tmp.path().join(".engram/config.json"), "{not json").unwrap();
        assert_eq!(detect_uncached(tmp.path()).unwrap_err().code, ErrorCode::InvalidProjectConfig);
        std::fs::write(tmp.path().join(".engram/config.json"), r#"{"project_name": "a/b"}"#).unwrap();
        assert_eq!(detect_uncached(tmp.path()).unwrap_err().code, ErrorCode::InvalidProjectConfig);
    }
}

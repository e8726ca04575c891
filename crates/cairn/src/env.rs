//! What every command is given: the settings, `--json`, the directory it runs in and the one
//! client of this invocation (the daemon, else the file); and the parsing of a memory id that
//! most of them share.

use std::path::PathBuf;
use std::sync::OnceLock as OnceCell;

use anyhow::Result;
use cairn_client::{Client, ConnectOptions, Role};
use cairn_core::CairnError;
use cairn_core::agent::{ProjectHints, resolve_project};
use cairn_core::ops::Request;
use cairn_core::project::ProjectDetection;
use cairn_core::settings::Settings;

use crate::output::{json, note, out};

/// Shared state of one invocation.
pub struct Env {
    pub settings: Settings,
    pub json: bool,
    cwd: PathBuf,
    /// Made on the first operation: `serve`, `mcp` and `config` never need one.
    client: OnceCell<Client>,
}

impl Env {
    pub(crate) fn new(settings: Settings, json: bool, cwd: PathBuf) -> Env {
        Env { settings, json, cwd, client: OnceCell::new() }
    }

    /// The one client of this invocation: the daemon of the data dir, else the file.
    pub(crate) fn client(&self) -> Result<&Client> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        let options = ConnectOptions::from_settings(&self.settings, Role::Cli)?;
        Ok(self.client.get_or_init(|| Client::new(options)))
    }

    /// Run one request; its answer, of the type the request names.
    pub(crate) fn call<R: Request>(&self, request: R) -> Result<R::Output> {
        Ok(self.client()?.call(request)?)
    }

    /// Embed every pending memory in this process when no daemon runs (`cairn reindex`).
    /// `None` when a daemon does the work.
    pub(crate) fn embed_here(&self, progress: &mut dyn FnMut(usize, i64)) -> Result<Option<usize>> {
        Ok(self.client()?.embed_here(progress)?)
    }

    /// The project: `--project` / `CAIRN_PROJECT`, else detected from the current directory
    /// (core's one resolution rule; the CLI has no session or header).
    pub(crate) fn project(&self) -> Result<ProjectDetection> {
        let hints = ProjectHints {
            process: self.settings.project.value.clone(),
            process_cwd: self.cwd.clone(),
            ..ProjectHints::default()
        };
        let detection = resolve_project(&hints, |_| Ok(None))?;
        if let Some(w) = &detection.warning {
            note(&format!("warning: {w}"));
        }
        Ok(detection)
    }

    /// The directory cairn was run in.
    pub(crate) fn cwd(&self) -> &std::path::Path {
        &self.cwd
    }

    pub(crate) fn emit<T: serde::Serialize>(&self, value: &T, human: impl FnOnce(&T) -> String) -> Result<()> {
        if self.json { json(value) } else { out(&human(value)) }
    }
}

/// `12` or `#12`.
pub(crate) fn parse_id(raw: &str) -> Result<i64> {
    raw.trim().trim_start_matches('#').parse::<i64>().ok().filter(|id| *id > 0).ok_or_else(|| {
        CairnError::invalid(format!("{raw:?} is not a memory id")).with_hint("ids look like 12 or #12").into()
    })
}

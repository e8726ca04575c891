//! `cairn remote`: the hub a data dir syncs with. `add` writes `[sync]` in config.toml (after
//! asking the hub whether the token is good), `sync` runs one round now, `status` shows where
//! the data dir stands; the daemon's autosync does the rest (cairn-engine's `autosync`).

use std::time::Duration;

use anyhow::Result;
use cairn_core::ops::SyncStatusRequest;
use cairn_core::settings::sync::{normalize_projects, normalize_remote_url};
use cairn_core::settings::{CONFIG_FILE, RemoteSettings, Source, load_remote};
use cairn_core::sync::SyncStatus;
use cairn_core::sync::remote::{HubFailure, HubTransport, RemoteStatus};
use cairn_core::{CairnError, ErrorCode};
use cairn_engine::hub_client::HubClient;
use serde::Serialize;
use toml_edit::{Array, DocumentMut, Item, Table, value};

use crate::cli::RemoteAction;
use crate::env::Env;
use crate::output::note;

pub fn remote(env: &Env, action: RemoteAction) -> Result<()> {
    match action {
        RemoteAction::Add { url, token, no_check, manual } => add(env, &url, &token, no_check, manual),
        RemoteAction::Remove => remove(env),
        RemoteAction::Sync { timeout } => sync_now(env, Duration::from_secs(timeout)),
        RemoteAction::Status => status(env),
    }
}

/// What `add` and `remove` did.
#[derive(Debug, Serialize)]
struct Changed {
    config: String,
    remote: Option<RemoteSettings>,
    /// `ok`, `skipped` (--no-check) or `unreachable` (saved anyway).
    checked: &'static str,
}

fn add(env: &Env, url: &str, token: &str, no_check: bool, manual: bool) -> Result<()> {
    let url = normalize_remote_url(url)?;
    let token = token.trim();
    if token.is_empty() {
        return Err(CairnError::invalid("the token is empty")
            .with_hint("pass the token `cairn hub token create` printed")
            .into());
    }
    let projects = match (&env.settings.project.source, &env.settings.project.value) {
        (Source::Flag, Some(list)) => normalize_projects(list.split(',').map(str::to_owned).collect())?,
        _ => Vec::new(),
    };
    let checked = if no_check { "skipped" } else { check_token(&url, token, &projects)? };
    let data_dir = &env.settings.data_dir.value;
    cairn_core::settings::ensure_data_dir(data_dir)?;
    let config = data_dir.join(CONFIG_FILE);
    let mut doc = crate::config_file::read(&config)?;
    set_sync_table(&mut doc, &url, token, &projects, manual);
    crate::config_file::write(&config, &doc)?;
    // Read back through the same rules the daemon uses, so what was written is what runs.
    let remote = load_remote(data_dir)?;
    let changed = Changed { config: config.display().to_string(), remote, checked };
    env.emit(&changed, |c| {
        let Some(remote) = &c.remote else { return String::new() };
        let projects = if remote.projects.is_empty() { "every project".to_owned() } else { remote.projects.join(", ") };
        let how = if remote.autosync {
            "the daemon pushes and pulls by itself; `cairn remote sync` syncs now"
        } else {
            "autosync is off: run `cairn remote sync`"
        };
        let unchecked = match c.checked {
            "unreachable" => "\nthe hub did not answer now: the token is checked at the first sync",
            "skipped" => "\nthe token was not checked (--no-check)",
            _ => "",
        };
        format!("this data dir syncs with {} ({projects}); {how}{unchecked}", remote.url)
    })
}

/// Ask the hub for one mutation with the token: refused → an error (nothing saved); no answer →
/// saved, said so.
fn check_token(url: &str, token: &str, projects: &[String]) -> Result<&'static str> {
    let hub = HubClient::new(url, token);
    match hub.pull(0, 1, projects.first().map(String::as_str)) {
        Ok(_) => Ok("ok"),
        Err(HubFailure::Unavailable(why)) => {
            note(&format!("warning: the hub did not answer ({why}); saving the remote anyway"));
            Ok("unreachable")
        }
        Err(failure) => Err(failure.into_error(url).into()),
    }
}

/// `[sync]` with the remote; other keys of the table (intervals) and the rest of the file stay.
fn set_sync_table(doc: &mut DocumentMut, url: &str, token: &str, projects: &[String], manual: bool) {
    let table = doc.entry("sync").or_insert(Item::Table(Table::new()));
    if !table.is_table() {
        *table = Item::Table(Table::new());
    }
    let table = table.as_table_mut().expect("made a table above");
    table["remote"] = value(url);
    table["token"] = value(token);
    if projects.is_empty() {
        table.remove("projects");
    } else {
        table["projects"] = value(projects.iter().collect::<Array>());
    }
    if manual {
        table["autosync"] = value(false);
    } else {
        table.remove("autosync");
    }
}

fn remove(env: &Env) -> Result<()> {
    let config = env.settings.data_dir.value.join(CONFIG_FILE);
    let mut doc = crate::config_file::read(&config)?;
    let had = doc.remove("sync").is_some();
    if had {
        crate::config_file::write(&config, &doc)?;
    }
    let changed = Changed { config: config.display().to_string(), remote: None, checked: "skipped" };
    env.emit(&changed, |_| {
        if had {
            "this data dir no longer syncs with a hub (nothing stored was deleted)".into()
        } else {
            "no hub was set".into()
        }
    })
}

fn sync_now(env: &Env, timeout: Duration) -> Result<()> {
    let report = env.client()?.remote_sync(timeout)?;
    env.emit(&report, cairn_render::people::remote_round)?;
    if let Some(first) = report.refused.first() {
        return Err(CairnError::new(
            ErrorCode::RemoteRefused,
            format!("the hub refused {} project(s): {} ({})", report.refused.len(), first.project, first.hub_code),
        )
        .with_hint("limit the projects: cairn remote add URL --token T --project P")
        .into());
    }
    if !report.in_sync {
        return Err(CairnError::new(
            ErrorCode::RemoteUnreachable,
            format!("{} change(s) still to push", report.pending),
        )
        .with_hint("run it again; `cairn remote status` shows why")
        .into());
    }
    Ok(())
}

fn status(env: &Env) -> Result<()> {
    let sync: SyncStatus = env.call(SyncStatusRequest { directory: None })?;
    if let Some(error) = &sync.remote_config_error {
        return Err(CairnError::new(ErrorCode::InvalidConfig, error.clone()).into());
    }
    let remote: Option<RemoteStatus> = sync.remote;
    env.emit(&remote, |r| match r {
        Some(r) => cairn_render::people::remote_status(r),
        None => "no hub set: cairn remote add URL --token TOKEN".into(),
    })
}

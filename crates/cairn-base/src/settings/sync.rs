//! `[sync]` in config.toml: the hub this data dir syncs with (`cairn remote add` writes it).
//!
//! ```toml
//! [sync]
//! remote = "https://hub.example.com:8443"
//! token = "chub_…"            # or CAIRN_SYNC_TOKEN
//! projects = ["alpha"]        # default: every project
//! autosync = true             # the daemon pushes and pulls by itself
//! push_debounce_ms = 500
//! pull_interval_secs = 10
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{CONFIG_FILE, mask_secret};
use crate::error::{CairnError, ErrorCode, Result};
use crate::text::normalize_project;

/// How long the daemon waits after a write before pushing (more writes in that time go along).
pub const DEFAULT_PUSH_DEBOUNCE: Duration = Duration::from_millis(500);
/// How often the daemon pulls when nothing else made it.
pub const DEFAULT_PULL_INTERVAL: Duration = Duration::from_secs(10);

/// `[sync]` as written in the file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SyncFile {
    remote: Option<String>,
    token: Option<String>,
    projects: Option<Vec<String>>,
    autosync: Option<bool>,
    push_debounce_ms: Option<u64>,
    pull_interval_secs: Option<u64>,
}

/// The hub a data dir syncs with.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct RemoteSettings {
    /// `https://host[:port]` (or `http://` on a loopback address), no trailing slash.
    pub url: String,
    /// The hub token (`chub_…`); never printed in full.
    #[serde(serialize_with = "masked_token")]
    pub token: String,
    /// The projects that sync with it; empty: every project.
    pub projects: Vec<String>,
    /// The daemon syncs by itself (`false`: only `cairn remote sync`).
    pub autosync: bool,
    #[serde(with = "millis")]
    pub push_debounce: Duration,
    #[serde(with = "millis")]
    pub pull_interval: Duration,
}

impl RemoteSettings {
    /// The name the hub's mutations are journaled under, and the prefix of its targets.
    pub fn source_key(&self) -> String {
        format!("hub:{}", self.url)
    }

    /// The journal target of one project on this hub.
    pub fn target_key(&self, project: &str) -> String {
        format!("{}#{project}", self.source_key())
    }

    /// Whether `project` syncs with this hub.
    pub fn covers(&self, project: &str) -> bool {
        self.projects.is_empty() || self.projects.iter().any(|p| p == project)
    }

    /// The projects as one text (the pull cursor remembers it: other projects, another cursor).
    pub fn scope_text(&self) -> String {
        if self.projects.is_empty() { "*".to_owned() } else { self.projects.join(",") }
    }
}

fn masked_token<S: serde::Serializer>(token: &str, serializer: S) -> std::result::Result<S::Ok, S::Error> {
    serializer.serialize_str(&mask_secret(Some(token)))
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(d)?))
    }
}

/// The remote from `[sync]` and the environment (`CAIRN_SYNC_REMOTE`, `CAIRN_SYNC_TOKEN`),
/// checked; `None` when no remote is set.
pub(crate) fn load(table: Option<toml::Table>, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<RemoteSettings>> {
    let file: SyncFile = match table {
        Some(table) => SyncFile::deserialize(toml::Value::Table(table)).map_err(|e| {
            invalid_config(format!("[sync]: {}", e.message()))
                .with_hint("keys: remote, token, projects, autosync, push_debounce_ms, pull_interval_secs")
        })?,
        None => SyncFile::default(),
    };
    let Some(url) = env("CAIRN_SYNC_REMOTE").or(file.remote) else {
        return Ok(None);
    };
    let url = normalize_remote_url(&url)?;
    let token = env("CAIRN_SYNC_TOKEN").or(file.token).filter(|t| !t.trim().is_empty()).ok_or_else(|| {
        invalid_config(format!("[sync] remote = \"{url}\" needs a token"))
            .with_hint("cairn remote add URL --token TOKEN, or set CAIRN_SYNC_TOKEN")
    })?;
    let projects = normalize_projects(file.projects.unwrap_or_default())?;
    let pull_interval = Duration::from_secs(file.pull_interval_secs.unwrap_or(DEFAULT_PULL_INTERVAL.as_secs()));
    if pull_interval.is_zero() {
        return Err(invalid_config("[sync] pull_interval_secs must be at least 1".into()));
    }
    Ok(Some(RemoteSettings {
        url,
        token: token.trim().to_owned(),
        projects,
        autosync: file.autosync.unwrap_or(true),
        push_debounce: file.push_debounce_ms.map_or(DEFAULT_PUSH_DEBOUNCE, Duration::from_millis),
        pull_interval,
    }))
}

/// Read only `[sync]` of a data dir's config.toml and the environment: the daemon reads it again
/// before every sync round, so `cairn remote add` takes effect without a restart.
pub fn load_remote(data_dir: &std::path::Path) -> Result<Option<RemoteSettings>> {
    let env = |k: &str| std::env::var(k).ok();
    let file = super::read_config_file(data_dir)?;
    load(file.sync, &env)
}

fn invalid_config(message: String) -> CairnError {
    CairnError::new(ErrorCode::InvalidConfig, format!("{CONFIG_FILE}: {message}"))
}

/// Project names as the store keeps them, without duplicates.
pub fn normalize_projects(raw: Vec<String>) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for p in raw {
        let name = normalize_project(&p).0;
        if name.is_empty() {
            return Err(CairnError::invalid(format!("{p:?} is not a project name")));
        }
        if !out.contains(&name) {
            out.push(name);
        }
    }
    Ok(out)
}

/// A hub's address as cairn keeps it: `https://host[:port][/path]` without a trailing slash.
/// Plain `http://` is accepted for a loopback host only, since the token would otherwise cross
/// the network in clear text (the hub refuses the same).
pub fn normalize_remote_url(raw: &str) -> Result<String> {
    let bad = |why: &str| {
        CairnError::new(ErrorCode::RemoteUrlInvalid, format!("{raw:?} is not a hub address: {why}"))
            .with_hint("give https://HOST[:PORT] (http:// only for 127.0.0.1, ::1 or localhost)")
    };
    let trimmed = raw.trim().trim_end_matches('/');
    let (scheme, rest) = trimmed.split_once("://").ok_or_else(|| bad("no scheme"))?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "https" && scheme != "http" {
        return Err(bad("the scheme must be https or http"));
    }
    if rest.contains(['?', '#', ' ']) || rest.contains('@') {
        return Err(bad("no credentials, query or fragment in the address"));
    }
    let authority = rest.split('/').next().unwrap_or_default();
    let host = host_of(authority).ok_or_else(|| bad("no host"))?;
    if scheme == "http" && !is_loopback_host(host) {
        return Err(bad("plain http is for a loopback hub only"));
    }
    Ok(format!("{scheme}://{rest}"))
}

/// The host of `host[:port]` or `[v6][:port]`, checked for a numeric port.
fn host_of(authority: &str) -> Option<&str> {
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']')?;
            (host, after.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.is_empty() || port.is_some_and(|p| p.parse::<u16>().is_err()) {
        return None;
    }
    Some(host)
}

fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> Option<toml::Table> {
        Some(toml::from_str(text).unwrap())
    }

    #[test]
    fn addresses_are_checked_and_normalised() {
        assert_eq!(normalize_remote_url("https://hub.example.com:8443/").unwrap(), "https://hub.example.com:8443");
        assert_eq!(normalize_remote_url("HTTP://127.0.0.1:9000").unwrap(), "http://127.0.0.1:9000");
        assert_eq!(normalize_remote_url("http://[::1]:9000/team").unwrap(), "http://[::1]:9000/team");
        assert_eq!(normalize_remote_url("http://localhost").unwrap(), "http://localhost");
        for bad in [
            "hub.example.com",
            "ftp://hub",
            "http://hub.example.com",
            "https://",
            "https://:80",
            "https://hub:port",
            "https://u:p@hub",
            "https://hub?x=1",
        ] {
            let err = normalize_remote_url(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::RemoteUrlInvalid, "{bad}");
        }
    }

    #[test]
    fn the_section_needs_a_token_and_keeps_defaults() {
        let none = |_: &str| None;
        assert_eq!(load(None, &none).unwrap(), None);
        let err = load(file("remote = \"https://hub\""), &none).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidConfig);
        let remote =
            load(file("remote = \"https://hub/\"\ntoken = \"chub_x\"\nprojects = [\"Alpha\", \"alpha\"]"), &none)
                .unwrap()
                .unwrap();
        assert_eq!(remote.url, "https://hub");
        assert_eq!(remote.projects, vec!["alpha".to_owned()]);
        assert!(remote.autosync);
        assert_eq!(remote.push_debounce, DEFAULT_PUSH_DEBOUNCE);
        assert_eq!(remote.pull_interval, DEFAULT_PULL_INTERVAL);
        assert_eq!(remote.target_key("alpha"), "hub:https://hub#alpha");
        assert!(remote.covers("alpha") && !remote.covers("beta"));
    }

    #[test]
    fn the_environment_wins_over_the_file() {
        let env = |k: &str| match k {
            "CAIRN_SYNC_REMOTE" => Some("http://127.0.0.1:1".to_owned()),
            "CAIRN_SYNC_TOKEN" => Some("chub_env".to_owned()),
            _ => None,
        };
        let remote = load(file("remote = \"https://hub\"\ntoken = \"chub_file\""), &env).unwrap().unwrap();
        assert_eq!((remote.url.as_str(), remote.token.as_str()), ("http://127.0.0.1:1", "chub_env"));
        let shown = serde_json::to_string(&remote).unwrap();
        assert!(!shown.contains("chub_env") && shown.contains("\"token\":\"set\""), "{shown}");
    }

    #[test]
    fn unknown_keys_and_zero_intervals_are_refused() {
        let none = |_: &str| None;
        let err = load(file("remote = \"https://hub\"\nsecret = 1"), &none).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidConfig);
        assert!(err.message.contains("secret"), "{err:?}");
        let err = load(file("remote = \"https://hub\"\ntoken = \"t\"\npull_interval_secs = 0"), &none).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidConfig);
    }
}

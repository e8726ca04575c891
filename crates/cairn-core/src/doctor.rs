//! `cairn doctor`: read-only checks of the data dir and the database (their SQL is
//! `crate::store::doctor`).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::store::doctor::INTEGRITY_CHECK;
use crate::store::{DB_FILE, SCHEMA_VERSION, Store};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    Ok,
    Warning,
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = DoctorCheck))]
pub struct Check {
    pub id: String,
    pub status: CheckStatus,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DoctorReport {
    /// The worst status of any check.
    pub status: CheckStatus,
    pub checks: Vec<Check>,
}

fn check(id: &str, status: CheckStatus, message: impl Into<String>, hint: Option<&str>) -> Check {
    Check { id: id.into(), status, message: message.into(), hint: hint.map(str::to_owned) }
}

/// Run every check against the data dir. Never modifies anything.
pub fn run(data_dir: &Path) -> DoctorReport {
    let mut checks = vec![data_dir_check(data_dir)];
    let db = data_dir.join(DB_FILE);
    if db.exists() {
        checks.extend(permission_check(&db));
        match Store::open_for_inspection(&db) {
            Ok(store) => {
                checks.extend(database_checks(&store));
                checks.extend(spool_check(data_dir, Some(&store)));
                checks.extend(remote_check(data_dir, &store));
            }
            Err(e) => checks.push(check("database", CheckStatus::Error, e.message, e.hint.as_deref())),
        }
    } else {
        checks.push(check(
            "database",
            CheckStatus::Warning,
            "no database yet",
            Some("it is created by the first save"),
        ));
        checks.extend(spool_check(data_dir, None));
    }
    let status = checks.iter().map(|c| c.status).max().unwrap_or(CheckStatus::Ok);
    DoctorReport { status, checks }
}

/// The hub of `[sync]`: whether its settings read, and whether the last push or pull failed
/// (the daemon's live phase is in `cairn remote status`). No row when no hub is set.
fn remote_check(data_dir: &Path, store: &Store) -> Option<Check> {
    let remote = match crate::settings::load_remote(data_dir) {
        Ok(remote) => remote?,
        Err(e) => return Some(check("sync", CheckStatus::Error, e.message, e.hint.as_deref())),
    };
    let config = data_dir.join(crate::settings::CONFIG_FILE);
    if mode_of(&config).is_some_and(|mode| mode & 0o077 != 0) {
        return Some(check(
            "sync",
            CheckStatus::Warning,
            format!("{} holds the hub token and is readable by others", config.display()),
            Some("chmod 600 it"),
        ));
    }
    let status = match store.remote_status(&remote) {
        Ok(status) => status,
        Err(e) => {
            return Some(check("sync", CheckStatus::Warning, e.message, Some("any write command migrates the store")));
        }
    };
    let failed = status.per_project.iter().find_map(|p| p.last_error.clone()).or(status.last_pull_error.clone());
    let summary =
        format!("hub {}: {} change(s) to push, pulled up to hub seq {}", status.url, status.pending, status.cursor);
    Some(match failed {
        Some(error) => check(
            "sync",
            CheckStatus::Warning,
            format!("{summary}; last error: {error}"),
            Some("cairn remote status shows the phase; cairn remote sync retries now"),
        ),
        None if status.parked > 0 => check(
            "sync",
            CheckStatus::Warning,
            format!("{summary}; {} change(s) parked: the hub will not take them", status.parked),
            Some("cairn remote status names them and why; edit or delete the memory to send it again"),
        ),
        None => check("sync", CheckStatus::Ok, summary, None),
    })
}

fn data_dir_check(dir: &Path) -> Check {
    if !dir.is_dir() {
        return check("data_dir", CheckStatus::Warning, format!("{} does not exist yet", dir.display()), None);
    }
    let writable = tempfile_probe(dir);
    if !writable {
        return check(
            "data_dir",
            CheckStatus::Error,
            format!("{} is not writable", dir.display()),
            Some("fix its permissions or choose another --data-dir"),
        );
    }
    match mode_of(dir) {
        Some(mode) if mode & 0o077 != 0 => check(
            "data_dir",
            CheckStatus::Warning,
            format!("{} is readable by others (mode {mode:o})", dir.display()),
            Some("chmod 700 it: memories can hold private project details"),
        ),
        _ => check("data_dir", CheckStatus::Ok, format!("{} is private and writable", dir.display()), None),
    }
}

fn tempfile_probe(dir: &Path) -> bool {
    let probe = dir.join(".cairn-doctor-probe");
    let ok = std::fs::write(&probe, b"").is_ok();
    let _ = std::fs::remove_file(probe);
    ok
}

fn permission_check(db: &Path) -> Option<Check> {
    let mode = mode_of(db)?;
    Some(if mode & 0o077 != 0 {
        check("permissions", CheckStatus::Warning, format!("database mode is {mode:o}"), Some("chmod 600 it"))
    } else {
        check("permissions", CheckStatus::Ok, format!("database mode is {mode:o}"), None)
    })
}

#[cfg(unix)]
fn mode_of(path: &Path) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).ok().map(|m| m.permissions().mode() & 0o777)
}

#[cfg(not(unix))]
fn mode_of(_path: &Path) -> Option<u32> {
    None
}

fn database_checks(store: &Store) -> Vec<Check> {
    let mut checks = Vec::new();
    checks.push(match store.schema_version() {
        Ok(v) if v == SCHEMA_VERSION => check("schema", CheckStatus::Ok, format!("schema version {v}"), None),
        Ok(v) if v < SCHEMA_VERSION => check(
            "schema",
            CheckStatus::Warning,
            format!("schema version {v}, current is {SCHEMA_VERSION}"),
            Some("any write command migrates it"),
        ),
        Ok(v) => check(
            "schema",
            CheckStatus::Error,
            format!("schema version {v} is newer than this cairn"),
            Some("upgrade cairn"),
        ),
        Err(e) => check("schema", CheckStatus::Error, e.message, None),
    });
    checks.push(integrity_check(store));
    for (id, table) in [("fts_observations", "observations_fts"), ("fts_prompts", "prompts_fts")] {
        checks.push(fts_check(store, id, table));
    }
    checks.push(privacy_check(store));
    checks.push(stats_counts_check(store));
    checks
}

/// The counts `stats` shows, kept by triggers, against a recount of the rows.
fn stats_counts_check(store: &Store) -> Check {
    let id = "stats_counts";
    let (kept, counted) = match (store.kept_stats_counts(), store.recounted_stats_counts()) {
        (Ok(kept), Ok(counted)) => (kept, counted),
        (Err(e), _) | (_, Err(e)) => return check(id, CheckStatus::Warning, e.message, None),
    };
    let differences = kept.differences(&counted);
    if differences.is_empty() {
        return check(id, CheckStatus::Ok, "the counts stats shows match a recount", None);
    }
    check(
        id,
        CheckStatus::Warning,
        format!("the counts stats shows are out of step with the rows: {}", differences.join(", ")),
        Some("run `cairn doctor --repair` to recount them"),
    )
}

/// Stored text that still holds a `<private>` tag or a secret: how much, and a few memory ids
/// (never the text).
fn privacy_check(store: &Store) -> Check {
    let found = match store.privacy_findings() {
        Ok(found) => found,
        Err(e) => return check("privacy", CheckStatus::Warning, e.message, None),
    };
    if found.total() == 0 {
        return check("privacy", CheckStatus::Ok, "no stored text holds private content or a secret", None);
    }
    let ids = found.memory_ids.iter().map(|id| format!("#{id}")).collect::<Vec<_>>().join(", ");
    let message = format!(
        "stored text still holds private content or a secret: {} memories{}, {} revisions, {} prompts, \
         {} sessions, {} relations, {} sync journal entries",
        found.memories,
        if ids.is_empty() { String::new() } else { format!(" ({ids})") },
        found.revisions,
        found.prompts,
        found.sessions,
        found.relations,
        found.journal
    );
    check("privacy", CheckStatus::Warning, message, Some("`cairn privacy rewrite` redacts them (--dry-run first)"))
}

/// The spool of events hooks and plugins kept while no daemon answered: what waits, and what
/// was lost (refused when full, unreadable, refused by the store). Said only once there is a
/// spool.
fn spool_check(data_dir: &Path, store: Option<&Store>) -> Option<Check> {
    let spool = crate::spool::Spool::in_data_dir(data_dir);
    if !spool.dir().is_dir() {
        return None;
    }
    let status = spool.status();
    // An older schema has no counters yet: nothing was counted.
    let counts = store.and_then(|s| s.spool_counts().ok()).unwrap_or_default();
    let dropped = counts.dropped + status.dropped_uncounted;
    let message = format!(
        "{} events waiting ({} bytes); {dropped} dropped, {} unreadable, {} refused by the store, {} set aside after failing",
        status.pending, status.bytes, counts.corrupt, counts.rejected, counts.failed
    );
    Some(if dropped + counts.corrupt + counts.failed > 0 {
        check(
            "spool",
            CheckStatus::Warning,
            message,
            Some(
                "events were lost while no daemon answered (spool full, disk full, or damaged files), or kept failing (spool/failed/ holds them for a bug report); see the daemon's log",
            ),
        )
    } else if status.pending > 0 {
        check("spool", CheckStatus::Ok, message, Some("the daemon applies them when it starts: cairn serve"))
    } else {
        check("spool", CheckStatus::Ok, message, None)
    })
}

/// SQLite's own check of the database file.
fn integrity_check(store: &Store) -> Check {
    let (id, label) = ("integrity", INTEGRITY_CHECK);
    match store.integrity() {
        Ok(v) if v == "ok" => check(id, CheckStatus::Ok, format!("{label}: {v}"), None),
        Ok(v) => check(id, CheckStatus::Error, format!("{label}: {v}"), Some("restore from an export")),
        Err(e) => check(id, CheckStatus::Error, format!("{label} failed: {e}"), Some("restore from an export")),
    }
}

/// FTS5's integrity check compares the index with its content (rank 1: also the external
/// content), i.e. every live memory is indexed and nothing else is.
fn fts_check(store: &Store, id: &str, table: &str) -> Check {
    match store.fts_integrity(table) {
        Ok(()) => check(id, CheckStatus::Ok, format!("{table} matches its table"), None),
        Err(e) if e.to_string().contains("readonly") => {
            // A read-only connection cannot run the check command; count rows instead.
            check(id, CheckStatus::Ok, format!("{table} present (full check needs write access)"), None)
        }
        Err(e) => check(
            id,
            CheckStatus::Error,
            format!("{table} is out of step: {e}"),
            Some("run `cairn doctor --repair` to rebuild the index"),
        ),
    }
}

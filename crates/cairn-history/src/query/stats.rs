//! What the archive holds, per host, and forgetting one session.

use super::results::{ArchiveDisk, Forgotten, HistoryStats, HostHistoryStats};
use super::{check_id, session_not_found};
use crate::model::HistoryHost;
use crate::store::HistoryDb;
use cairn_base::error::Result;
use rusqlite::Connection;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Per host: what the archive holds, what the readers skipped, which sources fail, the host's
/// files it was read from; and the archive's size on disk against those files.
pub fn stats(db: &HistoryDb) -> Result<HistoryStats> {
    let conn = db.conn();
    // Every host always, so an empty archive says so per host.
    let mut hosts: BTreeMap<String, HostHistoryStats> =
        HistoryHost::ALL.into_iter().map(|h| (h.as_str().to_owned(), empty_host_stats(h.as_str()))).collect();
    type SessionRow = (String, i64, Option<String>, Option<String>);
    let sessions: Vec<SessionRow> = collect(
        conn,
        "SELECT host, count(*), min(created_at), max(updated_at) FROM history_sessions GROUP BY host",
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )?;
    for (name, count, oldest, newest) in sessions {
        let h = host_entry(&mut hosts, name);
        (h.sessions, h.oldest, h.newest) = (count as u64, oldest, newest);
    }
    let messages: Vec<(String, i64)> = collect(
        conn,
        "SELECT s.host, count(*) FROM history_messages m JOIN history_sessions s ON s.id = m.session_id GROUP BY s.host",
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    for (name, count) in messages {
        host_entry(&mut hosts, name).messages = count as u64;
    }
    let parts: Vec<(String, i64, i64)> = collect(
        conn,
        "SELECT s.host, count(*), coalesce(sum(length(p.text)), 0) + coalesce(sum(length(p.input)), 0)
             + coalesce(sum(length(p.output)), 0)
         FROM history_parts p JOIN history_sessions s ON s.id = p.session_id GROUP BY s.host",
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    for (name, count, bytes) in parts {
        let h = host_entry(&mut hosts, name);
        (h.parts, h.bytes) = (count as u64, bytes as u64);
    }
    let skips: Vec<(String, String, i64)> =
        collect(conn, "SELECT host, reason, sum(count) FROM history_skips GROUP BY host, reason", |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    for (name, reason, count) in skips {
        host_entry(&mut hosts, name).skipped.insert(reason, count as u64);
    }
    let errors: Vec<(String, i64)> = collect(
        conn,
        "SELECT host, count(*) FROM history_sources WHERE last_error_code IS NOT NULL GROUP BY host",
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    for (name, count) in errors {
        host_entry(&mut hosts, name).errors = count as u64;
    }
    add_source_files(conn, &mut hosts)?;
    // The hosts in their order (`HistoryHost::ALL`), then anything else by name.
    let mut hosts: Vec<HostHistoryStats> = hosts.into_values().collect();
    hosts.sort_by_key(|h| {
        (HistoryHost::parse(&h.host).map_or(HistoryHost::ALL.len() as u8, |h| h as u8), h.host.clone())
    });
    let disk = archive_disk(db, &hosts);
    Ok(HistoryStats { hosts, disk })
}

/// The host files each host's sources were read from, as their cursors recorded them (no walk
/// of the hosts' folders). A source whose first read failed (its cursor is `null`) was not read
/// from. A database's sources (OpenCode's, one per session or the whole file) have cursors
/// that record rows (a watermark), not bytes: each database is counted once, at its size now.
fn add_source_files(conn: &Connection, hosts: &mut BTreeMap<String, HostHistoryStats>) -> Result<()> {
    let files: Vec<(String, i64, i64)> = collect(
        conn,
        "SELECT host, count(*), coalesce(sum(json_extract(cursor, '$.size')), 0) FROM history_sources
         WHERE cursor != 'null' AND json_extract(cursor, '$.watermark') IS NULL GROUP BY host",
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    for (name, count, bytes) in files {
        let h = host_entry(hosts, name);
        (h.source_files, h.source_bytes) = (count as u64, bytes as u64);
    }
    // A database source's key is the database's path, or `path#session` for one session of it.
    let databases: Vec<(String, String)> = collect(
        conn,
        "SELECT DISTINCT host, CASE WHEN instr(key, '#') > 0 THEN substr(key, 1, instr(key, '#') - 1) ELSE key END
         FROM history_sources WHERE cursor != 'null' AND json_extract(cursor, '$.watermark') IS NOT NULL",
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    for (name, path) in databases {
        let h = host_entry(hosts, name);
        h.source_files += 1;
        h.source_bytes += file_bytes(Path::new(&path));
    }
    Ok(())
}

/// The archive's files (`history.db`, its WAL, the full-text index) against the hosts' files.
fn archive_disk(db: &HistoryDb, hosts: &[HostHistoryStats]) -> ArchiveDisk {
    let source_bytes = hosts.iter().map(|h| h.source_bytes).sum();
    // In memory: no file to measure.
    let Some(path) = db.path() else { return ArchiveDisk { source_bytes, ..ArchiveDisk::default() } };
    let index = crate::index::fts_path(path);
    let db_bytes = file_bytes(path);
    // Not the `-shm` files: a 32 kB index of the WAL, in memory, while a connection is open.
    let wal_bytes = file_bytes(&with_suffix(path, "-wal"));
    let index_bytes = file_bytes(&index) + file_bytes(&with_suffix(&index, "-wal"));
    let archive_bytes = db_bytes + wal_bytes + index_bytes;
    ArchiveDisk {
        db_bytes,
        wal_bytes,
        index_bytes,
        archive_bytes,
        source_bytes,
        ratio: (source_bytes > 0).then(|| archive_bytes as f64 / source_bytes as f64),
    }
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// A file's size; a missing one (a host deleted it) is 0.
fn file_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| if m.is_file() { m.len() } else { 0 })
}

pub(super) fn host_entry(hosts: &mut BTreeMap<String, HostHistoryStats>, name: String) -> &mut HostHistoryStats {
    hosts.entry(name.clone()).or_insert_with(|| empty_host_stats(&name))
}

pub(super) fn empty_host_stats(host: &str) -> HostHistoryStats {
    HostHistoryStats {
        host: host.to_owned(),
        sessions: 0,
        messages: 0,
        parts: 0,
        bytes: 0,
        oldest: None,
        newest: None,
        skipped: BTreeMap::new(),
        errors: 0,
        source_files: 0,
        source_bytes: 0,
    }
}

pub(super) fn collect<T>(
    conn: &Connection,
    sql: &str,
    map: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    Ok(stmt.query_map([], map)?.collect::<rusqlite::Result<_>>()?)
}

/// Erase one session from the archive (not its children).
pub fn forget(db: &mut HistoryDb, session_id: &str) -> Result<Forgotten> {
    check_id("session_id", session_id)?;
    let removed = db.forget_session(session_id)?;
    if removed == 0 {
        return Err(session_not_found(session_id));
    }
    Ok(Forgotten { session_id: session_id.to_owned(), status: "forgotten".to_owned(), removed })
}

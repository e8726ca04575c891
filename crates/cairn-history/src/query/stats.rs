//! What the archive holds, per host, and forgetting one session.

use super::results::{Forgotten, HistoryStats, HostHistoryStats};
use super::{check_id, session_not_found};
use crate::model::HistoryHost;
use crate::store::HistoryDb;
use cairn_base::error::Result;
use rusqlite::Connection;
use std::collections::BTreeMap;

/// Per host: what the archive holds, what the readers skipped, which sources fail.
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
    // The hosts in their order (`HistoryHost::ALL`), then anything else by name.
    let mut hosts: Vec<HostHistoryStats> = hosts.into_values().collect();
    hosts.sort_by_key(|h| {
        (HistoryHost::parse(&h.host).map_or(HistoryHost::ALL.len() as u8, |h| h as u8), h.host.clone())
    });
    Ok(HistoryStats { hosts })
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

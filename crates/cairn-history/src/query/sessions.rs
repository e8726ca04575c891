//! Sessions and a session's children (sub-agents).

use super::requests::SessionsRequest;
use super::results::SessionListing;
use super::view;
use crate::model::HistoryHost;
use crate::store::HistoryDb;
use cairn_base::error::{CairnError, Result};
use rusqlite::{Connection, params_from_iter};

/// Sessions newest first: main sessions unless `include_children`.
pub fn sessions(db: &HistoryDb, req: &SessionsRequest) -> Result<Vec<SessionListing>> {
    let mut sql = String::from(
        "SELECT s.id, s.host, s.title, s.directory, s.project, s.updated_at, s.parent_id,
             (SELECT count(*) FROM history_messages m WHERE m.session_id = s.id)
         FROM history_sessions s WHERE 1 = 1",
    );
    let mut values: Vec<String> = Vec::new();
    if !req.include_children {
        sql.push_str(" AND s.parent_id IS NULL");
    }
    if let Some(project) = req.project.as_deref().filter(|p| !p.is_empty()) {
        values.push(project.to_owned());
        sql.push_str(&format!(" AND s.project = ?{}", values.len()));
    }
    if let Some(host) = req.host.as_deref().filter(|h| !h.is_empty()) {
        let host = HistoryHost::parse(host.trim()).ok_or_else(|| {
            CairnError::invalid(format!("unknown host {host:?}"))
                .with_hint("use opencode, claude-code, codex or gemini")
        })?;
        values.push(host.as_str().to_owned());
        sql.push_str(&format!(" AND s.host = ?{}", values.len()));
    }
    for word in req.query.as_deref().unwrap_or("").split_whitespace().take(8) {
        values.push(format!("%{}%", word.to_lowercase().replace(['%', '_'], "")));
        let n = values.len();
        sql.push_str(&format!(
            " AND (lower(coalesce(s.title, '')) LIKE ?{n} OR lower(coalesce(s.directory, '')) LIKE ?{n}
                   OR lower(s.id) LIKE ?{n})"
        ));
    }
    sql.push_str(&format!(" ORDER BY s.updated_at DESC, s.id LIMIT {}", clamp(req.limit, 10)));
    listing(db.conn(), &sql, values)
}

/// A session's sub-agent sessions, oldest first.
pub fn children(db: &HistoryDb, session_id: &str) -> Result<Vec<SessionListing>> {
    view(db.conn(), session_id, None)?;
    listing(
        db.conn(),
        "SELECT s.id, s.host, s.title, s.directory, s.project, s.updated_at, s.parent_id,
             (SELECT count(*) FROM history_messages m WHERE m.session_id = s.id)
         FROM history_sessions s WHERE s.parent_id = ?1 ORDER BY s.created_at, s.id LIMIT 500",
        vec![session_id.to_owned()],
    )
}

pub(super) fn listing(conn: &Connection, sql: &str, values: Vec<String>) -> Result<Vec<SessionListing>> {
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt.query_map(params_from_iter(values), |r| {
        Ok(SessionListing {
            session_id: r.get(0)?,
            host: r.get(1)?,
            title: r.get(2)?,
            directory: r.get(3)?,
            project: r.get(4)?,
            updated: r.get(5)?,
            parent_id: r.get(6)?,
            messages: r.get::<_, i64>(7)? as u64,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

pub(super) fn clamp(limit: usize, default: usize) -> usize {
    if limit == 0 { default } else { limit.min(500) }
}

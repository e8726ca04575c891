//! What the archive knows of one session, for the memory store's Last Session record: who
//! ran it, what the user asked, which tools ran and which files they changed and read, the
//! assistant's last words, how often it was compacted. Read-only.

use std::collections::HashMap;
use std::path::PathBuf;

use rusqlite::{Connection, OptionalExtension, params};

use crate::store::HistoryDb;
use cairn_base::error::Result;

impl HistoryDb {
    /// The session as archived (`requests` newest user requests, the newest `tool_parts` tool
    /// calls); `None` when the archive has no such session. Paths are shown relative to
    /// `directory`, or to the archived one when it is empty.
    pub fn session_facts(
        &self,
        id: &str,
        directory: &str,
        requests: usize,
        tool_parts: usize,
    ) -> Result<Option<ArchivedSession>> {
        archived_facts(self.conn(), id, directory, requests, tool_parts)
    }

    /// Where the session ran (a project directory), when the archive knows it.
    pub fn session_directory(&self, id: &str) -> Option<PathBuf> {
        let dir: Option<String> = self
            .conn()
            .query_row("SELECT directory FROM history_sessions WHERE id = ?1", [id], |row| row.get(0))
            .optional()
            .ok()
            .flatten()
            .flatten();
        dir.filter(|d| !d.trim().is_empty()).map(PathBuf::from)
    }
}

/// What the history archive knows of a session.
pub struct ArchivedSession {
    pub host: String,
    pub title: Option<String>,
    pub project: Option<String>,
    pub parent: bool,
    pub requests: Vec<String>,
    pub tools: Vec<(String, usize)>,
    pub files_changed: Vec<String>,
    pub files_read: Vec<String>,
    pub stopped_at: Option<String>,
    pub compactions: usize,
}

/// The session as archived; `None` when the archive has no such session.
fn archived_facts(
    conn: &Connection,
    id: &str,
    directory: &str,
    requests: usize,
    tool_parts: usize,
) -> Result<Option<ArchivedSession>> {
    let row = conn
        .prepare_cached("SELECT host, title, project, parent_id, directory FROM history_sessions WHERE id = ?1")?
        .query_row([id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, Option<String>>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, Option<String>>(4)?,
            ))
        })
        .optional()?;
    let Some((host, title, project, parent, archived_dir)) = row else { return Ok(None) };
    let directory = if directory.is_empty() { archived_dir.unwrap_or_default() } else { directory.to_owned() };
    let (tools, files_changed, files_read) = tool_facts(conn, id, &directory, tool_parts)?;
    Ok(Some(ArchivedSession {
        host,
        title,
        project,
        parent: parent.is_some(),
        requests: archived_requests(conn, id, requests)?,
        tools,
        files_changed,
        files_read,
        stopped_at: last_assistant_text(conn, id)?,
        compactions: conn
            .prepare_cached("SELECT count(*) FROM history_messages WHERE session_id = ?1 AND compaction = 1")?
            .query_row([id], |r| r.get::<_, i64>(0))? as usize,
    }))
}

/// The text of the session's newest turn-opening user messages, oldest first.
fn archived_requests(conn: &Connection, id: &str, limit: usize) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT group_concat(p.text, ' ') FROM history_messages m
         JOIN history_parts p ON p.session_id = m.session_id AND p.message_id = m.id AND p.kind = 'text'
         WHERE m.session_id = ?1 AND m.role = 'user' AND m.summary = 0 AND m.compaction = 0 AND m.synthetic = 0
         GROUP BY m.seq, m.id ORDER BY m.seq DESC, m.id DESC LIMIT ?2",
    )?;
    let mut rows: Vec<String> = stmt
        .query_map(params![id, limit as i64], |r| r.get::<_, Option<String>>(0))?
        .filter_map(std::result::Result::transpose)
        .collect::<rusqlite::Result<Vec<_>>>()?
        .into_iter()
        .filter(|t| !t.trim().is_empty())
        .collect();
    rows.reverse();
    Ok(rows)
}

/// The newest text the assistant wrote (a compaction's summary is not it).
fn last_assistant_text(conn: &Connection, id: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT p.text FROM history_messages m
             JOIN history_parts p ON p.session_id = m.session_id AND p.message_id = m.id
             WHERE m.session_id = ?1 AND m.role = 'assistant' AND m.summary = 0 AND p.kind = 'text'
               AND trim(coalesce(p.text, '')) != ''
             ORDER BY m.seq DESC, m.id DESC, p.idx DESC LIMIT 1",
        )?
        .query_row([id], |r| r.get(0))
        .optional()?)
}

/// Tool call counts (most first) and the files the newest calls changed and read, each once,
/// newest first, shown relative to the session's directory.
type ToolFacts = (Vec<(String, usize)>, Vec<String>, Vec<String>);

fn tool_facts(conn: &Connection, id: &str, directory: &str, limit: usize) -> Result<ToolFacts> {
    // Paths out of the input in SQL: a write's input holds the whole file, not worth parsing.
    let mut stmt = conn.prepare_cached(
        "SELECT p.tool, p.status,
                CASE WHEN json_valid(p.input) THEN coalesce(json_extract(p.input, '$.filePath'),
                    json_extract(p.input, '$.file_path'), json_extract(p.input, '$.notebook_path'),
                    json_extract(p.input, '$.path')) END,
                CASE WHEN json_valid(p.input) THEN coalesce(json_extract(p.input, '$.patchText'),
                    json_extract(p.input, '$.patch')) END
         FROM history_parts p JOIN history_messages m ON m.session_id = p.session_id AND m.id = p.message_id
         WHERE p.session_id = ?1 AND p.kind = 'tool'
         ORDER BY m.seq DESC, m.id DESC, p.idx DESC LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![id, limit as i64], |r| {
        Ok((
            r.get::<_, Option<String>>(0)?,
            r.get::<_, Option<String>>(1)?,
            r.get::<_, Option<String>>(2).ok().flatten(),
            r.get::<_, Option<String>>(3).ok().flatten(),
        ))
    })?;
    let mut counts: Vec<(String, usize)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let (mut changed, mut read): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for row in rows {
        let (tool, status, path, patch) = row?;
        let name = crate::query::canonical_tool(tool.as_deref().unwrap_or("tool"));
        if let Some(&i) = index.get(&name) {
            counts[i].1 += 1;
        } else {
            index.insert(name.clone(), counts.len());
            counts.push((name.clone(), 1));
        }
        let writes = matches!(name.as_str(), "edit" | "write" | "apply_patch");
        let mut paths: Vec<String> = path.into_iter().collect();
        paths.extend(patch.iter().flat_map(|p| patch_files(p)));
        for path in paths.iter().map(|p| relative(p, directory)).filter(|p| !p.is_empty()) {
            let done = status.as_deref().is_none_or(|s| s == "completed");
            if writes && done {
                read.retain(|p| *p != path);
                push_once(&mut changed, path);
            } else if !changed.contains(&path) {
                push_once(&mut read, path);
            }
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    Ok((counts, changed, read))
}

fn patch_files(patch: &str) -> Vec<String> {
    patch
        .lines()
        .filter_map(|line| {
            ["*** Add File: ", "*** Update File: ", "*** Delete File: "]
                .iter()
                .find_map(|marker| line.strip_prefix(marker))
                .map(|p| p.trim().to_owned())
        })
        .collect()
}

fn push_once(list: &mut Vec<String>, item: String) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// `path` relative to `directory` when inside it.
fn relative(path: &str, directory: &str) -> String {
    let dir = directory.trim_end_matches('/');
    if !dir.is_empty() && path.trim().trim_end_matches('/') == dir {
        return String::new();
    }
    match path.strip_prefix(dir).and_then(|rest| rest.strip_prefix('/')) {
        Some(rest) if !dir.is_empty() && !rest.is_empty() => rest.to_owned(),
        _ => path.trim().to_owned(),
    }
}

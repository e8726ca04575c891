//! OpenCode's conversation storage (its SQLite database since 1.2) read into the history model.
//!
//! The database is OpenCode's, and OpenCode may be writing it while we read: it is opened
//! `SQLITE_OPEN_READ_ONLY` with `query_only` on, every query is parameterised and bounded, and a
//! read is one snapshot (a read transaction), so the messages and parts of one batch agree.
//! Reads are incremental on `(time_updated, id)` of each table; the cursor's `watermark` keeps,
//! per table, the last `time_updated` read and the ids read at exactly that time, so a row
//! written later in the same millisecond is neither missed nor read twice.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, params_from_iter};
use serde::{Deserialize, Serialize};

use super::model::{
    Cursor, HistoryHost, HistoryMessage, HistoryPart, HistoryRole, HistorySession, IngestBatch, PartKind, ToolStatus,
};
use super::text::{SkipCounter, clean_text, is_cairn_injection, project_of, valid_id};
use cairn_base::error::{CairnError, ErrorCode, Result};

/// Part types that carry nothing the history shows (bookkeeping of steps, snapshots, diffs).
const SILENT_PART_TYPES: &[&str] = &["step-start", "step-finish", "snapshot", "patch", "agent", "retry"];

/// How long a read waits for OpenCode's write lock before reporting `history_source_locked`
/// (OpenCode's own writes are short; a long hold means something else holds the file).
const BUSY_WAIT: Duration = Duration::from_millis(500);

/// The columns cairn reads, per table. A database without one of them is of a shape cairn
/// does not know (`history_source_unsupported`) rather than something to guess at.
const REQUIRED: &[(&str, &[&str])] = &[
    ("session", &["id", "parent_id", "directory", "title", "time_created", "time_updated"]),
    ("message", &["id", "session_id", "time_created", "time_updated", "data"]),
    ("part", &["id", "message_id", "session_id", "time_created", "time_updated", "data"]),
];

/// Every OpenCode database of this user: `$OPENCODE_DB` (absolute, or relative to the data
/// dir), else `<XDG_DATA_HOME or ~/.local/share>/opencode/opencode.db`, plus the channel
/// databases `opencode-<channel>.db` beside it unless `OPENCODE_DISABLE_CHANNEL_DB` is set.
/// Only files that exist are returned.
pub fn locate(env: &dyn Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let Some(data) = data_dir(env) else { return Vec::new() };
    let mut found = Vec::new();
    if let Some(db) = env("OPENCODE_DB").filter(|v| v != ":memory:") {
        let db = PathBuf::from(db);
        found.push(if db.is_absolute() { db } else { data.join(db) });
    } else {
        found.push(data.join("opencode.db"));
    }
    if env("OPENCODE_DISABLE_CHANNEL_DB").is_none() {
        found.extend(channel_dbs(&data));
    }
    found.retain(|p| p.is_file());
    found.dedup();
    found
}

/// OpenCode's data dir (its `Global.Path.data`): `<XDG_DATA_HOME or ~/.local/share>/opencode`.
pub fn data_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let base = match env("XDG_DATA_HOME") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env("HOME")?).join(".local").join("share"),
    };
    // open-memory looked in `$XDG_DATA_HOME/opencode.db`: the `opencode` segment matters.
    Some(base.join("opencode"))
}

fn channel_dbs(data: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(data) else { return Vec::new() };
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("opencode-") && n.ends_with(".db"))
        })
        .collect();
    out.sort();
    out
}

/// Where a read stopped in one table: the last `time_updated` and the ids read at that time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Mark {
    t: i64,
    ids: BTreeSet<String>,
}

/// The cursor's watermark: one mark per table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Watermark {
    #[serde(default)]
    s: Mark,
    #[serde(default)]
    m: Mark,
    #[serde(default)]
    p: Mark,
}

impl Watermark {
    fn of(cursor: &Cursor) -> Watermark {
        cursor.watermark.as_deref().and_then(|w| serde_json::from_str(w).ok()).unwrap_or_default()
    }
}

/// Read what changed since `cursor`: at most `max_rows` messages and `max_rows` parts (and the
/// sessions they belong to). Returns the batch, the next cursor and whether more rows remain.
pub fn read(db: &Path, cursor: &Cursor, max_rows: usize) -> Result<(IngestBatch, Cursor, bool)> {
    let mut conn = open(db)?;
    let tx = conn.transaction().map_err(|e| classify(db, e))?;
    let mut mark = Watermark::of(cursor);
    let limit = max_rows.max(1);
    let mut reader = DbReader::new(&tx, db);
    let mut skips = SkipCounter::default();

    let messages = changed_rows(&tx, "message", &mark.m, limit, None).map_err(|e| classify(db, e))?;
    let more_messages = messages.len() == limit;
    // While messages remain unread, parts stop at the last message time read, so a part never
    // arrives before its message.
    let part_bound = more_messages.then(|| messages.last().map_or(mark.m.t, |r| r.time));
    let parts = changed_rows(&tx, "part", &mark.p, limit, part_bound).map_err(|e| classify(db, e))?;
    let more_parts = parts.len() == limit;
    let sessions = changed_rows(&tx, "session", &mark.s, limit, None).map_err(|e| classify(db, e))?;
    let more_sessions = sessions.len() == limit;

    advance(&mut mark.m, &messages);
    advance(&mut mark.p, &parts);
    advance(&mut mark.s, &sessions);
    for row in &sessions {
        reader.want_session(&row.id);
    }
    for row in &messages {
        reader.message_row(row, &mut skips).map_err(|e| classify(db, e))?;
    }
    for row in &parts {
        reader.part_row(row, &mut skips).map_err(|e| classify(db, e))?;
    }
    let batch = reader.finish(&mut skips).map_err(|e| classify(db, e))?;
    drop(tx);
    let next = Cursor { watermark: Some(serde_json::to_string(&mark)?), ..Cursor::default() };
    let mut batch = batch;
    batch.skipped = skips.into_vec();
    Ok((batch, next, more_messages || more_parts || more_sessions))
}

/// Every message and part of one session (a poke for a session cairn has not seen, or a
/// re-read after `history forget`). No cursor: the store upserts.
pub fn read_session(db: &Path, session_id: &str) -> Result<IngestBatch> {
    if !valid_id(session_id) {
        return Err(CairnError::invalid(format!("not an OpenCode session id: {session_id:?}")));
    }
    let mut conn = open(db)?;
    let tx = conn.transaction().map_err(|e| classify(db, e))?;
    let mut reader = DbReader::new(&tx, db);
    let mut skips = SkipCounter::default();
    reader.want_session(session_id);
    for table in ["message", "part"] {
        let rows = session_rows(&tx, table, session_id).map_err(|e| classify(db, e))?;
        for row in &rows {
            if table == "message" {
                reader.message_row(row, &mut skips).map_err(|e| classify(db, e))?;
            } else {
                reader.part_row(row, &mut skips).map_err(|e| classify(db, e))?;
            }
        }
    }
    let mut batch = reader.finish(&mut skips).map_err(|e| classify(db, e))?;
    drop(tx);
    batch.skipped = skips.into_vec();
    Ok(batch)
}

/// Open read-only, refuse to write, and check the schema is one cairn knows.
fn open(db: &Path) -> Result<Connection> {
    if !db.is_file() {
        return Err(CairnError::new(
            ErrorCode::HistorySourceUnreadable,
            format!("no OpenCode database at {}", db.display()),
        ));
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
    let conn = if quiescent_wal(db) {
        Connection::open_with_flags(immutable_uri(db), flags)
    } else {
        Connection::open_with_flags(db, flags)
    }
    .map_err(|e| classify(db, e))?;
    conn.busy_timeout(BUSY_WAIT).map_err(|e| classify(db, e))?;
    conn.pragma_update(None, "query_only", true).map_err(|e| classify(db, e))?;
    check_schema(&conn, db)?;
    Ok(conn)
}

/// A WAL database with no `-wal` file has no connection open on it (every connection to a WAL
/// database keeps that file). Opening it normally, even read-only, would create `-wal` and
/// `-shm` files beside the host's database and leave them there; opened `immutable`, SQLite
/// touches nothing. A rollback-journal database is opened normally (reading it creates no
/// file, and its locks are what tell a reader the host is writing).
fn quiescent_wal(db: &Path) -> bool {
    let mut header = [0u8; 20];
    let is_wal = std::fs::File::open(db).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut header)).is_ok()
        && header.starts_with(b"SQLite format 3\0")
        && header[18] == 2;
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    is_wal && !Path::new(&wal).exists()
}

/// `file:<path>?immutable=1`, the path percent-encoded where a URI needs it.
fn immutable_uri(db: &Path) -> String {
    let mut uri = String::from("file:");
    for b in db.to_string_lossy().bytes() {
        match b {
            b'?' | b'#' | b'%' | 0x80.. => uri.push_str(&format!("%{b:02X}")),
            _ => uri.push(b as char),
        }
    }
    uri.push_str("?immutable=1");
    uri
}

fn check_schema(conn: &Connection, db: &Path) -> Result<()> {
    for (table, columns) in REQUIRED {
        let mut stmt = conn.prepare("SELECT name FROM pragma_table_info(?1)").map_err(|e| classify(db, e))?;
        let have: BTreeSet<String> = stmt
            .query_map([table], |r| r.get(0))
            .map_err(|e| classify(db, e))?
            .collect::<rusqlite::Result<_>>()
            .map_err(|e| classify(db, e))?;
        let missing: Vec<&str> = columns.iter().copied().filter(|c| !have.contains(*c)).collect();
        if !missing.is_empty() {
            return Err(CairnError::new(
                ErrorCode::HistorySourceUnsupported,
                format!(
                    "{}: table `{table}` lacks {} (an OpenCode schema cairn does not know)",
                    db.display(),
                    missing.join(", ")
                ),
            )
            .with_hint("upgrade cairn; OpenCode's own data is untouched"));
        }
    }
    Ok(())
}

/// Busy/locked → `history_source_locked`; cannot open or not a database → unreadable.
fn classify(db: &Path, err: rusqlite::Error) -> CairnError {
    use rusqlite::ffi::ErrorCode as Sql;
    if let rusqlite::Error::SqliteFailure(failure, _) = &err {
        match failure.code {
            Sql::DatabaseBusy | Sql::DatabaseLocked => {
                return CairnError::new(ErrorCode::HistorySourceLocked, format!("{} is locked: {err}", db.display()))
                    .with_hint("OpenCode (or another process) holds it; the next scan retries");
            }
            Sql::CannotOpen | Sql::PermissionDenied | Sql::NotADatabase | Sql::DatabaseCorrupt => {
                return CairnError::new(
                    ErrorCode::HistorySourceUnreadable,
                    format!("cannot read {}: {err}", db.display()),
                );
            }
            _ => {}
        }
    }
    CairnError::internal(format!("reading {}: {err}", db.display()))
}

/// One row of `session`, `message` or `part` as read (data JSON unparsed).
struct Row {
    id: String,
    time: i64,
    session_id: String,
    message_id: String,
    created: i64,
    data: String,
}

fn row_columns(table: &str) -> &'static str {
    match table {
        "message" => "id, time_updated, session_id, '', time_created, data",
        "part" => "id, time_updated, session_id, message_id, time_created, data",
        _ => "id, time_updated, id, '', time_created, ''",
    }
}

fn map_row(r: &rusqlite::Row) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get(0)?,
        time: r.get(1)?,
        session_id: r.get(2)?,
        message_id: r.get(3)?,
        created: r.get(4)?,
        data: r.get(5)?,
    })
}

/// Rows of `table` after `mark` in `(time_updated, id)` order, at most `limit`, and not past
/// `bound` when given.
fn changed_rows(
    conn: &Connection,
    table: &str,
    mark: &Mark,
    limit: usize,
    bound: Option<i64>,
) -> rusqlite::Result<Vec<Row>> {
    let exclude = vec!["?"; mark.ids.len()].join(",");
    let mut sql = format!("SELECT {} FROM {table} WHERE time_updated >= ?", row_columns(table));
    if !mark.ids.is_empty() {
        sql.push_str(&format!(" AND NOT (time_updated = ? AND id IN ({exclude}))"));
    }
    if bound.is_some() {
        sql.push_str(" AND time_updated <= ?");
    }
    sql.push_str(" ORDER BY time_updated, id LIMIT ?");
    let mut args: Vec<rusqlite::types::Value> = vec![mark.t.into()];
    if !mark.ids.is_empty() {
        args.push(mark.t.into());
        args.extend(mark.ids.iter().map(|id| rusqlite::types::Value::from(id.clone())));
    }
    if let Some(b) = bound {
        args.push(b.into());
    }
    args.push((limit as i64).into());
    let mut stmt = conn.prepare(&sql)?;
    stmt.query_map(params_from_iter(args), map_row)?.collect()
}

fn session_rows(conn: &Connection, table: &str, session_id: &str) -> rusqlite::Result<Vec<Row>> {
    let sql = format!("SELECT {} FROM {table} WHERE session_id = ?1 ORDER BY time_created, id", row_columns(table));
    let mut stmt = conn.prepare(&sql)?;
    stmt.query_map([session_id], map_row)?.collect()
}

fn advance(mark: &mut Mark, rows: &[Row]) {
    let Some(last) = rows.last() else { return };
    if last.time != mark.t {
        mark.t = last.time;
        mark.ids.clear();
    }
    mark.ids.extend(rows.iter().filter(|r| r.time == last.time).map(|r| r.id.clone()));
}

// --- the JSON of `message.data` and `part.data` -------------------------------------------

#[derive(Deserialize, Default)]
#[serde(default)]
struct MessageData {
    role: String,
    summary: serde_json::Value,
    finish: Option<String>,
    tokens: Option<serde_json::Value>,
    #[serde(rename = "modelID")]
    model_id: Option<String>,
    model: Option<ModelRef>,
    agent: Option<String>,
    mode: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ModelRef {
    #[serde(rename = "modelID")]
    model_id: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PartData {
    #[serde(rename = "type")]
    kind: String,
    text: Option<String>,
    synthetic: bool,
    tool: Option<String>,
    #[serde(rename = "callID")]
    call_id: Option<String>,
    state: Option<ToolState>,
    mime: Option<String>,
    filename: Option<String>,
    url: Option<String>,
    source: Option<FileSource>,
    prompt: Option<String>,
    description: Option<String>,
    agent: Option<String>,
    auto: Option<bool>,
    overflow: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ToolState {
    status: String,
    input: Option<serde_json::Value>,
    output: Option<String>,
    error: Option<String>,
    time: Option<ToolTime>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ToolTime {
    compacted: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct FileSource {
    path: Option<String>,
}

/// Turns rows into the model; fetches what a row needs from elsewhere in the same snapshot
/// (its session, and a user message's parts for its flags).
struct DbReader<'c> {
    conn: &'c Connection,
    db: &'c Path,
    sessions: BTreeMap<String, Option<HistorySession>>,
    messages: BTreeMap<String, HistoryMessage>,
    parts: Vec<HistoryPart>,
    /// User messages whose flags depend on parts: re-derived at the end from all their parts.
    user_messages: BTreeSet<String>,
}

impl<'c> DbReader<'c> {
    fn new(conn: &'c Connection, db: &'c Path) -> Self {
        Self {
            conn,
            db,
            sessions: BTreeMap::new(),
            messages: BTreeMap::new(),
            parts: Vec::new(),
            user_messages: BTreeSet::new(),
        }
    }

    fn want_session(&mut self, id: &str) {
        self.sessions.entry(id.to_owned()).or_insert(None);
    }

    fn message_row(&mut self, row: &Row, skips: &mut SkipCounter) -> rusqlite::Result<()> {
        if !valid_id(&row.id) || !valid_id(&row.session_id) {
            skips.add("invalid_id");
            return Ok(());
        }
        let Ok(data) = serde_json::from_str::<MessageData>(&row.data) else {
            skips.add("invalid_message");
            return Ok(());
        };
        let role = match data.role.as_str() {
            "user" => HistoryRole::User,
            "assistant" => HistoryRole::Assistant,
            _ => {
                skips.add("unknown_message_role");
                return Ok(());
            }
        };
        self.want_session(&row.session_id);
        if role == HistoryRole::User {
            self.user_messages.insert(row.id.clone());
        }
        let model = data.model_id.or_else(|| data.model.and_then(|m| m.model_id));
        self.messages.insert(
            row.id.clone(),
            HistoryMessage {
                id: row.id.clone(),
                session_id: row.session_id.clone(),
                role,
                seq: row.created,
                created_at: ms_ts(row.created),
                summary: role == HistoryRole::Assistant && data.summary == serde_json::Value::Bool(true),
                compaction: false,
                synthetic: false,
                finish: data.finish,
                tokens: if role == HistoryRole::Assistant { data.tokens.map(|t| t.to_string()) } else { None },
                model,
                agent: data.agent.or(data.mode),
            },
        );
        Ok(())
    }

    fn part_row(&mut self, row: &Row, skips: &mut SkipCounter) -> rusqlite::Result<()> {
        if !valid_id(&row.id) || !valid_id(&row.message_id) || !valid_id(&row.session_id) {
            skips.add("invalid_id");
            return Ok(());
        }
        let Ok(data) = serde_json::from_str::<PartData>(&row.data) else {
            skips.add("invalid_part");
            return Ok(());
        };
        self.want_session(&row.session_id);
        if matches!(data.kind.as_str(), "compaction" | "text") && !self.messages.contains_key(&row.message_id) {
            // Its message was read earlier: re-read it, its flags may change with this part.
            self.load_message(&row.message_id, skips)?;
        }
        if let Some(part) = part_of(row, data, skips) {
            self.parts.push(part);
        }
        Ok(())
    }

    fn load_message(&mut self, id: &str, skips: &mut SkipCounter) -> rusqlite::Result<()> {
        let row = self
            .conn
            .query_row(
                "SELECT id, time_updated, session_id, '', time_created, data FROM message WHERE id = ?1",
                [id],
                map_row,
            )
            .optional()?;
        if let Some(row) = row {
            self.message_row(&row, skips)?;
        }
        Ok(())
    }

    /// Sessions, then each user message's flags from all of its parts.
    fn finish(mut self, skips: &mut SkipCounter) -> rusqlite::Result<IngestBatch> {
        let ids: Vec<String> = self.sessions.keys().cloned().collect();
        for id in ids {
            let session = self.session(&id)?;
            if session.is_none() {
                skips.add("missing_session");
            }
            self.sessions.insert(id, session);
        }
        let user_ids: Vec<String> = self.user_messages.iter().cloned().collect();
        for id in user_ids {
            let (compaction, synthetic) = self.user_flags(&id)?;
            if let Some(m) = self.messages.get_mut(&id) {
                m.compaction = compaction;
                m.synthetic = synthetic;
            }
        }
        let _ = self.db;
        Ok(IngestBatch {
            sessions: self.sessions.into_values().flatten().collect(),
            messages: self.messages.into_values().collect(),
            parts: self.parts,
            results: Vec::new(),
            skipped: Vec::new(),
        })
    }

    fn session(&self, id: &str) -> rusqlite::Result<Option<HistorySession>> {
        self.conn
            .query_row(
                "SELECT id, parent_id, directory, title, time_created, time_updated FROM session WHERE id = ?1",
                [id],
                |r| {
                    let directory: Option<String> = r.get(2)?;
                    Ok(HistorySession {
                        id: r.get(0)?,
                        host: HistoryHost::OpenCode,
                        project: directory.as_deref().and_then(project_of),
                        directory,
                        parent_id: r.get::<_, Option<String>>(1)?.filter(|p| valid_id(p)),
                        title: r.get::<_, Option<String>>(3)?.map(|t| cairn_base::text::redact(&t).0),
                        agent: None,
                        model: None,
                        created_at: ms_ts(r.get(4)?),
                        updated_at: ms_ts(r.get(5)?),
                    })
                },
            )
            .optional()
    }

    /// A user message is a compaction trigger when it has a `compaction` part, and synthetic
    /// when it has text and every text part is synthetic (the auto-continue prompt).
    fn user_flags(&self, message_id: &str) -> rusqlite::Result<(bool, bool)> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT json_extract(data, '$.type'), json_extract(data, '$.synthetic') FROM part WHERE message_id = ?1",
        )?;
        let kinds: Vec<(Option<String>, Option<i64>)> =
            stmt.query_map([message_id], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?;
        let compaction = kinds.iter().any(|(k, _)| k.as_deref() == Some("compaction"));
        let texts: Vec<bool> =
            kinds.iter().filter(|(k, _)| k.as_deref() == Some("text")).map(|(_, s)| s == &Some(1)).collect();
        let synthetic = !texts.is_empty() && texts.iter().all(|s| *s);
        Ok((compaction, synthetic))
    }
}

fn part_of(row: &Row, data: PartData, skips: &mut SkipCounter) -> Option<HistoryPart> {
    let base = HistoryPart::new(&row.session_id, &row.message_id, &row.id, row.created, PartKind::Text);
    let part = match data.kind.as_str() {
        "text" => {
            let text = clean_text(data.text.as_deref().unwrap_or(""));
            HistoryPart { injected: data.synthetic && is_cairn_injection(&text), text: Some(text), ..base }
        }
        "reasoning" => HistoryPart {
            kind: PartKind::Reasoning,
            text: Some(clean_text(data.text.as_deref().unwrap_or(""))),
            ..base
        },
        "tool" => tool_part(base, data),
        "file" => HistoryPart {
            kind: PartKind::File,
            mime: data.mime,
            path: data
                .source
                .and_then(|s| s.path)
                .or(data.filename)
                .or_else(|| data.url.filter(|u| !u.starts_with("data:"))),
            ..base
        },
        "subtask" => HistoryPart {
            kind: PartKind::Subtask,
            text: data.prompt.as_deref().map(clean_text),
            tool: data.agent,
            input: data.description.map(|d| cairn_base::text::redact(&d).0),
            ..base
        },
        "compaction" => {
            let how = match (data.auto, data.overflow) {
                (Some(true), Some(true)) => "auto compaction (context overflow)",
                (Some(true), _) => "auto compaction",
                _ => "manual compaction",
            };
            HistoryPart { kind: PartKind::Compaction, text: Some(how.to_owned()), ..base }
        }
        kind if SILENT_PART_TYPES.contains(&kind) => return None,
        _ => {
            skips.add("unknown_part_type");
            return None;
        }
    };
    Some(part)
}

fn tool_part(base: HistoryPart, data: PartData) -> HistoryPart {
    let state = data.state.unwrap_or_default();
    let status = match state.status.as_str() {
        "pending" => ToolStatus::Pending,
        "running" => ToolStatus::Running,
        "error" => ToolStatus::Error,
        _ => ToolStatus::Completed,
    };
    let output = match status {
        ToolStatus::Error => state.error,
        _ => state.output,
    };
    HistoryPart {
        kind: PartKind::Tool,
        tool: data.tool,
        call_id: data.call_id,
        status: Some(status),
        input: state.input.map(|i| cairn_base::text::redact(&i.to_string()).0),
        output: output.as_deref().map(clean_text),
        pruned: state.time.and_then(|t| t.compacted).is_some(),
        ..base
    }
}

fn ms_ts(ms: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_or_else(|_| "1970-01-01T00:00:00.000Z".to_owned(), cairn_base::clock::format_ts)
}

#[cfg(test)]
#[path = "opencode_tests.rs"]
pub(crate) mod tests;

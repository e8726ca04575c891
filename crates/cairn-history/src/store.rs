//! `history.db`: the archive's own SQLite file beside the memory store, its migrations, and the
//! write API the readers' driver (`ingest.rs`) uses: [`HistoryDb::cursor`], [`HistoryDb::apply`]
//! (one IMMEDIATE transaction per batch, compare-and-swap on the source's cursor),
//! [`HistoryDb::forget_session`] and [`HistoryDb::record_error`].
//!
//! Speed matters here (a first run backfills a gigabyte of transcripts): every statement is
//! `prepare_cached`, rows are upserted without a SELECT first, a part whose content did not
//! change is neither rewritten nor re-indexed, and the full-text index is another file written
//! by another connection (`index.rs`): a batch only queues what to index, and a scan's indexer
//! thread indexes it while the writer goes on ([`HistoryDb::begin_bulk`]).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, LazyLock};
use std::thread::JoinHandle;

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::index::{self, Op};
use super::model::{
    Cursor, HistoryHost, HistoryMessage, HistoryPart, HistorySession, IngestBatch, ToolResult, ToolStatus,
};
use crate::connection::{configure, open_file, open_fts};
pub use crate::indexed::{INDEXED_BYTES, INDEXED_HEAD_BYTES, INDEXED_TAIL_BYTES};
use crate::indexed::{indexed_kind, indexed_len};
use crate::model::{kind_str, parse_kind, role_str, status_str};
use cairn_base::clock::now_ts;
use cairn_base::error::{CairnError, Result};

/// File name of the archive inside the data dir.
pub const HISTORY_DB_FILE: &str = "history.db";
/// SQLite's default, restored on the writer after a scan.
const AUTOCHECKPOINT_PAGES: u32 = 1000;

/// `history.db`'s migrations in order; index + 1 is the version each one produces.
pub(crate) const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_init.sql"),
    include_str!("../migrations/0002_fts_file.sql"),
    include_str!("../migrations/0003_history_injected.sql"),
    include_str!("../migrations/0004_history_sessions_covering.sql"),
];

/// One source a reader reads: a JSONL file (its absolute path), or an OpenCode database's
/// session (`path#session`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRef {
    pub key: String,
    pub host: HistoryHost,
}

/// What [`HistoryDb::apply`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyOutcome {
    Applied(ApplyCounts),
    /// The stored cursor was not the one the batch was read from: another ingester got there
    /// first. Nothing was written; re-read the cursor and read again.
    Stale,
}

/// Rows a batch wrote (unchanged rows are not counted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyCounts {
    pub sessions: u64,
    pub messages: u64,
    pub parts: u64,
    pub results: u64,
}

/// The archive. Not `Sync`: each of the daemon's connections opens its own.
pub struct HistoryDb {
    conn: Connection,
    /// The full-text index's file (`index.rs`).
    fts: Connection,
    /// `history.db`'s path (`None` in memory: no scan thread, the index is written in line).
    path: Option<PathBuf>,
    bulk: Option<Bulk>,
}

/// A scan's indexer thread and what the writer shares with it.
struct Bulk {
    wake: Sender<()>,
    progress: Arc<index::Progress>,
    thread: JoinHandle<Result<()>>,
    /// Hung up to stop the checkpointer.
    stop_checkpoints: Sender<()>,
    checkpointer: JoinHandle<Result<()>>,
}

impl std::fmt::Debug for HistoryDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryDb").finish_non_exhaustive()
    }
}

impl HistoryDb {
    /// Open (creating if needed) the archive at `path` and bring its schema up to date.
    pub fn open(path: &Path) -> Result<HistoryDb> {
        let mut conn = open_file(path)?;
        cairn_base::migrate::run_list(&mut conn, MIGRATIONS)?;
        let fts = open_fts(&index::fts_path(path))?;
        Self::init(conn, fts, Some(path.to_owned()))
    }

    /// A private in-memory archive (the in-memory store's, unit tests).
    pub fn open_in_memory() -> Result<HistoryDb> {
        let mut conn = Connection::open_in_memory()?;
        configure(&conn)?;
        cairn_base::migrate::run_list(&mut conn, MIGRATIONS)?;
        let fts = Connection::open_in_memory()?;
        configure(&fts)?;
        Self::init(conn, fts, None)
    }

    /// The index file made ready, and whatever it lacks (a kill mid-scan) indexed now.
    fn init(mut conn: Connection, mut fts: Connection, path: Option<PathBuf>) -> Result<HistoryDb> {
        index::init(&mut conn, &mut fts)?;
        index::catch_up(&conn, &mut fts)?;
        Ok(HistoryDb { conn, fts, path, bulk: None })
    }

    /// `history.db`'s path; `None` in memory.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The archive's connection: its SQL stays in this crate.
    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// The full-text index's connection (`history_fts`).
    pub(crate) fn fts(&self) -> &Connection {
        &self.fts
    }

    /// A scan starts: from now until [`HistoryDb::end_bulk`], batches are indexed by a thread
    /// of their own (the writer waits only when it is `index::MAX_LAG_BYTES` of text ahead), and
    /// the writer leaves WAL checkpoints to that thread. In memory: nothing changes.
    pub fn begin_bulk(&mut self) -> Result<()> {
        let Some(path) = self.path.clone() else { return Ok(()) };
        if self.bulk.is_some() {
            return Ok(());
        }
        let (wake, woken) = channel();
        let progress = Arc::new(index::Progress::default());
        let shared = Arc::clone(&progress);
        let (stop_checkpoints, stopped) = channel();
        let db_path = path.clone();
        let thread = std::thread::Builder::new()
            .name("cairn-history-index".to_owned())
            .spawn(move || index::run_indexer(&path, &woken, &shared))
            .map_err(|e| CairnError::internal(format!("cannot start the history indexer: {e}")))?;
        let checkpointer = std::thread::Builder::new()
            .name("cairn-history-checkpoint".to_owned())
            .spawn(move || index::run_checkpointer(&db_path, &stopped))
            .map_err(|e| CairnError::internal(format!("cannot start the history checkpointer: {e}")))?;
        self.conn.execute_batch("PRAGMA wal_autocheckpoint=0")?;
        self.bulk = Some(Bulk { wake, progress, thread, stop_checkpoints, checkpointer });
        Ok(())
    }

    /// The scan is over: the indexer applies what is left and ends; everything the scan stored
    /// is searchable when this returns.
    pub fn end_bulk(&mut self) -> Result<()> {
        let Some(bulk) = self.bulk.take() else { return Ok(()) };
        drop(bulk.wake);
        let joined = bulk.thread.join().unwrap_or_else(|_| Err(CairnError::internal("the history indexer panicked")));
        // After the indexer, so its last writes are in the checkpointer's final copy.
        drop(bulk.stop_checkpoints);
        let _ = bulk.checkpointer.join();
        self.conn.execute_batch(&format!("PRAGMA wal_autocheckpoint={AUTOCHECKPOINT_PAGES}"))?;
        // Whatever the indexer could not do (an error), done here; normally nothing is left.
        index::catch_up(&self.conn, &mut self.fts)?;
        if let Err(e) = joined {
            tracing::warn!(error = %e, "history indexer failed; the writer indexed the rest");
        }
        Ok(())
    }

    /// After a write: during a scan, wake the indexer (and wait if it is too far behind);
    /// otherwise index now, so what was written is searchable when the call returns.
    fn index_written(&mut self, last_seq: Option<i64>, bytes: u64) -> Result<()> {
        match (&self.bulk, last_seq) {
            (_, None) => Ok(()),
            (Some(bulk), Some(seq)) => {
                let _ = bulk.wake.send(());
                bulk.progress.wait_within_lag(seq, bytes);
                Ok(())
            }
            (None, Some(_)) => index::catch_up(&self.conn, &mut self.fts).map(|_| ()),
        }
    }

    /// Where the reader of `source_key` stopped, if it ever stored a batch.
    pub fn cursor(&self, source_key: &str) -> Result<Option<Cursor>> {
        read_cursor(&self.conn, source_key)
    }

    /// Apply one reader batch and advance the source's cursor from `expected` to `next`, in
    /// one IMMEDIATE transaction; [`ApplyOutcome::Stale`] (and nothing written) when the
    /// stored cursor is not `expected`.
    pub fn apply(
        &mut self,
        source: &SourceRef,
        expected: Option<&Cursor>,
        batch: &IngestBatch,
        next: &Cursor,
    ) -> Result<ApplyOutcome> {
        let indexed = index::mark(&self.fts)?;
        let tx = Transaction::new(&mut self.conn, TransactionBehavior::Immediate)?;
        if read_cursor(&tx, &source.key)?.as_ref() != expected {
            return Ok(ApplyOutcome::Stale);
        }
        let forgotten = forgotten_sessions(&tx)?;
        let kept = |session_id: &str| !forgotten.contains(session_id);
        let mut counts = ApplyCounts::default();
        let mut skipped: HashMap<&str, u64> = batch.skipped.iter().map(|(r, n)| (r.as_str(), *n)).collect();
        for session in batch.sessions.iter().filter(|s| kept(&s.id)) {
            upsert_session(&tx, session)?;
            counts.sessions += 1;
        }
        ensure_sessions_of(&tx, source.host, batch.messages.iter().filter(|m| kept(&m.session_id)))?;
        let mut fts = IndexQueue::default();
        let mut renumber_from: HashMap<String, (i64, String)> = HashMap::new();
        let messages: Vec<&HistoryMessage> = batch.messages.iter().filter(|m| kept(&m.session_id)).collect();
        let turns = turns_of_appended(&tx, &messages)?;
        for (session_id, seq, id) in upsert_messages(&tx, &messages, &turns)? {
            match renumber_from.get_mut(&session_id) {
                Some(from) => {
                    if (seq, id.as_str()) < (from.0, from.1.as_str()) {
                        *from = (seq, id);
                    }
                }
                None => {
                    renumber_from.insert(session_id, (seq, id));
                }
            }
        }
        counts.messages += messages.len() as u64;
        let parts: Vec<&HistoryPart> = batch.parts.iter().filter(|p| kept(&p.session_id)).collect();
        counts.parts += upsert_parts(&tx, &parts, &mut fts)?;
        fts.bytes += parts.iter().map(|p| indexed_len(p)).sum::<u64>();
        for result in batch.results.iter().filter(|r| kept(&r.session_id)) {
            if apply_result(&tx, result, &mut fts)? {
                counts.results += 1;
            } else {
                *skipped.entry("orphan_tool_result").or_default() += 1;
            }
        }
        for (session_id, (seq, id)) in &renumber_from {
            number_turns(&tx, session_id, *seq, id)?;
        }
        let forgotten_rows = batch.messages.iter().filter(|m| !kept(&m.session_id)).count() as u64;
        if forgotten_rows > 0 {
            *skipped.entry("forgotten_session").or_default() += forgotten_rows;
        }
        record_skips(&tx, source, &skipped)?;
        store_cursor(&tx, source, next, &counts)?;
        index::trim(&tx, indexed)?;
        let bytes = fts.bytes;
        let last_seq = fts.write(&tx)?;
        tx.commit()?;
        self.index_written(last_seq, bytes)?;
        Ok(ApplyOutcome::Applied(counts))
    }

    /// Erase one session: its messages, parts and index rows (not its children, which are
    /// sessions of their own), and remember it so a later scan of a host file that still
    /// holds it does not bring it back. Answers the rows removed (0: there was no such session).
    pub fn forget_session(&mut self, id: &str) -> Result<u64> {
        self.forget_sessions(&[id])
    }

    /// [`HistoryDb::forget_session`] for several sessions in one transaction (retention prunes
    /// a batch at a time: a kill between two batches leaves whole sessions, never half of one).
    /// Returns the rows removed.
    pub fn forget_sessions(&mut self, ids: &[&str]) -> Result<u64> {
        let tx = Transaction::new(&mut self.conn, TransactionBehavior::Immediate)?;
        let mut last_seq = None;
        let mut removed = 0;
        for id in ids {
            let rowids: Vec<(i64, String)> = {
                let mut stmt = tx.prepare_cached("SELECT rowid, kind FROM history_parts WHERE session_id = ?1")?;
                stmt.query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<rusqlite::Result<_>>()?
            };
            for (rowid, kind) in &rowids {
                if indexed_kind(parse_kind(kind)).is_some() {
                    last_seq = Some(index::enqueue(&tx, *rowid, *rowid, Op::Deleted)?);
                }
            }
            let parts = tx.execute("DELETE FROM history_parts WHERE session_id = ?1", [id])?;
            let messages = tx.execute("DELETE FROM history_messages WHERE session_id = ?1", [id])?;
            let sessions = tx.execute("DELETE FROM history_sessions WHERE id = ?1", [id])?;
            let gone = (parts + messages + sessions) as u64;
            if gone > 0 {
                tx.execute(
                    "INSERT INTO history_forgotten (session_id, forgotten_at) VALUES (?1, ?2)
                     ON CONFLICT(session_id) DO UPDATE SET forgotten_at = excluded.forgotten_at",
                    params![id, now_ts()],
                )?;
            }
            removed += gone;
        }
        tx.commit()?;
        self.index_written(last_seq, 0)?;
        Ok(removed)
    }

    /// Note that reading `source` failed (`code` is an error code name): `history_stats`
    /// counts it until the source's next successful batch.
    pub fn record_error(&mut self, source: &SourceRef, code: &str, message: &str) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO history_sources (key, host, cursor, last_error_code, last_error, error_at, updated_at)
                 VALUES (?1, ?2, 'null', ?3, ?4, ?5, ?5)
                 ON CONFLICT(key) DO UPDATE SET last_error_code = excluded.last_error_code,
                     last_error = excluded.last_error, error_at = excluded.error_at",
            )?
            .execute(params![source.key, source.host.as_str(), code, message, now_ts()])?;
        Ok(())
    }
}

impl Drop for HistoryDb {
    /// A scan that did not reach `end_bulk` (an error, a panic): its indexer is not left behind.
    fn drop(&mut self) {
        if let Some(bulk) = self.bulk.take() {
            drop(bulk.wake);
            drop(bulk.stop_checkpoints);
            let _ = bulk.thread.join();
            let _ = bulk.checkpointer.join();
        }
    }
}

fn read_cursor(conn: &Connection, key: &str) -> Result<Option<Cursor>> {
    let raw: Option<String> = conn
        .prepare_cached("SELECT cursor FROM history_sources WHERE key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()?;
    match raw {
        None => Ok(None),
        Some(text) => Ok(serde_json::from_str(&text)?),
    }
}

fn forgotten_sessions(conn: &Connection) -> Result<HashSet<String>> {
    let mut stmt = conn.prepare_cached("SELECT session_id FROM history_forgotten")?;
    Ok(stmt.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<_>>()?)
}

/// Non-null fields win; the session spans the earliest start and latest update seen.
fn upsert_session(conn: &Connection, s: &HistorySession) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO history_sessions (id, host, project, directory, parent_id, title, agent, model, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT(id) DO UPDATE SET host = excluded.host,
             project = COALESCE(excluded.project, project), directory = COALESCE(excluded.directory, directory),
             parent_id = COALESCE(excluded.parent_id, parent_id), title = COALESCE(excluded.title, title),
             agent = COALESCE(excluded.agent, agent), model = COALESCE(excluded.model, model),
             created_at = min(created_at, excluded.created_at), updated_at = max(updated_at, excluded.updated_at)",
    )?
    .execute(params![
        s.id,
        s.host.as_str(),
        s.project,
        s.directory,
        s.parent_id,
        s.title,
        s.agent,
        s.model,
        s.created_at,
        s.updated_at
    ])?;
    Ok(())
}

/// A message whose session row the batch did not carry (an incremental read of new messages
/// only) still gets one, and every session's `updated_at` follows its newest message.
fn ensure_sessions_of<'a>(
    conn: &Connection,
    host: HistoryHost,
    messages: impl Iterator<Item = &'a HistoryMessage>,
) -> Result<()> {
    let mut spans: HashMap<&str, (&str, &str)> = HashMap::new();
    for m in messages {
        let span = spans.entry(&m.session_id).or_insert((&m.created_at, &m.created_at));
        span.0 = span.0.min(&m.created_at);
        span.1 = span.1.max(&m.created_at);
    }
    for (id, (first, last)) in spans {
        conn.prepare_cached(
            "INSERT INTO history_sessions (id, host, created_at, updated_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(id) DO UPDATE SET created_at = min(created_at, excluded.created_at),
                 updated_at = max(updated_at, excluded.updated_at)",
        )?
        .execute(params![id, host.as_str(), first, last])?;
    }
    Ok(())
}

/// Rows upserted per statement. Inside a transaction, each statement first copies every page it
/// changes into a statement journal (so that it alone can be undone): one row per statement
/// paid that copy, and a statement's start and end, for every message and part (a tenth of
/// the writer's time in a scan). A batch's rows go in statements of this many rows, the rest
/// one by one (two cached statements per table).
const ROWS_PER_STATEMENT: usize = 32;

/// `INSERT INTO {table} ({columns}) VALUES (?1, …), (?n+1, …) … {tail}` for `rows` rows.
fn multi_row_sql(table_and_columns: &str, columns: usize, rows: usize, tail: &str) -> String {
    let mut sql = format!("INSERT INTO {table_and_columns} VALUES ");
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for column in 0..columns {
            if column > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("?{}", row * columns + column + 1));
        }
        sql.push(')');
    }
    sql.push(' ');
    sql.push_str(tail);
    sql
}

/// The statements for one row and for [`ROWS_PER_STATEMENT`] rows.
struct MultiRow {
    one: String,
    many: String,
}

impl MultiRow {
    fn new(table_and_columns: &str, columns: usize, tail: &str) -> MultiRow {
        MultiRow {
            one: multi_row_sql(table_and_columns, columns, 1, tail),
            many: multi_row_sql(table_and_columns, columns, ROWS_PER_STATEMENT, tail),
        }
    }

    /// `rows` in statements of [`ROWS_PER_STATEMENT`] rows then of one, each bound by `bind`
    /// (the statement, the row, the number of its first parameter) and its RETURNING rows
    /// given to `returned`.
    fn run<T>(
        &self,
        conn: &Connection,
        rows: &[T],
        bind: impl Fn(&mut rusqlite::Statement<'_>, &T, usize) -> rusqlite::Result<()>,
        mut returned: impl FnMut(&rusqlite::Row<'_>) -> Result<()>,
    ) -> Result<()> {
        let whole = rows.len() / ROWS_PER_STATEMENT * ROWS_PER_STATEMENT;
        let (many, rest) = rows.split_at(whole);
        for (sql, chunk_len, chunks) in
            [(&self.many, ROWS_PER_STATEMENT, many.chunks(ROWS_PER_STATEMENT)), (&self.one, 1, rest.chunks(1))]
        {
            let mut stmt = conn.prepare_cached(sql)?;
            let columns = stmt.parameter_count() / chunk_len;
            for chunk in chunks {
                for (i, row) in chunk.iter().enumerate() {
                    bind(&mut stmt, row, i * columns + 1)?;
                }
                let mut out = stmt.raw_query();
                while let Some(r) = out.next()? {
                    returned(r)?;
                }
            }
        }
        Ok(())
    }
}

static MESSAGE_UPSERT: LazyLock<MultiRow> = LazyLock::new(|| {
    MultiRow::new(
        "history_messages (session_id, id, role, seq, summary, compaction, synthetic, finish, tokens, model, agent,
             created_at, turn_number)",
        13,
        "ON CONFLICT(session_id, id) DO UPDATE SET
             turn_number = CASE WHEN role IS excluded.role AND seq IS excluded.seq AND summary IS excluded.summary
                 AND compaction IS excluded.compaction AND synthetic IS excluded.synthetic
                 THEN turn_number END,
             role = excluded.role, seq = excluded.seq, summary = excluded.summary,
             compaction = excluded.compaction, synthetic = excluded.synthetic,
             finish = COALESCE(excluded.finish, finish), tokens = COALESCE(excluded.tokens, tokens),
             model = COALESCE(excluded.model, model), agent = COALESCE(excluded.agent, agent),
             created_at = excluded.created_at
         RETURNING session_id, seq, id, turn_number, rowid",
    )
});

/// Upsert messages, a new one with its turn number from `turns` when known there; answers
/// (session, seq, id) from where the session's turns must be (re)numbered: a new message
/// without a number; a stored one whose order or turn-opening flags changed (the update clears
/// its number then): from the session's start, since the place it left may be before the one
/// it has now.
fn upsert_messages(
    conn: &Connection,
    messages: &[&HistoryMessage],
    turns: &[Option<i64>],
) -> Result<Vec<(String, i64, String)>> {
    let mut renumber = Vec::new();
    let stored_up_to: i64 =
        conn.prepare_cached("SELECT coalesce(max(rowid), 0) FROM history_messages")?.query_row([], |r| r.get(0))?;
    let numbered: Vec<(&HistoryMessage, Option<i64>)> = messages.iter().copied().zip(turns.iter().copied()).collect();
    MESSAGE_UPSERT.run(
        conn,
        &numbered,
        |stmt, &(m, turn), at| {
            stmt.raw_bind_parameter(at, &m.session_id)?;
            stmt.raw_bind_parameter(at + 1, &m.id)?;
            stmt.raw_bind_parameter(at + 2, role_str(m.role))?;
            stmt.raw_bind_parameter(at + 3, m.seq)?;
            stmt.raw_bind_parameter(at + 4, m.summary)?;
            stmt.raw_bind_parameter(at + 5, m.compaction)?;
            stmt.raw_bind_parameter(at + 6, m.synthetic)?;
            stmt.raw_bind_parameter(at + 7, &m.finish)?;
            stmt.raw_bind_parameter(at + 8, &m.tokens)?;
            stmt.raw_bind_parameter(at + 9, &m.model)?;
            stmt.raw_bind_parameter(at + 10, &m.agent)?;
            stmt.raw_bind_parameter(at + 11, &m.created_at)?;
            stmt.raw_bind_parameter(at + 12, turn)
        },
        |r| {
            if r.get::<_, Option<i64>>(3)?.is_none() {
                let (session_id, rowid): (String, i64) = (r.get(0)?, r.get(4)?);
                let (seq, id) = if rowid > stored_up_to { (r.get(1)?, r.get(2)?) } else { (i64::MIN, String::new()) };
                renumber.push((session_id, seq, id));
            }
            Ok(())
        },
    )?;
    Ok(renumber)
}

/// The turn number of each message (`None`: left to [`number_turns`]) where it can be known
/// before the write: every message of its session in the batch comes after all the session's
/// stored ones (a transcript read on from its cursor), so each number follows from the
/// session's last stored one and the batch alone. Numbered at insert, an appended message is
/// written once instead of inserted then updated (a second write of every message, and of its
/// entry in the turn index).
fn turns_of_appended(conn: &Connection, messages: &[&HistoryMessage]) -> Result<Vec<Option<i64>>> {
    let mut turns = vec![None; messages.len()];
    let mut by_session: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, m) in messages.iter().enumerate() {
        by_session.entry(m.session_id.as_str()).or_default().push(i);
    }
    for (session_id, mut batch) in by_session {
        batch.sort_by(|&a, &b| (messages[a].seq, &messages[a].id).cmp(&(messages[b].seq, &messages[b].id)));
        let ids: HashSet<&str> = batch.iter().map(|&i| messages[i].id.as_str()).collect();
        if ids.len() != batch.len() {
            continue; // a message twice in one batch: left to the renumbering
        }
        let last: Option<(i64, String, Option<i64>)> = conn
            .prepare_cached(
                "SELECT seq, id, turn_number FROM history_messages WHERE session_id = ?1
                 ORDER BY seq DESC, id DESC LIMIT 1",
            )?
            .query_row([session_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        let first = &messages[batch[0]];
        let mut turn = match last {
            None => 0,
            Some((seq, id, Some(turn))) if (seq, id.as_str()) < (first.seq, first.id.as_str()) => turn,
            Some(_) => continue, // interleaved with stored messages, or not numbered yet
        };
        for i in batch {
            if messages[i].opens_turn() {
                turn += 1;
            }
            turns[i] = Some(turn);
        }
    }
    Ok(turns)
}

/// Number the session's turns from the message at (`seq`, `id`) on: each message that opens a
/// turn starts the next number, the others carry the current one (0 before the first turn).
/// Messages before that point keep their numbers, so an append renumbers only what is new.
fn number_turns(conn: &Connection, session_id: &str, seq: i64, id: &str) -> Result<()> {
    let mut turn: i64 = conn
        .prepare_cached(
            "SELECT turn_number FROM history_messages WHERE session_id = ?1 AND (seq, id) < (?2, ?3)
             ORDER BY seq DESC, id DESC LIMIT 1",
        )?
        .query_row(params![session_id, seq, id], |r| r.get::<_, Option<i64>>(0))
        .optional()?
        .flatten()
        .unwrap_or(0);
    let rows: Vec<(i64, bool, Option<i64>)> = {
        let mut stmt = conn.prepare_cached(
            "SELECT rowid, role = 'user' AND summary = 0 AND compaction = 0 AND synthetic = 0, turn_number
             FROM history_messages WHERE session_id = ?1 AND (seq, id) >= (?2, ?3) ORDER BY seq, id",
        )?;
        stmt.query_map(params![session_id, seq, id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?
    };
    for (rowid, opens_turn, stored) in rows {
        if opens_turn {
            turn += 1;
        }
        if stored != Some(turn) {
            conn.prepare_cached("UPDATE history_messages SET turn_number = ?2 WHERE rowid = ?1")?
                .execute(params![rowid, turn])?;
        }
    }
    Ok(())
}

/// What one batch queues for the index (`index.rs`): the range of the rowids it inserted (an
/// insert takes the next rowid above all, so a batch's new rows are one range holding nothing
/// else), and the rows it changed in place that are not in that range.
#[derive(Default)]
struct IndexQueue {
    new: Option<(i64, i64)>,
    changed: Vec<i64>,
    /// About how much text the queued rows hold (what the indexer will tokenize).
    bytes: u64,
}

impl IndexQueue {
    fn inserted(&mut self, rowid: i64) {
        self.new = Some(match self.new {
            Some((lo, hi)) => (lo.min(rowid), hi.max(rowid)),
            None => (rowid, rowid),
        });
    }

    fn changed(&mut self, rowid: i64) {
        self.changed.push(rowid);
    }

    /// Queue the entries; answers the last one's sequence number.
    fn write(mut self, conn: &Connection) -> Result<Option<i64>> {
        let mut last = None;
        if let Some((lo, hi)) = self.new {
            last = Some(index::enqueue(conn, lo, hi, Op::New)?);
        }
        self.changed.sort_unstable();
        self.changed.dedup();
        for rowid in self.changed {
            if self.new.is_some_and(|(lo, hi)| (lo..=hi).contains(&rowid)) {
                continue;
            }
            last = Some(index::enqueue(conn, rowid, rowid, Op::Changed)?);
        }
        Ok(last)
    }
}

static PART_UPSERT: LazyLock<MultiRow> = LazyLock::new(|| {
    MultiRow::new(
        "history_parts (session_id, message_id, id, idx, kind, text, tool, call_id, status, input, output, mime, path,
             pruned, injected)",
        15,
        "ON CONFLICT(session_id, id) DO UPDATE SET
             message_id = excluded.message_id, idx = excluded.idx, kind = excluded.kind, text = excluded.text,
             tool = excluded.tool, call_id = excluded.call_id,
             status = CASE WHEN excluded.output IS NULL AND output IS NOT NULL THEN status ELSE excluded.status END,
             input = excluded.input, output = COALESCE(excluded.output, output), mime = excluded.mime,
             path = excluded.path, pruned = excluded.pruned, injected = excluded.injected, version = version + 1
         WHERE message_id IS NOT excluded.message_id OR idx IS NOT excluded.idx OR kind IS NOT excluded.kind
             OR text IS NOT excluded.text OR tool IS NOT excluded.tool OR call_id IS NOT excluded.call_id
             OR input IS NOT excluded.input OR mime IS NOT excluded.mime OR path IS NOT excluded.path
             OR pruned IS NOT excluded.pruned OR injected IS NOT excluded.injected
             OR (excluded.output IS NOT NULL AND (output IS NOT excluded.output OR status IS NOT excluded.status))
             OR (output IS NULL AND status IS NOT excluded.status)
         RETURNING rowid, version",
    )
});

/// Upsert parts and note their index writes; answers how many were new or changed. An update
/// without output keeps the output (and status) a result already gave it: a transcript read
/// again from its start must not undo a tool's completion.
fn upsert_parts(conn: &Connection, parts: &[&HistoryPart], fts: &mut IndexQueue) -> Result<u64> {
    let mut written = 0;
    PART_UPSERT.run(
        conn,
        parts,
        |stmt, p, at| {
            stmt.raw_bind_parameter(at, &p.session_id)?;
            stmt.raw_bind_parameter(at + 1, &p.message_id)?;
            stmt.raw_bind_parameter(at + 2, &p.id)?;
            stmt.raw_bind_parameter(at + 3, p.idx)?;
            stmt.raw_bind_parameter(at + 4, kind_str(p.kind))?;
            stmt.raw_bind_parameter(at + 5, &p.text)?;
            stmt.raw_bind_parameter(at + 6, &p.tool)?;
            stmt.raw_bind_parameter(at + 7, &p.call_id)?;
            stmt.raw_bind_parameter(at + 8, p.status.map(status_str))?;
            stmt.raw_bind_parameter(at + 9, &p.input)?;
            stmt.raw_bind_parameter(at + 10, &p.output)?;
            stmt.raw_bind_parameter(at + 11, &p.mime)?;
            stmt.raw_bind_parameter(at + 12, &p.path)?;
            stmt.raw_bind_parameter(at + 13, p.pruned)?;
            stmt.raw_bind_parameter(at + 14, p.injected)
        },
        |r| {
            let (rowid, version): (i64, i64) = (r.get(0)?, r.get(1)?);
            written += 1;
            if version > 0 {
                // The stored row may keep an earlier output: index what is stored.
                fts.changed(rowid);
            } else {
                fts.inserted(rowid);
            }
            Ok(())
        },
    )?;
    Ok(written)
}

/// Give a tool call its result; `false` when the session has no call with that id.
fn apply_result(conn: &Connection, r: &ToolResult, fts: &mut IndexQueue) -> Result<bool> {
    let status = if r.is_error { ToolStatus::Error } else { ToolStatus::Completed };
    let rowids: Vec<i64> = {
        let mut stmt = conn.prepare_cached(
            "UPDATE history_parts SET status = ?3, output = ?4, version = version + 1
             WHERE session_id = ?1 AND call_id = ?2 AND (status IS NOT ?3 OR output IS NOT ?4)
             RETURNING rowid",
        )?;
        stmt.query_map(params![r.session_id, r.call_id, status_str(status), r.output], |row| row.get(0))?
            .collect::<rusqlite::Result<_>>()?
    };
    if rowids.is_empty() {
        // Already applied (a batch read again), or no such call.
        let known: bool = conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM history_parts WHERE session_id = ?1 AND call_id = ?2)")?
            .query_row(params![r.session_id, r.call_id], |row| row.get(0))?;
        return Ok(known);
    }
    for rowid in rowids {
        fts.changed(rowid);
    }
    fts.bytes += r.output.len().min(INDEXED_BYTES) as u64;
    Ok(true)
}

fn record_skips(conn: &Connection, source: &SourceRef, skipped: &HashMap<&str, u64>) -> Result<()> {
    for (reason, count) in skipped.iter().filter(|(_, n)| **n > 0) {
        conn.prepare_cached(
            "INSERT INTO history_skips (source, host, reason, count) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(source, reason) DO UPDATE SET count = count + excluded.count",
        )?
        .execute(params![source.key, source.host.as_str(), reason, *count as i64])?;
    }
    Ok(())
}

fn store_cursor(conn: &Connection, source: &SourceRef, next: &Cursor, counts: &ApplyCounts) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO history_sources (key, host, cursor, batches, messages, parts, updated_at)
         VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6)
         ON CONFLICT(key) DO UPDATE SET cursor = excluded.cursor, batches = batches + 1,
             messages = messages + excluded.messages, parts = parts + excluded.parts,
             last_error_code = NULL, last_error = NULL, error_at = NULL, updated_at = excluded.updated_at",
    )?
    .execute(params![
        source.key,
        source.host.as_str(),
        serde_json::to_string(next)?,
        counts.messages as i64,
        counts.parts as i64,
        now_ts()
    ])?;
    Ok(())
}

//! The archive's full-text index, in a file of its own (`history-fts.db` beside `history.db`)
//! so that it is written by its own connection, on its own thread during a scan, while the row
//! writer goes on: the index (tokenizing with the porter stemmer, FTS5 segment writes and
//! merges) was half of an ingest's time, on the same thread as the rows.
//!
//! The row writer records what to index in `history_fts_queue` (in `history.db`), in the same
//! transaction as the rows: a range of new part rowids per batch, a rowid per changed or
//! deleted part. The indexer applies the queue in order and stores the last entry it applied
//! (`history_fts_state.mark`, in the index file) in the same transaction as the index writes,
//! so each entry is applied exactly once, and whatever a crash or a kill left unapplied is
//! applied at the next `catch_up` (every apply outside a scan makes one; a scan's indexer
//! makes them continuously, and the scan waits for it before it returns). The index reads the
//! rows as they are when it applies an entry, so an entry applied late indexes the newest
//! content (a later entry for the same row then replaces it; a row gone is not indexed).
//!
//! Search reads the index through its own connection and hydrates hits from `history.db`: an
//! index row whose part is gone is skipped there, and a part not yet indexed is missing from
//! ranked results until the indexer reaches it (during a scan, at most `MAX_LAG_BYTES` of text).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use crate::indexed::{indexed_body, indexed_kind};
use crate::model::parse_kind;
use cairn_base::error::Result;

/// Text a scan's writer may queue ahead of its indexer before it waits (about 64 MB of
/// transcripts): bounds how stale search is during a backfill, and how long a poke on another
/// connection waits for the indexer. Counted in bytes, not entries: a transcript of a few lines
/// is one entry as a 4 MB chunk is, and a bound in entries stalled the writer behind a long
/// index transaction while the queue held little (1,024 MB bench: the writer waited 5.2 s and
/// the indexer idled 3.3 s).
pub(crate) const MAX_LAG_BYTES: u64 = 32 * 1024 * 1024;
/// And at most this many entries (each one a row of `history_fts_queue`).
pub(crate) const MAX_LAG_ENTRIES: i64 = 256;
/// An index transaction applies entries until it has indexed this much text, or
/// [`ENTRIES_PER_TX`] entries: fewer, larger FTS5 segments (each transaction flushes one),
/// while another connection waiting for the index's lock waits for at most one.
const BYTES_PER_TX: usize = 16 * 1024 * 1024;
const ENTRIES_PER_TX: i64 = 64;

const SCHEMA: &str = "
CREATE VIRTUAL TABLE IF NOT EXISTS history_fts USING fts5(
    body,
    kind,
    session,
    content = '',
    contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE IF NOT EXISTS history_cjk USING fts5(
    body,
    content = '',
    contentless_delete = 1,
    tokenize = 'trigram'
);
CREATE TABLE IF NOT EXISTS history_fts_state (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    mark  INTEGER NOT NULL,
    owner TEXT NOT NULL
);";

/// The index file's layout (`PRAGMA user_version`): 2 added `history_cjk`; 3 indexed the end
/// of a long part too and left out the parts cairn injected; 4 keeps a long part's first 24 and
/// last 8 KiB (3: 32 of each). An index of an older layout is rebuilt from the rows at open, as a
/// missing one is.
pub(crate) const LAYOUT: i64 = 4;

/// `history-fts.db` for `history.db` (`<stem>-fts.<ext>` for another name).
pub fn fts_path(db_path: &Path) -> PathBuf {
    let stem = db_path.file_stem().and_then(|s| s.to_str()).unwrap_or("history");
    let name = match db_path.extension().and_then(|e| e.to_str()) {
        Some(ext) => format!("{stem}-fts.{ext}"),
        None => format!("{stem}-fts"),
    };
    db_path.with_file_name(name)
}

/// The index's schema on `fts`, and its mark: a new index file (first open, an archive of the
/// old layout whose index was in `history.db`, or the file deleted), or one another archive
/// left (its `history.db` deleted), starts with one queue entry covering every part, so the
/// index is rebuilt from the rows.
pub(crate) fn init(main: &mut Connection, fts: &mut Connection) -> Result<()> {
    fts.execute_batch(SCHEMA)?;
    let owner: String = main.query_row("SELECT token FROM history_fts_owner WHERE id = 1", [], |r| r.get(0))?;
    let ftx = Transaction::new(fts, TransactionBehavior::Immediate)?;
    let mut stored: Option<String> =
        ftx.query_row("SELECT owner FROM history_fts_state WHERE id = 1", [], |r| r.get(0)).optional()?;
    let layout: i64 = ftx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if stored.as_ref().is_some_and(|s| *s != owner) || (stored.is_some() && layout < LAYOUT) {
        ftx.execute_batch(
            "INSERT INTO history_fts (history_fts) VALUES ('delete-all');
             INSERT INTO history_cjk (history_cjk) VALUES ('delete-all');
             DELETE FROM history_fts_state;",
        )?;
        stored = None;
    }
    if layout != LAYOUT {
        ftx.pragma_update(None, "user_version", LAYOUT)?;
    }
    if stored.as_ref() != Some(&owner) {
        // A scan indexes a gigabyte: fewer, larger segments (16 MB of pending terms before a
        // flush instead of 1 MB) and merges of 16 segments instead of 4 (a term is rewritten by
        // fewer merges) cut the indexer's CPU (256 MB bench: hashsize and automerge 8, 3.5 s
        // vs 4.4 s; 1,024 MB: automerge 16 instead of 8, the index and checkpoint threads 21.4
        // s vs 23.1 s), searches measured unchanged.
        ftx.execute_batch(
            "INSERT INTO history_fts (history_fts, rank) VALUES ('hashsize', 16777216);
             INSERT INTO history_fts (history_fts, rank) VALUES ('automerge', 16);",
        )?;
        let mtx = Transaction::new(main, TransactionBehavior::Immediate)?;
        let span: (Option<i64>, Option<i64>) =
            mtx.query_row("SELECT min(rowid), max(rowid) FROM history_parts", [], |r| Ok((r.get(0)?, r.get(1)?)))?;
        let mark = match span {
            (Some(lo), Some(hi)) => enqueue(&mtx, lo, hi, Op::New)? - 1,
            _ => mtx
                .query_row("SELECT seq FROM sqlite_sequence WHERE name = 'history_fts_queue'", [], |r| r.get(0))
                .optional()?
                .unwrap_or(0),
        };
        mtx.commit()?;
        ftx.execute("INSERT INTO history_fts_state (id, mark, owner) VALUES (1, ?1, ?2)", params![mark, owner])?;
    }
    ftx.commit()?;
    Ok(())
}

/// What a queue entry asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Parts inserted by one batch: index them (they are not in the index).
    New,
    /// A part changed in place: its old entry out, its content now in.
    Changed,
    /// A part deleted: its entry out.
    Deleted,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::New => "new",
            Op::Changed => "changed",
            Op::Deleted => "deleted",
        }
    }
}

/// Queue one entry (inside the row writer's transaction); answers its sequence number.
pub(crate) fn enqueue(conn: &Connection, lo: i64, hi: i64, op: Op) -> Result<i64> {
    conn.prepare_cached("INSERT INTO history_fts_queue (lo, hi, op) VALUES (?1, ?2, ?3)")?.execute(params![
        lo,
        hi,
        op.as_str()
    ])?;
    Ok(conn.last_insert_rowid())
}

/// The last queue entry the index holds.
pub(crate) fn mark(fts: &Connection) -> Result<i64> {
    Ok(fts
        .prepare_cached("SELECT mark FROM history_fts_state WHERE id = 1")?
        .query_row([], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

/// Drop the queue entries the index already holds (inside the row writer's transaction).
pub(crate) fn trim(conn: &Connection, mark: i64) -> Result<()> {
    conn.prepare_cached("DELETE FROM history_fts_queue WHERE seq <= ?1")?.execute([mark])?;
    Ok(())
}

/// Apply queue entries after the mark in one index transaction, up to [`BYTES_PER_TX`] of
/// text or [`ENTRIES_PER_TX`] entries; answers the new mark and whether entries remain.
pub(crate) fn catch_up_some(main: &Connection, fts: &mut Connection) -> Result<(i64, bool)> {
    let tx = Transaction::new(fts, TransactionBehavior::Immediate)?;
    let from = mark(&tx)?;
    let entries: Vec<(i64, i64, i64, String)> = {
        let mut stmt =
            main.prepare_cached("SELECT seq, lo, hi, op FROM history_fts_queue WHERE seq > ?1 ORDER BY seq LIMIT ?2")?;
        stmt.query_map(params![from, ENTRIES_PER_TX + 1], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
            .collect::<rusqlite::Result<_>>()?
    };
    let mut more = entries.len() as i64 > ENTRIES_PER_TX;
    let (mut last, mut indexed) = (from, 0);
    for (seq, lo, hi, op) in entries.into_iter().take(ENTRIES_PER_TX as usize) {
        if indexed >= BYTES_PER_TX {
            more = true;
            break;
        }
        if op != Op::New.as_str() {
            for rowid in lo..=hi {
                tx.prepare_cached("DELETE FROM history_fts WHERE rowid = ?1")?.execute([rowid])?;
                tx.prepare_cached("DELETE FROM history_cjk WHERE rowid = ?1")?.execute([rowid])?;
            }
        }
        if op != Op::Deleted.as_str() {
            indexed += index_rows(main, &tx, lo, hi)?;
        }
        last = seq;
    }
    if last != from {
        tx.prepare_cached("UPDATE history_fts_state SET mark = ?1 WHERE id = 1")?.execute([last])?;
    }
    tx.commit()?;
    Ok((last, more))
}

/// Apply every queue entry after the mark; answers the mark.
pub(crate) fn catch_up(main: &Connection, fts: &mut Connection) -> Result<i64> {
    loop {
        let (mark, more) = catch_up_some(main, fts)?;
        if !more {
            return Ok(mark);
        }
    }
}

/// Index the parts stored with rowids `lo..=hi` (as they are now); answers the bytes indexed.
fn index_rows(main: &Connection, fts: &Connection, lo: i64, hi: i64) -> Result<usize> {
    let mut read = main.prepare_cached(
        "SELECT rowid, session_id, kind, tool, text, input, output FROM history_parts
         WHERE rowid BETWEEN ?1 AND ?2 AND kind IN ('text', 'subtask', 'reasoning', 'tool') AND injected = 0",
    )?;
    let mut rows = read.query(params![lo, hi])?;
    let mut insert =
        fts.prepare_cached("INSERT INTO history_fts (rowid, body, kind, session) VALUES (?1, ?2, ?3, ?4)")?;
    let mut indexed = 0;
    while let Some(r) = rows.next()? {
        let text = |i: usize| -> rusqlite::Result<Option<&str>> {
            r.get_ref(i)?
                .as_str_or_null()
                .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, r.get_ref_unwrap(i).data_type(), Box::new(e)))
        };
        let kind = parse_kind(text(2)?.unwrap_or(""));
        let Some(fts_kind) = indexed_kind(kind) else { continue };
        let body = indexed_body(kind, text(3)?, text(4)?, text(5)?, text(6)?);
        if body.is_empty() {
            continue;
        }
        indexed += body.len();
        let rowid: i64 = r.get(0)?;
        insert.execute(params![rowid, body, fts_kind, text(1)?])?;
        // Chinese and Japanese are searched as substrings: only the parts that hold them go
        // into the trigram index, so an archive without them pays nothing for it.
        if super::text::has_unsegmented_script(&body) {
            fts.prepare_cached("INSERT INTO history_cjk (rowid, body) VALUES (?1, ?2)")?
                .execute(params![rowid, body])?;
        }
    }
    Ok(indexed)
}

/// Where a scan's indexer is, shared with the row writer (which waits when too far ahead).
#[derive(Default)]
pub(crate) struct Progress {
    lag: Mutex<Lag>,
    moved: Condvar,
    /// The indexer stopped (an error): the writer must not wait for it.
    gone: AtomicBool,
}

/// The indexer's mark, and what the writer queued after it.
#[derive(Default)]
struct Lag {
    mark: i64,
    /// The writer's batches not yet indexed: their last queue entry and the text they queued.
    queued: VecDeque<(i64, u64)>,
    bytes: u64,
}

impl Lag {
    fn too_far(&self, seq: i64) -> bool {
        self.bytes > MAX_LAG_BYTES || seq - self.mark > MAX_LAG_ENTRIES
    }
}

impl Progress {
    fn lag(&self) -> std::sync::MutexGuard<'_, Lag> {
        self.lag.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn publish(&self, mark: i64) {
        let mut lag = self.lag();
        lag.mark = mark;
        while let Some(&(_, bytes)) = lag.queued.front().filter(|(seq, _)| *seq <= mark) {
            lag.queued.pop_front();
            lag.bytes -= bytes;
        }
        drop(lag);
        self.moved.notify_all();
    }

    #[cfg(test)]
    pub(crate) fn publish_for_tests(&self, mark: i64) {
        self.publish(mark);
    }

    fn stop(&self) {
        self.gone.store(true, Ordering::SeqCst);
        self.moved.notify_all();
    }

    /// The writer queued entries up to `seq`, about `bytes` of text to index: wait while the
    /// indexer is more than [`MAX_LAG_BYTES`] or [`MAX_LAG_ENTRIES`] behind.
    pub(crate) fn wait_within_lag(&self, seq: i64, bytes: u64) {
        let mut lag = self.lag();
        if seq > lag.mark {
            lag.queued.push_back((seq, bytes));
            lag.bytes += bytes;
        }
        while lag.too_far(seq) && !self.gone.load(Ordering::SeqCst) {
            lag = self
                .moved
                .wait_timeout(lag, Duration::from_millis(100))
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }
}

/// A scan's indexer thread: opens its own connections to both files, applies the queue as
/// the writer fills it (woken by `wake`), and when the writer hangs up, applies what is left and
/// ends. Its error (if any) is returned by the join; the writer then catches up itself.
pub(crate) fn run_indexer(db_path: &Path, wake: &Receiver<()>, progress: &Arc<Progress>) -> Result<()> {
    let result = indexer_loop(db_path, wake, progress);
    progress.stop();
    result
}

fn indexer_loop(db_path: &Path, wake: &Receiver<()>, progress: &Progress) -> Result<()> {
    let main = crate::connection::open_reader(db_path)?;
    let mut fts = crate::connection::open_fts(&fts_path(db_path))?;
    // The checkpointer copies this file's WAL too.
    fts.execute_batch("PRAGMA wal_autocheckpoint=0")?;
    loop {
        loop {
            let (mark, more) = catch_up_some(&main, &mut fts)?;
            progress.publish(mark);
            if !more {
                break;
            }
        }
        match wake.recv_timeout(Duration::from_millis(200)) {
            Ok(()) => while wake.try_recv().is_ok() {},
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                let mark = catch_up(&main, &mut fts)?;
                progress.publish(mark);
                return Ok(());
            }
        }
    }
}

/// WAL frames (4 KiB pages) past which the checkpointer, once it has copied nearly all of
/// them, makes the writers start the WAL over (a brief wait for them) instead of letting it grow.
const RESTART_FRAMES: i64 = 16_384;
/// How often the checkpointer copies: a page the writers change again and again (the last
/// leaf of a table or an index, a segment's structure) is copied once per round, so rounds
/// further apart copy less (1,024 MB bench, 3 runs each in one sitting: 250 ms against 50 ms,
/// all threads' CPU 34.2 s against 38.0 s, ingest 51.0 against 46.0 MB/s, medians).
const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// A scan's checkpointer thread: copies both files' WALs into the files every
/// [`CHECKPOINT_EVERY`] while the writers (who have automatic checkpoints off) go on, so the writers
/// never wait for a copy nor its fsync; when a WAL is long and nearly all copied, a RESTART
/// (the writers wait for the few frames left) lets it start over from its beginning. At the
/// end of the scan, a TRUNCATE of both.
pub(crate) fn run_checkpointer(db_path: &Path, done: &Receiver<()>) -> Result<()> {
    let files = [crate::connection::open_reader(db_path)?, crate::connection::open_fts(&fts_path(db_path))?];
    loop {
        for conn in &files {
            let (_, log, copied): (i64, i64, i64) =
                conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
            if log > RESTART_FRAMES && log - copied < RESTART_FRAMES / 8 {
                conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()))?;
            }
        }
        match done.recv_timeout(CHECKPOINT_EVERY) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                // The scan is over: both WALs copied and emptied, so the next write (a poke)
                // does not pay for an automatic checkpoint of a long WAL.
                for conn in &files {
                    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
                }
                return Ok(());
            }
        }
    }
}

//! The SQLite store: opening, pragmas, migrations, and each table's SQL in its own module
//! (`memories`, `sessions`, `prompts`, `projects`, `views`, `privacy`, `doctor`, `context`,
//! `embeddings`, `judging`, `sync_journal`, `sync_apply`, `transfer`, `extraction`, `spool`,
//! `activity`...), as `impl Store` blocks and functions over a connection. The
//! domain modules (`crate::memory`, `crate::sessions`, `crate::context`...) hold the types and
//! rules and call these. A store module names a domain module only when that module does not
//! reach the store back (no cycle: the module graph test keeps it so); otherwise the types the
//! SQL reads live here and the domain module re-exports them (`views`, `judging`). What also
//! needs the search index, the vectors or the settings runs on the core's context
//! ([`crate::Core`]).

pub(crate) mod activity;
pub(crate) mod agent;
pub(crate) mod context;
pub mod disk_use;
pub(crate) mod doctor;
pub(crate) mod embeddings;
pub(crate) mod extraction;
pub(crate) mod foreign;
pub(crate) mod gc;
pub(crate) mod index_feed;
pub(crate) mod judging;
pub(crate) mod memories;
pub(crate) mod migrate;
pub(crate) mod privacy;
pub(crate) mod projects;
pub(crate) mod prompts;
pub(crate) mod relations;
pub(crate) mod search;
pub(crate) mod sessions;
pub(crate) mod spool;
pub mod stats_counts;
pub(crate) mod sync_apply;
pub(crate) mod sync_chunks;
pub(crate) mod sync_journal;
pub(crate) mod sync_remote;
pub(crate) mod transfer;
pub(crate) mod vectors;
pub(crate) mod views;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::clock::{Clock, SharedClock, SystemClock, format_ts};
use crate::error::{CairnError, ErrorCode, Result};
use crate::text::{RedactFields, Redaction};

pub use migrate::SCHEMA_VERSION;

pub use crate::settings::BUSY_TIMEOUT;
pub use crate::settings::DB_FILE;
/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 128;

/// One connection to the store. Not `Sync`: a server holds it behind its own lock or thread.
pub struct Store {
    conn: Connection,
    path: Option<PathBuf>,
    clock: SharedClock,
    /// Inside [`Store::batch`]'s shared transaction, where writes take no savepoint.
    grouped: bool,
    /// What every write is redacted of (`crate::redaction`): secrets too unless the settings
    /// say otherwise (`Core::with_settings`).
    redaction: Redaction,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Store {
    /// Open (creating if needed) the database at `path` and bring its schema up to date.
    pub fn open(path: &Path) -> Result<Store> {
        let existed = path.exists();
        let conn = Connection::open(path).map_err(|e| open_error(path, &e))?;
        if !existed {
            restrict_permissions(path);
        }
        Self::init(conn, Some(path.to_owned()))
    }

    /// Open an existing database without migrating or creating anything (inspection tools):
    /// read-write when permitted, so checks that need it can run, else read-only.
    pub fn open_for_inspection(path: &Path) -> Result<Store> {
        let rw = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let ro = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, rw)
            .or_else(|_| Connection::open_with_flags(path, ro))
            .map_err(|e| open_error(path, &e))?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.query_row("PRAGMA schema_version", [], |r| r.get::<_, i64>(0)).map_err(|e| open_error(path, &e))?;
        Ok(Store::bare(conn, Some(path.to_owned())))
    }

    /// Open an existing database for reading only: no migration, no write, so never the
    /// writer lock (a viewer such as `cairn tui` beside a daemon that writes). The schema must
    /// already be current: the daemon or any command that writes brings it up to date.
    pub fn open_read_only(path: &Path) -> Result<Store> {
        if !path.exists() {
            return Err(CairnError::new(
                ErrorCode::FileNotFound,
                format!("no cairn database at {} yet", path.display()),
            )
            .with_hint("save a memory or start the daemon (cairn serve) first, or check --data-dir"));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|e| open_error(path, &e))?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        conn.query_row("PRAGMA schema_version", [], |r| r.get::<_, i64>(0)).map_err(|e| open_error(path, &e))?;
        migrate::check_current(&conn)?;
        Ok(Store::bare(conn, Some(path.to_owned())))
    }

    /// A store on `conn` with nothing attached.
    fn bare(conn: Connection, path: Option<PathBuf>) -> Store {
        Store { conn, path, clock: Arc::new(SystemClock), grouped: false, redaction: Redaction::default() }
    }

    /// A private in-memory store (unit tests, benchmarks).
    pub fn open_in_memory() -> Result<Store> {
        Self::init(Connection::open_in_memory()?, None)
    }

    /// What writes are redacted of from now on (`[privacy] redact_secrets`).
    pub fn set_redaction(&mut self, redaction: Redaction) {
        self.redaction = redaction;
    }

    /// What writes are redacted of.
    pub fn redaction(&self) -> Redaction {
        self.redaction
    }

    /// `input` with every text field redacted by this store's rule, and whether anything was:
    /// what each write does first with what it was given.
    pub(crate) fn redacted<T: RedactFields + Clone>(&self, input: &T) -> (T, bool) {
        let mut input = input.clone();
        let hit = input.redact_fields(self.redaction);
        (input, hit)
    }

    fn init(conn: Connection, path: Option<PathBuf>) -> Result<Store> {
        apply_pragmas(&conn, path.as_deref())?;
        // rusqlite keeps 16 by default; the save path alone prepares about a dozen, and a
        // statement prepared again recompiles its triggers.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let mut store = Store::bare(conn, path);
        migrate::run(&mut store.conn)?;
        Ok(store)
    }

    /// Replace the clock (tests move time to cross the dedupe window).
    pub fn set_clock(&mut self, clock: SharedClock) {
        self.clock = clock;
    }

    /// Set a pragma on this connection (daemon tuning such as `wal_autocheckpoint`).
    pub fn conn_pragma(&self, name: &str, value: i64) -> Result<()> {
        self.conn.pragma_update(None, name, value)?;
        Ok(())
    }

    /// Copy what the WAL holds into the database without blocking anyone (a daemon runs
    /// this in the background so no request pays for a checkpoint).
    pub fn checkpoint_passive(&self) -> Result<()> {
        self.conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
        Ok(())
    }

    /// Copy the whole WAL into the database and truncate it to zero bytes, if that needs no
    /// waiting: with the writer lock taken or a reader inside the WAL, it copies what it can
    /// (as PASSIVE) and returns `false`. It holds the writer lock while it copies, so the
    /// daemon runs it only to give back the disk of an oversized WAL.
    pub fn checkpoint_truncate_nowait(&self) -> Result<bool> {
        self.conn.busy_timeout(Duration::ZERO)?;
        let busy = self.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0));
        self.conn.busy_timeout(BUSY_TIMEOUT)?;
        Ok(busy? == 0)
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The data dir the database file is in (`None` in memory).
    pub fn data_dir(&self) -> Option<&Path> {
        self.path().and_then(Path::parent)
    }

    pub(crate) fn now(&self) -> String {
        format_ts(self.clock.now())
    }

    pub(crate) fn clock(&self) -> &dyn Clock {
        self.clock.as_ref()
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Run `f` atomically. On its own: an IMMEDIATE transaction (the write lock is taken up
    /// front, so two writers never deadlock upgrading read locks, which SQLite reports as
    /// SQLITE_BUSY at once, ignoring the busy timeout). Inside a batch ([`Store::batch`]):
    /// straight in the batch's transaction. Inside any other transaction: a savepoint.
    pub(crate) fn write<T>(&mut self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        if self.grouped {
            return f(&self.conn);
        }
        if !self.conn.is_autocommit() {
            let sp = self.conn.savepoint()?;
            let value = f(&sp)?;
            sp.commit()?;
            return Ok(value);
        }
        let tx = rusqlite::Transaction::new(&mut self.conn, rusqlite::TransactionBehavior::Immediate)?;
        let value = f(&tx)?;
        tx.commit()?;
        Ok(value)
    }

    /// Run `f`, whose writes each take a savepoint, as one transaction: all of it or none. Inside
    /// a transaction already (a batch, a caller's), `f` just runs in it.
    pub(crate) fn in_transaction<T>(&mut self, f: impl FnOnce(&mut Store) -> Result<T>) -> Result<T> {
        if self.grouped || !self.conn.is_autocommit() {
            return f(self);
        }
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        match f(self) {
            Ok(value) => match self.conn.execute_batch("COMMIT") {
                Ok(()) => Ok(value),
                Err(e) => {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    Err(e.into())
                }
            },
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Group commit: run several jobs in one transaction and commit once. Results are only
    /// final when this returns `Ok`: a failed commit fails every job.
    ///
    /// Jobs take no savepoint of their own: FTS5 writes out its pending segment at every
    /// savepoint, so savepoints would cost one index segment (and its merges) per job instead
    /// of one per group. A job that fails without having changed a row (a rejected save)
    /// simply fails. One that fails after changing rows cannot be undone alone: the whole
    /// transaction is rolled back and every job runs again in a transaction of its own, so
    /// each still succeeds or fails whole, on its own.
    pub fn batch<T: Clone, R>(
        &mut self,
        jobs: Vec<T>,
        run: impl FnMut(&mut Store, T) -> Result<R>,
    ) -> Result<Vec<Result<R>>> {
        batch(self, jobs, run)
    }

    /// The schema version recorded in the file.
    pub fn schema_version(&self) -> Result<i64> {
        Ok(self.conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    /// Value of a single-row, single-column query (tests).
    #[cfg(test)]
    pub(crate) fn scalar_i64(&self, sql: &str) -> Result<i64> {
        Ok(self.conn.query_row(sql, [], |r| r.get(0))?)
    }

    pub(crate) fn optional_i64(&self, sql: &str, params: impl rusqlite::Params) -> Result<Option<i64>> {
        Ok(self.conn.query_row(sql, params, |r| r.get(0)).optional()?)
    }
}

/// [`Store::batch`] for any context that holds the store, each job handed the whole context
/// (the core's context runs its jobs with the history archive beside the store).
pub(crate) fn batch<C: AsMut<Store>, T: Clone, R>(
    ctx: &mut C,
    jobs: Vec<T>,
    mut run: impl FnMut(&mut C, T) -> Result<R>,
) -> Result<Vec<Result<R>>> {
    let grouped = in_one_transaction(ctx, |ctx| {
        let results = run_grouped(ctx, &jobs, &mut run);
        let keep = results.is_some();
        (results, keep)
    })?;
    if let Some(results) = grouped {
        return Ok(results);
    }
    Ok(jobs
        .into_iter()
        .map(|job| {
            // Rolled back when it fails, whatever it wrote first.
            in_one_transaction(ctx, |ctx| {
                let outcome = run(ctx, job);
                let keep = outcome.is_ok();
                (outcome, keep)
            })
            .and_then(|outcome| outcome)
        })
        .collect())
}

/// Run `f` in an IMMEDIATE transaction with no savepoints inside; commit when it says to
/// keep what it did, else roll back.
fn in_one_transaction<C: AsMut<Store>, R>(ctx: &mut C, f: impl FnOnce(&mut C) -> (R, bool)) -> Result<R> {
    ctx.as_mut().conn.execute_batch("BEGIN IMMEDIATE")?;
    ctx.as_mut().grouped = true;
    let (value, keep) = f(ctx);
    let store = ctx.as_mut();
    store.grouped = false;
    if !keep {
        store.conn.execute_batch("ROLLBACK")?;
        return Ok(value);
    }
    if let Err(e) = store.conn.execute_batch("COMMIT") {
        let _ = store.conn.execute_batch("ROLLBACK");
        return Err(e.into());
    }
    Ok(value)
}

/// The jobs' results in one open transaction, or `None` when a failed job left changes
/// behind (the caller rolls back).
fn run_grouped<C: AsMut<Store>, T: Clone, R>(
    ctx: &mut C,
    jobs: &[T],
    run: &mut impl FnMut(&mut C, T) -> Result<R>,
) -> Option<Vec<Result<R>>> {
    let mut results = Vec::with_capacity(jobs.len());
    for job in jobs {
        let changes_before = ctx.as_mut().conn.total_changes();
        let outcome = run(ctx, job.clone());
        // A failed statement is undone by SQLite itself and not counted; only rows that
        // earlier statements of this job changed would be left behind.
        if outcome.is_err() && ctx.as_mut().conn.total_changes() != changes_before {
            return None;
        }
        results.push(outcome);
    }
    Some(results)
}

impl AsMut<Store> for Store {
    fn as_mut(&mut self) -> &mut Store {
        self
    }
}

fn apply_pragmas(conn: &Connection, path: Option<&Path>) -> Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Probe the file first: a non-database file fails here with a clear code instead of half
    // way through a migration.
    conn.query_row("PRAGMA schema_version", [], |r| r.get::<_, i64>(0)).map_err(|e| match path {
        Some(p) => open_error(p, &e),
        None => CairnError::from(e),
    })?;
    if path.is_some() {
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            tracing::warn!(mode, "could not switch the database to WAL");
        }
    }
    conn.execute_batch(
        "PRAGMA synchronous=NORMAL;
         PRAGMA foreign_keys=ON;
         PRAGMA secure_delete=ON;
         PRAGMA temp_store=MEMORY;",
    )?;
    keep_cached_plans(conn)?;
    Ok(())
}

/// Plans that never depend on bound values, so a cached statement is compiled once.
///
/// Without this, SQLite marks any statement whose plan weighed a `col = ?` filter (most of
/// ours with an ORDER BY) to be recompiled when that parameter is rebound, and
/// `sqlite3_clear_bindings` (which rusqlite calls when a statement goes back to its cache)
/// then expires it: every save re-parsed its duplicate and topic lookups, 11 % of the writer's
/// CPU. We keep no `sqlite_stat4` samples, so value-dependent planning had nothing to gain.
fn keep_cached_plans(conn: &Connection) -> Result<()> {
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    Ok(())
}

/// A clearer error for the ways opening a database file fails.
fn open_error(path: &Path, err: &rusqlite::Error) -> CairnError {
    let base = CairnError::from(clone_err(err));
    match base.code {
        ErrorCode::DatabaseCorrupt => CairnError::new(
            ErrorCode::DatabaseCorrupt,
            format!("{} is not a usable cairn database ({err})", path.display()),
        )
        .with_hint("move the file aside and run `cairn import` from an export, or point --data-dir elsewhere"),
        ErrorCode::DataDirNotWritable | ErrorCode::Internal => {
            CairnError::new(ErrorCode::DataDirNotWritable, format!("cannot open {}: {err}", path.display()))
                .with_hint("check that the data dir exists and is writable (cairn doctor), or set --data-dir")
        }
        _ => base,
    }
}

fn clone_err(err: &rusqlite::Error) -> rusqlite::Error {
    match err {
        rusqlite::Error::SqliteFailure(f, m) => rusqlite::Error::SqliteFailure(*f, m.clone()),
        other => rusqlite::Error::InvalidParameterName(other.to_string()),
    }
}

#[cfg(unix)]
fn restrict_permissions(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
        tracing::warn!(path = %path.display(), error = %e, "could not restrict database permissions");
    }
}

#[cfg(not(unix))]
fn restrict_permissions(_path: &Path) {}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::StatementStatus;

    /// A cached statement whose plan weighed a `col = ?` filter is compiled once, not again at
    /// every use (SQLite would otherwise expire it whenever its bindings are cleared).
    #[test]
    fn cached_statements_are_not_recompiled_per_use() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cairn.db")).unwrap();
        let sql = "SELECT id FROM observations WHERE project = ?1 AND type = ?2 AND deleted_at IS NULL
                   ORDER BY created_at DESC LIMIT 1";
        for project in ["alpha", "beta", "gamma"] {
            let mut stmt = store.conn.prepare_cached(sql).unwrap();
            let _ = stmt.query_row([project, "note"], |r| r.get::<_, i64>(0)).optional().unwrap();
        }
        let stmt = store.conn.prepare_cached(sql).unwrap();
        assert_eq!(stmt.get_status(StatementStatus::RePrepare), 0);
    }

    /// A read-only store reads what a writer saved, refuses to write, and never creates a
    /// missing database.
    #[test]
    fn a_read_only_store_reads_and_never_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cairn.db");
        assert_eq!(Store::open_read_only(&path).unwrap_err().code, ErrorCode::FileNotFound);
        assert!(!path.exists());
        let mut writer = Store::open(&path).unwrap();
        let new = crate::memory::NewObservation { title: "kept".into(), content: "body".into(), ..Default::default() };
        let id = writer.save(&new).unwrap().id;
        let mut reader = Store::open_read_only(&path).unwrap();
        assert_eq!(reader.get(id).unwrap().title, "kept");
        assert!(reader.save(&new).is_err());
        assert_eq!(writer.get(id).unwrap().revision_count, 1);
        // An older schema is not upgraded behind a reader's back: a clear error instead.
        writer.conn.pragma_update(None, "user_version", migrate::SCHEMA_VERSION - 1).unwrap();
        assert_eq!(Store::open_read_only(&path).unwrap_err().code, ErrorCode::SchemaTooOld);
    }
}

#[cfg(test)]
mod batch_tests {
    use super::*;

    fn add_session(store: &mut Store, id: &str) -> Result<()> {
        store.write(|conn| {
            conn.execute("INSERT INTO sessions (id, started_at) VALUES (?1, '2026-11-22T00:00:00Z')", [id])?;
            Ok(())
        })
    }

    fn session_ids(store: &Store) -> Vec<String> {
        let mut stmt = store.conn.prepare("SELECT id FROM sessions ORDER BY id").unwrap();
        stmt.query_map([], |r| r.get(0)).unwrap().collect::<rusqlite::Result<_>>().unwrap()
    }

    /// Each job succeeds or fails on its own, whether it failed before or after writing.
    #[test]
    fn a_failing_job_leaves_nothing_and_takes_nothing_down() {
        for fail_after_writing in [false, true] {
            let mut store = Store::open_in_memory().unwrap();
            let results = store
                .batch(vec!["a", "b", "c"], |store, id| {
                    if id == "b" && !fail_after_writing {
                        return Err(CairnError::internal("rejected before writing"));
                    }
                    add_session(store, id)?;
                    if id == "b" {
                        return Err(CairnError::internal("failed after writing"));
                    }
                    Ok(serde_json::json!(id))
                })
                .unwrap();
            assert_eq!(results.iter().map(Result::is_ok).collect::<Vec<_>>(), [true, false, true]);
            assert_eq!(session_ids(&store), ["a", "c"], "fail_after_writing = {fail_after_writing}");
            assert!(store.conn.is_autocommit(), "no transaction left open");
        }
    }
}

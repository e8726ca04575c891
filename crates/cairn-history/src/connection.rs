//! Opening the archive's files: `history.db` and the index file, both WAL, both read through a
//! memory map. The store, the scan indexer and the checkpointer each open their own.

use std::path::Path;
use std::time::Duration;

use cairn_base::error::{CairnError, Result};
use rusqlite::Connection;

/// Most of `history.db` read through a memory map.
const MMAP_BYTES: u64 = 1 << 30;

const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

const STATEMENT_CACHE: usize = 64;

/// One of `history.db`'s connections, or the index file's: WAL, memory-mapped reads.
pub(crate) fn open_file(path: &Path) -> Result<Connection> {
    let conn = Connection::open(path)
        .map_err(|e| CairnError::from(e).with_hint("check that the data dir is writable (cairn doctor)"))?;
    conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))?;
    // Reads through the OS page cache, shared by every connection, without a system call per
    // page: a search hydrates a few hundred rows spread over the file.
    conn.query_row(&format!("PRAGMA mmap_size={MMAP_BYTES}"), [], |_| Ok(()))?;
    configure(&conn)?;
    Ok(conn)
}

pub(crate) fn configure(conn: &Connection) -> Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // secure_delete FAST: a forgotten session's pages are zeroed when that costs no extra
    // I/O, without the full cost of ON on every FTS segment merge of a large ingest.
    conn.execute_batch(
        "PRAGMA synchronous=NORMAL;
         PRAGMA temp_store=MEMORY;
         PRAGMA secure_delete=FAST;",
    )?;
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(())
}

/// A scan indexer's connection to `history.db` (already migrated by the writer that started it).
pub(crate) fn open_reader(path: &Path) -> Result<Connection> {
    open_file(path)
}

/// A connection to the index file.
pub(crate) fn open_fts(path: &Path) -> Result<Connection> {
    open_file(path)
}

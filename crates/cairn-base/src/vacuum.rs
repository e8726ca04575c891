//! A SQLite file rebuilt (`VACUUM`) with its copy on disk, not in memory.

use rusqlite::Connection;

use crate::error::Result;

/// Rebuild the file without its free pages, then empty the WAL.
///
/// `VACUUM` builds a copy of the whole file in SQLite's temporary storage and writes it back
/// through the WAL. cairn's connections keep temporary storage in memory (`temp_store=MEMORY`,
/// for sorts and temporary indexes), where that copy would take as much RAM as the file holds:
/// ~20 GB for a history archive of 10M parts, in the daemon that runs `cairn gc`. The copy goes
/// to SQLite's temp dir for the rebuild (`SQLITE_TMPDIR`, else `TMPDIR`, `/var/tmp`, `/tmp`),
/// and the setting comes back after, whether the rebuild succeeded or not.
pub fn vacuum_on_disk(conn: &Connection) -> Result<()> {
    conn.execute_batch("PRAGMA temp_store=FILE")?;
    let rebuilt = conn.execute_batch("VACUUM");
    conn.execute_batch("PRAGMA temp_store=MEMORY")?;
    rebuilt?;
    checkpoint_truncate(conn)
}

/// Copy the whole WAL into the file and truncate it to zero bytes, waiting for readers as the
/// busy timeout allows: after a rebuild, or a rewrite that could not rebuild, no frame of an
/// old page is left in the WAL.
pub fn checkpoint_truncate(conn: &Connection) -> Result<()> {
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    Ok(())
}

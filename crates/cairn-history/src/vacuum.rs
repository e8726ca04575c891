//! The archive's files rebuilt (`cairn gc`): pages freed by a prune or a forget go back to the
//! file system. `VACUUM` writes through the WAL, so a kill mid-way leaves the old file whole.

use crate::store::HistoryDb;
use cairn_base::error::Result;

/// Bytes of `history.db` and `history-fts.db`: all pages, and the free ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchivePages {
    pub file_bytes: u64,
    pub free_bytes: u64,
}

fn pages(conn: &rusqlite::Connection) -> Result<ArchivePages> {
    let (count, free, size): (i64, i64, i64) = conn.query_row(
        "SELECT (SELECT page_count FROM pragma_page_count()), (SELECT freelist_count FROM pragma_freelist_count()),
                (SELECT page_size FROM pragma_page_size())",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    Ok(ArchivePages {
        file_bytes: u64::try_from(count * size).unwrap_or(0),
        free_bytes: u64::try_from(free * size).unwrap_or(0),
    })
}

impl HistoryDb {
    /// The pages of both files, summed.
    pub fn pages(&self) -> Result<ArchivePages> {
        let (db, fts) = (pages(self.conn())?, pages(self.fts())?);
        Ok(ArchivePages { file_bytes: db.file_bytes + fts.file_bytes, free_bytes: db.free_bytes + fts.free_bytes })
    }

    /// Rebuild both files without their free pages, then empty their WALs.
    pub fn vacuum(&mut self) -> Result<()> {
        for conn in [self.conn(), self.fts()] {
            conn.execute_batch("VACUUM")?;
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        }
        Ok(())
    }
}

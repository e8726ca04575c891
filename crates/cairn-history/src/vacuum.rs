//! The archive's files rebuilt (`cairn gc`): pages freed by a prune or a forget go back to the
//! file system. `VACUUM` writes through the WAL, so a kill mid-way leaves the old file whole.

use crate::store::HistoryDb;
use cairn_base::error::Result;
use cairn_base::vacuum::vacuum_on_disk;

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

    /// The live bytes (pages in use) of the larger of the two files: what a rebuild of it
    /// copies, one file at a time.
    pub fn largest_live_bytes(&self) -> Result<u64> {
        let live = |p: ArchivePages| p.file_bytes.saturating_sub(p.free_bytes);
        Ok(live(pages(self.conn())?).max(live(pages(self.fts())?)))
    }

    /// Rebuild both files without their free pages, then empty their WALs (the copy on disk,
    /// [`vacuum_on_disk`]).
    pub fn vacuum(&mut self) -> Result<()> {
        for conn in [self.conn(), self.fts()] {
            vacuum_on_disk(conn)?;
        }
        Ok(())
    }
}

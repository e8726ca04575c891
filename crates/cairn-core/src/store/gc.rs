//! The SQL of `cairn gc` (`crate::gc` holds the rule): what the memory store could give back,
//! and the rebuild of its file.

use rusqlite::params;

use crate::error::Result;
use crate::store::Store;

/// Rows and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Rows {
    pub count: u64,
    pub bytes: u64,
}

/// The file's pages: all of them and the free ones, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Pages {
    pub file_bytes: u64,
    pub free_bytes: u64,
}

impl Pages {
    /// The bytes a rebuild copies: every page but the free ones.
    pub(crate) fn live_bytes(self) -> u64 {
        self.file_bytes.saturating_sub(self.free_bytes)
    }
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl Store {
    /// Vectors of any other model than `model_in_use`, with their stored bytes.
    pub(crate) fn vectors_of_other_models(&self, model_in_use: &str) -> Result<Rows> {
        let (count, bytes): (i64, i64) = self.conn().query_row(
            "SELECT count(*), coalesce(sum(length(vector)), 0) FROM embeddings WHERE model != ?1",
            [model_in_use],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(Rows { count: to_u64(count), bytes: to_u64(bytes) })
    }

    /// Spool event ids applied before `cutoff`, with their bytes.
    pub(crate) fn spool_events_before(&self, cutoff: &str) -> Result<Rows> {
        let (count, bytes): (i64, i64) = self.conn().query_row(
            "SELECT count(*), coalesce(sum(length(id) + length(applied_at)), 0) FROM spool_events WHERE applied_at < ?1",
            params![cutoff],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok(Rows { count: to_u64(count), bytes: to_u64(bytes) })
    }

    /// The sync journal's entries and the tombstones of hard-deleted synced memories.
    pub(crate) fn sync_rows_kept(&self) -> Result<(u64, u64)> {
        let (journal, tombstones): (i64, i64) = self.conn().query_row(
            "SELECT (SELECT count(*) FROM sync_journal), (SELECT count(*) FROM sync_tombstones)",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        Ok((to_u64(journal), to_u64(tombstones)))
    }

    /// The main file's pages (the WAL is not counted: a checkpoint empties it).
    pub(crate) fn pages(&self) -> Result<Pages> {
        let (count, free, size): (i64, i64, i64) = self.conn().query_row(
            "SELECT (SELECT page_count FROM pragma_page_count()), (SELECT freelist_count FROM pragma_freelist_count()),
                    (SELECT page_size FROM pragma_page_size())",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        Ok(Pages { file_bytes: to_u64(count * size), free_bytes: to_u64(free * size) })
    }

    /// Whether this connection is outside any transaction (a `VACUUM` can run only then: the
    /// daemon's writer runs a group of several writes in one).
    pub(crate) fn outside_transaction(&self) -> bool {
        self.conn().is_autocommit()
    }
}

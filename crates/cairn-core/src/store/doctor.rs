//! The SQL of `cairn doctor` (`crate::doctor` holds the checks and what they say): SQLite's
//! integrity check, the full-text indexes' own check and their rebuild.

use crate::error::Result;
use crate::store::Store;

/// The statement of the database check (named in what the check says).
pub(crate) const INTEGRITY_CHECK: &str = "PRAGMA integrity_check";

impl Store {
    /// SQLite's verdict on the database file (`ok` when sound).
    pub(crate) fn integrity(&self) -> rusqlite::Result<String> {
        self.conn().query_row(INTEGRITY_CHECK, [], |r| r.get::<_, String>(0))
    }

    /// FTS5's integrity check of `table` (rank 1: against its external content too). Fails on
    /// a read-only connection, which cannot run it.
    pub(crate) fn fts_integrity(&self, table: &str) -> rusqlite::Result<()> {
        let sql = format!("INSERT INTO {table}({table}, rank) VALUES('integrity-check', 1)");
        self.conn().execute(&sql, []).map(|_| ())
    }

    /// Rebuild both full-text indexes from their tables.
    pub fn rebuild_fts(&mut self) -> Result<()> {
        self.write(|tx| {
            tx.execute("INSERT INTO observations_fts(observations_fts) VALUES('rebuild')", [])?;
            tx.execute("INSERT INTO prompts_fts(prompts_fts) VALUES('rebuild')", [])?;
            Ok(())
        })
    }
}

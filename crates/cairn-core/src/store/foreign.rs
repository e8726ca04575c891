//! A foreign SQLite database read as it is (engram's, for `cairn import-engram`): opened
//! read-only, its tables' columns listed, their rows read as text.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::error::Result;

/// A database cairn reads and never writes.
pub(crate) struct ForeignDb {
    conn: Connection,
}

impl ForeignDb {
    /// Open `path` read-only (its owner may be running).
    pub(crate) fn open_read_only(path: &Path) -> rusqlite::Result<ForeignDb> {
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
        Ok(ForeignDb { conn })
    }

    /// Wait up to `timeout` for a writer's lock.
    pub(crate) fn set_busy_timeout(&self, timeout: Duration) -> Result<()> {
        self.conn.busy_timeout(timeout)?;
        Ok(())
    }

    /// The columns of `table` (none: no such table).
    pub(crate) fn columns(&self, table: &str) -> rusqlite::Result<Vec<String>> {
        let mut stmt = self.conn.prepare(&format!("PRAGMA table_info({table})"))?;
        stmt.query_map([], |r| r.get::<_, String>(1)).and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
    }

    /// The `wanted` columns of every row of `table`, each as text; NULL for those not among
    /// `columns` (the table's).
    pub(crate) fn text_rows(
        &self,
        table: &str,
        wanted: &[&str],
        columns: &[String],
    ) -> rusqlite::Result<Vec<Vec<Option<String>>>> {
        let select = wanted
            .iter()
            .map(|w| if columns.iter().any(|c| c == w) { format!("CAST({w} AS TEXT)") } else { "NULL".to_owned() })
            .collect::<Vec<_>>()
            .join(", ");
        let mut stmt = self.conn.prepare(&format!("SELECT {select} FROM {table}"))?;
        let n = wanted.len();
        stmt.query_map([], |r| (0..n).map(|i| r.get::<_, Option<String>>(i)).collect::<rusqlite::Result<Vec<_>>>())
            .and_then(|rows| rows.collect::<rusqlite::Result<Vec<_>>>())
    }
}

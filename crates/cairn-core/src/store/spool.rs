//! The SQL of the spool's bookkeeping (`crate::spool` holds the rules and the files): its
//! counters kept across restarts, and the event ids applied.

use rusqlite::{OptionalExtension, params};

use crate::error::Result;
use crate::store::Store;

impl Store {
    /// Every spool counter kept, by name.
    pub(crate) fn spool_counter_rows(&self) -> Result<Vec<(String, i64)>> {
        let mut stmt = self.conn().prepare_cached("SELECT name, value FROM spool_counters")?;
        let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Add each `(name, n)` to its counter, in one write.
    pub(crate) fn add_spool_counters(&mut self, named: &[(&str, i64)]) -> Result<()> {
        self.write(|conn| {
            let mut stmt = conn.prepare_cached(
                "INSERT INTO spool_counters (name, value) VALUES (?1, ?2)
                 ON CONFLICT(name) DO UPDATE SET value = value + excluded.value",
            )?;
            for (name, n) in named {
                stmt.execute(params![name, n])?;
            }
            Ok(())
        })
    }

    /// Forget the event ids applied before `cutoff`; how many were.
    pub(crate) fn delete_spool_events_before(&mut self, cutoff: &str) -> Result<usize> {
        self.write(|conn| Ok(conn.execute("DELETE FROM spool_events WHERE applied_at < ?1", [cutoff])?))
    }

    /// Whether the event `id` was applied before.
    pub(crate) fn spool_event_applied(&self, id: &str) -> Result<bool> {
        let mut stmt = self.conn().prepare_cached("SELECT 1 FROM spool_events WHERE id = ?1")?;
        Ok(stmt.query_row([id], |_| Ok(())).optional()?.is_some())
    }

    /// Record the event `id` as applied at `applied_at`, in the caller's transaction.
    pub(crate) fn record_spool_event(&mut self, id: &str, applied_at: &str) -> Result<()> {
        self.write(|conn| {
            conn.prepare_cached("INSERT INTO spool_events (id, applied_at) VALUES (?1, ?2)")?
                .execute(params![id, applied_at])?;
            Ok(())
        })
    }
}

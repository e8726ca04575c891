//! The SQL of sync with a hub (`crate::sync::remote` holds the rules): pull cursors and their
//! errors, the journal entries parked for a hub, and the lease that lets one process sync.

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::store::Store;

/// A journal entry that will not reach the hub, kept with its reason (see `crate::sync::remote`,
/// "Parking").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ParkedEntry {
    pub project: String,
    pub entity: String,
    pub entity_key: String,
    /// The journal entry's seq (its idempotency key is `<node id>:<seq>`).
    pub seq: i64,
    /// The hub's code (`nul_character`, `invalid_entry`, …), or cairn's for an entry it did
    /// not send (`nul_character`, `payload_too_large`).
    pub code: String,
    pub reason: String,
    /// `hub` (it refused the entry) or `client` (cairn did not send it).
    pub refused_by: String,
    pub parked_at: String,
}

/// A hub's row of `sync_pulls`: where pulling resumes, for which scope, and how the last went.
pub(crate) struct PullRow {
    pub cursor: i64,
    pub scope: String,
    pub last_pull_at: Option<String>,
    pub last_error: Option<String>,
}

impl Store {
    /// The pull state kept for `source` (a hub), if any.
    pub(crate) fn sync_pull_row(&self, source: &str) -> Result<Option<PullRow>> {
        Ok(self
            .conn()
            .query_row(
                "SELECT cursor, scope, last_pull_at, last_error FROM sync_pulls WHERE source = ?1",
                [source],
                |r| Ok(PullRow { cursor: r.get(0)?, scope: r.get(1)?, last_pull_at: r.get(2)?, last_error: r.get(3)? }),
            )
            .optional()?)
    }

    /// Whether this store's own journal holds entry `seq` of row `entity_key` (written here,
    /// not applied from elsewhere).
    pub(crate) fn sync_local_entry_exists(&self, seq: i64, entity_key: &str) -> Result<bool> {
        Ok(self
            .conn()
            .prepare_cached("SELECT 1 FROM sync_journal WHERE seq = ?1 AND entity_key = ?2 AND source = 'local'")?
            .exists(params![seq, entity_key])?)
    }

    /// A pull ended well: forget its last error (written only when there is one to forget, or
    /// no row yet, so a quiet round commits nothing).
    pub fn sync_pull_recovered(&mut self, source: &str, scope: &str, cursor: i64) -> Result<()> {
        let now = self.now();
        self.write(|tx| {
            tx.execute(
                "INSERT INTO sync_pulls (source, cursor, scope, last_pull_at) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (source) DO UPDATE SET last_error = NULL, last_pull_at = excluded.last_pull_at,
                    cursor = excluded.cursor, scope = excluded.scope
                 WHERE sync_pulls.last_error IS NOT NULL OR sync_pulls.scope != excluded.scope",
                params![source, cursor, scope, now],
            )?;
            Ok(())
        })
    }

    /// Remember that pulling from `source` failed.
    pub fn sync_pull_error(&mut self, source: &str, error: &str) -> Result<()> {
        let now = self.now();
        self.write(|tx| {
            tx.execute(
                "INSERT INTO sync_pulls (source, last_pull_at, last_error) VALUES (?1, ?2, ?3)
                 ON CONFLICT (source) DO UPDATE SET last_pull_at = excluded.last_pull_at, last_error = excluded.last_error",
                params![source, now, error],
            )?;
            Ok(())
        })
    }

    /// How many entries are parked for `target_key`, and the newest `limit` of them.
    pub fn sync_parked(&self, target_key: &str, limit: usize) -> Result<(i64, Vec<ParkedEntry>)> {
        let count =
            self.conn()
                .query_row("SELECT count(*) FROM sync_parked WHERE target_key = ?1", [target_key], |r| r.get(0))?;
        let newest = self
            .conn()
            .prepare_cached(
                "SELECT project, entity, entity_key, seq, code, reason, refused_by, parked_at FROM sync_parked
                 WHERE target_key = ?1 ORDER BY seq DESC LIMIT ?2",
            )?
            .query_map(params![target_key, i64::try_from(limit).unwrap_or(i64::MAX)], |r| {
                Ok(ParkedEntry {
                    project: r.get(0)?,
                    entity: r.get(1)?,
                    entity_key: r.get(2)?,
                    seq: r.get(3)?,
                    code: r.get(4)?,
                    reason: r.get(5)?,
                    refused_by: r.get(6)?,
                    parked_at: r.get(7)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok((count, newest))
    }

    /// Who holds lease `name` at `now`, while it runs.
    pub(crate) fn sync_lease_holder(&self, name: &str, now: &str) -> Result<Option<String>> {
        Ok(self
            .conn()
            .query_row("SELECT holder FROM sync_lease WHERE name = ?1 AND expires_at > ?2", params![name, now], |r| {
                r.get(0)
            })
            .optional()?)
    }
}

/// Move `source`'s pull cursor to `cursor` for `scope` and clear its last error, in `tx`.
pub(crate) fn record_pull(tx: &Connection, source: &str, cursor: i64, scope: &str, now: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO sync_pulls (source, cursor, scope, last_pull_at, last_error) VALUES (?1, ?2, ?3, ?4, NULL)
         ON CONFLICT (source) DO UPDATE SET cursor = excluded.cursor, scope = excluded.scope,
            last_pull_at = excluded.last_pull_at, last_error = NULL",
        params![source, cursor, scope, now],
    )?;
    Ok(())
}

/// Keep `parked` for `target_key` in `tx` (an entry parked again takes its new reason).
pub(crate) fn park(tx: &Connection, target_key: &str, parked: &[ParkedEntry]) -> Result<()> {
    let mut park = tx.prepare_cached(
        "INSERT INTO sync_parked (target_key, seq, project, entity, entity_key, code, reason, refused_by, parked_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT (target_key, seq) DO UPDATE SET code = excluded.code, reason = excluded.reason,
            refused_by = excluded.refused_by, parked_at = excluded.parked_at",
    )?;
    for p in parked {
        park.execute(params![
            target_key,
            p.seq,
            p.project,
            p.entity,
            p.entity_key,
            p.code,
            p.reason,
            p.refused_by,
            p.parked_at
        ])?;
    }
    Ok(())
}

/// Forget, in `tx`, the entries parked for `target_key` older than each `(entity, key, seq)`
/// of `delivered` of the same row.
pub(crate) fn forget_parked(tx: &Connection, target_key: &str, delivered: &[(String, String, i64)]) -> Result<()> {
    let mut forget = tx.prepare_cached(
        "DELETE FROM sync_parked WHERE target_key = ?1 AND entity_key = ?2 AND entity = ?3 AND seq < ?4",
    )?;
    for (entity, key, seq) in delivered {
        forget.execute(params![target_key, key, entity, seq])?;
    }
    Ok(())
}

/// Lease `name`'s holder and when it expires, if anyone took it.
pub(crate) fn lease(tx: &Connection, name: &str) -> Result<Option<(String, String)>> {
    Ok(tx
        .query_row("SELECT holder, expires_at FROM sync_lease WHERE name = ?1", [name], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

/// Give lease `name` to `holder` until `until`.
pub(crate) fn set_lease(tx: &Connection, name: &str, holder: &str, until: &str) -> Result<()> {
    tx.execute(
        "INSERT INTO sync_lease (name, holder, expires_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at",
        params![name, holder, until],
    )?;
    Ok(())
}

/// Give lease `name` back, only if `holder` has it.
pub(crate) fn release_lease(tx: &Connection, name: &str, holder: &str) -> Result<()> {
    tx.execute("DELETE FROM sync_lease WHERE name = ?1 AND holder = ?2", params![name, holder])?;
    Ok(())
}

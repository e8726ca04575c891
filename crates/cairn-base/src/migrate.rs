//! The migration runner: numbered migrations tracked by `PRAGMA user_version`. Each runs once,
//! inside an IMMEDIATE transaction that re-reads the version after taking the write lock, so two
//! processes starting together never both apply the same step. The memory store and the
//! history archive each keep their own list.

use rusqlite::{Connection, TransactionBehavior};

use crate::error::{CairnError, ErrorCode, Result};

/// Bring a database up to the last of `migrations` (the memory store's, or `history.db`'s).
pub fn run_list(conn: &mut Connection, migrations: &[&str]) -> Result<()> {
    let latest = migrations.len() as i64;
    // Fast path: an up-to-date database costs one pragma read, no lock.
    let current = user_version(conn)?;
    check_not_newer(current, latest)?;
    if current == latest {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut version = user_version(&tx)?;
    check_not_newer(version, latest)?;
    while version < latest {
        let sql = migrations[usize::try_from(version).unwrap_or(0)];
        tx.execute_batch(sql).map_err(|e| CairnError::internal(format!("migration {} failed: {e}", version + 1)))?;
        version += 1;
        tx.pragma_update(None, "user_version", version)?;
        tracing::info!(version, "applied schema migration");
    }
    tx.commit()?;
    Ok(())
}

/// The schema version a database records.
pub fn user_version(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row("PRAGMA user_version", [], |r| r.get(0))?)
}

/// A database newer than `latest` is refused, and left as it is.
pub fn check_not_newer(version: i64, latest: i64) -> Result<()> {
    if version > latest {
        return Err(CairnError::new(
            ErrorCode::SchemaTooNew,
            format!("the database has schema version {version}; this cairn knows up to {latest}"),
        )
        .with_hint("upgrade cairn; nothing was changed"));
    }
    Ok(())
}

//! Retention: whole sessions removed from the archive when older than a cutoff
//! (`[history] keep_days`, `cairn history prune --older-than DAYS`) or, oldest first, while the
//! archive is over its cap (`[history] max_bytes`). A session goes whole (its messages, parts and
//! index rows) and is remembered as forgotten, so a later scan of a host file that still holds
//! it does not bring it back. Sessions are removed [`PRUNE_BATCH`] at a time, one transaction
//! each: a prune stopped half-way leaves whole sessions and a consistent index.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::store::HistoryDb;
use cairn_base::clock::format_ts;
use cairn_base::error::{CairnError, ErrorCode, Result};

/// Sessions per transaction.
pub const PRUNE_BATCH: usize = 50;
/// The longest retention a day count may ask for (a century).
pub const MAX_KEEP_DAYS: u64 = 36_500;

/// What to prune. Both limits may be given; a session past either goes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PruneRequest {
    /// Sessions last updated more than this many days ago.
    pub older_than_days: Option<u64>,
    /// The archive's live bytes (`history.db` and `history-fts.db`, free pages not counted)
    /// to get under, oldest sessions first.
    pub max_bytes: Option<u64>,
    /// Count what would go; remove nothing.
    pub dry_run: bool,
}

/// What a prune removed (or, dry, would remove).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PruneReport {
    pub dry_run: bool,
    /// Sessions last updated before this went (with `older_than_days`).
    pub cutoff: Option<String>,
    pub sessions: u64,
    pub messages: u64,
    pub parts: u64,
    /// Text, tool input and output of the parts removed, in bytes: what new sessions can
    /// reuse in the files (`cairn gc` gives it back to the file system).
    pub bytes: u64,
    /// Live bytes of the archive before and after (after: estimated on a dry run).
    pub archive_bytes_before: u64,
    pub archive_bytes_after: u64,
    /// Transactions committed.
    pub batches: u64,
}

/// A session chosen, and what it holds.
#[derive(Debug, Clone)]
struct Candidate {
    id: String,
    messages: u64,
    parts: u64,
    bytes: u64,
}

/// The request checked: a day count of 0 or past [`MAX_KEEP_DAYS`] is refused.
pub fn check(request: &PruneRequest) -> Result<()> {
    match request.older_than_days {
        Some(days) if days == 0 || days > MAX_KEEP_DAYS => Err(CairnError::new(
            ErrorCode::InvalidArgument,
            format!("older_than_days must be between 1 and {MAX_KEEP_DAYS} (got {days})"),
        )
        .with_hint("e.g. --older-than 90 removes the sessions not updated for 90 days")),
        _ if request.older_than_days.is_none() && request.max_bytes.is_none() => {
            Err(CairnError::new(ErrorCode::InvalidArgument, "nothing to prune by: no day count and no size cap")
                .with_hint("pass --older-than DAYS, or set [history] keep_days or max_bytes in config.toml"))
        }
        _ => Ok(()),
    }
}

/// Prune as `request` says, at `now`. `after_batch` runs after each committed batch with the
/// sessions removed so far; `false` stops there (a shutdown; the tests' interruption).
pub fn prune(
    db: &mut HistoryDb,
    request: &PruneRequest,
    now: OffsetDateTime,
    after_batch: &mut dyn FnMut(u64) -> bool,
) -> Result<PruneReport> {
    check(request)?;
    let cutoff = request.older_than_days.map(|days| format_ts(now - time::Duration::days(days as i64)));
    let before = archive_live_bytes(db)?;
    let chosen = candidates(db, cutoff.as_deref(), request.max_bytes, before)?;
    let mut report =
        PruneReport { dry_run: request.dry_run, cutoff, archive_bytes_before: before, ..PruneReport::default() };
    if request.dry_run {
        for c in &chosen {
            add(&mut report, c);
        }
        report.archive_bytes_after = before.saturating_sub(report.bytes);
        return Ok(report);
    }
    for batch in chosen.chunks(PRUNE_BATCH) {
        let ids: Vec<&str> = batch.iter().map(|c| c.id.as_str()).collect();
        db.forget_sessions(&ids)?;
        for c in batch {
            add(&mut report, c);
        }
        report.batches += 1;
        if !after_batch(report.sessions) {
            break;
        }
    }
    report.archive_bytes_after = archive_live_bytes(db)?;
    Ok(report)
}

/// [`prune`] now, to the end.
pub fn prune_now(db: &mut HistoryDb, request: &PruneRequest) -> Result<PruneReport> {
    prune(db, request, OffsetDateTime::now_utc(), &mut |_| true)
}

fn add(report: &mut PruneReport, c: &Candidate) {
    report.sessions += 1;
    report.messages += c.messages;
    report.parts += c.parts;
    report.bytes += c.bytes;
}

/// Sessions older than `cutoff`, then (oldest first) as many more as bring the archive under
/// `max_bytes`.
fn candidates(db: &HistoryDb, cutoff: Option<&str>, max_bytes: Option<u64>, live: u64) -> Result<Vec<Candidate>> {
    let mut stmt = db.conn().prepare(
        "SELECT s.id, s.updated_at,
            (SELECT count(*) FROM history_messages m WHERE m.session_id = s.id),
            (SELECT count(*) FROM history_parts p WHERE p.session_id = s.id),
            (SELECT COALESCE(sum(COALESCE(length(CAST(p.text AS BLOB)), 0) + COALESCE(length(CAST(p.input AS BLOB)), 0)
                                 + COALESCE(length(CAST(p.output AS BLOB)), 0)), 0)
             FROM history_parts p WHERE p.session_id = s.id)
         FROM history_sessions s ORDER BY s.updated_at, s.id",
    )?;
    let mut rows = stmt.query([])?;
    let mut chosen = Vec::new();
    let mut over = max_bytes.map_or(0, |cap| live.saturating_sub(cap));
    while let Some(row) = rows.next()? {
        let updated_at: String = row.get(1)?;
        let old = cutoff.is_some_and(|cutoff| updated_at.as_str() < cutoff);
        if !old && over == 0 {
            break;
        }
        let count = |i| row.get::<_, i64>(i).map(|n| u64::try_from(n).unwrap_or(0));
        let candidate = Candidate { id: row.get(0)?, messages: count(2)?, parts: count(3)?, bytes: count(4)? };
        over = over.saturating_sub(candidate.bytes.max(1));
        chosen.push(candidate);
    }
    Ok(chosen)
}

/// Pages in use of `history.db` and its index, in bytes (free pages are reused by the next
/// ingest, so they do not count against a cap).
pub fn archive_live_bytes(db: &HistoryDb) -> Result<u64> {
    let used = |conn: &rusqlite::Connection| -> Result<u64> {
        let (count, free, size): (i64, i64, i64) = conn.query_row(
            "SELECT (SELECT page_count FROM pragma_page_count()), (SELECT freelist_count FROM pragma_freelist_count()),
                    (SELECT page_size FROM pragma_page_size())",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )?;
        Ok(u64::try_from((count - free) * size).unwrap_or(0))
    };
    Ok(used(db.conn())? + used(db.fts())?)
}

#[cfg(test)]
#[path = "prune_tests.rs"]
mod tests;

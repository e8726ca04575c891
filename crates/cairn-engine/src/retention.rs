//! The `cairn-retention` worker: `[history] keep_days` and `max_bytes` applied by the daemon
//! itself, through the same rule as `cairn history prune` (`cairn_core::history::prune`).
//!
//! It prunes once at start, on its own thread (the daemon answers while it runs), then once
//! a day. Each pass opens the archive on a connection of its own and closes it after, so a
//! day of idling holds no file. The prune removes whole sessions a batch per transaction and
//! looks at the stop flag between batches: a daemon stopping mid-prune leaves whole sessions.

use std::path::Path;
use std::time::{Duration, Instant};

use cairn_core::history::HistoryDb;
use cairn_core::history::prune::{PruneReport, PruneRequest, prune};
use cairn_core::settings::HistorySettings;

use crate::history::{history_db_path, sleep_unless_stopped};
use crate::workers::{Alive, Workers};

/// The worker's name in `/health`.
pub const RETENTION_WORKER: &str = "cairn-retention";

/// Time between two passes after the one at start.
pub const RETENTION_EVERY: Duration = Duration::from_secs(24 * 60 * 60);

/// What the worker keeps the archive to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// Sessions not updated for this many days go.
    pub keep_days: Option<u64>,
    /// The archive's live bytes to stay under, oldest sessions going first.
    pub max_bytes: Option<u64>,
    /// Time between two passes.
    pub every: Duration,
}

impl Retention {
    /// The daemon's, from `[history]`; `None` when neither key is set (the default: keep all).
    pub fn from_settings(history: &HistorySettings) -> Option<Retention> {
        let keep_days = (history.keep_days > 0).then_some(history.keep_days);
        let max_bytes = (history.max_bytes > 0).then_some(history.max_bytes);
        (keep_days.is_some() || max_bytes.is_some()).then_some(Retention {
            keep_days,
            max_bytes,
            every: RETENTION_EVERY,
        })
    }

    fn request(&self) -> PruneRequest {
        PruneRequest { older_than_days: self.keep_days, max_bytes: self.max_bytes, dry_run: false }
    }
}

/// Start the worker over the archive beside `store_path`.
pub fn start(workers: &Workers, store_path: &Path, retention: Retention) -> bool {
    let db_path = history_db_path(store_path);
    let alive = workers.alive();
    workers.spawn_loop(RETENTION_WORKER, move || run(&db_path, &retention, &alive))
}

fn run(db_path: &Path, retention: &Retention, alive: &Alive) {
    crate::workers::run_in_background();
    loop {
        prune_once(db_path, retention, alive);
        if !sleep_unless_stopped(retention.every, alive) {
            return;
        }
    }
}

/// One pass; a failure is logged and the next pass tries again.
fn prune_once(db_path: &Path, retention: &Retention, alive: &Alive) {
    let started = Instant::now();
    let pass = HistoryDb::open(db_path)
        .and_then(|mut db| prune(&mut db, &retention.request(), time::OffsetDateTime::now_utc(), &mut |_| alive.get()));
    match pass {
        Ok(report) => log_report(&report, started.elapsed()),
        Err(e) => tracing::warn!(error = %e, "history retention failed; trying again at the next pass"),
    }
}

/// What a pass freed: one info line when it removed something.
fn log_report(report: &PruneReport, elapsed: Duration) {
    if report.sessions == 0 {
        tracing::debug!(archive_bytes = report.archive_bytes_before, elapsed = ?elapsed, "history retention: nothing to prune");
        return;
    }
    tracing::info!(
        sessions = report.sessions,
        messages = report.messages,
        parts = report.parts,
        text_bytes = report.bytes,
        archive_bytes_before = report.archive_bytes_before,
        archive_bytes_after = report.archive_bytes_after,
        cutoff = report.cutoff.as_deref().unwrap_or("-"),
        elapsed = ?elapsed,
        "history retention: pruned"
    );
}

#[cfg(test)]
#[path = "retention_tests.rs"]
mod tests;

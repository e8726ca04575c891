//! The `cairn-history` worker: keeps `history.db` in step with the hosts' own storage (Claude
//! Code's transcripts, OpenCode's databases) without anyone asking.
//!
//! At start it backfills everything the hosts still have (the first run of a daemon reads
//! every transcript; later runs only what grew, since each source's cursor is stored), then it
//! scans again every `scan_interval_secs`. Pokes (hooks, the plugin, `history_ingest`) make new
//! turns visible sooner; the scan is the catch-up for whatever no poke announced.
//!
//! It writes `history.db` on its own connection: that file is not the memory store, so a
//! gigabyte backfill never queues behind (nor holds up) the memory writer. Pokes running on
//! other connections at the same moment are safe: each chunk is a compare-and-swap on the
//! source's cursor.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_core::history::ingest::{self, ScanReport};
use cairn_core::history::{HISTORY_DB_FILE, HistoryDb};

use crate::workers::{Alive, Workers};

/// The worker's name in `/health`.
pub const HISTORY_WORKER: &str = "cairn-history";

/// How long a sleep between two scans lasts before the stop flag is looked at again.
const STOP_CHECK_EVERY: Duration = Duration::from_millis(100);

/// Where the hosts' storage is found: the process environment in the daemon (`HOME`,
/// `XDG_DATA_HOME`, `OPENCODE_DB`, `CLAUDE_CONFIG_DIR`, …), a map in tests.
pub type HostEnv = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// How the worker scans.
#[derive(Clone)]
pub struct HistoryScan {
    /// Time between two scans after the backfill; `None`: the backfill only.
    pub every: Option<Duration>,
    pub env: HostEnv,
}

impl std::fmt::Debug for HistoryScan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HistoryScan").field("every", &self.every).finish_non_exhaustive()
    }
}

impl HistoryScan {
    /// The daemon's: `[history] scan_interval_secs` (0: backfill only) over the process
    /// environment.
    pub fn from_settings(history: &cairn_core::settings::HistorySettings) -> HistoryScan {
        let secs = history.scan_interval_secs;
        HistoryScan { every: (secs > 0).then(|| Duration::from_secs(secs)), env: Arc::new(ingest::process_env) }
    }
}

/// `history.db` beside the memory store's file (where the core's `HistoryArchive` opens it too).
pub fn history_db_path(store_path: &Path) -> PathBuf {
    store_path.parent().unwrap_or_else(|| Path::new(".")).join(HISTORY_DB_FILE)
}

/// Start the worker. A loop when it scans periodically, else one-off work that is `done`
/// after the backfill.
pub fn start(workers: &Workers, store_path: &Path, scan: HistoryScan) -> bool {
    let db_path = history_db_path(store_path);
    let alive = workers.alive();
    let periodic = scan.every.is_some();
    let body = move || run(&db_path, &scan, &alive);
    if periodic { workers.spawn_loop(HISTORY_WORKER, body) } else { workers.spawn_task(HISTORY_WORKER, body) }
}

/// Backfill, then scan every `scan.every` until the engine stops. A scan that fails (the
/// archive unwritable, say) is logged and tried again at the next turn. A backfill reads and
/// indexes every transcript: it runs at the lowest priority that still progresses, so saves,
/// searches and the agents' own work barely wait behind it (pokes, which make a turn visible at once, run
/// on the callers' threads at normal priority).
fn run(db_path: &Path, scan: &HistoryScan, alive: &Alive) {
    crate::workers::run_in_background();
    let Some(mut db) = open_until_stopped(db_path, alive) else { return };
    scan_once(&mut db, scan, alive, "backfill");
    let Some(every) = scan.every else { return };
    while sleep_unless_stopped(every, alive) {
        scan_once(&mut db, scan, alive, "scan");
    }
}

/// The archive, opened as soon as it can be: an open that fails (the file busy while another
/// worker opens or closes it at the daemon's start, a data dir not writable yet) is tried again
/// after a pause that doubles up to [`OPEN_RETRY_CAP`], so one bad moment never ends the
/// backfill for the daemon's life. `None` once the engine stops.
fn open_until_stopped(db_path: &Path, alive: &Alive) -> Option<HistoryDb> {
    let mut pause = OPEN_RETRY_FIRST;
    loop {
        match HistoryDb::open(db_path) {
            Ok(db) => return Some(db),
            Err(e) => tracing::warn!(error = %e, retry_in = ?pause, "cannot open the history archive yet"),
        }
        if !sleep_unless_stopped(pause, alive) {
            return None;
        }
        pause = (pause * 2).min(OPEN_RETRY_CAP);
    }
}

const OPEN_RETRY_FIRST: Duration = Duration::from_millis(200);
const OPEN_RETRY_CAP: Duration = Duration::from_secs(60);

fn scan_once(db: &mut HistoryDb, scan: &HistoryScan, alive: &Alive, kind: &str) {
    let started = Instant::now();
    let stop = || !alive.get();
    match ingest::scan_until(db, &*scan.env, &mut |_| {}, &stop) {
        Ok(report) => log_report(kind, &report, started.elapsed()),
        Err(e) => tracing::warn!(error = %e, kind, "history scan failed; retrying at the next scan"),
    }
}

/// One line per scan that found something (an idle periodic scan says nothing).
fn log_report(kind: &str, report: &ScanReport, elapsed: Duration) {
    let skipped: u64 = report.skipped.values().sum();
    if report.messages == 0 && report.parts == 0 && report.sessions == 0 && report.errors.is_empty() {
        tracing::debug!(kind, sources = report.sources, elapsed = ?elapsed, "history scan: nothing new");
        return;
    }
    tracing::info!(
        kind,
        sources = report.sources,
        sessions = report.sessions,
        messages = report.messages,
        parts = report.parts,
        bytes = report.bytes,
        skipped,
        errors = report.errors.len(),
        elapsed = ?elapsed,
        "history scan"
    );
}

/// Sleep `total` in short steps; `false` as soon as the engine stops.
pub(crate) fn sleep_unless_stopped(total: Duration, alive: &Alive) -> bool {
    let deadline = Instant::now() + total;
    while alive.get() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(STOP_CHECK_EVERY));
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Engine;
    use cairn_core::ops::Op;

    const SESSION: &str = "3f0c2a4e-9b1d-4c55-8a77-0d2e6f1b9c01";
    const SUBAGENT: &str = "agent-a249ec580bfee3679";

    /// The recorded Claude Code project directory (a real CLI's transcripts).
    fn fixture_project() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cairn-history/tests/fixtures/history/claude/-nonexistent-sandbox-cc-history-project")
    }

    /// A temp HOME whose `~/.claude/projects` holds the fixture's main transcript; the host
    /// environment the worker sees is only that HOME.
    fn home_with_transcript() -> (tempfile::TempDir, PathBuf, HostEnv) {
        let home = tempfile::tempdir().unwrap();
        let project = home.path().join(".claude/projects/-nonexistent-sandbox-cc-history-project");
        std::fs::create_dir_all(&project).unwrap();
        let name = format!("{SESSION}.jsonl");
        std::fs::copy(fixture_project().join(&name), project.join(&name)).unwrap();
        let home_dir = home.path().display().to_string();
        let env: HostEnv = Arc::new(move |name| (name == "HOME").then(|| home_dir.clone()));
        (home, project, env)
    }

    fn sessions(engine: &Engine) -> String {
        let op =
            Op::from_value(serde_json::json!({"op": "history_sessions", "args": {"include_children": true}})).unwrap();
        engine.execute_blocking(op).unwrap().into_value().unwrap().to_string()
    }

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn state_of(engine: &Engine) -> Option<&'static str> {
        engine.workers().into_iter().find(|w| w.name == HISTORY_WORKER).map(|w| w.state)
    }

    #[test]
    fn the_daemon_backfills_a_transcript_unasked_then_picks_up_new_ones() {
        let (_home, project, env) = home_with_transcript();
        let data = tempfile::tempdir().unwrap();
        let engine = Engine::open(&data.path().join("cairn.db")).unwrap();
        assert!(engine.start_history(HistoryScan { every: Some(Duration::from_millis(50)), env }));
        wait_for("the backfill", || sessions(&engine).contains(SESSION));
        assert_eq!(state_of(&engine), Some("running"));
        assert!(data.path().join(HISTORY_DB_FILE).is_file(), "history.db sits beside the store");

        // A sub-agent's transcript written later: the periodic scan finds it, no poke needed.
        let subagents = project.join(SESSION).join("subagents");
        std::fs::create_dir_all(&subagents).unwrap();
        let name = format!("{SUBAGENT}.jsonl");
        std::fs::copy(fixture_project().join(SESSION).join("subagents").join(&name), subagents.join(&name)).unwrap();
        wait_for("the periodic scan", || sessions(&engine).contains(SUBAGENT));
        engine.stop(Duration::from_secs(10));
    }

    #[test]
    fn without_an_interval_the_backfill_runs_once_and_is_done() {
        let (_home, _project, env) = home_with_transcript();
        let data = tempfile::tempdir().unwrap();
        let engine = Engine::open(&data.path().join("cairn.db")).unwrap();
        assert!(engine.start_history(HistoryScan { every: None, env }));
        wait_for("the backfill to end", || state_of(&engine) == Some("done"));
        assert!(sessions(&engine).contains(SESSION));
        assert!(!engine.degraded());
    }

    #[test]
    fn an_in_memory_engine_has_no_history_worker() {
        let engine = Engine::in_memory().unwrap();
        let scan = HistoryScan { every: None, env: Arc::new(|_| None) };
        assert!(!engine.start_history(scan));
        assert_eq!(state_of(&engine), None);
    }

    #[test]
    fn a_sleep_ends_at_the_stop() {
        let workers = Workers::new();
        let alive = workers.alive();
        workers.stop(Duration::ZERO);
        assert!(!sleep_unless_stopped(Duration::from_secs(3600), &alive));
    }
}

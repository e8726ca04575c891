//! The engine: the daemon's hold on the store, and the threads that keep it fast.
//!
//! - Writes go to one writer thread that owns the writer connection. It takes every write
//!   queued at that moment and runs them as one transaction (no savepoints: FTS5 would write
//!   a segment at each), then commits once and only then answers them all (group commit:
//!   under load, one WAL append and one FTS segment for many saves, instead of one each; a
//!   write that fails still fails alone, see `Store::batch`). Agents never race each other
//!   for SQLite's lock.
//! - Reads use a small pool of reader connections (WAL lets them run beside the writer).
//! - A background thread copies the WAL into the database; the writer copies the last few
//!   frames itself every 200 ms, so the WAL restarts from its beginning.
//! - A shared in-memory search index is built in the background at open.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use cairn_core::ops::{self, EventOutcome, ImportRequest, Op, OpOutput, Request, SyncImportRequest};
use cairn_core::ops::{DrainTarget, drain};
use cairn_core::search::index::SharedIndex;
use cairn_core::search::semantic::{PendingText, Semantic};
use cairn_core::settings::RuleSettings;
use cairn_core::spool::{DrainReport, EventId, Spool, SpoolCounts};
use cairn_core::sync::git::{ImportBatch, ImportSummary, ImportTarget, import_repository};
use cairn_core::sync::remote::RoundReport;
use cairn_core::{CairnError, Core, ErrorCode, Result, Store};
use tokio::sync::oneshot;

use crate::embed_lanes::{Claim, FRESH_BATCH, FreshBudget, Lanes};
use crate::history::HistoryScan;
use crate::workers::{Alive, WorkerState, Workers};

/// Readers kept open: enough for 2 cores plus a request waiting on I/O.
const MAX_IDLE_READERS: usize = 4;
/// Most writes committed together.
const MAX_BATCH: usize = 64;
/// Bytes of WAL kept after a checkpoint resets it; above this, the checkpointer truncates it.
const WAL_SIZE_LIMIT: u64 = 64 * 1024 * 1024;
/// How often the WAL is checkpointed in the background.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);
/// How often the writer finishes a checkpoint itself, so the WAL can start over.
const WAL_RESTART_EVERY: Duration = Duration::from_millis(200);
/// Memories embedded per batch by the background indexer (about half a second of CPU).
const EMBED_BATCH: usize = 16;
/// How often the indexer looks for memories written by other processes.
const EMBED_POLL: Duration = if cfg!(test) { Duration::from_millis(100) } else { Duration::from_secs(5) };
/// Most changes the backfill reads to leave to the fresh lane (those after its mark: a few,
/// unless an import just landed, and then these are the newest).
const UNSEEN_MOST: usize = 4096;

type Reply = oneshot::Sender<Result<EventOutcome>>;

/// Wakes the index follower after a commit (capacity 1: one pending wake-up is enough).
type Wake = mpsc::SyncSender<()>;

enum Job {
    /// Boxed: an `Op` is large, and a queue of jobs should not be. With an event id, the op
    /// runs at most once per id: the id is recorded in the op's transaction.
    Op(Box<Op>, Option<EventId>, Reply),
    /// Work on the writer connection that is not an operation (health probes).
    Call(Box<dyn FnOnce(&mut Core) + Send>),
}

/// Shared access to one store.
pub struct Engine {
    /// The writer's queue; `None` once the engine stopped (the writer then drains what was
    /// queued and ends).
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    readers: Mutex<Vec<Core>>,
    /// `None` for an in-memory store (tests), where everything goes through the writer.
    path: Option<PathBuf>,
    /// When the store was opened, and milliseconds after that of the last operation: an
    /// auto-started daemon leaves when nobody has used it for a while.
    opened: Instant,
    last_used_ms: AtomicU64,
    /// In-memory search index shared by every connection (built in the background at open).
    index: Arc<SharedIndex>,
    /// The embedding model and vectors, when semantic search is on. Replaced whole when the
    /// daemon takes up another model ([`Engine::use_semantic`]).
    semantic: RwLock<Option<Arc<Semantic>>>,
    /// Wake the two embedding lanes after a commit (the backfill, the fresh lane: see
    /// `embed_lanes`); shared, so the lanes of a model taken up later receive them too.
    embed_woken: Arc<Mutex<mpsc::Receiver<()>>>,
    fresh_woken: Arc<Mutex<mpsc::Receiver<()>>>,
    /// The background threads: writer, checkpointer, index follower and builder, embedder.
    pub(crate) workers: Workers,
    /// The data dir's spool, once the daemon drains it ([`Engine::start_spool`]); one drain
    /// at a time.
    spool: std::sync::OnceLock<Spool>,
    draining: Mutex<()>,
    /// The settings the rules read, given to every store the engine opens for ops.
    rules: Arc<RuleSettings>,
    /// Sync with a hub ([`Engine::start_autosync`]): its live state, and the writer's
    /// wake-ups it takes when it starts.
    autosync: Arc<crate::autosync::Autosync>,
    sync_woken: Mutex<Option<mpsc::Receiver<()>>>,
    /// The judge's wake-ups after a commit, taken when it starts ([`Engine::start_judging`]).
    pub(crate) judge_woken: Mutex<Option<mpsc::Receiver<()>>>,
    /// Keeps judging passes from overlapping.
    pub(crate) judging: crate::judging::JudgingLock,
    /// The model memories are extracted with, and the lock that keeps passes apart.
    pub(crate) extraction: crate::extraction::Extraction,
    /// Deep recall's default, its time budget and the model call in flight.
    pub(crate) deep: crate::deep::Deep,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Without waiting: a dropped engine's threads end by themselves.
        self.close_queue();
        self.workers.stop(Duration::ZERO);
    }
}

impl Engine {
    /// Open the database file (migrating it once) for the daemon, start the writer and the
    /// checkpointer, and start building the search index; until it is ready, searches use
    /// FTS5.
    pub fn open(path: &Path) -> Result<Arc<Engine>> {
        Engine::open_with(path, None, Arc::default())
    }

    /// Open with semantic search (vectors are loaded and missing ones computed in the
    /// background, newest memories first, so a save never waits for its embedding) and the
    /// settings its ops run under.
    pub fn open_with(path: &Path, semantic: Option<Arc<Semantic>>, rules: Arc<RuleSettings>) -> Result<Arc<Engine>> {
        Engine::open_tuned(path, semantic, rules, WAL_SIZE_LIMIT)
    }

    fn open_tuned(
        path: &Path,
        semantic: Option<Arc<Semantic>>,
        rules: Arc<RuleSettings>,
        wal_limit: u64,
    ) -> Result<Arc<Engine>> {
        let writer = Store::open(path)?;
        let index = Arc::new(SharedIndex::default());
        let workers = Workers::new();
        // Checkpoints run on a background thread, and the writer finishes one between groups
        // now and then; a request never waits for SQLite's inline auto-checkpoint (at
        // thousands of saves a second, it was the p99).
        // Its turns also measure where the bytes are, so no request walks every page of a
        // large file (4 to 6 s at 1M memories) while an agent waits.
        writer.leave_disk_walks_to_background();
        start_checkpointer(&workers, path, wal_limit);
        writer.conn_pragma("wal_autocheckpoint", 0)?;
        // When this writer restarts the WAL from its start, it cuts the file back to this.
        // (Its page cache stays SQLite's default 2 MB: at every commit SQLite scans the whole
        // page-cache hash table, and a 16 MB cache cost 5 % more CPU per save than it saved.)
        writer.conn_pragma("journal_size_limit", i64::try_from(wal_limit).unwrap_or(i64::MAX))?;
        build_index_in_background(&workers, path, Arc::clone(&index));
        let mut wakes: Vec<Wake> = start_follower(&workers, path, Arc::clone(&index)).into_iter().collect();
        // Always woken, even without a model: one may be taken up later.
        let (embed_wake, embed_woken) = mpsc::sync_channel::<()>(1);
        wakes.push(embed_wake);
        let (fresh_wake, fresh_woken) = mpsc::sync_channel::<()>(1);
        wakes.push(fresh_wake);
        let (sync_wake, sync_woken) = mpsc::sync_channel::<()>(1);
        wakes.push(sync_wake);
        let (judge_wake, judge_woken) = mpsc::sync_channel::<()>(1);
        wakes.push(judge_wake);
        let writer = Core::new(writer)
            .with_settings(Arc::clone(&rules))
            .with_index(Arc::clone(&index))
            .with_semantic(semantic.clone());
        let mut engine = Engine::new(writer, Some(path.to_owned()), index, workers, wakes, Some(WAL_RESTART_EVERY))?;
        engine.semantic = RwLock::new(semantic.clone());
        engine.rules = rules;
        engine.embed_woken = Arc::new(Mutex::new(embed_woken));
        engine.fresh_woken = Arc::new(Mutex::new(fresh_woken));
        engine.sync_woken = Mutex::new(Some(sync_woken));
        engine.judge_woken = Mutex::new(Some(judge_woken));
        let engine = Arc::new(engine);
        if let Some(semantic) = semantic {
            start_embedding(&engine, path, semantic);
        }
        Ok(engine)
    }

    /// A private in-memory store (tests).
    pub fn in_memory() -> Result<Arc<Engine>> {
        let index = Arc::new(SharedIndex::default());
        Ok(Arc::new(Engine::new(Core::new(Store::open_in_memory()?), None, index, Workers::new(), Vec::new(), None)?))
    }

    fn new(
        writer: Core,
        path: Option<PathBuf>,
        index: Arc<SharedIndex>,
        workers: Workers,
        wakes: Vec<Wake>,
        restart_wal_every: Option<Duration>,
    ) -> Result<Engine> {
        let (jobs, inbox) = mpsc::channel();
        let writing =
            workers.spawn_loop("cairn-writer", move || writer_loop(writer, &inbox, &wakes, restart_wal_every));
        if !writing {
            return Err(CairnError::internal("cannot start the writer thread"));
        }
        Ok(Engine {
            jobs: Mutex::new(Some(jobs)),
            readers: Mutex::new(Vec::new()),
            path,
            opened: Instant::now(),
            last_used_ms: AtomicU64::new(0),
            index,
            semantic: RwLock::new(None),
            embed_woken: Arc::new(Mutex::new(mpsc::sync_channel(1).1)),
            fresh_woken: Arc::new(Mutex::new(mpsc::sync_channel(1).1)),
            workers,
            spool: std::sync::OnceLock::new(),
            draining: Mutex::new(()),
            rules: Arc::default(),
            autosync: Arc::default(),
            sync_woken: Mutex::new(None),
            judge_woken: Mutex::new(None),
            judging: Mutex::new(()),
            extraction: crate::extraction::Extraction::default(),
            deep: crate::deep::Deep::default(),
        })
    }

    /// Stop gracefully: refuse new work, let the writer commit what was queued, stop every
    /// worker (waiting up to `wait`), then fold the WAL into the database so the next start
    /// (or a copy of the file) finds everything in one place.
    pub fn stop(&self, wait: Duration) {
        self.close_queue();
        let left = self.workers.stop(wait);
        if !left.is_empty() {
            tracing::warn!(workers = ?left, "background work still running at stop; it ends with the process");
        }
        self.readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        if let Some(path) = &self.path
            && !left.contains(&"cairn-writer")
            && let Err(e) = Store::open(path).and_then(|s| s.checkpoint_truncate_nowait().map(|_| ()))
        {
            tracing::debug!(error = %e, "final checkpoint skipped");
        }
    }

    /// Start the `cairn-history` worker: a backfill of the hosts' transcripts into
    /// `history.db`, then a scan every so often. The daemon starts it; other in-process engines
    /// (tests, a `cairn mcp` without a daemon) do not, so they never read the hosts' storage
    /// unasked. `false` for an in-memory store (no `history.db` file) or when the thread could
    /// not start.
    pub fn start_history(&self, scan: HistoryScan) -> bool {
        self.path.as_deref().is_some_and(|path| crate::history::start(&self.workers, path, scan))
    }

    /// Start the `cairn-retention` worker: `[history] keep_days` / `max_bytes` applied to
    /// `history.db` at start and then every `retention.every`. `false` for an in-memory store.
    pub fn start_retention(&self, retention: crate::retention::Retention) -> bool {
        self.path.as_deref().is_some_and(|path| crate::retention::start(&self.workers, path, retention))
    }

    fn close_queue(&self) {
        self.jobs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    }

    /// Every background worker and whether it runs.
    pub fn workers(&self) -> Vec<WorkerState> {
        self.workers.states()
    }

    /// A worker loop ended by itself (the daemon is degraded: say so in `/health`).
    pub fn degraded(&self) -> bool {
        self.workers.any_dead()
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// `ready`, or `building` while the search index is built or rebuilt (searches are then
    /// answered by FTS5: correct, slower).
    pub fn index_state(&self) -> &'static str {
        if self.index.is_current() { "ready" } else { "building" }
    }

    /// The semantic search in use, if any.
    pub fn semantic(&self) -> Option<Arc<Semantic>> {
        self.semantic.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Take up another model without a restart (one just installed, or chosen with `cairn
    /// model use`): the writer and every reader search with it from now on, and a new
    /// background embedder loads its stored vectors and embeds the memories it has none for,
    /// newest first. The previous embedder stops after its batch, and a batch it embedded
    /// after the switch is not stored (the writer checks, in turn with the switch).
    pub fn use_semantic(self: &Arc<Self>, semantic: Arc<Semantic>) -> Result<()> {
        let Some(path) = self.path.clone() else {
            return Err(CairnError::internal("an in-memory store takes no model"));
        };
        let attached = Arc::clone(&semantic);
        self.with_writer(move |core| {
            core.semantic = Some(attached);
            Ok(())
        })?;
        *self.semantic.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Arc::clone(&semantic));
        self.readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        tracing::info!(model = semantic.model_id(), "semantic search: model taken up");
        start_embedding(self, &path, semantic);
        Ok(())
    }

    /// Whether `semantic` is still the one in use (an embedder of a replaced model stops).
    fn uses(&self, semantic: &Arc<Semantic>) -> bool {
        self.semantic
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, semantic))
    }

    /// Time since the last operation.
    pub fn idle_for(&self) -> Duration {
        let now = self.opened.elapsed();
        now.saturating_sub(Duration::from_millis(self.last_used_ms.load(Ordering::Relaxed)))
    }

    pub(crate) fn touch(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_used_ms.store(ms, Ordering::Relaxed);
    }

    /// Run an operation: writes on the writer thread, reads on a pooled reader.
    pub async fn execute(self: &Arc<Self>, op: Op) -> Result<OpOutput> {
        applied(self.execute_event(op, None).await?)
    }

    /// Run a request; its answer, of the type the request names.
    pub async fn call<R: Request>(self: &Arc<Self>, request: R) -> Result<R::Output> {
        R::output(self.execute(request.into_op()).await?)
    }

    /// [`Engine::call`] on the calling thread (not from async code: it blocks).
    pub fn call_blocking<R: Request>(&self, request: R) -> Result<R::Output> {
        R::output(self.execute_blocking(request.into_op())?)
    }

    /// Run an operation at most once per event id (a host's retry, a spooled event met
    /// again): a write whose id was applied before is an [`EventOutcome::Duplicate`]. A read
    /// just runs.
    pub async fn execute_event(self: &Arc<Self>, op: Op, event: Option<EventId>) -> Result<EventOutcome> {
        self.touch();
        if let Op::SyncImport(SyncImportRequest { directory, time_limit_ms }) = &op
            && self.path.is_some()
        {
            let (db, directory, time_limit_ms) = (Arc::clone(self), directory.clone(), *time_limit_ms);
            return tokio::task::spawn_blocking(move || db.sync_import(&directory, time_limit_ms))
                .await
                .map_err(|e| CairnError::internal(format!("worker failed: {e}")))?
                .map(|summary| EventOutcome::Applied(OpOutput::SyncImport(summary)));
        }
        if let Some(query) = self.deep_query(&op) {
            // The model reads on a blocking thread, holding no connection.
            let db = Arc::clone(self);
            return tokio::task::spawn_blocking(move || db.deep_search(&query))
                .await
                .map_err(|e| CairnError::internal(format!("worker failed: {e}")))?
                .map(|found| EventOutcome::Applied(OpOutput::Search(found)));
        }
        if let Op::ScanRelations(req) = &op
            && req.semantic
        {
            // Seconds of model time per pair: on a blocking thread, reads on a reader and each
            // verdict through the writer, never holding it.
            let (db, req) = (Arc::clone(self), req.clone());
            return tokio::task::spawn_blocking(move || db.scan_semantic(&req, &mut |_, _| {}))
                .await
                .map_err(|e| CairnError::internal(format!("worker failed: {e}")))?
                .map(|result| EventOutcome::Applied(OpOutput::ScanRelations(result)));
        }
        if op.writes_memory_store() || self.path.is_none() {
            let bulk = matches!(op, Op::Import(ImportRequest { .. }));
            let event = event.filter(|_| op.writes_memory_store());
            let reply = self.submit(op, event)?;
            let result = reply.await.map_err(|_| writer_gone())?;
            if bulk && let Some(path) = &self.path {
                // Thousands of rows changed: rebuild the index now rather than at a search.
                self.index.refresh_in_background(path);
            }
            return result;
        }
        let db = Arc::clone(self);
        tokio::task::spawn_blocking(move || db.read(op))
            .await
            .map_err(|e| CairnError::internal(format!("worker failed: {e}")))?
            .map(EventOutcome::Applied)
    }

    /// Run an operation on the calling thread (not from async code: it blocks).
    pub fn execute_blocking(&self, op: Op) -> Result<OpOutput> {
        self.touch();
        if let Op::SyncImport(SyncImportRequest { directory, time_limit_ms }) = &op
            && self.path.is_some()
        {
            return self.sync_import(directory, *time_limit_ms).map(OpOutput::SyncImport);
        }
        if let Some(query) = self.deep_query(&op) {
            return self.deep_search(&query).map(OpOutput::Search);
        }
        if let Op::ScanRelations(req) = &op
            && req.semantic
        {
            return self.scan_semantic(req, &mut |_, _| {}).map(OpOutput::ScanRelations);
        }
        if op.writes_memory_store() || self.path.is_none() {
            return applied(self.submit(op, None)?.blocking_recv().map_err(|_| writer_gone())??);
        }
        self.read(op)
    }

    /// Apply events in order through the writer, each with its id (blocking).
    fn apply_events_blocking(&self, events: Vec<(EventId, Op)>) -> Vec<Result<EventOutcome>> {
        self.touch();
        // Queued together, so the writer commits them as one group, in order.
        let replies: Vec<Result<oneshot::Receiver<Result<EventOutcome>>>> =
            events.into_iter().map(|(id, op)| self.submit(op, Some(id))).collect();
        replies.into_iter().map(|reply| reply?.blocking_recv().map_err(|_| writer_gone())?).collect()
    }

    /// Drain the data dir's spool into the store from this thread: at the daemon's start, on a
    /// poke, and every few seconds. Nothing (an empty report) until [`Engine::start_spool`].
    pub fn drain_spool(&self) -> DrainReport {
        let Some(spool) = self.spool.get() else { return DrainReport::default() };
        let _one_at_a_time = self.draining.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        drain(spool, &mut WriterTarget(self))
    }

    /// The spool's state and counters for `/health` (`None` before [`Engine::start_spool`]).
    pub fn spool_health(&self) -> Option<(cairn_core::spool::SpoolStatus, Result<SpoolCounts>)> {
        let spool = self.spool.get()?;
        let counts = self.read_store(cairn_core::Store::spool_counts);
        Some((spool.status(), counts))
    }

    /// Start draining the spool of the store's data dir: now, then every two seconds (a
    /// hook or the plugin also pokes it, `POST /spool/drain`). The daemon starts it; other
    /// in-process engines do not. `false` for an in-memory store.
    pub fn start_spool(self: &Arc<Self>) -> bool {
        let Some(data_dir) = self.path.as_deref().and_then(Path::parent) else { return false };
        if self.spool.set(Spool::in_data_dir(data_dir)).is_err() {
            return true;
        }
        if let Err(e) = self.with_writer(|core| core.store.prune_spool_events()) {
            tracing::warn!(error = %e, "could not forget old spooled event ids");
        }
        let engine = Arc::downgrade(self);
        let alive = self.workers.alive();
        self.workers.spawn_loop("cairn-spool", move || {
            while alive.get() {
                let Some(engine) = engine.upgrade() else { return };
                if engine.spool.get().is_some_and(|s| s.status() != cairn_core::spool::SpoolStatus::default()) {
                    let report = engine.drain_spool();
                    if report != DrainReport::default() {
                        tracing::info!(?report, "drained the spool");
                    }
                }
                drop(engine);
                crate::workers::sleep_while(&alive, SPOOL_POLL);
            }
        })
    }

    /// Sync with the hub set in the data dir's `[sync]` (`cairn remote add`): push after
    /// writes, pull on a timer, under the store's lease (see [`crate::autosync`]). The daemon
    /// starts it; it idles while no hub is set. `false` for an in-memory store or a second call.
    pub fn start_autosync(self: &Arc<Self>) -> bool {
        let Some(data_dir) = self.path.as_deref().and_then(Path::parent) else { return false };
        let Some(woken) = self.sync_woken.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() else {
            return false;
        };
        crate::autosync::start(self, data_dir, woken, Arc::clone(&self.autosync))
    }

    /// One push and pull with the hub now (`cairn remote sync`, `POST /sync/remote`): through
    /// the autosync loop when it runs (so two rounds never overlap), else on this thread.
    pub fn remote_sync_now(&self, timeout: Duration) -> Result<RoundReport> {
        self.touch();
        let started = self.sync_woken.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_none();
        if started && self.path.is_some() {
            let outcome = self.autosync.request_round();
            return outcome.recv_timeout(timeout).map_err(|_| {
                CairnError::new(ErrorCode::OperationInterrupted, "the sync round did not end in time")
                    .with_hint("it goes on in the background: cairn remote status")
            })?;
        }
        let data_dir = self.path.as_deref().and_then(Path::parent);
        let remote = data_dir.map(cairn_core::settings::load_remote).transpose()?.flatten().ok_or_else(|| {
            CairnError::new(ErrorCode::RemoteNotConfigured, "this data dir has no hub to sync with")
                .with_hint("cairn remote add URL --token TOKEN")
        })?;
        crate::autosync::round_now(self, &remote)
    }

    /// Git sync's import: the chunk files are read and checked on this thread, with the
    /// chunks applied already looked up on a reader; only then is each batch applied, in one
    /// turn of the writer. A file that blocks or a large repository never holds the writes
    /// queued behind the import.
    fn sync_import(&self, directory: &Path, time_limit_ms: Option<u64>) -> Result<ImportSummary> {
        import_repository(directory, time_limit_ms.map(Duration::from_millis), &mut WriterImport(self))
    }

    /// Run `f` on a pooled reader (not the writer: it wakes nobody).
    pub(crate) fn read_store<T>(&self, f: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
        if self.path.is_none() {
            return Err(CairnError::internal("no readers for an in-memory store"));
        }
        let reader = self.take_reader()?;
        let result = f(&reader.store);
        self.return_reader(reader);
        result
    }

    /// Run `f` on the writer connection, in turn with the writes (blocking).
    pub fn with_writer<T: Send + 'static>(&self, f: impl FnOnce(&mut Core) -> Result<T> + Send + 'static) -> Result<T> {
        let (tx, rx) = mpsc::channel();
        let call = Box::new(move |core: &mut Core| {
            let _ = tx.send(f(core));
        });
        self.send(Job::Call(call))?;
        rx.recv().map_err(|_| writer_gone())?
    }

    fn submit(&self, op: Op, event: Option<EventId>) -> Result<oneshot::Receiver<Result<EventOutcome>>> {
        let (tx, rx) = oneshot::channel();
        self.send(Job::Op(Box::new(op), event, tx))?;
        Ok(rx)
    }

    fn send(&self, job: Job) -> Result<()> {
        let jobs = self.jobs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        jobs.as_ref().ok_or_else(stopped)?.send(job).map_err(|_| writer_gone())
    }

    fn read(&self, op: Op) -> Result<OpOutput> {
        let mut output = self.read_past_busy(op)?;
        // The sync status carries what the autosync loop is doing now.
        if let OpOutput::SyncStatus(status) = &mut output
            && let Some(remote) = status.remote.as_mut()
        {
            self.autosync.overlay(remote);
        }
        Ok(output)
    }

    /// A read on a pooled reader. In WAL a reader waits for nobody, yet SQLite answers
    /// `SQLITE_BUSY` at once, without its busy handler, in a few moments: a connection opening
    /// while another runs WAL recovery or the last one closing cleans up, or the archive's
    /// first open racing a worker's. A read is safe to repeat, so it is, for a short while,
    /// instead of refusing the caller (CI saw `history_sessions` refused at a daemon's start).
    fn read_past_busy(&self, op: Op) -> Result<OpOutput> {
        let started = Instant::now();
        loop {
            let mut reader = self.take_reader()?;
            let result = ops::execute(&mut reader, op.clone());
            self.return_reader(reader);
            match result {
                Err(e) if e.code == ErrorCode::DatabaseBusy && started.elapsed() < READ_BUSY_PATIENCE => {
                    tracing::debug!(error = %e, op = op.name(), "a read found the database busy; trying again");
                    std::thread::sleep(READ_BUSY_PAUSE);
                }
                other => return other,
            }
        }
    }

    pub(crate) fn take_reader(&self) -> Result<Core> {
        let pooled = self.readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        if let Some(reader) = pooled {
            Ok(reader)
        } else {
            let store = Store::open(self.path.as_deref().expect("readers only for file stores"))?;
            Ok(Core::new(store)
                .with_settings(Arc::clone(&self.rules))
                .with_index(Arc::clone(&self.index))
                .with_semantic(self.semantic()))
        }
    }

    /// Back to the pool, unless the model changed while it was out: a reader taken before
    /// [`Engine::use_semantic`] and given back after its clear of the pool would otherwise stay
    /// pooled with the old model (or none), and every read after it would answer without the
    /// new one. The model is read under the pool's lock, so a switch either clears this reader
    /// or is seen by this check.
    pub(crate) fn return_reader(&self, reader: Core) {
        let mut pool = self.readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let current = self.semantic();
        let same_model = match (&reader.semantic, &current) {
            (Some(held), Some(now)) => Arc::ptr_eq(held, now),
            (None, None) => true,
            _ => false,
        };
        if same_model && pool.len() < MAX_IDLE_READERS {
            pool.push(reader);
        }
    }
}

/// How long a read that found the database busy is tried again ([`Engine::read_past_busy`]).
const READ_BUSY_PATIENCE: Duration = Duration::from_secs(5);
const READ_BUSY_PAUSE: Duration = Duration::from_millis(20);

/// How often the daemon looks at the spool without being poked.
const SPOOL_POLL: Duration = Duration::from_secs(2);

/// The daemon's writer as the spool's drain target.
struct WriterTarget<'a>(&'a Engine);

impl DrainTarget for WriterTarget<'_> {
    fn apply(&mut self, events: Vec<(EventId, Op)>) -> Vec<Result<EventOutcome>> {
        self.0.apply_events_blocking(events)
    }

    fn count(&mut self, counts: SpoolCounts) -> Result<()> {
        self.0.with_writer(move |core| core.store.add_spool_counts(counts))
    }
}

/// The daemon's writer as the target of a git sync import (its files read off the writer).
struct WriterImport<'a>(&'a Engine);

impl ImportTarget for WriterImport<'_> {
    fn applied_chunks(&mut self, source: &str) -> Result<HashSet<String>> {
        let source = source.to_owned();
        self.0.read_store(move |store| store.sync_applied_chunks(&source))
    }

    fn apply_batch(&mut self, batch: ImportBatch) -> Result<ImportSummary> {
        // Guarded as an op is: a bug in one apply must not take the writer down.
        self.0.with_writer(move |core| {
            std::panic::catch_unwind(AssertUnwindSafe(|| core.store.sync_apply_batch(batch))).unwrap_or_else(|_| {
                Err(CairnError::internal("the import panicked; the chunk being applied was not kept"))
            })
        })
    }
}

/// The writer is gone (stopping, or it died): the store cannot take writes, whatever they are
/// (a spool drain waits rather than blame the event).
fn writer_gone() -> CairnError {
    CairnError::new(ErrorCode::DaemonUnavailable, "the writer thread stopped")
        .with_hint("nothing was written; restart the daemon (cairn serve)")
}

fn stopped() -> CairnError {
    CairnError::new(ErrorCode::DaemonUnavailable, "cairn is stopping")
        .with_hint("nothing was written; run it again in a moment")
}

/// Take the first job, then whatever else is already queued, and run them.
fn writer_loop(mut core: Core, inbox: &mpsc::Receiver<Job>, wakes: &[Wake], restart_wal_every: Option<Duration>) {
    let mut last_restart = Instant::now();
    while let Ok(first) = inbox.recv() {
        let mut pending: Vec<(Op, Option<EventId>, Reply)> = Vec::new();
        for job in std::iter::once(first).chain(std::iter::from_fn(|| inbox.try_recv().ok()).take(MAX_BATCH - 1)) {
            match job {
                Job::Op(op, event, reply) => pending.push((*op, event, reply)),
                Job::Call(f) => {
                    // Keep order: queued writes land before the call sees the store.
                    commit_group(&mut core, std::mem::take(&mut pending));
                    f(&mut core);
                }
            }
        }
        commit_group(&mut core, pending);
        for wake in wakes {
            let _ = wake.try_send(());
        }
        if restart_wal_every.is_some_and(|every| last_restart.elapsed() >= every) {
            let_the_wal_restart(&core.store);
            last_restart = Instant::now();
        }
    }
}

/// Copy the rest of the WAL into the database from the writer itself, so its next commit
/// writes the WAL from the start again.
///
/// The background checkpointer alone never gets there under a steady stream of saves: by the
/// time its copy ends, newer commits sit in the WAL, and SQLite starts the WAL over only when
/// every frame was copied. The file then grows without end (until the size limit truncates
/// it), and every commit appends to fresh file pages, which the kernel allocates and the
/// filesystem reserves: a fifth of the writer's CPU per save. Here, between two groups, no
/// commit can interleave, so this copy is complete (and small: the checkpointer copied most
/// of it already) unless a reader still holds an older snapshot. It is also what keeps the
/// WAL bounded if the background checkpointer could not start.
fn let_the_wal_restart(store: &Store) {
    if let Err(e) = store.checkpoint_passive() {
        tracing::debug!(error = %e, "writer checkpoint skipped");
    }
}

/// Keep the search index current with the daemon's own writes, right after they commit and
/// off the request path (searches then rarely find a backlog to apply).
fn start_follower(workers: &Workers, path: &Path, index: Arc<SharedIndex>) -> Option<Wake> {
    let path = path.to_owned();
    let (wake, woken) = mpsc::sync_channel::<()>(1);
    let alive = workers.alive();
    let started = workers.spawn_loop("cairn-index", move || {
        let Ok(store) = Store::open(&path) else { return };
        while woken.recv().is_ok() && alive.get() {
            if let Err(e) = store.follow_index(&index) {
                tracing::warn!(error = %e, "search index follow failed; searches catch up themselves");
            }
        }
    });
    started.then_some(wake)
}

/// Commit a group of writes. A write with an event id always runs inside a transaction (a
/// group of one, then), so its id is recorded with what it did or not at all.
fn commit_group(core: &mut Core, group: Vec<(Op, Option<EventId>, Reply)>) {
    match group.len() {
        0 => {}
        1 if group[0].1.is_none() => {
            let (op, _, reply) = group.into_iter().next().expect("one job");
            let _ = reply.send(run_guarded(core, op));
        }
        _ => {
            let (jobs, replies): (Vec<(Op, Option<EventId>)>, Vec<Reply>) =
                group.into_iter().map(|(op, event, reply)| ((op, event), reply)).unzip();
            match core.batch(jobs, |core, (op, event)| match event {
                Some(event) => run_event_guarded(core, &event, op),
                None => run_guarded(core, op),
            }) {
                Ok(results) => {
                    for (reply, result) in replies.into_iter().zip(results) {
                        let _ = reply.send(result);
                    }
                }
                // Nothing of the group is durable: every caller hears so.
                Err(e) => {
                    for reply in replies {
                        let _ = reply.send(Err(e.clone()));
                    }
                }
            }
        }
    }
}

/// [`run_guarded`] at most once per event id.
fn run_event_guarded(core: &mut Core, event: &EventId, op: Op) -> Result<EventOutcome> {
    std::panic::catch_unwind(AssertUnwindSafe(|| core.run_event(event, op)))
        .unwrap_or_else(|_| Err(CairnError::internal("the operation panicked; nothing it wrote was kept")))
}

/// A bug in one operation must not take the writer (and every later write) down.
fn run_guarded(core: &mut Core, op: Op) -> Result<EventOutcome> {
    std::panic::catch_unwind(AssertUnwindSafe(|| ops::execute(core, op).map(EventOutcome::Applied)))
        .unwrap_or_else(|_| Err(CairnError::internal("the operation panicked; nothing it wrote was kept")))
}

/// The result of a write sent without an event id (which cannot be a duplicate).
fn applied(outcome: EventOutcome) -> Result<OpOutput> {
    match outcome {
        EventOutcome::Applied(output) => Ok(output),
        EventOutcome::Duplicate(id) => {
            Err(CairnError::internal(format!("a write without an event id was a duplicate of {}", id.as_str())))
        }
    }
}

/// Checkpoint the WAL every [`CHECKPOINT_EVERY`] on a connection of its own. Opened on its
/// own thread: startup does not wait for it.
///
/// PASSIVE never blocks readers or the writer, but never makes the file smaller either: the
/// WAL only shrinks when a writer restarts it from its start, which SQLite does only if the
/// whole WAL was copied before that write began and nobody reads from it. Under a steady
/// stream of writes (a bulk import) that moment rarely comes, and after the last write it
/// never does: the file stays at its high-water mark (11.6 GiB for a 2.9 GiB database after
/// loading a million memories). So once the file is larger than `wal_limit`, each turn is a
/// TRUNCATE instead, attempted without waiting: when the writer lock is free and no reader
/// is inside the WAL it copies the rest and empties the file; otherwise it degrades to
/// PASSIVE and the next turn tries again.
fn start_checkpointer(workers: &Workers, path: &Path, wal_limit: u64) {
    let path = path.to_owned();
    let mut wal = path.clone().into_os_string();
    wal.push("-wal");
    let wal = PathBuf::from(wal);
    let alive = workers.alive();
    workers.spawn_loop("cairn-checkpoint", move || {
        let Ok(store) = Store::open(&path) else { return };
        let mut disk_use = crate::disk_use::Refresh::new(&store);
        while alive.get() {
            std::thread::sleep(CHECKPOINT_EVERY);
            disk_use.when_due(&store);
            let oversized = std::fs::metadata(&wal).is_ok_and(|m| m.len() > wal_limit);
            let done =
                if oversized { store.checkpoint_truncate_nowait().map(|_| ()) } else { store.checkpoint_passive() };
            if let Err(e) = done {
                tracing::debug!(error = %e, "checkpoint skipped");
            }
        }
    });
}

/// The background indexer, in two lanes (`embed_lanes`): the backfill loads the stored
/// vectors, then embeds what is missing, newest first, a batch at a time, at the lowest
/// priority; the fresh lane embeds what was just saved or revised at normal priority. Both
/// wake when a commit (or the poll) says there may be work, and end when the engine stops or
/// another model replaces this one. Vectors are written through the writer like any write; a
/// memory whose text changed meanwhile is skipped and picked up again with its new text.
fn start_embedding(engine: &Arc<Engine>, path: &Path, semantic: Arc<Semantic>) {
    let lanes = Arc::new(Lanes::default());
    let lane =
        EmbedLane { path: path.to_owned(), semantic, db: Arc::downgrade(engine), alive: engine.workers.alive(), lanes };
    let fresh = lane.clone();
    let backfill_woken = Arc::clone(&engine.embed_woken);
    let fresh_woken = Arc::clone(&engine.fresh_woken);
    // Each ends by itself when the model failed to load, or another replaced it: nothing to do
    // then (tasks, not loops). The fresh lane's thread keeps the priority of the one starting
    // it (the daemon's, or its model watcher's: neither is lowered).
    engine.workers.spawn_task("cairn-embed", move || backfill_loop(&lane, &backfill_woken));
    engine.workers.spawn_task("cairn-embed-fresh", move || fresh_loop(&fresh, &fresh_woken));
}

/// What both embedding lanes of one model work with.
#[derive(Clone)]
struct EmbedLane {
    path: PathBuf,
    semantic: Arc<Semantic>,
    db: std::sync::Weak<Engine>,
    alive: Alive,
    lanes: Arc<Lanes>,
}

/// What ended a wait for work.
#[derive(PartialEq, Eq)]
enum Waited {
    /// A commit woke the lane.
    Woken,
    /// The poll's time came.
    Poll,
    /// The engine is gone.
    Gone,
}

/// Whether a lane goes on, once the model is there.
enum Ready {
    Yes,
    NotYet,
    Stop,
}

impl EmbedLane {
    /// `Stop` when the engine stopped, another model replaced this one, or this one failed to
    /// load; `NotYet` while it loads.
    fn ready(&self) -> Ready {
        if !self.alive.get() || self.db.upgrade().is_none_or(|db| !db.uses(&self.semantic)) {
            return Ready::Stop;
        }
        if self.semantic.embedder().is_some() {
            return Ready::Yes;
        }
        let failed = self
            .semantic
            .availability()
            .is_err_and(|why| matches!(why, cairn_core::search::semantic::Unavailable::NoModel(_)));
        if failed { Ready::Stop } else { Ready::NotYet }
    }

    /// Wait for a commit's wake-up or the poll; `false` when the engine is gone.
    fn wait_for_work(&self, woken: &Mutex<mpsc::Receiver<()>>) -> bool {
        self.wait(woken) != Waited::Gone
    }

    /// Wait for a commit's wake-up or the poll, and say which came.
    fn wait(&self, woken: &Mutex<mpsc::Receiver<()>>) -> Waited {
        let woken = woken.lock().unwrap_or_else(std::sync::PoisonError::into_inner).recv_timeout(EMBED_POLL);
        match woken {
            _ if self.db.strong_count() == 0 => Waited::Gone,
            Err(mpsc::RecvTimeoutError::Disconnected) => Waited::Gone,
            Err(mpsc::RecvTimeoutError::Timeout) => Waited::Poll,
            Ok(()) => Waited::Woken,
        }
    }

    /// Wait until there may be something to embed: a commit's wake-up, or a poll that finds the
    /// database changed since `idle_at` (its `data_version` when a scan found every memory
    /// embedded). The poll is for writes this daemon's writer did not make (another process);
    /// with nothing changed it skips the scan, which at a million memories read the whole
    /// table every 5 s (a fifth of a core, forever, on an idle daemon). `false`: the engine is gone.
    fn wait_for_change(&self, woken: &Mutex<mpsc::Receiver<()>>, store: &Store, idle_at: Option<i64>) -> bool {
        loop {
            match self.wait(woken) {
                Waited::Gone => return false,
                Waited::Woken => return true,
                Waited::Poll if idle_at.is_none() || store.data_version().ok() != idle_at => return true,
                // Stopped, or another model took over: the loop sees it.
                Waited::Poll if !matches!(self.ready(), Ready::Yes) => return true,
                Waited::Poll => {}
            }
        }
    }

    /// Embed `pending` and store the vectors through the writer.
    fn embed_and_store(&self, pending: Vec<PendingText>) -> Result<usize> {
        let items = self.semantic.embed_pending_texts(pending)?;
        let Some(db) = self.db.upgrade() else { return Ok(0) };
        let mine = Arc::clone(&self.semantic);
        db.with_writer(move |s| {
            // Checked on the writer, in turn with a switch of model: vectors of a model no
            // longer in use are never stored under the new one's name.
            if s.semantic.as_ref().is_some_and(|current| Arc::ptr_eq(current, &mine)) {
                s.store_embeddings(&items)
            } else {
                Ok(0)
            }
        })
    }
}

/// The backfill lane: every memory without a vector, newest first, at the lowest priority.
fn backfill_loop(lane: &EmbedLane, woken: &Mutex<mpsc::Receiver<()>>) {
    crate::workers::run_in_background();
    let Ok(reader) = Store::open(&lane.path) else { return };
    let reader = Core::new(reader).with_semantic(Some(Arc::clone(&lane.semantic)));
    let started = Instant::now();
    match reader.load_vectors() {
        Ok(n) => {
            tracing::info!(vectors = n, elapsed = ?started.elapsed(), model = lane.semantic.model_id(), "semantic index ready");
        }
        Err(e) => tracing::warn!(error = %e, "could not load stored vectors; they will be recomputed"),
    }
    lane.lanes.set_loaded();
    let model = lane.semantic.model_id().to_owned();
    if let Some(db) = lane.db.upgrade() {
        let keep = model.clone();
        if let Err(e) = db.with_writer(move |core| core.store.clear_embeddings(Some(&keep))) {
            tracing::warn!(error = %e, "could not drop vectors of other models");
        }
    }
    let mut backoff = Duration::from_secs(1);
    loop {
        match lane.ready() {
            Ready::Stop => return,
            Ready::NotYet => {
                // Still loading.
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
            Ready::Yes => {}
        }
        let idle_at = reader.store.data_version().ok();
        let claim = match backfill_claim(lane, &reader.store, &model) {
            Ok(Backfill::Claimed(claim)) => Some(claim),
            Ok(Backfill::AllEmbedded) => {
                if !lane.wait_for_change(woken, &reader.store, idle_at) {
                    return;
                }
                continue;
            }
            Ok(Backfill::FreshLanes) => None,
            Err(e) => {
                tracing::warn!(error = %e, "could not list memories to embed");
                None
            }
        };
        let pending = claim.as_ref().map(|c| reader.store.pending_embeddings_of(&model, c.ids()));
        let pending = match pending {
            Some(Ok(pending)) if !pending.is_empty() => pending,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "could not list memories to embed");
                Vec::new()
            }
            _ => Vec::new(),
        };
        if pending.is_empty() {
            drop(claim);
            if !lane.wait_for_work(woken) {
                return;
            }
            continue;
        }
        match lane.embed_and_store(pending) {
            Ok(_) => backoff = Duration::from_secs(1),
            Err(e) => {
                // A model that fails, or a store that cannot take the vectors (a full disk):
                // the same memories are tried again after a pause that grows.
                tracing::warn!(error = %e, code = e.code.as_str(), retry_in = ?backoff, "embedding failed; will retry");
                drop(claim);
                crate::workers::sleep_while(&lane.alive, backoff);
                backoff = (backoff * 2).min(Duration::from_secs(60));
            }
        }
    }
}

/// What the backfill found to do.
enum Backfill<'a> {
    /// Its next batch.
    Claimed(Claim<'a>),
    /// Memories wait for a vector, but the fresh lane has them (or has not looked at them yet).
    FreshLanes,
    /// Every memory has its vector.
    AllEmbedded,
}

/// The backfill's next batch: the newest memories without a vector, less those the fresh lane
/// has claimed or not looked at yet.
fn backfill_claim<'a>(lane: &'a EmbedLane, store: &Store, model: &str) -> Result<Backfill<'a>> {
    // Twice a batch: the newest few may be the fresh lane's.
    let listed = store.pending_embeddings(model, EMBED_BATCH * 2)?;
    if listed.is_empty() {
        return Ok(Backfill::AllEmbedded);
    }
    let unseen: HashSet<i64> = match lane.lanes.fresh_seen() {
        Some(seq) => store.changed_since(seq, UNSEEN_MOST)?.1.into_iter().collect(),
        None => HashSet::new(),
    };
    let ids: Vec<i64> = listed.iter().map(|p| p.id).collect();
    let claim = lane.lanes.claim_backfill(&ids, &unseen, EMBED_BATCH);
    Ok(if claim.ids().is_empty() { Backfill::FreshLanes } else { Backfill::Claimed(claim) })
}

/// The fresh lane: what was saved or revised since it started, a batch at a time within its
/// budget, at the priority of the thread that started it; the rest it leaves to the backfill.
fn fresh_loop(lane: &EmbedLane, woken: &Mutex<mpsc::Receiver<()>>) {
    let Ok(reader) = Store::open(&lane.path) else { return };
    let model = lane.semantic.model_id().to_owned();
    // What changed before it started is the backfill's.
    let Ok(mut mark) = reader.newest_change() else { return };
    drop(lane.lanes.claim_fresh(&[], mark));
    let mut budget = FreshBudget::new(Instant::now());
    loop {
        match lane.ready() {
            Ready::Stop => return,
            Ready::Yes if lane.lanes.loaded() => {}
            _ => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        }
        let (newest, changed) = match reader.changed_since(mark, FRESH_BATCH) {
            Ok(read) => read,
            Err(e) => {
                tracing::warn!(error = %e, "could not read the change log; the backfill embeds what changed");
                (mark, Vec::new())
            }
        };
        if newest == mark {
            if !lane.wait_for_work(woken) {
                return;
            }
            continue;
        }
        let granted = budget.take(Instant::now(), changed.len());
        // Published with the claim: from here on, what it did not take is the backfill's.
        let claim = lane.lanes.claim_fresh(&changed[..granted], newest);
        mark = newest;
        let pending = match reader.pending_embeddings_of(&model, claim.ids()) {
            Ok(pending) if !pending.is_empty() => pending,
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "could not list fresh memories to embed; the backfill will");
                continue;
            }
        };
        if let Err(e) = lane.embed_and_store(pending) {
            // Not retried here: they are still without a vector, so the backfill takes them.
            tracing::warn!(error = %e, code = e.code.as_str(), "embedding fresh memories failed; the backfill will retry");
        }
    }
}

fn build_index_in_background(workers: &Workers, path: &Path, index: Arc<SharedIndex>) {
    let path = path.to_owned();
    workers.spawn_task("cairn-index-build", move || {
        let started = Instant::now();
        match Store::open(&path).and_then(|s| s.build_index()) {
            Ok(built) => {
                tracing::info!(memories = built.len(), elapsed = ?started.elapsed(), "search index ready");
                index.set(built);
            }
            Err(e) => tracing::warn!(error = %e, "could not build the search index; using FTS5"),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::ops::StatsRequest;
    use cairn_core::views::Stats;
    use serde_json::Value;

    fn save(title: String) -> Op {
        Op::from_value(serde_json::json!({"op": "save", "args": {"title": title, "content": "c", "project": "p"}}))
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_and_reads_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let db = Engine::open(&dir.path().join("cairn.db")).unwrap();
        let mut tasks = Vec::new();
        for t in 0..8 {
            let db = Arc::clone(&db);
            tasks.push(tokio::spawn(async move {
                for i in 0..25 {
                    db.execute(save(format!("t{t}-{i}"))).await.unwrap();
                    db.execute(Op::Stats).await.unwrap();
                }
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let stats: Stats = db.call(StatsRequest).await.unwrap();
        assert_eq!(stats.total_observations, 200);
    }

    fn wal_bytes(db_path: &Path) -> u64 {
        std::fs::metadata(db_path.with_extension("db-wal")).map_or(0, |m| m.len())
    }

    /// A long reader (what the index rebuild used to be) pins the WAL during a bulk import, so
    /// it grows past the limit; once the reader is gone the WAL must shrink back although no
    /// write follows. Passive checkpoints alone left it at its high-water mark for good.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_wal_shrinks_back_after_a_bulk_import_under_a_long_reader() {
        const LIMIT: u64 = 256 * 1024;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cairn.db");
        let db = Engine::open_tuned(&path, None, Arc::default(), LIMIT).unwrap();
        db.execute(save("first".into())).await.unwrap();
        let reader = rusqlite::Connection::open(&path).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader.query_row("SELECT count(*) FROM observations", [], |r| r.get(0)).unwrap();
        for batch in 0..2 {
            let observations: Vec<Value> = (0..1000)
                .map(|i| {
                    serde_json::json!({"session_id": "bulk", "title": format!("bulk {batch} {i}"),
                        "content": format!("imported memory {i} of batch {batch} about caches and queues"), "project": "p"})
                })
                .collect();
            let data = serde_json::json!({"sessions": [], "observations": observations});
            db.execute(Op::Import(ImportRequest { data })).await.unwrap();
        }
        let grown = wal_bytes(&path);
        assert!(grown > 4 * LIMIT, "the import should have grown the WAL: {grown} bytes");
        reader.execute_batch("COMMIT").unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while db.index_state() != "ready" || wal_bytes(&path) > LIMIT {
            assert!(Instant::now() < deadline, "the WAL stays at {} bytes (limit {LIMIT})", wal_bytes(&path));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Nothing was lost on the way.
        let stats: Stats = db.call(StatsRequest).await.unwrap();
        assert_eq!(stats.total_observations, 2001);
    }

    #[test]
    fn a_failing_write_in_a_group_fails_alone() {
        let mut core = Core::new(Store::open_in_memory().unwrap());
        let bad = Op::from_value(serde_json::json!({"op": "save", "args": {"title": "", "content": "c"}})).unwrap();
        let (txs, rxs): (Vec<_>, Vec<_>) = (0..3).map(|_| oneshot::channel()).unzip();
        let group: Vec<(Op, Option<EventId>, Reply)> =
            vec![save("a".into()), bad, save("b".into())].into_iter().zip(txs).map(|(op, tx)| (op, None, tx)).collect();
        commit_group(&mut core, group);
        let results: Vec<Result<EventOutcome>> = rxs.into_iter().map(|rx| rx.blocking_recv().unwrap()).collect();
        assert!(results[0].is_ok() && results[2].is_ok());
        assert_eq!(results[1].as_ref().unwrap_err().code, cairn_core::ErrorCode::EmptyField);
        assert_eq!(core.store.stats().unwrap().total_observations, 2);
    }

    /// A git import meets a FIFO as a chunk (git cannot commit one, but a checkout can hold
    /// one): it is refused, and the writes queued behind the import go on. A FIFO opened for
    /// reading on the writer would hold every write until something wrote to it.
    #[test]
    fn a_git_import_meeting_a_fifo_never_holds_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join(".cairn/chunks")).unwrap();
        std::fs::write(repo.join(".cairn/manifest.json"), r#"{"version": 1, "chunks": [{"id": "0badf00d"}]}"#).unwrap();
        let made = std::process::Command::new("mkfifo").arg(repo.join(".cairn/chunks/0badf00d.jsonl.gz")).status();
        assert!(made.unwrap().success());
        let db = Engine::open(&dir.path().join("cairn.db")).unwrap();
        db.execute_blocking(save("before".into())).unwrap();
        let (tx, rx) = mpsc::channel();
        let importer = Arc::clone(&db);
        std::thread::spawn(move || {
            let _ =
                tx.send(importer.execute_blocking(Op::SyncImport(SyncImportRequest {
                    directory: repo,
                    time_limit_ms: Some(8_000),
                })));
        });
        // Only a guard against a hang, not a measure of speed.
        let imported = rx.recv_timeout(Duration::from_secs(60)).expect("the import ended");
        let Ok(OpOutput::SyncImport(summary)) = imported else { panic!("{imported:?}") };
        assert_eq!(summary.refused.len(), 1, "{summary:?}");
        assert_eq!(summary.refused[0].code, "sync_file_not_regular");
        db.execute_blocking(save("after".into())).unwrap();
        let count = db.with_writer(|core| Ok(core.store.stats()?.total_observations)).unwrap();
        assert_eq!(count, 2);
    }

    #[test]
    fn with_writer_runs_in_turn() {
        let db = Engine::in_memory().unwrap();
        db.execute_blocking(save("x".into())).unwrap();
        let count = db.with_writer(|core| Ok(core.store.stats()?.total_observations)).unwrap();
        assert_eq!(count, 1);
    }

    /// A model whose every vector is one fixed direction, named `id`; `slow` makes each batch
    /// take a while, so a switch lands while the old model's embedder is mid-batch.
    struct Fixed {
        id: &'static str,
        axis: usize,
        slow: Duration,
    }

    impl cairn_embed::Embedder for Fixed {
        fn model_id(&self) -> &str {
            self.id
        }

        fn embed(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, cairn_embed::EmbedError> {
            std::thread::sleep(self.slow);
            Ok(texts.iter().map(|_| (0..4).map(|i| if i == self.axis { 1.0 } else { 0.0 }).collect()).collect())
        }
    }

    /// The stored vectors as (model, count), and whether every vector of a model is its axis.
    fn stored(path: &Path) -> Vec<(String, i64)> {
        let conn = rusqlite::Connection::open(path).unwrap();
        let mut stmt = conn.prepare("SELECT model, count(*) FROM embeddings GROUP BY model ORDER BY model").unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(std::result::Result::unwrap).collect()
    }

    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Vectors another process deletes (no commit of this daemon's writer wakes the lanes, and
    /// the change log does not show it) are embedded again at the poll: an idle backfill skips
    /// its scan only while the database is unchanged.
    #[test]
    fn vectors_another_process_deletes_are_embedded_again_at_the_poll() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cairn.db");
        let semantic = Semantic::new(Arc::new(Fixed { id: "fixed", axis: 0, slow: Duration::ZERO }));
        let db = Engine::open_with(&path, Some(semantic), Arc::default()).unwrap();
        for i in 0..3 {
            db.execute_blocking(save(format!("memory {i}"))).unwrap();
        }
        wait_until("every memory embedded", || stored(&path) == [("fixed".to_owned(), 3)]);
        // Idle polls: nothing changed, nothing to do.
        std::thread::sleep(EMBED_POLL * 3);
        rusqlite::Connection::open(&path).unwrap().execute("DELETE FROM embeddings", []).unwrap();
        wait_until("the vectors embedded again", || stored(&path) == [("fixed".to_owned(), 3)]);
        db.stop(Duration::from_secs(5));
    }

    /// A reader out on a request while the model switches is not pooled again with the old
    /// model: every read after the switch answers with the new one (once, a daemon kept
    /// answering `embedding_model: null` for good after `cairn model install`).
    #[test]
    fn a_reader_out_during_a_model_switch_is_not_pooled_with_the_old_model() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cairn.db");
        let db = Engine::open(&path).unwrap();
        db.execute_blocking(save("memory".into())).unwrap();
        let out_on_a_request = db.take_reader().unwrap();
        let model = Semantic::new(Arc::new(Fixed { id: "taken-up", axis: 0, slow: Duration::ZERO }));
        db.use_semantic(model).unwrap();
        db.return_reader(out_on_a_request);
        for _ in 0..3 {
            let stats: Stats = db.call_blocking(StatsRequest).unwrap();
            assert_eq!(stats.embedding_model.as_deref(), Some("taken-up"));
        }
        db.stop(Duration::from_secs(5));
    }

    /// An engine opened without a model takes one up, embeds every memory with it; switched to
    /// another while the first is mid-batch, it ends with only the second model's vectors
    /// (the first embedder stops and its late batch is not stored under the new name), and
    /// readers taken before the switch search with the new model.
    #[test]
    fn a_model_taken_up_later_embeds_everything_and_a_switch_mixes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cairn.db");
        let db = Engine::open(&path).unwrap();
        for i in 0..40 {
            db.execute_blocking(save(format!("memory {i}"))).unwrap();
        }
        db.execute_blocking(Op::Stats).unwrap(); // a pooled reader, taken before any model
        assert!(db.semantic().is_none());
        let first = Semantic::new(Arc::new(Fixed { id: "first", axis: 0, slow: Duration::from_millis(30) }));
        db.use_semantic(Arc::clone(&first)).unwrap();
        wait_until("a first vector", || stored(&path).iter().any(|(model, _)| model == "first"));
        let second = Semantic::new(Arc::new(Fixed { id: "second", axis: 1, slow: Duration::ZERO }));
        db.use_semantic(Arc::clone(&second)).unwrap();
        wait_until("every memory embedded by the second model", || stored(&path) == [("second".to_owned(), 40)]);
        // The first model's embedder has stopped: nothing of it comes back.
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(stored(&path), [("second".to_owned(), 40)]);
        let stats: Stats = db.call_blocking(StatsRequest).unwrap();
        assert_eq!((stats.embedding_model.as_deref(), stats.embeddings_pending), (Some("second"), 0));
        db.stop(Duration::from_secs(5));
    }

    #[cfg(target_os = "linux")]
    use crate::workers::tests::policy_and_nice as priority;

    /// CPU time the calling thread has run (the first field of its `schedstat`).
    #[cfg(target_os = "linux")]
    fn thread_cpu() -> Duration {
        let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
        Duration::from_nanos(schedstat.split(' ').next().unwrap().parse().unwrap())
    }

    /// A model that spends `burn` of CPU per batch, as a real one does, and records each text
    /// with the priority of the thread that embedded it.
    #[cfg(target_os = "linux")]
    struct Recording {
        burn: Duration,
        embedded: Mutex<Vec<(String, (u32, i32))>>,
    }

    #[cfg(target_os = "linux")]
    impl Recording {
        fn new(burn: Duration) -> Arc<Recording> {
            Arc::new(Recording { burn, embedded: Mutex::new(Vec::new()) })
        }

        /// The priorities `title` was embedded at (once each time it was embedded).
        fn embedded_at(&self, title: &str) -> Vec<(u32, i32)> {
            let prefix = format!("{title}.\n");
            let embedded = self.embedded.lock().unwrap();
            embedded.iter().filter(|(text, _)| text.starts_with(&prefix)).map(|(_, at)| *at).collect()
        }
    }

    #[cfg(target_os = "linux")]
    impl cairn_embed::Embedder for Recording {
        fn model_id(&self) -> &'static str {
            "recording"
        }

        fn embed(&self, texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, cairn_embed::EmbedError> {
            let start = thread_cpu();
            while thread_cpu().saturating_sub(start) < self.burn {
                std::hint::spin_loop();
            }
            let at = priority();
            self.embedded.lock().unwrap().extend(texts.iter().map(|t| ((*t).to_owned(), at)));
            Ok(texts.iter().map(|_| vec![1.0, 0.0, 0.0, 0.0]).collect())
        }
    }

    /// Threads keeping every core busy at normal priority until dropped.
    struct Hogs {
        stop: Arc<std::sync::atomic::AtomicBool>,
        threads: Vec<std::thread::JoinHandle<()>>,
    }

    impl Hogs {
        fn start(n: usize) -> Hogs {
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let threads = (0..n)
                .map(|_| {
                    let stop = Arc::clone(&stop);
                    std::thread::spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            std::hint::spin_loop();
                        }
                    })
                })
                .collect();
            Hogs { stop, threads }
        }
    }

    impl Drop for Hogs {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
            for thread in self.threads.drain(..) {
                let _ = thread.join();
            }
        }
    }

    /// An engine with the `Recording` model, once its stored vectors are loaded (from then on
    /// the fresh lane runs).
    #[cfg(target_os = "linux")]
    fn with_recording(path: &Path, model: &Arc<Recording>) -> Arc<Engine> {
        let semantic = Semantic::new(Arc::clone(model) as Arc<dyn cairn_embed::Embedder>);
        let db = Engine::open_with(path, Some(Arc::clone(&semantic)), Arc::default()).unwrap();
        wait_until("the stored vectors loaded", || semantic.is_loaded());
        db
    }

    /// A memory saved while two threads keep both cores busy gets its vector, embedded at the
    /// saver's priority. Embedded only by the backfill at nice 19 (as before the fresh lane),
    /// it got about 1.5 % of a core there: a real model's 300 ms took most of a minute, and
    /// semantic search missed the memory all that time.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_fresh_memory_is_embedded_at_normal_priority_beside_two_busy_cores() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cairn.db");
        let model = Recording::new(Duration::from_millis(300));
        let db = with_recording(&path, &model);
        let hogs = Hogs::start(2);
        db.execute_blocking(save("fresh".into())).unwrap();
        wait_until("the fresh memory's vector", || stored(&path) == [("recording".to_owned(), 1)]);
        drop(hogs);
        assert_eq!(model.embedded_at("fresh"), [priority()], "once, at the priority of the thread that saved it");
        // Both lanes end with the engine.
        db.close_queue();
        assert_eq!(db.workers.stop(Duration::from_secs(30)), Vec::<&str>::new());
    }

    /// Hundreds of memories saved at once (an import) are embedded each once, and no more than
    /// the fresh lane's budget of them at normal priority: the rest at the backfill's nice 19.
    #[cfg(target_os = "linux")]
    #[test]
    fn an_import_is_embedded_once_each_mostly_in_the_background() {
        const IMPORTED: usize = 200;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cairn.db");
        let model = Recording::new(Duration::ZERO);
        let db = with_recording(&path, &model);
        let started = Instant::now();
        for i in 0..IMPORTED {
            db.execute_blocking(save(format!("imported {i}"))).unwrap();
        }
        let minutes_saving = usize::try_from(started.elapsed().as_secs() / 60).unwrap();
        wait_until("every memory embedded", || stored(&path) == [("recording".to_owned(), IMPORTED as i64)]);
        let normal = priority();
        let mut at_normal = 0;
        for i in 0..IMPORTED {
            let at = model.embedded_at(&format!("imported {i}"));
            assert_eq!(at.len(), 1, "memory {i} embedded {} times", at.len());
            if at[0] == normal {
                at_normal += 1;
            } else {
                assert_eq!(at[0], (3, 19), "the backfill's SCHED_BATCH at nice 19");
            }
        }
        let budget = crate::embed_lanes::FRESH_PER_MINUTE * (minutes_saving + 1);
        assert!(at_normal <= budget, "{at_normal} embedded at normal priority, the budget is {budget}");
        db.stop(Duration::from_secs(5));
    }
}

//! [`Client`]: how any cairn process (the CLI, `cairn mcp`, a hook, the daemon's own doors)
//! runs an operation. It goes to the daemon of the data dir when one runs (starting one when
//! this kind of process may), and otherwise to the database file in this process: a plain
//! connection for a one-shot command, the whole [`Engine`] for a long-lived one.
//!
//! Connecting is lazy, so `cairn mcp` can answer `initialize` at once while it finds or
//! starts the daemon ([`Client::warm_up`]).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cairn_core::ops::{self, EventOutcome, Op, OpOutput, ReindexRequest, Request, waits_for_the_store};
use cairn_core::search::SearchMode;
use cairn_core::settings::{Autostart, EmbedderConfig, RuleSettings, Settings, ensure_data_dir};
use cairn_core::spool::{EventId, Pushed, Spool};
use cairn_core::{CairnError, Core, ErrorCode, Result, Store};
use cairn_engine::Engine;
use serde_json::Value;

use crate::daemon::{DaemonClient, autostart, start_in_background};

/// How long a process waits for the daemon it started to answer.
const AUTOSTART_WAIT: Duration = Duration::from_secs(3);
/// How long `cairn remote sync` without a daemon holds the sync lease at most (given back at
/// its end; a killed process lets go when this runs out).
const LEASE_FOR_ONE_ROUND: Duration = Duration::from_secs(600);
/// Memories a one-shot search without a daemon embeds first (saved since the daemon last ran).
const LOCAL_CATCH_UP: usize = 64;

/// What kind of process is asking: it decides whether it may start the daemon and what it
/// opens when it works on the file itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// One command, then exit: starts the daemon only with `CAIRN_AUTOSTART=all`; without a
    /// daemon, one connection and no background threads.
    Cli,
    /// `cairn mcp`, one per agent session: starts the daemon (unless `never`); without one,
    /// the whole engine, since it lives as long as the session.
    Mcp,
    /// `cairn hook …` and plugins: a short process on the agent's critical path that starts
    /// the daemon (unless `never`) so the next event finds it warm.
    Hook,
}

/// What to open when working on the file itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalKind {
    /// One connection; the embedding model loaded only for an operation that needs it.
    Store,
    /// The whole runtime: writer, readers, search index, background embedding.
    Engine,
    /// One read-only connection (`cairn tui` without `--write`): never migrates, never
    /// writes, so it never takes the writer lock of a store a daemon may be writing.
    ReadOnly,
}

/// How to reach the store of a data dir: its daemon, a daemon started for it, or the file.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub data_dir: PathBuf,
    pub db_path: PathBuf,
    pub token: Option<String>,
    pub port: u16,
    /// Start a daemon when none runs (with this executable).
    pub autostart: Option<PathBuf>,
    /// Ignore any daemon and open the database directly.
    pub direct: bool,
    /// What is opened here when there is no daemon.
    pub local: LocalKind,
    /// Semantic search when the database is opened here (`None`: lexical only).
    pub embedder: Option<EmbedderConfig>,
    /// A host's door (a hook): a write the daemon cannot take now (no answer in time, disk
    /// full, busy) waits in the data dir's spool for it ([`Client::deliver`]). When no daemon
    /// runs, one is started without waiting for it (writes spooled) when `autostart` allows,
    /// instead of waiting seconds for it or opening the file while it starts; otherwise
    /// (`CAIRN_AUTOSTART=never`) the hook works on the file, as nobody would drain the spool.
    pub spool: bool,
    /// The settings ops run under when the database is opened here.
    pub rules: Arc<RuleSettings>,
}

impl ConnectOptions {
    /// The file of `data_dir` opened as `local` in this process, no daemon looked for or
    /// started, default settings (tests and benchmarks).
    pub fn direct_to(data_dir: &std::path::Path, local: LocalKind) -> ConnectOptions {
        ConnectOptions {
            data_dir: data_dir.to_owned(),
            db_path: data_dir.join(cairn_core::store::DB_FILE),
            token: None,
            port: 0,
            autostart: None,
            direct: true,
            local,
            embedder: None,
            spool: false,
            rules: Arc::default(),
        }
    }

    /// The one reading of the settings every process uses. `CAIRN_AUTOSTART` says who may
    /// *start* a daemon: `mcp` (the default) the agent-session processes (`cairn mcp`,
    /// hooks), `all` the CLI too, `never` nobody (a running daemon is still used).
    /// `CAIRN_DIRECT=1` keeps this process on the database file even when a daemon runs.
    pub fn from_settings(settings: &Settings, role: Role) -> Result<ConnectOptions> {
        let data_dir = if role == Role::Hook { existing_data_dir(settings)? } else { canonical_data_dir(settings)? };
        let autostart_policy = settings.autostart.value;
        let direct = settings.direct.value;
        let may_start = match role {
            Role::Cli => autostart_policy == Autostart::All,
            Role::Mcp | Role::Hook => autostart_policy != Autostart::Never,
        };
        let autostart = if may_start && !direct { Some(current_exe()?) } else { None };
        // With `CAIRN_AUTOSTART=never` too: a daemon run by the user (a service) drains the
        // spool, and an event it refused for lack of room must wait there, not be lost.
        let spool = role == Role::Hook && !direct;
        Ok(ConnectOptions {
            spool,
            db_path: data_dir.join(cairn_core::store::DB_FILE),
            data_dir,
            token: settings.http_token.value.clone(),
            port: settings.port.value,
            autostart,
            direct,
            local: if role == Role::Mcp { LocalKind::Engine } else { LocalKind::Store },
            embedder: Some(settings.embedder_config()),
            rules: Arc::new(settings.rules()),
        })
    }

    /// A hook that starts a daemon when none runs and does not wait for it: its writes wait in
    /// the spool meanwhile, so it never falls back to the file.
    fn starts_daemon_in_background(&self) -> bool {
        self.spool && self.autostart.is_some()
    }
}

/// The data dir as the daemon records it (absolute, symlinks resolved), created if missing.
pub fn canonical_data_dir(settings: &Settings) -> Result<PathBuf> {
    let dir = &settings.data_dir.value;
    ensure_data_dir(dir)?;
    Ok(dir.canonicalize().unwrap_or_else(|_| dir.clone()))
}

/// [`canonical_data_dir`] without the write probe, for a hook: its writes go to the daemon or
/// the spool, and a spool that cannot be written says so itself.
fn existing_data_dir(settings: &Settings) -> Result<PathBuf> {
    let dir = &settings.data_dir.value;
    if !dir.is_dir() {
        ensure_data_dir(dir)?;
    }
    Ok(dir.canonicalize().unwrap_or_else(|_| dir.clone()))
}

fn current_exe() -> Result<PathBuf> {
    std::env::current_exe().map_err(|e| CairnError::internal(format!("cannot find the cairn executable: {e}")))
}

/// Where operations go once connected. Cheap to clone: calls run outside any lock.
#[derive(Clone)]
enum Target {
    Daemon(DaemonClient),
    Engine(Arc<Engine>),
    Store(Arc<LocalStore>),
}

/// One connection of this process, and the model configuration to load when an operation
/// needs it.
struct LocalStore {
    /// The store and the history archive beside it.
    core: Mutex<Core>,
    embedder: Option<EmbedderConfig>,
    /// Opened read-only: search uses the vectors stored, and embeds nothing itself.
    read_only: bool,
}

impl LocalStore {
    /// A round on this process's connection, holding the lease for its length.
    fn remote_sync(&self) -> Result<cairn_core::sync::remote::RoundReport> {
        let data_dir = lock(&self.core).store.data_dir().map(std::path::Path::to_owned);
        let remote =
            data_dir.as_deref().map(cairn_core::settings::load_remote).transpose()?.flatten().ok_or_else(|| {
                CairnError::new(ErrorCode::RemoteNotConfigured, "this data dir has no hub to sync with")
                    .with_hint("cairn remote add URL --token TOKEN")
            })?;
        let holder = format!("cli:{}", std::process::id());
        if let Some(other) = lock(&self.core).store.sync_lease_take(&holder, LEASE_FOR_ONE_ROUND)? {
            return Err(CairnError::new(ErrorCode::SyncBusy, format!("{other} is syncing this data dir"))
                .with_hint("try again in a minute, or run `cairn remote sync` while the daemon runs"));
        }
        let hub = cairn_engine::hub_client::HubClient::new(&remote.url, &remote.token);
        let report = cairn_core::sync::remote::sync_round(&LocalSync(&self.core), &hub, &remote);
        if let Err(e) = lock(&self.core).store.sync_lease_release(&holder) {
            tracing::debug!(error = %e, "could not give the sync lease back");
        }
        report
    }

    fn run(&self, op: Op) -> Result<OpOutput> {
        let mut core = lock(&self.core);
        if needs_semantic(&op) {
            attach_semantic(&mut core, self.embedder.as_ref(), !self.read_only);
        }
        if matches!(op, Op::Gc(_)) && core.semantic.is_none() {
            return gc_knowing_the_model(&mut core, self.embedder.as_ref(), op);
        }
        ops::execute(&mut core, op)
    }
}

/// A sync round's access to this process's store: each piece of work under the lock.
struct LocalSync<'a>(&'a Mutex<Core>);

impl cairn_core::sync::remote::SyncAccess for LocalSync<'_> {
    fn with_store<T: Send + 'static>(&self, f: impl FnOnce(&mut Store) -> Result<T> + Send + 'static) -> Result<T> {
        f(&mut lock(self.0).store)
    }
}

/// What became of a host's write ([`Client::deliver`]).
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant, reason = "returned once per hook event and consumed at once")]
pub enum Delivered {
    /// Applied now (or applied before under the same event id); the operation's result.
    Answered(EventOutcome),
    /// Kept in the spool under this id; the daemon applies it once it runs.
    Spooled(EventId),
}

/// Room kept in a budget to write the spool after the daemon did not answer.
const SPOOL_MARGIN: Duration = Duration::from_millis(100);
/// How often a hook looks for the daemon it started.
const DAEMON_POLL: Duration = Duration::from_millis(25);

/// Runs operations for one process. Clone it freely: clones share the connection.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    /// `None` for a client made around an engine or a daemon (nothing to connect).
    options: Option<ConnectOptions>,
    target: Mutex<Option<Target>>,
    /// The file opened here after the daemon went away (opened once).
    fallback: Mutex<Option<Target>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("connected_to", &self.connected_to()).finish()
    }
}

impl Client {
    /// A client that connects on first use.
    pub fn new(options: ConnectOptions) -> Client {
        Client::with(Some(options), None)
    }

    /// A client of an engine in this process (the daemon's own doors, tests).
    pub fn in_process(engine: Arc<Engine>) -> Client {
        Client::with(None, Some(Target::Engine(engine)))
    }

    /// A client of a known daemon (tests, tools).
    pub fn of_daemon(daemon: DaemonClient) -> Client {
        Client::with(None, Some(Target::Daemon(daemon)))
    }

    fn with(options: Option<ConnectOptions>, target: Option<Target>) -> Client {
        Client { inner: Arc::new(Inner { options, target: Mutex::new(target), fallback: Mutex::new(None) }) }
    }

    /// Start connecting now, on a thread of its own (the first call then finds it done).
    pub fn warm_up(&self) {
        let client = self.clone();
        let spawned = std::thread::Builder::new().name("cairn-connect".into()).spawn(move || {
            if let Err(e) = client.target() {
                tracing::warn!(error = %e, "could not reach the store yet");
            }
        });
        if let Err(e) = spawned {
            tracing::debug!(error = %e, "connecting on first use instead");
        }
    }

    /// `daemon <addr>`, `engine`, `file` or `not connected`: for logs and `cairn doctor`.
    pub fn connected_to(&self) -> String {
        match lock(&self.inner.target).as_ref() {
            Some(Target::Daemon(d)) => format!("daemon {}", d.addr),
            Some(Target::Engine(_)) => "engine".into(),
            Some(Target::Store(_)) => "file".into(),
            None => "not connected".into(),
        }
    }

    /// Run an operation, blocking the calling thread (not from async code: use
    /// [`Client::run_async`]); its typed result (the [`OpOutput`] variant named like the op).
    pub fn run(&self, op: Op) -> Result<OpOutput> {
        let target = self.target()?;
        match run_blocking(&target, op.clone()) {
            Err(e) if e.code == ErrorCode::DaemonUnavailable && matches!(target, Target::Daemon(_)) => {
                // The daemon went away (and surely did not run it): a restarted one, or the file.
                let elsewhere = self.after_daemon_loss(&e)?;
                run_blocking(&elsewhere, op)
            }
            other => other,
        }
    }

    /// Run an operation from async code: an engine in this process runs it on its own
    /// threads; anything else runs on tokio's blocking pool.
    pub async fn run_async(&self, op: Op) -> Result<OpOutput> {
        let connected = lock(&self.inner.target).clone();
        if let Some(Target::Engine(engine)) = connected {
            return engine.execute(op).await;
        }
        let client = self.clone();
        tokio::task::spawn_blocking(move || client.run(op))
            .await
            .map_err(|e| CairnError::internal(format!("worker failed: {e}")))?
    }

    /// [`Client::run`], as the JSON a door sends (for doors that pass results through).
    pub fn execute(&self, op: Op) -> Result<Value> {
        self.run(op)?.into_value()
    }

    /// [`Client::run_async`], as the JSON a door sends.
    pub async fn execute_async(&self, op: Op) -> Result<Value> {
        self.run_async(op).await?.into_value()
    }

    /// Run a request; its answer, of the type the request names (`SaveResponse` for a
    /// `SaveRequest`): a request paired with another answer type does not compile.
    pub fn call<R: Request>(&self, request: R) -> Result<R::Output> {
        R::output(self.run(request.into_op())?)
    }

    /// [`Client::call`] from async code.
    pub async fn call_async<R: Request>(&self, request: R) -> Result<R::Output> {
        R::output(self.run_async(request.into_op()).await?)
    }

    /// Deliver a host's write within `budget`, losing nothing: to the daemon when it answers in
    /// time, under a fresh event id; otherwise into the data dir's spool under that same id
    /// (a write the daemon got but did not answer in time is then applied once, not twice),
    /// starting the daemon if none runs. A daemon that cannot store it now (disk full, busy:
    /// [`waits_for_the_store`]) leaves it in the spool too, and applies it once it can. Before
    /// a write goes to the daemon, what waits in the spool is drained, so the write does not
    /// overtake it. A client that does not spool (`CAIRN_DIRECT=1`, not a hook), or a hook
    /// that finds no daemon and may start none, just runs the operation.
    pub fn deliver(&self, op: Op, source: &str, budget: Duration) -> Result<Delivered> {
        let Some(options) = self.inner.options.as_ref().filter(|o| o.spool) else {
            return self.apply_here(op);
        };
        let deadline = std::time::Instant::now() + budget.saturating_sub(SPOOL_MARGIN);
        let left = || deadline.saturating_duration_since(std::time::Instant::now());
        let id = EventId::new();
        let spool = Spool::in_data_dir(&options.data_dir);
        match self.daemon_now().or_else(|| self.start_and_wait(options, deadline)) {
            // No daemon runs, and this hook may start none: nobody would drain the spool.
            None if options.autostart.is_none() => return self.apply_here(op),
            None => {}
            Some(daemon) => match deliver_to_daemon(&daemon, &spool, &op, &id, left) {
                Ok(Some(outcome)) => return Ok(Delivered::Answered(outcome)),
                Ok(None) => {}
                // Surely not run, and no daemon will be started to drain the spool: the file.
                Err(e) if e.code == ErrorCode::DaemonUnavailable && options.autostart.is_none() => {
                    return self.apply_here(op);
                }
                Err(e) if e.code == ErrorCode::DaemonMismatch || waits_for_the_store(e.code) => {
                    tracing::info!(error = %e, "the daemon cannot take the event now; keeping it in the spool");
                }
                Err(e) => return Err(e),
            },
        }
        match spool.push(&id, source, op.name(), &op) {
            Pushed::Kept => Ok(Delivered::Spooled(id)),
            Pushed::Dropped(why) => Err(CairnError::new(
                ErrorCode::DaemonUnavailable,
                format!("the daemon could not take `{}` now, and it could not be kept for it: {why}", op.name()),
            )
            .with_hint("cairn doctor shows the spool; free disk space, or start the daemon: cairn serve")),
        }
    }

    /// The write run as any other operation (the daemon, else the file), with no event id.
    fn apply_here(&self, op: Op) -> Result<Delivered> {
        Ok(Delivered::Answered(EventOutcome::Applied(self.run(op)?)))
    }

    /// No daemon runs: start one (unless another process just did) and wait for it until
    /// `deadline` at most, so a daemon that comes up quickly still answers this event live (a
    /// first session's hooks inject the protocol and context); one still starting then leaves
    /// the event to the spool. Spooling itself takes microseconds, so the whole budget may be
    /// spent waiting.
    fn start_and_wait(&self, options: &ConnectOptions, deadline: std::time::Instant) -> Option<DaemonClient> {
        let exe = options.autostart.as_ref()?;
        start_in_background(exe, &options.data_dir, options.port);
        while std::time::Instant::now() + DAEMON_POLL < deadline {
            std::thread::sleep(DAEMON_POLL);
            if let Some(daemon) = self.daemon_now() {
                return Some(daemon);
            }
        }
        None
    }

    /// The daemon this client uses, or the one running now; never waits for one to start.
    /// Have a running daemon import `directory`'s git sync chunks in the background (session
    /// start): `false` when no daemon runs (nothing is started for it) or it did not take it.
    pub fn start_sync_import(&self, directory: &std::path::Path, timeout: Duration) -> bool {
        match self.daemon_now() {
            Some(daemon) => daemon.start_sync_import(directory, timeout).is_ok(),
            None => false,
        }
    }

    /// One push and pull with the data dir's hub now (`cairn remote sync`): by the daemon's
    /// autosync when a daemon runs, else here, under the store's sync lease (refused with
    /// `sync_busy` while another process holds it).
    pub fn remote_sync(&self, timeout: Duration) -> Result<cairn_core::sync::remote::RoundReport> {
        match self.target()? {
            Target::Daemon(daemon) => daemon.remote_sync(timeout),
            Target::Engine(engine) => engine.remote_sync_now(timeout),
            Target::Store(local) => local.remote_sync(),
        }
    }

    /// Extract memories from archived conversations (`cairn extract`): through the daemon when
    /// one runs (`wait`: its report, else `None` once it started), else here with the model
    /// `open_model` gives, waiting in any case (nothing else would finish the work).
    pub fn extract(
        &self,
        selection: &cairn_core::extract::Selection,
        wait: bool,
        timeout: Duration,
        open_model: impl FnOnce() -> Result<Option<Box<dyn cairn_llm::LlmProvider>>>,
    ) -> Result<Option<cairn_core::extract::ExtractionReport>> {
        use cairn_core::extract::Selection;
        match self.target()? {
            Target::Daemon(daemon) => {
                let session = match selection {
                    Selection::Session(id) => Some(id.as_str()),
                    _ => None,
                };
                daemon.extract(session, wait, timeout)
            }
            Target::Engine(engine) => engine.extract_now(selection).map(Some),
            Target::Store(local) => {
                let model = open_model()?.ok_or_else(|| {
                    CairnError::new(ErrorCode::LlmNotConfigured, "no model is configured to extract memories")
                        .with_hint("cairn llm use local (or openai, anthropic, agent-cli)")
                })?;
                let policy = cairn_core::extract::ExtractionPolicy::default();
                let mut core = lock(&local.core);
                cairn_core::extract::run_pass(&mut *core, model.as_ref(), selection, &policy, &|| false).map(Some)
            }
        }
    }

    fn daemon_now(&self) -> Option<DaemonClient> {
        let mut slot = lock(&self.inner.target);
        if let Some(Target::Daemon(daemon)) = slot.as_ref() {
            return Some(daemon.clone());
        }
        let options = self.inner.options.as_ref()?;
        let daemon = find_daemon(options)?;
        *slot = Some(Target::Daemon(daemon.clone()));
        Some(daemon)
    }

    /// Embed every pending memory in this process when it works on the file with one
    /// connection (`cairn reindex` without a daemon). `None` when a daemon or an engine does
    /// that work in the background.
    pub fn embed_here(&self, progress: &mut dyn FnMut(usize, i64)) -> Result<Option<usize>> {
        let Target::Store(local) = self.target()? else { return Ok(None) };
        let mut core = lock(&local.core);
        attach_semantic(&mut core, local.embedder.as_ref(), !local.read_only);
        let mut done = 0;
        loop {
            let n = core.embed_pending(32)?;
            if n == 0 {
                return Ok(Some(done));
            }
            done += n;
            let model = core.semantic.as_ref().map(|s| s.model_id().to_owned()).unwrap_or_default();
            progress(done, core.store.count_pending_embeddings(&model)?);
        }
    }

    fn target(&self) -> Result<Target> {
        let mut slot = lock(&self.inner.target);
        if let Some(target) = slot.as_ref() {
            return Ok(target.clone());
        }
        let options = self.inner.options.as_ref().ok_or_else(|| CairnError::internal("client without a target"))?;
        let target = connect(options)?;
        *slot = Some(target.clone());
        Ok(target)
    }

    /// A daemon that stopped answering may have been restarted (on another port, even), or
    /// have left after its idle time: look again, start one if this process may, and only
    /// then fall back to the file (opened once).
    fn after_daemon_loss(&self, cause: &CairnError) -> Result<Target> {
        let Some(options) = self.inner.options.as_ref() else { return Err(cause.clone()) };
        let lost = self.daemon_addr();
        if options.starts_daemon_in_background() {
            // A hook has no time to wait for a new daemon; its writes go to the spool.
            return DaemonClient::discover(&options.data_dir, options.token.clone())
                .filter(|d| Some(d.addr) != lost)
                .map(Target::Daemon)
                .ok_or_else(|| cause.clone());
        }
        let found = DaemonClient::discover(&options.data_dir, options.token.clone()).filter(|d| Some(d.addr) != lost);
        // Start one at most once: after a failed start this process stays on the file.
        let may_start = lock(&self.inner.fallback).is_none();
        let restarted = found.or_else(|| {
            let exe = options.autostart.as_ref().filter(|_| may_start)?;
            autostart(exe, &options.data_dir, options.port, options.token.clone(), AUTOSTART_WAIT)
        });
        if let Some(daemon) = restarted {
            tracing::info!(addr = %daemon.addr, "the daemon moved; following it");
            let target = Target::Daemon(daemon);
            *lock(&self.inner.target) = Some(target.clone());
            return Ok(target);
        }
        let mut fallback = lock(&self.inner.fallback);
        if let Some(target) = fallback.as_ref() {
            return Ok(target.clone());
        }
        tracing::warn!(error = %cause, "daemon unavailable; opening the database directly");
        let target = open_local(options)?;
        *fallback = Some(target.clone());
        Ok(target)
    }

    fn daemon_addr(&self) -> Option<std::net::SocketAddr> {
        match lock(&self.inner.target).as_ref() {
            Some(Target::Daemon(d)) => Some(d.addr),
            _ => None,
        }
    }
}

/// The write sent to `daemon` under `id`, unless events kept before it still wait in the
/// spool (`Ok(None)`: it waits behind them, so it does not overtake them).
fn deliver_to_daemon(
    daemon: &DaemonClient,
    spool: &Spool,
    op: &Op,
    id: &EventId,
    left: impl Fn() -> Duration,
) -> Result<Option<EventOutcome>> {
    let behind = spool.status().pending > 0 && !matches!(daemon.drain_spool(left() / 2), Ok(0));
    if behind {
        return Ok(None);
    }
    daemon.execute_with(op, Some(id), left()).map(Some)
}

/// The running daemon of the data dir: a hook that may start one trusts its record (no health
/// round trip; the daemon refuses a request meant for another store), everyone else asks it
/// first.
fn find_daemon(options: &ConnectOptions) -> Option<DaemonClient> {
    if options.starts_daemon_in_background() {
        return DaemonClient::from_record(&options.data_dir, options.token.clone());
    }
    DaemonClient::discover(&options.data_dir, options.token.clone())
}

/// Find the daemon of the data dir, start one if allowed, else open the database here.
fn connect(options: &ConnectOptions) -> Result<Target> {
    if !options.direct {
        if let Some(daemon) = find_daemon(options) {
            tracing::debug!(addr = %daemon.addr, "using the running daemon");
            return Ok(Target::Daemon(daemon));
        }
        if options.starts_daemon_in_background()
            && let Some(exe) = &options.autostart
        {
            // A hook: start it, but do not wait (writes are spooled, reads fail open).
            start_in_background(exe, &options.data_dir, options.port);
            return Err(CairnError::new(ErrorCode::DaemonUnavailable, "the cairn daemon is starting")
                .with_hint("writes are kept in the spool until it runs"));
        }
        if let Some(exe) = &options.autostart {
            if let Some(daemon) = autostart(exe, &options.data_dir, options.port, options.token.clone(), AUTOSTART_WAIT)
            {
                tracing::debug!(addr = %daemon.addr, "started a daemon");
                return Ok(Target::Daemon(daemon));
            }
            tracing::warn!("could not start the daemon; opening the database directly");
        }
    }
    open_local(options)
}

fn open_local(options: &ConnectOptions) -> Result<Target> {
    ensure_data_dir(&options.data_dir)?;
    // Tests read this line to prove a process really worked on the file itself.
    tracing::debug!(db = %options.db_path.display(), kind = ?options.local, "opened the database file in this process");
    match options.local {
        LocalKind::Engine => {
            let semantic = options.embedder.as_ref().and_then(cairn_engine::embedder::semantic);
            Ok(Target::Engine(Engine::open_with(&options.db_path, semantic, Arc::clone(&options.rules))?))
        }
        LocalKind::Store | LocalKind::ReadOnly => {
            let read_only = matches!(options.local, LocalKind::ReadOnly);
            let store =
                if read_only { Store::open_read_only(&options.db_path)? } else { Store::open(&options.db_path)? };
            Ok(Target::Store(Arc::new(LocalStore {
                core: Mutex::new(Core::new(store).with_settings(Arc::clone(&options.rules))),
                embedder: options.embedder.clone(),
                read_only,
            })))
        }
    }
}

fn run_blocking(target: &Target, op: Op) -> Result<OpOutput> {
    match target {
        Target::Daemon(daemon) => daemon.execute(&op),
        Target::Engine(engine) => engine.execute_blocking(op),
        Target::Store(local) => local.run(op),
    }
}

fn needs_semantic(op: &Op) -> bool {
    match op {
        Op::Search(q) => q.mode != Some(SearchMode::Lexical),
        Op::Reindex(ReindexRequest { .. }) => true,
        _ => false,
    }
}

/// Load the model here for an operation that uses it (a few hundred milliseconds), and embed
/// a few memories saved without a daemon so they can be found (`catch_up`: not read-only).
fn attach_semantic(core: &mut Core, config: Option<&EmbedderConfig>, catch_up: bool) {
    let Some(config) = config else { return };
    if core.semantic.is_some() {
        return;
    }
    match cairn_engine::embedder::semantic_now(config) {
        Ok(semantic) => {
            core.semantic = Some(semantic);
            let prepared =
                core.load_vectors().and_then(|_| if catch_up { core.embed_pending(LOCAL_CATCH_UP) } else { Ok(0) });
            if let Err(e) = prepared {
                tracing::warn!(error = %e, "semantic search without a daemon: could not prepare vectors");
            }
        }
        Err(e) => tracing::debug!(error = %e, "semantic search is off"),
    }
}

/// `gc` on the file: it only needs to know which model's vectors to keep, so the model is
/// named (never loaded) for the length of the op.
fn gc_knowing_the_model(core: &mut Core, config: Option<&EmbedderConfig>, op: Op) -> Result<OpOutput> {
    core.semantic = config.and_then(cairn_engine::embedder::model_in_use).map(cairn_core::semantic::Semantic::pending);
    let output = ops::execute(core, op);
    core.semantic = None;
    output
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

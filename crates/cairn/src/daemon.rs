//! `cairn serve` (the daemon that owns the database) and `cairn mcp` (one per agent session,
//! forwarding to the daemon). Both are thin: settings → cairn-server entry points.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use cairn_client::{Client, ConnectOptions, DaemonClient, DaemonInfo, DaemonLock, Role, canonical_data_dir};
use cairn_core::settings::Settings;
use cairn_core::{CairnError, ErrorCode};
use cairn_engine::Engine;
use cairn_mcp::{McpOptions, ToolSelection};
use cairn_server::http::{AppState, HttpConfig, is_loopback};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::cli::ModelInstall;
use crate::output::note;

/// How long a stopping daemon waits for its background work (an embedding batch, the index
/// build) before it leaves anyway.
const ENGINE_STOP_WAIT: Duration = Duration::from_secs(5);
/// How long a starting daemon keeps trying a store that another process holds locked (a
/// backup, a `cairn` command writing directly, a daemon still finishing). Each attempt already
/// waits the store's busy timeout (10 s); a daemon that a host started, and that gave up, would
/// leave the host's writes in the spool until its next session.
const STORE_LOCKED_WAIT: Duration = Duration::from_secs(120);

/// Options of `cairn serve` beyond the settings.
pub struct ServeArgs {
    /// Leave after this long without a request (auto-started daemons).
    pub idle_exit: Option<Duration>,
    /// When the port is taken, listen on any free port (daemon.json tells clients where).
    pub or_any_port: bool,
    /// Whether to install a missing embedding model at start.
    pub model_install: ModelInstall,
    /// Where to download it from instead of the model's own address.
    pub model_url: Option<String>,
}

/// `cairn serve --detach`: start `cairn serve` with the same arguments (less `--detach`) in
/// a process group of its own, and leave at once. The daemon is then an orphan, adopted by
/// init (or the nearest subreaper), so it is in no one's process tree: OpenCode stops an MCP
/// server by SIGTERMing every descendant it finds with `pgrep -P` (seen with strace on
/// OpenCode 1.18.33), which took the daemon `cairn mcp` had started down with each
/// `opencode run`. The caller waits for this process, so no zombie is left either.
pub fn detach() -> Result<()> {
    let exe = std::env::current_exe()?;
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).filter(|a| a != "--detach").collect();
    let mut cmd = std::process::Command::new(exe);
    // stdio are inherited: the auto-start set them (stdin and stdout null, stderr the log)
    cmd.args(args);
    cairn_client::daemon::own_process_group(&mut cmd);
    cmd.spawn()?;
    Ok(())
}

pub fn serve(settings: &Settings, args: ServeArgs) -> Result<()> {
    let data_dir = canonical_data_dir(settings)?;
    let bind: IpAddr = settings.bind.value.parse().map_err(|_| {
        CairnError::new(
            ErrorCode::InvalidConfig,
            format!("bind address {:?} is not an IP address", settings.bind.value),
        )
    })?;
    if !is_loopback(&bind) && settings.http_token.value.is_none() {
        return Err(CairnError::new(
            ErrorCode::InvalidConfig,
            format!("refusing to listen on {bind} without a token: anyone on the network could read your memories"),
        )
        .with_hint("set CAIRN_HTTP_TOKEN (clients send it as a bearer token), or bind 127.0.0.1")
        .into());
    }
    let token = settings.http_token.value.clone();
    let Some(_lock) = take_daemon_lock(&data_dir, token, STORE_LOCKED_WAIT)? else {
        return Ok(());
    };
    survive_file_size_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(run_daemon(settings, data_dir, bind, args))
}

/// The data dir's daemon lock, or `None` when another daemon serves it (said on stderr: a
/// second start is not an error). While another process holds the lock without answering yet
/// (a daemon still opening the store), this waits for it to answer or to go, up to `wait`.
fn take_daemon_lock(data_dir: &std::path::Path, token: Option<String>, wait: Duration) -> Result<Option<DaemonLock>> {
    let started = std::time::Instant::now();
    loop {
        if let Some(running) = DaemonClient::discover(data_dir, token.clone()) {
            note(&format!("cairn is already serving {} at http://{}", data_dir.display(), running.addr));
            return Ok(None);
        }
        let taken = DaemonLock::try_take(data_dir).map_err(|e| {
            CairnError::new(ErrorCode::DataDirNotWritable, format!("cannot lock {}: {e}", data_dir.display()))
                .with_hint("check the data dir's permissions, or set CAIRN_DATA_DIR to a directory you own")
        })?;
        if let Some(lock) = taken {
            return Ok(Some(lock));
        }
        if started.elapsed() >= wait {
            let holder = DaemonLock::holder(data_dir).map_or_else(String::new, |pid| format!(" (pid {pid})"));
            return Err(CairnError::new(
                ErrorCode::DatabaseBusy,
                format!(
                    "another cairn daemon{holder} holds {} but has not answered in {} s",
                    data_dir.display(),
                    wait.as_secs()
                ),
            )
            .with_hint("wait for it to finish starting, or stop it and start again")
            .into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Past a file size limit (`ulimit -f`, RLIMIT_FSIZE) the kernel sends SIGXFSZ, whose default
/// action ends the process: the daemon would die on a write that does not fit instead of
/// refusing it. With a handler the write fails with EFBIG instead, SQLite rolls it back and
/// the caller gets `disk_full`; reads go on, and writes work again once the limit is raised.
/// A hook needs it too: its spool file on a full disk must fail, not end the hook unanswered.
pub(crate) fn survive_file_size_limit() {
    #[cfg(unix)]
    if let Err(e) =
        signal_hook::flag::register(signal_hook::consts::SIGXFSZ, Arc::new(std::sync::atomic::AtomicBool::new(false)))
    {
        tracing::warn!(error = %e, "SIGXFSZ not handled: a file size limit would end the daemon");
    }
}

/// How often the judge looks for memories that arrived without a commit of this daemon waking
/// it (another process wrote them).
const JUDGE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

async fn run_daemon(settings: &Settings, data_dir: PathBuf, bind: IpAddr, args: ServeArgs) -> Result<()> {
    let semantic = cairn_engine::embedder::semantic(&settings.embedder_config());
    let rules = Arc::new(settings.rules());
    let engine = open_engine(&data_dir, semantic, rules, STORE_LOCKED_WAIT).await?;
    engine.start_history(cairn_engine::history::HistoryScan::from_settings(&settings.history.config));
    // `[history] keep_days` / `max_bytes`: pruned on a thread of its own, now and once a day.
    if let Some(retention) = cairn_engine::retention::Retention::from_settings(&settings.history.config) {
        engine.start_retention(retention);
    }
    // What hooks and plugins kept while no daemon answered: applied now, in order, then on
    // every poke and every few seconds.
    engine.start_spool();
    // Sync with the hub of `[sync]` (idle until `cairn remote add` sets one).
    engine.start_autosync();
    crate::extract_cmd::start_in_daemon(&engine, &data_dir);
    // Every memory that arrives is judged against its neighbours, off the writes' path.
    engine.start_judging(JUDGE_EVERY);
    // Deep recall (`[search] deep`): off unless a search or the config asks for it.
    engine.set_deep_policy(cairn_engine::deep::DeepPolicy {
        by_default: settings.search.deep.value,
        timeout: std::time::Duration::from_millis(settings.search.deep_timeout_ms.value),
    });
    cairn_engine::embedder::watch_model(&engine, settings_now(settings));
    let install = if installs_model(args.model_install, args.or_any_port) {
        crate::model_cmd::model_to_install_at_start(settings)
    } else {
        None
    };
    let listener = bind_listener(bind, settings.port.value, args.or_any_port).await?;
    let addr = listener.local_addr()?;
    let cancel = CancellationToken::new();
    let mcp_options = McpOptions {
        tools: ToolSelection::parse("all")?,
        project: settings.project.value.clone(),
        cwd: std::env::current_dir().unwrap_or_else(|_| data_dir.clone()),
        version: cairn_core::VERSION.to_owned(),
        context_budget: settings.context_budget.value,
        host: None,
        instructions_context: None,
    };
    let mcp = cairn_mcp::http_router(Client::in_process(Arc::clone(&engine)), mcp_options, cancel.clone());
    let config = HttpConfig {
        token: settings.http_token.value.clone(),
        data_dir: Some(data_dir.clone()),
        version: cairn_core::VERSION.to_owned(),
        mcp: Some(mcp),
        context_budget: settings.context_budget.value,
        shutdown: cancel.clone(),
        ..HttpConfig::default()
    };
    let state = AppState { engine: Arc::clone(&engine), config: Arc::new(config) };
    let info = DaemonInfo {
        pid: std::process::id(),
        addr,
        data_dir: data_dir.clone(),
        version: cairn_core::VERSION.to_owned(),
        started_at: cairn_core::clock::now_ts(),
    };
    info.write()?;
    note(&format!("cairn {} serving {} at http://{addr}", cairn_core::VERSION, data_dir.display()));
    if let Some(spec) = install {
        // After the start line, and on a thread: the HTTP API answers (lexically) meanwhile.
        crate::model_cmd::install_in_background(spec, settings.model_dir.value.clone(), args.model_url.clone());
    }
    let shutdown = shutdown_signal(Arc::clone(&engine), args.idle_exit, cancel.clone());
    let served = cairn_server::http::serve(listener, state, shutdown).await;
    // Clients stop finding this daemon first, then the writer commits what was queued.
    DaemonInfo::remove_if_mine(&data_dir);
    let stopping = Arc::clone(&engine);
    tokio::task::spawn_blocking(move || stopping.stop(ENGINE_STOP_WAIT)).await?;
    Ok(served?)
}

/// Whether this start may download a missing model. By default only a daemon a person started
/// in a terminal does (the README's start command): 91 MB is a download to see happen, and a
/// daemon a host auto-started (`--or-any-port`), a service manager, a test or a benchmark
/// started stays offline and as it was measured.
/// The engine on the data dir's store, retried while the store is locked (`database_busy`)
/// until `wait` has passed; any other error at once.
async fn open_engine(
    data_dir: &std::path::Path,
    semantic: Option<Arc<cairn_core::search::semantic::Semantic>>,
    rules: Arc<cairn_core::settings::RuleSettings>,
    wait: Duration,
) -> Result<Arc<Engine>> {
    let started = std::time::Instant::now();
    let path = data_dir.join(cairn_core::store::DB_FILE);
    loop {
        match Engine::open_with(&path, semantic.clone(), Arc::clone(&rules)) {
            Err(e) if e.code == ErrorCode::DatabaseBusy && started.elapsed() < wait => {
                tracing::warn!(error = %e.message, "the store is locked by another process; trying again");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            opened => return Ok(opened?),
        }
    }
}

fn installs_model(choice: ModelInstall, auto_started: bool) -> bool {
    use std::io::IsTerminal as _;
    match choice {
        ModelInstall::Always => true,
        ModelInstall::Never => false,
        ModelInstall::Auto => !auto_started && std::io::stderr().is_terminal(),
    }
}

/// The embedder configuration the settings give now: config.toml read again (`cairn model
/// use` writes it), over the daemon's own environment and flags.
fn settings_now(settings: &Settings) -> impl Fn() -> Option<cairn_core::settings::EmbedderConfig> + Send + 'static {
    let overrides =
        cairn_core::settings::Overrides { data_dir: Some(settings.data_dir.value.clone()), ..Default::default() };
    move || {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        Settings::load_with(&overrides, &env).ok().map(|s| s.embedder_config())
    }
}

async fn bind_listener(bind: IpAddr, port: u16, or_any_port: bool) -> Result<TcpListener> {
    match TcpListener::bind(SocketAddr::new(bind, port)).await {
        Ok(listener) => Ok(listener),
        Err(e) if or_any_port && e.kind() == std::io::ErrorKind::AddrInUse => {
            Ok(TcpListener::bind(SocketAddr::new(bind, 0)).await?)
        }
        Err(e) => Err(CairnError::new(ErrorCode::InvalidConfig, format!("cannot listen on {bind}:{port}: {e}"))
            .with_hint("another program uses the port: pass --port N or set CAIRN_PORT")
            .into()),
    }
}

/// Resolves on SIGINT, SIGTERM or (when set) after an idle period; cancels MCP streams too.
async fn shutdown_signal(engine: Arc<Engine>, idle_exit: Option<Duration>, cancel: CancellationToken) {
    let idle = async {
        match idle_exit {
            Some(limit) => loop {
                tokio::time::sleep(Duration::from_secs(5).min(limit)).await;
                if engine.idle_for() >= limit {
                    note("cairn: idle, leaving");
                    break;
                }
            },
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = terminate() => {},
        () = idle => {},
    }
    cancel.cancel();
}

async fn terminate() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

/// `cairn mcp`: an MCP server on stdio whose tools run in the daemon (found, or started), or
/// on the database directly when no daemon can be had.
pub fn mcp(settings: &Settings, tools: &str, host: Option<&str>) -> Result<()> {
    let selection = ToolSelection::parse(tools)?;
    let host = host.map(cairn_core::agent::protocol::Host::parse).transpose()?;
    let options = ConnectOptions::from_settings(settings, Role::Mcp)?;
    let mcp_options = McpOptions {
        tools: selection,
        project: settings.project.value.clone(),
        cwd: std::env::current_dir()?,
        version: cairn_core::VERSION.to_owned(),
        context_budget: settings.context_budget.value,
        host,
        instructions_context: None,
    };
    let client = Client::new(options);
    client.warm_up();
    let mut mcp_options = mcp_options;
    if host == Some(cairn_core::agent::protocol::Host::Codex) {
        // Codex runs cairn's hooks only once the user trusted them: until then the project's
        // context reaches the model in the server's instructions.
        mcp_options.instructions_context = crate::setup::codex::mcp_context(
            &client,
            mcp_options.project.clone(),
            &mcp_options.cwd,
            mcp_options.context_budget,
        );
    }
    let codex = (host == Some(cairn_core::agent::protocol::Host::Codex))
        .then(|| Arc::new(crate::setup::codex::Rollouts::new(mcp_options.project.clone())));
    if let Some(rollouts) = &codex {
        // off the server's start: Codex waits for the MCP handshake
        let (client, rollouts) = (client.clone(), Arc::clone(rollouts));
        let _ = std::thread::Builder::new().name("codex-archive".into()).spawn(move || rollouts.archive(&client));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on({
        let client = client.clone();
        async move { cairn_mcp::serve_stdio(client, mcp_options).await }
    })?;
    if let Some(rollouts) = codex {
        rollouts.archive(&client);
    }
    Ok(())
}

//! The runner: targets, phases, and what each phase sends.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::sync_channel;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde::Serialize;
use serde_json::{Value, json};

use crate::http::{BaseUrl, Client, Response, encode};
use crate::procs::{self, Server};
use crate::stats::{Summary, summarize};
use crate::workload::{QueryKind, Workload, live_session_id};
use crate::{mcp, note};

/// Every phase, in run order.
pub const PHASES: &[&str] = &[
    "cold-start",
    "load",
    "save-seq",
    "save-conc",
    "search-project",
    "search-all",
    "search-question",
    "context",
    "recent",
    "timeline",
    "mcp-roundtrip",
];

#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// Memories in the store before the timed phases (loaded through /import).
    pub size: u64,
    pub seed: u64,
    /// Concurrent clients in save-conc.
    pub clients: usize,
    /// Memories per /import request.
    pub batch: u64,
    pub saves: usize,
    pub conc_saves: usize,
    /// Requests per search phase.
    pub searches: usize,
    /// Requests per context / recent / timeline phase.
    pub reads: usize,
    pub cold_starts: usize,
    pub mcp_spawns: usize,
    pub mcp_calls: usize,
    /// Time cap per timed phase, seconds.
    pub phase_secs: f64,
    /// Time cap for load, seconds.
    pub load_secs: f64,
    /// Per-request timeout, seconds.
    pub request_timeout_secs: f64,
    /// `mode=` passed to /search (cairn: lexical | semantic | hybrid).
    pub mode: Option<String>,
    pub cairn_bin: PathBuf,
    /// Only these phases (None: all).
    pub phases: Option<Vec<String>>,
}

impl Config {
    pub fn full() -> Self {
        Self {
            size: 10_000,
            seed: 42,
            clients: 4,
            batch: 5_000,
            saves: 1_000,
            conc_saves: 2_000,
            searches: 500,
            reads: 300,
            cold_starts: 5,
            mcp_spawns: 5,
            mcp_calls: 20,
            phase_secs: 60.0,
            load_secs: 3_600.0,
            request_timeout_secs: 30.0,
            mode: None,
            cairn_bin: PathBuf::from("target/release/cairn"),
            phases: None,
        }
    }

    /// CI smoke: a small store and small counts.
    pub fn quick() -> Self {
        Self {
            size: 2_000,
            saves: 100,
            conc_saves: 200,
            searches: 50,
            reads: 30,
            cold_starts: 3,
            mcp_spawns: 2,
            mcp_calls: 5,
            phase_secs: 20.0,
            load_secs: 120.0,
            ..Self::full()
        }
    }

    fn wants(&self, phase: &str) -> bool {
        self.phases.as_ref().is_none_or(|p| p.iter().any(|x| x == phase))
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.request_timeout_secs)
    }
}

/// What to benchmark.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", content = "value", rename_all = "lowercase")]
pub enum TargetSpec {
    /// An already running server.
    Url(String),
    /// A command the bench starts (`{port}` is replaced by a free port).
    Spawn(String),
}

impl TargetSpec {
    /// `http://…` is a URL, anything else a command.
    pub fn parse(s: &str) -> Self {
        if s.starts_with("http://") || s.starts_with("https://") {
            Self::Url(s.to_owned())
        } else {
            Self::Spawn(s.to_owned())
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Self::Url(u) => u.clone(),
            Self::Spawn(c) => format!("spawn: {c}"),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct PhaseResult {
    pub name: String,
    /// Successful operations (requests; spawns for cold-start and mcp-init).
    pub ok: usize,
    pub errors: usize,
    /// Wall time of the phase, seconds.
    pub secs: f64,
    /// Successful operations per second (memories per second for load).
    pub rate: f64,
    pub unit: &'static str,
    /// Latency of each operation, ms.
    pub latency: Summary,
    /// Mean number of results per search / recent request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_hits: Option<f64>,
    /// Share of searches that returned nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_share: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl PhaseResult {
    fn skipped(name: &str, why: impl Into<String>) -> Self {
        Self { name: name.to_owned(), skipped: Some(why.into()), ..Self::default() }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct TargetReport {
    pub label: String,
    pub target: TargetSpec,
    /// `service` and `version` from /health, when it says.
    pub service: String,
    pub phases: Vec<PhaseResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cold_start_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_bytes: Option<u64>,
    /// Observations in the store at the end, from /stats.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_observations: Option<u64>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub phase: String,
    /// B p50 / A p50 (below 1: B is faster).
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    /// B rate / A rate (above 1: B does more per second).
    pub rate: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub bench_version: &'static str,
    pub config: Config,
    pub targets: Vec<TargetReport>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ratios: Vec<Ratio>,
    pub wall_secs: f64,
}

struct Target {
    base: BaseUrl,
    server: Option<Server>,
    /// Data dir of the target, when known (spawned, or given): needed for mcp-roundtrip.
    data_dir: Option<PathBuf>,
    saved_ids: Vec<i64>,
    live_sessions: bool,
    dead: Option<String>,
    report: TargetReport,
}

impl Target {
    fn tag(&self) -> String {
        format!("[{}]", self.report.label)
    }

    fn is_cairn(&self) -> bool {
        self.report.service.to_lowercase().contains("cairn")
            || matches!(&self.report.target, TargetSpec::Spawn(c) if procs::split_command(c).first().is_some_and(|p| p.contains("cairn")))
    }
}

/// Run everything on one or two targets (two: phases alternate A, B, A, B …).
pub fn run(cfg: &Config, specs: &[TargetSpec], url_data_dir: Option<PathBuf>) -> Result<Report> {
    let started = Instant::now();
    if specs.is_empty() || specs.len() > 2 {
        bail!("give one target (--url or --spawn), and optionally --compare");
    }
    for s in specs {
        if let TargetSpec::Url(u) = s {
            BaseUrl::parse(u).map_err(anyhow::Error::msg)?;
        }
    }
    let workload = Workload::new(cfg.seed);
    let labels = ["A", "B"];

    // Cold starts first, on their own processes, alternating targets start by start. Each
    // target gets one store: its first start creates it (reported apart), and every later
    // start is a restart on it, as when a plugin starts the daemon again for a new session.
    let mut cold: Vec<Vec<f64>> = vec![Vec::new(); specs.len()];
    let mut first: Vec<Option<f64>> = vec![None; specs.len()];
    let mut cold_errors: Vec<Vec<String>> = vec![Vec::new(); specs.len()];
    if cfg.wants("cold-start") {
        let stores: Vec<PathBuf> =
            labels.iter().take(specs.len()).map(|l| procs::fresh_dir(&format!("cold{l}"))).collect::<Result<_>>()?;
        for round in 0..=cfg.cold_starts {
            for (i, spec) in specs.iter().enumerate() {
                if let TargetSpec::Spawn(cmd) = spec {
                    match procs::spawn_server_on(
                        cmd,
                        &format!("cold{}", labels[i]),
                        &stores[i],
                        Duration::from_secs(30),
                    ) {
                        Ok(server) => {
                            let ms = server.ready_after.as_secs_f64() * 1000.0;
                            if round == 0 {
                                first[i] = Some(ms);
                            } else {
                                cold[i].push(ms);
                            }
                            server.stop_gracefully();
                        }
                        Err(e) => cold_errors[i].push(e.to_string()),
                    }
                }
            }
        }
        for store in stores {
            let _ = std::fs::remove_dir_all(store);
        }
    }

    let mut targets = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let label = labels[i].to_owned();
        let (base, server, data_dir) = match spec {
            TargetSpec::Url(u) => (BaseUrl::parse(u).map_err(anyhow::Error::msg)?, None, url_data_dir.clone()),
            TargetSpec::Spawn(cmd) => {
                note(&format!("[{label}] starting {cmd}"));
                let server = procs::spawn_server(cmd, &format!("data{label}"), Duration::from_secs(120))?;
                let data_dir = Some(server.data_dir.clone());
                (server.base.clone(), Some(server), data_dir)
            }
        };
        let mut client = Client::new(base.clone(), cfg.timeout());
        let health =
            client.get("/health").map_err(|e| anyhow::anyhow!("{}: GET /health failed: {e}", spec.describe()))?;
        if !health.ok() {
            bail!("{}: GET /health answered {}", spec.describe(), health.describe());
        }
        let h = health.json().unwrap_or(Value::Null);
        let service = [h.get("service"), h.get("version")]
            .iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        let mut report = TargetReport {
            label,
            target: spec.clone(),
            service,
            phases: Vec::new(),
            cold_start_ms: None,
            peak_rss_bytes: None,
            disk_bytes: None,
            final_observations: None,
            notes: Vec::new(),
        };
        if cfg.wants("cold-start") {
            let mut p = match spec {
                TargetSpec::Spawn(_) => latency_phase("cold-start", &cold[i], cold_errors[i].len(), "starts/s"),
                TargetSpec::Url(_) => PhaseResult::skipped("cold-start", "needs --spawn"),
            };
            p.notes.extend(cold_errors[i].iter().take(3).cloned());
            if !cold[i].is_empty() {
                report.cold_start_ms = Some(p.latency.p50);
                p.notes
                    .push(format!("spawn → first 200 from /health on an existing store, median of {}", cold[i].len()));
                if let Some(ms) = first[i] {
                    p.notes.push(format!("first start, creating the store: {ms:.1} ms"));
                }
            }
            report.phases.push(p);
        }
        targets.push(Target {
            base,
            server,
            data_dir,
            saved_ids: Vec::new(),
            live_sessions: false,
            dead: None,
            report,
        });
    }

    for phase in PHASES.iter().filter(|p| **p != "cold-start" && cfg.wants(p)) {
        for t in &mut targets {
            if let Some(why) = &t.dead {
                let why = why.clone();
                t.report.phases.push(PhaseResult::skipped(phase, why));
                continue;
            }
            let results = run_phase(cfg, &workload, t, phase);
            for r in results {
                if r.skipped.is_none() {
                    note(&format!(
                        "{} {:<16} ok {:>7} err {:>5}  {:>9.1} {}  p50 {:.2} ms  p99 {:.2} ms",
                        t.tag(),
                        r.name,
                        r.ok,
                        r.errors,
                        r.rate,
                        r.unit,
                        r.latency.p50,
                        r.latency.p99
                    ));
                } else {
                    note(&format!("{} {:<16} skipped: {}", t.tag(), r.name, r.skipped.as_deref().unwrap_or_default()));
                }
                t.report.phases.push(r);
            }
            if let Some(server) = &t.server
                && let Some(status) = server.guard.try_wait()
            {
                let why = format!("server exited ({status}) during {phase}");
                t.report.notes.push(format!("{why}; last output:\n{}", procs::tail(&server.log, 15)));
                t.dead = Some(why);
            }
        }
    }

    for t in &mut targets {
        let mut client = Client::new(t.base.clone(), cfg.timeout());
        t.report.final_observations = store_size(&mut client);
        if let Some(server) = t.server.take() {
            t.report.peak_rss_bytes = procs::peak_rss(server.guard.pid);
            t.report.disk_bytes = Some(procs::disk_usage(&server.data_dir));
            drop(server);
        }
    }

    let ratios = if targets.len() == 2 { ratios(&targets[0].report, &targets[1].report) } else { Vec::new() };
    Ok(Report {
        bench_version: env!("CARGO_PKG_VERSION"),
        config: cfg.clone(),
        targets: targets.into_iter().map(|t| t.report).collect(),
        ratios,
        wall_secs: started.elapsed().as_secs_f64(),
    })
}

fn ratios(a: &TargetReport, b: &TargetReport) -> Vec<Ratio> {
    let div = |x: f64, y: f64| (y > 0.0 && x > 0.0).then(|| x / y);
    a.phases
        .iter()
        .filter(|p| p.skipped.is_none())
        .filter_map(|pa| {
            let pb = b.phases.iter().find(|p| p.name == pa.name && p.skipped.is_none())?;
            Some(Ratio {
                phase: pa.name.clone(),
                p50: div(pb.latency.p50, pa.latency.p50),
                p99: div(pb.latency.p99, pa.latency.p99),
                rate: div(pb.rate, pa.rate),
            })
        })
        .collect()
}

fn run_phase(cfg: &Config, w: &Workload, t: &mut Target, phase: &str) -> Vec<PhaseResult> {
    let cap = Duration::from_secs_f64(cfg.phase_secs);
    let mode = cfg.mode.as_deref().map(|m| format!("&mode={}", encode(m))).unwrap_or_default();
    match phase {
        "load" => vec![load(cfg, w, t)],
        "save-seq" | "save-conc" => {
            ensure_live_sessions(cfg, w, t);
            let (clients, count, offset) =
                if phase == "save-seq" { (1, cfg.saves, 0) } else { (cfg.clients.max(1), cfg.conc_saves, 1 << 32) };
            let tally = drive(&t.base, clients, count, cap, cfg.timeout(), |c, i| {
                let m = w.live_memory(offset + i as u64);
                let mut body = json!({
                    "session_id": m.session_id, "type": m.kind, "title": m.title, "content": m.content,
                    "project": m.project, "scope": m.scope,
                });
                if let Some(k) = &m.topic_key {
                    body["topic_key"] = json!(k);
                }
                let body = serde_json::to_vec(&body).unwrap_or_default();
                let (ms, r) = timed(|| c.post_json("/observations", &body));
                Op {
                    ms,
                    outcome: r
                        .map(|r| Extra { id: r.json().and_then(|v| v.get("id").and_then(Value::as_i64)), hits: None }),
                }
            });
            t.saved_ids.extend(&tally.ids);
            let mut p = tally.result(phase, "req/s");
            if clients > 1 {
                p.notes.push(format!("{clients} clients"));
            }
            vec![p]
        }
        "search-project" | "search-all" | "search-question" => {
            let kind = match phase {
                "search-project" => QueryKind::Project,
                "search-all" => QueryKind::All,
                _ => QueryKind::Question,
            };
            let tally = drive(&t.base, 1, cfg.searches, cap, cfg.timeout(), |c, i| {
                let q = w.query(kind, i as u64);
                let mut path = format!("/search?q={}&limit=10", encode(&q.text));
                if let Some(p) = q.project {
                    path.push_str(&format!("&project={}", encode(p)));
                }
                path.push_str(&mode);
                let (ms, r) = timed(|| c.get(&path));
                Op { ms, outcome: r.map(|r| Extra { id: None, hits: Some(r.json().map_or(0, |v| count_results(&v))) }) }
            });
            vec![tally.result(phase, "req/s")]
        }
        "context" | "recent" => {
            let projects = w.project_names();
            let tally = drive(&t.base, 1, cfg.reads, cap, cfg.timeout(), |c, i| {
                let p = encode(projects[(i * 7) % projects.len()]);
                let path = if phase == "context" {
                    format!("/context?project={p}")
                } else {
                    format!("/observations/recent?project={p}&limit=20")
                };
                let (ms, r) = timed(|| c.get(&path));
                let hits = phase == "recent";
                Op {
                    ms,
                    outcome: r
                        .map(|r| Extra { id: None, hits: hits.then(|| r.json().map_or(0, |v| count_results(&v))) }),
                }
            });
            let mut p = tally.result(phase, "req/s");
            if phase == "context" {
                p.mean_hits = None;
                p.empty_share = None;
            }
            vec![p]
        }
        "timeline" => {
            if t.saved_ids.is_empty() {
                t.saved_ids = recent_ids(cfg, w, t);
            }
            if t.saved_ids.is_empty() {
                return vec![PhaseResult::skipped(phase, "no observation ids (run save-seq first)")];
            }
            let ids = t.saved_ids.clone();
            let tally = drive(&t.base, 1, cfg.reads, cap, cfg.timeout(), |c, i| {
                let id = ids[(i * 7919) % ids.len()];
                let (ms, r) = timed(|| c.get(&format!("/timeline?observation_id={id}")));
                Op { ms, outcome: r.map(|_| Extra::default()) }
            });
            vec![tally.result(phase, "req/s")]
        }
        "mcp-roundtrip" => mcp_phase(cfg, w, t),
        other => vec![PhaseResult::skipped(other, "unknown phase")],
    }
}

fn mcp_phase(cfg: &Config, w: &Workload, t: &Target) -> Vec<PhaseResult> {
    let skip = |why: String| vec![PhaseResult::skipped("mcp-roundtrip", why)];
    if !t.is_cairn() {
        return skip(format!("cairn only (target reports {:?})", t.report.service));
    }
    let Some(dir) = &t.data_dir else { return skip("needs --spawn, or --data-dir for a --url target".into()) };
    if !cfg.cairn_bin.exists() {
        return skip(format!("{} not found (--cairn-bin)", cfg.cairn_bin.display()));
    }
    let queries: Vec<(String, String)> = (0..cfg.mcp_calls.max(1) * cfg.mcp_spawns.max(1))
        .map(|i| {
            let q = w.query(QueryKind::Project, 1_000_000 + i as u64);
            (q.text, q.project.unwrap_or_default().to_owned())
        })
        .collect();
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(cfg.phase_secs);
    let run = mcp::run(&cfg.cairn_bin, dir, &queries, cfg.mcp_spawns, cfg.mcp_calls, cfg.timeout(), deadline);
    let secs = started.elapsed().as_secs_f64();
    let mut init = latency_phase("mcp-init", &run.init_ms, run.init_errors, "spawns/s");
    init.notes.push(format!("spawn `cairn mcp` → initialize answered; median of {}", run.init_ms.len()));
    init.notes.extend(run.error_samples.iter().cloned());
    let mut search = latency_phase("mcp-search", &run.call_ms, run.errors, "req/s");
    search.secs = secs;
    search.notes.push("tools/call mem_search over stdio (forwarded to the daemon)".into());
    vec![init, search]
}

/// A phase made of separately measured events (cold starts, MCP spawns).
fn latency_phase(name: &str, ms: &[f64], errors: usize, unit: &'static str) -> PhaseResult {
    let secs = ms.iter().sum::<f64>() / 1000.0;
    PhaseResult {
        name: name.to_owned(),
        ok: ms.len(),
        errors,
        secs,
        rate: if secs > 0.0 { ms.len() as f64 / secs } else { 0.0 },
        unit,
        latency: summarize(ms),
        ..PhaseResult::default()
    }
}

/// After a bulk load a server may index in the background (cairn reports `search_index:
/// "building"` on /health); measure searches only once it is done. Servers that do not say
/// are not waited for. Returns how long it took.
fn wait_for_search_index(client: &mut Client, cap: Duration) -> Option<Duration> {
    let began = Instant::now();
    loop {
        let state = client
            .get("/health")
            .ok()
            .and_then(|r| r.json())
            .and_then(|v| v.get("search_index").and_then(Value::as_str).map(str::to_owned));
        match state.as_deref() {
            Some("building") if began.elapsed() < cap => std::thread::sleep(Duration::from_millis(100)),
            Some(_) => return Some(began.elapsed()),
            None => return None,
        }
    }
}

fn load(cfg: &Config, w: &Workload, t: &mut Target) -> PhaseResult {
    let mut client = Client::new(t.base.clone(), cfg.timeout().max(Duration::from_secs(600)));
    let existing = store_size(&mut client).unwrap_or(0);
    if existing >= cfg.size {
        return PhaseResult::skipped("load", format!("store already holds {existing} ≥ {} memories", cfg.size));
    }
    let (start, end, batch) = (existing, cfg.size, cfg.batch.max(1));
    let cap = Duration::from_secs_f64(cfg.load_secs);
    let (tx, rx) = sync_channel::<(u64, Vec<u8>)>(2);
    let mut lat = Vec::new();
    let (mut errors, mut loaded, mut imported, mut samples) = (0usize, 0u64, 0u64, Vec::new());
    let mut consecutive_errors = 0;
    let mut body_bytes = 0usize;
    let began = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = start;
            while i < end {
                let j = (i + batch).min(end);
                if tx.send((j - i, w.import_body(i, j))).is_err() {
                    break;
                }
                i = j;
            }
            drop(tx);
        });
        for (n, body) in &rx {
            body_bytes += body.len();
            let (ms, r) = timed(|| client.post_json("/import", &body));
            lat.push(ms);
            match r {
                Ok(r) => {
                    loaded += n;
                    consecutive_errors = 0;
                    imported +=
                        r.json().and_then(|v| v.get("observations_imported").and_then(Value::as_u64)).unwrap_or(n);
                }
                Err(e) => {
                    errors += 1;
                    consecutive_errors += 1;
                    push_sample(&mut samples, e);
                }
            }
            note(&format!("{} load {}/{} ({:.0} s)", t.tag(), start + loaded, end, began.elapsed().as_secs_f64()));
            if began.elapsed() > cap {
                samples.push(format!("stopped at the {:.0} s cap", cap.as_secs_f64()));
                break;
            }
            if consecutive_errors >= 3 {
                samples.push("stopped after 3 failed imports in a row".into());
                break;
            }
        }
        drop(rx);
    });
    let secs = began.elapsed().as_secs_f64();
    let settled = wait_for_search_index(&mut client, cfg.timeout().max(Duration::from_secs(300)));
    let mut p = PhaseResult {
        name: "load".into(),
        ok: lat.len() - errors,
        errors,
        secs,
        rate: loaded as f64 / secs.max(1e-9),
        unit: "mem/s",
        latency: summarize(&lat),
        ..PhaseResult::default()
    };
    p.notes.push(format!(
        "{loaded} memories in {} requests of ≤{batch} ({:.1} MiB JSON){}",
        lat.len(),
        body_bytes as f64 / f64::from(1 << 20),
        if existing > 0 { format!("; {existing} were already there") } else { String::new() }
    ));
    if imported != loaded {
        p.notes.push(format!("server reports {imported} observations imported of {loaded} sent"));
    }
    p.notes.extend(samples);
    if let Some(waited) = settled {
        p.notes.push(format!("then waited {:.1} s for the server's search index", waited.as_secs_f64()));
    }
    p
}

/// Sessions the live saves go to (engram refuses a save naming an unknown session).
fn ensure_live_sessions(cfg: &Config, w: &Workload, t: &mut Target) {
    if t.live_sessions {
        return;
    }
    t.live_sessions = true;
    let mut c = Client::new(t.base.clone(), cfg.timeout());
    let mut failures = Vec::new();
    for p in w.project_names() {
        let body = json!({"id": live_session_id(p), "project": p, "directory": format!("/home/dev/src/{p}")});
        match c.post_json("/sessions", body.to_string().as_bytes()) {
            Ok(r) if r.ok() => {}
            Ok(r) => push_sample(&mut failures, format!("POST /sessions: {}", r.describe())),
            Err(e) => push_sample(&mut failures, format!("POST /sessions: {e}")),
        }
    }
    t.report.notes.extend(failures);
}

/// Observation ids to use for timeline when no save phase ran.
fn recent_ids(cfg: &Config, w: &Workload, t: &Target) -> Vec<i64> {
    let mut c = Client::new(t.base.clone(), cfg.timeout());
    let mut ids = Vec::new();
    for p in w.project_names() {
        if let Ok(r) = c.get(&format!("/observations/recent?project={}&limit=20", encode(p)))
            && let Some(v) = r.json()
        {
            let items = match &v {
                Value::Array(a) => a.clone(),
                Value::Object(o) => o.values().find_map(|x| x.as_array().cloned()).unwrap_or_default(),
                _ => Vec::new(),
            };
            ids.extend(items.iter().filter_map(|o| o.get("id").and_then(Value::as_i64)));
        }
    }
    ids
}

/// Observations in the store, from /stats (engram: total_observations).
fn store_size(c: &mut Client) -> Option<u64> {
    let v = c.get("/stats").ok().filter(Response::ok)?.json()?;
    ["total_observations", "observations", "memories"].iter().find_map(|k| {
        let x = v.get(*k)?;
        x.as_u64().or_else(|| x.get("total").and_then(Value::as_u64))
    })
}

/// Results in a search/list response: an array, `null` (engram's empty), or an object
/// holding an array (`results`, `observations`, …).
pub fn count_results(v: &Value) -> usize {
    match v {
        Value::Array(a) => a.len(),
        Value::Object(o) => ["results", "observations", "items", "hits", "data"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_array))
            .or_else(|| o.values().find_map(Value::as_array))
            .map_or(0, Vec::len),
        _ => 0,
    }
}

#[derive(Debug, Default)]
struct Extra {
    id: Option<i64>,
    hits: Option<usize>,
}

struct Op {
    ms: f64,
    outcome: Result<Extra, String>,
}

fn timed(f: impl FnOnce() -> Result<Response, crate::http::Error>) -> (f64, Result<Response, String>) {
    let t = Instant::now();
    let r = f();
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let r = match r {
        Ok(r) if r.ok() => Ok(r),
        Ok(r) => Err(r.describe()),
        Err(e) => Err(format!("{e}")),
    };
    (ms, r)
}

#[derive(Debug, Default)]
struct Tally {
    latencies: Vec<f64>,
    errors: usize,
    samples: Vec<String>,
    hits: Vec<usize>,
    ids: Vec<i64>,
    secs: f64,
}

impl Tally {
    fn result(self, name: &str, unit: &'static str) -> PhaseResult {
        let ok = self.latencies.len() - self.errors;
        let mut p = PhaseResult {
            name: name.to_owned(),
            ok,
            errors: self.errors,
            secs: self.secs,
            rate: ok as f64 / self.secs.max(1e-9),
            unit,
            latency: summarize(&self.latencies),
            notes: self.samples,
            ..PhaseResult::default()
        };
        if !self.hits.is_empty() {
            let n = self.hits.len() as f64;
            p.mean_hits = Some(self.hits.iter().sum::<usize>() as f64 / n);
            p.empty_share = Some(self.hits.iter().filter(|h| **h == 0).count() as f64 / n);
        }
        p
    }
}

fn push_sample(samples: &mut Vec<String>, msg: String) {
    if samples.len() < 3 && !samples.contains(&msg) {
        samples.push(msg);
    }
}

/// Run `count` operations on `clients` connections (each its own thread when > 1), stopping
/// early at `cap`. Latency counts every request, failed or not.
fn drive<F>(base: &BaseUrl, clients: usize, count: usize, cap: Duration, timeout: Duration, op: F) -> Tally
where
    F: Fn(&mut Client, usize) -> Op + Sync,
{
    let next = AtomicUsize::new(0);
    let merged = Mutex::new(Tally::default());
    let began = Instant::now();
    let worker = || {
        let mut client = Client::new(base.clone(), timeout);
        let mut local = Tally::default();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= count || began.elapsed() > cap {
                break;
            }
            let Op { ms, outcome } = op(&mut client, i);
            local.latencies.push(ms);
            match outcome {
                Ok(extra) => {
                    local.ids.extend(extra.id);
                    local.hits.extend(extra.hits);
                }
                Err(msg) => {
                    local.errors += 1;
                    push_sample(&mut local.samples, msg);
                }
            }
        }
        let mut m = merged.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        m.latencies.extend(local.latencies);
        m.errors += local.errors;
        for s in local.samples {
            push_sample(&mut m.samples, s);
        }
        m.hits.extend(local.hits);
        m.ids.extend(local.ids);
    };
    if clients <= 1 {
        worker();
    } else {
        std::thread::scope(|s| {
            for _ in 0..clients {
                s.spawn(worker);
            }
        });
    }
    let mut t = merged.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    t.secs = began.elapsed().as_secs_f64();
    if count > 0 && t.latencies.len() < count {
        t.samples.push(format!("stopped at the {:.0} s cap after {} of {count}", cap.as_secs_f64(), t.latencies.len()));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_results_of_every_shape() {
        assert_eq!(count_results(&Value::Null), 0);
        assert_eq!(count_results(&json!([1, 2])), 2);
        assert_eq!(count_results(&json!({"results": [1, 2, 3], "total": 9})), 3);
        assert_eq!(count_results(&json!({"query": "x", "memories": [1]})), 1);
        assert_eq!(count_results(&json!({"error": "x"})), 0);
    }

    #[test]
    fn target_specs() {
        assert_eq!(TargetSpec::parse("http://127.0.0.1:7437"), TargetSpec::Url("http://127.0.0.1:7437".into()));
        assert!(matches!(TargetSpec::parse("engram serve {port}"), TargetSpec::Spawn(_)));
        let mut c = Config::quick();
        assert!(c.wants("load"));
        c.phases = Some(vec!["load".into()]);
        assert!(!c.wants("context"));
    }
}

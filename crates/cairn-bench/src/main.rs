//! `cairn-bench`: see README.md.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use cairn_bench::bench::{self, Config, PHASES, TargetSpec};
use cairn_bench::{procs, report};
use clap::Parser;

/// Seeded load and latency benchmark for servers speaking engram's HTTP API (cairn, engram).
#[derive(Debug, Parser)]
#[command(
    version,
    about,
    after_help = "Example: cairn-bench --spawn \"target/release/cairn serve --port {port}\" --size 100000"
)]
struct Args {
    /// Benchmark an already running server (loopback only), e.g. http://127.0.0.1:7437
    #[arg(long, conflicts_with = "spawn")]
    url: Option<String>,
    /// Start the server: a command line with {port}; it gets a fresh temp data dir
    /// (CAIRN_DATA_DIR, ENGRAM_DATA_DIR) and CAIRN_AUTOSTART=never
    #[arg(long)]
    spawn: Option<String>,
    /// A second target (URL or command), run alternately phase by phase; prints B/A ratios
    #[arg(long, value_name = "URL_OR_CMD")]
    compare: Option<String>,
    /// Memories in the store before the timed phases (e.g. 10000, 100000, 1000000)
    #[arg(long)]
    size: Option<u64>,
    /// Small store and counts, for CI smoke runs (size 2000 unless --size)
    #[arg(long)]
    quick: bool,
    /// Concurrent clients for save-conc
    #[arg(long)]
    clients: Option<usize>,
    /// Workload seed (same seed, same memories and queries)
    #[arg(long)]
    seed: Option<u64>,
    /// Memories per POST /import request
    #[arg(long)]
    batch: Option<u64>,
    /// Sequential saves (save-seq)
    #[arg(long)]
    saves: Option<usize>,
    /// Concurrent saves in total (save-conc)
    #[arg(long)]
    conc_saves: Option<usize>,
    /// Requests per search phase
    #[arg(long)]
    searches: Option<usize>,
    /// Requests per context / recent / timeline phase
    #[arg(long)]
    reads: Option<usize>,
    /// Fresh starts measured for cold start (--spawn targets)
    #[arg(long)]
    cold_starts: Option<usize>,
    /// `cairn mcp` processes spawned in mcp-roundtrip
    #[arg(long)]
    mcp_spawns: Option<usize>,
    /// mem_search calls per `cairn mcp` process
    #[arg(long)]
    mcp_calls: Option<usize>,
    /// Time cap per phase, seconds
    #[arg(long)]
    phase_secs: Option<f64>,
    /// Time cap for the load phase, seconds
    #[arg(long)]
    load_secs: Option<f64>,
    /// Per-request timeout, seconds
    #[arg(long)]
    timeout_secs: Option<f64>,
    /// Search mode passed through as &mode= (cairn: lexical, semantic, hybrid)
    #[arg(long, value_parser = ["lexical", "semantic", "hybrid"])]
    mode: Option<String>,
    /// cairn binary for mcp-roundtrip
    #[arg(long, default_value = "target/release/cairn")]
    cairn_bin: PathBuf,
    /// Data dir of a --url cairn target (enables mcp-roundtrip for it)
    #[arg(long, requires = "url")]
    data_dir: Option<PathBuf>,
    /// Only these phases (comma-separated): cold-start, load, save-seq, save-conc, search-project,
    /// search-all, search-question, context, recent, timeline, mcp-roundtrip
    #[arg(long, value_delimiter = ',')]
    phases: Option<Vec<String>>,
    /// Also write the report as JSON to this file
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn config(a: &Args) -> Result<Config> {
    let mut c = if a.quick { Config::quick() } else { Config::full() };
    macro_rules! set {
        ($($field:ident <- $arg:ident),*) => { $(if let Some(v) = a.$arg.clone() { c.$field = v; })* };
    }
    set!(size <- size, clients <- clients, seed <- seed, batch <- batch, saves <- saves, conc_saves <- conc_saves,
         searches <- searches, reads <- reads, cold_starts <- cold_starts, mcp_spawns <- mcp_spawns,
         mcp_calls <- mcp_calls, phase_secs <- phase_secs, load_secs <- load_secs, request_timeout_secs <- timeout_secs);
    c.mode.clone_from(&a.mode);
    c.cairn_bin.clone_from(&a.cairn_bin);
    if let Some(phases) = &a.phases {
        for p in phases {
            if !PHASES.contains(&p.as_str()) {
                bail!("unknown phase {p:?}; phases: {}", PHASES.join(", "));
            }
        }
        c.phases = Some(phases.clone());
    }
    if c.clients == 0 || c.batch == 0 {
        bail!("--clients and --batch must be at least 1");
    }
    Ok(c)
}

fn main() -> Result<()> {
    let args = Args::parse();
    let cfg = config(&args)?;
    let mut specs = Vec::new();
    match (&args.url, &args.spawn) {
        (Some(u), None) => specs.push(TargetSpec::Url(u.clone())),
        (None, Some(cmd)) => specs.push(TargetSpec::Spawn(cmd.clone())),
        _ => bail!("give a target: --url http://127.0.0.1:PORT or --spawn \"CMD ... {{port}}\""),
    }
    if let Some(b) = &args.compare {
        specs.push(TargetSpec::parse(b));
    }
    procs::install_signal_handler();
    let result = bench::run(&cfg, &specs, args.data_dir.clone());
    procs::kill_all();
    let report = result?;
    print!("{}", report::render(&report));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

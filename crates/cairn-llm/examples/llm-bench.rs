//! The local model on a 20-turn coding session: prompt evaluation and generation tokens/s, the
//! seconds of the whole extraction call, and the process's peak RSS.
//!
//! ```text
//! cargo run --release -p cairn-llm --features local --example llm-bench -- [MODEL...]
//! ```
//! MODEL is a catalogue name (default: every model whose file `scripts/install-test-deps.sh llm
//! llm-qwen` installed). `CANDLE_NUM_THREADS` sets the threads. Each model runs in its own
//! process (the example re-runs itself), so each peak RSS is that model's alone. `--runs N`
//! runs each N times, and `--compare` alternates cairn's decoder with candle-transformers'
//! model of the same file (`quantized_qwen2`, `quantized_llama`) in the same loop, so both see
//! the same machine.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::Instant;

use cairn_llm::local::{Forward, LocalOptions, LocalProvider, catalogue, find, test_model_file};

/// candle-transformers' models, which only tests and this benchmark link (a dev-dependency).
#[path = "../src/local/reference.rs"]
mod reference;

impl Forward for reference::Reference {
    fn forward(&mut self, tokens: &[u32], position: usize) -> candle_core::Result<Vec<f32>> {
        self.logits(tokens, position)
    }
}
use cairn_llm::{ChatMessage, ChatRequest};

const SYSTEM: &str = "You extract durable facts from a coding session for a memory store. \
Answer with one JSON object: {\"facts\": [{\"type\": \"decision|bugfix|preference|config|architecture|discovery\", \
\"title\": \"short title\", \"fact\": \"one self-contained sentence\"}]}. Only facts worth remembering \
in a later session; no chit-chat.";

/// A 20-turn session (10 user, 10 assistant), ~3k tokens with the system prompt.
fn session() -> String {
    let turns = [
        (
            "user",
            "The integration tests for the sync module are flaky on CI. Can you look at crates/sync/tests/round.rs?",
        ),
        (
            "assistant",
            "I read round.rs. The test `pull_after_push` starts the hub on a fixed port 8091, and two test binaries run in parallel on CI, so the second one fails with EADDRINUSE about one run in five. I propose binding to port 0 and reading the port back from the listener.",
        ),
        ("user", "Yes, do that. We never want fixed ports in tests, write that down somewhere."),
        (
            "assistant",
            "Done: `TestHub::start` now binds 127.0.0.1:0 and exposes `hub.port()`. I replaced the 4 uses of 8091 in round.rs and lease.rs. All 23 sync tests pass locally in 4.1 s. I also added a line to docs/TESTING.md: tests bind port 0, never a fixed port.",
        ),
        ("user", "Next: the pull endpoint is slow with 50k mutations. Profile it."),
        (
            "assistant",
            "I ran the bench with 50,000 mutations. `pull` takes 2.8 s; 2.1 s of it is in `apply_mutations`, which runs one UPDATE per mutation with a fresh prepared statement each time. Switching to `prepare_cached` and one transaction per batch of 500 should fix most of it.",
        ),
        ("user", "Go ahead, but keep batches at 500, the hub's memory limit matters more than speed."),
        (
            "assistant",
            "Changed `apply_mutations` to use prepare_cached and batches of 500 inside one IMMEDIATE transaction each. Pull of 50k mutations now takes 0.41 s, and peak memory stays at 38 MB. The batch size is a constant `APPLY_BATCH = 500` with a comment saying it is bounded by the hub's memory limit.",
        ),
        ("user", "Why did the hub crash yesterday with 'database is locked'?"),
        (
            "assistant",
            "The hub log shows the checkpointer and a push transaction both waiting on the write lock; busy_timeout was 0 on the checkpointer's connection, so it failed at once instead of waiting. The store's own connections set busy_timeout = 5000 but `Checkpointer::open` creates its connection directly and skipped it. I set busy_timeout = 5000 there too and added a test that holds a write transaction while the checkpointer runs.",
        ),
        ("user", "Good. Also, I prefer that we use thiserror for library errors and anyhow only in the binary."),
        (
            "assistant",
            "Understood. The sync crate already uses thiserror; the one anyhow in crates/sync/src/lease.rs is now a `SyncError::Lease` variant with a stable code E_SYNC_LEASE.",
        ),
        ("user", "What config does the lease use?"),
        (
            "assistant",
            "The lease is 30 s, renewed every 10 s, from `[sync] lease_seconds = 30` in config.toml. A client that misses three renewals loses the lease and another device may take it. The renewal interval is a third of the lease, computed, not configurable.",
        ),
        ("user", "Let's make the renewal interval configurable after all, some users are on flaky networks."),
        (
            "assistant",
            "Added `[sync] lease_renew_seconds`, default 10, validated to be at most half of lease_seconds; a bad value is refused at load with E_SETTINGS_INVALID naming the key. docs/SYNC.md documents both keys.",
        ),
        ("user", "Run the whole sync suite once more and tell me if anything else is off."),
        (
            "assistant",
            "All 31 sync tests pass. One thing I noticed: `git.rs` writes chunks with `fs::write` directly, so a crash mid-write could leave a torn chunk. I did not change it yet.",
        ),
        ("user", "Fix it with a temp file and rename, that's how we write everything on disk."),
        (
            "assistant",
            "Chunks are now written to `<name>.tmp`, fsynced, then renamed into place, like the rest of the store's files. I added a test that kills the writer between write and rename and checks the old chunk is intact. The suite passes: 32 tests.",
        ),
    ];
    let mut text = String::new();
    for _ in 0..2 {
        for (role, content) in turns {
            text.push_str(&format!("[{role}] {content}\n\n"));
        }
    }
    text
}

fn peak_rss_mb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

fn run_one(name: &str, reference: bool) {
    let spec = find(name).unwrap_or_else(|| panic!("no model {name} in the catalogue"));
    let Some(path) = test_model_file(spec) else {
        eprintln!("{name}: not installed (scripts/install-test-deps.sh llm llm-qwen); skipped");
        return;
    };
    let load = Instant::now();
    let options = LocalOptions::default();
    let provider = if reference {
        let weights = reference::Reference::open(&path).expect("candle-transformers loads the model");
        LocalProvider::open_with_weights(&path, spec, &options, Box::new(weights))
    } else {
        LocalProvider::open_with(&path, spec, &options)
    }
    .expect("the model loads");
    let load = load.elapsed();
    let request = ChatRequest {
        messages: vec![
            ChatMessage::system(SYSTEM),
            ChatMessage::user(format!("The session:\n\n{}\nThe facts, as JSON:", session())),
        ],
        max_tokens: 512,
        temperature: 0.0,
        json: true,
    };
    let call = Instant::now();
    let (reply, t) = provider.chat_timed(&request).expect("the chat answers");
    let call = call.elapsed();
    let parsed = serde_json::from_str::<serde_json::Value>(&reply.text).is_ok();
    let cpu = |d: Option<std::time::Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64());
    println!(
        "{name}\t{}\tthreads {}\tload {:.1} s\tprompt {} tok in {:.1} s = {:.0} tok/s (cpu {:.1} s)\t\
         output {} tok in {:.1} s = {:.1} tok/s (cpu {:.1} s)\tcall {:.1} s\tpeak RSS {} MB\tjson parses: {parsed}\tload avg {}",
        if reference { "candle-transformers" } else { "cairn" },
        LocalProvider::threads(),
        load.as_secs_f64(),
        t.prompt_tokens,
        t.prompt.as_secs_f64(),
        t.prompt_tokens as f64 / t.prompt.as_secs_f64(),
        cpu(t.prompt_cpu),
        t.output_tokens,
        t.generation.as_secs_f64(),
        t.output_tokens as f64 / t.generation.as_secs_f64().max(1e-9),
        cpu(t.generation_cpu),
        call.as_secs_f64(),
        peak_rss_mb(),
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').next().unwrap_or_default(),
    );
    eprintln!("--- {name} answered:\n{}\n---", reply.text);
}

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, name, kernels] = args.as_slice()
        && flag == "--one"
    {
        run_one(name, kernels == "candle");
        return;
    }
    let compare = args.iter().any(|a| a == "--compare");
    let runs =
        args.iter().position(|a| a == "--runs").and_then(|i| args.get(i + 1)?.parse::<usize>().ok()).unwrap_or(1);
    if let Some(i) = args.iter().position(|a| a == "--runs") {
        args.drain(i..(i + 2).min(args.len()));
    }
    args.retain(|a| a != "--compare");
    let names: Vec<String> =
        if args.is_empty() { catalogue().iter().map(|s| s.name.to_owned()).collect() } else { args };
    let kernels: &[&str] = if compare { &["cairn", "candle"] } else { &["cairn"] };
    let me = std::env::current_exe().expect("the example's path");
    for _ in 0..runs {
        for name in &names {
            for kernel in kernels {
                let status = std::process::Command::new(&me)
                    .args(["--one", name, kernel])
                    .status()
                    .expect("the example re-runs");
                assert!(status.success(), "{name}: {status}");
            }
        }
    }
}

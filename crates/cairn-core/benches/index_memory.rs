//! Where the daemon's lexical index ([`MemoryIndex`]) spends its bytes, how long it takes to
//! build, and how fast it answers, at `--count` memories (default 100,000).
//!
//! The memories are cairn-bench's own (`Workload::memory`, seed 42 as the 1M daemon runs use),
//! written straight into a bare `observations` table (no FTS5, no triggers: loading a million
//! takes seconds), then indexed by `MemoryIndex::build`, the daemon's own path. Bytes are
//! measured twice: a counting global allocator (what the build left allocated: the truth) and
//! the index's own breakdown by part (`MemoryIndex::heap_bytes`, from capacities). Searches
//! are cairn-bench's three shapes (project / all / question), p50 of `--queries` each, after
//! one warm-up pass.
//!
//! `cargo bench -p cairn-core --bench index_memory -- --count 1000000 --queries 300`
//! (`CAIRN_BENCH_DB=/tmp/index.db` keeps the rows for the next run.)
#![allow(clippy::print_stdout, clippy::cast_precision_loss)]
// The counting allocator below is the one unsafe part: it forwards to the system allocator.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use cairn_bench::workload::{QueryKind, Workload};
use cairn_core::search::index::{IndexFilter, MemoryIndex};
use cairn_core::search::query;
use rusqlite::Connection;

/// The system allocator, counting the bytes currently allocated.
struct Counting;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new_size, Ordering::Relaxed);
        ALLOCATED.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SEED: u64 = 42;
/// What the daemon asks the index for (a page of hits plus room for fusion).
const LIMIT: usize = 30;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// A bare store with the columns the index reads, holding memories `0..count` (kept between
/// runs when `CAIRN_BENCH_DB` names a file that already has them).
fn open_rows(count: usize) -> (Connection, Option<tempfile::TempDir>) {
    let (path, dir) = if let Some(p) = std::env::var_os("CAIRN_BENCH_DB") {
        (std::path::PathBuf::from(p), None)
    } else {
        let dir = tempfile::tempdir().expect("temp dir");
        (dir.path().join("index.db"), Some(dir))
    };
    let mut conn = Connection::open(&path).expect("open");
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS observations (id INTEGER PRIMARY KEY, title TEXT NOT NULL, content TEXT NOT NULL,
           type TEXT NOT NULL, project TEXT NOT NULL, scope TEXT NOT NULL, topic_key TEXT, tool_name TEXT,
           updated_at TEXT NOT NULL, deleted_at TEXT);
         CREATE TABLE IF NOT EXISTS observation_changes (seq INTEGER PRIMARY KEY, observation_id INTEGER NOT NULL);",
    )
    .expect("schema");
    let have: i64 = conn.query_row("SELECT count(*) FROM observations", [], |r| r.get(0)).expect("count");
    if have as usize != count {
        let started = Instant::now();
        let workload = Workload::new(SEED);
        let tx = conn.transaction().expect("tx");
        tx.execute("DELETE FROM observations", []).expect("clear");
        {
            let mut insert = tx
                .prepare(
                    "INSERT INTO observations (id, title, content, type, project, scope, topic_key, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                )
                .expect("prepare");
            for i in 0..count as u64 {
                let m = workload.memory(i);
                insert
                    .execute(rusqlite::params![
                        i as i64 + 1,
                        m.title,
                        m.content,
                        m.kind,
                        m.project,
                        m.scope,
                        m.topic_key,
                        m.updated_at
                    ])
                    .expect("insert");
            }
        }
        tx.commit().expect("commit");
        println!("wrote {count} rows in {:.1} s", started.elapsed().as_secs_f64());
    }
    (conn, dir)
}

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort_unstable();
    samples.get(samples.len() / 2).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

fn main() {
    let count = arg("--count", 100_000);
    let queries = arg("--queries", 300);
    let (conn, _dir) = open_rows(count);

    let before = ALLOCATED.load(Ordering::Relaxed);
    let started = Instant::now();
    let index = MemoryIndex::build(&conn).expect("build");
    let build = started.elapsed();
    let held = ALLOCATED.load(Ordering::Relaxed).saturating_sub(before);
    println!("index of {} memories: build {:.2} s, {:.1} MiB allocated", index.len(), build.as_secs_f64(), mib(held));
    let parts = index.heap_bytes();
    let counted: usize = parts.iter().map(|p| p.1).sum();
    for (part, bytes) in &parts {
        println!("  {part:<28} {:>9.1} MiB  {:>6.1} B/memory", mib(*bytes), *bytes as f64 / count.max(1) as f64);
    }
    println!("  {:<28} {:>9.1} MiB", "(allocator, not itemised)", mib(held.saturating_sub(counted)));

    let workload = Workload::new(SEED);
    for (kind, name) in [(QueryKind::Project, "project"), (QueryKind::All, "all"), (QueryKind::Question, "question")] {
        let cases: Vec<_> = (0..queries as u64)
            .map(|i| {
                let q = workload.query(kind, i);
                let filter = IndexFilter { project: q.project.map(str::to_owned), ..IndexFilter::default() };
                (query::parse(&q.text), filter)
            })
            .collect();
        // Every hit's id and score bits, folded (FNV-1a): equal between two builds when they
        // rank every query identically.
        let mut hits = 0usize;
        let mut digest = 0xcbf2_9ce4_8422_2325u64;
        for (terms, filter) in &cases {
            for (id, score) in index.search(terms, filter, LIMIT) {
                hits += 1;
                for word in [id as u64, u64::from(score.to_bits())] {
                    digest = (digest ^ word).wrapping_mul(0x0100_0000_01b3);
                }
            }
        }
        let samples: Vec<Duration> = cases
            .iter()
            .map(|(terms, filter)| {
                let t = Instant::now();
                std::hint::black_box(index.search(terms, filter, LIMIT));
                t.elapsed()
            })
            .collect();
        println!(
            "search {name:<9} p50 {:>8.1} µs  ({hits} hits over {queries} queries, digest {digest:016x})",
            median(samples)
        );
    }
}

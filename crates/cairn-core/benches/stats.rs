//! What `stats` costs at scale, before and after its counts were kept by triggers, in one run
//! on one store: each query the old `Store::stats` and `Core::stats` ran (a recount of every
//! row), then `Store::stats` as it is (the kept counts, one seek per project for its last
//! activity) and the kept vector count `Core::stats` adds. `--count` memories (default
//! 100,000) of ~200..2,000 bytes in `--projects` projects (default 8), each with a 384-dim f32
//! vector. Medians of `--runs` runs, the page cache warm.
//!
//! `cargo bench -p cairn-core --bench stats -- --count 100000` (`--count 1000000`: ~5 minutes'
//! fill on 2 cores) (`CAIRN_BENCH_DB=FILE` keeps the store for a second run, or for a daemon
//! to serve (`scripts/bench-stats-http.py`); a store made by the `disk_use` bench serves as well.)
#![allow(clippy::print_stdout, clippy::print_stderr, clippy::cast_precision_loss)]

use std::time::{Duration, Instant};

use cairn_core::memory::NewObservation;
use cairn_core::store::Store;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A little xorshift: the same store every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn prose(&mut self, words: usize) -> String {
        (0..words).map(|_| format!("w{}", self.next() % 20_000)).collect::<Vec<_>>().join(" ")
    }
}

/// `count` memories saved 10,000 to a transaction, each chunk's vectors stored right after it.
/// (Asking for the pending memories of the whole store after the fill rescans the embedded
/// ones at every call: quadratic, most of a 1M fill.)
fn fill(store: &mut Store, count: usize, projects: usize) {
    let mut rng = Rng(0x5eed);
    let started = Instant::now();
    let types = ["manual", "decision", "bugfix", "pattern", "config"];
    for chunk in (0..count).collect::<Vec<_>>().chunks(10_000) {
        let jobs: Vec<NewObservation> = chunk
            .iter()
            .map(|&i| {
                let words = 30 + (rng.next() % 250) as usize;
                NewObservation {
                    title: format!("{} {i}", rng.prose(4)),
                    content: rng.prose(words),
                    kind: Some(types[i % types.len()].to_owned()),
                    project: Some(format!("p{}", i % projects)),
                    ..NewObservation::default()
                }
            })
            .collect();
        let ids: Vec<i64> = store
            .batch(jobs, |s, new| s.save(&new))
            .expect("batch")
            .into_iter()
            .map(|saved| saved.expect("save").id)
            .collect();
        let pending = store.pending_embeddings_of("bench-model", &ids).expect("pending");
        let items: Vec<_> = pending.into_iter().map(|p| (p, vec![0.05_f32; 384])).collect();
        store.put_embeddings("bench-model", &items).expect("vectors");
        if chunk[0] % 100_000 == 0 {
            eprintln!("  {} saved, {:.0} s", chunk[0] + chunk.len(), started.elapsed().as_secs_f64());
        }
    }
    println!("filled {count} memories with vectors in {:.1} s", started.elapsed().as_secs_f64());
}

fn median(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e3
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> f64 {
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                std::hint::black_box(f());
                t.elapsed()
            })
            .collect(),
    )
}

/// The queries the old `stats` ran, each counting rows (SQL as it was before the counts).
const OLD_QUERIES: &[(&str, &str)] = &[
    ("sessions", "SELECT count(*) FROM sessions"),
    ("live memories", "SELECT count(*) FROM observations WHERE deleted_at IS NULL"),
    ("prompts", "SELECT count(*) FROM prompts"),
    ("relations", "SELECT count(*) FROM relations"),
    ("deleted", "SELECT count(*) FROM observations WHERE deleted_at IS NOT NULL"),
    ("pinned", "SELECT count(*) FROM observations WHERE pinned = 1 AND deleted_at IS NULL"),
    ("by type", "SELECT type, count(*) FROM observations WHERE deleted_at IS NULL GROUP BY type"),
    (
        "by project",
        "WITH names AS (
            SELECT project FROM observations WHERE project != '' AND deleted_at IS NULL
            UNION SELECT project FROM sessions WHERE project != ''
         )
         SELECT n.project,
            (SELECT count(*) FROM observations o WHERE o.project = n.project AND o.deleted_at IS NULL),
            (SELECT count(*) FROM sessions s WHERE s.project = n.project),
            (SELECT count(*) FROM prompts p WHERE p.project = n.project),
            max(COALESCE((SELECT max(o.updated_at) FROM observations o WHERE o.project = n.project AND o.deleted_at IS NULL), ''),
                COALESCE((SELECT max(s.started_at) FROM sessions s WHERE s.project = n.project), '')) AS activity
         FROM names n ORDER BY activity DESC, n.project",
    ),
    ("vectors stored", "SELECT count(*) FROM embeddings WHERE model = 'bench-model'"),
    (
        "vectors pending",
        "SELECT count(*) FROM observations o WHERE o.deleted_at IS NULL
           AND NOT EXISTS (SELECT 1 FROM embeddings e WHERE e.observation_id = o.id AND e.model = 'bench-model')",
    ),
];

fn run_all(conn: &rusqlite::Connection, sql: &str) -> usize {
    let mut stmt = conn.prepare_cached(sql).expect("prepare");
    let mut rows = stmt.query([]).expect("query");
    let mut n = 0;
    while rows.next().expect("row").is_some() {
        n += 1;
    }
    n
}

fn main() {
    let (count, runs, projects) = (arg("--count", 100_000), arg("--runs", 11), arg("--projects", 8));
    let dir = tempfile::tempdir().expect("temp dir");
    let path = std::env::var_os("CAIRN_BENCH_DB").map_or_else(|| dir.path().join("cairn.db"), std::path::PathBuf::from);
    let mut store = Store::open(&path).expect("open (migrates: the counts backfilled)");
    if store.stats().expect("stats").total_observations == 0 {
        fill(&mut store, count, projects);
    }
    let stats = store.stats().expect("stats");
    println!(
        "store: {} live memories, {} projects, {} sessions, {:.0} MB",
        stats.total_observations,
        stats.by_project.len(),
        stats.total_sessions,
        stats.db_bytes as f64 / 1e6
    );
    // The old queries on a second connection, as a reader of the daemon would run them.
    let conn = rusqlite::Connection::open(&path).expect("reader");
    let mut before = 0.0;
    println!("before (each query of the old stats, a recount):");
    for (name, sql) in OLD_QUERIES {
        run_all(&conn, sql);
        let ms = time(runs, || run_all(&conn, sql));
        before += ms;
        println!("  {name:<18} median {ms:>9.3} ms");
    }
    println!("  {:<18}        {before:>9.3} ms (sum of medians; disk use apart)", "all");
    store.disk_use().expect("the dbstat walk, once");
    let disk = time(runs, || store.disk_use().expect("disk use"));
    let kept = time(runs, || store.kept_stats_counts().expect("kept"));
    let after = time(runs, || store.stats().expect("stats"));
    let vectors = time(runs, || store.kept_vector_count("bench-model").expect("vectors"));
    println!("after:");
    println!("  kept counts        median {kept:>9.3} ms");
    println!("  disk use (re-used) median {disk:>9.3} ms");
    println!("  Store::stats       median {after:>9.3} ms (kept counts + project activity + disk use)");
    println!("  kept vector count  median {vectors:>9.3} ms");
    println!("  Core::stats ≈      {:>16.3} ms", after + vectors);
    // The dashboard's chart: the old count of the window's rows against the kept per-day rows.
    let since = format!("{}T00:00:00.000Z", (time::OffsetDateTime::now_utc() - time::Duration::days(29)).date());
    let old_chart = "SELECT substr(created_at, 1, 10) AS day, count(*) FROM observations
                     WHERE deleted_at IS NULL AND created_at >= ?1 GROUP BY day";
    let old = time(runs, || {
        let mut stmt = conn.prepare_cached(old_chart).expect("prepare");
        stmt.query_map([&since], |r| r.get::<_, i64>(1)).expect("query").count()
    });
    let kept_chart = time(runs, || store.memories_per_day(None, 30).expect("chart"));
    println!("memories_per_day, 30 days (every memory of this store is in the window):");
    println!("  before (count of the rows) median {old:>9.3} ms");
    println!("  after (kept per-day rows)  median {kept_chart:>9.3} ms");
    // The dashboard's extraction line: the live extracted memories, once a join SQLite ran as
    // a walk of every live memory probing for its provenance row.
    let old_extracted = "SELECT count(*) FROM memory_provenance p JOIN observations o ON o.id = p.observation_id
                         WHERE o.deleted_at IS NULL";
    let old = time(runs, || run_all(&conn, old_extracted));
    let status = time(runs, || store.extraction_status().expect("extraction status"));
    println!("extraction_status (the dashboard's extraction line):");
    println!("  before (the join's count)  median {old:>9.3} ms");
    println!("  extraction_status now      median {status:>9.3} ms");
}

#![allow(clippy::print_stdout)] // a benchmark reports on stdout
//! Store benchmark: N saves into a real SQLite file (WAL), then search and context latency.
//!
//! cargo bench -p cairn-core --bench store -- [--count 100000] [--queries 300] [--semantic-only]
//!
//! Prints medians and percentiles; a deterministic seeded workload, so two runs (or two
//! builds) are comparable side by side. `CAIRN_BENCH_DB=FILE` keeps the database, and a second
//! run over a file that already holds `--count` memories skips the saves; `--semantic-only`
//! then measures only the query embedding and the semantic and hybrid searches.

use std::time::{Duration, Instant};

use cairn_core::Store;
use cairn_core::context::ContextRequest;
use cairn_core::memory::NewObservation;
use cairn_core::search::{SearchMode, SearchQuery};

const WORDS: &[&str] = &[
    "auth",
    "login",
    "session",
    "cookie",
    "token",
    "redis",
    "postgres",
    "migration",
    "index",
    "query",
    "cache",
    "timeout",
    "retry",
    "backoff",
    "queue",
    "worker",
    "deploy",
    "docker",
    "kubernetes",
    "helm",
    "terraform",
    "webpack",
    "vite",
    "react",
    "hook",
    "state",
    "reducer",
    "router",
    "endpoint",
    "handler",
    "middleware",
    "logging",
    "tracing",
    "metrics",
    "alert",
    "flaky",
    "test",
    "fixture",
    "mock",
    "snapshot",
    "coverage",
    "lint",
    "format",
    "rust",
    "tokio",
    "axum",
    "serde",
    "sqlx",
    "diesel",
    "python",
    "pytest",
    "django",
    "celery",
    "golang",
    "goroutine",
    "channel",
    "mutex",
    "deadlock",
    "race",
    "memory",
    "leak",
    "profile",
    "latency",
    "throughput",
    "pagination",
    "cursor",
    "webhook",
    "stripe",
    "billing",
    "invoice",
    "email",
    "template",
    "i18n",
    "locale",
    "timezone",
    "utc",
    "cron",
    "schedule",
    "backup",
    "restore",
    "s3",
    "bucket",
    "permission",
    "role",
    "admin",
    "config",
    "env",
    "secret",
    "vault",
    "ci",
    "github",
    "actions",
    "cache",
    "build",
    "release",
    "version",
    "semver",
    "changelog",
    "bug",
    "fix",
    "crash",
    "panic",
    "error",
    "warning",
];
/// Project names as users have them: distinct words, not `project-01` (whose shared token
/// "project" would be in every row's project column).
const PROJECTS: &[&str] = &[
    "ferrite",
    "shopfront",
    "ledgerd",
    "tidepool",
    "trailmate",
    "atlas",
    "beacon",
    "cobalt",
    "dynamo",
    "ember",
    "fjord",
    "granite",
    "harbor",
    "iris",
    "juniper",
    "kestrel",
    "lumen",
    "meridian",
    "nimbus",
    "orchard",
];
const KINDS: &[&str] = &["decision", "architecture", "bugfix", "pattern", "config", "discovery", "learning"];
const QUESTIONS: &[&str] = &[
    "how did we fix the flaky login test on ci",
    "why does redis time out under load",
    "what did we decide about postgres migrations",
    "where is the billing webhook handler",
    "which timezone do cron schedules use",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn words(&mut self, n: usize) -> String {
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
    /// A content word from one Zipf vocabulary in which the technical terms sit at mid ranks
    /// (TECH_RANK..), so each is in a few percent of memories, as in real notes.
    fn word(&mut self) -> String {
        vocabulary_word(self.zipf(VOCABULARY))
    }
    /// What people search for: technical terms and mid-frequency words, not the commonest.
    fn query_word(&mut self) -> String {
        if self.below(2) == 0 {
            WORDS[self.below(WORDS.len())].to_owned()
        } else {
            vocabulary_word(TECH_RANK + self.zipf(VOCABULARY - TECH_RANK))
        }
    }
    fn query(&mut self, min: usize, span: usize) -> String {
        let n = min + self.below(span);
        (0..n).map(|_| self.query_word()).collect::<Vec<_>>().join(" ")
    }
    /// Zipf-like rank in 0..n (rank r has weight ~1/(r+1)).
    fn zipf(&mut self, n: usize) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        let r = ((n as f64 + 1.0).powf(u) - 1.0) as usize;
        r.min(n - 1)
    }
    /// Prose: content words mixed with the glue words every text has.
    fn prose(&mut self, n: usize) -> String {
        (0..n)
            .map(|_| if self.below(5) < 2 { GLUE[self.below(GLUE.len())].to_owned() } else { self.word() })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

const VOCABULARY: usize = 20_000;
const GLUE: &[&str] =
    &["the", "a", "to", "of", "and", "in", "is", "for", "we", "it", "on", "with", "that", "was", "so"];
const SYLLABLES: &[&str] =
    &["ka", "lo", "mi", "ter", "vos", "an", "dri", "pel", "sun", "gro", "bex", "tal", "nor", "quin", "zed", "fa"];

const TECH_RANK: usize = 40;

fn vocabulary_word(rank: usize) -> String {
    match rank.checked_sub(TECH_RANK) {
        Some(i) if i < WORDS.len() => WORDS[i].to_owned(),
        _ => synthetic_word(rank),
    }
}

fn synthetic_word(rank: usize) -> String {
    let mut n = rank + 16;
    let mut word = String::new();
    while n > 0 {
        word.push_str(SYLLABLES[n % SYLLABLES.len()]);
        n /= SYLLABLES.len();
    }
    word
}

fn memory(rng: &mut Rng, i: usize) -> NewObservation {
    let body_words = 30 + rng.below(250); // ~200..2,000 bytes
    NewObservation {
        title: format!("{} {}", rng.words(4), i),
        content: format!(
            "**What**: {}\n**Why**: {}\n**Where**: src/{}.rs",
            rng.prose(body_words),
            rng.prose(12),
            rng.word()
        ),
        kind: Some(KINDS[rng.below(KINDS.len())].to_owned()),
        project: Some(PROJECTS[rng.below(PROJECTS.len())].to_owned()),
        ..NewObservation::default()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{name:<28} n={:<6} p50={:>8.3} ms  p95={:>8.3} ms  p99={:>8.3} ms",
        samples.len(),
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.95)),
        ms(percentile(&samples, 0.99))
    );
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let count = arg("--count", 100_000);
    let queries = arg("--queries", 300);
    let dir = tempfile::tempdir().expect("temp dir");
    // CAIRN_BENCH_DB keeps the database for inspection (sqlite3, EXPLAIN QUERY PLAN).
    let path = std::env::var_os("CAIRN_BENCH_DB").map_or_else(|| dir.path().join("bench.db"), std::path::PathBuf::from);
    let mut store = Store::open(&path).expect("open store");
    let mut rng = Rng(0x5eed_cafe_f00d_d00d);

    let stored = store.stats().expect("stats").total_observations;
    if stored == count as i64 {
        println!("{count} memories already in {}: saves skipped", path.display());
    } else {
        assert_eq!(stored, 0, "{} holds {stored} memories, not {count}", path.display());
        let mut save_times = Vec::with_capacity(count);
        let started = Instant::now();
        for i in 0..count {
            let new = memory(&mut rng, i);
            let t = Instant::now();
            store.save(&new).expect("save");
            save_times.push(t.elapsed());
        }
        let total = started.elapsed();
        println!(
            "saved {count} memories in {:.2} s = {:.0} saves/s (one connection, WAL, synchronous=NORMAL)",
            total.as_secs_f64(),
            count as f64 / total.as_secs_f64()
        );
        report("save", save_times);
    }

    // The same queries through FTS5 (what a one-shot CLI uses) and through the daemon's
    // in-memory index, side by side.
    let reader = cairn_core::Core::new(Store::open(&path).expect("open reader"));
    let indexed = Store::open(&path).expect("open indexed reader");
    let built = Instant::now();
    let index = std::sync::Arc::new(cairn_core::search::index::SharedIndex::default());
    index.set(indexed.build_index().expect("build index"));
    let indexed = cairn_core::Core::new(indexed).with_index(index);
    println!("index built in {:.2} s", built.elapsed().as_secs_f64());
    if std::env::args().any(|a| a == "--semantic-only") {
        drop(reader);
        hybrid(&path, indexed, count, queries);
        return;
    }
    for (engine, store) in [("fts5", &reader), ("index", &indexed)] {
        let mut rng = Rng(0xbeef);
        let run = |label: &str, make: &dyn Fn(&mut Rng) -> SearchQuery, rng: &mut Rng| {
            let label = format!("{engine}: {label}");
            let label = label.as_str();
            let samples: Vec<Duration> = (0..queries)
                .map(|_| {
                    let q = make(rng);
                    let t = Instant::now();
                    let hits = store.search(&q).expect("search");
                    std::hint::black_box(hits);
                    t.elapsed()
                })
                .collect();
            report(label, samples);
        };
        run(
            "search 1-3 words, project",
            &|r: &mut Rng| SearchQuery {
                project: Some(PROJECTS[r.below(PROJECTS.len())].to_owned()),
                ..SearchQuery::new(r.query(1, 3))
            },
            &mut rng,
        );
        run(
            "search 4-8 words, project",
            &|r: &mut Rng| SearchQuery {
                project: Some(PROJECTS[r.below(PROJECTS.len())].to_owned()),
                ..SearchQuery::new(r.query(4, 5))
            },
            &mut rng,
        );
        run(
            "search 1-3 words, all",
            &|r: &mut Rng| SearchQuery { all_projects: true, ..SearchQuery::new(r.query(1, 3)) },
            &mut rng,
        );
        run(
            "search question, project",
            &|r: &mut Rng| SearchQuery {
                project: Some(PROJECTS[r.below(PROJECTS.len())].to_owned()),
                ..SearchQuery::new(QUESTIONS[r.below(QUESTIONS.len())])
            },
            &mut rng,
        );
    }

    let ctx_samples: Vec<Duration> = (0..queries)
        .map(|i| {
            let req =
                ContextRequest { project: Some(PROJECTS[i % PROJECTS.len()].to_owned()), ..ContextRequest::default() };
            let t = Instant::now();
            std::hint::black_box(reader.context(&req).expect("context"));
            t.elapsed()
        })
        .collect();
    report("context, project", ctx_samples);
    println!("database size: {:.1} MiB", store.disk_bytes() as f64 / (1024.0 * 1024.0));
    hybrid(&path, indexed, count, queries);
}

/// Query embedding + hybrid search with each installed model (all-MiniLM-L6-v2 and
/// multilingual-e5-small, from `scripts/install-test-deps.sh model e5`; or the model
/// directories `CAIRN_BENCH_MODEL_DIRS` lists, `:`-separated, e.g. an install of
/// nomic-embed-text-v1.5) over `count` vectors.
/// Embedding 100k memories takes hours on 2 cores, so the stored vectors are random unit
/// vectors: the scan and the fusion cost the same whatever the vectors say; the query is
/// embedded for real. The models take turns in blocks of half the queries (A B A B), so both
/// see the same machine.
fn hybrid(path: &std::path::Path, mut indexed: cairn_core::Core, count: usize, queries: usize) {
    use cairn_core::search::semantic::Semantic;
    use cairn_embed::Embedder as _;
    let dirs: Vec<std::path::PathBuf> = match std::env::var_os("CAIRN_BENCH_MODEL_DIRS") {
        Some(list) => std::env::split_paths(&list).collect(),
        None => vec![cairn_embed::install::test_model_dir(), cairn_embed::install::test_e5_dir()],
    };
    let models: Vec<(String, std::sync::Arc<Semantic>)> = dirs
        .iter()
        .filter_map(|dir| match cairn_embed::LocalModel::load(dir) {
            Ok(model) => Some((model.model_id().to_owned(), Semantic::new(std::sync::Arc::new(model)))),
            Err(e) => {
                println!("no model in {} ({e}): not measured (scripts/install-test-deps.sh model e5)", dir.display());
                None
            }
        })
        .collect();
    if models.is_empty() {
        return;
    }
    let mut writer = Store::open(path).expect("open writer");
    query_embedding_alone(&models, queries);
    // A memory holds one model's vector at a time: each block stores the model's vectors anew.
    let mut samples: Vec<[Vec<Duration>; 2]> = models.iter().map(|_| [Vec::new(), Vec::new()]).collect();
    let mut rng = Rng(0xbeef);
    let block = queries.div_ceil(2);
    for _round in 0..2 {
        for (m, (_, semantic)) in models.iter().enumerate() {
            store_random_vectors(&mut writer, semantic, count);
            indexed.semantic = Some(std::sync::Arc::clone(semantic));
            assert_eq!(indexed.load_vectors().expect("load vectors"), count);
            for (i, mode) in [SearchMode::Hybrid, SearchMode::Semantic].into_iter().enumerate() {
                for _ in 0..block {
                    let q = SearchQuery {
                        project: Some(PROJECTS[rng.below(PROJECTS.len())].to_owned()),
                        mode: Some(mode),
                        ..SearchQuery::new(format!("{} {}", QUESTIONS[rng.below(QUESTIONS.len())], rng.query(1, 2)))
                    };
                    semantic.clear_query_cache();
                    let t = Instant::now();
                    let results = indexed.search(&q).expect("search");
                    assert_eq!(results.mode, mode);
                    std::hint::black_box(results);
                    samples[m][i].push(t.elapsed());
                }
            }
        }
    }
    for ((id, _), [hybrid, semantic]) in models.iter().zip(samples) {
        report(&format!("{id}: query embedding + hybrid search, project"), hybrid);
        report(&format!("{id}: query embedding + semantic search, project"), semantic);
    }
    let (_, first) = &models[0];
    store_random_vectors(&mut writer, first, count);
    indexed.semantic = Some(std::sync::Arc::clone(first));
    indexed.load_vectors().expect("load vectors");
    rerank_cost(&indexed, first, queries);
}

/// `count` random unit vectors under the model's id.
fn store_random_vectors(writer: &mut Store, semantic: &cairn_core::search::semantic::Semantic, count: usize) {
    let mut rng = Rng(0xfeed);
    let started = Instant::now();
    let mut stored = 0;
    // The model's own width (384 for MiniLM and e5, 768 for nomic): the scan's cost follows it.
    let dims = semantic.embed_query("width").expect("embed").len();
    loop {
        let pending = writer.pending_embeddings(semantic.model_id(), 5_000).expect("pending");
        if pending.is_empty() {
            break;
        }
        let items: Vec<_> = pending
            .into_iter()
            .map(|p| {
                let mut v: Vec<f32> = (0..dims).map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0).collect();
                cairn_embed::normalise(&mut v);
                (p, v)
            })
            .collect();
        stored += items.len();
        writer.put_embeddings(semantic.model_id(), &items).expect("store vectors");
    }
    assert!(stored == count || stored == 0, "{stored} of {count}");
    println!("{}: {stored} random vectors stored in {:.2} s", semantic.model_id(), started.elapsed().as_secs_f64());
}

/// The query's embedding alone, the models alternating query by query.
fn query_embedding_alone(models: &[(String, std::sync::Arc<cairn_core::search::semantic::Semantic>)], queries: usize) {
    let mut rng = Rng(0xd00d);
    let mut samples: Vec<Vec<Duration>> = models.iter().map(|_| Vec::new()).collect();
    for i in 0..queries {
        let text = format!("{} {}", QUESTIONS[rng.below(QUESTIONS.len())], rng.query(1, 2));
        for k in 0..models.len() {
            let m = (i + k) % models.len();
            let semantic = &models[m].1;
            semantic.clear_query_cache();
            let t = Instant::now();
            std::hint::black_box(semantic.embed_query(&text).expect("embed"));
            samples[m].push(t.elapsed());
        }
    }
    for ((id, _), samples) in models.iter().zip(samples) {
        report(&format!("{id}: query embedding alone"), samples);
    }
}

/// The ranking alone (query vector cached), fusion only and fusion + re-ranking, alternating
/// query by query so both see the same machine.
fn rerank_cost(indexed: &cairn_core::Core, semantic: &cairn_core::search::semantic::Semantic, queries: usize) {
    use cairn_core::search::SearchEngine;
    use cairn_core::search::fusion::{HybridEngine, SemanticEngine};
    let mut rng = Rng(0xcafe);
    let (mut fused, mut reranked) = (Vec::with_capacity(queries), Vec::with_capacity(queries));
    for i in 0..queries {
        let q = SearchQuery {
            project: Some(PROJECTS[rng.below(PROJECTS.len())].to_owned()),
            ..SearchQuery::new(format!("{} {}", QUESTIONS[rng.below(QUESTIONS.len())], rng.query(1, 2)))
        };
        let vector = semantic.embed_query(&q.text).expect("embed");
        let engine = HybridEngine { lexical: &cairn_core::search::IndexEngine, semantic: SemanticEngine::new(&vector) };
        // Which goes first alternates: the second of a pair finds the pages the first read.
        for turn in [i % 2, 1 - i % 2] {
            let t = Instant::now();
            if turn == 0 {
                std::hint::black_box(engine.fused(indexed, &q, 10).expect("fuse"));
                fused.push(t.elapsed());
            } else {
                std::hint::black_box(engine.candidates(indexed, &q, 10).expect("rerank"));
                reranked.push(t.elapsed());
            }
        }
    }
    report("hybrid ranking, fusion only (query vector cached)", fused);
    report("hybrid ranking, fusion + re-ranking (query vector cached)", reranked);
}

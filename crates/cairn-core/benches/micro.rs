//! Micro-benchmarks of the hot functions, one at a time (divan):
//!
//! cargo bench -p cairn-core --bench micro
//!
//! - `save`: one save into an in-memory store and into a file store (WAL), 3,000 memories in,
//!   and into a file store whose projects sync (the change journal's triggers);
//! - `search`: one query on 3,000 memories, FTS5 (the lexical engine) and the in-memory index;
//! - `context`: the session-start block of a project;
//! - `redact`: privacy redaction of 2 KB of text, with and without a `<private>` block, and
//!   the outbound redaction (`<private>` and secrets) with and without a secret;
//! - `query`: parsing a question into an FTS5 expression.
//!
//! Deterministic data (a fixed generator), so two runs compare. Figures in docs/BENCHMARKS.md.

use std::sync::Arc;

use cairn_core::context::ContextRequest;
use cairn_core::memory::NewObservation;
use cairn_core::search::SearchQuery;
use cairn_core::search::index::SharedIndex;
use cairn_core::search::query;
use cairn_core::{Core, Store};
use divan::{Bencher, black_box};

fn main() {
    divan::main();
}

const MEMORIES: usize = 3_000;
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
    "router",
    "endpoint",
    "handler",
    "middleware",
    "logging",
    "tracing",
    "metrics",
    "flaky",
    "test",
    "fixture",
    "snapshot",
    "coverage",
    "lint",
    "rust",
    "tokio",
    "axum",
    "serde",
    "python",
    "pytest",
    "django",
    "golang",
    "channel",
    "mutex",
    "deadlock",
    "race",
    "memory",
    "leak",
    "latency",
    "schema",
    "webhook",
    "config",
    "secret",
    "release",
    "panic",
];
const PROJECTS: &[&str] = &["ferrite", "lumen", "quartz", "harbor", "sable"];
const QUESTIONS: &[&str] = &[
    "how did we fix the flaky login test",
    "redis timeout retry backoff",
    "why does the deploy need the staging flag",
    "\"session cookie\" expired",
    "postgres migration index",
    "tokio deadlock mutex",
];

/// A fixed generator: the same data every run.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn word(&mut self) -> &'static str {
        WORDS[(self.next() % WORDS.len() as u64) as usize]
    }

    fn words(&mut self, n: usize) -> String {
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
}

fn memory(g: &mut Gen, i: usize) -> NewObservation {
    NewObservation {
        title: format!("{} {} {}", g.word(), g.word(), i),
        content: format!("{} (note {i})", g.words(60)),
        kind: Some(["bugfix", "decision", "pattern", "discovery"][i % 4].into()),
        project: Some(PROJECTS[i % PROJECTS.len()].into()),
        session_id: Some(format!("bench-{}", i % 40)),
        ..NewObservation::default()
    }
}

fn filled(store: &mut Store) {
    let mut g = Gen(0x5EED);
    for i in 0..MEMORIES {
        store.save(&memory(&mut g, i)).expect("save");
    }
}

fn memory_store() -> Store {
    let mut store = Store::open_in_memory().expect("in-memory store");
    filled(&mut store);
    store
}

/// A store searched through the daemon's in-memory index.
fn indexed_store() -> Core {
    let store = memory_store();
    let index = Arc::new(SharedIndex::default());
    index.set(store.build_index().expect("build the index"));
    Core::new(store).with_index(index)
}

mod save {
    use super::{Bencher, Gen, MEMORIES, PROJECTS, Store, black_box, filled, memory, memory_store};

    #[divan::bench]
    fn in_memory(bencher: Bencher) {
        let mut store = memory_store();
        let mut g = Gen(0xB0B);
        let mut i = MEMORIES;
        bencher.bench_local(|| {
            i += 1;
            black_box(store.save(&memory(&mut g, i)).expect("save"));
        });
    }

    /// A real file in WAL mode (`synchronous=NORMAL`): what a save costs the daemon's writer.
    #[divan::bench]
    fn file_wal(bencher: Bencher) {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("file store");
        filled(&mut store);
        let mut g = Gen(0xB0B);
        let mut i = MEMORIES;
        bencher.bench_local(|| {
            i += 1;
            black_box(store.save(&memory(&mut g, i)).expect("save"));
        });
    }

    /// The same, with every project syncing: the journal triggers append a payload row in the
    /// save's transaction (beside `file_wal`, the triggers' cost).
    #[divan::bench]
    fn file_wal_syncing(bencher: Bencher) {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut store = Store::open(&dir.path().join("cairn.db")).expect("file store");
        for project in PROJECTS {
            store.sync_enrol(project).expect("enrol");
        }
        filled(&mut store);
        let mut g = Gen(0xB0B);
        let mut i = MEMORIES;
        bencher.bench_local(|| {
            i += 1;
            black_box(store.save(&memory(&mut g, i)).expect("save"));
        });
    }
}

mod search {
    use super::{Bencher, Core, QUESTIONS, SearchQuery, black_box, indexed_store, memory_store};

    fn run(bencher: Bencher, core: &Core) {
        let mut q = 0;
        bencher.bench_local(|| {
            q += 1;
            let query = SearchQuery { limit: 10, ..SearchQuery::new(QUESTIONS[q % QUESTIONS.len()]) };
            black_box(core.search(&query).expect("search"));
        });
    }

    /// FTS5: the CLI without a daemon, and phrase queries.
    #[divan::bench]
    fn lexical_fts5(bencher: Bencher) {
        run(bencher, &Core::new(memory_store()));
    }

    /// The daemon's in-memory BM25 index.
    #[divan::bench]
    fn memory_index(bencher: Bencher) {
        run(bencher, &indexed_store());
    }
}

#[divan::bench]
fn context(bencher: Bencher) {
    let core = Core::new(memory_store());
    let mut p = 0;
    bencher.bench_local(|| {
        p += 1;
        let request =
            ContextRequest { project: Some(PROJECTS[p % PROJECTS.len()].into()), ..ContextRequest::default() };
        black_box(core.context(&request).expect("context"));
    });
}

mod redact {
    use super::{Bencher, Gen, black_box};

    fn text(with_private: bool) -> String {
        let mut g = Gen(0xACE);
        let body = g.words(300);
        if with_private {
            format!("{} <private>sk-live-{}</private> {}", &body[..body.len() / 2], g.words(3), &body[body.len() / 2..])
        } else {
            body
        }
    }

    /// The common case: no tag, one scan.
    #[divan::bench]
    fn plain_2kb(bencher: Bencher) {
        let text = text(false);
        bencher.bench_local(|| black_box(cairn_core::text::redact(black_box(&text))));
    }

    #[divan::bench]
    fn with_private_block_2kb(bencher: Bencher) {
        let text = text(true);
        bencher.bench_local(|| black_box(cairn_core::text::redact(black_box(&text))));
    }

    /// What a save does by default and whatever leaves the machine: `<private>` and secrets.
    /// The common case: no candidate literal, one gate pass after the tag scan.
    #[divan::bench]
    fn outbound_plain_2kb(bencher: Bencher) {
        let text = text(false);
        bencher.bench_local(|| black_box(cairn_core::text::redact_outbound(black_box(&text))));
    }

    /// A text holding a secret: every pattern runs.
    #[divan::bench]
    fn outbound_with_secret_2kb(bencher: Bencher) {
        let text = format!("{} GITHUB_TOKEN=ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5", text(false));
        bencher.bench_local(|| black_box(cairn_core::text::redact_outbound(black_box(&text))));
    }
}

#[divan::bench(args = QUESTIONS)]
fn query_parse(bencher: Bencher, question: &str) {
    bencher.bench_local(|| black_box(query::to_fts(&query::parse(black_box(question)))));
}

/// The re-ranking's `time_answer` test on one candidate's 2 KB head (a "when" query runs it on
/// each of the 40 candidates of the pool): no time word (the whole text scanned) and one near
/// the end.
mod mentions_time {
    use super::{Bencher, Gen, black_box};

    fn text(with_time: bool) -> String {
        let body = Gen(0x71E).words(300);
        if with_time { format!("{body} we moved it last week") } else { body }
    }

    #[divan::bench]
    fn none_2kb(bencher: Bencher) {
        let text = text(false);
        bencher.bench_local(|| black_box(cairn_core::search::temporal::mentions_time(black_box(&text))));
    }

    #[divan::bench]
    fn at_the_end_2kb(bencher: Bencher) {
        let text = text(true);
        bencher.bench_local(|| black_box(cairn_core::search::temporal::mentions_time(black_box(&text))));
    }
}

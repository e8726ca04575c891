//! Search as you type in `cairn tui`: from a key to its results drawn, on a store of many
//! memories. The app, its worker threads and the drawing are the real ones; the terminal is
//! ratatui's `TestBackend` (80×24), so the figure leaves out the terminal's own painting.
//!
//! `cargo bench -p cairn-tui --bench tui` (`CAIRN_TUI_BENCH_MEMORIES`, default 10000). Two
//! stores: the database file opened read-only in this process (`cairn tui` with no daemon)
//! and the daemon's engine in this process (its BM25 index; the daemon adds a loopback call).
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_client::{Client, ConnectOptions, LocalKind};
use cairn_core::memory::NewObservation;
use cairn_core::ops::{Op, SaveRequest};
use cairn_tui::app::{App, Options, View};
use cairn_tui::worker::Workers;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const WORDS: &[&str] = &[
    "auth",
    "token",
    "cookie",
    "session",
    "database",
    "postgres",
    "index",
    "query",
    "cache",
    "redis",
    "deploy",
    "pipeline",
    "docker",
    "kubernetes",
    "migration",
    "schema",
    "retry",
    "timeout",
    "queue",
    "worker",
    "billing",
    "invoice",
    "webhook",
    "stripe",
    "search",
    "ranking",
    "embedding",
    "vector",
    "parser",
    "lexer",
    "config",
    "feature",
    "flag",
    "rollout",
    "metrics",
    "tracing",
    "logging",
    "alert",
    "incident",
    "latency",
    "memory",
    "allocator",
    "thread",
    "mutex",
    "channel",
    "async",
    "runtime",
    "compile",
    "linker",
    "cargo",
];

/// Queries typed one key at a time: every prefix is a search.
const TYPED: &[&str] = &["postgres migration", "auth token cookie", "retry timeout queue", "vector ranking"];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 as usize
    }

    /// `n` words: one in twenty from [`WORDS`] (so a query word is in a few percent of the
    /// memories, as in real stores), the rest from a filler vocabulary of 5,000 words.
    fn words(&mut self, n: usize) -> String {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            if self.next().is_multiple_of(20) {
                out.push(WORDS[self.next() % WORDS.len()].to_owned());
            } else {
                out.push(filler(self.next() % 5_000));
            }
        }
        out.join(" ")
    }
}

/// A made-up word for number `n` (`ba`, `be`, … `bacu`…): letters only, so FTS5 keeps it whole.
fn filler(mut n: usize) -> String {
    const CONSONANTS: &[u8] = b"bcdfghjklmnpqrstvwz";
    const VOWELS: &[u8] = b"aeiou";
    let mut word = String::new();
    loop {
        word.push(CONSONANTS[n % CONSONANTS.len()] as char);
        n /= CONSONANTS.len();
        word.push(VOWELS[n % VOWELS.len()] as char);
        n /= VOWELS.len();
        if n == 0 {
            return word;
        }
    }
}

fn options(dir: &std::path::Path, local: LocalKind) -> ConnectOptions {
    ConnectOptions::direct_to(dir, local)
}

fn seed(dir: &std::path::Path, count: usize) {
    let client = Client::new(options(dir, LocalKind::Store));
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for i in 0..count {
        let observation = NewObservation {
            title: format!("{} #{i}", rng.words(4)),
            content: rng.words(60),
            project: Some(format!("project-{}", i % 8)),
            kind: Some("decision".into()),
            ..NewObservation::default()
        };
        client.run(Op::Save(SaveRequest { observation, ..SaveRequest::default() })).expect("seed save");
    }
}

/// Type every query of [`TYPED`] and time each key until its own results are drawn.
fn measure(client: &Client) -> Vec<Duration> {
    let workers = Workers::start(client).expect("workers");
    let mut app = App::new(Options { write: false, connection: "bench".into(), project: None });
    let mut terminal = Terminal::new(TestBackend::new(80, 24)).expect("terminal");
    settle(&mut app, &workers, &mut terminal, |_| true);
    let mut times = Vec::new();
    for query in TYPED {
        app.on_key(key(KeyCode::Char('/')));
        for c in query.chars() {
            let start = Instant::now();
            app.on_key(key(KeyCode::Char(c)));
            settle(&mut app, &workers, &mut terminal, |app| match app.view() {
                View::Search(s) => s.shown == s.sent,
                _ => true,
            });
            times.push(start.elapsed());
        }
        app.on_key(key(KeyCode::Esc));
        app.on_key(key(KeyCode::Esc));
    }
    times
}

/// Send what the app queued and draw each answer, as the real loop does, until `done`.
fn settle(app: &mut App, workers: &Workers, terminal: &mut Terminal<TestBackend>, done: impl Fn(&App) -> bool) {
    loop {
        for request in app.outbox.drain(..) {
            workers.send(request);
        }
        if let Ok(response) = workers.answers.recv_timeout(Duration::from_secs(30)) {
            app.on_response(response);
            while let Ok(more) = workers.answers.try_recv() {
                app.on_response(more);
            }
        }
        terminal.draw(|frame| cairn_tui::ui::draw(frame, app)).expect("draw");
        if done(app) && app.outbox.is_empty() {
            return;
        }
    }
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn report(label: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    println!(
        "{label:<34} keys {:>3}  p50 {:>7.2?}  p95 {:>7.2?}  max {:>7.2?}",
        times.len(),
        at(0.5),
        at(0.95),
        times[times.len() - 1]
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too, with less data.
    let testing = std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let count = std::env::var("CAIRN_TUI_BENCH_MEMORIES").ok().and_then(|n| n.parse().ok()).unwrap_or(if testing {
        200
    } else {
        10_000
    });
    let dir = tempfile::tempdir().expect("temp dir");
    let started = Instant::now();
    seed(dir.path(), count);
    println!("seeded {count} memories in {:.1?}", started.elapsed());

    let file = Client::new(options(dir.path(), LocalKind::ReadOnly));
    report(&format!("file, read-only ({count})"), measure(&file));

    let engine = cairn_engine::Engine::open(&dir.path().join(cairn_core::store::DB_FILE)).expect("engine");
    // The steady state, as a daemon's: until its index is built, FTS5 answers.
    let building = Instant::now();
    while engine.index_state() != "ready" {
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("engine index built in {:.1?}", building.elapsed());
    let in_process = Client::in_process(Arc::clone(&engine));
    report(&format!("engine, BM25 index ({count})"), measure(&in_process));
}

#![allow(clippy::print_stdout, clippy::print_stderr)] // a benchmark reports on stdout
//! Conversation-history benchmark: a seeded Claude Code corpus of N MB (many sessions of many
//! turns: user text, assistant thinking + text, Bash/Read/Edit/Grep calls with outputs from a
//! few bytes to ~50 KB, the envelope fields the real CLI writes, sub-agent files, compactions),
//! then, side by side: full ingest into a fresh `history.db`, one new turn appended to the
//! biggest file and poked, `history_search` (across all sessions and within one; and in
//! Chinese/Japanese over 1 % of CJK parts added after the corpus, trigram index vs scan), and
//! `history_pull_message`.
//!
//! cargo bench -p cairn-core --bench history -- [--mb 64] [--seed 7] [--repeats 50]
//!     [--queries 200] [--pulls 1000] [--dir DIR] [--chunk-mb N] [--cjk-parts N] [--cjk-queries N]
//!
//! The corpus and the archive go to a temp dir (or `--dir`, kept). Same seed, same corpus, so
//! two builds compare side by side. `--chunk-mb N` generates and ingests the corpus N MB at a
//! time, deleting each chunk's transcripts once ingested (the longest one is set aside for the
//! new turns): the same corpus and archive, but the disk holds the archive and one chunk, not
//! the whole corpus beside it (10M parts is ~24 GB of transcripts). Ingest and read + parse
//! are then the sums over the chunks. `--search-only` (with `--dir`) times the searches and
//! pulls on the archive a run left there, its sessions and messages sampled from it, and the
//! Chinese/Japanese searches (`--queries 0` leaves out the others).
//!
//! `--cjk-parts N` adds N Chinese/Japanese parts instead of 1 % of the corpus's: the trigram
//! search's cost follows the CJK parts, not the archive's size, so `--mb 64 --cjk-parts 100000`
//! stands in for the 10M archive's 100,360 CJK parts at a fraction of its disk and time.
//! `--cjk-queries N`: the CJK queries timed (default `--queries` / 10, at least 5).

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cairn_core::history::HistoryDb;
use cairn_core::history::ingest::{self, CHUNK_BYTES, PokeRequest};
use cairn_core::history::model::Cursor;
use cairn_core::history::query::{self, MessageRequest, SearchRequest};
use cairn_core::settings::history::HistorySettings;
use serde_json::{Value, json};

const MB: u64 = 1024 * 1024;
const PROJECTS: &[&str] = &["web-shop", "billing-api", "infra", "mobile-app", "data-pipeline", "docs-site"];
const TOOLS: &[&str] = &["Bash", "Read", "Edit", "Grep"];
/// Messages kept (reservoir) to pull at random: enough for 1,000 pulls without holding every id.
const PULL_POOL: usize = 20_000;

struct Args {
    mb: u64,
    seed: u64,
    repeats: usize,
    queries: usize,
    pulls: usize,
    dir: Option<PathBuf>,
    chunk_mb: u64,
    search_only: bool,
    /// CJK parts to add (0: 1 % of the corpus's parts).
    cjk_parts: usize,
    /// CJK queries to time (0: `queries` / 10, at least 5).
    cjk_queries: usize,
}

impl Args {
    fn cjk_queries(&self) -> usize {
        if self.cjk_queries > 0 { self.cjk_queries } else { (self.queries / 10).max(5) }
    }
}

fn parse_args() -> Args {
    let mut args = Args {
        mb: 64,
        seed: 7,
        repeats: 50,
        queries: 200,
        pulls: 1000,
        dir: None,
        chunk_mb: 0,
        search_only: false,
        cjk_parts: 0,
        cjk_queries: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--mb" => args.mb = value().parse().expect("--mb N"),
            "--seed" => args.seed = value().parse().expect("--seed N"),
            "--repeats" => args.repeats = value().parse().expect("--repeats N"),
            "--queries" => args.queries = value().parse().expect("--queries N"),
            "--pulls" => args.pulls = value().parse().expect("--pulls N"),
            "--dir" => args.dir = Some(PathBuf::from(value())),
            "--chunk-mb" => args.chunk_mb = value().parse().expect("--chunk-mb N"),
            "--search-only" => args.search_only = true,
            "--cjk-parts" => args.cjk_parts = value().parse().expect("--cjk-parts N"),
            "--cjk-queries" => args.cjk_queries = value().parse().expect("--cjk-queries N"),
            "--bench" => {} // cargo bench passes it
            other => panic!("unknown argument {other}"),
        }
    }
    args
}

/// splitmix64: deterministic, fast, good enough for a workload.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() as f64 / u64::MAX as f64) < p
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// Log-uniform in [lo, hi]: most values small, a long tail (tool output sizes).
    fn log_uniform(&mut self, lo: f64, hi: f64) -> usize {
        let u = self.next() as f64 / u64::MAX as f64;
        (lo * (hi / lo).powf(u)) as usize
    }

    fn uuid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            b >> 52,
            b & 0xffff_ffff_ffff
        )
    }

    fn hex(&mut self, len: usize) -> String {
        let mut s = format!("{:016x}{:016x}", self.next(), self.next());
        s.truncate(len);
        s
    }
}

/// Words of the corpus: technical terms, then made-up identifiers, drawn with a Zipf-like
/// skew (a few very common, a long tail), as in real conversations.
struct Vocab {
    words: Vec<String>,
}

impl Vocab {
    fn new(rng: &mut Rng) -> Vocab {
        const TERMS: &str = "the a to of and in is it that for this with on we be fix test error build \
            function file code run change add remove update check return value type struct impl trait \
            module crate import export config setting option flag path directory branch commit merge \
            rebase diff patch review issue bug crash panic timeout retry cache queue worker thread lock \
            mutex channel async await future stream socket request response handler router endpoint \
            server client daemon session token auth login cookie header json yaml toml schema migration \
            index query search rank score sqlite postgres redis table column row transaction commit \
            rollback deploy docker kubernetes helm terraform ci pipeline lint format clippy warning \
            compile linker memory leak profile latency throughput benchmark flaky snapshot fixture mock \
            assert expected actual failed passed coverage parser lexer token tree node visitor closure";
        let mut words: Vec<String> = TERMS.split_whitespace().map(str::to_owned).collect();
        const SYLLABLES: &[&str] = &[
            "ka", "lo", "mi", "ra", "ten", "vo", "zu", "pel", "dor", "fin", "gra", "hex", "jin", "kor", "lum", "nar",
            "ost", "pix", "qua", "rin", "sel", "tor", "ulm", "ven", "wex", "yar", "zen",
        ];
        while words.len() < 6_000 {
            let n = rng.range(2, 4);
            let word: String = (0..n).map(|_| *rng.pick(SYLLABLES)).collect();
            words.push(word);
        }
        Vocab { words }
    }

    /// Rank r with probability ∝ 1/(r+1) (roughly): a log-uniform rank.
    fn word(&self, rng: &mut Rng) -> &str {
        let rank = rng.log_uniform(1.0, self.words.len() as f64).saturating_sub(1);
        &self.words[rank.min(self.words.len() - 1)]
    }

    fn sentence(&self, rng: &mut Rng, out: &mut String, words: usize) {
        for i in 0..words {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(self.word(rng));
        }
        out.push_str(". ");
    }

    fn prose(&self, rng: &mut Rng, chars: usize) -> String {
        let mut out = String::with_capacity(chars + 64);
        while out.len() < chars {
            let n = rng.range(5, 18) as usize;
            self.sentence(rng, &mut out, n);
        }
        out
    }

    /// Code- or log-like lines: paths, identifiers, numbers.
    fn output(&self, rng: &mut Rng, chars: usize) -> String {
        let mut out = String::with_capacity(chars + 96);
        let mut line = 1;
        while out.len() < chars {
            let (a, b, c) = (self.word(rng), self.word(rng), self.word(rng));
            let n = rng.below(10_000);
            out.push_str(&format!("{line:>5}\tsrc/{a}/{b}.rs:{n}: let {c}_{a} = {b}::{c}({n})?;\n"));
            line += 1;
        }
        out
    }
}

/// Where the generated corpus stands.
#[derive(Default)]
struct Corpus {
    bytes: u64,
    files: u64,
    sessions: u64,
    /// (session id, message id), a uniform sample of every message.
    messages: Vec<(String, String)>,
    seen_messages: u64,
    session_ids: Vec<String>,
    biggest: Option<(PathBuf, String, u64)>,
}

impl Corpus {
    fn saw_message(&mut self, rng: &mut Rng, session: &str, id: &str) {
        self.seen_messages += 1;
        if self.messages.len() < PULL_POOL {
            self.messages.push((session.to_owned(), id.to_owned()));
        } else {
            let slot = rng.below(self.seen_messages) as usize;
            if slot < PULL_POOL {
                self.messages[slot] = (session.to_owned(), id.to_owned());
            }
        }
    }
}

/// One transcript being written: the envelope every line carries, and the chain of uuids.
struct Transcript {
    out: BufWriter<File>,
    session_id: String,
    /// The session id the history keys messages by (`agent-<id>` for a sub-agent).
    history_id: String,
    agent_id: Option<String>,
    cwd: String,
    branch: String,
    parent: Option<String>,
    clock_ms: i64,
    bytes: u64,
}

impl Transcript {
    fn open(path: &Path, session_id: &str, agent_id: Option<String>, cwd: &str, clock_ms: i64) -> Transcript {
        fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        let file = OpenOptions::new().create(true).append(true).open(path).expect("open transcript");
        let history_id = agent_id.as_ref().map_or_else(|| session_id.to_owned(), |a| format!("agent-{a}"));
        Transcript {
            out: BufWriter::with_capacity(1 << 20, file),
            session_id: session_id.to_owned(),
            history_id,
            agent_id,
            cwd: cwd.to_owned(),
            branch: "main".to_owned(),
            parent: None,
            clock_ms,
            bytes: 0,
        }
    }

    fn timestamp(&mut self, rng: &mut Rng) -> String {
        self.clock_ms += rng.range(200, 40_000) as i64;
        let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.clock_ms) * 1_000_000).expect("time");
        cairn_core::clock::format_ts(t)
    }

    /// Write one record with the envelope fields; returns its uuid.
    fn record(&mut self, rng: &mut Rng, mut body: Value) -> String {
        let uuid = rng.uuid();
        let ts = self.timestamp(rng);
        let map = body.as_object_mut().expect("an object");
        map.insert("parentUuid".into(), self.parent.clone().map_or(Value::Null, Value::String));
        map.insert("isSidechain".into(), Value::Bool(self.agent_id.is_some()));
        if let Some(agent) = &self.agent_id {
            map.insert("agentId".into(), Value::String(agent.clone()));
        }
        map.insert("uuid".into(), Value::String(uuid.clone()));
        map.insert("timestamp".into(), Value::String(ts));
        map.insert("userType".into(), json!("external"));
        map.insert("entrypoint".into(), json!("cli"));
        map.insert("cwd".into(), Value::String(self.cwd.clone()));
        map.insert("sessionId".into(), Value::String(self.session_id.clone()));
        map.insert("version".into(), json!("2.1.330"));
        map.insert("gitBranch".into(), Value::String(self.branch.clone()));
        self.write(&body);
        self.parent = Some(uuid.clone());
        uuid
    }

    fn write(&mut self, value: &Value) {
        let line = serde_json::to_vec(value).expect("json");
        self.out.write_all(&line).expect("write");
        self.out.write_all(b"\n").expect("write");
        self.bytes += line.len() as u64 + 1;
    }

    /// A bookkeeping line the reader skips (the real CLI writes several per turn).
    fn bookkeeping(&mut self, rng: &mut Rng, prompt: &str) {
        let line = match rng.below(3) {
            0 => json!({"type": "queue-operation", "operation": "enqueue", "sessionId": self.session_id,
                        "timestamp": self.timestamp(rng), "content": prompt}),
            1 => json!({"type": "last-prompt", "lastPrompt": prompt, "sessionId": self.session_id,
                        "leafUuid": self.parent}),
            _ => json!({"type": "file-history-snapshot", "messageId": rng.uuid(), "isSnapshotUpdate": false,
                        "snapshot": {"messageId": rng.uuid(), "trackedFileBackups": {}, "timestamp": self.timestamp(rng)}}),
        };
        self.write(&line);
    }
}

fn usage(rng: &mut Rng) -> Value {
    json!({"input_tokens": rng.range(3, 4000), "cache_creation_input_tokens": rng.range(0, 20_000),
           "cache_read_input_tokens": rng.range(0, 150_000), "output_tokens": rng.range(10, 4000),
           "service_tier": "standard",
           "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": rng.range(0, 20_000)}})
}

/// The generator: writes sessions until the corpus holds `target` bytes.
struct Generator<'a> {
    rng: Rng,
    vocab: Vocab,
    projects: &'a Path,
    corpus: Corpus,
    clock_ms: i64,
}

impl Generator<'_> {
    fn user_text(&mut self, t: &mut Transcript) {
        let chars = self.rng.log_uniform(20.0, 1200.0);
        let text = self.vocab.prose(&mut self.rng, chars);
        t.bookkeeping(&mut self.rng, &text[..text.len().min(80)]);
        let body = json!({"type": "user", "promptId": self.rng.uuid(), "permissionMode": "default",
                          "message": {"role": "user", "content": text}});
        let id = t.record(&mut self.rng, body);
        self.corpus.saw_message(&mut self.rng, &t.history_id, &id);
    }

    /// One assistant line (the CLI writes one line per content block, same `message.id`).
    fn assistant(&mut self, t: &mut Transcript, message_id: &str, block: Value, stop: Option<&str>) -> String {
        let body = json!({"type": "assistant", "requestId": format!("req_{}", self.rng.hex(24)),
            "message": {"id": message_id, "type": "message", "role": "assistant", "model": "claude-opus-4-5",
                        "content": [block], "stop_reason": stop, "stop_sequence": null, "usage": usage(&mut self.rng)}});
        let id = t.record(&mut self.rng, body);
        self.corpus.saw_message(&mut self.rng, &t.history_id, &id);
        id
    }

    fn thinking(&mut self, t: &mut Transcript, message_id: &str) {
        let chars = self.rng.log_uniform(80.0, 3000.0);
        let thinking = self.vocab.prose(&mut self.rng, chars);
        let block = json!({"type": "thinking", "thinking": thinking, "signature": self.rng.hex(32)});
        self.assistant(t, message_id, block, None);
    }

    fn text(&mut self, t: &mut Transcript, message_id: &str, stop: Option<&str>) {
        let chars = self.rng.log_uniform(40.0, 2500.0);
        let text = self.vocab.prose(&mut self.rng, chars);
        self.assistant(t, message_id, json!({"type": "text", "text": text}), stop);
    }

    /// A tool call and its result line.
    fn tool_call(&mut self, t: &mut Transcript, message_id: &str) {
        let tool = *self.rng.pick(TOOLS);
        let file = format!("src/{}/{}.rs", self.vocab.word(&mut self.rng), self.vocab.word(&mut self.rng));
        // Most outputs are a few lines; a few are whole files or long logs.
        let size = if self.rng.chance(0.06) {
            self.rng.log_uniform(4_000.0, 50_000.0)
        } else {
            self.rng.log_uniform(8.0, 2_500.0)
        };
        let output = self.vocab.output(&mut self.rng, size);
        let (input, extra) = self.tool_shape(tool, &file, &output);
        let call_id = format!("toolu_{}", self.rng.hex(24));
        let block = json!({"type": "tool_use", "id": call_id, "name": tool, "input": input});
        let source = self.assistant(t, message_id, block, Some("tool_use"));
        let is_error = self.rng.chance(0.05);
        let result = json!({"type": "user", "promptId": self.rng.uuid(), "sourceToolAssistantUUID": source,
            "message": {"role": "user", "content": [
                {"tool_use_id": call_id, "type": "tool_result", "content": output, "is_error": is_error}]},
            "toolUseResult": extra});
        t.record(&mut self.rng, result);
    }

    /// The call's input and the `toolUseResult` the CLI stores beside the result (it repeats
    /// the output: real transcripts carry it twice).
    fn tool_shape(&mut self, tool: &str, file: &str, output: &str) -> (Value, Value) {
        match tool {
            "Bash" => {
                let command =
                    format!("cargo test -p {} -- {}", self.vocab.word(&mut self.rng), self.vocab.word(&mut self.rng));
                (
                    json!({"command": command, "description": "Run the tests"}),
                    json!({"stdout": output, "stderr": "", "interrupted": false, "isImage": false}),
                )
            }
            "Read" => (
                json!({"file_path": file}),
                json!({"type": "text", "file": {"filePath": file, "content": output, "numLines": output.lines().count(),
                        "startLine": 1, "totalLines": output.lines().count()}}),
            ),
            "Edit" => {
                let old = self.vocab.output(&mut self.rng, 120);
                let new = self.vocab.output(&mut self.rng, 140);
                (
                    json!({"file_path": file, "old_string": old, "new_string": new}),
                    json!({"filePath": file, "oldString": old, "newString": new, "userModified": false,
                           "structuredPatch": [{"oldStart": 10, "oldLines": 3, "newStart": 10, "newLines": 4}]}),
                )
            }
            _ => {
                let pattern = self.vocab.word(&mut self.rng).to_owned();
                (
                    json!({"pattern": pattern, "path": "src", "output_mode": "content"}),
                    json!({"mode": "content", "numFiles": 3, "filenames": [], "content": output}),
                )
            }
        }
    }

    /// A user message, then the assistant's thinking, text, a few tool calls and a last text.
    fn turn(&mut self, t: &mut Transcript) {
        self.user_text(t);
        let message_id = format!("msg_{}", self.rng.hex(24));
        self.thinking(t, &message_id);
        self.text(t, &message_id, None);
        for _ in 0..self.rng.range(0, 4) {
            self.tool_call(t, &message_id);
        }
        let last = format!("msg_{}", self.rng.hex(24));
        self.text(t, &last, Some("end_turn"));
    }

    /// The compaction the CLI writes: a boundary, then the summary as a user message.
    fn compaction(&mut self, t: &mut Transcript) {
        t.parent = None;
        t.record(
            &mut self.rng,
            json!({"type": "system", "subtype": "compact_boundary", "content": "Conversation compacted",
                   "isMeta": false, "level": "info", "compactMetadata": {"trigger": "auto", "preTokens": 160_000}}),
        );
        let summary = format!(
            "This session is being continued from a previous conversation that ran out of context.\n\nSummary:\n{}",
            self.vocab.prose(&mut self.rng, 2000)
        );
        let id = t.record(
            &mut self.rng,
            json!({"type": "user", "isCompactSummary": true, "isVisibleInTranscriptOnly": true,
                   "message": {"role": "user", "content": summary}}),
        );
        self.corpus.saw_message(&mut self.rng, &t.history_id, &id);
    }

    /// One session of about `bytes`, with a sub-agent now and then.
    fn session(&mut self, bytes: u64) {
        let project = *self.rng.pick(PROJECTS);
        let slug = format!("-home-dev-src-{project}");
        let cwd = format!("/home/dev/src/{project}");
        let session_id = self.rng.uuid();
        let path = self.projects.join(&slug).join(format!("{session_id}.jsonl"));
        let mut t = Transcript::open(&path, &session_id, None, &cwd, self.clock_ms);
        let mut turns = 0u64;
        while t.bytes < bytes {
            self.turn(&mut t);
            turns += 1;
            if turns.is_multiple_of(150) {
                self.compaction(&mut t);
            }
            if self.rng.chance(0.03) {
                self.subagent(&slug, &session_id, &cwd, t.clock_ms);
            }
        }
        self.finish(t, &path);
        self.corpus.sessions += 1;
        self.corpus.session_ids.push(session_id);
        self.clock_ms += 3_600_000;
    }

    fn subagent(&mut self, slug: &str, session_id: &str, cwd: &str, clock_ms: i64) {
        let agent = self.rng.hex(17);
        let path = self.projects.join(slug).join(session_id).join("subagents").join(format!("agent-{agent}.jsonl"));
        let mut t = Transcript::open(&path, session_id, Some(agent), cwd, clock_ms);
        for _ in 0..self.rng.range(1, 4) {
            self.turn(&mut t);
        }
        self.finish(t, &path);
    }

    fn finish(&mut self, mut t: Transcript, path: &Path) {
        t.out.flush().expect("flush");
        self.corpus.bytes += t.bytes;
        self.corpus.files += 1;
        if self.corpus.biggest.as_ref().is_none_or(|(_, _, b)| t.bytes > *b) {
            self.corpus.biggest = Some((path.to_owned(), t.history_id.clone(), t.bytes));
        }
    }
}

/// The corpus's generator, before its first session.
fn generator(projects: &Path, seed: u64) -> Generator<'_> {
    let mut rng = Rng(seed);
    let vocab = Vocab::new(&mut rng);
    Generator { rng, vocab, projects, corpus: Corpus::default(), clock_ms: 1_767_225_600_000 }
}

/// Write sessions until the corpus holds `upto` bytes (or `target`, the whole corpus): one long
/// session first (the incremental test appends to it), then sessions of 20 KB – 8 MB. Called
/// again with a higher `upto`, it goes on where it stopped: the same corpus, in chunks.
fn generate(g: &mut Generator, target: u64, upto: u64) {
    if g.corpus.sessions == 0 {
        g.session((target / 16).clamp(MB, 64 * MB));
    }
    while g.corpus.bytes < upto.min(target) {
        let size = g.rng.log_uniform(20_000.0, 8.0 * MB as f64) as u64;
        g.session(size);
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1000.0
}

fn p50_p95(mut times: Vec<Duration>) -> (f64, f64) {
    times.sort();
    (percentile(&times, 0.50), percentile(&times, 0.95))
}

/// Read and parse every file the way a scan does, without the store: the reader's share.
fn parse_only(projects: &Path) -> (Duration, u64) {
    if !projects.exists() {
        return (Duration::ZERO, 0);
    }
    let started = Instant::now();
    let mut parts = 0u64;
    for path in cairn_core::history::claude::transcripts(projects) {
        let mut cursor = Cursor::default();
        loop {
            let (batch, next, more) =
                cairn_core::history::claude::read_file(&path, &cursor, CHUNK_BYTES).expect("read transcript");
            parts += batch.parts.len() as u64;
            cursor = next;
            if !more {
                break;
            }
        }
    }
    (started.elapsed(), parts)
}

/// CPU seconds of the calling thread (Linux; 0 elsewhere).
fn thread_cpu() -> f64 {
    fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|ns| ns.parse::<f64>().ok()))
        .map_or(0.0, |ns| ns / 1e9)
}

/// CPU seconds (user + system) of the whole process, threads that ended included (Linux, in
/// clock ticks of 10 ms; 0 elsewhere).
fn process_cpu() -> f64 {
    let Ok(stat) = fs::read_to_string("/proc/self/stat") else { return 0.0 };
    // The fields after the command name (which may hold spaces): utime and stime are the 12th
    // and 13th of them.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn env_for(claude_dir: &Path) -> impl Fn(&str) -> Option<String> {
    let dir = claude_dir.display().to_string();
    move |name: &str| match name {
        "CLAUDE_CONFIG_DIR" => Some(dir.clone()),
        "OPENCODE_DISABLE_CHANNEL_DB" => Some("1".to_owned()),
        "OPENCODE_DB" => Some(format!("{dir}/no-opencode.db")),
        _ => None,
    }
}

/// Append one turn to the biggest file, then poke it; `repeats` times.
fn incremental(
    db: &mut HistoryDb,
    g: &mut Generator,
    env: &dyn Fn(&str) -> Option<String>,
    repeats: usize,
) -> Vec<Duration> {
    let (path, history_id, _) = g.corpus.biggest.clone().expect("a session");
    let session_id = history_id.clone();
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let mut t = Transcript::open(&path, &session_id, None, "/home/dev/src/web-shop", g.clock_ms);
        g.turn(&mut t);
        t.out.flush().expect("flush");
        g.clock_ms = t.clock_ms;
        drop(t);
        let request = PokeRequest { path: Some(path.clone()), ..PokeRequest::default() };
        let started = Instant::now();
        let report = ingest::poke(db, env, &request).expect("poke");
        times.push(started.elapsed());
        assert!(report.messages > 0, "the poke read the new turn");
    }
    times
}

fn searches(
    db: &HistoryDb,
    corpus: &Corpus,
    vocab: &Vocab,
    rng: &mut Rng,
    n: usize,
    in_session: bool,
) -> Vec<Duration> {
    let cfg = HistorySettings::default();
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let words = rng.range(1, 3);
        let text: Vec<&str> = (0..words).map(|_| vocab.word(rng)).collect();
        let session_id = in_session.then(|| rng.pick(&corpus.session_ids).clone());
        let req = SearchRequest {
            query: text.join(" "),
            session_id,
            project: None,
            literal: false,
            kinds: None,
            caller_session_id: None,
        };
        let started = Instant::now();
        let found = query::search(db, &req, &cfg).expect("search");
        times.push(started.elapsed());
        std::hint::black_box(found);
    }
    times
}

/// Chinese and Japanese phrases for the CJK sessions and their searches.
const CJK_WORDS: &[&str] = &[
    "数据库",
    "连接",
    "错误",
    "迁移",
    "脚本",
    "接口",
    "设计",
    "文档",
    "测试",
    "部署",
    "缓存",
    "队列",
    "超时",
    "重试",
    "データベース",
    "接続",
    "エラー",
    "移行",
    "スクリプト",
    "設計",
    "ドキュメント",
    "テスト",
    "デプロイ",
    "キャッシュ",
];

/// Sessions in Chinese and Japanese added to the archive after the main corpus (about 1 % of
/// its parts, as in a mostly English archive): `sessions` transcripts of `turns` turns, poked in;
/// answers the parts added.
fn add_cjk_sessions(
    db: &mut HistoryDb,
    projects: &Path,
    env: &dyn Fn(&str) -> Option<String>,
    rng: &mut Rng,
    sessions: usize,
    turns: usize,
) -> u64 {
    let mut parts = 0;
    let dir = projects.join("-cjk");
    fs::create_dir_all(&dir).expect("cjk dir");
    let sentence = |rng: &mut Rng| -> String {
        (0..rng.range(8, 20)).map(|_| *rng.pick(CJK_WORDS)).collect::<Vec<_>>().join("") + "。"
    };
    for _ in 0..sessions {
        let session = rng.uuid();
        let path = dir.join(format!("{session}.jsonl"));
        let mut out = BufWriter::new(File::create(&path).expect("cjk transcript"));
        for turn in 0..turns {
            let text: String = (0..rng.range(1, 6)).map(|_| sentence(rng)).collect();
            let record = json!({"type": "user", "uuid": rng.uuid(), "parentUuid": null, "sessionId": session,
                "timestamp": format!("2026-11-25T04:{:02}:{:02}.000Z", turn / 60 % 60, turn % 60), "cwd": "/nonexistent/cjk",
                "message": {"role": "user", "content": text}});
            writeln!(out, "{record}").expect("write");
        }
        drop(out);
        let req = PokeRequest { path: Some(path), ..Default::default() };
        parts += ingest::poke(db, env, &req).expect("poke cjk").parts;
    }
    parts
}

/// What the Chinese/Japanese searches took: every session through the trigram index and as the
/// scan (`literal`), and through the index in the CJK sessions' own project.
struct CjkTimes {
    indexed: Vec<Duration>,
    scanned: Vec<Duration>,
    in_project: Vec<Duration>,
}

/// The CJK sessions' project (their cwd's last folder).
const CJK_PROJECT: &str = "cjk";

/// CJK searches of two words (6 characters or more): over every session, through the trigram
/// index and as the scan (`literal`) that was the only way before, the same queries in turn; and
/// through the index in the CJK sessions' project. Over every session, a large archive's newest
/// 5,000 sessions (the scope) may not hold the CJK ones (they are stamped before the corpus's
/// last year): then the index's matches are all read and none is in scope, the costliest case;
/// in their project every search finds its hits.
fn cjk_searches(db: &HistoryDb, rng: &mut Rng, n: usize) -> CjkTimes {
    let cfg = HistorySettings::default();
    let mut times = CjkTimes { indexed: Vec::new(), scanned: Vec::new(), in_project: Vec::new() };
    for _ in 0..n {
        let query = format!("{}{}", rng.pick(CJK_WORDS), rng.pick(CJK_WORDS));
        for (literal, project, times) in [
            (false, None, &mut times.indexed),
            (true, None, &mut times.scanned),
            (false, Some(CJK_PROJECT.to_owned()), &mut times.in_project),
        ] {
            let req = SearchRequest {
                query: query.clone(),
                session_id: None,
                project,
                literal,
                kinds: None,
                caller_session_id: None,
            };
            let started = Instant::now();
            let found = query::search(db, &req, &cfg).expect("cjk search");
            times.push(started.elapsed());
            std::hint::black_box(found);
        }
    }
    times
}

/// The CJK rows of the table, after the others.
fn print_cjk(times: CjkTimes, parts: impl std::fmt::Display, target: &str) {
    let n = times.indexed.len();
    let ((p50, p95), (s50, s95)) = (p50_p95(times.indexed), p50_p95(times.scanned));
    println!(
        "| history_search in Chinese/Japanese, all sessions ({n} queries; {parts}): trigram index / scan | p50 {p50:.2} / {s50:.2} ms, p95 {p95:.2} / {s95:.2} ms | {target} |"
    );
    let (p50, p95) = p50_p95(times.in_project);
    println!(
        "| history_search in Chinese/Japanese, their project ({n} queries): trigram index | p50 {p50:.2} ms, p95 {p95:.2} ms | {target} |"
    );
}

fn pulls(db: &HistoryDb, corpus: &Corpus, rng: &mut Rng, n: usize) -> Vec<Duration> {
    let cfg = HistorySettings::default();
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let (session_id, message_id) = rng.pick(&corpus.messages).clone();
        let req = MessageRequest { session_id, message_id, caller_session_id: None };
        let started = Instant::now();
        let pulled = query::pull_message(db, &req, &cfg).expect("pull_message");
        times.push(started.elapsed());
        std::hint::black_box(pulled);
    }
    times
}

/// What the full ingest produced and cost.
struct Ingested {
    corpus: Corpus,
    vocab: Vocab,
    report: ingest::ScanReport,
    ingest_time: Duration,
    parse_time: Duration,
    parsed_parts: u64,
    /// CPU seconds of the scan's thread, and of the others (index, checkpoints).
    writer_cpu: f64,
    others_cpu: f64,
}

/// One timed scan of what the projects' folder holds now, its CPU split by thread.
fn timed_scan(db: &mut HistoryDb, env: &dyn Fn(&str) -> Option<String>) -> (ingest::ScanReport, Duration, f64, f64) {
    let (writer_before, process_before) = (thread_cpu(), process_cpu());
    let started = Instant::now();
    let report = ingest::scan(db, env, &mut |_| {}).expect("scan");
    let elapsed = started.elapsed();
    let writer_cpu = thread_cpu() - writer_before;
    let others_cpu = (process_cpu() - process_before - writer_cpu).max(0.0);
    (report, elapsed, writer_cpu, others_cpu)
}

fn print_corpus(corpus: &Corpus, seed: u64, generated: Duration) {
    println!(
        "corpus: {:.1} MB, {} files, {} sessions, {} messages (seed {seed}, generated in {:.1} s)",
        corpus.bytes as f64 / MB as f64,
        corpus.files,
        corpus.sessions,
        corpus.seen_messages,
        generated.as_secs_f64()
    );
}

/// The whole corpus generated, then read + parse only, then one scan of it.
fn ingest_whole(db: &mut HistoryDb, env: &dyn Fn(&str) -> Option<String>, projects: &Path, args: &Args) -> Ingested {
    let started = Instant::now();
    let mut g = generator(projects, args.seed);
    generate(&mut g, args.mb * MB, u64::MAX);
    print_corpus(&g.corpus, args.seed, started.elapsed());
    let (parse_time, parsed_parts) = parse_only(projects);
    let (report, ingest_time, writer_cpu, others_cpu) = timed_scan(db, env);
    Ingested { corpus: g.corpus, vocab: g.vocab, report, ingest_time, parse_time, parsed_parts, writer_cpu, others_cpu }
}

/// `--chunk-mb`: each chunk generated, read + parsed, scanned, then its transcripts deleted.
/// The longest transcript so far is set aside under `root` (renamed: its size and mtime stay,
/// so the scans skip it as read) and put back at the end for the new turns.
fn ingest_in_chunks(
    db: &mut HistoryDb,
    env: &dyn Fn(&str) -> Option<String>,
    root: &Path,
    projects: &Path,
    args: &Args,
) -> Ingested {
    let target = args.mb * MB;
    let aside = root.join("set-aside.jsonl");
    let mut g = generator(projects, args.seed);
    let (mut generated, mut parse_time, mut ingest_time) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut parsed_parts, mut writer_cpu, mut others_cpu) = (0, 0.0, 0.0);
    let mut report = ingest::ScanReport::default();
    let mut kept: Option<PathBuf> = None;
    while g.corpus.bytes < target {
        let started = Instant::now();
        let upto = g.corpus.bytes + args.chunk_mb * MB;
        generate(&mut g, target, upto);
        generated += started.elapsed();
        let (parse, parts) = parse_only(projects);
        let (chunk, took, writer, others) = timed_scan(db, env);
        (parse_time, parsed_parts, ingest_time) = (parse_time + parse, parsed_parts + parts, ingest_time + took);
        (writer_cpu, others_cpu) = (writer_cpu + writer, others_cpu + others);
        add_report(&mut report, chunk);
        let biggest = g.corpus.biggest.as_ref().map(|(path, _, _)| path.clone()).expect("a session");
        if kept.as_ref() != Some(&biggest) {
            fs::rename(&biggest, &aside).expect("set the longest transcript aside");
            kept = Some(biggest);
        }
        fs::remove_dir_all(projects).expect("delete the chunk's transcripts");
        println!(
            "  chunk ingested: {:.0} MB so far, {} parts, {:.1} s ingesting; archive {:.0} MB",
            g.corpus.bytes as f64 / MB as f64,
            report.parts,
            ingest_time.as_secs_f64(),
            archive_bytes(root) as f64 / MB as f64
        );
    }
    print_corpus(&g.corpus, args.seed, generated);
    let kept = kept.expect("a chunk");
    fs::create_dir_all(kept.parent().expect("a parent")).expect("mkdir");
    fs::rename(&aside, &kept).expect("put the longest transcript back");
    Ingested { corpus: g.corpus, vocab: g.vocab, report, ingest_time, parse_time, parsed_parts, writer_cpu, others_cpu }
}

/// `into` + `chunk` (what two scans did).
fn add_report(into: &mut ingest::ScanReport, chunk: ingest::ScanReport) {
    (into.sources, into.sessions, into.messages) =
        (into.sources + chunk.sources, into.sessions + chunk.sessions, into.messages + chunk.messages);
    (into.parts, into.bytes) = (into.parts + chunk.parts, into.bytes + chunk.bytes);
    for (reason, n) in chunk.skipped {
        *into.skipped.entry(reason).or_default() += n;
    }
    into.errors.extend(chunk.errors);
}

/// Bytes of the archive's files under `root` (`history*.db` and their WAL and shared memory).
fn archive_bytes(root: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(root) else { return 0 };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("history"))
        .filter_map(|e| e.metadata().ok())
        .filter(fs::Metadata::is_file)
        .map(|m| m.len())
        .sum()
}

/// `--search-only`: the searches and pulls on an archive left in `--dir`, its sessions (sub-agents
/// apart) and every 400th message standing in for the corpus's own sample.
fn search_only(args: &Args) {
    let db_path = args.dir.as_ref().expect("--search-only needs --dir").join("history.db");
    let db = HistoryDb::open(&db_path).expect("open history.db");
    let conn = rusqlite::Connection::open(&db_path).expect("a reader");
    let column = |sql: &str| -> Vec<Vec<String>> {
        let mut stmt = conn.prepare(sql).expect("prepare");
        let n = stmt.column_count();
        let rows = stmt.query_map([], |r| (0..n).map(|i| r.get(i)).collect::<rusqlite::Result<Vec<String>>>());
        rows.expect("query").map(|row| row.expect("row")).collect()
    };
    let parts: Vec<Vec<String>> = column("SELECT CAST(count(*) AS TEXT) FROM history_parts");
    let mut corpus = Corpus {
        session_ids: column("SELECT id FROM history_sessions WHERE id NOT LIKE 'agent-%'")
            .into_iter()
            .flatten()
            .collect(),
        ..Corpus::default()
    };
    corpus.messages = column("SELECT session_id, id FROM history_messages WHERE rowid % 400 = 0 LIMIT 20000")
        .into_iter()
        .map(|mut row| (row.remove(0), row.remove(0)))
        .collect();
    let vocab = Vocab::new(&mut Rng(args.seed));
    let mut rng = Rng(args.seed ^ 0x5A5A);
    println!(
        "archive: {} parts, {} sessions, {} messages sampled to pull",
        parts[0][0],
        corpus.session_ids.len(),
        corpus.messages.len()
    );
    let all = searches(&db, &corpus, &vocab, &mut rng, args.queries, false);
    let one = searches(&db, &corpus, &vocab, &mut rng, args.queries, true);
    let pulled = pulls(&db, &corpus, &mut rng, if args.queries == 0 { 0 } else { args.pulls });
    let in_cjk: i64 = rusqlite::Connection::open(db_path.with_file_name("history-fts.db"))
        .and_then(|fts| fts.query_row("SELECT count(*) FROM history_cjk", [], |r| r.get(0)))
        .expect("count the trigram index's parts");
    let cjk = cjk_searches(&db, &mut rng, args.cjk_queries());
    for (what, times) in
        [("history_search, all sessions", all), ("history_search, one session", one), ("history_pull_message", pulled)]
    {
        let n = times.len();
        if n > 0 {
            let (p50, p95) = p50_p95(times);
            println!("| {what} ({n}) | p50 {p50:.2} ms, p95 {p95:.2} ms |");
        }
    }
    print_cjk(cjk, format_args!("{in_cjk} parts in the trigram index"), "p50 ≤ 20 ms (10M parts)");
}

fn main() {
    let args = parse_args();
    if args.search_only {
        search_only(&args);
        return;
    }
    let temp = tempfile::tempdir().expect("temp dir");
    let root = args.dir.clone().unwrap_or_else(|| temp.path().to_owned());
    let claude = root.join("claude");
    let projects = claude.join("projects");
    let db_path = root.join("history.db");
    let stale = [
        "history.db-wal",
        "history.db-shm",
        "history-fts.db",
        "history-fts.db-wal",
        "history-fts.db-shm",
        "set-aside.jsonl",
    ];
    for stale in std::iter::once(db_path.clone()).chain(stale.iter().map(|name| root.join(name))) {
        let _ = fs::remove_file(stale);
    }
    let _ = fs::remove_dir_all(&claude);

    let mut db = HistoryDb::open(&db_path).expect("open history.db");
    let env = env_for(&claude);
    let ingested = if args.chunk_mb == 0 {
        ingest_whole(&mut db, &env, &projects, &args)
    } else {
        ingest_in_chunks(&mut db, &env, &root, &projects, &args)
    };
    let Ingested { corpus, vocab, report, ingest_time, parse_time, parsed_parts, writer_cpu, others_cpu } = ingested;
    assert!(report.errors.is_empty(), "scan errors: {:?}", report.errors);
    let mb = corpus.bytes as f64 / MB as f64;
    let db_mb = fs::metadata(&db_path).map_or(0.0, |m| m.len() as f64 / MB as f64);
    let fts_mb = fs::metadata(root.join("history-fts.db")).map_or(0.0, |m| m.len() as f64 / MB as f64);
    let wal_mb = archive_bytes(&root) as f64 / MB as f64 - db_mb - fts_mb;

    let mut g =
        Generator { rng: Rng(args.seed ^ 0xA5A5), vocab, projects: &projects, corpus, clock_ms: 1_800_000_000_000 };
    let turn_times = incremental(&mut db, &mut g, &env, args.repeats);
    let (corpus, vocab) = (g.corpus, g.vocab);
    let mut rng = Rng(args.seed ^ 0x5A5A);
    let all = searches(&db, &corpus, &vocab, &mut rng, args.queries, false);
    let one = searches(&db, &corpus, &vocab, &mut rng, args.queries, true);
    let pulled = pulls(&db, &corpus, &mut rng, args.pulls);
    let cjk_wanted = if args.cjk_parts > 0 { args.cjk_parts } else { report.parts as usize / 100 };
    let cjk_parts = add_cjk_sessions(&mut db, &projects, &env, &mut rng, 40, (cjk_wanted / 40).max(10));
    let cjk = cjk_searches(&db, &mut rng, args.cjk_queries());

    println!(
        "store: {} sessions, {} messages, {} parts ingested; history.db {db_mb:.0} MB",
        report.sessions, report.messages, report.parts
    );
    println!(
        "archive on disk: history.db {db_mb:.0} MB + history-fts.db {fts_mb:.0} MB = {:.0} MB ({:.2}× the hosts' {mb:.0} MB of transcripts; WAL and shared memory {wal_mb:.0} MB more)",
        db_mb + fts_mb,
        (db_mb + fts_mb) / mb
    );
    println!();
    println!("| measure | figure | target |");
    println!("|---|---|---|");
    println!(
        "| full ingest ({mb:.0} MB, {} parts) | {:.1} MB/s ({:.1} s) | ≥ 50 MB/s |",
        report.parts,
        mb / ingest_time.as_secs_f64(),
        ingest_time.as_secs_f64()
    );
    println!(
        "| of which CPU: the scan's thread, the others (index, checkpoints) | {writer_cpu:.1} s, {others_cpu:.1} s | |"
    );
    println!(
        "| of which read + parse only ({parsed_parts} parts) | {:.1} MB/s ({:.1} s) | |",
        mb / parse_time.as_secs_f64(),
        parse_time.as_secs_f64()
    );
    let (p50, p95) = p50_p95(turn_times);
    println!("| one new turn, poke ({} repeats) | p50 {p50:.2} ms, p95 {p95:.2} ms | ≤ 5 ms |", args.repeats);
    let (p50, p95) = p50_p95(all);
    println!(
        "| history_search, all sessions ({} queries) | p50 {p50:.2} ms, p95 {p95:.2} ms | p50 ≤ 10 ms |",
        args.queries
    );
    let (p50, p95) = p50_p95(one);
    println!(
        "| history_search, one session ({} queries) | p50 {p50:.2} ms, p95 {p95:.2} ms | p50 ≤ 10 ms |",
        args.queries
    );
    let (p50, p95) = p50_p95(pulled);
    println!("| history_pull_message ({} messages) | p50 {p50:.2} ms, p95 {p95:.2} ms | p50 ≤ 2 ms |", args.pulls);
    print_cjk(cjk, format_args!("{cjk_parts} CJK parts added"), "p50 ≤ 10 ms (1M), 20 ms (10M)");
}

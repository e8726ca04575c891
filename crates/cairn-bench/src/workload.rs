//! The deterministic workload: coding memories in the What/Why/Where/Learned style agents write,
//! and the searches agents run. Every memory and query is a pure function of (seed, index), so
//! batches can be built on any thread and two targets get byte-identical data.

use serde::Serialize;

use crate::rng::Rng;
use crate::vocab::{ADJECTIVES, ERROR_MESSAGES, GLUE, ProjectVocab, VERBS, Vocab};

pub const MIN_BYTES: usize = 200;
pub const MAX_BYTES: usize = 2000;
/// Memories per session in the loaded store.
const SESSION_SPAN: u64 = 40;
/// 2025-01-01T00:00:00Z; loaded memories are spaced ~30 s apart from here.
const BASE_UNIX: i64 = 1_735_689_600;

const STREAM_MEMORY: u64 = 1;
const STREAM_LIVE: u64 = 2;
const STREAM_QUERY: u64 = 3;

const TYPES: &[(&str, f64)] = &[
    ("bugfix", 30.0),
    ("decision", 15.0),
    ("architecture", 10.0),
    ("pattern", 12.0),
    ("config", 10.0),
    ("discovery", 13.0),
    ("learning", 10.0),
];

/// A memory as `POST /import` (engram's ExportData) and `POST /observations` take it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Memory {
    pub sync_id: String,
    pub session_id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub title: String,
    pub content: String,
    pub project: &'static str,
    pub scope: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic_key: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub revision_count: u32,
    pub duplicate_count: u32,
}

#[derive(Debug, Clone, Serialize)]
struct SessionRow {
    id: String,
    project: &'static str,
    directory: String,
    started_at: String,
}

#[derive(Debug, Clone, Serialize)]
struct ExportData<'a> {
    version: &'static str,
    exported_at: String,
    sessions: Vec<SessionRow>,
    observations: &'a [Memory],
    prompts: Vec<serde_json::Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueryKind {
    /// Keywords, with a project filter.
    Project,
    /// Keywords, no filter.
    All,
    /// A natural-language question (half of them filtered to a project).
    Question,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub text: String,
    pub project: Option<&'static str>,
}

/// The workload for one seed.
#[derive(Debug, Clone)]
pub struct Workload {
    pub seed: u64,
    pub vocab: Vocab,
    weights: Vec<f64>,
}

impl Workload {
    pub fn new(seed: u64) -> Self {
        let vocab = Vocab::new(seed);
        let weights = vocab.projects.iter().map(|p| p.weight).collect();
        Self { seed, vocab, weights }
    }

    pub fn project_names(&self) -> Vec<&'static str> {
        self.vocab.projects.iter().map(|p| p.name).collect()
    }

    /// Memory `index` of the store as loaded through `/import`.
    pub fn memory(&self, index: u64) -> Memory {
        let mut rng = Rng::for_item(self.seed, STREAM_MEMORY, index);
        let p = rng.weighted(&self.weights);
        let project = &self.vocab.projects[p];
        let session_id = format!("bench-{}-s{}", project.name, index / SESSION_SPAN);
        let at = BASE_UNIX + index as i64 * 30 + rng.below(30) as i64;
        let ts = format_ts(at);
        self.compose(&mut rng, project, format!("bench-obs-{:x}-{index}", self.seed), session_id, ts)
    }

    /// Memory `index` for the live save phases: a different stream, so never a duplicate of a
    /// loaded one; session `bench-live-<project>` (created by the bench before saving).
    pub fn live_memory(&self, index: u64) -> Memory {
        let mut rng = Rng::for_item(self.seed, STREAM_LIVE, index);
        let p = rng.weighted(&self.weights);
        let project = &self.vocab.projects[p];
        let session_id = live_session_id(project.name);
        let ts = format_ts(BASE_UNIX + 400 * 86_400);
        self.compose(&mut rng, project, format!("bench-live-{:x}-{index}", self.seed), session_id, ts)
    }

    /// The `POST /import` body for memories `start..end` (with the sessions they name).
    pub fn import_body(&self, start: u64, end: u64) -> Vec<u8> {
        let memories: Vec<Memory> = (start..end).map(|i| self.memory(i)).collect();
        let mut sessions: Vec<SessionRow> = Vec::new();
        for m in &memories {
            if sessions.last().is_some_and(|s| s.id == m.session_id) || sessions.iter().any(|s| s.id == m.session_id) {
                continue;
            }
            sessions.push(SessionRow {
                id: m.session_id.clone(),
                project: m.project,
                directory: format!("/home/dev/src/{}", m.project),
                started_at: m.created_at.clone(),
            });
        }
        let data = ExportData {
            version: "0.1.0",
            exported_at: format_ts(BASE_UNIX + 500 * 86_400),
            sessions,
            observations: &memories,
            prompts: Vec::new(),
        };
        serde_json::to_vec(&data).unwrap_or_default()
    }

    /// Query `index` of a kind.
    pub fn query(&self, kind: QueryKind, index: u64) -> Query {
        let stream = STREAM_QUERY * 16 + kind as u64;
        let mut rng = Rng::for_item(self.seed, stream, index);
        let project = &self.vocab.projects[rng.weighted(&self.weights)];
        match kind {
            QueryKind::Project => Query { text: self.keywords(&mut rng, project), project: Some(project.name) },
            QueryKind::All => Query { text: self.keywords(&mut rng, project), project: None },
            QueryKind::Question => {
                let text = self.question(&mut rng, project);
                Query { text, project: rng.chance(0.5).then_some(project.name) }
            }
        }
    }

    fn compose(
        &self,
        rng: &mut Rng,
        project: &ProjectVocab,
        sync_id: String,
        session_id: String,
        ts: String,
    ) -> Memory {
        let kind = TYPES[rng.weighted(&TYPES.iter().map(|t| t.1).collect::<Vec<_>>())].0;
        let mut w = Words { rng, vocab: &self.vocab, project };
        let title = w.title(kind);
        // Log-triangular sizes: mostly 400–900 bytes, tails to 200 and 2000.
        let (lo, hi) = ((MIN_BYTES as f64 + 60.0).ln(), (MAX_BYTES as f64).ln());
        let target = (lo + f64::midpoint(w.rng.f64(), w.rng.f64()) * (hi - lo)).exp() as usize;
        let content = w.content(target);
        let scope = if w.rng.chance(0.08) { "personal" } else { "project" };
        let topic_key = w.rng.chance(0.2).then(|| format!("{}/{}", family(kind), slug(&title)));
        Memory {
            sync_id,
            session_id,
            kind,
            title,
            content,
            project: project.name,
            scope,
            topic_key,
            updated_at: ts.clone(),
            created_at: ts,
            revision_count: 1,
            duplicate_count: 1,
        }
    }

    fn keywords(&self, rng: &mut Rng, project: &ProjectVocab) -> String {
        self.keyword_pieces(rng, project).join(" ")
    }

    /// What an agent types: 1–8 words made of whole pieces (a term, an identifier, an error
    /// code or message, a path), each of which FTS matches as a unit.
    fn keyword_pieces(&self, rng: &mut Rng, project: &ProjectVocab) -> Vec<String> {
        let n = 1 + rng.weighted(&[25.0, 30.0, 20.0, 10.0, 6.0, 4.0, 3.0, 2.0]);
        let mut w = Words { rng, vocab: &self.vocab, project };
        let mut pieces: Vec<String> = Vec::new();
        let mut words = 0;
        let mut tries = 0;
        while words < n && tries < 50 {
            tries += 1;
            let piece = match w.rng.weighted(&[40.0, 25.0, 12.0, 10.0, 8.0, 5.0]) {
                0 => w.query_term(),
                1 => w.ident(),
                2 => w.domain().to_owned(),
                3 => w.query_code(),
                4 => w.error_message().to_owned(),
                _ => w.path(),
            };
            let len = piece.split_whitespace().count();
            if words + len > n || pieces.contains(&piece) {
                continue;
            }
            words += len;
            pieces.push(piece);
        }
        pieces
    }

    /// The pieces of keyword query `index` (for the document-frequency test).
    pub fn query_pieces(&self, kind: QueryKind, index: u64) -> Vec<String> {
        let stream = STREAM_QUERY * 16 + kind as u64;
        let mut rng = Rng::for_item(self.seed, stream, index);
        let project = &self.vocab.projects[rng.weighted(&self.weights)];
        self.keyword_pieces(&mut rng, project)
    }

    fn question(&self, rng: &mut Rng, project: &ProjectVocab) -> String {
        let template = *rng.pick(QUESTIONS);
        let mut w = Words { rng, vocab: &self.vocab, project };
        fill(template, &mut w, true)
    }
}

pub fn live_session_id(project: &str) -> String {
    format!("bench-live-{project}")
}

/// Tokens as FTS5's unicode61 tokenizer sees them (lowercase alphanumeric runs).
pub fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).map(str::to_lowercase)
}

pub fn is_glue(word: &str) -> bool {
    GLUE.contains(&word) || QUESTION_GLUE.contains(&word)
}

/// Words a question adds around its technical words.
const QUESTION_GLUE: &[&str] = &[
    "how",
    "did",
    "do",
    "does",
    "why",
    "what",
    "where",
    "which",
    "who",
    "when",
    "should",
    "ever",
    "see",
    "fix",
    "file",
    "owns",
    "setting",
    "set",
    "use",
    "work",
    "wrong",
    "changed",
    "calls",
    "removed",
    "slow",
    "logged",
    "errors",
    "decision",
    "convention",
    "learn",
    "learned",
    "reproduce",
    "locally",
    "handle",
    "avoid",
    "cached",
    "test",
    "ci",
    "switch",
    "configured",
    "causes",
    "retry",
    "deploy",
    "fail",
    "migration",
    "timeout",
    "be",
    "are",
    "our",
    "us",
    "flaky",
];

const QUESTIONS: &[&str] = &[
    "how did we fix the flaky {t} test on ci",
    "why did we switch from {t} to {t}",
    "where is {i} configured",
    "what was the decision about {d} {t}",
    "how do we handle {e}",
    "what causes {c} in {d}",
    "where do we {v} the {d}",
    "why does {i} retry",
    "how is the {t} for {d} set up",
    "what did we learn about {t}",
    "which file owns the {d} {t}",
    "how to reproduce {e} locally",
    "what is the convention for {t} in {p}",
    "did we ever see {c} before",
    "how does {i} work",
    "why is the {d} {t} slow",
    "what timeout do we use for {t}",
    "how did we fix {e} in {i}",
    "what was wrong with the {t} migration",
    "where are {d} {t} errors logged",
    "how do we test {i}",
    "why did the {t} deploy fail",
    "what is the {t} setting for {d}",
    "how do we avoid {e}",
    "who calls {i}",
    "what changed in {p}",
    "how should {d} {t} be cached",
    "why was {t} removed",
    "when do we {v} {d} {t}",
    "what is the fix for {c}",
];

const WHAT: &[&str] = &[
    "Fixed {e} in `{i}` when the {t} was {a}.",
    "`{i}` now {v}s the {d} {t} before calling `{i}`.",
    "Replaced the {t} in {p} with a {t} keyed by {d} id.",
    "Added a {t} around `{i}` so {d} writes stop failing with {c}.",
    "Moved {d} {t} handling from {p} into `{i}`.",
    "The {t} test for `{i}` was flaky on ci because of {e}.",
    "Bumped the {t} timeout to {n} ms for {d} requests.",
    "Switched the {d} {t} from {t} to {t} and kept `{i}` as the only entry point.",
    "Split `{i}` into two steps: {v} the {d}, then {v} the {t}.",
    "Removed the {a} {t} check in {p}; `{i}` already covers it.",
    "Wrapped every {t} call in `{i}` with a {t} of {n} attempts.",
    "Reworked {p} so the {d} {t} is built once per {t}.",
];

const WHY: &[&str] = &[
    "Under load the {t} returned {c} and the {d} {t} was retried {n} times.",
    "Without it, {e} showed up whenever two {t} workers touched the same {d}.",
    "The old {t} kept every {d} in memory and hit {c} at about {n} rows.",
    "Users saw {e} after {n} seconds because `{i}` never released the {t}.",
    "We want one {t} per {d} so that the {t} stays predictable.",
    "The {t} in {p} assumed the {d} was never {a}, which is false after a {t}.",
    "{C} in production traced back to a {a} {t} in `{i}`.",
    "Reviewers asked for it: the {t} path and the {t} path disagreed on {d} ordering.",
    "It halves the {t} latency on the {d} page (p95 from {n} ms).",
];

const LEARNED: &[&str] = &[
    "{T} ordering matters: call `{i}` before `{i}`.",
    "Always check for {c} from the {t} before trusting the {d} state.",
    "The {t} docs are wrong about {t}; read {p} instead.",
    "Run the {t} suite with --test-threads={n} to reproduce {e} locally.",
    "Never hold the {t} lock across an await in `{i}`.",
    "A {a} {d} is normal after a {t}; treat it as a cache miss, not an error.",
    "Grep for `{i}` before touching the {d} {t}: three callers depend on it.",
    "{e} usually means the {t} is {a}, not that the {d} is broken.",
    "Prefer `{i}` over hand-rolled {t} code for anything that touches the {d}.",
];

/// Slot filler: {t} term, {T} capitalised term, {d} domain noun, {i} identifier, {p} path,
/// {e} error message, {c} error code, {C} capitalised code, {a} adjective, {v} verb, {n} number.
struct Words<'a> {
    rng: &'a mut Rng,
    vocab: &'a Vocab,
    project: &'a ProjectVocab,
}

impl Words<'_> {
    fn term(&mut self) -> &'static str {
        // A third of technical words come from the project's own domain.
        if self.rng.chance(0.3) {
            return self.domain();
        }
        self.vocab.terms[self.vocab.term_zipf.sample(self.rng)]
    }
    fn domain(&mut self) -> &'static str {
        self.project.domain[self.project.domain_zipf.sample(self.rng)]
    }
    fn ident(&mut self) -> String {
        self.project.idents[self.project.ident_zipf.sample(self.rng)].clone()
    }
    fn path(&mut self) -> String {
        self.project.paths[self.project.path_zipf.sample(self.rng)].clone()
    }
    fn code(&mut self) -> String {
        if self.rng.chance(0.3) {
            return self.project.codes[self.project.code_zipf.sample(self.rng)].clone();
        }
        self.vocab.codes[self.vocab.code_zipf.sample(self.rng)].clone()
    }
    fn error_message(&mut self) -> &'static str {
        ERROR_MESSAGES[self.vocab.error_zipf.sample(self.rng)]
    }
    // Searches use specific words: skip the most common ranks of each list.
    fn query_term(&mut self) -> String {
        let z = &self.vocab.term_zipf;
        self.vocab.terms[z.sample_from(self.rng, 40)].to_owned()
    }
    fn query_code(&mut self) -> String {
        if self.rng.chance(0.3) {
            return self.project.codes[self.project.code_zipf.sample(self.rng)].clone();
        }
        self.vocab.codes[self.vocab.code_zipf.sample_from(self.rng, 5)].clone()
    }

    fn slot(&mut self, slot: char, query: bool) -> String {
        match slot {
            't' if query => self.query_term(),
            't' => self.term().to_owned(),
            'T' => capitalise(self.term()),
            'd' => self.domain().to_owned(),
            'i' => self.ident(),
            'p' => self.path(),
            'e' => self.error_message().to_owned(),
            'c' if query => self.query_code(),
            'c' => self.code(),
            'C' => capitalise(&self.code()),
            'a' => (*self.rng.pick(ADJECTIVES)).to_owned(),
            'v' => (*self.rng.pick(VERBS)).to_owned(),
            'n' => [3, 5, 8, 10, 20, 30, 50, 64, 100, 250, 500, 1000, 5000][self.rng.below(13)].to_string(),
            other => other.to_string(),
        }
    }

    fn title(&mut self, kind: &str) -> String {
        let template = match kind {
            "bugfix" => *self.rng.pick(&["Fixed {e} in {i}", "Fix flaky {t} test on ci", "{c} when {v}ing {d} {t}"]),
            "decision" => *self.rng.pick(&["Use {t} instead of {t} for {d}", "Decided to {v} {i} behind {t}"]),
            "architecture" => *self.rng.pick(&["{T} layer owns {d} {t}", "Split {d} {t} out of {i}"]),
            "pattern" => *self.rng.pick(&["Convention: {i} wraps every {t} call", "Pattern for {d} {t} retries"]),
            "config" => *self.rng.pick(&["{T} config for {d} lives in {p}", "{T} settings for {t} on ci"]),
            "discovery" => *self.rng.pick(&["{i} silently drops {t} on {c}", "{T} is {a} after {d} {t}"]),
            _ => *self.rng.pick(&["{T} needs {t} before {t}", "What we learned about {d} {t}"]),
        };
        fill(template, self, false)
    }

    fn content(&mut self, target: usize) -> String {
        let sections: [(&str, &[&str]); 3] = [("What", WHAT), ("Why", WHY), ("Learned", LEARNED)];
        let mut bodies: [String; 3] = Default::default();
        let where_line = {
            let mut parts = vec![self.path()];
            if self.rng.chance(0.6) {
                parts.push(self.path());
            }
            parts.dedup();
            format!("{} (`{}`)", parts.join(", "), self.ident())
        };
        let render = |bodies: &[String; 3]| {
            format!(
                "**What**: {}\n**Why**: {}\n**Where**: {}\n**Learned**: {}",
                bodies[0], bodies[1], where_line, bodies[2]
            )
        };
        for (i, (_, templates)) in sections.iter().enumerate() {
            let t = templates[self.rng.below(templates.len())];
            bodies[i] = fill(t, self, false);
        }
        // Add sentences round-robin while they fit.
        let mut misses = 0;
        let mut s = 0;
        while misses < 6 {
            let list = sections[s % 3].1;
            let t = list[self.rng.below(list.len())];
            let sentence = fill(t, self, false);
            let mut next = bodies.clone();
            next[s % 3].push(' ');
            next[s % 3].push_str(&sentence);
            if render(&next).len() <= target {
                bodies = next;
                misses = 0;
            } else {
                misses += 1;
            }
            s += 1;
        }
        let mut text = render(&bodies);
        while text.len() < MIN_BYTES {
            text.push_str(" Still open: ");
            text.push_str(self.term());
            text.push('.');
        }
        if text.len() > MAX_BYTES {
            let mut cut = MAX_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        text
    }
}

fn fill(template: &str, w: &mut Words<'_>, query: bool) -> String {
    let mut out = String::with_capacity(template.len() + 64);
    let mut chars = template.chars();
    while let Some(c) = chars.next() {
        if c == '{' {
            let slot = chars.next().unwrap_or(' ');
            chars.next(); // '}'
            let value = w.slot(slot, query);
            // "a" before a vowel sound reads as "an".
            if (out.ends_with(" a ") || out == "a " || out.ends_with(" A ") || out == "A ")
                && value.starts_with(['a', 'e', 'i', 'o', 'A', 'E', 'I', 'O'])
            {
                out.insert(out.len() - 1, 'n');
            }
            out.push_str(&value);
        } else {
            out.push(c);
        }
    }
    out
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
}

fn family(kind: &str) -> &'static str {
    match kind {
        "bugfix" => "bug",
        "architecture" => "architecture",
        "decision" => "decision",
        "pattern" => "pattern",
        "config" => "config",
        "discovery" => "discovery",
        _ => "learning",
    }
}

fn slug(title: &str) -> String {
    let mut out = String::new();
    for t in tokens(title) {
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&t);
        if out.len() > 60 {
            break;
        }
    }
    out
}

/// RFC 3339 UTC with milliseconds, fixed width (the form cairn writes).
pub fn format_ts(unix_secs: i64) -> String {
    let days = unix_secs.div_euclid(86_400);
    let sod = unix_secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.000Z", sod / 3600, sod % 3600 / 60, sod % 60)
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use super::*;

    #[test]
    fn same_seed_same_memories_and_queries() {
        let (a, b, c) = (Workload::new(42), Workload::new(42), Workload::new(43));
        for i in [0, 1, 17, 9_999, 1_234_567] {
            assert_eq!(a.memory(i), b.memory(i));
            assert_eq!(a.live_memory(i), b.live_memory(i));
            assert_eq!(a.query(QueryKind::All, i), b.query(QueryKind::All, i));
        }
        assert_eq!(a.import_body(100, 120), b.import_body(100, 120));
        assert_ne!(a.memory(5).content, c.memory(5).content);
        assert_ne!(a.memory(5).content, a.live_memory(5).content);
    }

    #[test]
    fn sizes_are_in_range_and_skewed() {
        let w = Workload::new(7);
        let mut sizes: Vec<usize> = (0..3000).map(|i| w.memory(i).content.len()).collect();
        sizes.sort_unstable();
        assert!(sizes[0] >= MIN_BYTES && sizes[sizes.len() - 1] <= MAX_BYTES, "{} {}", sizes[0], sizes[2999]);
        let median = sizes[1500];
        assert!((400..=1000).contains(&median), "median {median}");
        assert!(sizes[2970] > 1400, "p99 {}", sizes[2970]);
        assert!(sizes[30] < 400, "p1 {}", sizes[30]);
    }

    #[test]
    fn memories_look_like_agent_memories() {
        let w = Workload::new(1);
        let m = w.memory(3);
        for header in ["**What**:", "**Why**:", "**Where**:", "**Learned**:"] {
            assert!(m.content.contains(header), "{}", m.content);
        }
        assert!(!m.content.contains('{'), "unfilled slot: {}", m.content);
        assert!(w.project_names().contains(&m.project));
        let names: HashSet<&str> = w.project_names().into_iter().collect();
        assert_eq!(names.len(), 20);
        assert!(w.vocab.distinct_words() > 3000, "{}", w.vocab.distinct_words());
        let body: serde_json::Value = serde_json::from_slice(&w.import_body(0, 100)).unwrap();
        assert_eq!(body["observations"].as_array().unwrap().len(), 100);
        assert!(!body["sessions"].as_array().unwrap().is_empty());
        assert_eq!(format_ts(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_ts(BASE_UNIX + 59 * 86_400 + 3_661), "2025-03-01T01:01:01.000Z");
    }

    #[test]
    fn queries_are_one_to_eight_words_and_questions_vary() {
        let w = Workload::new(9);
        let mut templates = HashSet::new();
        for i in 0..500 {
            for kind in [QueryKind::Project, QueryKind::All] {
                let q = w.query(kind, i);
                let n = q.text.split_whitespace().count();
                assert!((1..=8).contains(&n), "{q:?}");
                assert_eq!(q.project.is_some(), kind == QueryKind::Project);
            }
            let q = w.query(QueryKind::Question, i);
            templates.insert(q.text.split_whitespace().take(2).collect::<Vec<_>>().join(" "));
        }
        assert!(templates.len() >= 15, "{templates:?}");
    }

    /// A typical search word (a term, an identifier, an error code or message, as FTS matches
    /// it: all its tokens) appears in a few percent of memories, not in half and not in none.
    #[test]
    fn query_word_document_frequency_is_realistic() {
        let w = Workload::new(42);
        let n = 4000;
        let mut postings: HashMap<String, HashSet<u32>> = HashMap::new();
        for i in 0..n {
            let m = w.memory(u64::from(i));
            for t in tokens(&m.title).chain(tokens(&m.content)) {
                postings.entry(t).or_default().insert(i);
            }
        }
        let df = |piece: &str| {
            let mut sets = tokens(piece).map(|t| postings.get(&t).cloned().unwrap_or_default());
            let first = sets.next().unwrap_or_default();
            sets.fold(first, |acc, s| acc.intersection(&s).copied().collect()).len() as f64 / f64::from(n)
        };
        let mut fractions = Vec::new();
        for i in 0..500 {
            for kind in [QueryKind::Project, QueryKind::All] {
                fractions.extend(w.query_pieces(kind, i).iter().map(|p| df(p)));
            }
        }
        fractions.sort_by(f64::total_cmp);
        let total = fractions.len();
        let in_band = fractions.iter().filter(|f| (0.001..=0.05).contains(*f)).count();
        let share = in_band as f64 / total as f64;
        let describe = format!(
            "{:.0}% of {total} query pieces have df in 0.1–5% (p10 {:.4}, p50 {:.4}, p90 {:.4})",
            share * 100.0,
            fractions[total / 10],
            fractions[total / 2],
            fractions[total * 9 / 10]
        );
        assert!(share >= 0.7, "{describe}");
        let median = fractions[total / 2];
        assert!((0.003..=0.03).contains(&median), "{describe}");
    }
}

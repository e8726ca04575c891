//! `cairn-eval extraction`: memory extraction through the real pipeline, scored on the
//! held-out extraction set (`eval/extraction/`, see its README).
//!
//! Every session of the split is archived in a private in-memory store as a host's reader would
//! write it, then extracted one session at a time by `cairn_core::extract::run_pass` (redaction,
//! windows, the prompt, the parser, dedupe, the save) with the provider the flags name. Each
//! session's saved memories are judged against its annotation (`score.rs`: the matching rule,
//! recall, precision, noise), and each question of the set is searched twice, in the extracted
//! memories alone and in the session's raw turns saved as memories, both with the same search
//! across all projects (lexical, or hybrid with `--search`): hit@1 and hit@k of the question's
//! session.
//!
//! Summaries and briefs are off by default: the set scores facts (a summary is one more model
//! call per session, and no annotated fact). `--summaries` writes the summaries the daemon
//! writes; they are never scored, and the questions are searched a third time, in the facts and
//! summaries together.

mod data;
mod provider;
mod score;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use cairn_core::error::CairnError;
use cairn_core::extract::{ExtractionPolicy, Selection, run_pass};
use cairn_core::memory::{ListFilter, NewObservation};
use cairn_core::search::index::SharedIndex;
use cairn_core::search::semantic::Semantic;
use cairn_core::search::{SearchMode, SearchQuery};
use cairn_core::settings::{Overrides, Settings};
use cairn_core::{Core, Store};
use cairn_embed::Embedder;
use cairn_llm::extract::FollowUp;
use serde::Serialize;

use crate::{emit, note};
use data::Session;
use provider::{Call, Choice};
use score::Verdict;

/// Score memory extraction on the held-out extraction set (recall, precision, noise, speed,
/// and retrieval of extracted memories against raw turns)
#[derive(Debug, clap::Args)]
#[command(after_help = "Example: cargo run --release -p cairn-eval -- extraction --provider local --split dev")]
pub struct ExtractionArgs {
    /// The model: local (a GGUF in-process), openai (any OpenAI-compatible endpoint) or scripted
    /// (an oracle answering with the annotation itself: checks the pipeline and the scorer) or
    /// replay (the answers of recorded runs, `--replay FILE`: a change to the parser or the
    /// filters scored without a model)
    #[arg(long, default_value = "local")]
    pub provider: String,
    /// replay: reports of earlier runs (`--json --details`), comma-separated
    #[arg(long, value_name = "FILE", value_delimiter = ',')]
    pub replay: Vec<PathBuf>,
    /// local: a catalogue name (default: the default local model); openai: the model to ask
    #[arg(long)]
    pub model: Option<String>,
    /// local: the GGUF file (default: the copy in target/test-deps/llm)
    #[arg(long, value_name = "FILE")]
    pub model_file: Option<PathBuf>,
    /// openai: the API root, e.g. http://localhost:11434/v1
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// openai: the environment variable holding the key
    #[arg(long, value_name = "VAR")]
    pub api_key_env: Option<String>,
    /// A split of the set (dev, test, holdout, holdout2 … in the order written) or all; which
    /// were run once and are tuning data now, and which is still held out, is in
    /// eval/extraction/README.md
    #[arg(long, default_value = "dev")]
    pub split: String,
    /// Only these sessions (comma-separated ids, e.g. s01,s03)
    #[arg(long, value_delimiter = ',')]
    pub sessions: Vec<String>,
    /// The set's directory
    #[arg(long, value_name = "DIR", default_value = "eval/extraction")]
    pub dir: PathBuf,
    /// Questions count a hit at k when the session is in the first k results
    #[arg(long, default_value_t = 5)]
    pub k: usize,
    /// The bytes of conversation sent to the model per call (default: the daemon's)
    #[arg(long, value_name = "BYTES")]
    pub window_bytes: Option<usize>,
    /// What each window is asked after its facts: bug, settings, none (default: the policy's)
    #[arg(long, value_delimiter = ',')]
    pub follow_ups: Option<Vec<String>>,
    /// Also write the session summaries the daemon writes (every 5 turns and at a
    /// conversation's end): never scored as facts, searched with them in a third retrieval
    /// figure (one model call more per session)
    #[arg(long)]
    pub summaries: bool,
    /// How the questions are searched: lexical, or hybrid (or semantic) with the embedding
    /// model cairn is configured with (`CAIRN_MODEL_DIR`, config.toml), as an agent's search
    /// runs once a model is installed
    #[arg(long, value_name = "MODE", default_value = "lexical")]
    pub search: String,
    /// Print every memory with its verdict, every missed fact and every answer
    #[arg(long)]
    pub details: bool,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub provider: String,
    pub model: String,
    pub split: String,
    pub sessions: usize,
    pub facts: usize,
    pub recalled: usize,
    pub recall: f64,
    pub memories: usize,
    pub correct: usize,
    pub precision: f64,
    pub redundant: usize,
    pub wrong: usize,
    pub noise: usize,
    /// Among memories that state a fact: the share whose type is that fact's type.
    pub type_agreement: f64,
    /// Sessions whose extraction failed (the model's error recorded, retried later).
    pub failures: u64,
    pub seconds_per_session_p50: f64,
    pub seconds_per_session_max: f64,
    pub prompt_tokens_per_s: Option<f64>,
    pub generation_tokens_per_s: Option<f64>,
    pub prompt_tokens_p50: u64,
    pub output_tokens_p50: u64,
    /// Model calls, and the prompt tokens the local model's cache held from the call before
    /// (a shared system prompt): counted in the prompt, not computed, not in its rate.
    pub calls: usize,
    pub reused_tokens: u64,
    pub peak_rss_mb: u64,
    /// `/proc/loadavg`'s one-minute figure before and after the run.
    pub load_before: f64,
    pub load_after: f64,
    pub retrieval: Retrieval,
    pub per_session: Vec<SessionReport>,
}

#[derive(Debug, Default, Serialize)]
pub struct Retrieval {
    pub questions: usize,
    pub k: usize,
    /// The search mode every question ran in (`--search`), and the embedding model of a
    /// semantic or hybrid search.
    pub mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding_model: Option<String>,
    pub extracted_hit_at_1: f64,
    pub extracted_hit_at_k: f64,
    pub turns_hit_at_1: f64,
    pub turns_hit_at_k: f64,
    /// With `--summaries`: the summaries written, and the same questions searched in the facts
    /// and the summaries together.
    pub summaries: Option<usize>,
    pub with_summaries_hit_at_1: Option<f64>,
    pub with_summaries_hit_at_k: Option<f64>,
    /// An extracted memory in the first k states the question's own fact (the answer itself,
    /// not only its session).
    pub extracted_answer_at_k: f64,
    /// The questions whose session the extracted memories did not put first: the question,
    /// its session, and the session and title of what came first instead (`-`: nothing found).
    pub extracted_misses: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct SessionReport {
    pub id: String,
    pub seconds: f64,
    pub calls: Vec<Call>,
    pub missed: Vec<String>,
    pub memories: Vec<Judged>,
    pub failure: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Judged {
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub content: String,
    pub verdict: Verdict,
}

pub fn run(args: &ExtractionArgs) -> Result<()> {
    let sessions = data::load(&args.dir, &args.split, &args.sessions)?;
    if sessions.is_empty() {
        anyhow::bail!("no session of split {} matches", args.split);
    }
    let choice = Choice {
        provider: args.provider.clone(),
        model: args.model.clone(),
        model_file: args.model_file.clone(),
        base_url: args.base_url.clone(),
        api_key_env: args.api_key_env.clone(),
        replay: args.replay.clone(),
    };
    let search = Search::open(&args.search)?;
    let load_before = load_average();
    let provider = provider::open(&choice, &sessions)?;
    let mut core = Core::new(Store::open_in_memory()?);
    data::archive(&mut core, &sessions, "2026-01-05T10:00:00.000Z")?;
    let daemon = ExtractionPolicy::default();
    let policy = ExtractionPolicy {
        summary_every_turns: if args.summaries { daemon.summary_every_turns } else { u32::MAX },
        ended_after: if args.summaries { daemon.ended_after } else { time::Duration::MAX },
        window_bytes: args.window_bytes.unwrap_or(ExtractionPolicy::default().window_bytes),
        follow_ups: match &args.follow_ups {
            Some(names) => names
                .iter()
                .filter(|n| !n.is_empty() && *n != "none")
                .map(|n| FollowUp::from_name(n).ok_or_else(|| anyhow::anyhow!("no follow-up question is called {n:?}")))
                .collect::<Result<_>>()?,
            None => ExtractionPolicy::default().follow_ups,
        },
        ..ExtractionPolicy::default()
    };
    let mut report = Report {
        provider: args.provider.clone(),
        model: cairn_llm::LlmProvider::model(&provider).to_owned(),
        split: args.split.clone(),
        sessions: sessions.len(),
        ..Report::default()
    };
    for session in &sessions {
        let started = Instant::now();
        let pass = run_pass(&mut core, &provider, &Selection::Session(session.id.clone()), &policy, &|| false)?;
        let seconds = started.elapsed().as_secs_f64();
        report.failures += pass.failures;
        let saved = memories_of(&core, &session.id)?;
        let verdicts =
            score::judge(session, &saved.iter().map(|m| (m.title.clone(), m.content.clone())).collect::<Vec<_>>());
        let stated: Vec<&String> = verdicts.iter().flat_map(|v| &v.states).collect();
        let one = SessionReport {
            id: session.id.clone(),
            seconds,
            calls: provider.take(),
            missed: session
                .facts
                .iter()
                .filter(|f| !stated.contains(&&f.id))
                .map(|f| format!("{}: {}", f.id, f.note))
                .collect(),
            memories: saved
                .into_iter()
                .zip(verdicts)
                .map(|(m, verdict)| Judged { kind: m.kind, title: m.title, content: m.content, verdict })
                .collect(),
            failure: pass.failed.first().map(|f| format!("{}: {}", f.code, f.error)),
        };
        note(&format!(
            "  {}: {:.1} s, {} memories, {}/{} facts{}",
            one.id,
            one.seconds,
            one.memories.len(),
            session.facts.len() - one.missed.len(),
            session.facts.len(),
            one.failure.as_deref().map(|f| format!(", failed: {f}")).unwrap_or_default()
        ));
        report.per_session.push(one);
    }
    tally(&mut report, &sessions);
    report.retrieval = retrieval(core, &sessions, args.k, args.summaries, &search)?;
    report.peak_rss_mb = peak_rss_mb();
    report.load_before = load_before;
    report.load_after = load_average();
    emit(args.json, &report, |r| render(r, args.details))
}

/// The facts a model wrote for a session, in the order they were saved (summaries left out).
fn memories_of(core: &Core, session_id: &str) -> Result<Vec<cairn_core::model::Observation>> {
    let mut all = core.store.list(&ListFilter { limit: 100_000, ..ListFilter::default() })?;
    all.retain(|m| m.session_id == session_id && m.kind != cairn_core::extract::SUMMARY_TYPE);
    all.sort_by_key(|m| m.id);
    Ok(all)
}

fn tally(report: &mut Report, sessions: &[Session]) {
    let (mut stated_types, mut agreeing) = (0usize, 0usize);
    for (one, session) in report.per_session.iter().zip(sessions) {
        report.facts += session.facts.len();
        report.recalled += session.facts.len() - one.missed.len();
        for m in &one.memories {
            report.memories += 1;
            report.correct += usize::from(m.verdict.correct());
            report.wrong += usize::from(!m.verdict.correct());
            report.redundant += usize::from(m.verdict.redundant);
            report.noise += usize::from(m.verdict.noise.is_some());
            if let Some(first) = m.verdict.states.first() {
                stated_types += 1;
                agreeing += usize::from(session.facts.iter().any(|f| f.id == *first && f.kind == m.kind));
            }
        }
    }
    let share = |a: usize, b: usize| if b == 0 { 0.0 } else { round3(a as f64 / b as f64) };
    report.recall = share(report.recalled, report.facts);
    report.precision = share(report.correct, report.memories);
    report.type_agreement = share(agreeing, stated_types);
    let calls: Vec<&Call> = report.per_session.iter().flat_map(|s| &s.calls).collect();
    let mut seconds: Vec<f64> = report.per_session.iter().map(|s| s.seconds).collect();
    seconds.sort_by(f64::total_cmp);
    report.seconds_per_session_p50 = round3(median(&seconds));
    report.seconds_per_session_max = round3(seconds.last().copied().unwrap_or(0.0));
    let rate = |tokens: u64, secs: f64| (secs > 0.0).then(|| round3(tokens as f64 / secs));
    let prompt_s: f64 = calls.iter().filter_map(|c| c.prompt_seconds).sum();
    let gen_s: f64 = calls.iter().filter_map(|c| c.generation_seconds).sum();
    report.calls = calls.len();
    report.reused_tokens = calls.iter().map(|c| c.reused_tokens).sum();
    let computed: u64 = calls.iter().map(|c| c.prompt_tokens - c.reused_tokens).sum();
    report.prompt_tokens_per_s = rate(computed, prompt_s);
    report.generation_tokens_per_s = rate(calls.iter().map(|c| c.output_tokens).sum(), gen_s);
    let mut prompt: Vec<u64> = calls.iter().map(|c| c.prompt_tokens).collect();
    let mut output: Vec<u64> = calls.iter().map(|c| c.output_tokens).collect();
    prompt.sort_unstable();
    output.sort_unstable();
    report.prompt_tokens_p50 = prompt.get(prompt.len() / 2).copied().unwrap_or(0);
    report.output_tokens_p50 = output.get(output.len() / 2).copied().unwrap_or(0);
}

/// Each question searched in the extracted facts and in the raw turns (the same search, in
/// `search`'s mode, all projects), and with `summaries` in the facts and summaries together: does the question's
/// session come first, or in the first `k`?
fn retrieval(extracted: Core, sessions: &[Session], k: usize, summaries: bool, search: &Search) -> Result<Retrieval> {
    let turns = search.searchable(Core::new(turns_of(sessions)?))?;
    let mut summary_count = None;
    let searched = if summaries {
        let (facts, count) = facts_of(&extracted)?;
        summary_count = Some(count);
        vec![search.searchable(Core::new(facts))?, turns, search.searchable(extracted)?]
    } else {
        vec![search.searchable(extracted)?, turns]
    };
    let mut out = Retrieval {
        k,
        mode: search.mode.as_str().to_owned(),
        embedding_model: search.embedder.as_ref().map(|e| e.model_id().to_owned()),
        ..Retrieval::default()
    };
    let mut hits = [0usize; 6];
    let mut answers = 0;
    for session in sessions {
        for question in &session.questions {
            out.questions += 1;
            let fact = session.facts.iter().find(|f| f.id == question.fact);
            for (slot, core) in searched.iter().enumerate() {
                let found = core.search(&SearchQuery {
                    text: question.query.clone(),
                    all_projects: true,
                    limit: k,
                    mode: Some(search.mode),
                    ..SearchQuery::default()
                })?;
                let rank = found.hits.iter().position(|h| h.observation.session_id == session.id);
                if slot == 0 {
                    let says = |h: &cairn_core::search::SearchHit| {
                        let text = format!("{}\n{}", h.observation.title, h.observation.content);
                        h.observation.session_id == session.id
                            && fact.is_some_and(|f| score::states(&text, &f.keywords))
                    };
                    answers += usize::from(found.hits.iter().any(says));
                }
                if slot == 0 && rank != Some(0) {
                    let first = found
                        .hits
                        .first()
                        .map_or("-".to_owned(), |h| format!("{}: {}", h.observation.session_id, h.observation.title));
                    out.extracted_misses.push(format!("{} ({}) → {first}", question.query, session.id));
                }
                hits[slot * 2] += usize::from(rank == Some(0));
                hits[slot * 2 + 1] += usize::from(rank.is_some());
            }
        }
    }
    let share = |n: usize| round3(n as f64 / out.questions.max(1) as f64);
    (out.extracted_hit_at_1, out.extracted_hit_at_k, out.turns_hit_at_1, out.turns_hit_at_k) =
        (share(hits[0]), share(hits[1]), share(hits[2]), share(hits[3]));
    out.extracted_answer_at_k = share(answers);
    if summaries {
        out.summaries = summary_count;
        (out.with_summaries_hit_at_1, out.with_summaries_hit_at_k) = (Some(share(hits[4])), Some(share(hits[5])));
    }
    Ok(out)
}

/// Each session's raw turns (a user message with the answers after it) saved as memories of it.
fn turns_of(sessions: &[Session]) -> Result<Store> {
    let mut turns = Store::open_in_memory()?;
    for session in sessions {
        for turn in data::turns(session) {
            let title: String = turn.lines().next().unwrap_or_default().chars().take(80).collect();
            turns.save(&NewObservation {
                title,
                content: turn,
                kind: Some("turn".into()),
                session_id: Some(session.id.clone()),
                project: Some(session.project.clone()),
                ..NewObservation::default()
            })?;
        }
    }
    Ok(turns)
}

/// The extracted memories without the summaries, saved again in their order; and how many
/// summaries were left out.
fn facts_of(extracted: &Core) -> Result<(Store, usize)> {
    let mut all = extracted.store.list(&ListFilter { limit: 1_000_000, ..ListFilter::default() })?;
    all.sort_by_key(|m| m.id);
    let (summaries, facts): (Vec<_>, Vec<_>) =
        all.into_iter().partition(|m| m.kind == cairn_core::extract::SUMMARY_TYPE);
    let mut store = Store::open_in_memory()?;
    for memory in facts {
        store.save(&NewObservation {
            title: memory.title,
            content: memory.content,
            kind: Some(memory.kind),
            session_id: Some(memory.session_id),
            project: Some(memory.project),
            ..NewObservation::default()
        })?;
    }
    Ok((store, summaries.len()))
}

/// How the questions are searched: the mode, and for a semantic or hybrid search the
/// embedding model every searched store is embedded with.
struct Search {
    mode: SearchMode,
    embedder: Option<Arc<dyn Embedder>>,
}

impl Search {
    fn open(raw: &str) -> Result<Search> {
        let mode = SearchMode::parse(raw)?;
        if mode == SearchMode::Lexical {
            return Ok(Search { mode, embedder: None });
        }
        // The same settings as `cairn` (config.toml, CAIRN_* variables) choose the model.
        let settings = Settings::load(&Overrides::default())?;
        let embedder = cairn_engine::embedder::build(&settings.embedder_config()).map_err(|e| {
            let hint = e.hint.clone().unwrap_or_else(|| "set CAIRN_MODEL_DIR to an installed model".to_owned());
            CairnError::new(e.code, format!("--search {raw} needs the embedding model: {}", e.message)).with_hint(hint)
        })?;
        Ok(Search { mode, embedder: Some(embedder) })
    }

    /// `core` with its search index built and, for a semantic or hybrid search, every memory
    /// embedded (a fresh set of vectors per store: one store's never answer for another).
    fn searchable(&self, core: Core) -> Result<Core> {
        let index = Arc::new(SharedIndex::default());
        index.set(core.store.build_index()?);
        let mut core = core.with_index(index);
        if let Some(embedder) = &self.embedder {
            core.semantic = Some(Semantic::new(Arc::clone(embedder)));
            core.load_vectors()?;
            while core.embed_pending(64)? > 0 {}
        }
        Ok(core)
    }
}

fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => f64::midpoint(sorted[n / 2 - 1], sorted[n / 2]),
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn peak_rss_mb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

fn render(r: &Report, details: bool) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "extraction: {} ({}), split {}, {} sessions", r.provider, r.model, r.split, r.sessions);
    let _ = writeln!(t, "  recall     {:.3}  ({} of {} facts)", r.recall, r.recalled, r.facts);
    let _ = writeln!(
        t,
        "  precision  {:.3}  ({} of {} memories; {} wrong, {} redundant; type agrees {:.3})",
        r.precision, r.correct, r.memories, r.wrong, r.redundant, r.type_agreement
    );
    let _ = writeln!(t, "  noise      {} memories with transcript or tool output", r.noise);
    let _ = writeln!(t, "  failures   {}", r.failures);
    let _ = writeln!(
        t,
        "  speed      {:.1} s per session (p50; max {:.1} s); {} calls, prompt {} tok p50 ({} reused in all), \
         output {} tok p50",
        r.seconds_per_session_p50,
        r.seconds_per_session_max,
        r.calls,
        r.prompt_tokens_p50,
        r.reused_tokens,
        r.output_tokens_p50
    );
    if let (Some(p), Some(g)) = (r.prompt_tokens_per_s, r.generation_tokens_per_s) {
        let _ = writeln!(t, "             prompt {p:.1} tok/s, generation {g:.2} tok/s");
    }
    let _ = writeln!(t, "  peak RSS   {} MB; load {:.2} → {:.2}", r.peak_rss_mb, r.load_before, r.load_after);
    let q = &r.retrieval;
    let _ = writeln!(
        t,
        "  retrieval  {} questions, {}{}: extracted hit@1 {:.3} hit@{} {:.3} | raw turns hit@1 {:.3} hit@{} {:.3}",
        q.questions,
        q.mode,
        q.embedding_model.as_deref().map(|m| format!(" ({m})")).unwrap_or_default(),
        q.extracted_hit_at_1,
        q.k,
        q.extracted_hit_at_k,
        q.turns_hit_at_1,
        q.k,
        q.turns_hit_at_k
    );
    if let (Some(n), Some(h1), Some(hk)) = (q.summaries, q.with_summaries_hit_at_1, q.with_summaries_hit_at_k) {
        let _ = writeln!(t, "             with the {n} summaries: hit@1 {h1:.3} hit@{} {hk:.3}", q.k);
    }
    let _ = writeln!(
        t,
        "             an extracted memory in the first {} states the answer: {:.3}",
        q.k, q.extracted_answer_at_k
    );
    if details {
        for miss in &q.extracted_misses {
            let _ = writeln!(t, "  not first: {miss}");
        }
        let mut by_verdict: BTreeMap<&str, usize> = BTreeMap::new();
        for s in &r.per_session {
            let _ = writeln!(
                t,
                "\n{} ({:.1} s){}",
                s.id,
                s.seconds,
                s.failure.as_deref().map(|f| format!(" FAILED {f}")).unwrap_or_default()
            );
            for m in &s.memories {
                let v = &m.verdict;
                let label = match (v.states.is_empty(), v.acceptable, v.redundant) {
                    (false, _, true) => "redundant",
                    (false, _, false) => "fact",
                    (true, true, _) => "acceptable",
                    (true, false, _) => "WRONG",
                };
                *by_verdict.entry(label).or_default() += 1;
                let _ = writeln!(
                    t,
                    "  [{label} {}] ({}) {} — {}",
                    v.states.join(","),
                    m.kind,
                    m.title,
                    m.content.replace('\n', " ")
                );
                if let Some(why) = &v.noise {
                    let _ = writeln!(t, "    NOISE: {why}");
                }
            }
            for missed in &s.missed {
                let _ = writeln!(t, "  MISSED {missed}");
            }
            for call in &s.calls {
                let answer = call.answer.split_whitespace().collect::<Vec<_>>().join(" ");
                let _ = writeln!(t, "  ANSWER (t={}, {} tokens) {answer}", call.temperature, call.output_tokens);
            }
        }
        let _ = writeln!(t, "\nverdicts: {by_verdict:?}");
    }
    t
}

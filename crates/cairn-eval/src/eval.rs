//! Retrieval quality as numbers.
//!
//! Each data set is loaded into a private in-memory store through the same save path agents
//! use, every memory is embedded with the configured model, the daemon's lexical engine is
//! attached, and every question is searched in each mode. Reported per mode (and per
//! category): recall@1/5/10 (share of the expected memories in the top k, averaged over
//! questions), hit@k for LoCoMo (any evidence turn in the top k) and MRR (first expected hit).
//!
//! - `coding`: `eval/coding-memory.json`, memories of six projects plus personal ones;
//!   revision questions only count the memory when it shows the expected, current text.
//! - `heldout`: `eval/coding-heldout.json`, the same format, never fitted on (test only).
//! - `locomo`: LoCoMo's `locomo10.json` (not in the repository: `--locomo FILE` or
//!   `CAIRN_LOCOMO`), every turn a memory of its conversation (a project per conversation),
//!   questions of categories 1–4, evidence turns as the expected memories. Splits:
//!   conversations 0–4 are `dev`, 5–9 `test`.
//!
//! Vectors are cached under `<data dir>/eval-vectors/` by model id and text, so a re-run does
//! not embed again (the cache is written every 1,024 new vectors, so a stopped run keeps its
//! work). `--turn-context` changes only the text a LoCoMo turn's vector is computed from
//! (`turns.rs`); with `--split dev|test` only that half's conversations are loaded (each
//! searches its own project, so the others change no score), and `--locomo-skip N` leaves out
//! the first N.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use cairn_core::memory::NewObservation;
use cairn_core::search::index::SharedIndex;
use cairn_core::search::{SearchMode, SearchQuery, rerank};
use cairn_core::settings::{Overrides, Settings};
use cairn_core::{CairnError, Core, ErrorCode, Store};
use cairn_embed::{EmbedError, Embedder};
use serde::Serialize;
use serde_json::Value;

use crate::turns::{self, TurnContext};
use crate::{EvalArgs, crossfit, emit, note};

const TOP_K: usize = 10;

/// One question, ready to search.
struct Question {
    id: String,
    category: String,
    split: String,
    text: String,
    project: Option<String>,
    /// Memory ids that answer it.
    expected: Vec<i64>,
    /// For revisions: text the hit must contain (the current version).
    must_contain: Option<String>,
}

impl Question {
    /// The search this question makes: in its project, or in all when it names none.
    fn query(&self, limit: usize, mode: Option<SearchMode>) -> SearchQuery {
        SearchQuery {
            text: self.text.clone(),
            all_projects: self.project.is_none(),
            project: self.project.clone(),
            limit,
            mode,
            ..SearchQuery::default()
        }
    }
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct Scores {
    pub questions: usize,
    pub recall_at_1: f64,
    pub recall_at_5: f64,
    pub recall_at_10: f64,
    pub hit_at_5: f64,
    pub hit_at_10: f64,
    pub mrr: f64,
}

#[derive(Default)]
struct Tally {
    n: usize,
    recall: [f64; 3],
    hit: [f64; 2],
    rr: f64,
}

impl Tally {
    fn add(&mut self, ranks: &[Option<usize>]) {
        self.n += 1;
        let expected = ranks.len().max(1) as f64;
        for (slot, k) in [1, 5, 10].into_iter().enumerate() {
            self.recall[slot] += ranks.iter().filter(|r| r.is_some_and(|r| r <= k)).count() as f64 / expected;
        }
        let first = ranks.iter().flatten().min().copied();
        for (slot, k) in [5, 10].into_iter().enumerate() {
            if first.is_some_and(|r| r <= k) {
                self.hit[slot] += 1.0;
            }
        }
        self.rr += first.map_or(0.0, |r| 1.0 / r as f64);
    }

    fn scores(&self) -> Scores {
        let n = self.n.max(1) as f64;
        let round = |x: f64| (x / n * 1000.0).round() / 1000.0;
        Scores {
            questions: self.n,
            recall_at_1: round(self.recall[0]),
            recall_at_5: round(self.recall[1]),
            recall_at_10: round(self.recall[2]),
            hit_at_5: round(self.hit[0]),
            hit_at_10: round(self.hit[1]),
            mrr: round(self.rr),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct SetReport {
    pub set: String,
    pub memories: usize,
    pub model: Option<String>,
    /// LoCoMo: what each turn was embedded with (`--turn-context`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn_context: Option<String>,
    /// Mode → "all" or category → scores.
    pub modes: BTreeMap<String, BTreeMap<String, Scores>>,
    pub search_ms_p50: BTreeMap<String, f64>,
    pub misses: Vec<String>,
}

pub fn run(args: EvalArgs) -> Result<()> {
    // The same settings as `cairn` (config.toml, CAIRN_* variables) choose the model.
    let settings = Settings::load(&Overrides { data_dir: args.data_dir.clone(), ..Overrides::default() })?;
    if args.sets.iter().any(|s| s == "locomo") && args.locomo_file.is_none() {
        return Err(CairnError::invalid("the locomo set needs LoCoMo's locomo10.json, which is not in the repository")
            .with_hint("pass --locomo FILE (or set CAIRN_LOCOMO=FILE)")
            .into());
    }
    let cache = match cairn_engine::embedder::build(&settings.embedder_config()) {
        Ok(model) => Some(Arc::new(CachedEmbedder::open(model, &settings.data_dir.value.join("eval-vectors")))),
        Err(e) => {
            note(&format!("warning: {}; scoring lexical search only", e.message));
            None
        }
    };
    let semantic = cache.clone().map(|c| cairn_core::search::semantic::Semantic::new(c as Arc<dyn Embedder>));
    if let (Some(semantic), Some(scale)) = (&semantic, args.cosine_scale) {
        semantic.override_cosine_scale(scale);
        note(&format!("cosine scale: min_similarity {}, context_floor {}", scale.min_similarity, scale.context_floor));
    }
    if let (Some(semantic), true) = (&semantic, args.exact_vectors) {
        semantic.override_exact_scan();
        note("vectors: every one scored exactly (f32), no shortlist");
    }
    let modes: Vec<SearchMode> = args
        .modes
        .iter()
        .map(|m| SearchMode::parse(m))
        .collect::<cairn_core::Result<Vec<_>>>()?
        .into_iter()
        .filter(|m| semantic.is_some() || *m == SearchMode::Lexical)
        .collect();
    let mut reports = Vec::new();
    let mut dump = args.dump.as_deref().map(Dump::create).transpose()?;
    let mut pools = (args.cross_fit || args.fit_rerank).then(Vec::new);
    let turn_context = TurnContext::parse(&args.turn_context)?;
    for set in &args.sets {
        let (store, questions, embed_texts) = match set.as_str() {
            "coding" => with_store_texts(load_coding(&args, &args.coding_file)?),
            "heldout" => with_store_texts(load_coding(&args, &args.heldout_file)?),
            "locomo" => load_locomo(&args, turn_context)?,
            other => {
                return Err(CairnError::invalid(format!("unknown eval set {other:?}"))
                    .with_hint("use coding, heldout and/or locomo")
                    .into());
            }
        };
        let outputs = Outputs { misses: args.misses, dump: dump.as_mut(), pools: pools.as_mut() };
        let mut report = score_set(set, store, &questions, &embed_texts, semantic.clone(), &modes, outputs)?;
        if set == "locomo" {
            report.turn_context = Some(turn_context.label());
        }
        reports.push(report);
    }
    if let Some(dump) = dump {
        dump.finish()?;
    }
    if let Some(pools) = pools {
        let model = semantic.as_ref().map_or_else(|| "?".to_owned(), |s| s.model_id().to_owned());
        if args.fit_rerank {
            // Fitted on the dev questions of the coding set and LoCoMo: the held-out set's
            // pools (set "heldout") never feed a fit.
            let scale = semantic.as_deref().map_or(rerank::DEFAULT_COSINE, rerank::cosine_scale_of);
            print_fitted_model(&model, scale, &pools);
        }
        if args.cross_fit {
            let (rows, chosen) = crossfit::compare(&pools, &model);
            note(&crossfit::render(&rows));
            if let Some((recipe, fit)) = chosen {
                note(&crossfit::render_constants(&recipe, &fit));
            }
        }
    }
    if let Some(cache) = &cache {
        cache.flush();
    }
    emit(args.json, &reports, |r| render(r))
}

/// A loaded set whose memories are embedded from the store's own text.
fn with_store_texts((store, questions): (Store, Vec<Question>)) -> (Store, Vec<Question>, HashMap<i64, String>) {
    (store, questions, HashMap::new())
}

fn score_set(
    name: &str,
    store: Store,
    questions: &[Question],
    embed_texts: &HashMap<i64, String>,
    semantic: Option<Arc<cairn_core::search::semantic::Semantic>>,
    modes: &[SearchMode],
    outputs: Outputs<'_>,
) -> Result<SetReport> {
    let memories = store.stats()?.total_observations as usize;
    let index = Arc::new(SharedIndex::default());
    index.set(store.build_index()?);
    let mut store = Core::new(store).with_index(index);
    let model = semantic.as_ref().map(|s| s.model_id().to_owned());
    if let Some(semantic) = semantic {
        // A fresh semantic state per set: vectors of one set never leak into another.
        let fresh = cairn_core::search::semantic::Semantic::new(Arc::clone(semantic.embedder().expect("loaded")));
        if let Some(scale) = semantic.cosine_scale_override() {
            fresh.override_cosine_scale(scale);
        }
        if semantic.exact_scan() {
            fresh.override_exact_scan();
        }
        store.semantic = Some(fresh);
        store.load_vectors()?;
        let started = Instant::now();
        let mut done = 0;
        loop {
            let n = embed_some(&mut store, embed_texts, 64)?;
            if n == 0 {
                break;
            }
            done += n;
            if done % 1024 < 64 {
                note(&format!("  {name}: embedded {done}/{memories} ({:.0?})", started.elapsed()));
            }
        }
        note(&format!("  {name}: {done} memories embedded in {:.1?}", started.elapsed()));
    }
    if let Some(dump) = outputs.dump {
        dump.rankings(name, &store, questions)?;
    }
    if let Some(pools) = outputs.pools {
        pools.extend(labelled_pools(name, &store, questions)?);
    }
    let mut report = SetReport {
        set: name.to_owned(),
        memories,
        model,
        turn_context: None,
        modes: BTreeMap::new(),
        search_ms_p50: BTreeMap::new(),
        misses: Vec::new(),
    };
    for &mode in modes {
        if let Some(semantic) = &store.semantic {
            semantic.clear_query_cache();
        }
        let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
        let mut times = Vec::with_capacity(questions.len());
        for q in questions {
            let query = q.query(TOP_K, Some(mode));
            let started = Instant::now();
            let results = store.search(&query)?;
            times.push(started.elapsed().as_secs_f64() * 1000.0);
            let ranks: Vec<Option<usize>> = q
                .expected
                .iter()
                .map(|id| {
                    results.hits.iter().position(|h| {
                        h.observation.id == *id
                            && q.must_contain.as_deref().is_none_or(|t| h.observation.content.contains(t))
                    })
                })
                .map(|p| p.map(|p| p + 1))
                .collect();
            if outputs.misses && ranks.iter().all(|r| r.is_none_or(|r| r > 5)) {
                let top: Vec<String> = results.hits.iter().take(3).map(|h| h.observation.title.clone()).collect();
                report.misses.push(format!("[{}] {} {:?} → {top:?}", mode.as_str(), q.id, q.text));
            }
            tallies.entry("all".into()).or_default().add(&ranks);
            tallies.entry(q.category.clone()).or_default().add(&ranks);
            tallies.entry(format!("split:{}", q.split)).or_default().add(&ranks);
            tallies.entry(format!("{}:{}", q.split, q.category)).or_default().add(&ranks);
        }
        times.sort_by(f64::total_cmp);
        let p50 = times.get(times.len() / 2).copied().unwrap_or(0.0);
        report.search_ms_p50.insert(mode.as_str().to_owned(), (p50 * 1000.0).round() / 1000.0);
        report.modes.insert(mode.as_str().to_owned(), tallies.iter().map(|(k, t)| (k.clone(), t.scores())).collect());
    }
    Ok(report)
}

/// Embed up to `limit` memories still without a vector: from `embed_texts` when it has the
/// memory (`--turn-context`), else from the store's own text, as the daemon does.
fn embed_some(store: &mut Core, embed_texts: &HashMap<i64, String>, limit: usize) -> Result<usize> {
    if embed_texts.is_empty() {
        return Ok(store.embed_pending(limit)?);
    }
    let semantic = Arc::clone(store.semantic.as_ref().expect("attached before embedding"));
    let pending = store.store.pending_embeddings(semantic.model_id(), limit)?;
    if pending.is_empty() {
        return Ok(0);
    }
    let texts: Vec<String> =
        pending.iter().map(|p| embed_texts.get(&p.id).cloned().unwrap_or_else(|| p.text())).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let embedder = semantic.embedder().expect("loaded");
    let vectors = embedder.embed(&refs).map_err(|e| cairn_core::search::semantic::embed_error(&e))?;
    let items: Vec<_> = pending.into_iter().zip(vectors).collect();
    Ok(store.store_embeddings(&items)?)
}

/// What a run writes besides the scores.
struct Outputs<'a> {
    /// Print the questions whose expected memories are not in the top 5.
    misses: bool,
    /// `--dump`: the rankings, as JSON lines.
    dump: Option<&'a mut Dump>,
    /// `--cross-fit`, `--fit-rerank`: every question's pool, labelled, with its set, split and
    /// category.
    pools: Option<&'a mut Vec<crossfit::Pool>>,
}

/// Each question's hybrid pool in fused order, for cross-fitting.
fn labelled_pools(set: &str, store: &Core, questions: &[Question]) -> Result<Vec<crossfit::Pool>> {
    let mut pools = Vec::with_capacity(questions.len());
    for q in questions {
        let candidates = store
            .rerank_pool(&q.query(TOP_K, None))?
            .into_iter()
            .map(|(id, read)| crossfit::Candidate { id, read, relevant: q.expected.contains(&id) })
            .collect();
        pools.push(crossfit::Pool {
            set: set.to_owned(),
            split: q.split.clone(),
            category: q.category.clone(),
            expected: q.expected.len(),
            candidates,
        });
    }
    Ok(pools)
}

/// Fit the re-ranking with the recipe every model ships and print it as a `rerank::Fitted`
/// constant for `rerank.rs`.
fn print_fitted_model(model_id: &str, scale: rerank::CosineScale, pools: &[crossfit::Pool]) {
    let sources = ["coding", "locomo"];
    let Some(fit) = crossfit::SHIPPED.fit(pools, &sources) else {
        note("--fit-rerank: nothing to fit (no model, or no question in the split)");
        return;
    };
    let rows = pools.iter().filter(|p| p.split == "dev" && sources.contains(&p.set.as_str()));
    let (candidates, relevant) =
        rows.fold((0, 0), |(n, r), p| (n + p.candidates.len(), r + p.candidates.iter().filter(|c| c.relevant).count()));
    let mut out = format!("// fitted on {candidates} candidates ({relevant} relevant), {}\n", crossfit::SHIPPED.name);
    // The model's name without the `local:`/`http:` kind and config hash of its id.
    let is_hash = |p: &str| p.len() == 8 && p.chars().all(|c| c.is_ascii_hexdigit());
    let name = model_id.split(':').find(|p| !matches!(*p, "local" | "http") && !is_hash(p)).unwrap_or(model_id);
    let constant: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    let _ = writeln!(out, "pub const {constant}: Fitted = Fitted {{\n    model: {name:?},");
    out.push_str(&crossfit::render_fit(&fit));
    // The floors the candidates were gathered with: the weights belong to them.
    let _ = writeln!(
        out,
        "    cosine: CosineScale {{ min_similarity: {}, context_floor: {} }},\n}};",
        scale.min_similarity, scale.context_floor
    );
    note(&out);
}

/// Depth of each ranking written by `--dump`.
const DUMP_DEPTH: usize = 100;

/// The `--dump` file: created (or emptied) when the run starts, one JSON line per memory and
/// per question of every set.
struct Dump {
    path: std::path::PathBuf,
    out: std::io::BufWriter<std::fs::File>,
}

impl Dump {
    fn create(path: &std::path::Path) -> Result<Dump> {
        let file = std::fs::File::create(path).map_err(|e| Dump::error(path, &e))?;
        Ok(Dump { path: path.to_owned(), out: std::io::BufWriter::new(file) })
    }

    fn error(path: &std::path::Path, e: &std::io::Error) -> CairnError {
        CairnError::new(ErrorCode::InvalidArgument, format!("cannot write {}: {e}", path.display()))
            .with_hint("give --dump a file in a writable directory")
    }

    fn line(&mut self, value: &Value) -> Result<()> {
        use std::io::Write as _;
        writeln!(self.out, "{value}").map_err(|e| Dump::error(&self.path, &e).into())
    }

    /// The set's memories (id, session, title, content) and, per question, the lexical and
    /// semantic rankings with their scores and the re-ranker's pool with its features: what
    /// a fusion or a re-ranking needs, so variants of them can be scored without rebuilding
    /// cairn.
    fn rankings(&mut self, set: &str, store: &Core, questions: &[Question]) -> Result<()> {
        for memory in store.store.export(None)?.observations {
            self.line(&serde_json::json!({
                "set": set, "memory": memory.id, "session": memory.session_id, "project": memory.project,
                "title": memory.title, "content": memory.content,
            }))?;
        }
        for q in questions {
            let mut line = serde_json::json!({
                "set": set, "question": q.id, "category": q.category, "split": q.split, "text": q.text,
                "expected": q.expected, "must_contain": q.must_contain,
            });
            // The re-ranker's pool in fused order, each candidate with its features: what a
            // variant of the re-ranking is studied on.
            let pool: Vec<(i64, rerank::Features, Vec<usize>)> =
                store.rerank_pool(&q.query(TOP_K, None))?.into_iter().map(|(id, c)| (id, c.features, c.near)).collect();
            line["pool"] = serde_json::json!(pool);
            // Hybrid carries the re-ranker's relevance: what `min_score` and the `[MEMORY]`
            // block's `similarity_threshold` cut on (docs/BENCHMARKS.md "Similarity threshold").
            for mode in [SearchMode::Lexical, SearchMode::Semantic, SearchMode::Hybrid] {
                let results = store.search(&q.query(DUMP_DEPTH, Some(mode)))?;
                // Without a model a semantic search answers lexically: that is no semantic ranking.
                let hits = if results.mode == mode { results.hits.as_slice() } else { &[] };
                let ranking: Vec<(i64, f64, bool)> = hits
                    .iter()
                    .map(|h| {
                        let score = match mode {
                            SearchMode::Semantic => h.scores.semantic.map_or(0.0, f64::from),
                            SearchMode::Hybrid => h.scores.fused,
                            SearchMode::Lexical => h.scores.lexical.unwrap_or(h.score),
                        };
                        let current = q.must_contain.as_deref().is_none_or(|t| h.observation.content.contains(t));
                        (h.observation.id, score, current)
                    })
                    .collect();
                line[mode.as_str()] = serde_json::json!(ranking);
            }
            self.line(&line)?;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<()> {
        use std::io::Write as _;
        self.out.flush().map_err(|e| Dump::error(&self.path, &e).into())
    }
}

/// Vectors of every text eval embedded, on disk under the data dir, keyed by the model id and
/// the text: a re-run scores in seconds instead of re-embedding ~6,000 LoCoMo turns. Only eval
/// uses it (the engine stores memories' vectors in its database).
struct CachedEmbedder {
    model: Arc<dyn Embedder>,
    path: std::path::PathBuf,
    cache: std::sync::Mutex<VectorCache>,
}

#[derive(Default)]
struct VectorCache {
    vectors: HashMap<u64, Vec<f32>>,
    /// Something was embedded since the file was read or written.
    changed: bool,
    /// Vectors embedded since the file was last written.
    unsaved: usize,
}

/// The cache is written after this many new vectors too, so a long run that is stopped
/// keeps most of its work.
const SAVE_EVERY: usize = 1024;

/// One cache entry on disk: text key (u64), dimensions (u32), then the vector as stored.
const ENTRY_HEADER: usize = 12;

impl CachedEmbedder {
    fn open(model: Arc<dyn Embedder>, dir: &std::path::Path) -> CachedEmbedder {
        let name: String = model.model_id().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        let path = dir.join(format!("{name}.bin"));
        let mut vectors = HashMap::new();
        if let Ok(bytes) = std::fs::read(&path) {
            let mut rest = bytes.as_slice();
            // A truncated file keeps what it holds whole; the rest is embedded again.
            while let Some((key, dims)) = rest.get(..ENTRY_HEADER).map(|h| {
                (
                    u64::from_le_bytes(h[..8].try_into().unwrap_or_default()),
                    u32::from_le_bytes(h[8..].try_into().unwrap_or_default()) as usize,
                )
            }) {
                let Some(body) = rest.get(ENTRY_HEADER..ENTRY_HEADER + dims * 4) else { break };
                vectors.insert(key, cairn_core::search::semantic::decode(body));
                rest = &rest[ENTRY_HEADER + body.len()..];
            }
        }
        let cache = std::sync::Mutex::new(VectorCache { vectors, changed: false, unsaved: 0 });
        CachedEmbedder { model, path, cache }
    }

    /// The cache key of a text embedded as a passage or, `query`, as a query (a model with
    /// prompts embeds the two differently).
    fn key(&self, text: &str, query: bool) -> u64 {
        use std::hash::{Hash, Hasher};
        // FNV-1a: stable across runs and Rust versions, unlike the std hasher.
        let mut h = Fnv(0xcbf2_9ce4_8422_2325);
        self.model.model_id().hash(&mut h);
        if query {
            "\u{1}query".hash(&mut h);
        }
        text.hash(&mut h);
        h.finish()
    }

    fn cached(&self, texts: &[&str], query: bool) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let keys: Vec<u64> = texts.iter().map(|t| self.key(t, query)).collect();
        let missing: Vec<&str> =
            texts.iter().zip(&keys).filter(|(_, k)| !cache.vectors.contains_key(k)).map(|(t, _)| *t).collect();
        if !missing.is_empty() {
            let fresh = if query { self.model.embed_queries(&missing)? } else { self.model.embed(&missing)? };
            for (text, v) in missing.iter().zip(fresh) {
                let key = self.key(text, query);
                cache.vectors.insert(key, v);
            }
            cache.changed = true;
            cache.unsaved += missing.len();
        }
        let vectors = keys.iter().map(|k| cache.vectors[k].clone()).collect();
        if cache.unsaved >= SAVE_EVERY {
            self.write(&mut cache);
        }
        Ok(vectors)
    }

    /// Write the file when something new was embedded.
    fn flush(&self) {
        let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.write(&mut cache);
    }

    fn write(&self, cache: &mut VectorCache) {
        if !cache.changed {
            return;
        }
        let mut out = Vec::new();
        for (key, v) in &cache.vectors {
            out.extend_from_slice(&key.to_le_bytes());
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(&cairn_core::search::semantic::encode(v));
        }
        let written = self.path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| {
            let tmp = self.path.with_extension("tmp");
            std::fs::write(&tmp, out)?;
            std::fs::rename(tmp, &self.path)
        });
        match written {
            Ok(()) => {
                cache.changed = false;
                cache.unsaved = 0;
            }
            Err(e) => note(&format!("warning: cannot write the eval vector cache {}: {e}", self.path.display())),
        }
    }
}

struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

impl Embedder for CachedEmbedder {
    fn model_id(&self) -> &str {
        self.model.model_id()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.cached(texts, false)
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.cached(texts, true)
    }
}

fn read_json(path: &std::path::Path) -> Result<Value> {
    let bytes = std::fs::read(path).map_err(|e| {
        CairnError::new(ErrorCode::FileNotFound, format!("cannot read {}: {e}", path.display()))
            .with_hint("run from the repository root, or pass --coding-file / --locomo")
    })?;
    Ok(serde_json::from_slice(&bytes)
        .map_err(|e| CairnError::invalid(format!("{} is not valid JSON: {e}", path.display())))?)
}

/// An eval file without the part it must have.
fn shape(missing: &str) -> CairnError {
    CairnError::invalid(format!("the eval file has no {missing}"))
        .with_hint("eval/coding-memory.json or LoCoMo's locomo10.json")
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_owned()
}

fn load_coding(args: &EvalArgs, file: &std::path::Path) -> Result<(Store, Vec<Question>)> {
    let doc = read_json(file)?;
    let mut store = Store::open_in_memory()?;
    let mut ids: HashMap<String, i64> = HashMap::new();
    let mut memories: Vec<&Value> = doc["memories"].as_array().ok_or_else(|| shape("memories"))?.iter().collect();
    memories.sort_by_key(|m| m["seq"].as_i64().unwrap_or(0));
    for m in memories {
        let saved = store.save(&NewObservation {
            title: text(m, "title"),
            content: text(m, "content"),
            kind: m["type"].as_str().map(str::to_owned),
            project: m["project"].as_str().map(str::to_owned),
            scope: m["scope"].as_str().map(str::to_owned),
            topic_key: m["topic_key"].as_str().map(str::to_owned),
            ..NewObservation::default()
        })?;
        ids.insert(text(m, "key"), saved.id);
    }
    let questions = doc["questions"]
        .as_array()
        .ok_or_else(|| shape("questions"))?
        .iter()
        .filter(|q| args.split == "all" || q["split"].as_str() == Some(args.split.as_str()))
        .map(|q| Question {
            id: text(q, "id"),
            category: text(q, "category"),
            split: text(q, "split"),
            text: text(q, "query"),
            project: q["project"].as_str().map(str::to_owned),
            expected: q["expected"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|k| k.as_str().and_then(|k| ids.get(k)).copied())
                .collect(),
            must_contain: q["expect_contains"].as_str().map(str::to_owned),
        })
        .collect();
    Ok((store, questions))
}

fn load_locomo(args: &EvalArgs, context: TurnContext) -> Result<(Store, Vec<Question>, HashMap<i64, String>)> {
    let path = args.locomo_file.as_deref().ok_or_else(|| CairnError::invalid("no LoCoMo file"))?;
    let doc = read_json(path)?;
    let samples = doc.as_array().ok_or_else(|| shape("an array of conversations"))?;
    let take = args.locomo_samples.unwrap_or(samples.len());
    let mut store = Store::open_in_memory()?;
    let mut questions = Vec::new();
    let mut embed_texts = HashMap::new();
    for (index, sample) in samples.iter().take(take).enumerate() {
        // Conversations 0–4 are the dev half, 5–9 the test half (whole conversations, so no
        // tuning ever sees a test conversation's questions).
        // Every conversation's turns go in whatever the split; only its questions are chosen.
        let split = if index < 5 { "dev" } else { "test" };
        // Each conversation is its own project and every question searches its own, so the
        // others change no score (BM25 counts a scoped search's own memories): skip them.
        if (args.split != "all" && args.split != split) || index < args.locomo_skip {
            continue;
        }
        let project = format!("locomo-{}", text(sample, "sample_id"));
        let conversation = &sample["conversation"];
        let mut turn_ids: HashMap<String, i64> = HashMap::new();
        for session in 1.. {
            let Some(turns) = conversation[format!("session_{session}")].as_array() else { break };
            let date = text(conversation, &format!("session_{session}_date_time"));
            let session_id = format!("{project}-s{session}");
            let mut saved_turns = Vec::with_capacity(turns.len());
            for turn in turns {
                let mut content = text(turn, "text");
                if let Some(caption) = turn["blip_caption"].as_str() {
                    let _ = write!(content, " [shares a photo: {caption}]");
                }
                // The speaker and the session's date label the turn; the turn is the content.
                let title = format!("{} ({date})", text(turn, "speaker"));
                let saved = store.save(&NewObservation {
                    title: title.clone(),
                    content: content.clone(),
                    kind: Some("conversation".into()),
                    project: Some(project.clone()),
                    session_id: Some(session_id.clone()),
                    ..NewObservation::default()
                })?;
                turn_ids.insert(text(turn, "dia_id"), saved.id);
                saved_turns.push(turns::Turn { id: saved.id, speaker: text(turn, "speaker"), title, content });
            }
            embed_texts.extend(turns::session_texts(&saved_turns, context));
        }
        for (n, qa) in sample["qa"].as_array().into_iter().flatten().enumerate() {
            let category = qa["category"].as_i64().unwrap_or(0);
            if !(1..=4).contains(&category) {
                continue;
            }
            let expected: Vec<i64> = qa["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .flat_map(|e| e.split([';', ',', ' ']).map(str::trim).filter(|e| !e.is_empty()).collect::<Vec<_>>())
                .filter_map(|e| turn_ids.get(e).copied())
                .collect();
            if expected.is_empty() || (args.split != "all" && args.split != split) {
                continue;
            }
            questions.push(Question {
                id: format!("{project}#{n}"),
                category: format!("cat{category}"),
                split: split.into(),
                text: text(qa, "question"),
                project: Some(project.clone()),
                expected,
                must_contain: None,
            });
        }
    }
    Ok((store, questions, embed_texts))
}

fn render(reports: &[SetReport]) -> String {
    let mut text = String::new();
    for r in reports {
        let _ = write!(text, "{} — {} memories, model {}", r.set, r.memories, r.model.as_deref().unwrap_or("none"));
        let _ =
            writeln!(text, "{}", r.turn_context.as_deref().map(|c| format!(", turn context {c}")).unwrap_or_default());
        let _ = writeln!(
            text,
            "  {:<9} {:<12} {:>5} {:>6} {:>6} {:>6} {:>6} {:>6}",
            "mode", "subset", "n", "R@1", "R@5", "R@10", "hit@10", "MRR"
        );
        for (mode, groups) in &r.modes {
            for (group, s) in groups {
                let _ = writeln!(
                    text,
                    "  {mode:<9} {group:<12} {:>5} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>6.3}",
                    s.questions, s.recall_at_1, s.recall_at_5, s.recall_at_10, s.hit_at_10, s.mrr
                );
            }
        }
        for (mode, ms) in &r.search_ms_p50 {
            let _ = writeln!(text, "  search p50 {mode}: {ms:.2} ms");
        }
        for m in &r.misses {
            let _ = writeln!(text, "  miss {m}");
        }
    }
    text
}

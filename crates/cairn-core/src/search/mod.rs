//! Search behind one interface: an engine returns ranked candidates, [`Core::search`] adds the
//! exact topic_key hits first, hydrates memories and applies the shared filters. Search runs
//! on the core's context: the store's tables, and the index and vectors beside them.
//!
//! Engines: lexical BM25 (FTS5, or the daemon's in-memory index), semantic (nearest
//! embeddings, see [`semantic`]) and hybrid, which fuses the two rankings by weighted
//! reciprocal rank. Hybrid is the default whenever vectors exist; without a model, search is
//! lexical and says so only when semantic search was asked for.

pub mod currency;
pub mod deep;
mod embeddings;
pub mod fusion;
pub mod overlap;
pub use cairn_base::query;
pub mod rerank;
/// The lexical index and the vectors are the core context's; searches read them here.
pub use crate::{index, semantic};
pub mod snippet;
pub mod temporal;
use crate::search_timing as timing;

use serde::{Deserialize, Serialize};

use crate::Core;
use crate::error::{CairnError, Result};
use crate::lenient;
use crate::model::{Observation, Prompt};
use crate::store::Store;
use crate::text::{Scope, normalize_project, normalize_topic_key};

/// Results per page when the caller does not say.
pub const DEFAULT_LIMIT: usize = 10;
/// Most results one search returns.
pub const MAX_LIMIT: usize = 100;

/// What to search for and where: the one shape of a search request. The HTTP API's query
/// string (`GET /search`), the MCP tool's arguments (`mem_search`), the router's and the
/// daemon's `search` op all read it, through the same lenient readers; the CLI builds it.
/// Doc comments are the MCP schema's and the OpenAPI document's descriptions: keep them short.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(transform = query_is_required))]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
pub struct SearchQuery {
    /// Keywords; any word may match, best first. `"phrases"`, `prefix*`; a topic_key finds that memory.
    // Blank or absent is refused by the search itself (`empty_field`), the same for every door.
    // `q` is the HTTP API's name (engram's), `query` the MCP tool's, `text` what older
    // clients of the daemon's op sent.
    #[serde(rename = "q", alias = "query", alias = "text", default)]
    #[cfg_attr(feature = "schema", schemars(rename = "query"))]
    #[cfg_attr(feature = "openapi", param(required = true, pattern = r"\S"))]
    pub text: String,
    /// Its memories plus personal ones (default: the current project over MCP, every project over HTTP).
    #[serde(default, deserialize_with = "lenient::given")]
    pub project: Option<String>,
    /// Search every project.
    #[serde(default, deserialize_with = "lenient::flag")]
    pub all_projects: bool,
    /// Only this type.
    #[serde(default, rename = "type", deserialize_with = "lenient::given")]
    pub kind: Option<String>,
    /// project or personal (blank: both).
    #[serde(default, deserialize_with = "scope_filter")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    #[cfg_attr(feature = "openapi", param(schema_with = crate::openapi::scope_filter))]
    pub scope: Option<Scope>,
    /// Results (default 10, max 100).
    // `0` means [`DEFAULT_LIMIT`]; capped at [`MAX_LIMIT`].
    #[serde(default, deserialize_with = "lenient::count_or::<_, 0>")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u32>"))]
    #[cfg_attr(feature = "openapi", param(value_type = Option<usize>, minimum = 0))]
    pub limit: usize,
    /// lexical (exact words), semantic (meaning) or hybrid (both; the default when available).
    // `None` = hybrid when vectors exist, else lexical.
    #[serde(default, deserialize_with = "search_mode")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<String>"))]
    #[cfg_attr(feature = "openapi", param(schema_with = crate::openapi::search_mode))]
    pub mode: Option<SearchMode>,
    /// Least relevance 0-1 (cosine, re-ranker relevance, or BM25 relative to the best hit).
    // See [`relevance`]. Topic-key hits always pass; hits below it are dropped, so fewer than
    // `limit` may come back.
    #[serde(default, deserialize_with = "lenient::opt_number")]
    #[cfg_attr(feature = "openapi", param(minimum = 0, maximum = 1))]
    pub min_score: Option<f64>,
    /// Deep recall: a language model re-ranks the best candidates (slower; default per config;
    /// without a model the usual ranking answers).
    // [`deep`]; `None`: the daemon's default (`[search] deep`). Without a model the first stage
    // answers, with a notice.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient::opt_flag")]
    pub deep: Option<bool>,
}

/// The MCP schema of [`SearchQuery`]: `query` is required (the field has a serde default only so
/// that a blank and a missing query get the same `empty_field` from the search), and no
/// property shows its Rust default (`limit: 0` means 10).
#[cfg(feature = "schema")]
fn query_is_required(schema: &mut schemars::Schema) {
    if let Some(properties) = schema.get_mut("properties").and_then(serde_json::Value::as_object_mut) {
        for property in properties.values_mut().filter_map(serde_json::Value::as_object_mut) {
            property.remove("default");
        }
    }
    schema.insert("required".into(), serde_json::json!(["query"]));
}

/// A scope filter from any door: blank is none, anything but a scope is refused
/// ([`Scope::parse_filter`]).
fn scope_filter<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<Scope>, D::Error> {
    let raw = Option::<String>::deserialize(d)?;
    Scope::parse_filter(raw.as_deref()).map_err(door_error)
}

/// A search mode from any door: blank is the default, any case and the aliases of
/// [`SearchMode::parse`] are read.
fn search_mode<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Option<SearchMode>, D::Error> {
    let raw = lenient::given(d)?;
    raw.as_deref().map(SearchMode::parse).transpose().map_err(door_error)
}

/// A rule's refusal as a field error: the message and its hint, which the door prefixes with
/// the field's name.
fn door_error<E: serde::de::Error>(e: CairnError) -> E {
    match e.hint {
        Some(hint) => E::custom(format!("{} ({hint})", e.message)),
        None => E::custom(e.message),
    }
}

/// How relevant a hit is, 0–1, in the terms of the ranking that found it (see
/// [`SearchQuery::min_score`]); `best_lexical` is the best BM25 of the page (lexical mode).
pub fn relevance(hit: &SearchHit, mode: SearchMode, best_lexical: f64) -> f64 {
    if hit.matched == MatchKind::TopicKey {
        return 1.0;
    }
    match mode {
        SearchMode::Semantic => hit.scores.semantic.map_or(0.0, f64::from),
        SearchMode::Hybrid => hit.scores.fused,
        SearchMode::Lexical => match hit.scores.lexical {
            Some(score) if best_lexical > 0.0 => score / best_lexical,
            _ => 0.0,
        },
    }
    .clamp(0.0, 1.0)
}

/// The best BM25 among the hits (the scale of lexical [`relevance`]).
pub fn best_lexical(hits: &[SearchHit]) -> f64 {
    hits.iter().filter(|h| h.matched != MatchKind::TopicKey).filter_map(|h| h.scores.lexical).fold(0.0, f64::max)
}

/// Check a `min_score` argument: a number from 0 to 1.
pub fn check_min_score(min_score: Option<f64>) -> Result<()> {
    match min_score {
        Some(m) if !(0.0..=1.0).contains(&m) => {
            Err(CairnError::invalid(format!("min_score {m} is not between 0 and 1"))
                .with_hint("min_score is a relevance from 0 to 1, e.g. 0.3"))
        }
        _ => Ok(()),
    }
}

/// How a search ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    /// BM25 over words (always available).
    Lexical,
    /// Nearest embeddings only.
    Semantic,
    /// Both, fused by reciprocal rank.
    Hybrid,
}

impl SearchMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Lexical => "lexical",
            SearchMode::Semantic => "semantic",
            SearchMode::Hybrid => "hybrid",
        }
    }

    /// Parse a door's `mode` parameter (`lexical`, `semantic`, `hybrid`).
    pub fn parse(raw: &str) -> Result<SearchMode> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "lexical" | "keyword" | "bm25" => Ok(SearchMode::Lexical),
            "semantic" | "vector" => Ok(SearchMode::Semantic),
            "hybrid" => Ok(SearchMode::Hybrid),
            _ => Err(CairnError::invalid(format!("unknown search mode {raw:?}"))
                .with_hint("use lexical, semantic or hybrid")),
        }
    }
}

impl std::str::FromStr for SearchMode {
    type Err = CairnError;
    fn from_str(s: &str) -> Result<Self> {
        SearchMode::parse(s)
    }
}

impl SearchQuery {
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into(), ..Self::default() }
    }

    pub(crate) fn effective_limit(&self) -> usize {
        if self.limit == 0 { DEFAULT_LIMIT } else { self.limit.min(MAX_LIMIT) }
    }
}

/// How a hit was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MatchKind {
    /// The query is this memory's topic_key.
    TopicKey,
    /// Full-text (BM25) match.
    Lexical,
    /// Close in meaning (embedding similarity) only.
    Semantic,
    /// Found by both rankings.
    Hybrid,
    /// Saved right next to a hit in the same session (hybrid search's session context).
    Context,
    /// The memory that replaced a hit (a judged `supersedes`), shown before it.
    Replacement,
}

/// The scores behind a hit's place.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HitScores {
    /// BM25 (higher is better), when the words matched.
    pub lexical: Option<f64>,
    /// Cosine similarity with the query, when semantic search ran.
    pub semantic: Option<f32>,
    /// What the hit is ordered by: in hybrid search the re-ranking model's relevance (0–1),
    /// otherwise BM25 or the cosine (topic-key hits: 1000).
    pub fused: f64,
    /// Deep recall: the hit's place (1 = best) in the language model's ranking, when the
    /// model named it (then the hit is ordered by it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deep: Option<u32>,
}

/// One result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
// `RankedHit`: the daemon's `SearchHit` adds the relation notes.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = RankedHit))]
pub struct SearchHit {
    #[serde(flatten)]
    pub observation: Observation,
    /// engram-compatible rank: BM25, more negative is better (topic hits: -1000).
    pub rank: f64,
    /// Higher is better (the negated rank), for people and fusion.
    pub score: f64,
    /// The best-matching passage with matches in `**bold**`.
    pub snippet: String,
    pub matched: MatchKind,
    pub scores: HitScores,
    /// How relevant the hit is, 0–1, in the terms of the ranking that found it (see
    /// [`relevance`]): what `min_score` cuts on, shown as a percentage by plugins.
    #[serde(default)]
    pub relevance: f64,
}

impl AsRef<SearchHit> for SearchHit {
    fn as_ref(&self) -> &SearchHit {
        self
    }
}

impl AsMut<SearchHit> for SearchHit {
    fn as_mut(&mut self) -> &mut SearchHit {
        self
    }
}

/// A hit as the `search` op answers it: with its relation notes (supersedes, conflicts,
/// pending review), so no door joins them back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnnotatedHit {
    #[serde(flatten)]
    pub hit: SearchHit,
    /// Relation notes, empty when the memory has none.
    pub annotations: Vec<String>,
}

impl AsRef<SearchHit> for AnnotatedHit {
    fn as_ref(&self) -> &SearchHit {
        &self.hit
    }
}

impl AsMut<SearchHit> for AnnotatedHit {
    fn as_mut(&mut self) -> &mut SearchHit {
        &mut self.hit
    }
}

/// A page of results plus anything the caller should be told.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResults {
    pub hits: Vec<SearchHit>,
    /// Explanations when the answer is empty or was shaped by a rule.
    pub notices: Vec<String>,
    /// The ranking actually used.
    pub mode: SearchMode,
}

impl Default for SearchResults {
    fn default() -> Self {
        SearchResults { hits: Vec::new(), notices: Vec::new(), mode: SearchMode::Lexical }
    }
}

/// A candidate from an engine: the id, its engine rank (lower better), a snippet when the
/// engine has one, and how it was found.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub id: i64,
    pub rank: f64,
    pub snippet: String,
    pub matched: MatchKind,
    pub scores: HitScores,
}

impl Candidate {
    /// A BM25 candidate (`rank` is FTS5's: negative, lower better).
    pub fn lexical(id: i64, rank: f64, snippet: String) -> Candidate {
        let scores = HitScores { lexical: Some(-rank), semantic: None, fused: -rank, deep: None };
        Candidate { id, rank, snippet, matched: MatchKind::Lexical, scores }
    }
}

/// A ranking strategy. Implementations return candidates best first, already filtered.
pub trait SearchEngine {
    fn name(&self) -> &'static str;
    fn candidates(&self, core: &Core, query: &SearchQuery, limit: usize) -> Result<Vec<Candidate>>;
}

/// FTS5 BM25 over title, content, type, topic_key and tool name, porter-stemmed, any-word
/// matching. Filters run inside FTS5; only the top rows are checked against the table.
#[derive(Debug, Default, Clone, Copy)]
pub struct LexicalEngine;

impl SearchEngine for LexicalEngine {
    fn name(&self) -> &'static str {
        "lexical"
    }

    fn candidates(&self, core: &Core, query: &SearchQuery, limit: usize) -> Result<Vec<Candidate>> {
        let store = &core.store;
        let Some(terms) = query::to_fts(&query::parse(&query.text)) else { return Ok(Vec::new()) };
        let expr = match fts_filter(query) {
            Some(filter) => format!("({terms}) AND {filter}"),
            None => terms.clone(),
        };
        // The FTS filter is a superset (phrase match on tokens: project "foo" also matches
        // "foo-bar"), so rows are checked exactly; fetch more when too many fall out.
        let mut fetch = limit * 2 + 8;
        loop {
            let ranked = store.fts_ranked(&expr, fetch)?;
            let exhausted = ranked.len() < fetch;
            let mut kept: Vec<(i64, f64, String)> = Vec::with_capacity(limit);
            for (id, rank) in ranked {
                if let Some(updated_at) = passes_filters(store, id, query)? {
                    kept.push((id, rank, updated_at));
                    if kept.len() == limit {
                        break;
                    }
                }
            }
            if kept.len() == limit || exhausted {
                // Equal ranks: the newer memory first.
                kept.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.2.cmp(&a.2)).then_with(|| b.0.cmp(&a.0)));
                return kept
                    .into_iter()
                    .map(|(id, rank, _)| Ok(Candidate::lexical(id, rank, store.fts_snippet(&terms, id)?)))
                    .collect();
            }
            fetch *= 4;
        }
    }
}

/// Filters as an FTS5 expression over the indexed project / scope / type columns.
fn fts_filter(query: &SearchQuery) -> Option<String> {
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut parts = Vec::new();
    if let Some(project) = query.project.as_deref().filter(|_| !query.all_projects) {
        let project = normalize_project(project).0;
        if project.chars().any(char::is_alphanumeric) {
            parts.push(format!("(project : {} OR scope : personal)", quote(&project)));
        }
    }
    if let Some(kind) = query.kind.as_deref().filter(|k| k.chars().any(char::is_alphanumeric)) {
        parts.push(format!("type : {}", quote(&kind.trim().to_lowercase())));
    }
    if let Some(scope) = query.scope {
        parts.push(format!("scope : {}", scope.as_str()));
    }
    (!parts.is_empty()).then(|| parts.join(" AND "))
}

/// The exact filter check of one row; returns its `updated_at` (for tie-breaks) when it passes.
pub(crate) fn passes_filters(store: &Store, id: i64, query: &SearchQuery) -> Result<Option<String>> {
    let Some((project, scope, kind, updated_at)) = store.filtered_fields(id)? else { return Ok(None) };
    let project_ok = match query.project.as_deref().filter(|_| !query.all_projects) {
        Some(wanted) => project == normalize_project(wanted).0 || scope == Scope::Personal.as_str(),
        None => true,
    };
    let kind_ok = query.kind.as_deref().is_none_or(|k| kind == k.trim().to_lowercase());
    let scope_ok = query.scope.is_none_or(|s| scope == s.as_str());
    Ok((project_ok && kind_ok && scope_ok).then_some(updated_at))
}

/// The daemon's in-memory BM25 index (see [`index`]); `None` from `candidates` means "not
/// available" (no index attached, not built yet, or a phrase query) and FTS5 answers instead.
#[derive(Debug, Default, Clone, Copy)]
pub struct IndexEngine;

impl IndexEngine {
    fn try_candidates(core: &Core, query: &SearchQuery, limit: usize) -> Result<Option<Vec<Candidate>>> {
        let Some(index) = &core.index else { return Ok(None) };
        let terms = query::parse(&query.text);
        if terms.iter().any(|t| matches!(t, query::Term::Phrase(_))) {
            return Ok(None);
        }
        let filter = memory_filter(query);
        let Some(found) = index.search(core.store.conn(), &terms, &filter, limit)? else { return Ok(None) };
        // Snippets are made when hits are hydrated (`Core::search_with`), from the row it
        // reads anyway.
        Ok(Some(
            found.into_iter().map(|(id, score)| Candidate::lexical(id, -f64::from(score), String::new())).collect(),
        ))
    }
}

impl SearchEngine for IndexEngine {
    fn name(&self) -> &'static str {
        "index"
    }

    fn candidates(&self, core: &Core, query: &SearchQuery, limit: usize) -> Result<Vec<Candidate>> {
        match IndexEngine::try_candidates(core, query, limit)? {
            Some(found) => Ok(found),
            None => LexicalEngine.candidates(core, query, limit),
        }
    }
}

/// The model, when semantic search can run now; else why not.
fn ready_semantic(
    semantic: Option<&semantic::Semantic>,
) -> std::result::Result<&semantic::Semantic, semantic::Unavailable> {
    let semantic = semantic
        .ok_or_else(|| semantic::Unavailable::NoModel("no embedding model (run `cairn model install`)".into()))?;
    semantic.availability()?;
    Ok(semantic)
}

/// A lexical engine with one ranking already read ([`Core::embed_beside_lexical`]): the same
/// request (this query, this depth) is answered from it, any other goes to the engine.
struct Prefetched<'a> {
    engine: &'a dyn SearchEngine,
    query: &'a SearchQuery,
    depth: usize,
    found: Option<Result<Vec<Candidate>>>,
}

impl SearchEngine for Prefetched<'_> {
    fn name(&self) -> &'static str {
        self.engine.name()
    }

    fn candidates(&self, core: &Core, query: &SearchQuery, limit: usize) -> Result<Vec<Candidate>> {
        match &self.found {
            Some(found) if limit == self.depth && query == self.query => found.clone(),
            _ => self.engine.candidates(core, query, limit),
        }
    }
}

/// Ends a shared scan's wait when dropped ([`semantic::ScanShare::finish`]).
struct FinishOnDrop<'a>(&'a semantic::ScanShare);

impl Drop for FinishOnDrop<'_> {
    fn drop(&mut self) {
        self.0.finish();
    }
}

/// What `query` lets a search return: its project (unless all projects; plus personal
/// memories), type and scope, normalised as the store keeps them.
fn memory_filter(query: &SearchQuery) -> index::IndexFilter {
    index::IndexFilter {
        project: query.project.as_deref().filter(|_| !query.all_projects).map(|p| normalize_project(p).0),
        kind: query.kind.as_deref().map(|k| k.trim().to_lowercase()),
        scope: query.scope,
    }
}

impl Core {
    /// Search in the query's mode (hybrid by default when vectors exist). Lexical runs
    /// through the in-memory index when this context has one, else FTS5. When semantic search
    /// was asked for but cannot answer, the results are lexical and a notice says why.
    pub fn search(&self, query: &SearchQuery) -> Result<SearchResults> {
        check_min_score(query.min_score)?;
        let timed = timing::begin();
        let mut results = self.search_ranked(query)?;
        let best = best_lexical(&results.hits);
        let mode = results.mode;
        for hit in &mut results.hits {
            hit.relevance = relevance(hit, mode, best);
        }
        if let Some(min) = query.min_score {
            let before = results.hits.len();
            results.hits.retain(|hit| hit.relevance >= min);
            if results.hits.is_empty() && before > 0 {
                results.notices.push(format!("{before} hits were below min_score {min}"));
            }
        }
        timing::phase("newest_first", || self.newest_first(query, &mut results.hits))?;
        timing::finish(timed, results.mode.as_str());
        Ok(results)
    }

    /// [`Core::search`] before `min_score`.
    fn search_ranked(&self, query: &SearchQuery) -> Result<SearchResults> {
        let lexical = self.lexical_engine();
        let nothing_to_embed = query::parse(&query.text).is_empty();
        if nothing_to_embed || query.mode == Some(SearchMode::Lexical) {
            return self.search_with(lexical, query);
        }
        let hybrid = query.mode != Some(SearchMode::Semantic);
        let (vector, ahead, lexical) = self.embed_beside_lexical(query, lexical, hybrid);
        let lexical = &lexical;
        let vector = match vector {
            Ok(vector) => vector,
            Err(why) => {
                let mut results = self.search_with(lexical, query)?;
                if query.mode.is_some() {
                    results.notices.push(format!("semantic search is unavailable ({why}); results are lexical"));
                }
                return Ok(results);
            }
        };
        let mode = query.mode.unwrap_or(SearchMode::Hybrid);
        let semantic = fusion::SemanticEngine { vector: &vector, ahead: ahead.as_ref() };
        let mut results = match mode {
            SearchMode::Semantic => self.search_with(&semantic, query)?,
            _ => self.search_with(&fusion::HybridEngine { lexical, semantic }, query)?,
        };
        results.mode = mode;
        Ok(results)
    }

    /// The hybrid pool of a query, in fused order: each candidate's id and what the re-ranking
    /// reads of it, what `cairn-eval --fit-rerank` (crates/cairn-eval) fits the [`rerank`]
    /// model on. Empty when the query has no words or semantic search cannot run.
    pub fn rerank_pool(&self, query: &SearchQuery) -> Result<Vec<(i64, rerank::Candidate)>> {
        if query::parse(&query.text).is_empty() {
            return Ok(Vec::new());
        }
        let Ok(vector) = self.query_vector(&query.text) else { return Ok(Vec::new()) };
        let lexical = self.lexical_engine();
        let hybrid = fusion::HybridEngine { lexical, semantic: fusion::SemanticEngine::new(&vector) };
        Ok(hybrid.pool(self, query, query.effective_limit())?.into_iter().map(|(c, f)| (c.id, f)).collect())
    }

    /// The query embedded on a thread of its own while this one reads the lexical ranking a
    /// hybrid search fuses (`prefetch`): on two cores the embedding no longer waits for the
    /// ranking nor the ranking for it. The ranking comes back as an engine that answers the
    /// fusion's request from what was read. Beside the ranking, the embedding keeps to its own
    /// thread (`embed_query_alone`): with its second thread too, three threads shared two
    /// cores and the ranking took 7 ms where it takes 3–5 alone. The embedding thread goes on
    /// to the semantic ranking's shortlist (the Hamming scan of every code, which needs only
    /// the query's vector), so that too is read beside the lexical ranking; its exact
    /// re-score, which reads the table, stays on this thread.
    #[allow(clippy::type_complexity)]
    fn embed_beside_lexical<'a>(
        &self,
        query: &'a SearchQuery,
        lexical: &'a dyn SearchEngine,
        prefetch: bool,
    ) -> (std::result::Result<std::sync::Arc<[f32]>, semantic::Unavailable>, Option<semantic::Shortlist>, Prefetched<'a>)
    {
        let depth = fusion::ranking_depth(query.effective_limit());
        let semantic = match ready_semantic(self.semantic.as_deref()) {
            Ok(semantic) => semantic,
            Err(why) => return (Err(why), None, Prefetched { engine: lexical, query, depth, found: None }),
        };
        // The shortlist's scan of every code, which the lexical thread joins once it has its
        // ranking (at 1M, 48 MB of codes: the longest step beside the lexical ranking).
        let share = semantic::ScanShare::default();
        let embed = || {
            // However this ends (a panic too), a helper waiting for the scan goes back.
            let _finish = FinishOnDrop(&share);
            let started = std::time::Instant::now();
            let vector =
                if prefetch { semantic.embed_query_alone(&query.text) } else { semantic.embed_query(&query.text) };
            let took = started.elapsed();
            let ahead = match &vector {
                Ok(vector) if prefetch => {
                    let started = std::time::Instant::now();
                    let shortlist = semantic.shortlist_shared(vector, fusion::first_fetch(depth), Some(&share));
                    Some((shortlist, started.elapsed()))
                }
                _ => None,
            };
            (vector, took, ahead)
        };
        let read_lexical = || prefetch.then(|| timing::phase("lexical", || lexical.candidates(self, query, depth)));
        // "beside": the embedding and the lexical ranking together, the thread's start included.
        let beside = std::time::Instant::now();
        let ((vector, took, ahead), found) = std::thread::scope(|scope| {
            // A thread that cannot start (a process at its thread limit) only loses the overlap.
            match std::thread::Builder::new().name("cairn-query-embed".into()).spawn_scoped(scope, embed) {
                Ok(embedding) => {
                    let found = read_lexical();
                    if prefetch {
                        timing::phase("help_scan", || semantic.help_scan(&share));
                    }
                    let embedded = embedding.join().unwrap_or_else(|_| {
                        (
                            Err(semantic::Unavailable::Failing("embedding the query panicked".into())),
                            std::time::Duration::ZERO,
                            None,
                        )
                    });
                    (embedded, found)
                }
                Err(_) => (embed(), read_lexical()),
            }
        });
        timing::record("beside", beside.elapsed());
        timing::record("embed", took);
        let ahead = ahead.map(|(shortlist, took)| {
            timing::record("shortlist", took);
            shortlist
        });
        (vector, ahead, Prefetched { engine: lexical, query, depth, found })
    }

    /// The lexical engine of this context: the in-memory index when it has one, else FTS5.
    fn lexical_engine(&self) -> &'static dyn SearchEngine {
        if self.index.is_some() { &IndexEngine } else { &LexicalEngine }
    }

    /// The query's embedding, or why semantic search cannot run.
    fn query_vector(&self, text: &str) -> std::result::Result<std::sync::Arc<[f32]>, semantic::Unavailable> {
        ready_semantic(self.semantic.as_deref())?.embed_query(text)
    }

    /// Search with any engine: exact topic_key hits first, then the engine's ranking.
    pub fn search_with(&self, engine: &dyn SearchEngine, query: &SearchQuery) -> Result<SearchResults> {
        if query.text.trim().is_empty() {
            return Err(
                CairnError::empty("query").with_hint("say what to look for: a few words, a \"phrase\" or a topic_key")
            );
        }
        let limit = query.effective_limit();
        let mut results = SearchResults::default();
        if query::parse(&query.text).is_empty() {
            results.notices.push("the query has no words to search for (only punctuation)".into());
            return Ok(results);
        }
        let mut hits = timing::phase("topic", || self.store.topic_hits(query, limit))?;
        let candidates = timing::phase("candidates", || engine.candidates(self, query, limit + hits.len()))?;
        let matcher = snippet::Matcher::new(&query::parse(&query.text));
        let mut rows = timing::phase("rows", || self.store.get_many(candidates.iter().map(|c| c.id)))?;
        for candidate in candidates {
            if hits.len() >= limit {
                break;
            }
            if hits.iter().any(|h| h.observation.id == candidate.id) {
                continue;
            }
            let Some(observation) = rows.remove(&candidate.id) else { continue };
            let snippet = if candidate.snippet.is_empty() {
                let made = matcher.snippet(&observation.title, &observation.content);
                if made.is_empty() { crate::text::preview(&observation.content, 160) } else { made }
            } else {
                candidate.snippet
            };
            hits.push(SearchHit {
                observation,
                rank: candidate.rank,
                score: -candidate.rank,
                snippet,
                matched: candidate.matched,
                scores: candidate.scores,
                // Set by `Core::search` once the whole page (and its best BM25) is known.
                relevance: 0.0,
            });
        }
        // The notice counts word matches elsewhere: meaningless for a semantic-only search.
        if hits.is_empty() && engine.name() != "semantic" {
            results.notices.extend(self.elsewhere_notice(query)?);
        }
        results.hits = hits;
        Ok(results)
    }

    /// When a project-scoped search finds nothing, say whether other projects would have
    /// (engram #146: "works in the CLI, empty in MCP" because of silent scoping).
    fn elsewhere_notice(&self, query: &SearchQuery) -> Result<Option<String>> {
        let Some(project) = query.project.as_deref().filter(|_| !query.all_projects) else { return Ok(None) };
        let unscoped = SearchQuery { project: None, all_projects: true, limit: MAX_LIMIT, ..query.clone() };
        let lexical = self.lexical_engine();
        let elsewhere = lexical.candidates(self, &unscoped, MAX_LIMIT)?.len();
        Ok((elsewhere > 0).then(|| {
            let more = if elsewhere == MAX_LIMIT { "+" } else { "" };
            format!(
                "no match in project {:?}; {elsewhere}{more} in other projects (search all projects to see them)",
                normalize_project(project).0
            )
        }))
    }
}

impl Store {
    pub(crate) fn topic_hits(&self, query: &SearchQuery, limit: usize) -> Result<Vec<SearchHit>> {
        let Some(key) = normalize_topic_key(&query.text) else { return Ok(Vec::new()) };
        let observations = self.topic_rows(&key, &memory_filter(query), limit)?;
        Ok(observations
            .into_iter()
            .map(|o| SearchHit {
                snippet: crate::text::preview(&o.content, 160),
                observation: o,
                rank: -1000.0,
                score: 1000.0,
                matched: MatchKind::TopicKey,
                scores: HitScores { lexical: None, semantic: None, fused: 1000.0, deep: None },
                relevance: 1.0,
            })
            .collect())
    }

    /// Full-text search over prompts.
    pub fn search_prompts(&self, text: &str, project: Option<&str>, limit: usize) -> Result<Vec<Prompt>> {
        if text.trim().is_empty() {
            return Err(CairnError::empty("query"));
        }
        let Some(fts) = query::to_fts(&query::parse(text)) else { return Ok(Vec::new()) };
        let limit = if limit == 0 { DEFAULT_LIMIT } else { limit.min(MAX_LIMIT) };
        let project = project.map(|p| normalize_project(p).0);
        self.prompts_matching(&fts, project.as_deref(), limit)
    }
}

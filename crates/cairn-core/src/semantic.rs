//! Semantic search: memories' sentence embeddings, stored in SQLite (migration 4) and held in
//! memory for a brute-force top-k scan.
//!
//! - Vectors are computed after a save returns (the daemon's background indexer, or
//!   `cairn reindex`), newest memories first; [`crate::Store::count_pending_embeddings`] says how many
//!   are still missing. A memory whose text changes loses its vector at once (a trigger), so a
//!   superseded revision is never what matches.
//! - The in-memory copy is one bit per dimension ([`VectorIndex`]): a Hamming scan of every
//!   code picks a shortlist, whose f32 vectors are read back from the table and scored
//!   exactly. 48 bytes a memory at 384 dimensions instead of 1,536 (384 for i8 codes), and
//!   the cosines search reports are the model's own.
//! - The model is behind [`Embedder`]; when it is missing or failing, search says so and stays
//!   lexical. Nothing here ever fails a search.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use cairn_embed::{EmbedError, Embedder};
use rusqlite::Connection;

use crate::error::{CairnError, ErrorCode, Result};
pub use crate::store::embeddings::{CONTEXT_MAX_CHARS, PendingText, decode, encode};
use crate::store::vectors;

mod vector_index;
pub use vector_index::{ScanHelp, ScanShare, VectorIndex};

/// Characters of a memory given to the model: MiniLM reads 256 tokens (about 1,200
/// characters of English); endpoints with longer windows get a little more.
const MAX_EMBED_CHARS: usize = 4_000;
/// Query vectors remembered (agents repeat their searches).
const QUERY_CACHE: usize = 512;
/// After an embedder error, queries stay lexical this long before trying again, so a dead
/// endpoint costs one timeout, not one per search.
const PAUSE_AFTER_ERROR: Duration = Duration::from_secs(30);
/// Memories scored exactly per result a nearest-neighbour search wants: the Hamming
/// shortlist is this many times deeper than the answer, and never shallower than
/// [`SHORTLIST_MIN`]. Recall by shortlist size on e5's real vectors: docs/benchmarks/server.md
/// ("1,000,000 memories with vectors"): 4× keeps 0.907 of an exact top-10, 8× 0.967, and a
/// top-10 inside a 464-deep shortlist 0.999.
const SHORTLIST_PER_RESULT: usize = 4;
const SHORTLIST_MIN: usize = 400;

/// The text of a memory that is embedded.
pub fn embed_text(title: &str, content: &str) -> String {
    let mut text = String::with_capacity(title.len() + content.len().min(MAX_EMBED_CHARS) + 2);
    text.push_str(title.trim());
    text.push_str(".\n");
    text.push_str(crate::text::cut_at_char_boundary(content, MAX_EMBED_CHARS));
    text
}

/// Bytes of the previous memory embedded with a short one: with the title and the
/// memory itself this stays well inside MiniLM's 256 tokens.
pub const CONTEXT_CHARS: usize = 300;

/// The text embedded for a memory, with the content of the memory saved before it in its
/// session when it gets context (empty when not). The previous memory is read when this one
/// is embedded: editing or deleting it later does not re-embed this one (its vector keeps the
/// old context until `cairn reindex --force`), an accepted staleness since a short memory's
/// own text, which is what search shows, is always current.
pub fn embed_text_in_context(title: &str, content: &str, context: &str) -> String {
    if context.is_empty() {
        return embed_text(title, content);
    }
    let context = crate::text::cut_at_char_boundary(context.trim(), CONTEXT_CHARS);
    let mut text = String::with_capacity(title.len() + context.len() + content.len() + 4);
    text.push_str(title.trim());
    text.push_str(".\n");
    text.push_str(context);
    text.push('\n');
    text.push_str(crate::text::cut_at_char_boundary(content, MAX_EMBED_CHARS));
    text
}

impl PendingText {
    pub fn text(&self) -> String {
        embed_text_in_context(&self.title, &self.content, &self.context)
    }
}

/// Why semantic search is not answering right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// No model is configured or its files are missing.
    NoModel(String),
    /// The model is being loaded.
    ModelLoading,
    /// Vectors are being loaded into memory.
    Loading,
    /// No memory has a vector yet.
    NothingIndexed,
    /// The embedder failed recently.
    Failing(String),
}

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unavailable::NoModel(why) => write!(f, "{why}"),
            Unavailable::ModelLoading => f.write_str("the embedding model is loading"),
            Unavailable::Loading => f.write_str("the semantic index is loading"),
            Unavailable::NothingIndexed => f.write_str("no memory has an embedding yet (run `cairn reindex`)"),
            Unavailable::Failing(why) => write!(f, "the embedder failed: {why}"),
        }
    }
}

/// A model's cosine scale, as hybrid search's fusion uses it (each model's is in
/// `search::rerank`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CosineScale {
    /// Below this a memory is not related to the query at all: it is no semantic candidate.
    pub min_similarity: f32,
    /// Above this a memory lends session context (the share of the cosine over it).
    pub context_floor: f64,
}

/// An embedder with its vectors: what a store needs for semantic search. Shared by the
/// daemon's connections and its background indexer. The model id is known at once (it names
/// the vectors); the model itself may load later, in the background.
pub struct Semantic {
    model_id: String,
    /// A cosine scale other than the model's, for studies (`cairn-eval --cosine-scale`).
    cosine_scale: OnceLock<CosineScale>,
    embedder: OnceLock<Arc<dyn Embedder>>,
    load_error: Mutex<Option<String>>,
    vectors: RwLock<Option<VectorIndex>>,
    /// Score every vector exactly, no shortlist (`cairn-eval --exact-vectors`: the f32
    /// baseline the binary codes are measured against).
    exact: AtomicBool,
    /// Vectors in memory when the codes' centre was last taken (see [`Semantic::remember`]).
    centred_at: AtomicUsize,
    query_cache: Mutex<HashMap<String, Arc<[f32]>>>,
    paused: Mutex<Option<(Instant, String)>>,
}

impl std::fmt::Debug for Semantic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semantic").field("model", &self.model_id).finish_non_exhaustive()
    }
}

impl Semantic {
    /// Semantic search with a model that is already loaded. Vectors are not: call
    /// [`Semantic::load`] (the daemon does it in the background) before search uses them.
    pub fn new(embedder: Arc<dyn Embedder>) -> Arc<Semantic> {
        let semantic = Semantic::pending(embedder.model_id().to_owned());
        let _ = semantic.embedder.set(embedder);
        semantic
    }

    /// Semantic search whose model (`model_id`) is still loading: see
    /// [`Semantic::set_embedder`] and [`Semantic::set_failed`].
    pub fn pending(model_id: String) -> Arc<Semantic> {
        Arc::new(Semantic {
            model_id,
            cosine_scale: OnceLock::new(),
            embedder: OnceLock::new(),
            load_error: Mutex::new(None),
            vectors: RwLock::new(None),
            exact: AtomicBool::new(false),
            centred_at: AtomicUsize::new(0),
            query_cache: Mutex::new(HashMap::new()),
            paused: Mutex::new(None),
        })
    }

    /// The model finished loading.
    pub fn set_embedder(&self, embedder: Arc<dyn Embedder>) {
        if embedder.model_id() != self.model_id {
            tracing::warn!(expected = %self.model_id, loaded = embedder.model_id(), "the model loaded is not the one named");
        }
        let _ = self.embedder.set(embedder);
    }

    /// The model could not be loaded: search stays lexical and says why when asked.
    pub fn set_failed(&self, why: String) {
        *self.load_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why);
    }

    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Search with this cosine scale instead of the model's: how an evaluation tries floors
    /// for a model before any are chosen for it. Only the first call counts.
    pub fn override_cosine_scale(&self, scale: CosineScale) {
        let _ = self.cosine_scale.set(scale);
    }

    /// The scale given by [`Semantic::override_cosine_scale`], if any.
    pub fn cosine_scale_override(&self) -> Option<CosineScale> {
        self.cosine_scale.get().copied()
    }

    pub fn embedder(&self) -> Option<&Arc<dyn Embedder>> {
        self.embedder.get()
    }

    /// One line on the state of semantic search, for stats and doctor.
    pub fn status(&self) -> String {
        match self.availability() {
            Ok(()) => "ready".to_owned(),
            Err(why) => why.to_string(),
        }
    }

    /// Score every vector exactly instead of a shortlist: the baseline an evaluation compares
    /// the binary codes with.
    pub fn override_exact_scan(&self) {
        self.exact.store(true, Ordering::Relaxed);
    }

    /// Whether [`Semantic::override_exact_scan`] was called.
    pub fn exact_scan(&self) -> bool {
        self.exact.load(Ordering::Relaxed)
    }

    /// Read every vector of this model from the database into memory, as binary codes
    /// around the mean of a sample of them.
    pub fn load(&self, conn: &Connection) -> Result<usize> {
        let mut sum: Vec<f64> = Vec::new();
        let mut sampled = 0usize;
        vectors::sample_vectors(conn, self.model_id(), |blob| {
            let v = decode(blob);
            if sum.is_empty() {
                sum = vec![0.0; v.len()];
            }
            if v.len() == sum.len() {
                sum.iter_mut().zip(&v).for_each(|(s, x)| *s += f64::from(*x));
                sampled += 1;
            }
        })?;
        let centre = sum.iter().map(|s| (s / sampled.max(1) as f64) as f32).collect();
        let mut index = VectorIndex::with_centre(centre);
        vectors::each_vector(conn, self.model_id(), |id, blob| {
            index.upsert(id, &decode(blob));
        })?;
        let n = index.len();
        self.centred_at.store(n, Ordering::Relaxed);
        *self.vectors.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(index);
        Ok(n)
    }

    pub fn is_loaded(&self) -> bool {
        self.vectors.read().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
    }

    /// Vectors in memory.
    pub fn indexed(&self) -> usize {
        self.vectors.read().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref().map_or(0, VectorIndex::len)
    }

    /// Record freshly stored vectors (the indexer calls this after its commit). While the
    /// index is small, its codes are rebuilt from the table each time it has doubled since
    /// their centre was taken: a store that starts empty gets a centre from its first few
    /// hundred vectors, then a better one, and stops at `CENTRE_SAMPLE` (a few
    /// rebuilds of a few thousand vectors, once).
    pub fn remember(&self, conn: &Connection, stored: &[(i64, Vec<f32>)]) {
        let live = {
            let mut guard = self.vectors.write().unwrap_or_else(std::sync::PoisonError::into_inner);
            let Some(index) = guard.as_mut() else { return };
            for (id, v) in stored {
                index.upsert(*id, v);
            }
            index.len()
        };
        let centred_at = self.centred_at.load(Ordering::Relaxed);
        let stale = centred_at < vectors::CENTRE_SAMPLE as usize && live >= SHORTLIST_MIN && live >= 2 * centred_at;
        if stale && let Err(e) = self.load(conn) {
            tracing::warn!(error = %e, "rebuilding the vector codes failed; keeping the old ones");
        }
    }

    /// Drop memories' vectors from memory (they were deleted or changed).
    pub fn forget(&self, ids: &[i64]) {
        let mut guard = self.vectors.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(index) = guard.as_mut() {
            for &id in ids {
                index.remove(id);
            }
        }
    }

    /// Forget cached query vectors (benchmarks measure the model, not the cache).
    pub fn clear_query_cache(&self) {
        self.query_cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }

    /// Drop every vector from memory (after `reindex --force` dropped them from the table).
    pub fn forget_all(&self) {
        let mut guard = self.vectors.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if guard.is_some() {
            *guard = Some(VectorIndex::default());
        }
    }

    /// Whether semantic search can answer now.
    pub fn availability(&self) -> std::result::Result<(), Unavailable> {
        if self.embedder.get().is_none() {
            let error = self.load_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            return Err(error.map_or(Unavailable::ModelLoading, Unavailable::NoModel));
        }
        if let Some((until, why)) = self.paused.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref()
            && Instant::now() < *until
        {
            return Err(Unavailable::Failing(why.clone()));
        }
        match self.vectors.read().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref() {
            None => Err(Unavailable::Loading),
            Some(index) if index.is_empty() => Err(Unavailable::NothingIndexed),
            Some(_) => Ok(()),
        }
    }

    /// The query's vector (cached), or why there is none.
    pub fn embed_query(&self, text: &str) -> std::result::Result<Arc<[f32]>, Unavailable> {
        self.embed_query_with(text, |embedder, texts| embedder.embed_queries(texts))
    }

    /// [`Semantic::embed_query`] on this thread alone, while another thread of the same search
    /// has the second core ([`cairn_embed::Embedder::embed_queries_alone`]).
    pub fn embed_query_alone(&self, text: &str) -> std::result::Result<Arc<[f32]>, Unavailable> {
        self.embed_query_with(text, |embedder, texts| embedder.embed_queries_alone(texts))
    }

    fn embed_query_with(
        &self,
        text: &str,
        embed: impl Fn(&dyn Embedder, &[&str]) -> std::result::Result<Vec<Vec<f32>>, EmbedError>,
    ) -> std::result::Result<Arc<[f32]>, Unavailable> {
        let key = text.trim();
        if let Some(v) = self.query_cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(key) {
            return Ok(Arc::clone(v));
        }
        let truncated = crate::text::cut_at_char_boundary(key, MAX_EMBED_CHARS);
        let Some(embedder) = self.embedder.get() else { return Err(Unavailable::ModelLoading) };
        // As a query: models trained with prompts (e5) embed queries and memories differently.
        match embed(embedder.as_ref(), &[truncated]) {
            Ok(mut vectors) if vectors.len() == 1 => {
                let v: Arc<[f32]> = vectors.remove(0).into();
                let mut cache = self.query_cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if cache.len() >= QUERY_CACHE {
                    cache.clear();
                }
                cache.insert(key.to_owned(), Arc::clone(&v));
                Ok(v)
            }
            Ok(_) => Err(self.pause("the embedder returned no vector".into())),
            Err(e) => Err(self.pause(e.to_string())),
        }
    }

    /// Vectors for memories waiting for one (embedded as passages), paired with the text they
    /// were made from.
    pub fn embed_pending_texts(&self, pending: Vec<PendingText>) -> Result<Vec<(PendingText, Vec<f32>)>> {
        let embedder = self.embedder().ok_or_else(|| {
            CairnError::new(ErrorCode::ModelMissing, format!("the embedding model is not loaded: {}", self.status()))
        })?;
        let texts: Vec<String> = pending.iter().map(PendingText::text).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = embedder.embed(&refs).map_err(|e| embed_error(&e))?;
        if vectors.len() != pending.len() {
            return Err(CairnError::new(
                ErrorCode::EmbedderUnavailable,
                format!("the embedder returned {} vectors for {} texts", vectors.len(), pending.len()),
            ));
        }
        Ok(pending.into_iter().zip(vectors).collect())
    }

    fn pause(&self, why: String) -> Unavailable {
        tracing::warn!(error = %why, "semantic search paused after an embedder error; searching lexically");
        *self.paused.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some((Instant::now() + PAUSE_AFTER_ERROR, why.clone()));
        Unavailable::Failing(why)
    }

    /// Cosines of a query vector (unit length) with the stored vectors of some memories,
    /// exact (read from the table); memories without a vector in memory are left out. For
    /// re-ranking a few candidates, not for scanning.
    pub fn similarities(&self, conn: &Connection, query: &[f32], ids: &[i64]) -> HashMap<i64, f32> {
        let known: Vec<i64> = {
            let guard = self.vectors.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            match guard.as_ref() {
                Some(index) if index.dims() == query.len() => {
                    ids.iter().copied().filter(|&id| index.contains(id)).collect()
                }
                _ => return HashMap::new(),
            }
        };
        self.exact_cosines(conn, query, &known).into_iter().collect()
    }

    /// The `k` memories nearest to a query vector (unit length), best first, with exact
    /// cosines: a Hamming shortlist of the binary codes, scored with the stored vectors.
    pub fn nearest(&self, conn: &Connection, query: &[f32], k: usize) -> Vec<(i64, f32)> {
        let shortlist = crate::search_timing::phase("shortlist", || self.shortlist(query, k));
        self.nearest_in(conn, query, &shortlist)
    }

    /// The shortlist [`Semantic::nearest`] scores for the `k` nearest: the memories whose codes
    /// are nearest the query's. In memory only (no table read), so a hybrid search reads it
    /// on the thread that embedded the query while the lexical ranking is read beside it.
    pub fn shortlist(&self, query: &[f32], k: usize) -> Shortlist {
        self.shortlist_shared(query, k, None)
    }

    /// [`Semantic::shortlist`], its scan of every code shared with a thread that calls
    /// [`Semantic::help_scan`] on `share` meanwhile (the same shortlist).
    pub fn shortlist_shared(&self, query: &[f32], k: usize, share: Option<&ScanShare>) -> Shortlist {
        let depth = if self.exact.load(Ordering::Relaxed) {
            usize::MAX
        } else {
            k.saturating_mul(SHORTLIST_PER_RESULT).max(SHORTLIST_MIN)
        };
        let guard = self.vectors.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let ids = guard.as_ref().map_or_else(Vec::new, |index| index.shortlist_shared(query, depth, share));
        Shortlist { k, ids }
    }

    /// Take parts of the shortlist scan published on `share` ([`Semantic::shortlist_shared`]
    /// on another thread), if one is or will be; back when it is over. Never waits for the
    /// vectors' lock: while a writer holds or awaits it, the scanner scans alone.
    pub fn help_scan(&self, share: &ScanShare) {
        let Some(help) = share.published() else { return };
        let Ok(guard) = self.vectors.try_read() else { return };
        if let Some(index) = guard.as_ref() {
            help.run_on(index);
        }
    }

    /// [`Semantic::nearest`] of a shortlist already read ([`Semantic::shortlist`] of the
    /// same query): its memories scored exactly, the best `k` kept.
    pub fn nearest_in(&self, conn: &Connection, query: &[f32], shortlist: &Shortlist) -> Vec<(i64, f32)> {
        let mut scored = crate::search_timing::phase("rescore", || self.exact_cosines(conn, query, &shortlist.ids));
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored.truncate(shortlist.k);
        scored
    }

    /// Cosines of `query` with the stored vectors of `ids`. A failed read leaves the rest out:
    /// semantic search never fails a search, it only finds less.
    fn exact_cosines(&self, conn: &Connection, query: &[f32], ids: &[i64]) -> Vec<(i64, f32)> {
        let mut out = Vec::with_capacity(ids.len());
        let mut vector = Vec::with_capacity(query.len());
        let read = vectors::vectors_of(conn, self.model_id(), ids, |id, blob| {
            vector.clear();
            vector.extend(blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])));
            if vector.len() == query.len() {
                out.push((id, cairn_embed::dot(query, &vector)));
            }
        });
        if let Err(e) = read {
            tracing::warn!(error = %e, "reading stored vectors failed; semantic search found less");
        }
        out
    }
}

/// The memories a nearest-`k` search scores exactly ([`Semantic::shortlist`]).
#[derive(Debug, Clone, Default)]
pub struct Shortlist {
    k: usize,
    ids: Vec<i64>,
}

impl Shortlist {
    /// How many nearest memories it was read for.
    pub fn k(&self) -> usize {
        self.k
    }
}

/// An embedder failure as a cairn error (for `cairn reindex` and `cairn model`).
pub fn embed_error(err: &EmbedError) -> CairnError {
    let (code, hint) = match err {
        EmbedError::ModelMissing { .. } => (ErrorCode::ModelMissing, "run `cairn model install`"),
        EmbedError::ModelInvalid(_) => (ErrorCode::ModelInvalid, "reinstall it: `cairn model install`"),
        EmbedError::ChecksumMismatch { .. } => {
            (ErrorCode::ChecksumMismatch, "the file is corrupt or not the expected one; download it again")
        }
        EmbedError::Endpoint(_) => {
            (ErrorCode::EmbedderUnavailable, "check CAIRN_EMBED_URL and that the endpoint is running")
        }
        EmbedError::Dimension { .. } => (
            ErrorCode::EmbedderUnavailable,
            "the endpoint's model changed; set CAIRN_EMBED_MODEL or run `cairn reindex --force`",
        ),
        EmbedError::Io(_) => (ErrorCode::Internal, "check the model directory's permissions"),
    };
    CairnError::new(code, err.to_string()).with_hint(hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoModel;

    impl Embedder for NoModel {
        fn model_id(&self) -> &'static str {
            "test:vectors"
        }

        fn embed(&self, _texts: &[&str]) -> std::result::Result<Vec<Vec<f32>>, EmbedError> {
            Err(EmbedError::Endpoint("vectors are stored by the test".into()))
        }
    }

    /// A deterministic generator of values in [-1, 1).
    struct Lcg(u64);

    impl Lcg {
        fn next(&mut self) -> f32 {
            self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((self.0 >> 33) % 20_000) as f32 / 10_000.0 - 1.0
        }
    }

    const DIMS: usize = 384;

    /// Unit vectors the way a sentence model makes them: one direction every text shares
    /// (all positive, so a code compared with 0 would say little), topics around it, and each
    /// text near its topic.
    fn clustered(n: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut rng = Lcg(seed);
        let shared: Vec<f32> = (0..DIMS).map(|_| 0.5 + rng.next().abs()).collect();
        let topics: Vec<Vec<f32>> = (0..40).map(|_| (0..DIMS).map(|_| rng.next()).collect()).collect();
        (0..n)
            .map(|i| {
                let topic = &topics[i % topics.len()];
                let mut v: Vec<f32> = (0..DIMS).map(|d| shared[d] * 0.8 + topic[d] * 0.5 + rng.next() * 0.6).collect();
                cairn_embed::normalise(&mut v);
                v
            })
            .collect()
    }

    fn table_with(vectors: &[Vec<f32>]) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE embeddings (observation_id INTEGER PRIMARY KEY, model TEXT NOT NULL,
             dims INTEGER NOT NULL, vector BLOB NOT NULL, created_at TEXT NOT NULL)",
        )
        .unwrap();
        for (i, v) in vectors.iter().enumerate() {
            store_vector(&conn, i as i64 + 1, v);
        }
        conn
    }

    fn store_vector(conn: &Connection, id: i64, v: &[f32]) {
        conn.execute(
            "INSERT OR REPLACE INTO embeddings VALUES (?1, 'test:vectors', ?2, ?3, '')",
            rusqlite::params![id, v.len() as i64, encode(v)],
        )
        .unwrap();
    }

    fn exact_top(vectors: &[Vec<f32>], query: &[f32], k: usize) -> Vec<(i64, f32)> {
        let mut all: Vec<(i64, f32)> =
            vectors.iter().enumerate().map(|(i, v)| (i as i64 + 1, cairn_embed::dot(query, v))).collect();
        all.sort_by(|a, b| b.1.total_cmp(&a.1));
        all.truncate(k);
        all
    }

    #[test]
    fn the_shortlist_finds_the_exact_nearest_with_exact_cosines() {
        let vectors = clustered(4_000, 7);
        let conn = table_with(&vectors);
        let semantic = Semantic::new(Arc::new(NoModel));
        assert_eq!(semantic.load(&conn).unwrap(), 4_000);
        let (mut found, mut wanted) = (0, 0);
        for query in clustered(4_050, 7).into_iter().skip(4_000) {
            let exact = exact_top(&vectors, &query, 10);
            // A search for 10 shortlists 400 of 4,000: a tenth is scored exactly.
            let near = semantic.nearest(&conn, &query, 10);
            assert_eq!(near.len(), 10);
            let ahead = semantic.shortlist(&query, 10);
            assert_eq!(ahead.k(), 10);
            assert_eq!(semantic.nearest_in(&conn, &query, &ahead), near, "a shortlist read ahead scores the same");
            for (id, cosine) in &near {
                assert_eq!(*cosine, cairn_embed::dot(&query, &vectors[*id as usize - 1]), "the model's own cosine");
            }
            wanted += exact.len();
            found += exact.iter().filter(|e| near.iter().any(|n| n.0 == e.0)).count();
        }
        let recall = found as f64 / wanted as f64;
        assert!(recall >= 0.98, "recall@10 of the shortlist against an exact scan: {recall}");
        semantic.override_exact_scan();
        let query = clustered(4_001, 7).pop().unwrap();
        assert_eq!(semantic.nearest(&conn, &query, 10), exact_top(&vectors, &query, 10), "the exact scan is exact");
    }

    #[test]
    fn a_vector_gone_from_the_table_is_never_answered() {
        let vectors = clustered(50, 3);
        let conn = table_with(&vectors);
        let semantic = Semantic::new(Arc::new(NoModel));
        semantic.load(&conn).unwrap();
        let top = semantic.nearest(&conn, &vectors[9], 1);
        assert_eq!(top[0].0, 10);
        // Deleted by a trigger on another connection, before this index hears of it.
        conn.execute("DELETE FROM embeddings WHERE observation_id = 10", []).unwrap();
        assert_ne!(semantic.nearest(&conn, &vectors[9], 1)[0].0, 10);
        assert!(semantic.similarities(&conn, &vectors[9], &[10, 11, 99]).keys().eq([&11]));
        semantic.forget(&[11]);
        assert!(semantic.similarities(&conn, &vectors[9], &[11]).is_empty(), "a forgotten memory has no cosine");
        assert!(semantic.nearest(&conn, &[1.0, 0.0], 3).is_empty(), "a query of another length matches nothing");
    }

    #[test]
    fn codes_of_a_store_that_started_empty_are_rebuilt_around_a_centre() {
        let conn = table_with(&[]);
        let semantic = Semantic::new(Arc::new(NoModel));
        semantic.load(&conn).unwrap();
        let vectors = clustered(1_000, 11);
        let mut batch = Vec::new();
        for (i, v) in vectors.iter().enumerate() {
            store_vector(&conn, i as i64 + 1, v);
            batch.push((i as i64 + 1, v.clone()));
            if batch.len() == 100 {
                semantic.remember(&conn, &batch);
                batch.clear();
            }
        }
        assert_eq!(semantic.indexed(), 1_000);
        // Rebuilt at 400 vectors and again at 800, from the table.
        assert_eq!(semantic.centred_at.load(Ordering::Relaxed), 800);
        let guard = semantic.vectors.read().unwrap();
        let index = guard.as_ref().unwrap();
        let query = &vectors[0];
        assert!(index.shortlist(query, 5).contains(&1));
    }

    #[test]
    fn embed_text_is_bounded() {
        let t = embed_text("Title", &"é".repeat(10_000));
        assert!(t.len() <= MAX_EMBED_CHARS + 10);
        assert!(t.starts_with("Title.\n"));
    }
}

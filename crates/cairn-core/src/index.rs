//! An in-memory inverted index for lexical search, held by the daemon.
//!
//! FTS5 computes BM25 through a per-row callback for *every* matching row before sorting, so
//! a query with a common word costs milliseconds per ten thousand memories. Here scoring is
//! term-at-a-time over compact posting lists (a few nanoseconds a posting), with BM25F-style
//! field weights matching the FTS5 configuration, so search stays under a millisecond at 100k
//! memories and a few milliseconds at a million (docs/benchmarks/server.md).
//!
//! The index follows the `observation_changes` log (migration 2), so writes from any process
//! — the daemon, a CLI or an agent writing the file directly — are seen by the next search.
//! Phrases need positions and stay with FTS5; so does any process that does not hold an index.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::RwLock;

use rusqlite::Connection;
use rust_stemmers::{Algorithm, Stemmer};

use crate::error::Result;
use crate::store::Store;
use crate::store::index_feed::{self as feed, IndexedRow as Row};
use crate::text::Scope;
use cairn_base::query::Term;

mod bytes;
mod postings;
#[cfg(test)]
mod reference_tests;

use postings::PostingList;

const K1: f32 = 1.2;
const B: f32 = 0.75;
/// Field weights: the same emphasis as the FTS5 `rank` configuration.
const W_TITLE: f32 = 4.0;
const W_CONTENT: f32 = 1.0;
const W_TYPE: f32 = 0.5;
const W_TOPIC: f32 = 2.0;
const W_TOOL: f32 = 0.5;
/// Most vocabulary entries one `prefix*` expands to.
const MAX_PREFIX_EXPANSION: usize = 64;
/// Longest token indexed: longer ones are hashes and base64, not words.
const MAX_TOKEN_CHARS: usize = 48;

/// Size of a collection for BM25: live memories and their summed field-weighted length.
#[derive(Debug, Clone, Copy, Default)]
struct Stats {
    docs: u32,
    len: f64,
}

impl Stats {
    fn add(&mut self, len: f32) {
        self.docs += 1;
        self.len += f64::from(len);
    }

    fn remove(&mut self, len: f32) {
        self.docs = self.docs.saturating_sub(1);
        self.len = (self.len - f64::from(len)).max(0.0);
    }
}

/// What a search reads of a memory for every posting: 8 bytes, apart from the rest of it in
/// [`Doc`]. A posting's memory is a cache miss at a million memories, and the search's time
/// went there: eight of these share a cache line where two 32-byte docs did.
#[derive(Debug, Clone, Copy)]
struct Hot {
    /// Field-weighted length.
    len: f32,
    /// The project's name id above two flag bits: personal (1 << 1) and live (1).
    tag: u32,
}

const LIVE: u32 = 1;
const PERSONAL: u32 = 1 << 1;
const TAG_FLAGS: u32 = 2;

impl Hot {
    fn new(len: f32, project: u32, personal: bool) -> Hot {
        debug_assert!(project < 1 << (32 - TAG_FLAGS), "a project's name id fits above the flags");
        Hot { len, tag: (project << TAG_FLAGS) | (u32::from(personal) * PERSONAL) | LIVE }
    }

    fn live(self) -> bool {
        self.tag & LIVE != 0
    }

    fn personal(self) -> bool {
        self.tag & PERSONAL != 0
    }

    fn project(self) -> u32 {
        self.tag >> TAG_FLAGS
    }
}

/// The rest of a memory: what a search reads only for the hits it returns (and a type filter).
#[derive(Debug, Clone)]
struct Doc {
    id: i64,
    /// Milliseconds since the epoch (ties rank the newer first): what the stored RFC 3339
    /// string orders by, in 8 bytes instead of a string on the heap per memory.
    updated_ms: i64,
    kind: u32,
}

/// What a search may return (the store's filter: the SQL search applies the same one).
pub use crate::store::search::MemoryFilter as IndexFilter;

/// The index proper. Not synchronised: see [`SharedIndex`].
pub struct MemoryIndex {
    stemmer: Stemmer,
    vocab: BTreeMap<Box<str>, u32>,
    /// Token → term id: text repeats its words (Zipf), so most tokens skip the stemmer.
    token_terms: HashMap<Box<str>, u32>,
    postings: Vec<PostingList>,
    /// Per slot, in step with `docs`.
    hot: Vec<Hot>,
    docs: Vec<Doc>,
    /// Slots of the live memories not in the ordered run below (changed since the build).
    slot_of: HashMap<i64, u32>,
    /// How many leading slots hold ids in increasing order (a build adds them so, and new
    /// memories continue it): their slots are found by binary search instead of a map entry
    /// each, 16-odd bytes a memory.
    ordered: u32,
    names: HashMap<Box<str>, u32>,
    /// Live memories and their total length.
    all: Stats,
    dead: u32,
    /// Live memories and their total length per project (personal ones apart, in
    /// `personal`): the collection a project-scoped search ranks against.
    project_stats: HashMap<u32, Stats>,
    personal: Stats,
    /// Last `observation_changes.seq` reflected.
    applied_seq: i64,
}

impl std::fmt::Debug for MemoryIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryIndex")
            .field("live", &self.all.docs)
            .field("terms", &self.vocab.len())
            .finish_non_exhaustive()
    }
}

impl MemoryIndex {
    fn empty() -> MemoryIndex {
        MemoryIndex {
            stemmer: Stemmer::create(Algorithm::English),
            vocab: BTreeMap::new(),
            token_terms: HashMap::new(),
            postings: Vec::new(),
            hot: Vec::new(),
            docs: Vec::new(),
            slot_of: HashMap::new(),
            ordered: 0,
            names: HashMap::new(),
            all: Stats::default(),
            dead: 0,
            project_stats: HashMap::new(),
            personal: Stats::default(),
            applied_seq: 0,
        }
    }

    /// Index every live memory.
    ///
    /// The rows are read `BUILD_CHUNK` at a time, each chunk in a short read transaction of
    /// its own, never in one snapshot: at a million memories a scan takes tens of seconds, and
    /// a read transaction that long pins the WAL (checkpoints cannot copy what was written
    /// after it began, nor restart the WAL), which then grows with every write meanwhile.
    /// Consistency comes from the change log instead: its last `seq` is read before the first
    /// chunk, so every change a later chunk may or may not have seen is logged after it, and is
    /// applied (again: by id, so applying twice is harmless) once the scan is done.
    pub fn build(conn: &Connection) -> Result<MemoryIndex> {
        MemoryIndex::build_in_chunks(conn, BUILD_CHUNK, || {})
    }

    /// [`MemoryIndex::build`] with `between` called after each full chunk, outside any
    /// transaction (tests write there).
    fn build_in_chunks(conn: &Connection, chunk: usize, mut between: impl FnMut()) -> Result<MemoryIndex> {
        let mut index = MemoryIndex::empty();
        index.applied_seq = max_seq(conn)?;
        let mut after = 0i64;
        loop {
            let rows = feed::live_rows_after(conn, after, chunk)?;
            let full = rows.len() == chunk;
            for row in &rows {
                index.add(row);
            }
            match rows.last() {
                Some(last) if full => after = last.id,
                _ => break,
            }
            between();
        }
        index.shrink();
        // A log trimmed past the start cannot say what the scan missed: leave `applied_seq`
        // where it was, and the next catch-up sees the gap and builds again.
        if !index.log_trimmed(conn)? {
            index.apply_logged(conn)?;
        }
        Ok(index)
    }

    pub fn len(&self) -> usize {
        self.all.docs as usize
    }

    pub fn is_empty(&self) -> bool {
        self.all.docs == 0
    }

    pub fn applied_seq(&self) -> i64 {
        self.applied_seq
    }

    /// Apply the changes logged since the last call; rebuild when too far behind or too
    /// fragmented.
    pub fn catch_up(&mut self, conn: &Connection) -> Result<()> {
        if self.log_trimmed(conn)? && self.applied_seq > 0 {
            *self = MemoryIndex::build(conn)?;
            return Ok(());
        }
        self.apply_logged(conn)?;
        if self.dead > 10_000 && self.dead > self.all.docs / 4 {
            *self = MemoryIndex::build(conn)?;
        }
        Ok(())
    }

    /// Whether changes after `applied_seq` were already trimmed from the log.
    fn log_trimmed(&self, conn: &Connection) -> Result<bool> {
        let oldest = feed::oldest_change_seq(conn)?;
        Ok(oldest.is_some_and(|oldest| oldest > self.applied_seq + 1))
    }

    /// Re-read every memory changed since `applied_seq` (removed, then added if still live).
    fn apply_logged(&mut self, conn: &Connection) -> Result<()> {
        let changes = feed::changes_after(conn, self.applied_seq)?;
        let Some(&(last, _)) = changes.last() else { return Ok(()) };
        let mut ids: Vec<i64> = changes.iter().map(|c| c.1).collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            self.remove(id);
            if let Some(row) = feed::live_row(conn, id)? {
                self.add(&row);
            }
        }
        self.applied_seq = last;
        Ok(())
    }

    /// Give back what growth left unused (once a build has read every row).
    fn shrink(&mut self) {
        self.postings.iter_mut().for_each(PostingList::shrink);
        self.postings.shrink_to_fit();
        self.hot.shrink_to_fit();
        self.docs.shrink_to_fit();
    }

    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.names.get(name) {
            return id;
        }
        let id = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.insert(name.into(), id);
        id
    }

    fn add(&mut self, row: &Row) {
        let mut tf: HashMap<u32, f32> = HashMap::new();
        let mut len = 0.0f32;
        let fields: [(&str, f32); 5] = [
            (&row.title, W_TITLE),
            (&row.content, W_CONTENT),
            (&row.kind, W_TYPE),
            (row.topic_key.as_deref().unwrap_or_default(), W_TOPIC),
            (row.tool_name.as_deref().unwrap_or_default(), W_TOOL),
        ];
        for (text, weight) in fields {
            for token in tokenize(text) {
                let term = self.token_term(&token);
                *tf.entry(term).or_default() += weight;
                len += weight;
            }
        }
        let slot = u32::try_from(self.docs.len()).unwrap_or(u32::MAX);
        for (term, weight) in tf {
            self.postings[term as usize].push(slot, weight);
        }
        let (project, personal) = (self.intern(&row.project), row.scope == Scope::Personal.as_str());
        let doc = Doc { id: row.id, updated_ms: updated_ms(&row.updated_at), kind: self.intern(&row.kind) };
        self.all.add(len);
        self.stats_of(personal, project).add(len);
        grow_by_an_eighth(&mut self.hot);
        self.hot.push(Hot::new(len, project, personal));
        grow_by_an_eighth(&mut self.docs);
        self.docs.push(doc);
        let continues_run = slot == self.ordered && (slot == 0 || self.docs[slot as usize - 1].id < row.id);
        if continues_run {
            self.ordered += 1;
        } else {
            self.slot_of.insert(row.id, slot);
        }
    }

    fn remove(&mut self, id: i64) {
        if let Some(slot) = self.live_slot(id) {
            let hot = &mut self.hot[slot as usize];
            if hot.live() {
                hot.tag &= !LIVE;
                let (len, personal, project) = (hot.len, hot.personal(), hot.project());
                self.dead += 1;
                self.all.remove(len);
                self.stats_of(personal, project).remove(len);
            }
        }
    }

    /// Where memory `id` lives now, forgetting it: a changed memory's slot is in `slot_of`;
    /// one in the ordered run may be there dead (changed or deleted since), which is no slot.
    fn live_slot(&mut self, id: i64) -> Option<u32> {
        if let Some(slot) = self.slot_of.remove(&id) {
            return Some(slot);
        }
        let run = &self.docs[..self.ordered as usize];
        let at = run.binary_search_by_key(&id, |d| d.id).ok()?;
        self.hot[at].live().then_some(at as u32)
    }

    fn stats_of(&mut self, personal: bool, project: u32) -> &mut Stats {
        if personal { &mut self.personal } else { self.project_stats.entry(project).or_default() }
    }

    fn token_term(&mut self, token: &str) -> u32 {
        if let Some(&term) = self.token_terms.get(token) {
            return term;
        }
        let stem = self.stem(token);
        let term = self.term_id(&stem);
        self.token_terms.insert(token.into(), term);
        term
    }

    fn stem(&self, token: &str) -> String {
        self.stemmer.stem(token).into_owned()
    }

    fn term_id(&mut self, stem: &str) -> u32 {
        if let Some(&id) = self.vocab.get(stem) {
            return id;
        }
        let id = u32::try_from(self.postings.len()).unwrap_or(u32::MAX);
        self.vocab.insert(stem.into(), id);
        self.postings.push(PostingList::default());
        id
    }

    /// Term ids of a parsed query (phrases are not this index's job: the caller routes them
    /// to FTS5).
    fn query_terms(&self, terms: &[Term]) -> Vec<u32> {
        let mut ids = Vec::new();
        for term in terms {
            match term {
                Term::Word(w) => {
                    for token in tokenize(w) {
                        if let Some(&id) = self.vocab.get(self.stem(&token).as_str()) {
                            ids.push(id);
                        }
                    }
                }
                Term::Prefix(p) => {
                    let prefix: String = tokenize(p).collect::<Vec<_>>().concat();
                    let expanded = self
                        .vocab
                        .range::<str, _>((std::ops::Bound::Included(prefix.as_str()), std::ops::Bound::Unbounded))
                        .take_while(|(k, _)| k.starts_with(prefix.as_str()))
                        .take(MAX_PREFIX_EXPANSION)
                        .map(|(_, &id)| id);
                    ids.extend(expanded);
                }
                Term::Phrase(_) => {}
            }
        }
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The best `limit` memories for the query: (id, BM25 score), best first; ties go to the
    /// more recently updated.
    pub fn search(&self, terms: &[Term], filter: &IndexFilter, limit: usize) -> Vec<(i64, f32)> {
        let ids = self.query_terms(terms);
        if ids.is_empty() || self.all.docs == 0 || limit == 0 {
            return Vec::new();
        }
        let accept = self.acceptor(filter);
        // A project-scoped search ranks against the memories it can return (the project plus
        // personal ones): a word in half of this project's memories (a speaker's name, the
        // project's own name) says little here however rare it is elsewhere.
        let scoped = filter.project.as_deref().map(|p| self.names.get(p).copied().unwrap_or(u32::MAX));
        let collection = match scoped {
            Some(p) => {
                let own = self.project_stats.get(&p).copied().unwrap_or_default();
                Stats { docs: own.docs + self.personal.docs, len: own.len + self.personal.len }
            }
            None => self.all,
        };
        if collection.docs == 0 {
            return Vec::new();
        }
        let n = collection.docs as f32;
        let avg_len = (collection.len / f64::from(collection.docs)).max(1.0) as f32;
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            scratch.reset(self.hot.len());
            // One pass over each posting list. Over the whole collection a term's IDF is known
            // before its list is read, so each weight goes straight to its memory's score; a
            // scoped search counts its IDF over the memories it accepts (the ones it can return),
            // so it holds the term's weights until the list is read.
            let mut matched: Vec<(u32, f32)> = Vec::new();
            for &term in &ids {
                let list = &self.postings[term as usize];
                if scoped.is_none() {
                    let idf = idf(n, list.len() as f32);
                    self.weigh(list, &accept, avg_len, |slot, weight| scratch.add(slot, idf * weight));
                    continue;
                }
                matched.clear();
                self.weigh(list, &accept, avg_len, |slot, weight| matched.push((slot, weight)));
                let idf = idf(n, matched.len() as f32);
                for &(slot, weight) in &matched {
                    scratch.add(slot, idf * weight);
                }
            }
            self.top(&scratch, limit)
        })
    }

    /// `each` of a list's postings whose memory is live and accepted, with its BM25 weight.
    #[inline]
    fn weigh(
        &self,
        list: &PostingList,
        accept: &impl Fn(Hot, u32) -> bool,
        avg_len: f32,
        mut each: impl FnMut(u32, f32),
    ) {
        let mut postings = list.iter();
        let mut run = [(0u32, 0f32); 256];
        loop {
            let n = postings.fill(&mut run);
            if n == 0 {
                return;
            }
            for &(slot, tf) in &run[..n] {
                let hot = self.hot[slot as usize];
                if hot.live() && accept(hot, slot) {
                    let norm = K1 * (1.0 - B + B * hot.len / avg_len);
                    each(slot, tf * (K1 + 1.0) / (tf + norm));
                }
            }
        }
    }

    fn acceptor<'a>(&'a self, filter: &'a IndexFilter) -> impl Fn(Hot, u32) -> bool + 'a {
        // A name the index never saw matches no memory (u32::MAX is never assigned).
        let lookup = |name: &str| self.names.get(name).copied().unwrap_or(u32::MAX);
        let project = filter.project.as_deref().map(lookup);
        let kind = filter.kind.as_deref().map(lookup);
        let scope = filter.scope;
        // The type is the one field read from the cold `Doc`, and only when filtered on.
        move |hot: Hot, slot: u32| {
            project.is_none_or(|p| hot.project() == p || hot.personal())
                && scope.is_none_or(|s| hot.personal() == (s == Scope::Personal))
                && kind.is_none_or(|k| self.docs[slot as usize].kind == k)
        }
    }

    fn top(&self, scratch: &Scratch, limit: usize) -> Vec<(i64, f32)> {
        let mut best: Vec<(f32, u32)> = Vec::with_capacity(limit + 1);
        for &slot in &scratch.touched {
            let score = scratch.scores[slot as usize];
            if best.len() == limit && !self.better(score, slot, best[limit - 1]) {
                continue;
            }
            let at = best.partition_point(|&b| self.better(b.0, b.1, (score, slot)));
            best.insert(at, (score, slot));
            best.truncate(limit);
        }
        best.into_iter().map(|(score, slot)| (self.docs[slot as usize].id, score)).collect()
    }

    /// Higher score first; equal scores: newer update, then higher id.
    fn better(&self, a_score: f32, a_slot: u32, b: (f32, u32)) -> bool {
        if a_score != b.0 {
            return a_score > b.0;
        }
        let (a, bd) = (&self.docs[a_slot as usize], &self.docs[b.1 as usize]);
        (a.updated_ms, a.id) > (bd.updated_ms, bd.id)
    }
}

/// Per-thread score accumulator, reused across searches (no allocation per query).
#[derive(Default)]
struct Scratch {
    scores: Vec<f32>,
    touched: Vec<u32>,
}

impl Scratch {
    fn reset(&mut self, len: usize) {
        for &slot in &self.touched {
            self.scores[slot as usize] = 0.0;
        }
        self.touched.clear();
        if self.scores.len() < len {
            self.scores.resize(len, 0.0);
        }
    }

    fn add(&mut self, slot: u32, score: f32) {
        let cell = &mut self.scores[slot as usize];
        if *cell == 0.0 {
            self.touched.push(slot);
        }
        *cell += score;
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// The store's side of the index: it builds one and feeds it, over its own connection (here,
/// so that the store needs nothing of the index).
impl Store {
    /// Apply the changes logged since `index` last looked (the daemon's index follower).
    pub fn follow_index(&self, index: &std::sync::Arc<SharedIndex>) -> Result<()> {
        index.follow(self.conn())
    }

    /// Build an in-memory index of this store (consistent snapshot).
    pub fn build_index(&self) -> Result<MemoryIndex> {
        MemoryIndex::build(self.conn())
    }
}

/// A stored timestamp (cairn writes one fixed-width UTC format, so its string order is its
/// time order) as milliseconds; one that does not parse ranks oldest.
fn updated_ms(stored: &str) -> i64 {
    cairn_base::clock::parse_ts(stored).map_or(i64::MIN, |t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
}

/// Make room for one more item, growing by an eighth rather than doubling: the daemon's
/// first save after a build must not double a million memories' worth of capacity.
/// BM25's inverse document frequency of a term in `df` of `n` memories.
fn idf(n: f32, df: f32) -> f32 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

fn grow_by_an_eighth<T>(items: &mut Vec<T>) {
    if items.len() == items.capacity() {
        items.reserve_exact((items.capacity() / 8).max(16));
    }
}

fn max_seq(conn: &Connection) -> Result<i64> {
    feed::newest_change_seq(conn)
}

/// Fold one alphanumeric run into `out` the way [`tokenize`] folds it (empty when the run is
/// too long to be indexed), without allocating per token.
pub(crate) fn fold_token_into(token: &str, out: &mut String) {
    out.clear();
    if is_indexable(token) {
        out.extend(folded(token));
    }
}

/// Lowercased, accent-folded alphanumeric runs (what unicode61 with remove_diacritics does).
pub fn tokenize(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty() && is_indexable(t)).map(|t| folded(t).collect())
}

/// Runs longer than this are not indexed (nor matched).
fn is_indexable(token: &str) -> bool {
    token.chars().count() <= MAX_TOKEN_CHARS
}

/// The characters of a run as the index stores them.
fn folded(token: &str) -> impl Iterator<Item = char> + '_ {
    token.chars().flat_map(char::to_lowercase).map(fold_accent)
}

fn fold_accent(c: char) -> char {
    match c {
        'á' | 'à' | 'â' | 'ä' | 'ã' | 'å' => 'a',
        'é' | 'è' | 'ê' | 'ë' => 'e',
        'í' | 'ì' | 'î' | 'ï' => 'i',
        'ó' | 'ò' | 'ô' | 'ö' | 'õ' => 'o',
        'ú' | 'ù' | 'û' | 'ü' => 'u',
        'ñ' => 'n',
        'ç' => 'c',
        other => other,
    }
}

/// Rows read per read transaction while building: a few milliseconds of reading each.
const BUILD_CHUNK: usize = 2_000;

/// Changes applied inline before a search; a longer backlog (a bulk import, a busy direct
/// writer) is rebuilt in the background with one scan while FTS5 answers.
const INLINE_CATCH_UP: i64 = 256;

/// Changes the follower applies in place; more (a bulk import) are cheaper as one rebuild.
const FOLLOW_LIMIT: i64 = 20_000;

/// An index shared by a daemon's connections; empty until built.
#[derive(Debug, Default)]
pub struct SharedIndex {
    inner: RwLock<Option<MemoryIndex>>,
    rebuilding: std::sync::atomic::AtomicBool,
}

impl SharedIndex {
    pub fn set(&self, index: MemoryIndex) {
        *self.inner.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(index);
    }

    pub fn is_ready(&self) -> bool {
        self.inner.read().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
    }

    /// Built and not rebuilding.
    pub fn is_current(&self) -> bool {
        self.is_ready() && !self.rebuilding.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Apply logged changes now (the daemon calls this after its own commits, off the request
    /// path). A backlog too large to apply quickly becomes a background rebuild.
    pub fn follow(self: &std::sync::Arc<Self>, conn: &Connection) -> Result<()> {
        let latest = max_seq(conn)?;
        let behind = {
            let guard = self.inner.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            match guard.as_ref() {
                None => return Ok(()),
                Some(index) => latest - index.applied_seq,
            }
        };
        if behind <= 0 {
            return Ok(());
        }
        if behind > FOLLOW_LIMIT {
            self.rebuild_in_background(conn);
            return Ok(());
        }
        let mut guard = self.inner.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(index) = guard.as_mut() {
            index.catch_up(conn)?;
        }
        Ok(())
    }

    /// Start a background rebuild now (after a bulk import), instead of at the next search.
    pub fn refresh_in_background(self: &std::sync::Arc<Self>, db_path: &std::path::Path) {
        if let Ok(conn) = Connection::open(db_path) {
            self.rebuild_in_background(&conn);
        }
    }

    /// Bring the index up to date with the log (cheap when nothing changed), then search.
    /// `None` when the index cannot answer now (not built yet, or rebuilding after a large
    /// backlog): the caller uses FTS5, which is always current.
    pub fn search(
        self: &std::sync::Arc<Self>,
        conn: &Connection,
        terms: &[Term],
        filter: &IndexFilter,
        limit: usize,
    ) -> Result<Option<Vec<(i64, f32)>>> {
        if conn.transaction_state(Some(rusqlite::MAIN_DB))? == rusqlite::TransactionState::Write {
            // Inside a write transaction (the writer's group commit) the connection sees rows
            // that may yet roll back: they must not enter the shared index. The answer is what
            // the index holds, which the follower brings up to each commit.
            let guard = self.inner.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            return Ok(guard.as_ref().map(|index| index.search(terms, filter, limit)));
        }
        let latest = max_seq(conn)?;
        {
            let guard = self.inner.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            match guard.as_ref() {
                None => return Ok(None),
                Some(index) if index.applied_seq >= latest => return Ok(Some(index.search(terms, filter, limit))),
                Some(index) if latest - index.applied_seq > INLINE_CATCH_UP => {
                    drop(guard);
                    self.rebuild_in_background(conn);
                    return Ok(None);
                }
                Some(_) => {}
            }
        }
        let mut guard = self.inner.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(index) = guard.as_mut() else { return Ok(None) };
        if index.applied_seq < latest {
            index.catch_up(conn)?;
        }
        Ok(Some(index.search(terms, filter, limit)))
    }

    /// Rebuild from one scan on a connection of its own, then swap (at most one at a time).
    fn rebuild_in_background(self: &std::sync::Arc<Self>, conn: &Connection) {
        use std::sync::atomic::Ordering;
        let Some(path) = conn.path().filter(|p| !p.is_empty()).map(str::to_owned) else { return };
        if self.rebuilding.swap(true, Ordering::AcqRel) {
            return;
        }
        let shared = std::sync::Arc::clone(self);
        std::thread::spawn(move || {
            let built = Connection::open(&path).map_err(crate::error::CairnError::from).and_then(|c| {
                c.busy_timeout(crate::settings::BUSY_TIMEOUT)?;
                MemoryIndex::build(&c)
            });
            match built {
                Ok(index) => shared.set(index),
                Err(e) => tracing::warn!(error = %e, "search index rebuild failed; FTS5 keeps answering"),
            }
            shared.rebuilding.store(false, Ordering::Release);
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::Store;
    use crate::search::SearchQuery;
    use crate::testutil::obs;

    fn indexed_pair() -> (tempfile::TempDir, crate::Core, Store) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cairn.db");
        let daemon = Store::open(&path).unwrap();
        let index = Arc::new(SharedIndex::default());
        index.set(daemon.build_index().unwrap());
        let daemon = crate::Core::new(daemon).with_index(index);
        let other = Store::open(&path).unwrap();
        (dir, daemon, other)
    }

    fn ids(daemon: &crate::Core, text: &str) -> Vec<i64> {
        daemon.search(&SearchQuery::new(text)).unwrap().hits.iter().map(|h| h.observation.id).collect()
    }

    #[test]
    fn sees_writes_from_other_connections() {
        let (_dir, daemon, mut other) = indexed_pair();
        let a = other.save(&obs("p", "Kafka consumer lag", "rebalance storms")).unwrap();
        assert_eq!(ids(&daemon, "kafka lag"), vec![a.id]);
        other
            .update(
                a.id,
                &crate::memory::ObservationPatch { content: Some("partition skew".into()), ..Default::default() },
            )
            .unwrap();
        assert_eq!(ids(&daemon, "skew"), vec![a.id]);
        assert!(ids(&daemon, "rebalance").is_empty(), "old content is gone from the index");
        other.delete(a.id, false).unwrap();
        assert!(ids(&daemon, "kafka").is_empty());
    }

    #[test]
    fn a_memorys_tag_keeps_its_project_and_flags_apart() {
        let top = (1 << (32 - TAG_FLAGS)) - 1;
        for (project, personal) in [(0, false), (0, true), (7, false), (top, true), (top, false)] {
            let mut hot = Hot::new(3.5, project, personal);
            assert!(hot.live());
            assert_eq!((hot.project(), hot.personal(), hot.len), (project, personal, 3.5));
            hot.tag &= !LIVE;
            assert!(!hot.live());
            assert_eq!((hot.project(), hot.personal()), (project, personal), "removal clears liveness only");
        }
    }

    #[test]
    fn rebuilds_when_the_log_was_trimmed_past_it() {
        let (_dir, daemon, mut other) = indexed_pair();
        other.save(&obs("p", "first", "alpha")).unwrap();
        assert_eq!(ids(&daemon, "alpha").len(), 1);
        other.save(&obs("p", "second", "beta")).unwrap();
        other.conn().execute("DELETE FROM observation_changes", []).unwrap();
        other.save(&obs("p", "third", "gamma")).unwrap();
        assert_eq!(ids(&daemon, "beta").len(), 1, "missed change recovered by a rebuild");
        assert_eq!(ids(&daemon, "gamma").len(), 1);
    }

    #[test]
    fn rows_a_write_transaction_may_roll_back_never_enter_the_shared_index() {
        let (_dir, mut daemon, mut other) = indexed_pair();
        // The writer's group commit: its connection sees its own rows before they are kept.
        daemon.store.conn().execute_batch("BEGIN IMMEDIATE").unwrap();
        daemon.store.save(&obs("p", "phantom", "rolled back")).unwrap();
        assert!(ids(&daemon, "phantom").is_empty(), "answered from what the index holds");
        daemon.store.conn().execute_batch("ROLLBACK").unwrap();
        // The change log reuses the rolled-back sequence number: an index that had taken the
        // phantom would count this write as applied and never see it.
        let kept = other.save(&obs("p", "kept", "committed")).unwrap();
        assert_eq!(ids(&daemon, "kept"), vec![kept.id]);
        assert!(ids(&daemon, "phantom").is_empty());
    }

    #[test]
    fn accents_fold_and_prefixes_expand() {
        let (_dir, daemon, mut other) = indexed_pair();
        let a = other.save(&obs("p", "Configuración de caché", "la caché se invalida al desplegar")).unwrap();
        assert_eq!(ids(&daemon, "configuracion cache"), vec![a.id]);
        assert_eq!(ids(&daemon, "desple*"), vec![a.id]);
    }

    #[test]
    fn a_project_scoped_search_weighs_words_by_that_projects_memories() {
        let (_dir, daemon, mut other) = indexed_pair();
        // In project p nearly every memory names alice and one mentions the zebra; elsewhere
        // the zebra is everywhere and alice nowhere.
        for i in 0..5 {
            other.save(&obs("p", &format!("note {i}"), "alice said hello")).unwrap();
        }
        let zebra = other.save(&obs("p", "note z", "the zebra escaped")).unwrap();
        for i in 0..20 {
            other.save(&obs("q", &format!("zoo {i}"), "a zebra again")).unwrap();
        }
        let q = SearchQuery { project: Some("p".into()), ..SearchQuery::new("alice zebra") };
        let got: Vec<i64> = daemon.search(&q).unwrap().hits.iter().map(|h| h.observation.id).collect();
        assert_eq!(got[0], zebra.id, "in p, zebra is the rare word");
        assert_eq!(got.len(), 6, "other projects stay out");
    }

    #[test]
    fn unknown_project_matches_only_personal() {
        let (_dir, daemon, mut other) = indexed_pair();
        other.save(&obs("p", "tabs", "use tabs")).unwrap();
        let mut pref = obs("q", "tabs personal", "tabs everywhere");
        pref.scope = Some("personal".into());
        let personal = other.save(&pref).unwrap();
        let q = SearchQuery { project: Some("never-seen".into()), ..SearchQuery::new("tabs") };
        let got: Vec<i64> = daemon.search(&q).unwrap().hits.iter().map(|h| h.observation.id).collect();
        assert_eq!(got, vec![personal.id]);
    }
}

#[cfg(test)]
mod backlog_tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::Store;
    use crate::search::SearchQuery;
    use crate::testutil::obs;

    #[test]
    fn a_large_backlog_is_answered_by_fts5_then_by_the_rebuilt_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cairn.db");
        let daemon = Store::open(&path).unwrap();
        let index = Arc::new(SharedIndex::default());
        index.set(daemon.build_index().unwrap());
        let daemon = crate::Core::new(daemon).with_index(Arc::clone(&index));
        let mut other = Store::open(&path).unwrap();
        for i in 0..(INLINE_CATCH_UP + 50) {
            other.save(&obs("p", &format!("bulk {i}"), "imported zanzibar notes")).unwrap();
        }
        // Too far behind to catch up inline: FTS5 answers, and still finds everything.
        let hits = daemon.search(&SearchQuery { limit: 5, ..SearchQuery::new("zanzibar") }).unwrap().hits;
        assert_eq!(hits.len(), 5);
        let deadline = Instant::now() + Duration::from_secs(10);
        while index.rebuilding.load(std::sync::atomic::Ordering::Acquire) || !caught_up(&index, &daemon.store) {
            assert!(Instant::now() < deadline, "rebuild did not finish");
            std::thread::sleep(Duration::from_millis(10));
        }
        let terms = crate::search::query::parse("zanzibar");
        let found = index.search(daemon.store.conn(), &terms, &IndexFilter::default(), 1000).unwrap().unwrap();
        assert_eq!(found.len() as i64, INLINE_CATCH_UP + 50);
    }

    /// The rebuild reads in chunks, each in its own short read transaction: between chunks a
    /// checkpoint copies everything written meanwhile (with one snapshot for the whole scan it
    /// could copy nothing written after the scan began, and the WAL would grow), and writes
    /// made during the scan, before or after the row's chunk, are all in the result.
    #[test]
    fn a_rebuild_in_chunks_does_not_pin_the_wal_and_misses_no_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cairn.db");
        let mut writer = Store::open(&path).unwrap();
        writer.conn_pragma("wal_autocheckpoint", 0).unwrap();
        let ids: Vec<i64> =
            (0..50).map(|i| writer.save(&obs("p", &format!("row {i}"), "plain text")).unwrap().id).collect();
        let checkpointer = Connection::open(&path).unwrap();
        let builder = Connection::open(&path).unwrap();
        let mut chunks = 0;
        let index = MemoryIndex::build_in_chunks(&builder, 10, || {
            chunks += 1;
            if chunks == 1 {
                // Already read, not yet read, and new.
                let patch = crate::memory::ObservationPatch { content: Some("zebra".into()), ..Default::default() };
                writer.update(ids[0], &patch).unwrap();
                writer.delete(ids[45], true).unwrap();
                writer.save(&obs("p", "late arrival", "okapi")).unwrap();
            } else {
                writer.save(&obs("p", &format!("during chunk {chunks}"), "plain text")).unwrap();
            }
            let (busy, log, copied): (i64, i64, i64) = checkpointer
                .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap();
            assert_eq!((busy, copied), (0, log), "chunk {chunks}: the build holds a snapshot that pins the WAL");
        })
        .unwrap();
        assert!(chunks >= 5, "{chunks} chunks");
        let found = |text: &str| -> Vec<i64> {
            index
                .search(&crate::search::query::parse(text), &IndexFilter::default(), 100)
                .into_iter()
                .map(|h| h.0)
                .collect()
        };
        assert_eq!(found("zebra"), vec![ids[0]]);
        assert_eq!(found("okapi").len(), 1);
        assert!(!found("plain").contains(&ids[0]), "the old text of an updated row is gone");
        assert!(!found("plain").contains(&ids[45]), "a deleted row is gone");
        assert_eq!(index.len(), 50 + chunks - 1, "every live row once: {index:?}");
        assert_eq!(index.applied_seq(), max_seq(writer.conn()).unwrap());
    }

    fn caught_up(index: &SharedIndex, store: &Store) -> bool {
        let latest = max_seq(store.conn()).unwrap();
        index.inner.read().unwrap().as_ref().is_some_and(|i| i.applied_seq >= latest)
    }
}

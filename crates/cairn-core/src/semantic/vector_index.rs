//! The vectors semantic search scans, in memory: one bit per dimension (is the value above
//! the dimension's centre?), 48 bytes a vector at 384 dimensions. At a million memories that
//! is 48 MB where i8 codes took 384 MB and f32 1.5 GB. The bits only choose a shortlist, by
//! Hamming distance; [`super::Semantic`] scores the shortlist exactly with the f32 vectors of
//! the table, so a cosine search reports is always the model's own.
//!
//! The centre is the mean of the vectors when the index is built (a sample of the table).
//! Sentence models put every text in one narrow cone (e5's cosines are rarely below 0.7), so
//! the sign of a raw value says little; its side of the mean splits the memories in two.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// The in-memory index: binary codes, one slot per memory.
#[derive(Debug, Default)]
pub struct VectorIndex {
    dims: usize,
    /// u64 words per code.
    words: usize,
    /// Per dimension, the value a bit compares with.
    centre: Vec<f32>,
    ids: Vec<i64>,
    slot_of: HashMap<i64, u32>,
    codes: Vec<u64>,
    /// Per slot: whether it holds a memory's vector (a removed memory's slot is kept for when
    /// it comes back, as a changed memory does).
    filled: Vec<bool>,
    live: usize,
}

impl VectorIndex {
    /// An empty index whose codes compare each dimension with `centre` (empty: with 0).
    pub fn with_centre(centre: Vec<f32>) -> VectorIndex {
        VectorIndex { centre, ..VectorIndex::default() }
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn dims(&self) -> usize {
        self.dims
    }

    /// Whether memory `id` has a vector here.
    pub fn contains(&self, id: i64) -> bool {
        self.slot_of.get(&id).is_some_and(|&slot| self.filled[slot as usize])
    }

    /// Add or replace the vector of memory `id`. Vectors of another length are refused.
    pub fn upsert(&mut self, id: i64, vector: &[f32]) -> bool {
        if vector.is_empty() || (self.dims != 0 && vector.len() != self.dims) {
            return false;
        }
        if self.dims == 0 {
            self.dims = vector.len();
            self.words = self.dims.div_ceil(64);
            if self.centre.len() != self.dims {
                self.centre = vec![0.0; self.dims];
            }
        }
        let code = self.code(vector);
        if let Some(&slot) = self.slot_of.get(&id) {
            let slot = slot as usize;
            if !self.filled[slot] {
                self.filled[slot] = true;
                self.live += 1;
            }
            self.codes[slot * self.words..(slot + 1) * self.words].copy_from_slice(&code);
        } else {
            let Ok(slot) = u32::try_from(self.ids.len()) else { return false };
            self.slot_of.insert(id, slot);
            self.ids.push(id);
            self.codes.extend_from_slice(&code);
            self.filled.push(true);
            self.live += 1;
        }
        true
    }

    pub fn remove(&mut self, id: i64) {
        if let Some(&slot) = self.slot_of.get(&id)
            && self.filled[slot as usize]
        {
            self.filled[slot as usize] = false;
            self.live -= 1;
        }
    }

    /// The memories whose codes are nearest to `query`'s, at most `n` (every memory when
    /// there are no more than `n`), in no particular order. Empty for a query of another
    /// length.
    pub fn shortlist(&self, query: &[f32], n: usize) -> Vec<i64> {
        self.shortlist_shared(query, n, None)
    }

    /// [`VectorIndex::shortlist`], its scan of every code shared with a thread that calls
    /// [`ScanShare::published`] on `share` meanwhile (the same distances, so the same shortlist).
    pub fn shortlist_shared(&self, query: &[f32], n: usize, share: Option<&ScanShare>) -> Vec<i64> {
        if query.len() != self.dims || n == 0 || self.live == 0 {
            return Vec::new();
        }
        if n >= self.live {
            return self.filled_slots().map(|slot| self.ids[slot]).collect();
        }
        let code = self.code(query);
        let distances = if let Some(share) = share.filter(|_| self.ids.len() >= 2 * SCAN_PART) {
            share.scan(code, self)
        } else {
            let mut distances = vec![0u16; self.ids.len()];
            cairn_embed::hamming_rows(&code, &self.codes, &mut distances);
            distances
        };
        sampled_bound(&distances, n, self.words * 64)
            .and_then(|bound| self.nearest_within(&distances, n, bound))
            .unwrap_or_else(|| self.nearest_by_histogram(&distances, n))
    }

    /// The `n` nearest filled slots' memories when at least `n` lie within `bound`: only the
    /// runs of slots that hold a distance within it are read one by one (a run's minimum is
    /// a vector instruction's work), and the cut is found among those few. `None` when fewer
    /// than `n` do (the bound, from a sample, was too tight).
    fn nearest_within(&self, distances: &[u16], n: usize, bound: u16) -> Option<Vec<i64>> {
        let mut near: Vec<(u16, usize)> = Vec::new();
        for (run, chunk) in distances.chunks(RUN).enumerate() {
            if chunk.iter().fold(u16::MAX, |least, &d| least.min(d)) > bound {
                continue;
            }
            let first = run * RUN;
            let within = chunk.iter().enumerate().filter(|&(i, &d)| d <= bound && self.filled[first + i]);
            near.extend(within.map(|(i, &d)| (d, first + i)));
        }
        if near.len() < n {
            return None;
        }
        let mut at = vec![0usize; usize::from(bound) + 1];
        for &(d, _) in &near {
            at[usize::from(d)] += 1;
        }
        let (cut, mut ties) = cut_of(&at, n);
        let mut out = Vec::with_capacity(n);
        for (d, slot) in near {
            let d = usize::from(d);
            if d < cut || (d == cut && ties > 0) {
                ties -= usize::from(d == cut);
                out.push(self.ids[slot]);
            }
        }
        Some(out)
    }

    /// The `n` nearest filled slots' memories from a histogram of every distance.
    fn nearest_by_histogram(&self, distances: &[u16], n: usize) -> Vec<i64> {
        let mut at = vec![0usize; self.words * 64 + 1];
        for slot in self.filled_slots() {
            at[usize::from(distances[slot])] += 1;
        }
        let (cut, mut ties) = cut_of(&at, n);
        let mut out = Vec::with_capacity(n);
        for slot in self.filled_slots() {
            let d = usize::from(distances[slot]);
            if d < cut {
                out.push(self.ids[slot]);
            } else if d == cut && ties > 0 {
                out.push(self.ids[slot]);
                ties -= 1;
            }
        }
        out
    }

    fn filled_slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.filled.iter().enumerate().filter(|(_, filled)| **filled).map(|(slot, _)| slot)
    }

    /// The binary code of a vector: bit i set when dimension i is above the centre.
    fn code(&self, vector: &[f32]) -> Vec<u64> {
        let mut code = vec![0u64; self.words];
        for (i, (&x, &c)) in vector.iter().zip(&self.centre).enumerate() {
            if x > c {
                code[i / 64] |= 1 << (i % 64);
            }
        }
        code
    }
}

/// Codes one thread scans at a time in a shared scan ([`ScanShare`]).
const SCAN_PART: usize = if cfg!(test) { 1_024 } else { 65_536 };

/// A Hamming scan of every code that a second thread can join: at a million memories the scan
/// reads 48 MB, and in a hybrid search the thread that reads the lexical ranking is idle once
/// it has it. The scanning thread publishes the scan; a helper ([`ScanHelp::run_on`]) takes
/// parts of it until none are left; the scanner waits only for parts a helper has taken, and a
/// helper takes one only while it reads the same index (so neither ever waits for a writer).
#[derive(Debug, Default)]
pub struct ScanShare {
    state: Mutex<ShareState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
enum ShareState {
    /// The scanner has not published its scan yet.
    #[default]
    Waiting,
    Scanning(Arc<ScanJob>),
    /// No scan to share: it is done, or there will be none.
    Over,
}

#[derive(Debug)]
struct ScanJob {
    query: Vec<u64>,
    slots: usize,
    words: usize,
    next: AtomicUsize,
    done: AtomicUsize,
    parts: Vec<Mutex<Vec<u16>>>,
}

impl ScanJob {
    /// Scan parts of `codes` until none is left unclaimed.
    fn run(&self, codes: &[u64]) {
        loop {
            let part = self.next.fetch_add(1, Ordering::AcqRel);
            if part >= self.parts.len() {
                return;
            }
            let from = part * SCAN_PART;
            let to = (from + SCAN_PART).min(self.slots);
            let mut out = self.parts[part].lock().unwrap_or_else(PoisonError::into_inner);
            out.resize(to - from, 0);
            cairn_embed::hamming_rows(&self.query, &codes[from * self.words..to * self.words], &mut out);
            drop(out);
            self.done.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// A published scan a second thread can take parts of ([`ScanShare::published`]).
#[derive(Debug)]
pub struct ScanHelp(Arc<ScanJob>);

impl ScanHelp {
    /// Take parts of the scan, reading `index`, until none is left. `index` must be the
    /// scanner's, under a read lock taken without waiting (`try_read`): a scanner waits for
    /// every part taken, so a part must never wait for a writer. Another index (a vector came
    /// or went between the two reads) is left alone.
    pub fn run_on(&self, index: &VectorIndex) {
        if index.ids.len() == self.0.slots && index.words == self.0.words {
            self.0.run(&index.codes);
        }
    }
}

impl ScanShare {
    /// Scan every code of `index` for `query` (its code), with whoever helps.
    fn scan(&self, query: Vec<u64>, index: &VectorIndex) -> Vec<u16> {
        let slots = index.ids.len();
        let parts = slots.div_ceil(SCAN_PART);
        let job = Arc::new(ScanJob {
            query,
            slots,
            words: index.words,
            next: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            parts: (0..parts).map(|_| Mutex::new(Vec::new())).collect(),
        });
        self.set(ShareState::Scanning(Arc::clone(&job)));
        job.run(&index.codes);
        // What is left is a part a helper took last: a fraction of the scan.
        while job.done.load(Ordering::Acquire) < parts {
            std::thread::yield_now();
        }
        self.set(ShareState::Over);
        let mut distances = Vec::with_capacity(slots);
        for part in &job.parts {
            distances.extend_from_slice(&part.lock().unwrap_or_else(PoisonError::into_inner));
        }
        distances
    }

    /// The scan published on this share, once it is (`None`: over, or there will be none).
    /// Waits while the scanner has not published yet: call it only while a scanner will, or
    /// will call [`ScanShare::finish`]. Hold no read lock of the index while waiting (a writer
    /// queued behind it would keep the scanner from reading the index at all).
    pub fn published(&self) -> Option<ScanHelp> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match &*state {
                ShareState::Waiting => state = self.changed.wait(state).unwrap_or_else(PoisonError::into_inner),
                ShareState::Scanning(job) => return Some(ScanHelp(Arc::clone(job))),
                ShareState::Over => return None,
            }
        }
    }

    /// No scan will be published (or it is done): a helper waiting goes back.
    pub fn finish(&self) {
        self.set(ShareState::Over);
    }

    fn set(&self, to: ShareState) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = to;
        self.changed.notify_all();
    }
}

/// Slots whose distances are tested for the bound at once ([`VectorIndex::nearest_within`]).
const RUN: usize = 64;
/// One slot in this many is sampled for the bound.
const SAMPLE_EVERY: usize = 16;
/// Below this many slots the histogram of every distance is cheap: no sample.
const SAMPLE_FROM: usize = 65_536;

/// From a histogram of distances (`at[d]`: how many at `d`), the cut: the smallest distance
/// at or within which `n` lie, and how many of those at it are taken (ties, in slot order).
/// A histogram holding fewer than `n` gives the last distance and every slot at it.
fn cut_of(at: &[usize], n: usize) -> (usize, usize) {
    let mut nearer = 0;
    for (cut, &count) in at.iter().enumerate() {
        if nearer + count >= n {
            return (cut, n - nearer);
        }
        nearer += count;
    }
    (at.len().saturating_sub(1), at.last().copied().unwrap_or(0))
}

/// A distance within which at least `n` of the slots very likely lie (twice as many, by a
/// sample of one slot in [`SAMPLE_EVERY`]): all but a few hundred slots of a million are
/// then passed over a run at a time, where a histogram of every distance read each one.
/// `None` for a short scan, or when the sample does not reach it.
/// `bits` is the codes' width, the largest distance.
fn sampled_bound(distances: &[u16], n: usize, bits: usize) -> Option<u16> {
    if distances.len() < SAMPLE_FROM {
        return None;
    }
    let mut at = vec![0usize; bits + 1];
    for &d in distances.iter().step_by(SAMPLE_EVERY) {
        at[usize::from(d)] += 1;
    }
    let wanted = (2 * n).div_ceil(SAMPLE_EVERY) + 8;
    let mut seen = 0;
    for (d, &count) in at.iter().enumerate() {
        seen += count;
        if seen >= wanted {
            return u16::try_from(d).ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_index(n: usize, dims: usize, seed: u64) -> (VectorIndex, Vec<Vec<f32>>) {
        let mut state = seed;
        let mut next = move || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) % 2001) as f32 / 1000.0 - 1.0
        };
        let vectors: Vec<Vec<f32>> = (0..n + 8).map(|_| (0..dims).map(|_| next()).collect()).collect();
        let mut index = VectorIndex::default();
        for (i, v) in vectors[..n].iter().enumerate() {
            index.upsert(i as i64, v);
        }
        (index, vectors[n..].to_vec())
    }

    /// A scan a second thread helps with gives the shortlist of one thread alone, whether the
    /// helper joins, comes late, or finds the scan over.
    #[test]
    fn a_shared_scan_is_the_scan_of_one_thread() {
        let (index, queries) = random_index(5 * SCAN_PART + 17, 96, 3);
        let index = std::sync::RwLock::new(index);
        for query in &queries {
            let alone = index.read().unwrap().shortlist(query, 300);
            let share = ScanShare::default();
            let shared = std::thread::scope(|scope| {
                let helper = scope.spawn(|| {
                    if let Some(help) = share.published() {
                        help.run_on(&index.read().unwrap());
                    }
                });
                let shared = index.read().unwrap().shortlist_shared(query, 300, Some(&share));
                share.finish();
                helper.join().unwrap();
                shared
            });
            assert_eq!(shared, alone);
        }
        // Nobody helps: the scanner scans every part itself.
        let share = ScanShare::default();
        let shared = index.read().unwrap().shortlist_shared(&queries[0], 300, Some(&share));
        assert_eq!(shared, index.read().unwrap().shortlist(&queries[0], 300));
        assert!(share.published().is_none(), "over once scanned");
    }

    #[test]
    fn a_shortlist_holds_the_nearest_codes() {
        let mut index = VectorIndex::with_centre(vec![0.0; 4]);
        index.upsert(1, &[1.0, 1.0, 1.0, 1.0]);
        index.upsert(2, &[1.0, 1.0, 1.0, -1.0]);
        index.upsert(3, &[-1.0, -1.0, 1.0, -1.0]);
        index.upsert(4, &[-1.0, -1.0, -1.0, -1.0]);
        let mut near = index.shortlist(&[0.9, 0.8, 0.7, 0.6], 2);
        near.sort_unstable();
        assert_eq!(near, vec![1, 2]);
        assert_eq!(index.shortlist(&[0.9, 0.8, 0.7, 0.6], 3).len(), 3, "a tie at the cut fills to n");
        let mut all = index.shortlist(&[0.9, 0.8, 0.7, 0.6], 10);
        all.sort_unstable();
        assert_eq!(all, vec![1, 2, 3, 4], "n at least the memories: every one");
    }

    #[test]
    fn codes_compare_with_the_centre() {
        // Every vector is positive: with a centre of 0 every code is the same.
        let mut index = VectorIndex::with_centre(vec![0.5, 0.5]);
        index.upsert(1, &[0.9, 0.1]);
        index.upsert(2, &[0.1, 0.9]);
        assert_eq!(index.shortlist(&[0.8, 0.2], 1), vec![1]);
        assert_eq!(index.shortlist(&[0.2, 0.8], 1), vec![2]);
    }

    #[test]
    fn removed_and_replaced_vectors() {
        let mut index = VectorIndex::default();
        index.upsert(1, &[1.0, 0.0]);
        index.upsert(2, &[-1.0, 0.5]);
        index.remove(1);
        assert_eq!(index.len(), 1);
        assert!(!index.contains(1));
        assert_eq!(index.shortlist(&[1.0, 0.0], 1), vec![2], "a removed memory is never listed");
        index.upsert(1, &[1.0, 0.1]);
        assert!(index.contains(1));
        assert_eq!(index.len(), 2);
        index.upsert(2, &[1.0, 0.2]);
        assert_eq!(index.len(), 2, "a replaced vector keeps its slot");
        assert!(!index.upsert(3, &[1.0, 0.0, 0.0]), "another length is refused");
        assert!(index.shortlist(&[1.0], 1).is_empty());
    }

    /// The sampled bound's path lists exactly what the histogram of every distance lists,
    /// ties at the cut included, whether the sample's bound holds or falls short.
    #[test]
    fn a_sampled_bound_lists_what_the_full_histogram_lists() {
        // 40 dimensions: distances 0–40, so thousands tie at each and the cut's ties decide.
        let dims = 40;
        let mut index = VectorIndex::default();
        let vector = |seed: u64| -> Vec<f32> {
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            (0..dims)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 1000) as f32 - 500.0
                })
                .collect()
        };
        for id in 0..(SAMPLE_FROM as i64 + 10_007) {
            index.upsert(id, &vector(id as u64));
        }
        for id in (0..SAMPLE_FROM as i64).step_by(3) {
            index.remove(id);
        }
        for (query, n) in [(1u64, 1), (2, 400), (3, 1_000), (4, 5_000), (5, 40_000)] {
            let query = vector(query + 1_000_000);
            let code = index.code(&query);
            let mut distances = vec![0u16; index.ids.len()];
            cairn_embed::hamming_rows(&code, &index.codes, &mut distances);
            let want = index.nearest_by_histogram(&distances, n);
            assert_eq!(want.len(), n);
            assert_eq!(index.shortlist(&query, n), want, "n {n}");
            assert_eq!(index.nearest_within(&distances, n, 0), None, "too tight a bound is no answer");
            match sampled_bound(&distances, n, index.words * 64) {
                // The depths a search asks for: the bound's path answers, and answers the same.
                Some(bound) => assert_eq!(index.nearest_within(&distances, n, bound), Some(want), "n {n}"),
                None => assert!(n * 2 > index.ids.len() / SAMPLE_EVERY, "n {n}: only a depth the sample cannot reach"),
            }
        }
        assert_eq!(cut_of(&[3, 0, 5], 4), (2, 1));
        assert_eq!(cut_of(&[3, 0, 5], 3), (0, 3));
        assert_eq!(cut_of(&[3, 0, 5], 9), (2, 5), "fewer than n: everything");
    }

    #[test]
    fn a_long_scan_lists_exactly_n_of_the_nearest() {
        let dims = 96;
        let mut index = VectorIndex::default();
        let vector = |seed: u64| -> Vec<f32> {
            (0..dims)
                .map(|i| ((seed.wrapping_mul(2_654_435_761).wrapping_add(i * 40_503)) % 1000) as f32 - 500.0)
                .collect()
        };
        for id in 0..5_000 {
            index.upsert(id, &vector(id as u64));
        }
        for id in (0..5_000).step_by(7) {
            index.remove(id);
        }
        let query = vector(11);
        let near = index.shortlist(&query, 100);
        assert_eq!(near.len(), 100);
        assert!(near.contains(&11), "the query's own vector is nearest");
        assert!(near.iter().all(|id| id % 7 != 0), "no removed memory");
    }
}

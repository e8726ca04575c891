//! The brute-force scan behind semantic search: one i8-quantised query against every stored
//! i8 vector. Memory-bound at ~40 MB per 100k vectors; the AVX2 build (chosen at run time)
//! does the widening multiply-adds 16 lanes at a time, about twice the portable build. The
//! AVX-512BW build of the same loop is faster again (100k rows on one thread: 2.12 → 1.71 ms on
//! a Xeon with AVX-512, `cargo bench -p cairn-embed --bench embed -- scan_i8`): LLVM still
//! multiplies in 256-bit halves there, but unrolls four rows of 64 bytes and sums in 512-bit
//! registers.

use std::sync::Arc;

/// Dot products of `query` with each `query.len()`-long row of `codes`, appended to `out`.
pub fn dot_i8_rows(query: &[i8], codes: &[i8], out: &mut Vec<i32>) {
    if query.is_empty() {
        return;
    }
    let base = out.len();
    out.resize(base + codes.len() / query.len(), 0);
    dispatch(query, codes, &mut out[base..]);
}

/// Rows per chunk of a shared scan: 768 KB of codes at 384 dimensions, ~70 µs.
const CHUNK_ROWS: usize = 2048;
/// Scans of fewer rows stay on one thread: waking the second one would cost more than it saves.
const SHARE_FROM_ROWS: usize = 16_384;

/// [`dot_i8_rows`], with the rows shared with the search query's second thread (the one
/// that helped embed the query, free again by now) when the machine has two cores and the
/// scan is long: each thread takes chunks of rows from one counter, so the second thread,
/// woken when the scan starts, takes what is left when it arrives. The codes are shared
/// (`Arc`) because that thread outlives the call; the same dot products either way.
pub fn dot_i8_rows_shared(query: &[i8], codes: &Arc<Vec<i8>>, out: &mut Vec<i32>) {
    let dims = query.len();
    let rows = codes.len().checked_div(dims).unwrap_or(0);
    let claim = if rows >= SHARE_FROM_ROWS { crate::second::claim() } else { None };
    let Some(claim) = claim else { return dot_i8_rows(query, codes, out) };
    let base = out.len();
    out.resize(base + rows, 0);
    let mine = &mut out[base..];
    let part = Box::new(Scan {
        query: query.to_vec(),
        codes: Arc::clone(codes),
        out: vec![0; rows],
        done: Vec::new(),
        failed: false,
    });
    let part = claim.share(part, rows.div_ceil(CHUNK_ROWS), |chunk| {
        let r = chunk_rows(chunk, rows);
        dispatch(query, &codes[r.start * dims..r.end * dims], &mut mine[r]);
    });
    let Some(part) = part else { return }; // done here alone
    for &chunk in &part.done {
        let r = chunk_rows(chunk, rows);
        if part.failed {
            dispatch(query, &codes[r.start * dims..r.end * dims], &mut mine[r]);
        } else {
            mine[r.clone()].copy_from_slice(&part.out[r]);
        }
    }
}

fn chunk_rows(chunk: usize, rows: usize) -> std::ops::Range<usize> {
    chunk * CHUNK_ROWS..((chunk + 1) * CHUNK_ROWS).min(rows)
}

/// The second thread's share of a scan: its own copy of the query, the codes, its dot
/// products (only its chunks' rows are written).
struct Scan {
    query: Vec<i8>,
    codes: Arc<Vec<i8>>,
    out: Vec<i32>,
    done: Vec<usize>,
    failed: bool,
}

impl crate::second::Part for Scan {
    fn run(&mut self, chunk: usize) {
        self.done.push(chunk);
        let dims = self.query.len();
        let r = chunk_rows(chunk, self.out.len());
        dispatch(&self.query, &self.codes[r.start * dims..r.end * dims], &mut self.out[r]);
    }

    fn fail(&mut self) {
        self.failed = true;
    }
}

/// The crate's `unsafe` calls of the scan: the AVX-512BW or the AVX2 build of the same safe
/// loop, each called only when the CPU has its features (checked just before), which is all
/// `target_feature` requires.
#[allow(unsafe_code)]
fn dispatch(query: &[i8], codes: &[i8], out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512bw") {
        // SAFETY: AVX-512BW (and so AVX-512F) is present (checked above); the function is
        // otherwise safe code.
        return unsafe { rows_avx512(query, codes, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present (checked above); the function is otherwise safe code.
        return unsafe { rows_avx2(query, codes, out) };
    }
    rows(query, codes, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn rows_avx2(query: &[i8], codes: &[i8], out: &mut [i32]) {
    rows(query, codes, out);
}

/// The same loop where the CPU has AVX-512BW (see the module's note on what LLVM makes of it).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx2")]
fn rows_avx512(query: &[i8], codes: &[i8], out: &mut [i32]) {
    rows(query, codes, out);
}

#[inline(always)]
fn rows(query: &[i8], codes: &[i8], out: &mut [i32]) {
    for (row, out) in codes.chunks_exact(query.len()).zip(out) {
        // A plain widening reduction: LLVM emits (v)pmaddwd for it.
        *out = query.iter().zip(row).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_naive_product_including_extremes() {
        let query: Vec<i8> = (0..37).map(|i| if i % 5 == 0 { -127 } else { (i * 7 % 255 - 127) as i8 }).collect();
        let codes: Vec<i8> = (0..37 * 4).map(|i| if i % 3 == 0 { 127 } else { (i * 13 % 255 - 127) as i8 }).collect();
        let mut out = Vec::new();
        dot_i8_rows(&query, &codes, &mut out);
        let naive: Vec<i32> = codes
            .chunks_exact(37)
            .map(|row| query.iter().zip(row).map(|(&a, &b)| i32::from(a) * i32::from(b)).sum())
            .collect();
        assert_eq!(out, naive);
        let mut portable = vec![0; 4];
        rows(&query, &codes, &mut portable);
        assert_eq!(portable, naive);
        // The AVX2 build, which `dispatch` skips on an AVX-512 CPU.
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            let mut avx2 = vec![0; 4];
            #[allow(unsafe_code)]
            // SAFETY: the CPU has AVX2, checked just above.
            unsafe {
                rows_avx2(&query, &codes, &mut avx2);
            }
            assert_eq!(avx2, naive);
        }
    }

    #[test]
    fn a_shared_scan_equals_one_thread() {
        // Enough rows to share, a last chunk that is partial; something already in `out`.
        let dims = 24;
        let n = SHARE_FROM_ROWS + CHUNK_ROWS * 3 + 17;
        let query: Vec<i8> = (0..dims).map(|i| (i * 37 % 255) as i8).collect();
        let codes: Vec<i8> = (0..dims * n).map(|i| (i * 7919 % 255) as i8).collect();
        let mut one = vec![-1];
        dot_i8_rows(&query, &codes, &mut one);
        let codes = Arc::new(codes);
        for _ in 0..20 {
            let mut shared = vec![-1];
            dot_i8_rows_shared(&query, &codes, &mut shared);
            assert_eq!(shared, one);
        }
        assert_eq!(Arc::strong_count(&codes), 1, "the second thread kept no copy");
    }

    #[test]
    fn an_empty_query_scores_nothing() {
        let mut out = Vec::new();
        dot_i8_rows(&[], &[1, 2, 3], &mut out);
        assert!(out.is_empty());
    }
}

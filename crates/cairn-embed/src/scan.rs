//! The brute-force scan behind semantic search: one i8-quantised query against every stored
//! i8 vector. Memory-bound at ~40 MB per 100k vectors; the AVX2 build (chosen at run time)
//! does the widening multiply-adds 16 lanes at a time, about twice the portable build.

/// Dot products of `query` with each `query.len()`-long row of `codes`, appended to `out`.
pub fn dot_i8_rows(query: &[i8], codes: &[i8], out: &mut Vec<i32>) {
    if query.is_empty() {
        return;
    }
    out.reserve(codes.len() / query.len());
    dispatch(query, codes, out);
}

/// The crate's second `unsafe` call: the AVX2 build of the same safe loop, called only when
/// the CPU has AVX2 (checked just before), which is all `target_feature` requires.
#[allow(unsafe_code)]
fn dispatch(query: &[i8], codes: &[i8], out: &mut Vec<i32>) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present (checked above); the function is otherwise safe code.
        return unsafe { rows_avx2(query, codes, out) };
    }
    rows(query, codes, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn rows_avx2(query: &[i8], codes: &[i8], out: &mut Vec<i32>) {
    rows(query, codes, out);
}

#[inline(always)]
fn rows(query: &[i8], codes: &[i8], out: &mut Vec<i32>) {
    for row in codes.chunks_exact(query.len()) {
        // A plain widening reduction: LLVM emits (v)pmaddwd for it.
        out.push(query.iter().zip(row).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum());
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
        let mut portable = Vec::new();
        rows(&query, &codes, &mut portable);
        assert_eq!(portable, naive);
    }

    #[test]
    fn an_empty_query_scores_nothing() {
        let mut out = Vec::new();
        dot_i8_rows(&[], &[1, 2, 3], &mut out);
        assert!(out.is_empty());
    }
}

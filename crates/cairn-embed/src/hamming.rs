//! The first pass of semantic search over binary codes: one bit per dimension, the Hamming
//! distance of a query's code to every stored code. 48 bytes a vector at 384 dimensions,
//! an eighth of the i8 codes, so a million vectors scan in a few milliseconds on one core;
//! the nearest few hundred are then scored exactly by the caller.

/// Hamming distances of `query` (`query.len()` words per code) to each code of `codes`,
/// written to `out` (one per code; `out.len()` must be `codes.len() / query.len()`).
pub fn hamming_rows(query: &[u64], codes: &[u64], out: &mut [u16]) {
    if query.is_empty() {
        return;
    }
    assert_eq!(out.len(), codes.len() / query.len(), "one distance per code");
    dispatch(query, codes, out);
}

/// The crate's `unsafe` call of the Hamming scan: the same safe loop built with the
/// `popcnt` instruction, called only when the CPU has it (checked just before), which is
/// all `target_feature` requires. Without it LLVM counts bits with a dozen shifts and masks.
#[allow(unsafe_code)]
fn dispatch(query: &[u64], codes: &[u64], out: &mut [u16]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: POPCNT is present (checked above); the function is otherwise safe code.
        return unsafe { rows_popcnt(query, codes, out) };
    }
    rows(query, codes, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn rows_popcnt(query: &[u64], codes: &[u64], out: &mut [u16]) {
    rows(query, codes, out);
}

#[inline(always)]
fn rows(query: &[u64], codes: &[u64], out: &mut [u16]) {
    for (code, out) in codes.chunks_exact(query.len()).zip(out) {
        // At most 64 × words bits differ: a u16 holds 1,023 words (65,472 dimensions).
        *out = query.iter().zip(code).map(|(&q, &c)| (q ^ c).count_ones() as u16).sum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_bits_that_differ() {
        let query = [0u64, u64::MAX];
        let codes = [0, u64::MAX, u64::MAX, 0, 0b1011, u64::MAX];
        let mut out = vec![0; 3];
        hamming_rows(&query, &codes, &mut out);
        assert_eq!(out, vec![0, 128, 3]);
        let mut portable = vec![0; 3];
        rows(&query, &codes, &mut portable);
        assert_eq!(portable, out);
    }

    #[test]
    fn an_empty_query_scores_nothing() {
        let mut out: Vec<u16> = Vec::new();
        hamming_rows(&[], &[1, 2, 3], &mut out);
        assert!(out.is_empty());
    }
}

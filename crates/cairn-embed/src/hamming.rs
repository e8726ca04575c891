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

/// The crate's `unsafe` calls of the Hamming scan: the AVX-512 kernel, or the same safe loop
/// built with the `popcnt` instruction, each called only when the CPU has its features
/// (checked just before), which is all `target_feature` requires. Without `popcnt` LLVM
/// counts bits with a dozen shifts and masks.
#[allow(unsafe_code)]
fn dispatch(query: &[u64], codes: &[u64], out: &mut [u16]) {
    #[cfg(target_arch = "x86_64")]
    if query.len() <= 8
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512vpopcntdq")
    {
        // SAFETY: AVX-512F and VPOPCNTDQ are present (checked above); the kernel's own
        // `unsafe` is its loads, each within one code.
        return unsafe { rows_avx512(query, codes, out) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: POPCNT is present (checked above); the function is otherwise safe code.
        return unsafe { rows_popcnt(query, codes, out) };
    }
    rows_by_width(query, codes, out);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn rows_popcnt(query: &[u64], codes: &[u64], out: &mut [u16]) {
    rows_by_width(query, codes, out);
}

/// A code of up to 8 words (512 dimensions: every model cairn ships) in one 512-bit register,
/// the words past it masked off (read as 0 in both codes, so they add nothing): one load,
/// XOR, per-word population count and sum a code, where the `popcnt` loop takes a scalar
/// `popcnt` and add a word. The crate's fifth audited `unsafe`: the masked loads.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vpopcntdq")]
#[allow(unsafe_code)]
fn rows_avx512(query: &[u64], codes: &[u64], out: &mut [u16]) {
    use std::arch::x86_64::{
        __mmask8, _mm512_maskz_loadu_epi64, _mm512_popcnt_epi64, _mm512_reduce_add_epi64, _mm512_xor_si512,
    };
    let words = query.len();
    debug_assert!((1..=8).contains(&words));
    let mask: __mmask8 = (0xffu16 >> (8 - words)) as u8;
    // SAFETY: the mask enables the first `words` lanes only, and `query` has that many; a
    // masked-off lane is not read.
    let q = unsafe { _mm512_maskz_loadu_epi64(mask, query.as_ptr().cast()) };
    for (code, out) in codes.chunks_exact(words).zip(out) {
        // SAFETY: as above, `code` is `words` long.
        let c = unsafe { _mm512_maskz_loadu_epi64(mask, code.as_ptr().cast()) };
        // At most 512 bits differ: the sum fits a u16.
        *out = _mm512_reduce_add_epi64(_mm512_popcnt_epi64(_mm512_xor_si512(q, c))) as u16;
    }
}

/// [`rows`] with the code's width known at compile time for the common widths (384 and 768
/// dimensions), so that a code's words are summed unrolled.
#[inline(always)]
fn rows_by_width(query: &[u64], codes: &[u64], out: &mut [u16]) {
    match query.len() {
        6 => rows_of::<6>(query, codes, out),
        12 => rows_of::<12>(query, codes, out),
        _ => rows(query, codes, out),
    }
}

#[inline(always)]
fn rows_of<const W: usize>(query: &[u64], codes: &[u64], out: &mut [u16]) {
    let query: &[u64; W] = query.try_into().expect("W words");
    for (code, out) in codes.chunks_exact(W).zip(out) {
        let code: &[u64; W] = code.try_into().expect("W words");
        let mut bits = 0;
        for w in 0..W {
            bits += (query[w] ^ code[w]).count_ones();
        }
        *out = bits as u16;
    }
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

    /// Every build of the scan this CPU can run, at every width from 1 to 13 words (the
    /// AVX-512 kernel's masks, the unrolled widths 6 and 12, the plain loop), against a
    /// naive count.
    #[test]
    fn every_build_counts_the_same_at_every_width() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for words in 1..=13 {
            let n = 37;
            let query: Vec<u64> = (0..words).map(|_| next()).collect();
            let mut codes: Vec<u64> = (0..words * n).map(|_| next()).collect();
            codes[..words].copy_from_slice(&query); // distance 0
            codes[words..2 * words].iter_mut().zip(&query).for_each(|(c, q)| *c = !q); // all bits
            let naive: Vec<u16> = codes
                .chunks_exact(words)
                .map(|c| c.iter().zip(&query).map(|(a, b)| (a ^ b).count_ones() as u16).sum())
                .collect();
            assert_eq!(naive[1], 64 * words as u16);
            let mut out = vec![0; n];
            hamming_rows(&query, &codes, &mut out);
            assert_eq!(out, naive, "dispatched, {words} words");
            out.fill(0);
            rows_by_width(&query, &codes, &mut out);
            assert_eq!(out, naive, "by width, {words} words");
            #[cfg(target_arch = "x86_64")]
            if words <= 8
                && std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx512vpopcntdq")
            {
                out.fill(0);
                #[allow(unsafe_code)]
                // SAFETY: the CPU has AVX-512F and VPOPCNTDQ, checked just above.
                unsafe {
                    rows_avx512(&query, &codes, &mut out);
                }
                assert_eq!(out, naive, "avx512, {words} words");
            }
        }
    }

    #[test]
    fn an_empty_query_scores_nothing() {
        let mut out: Vec<u16> = Vec::new();
        hamming_rows(&[], &[1, 2, 3], &mut out);
        assert!(out.is_empty());
    }
}

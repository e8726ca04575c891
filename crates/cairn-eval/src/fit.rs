//! Fitting hybrid search's re-ranking model (`cairn_core::search::rerank`): a logistic
//! regression over the features of each question's fused pool, labelled by whether the
//! candidate is an expected memory. The core only applies the fitted constants; the training
//! lives here, with the evaluation that produces its data.

/// L2 penalty the weights are fitted with (on the weights, not the intercept).
pub const L2: f64 = 3.0;

/// Fit a logistic regression on labelled candidates: minimises
/// `l2/2 · |w|² + Σ cᵢ · logloss(yᵢ, σ(b + w·xᵢ))`, where each class weighs as much in total
/// as the other (few candidates are relevant). Newton's method on a few dozen unknowns
/// converges in a handful of steps. Returns the weights and the intercept.
pub fn fit<const N: usize>(rows: &[([f64; N], bool)], l2: f64) -> ([f64; N], f64) {
    let unknowns = N + 1; // the weights, then the intercept
    let positives = rows.iter().filter(|r| r.1).count().max(1) as f64;
    let negatives = rows.iter().filter(|r| !r.1).count().max(1) as f64;
    let total = rows.len() as f64;
    let class_weight = |y: bool| if y { total / (2.0 * positives) } else { total / (2.0 * negatives) };
    let mut beta = vec![0.0f64; unknowns];
    for _ in 0..50 {
        let mut gradient = vec![0.0f64; unknowns];
        let mut hessian = vec![vec![0.0f64; unknowns]; unknowns];
        for i in 0..N {
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
            for i in 0..unknowns {
                gradient[i] += residual * x[i];
                for j in 0..unknowns {
                    hessian[i][j] += curvature * x[i] * x[j];
                }
            }
        }
        let step = solve(hessian, gradient);
        let mut largest = 0.0f64;
        for (b, s) in beta.iter_mut().zip(&step) {
            *b -= s;
            largest = largest.max(s.abs());
        }
        if largest < 1e-9 {
            break;
        }
    }
    let mut weights = [0.0; N];
    weights.copy_from_slice(&beta[..N]);
    (weights, beta[N])
}

/// The logistic function (the core's `rerank::Fitted::relevance` applies the same one).
fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// Solve `a · x = b` by Gaussian elimination with partial pivoting (a is positive definite
/// here, so never singular).
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs())).unwrap_or(col);
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (pivot_row, pivot_b) = (a[col].clone(), b[col]);
        for row in col + 1..n {
            let factor = a[row][col] / pivot_row[col];
            for (x, p) in a[row][col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= factor * p;
            }
            b[row] -= factor * pivot_b;
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let tail: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - tail) / a[row][row];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::search::rerank::{FEATURES, Features};

    fn dot(a: &Features, b: &Features) -> f64 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

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
}

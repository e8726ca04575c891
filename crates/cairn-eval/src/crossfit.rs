//! Cross-fitting: the re-ranking fitted on one data set and scored on the other.
//!
//! A re-ranking fitted and tested on halves of the same set learns that set's habits (how
//! long its memories are, whether they sit in sessions) as much as what makes a memory
//! relevant. The figure that predicts a user's results is the one on data the fit never saw
//! *of another kind*: fitted on the coding set's dev half and scored on LoCoMo, and back.
//!
//! Every question's hybrid pool (the fusion's top [`rerank::POOL`] with its features) is
//! gathered once per set; each recipe (a feature subset and an L2 penalty) is fitted on the
//! dev questions of a source and the pools of every split are re-ordered offline by the
//! fitted model, exactly as `HybridEngine` orders them (the sigmoid is monotonic; ties by
//! the newer id). The recipe to ship is chosen on dev figures only (cross-set, dev → dev),
//! so the test splits and the held-out coding set stay untouched by every choice.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use cairn_core::search::rerank::{self, FEATURES, Features, Linear, NAMES, SECOND_FEATURES, SECOND_NAMES};
use serde::Serialize;

use crate::fit;

/// One question's pool, labelled.
pub struct Pool {
    pub set: String,
    pub split: String,
    pub category: String,
    /// How many memories answer it (one outside the pool counts as missed).
    pub expected: usize,
    /// Candidates in fused order.
    pub candidates: Vec<Candidate>,
}

/// A candidate of a pool: its id, what the re-ranking reads of it, and whether it is expected.
pub struct Candidate {
    pub id: i64,
    pub read: rerank::Candidate,
    pub relevant: bool,
}

impl std::borrow::Borrow<rerank::Candidate> for Candidate {
    fn borrow(&self) -> &rerank::Candidate {
        &self.read
    }
}

/// A way to fit the re-ranking: which features it may use, and how hard the weights are
/// pulled to zero.
#[derive(Debug, Clone, Copy)]
pub struct Recipe {
    pub name: &'static str,
    pub features: &'static [&'static str],
    pub l2: f64,
    /// A second pass over the first one's scores of the pool ([`rerank::SECOND_NAMES`]), as
    /// the engine ships, or the first pass alone.
    pub two_pass: bool,
}

/// The recipe every model ships: all the features, L2 3, two passes.
pub const SHIPPED: Recipe =
    Recipe { name: "all15 L2=3 two-pass (shipped recipe)", features: &ALL, l2: fit::L2, two_pass: true };

/// A fitted re-ranking: the first pass, and the second when the recipe has one.
#[derive(Debug, Clone, Copy)]
pub struct Fit {
    pub first: Linear<FEATURES>,
    pub second: Option<Linear<SECOND_FEATURES>>,
}

impl Fit {
    /// The fitted re-ranking as the engine ships it.
    pub fn of(fitted: &rerank::Fitted) -> Fit {
        Fit { first: fitted.first, second: Some(fitted.second) }
    }

    /// The score of each candidate of a pool, in pool order (higher ranks first).
    fn scores(&self, pool: &[Candidate]) -> Vec<f64> {
        match &self.second {
            None => pool.iter().map(|c| self.first.score(&c.read.features)).collect(),
            Some(second) => rerank::two_pass_scores(&self.first, second, pool),
        }
    }
}

const ALL: [&str; FEATURES] = NAMES;
/// All but `log_length` and `in_session`: features that say which data set a memory comes
/// from rather than whether it answers (LoCoMo's turns are all short and all in a session, the
/// coding set's memories long and mostly outside one); a fit on one set turns them into a
/// prior the other set does not share.
const NO_SET_IDENTITY: [&str; 13] = [
    "fused_place",
    "lexical_place",
    "semantic_place",
    "bm25",
    "cosine",
    "cosine_prev",
    "cosine_next",
    "bm25_prev",
    "bm25_next",
    "title_match",
    "coverage",
    "bm25_coverage",
    "time_answer",
];
const CORE: [&str; 8] =
    ["fused_place", "lexical_place", "semantic_place", "bm25", "cosine", "title_match", "coverage", "bm25_coverage"];
const PLACES: [&str; 5] = ["fused_place", "lexical_place", "semantic_place", "bm25", "cosine"];

/// The recipes compared, fixed before any figure was seen.
pub const RECIPES: &[Recipe] = &[
    SHIPPED,
    Recipe { name: "all15 L2=3 one pass", features: &ALL, l2: 3.0, two_pass: false },
    Recipe { name: "all15 L2=30 one pass", features: &ALL, l2: 30.0, two_pass: false },
    Recipe { name: "no-set-identity13 L2=3 two-pass", features: &NO_SET_IDENTITY, l2: 3.0, two_pass: true },
    Recipe { name: "no-set-identity13 L2=3 one pass", features: &NO_SET_IDENTITY, l2: 3.0, two_pass: false },
    Recipe { name: "no-set-identity13 L2=30 one pass", features: &NO_SET_IDENTITY, l2: 30.0, two_pass: false },
    Recipe { name: "core8 L2=3 one pass", features: &CORE, l2: 3.0, two_pass: false },
    Recipe { name: "places5 L2=3 one pass", features: &PLACES, l2: 3.0, two_pass: false },
];

impl Recipe {
    fn mask(&self) -> [bool; FEATURES] {
        let mut mask = [false; FEATURES];
        for (i, name) in NAMES.iter().enumerate() {
            mask[i] = self.features.contains(name);
        }
        mask
    }

    /// Fit on the dev questions of `sources` (features outside the recipe zeroed, so their
    /// weights stay 0 under the L2 penalty): the first pass, then the second on the first's
    /// scores.
    pub fn fit(&self, pools: &[Pool], sources: &[&str]) -> Option<Fit> {
        let mask = self.mask();
        let chosen: Vec<(Vec<rerank::Candidate>, Vec<bool>)> = pools
            .iter()
            .filter(|p| p.split == "dev" && sources.contains(&p.set.as_str()))
            .map(|p| {
                let read = p.candidates.iter().map(|c| masked(&c.read, &mask)).collect();
                (read, p.candidates.iter().map(|c| c.relevant).collect())
            })
            .collect();
        let rows: Vec<(Features, bool)> = chosen
            .iter()
            .flat_map(|(read, labels)| read.iter().map(|c| c.features).zip(labels.iter().copied()))
            .collect();
        if rows.is_empty() {
            return None;
        }
        let (weights, bias) = fit::fit(&rows, self.l2);
        let first = Linear { weights: keep(weights, &mask), bias };
        if !self.two_pass {
            return Some(Fit { first, second: None });
        }
        let rows: Vec<([f64; SECOND_FEATURES], bool)> = chosen
            .iter()
            .flat_map(|(read, labels)| {
                let scores: Vec<f64> = read.iter().map(|c| first.score(&c.features)).collect();
                rerank::second_features(read, &scores).into_iter().zip(labels.iter().copied())
            })
            .collect();
        let (weights, bias) = fit::fit(&rows, self.l2);
        let mut second_mask = [true; SECOND_FEATURES];
        second_mask[..FEATURES].copy_from_slice(&mask);
        Some(Fit { first, second: Some(Linear { weights: keep(weights, &second_mask), bias }) })
    }
}

/// The candidate with the features outside the recipe zeroed.
fn masked(read: &rerank::Candidate, mask: &[bool; FEATURES]) -> rerank::Candidate {
    let mut out = read.clone();
    for (x, keep) in out.features.iter_mut().zip(mask) {
        if !keep {
            *x = 0.0;
        }
    }
    out
}

/// The weights with those outside the recipe set to 0 (exactly, not just near it).
fn keep<const N: usize>(mut weights: [f64; N], mask: &[bool; N]) -> [f64; N] {
    for (w, keep) in weights.iter_mut().zip(mask) {
        if !keep {
            *w = 0.0;
        }
    }
    weights
}

/// A way to order a pool: the fusion's own order, or a linear model's.
#[derive(Clone, Copy)]
pub enum Order<'a> {
    Fusion,
    Model(&'a Fit),
}

/// Recall@1/5/10 of the questions of one (set, split[, category]) group under `order`.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Recall {
    pub questions: usize,
    pub r1: f64,
    pub r5: f64,
    pub r10: f64,
}

pub fn recall(pools: &[&Pool], order: Order<'_>) -> Recall {
    let mut sums = [0.0; 3];
    for pool in pools {
        let scores: Vec<f64> = match order {
            Order::Fusion => (0..pool.candidates.len()).map(|place| -(place as f64)).collect(),
            Order::Model(fit) => fit.scores(&pool.candidates),
        };
        let mut ranked: Vec<(f64, i64, bool)> =
            pool.candidates.iter().zip(scores).map(|(c, score)| (score, c.id, c.relevant)).collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
        for (slot, k) in [1usize, 5, 10].into_iter().enumerate() {
            let found = ranked.iter().take(k).filter(|c| c.2).count();
            sums[slot] += found as f64 / pool.expected.max(1) as f64;
        }
    }
    let n = pools.len().max(1) as f64;
    let round = |x: f64| (x / n * 1000.0).round() / 1000.0;
    Recall { questions: pools.len(), r1: round(sums[0]), r5: round(sums[1]), r10: round(sums[2]) }
}

/// The groups a report shows, as (label, set, split, category or "" for all).
fn groups(pools: &[Pool]) -> Vec<(String, String, String, String)> {
    let mut out = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for p in pools {
        if seen.insert((p.set.clone(), p.split.clone())) {
            out.push((format!("{} {}", p.set, p.split), p.set.clone(), p.split.clone(), String::new()));
        }
    }
    for p in pools {
        if p.set != "locomo"
            && p.split == "test"
            && ["paraphrase", "spanish"].contains(&p.category.as_str())
            && seen.insert((p.set.clone(), format!("{}:{}", p.split, p.category)))
        {
            out.push((
                format!("{} {} {}", p.set, p.split, p.category),
                p.set.clone(),
                p.split.clone(),
                p.category.clone(),
            ));
        }
    }
    out
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub order: String,
    /// Group label → recall.
    pub recall: BTreeMap<String, Recall>,
    /// Mean of the cross-set dev figures (coding-fitted on LoCoMo dev R@10, LoCoMo-fitted on
    /// coding dev R@5): what chooses the recipe.
    pub cross_dev: Option<f64>,
}

fn score(pools: &[Pool], order: Order<'_>) -> BTreeMap<String, Recall> {
    groups(pools)
        .into_iter()
        .map(|(label, set, split, category)| {
            let chosen: Vec<&Pool> = pools
                .iter()
                .filter(|p| p.set == set && p.split == split && (category.is_empty() || p.category == category))
                .collect();
            (label, recall(&chosen, order))
        })
        .collect()
}

/// The whole comparison: the fusion, the shipped model, and every recipe fitted on each
/// set's dev half and on both.
pub fn compare(pools: &[Pool], model_id: &str) -> (Vec<Row>, Option<(Recipe, Fit)>) {
    let mut rows =
        vec![Row { order: "fusion (no re-ranking)".into(), recall: score(pools, Order::Fusion), cross_dev: None }];
    if let Some(shipped) = rerank::fitted_for(model_id) {
        rows.push(Row {
            order: "shipped constants".into(),
            recall: score(pools, Order::Model(&Fit::of(shipped))),
            cross_dev: None,
        });
    }
    let mut best: Option<(f64, Recipe)> = None;
    for recipe in RECIPES {
        let from_coding = recipe.fit(pools, &["coding"]);
        let from_locomo = recipe.fit(pools, &["locomo"]);
        let cross_dev = match (&from_coding, &from_locomo) {
            (Some(from_coding), Some(from_locomo)) => {
                let on = |set: &str| pools.iter().filter(|p| p.set == set && p.split == "dev").collect::<Vec<_>>();
                let locomo = recall(&on("locomo"), Order::Model(from_coding)).r10;
                let coding = recall(&on("coding"), Order::Model(from_locomo)).r5;
                Some((f64::midpoint(locomo, coding) * 1000.0).round() / 1000.0)
            }
            _ => None,
        };
        if let Some(c) = cross_dev
            && best.is_none_or(|(b, _)| c > b)
        {
            best = Some((c, *recipe));
        }
        for (source, fitted) in [
            ("coding dev", from_coding),
            ("locomo dev", from_locomo),
            ("both dev", recipe.fit(pools, &["coding", "locomo"])),
        ] {
            let Some(fit) = fitted else { continue };
            rows.push(Row {
                order: format!("{} fitted on {source}", recipe.name),
                recall: score(pools, Order::Model(&fit)),
                cross_dev: (source == "both dev").then_some(cross_dev).flatten(),
            });
        }
    }
    let chosen = best.and_then(|(_, recipe)| recipe.fit(pools, &["coding", "locomo"]).map(|fit| (recipe, fit)));
    (rows, chosen)
}

/// The comparison as a table for people: R@5 for coding groups, R@10 for LoCoMo's.
pub fn render(rows: &[Row]) -> String {
    let labels: Vec<String> = rows.first().map(|r| r.recall.keys().cloned().collect()).unwrap_or_default();
    let mut text = String::from("cross-fit (coding groups R@5, locomo groups R@10; cross_dev chooses the recipe)\n");
    let _ = write!(text, "| order | cross_dev |");
    for l in &labels {
        let _ = write!(text, " {l} |");
    }
    let _ = write!(text, "\n|---|---|");
    for _ in &labels {
        text.push_str("---|");
    }
    text.push('\n');
    for row in rows {
        let _ = write!(text, "| {} | {} |", row.order, row.cross_dev.map_or_else(String::new, |c| format!("{c:.3}")));
        for l in &labels {
            let r = row.recall.get(l).copied().unwrap_or_default();
            let v = if l.starts_with("locomo") { r.r10 } else { r.r5 };
            let _ = write!(text, " {v:.3} |");
        }
        text.push('\n');
    }
    text
}

/// The chosen recipe's weights fitted on both dev halves, as the `first` and `second` fields
/// of a `rerank.rs` constant.
pub fn render_constants(recipe: &Recipe, fit: &Fit) -> String {
    format!("// chosen recipe: {} (fitted on both dev halves)\n{}", recipe.name, render_fit(fit))
}

/// A fit as the fields of a `rerank::Fitted` constant (a one-pass fit has a neutral second
/// pass: its first-pass score, unchanged).
pub fn render_fit(fit: &Fit) -> String {
    let second = fit.second.unwrap_or_else(|| {
        let mut weights = [0.0; SECOND_FEATURES];
        weights[..FEATURES].copy_from_slice(&fit.first.weights);
        Linear { weights, bias: fit.first.bias }
    });
    let names: Vec<&str> = NAMES.iter().chain(&SECOND_NAMES).copied().collect();
    let mut out = String::new();
    for (pass, weights, bias) in
        [("first", &fit.first.weights[..], fit.first.bias), ("second", &second.weights[..], second.bias)]
    {
        let _ = writeln!(out, "    {pass}: Linear {{\n        weights: [");
        for (name, w) in names.iter().zip(weights) {
            let _ = writeln!(out, "            {w:.4}, // {name}");
        }
        let _ = writeln!(out, "        ],\n        bias: {bias:.4},\n    }},");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recipe_without_set_identity_is_every_feature_but_the_two_that_tell_the_set() {
        let expected: Vec<&str> =
            NAMES.iter().copied().filter(|name| !["log_length", "in_session"].contains(name)).collect();
        assert_eq!(NO_SET_IDENTITY.to_vec(), expected);
    }

    fn pool(expected_at: &[usize], size: usize) -> Pool {
        Pool {
            set: "coding".into(),
            split: "dev".into(),
            category: "natural".into(),
            expected: expected_at.len(),
            candidates: (0..size)
                .map(|place| {
                    let mut features = [0.0; FEATURES];
                    features[0] = place as f64; // a feature that grows down the fused order
                    let read = rerank::Candidate { features, near: Vec::new() };
                    Candidate { id: place as i64, read, relevant: expected_at.contains(&place) }
                })
                .collect(),
        }
    }

    #[test]
    fn the_fusion_order_is_the_pools_order() {
        let p = pool(&[0, 7], 20);
        let r = recall(&[&p], Order::Fusion);
        assert_eq!((r.r1, r.r5, r.r10), (0.5, 0.5, 1.0));
    }

    #[test]
    fn a_model_reorders_the_pool_by_its_score() {
        let p = pool(&[19], 20);
        let mut weights = [0.0; FEATURES];
        weights[0] = 1.0; // the last place scores highest
        let fit = Fit { first: Linear { weights, bias: 0.0 }, second: None };
        let r = recall(&[&p], Order::Model(&fit));
        assert_eq!(r.r1, 1.0);
        assert_eq!(recall(&[&p], Order::Fusion).r10, 0.0);
    }

    #[test]
    fn an_expected_memory_outside_the_pool_counts_as_missed() {
        let mut p = pool(&[0], 20);
        p.expected = 2;
        assert_eq!(recall(&[&p], Order::Fusion).r10, 0.5);
    }

    #[test]
    fn features_outside_a_recipe_get_no_weight() {
        let pools: Vec<Pool> = (0..30).map(|i| pool(&[i % 20], 20)).collect();
        for two_pass in [false, true] {
            let recipe = Recipe { name: "t", features: &["lexical_place"], l2: 1.0, two_pass };
            let fit = recipe.fit(&pools, &["coding"]).expect("rows");
            assert_eq!(fit.first.weights[0], 0.0);
            assert_eq!(fit.second.is_some(), two_pass);
            if let Some(second) = fit.second {
                assert_eq!(second.weights[0], 0.0, "{second:?}");
                assert_eq!(
                    second.weights[FEATURES..].len(),
                    SECOND_NAMES.len(),
                    "the second pass's own features are fitted"
                );
            }
            assert!(recipe.fit(&pools, &["locomo"]).is_none());
        }
    }
}

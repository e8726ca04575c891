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

use cairn_core::search::rerank::{self, FEATURES, Features, NAMES};
use serde::Serialize;

use crate::fit;

/// One question's pool, labelled.
pub struct Pool {
    pub set: String,
    pub split: String,
    pub category: String,
    /// How many memories answer it (one outside the pool counts as missed).
    pub expected: usize,
    /// Candidates in fused order: id, features, whether it is expected.
    pub candidates: Vec<(i64, Features, bool)>,
}

/// A way to fit the re-ranking: which features it may use, and how hard the weights are
/// pulled to zero.
#[derive(Debug, Clone, Copy)]
pub struct Recipe {
    pub name: &'static str,
    pub features: &'static [&'static str],
    pub l2: f64,
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
    Recipe { name: "all15 L2=3 (shipped recipe)", features: &ALL, l2: 3.0 },
    Recipe { name: "all15 L2=30", features: &ALL, l2: 30.0 },
    Recipe { name: "no-set-identity13 L2=3", features: &NO_SET_IDENTITY, l2: 3.0 },
    Recipe { name: "no-set-identity13 L2=30", features: &NO_SET_IDENTITY, l2: 30.0 },
    Recipe { name: "core8 L2=3", features: &CORE, l2: 3.0 },
    Recipe { name: "places5 L2=3", features: &PLACES, l2: 3.0 },
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
    /// weights stay 0 under the L2 penalty).
    pub fn fit(&self, pools: &[Pool], sources: &[&str]) -> Option<(Features, f64)> {
        let mask = self.mask();
        let rows: Vec<(Features, bool)> = pools
            .iter()
            .filter(|p| p.split == "dev" && sources.contains(&p.set.as_str()))
            .flat_map(|p| p.candidates.iter().map(move |(_, f, y)| (masked(f, &mask), *y)))
            .collect();
        if rows.is_empty() {
            return None;
        }
        let (mut weights, bias) = fit::fit(&rows, self.l2);
        for (w, keep) in weights.iter_mut().zip(mask) {
            if !keep {
                *w = 0.0;
            }
        }
        Some((weights, bias))
    }
}

fn masked(features: &Features, mask: &[bool; FEATURES]) -> Features {
    let mut out = *features;
    for (x, keep) in out.iter_mut().zip(mask) {
        if !keep {
            *x = 0.0;
        }
    }
    out
}

/// A way to order a pool: the fusion's own order, or a linear model's.
#[derive(Clone, Copy)]
pub enum Order<'a> {
    Fusion,
    Model(&'a Features, f64),
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
        let mut ranked: Vec<(f64, i64, bool)> = pool
            .candidates
            .iter()
            .enumerate()
            .map(|(place, (id, f, y))| match order {
                Order::Fusion => (-(place as f64), *id, *y),
                Order::Model(w, b) => (b + w.iter().zip(f).map(|(a, x)| a * x).sum::<f64>(), *id, *y),
            })
            .collect();
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
pub fn compare(pools: &[Pool], model_id: &str) -> (Vec<Row>, Option<(Recipe, Features, f64)>) {
    let mut rows =
        vec![Row { order: "fusion (no re-ranking)".into(), recall: score(pools, Order::Fusion), cross_dev: None }];
    if let Some(shipped) = rerank::fitted_for(model_id) {
        rows.push(Row {
            order: "shipped constants".into(),
            recall: score(pools, Order::Model(&shipped.weights, shipped.bias)),
            cross_dev: None,
        });
    }
    let mut best: Option<(f64, Recipe)> = None;
    for recipe in RECIPES {
        let from_coding = recipe.fit(pools, &["coding"]);
        let from_locomo = recipe.fit(pools, &["locomo"]);
        let cross_dev = match (&from_coding, &from_locomo) {
            (Some((wc, bc)), Some((wl, bl))) => {
                let on = |set: &str| pools.iter().filter(|p| p.set == set && p.split == "dev").collect::<Vec<_>>();
                let locomo = recall(&on("locomo"), Order::Model(wc, *bc)).r10;
                let coding = recall(&on("coding"), Order::Model(wl, *bl)).r5;
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
            let Some((w, b)) = fitted else { continue };
            rows.push(Row {
                order: format!("{} fitted on {source}", recipe.name),
                recall: score(pools, Order::Model(&w, b)),
                cross_dev: (source == "both dev").then_some(cross_dev).flatten(),
            });
        }
    }
    let chosen = best.and_then(|(_, recipe)| recipe.fit(pools, &["coding", "locomo"]).map(|(w, b)| (recipe, w, b)));
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

/// The chosen recipe's weights fitted on both dev halves, as `rerank.rs` constants.
pub fn render_constants(recipe: &Recipe, weights: &Features, bias: f64) -> String {
    let mut out = format!("// chosen recipe: {} (fitted on both dev halves)\n    weights: [\n", recipe.name);
    for (name, w) in NAMES.iter().zip(weights) {
        let _ = writeln!(out, "        {w:.4}, // {name}");
    }
    let _ = writeln!(out, "    ],\n    bias: {bias:.4},");
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
                    let mut f = [0.0; FEATURES];
                    f[0] = place as f64; // a feature that grows down the fused order
                    (place as i64, f, expected_at.contains(&place))
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
        let mut w = [0.0; FEATURES];
        w[0] = 1.0; // the last place scores highest
        let r = recall(&[&p], Order::Model(&w, 0.0));
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
        let recipe = Recipe { name: "t", features: &["lexical_place"], l2: 1.0 };
        let (w, _) = recipe.fit(&pools, &["coding"]).expect("rows");
        assert_eq!(w[0], 0.0);
        assert!(recipe.fit(&pools, &["locomo"]).is_none());
    }
}

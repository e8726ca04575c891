//! How much two memories say the same in words: what relation candidates are scored by, and
//! what tells near-duplicate hits apart when they have no vectors.

use std::collections::HashSet;

use super::query;
use crate::model::Observation;

/// How much two memories say the same: Dice coefficient of their word sets, title 60 %,
/// content 40 %.
pub fn similarity(a: &Observation, b: &Observation) -> f64 {
    0.6 * dice(&stems(&a.title), &stems(&b.title)) + 0.4 * dice(&stems(&a.content), &stems(&b.content))
}

fn stems(text: &str) -> HashSet<String> {
    let terms = query::parse(text);
    terms
        .iter()
        .filter_map(|t| match t {
            query::Term::Word(w) | query::Term::Prefix(w) => Some(w.chars().take(6).collect::<String>()),
            query::Term::Phrase(_) => None,
        })
        .take(200)
        .collect()
}

fn dice(a: &HashSet<String>, b: &HashSet<String>) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 0.0;
    }
    2.0 * a.intersection(b).count() as f64 / (a.len() + b.len()) as f64
}

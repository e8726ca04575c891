//! Where the index's bytes go, by part, from the capacities it holds (the `index_memory`
//! bench prints it beside what a counting allocator saw). Estimates for the maps: their
//! tables' slots, not the allocator's rounding.

use std::collections::{BTreeMap, HashMap};
use std::mem::size_of;

use super::MemoryIndex;

/// A hash map's table: its buckets (a power of two at most 7/8 full) of one entry and one
/// control byte each.
fn hash_map_bytes<K, V>(map: &HashMap<K, V>) -> usize {
    let cap = map.capacity();
    if cap == 0 {
        return 0;
    }
    let buckets = (cap * 8 / 7).next_power_of_two();
    buckets * (size_of::<(K, V)>() + 1)
}

/// A B-tree's nodes, about two thirds full (11 slots a node).
fn btree_bytes<K, V>(map: &BTreeMap<K, V>) -> usize {
    map.len() * (size_of::<K>() + size_of::<V>()) * 3 / 2
}

fn strings_bytes<'a>(words: impl Iterator<Item = &'a str>) -> usize {
    words.map(str::len).sum()
}

impl MemoryIndex {
    /// Heap bytes by part, largest parts first in the order they are built.
    #[doc(hidden)]
    pub fn heap_bytes(&self) -> Vec<(&'static str, usize)> {
        vec![
            ("postings (used)", self.postings_used_bytes()),
            ("postings (slack)", self.postings_slack_bytes()),
            ("posting list headers", self.postings.capacity() * size_of::<super::PostingList>()),
            ("docs", self.docs.capacity() * size_of::<super::Doc>() + self.hot.capacity() * size_of::<super::Hot>()),
            ("slot_of", hash_map_bytes(&self.slot_of)),
            ("vocab (stems)", btree_bytes(&self.vocab) + strings_bytes(self.vocab.keys().map(|k| &**k))),
            (
                "token_terms (tokens)",
                hash_map_bytes(&self.token_terms) + strings_bytes(self.token_terms.keys().map(|k| &**k)),
            ),
            ("names, project stats", hash_map_bytes(&self.names) + hash_map_bytes(&self.project_stats)),
        ]
    }

    fn postings_used_bytes(&self) -> usize {
        self.postings.iter().map(super::PostingList::used_bytes).sum()
    }

    fn postings_slack_bytes(&self) -> usize {
        self.postings.iter().map(|l| l.capacity_bytes() - l.used_bytes()).sum()
    }
}

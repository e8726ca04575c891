//! The two lanes memories are embedded in, and what keeps them apart.
//!
//! The backfill lane (every memory without a vector, newest first: a new model over 100k
//! memories, an import, a first install) runs at the lowest priority, so hours of it never
//! slow a save or a search. But a thread lowered that far gets about 1.5 % of a core beside
//! two busy ones, and Linux does not let an unprivileged thread raise itself back: a memory an
//! agent just saved waited minutes for its vector behind a build, and semantic search missed
//! it all that time. So the fresh lane, a thread that keeps its normal priority, follows the
//! change log and embeds what was just saved or revised, a few at a time and at most
//! [`FRESH_PER_MINUTE`] a minute: an import (thousands of changes at once) is left to the
//! backfill.
//!
//! Neither embeds a memory the other has claimed, and the backfill leaves alone what the fresh
//! lane has not looked at yet (changes after its mark), so a fresh memory is never taken by
//! the slow lane first. A lane reads which of its claimed memories still need a vector after
//! it claimed them, and releases them after their vectors are stored: a memory is embedded
//! once.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Memories the fresh lane embeds in one pass; more changed at once are the backfill's.
pub(crate) const FRESH_BATCH: usize = 8;
/// Memories the fresh lane embeds a minute at most: a few agents writing as they work stay
/// well under it, an import or a sync pull of hundreds goes past it to the backfill.
pub(crate) const FRESH_PER_MINUTE: usize = 60;

/// What both lanes of one model share.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    state: Mutex<State>,
    /// The stored vectors are in memory (or failed to load): the fresh lane waits for it, so
    /// a vector it stores is never missed by the load running beside it.
    loaded: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    /// Memories a lane is embedding now.
    claimed: HashSet<i64>,
    /// The change-log seq up to which the fresh lane has decided what it takes; `None` before
    /// it started (the backfill then leaves nothing aside).
    fresh_seen: Option<i64>,
}

impl Lanes {
    pub(crate) fn set_loaded(&self) {
        self.loaded.store(true, Ordering::Release);
    }

    pub(crate) fn loaded(&self) -> bool {
        self.loaded.load(Ordering::Acquire)
    }

    /// Where the fresh lane has read the change log up to.
    pub(crate) fn fresh_seen(&self) -> Option<i64> {
        self.lock().fresh_seen
    }

    /// The fresh lane claims those of `ids` not claimed, and has read the log up to `seen`
    /// (published in the same turn, so the backfill takes the rest from then on).
    pub(crate) fn claim_fresh(&self, ids: &[i64], seen: i64) -> Claim<'_> {
        let mut state = self.lock();
        state.fresh_seen = Some(seen);
        Claim { lanes: self, ids: take_unclaimed(&mut state.claimed, ids, &HashSet::new(), usize::MAX) }
    }

    /// The backfill claims up to `most` of `ids` neither claimed nor in `unseen` (changed after
    /// the fresh lane's mark as it read it: the fresh lane decides on those first).
    pub(crate) fn claim_backfill(&self, ids: &[i64], unseen: &HashSet<i64>, most: usize) -> Claim<'_> {
        let mut state = self.lock();
        Claim { lanes: self, ids: take_unclaimed(&mut state.claimed, ids, unseen, most) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn take_unclaimed(claimed: &mut HashSet<i64>, ids: &[i64], unseen: &HashSet<i64>, most: usize) -> Vec<i64> {
    let mut taken = Vec::new();
    for &id in ids {
        if taken.len() == most {
            break;
        }
        if !unseen.contains(&id) && claimed.insert(id) {
            taken.push(id);
        }
    }
    taken
}

/// Memories one lane embeds; released when dropped (after their vectors were stored, or not).
#[derive(Debug)]
pub(crate) struct Claim<'a> {
    lanes: &'a Lanes,
    ids: Vec<i64>,
}

impl Claim<'_> {
    pub(crate) fn ids(&self) -> &[i64] {
        &self.ids
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut state = self.lanes.lock();
        for id in &self.ids {
            state.claimed.remove(id);
        }
    }
}

/// How many memories the fresh lane may still embed this minute.
#[derive(Debug)]
pub(crate) struct FreshBudget {
    window_start: Instant,
    used: usize,
}

impl FreshBudget {
    const WINDOW: Duration = Duration::from_secs(60);

    pub(crate) fn new(now: Instant) -> FreshBudget {
        FreshBudget { window_start: now, used: 0 }
    }

    /// Take up to `wanted` (at most [`FRESH_BATCH`]); returns how many were granted.
    pub(crate) fn take(&mut self, now: Instant, wanted: usize) -> usize {
        if now.duration_since(self.window_start) >= Self::WINDOW {
            self.window_start = now;
            self.used = 0;
        }
        let granted = wanted.min(FRESH_BATCH).min(FRESH_PER_MINUTE - self.used);
        self.used += granted;
        granted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fresh_budget_grants_a_batch_at_a_time_and_a_minute_s_worth_at_most() {
        let start = Instant::now();
        let mut budget = FreshBudget::new(start);
        assert_eq!(budget.take(start, 3), 3);
        assert_eq!(budget.take(start, 1000), FRESH_BATCH, "an import's changes: one batch");
        let mut granted = 3 + FRESH_BATCH;
        while granted < FRESH_PER_MINUTE {
            granted += budget.take(start + Duration::from_secs(30), 1000);
        }
        assert_eq!(granted, FRESH_PER_MINUTE);
        assert_eq!(budget.take(start + Duration::from_secs(59), 1), 0, "spent for this minute");
        assert_eq!(budget.take(start + Duration::from_secs(60), 1), 1, "a new minute");
    }

    #[test]
    fn a_claimed_memory_is_not_claimed_again_until_released() {
        let lanes = Lanes::default();
        let fresh = lanes.claim_fresh(&[5, 4], 10);
        assert_eq!(lanes.fresh_seen(), Some(10));
        let unseen: HashSet<i64> = [7].into();
        let backfill = lanes.claim_backfill(&[7, 5, 4, 3, 2, 1], &unseen, 1);
        assert_eq!(backfill.ids(), [3], "5 and 4 are the fresh lane's, 7 it has not seen yet; one at most");
        drop(fresh);
        assert_eq!(lanes.claim_backfill(&[5, 4, 3], &HashSet::new(), 8).ids(), [5, 4], "3 is still claimed");
        drop(backfill);
        assert_eq!(lanes.claim_fresh(&[3], 11).ids(), [3]);
    }
}

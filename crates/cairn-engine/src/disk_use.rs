//! The daemon's background measure of where `cairn.db`'s bytes are (`Store::disk_use`'s
//! `dbstat` walk, 0.4 to 0.7 s at 100k memories with vectors), so `stats` and the dashboards
//! re-use a measure instead of walking every page on a request. It runs on the checkpointer's
//! thread: a walk every [`EVERY`] delays that turn's checkpoint, which copies the WAL at the
//! next turn.

use std::time::{Duration, Instant};

use cairn_core::store::Store;

/// How often the measure is taken again: half of `REMEASURE_AFTER` (10 minutes), so a request
/// of a running daemon always finds one young enough.
pub(crate) const EVERY: Duration = Duration::from_secs(300);

/// The first measure waits this long after the start, so a cold start's first answers do not
/// share the two cores with a walk of every page (a request before it re-uses the measure kept
/// in the data dir). A store no process has measured yet is measured at once: until then its
/// requests count `cairn.db` whole.
const FIRST_AFTER: Duration = Duration::from_secs(30);

/// When the next measure is due.
pub(crate) struct Refresh {
    due: Instant,
}

impl Refresh {
    pub(crate) fn new(store: &Store) -> Self {
        let wait = if store.has_disk_measure() { FIRST_AFTER } else { Duration::ZERO };
        Refresh { due: Instant::now() + wait }
    }

    /// Measure again when due; a failure is logged and tried again at the next period.
    pub(crate) fn when_due(&mut self, store: &Store) {
        if Instant::now() < self.due {
            return;
        }
        self.due = Instant::now() + EVERY;
        if let Err(e) = store.disk_use_remeasured() {
            tracing::debug!(error = %e, "disk use not measured");
        }
    }
}

const _: () = assert!(EVERY.as_secs() * 2 <= cairn_core::store::disk_use::REMEASURE_AFTER.as_secs());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_no_process_has_measured_is_measured_at_once_else_after_the_cold_start() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("cairn.db")).unwrap();
        assert!(Refresh::new(&store).due <= Instant::now(), "nothing measured: at once");
        store.disk_use_remeasured().unwrap();
        assert!(Refresh::new(&store).due > Instant::now() + FIRST_AFTER / 2, "measured: after the cold start");
    }
}

//! Helpers for unit tests: an in-memory store with a clock the test moves.

use std::sync::{Arc, Mutex};

use time::{Duration, OffsetDateTime};

use crate::clock::Clock;
use crate::memory::NewObservation;
use crate::store::Store;

/// A clock that stands still until told to move.
#[derive(Debug)]
pub struct ManualClock(Mutex<OffsetDateTime>);

impl ManualClock {
    /// A clock standing at `unix_seconds`.
    pub fn at(unix_seconds: i64) -> ManualClock {
        ManualClock(Mutex::new(OffsetDateTime::from_unix_timestamp(unix_seconds).unwrap()))
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self.0.lock().unwrap();
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> OffsetDateTime {
        *self.0.lock().unwrap()
    }
}

pub fn store_with_clock() -> (Store, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock(Mutex::new(OffsetDateTime::from_unix_timestamp(1_780_000_000).unwrap())));
    let mut store = Store::open_in_memory().unwrap();
    store.set_clock(clock.clone());
    (store, clock)
}

/// [`store_with_clock`] in a core's context (an in-memory history archive beside it), for tests
/// that run ops.
pub fn core_with_clock() -> (crate::Core, Arc<ManualClock>) {
    let (store, clock) = store_with_clock();
    (crate::Core::new(store), clock)
}

pub fn obs(project: &str, title: &str, content: &str) -> NewObservation {
    NewObservation {
        title: title.into(),
        content: content.into(),
        project: Some(project.into()),
        ..NewObservation::default()
    }
}

/// A test context searched through the in-memory index (`indexed`) or FTS5.
pub fn engine_store(indexed: bool) -> (crate::Core, Arc<ManualClock>) {
    let (core, clock) = core_with_clock();
    if indexed {
        let index = Arc::new(crate::index::SharedIndex::default());
        index.set(core.store.build_index().unwrap());
        return (core.with_index(index), clock);
    }
    (core, clock)
}

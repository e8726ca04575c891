//! Where one search's time went, for a profile of the hot path without a profiler: with the
//! `cairn_core::search::timing` target at debug (`RUST_LOG=cairn_core::search::timing=debug`)
//! each search logs one line of its phases in milliseconds. Off, a phase costs one branch on
//! a thread-local flag.

use std::cell::RefCell;
use std::time::{Duration, Instant};

thread_local! {
    /// The phases of the search running on this thread, when it is being timed.
    static PHASES: RefCell<Option<Vec<(&'static str, Duration)>>> = const { RefCell::new(None) };
}

/// Time this thread's search when the log wants it; `finish` ends it.
pub(crate) fn begin() -> Option<Instant> {
    if !tracing::enabled!(target: "cairn_core::search::timing", tracing::Level::DEBUG) {
        return None;
    }
    PHASES.with_borrow_mut(|phases| *phases = Some(Vec::new()));
    Some(Instant::now())
}

/// Run `f` as phase `name` of the search being timed (only run it when none is).
pub(crate) fn phase<T>(name: &'static str, f: impl FnOnce() -> T) -> T {
    if PHASES.with_borrow(Option::is_none) {
        return f();
    }
    let started = Instant::now();
    let out = f();
    record(name, started.elapsed());
    out
}

/// Add a phase measured elsewhere (the query's embedding, on a thread of its own).
pub(crate) fn record(name: &'static str, took: Duration) {
    PHASES.with_borrow_mut(|phases| {
        if let Some(phases) = phases {
            phases.push((name, took));
        }
    });
}

/// Log the phases of the search `begin` started, with its total.
pub(crate) fn finish(started: Option<Instant>, mode: &str) {
    let Some(started) = started else { return };
    let phases = PHASES.with_borrow_mut(Option::take).unwrap_or_default();
    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1000.0);
    let line: Vec<String> = phases.iter().map(|(name, took)| format!("{name}={}", ms(*took))).collect();
    tracing::debug!(target: "cairn_core::search::timing", mode, total_ms = %ms(started.elapsed()), phases = %line.join(" "), "search timing");
}

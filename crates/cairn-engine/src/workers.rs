//! The engine's background threads under one lifecycle: each is started by name, reports
//! whether it still runs (`/health` shows a dead one), and is asked to stop, then waited for,
//! when the engine stops.
//!
//! A worker's loop ends on its own signal (the writer when its queue closes, the index
//! follower and the embedder when the writer's wake-ups stop) or on [`Workers::alive`]
//! flag turning false (the checkpointer), so stopping is: close the queue, clear the flag, join.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;

/// The flag every worker loop checks; cleared when the engine stops.
#[derive(Debug, Clone)]
pub struct Alive(Arc<AtomicBool>);

impl Alive {
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// What `/health` says about one worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerState {
    pub name: &'static str,
    /// `running`, `done` (a one-off task that finished, or a loop after a stop), or `dead`
    /// (a loop that ended by itself: it panicked or could not open the store).
    pub state: &'static str,
}

struct Worker {
    name: &'static str,
    /// One-off work (the index build) ends by design; a loop ending early is a fault.
    one_off: bool,
    /// Set when its body panicked (the thread ends either way).
    panicked: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

#[derive(Default)]
pub struct Workers {
    alive: Arc<AtomicBool>,
    stopping: AtomicBool,
    threads: Mutex<Vec<Worker>>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.states()).finish()
    }
}

impl Workers {
    pub fn new() -> Self {
        Self { alive: Arc::new(AtomicBool::new(true)), ..Self::default() }
    }

    /// The flag a loop checks between two turns.
    pub fn alive(&self) -> Alive {
        Alive(Arc::clone(&self.alive))
    }

    /// Start a long-lived loop. `false` (and a log line) when the thread cannot be started.
    pub fn spawn_loop(&self, name: &'static str, body: impl FnOnce() + Send + 'static) -> bool {
        self.spawn(name, false, body)
    }

    /// Start one-off background work.
    pub fn spawn_task(&self, name: &'static str, body: impl FnOnce() + Send + 'static) -> bool {
        self.spawn(name, true, body)
    }

    fn spawn(&self, name: &'static str, one_off: bool, body: impl FnOnce() + Send + 'static) -> bool {
        let panicked = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&panicked);
        let guarded = move || {
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).is_err() {
                flag.store(true, Ordering::Release);
                tracing::error!(worker = name, "a background worker panicked");
            }
        };
        match std::thread::Builder::new().name(name.into()).spawn(guarded) {
            Ok(handle) => {
                self.lock().push(Worker { name, one_off, panicked, handle });
                true
            }
            Err(e) => {
                tracing::warn!(worker = name, error = %e, "could not start a background worker");
                false
            }
        }
    }

    pub fn states(&self) -> Vec<WorkerState> {
        let stopping = self.stopping.load(Ordering::Acquire);
        self.lock()
            .iter()
            .map(|w| {
                let state = match (w.handle.is_finished(), w.one_off || stopping) {
                    (false, _) => "running",
                    _ if w.panicked.load(Ordering::Acquire) => "dead",
                    (true, true) => "done",
                    (true, false) => "dead",
                };
                WorkerState { name: w.name, state }
            })
            .collect()
    }

    /// Whether a loop that should run has ended.
    pub fn any_dead(&self) -> bool {
        self.states().iter().any(|w| w.state == "dead")
    }

    /// Clear the flag, then wait up to `wait` for every worker. Returns the names of those
    /// still running then (left to end with the process).
    pub fn stop(&self, wait: Duration) -> Vec<&'static str> {
        self.stopping.store(true, Ordering::Release);
        self.alive.store(false, Ordering::Release);
        let deadline = Instant::now() + wait;
        let mut threads = std::mem::take(&mut *self.lock());
        while threads.iter().any(|w| !w.handle.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let (done, left): (Vec<Worker>, Vec<Worker>) = threads.drain(..).partition(|w| w.handle.is_finished());
        for worker in done {
            let _ = worker.handle.join();
        }
        left.iter().map(|w| w.name).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Worker>> {
        self.threads.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Embedding and history backfills are CPU-bound for seconds to hours: run this thread at the
/// lowest priority that still makes progress (Linux `SCHED_BATCH` at nice 19), so saves and
/// searches barely feel it. Not `SCHED_IDLE`: that gets no CPU at all while anything else wants
/// it, and with both cores busy (a build beside the agent) a freshly installed model never
/// loaded and nothing was embedded for minutes on end; at nice 19 the thread still gets about
/// 1.5 % of a core beside a busy one.
pub fn run_in_background() {
    #[cfg(target_os = "linux")]
    {
        use thread_priority::{NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy};
        let policy = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Batch);
        if let Err(e) = thread_priority::set_thread_priority_and_policy(
            thread_priority::thread_native_id(),
            ThreadPriority::Min,
            policy,
        ) {
            tracing::debug!(error = ?e, "could not lower a background thread's priority");
        }
    }
}

/// Sleep `total`, waking early when the engine stops.
pub(crate) fn sleep_while(alive: &Alive, total: Duration) {
    let step = Duration::from_millis(100);
    let mut slept = Duration::ZERO;
    while slept < total && alive.get() {
        std::thread::sleep(step);
        slept += step;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The scheduling policy and nice value of the calling thread (fields 41 and 19 of its
    /// `stat`; policy 0 is SCHED_OTHER, 3 SCHED_BATCH). The engine's embedding tests read it too.
    #[cfg(target_os = "linux")]
    pub(crate) fn policy_and_nice() -> (u32, i32) {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        // The command name (field 2) may hold spaces: count from after its closing paren.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        (fields[38].parse().unwrap(), fields[16].parse().unwrap())
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_background_thread_runs_at_the_lowest_priority_that_still_progresses() {
        // The process's own nice value (a test run under `nice -n 10` starts at 10).
        let normal = policy_and_nice();
        let (before, after) = std::thread::spawn(|| {
            let before = policy_and_nice();
            run_in_background();
            (before, policy_and_nice())
        })
        .join()
        .unwrap();
        assert_eq!((before, after), (normal, (3, 19)), "SCHED_OTHER, then SCHED_BATCH at nice 19");
        assert_eq!(normal.0, 0, "SCHED_OTHER");
        assert_eq!(policy_and_nice(), normal, "only that thread");
    }

    #[test]
    fn a_loop_that_ends_by_itself_is_dead_and_a_stopped_one_is_done() {
        let workers = Workers::new();
        let alive = workers.alive();
        workers.spawn_loop("looping", move || {
            while alive.get() {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        workers.spawn_loop("crashing", || panic!("boom"));
        workers.spawn_task("one-off", || {});
        workers.spawn_task("crashing-task", || panic!("boom"));
        let deadline = Instant::now() + Duration::from_secs(5);
        while workers.states().iter().filter(|w| w.state != "running").count() < 3 {
            assert!(Instant::now() < deadline, "{:?}", workers.states());
            std::thread::sleep(Duration::from_millis(5));
        }
        let states = workers.states();
        assert_eq!(states[0], WorkerState { name: "looping", state: "running" });
        assert_eq!(states[1], WorkerState { name: "crashing", state: "dead" });
        assert_eq!(states[2], WorkerState { name: "one-off", state: "done" });
        assert_eq!(states[3], WorkerState { name: "crashing-task", state: "dead" });
        assert!(workers.any_dead());
        assert!(workers.stop(Duration::from_secs(5)).is_empty(), "the loop heard the stop");
    }

    #[test]
    fn stop_gives_up_on_a_worker_after_the_wait() {
        let workers = Workers::new();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        workers.spawn_loop("stubborn", move || {
            let _ = rx.recv();
        });
        assert_eq!(workers.stop(Duration::from_millis(20)), vec!["stubborn"]);
        drop(tx);
    }
}

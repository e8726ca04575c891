//! The second thread of a search query's forward pass (`Embedder::embed_queries`).
//!
//! A short query is a chain of ~50 products of 50–400 µs each (e5: 12 layers × 4), with
//! attention and layer norms between them; the second core only helps if it starts on a
//! product within a few µs of it being posted. A rayon pool (used before) let its threads fall
//! asleep between two searches (a search's other work takes milliseconds), so the first
//! products of the next query were done before they woke, and its give-up rule then kept most
//! queries on one thread; after a query both pool threads spun on, beside the search on the
//! caller's thread: three runnable threads on two cores.
//!
//! Here one thread, parked between queries. A query claims it and wakes it before it
//! tokenises ([`claim`]), so it is spinning by the first product; the caller works on its own
//! thread (it is the other compute thread: at most two threads run). Each product is posted as
//! a [`Part`] (a product of `bert.rs`, or a share of the vector scan of `scan.rs`); both threads take chunks of its panels from one counter until none are left, so
//! a second thread that comes late or runs slow does less and costs nothing else. When the
//! query ends (the [`Claim`] is dropped) the thread parks at once; it also parks after
//! [`SPIN`] without work. One query at a time has it: another one meanwhile runs on its own
//! thread (the daemon's concurrent searches already use both cores).
//!
//! A second thread that took chunks and did not finish them in time (descheduled: another
//! process has the second core) is not waited for: the caller does its chunks again and
//! queries leave the thread alone for [`CONTENDED_FOR`]. (Measured with another process on the
//! second core: e5 hybrid search at 100k as fast as on one thread; docs/BENCHMARKS.md, "The
//! switch".)
//!
//! Everything the second thread reads is owned (`Arc`s in the part), so no `unsafe` is needed
//! to hand it work.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// What the second thread can be handed: owned data, done a chunk at a time.
pub(crate) trait Part: std::any::Any + Send {
    /// Do chunk `chunk` (and note that this thread did it).
    fn run(&mut self, chunk: usize);
    /// This thread panicked during `run`: the caller redoes the chunks it took.
    fn fail(&mut self);
}

/// How long the second thread spins without work before it parks: a query's products follow
/// each other within ~100 µs; this only bounds what a stalled caller costs.
const SPIN: Duration = Duration::from_millis(2);

/// How long a query waits for the second thread to finish its last chunk before it counts the
/// thread descheduled (another process has the second core). A chunk takes 10–100 µs, a
/// descheduled thread is away for a scheduler slice (milliseconds). A count of spins (4,096,
/// before) measured this wait in the CPU's `pause` latency, which differs ten-fold between
/// CPUs: on a Xeon where 4,096 pauses take 66 µs, a slow last chunk counted as contention, and
/// the pauses that follow kept most queries on one thread (e5 query 14.4 ms median, against
/// 8.3 ms with both threads).
const LAST_CHUNK_WAIT: Duration = Duration::from_micros(500);

/// The slot's states: nothing posted; a part posted, not taken yet; taken by the second
/// thread; given back done.
const EMPTY: u8 = 0;
const POSTED: u8 = 1;
const TAKEN: u8 = 2;
const DONE: u8 = 3;

struct Shared {
    /// A query holds the thread.
    claimed: AtomicBool,
    /// The thread should spin: a query is under way.
    hot: AtomicBool,
    state: AtomicU8,
    /// The next chunk of the posted part, and how many it has.
    next: AtomicUsize,
    chunks: AtomicUsize,
    slot: Mutex<Option<Box<dyn Part>>>,
}

static SHARED: Shared = Shared {
    claimed: AtomicBool::new(false),
    hot: AtomicBool::new(false),
    state: AtomicU8::new(EMPTY),
    next: AtomicUsize::new(0),
    chunks: AtomicUsize::new(0),
    slot: Mutex::new(None),
};

/// The thread, started on first use; `None` on a one-core machine (or if it cannot start).
fn thread() -> Option<&'static Thread> {
    static THREAD: OnceLock<Option<Thread>> = OnceLock::new();
    THREAD
        .get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
            if cores < 2 {
                return None;
            }
            let spawned = std::thread::Builder::new().name("cairn-embed-second".into()).spawn(serve);
            spawned.ok().map(|handle| handle.thread().clone())
        })
        .as_ref()
}

/// A query's hold on the second thread, which spins until this is dropped.
pub(crate) struct Claim {
    thread: &'static Thread,
}

/// After the second thread was found descheduled (another process has the second core),
/// queries leave it alone this long: a third runnable thread would take CPU from the caller as
/// much as from the other process. Then one query tries again; each time in a row it finds the
/// core still taken, the pause doubles, up to [`CONTENDED_MAX`] (a long compile next to the
/// daemon costs one query in a few seconds, not one in four).
const CONTENDED_FOR: Duration = Duration::from_millis(250);
const CONTENDED_MAX: Duration = Duration::from_secs(8);

/// The pause the next contention sets (µs): [`CONTENDED_FOR`], doubled per contention in a row,
/// back to it after a shared product completes in time.
static CONTENDED_PAUSE: AtomicU64 = AtomicU64::new(CONTENDED_FOR.as_micros() as u64);

/// Until when (µs after [`epoch`]) queries leave the second thread alone.
static CONTENDED_UNTIL: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_micros() -> u64 {
    u64::try_from(epoch().elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Claim the second thread and wake it; `None` when another query has it, when it was found
/// descheduled lately (within the pause of [`CONTENDED_FOR`] and its doublings), or when there
/// is none.
pub(crate) fn claim() -> Option<Claim> {
    let thread = thread()?;
    if now_micros() < CONTENDED_UNTIL.load(Relaxed) {
        return None;
    }
    SHARED.claimed.compare_exchange(false, true, Acquire, Relaxed).ok()?;
    SHARED.hot.store(true, Release);
    thread.unpark();
    Some(Claim { thread })
}

impl Claim {
    /// This query will not share any more products: the thread may park now.
    pub(crate) fn rest(&self) {
        SHARED.hot.store(false, Release);
    }

    /// Whether this query stopped sharing ([`Claim::rest`], or the second thread was found
    /// descheduled).
    pub(crate) fn resting(&self) -> bool {
        !SHARED.hot.load(Acquire)
    }

    /// Run `chunks` chunks: `mine(chunk)` on this thread for those it takes, [`Part::run`] on
    /// the second thread for the others. Returns the part, its `done` listing the second
    /// thread's chunks; or `None` when this thread did every chunk itself: the second thread
    /// was still on an earlier part, or it took chunks and then did not finish them in time
    /// (another process has the second core). Then its chunks were done again here (the same
    /// bits), the part is left to it, and this query shares no more ([`Claim::resting`]): the
    /// cost is a few chunks done twice, never a wait for a descheduled thread.
    pub(crate) fn share<P: Part>(&self, part: Box<P>, chunks: usize, mut mine: impl FnMut(usize)) -> Option<Box<P>> {
        match SHARED.state.load(Acquire) {
            EMPTY => {}
            DONE => {
                drop(lock().take()); // an abandoned part, finished since
                SHARED.state.store(EMPTY, Relaxed);
            }
            _ => {
                (0..chunks).for_each(&mut mine); // still on an abandoned part
                return None;
            }
        }
        SHARED.next.store(0, Relaxed);
        SHARED.chunks.store(chunks, Relaxed);
        *lock() = Some(part);
        SHARED.state.store(POSTED, Release);
        self.thread.unpark(); // (a no-op unless it parked: SPIN passed, or `rest`)
        let join = Join;
        let mut done_here = vec![false; chunks];
        loop {
            let chunk = SHARED.next.fetch_add(1, Relaxed);
            if chunk >= chunks {
                break;
            }
            mine(chunk);
            done_here[chunk] = true;
        }
        std::mem::forget(join);
        if SHARED.state.compare_exchange(POSTED, EMPTY, AcqRel, Acquire).is_err() {
            // Taken: the second thread is finishing its last chunk (every chunk is handed out),
            // ~10–100 µs; not done within [`LAST_CHUNK_WAIT`], it was descheduled.
            let waiting_since = Instant::now();
            let mut spins = 0u32;
            while SHARED.state.load(Acquire) != DONE {
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(64) && waiting_since.elapsed() > LAST_CHUNK_WAIT {
                    self.rest();
                    let pause = CONTENDED_PAUSE.load(Relaxed);
                    CONTENDED_PAUSE.store(pause.saturating_mul(2).min(CONTENDED_MAX.as_micros() as u64), Relaxed);
                    CONTENDED_UNTIL.store(now_micros().saturating_add(pause), Relaxed);
                    done_here.iter().enumerate().filter(|(_, here)| !**here).for_each(|(chunk, _)| mine(chunk));
                    return None;
                }
                std::hint::spin_loop();
            }
            SHARED.state.store(EMPTY, Relaxed);
            // the second thread did its share in time: the core is free again
            CONTENDED_PAUSE.store(CONTENDED_FOR.as_micros() as u64, Relaxed);
        }
        let part: Box<dyn std::any::Any> = lock().take().expect("the part posted");
        Some(part.downcast().expect("the part posted"))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        SHARED.hot.store(false, Release);
        SHARED.claimed.store(false, Release);
    }
}

/// When `mine` panics: takes the part back if the second thread has not taken it, else leaves
/// it to it (the next [`Claim::share`] finds it done, or still running and runs alone).
struct Join;

impl Drop for Join {
    fn drop(&mut self) {
        if SHARED.state.compare_exchange(POSTED, EMPTY, AcqRel, Acquire).is_ok() {
            drop(lock().take());
        }
    }
}

fn lock() -> std::sync::MutexGuard<'static, Option<Box<dyn Part>>> {
    SHARED.slot.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The second thread: parked until a query claims it, then spinning for parts.
fn serve() {
    loop {
        if !SHARED.hot.load(Acquire) {
            std::thread::park();
            continue;
        }
        let mut idle_since = Instant::now();
        let mut spins = 0u32;
        while SHARED.hot.load(Acquire) {
            if SHARED.state.load(Acquire) == POSTED
                && SHARED.state.compare_exchange(POSTED, TAKEN, AcqRel, Relaxed).is_ok()
            {
                work();
                idle_since = Instant::now();
                continue;
            }
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) && idle_since.elapsed() > SPIN {
                std::thread::park(); // until the next part is posted (or another query claims)
                idle_since = Instant::now();
            }
        }
    }
}

/// The posted part's chunks, as many as this thread gets, then the part given back.
fn work() {
    let Some(mut part) = lock().take() else {
        SHARED.state.store(DONE, Release);
        return;
    };
    let chunks = SHARED.chunks.load(Relaxed);
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        loop {
            let chunk = SHARED.next.fetch_add(1, Relaxed);
            if chunk >= chunks {
                break;
            }
            part.run(chunk);
        }
    }));
    if ran.is_err() {
        part.fail();
    }
    *lock() = Some(part);
    SHARED.state.store(DONE, Release);
}

//! The daemon's autosync with a hub: push a moment after writes (debounced), pull on a timer,
//! one process per data dir under the store's lease, and back off with jitter when the hub
//! does not answer or refuses. `[sync]` is read again whenever config.toml changes, so
//! `cairn remote add` takes effect without a restart.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant, SystemTime};

use cairn_core::error::{CairnError, ErrorCode, Result};
use cairn_core::settings::{RemoteSettings, load_remote};
use cairn_core::sync::remote::{RemoteStatus, RoundReport, SyncAccess, sync_round};

use crate::Engine;
use crate::hub_client::HubClient;
use crate::workers::Alive;

/// How often the loop looks at its wake-ups, requests and timers.
const TICK: Duration = Duration::from_millis(100);
/// A write waits at most this long for quiet before it is pushed anyway.
const MAX_PUSH_DELAY: Duration = Duration::from_secs(5);
/// The first retry after a failure, and the longest wait between two.
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// The lease outlives a few pull intervals, so a daemon that stops without giving it back
/// blocks others for a minute at most.
const LEASE_MIN: Duration = Duration::from_secs(60);

/// A `cairn remote sync` waiting for the next round's outcome.
type Waiter = mpsc::Sender<Result<RoundReport>>;

/// What the autosync is doing, for `/sync/status`, and the rounds asked for now.
#[derive(Default)]
pub struct Autosync {
    live: Mutex<Live>,
    waiters: Mutex<Vec<Waiter>>,
}

#[derive(Default, Clone)]
struct Live {
    phase: &'static str,
    last_error: Option<String>,
    failures: u32,
    retry_at: Option<Instant>,
    last_round_at: Option<String>,
    last_round: Option<RoundReport>,
}

impl Autosync {
    /// The live fields over the store's side of the status.
    pub(crate) fn overlay(&self, status: &mut RemoteStatus) {
        let live = self.live.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if !live.phase.is_empty() {
            live.phase.clone_into(&mut status.phase);
        }
        status.last_error = live.last_error;
        status.consecutive_failures = live.failures;
        status.next_attempt_in_ms = live
            .retry_at
            .and_then(|at| at.checked_duration_since(Instant::now()))
            .map(|left| u64::try_from(left.as_millis()).unwrap_or(u64::MAX));
        status.last_round_at = live.last_round_at;
        status.last_round = live.last_round;
    }

    /// Ask for a round now; its outcome arrives on the receiver.
    pub(crate) fn request_round(&self) -> mpsc::Receiver<Result<RoundReport>> {
        let (tx, rx) = mpsc::channel();
        self.waiters.lock().unwrap_or_else(PoisonError::into_inner).push(tx);
        rx
    }

    fn take_waiters(&self) -> Vec<Waiter> {
        std::mem::take(&mut *self.waiters.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn set(&self, change: impl FnOnce(&mut Live)) {
        change(&mut self.live.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

impl SyncAccess for Engine {
    fn with_store<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut cairn_core::store::Store) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.with_writer(|core| f(&mut core.store))
    }
}

/// Run one round on `engine` now, on the calling thread (no daemon loop: tests, tools).
pub fn round_now(engine: &Engine, remote: &RemoteSettings) -> Result<RoundReport> {
    sync_round(engine, &HubClient::new(&remote.url, &remote.token), remote)
}

/// `[sync]` as last read, read again when config.toml's modification time changes.
struct ConfigCache {
    data_dir: PathBuf,
    seen: Option<Option<SystemTime>>,
    remote: Result<Option<RemoteSettings>>,
}

impl ConfigCache {
    fn new(data_dir: &Path) -> Self {
        ConfigCache { data_dir: data_dir.to_owned(), seen: None, remote: Ok(None) }
    }

    fn current(&mut self) -> Result<Option<RemoteSettings>> {
        let file = self.data_dir.join(cairn_core::settings::CONFIG_FILE);
        let modified = std::fs::metadata(&file).and_then(|m| m.modified()).ok();
        if self.seen != Some(modified) {
            self.seen = Some(modified);
            self.remote = load_remote(&self.data_dir);
        }
        self.remote.clone()
    }
}

/// The loop's timers between two looks.
struct Timers {
    /// First write not pushed yet, and the last one.
    dirty_since: Option<Instant>,
    last_write: Instant,
    next_pull: Instant,
}

impl Timers {
    /// A round is due: asked for, or the pull timer, or writes that have been quiet for the
    /// debounce (or waited too long); never before a backoff ends.
    fn due(&self, remote: &RemoteSettings, retry_at: Option<Instant>, now: Instant) -> bool {
        if !remote.autosync || retry_at.is_some_and(|at| now < at) {
            return false;
        }
        let push_due = self
            .dirty_since
            .is_some_and(|since| now - self.last_write >= remote.push_debounce || now - since >= MAX_PUSH_DELAY);
        push_due || now >= self.next_pull
    }
}

/// Start the loop on `workers`' thread; `woken` receives one wake-up per writer commit.
pub(crate) fn start(engine: &Arc<Engine>, data_dir: &Path, woken: mpsc::Receiver<()>, shared: Arc<Autosync>) -> bool {
    let weak = Arc::downgrade(engine);
    let alive = engine.workers.alive();
    let data_dir = data_dir.to_owned();
    engine.workers.spawn_loop("cairn-autosync", move || run(&weak, &alive, &data_dir, &woken, &shared))
}

fn run(engine: &Weak<Engine>, alive: &Alive, data_dir: &Path, woken: &mpsc::Receiver<()>, shared: &Autosync) {
    let holder = format!("daemon:{}", std::process::id());
    let mut config = ConfigCache::new(data_dir);
    let now = Instant::now();
    let mut timers = Timers { dirty_since: None, last_write: now, next_pull: now };
    while alive.get() {
        match woken.recv_timeout(TICK) {
            Ok(()) => {
                let now = Instant::now();
                timers.last_write = now;
                timers.dirty_since.get_or_insert(now);
            }
            Err(RecvTimeoutError::Timeout) => {}
            // The writer stopped: so does the engine.
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let mut waiters = shared.take_waiters();
        let remote = match config.current() {
            Ok(Some(remote)) => remote,
            other => {
                let error = match other {
                    Err(e) => e,
                    _ => not_configured(),
                };
                shared.set(|l| *l = Live { phase: "off", last_error: other_error(&error), ..Live::default() });
                answer(&mut waiters, &Err(error));
                continue;
            }
        };
        let retry_at = shared.live.lock().unwrap_or_else(PoisonError::into_inner).retry_at;
        if waiters.is_empty() && !timers.due(&remote, retry_at, Instant::now()) {
            if shared.live.lock().unwrap_or_else(PoisonError::into_inner).phase.is_empty() || !remote.autosync {
                shared.set(|l| l.phase = if remote.autosync { "idle" } else { "manual" });
            }
            continue;
        }
        let Some(engine) = engine.upgrade() else { break };
        let outcome = one_round(&engine, &remote, &holder, &mut timers, !waiters.is_empty());
        drop(engine);
        // `None` (nothing pending after all) only when nobody asked.
        if let Some(outcome) = outcome {
            record(shared, &outcome);
            answer(&mut waiters, &outcome);
        }
    }
    if let Some(engine) = engine.upgrade()
        && let Err(e) = engine.with_writer(move |core| core.store.sync_lease_release(&holder))
    {
        tracing::debug!(error = %e, "could not give the sync lease back");
    }
}

/// The config error to show (a missing remote is no error).
fn other_error(error: &CairnError) -> Option<String> {
    (error.code != ErrorCode::RemoteNotConfigured).then(|| error.message.clone())
}

fn not_configured() -> CairnError {
    CairnError::new(ErrorCode::RemoteNotConfigured, "this data dir has no hub to sync with")
        .with_hint("cairn remote add URL --token TOKEN")
}

/// Take the lease and run a round; `None` when only writes made it due and none is pending.
fn one_round(
    engine: &Engine,
    remote: &RemoteSettings,
    holder: &str,
    timers: &mut Timers,
    asked: bool,
) -> Option<Result<RoundReport>> {
    let now = Instant::now();
    let timer_due = now >= timers.next_pull;
    if !asked && !timer_due {
        // Woken by writes: a round only if they left something for the hub. Read on a reader,
        // since anything run on the writer wakes this loop again.
        let settings = remote.clone();
        let pending = engine.read_store(|s| Ok(s.remote_status(&settings)?.pending)).unwrap_or(1);
        if pending == 0 {
            timers.dirty_since = None;
            return None;
        }
    }
    let ttl = LEASE_MIN.max(remote.pull_interval * 3);
    let who = holder.to_owned();
    match engine.with_writer(move |core| core.store.sync_lease_take(&who, ttl)) {
        Ok(None) => {}
        Ok(Some(other)) => {
            timers.next_pull = now + remote.pull_interval;
            timers.dirty_since = None;
            return Some(Err(CairnError::new(ErrorCode::SyncBusy, format!("{other} is syncing this data dir"))
                .with_hint("it holds the sync lease; this daemon takes over when it lets go")));
        }
        Err(e) => return Some(Err(e)),
    }
    timers.dirty_since = None;
    let report = round_now(engine, remote);
    timers.next_pull = Instant::now() + remote.pull_interval;
    Some(report)
}

/// Keep the outcome for the status, and set the next attempt.
fn record(shared: &Autosync, outcome: &Result<RoundReport>) {
    let now = cairn_core::clock::now_ts();
    shared.set(|live| match outcome {
        Ok(report) if report.refused.is_empty() => {
            *live =
                Live { phase: "idle", last_round_at: Some(now), last_round: Some(report.clone()), ..Live::default() };
        }
        Ok(report) => {
            live.failures += 1;
            live.phase = "refused";
            live.last_error =
                report.refused.first().map(|r| format!("{} refused: {} ({})", r.project, r.message, r.hub_code));
            live.retry_at = Some(Instant::now() + backoff(live.failures));
            live.last_round_at = Some(now);
            live.last_round = Some(report.clone());
        }
        Err(e) if e.code == ErrorCode::SyncBusy => {
            live.phase = "standby";
            live.last_error = Some(e.message.clone());
        }
        Err(e) => {
            live.failures += 1;
            live.phase = if e.code == ErrorCode::RemoteRefused { "refused" } else { "backoff" };
            live.last_error = Some(format!("{}: {}", e.code, e.message));
            live.retry_at = Some(Instant::now() + backoff(live.failures));
            live.last_round_at = Some(now);
        }
    });
    if let Err(e) = outcome
        && e.code != ErrorCode::SyncBusy
    {
        tracing::warn!(error = %e, "sync with the hub failed; retrying later");
    }
    // Parked entries do not fail the round (the others went on) and are never retried: say so
    // once, when they are parked; the status lists them.
    if let Ok(report) = outcome {
        for p in &report.parked {
            tracing::warn!(project = %p.project, entity = %p.entity, key = %p.entity_key, code = %p.code,
                reason = %p.reason, "a change the hub will not take is parked");
        }
    }
}

fn answer(waiters: &mut Vec<Waiter>, outcome: &Result<RoundReport>) {
    for waiter in waiters.drain(..) {
        let _ = waiter.send(outcome.clone());
    }
}

/// The wait after `failures` failures in a row: doubling from a second up to five minutes,
/// each spread ±25 % so that clients that failed together do not retry together.
pub(crate) fn backoff(failures: u32) -> Duration {
    let base = BACKOFF_FIRST.saturating_mul(1 << failures.saturating_sub(1).min(16)).min(BACKOFF_MAX);
    base.mul_f64(0.75 + 0.5 * unit_random())
}

/// A number in [0, 1) that differs between processes and calls (jitter, not secrecy).
fn unit_random() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_nanos());
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_up_to_five_minutes() {
        for (failures, base) in [(1, 1.0), (2, 2.0), (3, 4.0), (9, 256.0), (10, 300.0), (40, 300.0)] {
            let waits: Vec<f64> = (0..50).map(|_| backoff(failures).as_secs_f64()).collect();
            assert!(waits.iter().all(|w| *w >= base * 0.75 && *w < base * 1.25), "{failures}: {waits:?}");
            let spread =
                waits.iter().copied().fold(f64::MIN, f64::max) - waits.iter().copied().fold(f64::MAX, f64::min);
            assert!(spread > base * 0.1, "{failures}: no jitter in {waits:?}");
        }
    }

    fn remote(autosync: bool) -> RemoteSettings {
        RemoteSettings {
            url: "http://127.0.0.1:1".into(),
            token: "t".into(),
            projects: vec![],
            autosync,
            push_debounce: Duration::from_millis(500),
            pull_interval: Duration::from_secs(10),
        }
    }

    #[test]
    fn a_write_is_pushed_after_quiet_or_after_waiting_too_long() {
        let start = Instant::now();
        let mut timers = Timers { dirty_since: None, last_write: start, next_pull: start + Duration::from_secs(10) };
        assert!(!timers.due(&remote(true), None, start));
        timers.dirty_since = Some(start);
        assert!(!timers.due(&remote(true), None, start + Duration::from_millis(400)));
        assert!(timers.due(&remote(true), None, start + Duration::from_millis(500)));
        // Writes keep coming: pushed anyway after the longest delay.
        timers.last_write = start + Duration::from_millis(4900);
        assert!(!timers.due(&remote(true), None, start + Duration::from_millis(4950)));
        assert!(timers.due(&remote(true), None, start + MAX_PUSH_DELAY));
        // Never during a backoff, never with autosync off.
        assert!(!timers.due(&remote(true), Some(start + Duration::from_secs(60)), start + MAX_PUSH_DELAY));
        assert!(!timers.due(&remote(false), None, start + Duration::from_secs(60)));
        // The pull timer alone.
        let idle = Timers { dirty_since: None, last_write: start, next_pull: start + Duration::from_secs(10) };
        assert!(idle.due(&remote(true), None, start + Duration::from_secs(10)));
    }
}

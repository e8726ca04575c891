//! Applying host events: the spool's drain and the store's exactly-once record of the event
//! ids it applied. The spool (`crate::spool`) only keeps the records on disk; running them is
//! an op's work, so it lives here, above both.

use super::{EventOutcome, Op};
use crate::error::{ErrorCode, Result};
use crate::event_id::EventId;
use crate::owners::Core;
use crate::spool::{DrainReport, MAX_EVENT_FAILURES, Pending, Spool, SpoolCounts};

/// Where a drain applies events: the daemon's writer, or a store in this process.
pub trait DrainTarget {
    /// Apply the events in order, each with its id recorded in the same transaction; one
    /// result per event.
    fn apply(&mut self, events: Vec<(EventId, Op)>) -> Vec<Result<EventOutcome>>;
    /// Add to the store's counters.
    fn count(&mut self, counts: SpoolCounts) -> Result<()>;
}

/// Events applied per group (one transaction each in the daemon).
pub(crate) const DRAIN_CHUNK: usize = 32;

/// Apply every waiting event in order. Unreadable ones are counted and deleted; one the store
/// refuses (a 4xx error) is counted and deleted; a store that cannot write now (busy, stopping,
/// disk full) stops the drain, leaving that event and the later ones for the next drain.
pub fn drain(spool: &Spool, target: &mut dyn DrainTarget) -> DrainReport {
    let mut report = DrainReport::default();
    let dropped = spool.take_dropped();
    let stale = spool.take_stale_tmp();
    if dropped + stale > 0 && target.count(SpoolCounts { dropped, corrupt: stale, ..SpoolCounts::default() }).is_ok() {
        report.dropped += dropped;
        report.corrupt += stale;
    }
    let pending = spool.pending();
    'chunks: for chunk in pending.chunks(DRAIN_CHUNK) {
        let mut events = Vec::with_capacity(chunk.len());
        let mut unreadable = Vec::new();
        for item in chunk {
            match spool.read(item).and_then(|request| Op::from_value(request).map_err(|e| e.message)) {
                Ok(op) => events.push((item.clone(), op)),
                Err(why) => {
                    tracing::warn!(event = %item.id, why, "skipping an unreadable spooled event");
                    unreadable.push(item);
                }
            }
        }
        if !unreadable.is_empty() {
            let corrupt = unreadable.len() as u64;
            if target.count(SpoolCounts { corrupt, ..SpoolCounts::default() }).is_err() {
                break;
            }
            for item in unreadable {
                spool.remove(item);
            }
            report.corrupt += corrupt;
        }
        let (items, ops): (Vec<Pending>, Vec<(EventId, Op)>) =
            events.into_iter().map(|(item, op)| (item.clone(), (item.id, op))).unzip();
        let results = target.apply(ops);
        let mut refused = SpoolCounts::default();
        // The group was applied whole (each event in its own savepoint): an event that
        // failed stays for the next drain, and so do the groups after it; the others of its
        // group are done.
        let mut stop = false;
        for (item, result) in items.iter().zip(results) {
            match result {
                Ok(EventOutcome::Duplicate(_)) => report.duplicates += 1,
                Ok(EventOutcome::Applied(_)) => report.applied += 1,
                Err(e) if is_refusal(e.code) => {
                    tracing::warn!(event = %item.id, error = %e, "the store refused a spooled event");
                    refused.rejected += 1;
                }
                Err(e) if waits_for_the_store(e.code) => {
                    tracing::info!(event = %item.id, error = %e, "the store cannot take spooled events now; later");
                    stop = true;
                    continue;
                }
                Err(e) => {
                    let failures = spool.note_failure(item);
                    if failures < MAX_EVENT_FAILURES {
                        tracing::warn!(event = %item.id, error = %e, failures, "a spooled event failed; trying it again later");
                        stop = true;
                    } else {
                        tracing::error!(event = %item.id, error = %e, "a spooled event keeps failing; set aside in spool/failed");
                        spool.set_aside(item);
                        refused.failed += 1;
                    }
                    continue;
                }
            }
            spool.remove(item);
        }
        if !refused.is_zero() && target.count(refused).is_ok() {
            report.rejected += refused.rejected;
            report.failed += refused.failed;
        }
        if stop {
            break 'chunks;
        }
    }
    report.pending = spool.status().pending;
    report
}

/// An answer about the event itself (bad arguments, unknown session...): trying again gives
/// the same answer. Anything else (busy, stopping, disk full, a bug) may pass later.
fn is_refusal(code: ErrorCode) -> bool {
    (400..500).contains(&code.http_status())
}

/// The store itself cannot write now (locked, disk full, stopping): no event is to blame, so
/// the event waits (in the spool, or back in it) and is applied once the store can write. The
/// one list both the drain and a hook's delivery read: an answer left out of it loses the
/// event it refused.
pub fn waits_for_the_store(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::DatabaseBusy
            | ErrorCode::DataDirNotWritable
            | ErrorCode::DatabaseCorrupt
            | ErrorCode::SchemaTooNew
            | ErrorCode::DaemonUnavailable
            | ErrorCode::OperationInterrupted
            // No room to store it now: it waits in the spool until there is (counted as a
            // failure, it was set aside for good after a few drains).
            | ErrorCode::DiskFull
    )
}

/// The store keeps the ids it applied (migration `spool_events`); the op runs against the whole
/// context, as any other does.
impl Core {
    /// Apply `op` unless `id` was applied before, and record `id`, inside the caller's
    /// transaction (run it through [`Core::batch`], as the daemon's writer does, so the op
    /// and its id commit together). A known id is a [`EventOutcome::Duplicate`].
    pub fn run_event(&mut self, id: &EventId, op: Op) -> Result<EventOutcome> {
        if self.store.spool_event_applied(id.as_str())? {
            return Ok(EventOutcome::Duplicate(id.clone()));
        }
        let output = super::execute(self, op)?;
        let now = self.store.now();
        self.store.record_spool_event(id.as_str(), &now)?;
        Ok(EventOutcome::Applied(output))
    }

    /// Apply events in order, each in step with its id, in one group commit.
    pub fn apply_events(&mut self, events: Vec<(EventId, Op)>) -> Vec<Result<EventOutcome>> {
        let n = events.len();
        match self.batch(events, |core, (id, op)| core.run_event(&id, op)) {
            Ok(results) => results,
            Err(e) => vec![Err(e); n],
        }
    }
}

/// A store in this process as a drain target (tests, tools).
impl DrainTarget for Core {
    fn apply(&mut self, events: Vec<(EventId, Op)>) -> Vec<Result<EventOutcome>> {
        self.apply_events(events)
    }

    fn count(&mut self, counts: SpoolCounts) -> Result<()> {
        self.store.add_spool_counts(counts)
    }
}

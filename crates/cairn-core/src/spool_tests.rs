//! The spool's rules: order, bound, idempotence by event id, unreadable records, a drain cut
//! between commit and delete.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::error::{CairnError, ErrorCode};
use crate::ops::events::DRAIN_CHUNK;
use crate::ops::{DrainTarget, EventOutcome, Op, drain};
use crate::owners::Core;

/// Keep `op` in `spool` as a door does.
fn keep(spool: &Spool, id: &EventId, op: &Op) -> Pushed {
    spool.push(id, "test", op.name(), op)
}

fn prompt(session: &str, n: usize) -> Op {
    Op::from_value(json!({"op": "add_prompt", "args": {"session_id": session, "project": "p",
        "content": format!("prompt number {n} of the spool test")}}))
    .unwrap()
}

fn start(session: &str) -> Op {
    Op::from_value(json!({"op": "start_session", "args": {"id": session, "project": "p"}})).unwrap()
}

/// The prompts stored for `session`, oldest first.
fn prompts(store: &Store, session: &str) -> Vec<String> {
    let mut stmt = store.conn().prepare("SELECT content FROM prompts WHERE session_id = ?1 ORDER BY id").unwrap();
    stmt.query_map([session], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
}

/// One tool call counted in `session`: applied twice, it counts twice.
fn tool_call(session: &str) -> Op {
    Op::from_value(
        json!({"op": "record_activity", "args": {"session_id": session, "project": "p", "event": "tool_call"}}),
    )
    .unwrap()
}

fn tool_calls(store: &Store, session: &str) -> i64 {
    store
        .conn()
        .query_row("SELECT tool_calls FROM agent_activity WHERE session_id = ?1", [session], |r| r.get(0))
        .unwrap()
}

fn spool() -> (tempfile::TempDir, Spool) {
    let dir = tempfile::tempdir().unwrap();
    let spool = Spool::in_data_dir(dir.path());
    (dir, spool)
}

#[test]
fn event_ids_are_uuid_v7_in_creation_order() {
    let ids: Vec<EventId> = (0..1000).map(|_| EventId::new()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids of one process must increase");
    assert_eq!(EventId::parse(ids[0].as_str()).unwrap(), ids[0]);
    assert_eq!(EventId::parse("not-a-uuid").unwrap_err().code, ErrorCode::InvalidArgument);
    // a v4 has no time order
    assert_eq!(EventId::parse("5b8f1c36-3c2b-4b5e-9f6a-0c1d2e3f4a5b").unwrap_err().code, ErrorCode::InvalidArgument);
}

#[test]
fn a_drain_applies_every_event_in_order_and_empties_the_spool() {
    let (_dir, spool) = spool();
    assert_eq!(keep(&spool, &EventId::new(), &start("s1")), Pushed::Kept);
    for n in 0..50 {
        assert_eq!(keep(&spool, &EventId::new(), &prompt("s1", n)), Pushed::Kept);
    }
    assert_eq!(spool.status().pending, 51);
    let mut core = Core::new(Store::open_in_memory().unwrap());
    let report = drain(&spool, &mut core);
    assert_eq!((report.applied, report.pending, report.corrupt), (51, 0, 0));
    let want: Vec<String> = (0..50).map(|n| format!("prompt number {n} of the spool test")).collect();
    assert_eq!(prompts(&core.store, "s1"), want);
    assert_eq!(spool.status(), SpoolStatus::default());
}

#[test]
fn an_event_id_is_applied_once() {
    let mut core = Core::new(Store::open_in_memory().unwrap());
    let id = EventId::new();
    let first = core.apply_events(vec![(id.clone(), tool_call("s"))]);
    assert!(first[0].is_ok());
    // alone, and inside a group with another event
    let again = core.apply_events(vec![(id.clone(), tool_call("s"))]);
    assert_eq!(again[0].as_ref().unwrap(), &EventOutcome::Duplicate(id.clone()));
    let group = core.apply_events(vec![(EventId::new(), tool_call("s")), (id.clone(), tool_call("s"))]);
    assert!(matches!(group[1], Ok(EventOutcome::Duplicate(_))));
    assert_eq!(tool_calls(&core.store, "s"), 2);
}

/// A drain killed after its commit and before the file's delete: the file is read again and
/// skipped, nothing is applied twice and nothing is missing.
#[test]
fn a_drain_cut_between_commit_and_delete_skips_what_was_applied() {
    let (_dir, spool) = spool();
    for _ in 0..10 {
        keep(&spool, &EventId::new(), &tool_call("s"));
    }
    let mut core = Core::new(Store::open_in_memory().unwrap());
    // The first drain's commits landed, its deletes did not: apply the first six by hand.
    let first_six: Vec<(EventId, Op)> = spool
        .pending()
        .into_iter()
        .take(6)
        .map(|p| (p.id.clone(), Op::from_value(spool.read(&p).unwrap()).unwrap()))
        .collect();
    assert!(core.apply_events(first_six).iter().all(Result::is_ok));
    let report = drain(&spool, &mut core);
    assert_eq!((report.duplicates, report.applied), (6, 4));
    assert_eq!(tool_calls(&core.store, "s"), 10);
}

#[test]
fn unreadable_records_are_counted_and_skipped_and_the_rest_is_delivered() {
    let (_dir, spool) = spool();
    keep(&spool, &EventId::new(), &prompt("s", 0));
    let dir = spool.dir().to_owned();
    std::fs::write(dir.join(format!("{}.json", EventId::new())), b"{\"v\":1,\"id\":\"trunc").unwrap();
    std::fs::write(dir.join(format!("{}.json", EventId::new())), b"\xff\xfe garbage").unwrap();
    let newer = EventId::new();
    let record = json!({"v": 2, "id": newer.as_str(), "at": "x", "source": "t", "request": {"op": "stats"}});
    std::fs::write(dir.join(format!("{newer}.json")), record.to_string()).unwrap();
    let unknown = EventId::new();
    let record = json!({"v": 1, "id": unknown.as_str(), "at": "x", "source": "t", "request": {"op": "fly"}});
    std::fs::write(dir.join(format!("{unknown}.json")), record.to_string()).unwrap();
    // not an event file at all: left alone
    std::fs::write(dir.join("notes.txt"), b"hi").unwrap();
    keep(&spool, &EventId::new(), &prompt("s", 1));
    let mut core = Core::new(Store::open_in_memory().unwrap());
    let report = drain(&spool, &mut core);
    assert_eq!((report.applied, report.corrupt, report.pending), (2, 4, 0));
    assert_eq!(prompts(&core.store, "s").len(), 2);
    assert_eq!(core.store.spool_counts().unwrap().corrupt, 4);
}

#[test]
fn an_event_the_store_refuses_is_counted_and_the_rest_delivered() {
    let (_dir, spool) = spool();
    keep(&spool, &EventId::new(), &prompt("s", 0));
    let end = Op::from_value(json!({"op": "end_session", "args": {"id": "never-started"}})).unwrap();
    keep(&spool, &EventId::new(), &end);
    keep(&spool, &EventId::new(), &prompt("s", 1));
    let mut core = Core::new(Store::open_in_memory().unwrap());
    let report = drain(&spool, &mut core);
    assert_eq!((report.applied, report.rejected, report.pending), (2, 1, 0));
    assert_eq!(core.store.spool_counts().unwrap().rejected, 1);
}

/// A store that cannot write now (busy, disk full, ...): the drain stops, and the events wait
/// for the next one, however many drains that takes (none is set aside as failing); once the
/// store can write, each is applied once.
#[test]
fn a_store_that_cannot_write_now_leaves_the_events_for_a_later_drain() {
    struct CannotWrite(ErrorCode);
    impl DrainTarget for CannotWrite {
        fn apply(&mut self, events: Vec<(EventId, Op)>) -> Vec<Result<EventOutcome>> {
            events.iter().map(|_| Err(CairnError::new(self.0, "cannot write now"))).collect()
        }
        fn count(&mut self, _: SpoolCounts) -> Result<()> {
            Err(CairnError::new(self.0, "cannot write now"))
        }
    }
    for code in [ErrorCode::DatabaseBusy, ErrorCode::DiskFull, ErrorCode::DataDirNotWritable] {
        let (_dir, spool) = spool();
        for n in 0..3 {
            keep(&spool, &EventId::new(), &prompt("s", n));
        }
        for _ in 0..=MAX_EVENT_FAILURES {
            let report = drain(&spool, &mut CannotWrite(code));
            assert_eq!((report.pending, report.failed), (3, 0), "{code:?}");
        }
        let mut core = Core::new(Store::open_in_memory().unwrap());
        assert_eq!(drain(&spool, &mut core).applied, 3, "{code:?}");
        assert_eq!(prompts(&core.store, "s").len(), 3, "{code:?}");
        assert_eq!(drain(&spool, &mut core), DrainReport::default(), "{code:?}: nothing applied twice");
    }
}

/// A store where one event hits a bug: the others of its group apply; it is tried again at the
/// next drains (the groups after it wait) and then set aside, counted.
#[test]
fn an_event_that_keeps_failing_is_set_aside_after_three_drains_and_the_rest_goes_through() {
    struct OneBug(Core);
    impl DrainTarget for OneBug {
        fn apply(&mut self, events: Vec<(EventId, Op)>) -> Vec<Result<EventOutcome>> {
            events
                .into_iter()
                .map(|(id, op)| match &op {
                    Op::AddPrompt(p) if p.content.contains("number 1 ") => Err(CairnError::internal("a bug")),
                    _ => self.0.apply_events(vec![(id, op)]).remove(0),
                })
                .collect()
        }
        fn count(&mut self, counts: SpoolCounts) -> Result<()> {
            self.0.store.add_spool_counts(counts)
        }
    }
    let (dir, spool) = spool();
    let group = DRAIN_CHUNK as u64;
    for n in 0..DRAIN_CHUNK + 2 {
        keep(&spool, &EventId::new(), &prompt("s", n));
    }
    let mut target = OneBug(Core::new(Store::open_in_memory().unwrap()));
    let report = drain(&spool, &mut target);
    assert_eq!((report.applied, report.failed, report.pending), (group - 1, 0, 3));
    assert_eq!(prompts(&target.0.store, "s").len(), DRAIN_CHUNK - 1, "the next group waits while it is retried");
    // Next time the failing event leads a group with the two that waited.
    let report = drain(&spool, &mut target);
    assert_eq!((report.applied, report.failed, report.pending), (2, 0, 1));
    assert_eq!(MAX_EVENT_FAILURES, 3);
    let report = drain(&spool, &mut target);
    assert_eq!((report.applied, report.failed, report.pending), (0, 1, 0));
    assert_eq!(prompts(&target.0.store, "s").len(), DRAIN_CHUNK + 1);
    assert_eq!(target.0.store.spool_counts().unwrap().failed, 1);
    let set_aside: Vec<_> = std::fs::read_dir(dir.path().join(SPOOL_DIR).join(FAILED_DIR)).unwrap().collect();
    assert_eq!(set_aside.len(), 1, "kept for a bug report");
    let left: Vec<String> = std::fs::read_dir(dir.path().join(SPOOL_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, [FAILED_DIR], "no failure marks left behind");
}

#[test]
fn a_full_spool_refuses_new_events_keeps_the_old_and_counts_the_refused() {
    let (_dir, spool) = spool();
    let spool = spool.with_bounds(5, 1024 * 1024);
    for n in 0..8 {
        let pushed = keep(&spool, &EventId::new(), &prompt("s", n));
        assert_eq!(matches!(pushed, Pushed::Kept), n < 5, "event {n}: {pushed:?}");
    }
    assert_eq!(spool.status().pending, 5);
    assert_eq!(spool.status().dropped_uncounted, 3);
    let mut core = Core::new(Store::open_in_memory().unwrap());
    let report = drain(&spool, &mut core);
    assert_eq!((report.applied, report.dropped), (5, 3));
    assert_eq!(prompts(&core.store, "s")[0], "prompt number 0 of the spool test");
    // the count moved into the store: it survives the spool file
    assert_eq!(core.store.spool_counts().unwrap().dropped, 3);
    assert_eq!(spool.status().dropped_uncounted, 0);
}

#[test]
fn the_byte_bound_holds_too() {
    let (_dir, spool) = spool();
    let spool = spool.with_bounds(1000, 2_000);
    let kept = (0..100).filter(|n| keep(&spool, &EventId::new(), &prompt("s", *n)) == Pushed::Kept).count();
    assert!(kept > 0 && kept < 100);
    assert!(spool.status().bytes <= 2_000);
}

#[test]
fn a_record_over_the_size_limit_is_refused() {
    let (_dir, spool) = spool();
    let huge = Op::from_value(json!({"op": "add_prompt", "args": {"session_id": "s",
        "content": "x".repeat(MAX_RECORD_BYTES + 1)}}))
    .unwrap();
    assert!(matches!(keep(&spool, &EventId::new(), &huge), Pushed::Dropped(_)));
    assert_eq!(spool.status().pending, 0);
}

#[test]
fn a_spool_that_cannot_be_written_refuses_without_failing() {
    let dir = tempfile::tempdir().unwrap();
    // the data dir's `spool` is a file: nothing can be written under it
    std::fs::write(dir.path().join(SPOOL_DIR), b"").unwrap();
    let spool = Spool::in_data_dir(dir.path());
    assert!(matches!(keep(&spool, &EventId::new(), &prompt("s", 0)), Pushed::Dropped(_)));
}

#[test]
fn applied_ids_are_forgotten_after_a_month() {
    let (store, clock) = crate::testutil::store_with_clock();
    let mut core = Core::new(store);
    core.apply_events(vec![(EventId::new(), prompt("s", 0))]);
    assert_eq!(core.store.prune_spool_events().unwrap(), 0);
    clock.advance(time::Duration::try_from(REMEMBER_APPLIED).unwrap() + time::Duration::seconds(1));
    assert_eq!(core.store.prune_spool_events().unwrap(), 1);
}

/// Two writers spooling at once (two hosts): every event of both is kept and delivered once.
#[test]
fn two_writers_at_once_both_get_through() {
    let (_dir, spool) = spool();
    std::thread::scope(|scope| {
        for writer in ["a", "b"] {
            let spool = spool.clone();
            scope.spawn(move || {
                for n in 0..100 {
                    assert_eq!(
                        {
                            let op = prompt(writer, n);
                            spool.push(&EventId::new(), writer, op.name(), &op)
                        },
                        Pushed::Kept
                    );
                }
            });
        }
    });
    let mut core = Core::new(Store::open_in_memory().unwrap());
    assert_eq!(drain(&spool, &mut core).applied, 200);
    for writer in ["a", "b"] {
        let want: Vec<String> = (0..100).map(|n| format!("prompt number {n} of the spool test")).collect();
        assert_eq!(prompts(&core.store, writer), want, "writer {writer} in order");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Whatever the bound and wherever drains are cut (commits landed, deletes not), every
    /// kept event is applied exactly once, in order, and the spool never exceeds its bound.
    #[test]
    fn order_bound_and_exactly_once_under_cut_drains(
        events in 1usize..40,
        bound in 1usize..30,
        cuts in proptest::collection::vec(0usize..40, 0..4),
    ) {
        let (_dir, spool) = spool();
        let spool = spool.with_bounds(bound, MAX_BYTES);
        let mut kept = Vec::new();
        for n in 0..events {
            let op = if n % 2 == 0 { prompt("s", n) } else { tool_call("s") };
            if keep(&spool, &EventId::new(), &op) == Pushed::Kept {
                kept.push(n);
            }
            prop_assert!(spool.status().pending as usize <= bound);
        }
        prop_assert_eq!(kept.len(), events.min(bound));
        let mut core = Core::new(Store::open_in_memory().unwrap());
        for cut in cuts {
            // a drain that committed `cut` events and died before deleting their files
            let applied: Vec<(EventId, Op)> =
                spool.pending().into_iter().take(cut).map(|p| (p.id.clone(), Op::from_value(spool.read(&p).unwrap()).unwrap())).collect();
            core.apply_events(applied);
        }
        let report = drain(&spool, &mut core);
        prop_assert_eq!(report.pending, 0);
        let want: Vec<String> =
            kept.iter().filter(|n| *n % 2 == 0).map(|n| format!("prompt number {n} of the spool test")).collect();
        prop_assert_eq!(prompts(&core.store, "s"), want);
        let calls = kept.iter().filter(|n| *n % 2 == 1).count() as i64;
        if calls > 0 {
            prop_assert_eq!(tool_calls(&core.store, "s"), calls);
        }
        prop_assert_eq!(core.store.spool_counts().unwrap().dropped, (events - kept.len()) as u64);
    }
}

use time::Duration;

use crate::error::ErrorCode;
use crate::memory::{ListFilter, NewObservation, ObservationPatch, SaveAction};
use crate::testutil::{obs, store_with_clock};
use crate::text::MAX_CONTENT_BYTES;

#[test]
fn save_creates_with_defaults() {
    let (mut s, _) = store_with_clock();
    let out = s.save(&obs("Cairn", "Use WAL", "We use WAL mode for concurrency")).unwrap();
    assert_eq!(out.action, SaveAction::Created);
    assert_eq!(out.project, "cairn");
    assert_eq!(out.session_id, "manual-save-cairn");
    let got = s.get(out.id).unwrap();
    assert_eq!(got.kind, "manual");
    assert_eq!(got.revision_count, 1);
    assert_eq!(got.duplicate_count, 1);
    assert_eq!(got.sync_id.len(), 36, "uuid v7");
    assert!(out.warnings.iter().any(|w| w.contains("normalized")));
}

#[test]
fn identical_save_within_window_counts_duplicate_then_new_after() {
    let (mut s, clock) = store_with_clock();
    let first = s.save(&obs("p", "Title", "Same   content")).unwrap();
    clock.advance(Duration::minutes(14));
    let second = s.save(&obs("p", "Title", "same content")).unwrap();
    assert_eq!(second.action, SaveAction::Duplicate);
    assert_eq!(second.id, first.id);
    assert_eq!(second.duplicate_count, 2);
    clock.advance(Duration::minutes(16));
    let third = s.save(&obs("p", "Title", "same content")).unwrap();
    assert_eq!(third.action, SaveAction::Created);
    assert_ne!(third.id, first.id);
}

#[test]
fn dedupe_requires_same_title_type_project_scope() {
    let (mut s, _) = store_with_clock();
    let a = s.save(&obs("p", "Title", "content")).unwrap();
    assert_ne!(s.save(&obs("p", "Other", "content")).unwrap().id, a.id);
    assert_ne!(s.save(&obs("q", "Title", "content")).unwrap().id, a.id);
    let mut personal = obs("p", "Title", "content");
    personal.scope = Some("personal".into());
    assert_ne!(s.save(&personal).unwrap().id, a.id);
}

#[test]
fn topic_key_revises_in_place_and_keeps_history() {
    let (mut s, clock) = store_with_clock();
    let mut v1 = obs("p", "DB choice", "We pin Postgres 15");
    v1.topic_key = Some("Decision/ DB".into());
    let first = s.save(&v1).unwrap();
    assert_eq!(first.topic_key.as_deref(), Some("decision/-db"));
    clock.advance(Duration::minutes(1));
    let mut v2 = obs("p", "DB choice", "We moved to Postgres 16 for MERGE");
    v2.topic_key = Some("decision/ db".into());
    let second = s.save(&v2).unwrap();
    assert_eq!(second.action, SaveAction::Revised);
    assert_eq!(second.id, first.id);
    assert_eq!(second.revision_count, 2);
    assert_eq!(s.get(first.id).unwrap().content, "We moved to Postgres 16 for MERGE");
    let history = s.revisions(first.id).unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].content, "We pin Postgres 15");
    // Same topic, same content: a duplicate, not a new revision.
    let third = s.save(&v2).unwrap();
    assert_eq!((third.action, third.revision_count), (SaveAction::Duplicate, 2));
    // Another project with the same key is another memory.
    let mut other = v2.clone();
    other.project = Some("q".into());
    assert_ne!(s.save(&other).unwrap().id, first.id);
}

#[test]
fn private_content_never_stored() {
    let (mut s, _) = store_with_clock();
    let mut new = obs("p", "key <private>AKIA123</private>", "the key is <PRIVATE>\nAKIA999\n</private> ok");
    new.topic_key = Some("<private>secret-topic</private>".into());
    new.tool_name = Some("bash <private>x</private>".into());
    let out = s.save(&new).unwrap();
    assert!(out.redacted);
    let got = s.get(out.id).unwrap();
    assert_eq!(got.title, "key [REDACTED]");
    assert_eq!(got.content, "the key is [REDACTED] ok");
    assert!(!format!("{got:?}").contains("AKIA"));
    assert!(!format!("{got:?}").contains("secret-topic"));
}

#[test]
fn long_content_truncated_and_reported() {
    let (mut s, _) = store_with_clock();
    let long = "ü".repeat(40_000);
    let out = s.save(&obs("p", "big", &long)).unwrap();
    assert_eq!(out.truncated_from, Some(80_000));
    let got = s.get(out.id).unwrap();
    assert!(got.content.len() <= MAX_CONTENT_BYTES);
    assert!(got.content.ends_with("[truncated]"));
}

#[test]
fn empty_fields_rejected_and_nothing_stored() {
    let (mut s, _) = store_with_clock();
    assert_eq!(s.save(&obs("p", " ", "c")).unwrap_err().code, ErrorCode::EmptyField);
    assert_eq!(s.save(&obs("p", "t", "\n\t")).unwrap_err().code, ErrorCode::EmptyField);
    assert_eq!(s.stats().unwrap().total_observations, 0);
    assert_eq!(s.stats().unwrap().total_sessions, 0);
}

#[test]
fn session_project_mismatch_refused() {
    let (mut s, _) = store_with_clock();
    let mut a = obs("alpha", "t", "c");
    a.session_id = Some("sess-1".into());
    s.save(&a).unwrap();
    let mut b = obs("beta", "t2", "c2");
    b.session_id = Some("sess-1".into());
    assert_eq!(s.save(&b).unwrap_err().code, ErrorCode::SessionProjectMismatch);
    // Without a project the session's project is used.
    let c = NewObservation {
        title: "t3".into(),
        content: "c3".into(),
        session_id: Some("sess-1".into()),
        ..Default::default()
    };
    assert_eq!(s.save(&c).unwrap().project, "alpha");
}

#[test]
fn similar_project_warning_on_first_save() {
    let (mut s, _) = store_with_clock();
    s.save(&obs("tianda-wc-plugin", "t", "c")).unwrap();
    let out = s.save(&obs("tianda_wc_plugin", "t2", "c2")).unwrap();
    assert!(out.warnings.iter().any(|w| w.contains("tianda-wc-plugin")), "{:?}", out.warnings);
    let again = s.save(&obs("tianda_wc_plugin", "t3", "c3")).unwrap();
    assert!(again.warnings.is_empty(), "only on the first save");
    let unrelated = s.save(&obs("zebra", "t", "c")).unwrap();
    assert!(unrelated.warnings.is_empty());
}

#[test]
fn partial_update_and_errors() {
    let (mut s, _) = store_with_clock();
    let id = s.save(&obs("p", "old title", "old content")).unwrap().id;
    let patch = ObservationPatch { title: Some("new title".into()), ..Default::default() };
    let got = s.update(id, &patch).unwrap();
    assert_eq!((got.title.as_str(), got.content.as_str(), got.revision_count), ("new title", "old content", 2));
    assert_eq!(s.update(id, &ObservationPatch::default()).unwrap_err().code, ErrorCode::InvalidArgument);
    assert_eq!(s.update(999, &patch).unwrap_err().code, ErrorCode::ObservationNotFound);
    let blank = ObservationPatch { content: Some("  ".into()), ..Default::default() };
    assert_eq!(s.update(id, &blank).unwrap_err().code, ErrorCode::EmptyField);
    assert_eq!(s.get(id).unwrap().content, "old content", "failed update changes nothing");
}

#[test]
fn soft_delete_hides_everywhere_hard_delete_orphans() {
    let (mut s, _) = crate::testutil::core_with_clock();
    let a = s.store.save(&obs("p", "alpha memory", "unique-word-xyzzy")).unwrap();
    let b = s.store.save(&obs("p", "beta memory", "other")).unwrap();
    s.store
        .conn()
        .execute(
            "INSERT INTO relations (sync_id, source_id, target_id, relation, judgment_status, created_at, updated_at)
             VALUES ('rel-1', ?1, ?2, 'related', 'judged', 'x', 'x')",
            [&a.sync_id, &b.sync_id],
        )
        .unwrap();
    s.store.delete(a.id, false).unwrap();
    assert_eq!(s.store.get(a.id).unwrap_err().code, ErrorCode::ObservationNotFound);
    assert!(s.search(&crate::search::SearchQuery::new("xyzzy")).unwrap().hits.is_empty());
    assert!(s.store.list(&ListFilter { limit: 10, ..Default::default() }).unwrap().iter().all(|o| o.id != a.id));
    assert_eq!(s.store.delete(a.id, false).unwrap_err().code, ErrorCode::ObservationNotFound);
    s.store.delete(b.id, true).unwrap();
    let status: String = s.store.conn().query_row("SELECT judgment_status FROM relations", [], |r| r.get(0)).unwrap();
    assert_eq!(status, "orphaned");
    // The soft-deleted one can still be purged.
    s.store.delete(a.id, true).unwrap();
    assert_eq!(s.store.delete(a.id, true).unwrap_err().code, ErrorCode::ObservationNotFound);
}

fn a_live_updated(s: &crate::store::Store, id: i64) -> String {
    s.get(id).unwrap().updated_at
}

#[test]
fn a_soft_deleted_memory_waits_in_the_trash_and_comes_back_whole() {
    let (mut s, clock) = crate::testutil::core_with_clock();
    let a = s.store.save(&obs("p", "alpha memory", "plugh content")).unwrap();
    let b = s.store.save(&obs("q", "beta memory", "other")).unwrap();
    let trash = |s: &crate::store::Store, project: Option<&str>| -> Vec<i64> {
        let filter = ListFilter { project: project.map(Into::into), limit: 10, deleted: true, ..Default::default() };
        s.list(&filter).unwrap().iter().map(|o| o.id).collect()
    };
    assert!(trash(&s.store, None).is_empty());
    let unchanged = s.store.restore(a.id).unwrap();
    assert_eq!(
        (unchanged.updated_at.as_str(), unchanged.deleted_at.as_deref()),
        (a_live_updated(&s.store, a.id).as_str(), None)
    );

    s.store.delete(b.id, false).unwrap();
    clock.advance(Duration::seconds(5));
    s.store.delete(a.id, false).unwrap();
    assert_eq!(trash(&s.store, None), vec![a.id, b.id], "latest deletion first, not the highest id");
    assert_eq!(trash(&s.store, Some("p")), vec![a.id]);
    assert!(s.search(&crate::search::SearchQuery::new("plugh")).unwrap().hits.is_empty());

    let back = s.store.restore(a.id).unwrap();
    assert_eq!((back.title.as_str(), back.content.as_str()), ("alpha memory", "plugh content"));
    assert!(back.deleted_at.is_none());
    assert_eq!(s.store.get(a.id).unwrap().id, a.id);
    assert_eq!(s.search(&crate::search::SearchQuery::new("plugh")).unwrap().hits[0].observation.id, a.id);
    assert_eq!(trash(&s.store, None), vec![b.id]);
    assert_eq!(s.store.restore(a.id).unwrap().id, a.id, "a retried restore succeeds");
    assert_eq!(trash(&s.store, None), vec![b.id]);

    s.store.delete(b.id, true).unwrap();
    assert_eq!(s.store.restore(b.id).unwrap_err().code, ErrorCode::ObservationNotFound, "a hard delete is final");
    assert_eq!(s.store.restore(999).unwrap_err().code, ErrorCode::ObservationNotFound);
}

#[test]
fn pin_and_decay_types() {
    let (mut s, _) = store_with_clock();
    let mut d = obs("p", "Use axum", "decided on axum");
    d.kind = Some("Decision".into());
    let out = s.save(&d).unwrap();
    let got = s.get(out.id).unwrap();
    assert_eq!(got.kind, "decision");
    assert!(got.review_after.is_some());
    assert!(s.set_pinned(out.id, true).unwrap().pinned);
    assert!(!s.set_pinned(out.id, false).unwrap().pinned);
}

/// Two processes on one file: while another connection holds the write lock having changed
/// the content, an update of the title waits for it, then starts from what it committed.
/// Reading the memory before taking the lock (as `update` once did) writes the stale content
/// back and leaves the other version out of the revisions.
#[test]
fn update_reads_the_memory_inside_its_write_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cairn.db");
    let mut a = crate::Store::open(&path).unwrap();
    let id = a.save(&obs("p", "Deploy window", "Tuesdays")).unwrap().id;
    let (locked, wait_locked) = std::sync::mpsc::channel();
    let other = std::thread::spawn(move || {
        let mut b = crate::Store::open(&path).unwrap();
        b.write(|tx| {
            tx.execute(
                "INSERT INTO observation_revisions (observation_id, revision, type, title, content, replaced_at)
                 SELECT id, revision_count, type, title, content, updated_at FROM observations WHERE id = ?1",
                [id],
            )?;
            tx.execute(
                "UPDATE observations SET content = 'Thursdays', revision_count = revision_count + 1 WHERE id = ?1",
                [id],
            )?;
            locked.send(()).unwrap();
            // Long enough for the other update to have read (if it reads first) and be waiting.
            std::thread::sleep(std::time::Duration::from_millis(300));
            Ok(())
        })
        .unwrap();
    });
    wait_locked.recv().unwrap();
    let updated = a.update(id, &ObservationPatch { title: Some("Release window".into()), ..Default::default() });
    other.join().unwrap();
    let updated = updated.unwrap();
    assert_eq!((updated.title.as_str(), updated.content.as_str()), ("Release window", "Thursdays"));
    assert_eq!(updated.revision_count, 3);
    let history: Vec<(String, String)> = a.revisions(id).unwrap().into_iter().map(|r| (r.title, r.content)).collect();
    assert_eq!(
        history,
        [("Deploy window".into(), "Tuesdays".into()), ("Deploy window".into(), "Thursdays".into())],
        "every version is in the history once"
    );
}

#[test]
fn a_session_summary_is_written_whole_or_not_at_all() {
    let (mut s, _) = store_with_clock();
    s.save_session_summary(Some("s1"), Some("p"), "Goal: fix auth").unwrap();
    // The second step (the session row) fails: the memory's revision is rolled back with it.
    s.conn()
        .execute_batch(
            "CREATE TEMP TRIGGER refuse_summary BEFORE UPDATE OF summary ON sessions
             BEGIN SELECT RAISE(ABORT, 'refused'); END",
        )
        .unwrap();
    assert!(s.save_session_summary(Some("s1"), Some("p"), "Goal: fix auth. Done: token refresh").is_err());
    assert!(s.save_session_summary(Some("s2"), Some("p"), "Goal: new session").is_err());
    let memories = s.list(&ListFilter { limit: 10, ..ListFilter::default() }).unwrap();
    let contents: Vec<&str> = memories.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["Goal: fix auth"], "no memory of a summary whose session row failed");
    assert_eq!(memories[0].revision_count, 1);
    assert!(s.get_session("s2").is_err(), "nor its session");
    assert_eq!(s.get_session("s1").unwrap().summary.as_deref(), Some("Goal: fix auth"));
}

#[test]
fn memories_per_day_lists_every_day_of_the_window_with_live_memories_counted() {
    let (mut s, clock) = store_with_clock();
    s.save(&obs("alpha", "Old", "saved two days before today")).unwrap();
    clock.advance(Duration::days(2));
    s.save(&obs("alpha", "One", "first of today")).unwrap();
    let gone = s.save(&obs("alpha", "Two", "deleted, so not counted")).unwrap();
    s.delete(gone.id, false).unwrap();
    s.save(&obs("beta", "Three", "another project, today")).unwrap();

    let all = s.memories_per_day(None, 3).unwrap();
    let counts: Vec<i64> = all.days.iter().map(|d| d.memories).collect();
    assert_eq!(counts, [1, 0, 2], "oldest first, the empty day listed");
    assert_eq!(all.days[2].day.len(), 10, "YYYY-MM-DD");
    assert!(all.days[0].day < all.days[2].day);

    let alpha = s.memories_per_day(Some("alpha"), 3).unwrap();
    assert_eq!(alpha.days.iter().map(|d| d.memories).collect::<Vec<_>>(), [1, 0, 1]);
    assert_eq!(s.memories_per_day(None, 0).unwrap().days.len(), 1, "at least today");
    assert_eq!(s.memories_per_day(None, 100_000).unwrap().days.len(), crate::views::MAX_CHART_DAYS);
}

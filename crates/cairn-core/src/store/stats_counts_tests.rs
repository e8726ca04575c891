//! The kept counts equal a recount after any sequence of writes, on every write path.

use proptest::prelude::*;

use crate::memory::{NewObservation, ObservationPatch};
use crate::prompts::NewPrompt;
use crate::relations::Comparison;
use crate::sessions::NewSession;
use crate::store::Store;
use crate::testutil::store_with_clock;

const PROJECTS: [&str; 3] = ["p", "q", ""];
const TYPES: [&str; 3] = ["manual", "decision", "bugfix"];

fn assert_counts_exact(store: &Store, after: &str) {
    let kept = store.kept_stats_counts().unwrap();
    let counted = store.recounted_stats_counts().unwrap();
    assert!(kept == counted, "after {after}: {:?}", kept.differences(&counted));
}

/// Live memory ids, oldest first.
fn ids(store: &Store, deleted: bool) -> Vec<i64> {
    let sql = if deleted {
        "SELECT id FROM observations WHERE deleted_at IS NOT NULL ORDER BY id"
    } else {
        "SELECT id FROM observations WHERE deleted_at IS NULL ORDER BY id"
    };
    let mut stmt = store.conn().prepare(sql).unwrap();
    stmt.query_map([], |r| r.get(0)).unwrap().collect::<rusqlite::Result<_>>().unwrap()
}

fn pick<T: Copy>(items: &[T], n: u64) -> Option<T> {
    (!items.is_empty()).then(|| items[(n % items.len() as u64) as usize])
}

/// One write chosen by `op`, its details by `n`; returns what it was.
#[allow(clippy::too_many_lines)]
fn apply(store: &mut Store, peer: &mut Store, op: u8, n: u64) -> String {
    let project = PROJECTS[(n % 3) as usize];
    let kind = TYPES[((n / 3) % 3) as usize];
    let live = ids(store, false);
    let deleted = ids(store, true);
    match op {
        0 | 1 => {
            let new = NewObservation {
                title: format!("title {n}"),
                content: format!("content {n} of a memory"),
                kind: Some(kind.into()),
                project: Some(project.into()),
                scope: Some(if n.is_multiple_of(5) { "personal" } else { "project" }.into()),
                // A shared topic key now and then: the save revises instead of inserting.
                topic_key: (n.is_multiple_of(4)).then(|| format!("topic/{}", n % 2)),
                pinned: n.is_multiple_of(7),
                session_id: (n.is_multiple_of(6)).then(|| format!("s{}", n % 3)),
                ..NewObservation::default()
            };
            let _ = store.save(&new);
            "save".into()
        }
        2 => {
            if let Some(id) = pick(&live, n) {
                let patch = ObservationPatch {
                    kind: (n.is_multiple_of(2)).then(|| kind.into()),
                    project: (n.is_multiple_of(3)).then(|| project.into()),
                    content: (n.is_multiple_of(5)).then(|| format!("edited {n}")),
                    ..ObservationPatch::default()
                };
                let _ = store.update(id, &patch);
            }
            "update".into()
        }
        3 => {
            if let Some(id) = pick(&live, n) {
                store.delete(id, false).unwrap();
            }
            "soft delete".into()
        }
        4 => {
            if let Some(id) = pick(&live, n).or(pick(&deleted, n)) {
                store.delete(id, true).unwrap();
            }
            "hard delete".into()
        }
        5 => {
            if let Some(id) = pick(&deleted, n) {
                let _ = store.restore(id);
            }
            "restore".into()
        }
        6 => {
            if let Some(id) = pick(&live, n) {
                store.set_pinned(id, n.is_multiple_of(2)).unwrap();
            }
            "pin".into()
        }
        7 => {
            let session =
                NewSession { id: format!("s{}", n % 3), project: Some(project.into()), ..NewSession::default() };
            let _ = store.start_session(&session);
            let prompt = NewPrompt {
                content: format!("prompt {n}"),
                session_id: Some(session.id.clone()),
                project: Some(project.into()),
                ..NewPrompt::default()
            };
            let _ = store.add_prompt(&prompt);
            "session and prompt".into()
        }
        8 => {
            let prompt: Option<i64> =
                store.optional_i64("SELECT id FROM prompts ORDER BY id DESC LIMIT 1", []).unwrap();
            if let Some(id) = prompt {
                let _ = store.delete_prompt(id);
            }
            let _ = store.delete_session(&format!("s{}", n % 3));
            "delete prompt and session".into()
        }
        9 => {
            let model = if n.is_multiple_of(2) { "model-a" } else { "model-b" };
            let pending = store.pending_embeddings(model, 3).unwrap();
            let items: Vec<_> = pending.into_iter().map(|p| (p, vec![0.5_f32; 4])).collect();
            store.put_embeddings(model, &items).unwrap();
            if n.is_multiple_of(5) {
                store.clear_embeddings(Some("model-a")).unwrap();
            }
            "vectors".into()
        }
        10 => {
            if let (Some(a), Some(b)) = (pick(&live, n), pick(&live, n / 7)) {
                let comparison = Comparison {
                    memory_id_a: a,
                    memory_id_b: b,
                    relation: "related".into(),
                    confidence: 0.9,
                    reasoning: "same subject".into(),
                    model: None,
                };
                let _ = store.compare(&comparison);
            }
            "relation".into()
        }
        11 => {
            let (from, to) = (PROJECTS[(n % 2) as usize], PROJECTS[((n + 1) % 2) as usize]);
            let _ = store.migrate_project(from, to);
            "migrate project".into()
        }
        12 => {
            // Sync both ways: what one store wrote arrives in the other through the journal.
            let pending = store.sync_pending("peer-b", None, usize::MAX).unwrap();
            if let Some(last) = pending.last().map(|m| m.seq) {
                peer.apply_mutations("peer-a", &pending).unwrap();
                store.sync_ack("peer-b", last).unwrap();
            }
            let pending = peer.sync_pending("peer-a", None, usize::MAX).unwrap();
            if let Some(last) = pending.last().map(|m| m.seq) {
                store.apply_mutations("peer-b", &pending).unwrap();
                peer.sync_ack("peer-a", last).unwrap();
            }
            "sync".into()
        }
        13 => {
            let bytes = serde_json::to_vec(&store.export(None).unwrap()).unwrap();
            peer.import_bytes(&bytes).unwrap();
            "import".into()
        }
        _ => {
            // A memory stored with the tags in, then the rewrite that redacts it.
            store.set_redaction(crate::text::Redaction::PRIVATE);
            let secret = NewObservation {
                title: format!("key {n}"),
                content: "the key is AKIAQWERTYUIOPASDFGH".into(),
                project: Some(project.into()),
                ..NewObservation::default()
            };
            let _ = store.save(&secret);
            store.set_redaction(crate::text::Redaction::default());
            store.privacy_rewrite(n.is_multiple_of(2)).unwrap();
            "privacy rewrite".into()
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn kept_counts_equal_a_recount_after_any_writes(steps in prop::collection::vec((0u8..15, any::<u64>()), 1..50)) {
        let (mut store, _) = store_with_clock();
        let (mut peer, _) = store_with_clock();
        for project in ["p", "q"] {
            store.sync_enrol(project).unwrap();
            peer.sync_enrol(project).unwrap();
        }
        for (op, n) in steps {
            let what = apply(&mut store, &mut peer, op, n);
            assert_counts_exact(&store, &what);
            assert_counts_exact(&peer, &format!("{what} (peer)"));
        }
    }
}

#[test]
fn stats_reads_the_kept_counts() {
    let (mut store, _) = store_with_clock();
    for (i, project) in ["p", "p", "q"].iter().enumerate() {
        let new = NewObservation {
            title: format!("t{i}"),
            content: format!("c{i}"),
            project: Some((*project).into()),
            pinned: i == 0,
            ..NewObservation::default()
        };
        store.save(&new).unwrap();
    }
    let last = ids(&store, false)[2];
    store.delete(last, false).unwrap();
    let stats = store.stats().unwrap();
    assert_eq!((stats.total_observations, stats.deleted_observations, stats.pinned_observations), (2, 1, 1));
    let projects: Vec<_> = stats.by_project.iter().map(|p| (p.project.as_str(), p.observations)).collect();
    // q has a session still (the default one), so it stays listed with no live memory.
    assert!(projects.contains(&("p", 2)), "{projects:?}");
    assert_eq!(stats.by_type.values().sum::<i64>(), 2);
}

#[test]
fn a_count_out_of_step_is_found_and_rewritten() {
    let (mut store, _) = store_with_clock();
    store.save(&crate::testutil::obs("p", "t", "c")).unwrap();
    store.conn().execute("UPDATE stats_counts SET n = n + 5 WHERE kind = 'memories'", []).unwrap();
    let differences = store.kept_stats_counts().unwrap().differences(&store.recounted_stats_counts().unwrap());
    assert_eq!(differences, vec!["memories/: 6 kept, 1 counted".to_owned()]);
    store.rewrite_stats_counts().unwrap();
    assert_counts_exact(&store, "rewrite");
}

#[test]
fn the_migration_counts_a_store_that_had_rows_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cairn.db");
    {
        let mut store = Store::open(&path).unwrap();
        for i in 0..5 {
            store.save(&crate::testutil::obs(if i % 2 == 0 { "p" } else { "q" }, &format!("t{i}"), "c")).unwrap();
        }
        // Back to the schema before the counts: the table and its triggers gone.
        let conn = store.conn();
        let triggers: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_schema WHERE type = 'trigger' AND name LIKE 'stats_%'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        for trigger in triggers {
            conn.execute_batch(&format!("DROP TRIGGER {trigger}")).unwrap();
        }
        conn.execute_batch(
            "DROP TABLE stats_counts; DROP INDEX observations_project_updated; PRAGMA user_version = 13",
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.kept_stats_counts().unwrap().get("memories", ""), 5);
    assert_counts_exact(&store, "the migration's backfill");
}

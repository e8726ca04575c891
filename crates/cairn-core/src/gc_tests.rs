//! `gc`: other models' vectors and old spool ids go, the current model's vectors and every
//! sync row stay, a dry run changes nothing, and the files shrink.

use super::*;
use crate::search::semantic::Semantic;
use crate::store::Store;
use crate::testutil::obs;

const OLD_MODEL: &str = "test:old-model";
const NEW_MODEL: &str = "test:new-model";

/// A file store of `n` memories, the first half with vectors of the old model and the rest of
/// the new one, big enough that dropping the old ones frees pages; two spool ids, one applied
/// long ago.
fn store_with_two_models(dir: &std::path::Path, n: usize) -> Core {
    let mut store = Store::open(&dir.join("cairn.db")).unwrap();
    for i in 0..n {
        store.save(&obs("p", &format!("memory {i}"), &format!("what memory {i} says"))).unwrap();
    }
    let pending = store.pending_embeddings(OLD_MODEL, n).unwrap();
    let vector = vec![0.5_f32; 384];
    let (old, new): (Vec<_>, Vec<_>) =
        pending.into_iter().map(|p| (p, vector.clone())).partition(|(p, _)| p.id % 2 == 0);
    store.put_embeddings(OLD_MODEL, &old).unwrap();
    store.put_embeddings(NEW_MODEL, &new).unwrap();
    store
        .conn()
        .execute_batch(
            "INSERT INTO spool_events (id, applied_at) VALUES ('ev-old', '2001-01-01T00:00:00.000Z'),
                                                              ('ev-new', '2999-01-01T00:00:00.000Z');",
        )
        .unwrap();
    let mut core = Core::new(store);
    core.semantic = Some(Semantic::pending(NEW_MODEL.to_owned()));
    core
}

fn vectors(core: &Core, model: &str) -> i64 {
    core.store.count_embeddings(model).unwrap()
}

fn spool_ids(core: &Core) -> Vec<String> {
    let mut stmt = core.store.conn().prepare("SELECT id FROM spool_events ORDER BY id").unwrap();
    stmt.query_map([], |r| r.get(0)).unwrap().collect::<rusqlite::Result<_>>().unwrap()
}

#[test]
fn a_dry_run_reports_and_changes_nothing_then_gc_drops_only_the_old_models_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = store_with_two_models(dir.path(), 200);
    assert_eq!((vectors(&core, OLD_MODEL), vectors(&core, NEW_MODEL)), (100, 100));

    let dry = core.gc(&GcRequest { dry_run: true }).unwrap();
    assert_eq!(dry.model_in_use.as_deref(), Some(NEW_MODEL));
    assert_eq!(dry.old_model_vectors, GcRows { rows: 100, bytes: 100 * 384 * 4 });
    assert_eq!(dry.applied_spool_events.rows, 1);
    assert!(dry.memory_store.after_bytes < dry.memory_store.before_bytes, "{dry:?}");
    assert!(!dry.memory_store.vacuumed);
    assert_eq!(vectors(&core, OLD_MODEL), 100, "a dry run drops nothing");
    assert_eq!(spool_ids(&core), ["ev-new", "ev-old"]);
    assert!(!dir.path().join(crate::history::HISTORY_DB_FILE).exists(), "a dry run creates no archive");

    let done = core.gc(&GcRequest { dry_run: false }).unwrap();
    assert_eq!(done.old_model_vectors.rows, 100);
    assert_eq!((vectors(&core, OLD_MODEL), vectors(&core, NEW_MODEL)), (0, 100), "the model in use keeps its vectors");
    assert_eq!(spool_ids(&core), ["ev-new"], "a spool id applied within the month is still needed");
    assert!(done.memory_store.vacuumed);
    assert!(done.memory_store.after_bytes < done.memory_store.before_bytes, "{done:?}");
    assert_eq!(done.history_archive, None, "no archive in this data dir");
    let kept: Vec<&str> = done.kept.iter().map(|k| k.what.as_str()).collect();
    assert_eq!(kept, ["sync journal", "sync tombstones"]);

    let again = core.gc(&GcRequest { dry_run: false }).unwrap();
    assert_eq!((again.old_model_vectors.rows, again.applied_spool_events.rows), (0, 0), "nothing left to drop");
}

#[test]
fn without_a_model_every_vector_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = store_with_two_models(dir.path(), 10);
    core.semantic = None;
    let report = core.gc(&GcRequest { dry_run: false }).unwrap();
    assert_eq!(report.model_in_use, None);
    assert_eq!((vectors(&core, OLD_MODEL), vectors(&core, NEW_MODEL)), (5, 5));
    assert!(report.notes.iter().any(|n| n.contains("vectors of every model kept")), "{report:?}");
}

#[test]
fn the_archive_is_rebuilt_when_the_data_dir_has_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = store_with_two_models(dir.path(), 4);
    core.history.db().unwrap();
    let report = core.gc(&GcRequest { dry_run: false }).unwrap();
    let archive = report.history_archive.expect("the archive's sizes");
    assert!(archive.vacuumed && archive.after_bytes > 0, "{archive:?}");
}

#[test]
fn in_a_group_of_writes_the_store_is_not_rebuilt_and_the_report_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = store_with_two_models(dir.path(), 4);
    core.store.conn().execute_batch("BEGIN").unwrap();
    let report = core.gc(&GcRequest { dry_run: false }).unwrap();
    core.store.conn().execute_batch("COMMIT").unwrap();
    assert!(!report.memory_store.vacuumed);
    assert!(report.notes.iter().any(|n| n.contains("run gc again")), "{report:?}");
}

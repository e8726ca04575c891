use super::*;
use crate::testutil::obs;

fn filled_store(dir: &Path, memories: usize) -> Store {
    let mut store = Store::open(&dir.join("cairn.db")).unwrap();
    for i in 0..memories {
        let text = format!("memory {i} about the parser, the cache and the deploy script");
        store.save(&obs("p", &format!("title {i}"), &text)).unwrap();
    }
    store
}

fn vectors(store: &mut Store, dims: usize) {
    let pending = store.pending_embeddings("test-model", 10_000).unwrap();
    let items: Vec<_> = pending.into_iter().map(|p| (p, vec![0.5_f32; dims])).collect();
    store.put_embeddings("test-model", &items).unwrap();
}

#[test]
fn every_part_of_a_data_dir_is_counted_and_the_total_adds_them_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = filled_store(dir.path(), 300);
    vectors(&mut store, 384);
    std::fs::write(dir.path().join("history.db"), vec![0u8; 8192]).unwrap();
    std::fs::write(dir.path().join("history-fts.db"), vec![0u8; 4096]).unwrap();
    std::fs::create_dir_all(dir.path().join("models/some-model")).unwrap();
    std::fs::write(dir.path().join("models/some-model/weights.bin"), vec![0u8; 1000]).unwrap();
    std::fs::create_dir_all(dir.path().join("spool")).unwrap();
    std::fs::write(dir.path().join("spool/event.json"), b"{}").unwrap();

    let disk = store.disk_use().unwrap();
    assert_eq!(disk.history_bytes, 8192);
    assert_eq!(disk.history_index_bytes, 4096);
    assert_eq!(disk.models_bytes, 1000);
    // 300 vectors of 384 f32 are 460 KB: the largest part of this store.
    assert!(disk.vectors_bytes >= 300 * 384 * 4, "{disk:?}");
    assert!(disk.vectors_bytes > disk.memories_bytes, "{disk:?}");
    assert!(disk.memories_bytes > 0 && disk.search_index_bytes > 0, "{disk:?}");
    assert!(disk.sync_bytes >= 2, "the spool file at least: {disk:?}");
    assert!(disk.wal_bytes > 0, "the open store has its WAL: {disk:?}");
    let parts = disk.memories_bytes
        + disk.vectors_bytes
        + disk.search_index_bytes
        + disk.sync_bytes
        + disk.free_bytes
        + disk.wal_bytes
        + disk.history_bytes
        + disk.history_index_bytes
        + disk.models_bytes;
    assert_eq!(disk.total_bytes, parts);
    // The database's used pages are split, none lost: the parts in it match its pages.
    let page_size = store.pragma_u64("page_size").unwrap();
    let used = page_size * (store.pragma_u64("page_count").unwrap() - store.pragma_u64("freelist_count").unwrap());
    let in_db = disk.memories_bytes + disk.vectors_bytes + disk.search_index_bytes + disk.sync_bytes - 2;
    assert_eq!(in_db, used);
}

#[test]
fn a_request_reuses_the_measure_scaled_and_a_remeasure_takes_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = filled_store(dir.path(), 200);
    assert!(store.disk_use().unwrap().method.contains("measured now"));
    assert!(store.disk_use().unwrap().method.contains("earlier"), "nothing changed: the measure is re-used");
    vectors(&mut store, 768);
    let scaled = store.disk_use().unwrap();
    assert!(scaled.method.contains("earlier"), "a request never walks twice in 10 minutes: {scaled:?}");
    // The daemon's background refresh (and `cairn gc`) measure again.
    let grown = store.disk_use_remeasured().unwrap();
    assert!(grown.method.contains("measured now"), "{grown:?}");
    assert!(grown.vectors_bytes >= 200 * 768 * 4, "{grown:?}");
}

#[test]
fn a_new_process_takes_the_kept_measure_instead_of_walking_every_page() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = filled_store(dir.path(), 200);
    vectors(&mut store, 384);
    let measured = store.disk_use_remeasured().unwrap();
    assert!(dir.path().join(SPLIT_FILE).is_file(), "the measure is kept in the data dir");

    forget_in_process(&dir.path().join("cairn.db"));
    let kept = store.disk_use().unwrap();
    assert!(kept.method.contains("earlier"), "taken from the data dir, not walked: {kept:?}");
    assert_eq!(
        (kept.memories_bytes, kept.vectors_bytes, kept.search_index_bytes),
        (measured.memories_bytes, measured.vectors_bytes, measured.search_index_bytes)
    );
    // The daemon's background measure (and `cairn gc`) still walk.
    assert!(store.disk_use_remeasured().unwrap().method.contains("measured now"));
}

#[test]
fn a_kept_measure_a_day_old_or_unreadable_is_walked_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled_store(dir.path(), 50);
    let db = dir.path().join("cairn.db");
    let day_old = unix_now() - PERSISTED_FOR.as_secs() - 60;
    let stale = format!(r#"{{"measured_at":{day_old},"memories":1,"vectors":2,"search_index":3,"sync":4}}"#);
    for kept in [stale.as_str(), "not json", r#"{"measured_at": 99999999999999}"#] {
        std::fs::write(dir.path().join(SPLIT_FILE), kept).unwrap();
        forget_in_process(&db);
        let disk = store.disk_use().unwrap();
        assert!(disk.method.contains("measured now"), "{kept}: {disk:?}");
        assert!(disk.memories_bytes > 4, "{kept}: {disk:?}");
    }
}

#[test]
fn an_in_memory_store_has_its_tables_and_no_files() {
    let store = Store::open_in_memory().unwrap();
    let disk = store.disk_use().unwrap();
    assert!(disk.memories_bytes > 0);
    assert_eq!((disk.history_bytes, disk.models_bytes, disk.wal_bytes), (0, 0, 0));
}

#[test]
fn a_daemons_request_never_walks_it_counts_the_database_whole_until_the_background_measure() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = filled_store(dir.path(), 200);
    vectors(&mut store, 384);
    assert!(!store.has_disk_measure(), "no process has measured this store");
    store.leave_disk_walks_to_background();

    let pending = store.disk_use().unwrap();
    assert!(pending.method.starts_with("pending"), "{pending:?}");
    let page_size = store.pragma_u64("page_size").unwrap();
    let used = page_size * (store.pragma_u64("page_count").unwrap() - store.pragma_u64("freelist_count").unwrap());
    assert_eq!(pending.unsplit_bytes, used, "every used page counted, none split: {pending:?}");
    assert_eq!((pending.memories_bytes, pending.vectors_bytes, pending.search_index_bytes), (0, 0, 0));
    assert!(pending.total_bytes >= used + pending.wal_bytes, "{pending:?}");
    assert!(!dir.path().join(SPLIT_FILE).exists(), "the request did not walk (a walk keeps its measure)");

    // The daemon's background measure splits it; requests take that one from then on.
    store.disk_use_remeasured().unwrap();
    assert!(store.has_disk_measure());
    let split = store.disk_use().unwrap();
    assert!(split.method.contains("earlier"), "{split:?}");
    assert_eq!(split.unsplit_bytes, 0);
    assert!(split.vectors_bytes >= 200 * 384 * 4, "{split:?}");
}

#[test]
fn a_kept_measure_counts_as_known_for_a_new_process() {
    let dir = tempfile::tempdir().unwrap();
    let store = filled_store(dir.path(), 50);
    store.disk_use_remeasured().unwrap();
    forget_in_process(&dir.path().join("cairn.db"));
    assert!(store.has_disk_measure(), "the data dir's kept measure");
    std::fs::remove_file(dir.path().join(SPLIT_FILE)).unwrap();
    assert!(!store.has_disk_measure());
}

//! What a repository can hold in its chunk folders that sync must not follow, wait on, read
//! whole or apply more than once: links, FIFOs, oversized chunks, repeated and malformed
//! manifest entries. Each case in `.cairn/` and engram's `.engram/` alike, and nothing stored
//! before is lost.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{ImportSummary, Layout, ReadLimits, import_with_limits};
use crate::error::ErrorCode;
use crate::store::Store;
use crate::testutil::{obs, store_with_clock};

const LAYOUTS: [Layout; 2] = [Layout::Cairn, Layout::Engram];

/// Longest a test waits on an import that should return at once: only a guard against a hang
/// (a FIFO opened for reading waits for a writer forever), not a measure of speed.
const HANG_GUARD: Duration = Duration::from_secs(60);

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, bytes).unwrap();
    gz.finish().unwrap()
}

fn sha8(bytes: &[u8]) -> String {
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes))[..8].to_owned()
}

/// The JSON of a chunk holding one memory titled `title`, `padding` spaces after it (still
/// one JSON object: trailing spaces are allowed).
fn chunk_json(title: &str, padding: usize) -> Vec<u8> {
    let mut json = serde_json::to_vec(&json!({
        "sessions": [],
        "observations": [{
            "sync_id": format!("obs-{title}"), "session_id": "s1", "type": "manual", "title": title,
            "content": format!("content of {title}"), "project": "p", "scope": "project",
            "revision_count": 1, "duplicate_count": 1,
            "created_at": "2026-03-01 09:00:00", "updated_at": "2026-03-01 09:00:00"
        }],
        "prompts": []
    }))
    .unwrap();
    json.extend(std::iter::repeat_n(b' ', padding));
    json
}

fn entry(id: &str) -> Value {
    json!({"id": id, "created_by": "t", "created_at": "2026-03-01T10:00:00Z", "sessions": 0, "memories": 1, "prompts": 0})
}

/// A repository whose chunk folder holds `chunks` (id, gzip bytes) and a manifest of `entries`.
fn repo_with(layout: Layout, chunks: &[(String, Vec<u8>)], entries: &[Value]) -> tempfile::TempDir {
    let repo = tempfile::tempdir().unwrap();
    write_folder(&repo.path().join(layout.folder()), chunks, entries);
    repo
}

fn write_folder(folder: &Path, chunks: &[(String, Vec<u8>)], entries: &[Value]) {
    std::fs::create_dir_all(folder.join("chunks")).unwrap();
    for (id, bytes) in chunks {
        std::fs::write(folder.join("chunks").join(format!("{id}.jsonl.gz")), bytes).unwrap();
    }
    let manifest = json!({"version": 1, "chunks": entries});
    std::fs::write(folder.join("manifest.json"), serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
}

/// A chunk as a repository holds it: (id, gzip bytes).
fn good_chunk(title: &str) -> (String, Vec<u8>) {
    let json = chunk_json(title, 0);
    (sha8(&json), gzip(&json))
}

/// A store holding one memory already, which every case must keep.
fn store_with_a_memory() -> Store {
    let (mut store, _) = store_with_clock();
    store.save(&obs("p", "Already here", "stored before the import")).unwrap();
    store
}

fn titles(store: &Store) -> Vec<String> {
    let mut stmt = store.conn().prepare("SELECT title FROM observations ORDER BY title").unwrap();
    stmt.query_map([], |r| r.get(0)).unwrap().collect::<rusqlite::Result<_>>().unwrap()
}

fn applied_count(store: &Store) -> i64 {
    store.scalar_i64("SELECT count(*) FROM sync_chunks").unwrap()
}

fn codes(summary: &ImportSummary) -> Vec<&str> {
    summary.refused.iter().map(|r| r.code.as_str()).collect()
}

fn import(store: &mut Store, repo: &Path) -> ImportSummary {
    store.sync_import(repo, None).unwrap()
}

/// Import on another thread: the result, or a failed test once [`HANG_GUARD`] passed.
fn import_unless_it_hangs(repo: PathBuf) -> (Store, ImportSummary) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut store = store_with_a_memory();
        let summary = store.sync_import(&repo, None);
        let _ = tx.send((store, summary));
    });
    let (store, summary) = rx.recv_timeout(HANG_GUARD).expect("the import returned (it waited on a file instead)");
    (store, summary.unwrap())
}

fn mkfifo(path: &Path) {
    rustix::fs::mknodat(rustix::fs::CWD, path, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o644), 0)
        .unwrap();
}

#[test]
fn a_manifest_that_is_a_link_is_refused_not_followed() {
    for layout in LAYOUTS {
        // The link leads to a valid manifest and chunk outside the repository.
        let outside = tempfile::tempdir().unwrap();
        let (id, bytes) = good_chunk("From outside");
        write_folder(outside.path(), &[(id.clone(), bytes.clone())], &[entry(&id)]);
        let repo = repo_with(layout, &[(id, bytes)], &[]);
        let manifest = repo.path().join(layout.folder()).join("manifest.json");
        std::fs::remove_file(&manifest).unwrap();
        std::os::unix::fs::symlink(outside.path().join("manifest.json"), &manifest).unwrap();
        let mut store = store_with_a_memory();
        let summary = import(&mut store, repo.path());
        assert_eq!(codes(&summary), ["sync_symlink_refused"], "{layout:?}: {summary:?}");
        assert!(summary.refused[0].message.contains("manifest.json"), "{:?}", summary.refused[0]);
        assert_eq!(titles(&store), ["Already here"], "{layout:?}");
        // The status says so too, without following it.
        let status = store.sync_status(Some(repo.path())).unwrap();
        assert!(status.folders[0].error.as_deref().unwrap().contains("symbolic link"), "{status:?}");
    }
}

#[test]
fn a_chunk_folder_or_chunks_folder_that_is_a_link_is_refused_not_followed() {
    for layout in LAYOUTS {
        let outside = tempfile::tempdir().unwrap();
        let (id, bytes) = good_chunk("From outside");
        write_folder(outside.path(), &[(id.clone(), bytes)], &[entry(&id)]);
        // The whole folder a link.
        let repo = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), repo.path().join(layout.folder())).unwrap();
        let mut store = store_with_a_memory();
        let summary = import(&mut store, repo.path());
        assert_eq!(codes(&summary), ["sync_symlink_refused"], "{layout:?}: {summary:?}");
        assert_eq!(titles(&store), ["Already here"]);
        // Only its chunks folder a link: the chunk is refused, not read through it.
        let repo = repo_with(layout, &[], &[entry(&id)]);
        let chunks = repo.path().join(layout.folder()).join("chunks");
        std::fs::remove_dir(&chunks).unwrap();
        std::os::unix::fs::symlink(outside.path().join("chunks"), &chunks).unwrap();
        let summary = import(&mut store, repo.path());
        assert_eq!(codes(&summary), ["sync_symlink_refused"], "{layout:?}: {summary:?}");
        assert_eq!(titles(&store), ["Already here"]);
        assert_eq!(applied_count(&store), 0);
    }
}

#[test]
fn a_chunk_that_is_a_link_is_refused_and_the_others_apply() {
    for layout in LAYOUTS {
        let outside = tempfile::tempdir().unwrap();
        let (linked_id, linked) = good_chunk("Linked");
        std::fs::write(outside.path().join("chunk.gz"), &linked).unwrap();
        let (good_id, good) = good_chunk("Good");
        let repo = repo_with(layout, &[(good_id.clone(), good)], &[entry(&linked_id), entry(&good_id)]);
        let link = repo.path().join(layout.folder()).join("chunks").join(format!("{linked_id}.jsonl.gz"));
        std::os::unix::fs::symlink(outside.path().join("chunk.gz"), link).unwrap();
        let mut store = store_with_a_memory();
        let summary = import(&mut store, repo.path());
        assert_eq!(codes(&summary), ["sync_symlink_refused"], "{layout:?}: {summary:?}");
        assert_eq!(summary.refused[0].chunk_id, linked_id);
        assert_eq!(summary.chunks_applied, 1);
        assert_eq!(titles(&store), ["Already here", "Good"]);
    }
}

#[test]
fn a_fifo_chunk_or_manifest_is_refused_without_waiting_for_a_writer() {
    for layout in LAYOUTS {
        let (fifo_id, _) = good_chunk("Never written");
        let (good_id, good) = good_chunk("Good");
        let repo = repo_with(layout, &[(good_id.clone(), good)], &[entry(&fifo_id), entry(&good_id)]);
        mkfifo(&repo.path().join(layout.folder()).join("chunks").join(format!("{fifo_id}.jsonl.gz")));
        let (store, summary) = import_unless_it_hangs(repo.path().to_owned());
        assert_eq!(codes(&summary), ["sync_file_not_regular"], "{layout:?}: {summary:?}");
        assert!(summary.refused[0].message.contains("a FIFO"), "{:?}", summary.refused[0]);
        assert!(summary.refused[0].message.contains(&format!("{fifo_id}.jsonl.gz")), "{:?}", summary.refused[0]);
        assert_eq!(titles(&store), ["Already here", "Good"]);

        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir(repo.path().join(layout.folder())).unwrap();
        mkfifo(&repo.path().join(layout.folder()).join("manifest.json"));
        let (store, summary) = import_unless_it_hangs(repo.path().to_owned());
        assert_eq!(codes(&summary), ["sync_file_not_regular"], "{layout:?}: {summary:?}");
        assert_eq!(titles(&store), ["Already here"]);
    }
}

#[test]
fn a_chunk_listed_5000_times_is_applied_once() {
    for layout in LAYOUTS {
        let (id, bytes) = good_chunk("Listed often");
        let entries = vec![entry(&id); 5_000];
        let repo = repo_with(layout, &[(id, bytes)], &entries);
        let mut store = store_with_a_memory();
        let summary = import(&mut store, repo.path());
        assert_eq!((summary.chunks_applied, summary.chunks_already_applied), (1, 0), "{layout:?}");
        assert!(summary.refused.is_empty());
        assert_eq!(titles(&store), ["Already here", "Listed often"]);
        let status = store.sync_status(Some(repo.path())).unwrap();
        assert_eq!((status.folders[0].manifest_chunks, status.folders[0].pending_import), (1, 0));
        let again = import(&mut store, repo.path());
        assert_eq!((again.chunks_applied, again.chunks_already_applied), (0, 1));
    }
}

#[test]
fn a_chunk_over_the_cap_is_refused_as_too_large_and_not_marked_applied() {
    let limits = ReadLimits { manifest_bytes: 64 * 1024, chunk_bytes: 2_000, batch_bytes: 1 };
    for layout in LAYOUTS {
        // Inflates past the cap, though its file is small; its id is the hash of all of it.
        let bomb_json = chunk_json("Inflates too far", 10_000);
        let bomb = (sha8(&bomb_json), gzip(&bomb_json));
        // Its first 2,000 bytes are the whole chunk and hash to its id: the rest must not be
        // ignored.
        let long_json = chunk_json("Longer than it says", 10_000);
        let long = (sha8(&long_json[..2_000]), gzip(&long_json));
        // A file larger than the cap before it is inflated.
        let mut noise = Vec::new();
        let mut seed = 0x2545_f491_u32;
        for _ in 0..5_000 {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            noise.push(seed.to_le_bytes()[0]);
        }
        let big_file = ("0123abcd".to_owned(), noise);
        assert!(big_file.1.len() > 2_000);
        let good = good_chunk("Fits");
        let chunks = [bomb.clone(), long.clone(), big_file.clone(), good.clone()];
        let entries: Vec<Value> = chunks.iter().map(|(id, _)| entry(id)).collect();
        let repo = repo_with(layout, &chunks, &entries);
        let mut store = store_with_a_memory();
        let summary = import_with_limits(repo.path(), None, &mut store, limits).unwrap();
        assert_eq!(
            codes(&summary),
            ["sync_file_too_large", "sync_file_too_large", "sync_file_too_large"],
            "{layout:?}: {summary:?}"
        );
        let refused: Vec<&str> = summary.refused.iter().map(|r| r.chunk_id.as_str()).collect();
        assert_eq!(refused, [bomb.0.as_str(), long.0.as_str(), big_file.0.as_str()]);
        assert_eq!(summary.chunks_applied, 1);
        assert_eq!(titles(&store), ["Already here", "Fits"]);
        // Only the chunk that fits is recorded: the others are tried again next time.
        assert_eq!(applied_count(&store), 1);
    }
}

#[test]
fn a_manifest_over_the_cap_is_refused_before_it_is_read() {
    let limits = ReadLimits { manifest_bytes: 1_000, ..ReadLimits::DEFAULT };
    for layout in LAYOUTS {
        let (id, bytes) = good_chunk("Listed");
        let repo = repo_with(layout, &[(id.clone(), bytes)], &vec![entry(&id); 50]);
        let mut store = store_with_a_memory();
        let summary = import_with_limits(repo.path(), None, &mut store, limits).unwrap();
        assert_eq!(codes(&summary), ["sync_file_too_large"], "{layout:?}: {summary:?}");
        assert!(summary.refused[0].message.contains("manifest.json"));
        assert_eq!(titles(&store), ["Already here"]);
    }
}

#[test]
fn a_malformed_manifest_entry_is_refused_alone_and_the_valid_ones_apply() {
    for layout in LAYOUTS {
        let (first, first_bytes) = good_chunk("First");
        let (second, second_bytes) = good_chunk("Second");
        let entries = [
            entry(&first),
            json!({"id": 12}),
            json!({"created_by": "no id at all"}),
            json!({"id": "../../etc/passwd"}),
            entry(&second),
        ];
        let repo = repo_with(layout, &[(first, first_bytes), (second, second_bytes)], &entries);
        let mut store = store_with_a_memory();
        let summary = import(&mut store, repo.path());
        assert_eq!(summary.chunks_applied, 2, "{layout:?}: {summary:?}");
        assert_eq!(codes(&summary), ["sync_manifest_entry_invalid"; 3], "{summary:?}");
        let positions: Vec<&str> = summary.refused.iter().map(|r| r.chunk_id.as_str()).collect();
        assert_eq!(positions, ["manifest.json#2", "manifest.json#3", "manifest.json#4"]);
        assert!(summary.refused[0].message.contains("entry 2 of 5"), "{:?}", summary.refused[0]);
        assert!(summary.refused[1].message.contains("missing field `id`"), "{:?}", summary.refused[1]);
        assert!(summary.refused[2].message.contains("not a hex digest"), "{:?}", summary.refused[2]);
        assert_eq!(titles(&store), ["Already here", "First", "Second"]);
        let status = store.sync_status(Some(repo.path())).unwrap();
        assert_eq!((status.folders[0].manifest_chunks, status.folders[0].pending_import), (2, 0));
        assert!(status.folders[0].error.is_some());
    }
}

#[test]
fn export_refuses_a_linked_folder_or_manifest_and_writes_nothing_outside() {
    for layout in LAYOUTS {
        let outside = tempfile::tempdir().unwrap();
        let foreign = br#"{"version": 1, "chunks": [], "theirs": true}"#;
        std::fs::write(outside.path().join("manifest.json"), foreign).unwrap();
        let snapshot = |dir: &Path| -> Vec<(PathBuf, Vec<u8>)> {
            let mut files: Vec<_> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| {
                    let path = e.unwrap().path();
                    let bytes = std::fs::read(&path).unwrap_or_default();
                    (path, bytes)
                })
                .collect();
            files.sort();
            files
        };
        let before = snapshot(outside.path());
        let mut store = store_with_a_memory();

        // The folder is a link out of the repository.
        let repo = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), repo.path().join(layout.folder())).unwrap();
        let err = store.sync_export(repo.path(), &["p".to_owned()], layout).unwrap_err();
        assert_eq!(err.code, ErrorCode::SyncSymlinkRefused, "{layout:?}: {err:?}");
        assert_eq!(snapshot(outside.path()), before);

        // The manifest is a link out of the repository.
        let repo = tempfile::tempdir().unwrap();
        let folder = repo.path().join(layout.folder());
        std::fs::create_dir(&folder).unwrap();
        std::os::unix::fs::symlink(outside.path().join("manifest.json"), folder.join("manifest.json")).unwrap();
        let err = store.sync_export(repo.path(), &["p".to_owned()], layout).unwrap_err();
        assert_eq!(err.code, ErrorCode::SyncSymlinkRefused, "{layout:?}: {err:?}");
        assert_eq!(snapshot(outside.path()), before);

        // A link left where the temporary manifest goes is replaced, never written through.
        let repo = tempfile::tempdir().unwrap();
        let folder = repo.path().join(layout.folder());
        std::fs::create_dir(&folder).unwrap();
        std::os::unix::fs::symlink(outside.path().join("manifest.json"), folder.join("manifest.tmp")).unwrap();
        let summary = store.sync_export(repo.path(), &["p".to_owned()], layout).unwrap();
        assert_eq!(summary.projects[0].chunks.len(), 1);
        assert_eq!(snapshot(outside.path()), before);
        assert!(std::fs::symlink_metadata(folder.join("manifest.json")).unwrap().is_file());
        assert!(std::fs::symlink_metadata(folder.join("manifest.tmp")).is_err());
        // Another store reads it back.
        let (mut other, _) = store_with_clock();
        assert_eq!(import(&mut other, repo.path()).chunks_applied, 1);
        assert_eq!(titles(&other), ["Already here"]);
    }
}

#[test]
fn export_keeps_the_malformed_entries_and_keys_of_the_manifest_it_appends_to() {
    let repo = tempfile::tempdir().unwrap();
    let folder = repo.path().join(".cairn");
    std::fs::create_dir(&folder).unwrap();
    let theirs = json!({"version": 1, "chunks": [{"id": 12, "note": "someone else's"}], "origin": "engram"});
    std::fs::write(folder.join("manifest.json"), serde_json::to_vec(&theirs).unwrap()).unwrap();
    let mut store = store_with_a_memory();
    let summary = store.sync_export(repo.path(), &["p".to_owned()], Layout::Cairn).unwrap();
    let written: Value = serde_json::from_slice(&std::fs::read(folder.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(written["origin"], "engram");
    assert_eq!(written["chunks"][0], theirs["chunks"][0]);
    assert_eq!(written["chunks"][1]["id"], summary.projects[0].chunks[0].id.as_str());
    assert_eq!(written["chunks"].as_array().unwrap().len(), 2);
}

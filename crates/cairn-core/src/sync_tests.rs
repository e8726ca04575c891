//! Sync: the journal, git chunks both ways, engram's chunks, bad chunks, and convergence of
//! stores that exchange mutations in any order.

use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use serde_json::json;
use time::Duration;

use crate::error::ErrorCode;
use crate::memory::ObservationPatch;
use crate::relations::Comparison;
use crate::store::Store;
use crate::sync::git::Layout;
use crate::sync::{Mutation, Version};
use crate::testutil::{ManualClock, obs, store_with_clock};

#[path = "sync_provenance_tests.rs"]
mod provenance;

/// Everything two stores must agree on, in a stable order (contested flags are local notes).
fn dump(store: &Store) -> String {
    let conn = store.conn();
    let mut out = String::new();
    let mut stmt = conn
        .prepare(
            "SELECT sync_id, type, title, content, project, scope, coalesce(topic_key, ''), pinned,
                deleted_at IS NOT NULL, coalesce(hlc, '') FROM observations ORDER BY sync_id",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok(format!(
                "obs {} {} {:?} {:?} {} {} {} pinned={} deleted={} {}\n",
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, bool>(7)?,
                r.get::<_, bool>(8)?,
                r.get::<_, String>(9)?,
            ))
        })
        .unwrap();
    for row in rows {
        out.push_str(&row.unwrap());
    }
    let mut stmt = conn
        .prepare(
            "SELECT sync_id, source_id, target_id, relation, judgment_status FROM relations
             WHERE coalesce(marked_by_kind, '') != 'sync' ORDER BY sync_id",
        )
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok(format!(
                "rel {} {} {} {} {}\n",
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?
            ))
        })
        .unwrap();
    for row in rows {
        out.push_str(&row.unwrap());
    }
    let mut stmt = conn.prepare("SELECT sync_id, content FROM prompts ORDER BY sync_id").unwrap();
    for row in
        stmt.query_map([], |r| Ok(format!("prompt {} {:?}\n", r.get::<_, String>(0)?, r.get::<_, String>(1)?))).unwrap()
    {
        out.push_str(&row.unwrap());
    }
    out
}

fn count(store: &Store, sql: &str) -> i64 {
    store.scalar_i64(sql).unwrap()
}

fn id_of(store: &Store, sync_id: &str) -> i64 {
    store.conn().query_row("SELECT id FROM observations WHERE sync_id = ?1", [sync_id], |r| r.get(0)).unwrap()
}

fn export(store: &mut Store, repo: &Path) -> crate::sync::git::ExportSummary {
    store.sync_export(repo, &["p".to_owned()], Layout::Cairn).unwrap()
}

#[test]
fn journal_is_kept_only_for_enrolled_projects_in_the_write_transaction() {
    let (mut store, _) = store_with_clock();
    store.save(&obs("other", "Not synced", "this project does not sync")).unwrap();
    assert_eq!(count(&store, "SELECT count(*) FROM sync_journal"), 0);
    let first = store.save(&obs("p", "Before enrolment", "saved before the project synced")).unwrap();
    let enrolment = store.sync_enrol("p").unwrap();
    assert!(enrolment.first_time);
    // The snapshot: the session and the memory.
    assert_eq!(enrolment.snapshot_entries, 2);
    assert!(!store.sync_enrol("p").unwrap().first_time);
    let saved = store.save(&obs("p", "After enrolment", "journaled with a stamp")).unwrap();
    store.update(saved.id, &ObservationPatch { content: Some("edited".into()), ..Default::default() }).unwrap();
    store.set_pinned(first.id, true).unwrap();
    store.delete(saved.id, false).unwrap();
    let ops: Vec<(String, String)> = store
        .sync_pending("t", Some("p"), 100)
        .unwrap()
        .into_iter()
        .filter(|m| m.entity == "observation")
        .map(|m| (m.entity_key, m.op))
        .collect();
    assert_eq!(
        ops,
        vec![
            (first.sync_id.clone(), "upsert".into()),
            (saved.sync_id.clone(), "upsert".into()),
            (saved.sync_id.clone(), "upsert".into()),
            (first.sync_id.clone(), "upsert".into()),
            (saved.sync_id.clone(), "delete".into()),
        ]
    );
    // Every local write after enrolment carries a stamp of this store, newer each time.
    let stamps: Vec<Version> = store
        .sync_pending("t", Some("p"), 100)
        .unwrap()
        .iter()
        .filter_map(|m| m.payload.get("hlc").and_then(|h| h.as_str()).and_then(Version::parse))
        .collect();
    assert_eq!(stamps.len(), 4);
    assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
    assert!(stamps.iter().all(|s| s.node == store.sync_node_id().unwrap()));
    // A hard delete journals a tombstone.
    store.delete(first.id, true).unwrap();
    let last = store.sync_pending("t", Some("p"), 100).unwrap().pop().unwrap();
    assert_eq!((last.op.as_str(), last.payload["hard_delete"].as_bool()), ("delete", Some(true)));
    // Acknowledged entries are not pending any more; the mark never moves back.
    let seq = last.seq;
    store.sync_ack("t", seq).unwrap();
    store.sync_ack("t", 1).unwrap();
    assert_eq!(store.sync_pending_count("t", Some("p")).unwrap(), 0);
}

#[test]
fn private_content_never_reaches_the_journal() {
    let (mut store, _) = store_with_clock();
    store.sync_enrol("p").unwrap();
    let saved = store
        .save(&obs(
            "p",
            "Deploy key <private>title-secret</private>",
            "token <private>hunter2-secret</private> rotated",
        ))
        .unwrap();
    store
        .update(
            saved.id,
            &ObservationPatch {
                content: Some("now <private>second-secret</private> too".into()),
                ..Default::default()
            },
        )
        .unwrap();
    store
        .add_prompt(&crate::prompts::NewPrompt {
            content: "use <private>prompt-secret</private> please".into(),
            project: Some("p".into()),
            ..Default::default()
        })
        .unwrap();
    let journal: Vec<String> = store
        .conn()
        .prepare("SELECT payload FROM sync_journal")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(journal.len() >= 3);
    for payload in &journal {
        assert!(!payload.contains("secret"), "{payload}");
    }
}

#[test]
fn export_then_import_gives_equal_stores_and_edits_and_deletes_travel() {
    let repo = tempfile::tempdir().unwrap();
    let (mut a, _) = store_with_clock();
    let (mut b, _) = store_with_clock();
    let kept = a.save(&obs("p", "Kept", "a memory that stays")).unwrap();
    let edited = a.save(&obs("p", "Edited", "first text")).unwrap();
    let deleted = a.save(&obs("p", "Deleted", "gone soon")).unwrap();
    a.compare(&Comparison {
        memory_id_a: kept.id,
        memory_id_b: edited.id,
        relation: "related".into(),
        confidence: 0.9,
        reasoning: "same area".into(),
        model: None,
    })
    .unwrap();
    let first = export(&mut a, repo.path());
    assert!(first.projects[0].enrolled_now);
    assert_eq!(first.projects[0].chunks.len(), 1);
    let summary = b.sync_import(repo.path(), None).unwrap();
    assert_eq!((summary.chunks_applied, summary.refused.len()), (1, 0));
    assert_eq!(dump(&a), dump(&b));
    // Again: nothing to apply, nothing changes, the journal of B does not grow.
    let journal_before = count(&b, "SELECT count(*) FROM sync_journal");
    let again = b.sync_import(repo.path(), None).unwrap();
    assert_eq!((again.chunks_applied, again.chunks_already_applied), (0, 1));
    assert_eq!(count(&b, "SELECT count(*) FROM sync_journal"), journal_before);
    // Nothing new: no chunk.
    assert!(export(&mut a, repo.path()).projects[0].chunks.is_empty());

    a.update(edited.id, &ObservationPatch { content: Some("second text".into()), ..Default::default() }).unwrap();
    a.delete(deleted.id, false).unwrap();
    let second = export(&mut a, repo.path());
    assert_eq!(second.projects[0].mutations, 2);
    let summary = b.sync_import(repo.path(), None).unwrap();
    assert_eq!(summary.chunks_applied, 1);
    assert_eq!(dump(&a), dump(&b));
    let b_edited = id_of(&b, &edited.sync_id);
    assert_eq!(b.get(b_edited).unwrap().content, "second text");
    // The replaced text is a revision on B too.
    assert_eq!(b.revisions(b_edited).unwrap()[0].content, "first text");
    assert!(b.get(id_of(&b, &deleted.sync_id)).is_err());
    // A hard delete travels as a tombstone.
    a.delete(kept.id, true).unwrap();
    export(&mut a, repo.path());
    b.sync_import(repo.path(), None).unwrap();
    assert_eq!(count(&b, &format!("SELECT count(*) FROM observations WHERE sync_id = '{}'", kept.sync_id)), 0);
    assert_eq!(dump(&a), dump(&b));

    // B syncs back into the same folder: its own rows go, A's do not come back as new chunks.
    let b_new = b.save(&obs("p", "From B", "written on the second machine")).unwrap();
    let from_b = export(&mut b, repo.path());
    let written: usize = from_b.projects[0].chunks.iter().map(|c| c.memories).sum();
    assert!(written >= 1);
    a.sync_import(repo.path(), None).unwrap();
    assert!(a.get(id_of(&a, &b_new.sync_id)).is_ok());
    assert_eq!(dump(&a), dump(&b));
    let status = a.sync_status(Some(repo.path())).unwrap();
    assert_eq!(status.projects, vec!["p".to_owned()]);
    assert_eq!(status.folders[0].pending_import, 0);
    assert_eq!(status.folders[0].manifest_chunks, status.folders[0].applied_chunks);
}

#[test]
fn engram_layout_is_written_with_engram_field_names() {
    let repo = tempfile::tempdir().unwrap();
    let (mut a, _) = store_with_clock();
    a.save(&obs("p", "For engram", "read by engram too")).unwrap();
    a.sync_export(repo.path(), &["p".to_owned()], Layout::Engram).unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(repo.path().join(".engram/manifest.json")).unwrap()).unwrap();
    let entry = &manifest["chunks"][0];
    for field in ["id", "created_by", "created_at", "sessions", "memories", "prompts"] {
        assert!(entry.get(field).is_some(), "{field} in {entry}");
    }
    let id = entry["id"].as_str().unwrap();
    let gz = std::fs::read(repo.path().join(format!(".engram/chunks/{id}.jsonl.gz"))).unwrap();
    let mut json = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut json).unwrap();
    assert_eq!(
        &hex::encode(sha2::Digest::finalize(sha2::Digest::chain_update(sha2::Sha256::default(), &json)))[..8],
        id
    );
    let chunk: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let o = &chunk["observations"][0];
    for field in
        ["sync_id", "session_id", "type", "title", "content", "scope", "revision_count", "created_at", "updated_at"]
    {
        assert!(o.get(field).is_some(), "{field} in {o}");
    }
    assert_eq!(chunk["sessions"][0]["project"], "p");
    let (mut b, _) = store_with_clock();
    assert_eq!(b.sync_import(repo.path(), None).unwrap().chunks_applied, 1);
    assert_eq!(dump(&a), dump(&b));
}

#[test]
fn engram_chunks_as_committed_import_twice_without_duplicates() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/engram-sync");
    let repo = tempfile::tempdir().unwrap();
    copy_dir(&fixture.join(".engram"), &repo.path().join(".engram"));
    let (mut store, _) = store_with_clock();
    let first = store.sync_import(repo.path(), None).unwrap();
    assert_eq!((first.chunks_applied, first.refused.len()), (2, 0), "{first:?}");
    let dumped = dump(&store);
    let second = store.sync_import(repo.path(), None).unwrap();
    assert_eq!((second.chunks_applied, second.chunks_already_applied), (0, 2));
    assert_eq!(dump(&store), dumped);
    // The same chunks seen by a store that forgot it applied them: still no duplicates.
    store.conn().execute("DELETE FROM sync_chunks", []).unwrap();
    store.sync_import(repo.path(), None).unwrap();
    assert_eq!(dump(&store), dumped);
    assert_eq!(count(&store, "SELECT count(*) FROM observations"), 3);
    assert_eq!(count(&store, "SELECT count(*) FROM observations WHERE deleted_at IS NULL"), 2);
    assert_eq!(count(&store, "SELECT count(*) FROM prompts"), 1);
    let decision = store.get(id_of(&store, "obs-1a2b3c4d5e6f7a8b")).unwrap();
    assert_eq!(
        (decision.project.as_str(), decision.topic_key.as_deref()),
        ("billing", Some("architecture/invoice-export"))
    );
    assert_eq!(decision.created_at, "2026-03-01T09:30:00.000Z");
    // A memory whose session did not travel gets a stub session.
    assert_eq!(store.get_session("sess-eng-2").unwrap().directory, "(recovered-missing-session)");
    assert_eq!(store.get_session("sess-eng-1").unwrap().summary.as_deref(), Some("Set up the invoice exporter"));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, bytes).unwrap();
    gz.finish().unwrap()
}

fn sha8(bytes: &[u8]) -> String {
    hex::encode(<sha2::Sha256 as sha2::Digest>::digest(bytes))[..8].to_owned()
}

/// A chunk file as a test wants it: `(id in the manifest, file bytes or none)`.
fn good_chunk(title: &str) -> (String, Option<Vec<u8>>) {
    let json = serde_json::to_vec(&json!({
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
    (sha8(&json), Some(gzip(&json)))
}

#[test]
fn bad_chunks_are_refused_with_their_code_and_the_rest_is_applied() {
    let json_of = |v: serde_json::Value| serde_json::to_vec(&v).unwrap();
    let not_json = b"{\"sessions\": [".to_vec();
    let newer = json_of(json!({"version": 2, "sessions": [], "observations": [], "prompts": []}));
    let missing_fields = json_of(json!({"observations": [{"sync_id": "obs-x", "session_id": "s"}]}));
    let truncated = {
        let (_, bytes) = good_chunk("truncated");
        let bytes = bytes.unwrap();
        bytes[..bytes.len() / 2].to_vec()
    };
    let (truncated_id, _) = good_chunk("truncated");
    let cases: Vec<(&str, String, Option<Vec<u8>>, ErrorCode)> = vec![
        ("truncated gzip", truncated_id, Some(truncated), ErrorCode::SyncChunkCorrupt),
        ("not gzip at all", "0badf00d".into(), Some(b"plain text".to_vec()), ErrorCode::SyncChunkCorrupt),
        ("not JSON", sha8(&not_json), Some(gzip(&not_json)), ErrorCode::SyncChunkCorrupt),
        ("newer version", sha8(&newer), Some(gzip(&newer)), ErrorCode::SyncFormatTooNew),
        ("missing fields", sha8(&missing_fields), Some(gzip(&missing_fields)), ErrorCode::SyncMutationInvalid),
        ("missing file", "deadbeef".into(), None, ErrorCode::SyncChunkMissing),
        ("hash mismatch", "12345678".into(), good_chunk("mismatch").1, ErrorCode::SyncChunkHashMismatch),
        ("path in the id", "../../escape".into(), None, ErrorCode::SyncManifestEntryInvalid),
    ];
    for (name, id, bytes, code) in cases {
        let repo = tempfile::tempdir().unwrap();
        let folder = repo.path().join(".cairn");
        std::fs::create_dir_all(folder.join("chunks")).unwrap();
        let (before_id, before) = good_chunk("before");
        let (after_id, after) = good_chunk("after");
        for (cid, b) in [(&before_id, &before), (&id, &bytes), (&after_id, &after)] {
            if let Some(b) = b {
                std::fs::write(folder.join("chunks").join(format!("{cid}.jsonl.gz")), b).unwrap();
            }
        }
        let entries: Vec<_> =
            [&before_id, &id, &after_id].iter().map(|cid| json!({"id": cid, "created_by": "t", "created_at": "2026-03-01T10:00:00Z", "sessions": 0, "memories": 1, "prompts": 0})).collect();
        std::fs::write(folder.join("manifest.json"), json_of(json!({"version": 1, "chunks": entries}))).unwrap();
        let (mut store, _) = store_with_clock();
        let kept = store.save(&obs("p", "Already here", "stored before the import")).unwrap();
        let summary = store.sync_import(repo.path(), None).unwrap();
        assert_eq!(summary.chunks_applied, 2, "{name}: {summary:?}");
        assert_eq!(summary.refused.len(), 1, "{name}: {summary:?}");
        assert_eq!(summary.refused[0].code, code.as_str(), "{name}: {summary:?}");
        assert!(store.get(kept.id).is_ok(), "{name}");
        assert_eq!(count(&store, "SELECT count(*) FROM observations"), 3, "{name}");
        // Refused chunks are not recorded: fixed, they apply on the next run (an entry naming
        // no chunk is not one).
        let status = store.sync_status(Some(repo.path())).unwrap();
        let pending = usize::from(code != ErrorCode::SyncManifestEntryInvalid);
        assert_eq!(status.folders[0].pending_import, pending, "{name}");
        assert!(status.folders[0].error.is_some(), "{name}");
    }
}

#[test]
fn a_broken_or_newer_manifest_is_refused_and_nothing_is_lost() {
    for (manifest, code) in [
        ("{not json", ErrorCode::SyncManifestInvalid),
        (r#"{"version": 9, "chunks": []}"#, ErrorCode::SyncFormatTooNew),
        (r#"{"version": 1, "chunks": {"no": "list"}}"#, ErrorCode::SyncManifestInvalid),
    ] {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(repo.path().join(".cairn")).unwrap();
        std::fs::write(repo.path().join(".cairn/manifest.json"), manifest).unwrap();
        let (mut store, _) = store_with_clock();
        store.save(&obs("p", "Kept", "still here")).unwrap();
        let summary = store.sync_import(repo.path(), None).unwrap();
        assert_eq!(summary.refused[0].code, code.as_str(), "{manifest}");
        assert_eq!(count(&store, "SELECT count(*) FROM observations"), 1);
        // Export refuses to append to a manifest it cannot read, rather than overwrite it.
        let err = store.sync_export(repo.path(), &["p".to_owned()], Layout::Cairn).unwrap_err();
        assert_eq!(err.code, code, "{manifest}");
        assert_eq!(std::fs::read_to_string(repo.path().join(".cairn/manifest.json")).unwrap(), manifest);
    }
}

fn relation_payload(sync_id: &str, source: &str, target: &str) -> serde_json::Value {
    json!({
        "sync_id": sync_id, "source_id": source, "target_id": target, "relation": "supersedes",
        "judgment_status": "judged", "marked_by_actor": "agent", "marked_by_kind": "agent", "project": "p",
        "created_at": "2026-05-28T20:00:00.000Z", "updated_at": "2026-05-28T20:00:00.000Z"
    })
}

fn memory_mutation(sync_id: &str, title: &str) -> Mutation {
    Mutation {
        seq: 0,
        project: "p".into(),
        entity: "observation".into(),
        entity_key: sync_id.into(),
        op: "upsert".into(),
        payload: json!({
            "sync_id": sync_id, "session_id": "s1", "type": "manual", "title": title, "content": title,
            "project": "p", "scope": "project", "created_at": "2026-05-28T19:00:00.000Z",
            "updated_at": "2026-05-28T19:00:00.000Z"
        }),
    }
}

#[test]
fn a_relation_before_its_memories_waits_then_applies_or_dies() {
    let (mut store, _) = store_with_clock();
    let relation = Mutation {
        seq: 0,
        project: "p".into(),
        entity: "relation".into(),
        entity_key: "rel-1".into(),
        op: "upsert".into(),
        payload: relation_payload("rel-1", "obs-a", "obs-b"),
    };
    let report = store.apply_mutations("hub", std::slice::from_ref(&relation)).unwrap();
    assert_eq!(report.deferred, 1);
    assert_eq!(count(&store, "SELECT count(*) FROM relations"), 0);
    let report = store.apply_mutations("hub", &[memory_mutation("obs-a", "A")]).unwrap();
    assert_eq!(report.deferred_applied, 0);
    let report = store.apply_mutations("hub", &[memory_mutation("obs-b", "B")]).unwrap();
    assert_eq!(report.deferred_applied, 1);
    assert_eq!(store.get_relation_by_sync_id("rel-1").unwrap().relation, "supersedes");
    assert_eq!(count(&store, "SELECT count(*) FROM sync_deferred"), 0);
    // One whose memories never come is given up after its tries.
    let orphan =
        Mutation { payload: relation_payload("rel-2", "obs-x", "obs-y"), entity_key: "rel-2".into(), ..relation };
    store.apply_mutations("hub", &[orphan]).unwrap();
    for _ in 0..crate::sync::DEFERRED_TRIES {
        store.apply_mutations("hub", &[]).unwrap();
    }
    assert_eq!(count(&store, "SELECT count(*) FROM sync_deferred WHERE status = 'dead'"), 1);
    assert_eq!(store.sync_status(None).unwrap().deferred_dead, 1);
}

/// Deliver what `from` has not sent to `to` yet, the way a hub or a chunk would.
fn deliver(from: &mut Store, to: &mut Store, from_name: &str, to_name: &str, reverse: bool, twice: bool) {
    let target = format!("peer-{to_name}");
    let mut pending = from.sync_pending(&target, None, usize::MAX).unwrap();
    let Some(last) = pending.last().map(|m| m.seq) else { return };
    if reverse {
        pending.reverse();
    }
    let source = format!("peer-{from_name}");
    to.apply_mutations(&source, &pending).unwrap();
    if twice {
        to.apply_mutations(&source, &pending).unwrap();
    }
    from.sync_ack(&target, last).unwrap();
}

#[test]
fn concurrent_edits_converge_keep_the_loser_and_flag_the_pair() {
    let (mut a, _) = store_with_clock();
    let (mut b, clock_b) = store_with_clock();
    a.sync_enrol("p").unwrap();
    b.sync_enrol("p").unwrap();
    let saved = a.save(&obs("p", "Shared", "original")).unwrap();
    deliver(&mut a, &mut b, "a", "b", false, false);
    let b_id = id_of(&b, &saved.sync_id);
    // B's clock is hours behind; both edit without seeing the other.
    clock_b.advance(-Duration::hours(5));
    a.update(saved.id, &ObservationPatch { content: Some("edit on A".into()), ..Default::default() }).unwrap();
    b.update(b_id, &ObservationPatch { content: Some("edit on B".into()), ..Default::default() }).unwrap();
    deliver(&mut a, &mut b, "a", "b", false, false);
    deliver(&mut b, &mut a, "b", "a", false, false);
    assert_eq!(dump(&a), dump(&b));
    let winner = a.get(saved.id).unwrap().content;
    let loser = if winner == "edit on A" { "edit on B" } else { "edit on A" };
    for (store, id) in [(&a, saved.id), (&b, b_id)] {
        let revisions: Vec<String> = store.revisions(id).unwrap().into_iter().map(|r| r.content).collect();
        assert!(revisions.contains(&loser.to_owned()), "{revisions:?}");
        assert_eq!(
            count(
                store,
                "SELECT count(*) FROM relations WHERE marked_by_kind = 'sync' AND judgment_status = 'pending'"
            ),
            1
        );
    }
    // B, having seen A's stamp, edits again with its clock still behind: the edit wins.
    b.update(b_id, &ObservationPatch { content: Some("B after seeing A".into()), ..Default::default() }).unwrap();
    deliver(&mut b, &mut a, "b", "a", false, false);
    assert_eq!(a.get(saved.id).unwrap().content, "B after seeing A");
    // A delete racing an edit follows the same rule: the later one (by stamp) wins.
    a.delete(saved.id, false).unwrap();
    deliver(&mut a, &mut b, "a", "b", false, false);
    assert!(b.get(b_id).is_err());
    assert_eq!(dump(&a), dump(&b));
}

#[derive(Debug, Clone)]
enum Action {
    Create(usize),
    Edit(usize, usize, u8),
    Delete(usize, usize),
    Pin(usize, usize, bool),
    Judge(usize, usize, usize),
    Deliver(usize, usize, bool, bool),
    Tick(usize, i64),
    /// A memory whose text holds a NUL, as a cairn that did not refuse one stored it: no hub
    /// can take it, so it never leaves its store (nothing else touches it).
    CreateNul(usize),
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        2 => (0..3usize).prop_map(Action::Create),
        4 => (0..3usize, 0..6usize, any::<u8>()).prop_map(|(s, m, t)| Action::Edit(s, m, t)),
        1 => (0..3usize, 0..6usize).prop_map(|(s, m)| Action::Delete(s, m)),
        1 => (0..3usize, 0..6usize, any::<bool>()).prop_map(|(s, m, p)| Action::Pin(s, m, p)),
        1 => (0..3usize, 0..6usize, 0..6usize).prop_map(|(s, a, b)| Action::Judge(s, a, b)),
        4 => (0..3usize, 0..3usize, any::<bool>(), any::<bool>()).prop_map(|(f, t, r, d)| Action::Deliver(f, t, r, d)),
        1 => (0..3usize, 0..600i64).prop_map(|(s, secs)| Action::Tick(s, secs)),
    ]
}

struct Peers {
    stores: Vec<Store>,
    clocks: Vec<Arc<ManualClock>>,
    /// Sync ids of memories created anywhere, in creation order.
    memories: Vec<String>,
    /// Every text a store acknowledged, per memory sync id.
    written: Vec<(String, String)>,
    /// Sync ids of the memories holding a NUL, with the store that holds each.
    with_nul: Vec<(String, usize)>,
}

impl Peers {
    fn new() -> Peers {
        let mut stores = Vec::new();
        let mut clocks = Vec::new();
        for i in 0..3 {
            let (mut store, clock) = store_with_clock();
            if i == 2 {
                // One machine's clock is hours behind.
                clock.advance(-Duration::hours(3));
            }
            store.sync_enrol("p").unwrap();
            stores.push(store);
            clocks.push(clock);
        }
        Peers { stores, clocks, memories: Vec::new(), written: Vec::new(), with_nul: Vec::new() }
    }

    fn live(&self, store: usize, memory: usize) -> Option<i64> {
        let sync_id = self.memories.get(memory)?;
        self.stores[store]
            .conn()
            .query_row("SELECT id FROM observations WHERE sync_id = ?1 AND deleted_at IS NULL", [sync_id], |r| r.get(0))
            .ok()
    }

    fn run(&mut self, action: &Action) {
        match *action {
            Action::Create(s) => {
                let n = self.memories.len();
                let content = format!("memory {n} first written on store {s}");
                let saved = self.stores[s].save(&obs("p", &format!("Memory {n}"), &content)).unwrap();
                self.written.push((saved.sync_id.clone(), content));
                self.memories.push(saved.sync_id);
            }
            Action::Edit(s, m, t) => {
                if let Some(id) = self.live(s, m) {
                    let content = format!("edit {t} of memory {m} on store {s} at {}", self.written.len());
                    self.stores[s]
                        .update(id, &ObservationPatch { content: Some(content.clone()), ..Default::default() })
                        .unwrap();
                    self.written.push((self.memories[m].clone(), content));
                }
            }
            Action::Delete(s, m) => {
                if let Some(id) = self.live(s, m) {
                    self.stores[s].delete(id, false).unwrap();
                }
            }
            Action::Pin(s, m, pinned) => {
                if let Some(id) = self.live(s, m) {
                    self.stores[s].set_pinned(id, pinned).unwrap();
                }
            }
            Action::Judge(s, a, b) => {
                if let (Some(a), Some(b)) = (self.live(s, a), self.live(s, b))
                    && a != b
                {
                    self.stores[s]
                        .compare(&Comparison {
                            memory_id_a: a,
                            memory_id_b: b,
                            relation: "related".into(),
                            confidence: 0.5,
                            reasoning: "judged in a test".into(),
                            model: None,
                        })
                        .unwrap();
                }
            }
            Action::Deliver(f, t, reverse, twice) => self.deliver(f, t, reverse, twice),
            Action::CreateNul(s) => {
                let n = self.with_nul.len();
                let saved = self.stores[s].save(&obs("p", &format!("With a NUL {n}"), "before\0after")).unwrap();
                self.with_nul.push((saved.sync_id, s));
            }
            Action::Tick(s, secs) => self.clocks[s].advance(Duration::seconds(secs)),
        }
    }

    fn deliver(&mut self, f: usize, t: usize, reverse: bool, twice: bool) {
        if f == t {
            return;
        }
        let (from, to) = if f < t {
            let (left, right) = self.stores.split_at_mut(t);
            (&mut left[f], &mut right[0])
        } else {
            let (left, right) = self.stores.split_at_mut(f);
            (&mut right[0], &mut left[t])
        };
        deliver(from, to, &f.to_string(), &t.to_string(), reverse, twice);
    }

    /// A text some store acknowledged that a store no longer has, as the memory or a revision.
    fn first_lost_text(&self) -> Option<String> {
        for store in &self.stores {
            for (sync_id, text) in &self.written {
                let kept: bool = store
                    .conn()
                    .query_row(
                        "SELECT EXISTS(SELECT 1 FROM observations o WHERE o.sync_id = ?1 AND (o.content = ?2
                            OR EXISTS (SELECT 1 FROM observation_revisions r WHERE r.observation_id = o.id AND r.content = ?2)))",
                        [sync_id, text],
                        |r| r.get(0),
                    )
                    .unwrap();
                if !kept {
                    return Some(format!("{} lost {text:?}", store.sync_node_id().unwrap()));
                }
            }
        }
        None
    }

    fn settle(&mut self) {
        for _ in 0..3 {
            for f in 0..3 {
                for t in 0..3 {
                    self.deliver(f, t, false, false);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Three stores, one with its clock hours behind, exchange mutations in any order, twice
    /// or reversed: once everything is delivered they hold the same memories and relations,
    /// and every text any of them acknowledged is still there (as the memory or a revision).
    #[test]
    fn stores_exchanging_mutations_in_any_order_converge(actions in proptest::collection::vec(action(), 1..40)) {
        let mut peers = Peers::new();
        for action in &actions {
            peers.run(action);
        }
        peers.settle();
        let reference = dump(&peers.stores[0]);
        for store in &peers.stores[1..] {
            prop_assert_eq!(&dump(store), &reference);
        }
        let lost = peers.first_lost_text();
        prop_assert!(lost.is_none(), "{:?}", lost);
    }
}

/// A hub as the protocol describes it (seqs in commit order, idempotency keys, the entries it
/// can store committed together and the others refused one by one, pages capped by the hub),
/// with faults injected: the answer of a committed push lost, a push or pull that fails before
/// anything happens.
#[derive(Default)]
struct MemHub {
    rows: std::sync::Mutex<Vec<(i64, crate::sync::remote::PushEntry)>>,
    fault: std::sync::Mutex<HubFault>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq)]
enum HubFault {
    #[default]
    None,
    /// Commit the push, then the connection is cut: the client never hears the seqs.
    LoseCommittedAnswer,
    /// The push fails before the hub writes anything.
    FailPush,
    /// The second pull request of the round fails (after the first page was applied).
    FailSecondPull,
}

/// The hub's own page limit, under the client's: pulls take several pages.
const MEM_HUB_PAGE: usize = 3;

impl crate::sync::remote::HubTransport for MemHub {
    fn push(
        &self,
        body: &crate::sync::remote::PushRequest,
    ) -> Result<crate::sync::remote::PushResponse, crate::sync::remote::HubFailure> {
        let fault = *self.fault.lock().unwrap();
        if fault == HubFault::FailPush {
            return Err(crate::sync::remote::HubFailure::Unavailable("refused connection".into()));
        }
        let mut rows = self.rows.lock().unwrap();
        let mut answer = crate::sync::remote::PushResponse::default();
        for (index, entry) in body.entries.iter().enumerate() {
            if let Some(error_code) = mem_hub_refuses(entry) {
                let error = format!("entry {index}: refused ({error_code})");
                answer.rejected.push(crate::sync::remote::RejectedEntry {
                    index,
                    error_code: error_code.into(),
                    error,
                    ..Default::default()
                });
                continue;
            }
            let known = rows.iter().find(|(_, e)| e.project == entry.project && e.mutation_id == entry.mutation_id);
            let seq = if let Some((seq, _)) = known {
                *seq
            } else {
                let seq = rows.len() as i64 + 1;
                rows.push((seq, entry.clone()));
                seq
            };
            answer.accepted_seqs.push(seq);
        }
        if fault == HubFault::LoseCommittedAnswer {
            return Err(crate::sync::remote::HubFailure::Unavailable("connection reset".into()));
        }
        Ok(answer)
    }

    fn pull(
        &self,
        since: i64,
        limit: usize,
        project: Option<&str>,
    ) -> Result<crate::sync::remote::PullResponse, crate::sync::remote::HubFailure> {
        let rows = self.rows.lock().unwrap();
        let visible: Vec<_> = rows.iter().filter(|(_, e)| project.is_none_or(|p| e.project == p)).collect();
        let after: Vec<_> = visible.iter().filter(|(seq, _)| *seq > since).collect();
        let page = limit.min(MEM_HUB_PAGE);
        if since > 0 && *self.fault.lock().unwrap() == HubFault::FailSecondPull {
            return Err(crate::sync::remote::HubFailure::Unavailable("timed out".into()));
        }
        Ok(crate::sync::remote::PullResponse {
            mutations: after
                .iter()
                .take(page)
                .map(|(seq, e)| crate::sync::remote::PulledMutation {
                    seq: *seq,
                    project: e.project.clone(),
                    entity: e.entity.clone(),
                    entity_key: e.entity_key.clone(),
                    op: e.op.clone(),
                    payload: e.payload.clone(),
                    mutation_id: e.mutation_id.clone(),
                    ..Default::default()
                })
                .collect(),
            has_more: after.len() > page,
            latest_seq: visible.last().map_or(0, |(seq, _)| *seq),
            ..Default::default()
        })
    }
}

/// What the hub refuses entry by entry: a NUL (PostgreSQL stores none; a client that sends one
/// anyway is answered so) and, for the tests of parking, a memory titled so.
fn mem_hub_refuses(entry: &crate::sync::remote::PushEntry) -> Option<&'static str> {
    if crate::text::nul_path(&entry.payload).is_some() {
        Some("nul_character")
    } else if entry.payload["title"].as_str().is_some_and(|t| t.contains("hub refuses")) {
        Some("invalid_entry")
    } else {
        None
    }
}

/// One store as a round's store access (the daemon's is its writer).
struct Direct<'a>(std::cell::RefCell<&'a mut Store>);

impl crate::sync::remote::SyncAccess for Direct<'_> {
    fn with_store<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> crate::error::Result<T> + Send + 'static,
    ) -> crate::error::Result<T> {
        f(&mut self.0.borrow_mut())
    }
}

fn hub_remote() -> crate::settings::RemoteSettings {
    crate::settings::RemoteSettings {
        url: "https://hub.test".into(),
        token: "chub_test".into(),
        projects: vec!["p".into()],
        autosync: true,
        push_debounce: std::time::Duration::from_millis(500),
        pull_interval: std::time::Duration::from_secs(10),
    }
}

impl Peers {
    /// Store `s` runs one round with `hub` under `fault` (a failed round is retried later).
    fn round(&mut self, hub: &MemHub, s: usize, fault: HubFault) -> Option<crate::sync::remote::RoundReport> {
        *hub.fault.lock().unwrap() = fault;
        let access = Direct(std::cell::RefCell::new(&mut self.stores[s]));
        let outcome = crate::sync::remote::sync_round(&access, hub, &hub_remote());
        *hub.fault.lock().unwrap() = HubFault::None;
        match (fault, outcome) {
            (HubFault::None, outcome) => Some(outcome.expect("a round without faults")),
            (_, Ok(report)) => Some(report),
            (_, Err(e)) => {
                assert_eq!(e.code, ErrorCode::RemoteUnreachable, "{e:?}");
                None
            }
        }
    }
}

fn hub_action() -> impl Strategy<Value = (Action, HubFault)> {
    let fault = prop_oneof![
        4 => Just(HubFault::None),
        1 => Just(HubFault::LoseCommittedAnswer),
        1 => Just(HubFault::FailPush),
        1 => Just(HubFault::FailSecondPull),
    ];
    prop_oneof![
        5 => action().prop_filter("rounds instead of direct delivery", |a| !matches!(a, Action::Deliver(..))).prop_map(|a| (a, HubFault::None)),
        4 => (0..3usize, fault).prop_map(|(s, f)| (Action::Deliver(s, s, false, false), f)),
        1 => (0..3usize).prop_map(|s| (Action::CreateNul(s), HubFault::None)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Three stores (one clock hours behind) sync only through one hub, whose answers get lost
    /// after commits and whose requests fail mid-round, some memories holding a NUL no hub can
    /// store: once every store has run clean rounds, all hold the same memories and relations
    /// (but for those, each parked on its own store, in nobody's way), every acknowledged text
    /// survives, nothing is pending, and the hub holds each journal entry once.
    #[test]
    fn stores_syncing_through_a_failing_hub_converge(steps in proptest::collection::vec(hub_action(), 1..40)) {
        let mut peers = Peers::new();
        let hub = MemHub::default();
        for (action, fault) in &steps {
            match action {
                Action::Deliver(s, _, _, _) => { peers.round(&hub, *s, *fault); }
                other => peers.run(other),
            }
        }
        for _ in 0..2 {
            for s in 0..3 {
                let report = peers.round(&hub, s, HubFault::None).unwrap();
                prop_assert!(report.refused.is_empty());
            }
        }
        for s in 0..3 {
            let report = peers.round(&hub, s, HubFault::None).unwrap();
            prop_assert!(report.in_sync && report.pushed == 0 && report.pulled == 0, "{:?}", report);
        }
        let shared = |store: &Store| {
            let text = dump(store);
            text.lines().filter(|l| !peers.with_nul.iter().any(|(id, _)| l.contains(id.as_str()))).collect::<Vec<_>>().join("\n")
        };
        let reference = shared(&peers.stores[0]);
        for store in &peers.stores[1..] {
            prop_assert_eq!(&shared(store), &reference);
        }
        for (s, store) in peers.stores.iter().enumerate() {
            let mine = peers.with_nul.iter().filter(|(_, at)| *at == s).count();
            let (parked, _) = store.sync_parked(&hub_remote().target_key("p"), 0).unwrap();
            prop_assert_eq!(parked, i64::try_from(mine).unwrap(), "store {} parks its memories holding a NUL", s);
        }
        let rows = hub.rows.lock().unwrap();
        prop_assert!(rows.iter().all(|(_, e)| crate::text::nul_path(&e.payload).is_none()), "a NUL reached the hub");
        let mut keys: Vec<&str> = rows.iter().map(|(_, e)| e.mutation_id.as_deref().unwrap_or_default()).collect();
        keys.sort_unstable();
        let all = keys.len();
        keys.dedup();
        prop_assert_eq!(keys.len(), all, "a retried push was stored twice");
        drop(rows);
        let lost = peers.first_lost_text();
        prop_assert!(lost.is_none(), "{:?}", lost);
    }
}

fn titles(store: &Store) -> Vec<String> {
    let mut stmt = store.conn().prepare("SELECT title FROM observations ORDER BY title").unwrap();
    stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
}

/// An entry the hub refuses on its own and one no hub could store (a NUL, never sent) are
/// parked with their reasons: the changes before and after them reach the other store, the
/// round is in sync, the status names them, and once the refused memory is edited it travels.
#[test]
fn entries_a_hub_will_not_take_are_parked_and_the_others_sync() {
    let mut peers = Peers::new();
    let hub = MemHub::default();
    let a = &mut peers.stores[0];
    a.save(&obs("p", "before", "the first change")).unwrap();
    let refused = a.save(&obs("p", "the hub refuses this", "any text")).unwrap();
    a.save(&obs("p", "with a NUL", "before\0after")).unwrap();
    a.save(&obs("p", "after", "the last change")).unwrap();

    let report = peers.round(&hub, 0, HubFault::None).unwrap();
    assert!(report.in_sync && report.pending == 0, "{report:?}");
    let parked: Vec<(&str, &str, &str)> =
        report.parked.iter().map(|p| (p.code.as_str(), p.refused_by.as_str(), p.reason.as_str())).collect();
    assert_eq!(parked.len(), 2, "{parked:?}");
    assert_eq!((parked[0].0, parked[0].1), ("invalid_entry", "hub"), "{parked:?}");
    assert_eq!((parked[1].0, parked[1].1), ("nul_character", "client"), "{parked:?}");
    assert!(parked[1].2.contains("payload.content"), "{parked:?}");
    peers.round(&hub, 1, HubFault::None).unwrap();
    assert_eq!(titles(&peers.stores[1]), ["after", "before"]);
    let status = peers.stores[0].remote_status(&hub_remote()).unwrap();
    assert_eq!((status.parked, status.pending, status.per_project[0].parked), (2, 0, 2), "{status:?}");
    assert_eq!(status.parked_entries.len(), 2);

    // Nothing is retried: the next round sends nothing.
    let again = peers.round(&hub, 0, HubFault::None).unwrap();
    assert!(again.in_sync && again.pushed == 0 && again.parked.is_empty(), "{again:?}");
    // Edited, the refused memory reaches the hub and is no longer parked.
    let id = id_of(&peers.stores[0], &refused.sync_id);
    let retitle = ObservationPatch { title: Some("now the hub takes it".into()), ..Default::default() };
    peers.stores[0].update(id, &retitle).unwrap();
    let report = peers.round(&hub, 0, HubFault::None).unwrap();
    assert_eq!((report.pushed, report.parked.len()), (1, 0), "{report:?}");
    peers.round(&hub, 1, HubFault::None).unwrap();
    assert_eq!(titles(&peers.stores[1]), ["after", "before", "now the hub takes it"]);
    let status = peers.stores[0].remote_status(&hub_remote()).unwrap();
    assert_eq!(status.parked, 1, "{status:?}");
    assert_eq!(status.parked_entries[0].code, "nul_character");
}

#[test]
fn the_sync_lease_is_one_holders_until_it_expires_or_its_process_is_gone() {
    let (mut store, clock) = store_with_clock();
    let minute = std::time::Duration::from_secs(60);
    let me = format!("daemon:{}", std::process::id());
    assert_eq!(store.sync_lease_take(&me, minute).unwrap(), None);
    // A live process holds it: another is told who.
    assert_eq!(store.sync_lease_take("cli:1", minute).unwrap(), Some(me.clone()));
    // Renewing is fine; once it expires, anyone takes it.
    assert_eq!(store.sync_lease_take(&me, minute).unwrap(), None);
    clock.advance(Duration::seconds(61));
    assert_eq!(store.sync_lease_take("cli:1", minute).unwrap(), None);
    // A holder whose process is gone (no such pid) does not block until expiry.
    let gone = "daemon:4194303";
    store.sync_lease_release("cli:1").unwrap();
    assert_eq!(store.sync_lease_take(gone, minute).unwrap(), None);
    assert_eq!(store.sync_lease_take(&me, minute).unwrap(), None, "a dead holder's lease is taken over");
    // Releasing only frees one's own lease.
    store.sync_lease_release("cli:1").unwrap();
    assert_eq!(store.sync_lease_take("cli:1", minute).unwrap(), Some(me.clone()));
    store.sync_lease_release(&me).unwrap();
    assert_eq!(store.sync_lease_take("cli:1", minute).unwrap(), None);
}

//! A memory a model wrote keeps its provenance through sync: git chunks and a hub carry it with
//! the memory, the receiving store shows and counts it as extracted, an old peer's payload
//! without it still applies, an old peer's edit drops it, and a hard delete takes it along.
//! Stores are real SQLite files in a temporary folder.

use std::path::Path;

use serde_json::{Value, json};
use tempfile::TempDir;

use super::{Direct, HubFault, MemHub, export, hub_remote, id_of};
use crate::extract::{Extracted, ExtractionCommit, Origin, Provenance};
use crate::memory::ObservationPatch;
use crate::ops::{GetRequest, execute_request};
use crate::search::SearchQuery;
use crate::store::Store;
use crate::sync::Mutation;
use crate::testutil::{ManualClock, obs};
use crate::{Core, store::extraction};

const SESSION: &str = "ses_billing_42";
const FACT: &str = "Invoices are rounded per line, never on the total, since the 2024 tax audit.";

/// A store in its own file under `dir`, with a clock of its own.
fn file_store(dir: &TempDir, name: &str) -> Store {
    let mut store = Store::open(&dir.path().join(format!("{name}.db"))).unwrap();
    store.set_clock(std::sync::Arc::new(ManualClock::at(1_780_000_000)));
    store
}

/// What a model extracted from conversation `SESSION` of project `p`, saved as extraction does.
fn extract_fact(store: &mut Store, content: &str) -> i64 {
    let outcome = store
        .commit_extraction(&ExtractionCommit {
            session_id: SESSION.into(),
            project: "p".into(),
            directory: None,
            expected_mark: None,
            new_mark: None,
            turns: 1,
            memories: vec![Extracted {
                origin: Origin::Fact,
                kind: "decision".into(),
                title: "Invoice rounding".into(),
                content: content.into(),
                message_ids: vec!["msg_001".into(), "msg_002".into()],
                topic_key: None,
            }],
            summarized: false,
            brief_checked: false,
            provider: "openai".into(),
            model: "gpt-4o-mini".into(),
        })
        .unwrap();
    assert_eq!(outcome.saved, 1, "{outcome:?}");
    store.scalar_i64("SELECT max(observation_id) FROM memory_provenance").unwrap()
}

fn sync_id(store: &Store, id: i64) -> String {
    store.get(id).unwrap().sync_id
}

fn provenance_of(store: &Store, sync_id: &str) -> Option<Provenance> {
    store.provenance(id_of(store, sync_id)).unwrap()
}

/// The newest pending payload of memory `sync_id` (project `p`), as a new target would get it.
fn pending_payload(store: &Store, sync_id: &str) -> Value {
    store
        .sync_pending("never-acked", Some("p"), 1000)
        .unwrap()
        .into_iter()
        .rfind(|m| m.entity == "observation" && m.entity_key == sync_id)
        .expect("journaled")
        .payload
}

/// Origin and session of the first search hit on `text`, as `mem_get` shows them.
fn hit_provenance(core: &mut Core, text: &str) -> (Origin, Option<String>) {
    let hits = core.search(&SearchQuery { text: text.into(), ..SearchQuery::default() }).unwrap().hits;
    assert_eq!(hits.len(), 1, "{hits:?}");
    let got = execute_request(core, GetRequest { id: hits[0].observation.id, revisions: false }).unwrap();
    let p = got.provenance.expect("shown as extracted");
    (p.origin, p.session_id)
}

#[test]
fn an_extracted_memory_keeps_its_provenance_through_git_sync() {
    let dir = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    let mut a = file_store(&dir, "a");
    let mut b = file_store(&dir, "b");
    // B syncs the project too: what it applies is journaled, to pass on.
    b.sync_enrol("p").unwrap();
    let extracted = extract_fact(&mut a, FACT);
    let saved = a.save(&obs("p", "Agent note", "an agent saved this one itself")).unwrap();
    let (extracted_key, saved_key) = (sync_id(&a, extracted), saved.sync_id.clone());

    export(&mut a, repo.path());
    b.sync_import(repo.path(), None).unwrap();

    let on_a = a.provenance(extracted).unwrap().unwrap();
    let on_b = provenance_of(&b, &extracted_key).expect("the provenance travelled");
    assert_eq!(on_b, on_a);
    assert_eq!(on_b.message_ids, ["msg_001", "msg_002"]);
    assert_eq!((on_b.provider.as_str(), on_b.model.as_str()), ("openai", "gpt-4o-mini"));
    assert_eq!(provenance_of(&b, &saved_key), None, "an agent's save stays an agent's");
    assert_eq!(b.extraction_status().unwrap().extracted_memories, 1);
    let mut core_b = Core::new(b);
    assert_eq!(hit_provenance(&mut core_b, "invoices rounded per line"), (Origin::Fact, Some(SESSION.to_owned())));
    let mut b = core_b.store;

    // B passes it on: a third store that only hears from B gets it too.
    let relay = tempfile::tempdir().unwrap();
    let mut c = file_store(&dir, "c");
    b.sync_export(relay.path(), &["p".to_owned()], crate::sync::git::Layout::Cairn).unwrap();
    c.sync_import(relay.path(), None).unwrap();
    assert_eq!(provenance_of(&c, &extracted_key), Some(on_a));

    // A hard delete takes the provenance with the memory.
    a.delete(extracted, true).unwrap();
    export(&mut a, repo.path());
    b.sync_import(repo.path(), None).unwrap();
    assert_eq!(b.scalar_i64("SELECT count(*) FROM memory_provenance").unwrap(), 0);
    assert_eq!(b.extraction_status().unwrap().extracted_memories, 0);
}

/// The payload of a memory no model wrote is the one 0009 wrote, byte for byte: no
/// `provenance` key at all, so older peers see nothing new.
#[test]
fn only_a_model_written_memory_carries_a_provenance_object() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = file_store(&dir, "a");
    a.sync_enrol("p").unwrap();
    let saved = a.save(&obs("p", "Agent note", "an agent saved this one itself")).unwrap();
    let extracted = extract_fact(&mut a, FACT);
    let stored: Vec<(String, String)> = a
        .conn()
        .prepare(
            "SELECT j.payload, b.payload FROM sync_journal j
             JOIN sync_observation_plain_payloads b ON b.sync_id = j.entity_key WHERE j.entity_key = ?1",
        )
        .unwrap()
        .query_map([&saved.sync_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].0, stored[0].1);
    assert!(!stored[0].0.contains("provenance"));

    let payload = pending_payload(&a, &sync_id(&a, extracted));
    let provenance = &payload["provenance"];
    assert_eq!(provenance["origin"], "fact");
    assert_eq!(provenance["session_id"], SESSION);
    assert_eq!(provenance["message_ids"], json!(["msg_001", "msg_002"]));
    assert_eq!((provenance["provider"].as_str(), provenance["model"].as_str()), (Some("openai"), Some("gpt-4o-mini")));
    // Ids and names only: nothing of the conversation goes with it.
    let mut keys: Vec<&str> = provenance.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["created_at", "message_ids", "model", "origin", "provider", "session_id"]);
    // The memory's one journal entry carries it: the extraction wrote one memory, one entry.
    let entries = a
        .scalar_i64(&format!("SELECT count(*) FROM sync_journal WHERE entity_key = '{}'", sync_id(&a, extracted)))
        .unwrap();
    assert_eq!(entries, 1);
}

/// Through a hub (the in-memory one of the sync tests): pushed by A, pulled by B.
#[test]
fn an_extracted_memory_keeps_its_provenance_through_a_hub() {
    let dir = tempfile::tempdir().unwrap();
    let hub = MemHub::default();
    let mut a = file_store(&dir, "a");
    let mut b = file_store(&dir, "b");
    let extracted = extract_fact(&mut a, FACT);
    a.save(&obs("p", "Agent note", "an agent saved this one itself")).unwrap();
    let key = sync_id(&a, extracted);
    let round = |store: &mut Store| {
        *hub.fault.lock().unwrap() = HubFault::None;
        crate::sync::remote::sync_round(&Direct(std::cell::RefCell::new(store)), &hub, &hub_remote()).unwrap()
    };
    a.sync_enrol("p").unwrap();
    b.sync_enrol("p").unwrap();
    round(&mut a);
    round(&mut b);
    let on_hub = hub.rows.lock().unwrap().iter().filter(|(_, e)| e.payload.get("provenance").is_some()).count();
    assert_eq!(on_hub, 1, "one entry, the extracted memory's, carries it");
    assert_eq!(provenance_of(&b, &key), a.provenance(extracted).unwrap());
    assert_eq!(b.extraction_status().unwrap().extracted_memories, 1);
    let mut core_b = Core::new(b);
    assert_eq!(hit_provenance(&mut core_b, "invoices rounded per line"), (Origin::Fact, Some(SESSION.to_owned())));
}

/// The mutations an older cairn wrote (no provenance anywhere) still apply as before.
#[test]
fn an_old_payload_without_provenance_applies_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = file_store(&dir, "b");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sync/observation-before-provenance.json");
    let mutations: Vec<Mutation> = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    let report = b.apply_mutations("git:old-peer", &mutations).unwrap();
    assert_eq!((report.applied, report.skipped), (2, 0), "{report:?}");
    let id = id_of(&b, "obs-old-peer-1");
    assert_eq!(b.get(id).unwrap().title, "Invoice rounding");
    assert_eq!(b.provenance(id).unwrap(), None);
    assert_eq!(b.extraction_status().unwrap().extracted_memories, 0);
}

/// What B does with an old peer's versions of a memory B holds as extracted: a version with the
/// same text (a pin) keeps the provenance, an edit of the text drops it; a newer peer's edit
/// that still carries it keeps it.
#[test]
fn an_old_peers_edit_of_an_extracted_memory_is_no_longer_extracted() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = file_store(&dir, "a");
    let mut b = file_store(&dir, "b");
    let extracted = extract_fact(&mut a, FACT);
    let key = sync_id(&a, extracted);
    a.sync_enrol("p").unwrap();
    b.sync_enrol("p").unwrap();
    let apply_latest = |from: &Store, to: &mut Store, strip: bool| {
        let mut m = from.sync_pending("never-acked", Some("p"), 1000).unwrap();
        m.retain(|m| m.entity != "observation" || m.entity_key == key);
        let mut last = m.pop().unwrap();
        if strip {
            last.payload.as_object_mut().unwrap().remove("provenance");
        }
        m.push(last);
        to.apply_mutations("peer", &m).unwrap()
    };
    apply_latest(&a, &mut b, false);
    let before = provenance_of(&b, &key).expect("extracted on B");

    // A newer cairn's edit: the payload still carries A's row, which B keeps.
    a.update(extracted, &ObservationPatch { content: Some(format!("{FACT} (checked)")), ..Default::default() })
        .unwrap();
    let report = apply_latest(&a, &mut b, false);
    assert_eq!(report.applied, 1, "{report:?}");
    assert_eq!(provenance_of(&b, &key), Some(before.clone()));

    // An old peer pins it (same text, no provenance): still extracted.
    a.set_pinned(extracted, true).unwrap();
    let report = apply_latest(&a, &mut b, true);
    assert_eq!(report.applied, 1, "{report:?}");
    assert!(b.get(id_of(&b, &key)).unwrap().pinned);
    assert_eq!(provenance_of(&b, &key), Some(before));

    // An old peer rewrites it: a person's words now, no longer shown or counted as extracted.
    a.update(extracted, &ObservationPatch { content: Some("Rounded per invoice now.".into()), ..Default::default() })
        .unwrap();
    let report = apply_latest(&a, &mut b, true);
    assert_eq!(report.applied, 1, "{report:?}");
    assert_eq!(b.get(id_of(&b, &key)).unwrap().content, "Rounded per invoice now.");
    assert_eq!(provenance_of(&b, &key), None);
    assert_eq!(b.extraction_status().unwrap().extracted_memories, 0);
    // And what B journals for the edit says so: no stale provenance goes on to a third store.
    assert!(pending_payload(&b, &key).get("provenance").is_none());
}

/// Provenance written after a target already took the memory's entry travels in an entry of its
/// own, of the same version, which the other store applies for the provenance alone.
#[test]
fn provenance_recorded_after_an_export_follows_in_an_entry_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let repo = tempfile::tempdir().unwrap();
    let mut a = file_store(&dir, "a");
    let mut b = file_store(&dir, "b");
    b.sync_enrol("p").unwrap();
    let saved = a.save(&obs("p", "Invoice rounding", FACT)).unwrap();
    export(&mut a, repo.path());
    b.sync_import(repo.path(), None).unwrap();
    assert_eq!(provenance_of(&b, &saved.sync_id), None);

    let created_at = a.now();
    a.write(|tx| {
        extraction::record_provenance(
            tx,
            &extraction::ProvenanceRow {
                observation_id: saved.id,
                origin: "summary".into(),
                session_id: Some(SESSION.into()),
                message_ids: r#"["msg_009"]"#.into(),
                provider: "local".into(),
                model: "qwen2.5-1.5b-instruct".into(),
                created_at,
            },
        )
    })
    .unwrap();
    let second = export(&mut a, repo.path());
    assert_eq!(second.projects[0].mutations, 1);
    let journal_before = b.scalar_i64("SELECT count(*) FROM sync_journal").unwrap();
    let summary = b.sync_import(repo.path(), None).unwrap();
    assert_eq!((summary.chunks_applied, summary.applied.applied), (1, 1), "{summary:?}");
    assert_eq!(provenance_of(&b, &saved.sync_id), a.provenance(saved.id).unwrap());
    assert_eq!(provenance_of(&b, &saved.sync_id).unwrap().origin, Origin::Summary);
    assert_eq!(b.get(id_of(&b, &saved.sync_id)).unwrap().content, FACT);
    // B had not passed the memory on yet: its own entry now carries the provenance, no new one.
    assert_eq!(b.scalar_i64("SELECT count(*) FROM sync_journal").unwrap(), journal_before);
    assert!(pending_payload(&b, &saved.sync_id).get("provenance").is_some());
    // Again: nothing changes.
    let again = b.apply_mutations("git:again", &a.sync_pending("never-acked", Some("p"), 1000).unwrap()).unwrap();
    assert_eq!(again.applied, 0, "{again:?}");
    assert_eq!(b.scalar_i64("SELECT count(*) FROM sync_journal").unwrap(), journal_before);
}

/// A revised summary (the same memory, rewritten by a model) journals its new text with the
/// new model's provenance, in one entry.
#[test]
fn a_revised_summary_travels_with_the_provenance_of_its_revision() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = file_store(&dir, "a");
    a.sync_enrol("p").unwrap();
    let summarize = |store: &mut Store, content: &str, model: &str, ids: &[&str]| {
        store
            .commit_extraction(&ExtractionCommit {
                session_id: SESSION.into(),
                project: "p".into(),
                directory: None,
                expected_mark: None,
                new_mark: None,
                turns: 0,
                memories: vec![Extracted {
                    origin: Origin::Summary,
                    kind: "session_summary".into(),
                    title: "Billing session".into(),
                    content: content.into(),
                    message_ids: ids.iter().map(|&i| i.to_owned()).collect(),
                    topic_key: Some(format!("summary/{SESSION}")),
                }],
                summarized: true,
                brief_checked: false,
                provider: "local".into(),
                model: model.into(),
            })
            .unwrap()
    };
    summarize(&mut a, "Looked at invoice rounding.", "qwen2.5-0.5b-instruct", &["msg_001"]);
    let id = a.scalar_i64("SELECT max(observation_id) FROM memory_provenance").unwrap();
    let key = sync_id(&a, id);
    let entries = |store: &Store| {
        store.scalar_i64(&format!("SELECT count(*) FROM sync_journal WHERE entity_key = '{key}'")).unwrap()
    };
    assert_eq!(entries(&a), 1);
    let revised = summarize(&mut a, "Rounded invoices per line.", "qwen2.5-1.5b-instruct", &["msg_001", "msg_007"]);
    assert_eq!(revised.saved, 1, "{revised:?}");
    assert_eq!(a.scalar_i64("SELECT count(*) FROM memory_provenance").unwrap(), 1, "the same memory, revised");
    assert_eq!(entries(&a), 2, "the revision's own entry, no extra one");
    let payload = pending_payload(&a, &key);
    assert_eq!(payload["content"], "Rounded invoices per line.");
    assert_eq!(payload["provenance"]["model"], "qwen2.5-1.5b-instruct");
    assert_eq!(payload["provenance"]["message_ids"], json!(["msg_001", "msg_007"]));
    assert_eq!(payload["provenance"]["origin"], "summary");
}

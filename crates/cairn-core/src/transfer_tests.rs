use proptest::prelude::*;

use crate::Store;
use crate::error::ErrorCode;
use crate::memory::NewObservation;
use crate::prompts::NewPrompt;
use crate::testutil::{obs, store_with_clock};
use crate::transfer::ExportData;

fn comparable(mut e: ExportData) -> ExportData {
    e.exported_at = String::new();
    e
}

fn populated() -> Store {
    let (mut s, _) = store_with_clock();
    let a = s.save(&obs("p", "one", "first memory")).unwrap();
    s.save(&NewObservation { topic_key: Some("t/k".into()), ..obs("p", "two", "second") }).unwrap();
    s.save(&NewObservation { topic_key: Some("t/k".into()), ..obs("p", "two", "second, revised") }).unwrap();
    let d = s.save(&obs("q", "three", "deleted later")).unwrap();
    s.delete(d.id, false).unwrap();
    s.set_pinned(a.id, true).unwrap();
    s.add_prompt(&NewPrompt { content: "a prompt".into(), project: Some("p".into()), ..Default::default() }).unwrap();
    s.end_session("manual-save-p", Some("summary")).unwrap();
    s
}

#[test]
fn export_import_is_identity_and_idempotent() {
    let source = populated();
    let exported = source.export(None).unwrap();
    let bytes = serde_json::to_vec(&exported).unwrap();
    let (mut target, _) = store_with_clock();
    let first = target.import_bytes(&bytes).unwrap();
    assert_eq!(first.observations_imported, 3);
    assert_eq!(first.prompts_imported, 1);
    assert_eq!(comparable(target.export(None).unwrap()), comparable(exported.clone()));
    let second = target.import_bytes(&bytes).unwrap();
    assert_eq!((second.observations_imported, second.prompts_imported, second.sessions_imported), (0, 0, 0));
    assert_eq!(comparable(target.export(None).unwrap()), comparable(exported));
}

#[test]
fn newer_version_in_file_wins_older_is_skipped() {
    let mut source = populated();
    let bytes_v1 = serde_json::to_vec(&source.export(None).unwrap()).unwrap();
    // A later edit: the source's clock moves past the manual clock's standstill.
    source.set_clock(std::sync::Arc::new(crate::clock::SystemClock));
    let id = source
        .list(&crate::memory::ListFilter { project: Some("p".into()), limit: 10, ..Default::default() })
        .unwrap()[0]
        .id;
    source
        .update(id, &crate::memory::ObservationPatch { content: Some("edited".into()), ..Default::default() })
        .unwrap();
    let bytes_v2 = serde_json::to_vec(&source.export(None).unwrap()).unwrap();
    let (mut target, _) = store_with_clock();
    target.import_bytes(&bytes_v1).unwrap();
    assert_eq!(target.import_bytes(&bytes_v2).unwrap().observations_updated, 1);
    assert_eq!(target.import_bytes(&bytes_v1).unwrap().observations_updated, 0);
    assert_eq!(target.get(id).unwrap().content, "edited");
}

#[test]
fn malformed_imports_change_nothing() {
    let (mut s, _) = store_with_clock();
    s.save(&obs("p", "keep", "me")).unwrap();
    let before = comparable(s.export(None).unwrap());
    let good = serde_json::to_string(&populated().export(None).unwrap()).unwrap();
    let cases: Vec<(Vec<u8>, ErrorCode)> = vec![
        (good.as_bytes()[..good.len() / 2].to_vec(), ErrorCode::InvalidImport),
        (b"[1,2,3]".to_vec(), ErrorCode::InvalidImport),
        (b"{\"hello\": 1}".to_vec(), ErrorCode::InvalidImport),
        (vec![0xff, 0xfe, b'{'], ErrorCode::InvalidUtf8),
        (
            br#"{"observations":[{"session_id":"s","title":"t","content":"c","created_at":"not a date"}]}"#.to_vec(),
            ErrorCode::InvalidImport,
        ),
        (br#"{"observations":[{"session_id":"s","title":"","content":"c"}]}"#.to_vec(), ErrorCode::InvalidImport),
        (br#"{"observations":[{"title":"t","content":"c"}]}"#.to_vec(), ErrorCode::InvalidImport),
    ];
    for (bytes, code) in cases {
        assert_eq!(s.import_bytes(&bytes).unwrap_err().code, code, "{}", String::from_utf8_lossy(&bytes));
    }
    assert_eq!(comparable(s.export(None).unwrap()), before);
}

#[test]
fn engram_export_shape_is_accepted_and_redacted() {
    let engram = r#"{"version":"0.1.0","exported_at":"2026-05-01T00:00:00Z",
      "sessions":[{"id":"s1","project":"Eng","directory":"/w","started_at":"2026-05-01 10:00:00"}],
      "observations":[{"id":7,"sync_id":"obs-0123456789abcdef","session_id":"s1","type":"bugfix","title":"t",
        "content":"token <private>abc</private>","project":null,"scope":"project","revision_count":1,
        "duplicate_count":1,"created_at":"2026-05-01 10:01:00","updated_at":"2026-05-01 10:01:00"}],
      "prompts":[{"id":1,"sync_id":"prompt-1","session_id":"s1","content":"hi","project":"eng","created_at":"2026-05-01 10:00:30"}]}"#;
    let (mut s, _) = store_with_clock();
    let report = s.import_bytes(engram.as_bytes()).unwrap();
    assert_eq!((report.sessions_imported, report.observations_imported, report.prompts_imported), (1, 1, 1));
    let got = s.get(7).unwrap();
    assert_eq!(got.content, "token [REDACTED]");
    assert_eq!(got.created_at, "2026-05-01T10:01:00.000Z");
    assert_eq!(s.get_session("s1").unwrap().project, "eng");
}

#[test]
fn project_export_carries_referenced_sessions() {
    let s = populated();
    let e = s.export(Some("q")).unwrap();
    assert_eq!(e.observations.len(), 1);
    assert!(e.sessions.iter().any(|x| x.id == e.observations[0].session_id));
}

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z0-9 ]{1,40}", "\\PC{1,30}", Just("<private>s3cr3t</private> visible".to_owned()),]
        .prop_filter("not blank", |s| !s.trim().is_empty())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

    #[test]
    fn prop_export_import_identity(items in prop::collection::vec((arb_text(), arb_text(), "[a-c]", any::<bool>(), prop::option::of("[a-z]{1,6}")), 1..12)) {
        let (mut s, _) = store_with_clock();
        for (title, content, project, pin, topic) in &items {
            let out = s.save(&NewObservation { topic_key: topic.clone(), ..obs(project, title, content) }).unwrap();
            if *pin { s.set_pinned(out.id, true).unwrap(); }
        }
        let exported = s.export(None).unwrap();
        let bytes = serde_json::to_vec(&exported).unwrap();
        let (mut t, _) = store_with_clock();
        t.import_bytes(&bytes).unwrap();
        prop_assert_eq!(comparable(t.export(None).unwrap()), comparable(exported.clone()));
        let again = t.import_bytes(&bytes).unwrap();
        prop_assert_eq!(again.observations_imported + again.observations_updated + again.prompts_imported, 0);
        prop_assert_eq!(comparable(t.export(None).unwrap()), comparable(exported));
    }
}

/// Found by fuzzing the HTTP API: a file carrying `id: i64::MAX` used to keep that id, and
/// SQLite's AUTOINCREMENT then refused every later save ("database or disk is full").
#[test]
fn huge_ids_in_a_file_are_not_kept_and_saves_go_on() {
    let (mut s, _) = store_with_clock();
    let file = format!(
        r#"{{"observations":[{{"id":{max},"session_id":"s","title":"t","content":"c"}}],
            "prompts":[{{"id":{max},"session_id":"s","content":"p"}}]}}"#,
        max = i64::MAX
    );
    s.import_bytes(file.as_bytes()).unwrap();
    let kept = s.export(None).unwrap();
    assert!(kept.observations.iter().all(|o| o.id <= crate::transfer::MAX_KEPT_ID));
    assert!(kept.prompts.iter().all(|p| p.id <= crate::transfer::MAX_KEPT_ID));
    s.save(&obs("p", "after", "a save after the import")).unwrap();
    s.add_prompt(&NewPrompt { content: "a prompt after".into(), project: Some("p".into()), ..Default::default() })
        .unwrap();
    // An id within range is kept (restores keep `#id` references).
    s.import_bytes(br#"{"observations":[{"id":4242,"session_id":"s","title":"t2","content":"c2"}]}"#).unwrap();
    assert!(s.get(4242).is_ok());
}

#[test]
fn an_offset_past_the_end_is_an_empty_page() {
    let (mut s, _) = store_with_clock();
    s.save(&obs("p", "one", "first")).unwrap();
    let filter = crate::memory::ListFilter { limit: 10, offset: usize::MAX, ..Default::default() };
    assert!(s.list(&filter).unwrap().is_empty(), "a huge offset wrapped to the first page");
}

/// Found by fuzzing the HTTP API: `revision_count: i64::MAX` from a file, then an update
/// (+1) stored a float, and every later read of the row (get, timeline, export) failed.
#[test]
fn huge_counts_in_a_file_are_capped_and_updates_still_read_back() {
    let (mut s, _) = store_with_clock();
    let file = format!(
        r#"{{"observations":[{{"session_id":"s","title":"t","content":"c","revision_count":{max},"duplicate_count":{max}}}]}}"#,
        max = i64::MAX
    );
    s.import_bytes(file.as_bytes()).unwrap();
    let id = s.export(None).unwrap().observations[0].id;
    let patch = crate::memory::ObservationPatch { content: Some("edited".into()), ..Default::default() };
    s.update(id, &patch).unwrap();
    assert!(s.get(id).unwrap().revision_count <= crate::transfer::MAX_COUNT + 1);
    s.export(None).unwrap();
}

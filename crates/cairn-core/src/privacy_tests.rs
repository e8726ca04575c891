//! Redaction is applied on every path: no byte of `<private>` content reaches the database
//! file or its WAL, whatever door or field it came through.

use proptest::prelude::*;

use crate::Store;
use crate::memory::{NewObservation, ObservationPatch};
use crate::prompts::NewPrompt;
use crate::sessions::NewSession;

/// Every tag shape, the unusual ones failing closed.
const TAG_SHAPES: u8 = 9;

fn wrap(secret: &str, tag_case: u8) -> String {
    match tag_case % TAG_SHAPES {
        0 => format!("<private>{secret}</private>"),
        1 => format!("<PRIVATE>\n{secret}\n</Private>"),
        2 => format!("<private>{secret}"), // unclosed: redacted to the end
        3 => format!("<private>a<private>b</private>{secret}</private>"),
        4 => format!("<private note=\"x\">{secret}</private>"),
        5 => format!("< private\n>{secret}</private >"),
        6 => format!("<private/>{secret}"),
        7 => format!("{secret}</private>"), // stray closer: the whole text
        _ => format!("<Private class='a'>{secret}"),
    }
}

fn file_bytes(store: &Store) -> Vec<u8> {
    let path = store.path().unwrap().to_owned();
    let mut bytes = std::fs::read(&path).unwrap();
    if let Ok(wal) = std::fs::read(path.with_extension("db-wal")) {
        bytes.extend(wal);
    }
    bytes
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn private_content_never_reaches_the_file(secret in "[A-Za-z0-9]{16,24}", case in 0u8..TAG_SHAPES, prefix in "[a-z ]{0,20}") {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("cairn.db")).unwrap();
        let private = format!("{prefix} {}", wrap(&secret, case));
        store.start_session(&NewSession {
            id: "s1".into(), project: Some("p".into()), directory: Some(private.clone()), agent: Some(private.clone()),
            ..Default::default()
        }).unwrap();
        let saved = store.save(&NewObservation {
            title: private.clone(),
            content: private.clone(),
            topic_key: Some(private.clone()),
            tool_name: Some(private.clone()),
            session_id: Some("s1".into()),
            ..Default::default()
        }).unwrap();
        // Every other field of a save: type, project, scope, a new session's id and directory.
        let other = store.save(&NewObservation {
            title: "t".into(),
            content: "c".into(),
            kind: Some(format!("a {}", wrap(&secret, case))),
            project: Some(private.clone()),
            scope: Some(private.clone()),
            session_id: Some(private.clone()),
            directory: Some(private.clone()),
            ..Default::default()
        }).unwrap();
        prop_assert!(other.redacted && !other.session_id.contains(&secret) && !other.kind.contains(&secret), "{other:?}");
        // A later write naming the same private session id lands in the same (redacted) session.
        let again = store.save(&NewObservation {
            title: "t2".into(), content: "c2".into(), session_id: Some(private.clone()), ..Default::default()
        }).unwrap();
        prop_assert_eq!(&again.session_id, &other.session_id);
        store.end_session(&private, Some("done")).unwrap();
        store.save_session_summary(Some(&private), Some(&private), &private).unwrap();
        store.update(saved.id, &ObservationPatch {
            content: Some(format!("edited {private}")),
            title: Some(format!("t {private}")),
            ..Default::default()
        }).unwrap();
        store.add_prompt(&NewPrompt { content: private.clone(), session_id: Some("s1".into()), ..Default::default() }).unwrap();
        store.end_session("s1", Some(&private)).unwrap();
        let import = format!(
            r#"{{"sessions":[{{"id":"s2","summary":{private:?},"directory":{private:?},"agent":{private:?}}}],
                "observations":[{{"session_id":"s2","title":{private:?},"content":{private:?},"topic_key":{private:?}}}],
                "prompts":[{{"session_id":"s2","content":{private:?}}}],
                "relations":[{{"sync_id":"r1","source_id":"a","target_id":"b","reason":{private:?},"evidence":{private:?},
                    "marked_by_actor":{private:?},"marked_by_model":{private:?}}}]}}"#
        );
        store.import_bytes(import.as_bytes()).unwrap();
        let bytes = file_bytes(&store);
        prop_assert!(!contains(&bytes, &secret), "secret found in the database file");
        let exported = serde_json::to_string(&store.export(None).unwrap()).unwrap();
        prop_assert!(!exported.contains(&secret));
    }
}

#[test]
fn redacted_is_reported_exactly_when_something_was() {
    let mut store = Store::open_in_memory().unwrap();
    let plain =
        store.save(&NewObservation { title: "t".into(), content: "a < b".into(), ..Default::default() }).unwrap();
    assert!(!plain.redacted);
    let attrs = store
        .save(&NewObservation {
            title: "t".into(),
            content: "<private note=\"x\">S</private> k".into(),
            ..Default::default()
        })
        .unwrap();
    assert!(attrs.redacted);
    assert_eq!(store.get(attrs.id).unwrap().content, "[REDACTED] k");
    let kind = store
        .save(&NewObservation {
            title: "t".into(),
            content: "c".into(),
            kind: Some("a <private>S</private>".into()),
            ..Default::default()
        })
        .unwrap();
    assert!(kind.redacted && kind.kind == "a [redacted]", "{kind:?}");
}

const AWS: &str = "AKIAQWERTYUIOPASDFGH";

fn memory_with_secret() -> NewObservation {
    NewObservation {
        title: "deploy key".into(),
        content: format!("the key is {AWS} and GITHUB_TOKEN=ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"),
        project: Some("p".into()),
        ..Default::default()
    }
}

#[test]
fn secrets_are_redacted_on_save_by_default() {
    let mut store = Store::open_in_memory().unwrap();
    let saved = store.save(&memory_with_secret()).unwrap();
    assert!(saved.redacted);
    let stored = store.get(saved.id).unwrap().content;
    assert_eq!(stored, "the key is [REDACTED:aws-access-key] and GITHUB_TOKEN=[REDACTED:github-token]");
    assert_eq!(store.privacy_findings().unwrap().total(), 0);
}

#[test]
fn with_the_setting_off_secrets_are_stored_but_never_leave_and_a_rewrite_erases_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("cairn.db")).unwrap();
    store.set_redaction(crate::text::Redaction::PRIVATE);
    store.sync_enrol("p").unwrap();
    let saved = store.save(&memory_with_secret()).unwrap();
    assert!(!saved.redacted);
    store.update(saved.id, &ObservationPatch { content: Some(format!("v2 {AWS}")), ..Default::default() }).unwrap();
    store
        .add_prompt(&NewPrompt { content: format!("use {AWS}"), project: Some("p".into()), ..Default::default() })
        .unwrap();
    assert!(store.get(saved.id).unwrap().content.contains(AWS), "stored as is");
    // What leaves the machine is redacted all the same.
    assert!(!serde_json::to_string(&store.export(None).unwrap()).unwrap().contains(AWS));
    assert!(!serde_json::to_string(&store.sync_pending("git:x", None, 100).unwrap()).unwrap().contains(AWS));
    // Doctor's count: the memory, its earlier version, the prompt, the journal entries.
    let found = store.privacy_findings().unwrap();
    assert_eq!((found.memories, found.revisions, found.prompts), (1, 1, 1), "{found:?}");
    assert!(found.journal >= 2 && found.memory_ids == vec![saved.id], "{found:?}");
    let dry = store.privacy_rewrite(true).unwrap();
    assert!(dry.dry_run && !dry.vacuumed && store.get(saved.id).unwrap().content.contains(AWS));
    assert!(contains(&file_bytes(&store), AWS));
    let done = store.privacy_rewrite(false).unwrap();
    assert!(done.vacuumed && done.found == found);
    assert_eq!(store.privacy_findings().unwrap().total(), 0);
    assert!(!contains(&file_bytes(&store), AWS), "the secret is gone from the database file");
    assert_eq!(store.get(saved.id).unwrap().content, "v2 [REDACTED:aws-access-key]");
}

/// A disk with no room for the rebuild's copy: the rows are redacted all the same and their old
/// bytes are gone from the file (zeroed in place, the WAL checkpointed and truncated); the file
/// is not rebuilt, and the report says why, as the dry run did before.
#[test]
fn a_rewrite_short_of_room_redacts_without_the_rebuild_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(&dir.path().join("cairn.db")).unwrap();
    store.set_redaction(crate::text::Redaction::PRIVATE);
    let saved = store.save(&memory_with_secret()).unwrap();
    store.update(saved.id, &ObservationPatch { content: Some(format!("v2 {AWS}")), ..Default::default() }).unwrap();
    let full =
        crate::room::Room { data_free: 1 << 20, temp_free: 1 << 20, temp_dir: dir.path().to_owned(), same_disk: true };
    let dry = store.privacy_rewrite_with_room(true, Some(&full)).unwrap();
    let note = dry.not_rebuilt.as_deref().expect("the dry run tells the rebuild would not fit");
    assert!(note.contains("not enough free space") && note.contains("has 0.0 GB"), "{note}");
    assert!(contains(&file_bytes(&store), AWS), "a dry run changes nothing");

    let done = store.privacy_rewrite_with_room(false, Some(&full)).unwrap();
    assert!(!done.vacuumed && done.not_rebuilt.is_some(), "{done:?}");
    assert_eq!(store.privacy_findings().unwrap().total(), 0);
    assert_eq!(store.get(saved.id).unwrap().content, "v2 [REDACTED:aws-access-key]");
    assert!(!contains(&file_bytes(&store), AWS), "zeroed in place, without the rebuild");
    let wal = std::fs::metadata(dir.path().join("cairn.db-wal")).map_or(0, |m| m.len());
    assert_eq!(wal, 0, "the WAL's frames of the old pages are gone");

    // With room, nothing to say.
    let roomy = crate::room::Room { data_free: u64::MAX / 4, temp_free: u64::MAX / 4, ..full };
    store.set_redaction(crate::text::Redaction::PRIVATE);
    store.save(&memory_with_secret()).unwrap();
    let rebuilt = store.privacy_rewrite_with_room(false, Some(&roomy)).unwrap();
    assert!(rebuilt.vacuumed && rebuilt.not_rebuilt.is_none(), "{rebuilt:?}");
}

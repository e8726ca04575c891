//! Redaction is applied on every path: no byte of `<private>` content reaches the database
//! file or its WAL, whatever door or field it came through.

use proptest::prelude::*;

use crate::Store;
use crate::memory::{NewObservation, ObservationPatch};
use crate::prompts::NewPrompt;
use crate::sessions::NewSession;

fn wrap(secret: &str, tag_case: u8) -> String {
    match tag_case % 3 {
        0 => format!("<private>{secret}</private>"),
        1 => format!("<PRIVATE>\n{secret}\n</Private>"),
        _ => format!("<private>{secret}"), // unclosed: redacted to the end
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
    fn private_content_never_reaches_the_file(secret in "[A-Za-z0-9]{16,24}", case in 0u8..3, prefix in "[a-z ]{0,20}") {
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

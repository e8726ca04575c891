use std::time::{Duration, Instant};

use cairn_core::history::model::*;
use cairn_core::history::store::SourceRef;
use cairn_core::ops::Op;

use super::*;
use crate::Engine;

/// One session of one message, last updated at `at`.
fn session(db: &mut HistoryDb, id: &str, at: &str) {
    let user = HistoryMessage::new(id, "msg_u1", HistoryRole::User, 1, at);
    let text = HistoryPart {
        text: Some(format!("the words of {id}")),
        ..HistoryPart::new(id, &user.id, "prt_1", 0, PartKind::Text)
    };
    let batch = IngestBatch {
        sessions: vec![HistorySession {
            id: id.into(),
            host: HistoryHost::OpenCode,
            project: Some("billing".into()),
            directory: None,
            parent_id: None,
            title: None,
            agent: None,
            model: None,
            created_at: at.into(),
            updated_at: at.into(),
        }],
        messages: vec![user],
        parts: vec![text],
        ..Default::default()
    };
    let source = SourceRef { key: format!("opencode.db#{id}"), host: HistoryHost::OpenCode };
    let next = Cursor { offset: 0, size: 0, mtime_ms: 1, watermark: None };
    db.apply(&source, None, &batch, &next).unwrap();
}

fn sessions(engine: &Engine) -> String {
    let op = Op::from_value(serde_json::json!({"op": "history_sessions", "args": {"include_children": true}})).unwrap();
    engine.execute_blocking(op).unwrap().into_value().unwrap().to_string()
}

#[test]
fn a_daemon_with_keep_days_prunes_an_old_session_by_itself() {
    let data = tempfile::tempdir().unwrap();
    let store = data.path().join("cairn.db");
    {
        let mut db = HistoryDb::open(&history_db_path(&store)).unwrap();
        session(&mut db, "ses_old", "2020-01-01T10:00:00.000Z");
        session(&mut db, "ses_new", &cairn_core::clock::now_ts());
    }
    let engine = Engine::open(&store).unwrap();
    assert!(sessions(&engine).contains("ses_old"), "the old session is there before the worker starts");
    let retention = Retention { keep_days: Some(30), max_bytes: None, every: Duration::from_secs(3600) };
    assert!(engine.start_retention(retention));

    let deadline = Instant::now() + Duration::from_secs(30);
    while sessions(&engine).contains("ses_old") {
        assert!(Instant::now() < deadline, "the old session was never pruned");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(sessions(&engine).contains("ses_new"), "the recent session stays");
    let state = engine.workers().into_iter().find(|w| w.name == RETENTION_WORKER).map(|w| w.state);
    assert_eq!(state, Some("running"), "it waits for the next day's pass");
    engine.stop(Duration::from_secs(10));
}

#[test]
fn retention_is_off_unless_a_key_is_set() {
    let mut history = HistorySettings::default();
    assert_eq!(Retention::from_settings(&history), None);
    history.max_bytes = 1 << 30;
    let retention = Retention::from_settings(&history).unwrap();
    assert_eq!((retention.keep_days, retention.max_bytes), (None, Some(1 << 30)));
    assert_eq!(retention.every, RETENTION_EVERY);
}

#[test]
fn an_in_memory_engine_has_no_retention_worker() {
    let engine = Engine::in_memory().unwrap();
    let retention = Retention { keep_days: Some(1), max_bytes: None, every: RETENTION_EVERY };
    assert!(!engine.start_retention(retention));
}

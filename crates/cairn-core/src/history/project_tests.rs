//! The history ops through `ops::execute`: a project's `.cairn/config.toml` overrides
//! `[history]` for the sessions that ran in it, and the call log of history tool calls.

use std::path::Path;

use super::model::*;
use super::store::SourceRef;
use crate::Core;
use crate::error::ErrorCode;
use crate::history::query::TurnsRequest;
use crate::ops::{Op, OpOutput, execute};
use crate::store::Store;

const SESSION: &str = "ses_project";
const LONG_PROMPT: &str = "Please rename every handler in the billing module and keep the tests green";

/// A store in `root/data` whose archive holds one session that ran in `project_dir`.
fn store_with_session(root: &Path, project_dir: &Path) -> Core {
    std::fs::create_dir_all(root.join("data")).unwrap();
    let mut store = Core::new(Store::open(&root.join("data").join("cairn.db")).unwrap());
    let user = HistoryMessage::new(SESSION, "msg_u1", HistoryRole::User, 1, "2026-03-01T10:00:00.000Z");
    let text = HistoryPart {
        text: Some(LONG_PROMPT.into()),
        ..HistoryPart::new(SESSION, &user.id, "prt_1", 0, PartKind::Text)
    };
    let batch = IngestBatch {
        sessions: vec![HistorySession {
            id: SESSION.into(),
            host: HistoryHost::OpenCode,
            project: Some("billing".into()),
            directory: Some(project_dir.display().to_string()),
            parent_id: None,
            title: Some("Rename handlers".into()),
            agent: None,
            model: None,
            created_at: "2026-03-01T10:00:00.000Z".into(),
            updated_at: "2026-03-01T10:00:01.000Z".into(),
        }],
        messages: vec![user],
        parts: vec![text],
        ..Default::default()
    };
    let source = SourceRef { key: "opencode.db#ses_project".into(), host: HistoryHost::OpenCode };
    let next = Cursor { offset: 0, size: 0, mtime_ms: 1, watermark: None };
    store.history.db().unwrap().apply(&source, None, &batch, &next).unwrap();
    store
}

fn first_preview(store: &mut Core) -> String {
    let op = Op::HistoryBrowseTurns(TurnsRequest {
        session_id: SESSION.into(),
        turn_number: None,
        num_before: 0,
        num_after: 0,
        caller_session_id: None,
    });
    let OpOutput::HistoryBrowseTurns(page) = execute(store, op).unwrap() else { panic!("not a turns page") };
    page.turns[0].user.preview.clone().unwrap()
}

/// A repository at `root/repo` with the session's working directory `src` inside it.
fn repository(root: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let repo = root.join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    std::fs::create_dir_all(repo.join("src")).unwrap();
    (repo.clone(), repo.join("src"))
}

#[test]
fn a_projects_history_table_wins_for_its_sessions() {
    let root = tempfile::tempdir().unwrap();
    let (repo, workdir) = repository(root.path());
    let mut store = store_with_session(root.path(), &workdir);
    assert_eq!(first_preview(&mut store), LONG_PROMPT, "global default: 280 characters");

    std::fs::create_dir_all(repo.join(".cairn")).unwrap();
    let config = repo.join(".cairn/config.toml");
    std::fs::write(&config, "[history]\nbrowse_turns.user_preview_length = 15\nscan_interval_secs = 1\n").unwrap();
    assert_eq!(first_preview(&mut store), "Please rename e...");

    // Edited: read again.
    std::fs::write(&config, "[history.browse_turns]\nuser_preview_length = 6\n").unwrap();
    assert_eq!(first_preview(&mut store), "Please...");

    // A broken project file is a clear error naming it, not a silent default.
    std::fs::write(&config, "[history]\nbrowse_turns.user_preview_length = 0\n").unwrap();
    let op = Op::HistoryChart(crate::history::query::SessionRef { session_id: SESSION.into() });
    let err = execute(&mut store, op).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidConfig);
    assert!(
        err.message.contains(".cairn/config.toml") && err.message.contains("between 1 and 10000"),
        "{}",
        err.message
    );
}

#[test]
fn a_config_above_the_repository_root_is_not_the_projects() {
    let root = tempfile::tempdir().unwrap();
    let (_, workdir) = repository(root.path());
    std::fs::create_dir_all(root.path().join(".cairn")).unwrap();
    std::fs::write(root.path().join(".cairn/config.toml"), "[history]\nbrowse_turns.user_preview_length = 6\n")
        .unwrap();
    let mut store = store_with_session(root.path(), &workdir);
    assert_eq!(first_preview(&mut store), LONG_PROMPT);
}

#[test]
fn each_history_call_is_logged_when_asked() {
    let root = tempfile::tempdir().unwrap();
    let (_, workdir) = repository(root.path());
    let mut store = store_with_session(root.path(), &workdir);
    let quiet = root.path().join("data").join(crate::ops::call_log::CALL_LOG);
    first_preview(&mut store);
    assert!(!quiet.exists(), "nothing is logged unless asked");
    let history = crate::settings::HistorySettings { debug_log_tool_calls: true, ..Default::default() };
    store.store.set_rules(std::sync::Arc::new(crate::settings::RuleSettings { history, ..Default::default() }));
    first_preview(&mut store);
    let log = root.path().join("data").join(crate::ops::call_log::CALL_LOG);
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&log).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["tool"], "history_browse_turns");
    assert_eq!(lines[0]["args"]["session_id"], SESSION);
    assert!(lines[0]["estimated_tokens"].as_u64().unwrap() > 10);
    assert!(lines[0]["duration_ms"].as_f64().unwrap() >= 0.0);
}

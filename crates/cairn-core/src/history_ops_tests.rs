//! The history ops through `ops::execute`: the archive beside the store answers them, a
//! project's `.cairn/config.toml` overrides `[history]` for the sessions that ran in it, a
//! transcript no host of this process wrote is refused, and the call log of history tool calls.

use std::path::Path;

use serde_json::json;

use crate::Core;
use crate::error::ErrorCode;
use crate::history::model::*;
use crate::history::query::TurnsRequest;
use crate::history::store::SourceRef;
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
    let op = Op::HistoryChart(crate::ops::HistoryChartRequest::new(SESSION));
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
    store.settings = std::sync::Arc::new(crate::settings::RuleSettings { history, ..Default::default() });
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

/// The session `OC` in two turns, and `CHILD`, a sub-agent session under it.
fn two_turns_and_a_child() -> IngestBatch {
    let session = |id: &str, parent: Option<&str>| HistorySession {
        id: id.into(),
        host: HistoryHost::OpenCode,
        project: Some("shop".into()),
        directory: Some("/nonexistent/shop".into()),
        parent_id: parent.map(Into::into),
        title: Some(id.into()),
        agent: None,
        model: None,
        created_at: "2026-03-01T10:00:00.000Z".into(),
        updated_at: "2026-03-01T10:00:01.000Z".into(),
    };
    let mut batch = IngestBatch { sessions: vec![session(OC, None), session(CHILD, Some(OC))], ..Default::default() };
    let said = [
        (OC, "msg_u1", HistoryRole::User, 1, "Please fix the login bug"),
        (OC, "msg_a1", HistoryRole::Assistant, 2, "Fixed."),
        (OC, "msg_u2", HistoryRole::User, 3, "Deploy it to staging"),
        (OC, "msg_a2", HistoryRole::Assistant, 4, "Deployed."),
        (CHILD, "msg_k1", HistoryRole::User, 5, "Explore the auth module"),
    ];
    for (session, id, role, seq, body) in said {
        let message = HistoryMessage::new(session, id, role, seq, &format!("2026-03-01T10:00:{seq:02}.000Z"));
        batch.parts.push(HistoryPart {
            text: Some(body.into()),
            ..HistoryPart::new(session, id, &format!("{id}:0"), 0, PartKind::Text)
        });
        batch.messages.push(message);
    }
    batch
}

const OC: &str = "ses_oc";
const CHILD: &str = "ses_child";

#[test]
fn the_archive_opens_history_db_beside_the_store_and_ops_reach_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut core = Core::new(Store::open(&dir.path().join("cairn.db")).unwrap());
    let db = core.history.db().unwrap();
    let source = SourceRef { key: "opencode.db#ses_oc".into(), host: HistoryHost::OpenCode };
    let cursor = Cursor { offset: 1, size: 1, mtime_ms: 1, watermark: None };
    db.apply(&source, None, &two_turns_and_a_child(), &cursor).unwrap();
    assert!(dir.path().join("history.db").exists());
    let op =
        Op::from_value(json!({"op": "history_browse_turns", "args": {"session_id": OC, "num_before": 1}})).unwrap();
    assert!(!op.writes_memory_store());
    let page = crate::ops::execute_value(&mut core, op).unwrap();
    assert_eq!(page["turns"].as_array().unwrap().len(), 2);
    let camel = Op::from_value(json!({"op": "history_children", "args": {"sessionId": OC}})).unwrap();
    assert_eq!(crate::ops::execute_value(&mut core, camel).unwrap()[0]["session_id"], CHILD);
    let stats = crate::ops::execute_value(&mut core, Op::HistoryStats).unwrap();
    assert_eq!(stats["hosts"][0]["sessions"], 2);
    let forget = Op::from_value(json!({"op": "history_forget", "args": {"session_id": CHILD}})).unwrap();
    assert_eq!(crate::ops::execute_value(&mut core, forget).unwrap()["status"], "forgotten");
}

/// Through the op, as every door runs it: a path must be one of this process's hosts' sources
/// (a temp HOME is not this process's), so the daemon never reads, and then serves, an
/// arbitrary file a client names.
#[test]
fn history_ingest_refuses_a_transcript_no_host_of_this_process_wrote() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join(".claude/projects/-nonexistent-shop");
    std::fs::create_dir_all(&project).unwrap();
    let transcript = project.join("5f0c2a9e-0000-4000-8000-00000000cc01.jsonl");
    std::fs::write(&transcript, "{}\n").unwrap();
    let mut core = Core::new(Store::open_in_memory().unwrap());
    let poke = crate::history::ingest::PokeRequest { path: Some(transcript), ..Default::default() };
    let err = crate::ops::execute_value(&mut core, Op::HistoryIngest(poke)).unwrap_err();
    assert_eq!(err.code, ErrorCode::FileNotFound);
    assert!(err.message.contains("is not a host's transcript"), "{err:?}");
}

use std::io::Write;
use std::path::PathBuf;

use super::*;
use crate::ingest;
use crate::model::{HistoryRole, PartKind, ToolStatus};
use crate::test_sink::{MemorySink, env_for, home_with_fixture};

/// The rollout recorded from Codex 0.171 (`codex exec`, one MCP tool call, the scripted model
/// of tests/e2e), its paths and long instructions cut.
const SESSION: &str = "01a233b2-e74b-76c3-a14c-67c65c24cda6";

/// The recorded file copied where the host keeps it in a temp HOME, and its path there.
fn codex_home() -> (tempfile::TempDir, PathBuf) {
    home_with_fixture("codex/2026/12/01", ".codex/sessions/2026/12/01")
}

#[test]
fn a_real_rollout_gives_the_session_its_prompt_the_tool_call_and_the_answer() {
    let (home, path) = codex_home();
    let mut sink = MemorySink::default();
    let report = ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    assert!(report.errors.is_empty() && report.skipped.is_empty(), "{report:?}");
    let session = &sink.sessions[SESSION];
    assert_eq!(session.host, HistoryHost::Codex);
    assert_eq!(session.directory.as_deref(), Some("/nonexistent/sandbox/proj"));
    assert_eq!(session.model.as_deref(), Some("mock-model"));
    assert_eq!(session.agent.as_deref(), Some("codex"));
    let messages = sink.messages_of(SESSION);
    let roles: Vec<HistoryRole> = messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [HistoryRole::User, HistoryRole::Assistant, HistoryRole::Assistant],
        "Codex's own context left out"
    );
    assert!(messages[0].opens_turn());
    assert_eq!(sink.text_of(&messages[0].id), "SAVEIT please");
    let tool = sink.parts_of(&messages[1].id)[0];
    assert_eq!((tool.kind, tool.tool.as_deref()), (PartKind::Tool, Some("mcp__memtest__memory_search")));
    assert_eq!(tool.status, Some(ToolStatus::Completed));
    assert!(tool.output.as_deref().unwrap().contains("MCP-MEMORY-HIT for 'q1'"), "{tool:?}");
    assert_eq!(tool.input.as_deref(), Some(r#"{"query":"q1"}"#));
    assert!(sink.text_of(&messages[2].id).starts_with("MOCK-DONE"));
    assert_eq!(identify(&path).as_deref(), Some(SESSION));
}

#[test]
fn the_rollout_is_left_byte_for_byte_and_a_second_read_adds_nothing() {
    let (home, path) = codex_home();
    let before = (std::fs::read(&path).unwrap(), std::fs::metadata(&path).unwrap().modified().unwrap());
    let mut sink = MemorySink::default();
    ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    let applies = sink.applies;
    let again = ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    assert_eq!((again.messages, sink.applies), (0, applies), "nothing new: nothing applied");
    let after = (std::fs::read(&path).unwrap(), std::fs::metadata(&path).unwrap().modified().unwrap());
    assert!(before == after, "the host's file changed");
}

#[test]
fn a_line_being_written_waits_and_unknown_records_are_counted() {
    let (home, path) = codex_home();
    let whole = r#"{"timestamp":"2026-12-01T22:30:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"LATER prompt"}]}}"#;
    let (head, rest) = whole.split_at(60);
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    writeln!(file, r#"{{"timestamp":"2026-12-01T22:29:00.000Z","type":"hologram","payload":{{}}}}"#).unwrap();
    write!(file, "{head}").unwrap();
    let mut sink = MemorySink::default();
    let first = ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    assert_eq!(first.skipped.get("unknown_record_type"), Some(&1), "{first:?}");
    assert!(!sink.parts.values().any(|p| p.text.as_deref() == Some("LATER prompt")), "half a line is not read");
    assert_eq!(sink.messages_of(SESSION).len(), 3, "the rest is archived");
    writeln!(file, "{rest}").unwrap();
    ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    assert!(sink.parts.values().any(|p| p.text.as_deref() == Some("LATER prompt")), "picked up once complete");
    // cut short (a new file under the old name): read again from the start, counted
    std::fs::write(&path, format!("{whole}\n")).unwrap();
    let shrunk = ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    assert_eq!(shrunk.skipped.get("file_shrunk"), Some(&1), "{shrunk:?}");
}

#[test]
fn a_compaction_and_a_sub_agent_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    let child = "01a233b2-0000-7000-8000-000000000002";
    let path = tmp.path().join(format!("rollout-2026-12-01T22-40-00-{child}.jsonl"));
    let lines = [
        r#"{"timestamp":"2026-12-01T22:40:00.000Z","type":"session_meta","payload":{"id":"x","cwd":"/w","source":{"subagent":{"thread_spawn":{"parent_thread_id":"01a233b2-e74b-76c3-a14c-67c65c24cda6","depth":1}}}}}"#,
        r#"{"timestamp":"2026-12-01T22:40:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"[MEMORY]\nwe deploy with pnpm"}]}}"#,
        r#"{"timestamp":"2026-12-01T22:40:02.000Z","type":"compacted","payload":{"message":"SUMMARY of the work","replacement_history":[]}}"#,
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let (batch, _, more) = read_file(&path, &Cursor::default(), 1 << 20).unwrap();
    assert!(!more);
    assert_eq!(batch.sessions[0].parent_id.as_deref(), Some(SESSION));
    let injected = &batch.messages[0];
    assert!(injected.synthetic && !injected.opens_turn(), "cairn's context opens no turn");
    assert!(batch.parts[0].injected);
    assert!(batch.messages[1].compaction && batch.messages[2].summary);
    assert_eq!(batch.parts[1].text.as_deref(), Some("SUMMARY of the work"));
    assert!(read_file(&tmp.path().join("notes.jsonl"), &Cursor::default(), 1).is_err(), "not a rollout name");
}

#[test]
fn records_of_a_newer_codex_are_counted_and_the_rest_archived_byte_for_byte() {
    let (home, path) = codex_home();
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    // a newer Codex: a record type and a response item not known here, then a prompt
    writeln!(file, r#"{{"timestamp":"2026-12-01T22:31:00.000Z","type":"rollout_format","payload":{{"version":99}}}}"#)
        .unwrap();
    writeln!(
        file,
        r#"{{"timestamp":"2026-12-01T22:31:01.000Z","type":"response_item","payload":{{"type":"teleport","id":"x"}}}}"#
    )
    .unwrap();
    writeln!(file, r#"{{"timestamp":"2026-12-01T22:31:02.000Z","type":"response_item","payload":{{"type":"message","role":"user","content":[{{"type":"input_text","text":"NEWER prompt"}}]}}}}"#).unwrap();
    writeln!(file, "{{\"timestamp\":\"2026-12-01T22:31:03.000Z\",\"type\":\"respo").unwrap();
    drop(file);
    let before = std::fs::read(&path).unwrap();
    let mut sink = MemorySink::default();
    let report = ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    assert_eq!(report.skipped.get("unknown_record_type"), Some(&1), "{report:?}");
    assert_eq!(report.skipped.get("unknown_item_type"), Some(&1), "{report:?}");
    assert_eq!(report.skipped.get("invalid_json"), Some(&1), "a line cut short in the middle: {report:?}");
    assert!(report.errors.is_empty(), "{report:?}");
    assert!(sink.parts.values().any(|p| p.text.as_deref() == Some("NEWER prompt")), "the rest is archived");
    assert_eq!(std::fs::read(&path).unwrap(), before, "the rollout is left byte for byte");
}

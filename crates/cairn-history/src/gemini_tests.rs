use std::io::Write;
use std::path::PathBuf;

use super::*;
use crate::ingest;
use crate::model::HistoryRole;
use crate::test_sink::{MemorySink, env_for, home_with_fixture};

/// The chat recorded from Gemini CLI 0.61 (`gemini -p`, SessionStart and BeforeAgent hooks
/// answering context that is not cairn's, the scripted model of tests/e2e), paths cut.
const SESSION: &str = "5772958c-af24-4091-afb1-a1cfa8346137";

/// The recorded file copied where the host keeps it in a temp HOME, and its path there.
fn gemini_home() -> (tempfile::TempDir, PathBuf) {
    home_with_fixture("gemini/e2e-project/chats", ".gemini/tmp/e2e-project/chats")
}

#[test]
fn a_real_chat_gives_the_session_the_prompt_without_hook_context_and_the_answer() {
    let (home, path) = gemini_home();
    let before = std::fs::read(&path).unwrap();
    let mut sink = MemorySink::default();
    let report = ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    assert!(report.errors.is_empty() && report.skipped.is_empty(), "{report:?}");
    let session = &sink.sessions[SESSION];
    assert_eq!(session.host, HistoryHost::Gemini);
    assert_eq!(session.model.as_deref(), Some("gemini-3.1-pro-preview"));
    let messages = sink.messages_of(SESSION);
    let roles: Vec<HistoryRole> = messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [HistoryRole::User, HistoryRole::Assistant], "Gemini CLI's session context left out");
    assert!(messages[0].opens_turn());
    assert_eq!(sink.text_of(&messages[0].id), "hello abc123", "a hook's context that is not cairn's is dropped");
    assert_eq!(sink.text_of(&messages[1].id), "Noted: abc123.");
    assert_eq!(std::fs::read(&path).unwrap(), before, "the host's file is left as it was");
    let again = ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    assert_eq!(again.messages, 0);
}

#[test]
fn cairns_hook_context_is_kept_as_injected_and_a_new_line_is_read_once_complete() {
    let (home, path) = gemini_home();
    let mut sink = MemorySink::default();
    ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    let line = r#"{"id":"m-late","timestamp":"2026-12-01T22:30:00.000Z","type":"user","content":[{"text":"<hook_context>[MEMORY]\nwe deploy with pnpm</hook_context>\n\nLATER prompt"}]}"#;
    let (head, rest) = line.split_at(50);
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    write!(file, "{head}").unwrap();
    ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    assert!(!sink.messages.keys().any(|k| k.ends_with(":m-late")), "half a line is not read");
    writeln!(file, "{rest}").unwrap();
    ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    let id = format!("{SESSION}:m-late");
    let parts = sink.parts_of(&id);
    assert_eq!(parts.len(), 2, "{parts:?}");
    assert!(parts[0].injected && parts[0].text.as_deref().unwrap().starts_with("[MEMORY]"));
    assert_eq!((parts[1].injected, parts[1].text.as_deref()), (false, Some("LATER prompt")));
    assert!(sink.messages[&id].opens_turn());
}

#[test]
fn a_whole_file_chat_cut_short_is_counted_and_read_once_complete() {
    let tmp = tempfile::tempdir().unwrap();
    let chats = tmp.path().join(".gemini/tmp/p/chats");
    std::fs::create_dir_all(&chats).unwrap();
    let path = chats.join("session-2025-01-01T00-00-abcd1234.json");
    let whole = r#"{"sessionId":"old-chat-1","startTime":"2025-01-01T00:00:00.000Z","messages":[{"id":"u1","timestamp":"2025-01-01T00:00:01.000Z","type":"user","content":"OLD prompt"},{"id":"g1","type":"gemini","content":"OLD answer","toolCalls":[{"id":"c1","name":"mem_save","args":{"title":"t"},"status":"success","result":[{"functionResponse":{"response":{"output":"saved #1"}}}]}]}]}"#;
    std::fs::write(&path, &whole[..80]).unwrap();
    let mut sink = MemorySink::default();
    let first = ingest::scan(&mut sink, &env_for(tmp.path()), &mut |_| {}).unwrap();
    assert_eq!(first.skipped.get("incomplete_file"), Some(&1), "{first:?}");
    assert!(sink.messages.is_empty());
    std::fs::write(&path, whole).unwrap();
    ingest::scan(&mut sink, &env_for(tmp.path()), &mut |_| {}).unwrap();
    let messages = sink.messages_of("old-chat-1");
    assert_eq!(messages.len(), 2);
    let tool = sink.parts_of(&messages[1].id).into_iter().find(|p| p.tool.is_some()).unwrap();
    assert_eq!(tool.output.as_deref(), Some("saved #1"));
}

#[test]
fn lines_of_a_newer_gemini_cli_are_counted_the_rest_archived_and_a_truncated_chat_read_again() {
    let (home, path) = gemini_home();
    let before = std::fs::read(&path).unwrap();
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    // what a newer Gemini CLI might write: a record of a shape not known here, a message type
    // not known here, then an ordinary prompt
    writeln!(file, r#"{{"$checkpoint":{{"v":2}}}}"#).unwrap();
    writeln!(file, r#"{{"id":"m-new","timestamp":"2026-12-01T22:31:00.000Z","type":"hologram","content":"?"}}"#)
        .unwrap();
    writeln!(
        file,
        r#"{{"id":"m-ok","timestamp":"2026-12-01T22:32:00.000Z","type":"user","content":[{{"text":"NEWER prompt"}}]}}"#
    )
    .unwrap();
    drop(file);
    let grown = std::fs::read(&path).unwrap();
    let mut sink = MemorySink::default();
    let report = ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    assert_eq!(report.skipped.get("unknown_record_type"), Some(&1), "{report:?}");
    assert_eq!(report.skipped.get("unknown_message_type"), Some(&1), "{report:?}");
    assert_eq!(sink.text_of(&format!("{SESSION}:m-ok")), "NEWER prompt", "the rest is archived");
    assert_eq!(sink.messages_of(SESSION).len(), 3);
    assert_eq!(std::fs::read(&path).unwrap(), grown, "the host's file is left as it was");

    // cut back to its first state (a new file under the old name): read again from the start
    std::fs::write(&path, &before).unwrap();
    let shrunk = ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    assert_eq!(shrunk.skipped.get("file_shrunk"), Some(&1), "{shrunk:?}");
    assert!(shrunk.errors.is_empty(), "{shrunk:?}");
}

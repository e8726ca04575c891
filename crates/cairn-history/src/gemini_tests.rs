use std::io::Write;
use std::path::{Path, PathBuf};

use super::*;
use crate::ingest;
use crate::model::HistoryRole;
use crate::test_sink::MemorySink;

/// The chat recorded from Gemini CLI 0.61 (`gemini -p`, SessionStart and BeforeAgent hooks
/// answering context that is not cairn's, the scripted model of tests/e2e), paths cut.
const SESSION: &str = "5772958c-af24-4091-afb1-a1cfa8346137";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/history/gemini/e2e-project/chats")
}

/// The recorded chat copied into `<tmp>/.gemini/tmp/e2e-project/chats`, and its path there.
fn gemini_home() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let chats = tmp.path().join(".gemini/tmp/e2e-project/chats");
    std::fs::create_dir_all(&chats).unwrap();
    let mut copied = None;
    for entry in std::fs::read_dir(fixture()).unwrap() {
        let entry = entry.unwrap();
        let target = chats.join(entry.file_name());
        std::fs::copy(entry.path(), &target).unwrap();
        copied = Some(target);
    }
    (tmp, copied.unwrap())
}

fn env_for(home: &Path) -> impl Fn(&str) -> Option<String> + use<> {
    let home = home.to_path_buf();
    move |name| (name == "HOME").then(|| home.display().to_string())
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

use std::io::Write;
use std::path::{Path, PathBuf};

use super::*;
use crate::ingest::{self, PokeRequest};
use crate::model::{HistoryRole, PartKind, ToolStatus};
use crate::test_sink::MemorySink;

const MAIN: &str = "3f0c2a4e-9b1d-4c55-8a77-0d2e6f1b9c01";

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/history/claude")
}

/// The recorded transcripts copied into `<tmp>/.claude/projects` (tests never read the
/// committed files in place: ingest must work on any copy).
pub(crate) fn claude_home() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixture_dir(), &tmp.path().join(".claude/projects"));
    tmp
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

pub(crate) fn env_for(home: &Path) -> impl Fn(&str) -> Option<String> + use<> {
    let home = home.to_path_buf();
    move |name| match name {
        "HOME" => Some(home.display().to_string()),
        "XDG_DATA_HOME" => Some(home.join("xdg-data").display().to_string()),
        _ => None,
    }
}

fn ingest_fixture() -> (tempfile::TempDir, MemorySink) {
    let home = claude_home();
    let mut sink = MemorySink::default();
    let report = ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
    (home, sink)
}

#[test]
fn real_transcripts_give_the_session_and_its_sub_agents() {
    let (_home, sink) = ingest_fixture();
    assert_eq!(sink.sessions.len(), 3, "{:?}", sink.sessions.keys());
    let main = &sink.sessions[MAIN];
    assert_eq!(main.parent_id, None);
    assert_eq!(main.directory.as_deref(), Some("/nonexistent/sandbox/cc-history-project"));
    assert_eq!(main.model.as_deref(), Some("claude-mock-1"));
    assert!(!main.created_at.is_empty() && main.created_at <= main.updated_at);
    let children: Vec<_> = sink.sessions.values().filter(|s| s.parent_id.as_deref() == Some(MAIN)).collect();
    assert_eq!(children.len(), 2);
    for child in children {
        assert!(child.id.starts_with("agent-") && !child.id.contains('/'), "{}", child.id);
        let first = sink.messages_of(&child.id)[0];
        assert_eq!(first.role, HistoryRole::User);
        assert!(sink.text_of(&first.id).contains("SUBAGENT-PROMPT"));
    }
}

#[test]
fn real_transcripts_pair_tools_and_mark_compaction() {
    let (_home, sink) = ingest_fixture();
    let messages = sink.messages_of(MAIN);
    let first = messages[0];
    assert_eq!(first.role, HistoryRole::User);
    assert!(first.opens_turn());
    let text = sink.text_of(&first.id);
    assert!(text.contains("REC-BASH print the marker [REDACTED]"), "{text}");
    assert!(
        !sink.parts.values().any(|p| [&p.text, &p.input, &p.output]
            .iter()
            .any(|f| f.as_deref().is_some_and(|t| t.contains("hunter2"))))
    );
    // The Bash call and its result (a separate user line) are one completed part.
    let bash = sink.parts.values().find(|p| p.tool.as_deref() == Some("Bash")).expect("a Bash part");
    assert_eq!(bash.kind, PartKind::Tool);
    assert_eq!(bash.status, Some(ToolStatus::Completed));
    assert!(bash.output.as_deref().unwrap().contains("fixture-bash-output"), "{bash:?}");
    assert!(bash.input.as_deref().unwrap().contains("echo fixture-bash-output"));
    // Tool-result-only user lines are not messages.
    for m in &messages {
        if m.role == HistoryRole::User && !m.compaction {
            assert!(!sink.parts_of(&m.id).is_empty(), "user message without parts: {m:?}");
        }
    }
    let boundary: Vec<_> = messages.iter().filter(|m| m.compaction).collect();
    assert_eq!(boundary.len(), 1);
    assert!(!boundary[0].opens_turn());
    let summary: Vec<_> = messages.iter().filter(|m| m.summary).collect();
    assert_eq!(summary.len(), 1);
    assert!(summary[0].seq > boundary[0].seq);
    assert!(sink.text_of(&summary[0].id).contains("MOCK-SUMMARY"));
    assert!(messages.iter().any(|m| m.synthetic), "the isMeta caveat line is synthetic");
    let last_user = messages.iter().rev().find(|m| m.opens_turn()).unwrap();
    assert!(sink.text_of(&last_user.id).contains("REC-AFTER"));
    let assistant = messages.iter().find(|m| m.role == HistoryRole::Assistant).unwrap();
    assert!(assistant.tokens.as_ref().is_some_and(|t| t.contains("\"input_tokens\"")));
    // No system reminders survive.
    assert!(!sink.parts.values().any(|p| p.text.as_deref().is_some_and(|t| t.contains("<system-reminder>"))));
}

#[test]
fn a_second_scan_reads_nothing_and_chunks_give_the_same_result() {
    let (home, mut sink) = ingest_fixture();
    let again = ingest::scan(&mut sink, &env_for(home.path()), &mut |_| {}).unwrap();
    assert_eq!((again.messages, again.parts, again.bytes), (0, 0, 0));
    // Tiny chunks: the same model.
    let mut small = MemorySink::default();
    let path = home.path().join(format!(".claude/projects/-nonexistent-sandbox-cc-history-project/{MAIN}.jsonl"));
    let source = ingest::SourceRef { key: path.display().to_string(), host: crate::model::HistoryHost::ClaudeCode };
    let mut cursor = Cursor::default();
    loop {
        let (batch, next, more) = read_file(&path, &cursor, 2048).unwrap();
        let expected = small.cursors.get(&source.key).cloned();
        crate::ingest::HistorySink::apply(&mut small, &source, expected.as_ref(), &batch, &next).unwrap();
        cursor = next;
        if !more {
            break;
        }
    }
    let whole: Vec<_> = sink.messages_of(MAIN).into_iter().cloned().collect();
    let chunked: Vec<_> = small.messages_of(MAIN).into_iter().cloned().collect();
    assert_eq!(whole, chunked);
    let bash = small.parts.values().find(|p| p.tool.as_deref() == Some("Bash")).unwrap();
    assert_eq!(bash.status, Some(ToolStatus::Completed), "a result read in a later chunk is paired");
}

fn line(v: serde_json::Value) -> String {
    format!("{v}\n")
}

fn user(uuid: &str, text: &str) -> String {
    line(
        serde_json::json!({"type": "user", "uuid": uuid, "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/nonexistent/p",
        "message": {"role": "user", "content": text}}),
    )
}

fn transcript(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

#[test]
fn a_partial_last_line_waits_for_its_end() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = user("u-3", "third");
    let (head, tail) = whole.split_at(20);
    let path = transcript(tmp.path(), "s1.jsonl", &format!("{}{}{head}", user("u-1", "first"), user("u-2", "second")));
    let (batch, cursor, more) = read_file(&path, &Cursor::default(), 1 << 20).unwrap();
    assert_eq!(batch.messages.len(), 2);
    assert!(!more);
    assert_eq!(cursor.offset, (std::fs::metadata(&path).unwrap().len() - head.len() as u64));
    let (again, same, _) = read_file(&path, &cursor, 1 << 20).unwrap();
    assert!(again.messages.is_empty());
    assert_eq!(same.offset, cursor.offset);
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(tail.as_bytes()).unwrap();
    let (rest, end, more) = read_file(&path, &cursor, 1 << 20).unwrap();
    assert_eq!(rest.messages.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["u-3"]);
    assert_eq!(end.offset, std::fs::metadata(&path).unwrap().len());
    assert!(!more);
}

#[test]
fn bad_lines_are_counted_and_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let body = [
        user("u-1", "ok"),
        "not json at all\n".to_owned(),
        line(serde_json::json!({"type": "brand-new-kind", "uuid": "x"})),
        line(serde_json::json!({"type": "user", "uuid": "../etc", "message": {"role": "user", "content": "x"}})),
        line(serde_json::json!({"type": "assistant", "uuid": "a-1", "message": {"role": "assistant", "content": [{"type": "hologram"}, {"type": "text", "text": "hi"}]}})),
        "\n".to_owned(),
        user("u-2", "still read"),
    ]
    .concat();
    let path = transcript(tmp.path(), "s1.jsonl", &body);
    let (batch, _, _) = read_file(&path, &Cursor::default(), 1 << 20).unwrap();
    let skipped: std::collections::BTreeMap<_, _> = batch.skipped.into_iter().collect();
    assert_eq!(skipped.get("invalid_json"), Some(&1));
    assert_eq!(skipped.get("unknown_record_type"), Some(&1));
    assert_eq!(skipped.get("invalid_id"), Some(&1));
    assert_eq!(skipped.get("unknown_block_type"), Some(&1));
    assert_eq!(batch.messages.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["u-1", "a-1", "u-2"]);
}

#[test]
fn a_shrunk_file_is_read_again_from_the_start() {
    let tmp = tempfile::tempdir().unwrap();
    let path = transcript(tmp.path(), "s1.jsonl", &format!("{}{}", user("u-1", "one"), user("u-2", "two")));
    let (_, cursor, _) = read_file(&path, &Cursor::default(), 1 << 20).unwrap();
    std::fs::write(&path, user("u-9", "new")).unwrap();
    let (batch, next, _) = read_file(&path, &cursor, 1 << 20).unwrap();
    assert_eq!(batch.messages[0].id, "u-9");
    assert_eq!(batch.skipped, vec![("file_shrunk".to_owned(), 1)]);
    assert_eq!(next.offset, std::fs::metadata(&path).unwrap().len());
}

#[test]
fn a_line_longer_than_a_chunk_is_read_and_a_huge_one_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let long = "x".repeat(10_000);
    let path = transcript(tmp.path(), "s1.jsonl", &format!("{}{}", user("u-1", &long), user("u-2", "after")));
    let (batch, cursor, more) = read_file_limited(&path, &Cursor::default(), 1024, 1 << 20).unwrap();
    assert_eq!(batch.messages[0].id, "u-1");
    assert!(more);
    let (batch, _, _) = read_file_limited(&path, &cursor, 1024, 1 << 20).unwrap();
    assert_eq!(batch.messages[0].id, "u-2");
    let (batch, cursor, _) = read_file_limited(&path, &Cursor::default(), 1024, 5_000).unwrap();
    assert!(batch.messages.is_empty());
    assert_eq!(batch.skipped, vec![("line_too_large".to_owned(), 1)]);
    let (batch, _, _) = read_file_limited(&path, &cursor, 1024, 5_000).unwrap();
    assert_eq!(batch.messages[0].id, "u-2", "the next line is read after a skipped one");
}

#[test]
fn unreadable_and_badly_named_files_are_refused_with_a_code() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = read_file(&tmp.path().join("gone.jsonl"), &Cursor::default(), 1024).unwrap_err();
    assert_eq!(missing.code, ErrorCode::HistorySourceUnreadable);
    let dir = tmp.path().join("parent/subagents");
    std::fs::create_dir_all(&dir).unwrap();
    let evil = transcript(&dir, "agent-a..b.jsonl", &user("u-1", "x"));
    assert_eq!(read_file(&evil, &Cursor::default(), 1024).unwrap_err().code, ErrorCode::HistorySourceUnreadable);
    // Through poke: the error is recorded on the source, not raised.
    let mut sink = MemorySink::default();
    let report = ingest::poke(
        &mut sink,
        &env_for(tmp.path()),
        &PokeRequest { path: Some(tmp.path().join("gone.jsonl")), ..Default::default() },
    )
    .unwrap();
    assert_eq!(report.errors.len(), 1);
    assert_eq!(report.errors[0].code, "history_source_unreadable");
    assert_eq!(sink.errors.len(), 1);
}

#[test]
fn titles_prefer_the_users_own() {
    let tmp = tempfile::tempdir().unwrap();
    let body = [
        user("u-1", "hello"),
        line(serde_json::json!({"type": "ai-title", "aiTitle": "Machine title"})),
        line(serde_json::json!({"type": "custom-title", "customTitle": "My title <private>x</private>"})),
        line(serde_json::json!({"type": "summary", "summary": "Resume summary", "leafUuid": "u-1"})),
    ]
    .concat();
    let path = transcript(tmp.path(), "s1.jsonl", &body);
    let (batch, _, _) = read_file(&path, &Cursor::default(), 1 << 20).unwrap();
    assert_eq!(batch.sessions[0].title.as_deref(), Some("My title [REDACTED]"));
}

#[test]
fn a_result_in_a_later_read_goes_to_results() {
    let tmp = tempfile::tempdir().unwrap();
    let call =
        line(serde_json::json!({"type": "assistant", "uuid": "a-1", "message": {"role": "assistant", "model": "m",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "/x"}}]}}));
    let path = transcript(tmp.path(), "s1.jsonl", &call);
    let (batch, cursor, _) = read_file(&path, &Cursor::default(), 1 << 20).unwrap();
    assert_eq!(batch.parts[0].status, Some(ToolStatus::Running));
    let result = line(serde_json::json!({"type": "user", "uuid": "u-2", "message": {"role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true, "content": [{"type": "text", "text": "no such file"}]}]}}));
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(result.as_bytes()).unwrap();
    let (batch, _, _) = read_file(&path, &cursor, 1 << 20).unwrap();
    assert!(batch.messages.is_empty(), "a tool-result-only line is not a message");
    assert_eq!(batch.results.len(), 1);
    assert_eq!(batch.results[0].output, "no such file");
    assert!(batch.results[0].is_error);
}

#[test]
fn locate_and_identify() {
    let env = |n: &str| (n == "CLAUDE_CONFIG_DIR").then(|| "/nonexistent/cc".to_owned());
    assert_eq!(locate(&env), Some(PathBuf::from("/nonexistent/cc/projects")));
    let env = |n: &str| (n == "HOME").then(|| "/nonexistent/home".to_owned());
    assert_eq!(locate(&env), Some(PathBuf::from("/nonexistent/home/.claude/projects")));
    let id = identify(Path::new("/p/slug/abc/subagents/agent-123.jsonl")).unwrap();
    assert_eq!(id, FileIdentity { session_id: "agent-123".into(), parent_id: Some("abc".into()) });
}

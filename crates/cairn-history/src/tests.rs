//! The archive on hand-built batches: an OpenCode-shaped session with a compaction and a
//! sub-agent child, and a Claude-Code-shaped one whose tool result arrives in a later batch.

use serde_json::json;

use super::model::*;
use super::query::*;
use super::store::{ApplyOutcome, HistoryDb, SourceRef};
use cairn_base::error::ErrorCode;
use cairn_base::settings::HistorySettings;

const OC: &str = "ses_oc";
const CHILD: &str = "ses_child";
const CC: &str = "5f0c2a9e-0000-4000-8000-00000000cc01";

fn ts(n: i64) -> String {
    format!("2026-03-01T10:{:02}:{:02}.000Z", n / 60 % 60, n % 60)
}

fn session(id: &str, host: HistoryHost, parent: Option<&str>, title: &str) -> HistorySession {
    HistorySession {
        id: id.into(),
        host,
        project: Some("shop".into()),
        directory: Some("/nonexistent/shop".into()),
        parent_id: parent.map(Into::into),
        title: Some(title.into()),
        agent: None,
        model: None,
        created_at: ts(0),
        updated_at: ts(1),
    }
}

fn message(session: &str, id: &str, role: HistoryRole, seq: i64) -> HistoryMessage {
    HistoryMessage::new(session, id, role, seq, &ts(seq % 3000 / 10))
}

fn user(session: &str, id: &str, seq: i64) -> HistoryMessage {
    message(session, id, HistoryRole::User, seq)
}

fn assistant(session: &str, id: &str, seq: i64) -> HistoryMessage {
    message(session, id, HistoryRole::Assistant, seq)
}

fn part(message: &HistoryMessage, idx: i64, kind: PartKind) -> HistoryPart {
    HistoryPart::new(&message.session_id, &message.id, &format!("{}:{idx}", message.id), idx, kind)
}

fn text(message: &HistoryMessage, idx: i64, body: &str) -> HistoryPart {
    HistoryPart { text: Some(body.into()), ..part(message, idx, PartKind::Text) }
}

fn tool(
    message: &HistoryMessage,
    idx: i64,
    name: &str,
    input: serde_json::Value,
    status: ToolStatus,
    output: Option<&str>,
) -> HistoryPart {
    HistoryPart {
        tool: Some(name.into()),
        call_id: Some(format!("call-{}-{idx}", message.id)),
        status: Some(status),
        input: Some(input.to_string()),
        output: output.map(Into::into),
        ..part(message, idx, PartKind::Tool)
    }
}

/// OpenCode: two turns, a compaction (trigger + summary + auto-continue), a third turn after
/// it, and a sub-agent child session.
fn opencode_batch() -> IngestBatch {
    let mut b = IngestBatch {
        sessions: vec![
            session(OC, HistoryHost::OpenCode, None, "Fix login"),
            session(CHILD, HistoryHost::OpenCode, Some(OC), "Explore auth"),
        ],
        ..Default::default()
    };
    let u1 = user(OC, "msg_u1", 1000);
    b.parts.push(text(&u1, 0, "Please fix the login bug in auth.rs"));
    b.parts.push(HistoryPart {
        path: Some("src/auth.rs".into()),
        mime: Some("text/plain".into()),
        ..part(&u1, 1, PartKind::File)
    });
    let a1 = assistant(OC, "msg_a1", 1001);
    b.parts.push(HistoryPart { text: Some("Looking for the login code".into()), ..part(&a1, 0, PartKind::Reasoning) });
    b.parts.push(tool(
        &a1,
        1,
        "grep",
        json!({"pattern": "login", "path": "src"}),
        ToolStatus::Completed,
        Some("src/auth.rs:12: fn login()"),
    ));
    b.parts.push(tool(
        &a1,
        2,
        "edit",
        json!({"filePath": "src/auth.rs", "oldString": "a", "newString": "b"}),
        ToolStatus::Completed,
        Some("ok"),
    ));
    b.parts.push(text(&a1, 3, "Fixed the login bug by checking the token expiry."));
    let u2 = user(OC, "msg_u2", 2000);
    b.parts.push(text(&u2, 0, &format!("Now add a test for the token expiry. {}", "x".repeat(1000))));
    let a2 = assistant(OC, "msg_a2", 2001);
    b.parts.push(tool(
        &a2,
        0,
        "bash",
        json!({"command": format!("cargo test {}", "y".repeat(200))}),
        ToolStatus::Error,
        Some("error: no such test"),
    ));
    b.parts.push(tool(
        &a2,
        1,
        "bash",
        json!({"command": "cargo test"}),
        ToolStatus::Completed,
        Some("test result: ok"),
    ));
    b.parts.push(text(&a2, 2, "Added the expiry test."));
    let c1 = HistoryMessage { compaction: true, ..user(OC, "msg_c1", 3000) };
    b.parts.push(part(&c1, 0, PartKind::Compaction));
    let s1 = HistoryMessage { summary: true, ..assistant(OC, "msg_s1", 3001) };
    b.parts.push(text(&s1, 0, "Summary: fixed login, added the expiry test"));
    let u3 = HistoryMessage { synthetic: true, ..user(OC, "msg_u3", 4000) };
    b.parts.push(text(&u3, 0, "Continue if you have next steps"));
    let u4 = user(OC, "msg_u4", 5000);
    b.parts.push(text(&u4, 0, "Deploy it to staging"));
    let a4 = assistant(OC, "msg_a4", 5001);
    b.parts.push(text(&a4, 0, "Deployed to staging."));
    let k1 = user(CHILD, "msg_k1", 1500);
    b.parts.push(text(&k1, 0, "Explore the auth module"));
    b.messages = vec![u1, a1, u2, a2, c1, s1, u3, u4, a4, k1];
    b.skipped = vec![("unknown_part_type".into(), 2)];
    b
}

/// Claude Code: a user line, an assistant line with a Bash tool_use (running), then (in a
/// second batch) its tool_result, a compact boundary, the summary and a new turn.
fn claude_batches() -> (IngestBatch, IngestBatch) {
    let mut first =
        IngestBatch { sessions: vec![session(CC, HistoryHost::ClaudeCode, None, "Parser")], ..Default::default() };
    let u1 = user(CC, "cc-u1", 0);
    first.parts.push(text(&u1, 0, "Refactor the parser"));
    let a1 = assistant(CC, "cc-a1", 120);
    first.parts.push(text(&a1, 0, "Running the tests first."));
    first.parts.push(HistoryPart {
        call_id: Some("toolu_1".into()),
        ..tool(&a1, 1, "Bash", json!({"command": "cargo test -p parser"}), ToolStatus::Running, None)
    });
    first.messages = vec![u1, a1];
    let mut second = IngestBatch {
        results: vec![ToolResult {
            session_id: CC.into(),
            call_id: "toolu_1".into(),
            output: "test result: ok. 10 passed".into(),
            is_error: false,
        }],
        ..Default::default()
    };
    let boundary = HistoryMessage { compaction: true, ..user(CC, "cc-boundary", 300) };
    let summary = HistoryMessage { summary: true, ..user(CC, "cc-summary", 400) };
    second.parts.push(text(&summary, 0, "This session is being continued: the parser refactor"));
    let u2 = user(CC, "cc-u2", 500);
    second.parts.push(text(&u2, 0, "Now write the docs"));
    second.messages = vec![boundary, summary, u2];
    (first, second)
}

fn oc_source() -> SourceRef {
    SourceRef { key: "opencode.db#ses_oc".into(), host: HistoryHost::OpenCode }
}

fn cc_source() -> SourceRef {
    SourceRef { key: "projects/shop/cc.jsonl".into(), host: HistoryHost::ClaudeCode }
}

fn cursor(offset: u64) -> Cursor {
    Cursor { offset, size: offset, mtime_ms: 1, watermark: None }
}

fn loaded() -> HistoryDb {
    let mut db = HistoryDb::open_in_memory().unwrap();
    assert!(matches!(db.apply(&oc_source(), None, &opencode_batch(), &cursor(1)).unwrap(), ApplyOutcome::Applied(_)));
    let (first, second) = claude_batches();
    db.apply(&cc_source(), None, &first, &cursor(200)).unwrap();
    db.apply(&cc_source(), Some(&cursor(200)), &second, &cursor(600)).unwrap();
    db
}

fn cfg() -> HistorySettings {
    HistorySettings::default()
}

fn turns(
    db: &HistoryDb,
    session: &str,
    turn: Option<i64>,
    before: usize,
    after: usize,
    caller: Option<&str>,
) -> cairn_base::Result<TurnsPage> {
    let req = TurnsRequest {
        session_id: session.into(),
        turn_number: turn,
        num_before: before,
        num_after: after,
        caller_session_id: caller.map(Into::into),
    };
    browse_turns(db, &req, &cfg())
}

fn turn_numbers(page: &TurnsPage) -> Vec<i64> {
    page.turns.iter().map(|t| t.turn_number).collect()
}

fn messages(
    db: &HistoryDb,
    session: &str,
    anchor: Option<&str>,
    before: usize,
    after: usize,
    caller: Option<&str>,
) -> cairn_base::Result<MessagesPage> {
    let req = MessagesRequest {
        session_id: session.into(),
        message_id: anchor.map(Into::into),
        num_before: before,
        num_after: after,
        caller_session_id: caller.map(Into::into),
    };
    browse_messages(db, &req, &cfg())
}

fn pull(db: &HistoryDb, session: &str, message: &str, caller: Option<&str>) -> cairn_base::Result<PulledMessage> {
    let req = MessageRequest {
        session_id: session.into(),
        message_id: message.into(),
        caller_session_id: caller.map(Into::into),
    };
    pull_message(db, &req, &cfg())
}

fn part_page(
    db: &HistoryDb,
    message: &str,
    part: &str,
    offset: usize,
    max_chars: usize,
) -> cairn_base::Result<PulledPart> {
    let req = PartRequest {
        session_id: OC.into(),
        message_id: message.into(),
        part_id: part.into(),
        offset,
        max_chars,
        caller_session_id: None,
    };
    pull_part(db, &req)
}

/// A search request in any project; the search tests of `query::search` build theirs here too.
pub(crate) fn search_request(
    query: &str,
    session: Option<&str>,
    literal: bool,
    kinds: Option<&str>,
    caller: Option<&str>,
) -> SearchRequest {
    SearchRequest {
        query: query.into(),
        session_id: session.map(Into::into),
        project: None,
        literal,
        kinds: kinds.map(Into::into),
        caller_session_id: caller.map(Into::into),
    }
}

fn find(
    db: &HistoryDb,
    query: &str,
    session: Option<&str>,
    literal: bool,
    kinds: Option<&str>,
    caller: Option<&str>,
) -> SearchResults {
    search(db, &search_request(query, session, literal, kinds, caller), &cfg()).unwrap()
}

fn message_ids(page: &MessagesPage) -> Vec<&str> {
    page.messages.iter().map(|m| m.message_id.as_str()).collect()
}

#[test]
fn cursor_compare_and_swap_refuses_a_stale_batch() {
    let mut db = HistoryDb::open_in_memory().unwrap();
    let source = oc_source();
    assert_eq!(db.cursor(&source.key).unwrap(), None);
    db.apply(&source, None, &opencode_batch(), &cursor(1)).unwrap();
    assert_eq!(db.cursor(&source.key).unwrap(), Some(cursor(1)));
    // Another ingester read from the start too: its batch is refused, nothing written.
    let mut late = opencode_batch();
    late.messages[0].id = "msg_late".into();
    assert_eq!(db.apply(&source, None, &late, &cursor(9)).unwrap(), ApplyOutcome::Stale);
    assert_eq!(db.cursor(&source.key).unwrap(), Some(cursor(1)));
    assert_eq!(pull(&db, OC, "msg_late", None).unwrap_err().code, ErrorCode::MessageNotFound);
    // The same batch applied again from the right cursor changes no part.
    let ApplyOutcome::Applied(again) = db.apply(&source, Some(&cursor(1)), &opencode_batch(), &cursor(2)).unwrap()
    else {
        panic!("stale")
    };
    assert_eq!(again.parts, 0);
}

#[test]
fn turns_are_numbered_per_real_user_message_and_kept_on_re_upsert() {
    let mut db = loaded();
    let all = turns(&db, OC, None, 10, 0, None).unwrap();
    assert_eq!(turn_numbers(&all), [1, 2, 3]);
    // The synthetic auto-continue and the compaction records stay in turn 2.
    let window = messages(&db, OC, Some("msg_u3"), 3, 0, None).unwrap();
    assert!(window.messages.iter().all(|m| m.turn_number == 2), "{window:?}");
    // Re-upserting a message keeps its number; a message inserted earlier shifts the later turns.
    let mut batch = IngestBatch::default();
    batch.messages.push(user(OC, "msg_u2", 2000));
    db.apply(&oc_source(), Some(&cursor(1)), &batch, &cursor(2)).unwrap();
    assert_eq!(turn_numbers(&turns(&db, OC, None, 10, 0, None).unwrap()), [1, 2, 3]);
    let mut batch = IngestBatch::default();
    let early = user(OC, "msg_early", 1500);
    batch.parts.push(text(&early, 0, "An early question"));
    batch.messages.push(early);
    db.apply(&oc_source(), Some(&cursor(2)), &batch, &cursor(3)).unwrap();
    let page = turns(&db, OC, None, 10, 0, None).unwrap();
    assert_eq!(turn_numbers(&page), [1, 2, 3, 4]);
    assert_eq!(page.turns[1].user.message_id, "msg_early");
    assert_eq!(page.turns[3].user.message_id, "msg_u4");
}

#[test]
fn browse_turns_previews_tools_files_and_outcomes() {
    let db = loaded();
    let page = turns(&db, OC, Some(1), 0, 1, None).unwrap();
    assert_eq!(turn_numbers(&page), [1, 2]);
    let first = &page.turns[0];
    assert_eq!(first.user.preview.as_deref(), Some("Please fix the login bug in auth.rs"));
    assert_eq!(first.user.attachment.as_deref(), Some(&["src/auth.rs".to_owned()][..]));
    assert_eq!(first.assistant.preview.as_deref(), Some("Fixed the login bug by checking the token expiry."));
    assert_eq!(first.assistant.total_messages, 1);
    let tools = first.assistant.tool.as_ref().unwrap();
    assert_eq!(tools.calls, ["1× grep", "1× edit"]);
    assert_eq!(tools.outcome, "completed");
    assert_eq!(first.assistant.modified.as_deref(), Some(&["src/auth.rs".to_owned()][..]));
    let second = &page.turns[1];
    assert_eq!(second.assistant.tool.as_ref().unwrap().outcome, "recovered");
    assert_eq!(second.assistant.tool.as_ref().unwrap().calls, ["2× bash"]);
    // The user preview is cut at 280 characters.
    assert!(second.user.preview.as_ref().unwrap().chars().count() <= 283);
    let json = serde_json::to_value(&page).unwrap();
    assert!(json["turns"][1]["user"].get("attachment").is_none());
    assert!(json["turns"][1]["assistant"].get("modified").is_none());
}

#[test]
fn own_session_sees_only_what_came_before_its_latest_compaction() {
    let db = loaded();
    let own = turns(&db, OC, None, 10, 0, Some(OC)).unwrap();
    assert_eq!(turn_numbers(&own), [1, 2], "turn 3 is after the compaction");
    let err = turns(&db, OC, Some(3), 0, 0, Some(OC)).unwrap_err();
    assert_eq!(err.code, ErrorCode::TurnOutOfRange);
    assert!(err.hint.unwrap().contains("1..=2"));
    assert_eq!(turns(&db, OC, Some(0), 0, 0, None).unwrap_err().code, ErrorCode::TurnOutOfRange);
    // Another caller (or none) sees everything, compaction records labelled.
    let all = messages(&db, OC, Some("msg_c1"), 0, 1, Some("ses_other")).unwrap();
    let labels: Vec<&str> = all.messages.iter().map(|m| m.preview.as_str()).collect();
    assert_eq!(labels, ["[compaction trigger]", "[compacted summary]"]);
    // Hidden ids are a typed error; unknown ones another.
    assert_eq!(pull(&db, OC, "msg_s1", Some(OC)).unwrap_err().code, ErrorCode::MessageNotVisible);
    assert_eq!(pull(&db, OC, "msg_u4", Some(OC)).unwrap_err().code, ErrorCode::MessageNotVisible);
    assert_eq!(pull(&db, OC, "msg_nope", Some(OC)).unwrap_err().code, ErrorCode::MessageNotFound);
    // The latest visible message is the default anchor.
    let latest = messages(&db, OC, None, 1, 0, Some(OC)).unwrap();
    assert_eq!(message_ids(&latest), ["msg_u2", "msg_a2"]);
    // Claude Code: the boundary is the last compact_boundary.
    let cc = turns(&db, CC, None, 10, 0, Some(CC)).unwrap();
    assert_eq!(turn_numbers(&cc), [1]);
    assert_eq!(turn_numbers(&turns(&db, CC, None, 10, 0, None).unwrap()), [1, 2]);
}

#[test]
fn browse_messages_pages_with_ids_either_side() {
    let db = loaded();
    let page = messages(&db, OC, Some("msg_a1"), 0, 1, None).unwrap();
    assert_eq!(message_ids(&page), ["msg_a1", "msg_u2"]);
    assert_eq!(page.before_message_id.as_deref(), Some("msg_u1"));
    assert_eq!(page.after_message_id.as_deref(), Some("msg_a2"));
    let start = messages(&db, OC, Some("msg_u1"), 5, 0, None).unwrap();
    assert_eq!(start.before_message_id, None);
    let a1 = &page.messages[0];
    assert_eq!(a1.preview, "Fixed the login bug by checking the token expiry.");
    assert_eq!(a1.tool.as_ref().unwrap().calls, ["1× grep", "1× edit"]);
    let json = serde_json::to_value(&start).unwrap();
    assert!(json["before_message_id"].is_null(), "null, not absent: {json}");
}

#[test]
fn pull_message_cuts_long_parts_and_applies_tool_visibility() {
    let db = loaded();
    let u2 = pull(&db, OC, "msg_u2", None).unwrap();
    let Section::Text { content, part_id, .. } = &u2.sections[0] else { panic!("{u2:?}") };
    assert!(content.ends_with(" [637 chars more]"), "{content}");
    assert_eq!(content.chars().count(), 400 + " [637 chars more]".len());
    assert_eq!(part_id.as_deref(), Some("msg_u2:0"));
    assert_eq!(u2.turn_number, 2);
    assert_eq!(u2.role, "user");
    let a1 = pull(&db, OC, "msg_a1", None).unwrap();
    let kinds: Vec<String> =
        a1.sections.iter().map(|s| serde_json::to_value(s).unwrap()["type"].as_str().unwrap().to_owned()).collect();
    assert_eq!(kinds, ["reasoning", "tool", "tool", "text"]);
    // grep: input and output shown by default; edit: output only, its input withheld (part_id to pull).
    let Section::Tool { input, content, part_id, status, .. } = &a1.sections[1] else { panic!() };
    assert_eq!(input.as_ref().unwrap()["pattern"], "login");
    assert_eq!(content.as_deref(), Some("src/auth.rs:12: fn login()"));
    assert_eq!((part_id, status.as_str()), (&None, "completed"));
    let Section::Tool { input, content, part_id, .. } = &a1.sections[2] else { panic!() };
    assert!(input.is_none());
    assert_eq!(content.as_deref(), Some("ok"));
    assert_eq!(part_id.as_deref(), Some("msg_a1:2"));
    // A long string field of a tool input is cut at 140.
    let a2 = pull(&db, OC, "msg_a2", None).unwrap();
    let Section::Tool { input, part_id, .. } = &a2.sections[0] else { panic!() };
    assert!(input.as_ref().unwrap()["command"].as_str().unwrap().ends_with("chars more]"));
    assert!(part_id.is_some());
    let u1 = pull(&db, OC, "msg_u1", None).unwrap();
    assert_eq!(
        serde_json::to_value(&u1.sections[1]).unwrap(),
        json!({"type": "file", "path": "src/auth.rs", "mime": "text/plain"})
    );
}

#[test]
fn tool_selectors_follow_names_globs_exclusions_and_claude_names() {
    assert!(tool_shown("Bash", DEFAULT_INPUT_TOOLS, &[]));
    assert!(tool_shown("Agent", DEFAULT_INPUT_TOOLS, &[]));
    assert!(tool_shown("Write", DEFAULT_OUTPUT_TOOLS, &[]));
    assert!(!tool_shown("read", DEFAULT_OUTPUT_TOOLS, &[]));
    assert!(tool_shown("read", DEFAULT_OUTPUT_TOOLS, &["read".into()]));
    assert!(tool_shown("mcp__cairn__mem_save", DEFAULT_OUTPUT_TOOLS, &["mcp__*".into()]));
    assert!(!tool_shown("bash", DEFAULT_OUTPUT_TOOLS, &["!bash".into(), "bash".into()]));
    assert!(!tool_shown("grep", DEFAULT_OUTPUT_TOOLS, &["!".into()]));
    assert!(tool_shown("read", DEFAULT_OUTPUT_TOOLS, &["!".into(), "read".into()]));
}

#[test]
fn pull_part_pages_through_long_content() {
    let db = loaded();
    let whole = part_page(&db, "msg_u2", "msg_u2:0", 0, 20_000).unwrap();
    assert_eq!(whole.total_chars, 1037);
    assert_eq!(whole.next_offset, None);
    assert_eq!(whole.kind, "text");
    let first = part_page(&db, "msg_u2", "msg_u2:0", 0, 300).unwrap();
    assert_eq!((first.content.chars().count(), first.next_offset), (300, Some(300)));
    let last = part_page(&db, "msg_u2", "msg_u2:0", 1000, 300).unwrap();
    assert_eq!((last.content.chars().count(), last.next_offset), (37, None));
    for (offset, max) in [(1037, 300), (5000, 300), (0, 0), (0, 1_000_000)] {
        let err = part_page(&db, "msg_u2", "msg_u2:0", offset, max).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArgument, "{offset} {max}");
    }
    let grep = part_page(&db, "msg_a1", "msg_a1:1", 0, 20_000).unwrap();
    assert_eq!(grep.kind, "tool");
    assert!(grep.content.starts_with("grep(") && grep.content.contains("pattern=\"login\""), "{}", grep.content);
    assert!(grep.content.ends_with("\n---\nsrc/auth.rs:12: fn login()"));
    assert_eq!(part_page(&db, "msg_u1", "msg_u1:1", 0, 100).unwrap_err().code, ErrorCode::PartNotFound);
    assert_eq!(part_page(&db, "msg_u1", "msg_u1:9", 0, 100).unwrap_err().code, ErrorCode::PartNotFound);
}

#[test]
fn claude_tool_results_complete_their_calls() {
    let mut db = HistoryDb::open_in_memory().unwrap();
    let (first, second) = claude_batches();
    db.apply(&cc_source(), None, &first, &cursor(200)).unwrap();
    let running = pull(&db, CC, "cc-a1", None).unwrap();
    let Section::Tool { status, content, .. } = &running.sections[1] else { panic!() };
    assert_eq!((status.as_str(), content), ("running", &None));
    let req = PartRequest {
        session_id: CC.into(),
        message_id: "cc-a1".into(),
        part_id: "cc-a1:1".into(),
        offset: 0,
        max_chars: 1000,
        caller_session_id: None,
    };
    assert!(pull_part(&db, &req).unwrap().content.ends_with("has no content yet (status: running)"));
    db.apply(&cc_source(), Some(&cursor(200)), &second, &cursor(600)).unwrap();
    let done = pull(&db, CC, "cc-a1", None).unwrap();
    let Section::Tool { tool, status, content, input, .. } = &done.sections[1] else { panic!() };
    assert_eq!((tool.as_str(), status.as_str()), ("Bash", "completed"));
    assert_eq!(content.as_deref(), Some("test result: ok. 10 passed"));
    assert_eq!(input.as_ref().unwrap()["command"], "cargo test -p parser");
    // The result is searchable now.
    let hits = find(&db, "passed", Some(CC), false, Some("tool"), None);
    assert_eq!(hits.messages[0].message_id, "cc-a1");
    // A result for an unknown call is counted, not fatal.
    let orphan = IngestBatch {
        results: vec![ToolResult {
            session_id: CC.into(),
            call_id: "toolu_x".into(),
            output: "?".into(),
            is_error: true,
        }],
        ..Default::default()
    };
    db.apply(&cc_source(), Some(&cursor(600)), &orphan, &cursor(700)).unwrap();
    let stats = stats(&db).unwrap();
    let claude = stats.hosts.iter().find(|h| h.host == "claude-code").unwrap();
    assert_eq!(claude.skipped.get("orphan_tool_result"), Some(&1));
}

#[test]
fn search_ranks_filters_by_type_and_respects_visibility() {
    let db = loaded();
    let hits = find(&db, "login", Some(OC), false, None, None);
    let ids: Vec<&str> = hits.messages.iter().map(|m| m.message_id.as_str()).collect();
    assert_eq!(ids.len(), 3, "{hits:?}");
    assert!(ids.contains(&"msg_u1") && ids.contains(&"msg_a1") && ids.contains(&"msg_s1"));
    // In its own session the caller does not find the compaction summary.
    let own = find(&db, "login", Some(OC), false, None, Some(OC));
    assert!(own.messages.iter().all(|m| m.message_id != "msg_s1"), "{own:?}");
    let a1 = hits.messages.iter().find(|m| m.message_id == "msg_a1").unwrap();
    assert!(a1.hits.iter().any(|h| h.kind == "tool" && h.tool_name.as_deref() == Some("grep")));
    assert!(a1.hits.iter().all(|h| h.snippets.iter().all(|s| s.to_lowercase().contains("login"))), "{a1:?}");
    // type=tool: only tool parts; reasoning only when asked.
    let tools = find(&db, "login", Some(OC), false, Some("tool"), None);
    assert!(tools.messages.iter().flat_map(|m| &m.hits).all(|h| h.kind == "tool"));
    assert!(find(&db, "looking", Some(OC), false, None, None).messages.is_empty());
    assert_eq!(find(&db, "looking", Some(OC), false, Some("reasoning"), None).messages.len(), 1);
    // Literal: a case-insensitive substring, punctuation and all.
    let literal = find(&db, "AUTH.RS:12", Some(OC), true, Some("tool"), None);
    assert_eq!(literal.messages[0].hits[0].part_id, "msg_a1:1");
    // The caller's own session hides what came after its compaction.
    assert_eq!(find(&db, "staging", Some(OC), false, None, None).messages.len(), 2);
    assert!(find(&db, "staging", Some(OC), false, None, Some(OC)).messages.is_empty());
    // Without a session: every session, the child's too.
    let everywhere = find(&db, "auth", None, false, None, None);
    let sessions: std::collections::HashSet<&str> = everywhere.messages.iter().map(|m| m.session_id.as_str()).collect();
    assert!(sessions.contains(OC) && sessions.contains(CHILD), "{everywhere:?}");
    // Bad input.
    let bad = |query: &str, kinds: Option<&str>| {
        let req = SearchRequest {
            query: query.into(),
            session_id: Some(OC.into()),
            project: None,
            literal: false,
            kinds: kinds.map(Into::into),
            caller_session_id: None,
        };
        search(&db, &req, &cfg()).unwrap_err().code
    };
    assert_eq!(bad("  ", None), ErrorCode::EmptyField);
    assert_eq!(bad(&"a".repeat(501), None), ErrorCode::InvalidArgument);
    assert_eq!(bad("login", Some("text|images")), ErrorCode::InvalidArgument);
}

#[test]
fn chinese_and_japanese_words_inside_a_sentence_are_found() {
    let mut db = HistoryDb::open_in_memory().unwrap();
    let mut batch =
        IngestBatch { sessions: vec![session(OC, HistoryHost::OpenCode, None, "数据库")], ..Default::default() };
    let u = user(OC, "msg_zh", 1000);
    batch.parts.push(text(&u, 0, "我们修复了数据库连接错误"));
    let a = assistant(OC, "msg_ja", 1001);
    batch.parts.push(text(&a, 0, "データベースの接続エラーを直しました"));
    batch.messages.extend([u, a]);
    db.apply(&oc_source(), None, &batch, &cursor(1)).unwrap();
    let ids = |query: &str| -> Vec<String> {
        find(&db, query, None, false, None, None).messages.into_iter().map(|m| m.message_id).collect()
    };
    assert_eq!(ids("数据库"), ["msg_zh"]);
    assert_eq!(ids("接続エラー"), ["msg_ja"]);
    assert!(ids("数据库连接失败").is_empty(), "a substring, not any of its characters");
    let hit = &find(&db, "数据库", None, false, None, None).messages[0].hits[0];
    assert!(hit.snippets[0].contains("数据库"), "{hit:?}");
}

/// Chinese and Japanese searches of 3 characters or more go through the trigram index; they
/// must find what the scan (`literal`) finds, after changes and a forget too.
#[test]
fn the_trigram_index_finds_what_the_substring_scan_finds() {
    let mut db = HistoryDb::open_in_memory().unwrap();
    let other = "ses_zh2";
    let mut batch = IngestBatch {
        sessions: vec![
            session(OC, HistoryHost::OpenCode, None, "数据库"),
            session(other, HistoryHost::OpenCode, None, "API"),
        ],
        ..Default::default()
    };
    let phrases =
        ["我们修复了数据库连接错误", "データベースの接続エラーを直しました", "更新API设计文档", "plain english only"];
    for (n, sid) in [OC, other].into_iter().enumerate() {
        for i in 0..40_i64 {
            let seq = i + 1000 * n as i64;
            let m = if i % 2 == 0 {
                user(sid, &format!("msg_{sid}_{i}"), seq)
            } else {
                assistant(sid, &format!("msg_{sid}_{i}"), seq)
            };
            batch.parts.push(text(&m, 0, &format!("{} #{i}", phrases[i as usize % phrases.len()])));
            if i % 10 == 3 {
                let thinking =
                    HistoryPart { text: Some("思考：数据库索引".into()), ..part(&m, 1, PartKind::Reasoning) };
                batch.parts.push(thinking);
                batch.parts.push(tool(
                    &m,
                    2,
                    "bash",
                    json!({"command": "grep 接続エラー log"}),
                    ToolStatus::Completed,
                    Some("接続エラー: 3件"),
                ));
            }
            batch.messages.push(m);
        }
    }
    db.apply(&oc_source(), None, &batch, &cursor(1)).unwrap();
    let same = |db: &HistoryDb, query: &str, session: Option<&str>, kinds: Option<&str>| {
        let ids = |literal| -> Vec<(String, Vec<String>)> {
            let found = find(db, query, session, literal, kinds, None);
            found
                .messages
                .into_iter()
                .map(|m| (m.message_id, m.hits.into_iter().map(|h| h.part_id).collect()))
                .collect()
        };
        let (indexed, scanned) = (ids(false), ids(true));
        let sorted = |mut v: Vec<(String, Vec<String>)>| {
            v.sort();
            v
        };
        assert_eq!(sorted(indexed.clone()), sorted(scanned), "{query:?} in {session:?} ({kinds:?})");
        indexed.len()
    };
    // (a NUL cannot be in an FTS5 query: that one scans, schemathesis seed 2280620417)
    let queries = [
        "数据库",
        "数据库连接",
        "接続エラー",
        "API设计",
        "api设计文档",
        "数据库连接失败",
        "データベース",
        "数据库\0连接",
    ];
    for query in queries {
        same(&db, query, None, None);
        same(&db, query, Some(other), None);
        same(&db, query, None, Some("reasoning"));
        same(&db, query, None, Some("text|tool|reasoning"));
    }
    assert!(same(&db, "数据库", None, None) > 0);
    assert_eq!(same(&db, "数据库连接失败", None, None), 0, "a substring, not any of its characters");
    assert!(same(&db, "数据库索引", None, Some("reasoning")) > 0);
    // Only the parts holding such characters are in the trigram index.
    let in_cjk: i64 = db.fts().query_row("SELECT count(*) FROM history_cjk", [], |r| r.get(0)).unwrap();
    let all: i64 = db.conn().query_row("SELECT count(*) FROM history_parts", [], |r| r.get(0)).unwrap();
    assert_eq!((in_cjk, all), (76, 96));

    // A part changed in place: found by its new words only; a forgotten session not at all.
    let m = user(OC, "msg_ses_oc_0", 0);
    let changed =
        IngestBatch { parts: vec![text(&m, 0, "迁移脚本已经完成")], messages: vec![m], ..Default::default() };
    db.apply(&oc_source(), Some(&cursor(1)), &changed, &cursor(2)).unwrap();
    assert_eq!(same(&db, "迁移脚本", None, None), 1);
    forget(&mut db, other).unwrap();
    assert_eq!(same(&db, "API设计", Some(OC), None), same(&db, "API设计", None, None));
    let left: i64 = db.fts().query_row("SELECT count(*) FROM history_cjk", [], |r| r.get(0)).unwrap();
    assert!(left < in_cjk, "the forgotten session's parts left the trigram index");
    db.fts().execute("INSERT INTO history_cjk (history_cjk) VALUES ('integrity-check')", []).unwrap();
    // The search really reads the trigram index (emptied, it finds nothing; the scan still
    // does), and a query of 2 characters scans.
    db.fts().execute("INSERT INTO history_cjk (history_cjk) VALUES ('delete-all')", []).unwrap();
    assert!(find(&db, "迁移脚本", None, false, None, None).messages.is_empty());
    assert_eq!(find(&db, "迁移脚本", None, true, None, None).messages.len(), 1);
    assert_eq!(find(&db, "迁移", None, false, None, None).messages.len(), 1);
}

#[test]
fn chart_leads_in_first_person_with_turns_and_messages_before_the_compaction() {
    let db = loaded();
    let text = chart(&db, OC, &cfg()).unwrap().chart;
    assert!(
        text.starts_with("I lost context from my prior conversation. What remains is a lossy index of session ses_oc")
    );
    assert!(text.contains("I called history_browse_turns with num_before=10 and num_after=0:\n\n```json\n{"));
    assert!(text.contains("\"turn_number\": 2"));
    assert!(text.contains("I called history_browse_messages on the latest turn (2) with num_before=5"));
    assert!(text.contains("before_message_id") && text.contains("history_pull_message") && text.contains("verify"));
    assert!(!text.contains("Deploy it"), "turn 3 came after the compaction");
    // A session without a compaction is charted whole; an empty one says so.
    let whole = chart(&db, CHILD, &cfg()).unwrap().chart;
    assert!(whole.contains("Explore the auth module"));
}

#[test]
fn compactions_children_sessions_and_stats() {
    let db = loaded();
    let list = compactions(&db, &CompactionsRequest { session_id: OC.into(), read: None }).unwrap();
    assert_eq!(list.compactions.len(), 1);
    let entry = &list.compactions[0];
    assert_eq!(
        (entry.trigger_message_id.as_deref(), entry.summary_message_id.as_deref()),
        (Some("msg_c1"), Some("msg_s1"))
    );
    assert_eq!(entry.preview, "Summary: fixed login, added the expiry test");
    let read = compactions(&db, &CompactionsRequest { session_id: OC.into(), read: Some(1) }).unwrap();
    assert_eq!(read.summary.as_deref(), Some("Summary: fixed login, added the expiry test"));
    let err = compactions(&db, &CompactionsRequest { session_id: OC.into(), read: Some(2) }).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidArgument);
    let cc = compactions(&db, &CompactionsRequest { session_id: CC.into(), read: Some(1) }).unwrap();
    assert_eq!(cc.summary.as_deref(), Some("This session is being continued: the parser refactor"));

    let kids = children(&db, OC).unwrap();
    assert_eq!(kids.len(), 1);
    assert_eq!((kids[0].session_id.as_str(), kids[0].parent_id.as_deref()), (CHILD, Some(OC)));
    let main: Vec<String> =
        sessions(&db, &SessionsRequest::default()).unwrap().into_iter().map(|s| s.session_id).collect();
    assert_eq!(main.len(), 2);
    assert!(!main.contains(&CHILD.to_owned()));
    let all = sessions(&db, &SessionsRequest { include_children: true, ..Default::default() }).unwrap();
    assert_eq!(all.len(), 3);
    let claude = sessions(&db, &SessionsRequest { host: Some("claude".into()), ..Default::default() }).unwrap();
    assert_eq!(claude.len(), 1);
    assert_eq!(claude[0].messages, 5);
    let by_title = sessions(&db, &SessionsRequest { query: Some("LOGIN".into()), ..Default::default() }).unwrap();
    assert_eq!(by_title[0].session_id, OC);
    let bad_host = sessions(&db, &SessionsRequest { host: Some("vim".into()), ..Default::default() }).unwrap_err();
    assert_eq!(bad_host.code, ErrorCode::InvalidArgument);

    let stats = stats(&db).unwrap();
    let oc = &stats.hosts[0];
    assert_eq!((oc.host.as_str(), oc.sessions, oc.messages), ("opencode", 2, 10));
    assert_eq!(oc.skipped.get("unknown_part_type"), Some(&2));
    assert!(oc.bytes > 1000 && oc.parts == 16);
    assert_eq!(oc.oldest.as_deref(), Some(ts(0).as_str()));
}

#[test]
fn forget_erases_a_session_and_keeps_it_forgotten() {
    let mut db = loaded();
    let gone = forget(&mut db, OC).unwrap();
    assert!(gone.removed > 20, "{gone:?}");
    assert_eq!(turns(&db, OC, None, 0, 0, None).unwrap_err().code, ErrorCode::HistorySessionNotFound);
    assert!(find(&db, "login", None, false, None, None).messages.is_empty(), "index rows gone too");
    // The child stays (a session of its own).
    assert_eq!(children(&db, OC).unwrap_err().code, ErrorCode::HistorySessionNotFound);
    assert_eq!(turns(&db, CHILD, None, 0, 0, None).unwrap().turns.len(), 1);
    // A later scan of a host file that still holds it does not bring it back.
    db.apply(&oc_source(), Some(&cursor(1)), &opencode_batch(), &cursor(2)).unwrap();
    assert_eq!(turns(&db, OC, None, 0, 0, None).unwrap_err().code, ErrorCode::HistorySessionNotFound);
    assert_eq!(forget(&mut db, OC).unwrap_err().code, ErrorCode::HistorySessionNotFound);
    db.fts().execute("INSERT INTO history_fts(history_fts) VALUES ('integrity-check')", []).unwrap();
}

#[test]
fn ids_shaped_like_paths_are_refused() {
    let db = loaded();
    for id in ["../etc/passwd", "a/b", "a\\b", "", "x\0y"] {
        let err = turns(&db, id, None, 0, 0, None).unwrap_err();
        // no such id can exist: not found, saying why (the empty one is an empty field)
        assert!(matches!(err.code, ErrorCode::HistorySessionNotFound | ErrorCode::EmptyField), "{id:?}: {err:?}");
    }
    let err = pull(&db, OC, "../x", None).unwrap_err();
    assert_eq!(err.code, ErrorCode::MessageNotFound);
    assert!(err.message.contains("ids hold no /"), "{err:?}");
    assert_eq!(turns(&db, "ses_missing", None, 0, 0, None).unwrap_err().code, ErrorCode::HistorySessionNotFound);
}

#[test]
fn errors_are_recorded_per_source_until_the_next_batch() {
    let mut db = HistoryDb::open_in_memory().unwrap();
    db.record_error(&cc_source(), "history_source_unreadable", "permission denied").unwrap();
    assert_eq!(db.cursor(&cc_source().key).unwrap(), None);
    let claude = |db: &HistoryDb| stats(db).unwrap().hosts.into_iter().find(|h| h.host == "claude-code").unwrap();
    assert_eq!(claude(&db).errors, 1);
    let (first, _) = claude_batches();
    db.apply(&cc_source(), None, &first, &cursor(200)).unwrap();
    assert_eq!(claude(&db).errors, 0);
}

/// More parts than the first ranking window and the common-word sample: a rare word in the
/// oldest part is still found, a word in every part finds the newest, and rows with a rare
/// word rank before rows with only common ones.
#[test]
fn search_of_a_large_archive_widens_its_window_and_puts_common_words_last() {
    let mut db = HistoryDb::open_in_memory().unwrap();
    let (old, new) = ("ses_old", "ses_new");
    let mut offset = 0;
    for (id, count) in [(old, 1_000), (new, 21_000)] {
        let mut batch =
            IngestBatch { sessions: vec![session(id, HistoryHost::OpenCode, None, id)], ..Default::default() };
        for i in 0..count {
            let m = user(id, &format!("m{i:05}"), i);
            let body = match (id, i) {
                (_, 3 | 20_990) => "common words and a zebra".to_owned(),
                _ => format!("common words number {i}"),
            };
            batch.parts.push(text(&m, 0, &body));
            batch.messages.push(m);
        }
        let source = SourceRef { key: id.into(), host: HistoryHost::OpenCode };
        offset += 1;
        db.apply(&source, None, &batch, &cursor(offset)).unwrap();
    }
    let ids = |found: &SearchResults| -> Vec<(String, String)> {
        found.messages.iter().map(|m| (m.session_id.clone(), m.message_id.clone())).collect()
    };
    let zebra = ids(&find(&db, "zebra", None, false, None, None));
    for hit in [(old, "m00003"), (new, "m00003"), (new, "m20990")] {
        assert!(zebra.contains(&(hit.0.to_owned(), hit.1.to_owned())), "{hit:?} in {zebra:?}");
    }
    assert_eq!(ids(&find(&db, "zebra", Some(old), false, None, None)), vec![(old.to_owned(), "m00003".to_owned())]);
    let common = ids(&find(&db, "common", None, false, None, None));
    assert_eq!(common.len(), 5);
    assert!(common.iter().all(|(s, _)| s == new), "{common:?}");
    let mixed = ids(&find(&db, "common zebra", None, false, None, None));
    assert_eq!(mixed.len(), 5);
    assert!(mixed[..3].iter().all(|(s, m)| m == "m00003" || (s == new && m == "m20990")), "{mixed:?}");
}

/// The index writes of a batch are made at its end: a part inserted and given its result in
/// the same batch is indexed with the result, and a part rewritten later loses its old words.
#[test]
fn index_writes_at_the_end_of_a_batch_follow_the_stored_rows() {
    let mut db = HistoryDb::open_in_memory().unwrap();
    let source = SourceRef { key: "s".into(), host: HistoryHost::ClaudeCode };
    let (u, a) = (user("ses_w", "u1", 1), assistant("ses_w", "a1", 2));
    let call = tool(&a, 0, "Bash", json!({"command": "make"}), ToolStatus::Running, None);
    let first = IngestBatch {
        sessions: vec![session("ses_w", HistoryHost::ClaudeCode, None, "w")],
        messages: vec![u.clone(), a.clone()],
        parts: vec![text(&u, 0, "an alpha prompt"), call.clone()],
        results: vec![ToolResult {
            session_id: "ses_w".into(),
            call_id: call.call_id.clone().unwrap(),
            output: "built quuxfile".into(),
            is_error: false,
        }],
        ..Default::default()
    };
    db.apply(&source, None, &first, &cursor(1)).unwrap();
    let found = |db: &HistoryDb, q: &str| find(db, q, Some("ses_w"), false, None, None).messages.len();
    assert_eq!((found(&db, "alpha"), found(&db, "quuxfile"), found(&db, "make")), (1, 1, 1));
    let second =
        IngestBatch { messages: vec![u.clone()], parts: vec![text(&u, 0, "a beta prompt")], ..Default::default() };
    db.apply(&source, Some(&cursor(1)), &second, &cursor(2)).unwrap();
    assert_eq!((found(&db, "alpha"), found(&db, "beta"), found(&db, "quuxfile")), (0, 1, 1));
}

#[test]
fn a_batch_larger_than_one_statement_numbers_turns_and_indexes_every_row() {
    // 70 turns of a user message and an answer: 140 messages and parts, so statements of many
    // rows and then single rows; a message and a part repeated inside the batch (the second is
    // an update of the row the same statement inserted), and the batch applied twice.
    let mut db = HistoryDb::open_in_memory().unwrap();
    let source = SourceRef { key: "big".into(), host: HistoryHost::ClaudeCode };
    let mut batch =
        IngestBatch { sessions: vec![session("ses_big", HistoryHost::ClaudeCode, None, "big")], ..Default::default() };
    for turn in 0..70 {
        let u = user("ses_big", &format!("u{turn:03}"), turn * 10);
        let a = assistant("ses_big", &format!("a{turn:03}"), turn * 10 + 1);
        batch.parts.push(text(&u, 0, &format!("question number{turn}")));
        batch.parts.push(text(&a, 0, &format!("answer reply{turn}")));
        batch.messages.extend([u, a]);
    }
    batch.messages.push(batch.messages[3].clone());
    batch.parts.push(text(&batch.messages[3], 0, "answer rewritten"));
    let ApplyOutcome::Applied(counts) = db.apply(&source, None, &batch, &cursor(1)).unwrap() else { panic!("stale") };
    assert_eq!((counts.messages, counts.parts), (141, 141));
    let numbered = |db: &HistoryDb| {
        let first = turns(db, "ses_big", Some(1), 0, 10, None).unwrap();
        let last = turns(db, "ses_big", None, 10, 0, None).unwrap();
        (turn_numbers(&first), turn_numbers(&last))
    };
    assert_eq!(numbered(&db), ((1..=11).collect::<Vec<_>>(), (60..=70).collect::<Vec<_>>()));
    let found = |db: &HistoryDb, q: &str| find(db, q, Some("ses_big"), false, None, None).messages.len();
    assert_eq!((found(&db, "number0"), found(&db, "number69"), found(&db, "reply68")), (1, 1, 1));
    assert_eq!((found(&db, "reply1"), found(&db, "rewritten")), (0, 1));
    let ApplyOutcome::Applied(again) = db.apply(&source, Some(&cursor(1)), &batch, &cursor(2)).unwrap() else {
        panic!("stale")
    };
    // The repeated part alternates between its two texts inside the batch: only it changes.
    assert_eq!(again.parts, 2);
    assert_eq!(numbered(&db), ((1..=11).collect::<Vec<_>>(), (60..=70).collect::<Vec<_>>()));
    assert_eq!((found(&db, "reply1"), found(&db, "rewritten"), found(&db, "reply69")), (0, 1, 1));
}

/// Turn numbers as the store's rule gives them: messages in (seq, id) order, each one that opens
/// a turn starting the next number.
fn expected_turns(messages: &[HistoryMessage]) -> Vec<(String, i64)> {
    let mut sorted: Vec<&HistoryMessage> = messages.iter().collect();
    sorted.sort_by(|a, b| (a.seq, &a.id).cmp(&(b.seq, &b.id)));
    let mut turn = 0;
    let mut numbered: Vec<(String, i64)> = sorted
        .into_iter()
        .map(|m| {
            turn += i64::from(m.opens_turn());
            (m.id.clone(), turn)
        })
        .collect();
    numbered.sort();
    numbered
}

fn stored_turns(db: &HistoryDb, session_id: &str) -> Vec<(String, i64)> {
    let mut stmt =
        db.conn().prepare("SELECT id, turn_number FROM history_messages WHERE session_id = ?1 ORDER BY id").unwrap();
    stmt.query_map([session_id], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().collect::<rusqlite::Result<_>>().unwrap()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

    /// Whatever the batches (appended in order, arriving out of order, a message moved or its
    /// flags changed when read again), the stored turn numbers are the rule's over the whole
    /// session: numbering an appended batch at insert gives what renumbering gives.
    #[test]
    fn turn_numbers_follow_the_rule_whatever_the_batches(
        kinds in proptest::collection::vec(0u8..4, 1..40),
        cuts in proptest::collection::vec(0usize..40, 0..6),
        shuffled in proptest::bool::ANY,
        moved in proptest::option::of((0usize..40, 0i64..400)),
    ) {
        let mut all: Vec<HistoryMessage> = kinds
            .iter()
            .enumerate()
            .map(|(i, kind)| {
                let (id, seq) = (format!("m{i:02}"), 10 * i as i64);
                match kind {
                    0 => assistant(CC, &id, seq),
                    1 => HistoryMessage { synthetic: true, ..user(CC, &id, seq) },
                    _ => user(CC, &id, seq),
                }
            })
            .collect();
        let mut bounds: Vec<usize> = cuts.into_iter().map(|c| c % (all.len() + 1)).collect();
        bounds.extend([0, all.len()]);
        bounds.sort_unstable();
        bounds.dedup();
        let mut batches: Vec<Vec<HistoryMessage>> = bounds.windows(2).map(|w| all[w[0]..w[1]].to_vec()).collect();
        if shuffled {
            batches.reverse();
        }
        if let Some((which, seq)) = moved {
            // One message read again later at another place, and no longer opening a turn.
            let m = &mut all[which % kinds.len()];
            *m = HistoryMessage { seq, synthetic: true, ..m.clone() };
            batches.push(vec![m.clone()]);
        }
        let mut db = HistoryDb::open_in_memory().unwrap();
        for (i, messages) in batches.into_iter().enumerate() {
            let source = SourceRef { key: format!("batch-{i}"), host: HistoryHost::ClaudeCode };
            let batch = IngestBatch { messages, ..IngestBatch::default() };
            db.apply(&source, None, &batch, &cursor(1)).unwrap();
        }
        proptest::prop_assert_eq!(stored_turns(&db, CC), expected_turns(&all));
    }
}

/// Copy the fixture tree `tests/fixtures/history/<fixture>` to `to`; the copies, with sizes.
fn copy_fixture_tree(fixture: &str, to: &std::path::Path) -> Vec<(std::path::PathBuf, u64)> {
    let from = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/history").join(fixture);
    let mut copied = Vec::new();
    let mut dirs = vec![(from, to.to_owned())];
    while let Some((from, to)) = dirs.pop() {
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(&from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                dirs.push((entry.path(), target));
            } else {
                let bytes = std::fs::copy(entry.path(), &target).unwrap();
                copied.push((target, bytes));
            }
        }
    }
    copied
}

fn len_or_zero(path: &std::path::Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Every host's recorded files archived from a temp HOME: each host's source figures are the
/// real sizes of its files (the transcripts' as their cursors recorded them, OpenCode's
/// database once), the archive's figures the real sizes of `history.db`, its WAL and the
/// index, and the ratio the one over the other.
#[test]
fn stats_weigh_the_archive_against_the_hosts_own_files() {
    let (home, opencode_db) = super::opencode::tests::opencode_home();
    let claude = copy_fixture_tree("claude", &home.path().join(".claude/projects"));
    let codex = copy_fixture_tree("codex", &home.path().join(".codex/sessions"));
    let gemini = copy_fixture_tree("gemini", &home.path().join(".gemini/tmp"));
    let data = tempfile::tempdir().unwrap();
    let db_path = data.path().join(super::store::HISTORY_DB_FILE);
    let mut db = HistoryDb::open(&db_path).unwrap();
    let home_dir = home.path().to_owned();
    let env = move |name: &str| match name {
        "HOME" => Some(home_dir.display().to_string()),
        "XDG_DATA_HOME" => Some(home_dir.join("xdg-data").display().to_string()),
        _ => None,
    };
    super::ingest::scan(&mut db, &env, &mut |_| {}).unwrap();

    let stats = stats(&db).unwrap();
    let host = |name: &str| stats.hosts.iter().find(|h| h.host == name).unwrap();
    let total = |files: &[(std::path::PathBuf, u64)]| files.iter().map(|(_, n)| n).sum::<u64>();
    assert_eq!(claude.len(), 3, "a transcript and its two sub-agents");
    assert_eq!((host("claude-code").source_files, host("claude-code").source_bytes), (3, total(&claude)));
    assert_eq!((host("codex").source_files, host("codex").source_bytes), (1, total(&codex)));
    assert_eq!((host("gemini").source_files, host("gemini").source_bytes), (1, total(&gemini)));
    let opencode_bytes = std::fs::metadata(&opencode_db).unwrap().len();
    assert_eq!((host("opencode").source_files, host("opencode").source_bytes), (1, opencode_bytes));
    assert!(host("opencode").sessions > 0 && host("claude-code").sessions > 0, "{stats:?}");

    let disk = &stats.disk;
    let with = |path: &std::path::Path, suffix: &str| std::path::PathBuf::from(format!("{}{suffix}", path.display()));
    let index = super::index::fts_path(&db_path);
    assert_eq!(disk.db_bytes, std::fs::metadata(&db_path).unwrap().len());
    assert!(disk.db_bytes > 0);
    assert_eq!(disk.wal_bytes, len_or_zero(&with(&db_path, "-wal")));
    let index_files = len_or_zero(&index) + len_or_zero(&with(&index, "-wal"));
    assert_eq!(disk.index_bytes, index_files);
    assert!(disk.index_bytes > 0);
    assert_eq!(disk.archive_bytes, disk.db_bytes + disk.wal_bytes + disk.index_bytes);
    let sources = total(&claude) + total(&codex) + total(&gemini) + opencode_bytes;
    assert_eq!(disk.source_bytes, sources);
    assert_eq!(disk.ratio, Some(disk.archive_bytes as f64 / sources as f64));
}

/// A source whose first read failed was not read from: it adds no file and no byte.
#[test]
fn stats_count_no_source_file_that_was_never_read() {
    let data = tempfile::tempdir().unwrap();
    let mut db = HistoryDb::open(&data.path().join(super::store::HISTORY_DB_FILE)).unwrap();
    let source = SourceRef { key: "/nonexistent/s.jsonl".into(), host: HistoryHost::ClaudeCode };
    db.record_error(&source, "history_source_unreadable", "gone").unwrap();
    let stats = stats(&db).unwrap();
    let claude = stats.hosts.iter().find(|h| h.host == "claude-code").unwrap();
    assert_eq!((claude.errors, claude.source_files, claude.source_bytes), (1, 0, 0));
    assert_eq!((stats.disk.source_bytes, stats.disk.ratio), (0, None));
    assert!(stats.disk.db_bytes > 0);
}

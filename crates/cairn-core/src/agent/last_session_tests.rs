//! The Last Session record from prompts, the history archive and passive capture; and the
//! `[MEMORY]` block that always carries it with a short Recent list.

use serde_json::json;
use time::Duration;

use super::*;
use crate::Core;
use crate::agent::CompactionSave;
use crate::context::{ContextLayout, ContextRequest};
use crate::history::model::{
    Cursor, HistoryHost, HistoryMessage, HistoryPart, HistoryRole, HistorySession, IngestBatch, PartKind, ToolStatus,
};
use crate::history::store::SourceRef;
use crate::memory::SaveAction;
use crate::ops::{EndSessionRequest, Op, execute};
use crate::passive::PassiveCapture;
use crate::prompts::NewPrompt;
use crate::sessions::NewSession;
use crate::testutil::{core_with_clock, obs};

const DIR: &str = "/nonexistent/shop";

fn start(s: &mut Core, id: &str) {
    let new = NewSession {
        id: id.into(),
        project: Some("shop".into()),
        directory: Some(DIR.into()),
        agent: Some("opencode".into()),
        title: Some("Fix the refund rounding".into()),
        ..NewSession::default()
    };
    s.store.start_session(&new).unwrap();
}

fn prompt(s: &mut Core, session: &str, text: &str) {
    let new = NewPrompt { content: text.into(), session_id: Some(session.into()), ..NewPrompt::default() };
    s.store.add_prompt(&new).unwrap();
}

fn message(session: &str, id: &str, role: HistoryRole, seq: i64) -> HistoryMessage {
    HistoryMessage::new(session, id, role, seq, &format!("2026-03-01T10:00:{:02}.000Z", seq % 60))
}

fn text(m: &HistoryMessage, idx: i64, body: &str) -> HistoryPart {
    HistoryPart {
        text: Some(body.into()),
        ..HistoryPart::new(&m.session_id, &m.id, &format!("{}:{idx}", m.id), idx, PartKind::Text)
    }
}

fn tool(m: &HistoryMessage, idx: i64, name: &str, input: serde_json::Value, status: ToolStatus) -> HistoryPart {
    HistoryPart {
        tool: Some(name.into()),
        call_id: Some(format!("call-{}-{idx}", m.id)),
        status: Some(status),
        input: Some(input.to_string()),
        ..HistoryPart::new(&m.session_id, &m.id, &format!("{}:{idx}", m.id), idx, PartKind::Tool)
    }
}

/// One turn: the user asks, the assistant reads a file, edits it, runs the tests and answers.
fn archive(s: &mut Core, session: &str, compacted: bool) {
    let user = message(session, "m1", HistoryRole::User, 1);
    let work = message(session, "m2", HistoryRole::Assistant, 2);
    let answer = message(session, "m3", HistoryRole::Assistant, 3);
    let mut batch = IngestBatch {
        sessions: vec![HistorySession {
            id: session.into(),
            host: HistoryHost::OpenCode,
            project: Some("shop".into()),
            directory: Some(DIR.into()),
            parent_id: None,
            title: Some("Fix the refund rounding".into()),
            agent: None,
            model: None,
            created_at: "2026-03-01T10:00:00.000Z".into(),
            updated_at: "2026-03-01T10:01:00.000Z".into(),
        }],
        parts: vec![
            text(&user, 0, "Refunds round the wrong way in src/refund.rs"),
            tool(&work, 0, "read", json!({"filePath": format!("{DIR}/src/refund.rs")}), ToolStatus::Completed),
            tool(
                &work,
                1,
                "edit",
                json!({"filePath": format!("{DIR}/src/refund.rs"), "oldString": "a"}),
                ToolStatus::Completed,
            ),
            tool(&work, 2, "read", json!({"filePath": format!("{DIR}/README.md")}), ToolStatus::Completed),
            tool(&work, 3, "bash", json!({"command": "cargo test"}), ToolStatus::Completed),
            tool(&work, 4, "bash", json!({"command": "cargo fmt"}), ToolStatus::Completed),
            text(&answer, 0, "Fixed: refunds now round half-even; the tests pass."),
        ],
        messages: vec![user, work, answer],
        ..IngestBatch::default()
    };
    if compacted {
        let mut trigger = message(session, "m4", HistoryRole::User, 4);
        trigger.compaction = true;
        let mut summary = message(session, "m5", HistoryRole::Assistant, 5);
        summary.summary = true;
        batch.parts.push(text(&summary, 0, "CHART of the session"));
        batch.messages.extend([trigger, summary]);
    }
    let source = SourceRef { key: format!("opencode.db#{session}"), host: HistoryHost::OpenCode };
    let db = s.history.db().unwrap();
    let expected = db.cursor(&source.key).unwrap();
    let next = Cursor { offset: 1, size: 1, mtime_ms: 1, watermark: Some(session.into()) };
    db.apply(&source, expected.as_ref(), &batch, &next).unwrap();
}

const LEARNED: &str = "Done.\n\n## Key Learnings:\n1. Refunds must round half-even to match the ledger\n";

/// A finished session: two prompts, a turn archived, a Key Learning captured.
fn worked(s: &mut Core, session: &str) {
    start(s, session);
    prompt(s, session, "Refunds round the wrong way in src/refund.rs");
    prompt(s, session, "Now make the tests pass <private>token=abc</private>");
    archive(s, session, false);
    let capture = PassiveCapture {
        content: LEARNED.into(),
        session_id: Some(session.into()),
        project: Some("shop".into()),
        ..PassiveCapture::default()
    };
    s.store.capture_passive(&capture).unwrap();
}

fn record_of(s: &mut Core, session: &str) -> Option<SaveOutcome> {
    s.store
        .record_session(&RecordSession { session_id: session.into(), ..RecordSession::default() }, &mut s.history)
        .unwrap()
}

#[test]
fn the_record_names_requests_tools_files_learnings_and_where_it_stopped() {
    let (mut s, _) = core_with_clock();
    worked(&mut s, "ses_1");
    let saved = record_of(&mut s, "ses_1").expect("a record");
    assert_eq!((saved.kind.as_str(), saved.topic_key.as_deref()), (SESSION_RECORD, Some("session/ses_1/record")));
    assert_eq!(saved.project, "shop");
    let record = s.store.get(saved.id).unwrap();
    insta::assert_snapshot!(record.content);
    assert!(!record.content.contains("abc"), "no <private> content");
}

#[test]
fn one_record_per_session_revised_as_it_goes_and_compaction_marked() {
    let (mut s, clock) = core_with_clock();
    worked(&mut s, "ses_1");
    let first = record_of(&mut s, "ses_1").unwrap();
    assert_eq!(first.action, SaveAction::Created);
    clock.advance(Duration::minutes(5));
    prompt(&mut s, "ses_1", "Also cover partial refunds");
    let second = record_of(&mut s, "ses_1").unwrap();
    assert_eq!((second.id, second.action), (first.id, SaveAction::Revised));
    assert!(s.store.get(first.id).unwrap().content.contains("partial refunds"));
    assert!(!record_says_compacted(s.store.get(first.id).unwrap().tool_name.as_deref()));
    // the archive shows the compaction: the record says so, and keeps saying so
    archive(&mut s, "ses_1", true);
    record_of(&mut s, "ses_1").unwrap();
    let compacted = s.store.get(first.id).unwrap();
    assert!(compacted.content.contains("compacted 1×"), "{}", compacted.content);
    assert!(record_says_compacted(compacted.tool_name.as_deref()));
    assert!(!compacted.content.contains("CHART"), "a compaction's summary is not where it stopped");
    let records: i64 = s
        .store
        .conn()
        .query_row("SELECT count(*) FROM observations WHERE type = ?1", [SESSION_RECORD], |r| r.get(0))
        .unwrap();
    assert_eq!(records, 1);
}

#[test]
fn the_record_is_bounded() {
    let (mut s, _) = core_with_clock();
    start(&mut s, "ses_big");
    for i in 0..10 {
        prompt(&mut s, "ses_big", &format!("request {i}: {}", "long words ".repeat(200)));
    }
    for i in 0..20 {
        let capture = PassiveCapture {
            content: format!("## Key Learnings:\n1. learning number {i} is {}\n", "quite long ".repeat(60)),
            session_id: Some("ses_big".into()),
            project: Some("shop".into()),
            ..PassiveCapture::default()
        };
        s.store.capture_passive(&capture).unwrap();
    }
    let saved = record_of(&mut s, "ses_big").unwrap();
    let content = s.store.get(saved.id).unwrap().content;
    assert!(content.len() <= MAX_RECORD_BYTES, "{}", content.len());
    assert_eq!(content.matches("request ").count(), 3, "the newest three requests");
    let facts = SessionFacts {
        session_id: "x".into(),
        files_changed: (0..200).map(|i| format!("src/file_{i}_{}.rs", "x".repeat(40))).collect(),
        ..SessionFacts::default()
    };
    let rendered = render_record(&facts, "2026-03-01T10:00:00.000Z");
    assert!(rendered.contains("and 192 more") && rendered.len() <= MAX_RECORD_BYTES);
    assert!(cut_bytes("ééé", 4).len() <= 4, "cut on a character boundary");
}

#[test]
fn nothing_to_record_for_empty_sub_agent_and_catch_all_sessions() {
    let (mut s, _) = core_with_clock();
    start(&mut s, "empty");
    assert_eq!(record_of(&mut s, "empty"), None);
    assert_eq!(record_of(&mut s, "never-seen"), None);
    let child = NewSession { id: "child".into(), parent_id: Some("ses_1".into()), ..NewSession::default() };
    s.store.start_session(&child).unwrap();
    prompt(&mut s, "child", "explore the code");
    assert_eq!(record_of(&mut s, "child"), None);
    s.store.save(&obs("shop", "a fact", "in the catch-all session")).unwrap();
    assert_eq!(record_of(&mut s, "manual-save-shop"), None);
    let bad = RecordSession { session_id: " ".into(), ..RecordSession::default() };
    assert_eq!(s.store.record_session(&bad, &mut s.history).unwrap_err().code, crate::ErrorCode::EmptyField);
}

/// Ending a session (OpenCode's idle, Claude Code's SessionEnd) and a host's compaction summary
/// revise the record through the ops every door uses.
#[test]
fn end_session_and_save_compaction_revise_the_record() {
    let (mut s, _) = core_with_clock();
    worked(&mut s, "ses_1");
    execute(&mut s, Op::EndSession(EndSessionRequest { id: "ses_1".into(), summary: None, keep_activity: true }))
        .unwrap();
    let topic = session_record_topic("ses_1");
    let record = |s: &Core| {
        s.store
            .conn()
            .query_row("SELECT content, tool_name FROM observations WHERE topic_key = ?1", [&topic], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
            })
            .unwrap()
    };
    assert!(record(&s).0.contains("Refunds round the wrong way"));
    let compaction =
        CompactionSave { session_id: "ses_1".into(), summary: "## Goal\nRefunds".into(), ..Default::default() };
    execute(&mut s, Op::SaveCompaction(compaction)).unwrap();
    assert!(record_says_compacted(record(&s).1.as_deref()));
    let op = Op::from_value(json!({"op": "record_session", "args": {"session_id": "nobody"}})).unwrap();
    assert_eq!(execute(&mut s, op).unwrap().into_value().unwrap(), serde_json::Value::Null);
}

mod block {
    use super::*;

    fn block(session: Option<&str>, query: Option<&str>) -> ContextRequest {
        ContextRequest {
            project: Some("shop".into()),
            layout: ContextLayout::MemoryBlock,
            query: query.map(str::to_owned),
            session_id: session.map(str::to_owned),
            ..ContextRequest::default()
        }
    }

    /// Session 1 worked and stopped; session 2 starts.
    fn after_one_session() -> (Core, std::sync::Arc<crate::testutil::ManualClock>) {
        let (mut s, clock) = core_with_clock();
        s.store.save(&NewObservationExt::typed("decision", "Use Stripe for refunds", "Chosen over Adyen")).unwrap();
        clock.advance(Duration::minutes(1));
        worked(&mut s, "ses_1");
        execute(&mut s, Op::EndSession(EndSessionRequest { id: "ses_1".into(), summary: None, keep_activity: true }))
            .unwrap();
        clock.advance(Duration::minutes(30));
        start(&mut s, "ses_2");
        (s, clock)
    }

    struct NewObservationExt;
    impl NewObservationExt {
        fn typed(kind: &str, title: &str, content: &str) -> crate::memory::NewObservation {
            crate::memory::NewObservation { kind: Some(kind.into()), ..obs("shop", title, content) }
        }
    }

    #[test]
    fn last_session_and_recent_are_there_when_nothing_is_relevant() {
        let (s, _) = after_one_session();
        let ctx = s.context(&block(Some("ses_2"), Some("zebra unicorn"))).unwrap();
        insta::assert_snapshot!(ctx.context);
        assert!(ctx.context.contains("## Last Session") && ctx.context.contains("src/refund.rs"));
        assert!(ctx.context.contains("## Recent") && ctx.context.contains("Use Stripe for refunds"));
        assert!(!ctx.context.contains("## Relevant"));
        assert_eq!(ctx.session_ids.first().map(String::as_str), Some("ses_1"));
        let ids: std::collections::HashSet<_> = ctx.memory_ids.iter().collect();
        assert_eq!(ids.len(), ctx.memory_ids.len(), "no memory twice");
        assert_eq!(ctx.bytes, ctx.context.len());
    }

    #[test]
    fn a_session_is_not_its_own_last_session_until_it_compacts() {
        let (mut s, clock) = after_one_session();
        prompt(&mut s, "ses_2", "Now the invoices");
        archive(&mut s, "ses_2", false);
        execute(&mut s, Op::EndSession(EndSessionRequest { id: "ses_2".into(), summary: None, keep_activity: true }))
            .unwrap();
        let own = s.context(&block(Some("ses_2"), None)).unwrap().context;
        assert!(own.contains("Session ses_1 "), "{own}");
        // without a session: the newest
        assert!(s.context(&block(None, None)).unwrap().context.contains("Session ses_2 "));
        clock.advance(Duration::minutes(1));
        let compacted = RecordSession { session_id: "ses_2".into(), compacted: true, ..RecordSession::default() };
        s.store.record_session(&compacted, &mut s.history).unwrap();
        let after = s.context(&block(Some("ses_2"), None)).unwrap().context;
        assert!(after.contains("Session ses_2 ") && after.contains("compacted 1×"), "{after}");
        // a host's summary of the session comes with the record
        let summary =
            CompactionSave { session_id: "ses_2".into(), summary: "## Goal\nInvoices".into(), ..Default::default() };
        s.store.save_compaction(&summary).unwrap();
        let both = s.context(&block(Some("ses_2"), None)).unwrap().context;
        assert!(both.contains("### Goal\nInvoices\nSession ses_2 "), "{both}");
    }

    #[test]
    fn nothing_stored_is_one_line_with_how_to_search() {
        let (s, _) = core_with_clock();
        let ctx = s.context(&block(Some("ses_1"), Some("anything"))).unwrap();
        insta::assert_snapshot!(ctx.context);
        assert!(!ctx.context.contains('\n') && ctx.context.starts_with("[MEMORY]"));
        assert!(ctx.memory_ids.is_empty() && ctx.session_ids.is_empty());
        let tiny = s.context(&ContextRequest { budget_bytes: 20, ..block(None, None) }).unwrap();
        assert!(tiny.context.is_empty() && tiny.truncated);
    }

    #[test]
    fn the_budget_keeps_room_for_last_session_and_recent() {
        let (mut s, _) = after_one_session();
        start(&mut s, "ses_other"); // a titled session: a line of Recent
        for i in 0..5 {
            let long = "Ports and adapters around the order domain. ".repeat(8);
            s.store.save(&NewObservationExt::typed("architecture", &format!("Layer {i}"), &long)).unwrap();
        }
        for budget in [700, 1_200, 2_000, 6_000] {
            let ctx = s.context(&ContextRequest { budget_bytes: budget, ..block(Some("ses_2"), Some("refunds")) });
            let ctx = ctx.unwrap();
            assert!(ctx.context.len() <= budget, "{budget}: {}", ctx.context.len());
            assert!(ctx.context.contains("## Last Session"), "{budget}:\n{}", ctx.context);
            if budget >= 1_200 {
                assert!(ctx.context.contains("## Recent"), "{budget}:\n{}", ctx.context);
            }
        }
        for budget in [0, 10, 120] {
            let ctx = s.context(&ContextRequest { budget_bytes: budget, ..block(Some("ses_2"), None) }).unwrap();
            assert!(ctx.context.len() <= budget && ctx.truncated, "{budget}: {}", ctx.context);
        }
    }
}

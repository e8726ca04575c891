//! What cairn injected into a conversation (the `[MEMORY]` block, the Session History guidance,
//! the protocol and its notes) is recognised by both readers from the host's word and cairn's
//! leading line, marked in the archive, left out of previews, the chart and search, and still
//! pulled, marked. And the end of a long part is indexed: a build log's last error is found.

use std::collections::BTreeSet;
use std::path::Path;

use rusqlite::{Connection, params};
use serde_json::json;

use super::index::fts_path;
use super::ingest;
use super::model::*;
use super::query::*;
use super::store::{ApplyOutcome, HistoryDb, MIGRATIONS, SourceRef};
use cairn_base::settings::HistorySettings;
use cairn_core::agent::protocol::{Host, Part, ProtocolRequest, ToolProfile, protocol};

const BLOCK: &str = "[MEMORY]\n## Relevant to Current Task\n- [92%] Staging deploys listen on port 8443";

fn cairn_text(host: Host, part: Part) -> String {
    protocol(ProtocolRequest { host, tools: ToolProfile::Agent, part, session_id: None }).text
}

fn cfg() -> HistorySettings {
    HistorySettings::default()
}

fn find(db: &HistoryDb, query: &str, session: Option<&str>, literal: bool) -> SearchResults {
    let req = SearchRequest {
        query: query.into(),
        session_id: session.map(Into::into),
        project: None,
        literal,
        kinds: None,
        caller_session_id: None,
    };
    search(db, &req, &cfg()).unwrap()
}

fn hit_parts(results: &SearchResults) -> BTreeSet<String> {
    results.messages.iter().flat_map(|m| m.hits.iter().map(|h| h.part_id.clone())).collect()
}

fn first_turns(db: &HistoryDb, session: &str) -> TurnsPage {
    let req = TurnsRequest {
        session_id: session.into(),
        turn_number: Some(1),
        num_before: 0,
        num_after: 10,
        caller_session_id: None,
    };
    browse_turns(db, &req, &cfg()).unwrap()
}

fn pulled(db: &HistoryDb, session: &str, message: &str) -> PulledMessage {
    let req = MessageRequest { session_id: session.into(), message_id: message.into(), caller_session_id: None };
    pull_message(db, &req, &cfg()).unwrap()
}

fn texts(message: &PulledMessage) -> Vec<(String, bool)> {
    message
        .sections
        .iter()
        .filter_map(|s| match s {
            Section::Text { content, injected, .. } => Some((content.clone(), *injected)),
            _ => None,
        })
        .collect()
}

fn whole_chart(db: &HistoryDb, session: &str) -> String {
    chart(db, session, &cfg()).unwrap().chart
}

// ---------------------------------------------------------------- OpenCode

/// The recorded OpenCode database with what cairn's plugin adds to a first message (its parts
/// are `synthetic`, after the user's text), one part whose leading line the user edited, and
/// a later message whose user typed `[MEMORY]` as its first line.
fn opencode_with_cairn_parts() -> (tempfile::TempDir, String, String) {
    let (home, db) = super::opencode::tests::opencode_home();
    let conn = Connection::open(&db).unwrap();
    let (session, first, later): (String, String, String) = {
        let mut stmt = conn
            .prepare(
                "SELECT session_id, id FROM message WHERE json_extract(data, '$.role') = 'user'
                   AND session_id = 'ses_def016663ffesUiPlYXjASWFYW' ORDER BY time_created",
            )
            .unwrap();
        let rows: Vec<(String, String)> =
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().collect::<rusqlite::Result<_>>().unwrap();
        (rows[0].0.clone(), rows[0].1.clone(), rows[rows.len() - 1].1.clone())
    };
    let time: i64 =
        conn.query_row("SELECT max(time_created) FROM part WHERE message_id = ?1", [&first], |r| r.get(0)).unwrap();
    let add = |id: &str, message: &str, data: serde_json::Value| {
        conn.execute(
            "INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?1, ?2, ?3, ?4, ?4, ?5)",
            params![id, message, session, time, data.to_string()],
        )
        .unwrap();
    };
    let synthetic = |text: &str| json!({"type": "text", "text": text, "synthetic": true});
    add("prt_zz01cairnblock", &first, synthetic(BLOCK));
    add("prt_zz02cairnhistory", &first, synthetic(&cairn_text(Host::Opencode, Part::History)));
    add("prt_zz03cairntrigger", &first, synthetic(&cairn_text(Host::Opencode, Part::Trigger)));
    add("prt_zz04edited", &first, synthetic("[MEMORY] as I edited it\n## Relevant to Current Task\n- EDITED-MARKER"));
    add("prt_zz05opencodes", &first, synthetic("Called the Read tool with the following input: {\"filePath\":\"x\"}"));
    add("prt_zz06typed", &later, json!({"type": "text", "text": "[MEMORY]\nUSER-TYPED notes of my own"}));
    drop(conn);
    (home, session, first)
}

fn opencode_env(home: &Path) -> impl Fn(&str) -> Option<String> + use<> {
    let home = home.to_path_buf();
    move |name| match name {
        "HOME" => Some(home.display().to_string()),
        "XDG_DATA_HOME" => Some(home.join("xdg-data").display().to_string()),
        _ => None,
    }
}

#[test]
fn opencode_parts_of_cairns_are_injected_only_when_synthetic_and_led_by_cairns_line() {
    let (home, session, first) = opencode_with_cairn_parts();
    let mut db = HistoryDb::open_in_memory().unwrap();
    let report = ingest::scan(&mut db, &opencode_env(home.path()), &mut |_| {}).unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
    let flags: Vec<(String, bool)> = {
        let mut stmt =
            db.conn().prepare("SELECT id, injected FROM history_parts WHERE id LIKE 'prt_zz%' ORDER BY id").unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().collect::<rusqlite::Result<_>>().unwrap()
    };
    let expected = [
        ("prt_zz01cairnblock", true),
        ("prt_zz02cairnhistory", true),
        ("prt_zz03cairntrigger", true),
        ("prt_zz04edited", false),
        ("prt_zz05opencodes", false),
        ("prt_zz06typed", false),
    ];
    assert_eq!(flags, expected.map(|(id, f)| (id.to_owned(), f)).to_vec());

    // the first turn's preview is the user's request, not cairn's guidance
    let turns = first_turns(&db, &session);
    let preview = turns.turns[0].user.preview.clone().unwrap();
    assert!(preview.contains("REC-TOOL print the marker"), "{preview}");
    // (the part whose first line the user edited is theirs, and shown)
    assert!(preview.contains("EDITED-MARKER"), "{preview}");
    for injected in ["[MEMORY]\n", "Session History", "MEMORY TRIGGER", "8443"] {
        assert!(!preview.contains(injected), "{injected} in the preview: {preview}");
    }
    assert!(turns.turns.iter().any(|t| t.user.preview.as_deref().is_some_and(|p| p.contains("USER-TYPED"))));
    let chart = whole_chart(&db, &session);
    for injected in ["Staging deploys listen", "## Session History", "MEMORY TRIGGER"] {
        assert!(!chart.contains(injected), "{injected} in the chart:\n{chart}");
    }
    assert!(chart.contains("REC-TOOL print the marker"), "{chart}");

    // ranked and literal search: the guidance's words hit nothing of cairn's
    for literal in [false, true] {
        let found = hit_parts(&find(&db, "Session History", None, literal));
        assert!(!found.contains("prt_zz02cairnhistory"), "literal {literal}: {found:?}");
        assert!(hit_parts(&find(&db, "staging deploys 8443", None, literal)).is_empty(), "literal {literal}");
        assert!(hit_parts(&find(&db, "USER-TYPED", None, literal)).contains("prt_zz06typed"));
        assert!(hit_parts(&find(&db, "EDITED-MARKER", None, literal)).contains("prt_zz04edited"));
    }

    // pulled, every part is there, cairn's marked
    let message = pulled(&db, &session, &first);
    let sections = texts(&message);
    assert!(sections.iter().any(|(t, injected)| t.starts_with("[MEMORY]\n") && *injected), "{sections:?}");
    assert!(sections.iter().any(|(t, injected)| t.starts_with("## Session History") && *injected));
    assert!(sections.iter().any(|(t, injected)| t.contains("REC-TOOL") && !*injected));
    assert!(sections.iter().any(|(t, injected)| t.contains("EDITED-MARKER") && !*injected));
    let json = serde_json::to_value(&message).unwrap();
    let marked = json["sections"].as_array().unwrap().iter().filter(|s| s["injected"] == json!(true)).count();
    assert_eq!(marked, 3, "{json:#}");
    let part = pull_part(
        &db,
        &PartRequest {
            session_id: session.clone(),
            message_id: first.clone(),
            part_id: "prt_zz01cairnblock".into(),
            offset: 0,
            max_chars: 1000,
            caller_session_id: None,
        },
    )
    .unwrap();
    assert!(part.injected && part.content == BLOCK, "{part:?}");
    assert_eq!(serde_json::to_value(&part).unwrap()["injected"], json!(true));
    // a message's preview in browse_messages is the user's text too
    let page = browse_messages(
        &db,
        &MessagesRequest {
            session_id: session.clone(),
            message_id: Some(first.clone()),
            num_before: 0,
            num_after: 0,
            caller_session_id: None,
        },
        &cfg(),
    )
    .unwrap();
    let preview = &page.messages[0].preview;
    assert!(
        !preview.contains("[MEMORY]\n") && !preview.contains("Session History") && !preview.contains("8443"),
        "{preview}"
    );
    assert!(!page.messages[0].injected);
}

// ---------------------------------------------------------------- Claude Code

fn attachment(uuid: &str, event: &str, content: &[&str], ts: &str) -> String {
    let record = json!({"parentUuid": null, "isSidechain": false, "type": "attachment", "uuid": uuid,
        "timestamp": ts, "cwd": "/nonexistent/p", "sessionId": "s",
        "attachment": {"type": "hook_additional_context", "content": content, "hookName": event,
            "toolUseID": event, "hookEvent": event},
        "rendered": [{"content": format!("<system-reminder>\n{event} hook additional context: {}\n</system-reminder>", content.join("\n"))}]});
    format!("{record}\n")
}

fn said(kind: &str, uuid: &str, text: &str, ts: &str) -> String {
    let record = json!({"type": kind, "uuid": uuid, "timestamp": ts, "cwd": "/nonexistent/p",
        "message": {"role": kind, "model": "m", "content": [{"type": "text", "text": text}]}});
    format!("{record}\n")
}

const CC: &str = "5f0c2a9e-0000-4000-8000-0000000000aa";

/// A transcript as Claude Code 2.1.330 writes one with cairn's hooks (recorded shapes: each
/// hook's `additionalContext` an `attachment` record of its own): SessionStart's protocol and
/// context, the first prompt with its `[MEMORY]` block, another plugin's context, and a second
/// prompt the user began with `[MEMORY]` themselves.
fn claude_home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join(".claude/projects/-nonexistent-p");
    std::fs::create_dir_all(&dir).unwrap();
    let start = format!(
        "{}\n\n## Memory from previous sessions (project: p)\n- Deploys are tagged by CI",
        cairn_text(Host::ClaudeCode, Part::Memory)
    );
    let body = [
        attachment("att-start", "SessionStart", &[&start], "2026-03-01T10:00:00.000Z"),
        said("user", "u-1", "Fix the flaky deploy script", "2026-03-01T10:00:01.000Z"),
        attachment("att-block", "UserPromptSubmit", &[BLOCK], "2026-03-01T10:00:01.100Z"),
        attachment("att-other", "UserPromptSubmit", &["OTHER-PLUGIN context"], "2026-03-01T10:00:01.200Z"),
        said("assistant", "a-1", "Looking at deploy.sh now.", "2026-03-01T10:00:02.000Z"),
        said("user", "u-2", "[MEMORY]\nUSER-TYPED notes: history matters", "2026-03-01T10:00:03.000Z"),
        attachment(
            "att-meter",
            "UserPromptSubmit",
            &["🟡 Context: 75% used (150,000 / 200,000 tokens, m)."],
            "2026-03-01T10:00:03.100Z",
        ),
        said("assistant", "a-2", "Noted.", "2026-03-01T10:00:04.000Z"),
    ]
    .concat();
    std::fs::write(dir.join(format!("{CC}.jsonl")), body).unwrap();
    home
}

#[test]
fn claude_code_hook_context_of_cairns_is_kept_marked_and_out_of_previews() {
    let home = claude_home();
    let mut db = HistoryDb::open_in_memory().unwrap();
    let report = ingest::scan(&mut db, &super::claude::tests::env_for(home.path()), &mut |_| {}).unwrap();
    assert!(report.errors.is_empty(), "{report:?}");
    let rows: Vec<(String, String, i64, bool, bool)> = {
        let mut stmt = db
            .conn()
            .prepare(
                "SELECT m.id, m.role, m.turn_number, m.synthetic, p.injected FROM history_parts p
                 JOIN history_messages m ON m.session_id = p.session_id AND m.id = p.message_id ORDER BY m.seq, p.idx",
            )
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    };
    let expected = [
        ("att-start", "user", 0, true, true),
        ("u-1", "user", 1, false, false),
        ("att-block", "user", 1, true, true),
        ("a-1", "assistant", 1, false, false),
        ("u-2", "user", 2, false, false),
        ("att-meter", "user", 2, true, true),
        ("a-2", "assistant", 2, false, false),
    ];
    let expected: Vec<_> = expected.iter().map(|(a, b, c, d, e)| (a.to_string(), b.to_string(), *c, *d, *e)).collect();
    assert_eq!(rows, expected, "another plugin's context is not archived; cairn's is, injected");

    let turns = first_turns(&db, CC);
    let previews: Vec<&str> = turns.turns.iter().filter_map(|t| t.user.preview.as_deref()).collect();
    assert_eq!(previews, ["Fix the flaky deploy script", "[MEMORY] USER-TYPED notes: history matters"]);
    let chart = whole_chart(&db, CC);
    for injected in ["persistent memory", "Staging deploys listen", "Context: 75%", "Deploys are tagged"] {
        assert!(!chart.contains(injected), "{injected} in the chart:\n{chart}");
    }
    assert!(chart.contains("USER-TYPED"), "{chart}");
    // "history" is in the protocol's guidance: only the user's own message is found
    let found = find(&db, "history", Some(CC), false);
    assert_eq!(found.messages.iter().map(|m| m.message_id.as_str()).collect::<Vec<_>>(), ["u-2"]);
    // browse_messages lists the hook context, marked
    let page = browse_messages(
        &db,
        &MessagesRequest {
            session_id: CC.into(),
            message_id: Some("u-1".into()),
            num_before: 0,
            num_after: 2,
            caller_session_id: None,
        },
        &cfg(),
    )
    .unwrap();
    let marks: Vec<(&str, bool)> = page.messages.iter().map(|m| (m.message_id.as_str(), m.injected)).collect();
    assert_eq!(marks, [("u-1", false), ("att-block", true), ("a-1", false)]);
    assert!(page.messages[1].preview.starts_with("[MEMORY]"));
    let json = serde_json::to_value(&page).unwrap();
    assert_eq!(json["messages"][1]["injected"], json!(true));
    assert!(json["messages"][0].get("injected").is_none(), "the mark is only on what cairn injected");
    let start = pulled(&db, CC, "att-start");
    assert!(texts(&start)[0].0.starts_with("cairn is your persistent memory") && texts(&start)[0].1);
}

// ---------------------------------------------------------------- re-evaluation, backfill

fn oc_source() -> SourceRef {
    SourceRef { key: "/nonexistent/opencode.db#ses_oc".into(), host: HistoryHost::OpenCode }
}

fn oc_batch(injected: bool) -> IngestBatch {
    let session = HistorySession {
        project: Some("shop".into()),
        ..HistorySession::new("ses_oc", HistoryHost::OpenCode, "2026-03-01T10:00:00.000Z", "2026-03-01T10:00:01.000Z")
    };
    let user = HistoryMessage::new("ses_oc", "msg_u1", HistoryRole::User, 1, "2026-03-01T10:00:00.000Z");
    let part = |id: &str, idx: i64, text: &str| HistoryPart {
        text: Some(text.into()),
        ..HistoryPart::new("ses_oc", "msg_u1", id, idx, PartKind::Text)
    };
    let guidance = cairn_text(Host::Opencode, Part::History);
    IngestBatch {
        sessions: vec![session],
        messages: vec![user],
        parts: vec![
            part("prt_1", 0, "Rename the billing handlers"),
            HistoryPart { injected, ..part("prt_2", 1, &guidance) },
        ],
        ..IngestBatch::default()
    }
}

#[test]
fn a_part_read_again_is_re_evaluated_and_its_index_entry_follows() {
    let mut db = HistoryDb::open_in_memory().unwrap();
    let cursor = |n: u64| Cursor { offset: n, ..Cursor::default() };
    let applied = |outcome: ApplyOutcome| matches!(outcome, ApplyOutcome::Applied(_));
    assert!(applied(db.apply(&oc_source(), None, &oc_batch(false), &cursor(1)).unwrap()));
    assert!(hit_parts(&find(&db, "history_browse_turns", Some("ses_oc"), false)).contains("prt_2"));
    assert!(applied(db.apply(&oc_source(), Some(&cursor(1)), &oc_batch(true), &cursor(2)).unwrap()));
    assert!(hit_parts(&find(&db, "history_browse_turns", Some("ses_oc"), false)).is_empty());
    assert_eq!(first_turns(&db, "ses_oc").turns[0].user.preview.as_deref(), Some("Rename the billing handlers"));
    assert!(applied(db.apply(&oc_source(), Some(&cursor(2)), &oc_batch(false), &cursor(3)).unwrap()));
    assert!(hit_parts(&find(&db, "history_browse_turns", Some("ses_oc"), false)).contains("prt_2"));
}

/// An archive of the last layout (no `injected` column) opened by this build: the OpenCode
/// plugin's parts stored before are marked (after the user's text, led by cairn's line), a
/// user's own first text is not, nothing of Claude Code's is, and the index leaves them out.
#[test]
fn an_archive_from_before_the_mark_is_backfilled_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let db_path = tmp.path().join("history.db");
    let guidance = cairn_text(Host::Opencode, Part::History);
    {
        let mut conn = Connection::open(&db_path).unwrap();
        cairn_base::migrate::run_list(&mut conn, &MIGRATIONS[..2]).unwrap();
        conn.execute_batch(
            "INSERT INTO history_sessions (id, host, created_at, updated_at) VALUES
                 ('ses_oc', 'opencode', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'),
                 ('cc-1', 'claude-code', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z');
             INSERT INTO history_messages (session_id, id, role, seq, turn_number, created_at) VALUES
                 ('ses_oc', 'm1', 'user', 1, 1, '2026-01-01T00:00:00.000Z'),
                 ('ses_oc', 'm2', 'assistant', 2, 1, '2026-01-01T00:00:00.000Z'),
                 ('ses_oc', 'm3', 'user', 3, 2, '2026-01-01T00:00:00.000Z'),
                 ('cc-1', 'u1', 'user', 1, 1, '2026-01-01T00:00:00.000Z');",
        )
        .unwrap();
        let parts: [(&str, &str, &str, i64, String); 7] = [
            ("ses_oc", "m1", "prt_a", 0, "Rename the billing handlers".into()),
            ("ses_oc", "m1", "prt_b", 0, BLOCK.into()),
            ("ses_oc", "m1", "prt_c", 0, guidance.clone()),
            ("ses_oc", "m2", "prt_d", 0, "unused".into()),
            ("ses_oc", "m2", "prt_e", 1, guidance.clone()),
            ("ses_oc", "m3", "prt_f", 0, "[MEMORY]\nmy own notes".into()),
            ("cc-1", "u1", "u1:1", 1, BLOCK.into()),
        ];
        for (session, message, id, idx, text) in parts {
            conn.execute(
                "INSERT INTO history_parts (session_id, message_id, id, idx, kind, text) VALUES (?1, ?2, ?3, ?4, 'text', ?5)",
                params![session, message, id, idx, text],
            )
            .unwrap();
        }
        // the Claude Code user's own text, before the block
        conn.execute(
            "INSERT INTO history_parts (session_id, message_id, id, idx, kind, text) VALUES ('cc-1', 'u1', 'u1:0', 0, 'text', 'hi')",
            [],
        )
        .unwrap();
    }
    let db = HistoryDb::open(&db_path).unwrap();
    let marked: Vec<String> = {
        let mut stmt = db.conn().prepare("SELECT id FROM history_parts WHERE injected = 1 ORDER BY id").unwrap();
        stmt.query_map([], |r| r.get(0)).unwrap().collect::<rusqlite::Result<_>>().unwrap()
    };
    assert_eq!(marked, ["prt_b", "prt_c"]);
    assert!(
        hit_parts(&find(&db, "history_browse_turns", None, false)).is_subset(&BTreeSet::from(["prt_e".to_owned()]))
    );
    assert!(hit_parts(&find(&db, "own notes", None, false)).contains("prt_f"));
    assert_eq!(first_turns(&db, "ses_oc").turns[0].user.preview.as_deref(), Some("Rename the billing handlers"));
    let version: i64 = db.fts().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, super::index::LAYOUT);
}

// ---------------------------------------------------------------- the end of a long part

/// A build log of about `kb` KB whose only error is on its last line.
fn build_log(kb: usize, error: &str) -> String {
    let mut log = String::from("   Compiling billing v0.3.1\n");
    let mut n = 0;
    while log.len() < kb * 1024 {
        log.push_str(&format!("   Compiling dependency-{n} v1.{n}.0 (registry+https://example.invalid)\n"));
        n += 1;
    }
    log.push_str(&format!("error[E0425]: cannot find value `{error}` in this scope\n"));
    log
}

fn tool_batch(parts: Vec<(&str, String)>) -> IngestBatch {
    let mut batch = oc_batch(false);
    let assistant = HistoryMessage::new("ses_oc", "msg_a1", HistoryRole::Assistant, 2, "2026-03-01T10:00:01.000Z");
    for (i, (id, output)) in parts.into_iter().enumerate() {
        batch.parts.push(HistoryPart {
            tool: Some("bash".into()),
            call_id: Some(format!("call_{i}")),
            status: Some(ToolStatus::Completed),
            input: Some(r#"{"command":"cargo build"}"#.into()),
            output: Some(output),
            ..HistoryPart::new("ses_oc", "msg_a1", id, i as i64, PartKind::Tool)
        });
    }
    batch.messages.push(assistant);
    batch
}

#[test]
fn ranked_search_finds_the_error_at_the_end_of_a_long_build_log() {
    let mut db = HistoryDb::open_in_memory().unwrap();
    let huge = build_log(3 * 1024, "quuxhuge");
    // a word only in the middle of the 3 MB log: neither its first 24 nor its last 8 KiB
    let middle = "zzmiddleword";
    let huge = format!("{}{middle}{}", &huge[..huge.len() / 2], &huge[huge.len() / 2..]);
    let batch = tool_batch(vec![
        ("prt_60k", build_log(60, "zorblax")),
        ("prt_3m", huge),
        ("prt_small", build_log(1, "smallerr")),
    ]);
    db.apply(&oc_source(), None, &batch, &Cursor::default()).unwrap();
    for (word, part) in
        [("zorblax", "prt_60k"), ("quuxhuge", "prt_3m"), ("smallerr", "prt_small"), ("billing", "prt_3m")]
    {
        assert!(hit_parts(&find(&db, word, Some("ses_oc"), false)).contains(part), "{word}");
        assert!(hit_parts(&find(&db, word, None, false)).contains(part), "{word} over every session");
    }
    // the index holds a long part's start and end: the middle of 3 MB is found by literal only
    assert!(hit_parts(&find(&db, middle, Some("ses_oc"), false)).is_empty());
    assert!(hit_parts(&find(&db, middle, Some("ses_oc"), true)).contains("prt_3m"));
    // the hit's snippet shows the error
    let found = find(&db, "zorblax", Some("ses_oc"), false);
    let snippet = &found.messages[0].hits[0].snippets[0];
    assert!(snippet.contains("cannot find value `zorblax`"), "{snippet}");
}

#[test]
fn an_index_without_the_ends_of_long_parts_is_rebuilt_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let db_path = tmp.path().join("history.db");
    {
        let mut db = HistoryDb::open(&db_path).unwrap();
        db.apply(&oc_source(), None, &tool_batch(vec![("prt_60k", build_log(60, "zorblax"))]), &Cursor::default())
            .unwrap();
    }
    // what an index of layout 2 held: the first 32 KiB of each part
    {
        let main = Connection::open(&db_path).unwrap();
        let (rowid, output): (i64, String) = main
            .query_row("SELECT rowid, output FROM history_parts WHERE id = 'prt_60k'", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        let fts = Connection::open(fts_path(&db_path)).unwrap();
        fts.execute("DELETE FROM history_fts WHERE rowid = ?1", [rowid]).unwrap();
        fts.execute(
            "INSERT INTO history_fts (rowid, body, kind, session) VALUES (?1, ?2, 'tool', 'ses_oc')",
            params![rowid, &output[..32 * 1024]],
        )
        .unwrap();
        fts.execute_batch("PRAGMA user_version = 2").unwrap();
    }
    let db = HistoryDb::open(&db_path).unwrap();
    assert!(hit_parts(&find(&db, "zorblax", None, false)).contains("prt_60k"));
    let version: i64 = db.fts().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, super::index::LAYOUT);
}

#[test]
fn the_indexed_body_is_whole_up_to_the_budget_then_head_and_tail() {
    use crate::indexed::{INDEXED_BYTES, INDEXED_HEAD_BYTES, INDEXED_TAIL_BYTES, indexed_body};
    let small = "a".repeat(INDEXED_BYTES - 10);
    assert_eq!(indexed_body(PartKind::Text, None, Some(&small), None, None), small);
    // The middle starts past the head and ends before the tail: left out.
    let big = format!("HEAD{}MIDDLE{}TAIL", "x".repeat(INDEXED_HEAD_BYTES), "é".repeat(INDEXED_TAIL_BYTES / 2 + 100));
    let body = indexed_body(PartKind::Tool, Some("bash"), None, Some("{}"), Some(&big));
    assert!(body.starts_with("bash\n{}\nHEAD") && body.ends_with("TAIL"), "{}", &body[..20]);
    assert!(!body.contains("MIDDLE"));
    assert!(body.len() <= INDEXED_BYTES + 1, "{}", body.len());
    assert!(body.len() > INDEXED_BYTES - 8);
}

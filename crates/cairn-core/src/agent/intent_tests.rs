//! The ops of one host event: `session_start`, `tool_call`, `user_prompt` with a host, and
//! `context_meter`, through `Op::from_value` as the doors send them.

use serde_json::{Value, json};
use time::Duration;

use crate::Core;
use crate::ErrorCode;
use crate::ops::{Op, execute_value};
use crate::testutil::{core_with_clock, obs};

fn run(s: &mut Core, op: Value) -> crate::Result<Value> {
    execute_value(s, Op::from_value(op)?)
}

fn start(s: &mut Core, session: &str, source: &str) -> Value {
    run(
        s,
        json!({"op": "session_start", "args": {
            "session_id": session, "project": "Shop", "directory": "/w/shop", "source": source
        }}),
    )
    .unwrap()
}

#[test]
fn session_start_registers_and_injects_the_protocol_and_context() {
    let (mut s, _clock) = core_with_clock();
    let first = start(&mut s, "cc-1", "startup");
    assert_eq!(first["injected"], "everything");
    assert_eq!(first["project"], "shop");
    let texts: Vec<&str> = first["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(texts.len(), 1, "an empty project: the protocol only, no heading over nothing: {texts:?}");
    assert!(texts[0].contains("mem_save") && texts[0] == first["protocol"], "{texts:?}");
    assert_eq!(first["context"], "");
    let session = s.store.get_session("cc-1").unwrap();
    assert_eq!((session.agent.as_str(), session.directory.as_str()), ("claude-code", "/w/shop"));

    s.store.save(&obs("shop", "Deploy", "we deploy with fly.io")).unwrap();
    let next = start(&mut s, "cc-2", "startup");
    assert_eq!(next["texts"].as_array().unwrap().len(), 2, "{next}");
    assert!(next["context"].as_str().unwrap().contains("Deploy"), "{next}");
    assert!(next["compaction_note"].is_null() && next["chart"].is_null() && next["meter"].is_null());
}

#[test]
fn a_resume_injects_only_what_changed_and_a_compaction_everything_with_the_note() {
    let (mut s, _clock) = core_with_clock();
    s.store.save(&obs("shop", "Deploy", "we deploy with fly.io")).unwrap();
    assert_eq!(start(&mut s, "cc", "resume")["injected"], "everything", "nothing injected before");
    let same = start(&mut s, "cc", "resume");
    assert_eq!((same["injected"].as_str(), same["texts"].as_array().unwrap().len()), (Some("nothing"), 0));
    s.store.save(&obs("shop", "Queue", "the queue is SQS")).unwrap();
    let changed = start(&mut s, "cc", "resume");
    assert_eq!(changed["injected"], "context_only");
    assert_eq!(changed["texts"], json!([changed["context"]]));
    let compact = start(&mut s, "cc", "compact");
    assert_eq!(compact["injected"], "everything");
    let note = compact["compaction_note"].as_str().unwrap();
    assert_eq!(compact["texts"].as_array().unwrap().last().unwrap(), note, "no archive: no chart, the note last");
    // the compact injection is what a later resume replays: nothing again
    assert_eq!(start(&mut s, "cc", "resume")["injected"], "nothing");
}

#[test]
fn session_start_for_opencode_and_with_usage() {
    let (mut s, _clock) = core_with_clock();
    let out = run(
        &mut s,
        json!({"op": "session_start", "args": {
            "session_id": "oc", "project": "p", "host": "opencode", "usage": {"used": 150_000, "model": "m"}
        }}),
    )
    .unwrap();
    assert!(out["protocol"].as_str().unwrap().contains("cairn_mem_save"), "OpenCode's tool names");
    assert_eq!(s.store.get_session("oc").unwrap().agent, "opencode");
    assert_eq!((out["meter"]["percent"].as_u64(), out["meter"]["status"].as_str()), (Some(75), Some("yellow")));
    let bad = run(&mut s, json!({"op": "session_start", "args": {"session_id": "a b\n"}})).unwrap_err();
    assert_eq!(bad.code, ErrorCode::InvalidArgument);
    let host = Op::from_value(json!({"op": "session_start", "args": {"session_id": "s", "host": "vim"}}));
    assert_eq!(host.unwrap_err().code, ErrorCode::InvalidArgument);
}

#[test]
fn codex_and_gemini_get_the_context_at_start_and_the_protocol_from_their_setup() {
    let (mut s, _clock) = core_with_clock();
    s.store.save(&obs("shop", "Deploy", "we deploy with fly.io")).unwrap();
    for (host, agent) in [("codex", "codex"), ("gemini", "gemini")] {
        let session = format!("{host}-1");
        let out = run(
            &mut s,
            json!({"op": "session_start", "args": {"session_id": session, "project": "Shop", "host": host}}),
        )
        .unwrap();
        assert_eq!(out["protocol"], "", "{host}: the MCP instructions or GEMINI.md carry it");
        assert_eq!(out["texts"], json!([out["context"]]), "{host}");
        assert!(out["context"].as_str().unwrap().contains("fly.io"), "{out}");
        assert_eq!(s.store.get_session(&session).unwrap().agent, agent);
    }
    assert!(crate::agent::intent::is_cairn_tool(crate::agent::protocol::Host::Gemini, "mcp_cairn_mem_save"));
    assert!(crate::agent::intent::is_cairn_tool(crate::agent::protocol::Host::Codex, "mcp__cairn__mem_save"));
    assert!(!crate::agent::intent::is_cairn_tool(crate::agent::protocol::Host::Gemini, "run_shell_command"));
}

#[test]
fn tool_call_counts_the_hosts_tools_not_cairns() {
    let (mut s, clock) = core_with_clock();
    let call = |s: &mut Core, tool: &str, host: &str, remind: bool| {
        run(
            s,
            json!({"op": "tool_call", "args": {
                "session_id": "t", "project": "p", "tool": tool, "host": host, "remind": remind
            }}),
        )
        .unwrap()
    };
    assert_eq!(call(&mut s, "Bash", "claude-code", false)["counted"], true);
    assert_eq!(call(&mut s, "mcp__cairn__mem_save", "claude-code", false)["counted"], false);
    assert_eq!(call(&mut s, "mcp__plugin_cairn_cairn__mem_search", "claude-code", false)["counted"], false);
    assert_eq!(call(&mut s, "cairn_mem_save", "opencode", false)["counted"], false);
    assert_eq!(call(&mut s, "memory_compact", "opencode", false)["counted"], false);
    assert_eq!(call(&mut s, "bash", "opencode", false)["counted"], true);
    for _ in 0..5 {
        call(&mut s, "read", "opencode", false);
    }
    assert_eq!(s.store.session_activity("t").unwrap().tool_calls, 7);
    clock.advance(Duration::minutes(12));
    let due = call(&mut s, "read", "opencode", true);
    assert!(due["reminder"].as_str().unwrap().contains("12 min"), "{due}");
    assert_eq!(due["activity"]["reminders"], 1);
    let empty = run(&mut s, json!({"op": "tool_call", "args": {"session_id": "t", "tool": " "}})).unwrap_err();
    assert_eq!(empty.code, ErrorCode::EmptyField);
    let unknown = run(&mut s, json!({"op": "tool_call", "args": {"session_id": "new", "tool": "Bash"}})).unwrap_err();
    assert_eq!(unknown.code, ErrorCode::SessionNotFound, "an unknown session needs a project");
}

#[test]
fn user_prompt_with_a_host_answers_everything_the_message_needs() {
    let (mut s, clock) = core_with_clock();
    s.store.save(&obs("shop", "Deploy", "we deploy with fly.io to production")).unwrap();
    let prompt = |s: &mut Core, content: &str, usage: Value| {
        run(
            s,
            json!({"op": "user_prompt", "args": {
                "session_id": "u", "project": "shop", "content": content, "host": "claude-code", "remind": true,
                "usage": usage
            }}),
        )
        .unwrap()
    };
    let first = prompt(&mut s, "how do we deploy to \"production\"?", Value::Null);
    assert_eq!(first["first_prompt"], true);
    let block = first["context"].as_str().unwrap();
    assert!(block.starts_with("[MEMORY]") && block.contains("Deploy"), "{block}");
    assert_eq!(first["texts"], json!([block]));
    assert!(first.get("meter").is_none() && first.get("reminder").is_none());

    let trigger =
        prompt(&mut s, "remember that staging uses fly.io too", json!({"used": 170_000, "model": "claude-x"}));
    assert!(trigger.get("context").is_none(), "only the first prompt has the block");
    let texts = trigger["texts"].as_array().unwrap();
    assert_eq!(texts.len(), 2, "{trigger}");
    assert_eq!(texts[0], trigger["trigger"]);
    assert!(texts[1].as_str().unwrap().starts_with("🟠 Context: 85% used (170,000 / 200,000 tokens, claude-x)."));
    assert_eq!(trigger["meter"]["status"], "red");

    for _ in 0..6 {
        s.store
            .tool_call(&crate::agent::intent::ToolCall {
                session_id: "u".into(),
                tool: "Bash".into(),
                ..Default::default()
            })
            .unwrap();
    }
    clock.advance(Duration::minutes(11));
    let later = prompt(&mut s, "and what about the queue workers", json!({"used": 1000}));
    assert!(later["reminder"].as_str().unwrap().contains("11 min"), "{later}");
    assert_eq!(later["texts"], json!([later["reminder"]]), "green: no meter line");
    assert_eq!(s.store.session_activity("u").unwrap().reminders, 1, "counted as sent");
    // Without a host: the answer of before, with an empty `texts`.
    let plain =
        run(&mut s, json!({"op": "user_prompt", "args": {"session_id": "u", "content": "hello there all"}})).unwrap();
    assert_eq!(
        plain,
        json!({"prompt_id": plain["prompt_id"], "first_prompt": false, "memory_trigger": false, "texts": []})
    );
}

#[test]
fn context_meter_op_reads_a_hosts_numbers() {
    let (mut s, _clock) = core_with_clock();
    let r = run(
        &mut s,
        json!({"op": "context_meter", "args": {
            "used": 96000, "limit": 128_000, "model": "mock/mock-model", "host": "opencode"
        }}),
    )
    .unwrap();
    assert_eq!((r["percent"].as_u64(), r["status"].as_str()), (Some(75), Some("yellow")));
    assert_eq!(
        r["line"],
        "🟡 Context: 75% used (96,000 / 128,000 tokens, mock/mock-model). At the next natural break, call \
         memory_compact to compact this session; cairn keeps the summary."
    );
    assert_eq!((r["auto_compact"].as_bool(), r["compact_allowed"].as_bool()), (Some(false), Some(true)));
    let big = run(&mut s, json!({"op": "context_meter", "args": {"used": 500_000, "model": "opus[1m]"}})).unwrap();
    assert_eq!((big["limit"].as_u64(), big["line"].is_null()), (Some(1_000_000), true));
    let zero = run(&mut s, json!({"op": "context_meter", "args": {"used": 0}})).unwrap_err();
    assert_eq!(zero.code, ErrorCode::InvalidArgument);
    let missing = Op::from_value(json!({"op": "context_meter", "args": {}})).unwrap_err();
    assert_eq!(missing.code, ErrorCode::InvalidArgument);
}

#[test]
fn without_a_project_the_directory_names_it() {
    let (mut s, _clock) = core_with_clock();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("Billing_Api");
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dir.display().to_string();
    let started = run(&mut s, json!({"op": "session_start", "args": {"session_id": "d1", "directory": dir}})).unwrap();
    assert_eq!(started["project"], "billing_api");
    let prompt =
        json!({"op": "user_prompt", "args": {"session_id": "d2", "content": "a prompt long enough", "directory": dir}});
    run(&mut s, prompt).unwrap();
    assert_eq!(s.store.get_session("d2").unwrap().project, "billing_api");
    run(&mut s, json!({"op": "tool_call", "args": {"session_id": "d3", "tool": "Bash", "directory": dir}})).unwrap();
    assert_eq!(s.store.get_session("d3").unwrap().project, "billing_api");
    // a known session keeps its project whatever the directory says
    let elsewhere = json!({"op": "tool_call", "args": {"session_id": "d3", "tool": "Bash", "directory": "/"}});
    assert_eq!(run(&mut s, elsewhere).unwrap()["activity"]["project"], "billing_api");
}

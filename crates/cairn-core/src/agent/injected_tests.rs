//! Every text cairn puts into a conversation, built by its producer, is recognised as cairn's
//! when it comes back in a host's transcript (`history/injected.rs`).

use crate::agent::protocol::{Host, Part, ProtocolRequest, ToolProfile, protocol};
use crate::history::injected::*;

#[test]
fn every_protocol_text_put_in_a_conversation_is_recognised() {
    let cases = [
        (Part::Memory, Injection::Protocol),
        (Part::History, Injection::HistoryGuidance),
        (Part::Trigger, Injection::Trigger),
        (Part::CompactionNote, Injection::CompactionNote),
        (Part::Upstream, Injection::Upstream),
    ];
    for host in [Host::Mcp, Host::Opencode, Host::ClaudeCode, Host::Codex, Host::Gemini] {
        for tools in [ToolProfile::Agent, ToolProfile::All, ToolProfile::Router, ToolProfile::Admin] {
            for (part, kind) in cases {
                let text = protocol(ProtocolRequest { host, tools, part, session_id: Some("ses_parent".into()) }).text;
                // the admin profile's history guidance is one sentence cairn never injects
                if tools == ToolProfile::Admin && part == Part::History {
                    continue;
                }
                assert_eq!(cairn_injection(&text), Some(kind), "{host:?} {tools:?} {part:?}:\n{text}");
            }
        }
    }
}

#[test]
fn the_reminder_and_the_meter_are_recognised() {
    use crate::agent::SessionActivity;
    use crate::agent::meter::ContextUsage;
    let at = |t: &str| Some(t.to_owned());
    let activity = SessionActivity {
        session_id: "s".into(),
        project: String::new(),
        started_at: "2026-01-01T00:00:00.000Z".into(),
        updated_at: "2026-01-01T00:00:00.000Z".into(),
        tool_calls: 20,
        saves: 1,
        last_save_at: at("2026-01-01T00:00:00.000Z"),
        reminders: 0,
        last_reminder_at: None,
        pending_prompt: None,
        context_fingerprint: None,
    };
    let now = crate::clock::parse_ts("2026-01-01T02:00:00.000Z").unwrap();
    let reminder = activity.reminder_due(now).expect("a reminder is due after two quiet hours");
    assert_eq!(cairn_injection(&reminder), Some(Injection::SaveReminder), "{reminder}");
    let config = crate::settings::plugin::PluginConfig::default();
    for host in [crate::agent::protocol::Host::ClaudeCode, crate::agent::protocol::Host::Opencode] {
        for used in [150_000, 175_000, 195_000] {
            let usage = ContextUsage { used, limit: 200_000, model: "m".into() };
            let reading = crate::agent::meter::reading(&usage, host, &config.context_meter, &config.compaction);
            let line = reading.line.expect("a meter line past green");
            assert_eq!(cairn_injection(&line), Some(Injection::ContextMeter), "{line}");
        }
    }
}

#[test]
fn the_memory_block_and_the_session_context_are_recognised() {
    use crate::context::{ContextLayout, ContextRequest};
    let (mut store, _) = crate::testutil::core_with_clock();
    store.store.save(&crate::testutil::obs("shop", "Checkout flow", "Payments go through Stripe")).unwrap();
    for (layout, kind) in
        [(ContextLayout::MemoryBlock, Injection::MemoryBlock), (ContextLayout::Recent, Injection::SessionContext)]
    {
        for project in [Some("shop"), None] {
            let req = ContextRequest {
                project: project.map(str::to_owned),
                layout,
                query: Some("checkout payments".into()),
                similarity_threshold: Some(0.0),
                ..ContextRequest::default()
            };
            let text = store.context(&req).unwrap().context;
            assert!(!text.is_empty(), "{layout:?} {project:?}");
            assert_eq!(cairn_injection(&text), Some(kind), "{layout:?} {project:?}:\n{text}");
        }
    }
}

#[test]
fn the_block_of_a_project_with_nothing_stored_is_recognised() {
    use crate::context::{ContextLayout, ContextRequest};
    let (store, _) = crate::testutil::core_with_clock();
    let req = ContextRequest {
        project: Some("empty".into()),
        layout: ContextLayout::MemoryBlock,
        query: Some("anything".into()),
        ..ContextRequest::default()
    };
    let text = store.context(&req).unwrap().context;
    assert!(text.starts_with("[MEMORY] Nothing is stored"), "{text}");
    assert_eq!(cairn_injection(&text), Some(Injection::MemoryBlock), "{text}");
}

#[test]
fn an_edited_or_retyped_lead_is_the_users() {
    for text in [
        "[MEMORY] please remember this",
        " [MEMORY]\n## Relevant",
        "[memory]\n## Relevant",
        "[MEMORY]",
        "## Session History of my project",
        "## session history\n",
        "cairn is your persistent memory across sessions, right?",
        "what is [MEMORY]\n",
        "The summary of this compaction is wrong",
        "",
        "ok",
    ] {
        assert_eq!(cairn_injection(text), None, "{text:?}");
    }
}

use std::path::PathBuf;

use time::Duration;

use super::*;
use crate::agent::activity::IDLE_RESTART;
use crate::ops::{DeleteSessionRequest, EndSessionRequest, Op, SessionActivityRequest, execute_value as execute};
use crate::project::ProjectSource;
use crate::testutil::{core_with_clock, store_with_clock};

fn plain_dir(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    (tmp, dir)
}

fn no_session(_: &str) -> Result<Option<String>> {
    panic!("no session to look up")
}

#[test]
fn blank_means_absent() {
    assert_eq!(given(Some("  ".into())), None);
    assert_eq!(given(Some(" x ".into())).as_deref(), Some(" x "));
    assert_eq!(given_str(Some("")), None);
}

#[test]
fn resolution_order_argument_session_header_process_detection() {
    let (_tmp, dir) = plain_dir("From_Dir");
    let mut hints = ProjectHints {
        explicit: Some("Arg".into()),
        session_id: Some("s1".into()),
        header: Some("hdr".into()),
        process: Some("proc".into()),
        dir: Some(dir.clone()),
        process_cwd: PathBuf::from("/nowhere"),
    };
    let session = |_: &str| Ok(Some("sess".to_owned()));
    let source = |h: &ProjectHints| {
        let found = resolve_project(h, session).unwrap();
        (found.project, found.project_source)
    };
    assert_eq!(source(&hints), ("arg".into(), ProjectSource::ExplicitOverride));
    hints.explicit = Some(" ".into());
    assert_eq!(source(&hints), ("sess".into(), ProjectSource::Session));
    hints.session_id = None;
    assert_eq!(source(&hints), ("hdr".into(), ProjectSource::RequestHeader));
    hints.header = Some(String::new());
    assert_eq!(source(&hints), ("proc".into(), ProjectSource::ProcessOverride));
    hints.process = None;
    assert_eq!(source(&hints), ("from_dir".into(), ProjectSource::DirBasename));
    // A session registered without a project says nothing: the next hint decides.
    hints.session_id = Some("s2".into());
    hints.header = Some("hdr".into());
    let found = resolve_project(&hints, |_| Ok(Some(String::new()))).unwrap();
    assert_eq!(found.project_source, ProjectSource::RequestHeader);
    // The caller's directory first, the process's only without one.
    let (_tmp2, cwd) = plain_dir("Process_Dir");
    let bare = ProjectHints { process_cwd: cwd, ..ProjectHints::default() };
    assert_eq!(resolve_project(&bare, no_session).unwrap().project, "process_dir");
}

#[test]
fn bad_names_and_ambiguous_directories_are_errors_with_codes() {
    let hints = ProjectHints { explicit: Some("a/b".into()), ..ProjectHints::default() };
    assert_eq!(resolve_project(&hints, no_session).unwrap_err().code, ErrorCode::InvalidArgument);
    let (_tmp, dir) = plain_dir("work");
    for repo in ["api/.git", "web/.git"] {
        std::fs::create_dir_all(dir.join(repo)).unwrap();
    }
    let hints = ProjectHints { dir: Some(dir), ..ProjectHints::default() };
    let err = resolve_project(&hints, no_session).unwrap_err();
    assert_eq!(err.code, ErrorCode::AmbiguousProject);
    assert!(err.message.contains("api, web"), "{}", err.message);
}

#[test]
fn current_project_lists_candidates_only_when_ambiguous() {
    let (_tmp, dir) = plain_dir("work");
    let hints = ProjectHints { dir: Some(dir.clone()), ..ProjectHints::default() };
    let plain = current_project(&hints, no_session);
    assert_eq!((plain.project.as_str(), plain.project_source.as_str()), ("work", "dir_basename"));
    assert!(plain.available_projects.is_empty() && plain.error_code.is_none());
    // Another directory: detection is cached per directory for the life of the process.
    let (_tmp2, multi) = plain_dir("multi");
    for repo in ["api/.git", "web/.git"] {
        std::fs::create_dir_all(multi.join(repo)).unwrap();
    }
    let hints = ProjectHints { dir: Some(multi), ..ProjectHints::default() };
    let view = current_project(&hints, no_session);
    assert_eq!((view.project.as_str(), view.project_source.as_str()), ("", "ambiguous"));
    assert_eq!(view.available_projects, ["api", "web"]);
    assert_eq!(view.error_code.as_deref(), Some("ambiguous_project"));
    let json = serde_json::to_value(&view).unwrap();
    assert_eq!(json["available_projects"], serde_json::json!(["api", "web"]));
    // A name outranks the ambiguity.
    let named = ProjectHints { process: Some("api".into()), ..hints };
    let view = current_project(&named, no_session);
    assert_eq!((view.project.as_str(), view.project_source.as_str()), ("api", "process_override"));
    let broken = ProjectHints { explicit: Some("a/b".into()), ..ProjectHints::default() };
    let view = current_project(&broken, no_session);
    assert_eq!((view.project_source.as_str(), view.error_code.as_deref()), ("error", Some("invalid_argument")));
}

fn record(session: &str, event: ActivityEvent) -> ActivityRecord {
    ActivityRecord { session_id: session.into(), project: Some("p".into()), event }
}

const CALL: ActivityEvent = ActivityEvent::ToolCall { remind: false };
const REMIND: ActivityEvent = ActivityEvent::ToolCall { remind: true };

#[test]
fn no_reminder_while_fresh_idle_or_recently_saved() {
    let (mut s, clock) = store_with_clock();
    s.record_activity(&record("s", ActivityEvent::ReminderSent)).unwrap();
    s.clear_activity("s").unwrap();
    clock.advance(Duration::minutes(5));
    assert_eq!(s.record_activity(&record("s", REMIND)).unwrap().reminder, None, "too early");
    clock.advance(Duration::minutes(25));
    assert_eq!(s.record_activity(&record("s", REMIND)).unwrap().reminder, None, "idle: two calls, no saves");
    s.record_activity(&record("s", ActivityEvent::Save { saved_session_id: None, attach_prompt: true })).unwrap();
    clock.advance(Duration::minutes(5));
    assert_eq!(s.record_activity(&record("s", REMIND)).unwrap().reminder, None, "saved 5 minutes ago");
}

#[test]
fn reminds_once_per_period_when_working_without_saving() {
    let (mut s, clock) = core_with_clock();
    for _ in 0..6 {
        s.store.record_activity(&record("s", CALL)).unwrap();
    }
    clock.advance(Duration::minutes(12));
    let update = s.store.record_activity(&record("s", REMIND)).unwrap();
    let text = update.reminder.expect("due");
    assert!(text.contains("12 min") && text.contains("after answering the user"), "{text}");
    assert_eq!((update.activity.tool_calls, update.activity.reminders), (7, 1));
    clock.advance(Duration::minutes(3));
    assert_eq!(s.store.record_activity(&record("s", REMIND)).unwrap().reminder, None, "not again so soon");
    clock.advance(Duration::minutes(8));
    assert!(s.store.record_activity(&record("s", REMIND)).unwrap().reminder.is_some());
    // Ending it with keep_activity (OpenCode's idle) keeps the counts, and the session is ended.
    let ended =
        execute(&mut s, Op::EndSession(EndSessionRequest { id: "s".into(), summary: None, keep_activity: true }))
            .unwrap();
    assert!(ended["ended_at"].is_string(), "{ended}");
    let kept = s.store.session_activity("s").unwrap();
    assert_eq!((kept.tool_calls, kept.reminders), (9, 2));
    // Ending the session starts the next one from zero.
    execute(&mut s, Op::EndSession(EndSessionRequest { id: "s".into(), summary: None, keep_activity: false })).unwrap();
    let fresh = s.store.session_activity("s").unwrap();
    assert_eq!((fresh.tool_calls, fresh.saves, fresh.reminders), (0, 0, 0));
    assert!(!fresh.summary_line().contains("No memories"));
}

#[test]
fn a_long_quiet_spell_restarts_the_counts_but_keeps_the_prompt() {
    let (mut s, clock) = store_with_clock();
    for _ in 0..6 {
        s.record_activity(&record("s", CALL)).unwrap();
    }
    assert!(s.session_activity("s").unwrap().summary_line().contains("No memories"));
    s.record_activity(&record("s", ActivityEvent::Prompt { content: "fix it".into(), stored_in: None })).unwrap();
    clock.advance(IDLE_RESTART + Duration::minutes(1));
    let after = s.record_activity(&record("s", REMIND)).unwrap();
    assert_eq!((after.activity.tool_calls, after.reminder), (1, None));
    assert_eq!(after.activity.pending_prompt.unwrap().content, "fix it");
}

#[test]
fn unknown_sessions_need_a_project_and_bad_events_are_refused() {
    let (mut s, _clock) = store_with_clock();
    let ghost = ActivityRecord { session_id: "ghost".into(), project: None, event: CALL };
    assert_eq!(s.record_activity(&ghost).unwrap_err().code, ErrorCode::SessionNotFound);
    assert_eq!(s.session_activity("ghost").unwrap_err().code, ErrorCode::SessionNotFound);
    let created = s.record_activity(&ActivityRecord { project: Some("My-Proj".into()), ..ghost }).unwrap();
    assert_eq!((created.activity.project.as_str(), created.activity.tool_calls), ("my-proj", 1));
    assert_eq!(s.get_session("ghost").unwrap().project, "my-proj");
    let blank = record("s", ActivityEvent::Prompt { content: " ".into(), stored_in: None });
    assert_eq!(s.record_activity(&blank).unwrap_err().code, ErrorCode::EmptyField);
    let long = record("s", ActivityEvent::ContextInjected { fingerprint: "x".repeat(200) });
    assert_eq!(s.record_activity(&long).unwrap_err().code, ErrorCode::InvalidArgument);
    let bad = Op::from_value(serde_json::json!({"op": "record_activity", "args": {"session_id": "s", "event": "nap"}}));
    assert_eq!(bad.unwrap_err().code, ErrorCode::InvalidArgument);
    // serde would take a variant's index for the tag: `0` is no event name (found by
    // schemathesis).
    for event in [serde_json::json!(0), serde_json::json!(null), serde_json::json!(["tool_call"])] {
        let args = serde_json::json!({"session_id": "s", "event": event});
        let bad = Op::from_value(serde_json::json!({"op": "record_activity", "args": args}));
        assert_eq!(bad.unwrap_err().code, ErrorCode::InvalidArgument, "{event}");
    }
    let good = serde_json::json!({"op": "record_activity", "args": {"session_id": "s", "event": "tool_call"}});
    let op = Op::from_value(good.clone()).unwrap();
    assert_eq!(serde_json::to_value(&op).unwrap()["args"]["event"], "tool_call");
}

#[test]
fn a_pending_prompt_is_redacted_and_attached_once_to_the_saved_session() {
    let (mut s, _clock) = store_with_clock();
    let prompt =
        ActivityEvent::Prompt { content: "fix login <private>hunter2</private>".into(), stored_in: Some("s".into()) };
    let kept = s.record_activity(&record("s", prompt)).unwrap().activity.pending_prompt.unwrap();
    assert_eq!(kept.content, "fix login [REDACTED]");
    // Saved in the session it is already stored in: nothing to attach.
    let same =
        s.record_activity(&record("s", ActivityEvent::Save { saved_session_id: None, attach_prompt: true })).unwrap();
    assert_eq!(same.attached_prompt_id, None);
    // Saved elsewhere: attached there, once.
    let save = || record("s", ActivityEvent::Save { saved_session_id: Some("other".into()), attach_prompt: true });
    let attached = s.record_activity(&save()).unwrap();
    let id = attached.attached_prompt_id.expect("attached");
    let stored = s.get_prompt(id).unwrap();
    assert_eq!((stored.session_id.as_str(), stored.content.as_str()), ("other", "fix login [REDACTED]"));
    assert_eq!(s.record_activity(&save()).unwrap().attached_prompt_id, None);
    assert_eq!(attached.activity.saves, 2);
}

#[test]
fn context_fingerprints_report_a_change() {
    let (mut s, _clock) = store_with_clock();
    let inject = |f: &str| record("s", ActivityEvent::ContextInjected { fingerprint: f.into() });
    assert_eq!(s.record_activity(&inject("h1")).unwrap().context_changed, Some(true));
    assert_eq!(s.record_activity(&inject("h1")).unwrap().context_changed, Some(false));
    let changed = s.record_activity(&inject("h2")).unwrap();
    assert_eq!((changed.context_changed, changed.activity.context_fingerprint.as_deref()), (Some(true), Some("h2")));
}

#[test]
fn activity_ops_round_trip_as_op_args() {
    let (mut s, _clock) = core_with_clock();
    let op = Op::from_value(serde_json::json!({"op": "record_activity",
        "args": {"session_id": "s", "project": "p", "event": "tool_call", "remind": true}}))
    .unwrap();
    assert!(op.writes_memory_store());
    assert_eq!(execute(&mut s, op).unwrap()["activity"]["tool_calls"], 1);
    let read = Op::SessionActivity(SessionActivityRequest { session_id: "s".into() });
    assert!(!read.writes_memory_store());
    assert_eq!(execute(&mut s, read).unwrap()["project"], "p");
    // Deleting the session deletes its activity (it holds prompt text).
    execute(&mut s, Op::DeleteSession(DeleteSessionRequest { id: "s".into() })).unwrap();
    assert_eq!(s.store.session_activity("s").unwrap_err().code, ErrorCode::SessionNotFound);
}

#[test]
fn user_prompt_creates_the_session_stores_and_counts_once() {
    let (mut s, _clock) = core_with_clock();
    let first = execute(
        &mut s,
        Op::from_value(serde_json::json!({"op": "user_prompt", "args": {
            "session_id": "oc-1", "project": "Shop", "agent": "build", "directory": "/w",
            "content": "  remember that we deploy with <private>token=1</private> fly.io  "
        }}))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(first["first_prompt"], true);
    assert_eq!(first["memory_trigger"], true);
    let id = first["prompt_id"].as_i64().unwrap();
    let stored = s.store.get_prompt(id).unwrap();
    assert_eq!(stored.content, "remember that we deploy with [REDACTED] fly.io");
    let session = s.store.get_session("oc-1").unwrap();
    assert_eq!((session.project.as_str(), session.agent.as_str()), ("shop", "build"));
    let pending = s.store.session_activity("oc-1").unwrap().pending_prompt.unwrap();
    assert_eq!((pending.content.as_str(), pending.stored_in.as_deref()), (stored.content.as_str(), Some("oc-1")));

    // The same prompt again (a plugin retried): stored once, no longer the first.
    let prompt = UserPrompt {
        session_id: "oc-1".into(),
        content: "remember that we deploy with <private>token=1</private> fly.io".into(),
        ..UserPrompt::default()
    };
    let again = s.store.user_prompt(&prompt, &[]).unwrap();
    assert_eq!((again.prompt_id, again.first_prompt), (Some(id), false));

    // Short ones are counted but not stored; a long one is cut.
    let short = s.store.user_prompt(&UserPrompt { content: "yes please".into(), ..prompt.clone() }, &[]).unwrap();
    assert_eq!((short.prompt_id, short.first_prompt, short.memory_trigger), (None, false, false));
    let long = s.store.user_prompt(&UserPrompt { content: "é".repeat(3_000), ..prompt.clone() }, &[]).unwrap();
    let long = s.store.get_prompt(long.prompt_id.unwrap()).unwrap();
    assert_eq!(long.content.chars().count(), activity::MAX_PROMPT_CHARS);

    // Ending the session starts the count over (a new session under the same id).
    s.store.end_session("oc-1", None).unwrap();
    s.store.clear_activity("oc-1").unwrap();
    assert!(s.store.user_prompt(&prompt, &[]).unwrap().first_prompt);
}

/// A prompt that arrives before its host registers the session (OpenCode sends both at the
/// start, in either order) registers it under the host's name, as the registration would, not
/// under OpenCode's agent mode; without a host, the named agent.
#[test]
fn a_prompt_first_registers_its_session_under_the_hosts_name() {
    let (mut s, _clock) = core_with_clock();
    let prompt = |session: &str, host: Option<&str>| {
        let mut args = serde_json::json!({"session_id": session, "project": "shop", "agent": "build",
            "content": "please explain the layout of this repository"});
        if let Some(host) = host {
            args["host"] = serde_json::json!(host);
        }
        Op::from_value(serde_json::json!({"op": "user_prompt", "args": args})).unwrap()
    };
    execute(&mut s, prompt("oc-first", Some("opencode"))).unwrap();
    assert_eq!(s.store.get_session("oc-first").unwrap().agent, "opencode");
    execute(&mut s, prompt("plain", None)).unwrap();
    assert_eq!(s.store.get_session("plain").unwrap().agent, "build");
}

#[test]
fn user_prompt_bad_input_and_configured_triggers() {
    let (mut s, _clock) = store_with_clock();
    let ok = UserPrompt { session_id: "s".into(), content: "bitte merk dir das".into(), ..UserPrompt::default() };
    assert!(!s.user_prompt(&ok, &[]).unwrap().memory_trigger);
    assert!(s.user_prompt(&ok, &["merk dir".to_owned()]).unwrap().memory_trigger);
    let empty = UserPrompt { content: "  ".into(), ..ok.clone() };
    assert_eq!(s.user_prompt(&empty, &[]).unwrap_err().code, ErrorCode::EmptyField);
    let bad_id = UserPrompt { session_id: "a b\n".into(), ..ok.clone() };
    assert!(s.user_prompt(&bad_id, &[]).is_err());
    let missing = Op::from_value(serde_json::json!({"op": "user_prompt", "args": {"session_id": "s"}})).unwrap_err();
    assert_eq!(missing.code, ErrorCode::InvalidArgument);
    // Like every op, unknown fields are ignored: a newer plugin may send more.
    let newer = serde_json::json!({"op": "user_prompt", "args": {"session_id": "s", "content": "x", "model": "m"}});
    assert!(Op::from_value(newer).is_ok());
}

#[test]
fn new_ops_answer_their_contract_shapes() {
    let (mut s, _clock) = core_with_clock();
    let run = |s: &mut crate::Core, op: serde_json::Value| execute(s, Op::from_value(op).unwrap());
    let text = run(&mut s, serde_json::json!({"op": "protocol", "args": {"host": "opencode"}})).unwrap();
    assert_eq!((text["host"].as_str(), text["part"].as_str()), (Some("opencode"), Some("memory")));
    assert!(text["text"].as_str().unwrap().contains("cairn_mem_save"));
    let bad = Op::from_value(serde_json::json!({"op": "protocol", "args": {"host": "vim"}})).unwrap_err();
    assert_eq!(bad.code, ErrorCode::InvalidArgument);
    for config in [serde_json::json!({"op": "plugin_config"}), serde_json::json!({"op": "plugin_config", "args": {}})] {
        let c = run(&mut s, config).unwrap();
        assert_eq!(c["inject"]["mode"], "first_message");
        assert_eq!(c["compaction"]["min_percent"], 50);
        assert_eq!(c["context_meter"]["default_limit"], 200_000);
        assert!(c.get("http_token").is_none());
    }
    let mut pref = crate::testutil::obs("p", "tabs", "tabs over spaces");
    pref.scope = Some("user".into());
    let saved = s.store.save(&pref).unwrap();
    assert_eq!(s.store.get(saved.id).unwrap().scope, crate::text::Scope::Personal, "user is personal");
    let profile = run(&mut s, serde_json::json!({"op": "profile", "args": {"project": "q"}})).unwrap();
    assert_eq!(profile[0]["id"], saved.id);
    let compaction =
        run(&mut s, serde_json::json!({"op": "save_compaction", "args": {"session_id": "s", "summary": "## Goal\nx", "trigger": "manual"}}))
            .unwrap();
    assert_eq!(
        (compaction["type"].as_str(), compaction["action"].as_str()),
        (Some("compaction_summary"), Some("created"))
    );
    let bad_trigger =
        serde_json::json!({"op": "save_compaction", "args": {"session_id": "s", "summary": "x", "trigger": "now"}});
    assert_eq!(Op::from_value(bad_trigger).unwrap_err().code, ErrorCode::InvalidArgument);
}

#[test]
fn a_counted_save_writes_the_memory_the_prompt_and_the_counts_together() {
    use crate::memory::NewObservation;
    let (mut s, _clock) = store_with_clock();
    s.record_activity(&record(
        "s",
        ActivityEvent::Prompt { content: "why does checkout time out?".into(), stored_in: None },
    ))
    .unwrap();
    let new = NewObservation {
        title: "Checkout timeout".into(),
        content: "the payment gateway call has no deadline".into(),
        session_id: Some("other".into()),
        project: Some("shop".into()),
        ..NewObservation::default()
    };
    let session = SaveActivity { session_id: "s".into(), attach_prompt: true };
    let (saved, counted) = s.save_counted(&new, &session).unwrap();
    let counted = counted.expect("counted in the agent's session");
    assert_eq!(counted.activity.saves, 1);
    assert!(counted.activity.last_save_at.is_some());
    let prompt = s.get_prompt(counted.attached_prompt_id.expect("the pending prompt was attached")).unwrap();
    assert_eq!(
        (prompt.session_id.as_str(), prompt.content.as_str()),
        (saved.session_id.as_str(), "why does checkout time out?")
    );
    assert_eq!(s.session_activity("s").unwrap().saves, 1, "the counts are stored, not only answered");
    // The same prompt is attached once.
    let (_, again) = s.save_counted(&NewObservation { title: "Second".into(), ..new.clone() }, &session).unwrap();
    assert_eq!(again.unwrap().attached_prompt_id, None);
}

#[test]
fn a_save_counted_in_an_unknown_session_is_saved_and_a_failed_save_counts_nothing() {
    use crate::memory::NewObservation;
    let (mut s, _clock) = store_with_clock();
    let new =
        NewObservation { title: "t".into(), content: "c".into(), project: Some("shop".into()), ..Default::default() };
    let nobody = SaveActivity { session_id: "never-opened".into(), attach_prompt: true };
    let (saved, counted) = s.save_counted(&new, &nobody).unwrap();
    assert!(counted.is_none());
    assert!(s.get(saved.id).is_ok(), "activity never fails a save");
    // A save refused (a session of another project) leaves the counts as they were.
    s.record_activity(&record("s", ActivityEvent::ToolCall { remind: false })).unwrap();
    let wrong = NewObservation { session_id: Some("s".into()), project: Some("elsewhere".into()), ..new };
    let err = s.save_counted(&wrong, &SaveActivity { session_id: "s".into(), attach_prompt: true }).unwrap_err();
    assert_eq!(err.code, crate::error::ErrorCode::SessionProjectMismatch);
    assert_eq!(s.session_activity("s").unwrap().saves, 0);
}

/// A rule the developer states in a prompt, or a suggestion they turn down, is a memory at once,
/// in their words, with no model (`triggers.save_rules`); the same rule again, a pasted document
/// of rules, or the setting off save nothing.
#[test]
fn a_rule_stated_in_a_prompt_is_saved_at_once_without_a_model() {
    let (mut s, _clock) = core_with_clock();
    let prompt = |content: &str| {
        Op::from_value(serde_json::json!({"op": "user_prompt", "args": {
            "session_id": "oc-rules", "project": "Shop", "directory": "/w", "content": content
        }}))
        .unwrap()
    };
    let said = "Thanks, that works. From now on tests never bind fixed ports in this repo. \
                <private>my token is hunter2</private> Why is CI slow?";
    let answer = execute(&mut s, prompt(said)).unwrap();
    let saved: Vec<i64> = serde_json::from_value(answer["rules_saved"].clone()).unwrap();
    assert_eq!(saved.len(), 1, "{answer}");
    let memory = s.store.get(saved[0]).unwrap();
    assert_eq!(memory.content, "From now on tests never bind fixed ports in this repo.");
    assert_eq!((memory.kind.as_str(), memory.project.as_str()), ("preference", "shop"));
    let provenance = s.store.provenance(saved[0]).unwrap().expect("marked as taken from the conversation");
    assert_eq!(provenance.origin, crate::extract::Origin::Directive);
    assert_eq!((provenance.session_id.as_deref(), provenance.provider.as_str()), (Some("oc-rules"), ""));

    // Said again in other words of the same rule: nothing new. A prompt with no rule: nothing.
    let again = execute(&mut s, prompt("From now on, tests never bind fixed ports in this repo!")).unwrap();
    assert!(again.get("rules_saved").is_none(), "{again}");
    assert!(
        execute(&mut s, prompt("The build always fails on CI, can you look?")).unwrap().get("rules_saved").is_none()
    );

    // A pasted style guide states many rules: left to the extraction, which reads them in context.
    let guide = "Always use tabs for indentation in every source file here. Never commit secrets or tokens \
                 to the repository at all. Always run the linter and the tests before you push. Never push \
                 to the main branch directly without a review. Always squash merge a feature branch into main.";
    assert!(execute(&mut s, prompt(guide)).unwrap().get("rules_saved").is_none());

    // A suggestion the developer turns down is a decision, saved the same way.
    let refused = "Dad asked if I'd make it for iPhone. No. Nobody at the club has one, and the \
                   developer fee is more than the subs. Anyway, can you fix the login?";
    let answer = execute(&mut s, prompt(refused)).unwrap();
    let saved: Vec<i64> = serde_json::from_value(answer["rules_saved"].clone()).unwrap();
    assert_eq!(saved.len(), 1, "{answer}");
    let memory = s.store.get(saved[0]).unwrap();
    assert_eq!(
        memory.content,
        "Dad asked if I'd make it for iPhone. No. Nobody at the club has one, and the developer fee is more \
         than the subs."
    );
    assert_eq!(memory.kind, "decision");
    let provenance = s.store.provenance(saved[0]).unwrap().expect("marked as taken from the conversation");
    assert_eq!(provenance.origin, crate::extract::Origin::Refusal);

    // With `triggers.save_rules = false`, a rule is only a prompt.
    let mut settings = crate::settings::RuleSettings::default();
    settings.plugin.triggers.save_rules = false;
    let mut s = s.with_settings(std::sync::Arc::new(settings));
    let off = execute(&mut s, prompt("Going forward we always deploy from the release branch.")).unwrap();
    assert!(off.get("rules_saved").is_none(), "{off}");
    assert!(off["prompt_id"].as_i64().is_some(), "the prompt itself is kept");
}

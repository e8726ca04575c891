//! The extraction pipeline end to end in-process: an archived conversation, a scripted model,
//! the memories saved with their provenance; the cooldown, dedupe, summaries, the brief,
//! failures retried with backoff, and a restart that resumes from the mark.

use std::sync::Arc;

use cairn_llm::extract::FollowUp;
use cairn_llm::scripted::{Ask, ScriptedProvider};
use cairn_llm::{ChatRequest, LlmError};
use serde_json::json;
use time::Duration;

use super::*;
use crate::clock::Clock;
use crate::history::model::*;
use crate::history::store::SourceRef;
use crate::memory::NewObservation;
use crate::search::SearchQuery;
use crate::testutil::{ManualClock, store_with_clock};

const SESSION: &str = "ses_extract";
const PROJECT: &str = "shop";

/// A conversation of `turns` turns (a user message and an answer each) archived at `at`.
fn archive(core: &mut Core, session: &str, turns: usize, at: &str, directory: Option<&str>) {
    let said: Vec<(HistoryRole, String)> = (0..turns)
        .flat_map(|turn| {
            [
                (
                    HistoryRole::User,
                    format!(
                        "Question {turn}: why does the checkout test fail? <private>hunter2</private> key AKIAABCDEFGHIJKLMNOP"
                    ),
                ),
                (HistoryRole::Assistant, format!("Answer {turn}: the fixture pinned an old tax table.")),
            ]
        })
        .collect();
    archive_said(core, session, &said, at, directory);
}

/// A conversation of the messages `said`, in order, archived at `at`.
fn archive_said(core: &mut Core, session: &str, said: &[(HistoryRole, String)], at: &str, directory: Option<&str>) {
    let mut batch = IngestBatch {
        sessions: vec![HistorySession {
            id: session.into(),
            host: HistoryHost::OpenCode,
            project: Some(PROJECT.into()),
            directory: directory.map(Into::into),
            parent_id: None,
            title: None,
            agent: None,
            model: None,
            created_at: at.into(),
            updated_at: at.into(),
        }],
        ..IngestBatch::default()
    };
    for (seq, (role, text)) in said.iter().enumerate() {
        let seq = seq as i64;
        let message = HistoryMessage::new(session, &format!("msg_{seq:03}"), *role, seq, at);
        batch.parts.push(HistoryPart {
            text: Some(text.clone()),
            ..HistoryPart::new(session, &message.id, &format!("prt_{seq:03}"), 0, PartKind::Text)
        });
        batch.messages.push(message);
    }
    let source = SourceRef { key: format!("opencode.db#{session}"), host: HistoryHost::OpenCode };
    let cursor = core.history.db().unwrap().cursor(&source.key).unwrap();
    let next = Cursor { offset: 0, size: 0, mtime_ms: 1 + said.len() as i64, watermark: None };
    core.history.db().unwrap().apply(&source, cursor.as_ref(), &batch, &next).unwrap();
}

/// A core with extraction on since now, and its clock.
fn core() -> (Core, Arc<ManualClock>) {
    let (mut store, clock) = store_with_clock();
    store.start_extraction().unwrap();
    (Core::new(store), clock)
}

fn now(clock: &ManualClock) -> String {
    format_ts(clock.now())
}

/// Facts answered for every window: one per message it was shown, citing it; the follow-up
/// questions find nothing more.
/// Summaries say how many were written before them: the first is "Fixed the tax table fixture.".
fn facts_script(content: &'static str) -> ScriptedProvider {
    let summaries = std::sync::atomic::AtomicUsize::new(0);
    ScriptedProvider::new(move |ask, _| match ask {
        Ask::Facts => Ok(json!({"facts": [{"type": "bugfix", "title": "Checkout test fixture", "content": content,
            "message_ids": ["m1", "m2"]}]})
        .to_string()),
        Ask::FollowUp(_) => Ok(r#"{"facts": []}"#.into()),
        Ask::Summary => {
            let n = summaries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let text = if n == 0 { "Fixed the tax table fixture.".to_owned() } else { format!("Summary {n}.") };
            Ok(json!({"title": "Fixing checkout", "summary": text}).to_string())
        }
        Ask::Brief => Ok(r#"{"title": "shop: a web shop", "content": "A web shop in Rust."}"#.into()),
        Ask::Other => Err(LlmError::Malformed("unexpected".into())),
    })
}

const FACT: &str =
    "The checkout test failed because its fixture pinned an old tax table; regenerating the fixture fixed it.";

fn pass(core: &mut Core, provider: &ScriptedProvider, selection: &Selection) -> ExtractionReport {
    run_pass(core, provider, selection, &ExtractionPolicy::default(), &|| false).unwrap()
}

fn user_text(request: &ChatRequest) -> &str {
    &request.messages[1].content
}

#[test]
fn an_idle_conversation_becomes_facts_with_provenance_found_by_search() {
    let (mut core, clock) = core();
    archive(&mut core, SESSION, 1, &now(&clock), None);
    let provider = facts_script(FACT);

    let report = pass(&mut core, &provider, &Selection::Due);
    assert_eq!(report, ExtractionReport::default(), "not idle yet: the cooldown runs");
    assert!(provider.requests().is_empty());

    clock.advance(Duration::seconds(16));
    let report = pass(&mut core, &provider, &Selection::Due);
    assert_eq!((report.sessions, report.facts_saved, report.failures), (1, 1, 0));
    let sent = user_text(&provider.asked(Ask::Facts)[0]).to_owned();
    assert!(sent.contains("[m1] user: Question 0"), "{sent}");
    assert!(!sent.contains("hunter2") && !sent.contains("AKIAABCDEFGHIJKLMNOP"), "redacted before sending: {sent}");

    let hits = core.search(&SearchQuery { text: "tax table fixture".into(), ..SearchQuery::default() }).unwrap().hits;
    assert_eq!(hits.len(), 1);
    let memory = &hits[0].observation;
    assert_eq!(
        (memory.session_id.as_str(), memory.project.as_str(), memory.kind.as_str()),
        (SESSION, PROJECT, "bugfix")
    );
    let provenance = core.store.provenance(memory.id).unwrap().expect("marked as extracted");
    assert_eq!(provenance.origin, Origin::Fact);
    assert_eq!(provenance.session_id.as_deref(), Some(SESSION));
    assert_eq!(provenance.message_ids, ["msg_000", "msg_001"]);
    assert_eq!((provenance.provider.as_str(), provenance.model.as_str()), ("scripted", "scripted-1"));

    let again = pass(&mut core, &provider, &Selection::Due);
    assert_eq!(again.sessions, 0, "nothing new after the mark");
    let status = core.store.extraction_status().unwrap();
    assert_eq!((status.sessions, status.facts_saved, status.extracted_memories), (1, 1, 1));

    // A soft-deleted memory keeps its provenance row but is no longer counted as live.
    core.store.delete(memory.id, false).unwrap();
    let status = core.store.extraction_status().unwrap();
    assert_eq!((status.facts_saved, status.extracted_memories), (1, 0));
}

#[test]
fn a_fact_already_stored_saves_nothing() {
    let (mut core, clock) = core();
    core.store
        .save(&NewObservation {
            title: "Checkout fixture".into(),
            content: "Regenerating the fixture fixed the checkout test: its tax table was old.".into(),
            project: Some(PROJECT.into()),
            ..NewObservation::default()
        })
        .unwrap();
    archive(&mut core, SESSION, 1, &now(&clock), None);
    clock.advance(Duration::seconds(20));
    let near = "The checkout test fixture had an old tax table; regenerating the fixture fixed the test.";
    let report = pass(&mut core, &facts_script(near), &Selection::Due);
    assert_eq!((report.facts_saved, report.duplicates_skipped), (0, 1), "what the agent saved already says it");
    let listed = core.store.list(&crate::memory::ListFilter { limit: 10, ..Default::default() }).unwrap();
    assert_eq!(listed.len(), 1);
}

#[test]
fn a_summary_every_five_turns_and_at_the_end() {
    let (mut core, clock) = core();
    archive(&mut core, SESSION, 4, &now(&clock), None);
    clock.advance(Duration::seconds(20));
    let provider = facts_script(FACT);
    assert_eq!(pass(&mut core, &provider, &Selection::Due).summaries, 0, "4 turns: not yet");

    archive(&mut core, SESSION, 5, &now(&clock), None);
    clock.advance(Duration::seconds(20));
    let report = pass(&mut core, &provider, &Selection::Due);
    assert_eq!(report.summaries, 1, "the fifth turn");
    // The model's summary, then the developer's opening request in their own words, redacted.
    let summary = core.store.extracted_summary(SESSION).unwrap().unwrap();
    assert_eq!(
        summary,
        "Fixed the tax table fixture.\n\nAsked: Question 0: why does the checkout test fail? [REDACTED] key \
         [REDACTED:aws-access-key]"
    );
    let status = core.store.extraction_status().unwrap();
    assert_eq!(status.facts_saved, 1, "the summary is not a fact saved (one fact, deduped across windows)");
    assert_eq!(status.extracted_memories, 2, "the fact and the summary");
    let asked = provider.asked(Ask::Summary);
    assert!(user_text(&asked[0]).contains("Question 0") && user_text(&asked[0]).contains("Question 4"));

    archive(&mut core, SESSION, 6, &now(&clock), None);
    clock.advance(Duration::seconds(20));
    assert_eq!(pass(&mut core, &provider, &Selection::Due).summaries, 0, "one turn since the summary");
    clock.advance(ExtractionPolicy::default().ended_after);
    let report = pass(&mut core, &provider, &Selection::Due);
    assert_eq!((report.sessions, report.summaries), (1, 1), "the conversation ended: its last turn summarised");
    let last = user_text(&provider.asked(Ask::Summary)[1]).to_owned();
    // The model revises its own summary: the request line is the store's, kept as it was.
    assert!(last.starts_with("Previous summary:\nFixed the tax table fixture.\n\nMessages since:"), "{last}");
    assert!(last.contains("Question 5") && !last.contains("Question 4"), "{last}");
    let revised = core.store.extracted_summary(SESSION).unwrap().unwrap();
    assert!(revised.starts_with("Summary 1.\n\nAsked: Question 0: why does"), "revised: {revised}");
    assert_eq!(pass(&mut core, &provider, &Selection::Due).sessions, 0, "summarised once");
}

#[test]
fn the_first_conversation_of_a_project_writes_its_brief_from_the_readme() {
    let (mut core, clock) = core();
    let repo = tempfile::tempdir().unwrap();
    std::fs::write(repo.path().join("README.md"), "# shop\nA web shop. <private>internal</private>").unwrap();
    std::fs::write(repo.path().join("Cargo.toml"), "[package]\nname = \"shop\"").unwrap();
    let dir = repo.path().display().to_string();
    archive(&mut core, SESSION, 1, &now(&clock), Some(&dir));
    archive(&mut core, "ses_second", 1, &now(&clock), Some(&dir));
    clock.advance(Duration::seconds(20));
    let provider = facts_script(FACT);
    let report = pass(&mut core, &provider, &Selection::Due);
    assert_eq!(report.briefs, 1, "one brief for the project, not one per conversation");
    let asked = provider.asked(Ask::Brief);
    assert_eq!(asked.len(), 1);
    let sent = user_text(&asked[0]);
    assert!(sent.contains("=== README.md ===\n# shop") && sent.contains("=== Cargo.toml ==="), "{sent}");
    assert!(!sent.contains("internal"), "redacted: {sent}");
    assert!(core.store.has_brief(PROJECT).unwrap());
}

#[test]
fn a_malformed_answer_is_retried_with_backoff_and_saves_nothing() {
    let (mut core, clock) = core();
    archive(&mut core, SESSION, 1, &now(&clock), None);
    clock.advance(Duration::seconds(20));
    let broken = ScriptedProvider::new(|_, _| Ok("Sorry, I can't do that.".into()));
    let report = pass(&mut core, &broken, &Selection::Due);
    assert_eq!((report.facts_saved, report.failures), (0, 1));
    assert_eq!(report.failed[0].code, "llm_unavailable");
    let asked = broken.asked(Ask::Facts);
    let temperatures: Vec<f32> = asked.iter().map(|r| r.temperature).collect();
    assert_eq!(temperatures, [0.0, 0.7], "greedy first, then once more sampled, then it counts as failed");
    let status = core.store.extraction_status().unwrap();
    assert_eq!(status.failing.len(), 1);
    assert_eq!(status.failing[0].attempts, 1);
    assert_eq!(
        status.failing[0].next_attempt_at.as_deref(),
        Some(format_ts(clock.now() + Duration::seconds(30)).as_str())
    );
    assert!(core.store.list(&crate::memory::ListFilter { limit: 10, ..Default::default() }).unwrap().is_empty());

    assert_eq!(pass(&mut core, &broken, &Selection::Due).sessions, 0, "waiting out the backoff");
    clock.advance(Duration::seconds(31));
    pass(&mut core, &broken, &Selection::Due);
    let failing = &core.store.extraction_status().unwrap().failing[0];
    assert_eq!(failing.attempts, 2);
    assert_eq!(
        failing.next_attempt_at.as_deref(),
        Some(format_ts(clock.now() + Duration::seconds(60)).as_str()),
        "doubled"
    );

    let report = pass(&mut core, &facts_script(FACT), &Selection::Session(SESSION.into()));
    assert_eq!(report.facts_saved, 1, "asked for by name: no waiting");
    assert!(core.store.extraction_status().unwrap().failing.is_empty(), "the failure is cleared");
}

#[test]
fn an_unusable_greedy_answer_is_asked_again_sampled_and_its_facts_are_kept() {
    let (mut core, clock) = core();
    archive(&mut core, SESSION, 1, &now(&clock), None);
    clock.advance(Duration::seconds(20));
    // The greedy answer copies the format line and runs to the cap; the sampled one is good.
    let looping = ScriptedProvider::new(|ask, request| match (ask, request.temperature > 0.0) {
        (Ask::Facts, false) => {
            Ok(r#"{"facts": [{"type": "decision|bugfix", "title": "at most 10 words", "content": "The the the"#.into())
        }
        (Ask::Facts, true) => Ok(json!({"facts": [{"type": "bugfix", "content": FACT}]}).to_string()),
        (_, _) => facts_script(FACT).chat(request).map(|reply| reply.text),
    });
    let report = pass(&mut core, &looping, &Selection::Due);
    assert_eq!((report.facts_saved, report.failures), (1, 0), "{report:?}");
    assert!(core.store.extraction_status().unwrap().failing.is_empty());
    let hits = core.search(&SearchQuery { text: "tax table fixture".into(), ..SearchQuery::default() }).unwrap().hits;
    assert_eq!(hits.len(), 1, "the sampled answer's fact, saved once");
}

#[test]
fn a_restart_resumes_from_the_mark_after_a_failed_window() {
    let data = tempfile::tempdir().unwrap();
    let path = data.path().join("cairn.db");
    let clock = Arc::new(ManualClock::at(1_780_000_000));
    let open = || {
        let mut store = Store::open(&path).unwrap();
        store.set_clock(clock.clone());
        Core::new(store)
    };
    let mut core = open();
    core.store.start_extraction().unwrap();
    archive(&mut core, SESSION, 6, &now(&clock), None);
    clock.advance(Duration::seconds(20));
    // Small windows: the six turns go in several; the model fails from the second on.
    let policy = ExtractionPolicy { window_bytes: 300, ..ExtractionPolicy::default() };
    let windows_asked = std::sync::atomic::AtomicUsize::new(0);
    let flaky = ScriptedProvider::new(move |ask, request| {
        let first_window = match ask {
            Ask::Facts => windows_asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0,
            _ => windows_asked.load(std::sync::atomic::Ordering::SeqCst) == 1,
        };
        match ask {
            Ask::Facts if first_window => {
                let said = &request.messages[1].content;
                let first = said.lines().next().unwrap_or_default().to_owned();
                Ok(json!({"facts": [{"type": "discovery", "content": format!("First window fact: {first}")}]})
                    .to_string())
            }
            Ask::FollowUp(_) if first_window => Ok(r#"{"facts": []}"#.into()),
            _ => Err(LlmError::Unavailable("connection refused".into())),
        }
    });
    let report = run_pass(&mut core, &flaky, &Selection::Due, &policy, &|| false).unwrap();
    assert_eq!((report.facts_saved, report.failures), (1, 1), "the first window is saved whole");
    let first_windows = flaky.asked(Ask::Facts).len();
    assert_eq!(first_windows, 2);
    drop(core);

    let mut core = open();
    clock.advance(Duration::minutes(2));
    let recorder = facts_script(FACT);
    run_pass(&mut core, &recorder, &Selection::Due, &policy, &|| false).unwrap();
    let resumed = recorder.asked(Ask::Facts);
    assert!(!user_text(&resumed[0]).contains("Question 0:"), "the saved window is not sent again");
    let failed_window = user_text(&flaky.asked(Ask::Facts)[1]).to_owned();
    assert_eq!(user_text(&resumed[0]), failed_window, "it resumes with the window that failed");
}

#[test]
fn a_rule_the_developer_states_is_saved_in_their_words_without_the_model() {
    let (mut core, clock) = core();
    let rule = "Tests never bind fixed ports in this repo.";
    let said = [
        (HistoryRole::User, "The ingest tests fail on CI with 'Address already in use'.".to_owned()),
        (HistoryRole::Assistant, "Both bind port 9411; I bound port 0 and read the real port back.".to_owned()),
        (HistoryRole::User, format!("Thanks. {rule} <private>my token is hunter2</private>")),
        (HistoryRole::Assistant, "Noted.".to_owned()),
    ];
    archive_said(&mut core, SESSION, &said, &now(&clock), None);
    clock.advance(Duration::seconds(20));
    // The model restates the rule word for word, and finds the bug; its follow-ups find no more.
    let provider = ScriptedProvider::new(move |ask, _| {
        if ask != Ask::Facts {
            return Ok(r#"{"facts": []}"#.into());
        }
        Ok(json!({"facts": [
            {"type": "preference", "content": rule, "message_ids": ["m3"]},
            {"type": "bugfix", "content": "The ingest tests bound port 9411 and clashed on CI; they bind port 0 now.", "message_ids": ["m1", "m2"]},
        ]})
        .to_string())
    });
    let report = pass(&mut core, &provider, &Selection::Due);
    assert_eq!((report.facts_saved, report.duplicates_skipped), (2, 1), "the model's copy of the rule adds nothing");

    let hits = core.search(&SearchQuery { text: "fixed ports".into(), ..SearchQuery::default() }).unwrap().hits;
    let saved = &hits[0].observation;
    assert_eq!((saved.content.as_str(), saved.kind.as_str()), (rule, "preference"), "the private tail is not in it");
    let provenance = core.store.provenance(saved.id).unwrap().expect("marked as extracted");
    assert_eq!(provenance.origin, Origin::Directive);
    assert_eq!(provenance.message_ids, ["msg_002"]);
}

#[test]
fn a_value_the_developer_set_is_saved_as_the_reply_confirmed_it_without_the_model() {
    let (mut core, clock) = core();
    let said = [
        (HistoryRole::User, "How long do we keep the export files?".to_owned()),
        (HistoryRole::Assistant, "EXPORT_RETENTION_DAYS in jobs/cleanup.py is 7.".to_owned()),
        (HistoryRole::User, "Accounts need a month. Make it 30.".to_owned()),
        (HistoryRole::Assistant, "EXPORT_RETENTION_DAYS is 30 now; the cleanup job runs at 02:00.".to_owned()),
        (HistoryRole::User, "Perfect, thanks.".to_owned()),
    ];
    archive_said(&mut core, SESSION, &said, &now(&clock), None);
    clock.advance(Duration::seconds(20));
    // The model misses the setting, as a small one does with a three-word answer.
    let provider = ScriptedProvider::new(|_, _| Ok(r#"{"facts": []}"#.into()));
    let report = pass(&mut core, &provider, &Selection::Due);
    assert_eq!(report.facts_saved, 1);

    let hits = core.search(&SearchQuery { text: "export retention".into(), ..SearchQuery::default() }).unwrap().hits;
    let saved = &hits[0].observation;
    let confirmed = "EXPORT_RETENTION_DAYS is 30 now; the cleanup job runs at 02:00.";
    assert_eq!((saved.content.as_str(), saved.kind.as_str()), (confirmed, "config"));
    let provenance = core.store.provenance(saved.id).unwrap().expect("marked as extracted");
    assert_eq!(provenance.origin, Origin::Setting);
    assert_eq!(provenance.message_ids, ["msg_002", "msg_003"], "the developer's message and the reply");
}

#[test]
fn a_suggestion_the_developer_turned_down_is_saved_as_a_decision_without_the_model() {
    let (mut core, clock) = core();
    let said = [
        (HistoryRole::User, "Receipts print fine now.".to_owned()),
        (HistoryRole::Assistant, "Good, the printer queue is empty.".to_owned()),
        (
            HistoryRole::User,
            "Kieran keeps on at me to put Stripe on the shop so people can pay online. No. Every piece is a \
             one-off and people want to see it before they pay. Thanks!"
                .to_owned(),
        ),
    ];
    archive_said(&mut core, SESSION, &said, &now(&clock), None);
    clock.advance(Duration::seconds(20));
    let provider = ScriptedProvider::new(|_, _| Ok(r#"{"facts": []}"#.into()));
    let report = pass(&mut core, &provider, &Selection::Due);
    assert_eq!(report.facts_saved, 1);

    let hits = core.search(&SearchQuery { text: "stripe".into(), ..SearchQuery::default() }).unwrap().hits;
    let saved = &hits[0].observation;
    let turned_down = "Kieran keeps on at me to put Stripe on the shop so people can pay online. No. Every piece is a \
                       one-off and people want to see it before they pay.";
    assert_eq!((saved.content.as_str(), saved.kind.as_str()), (turned_down, "decision"));
    let provenance = core.store.provenance(saved.id).unwrap().expect("marked as extracted");
    assert_eq!(provenance.origin, Origin::Refusal);
    assert_eq!(provenance.message_ids, ["msg_002"], "the developer's message");
}

#[test]
fn the_follow_up_questions_add_what_the_facts_missed_and_an_unusable_answer_costs_nothing() {
    let (mut core, clock) = core();
    archive(&mut core, SESSION, 1, &now(&clock), None);
    clock.advance(Duration::seconds(20));
    let settings_asked = std::sync::atomic::AtomicUsize::new(0);
    let provider = ScriptedProvider::new(move |ask, _| match ask {
        // The facts miss the bug; the bug's question finds it.
        Ask::Facts => Ok(r#"{"facts": []}"#.into()),
        Ask::FollowUp(FollowUp::Bug) => {
            Ok(json!({"facts": [{"type": "bugfix", "content": FACT, "message_ids": ["m1", "m2"]}]}).to_string())
        }
        // The settings' question is answered in prose twice (greedy, then sampled).
        Ask::FollowUp(FollowUp::Settings) => {
            settings_asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok("The settings are fine.".into())
        }
        _ => Ok(r#"{"title": "t", "summary": "s"}"#.into()),
    });
    let report = pass(&mut core, &provider, &Selection::Due);
    assert_eq!((report.facts_saved, report.failures), (1, 0), "the window is not failed by a follow-up's prose");
    let asked = provider.asked(Ask::FollowUp(FollowUp::Settings));
    assert_eq!(asked.len(), 2, "asked again, sampled, then given up");
    assert!(asked[1].temperature > 0.0);
    let bug = provider.asked(Ask::FollowUp(FollowUp::Bug));
    let facts = provider.asked(Ask::Facts);
    assert!(user_text(&bug[0]).starts_with(user_text(&facts[0])), "the same transcript, the question after it");

    // A model that is down during a follow-up fails the window, to be asked again later.
    let (mut core, clock) = self::core();
    archive(&mut core, SESSION, 1, &now(&clock), None);
    clock.advance(Duration::seconds(20));
    let down_after_facts = ScriptedProvider::new(|ask, _| match ask {
        Ask::Facts => Ok(json!({"facts": [{"type": "bugfix", "content": FACT}]}).to_string()),
        _ => Err(LlmError::Unavailable("connection refused".into())),
    });
    let report = pass(&mut core, &down_after_facts, &Selection::Due);
    assert_eq!((report.facts_saved, report.failures), (0, 1), "nothing half-saved");
}

#[test]
fn a_fact_that_says_its_plan_is_put_off_is_not_saved() {
    let (mut core, clock) = core();
    archive(&mut core, SESSION, 1, &now(&clock), None);
    clock.advance(Duration::seconds(20));
    // Seen from the local model on the holdout split: the developer's own "forget it" and a
    // postponed wish, copied as a decision and a rule.
    let provider = ScriptedProvider::new(|ask, _| match ask {
        Ask::Facts => Ok(json!({"facts": [
            {"type": "decision", "content": "Forget it, not this quarter.", "message_ids": ["m1"]},
            {"type": "bugfix", "content": FACT, "message_ids": ["m1", "m2"]},
        ]})
        .to_string()),
        Ask::FollowUp(FollowUp::Settings) => Ok(json!({"facts": [
            {"type": "preference", "content": "Molecule tests for every role at some point, but not this sprint."},
        ]})
        .to_string()),
        _ => Ok(r#"{"facts": []}"#.into()),
    });
    let report = pass(&mut core, &provider, &Selection::Due);
    assert_eq!((report.facts_saved, report.failures), (1, 0), "{report:?}");
    let found = |text: &str| -> Vec<String> {
        let hits = core.search(&SearchQuery { text: text.into(), ..SearchQuery::default() }).unwrap().hits;
        hits.into_iter().map(|h| h.observation.content).collect()
    };
    assert_eq!(found("tax table"), [FACT]);
    assert!(found("quarter").is_empty() && found("Molecule").is_empty());
}

#[test]
fn a_request_line_is_the_prose_of_the_first_message_on_one_line_cut_at_a_word() {
    let said = "The HUD label turns to garbage\nafter the ninth find.\n```\nfn main() {}\n```\nAny idea?";
    assert_eq!(request_line(said).as_deref(), Some("The HUD label turns to garbage after the ninth find. Any idea?"));
    let long = "word ".repeat(100);
    let line = request_line(&long).unwrap();
    assert!(line.len() <= MAX_REQUEST_BYTES + '…'.len_utf8() && line.ends_with("word…"), "{line}");
    assert_eq!(request_line("```\nonly code\n```"), None, "no prose, no line");
    assert_eq!(without_request_line("Fixed it.\n\nAsked: why?"), "Fixed it.");
    assert_eq!(without_request_line("Fixed it."), "Fixed it.");
}

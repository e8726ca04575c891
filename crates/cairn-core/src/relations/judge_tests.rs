use std::sync::Arc;

use cairn_llm::LlmError;
use cairn_llm::judge::is_judge_request;
use cairn_llm::scripted::ScriptedProvider;
use serde_json::json;
use time::Duration;

use super::*;
use crate::error::ErrorCode;
use crate::relations::{Comparison, Judgment, RelationFilter, ScanRequest};
use crate::search::SearchQuery;
use crate::sync::Mutation;
use crate::testutil::{core_with_clock, obs};

const DAY: Duration = Duration::days(1);

/// The user's case of issue 42: four decisions on the product cache key, then a fifth that
/// replaces them in other words.
fn cache_key_decisions(core: &mut Core, clock: &crate::testutil::ManualClock) -> Vec<Observation> {
    let texts = [
        ("Product cache key scheme", "Product cache keys are product:{id}."),
        ("Product cache key scheme: add locale", "Product cache keys are product:{id}:{locale}."),
        ("Product cache key scheme: add currency", "Product cache keys are product:{id}:{locale}:{currency}."),
        ("Product cache key scheme: version prefix", "Product cache keys are v2:product:{id}:{locale}:{currency}."),
        (
            "Catalogue entries cached by content hash",
            "We no longer build product cache keys from the id, locale and currency: an entry is keyed \
             by the sha256 of its rendered JSON, so any change invalidates it by itself.",
        ),
    ];
    let mut saved = Vec::new();
    for (title, content) in texts {
        let outcome = core.store.save(&obs("shop", title, content)).unwrap();
        saved.push(core.store.get(outcome.id).unwrap());
        clock.advance(DAY);
    }
    saved
}

/// A judge that says the newer memory of a pair replaces the older when the newer is the
/// fifth decision, and "related" otherwise.
fn fifth_supersedes() -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::new(|_, request| {
        assert!(is_judge_request(request));
        let user = &request.messages[1].content;
        let a = user.split("Memory B").next().unwrap_or_default();
        Ok(if a.contains("sha256") {
            r#"{"relation": "supersedes", "confidence": 0.9, "reason": "keys by content hash now"}"#.into()
        } else {
            r#"{"relation": "related", "confidence": 0.8, "reason": "same scheme, refined"}"#.into()
        })
    }))
}

fn relations(core: &Core) -> Vec<crate::model::Relation> {
    let page = core.store.list_relations(&RelationFilter { limit: Some(500), ..RelationFilter::default() }).unwrap();
    page.relations.iter().map(|r| core.store.get_relation(r.id).unwrap()).collect()
}

fn search_now(core: &Core) -> Vec<i64> {
    let q = SearchQuery { project: Some("shop".into()), ..SearchQuery::new("what cache key scheme do we use now") };
    core.search(&q).unwrap().hits.iter().map(|h| h.observation.id).collect()
}

#[test]
fn the_model_judges_arrivals_and_search_puts_the_replacement_first() {
    let (mut core, clock) = core_with_clock();
    let saved = cache_key_decisions(&mut core, &clock);
    let judge = fifth_supersedes();
    let report = run_arrivals(&mut core, Some(judge.as_ref()), &|| false).unwrap();
    assert_eq!(report.memories, 5, "{report:?}");
    assert!(report.judged >= 1 && report.errors == 0, "{report:?}");
    let fifth = &saved[4];
    let supersedes: Vec<_> =
        relations(&core).into_iter().filter(|r| r.relation == "supersedes" && r.source_id == fifth.sync_id).collect();
    assert!(!supersedes.is_empty(), "{:?}", relations(&core));
    let r = &supersedes[0];
    assert_eq!(
        (r.marked_by_kind.as_deref(), r.marked_by_model.as_deref(), r.confidence, r.judgment_status.as_str()),
        (Some("llm"), Some("scripted-1"), Some(0.9), "judged")
    );
    assert_eq!(r.reason.as_deref(), Some("keys by content hash now"));
    assert_eq!(search_now(&core)[0], fifth.id, "the current decision first");
    // Judged once: a second pass finds nothing new and asks nothing.
    let asked = judge.requests().len();
    assert_eq!(run_arrivals(&mut core, Some(judge.as_ref()), &|| false).unwrap(), JudgeReport::default());
    assert_eq!(judge.requests().len(), asked);
}

#[test]
fn what_reaches_the_model_is_redacted() {
    let (mut core, clock) = core_with_clock();
    core.store
        .save(&obs("shop", "Deploy key for the cache", "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 old"))
        .unwrap();
    clock.advance(DAY);
    core.store.save(&obs("shop", "Deploy key for the cache rotated", "new token, stored in the vault")).unwrap();
    let judge = fifth_supersedes();
    run_arrivals(&mut core, Some(judge.as_ref()), &|| false).unwrap();
    let sent: String = judge.requests().iter().map(|r| r.messages[1].content.clone()).collect();
    assert!(!sent.is_empty() && !sent.contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"), "{sent}");
}

#[test]
fn without_a_model_rules_judge_what_is_certain_and_the_rest_stays_pending() {
    let (mut core, clock) = core_with_clock();
    let first = core.store.save(&obs("shop", "Use Redis for sessions", "sessions live in Redis")).unwrap();
    // Past the dedupe window, the same memory saved again is a new row.
    clock.advance(DAY);
    let again = core.store.save(&obs("shop", "Use Redis for sessions", "sessions live in Redis")).unwrap();
    clock.advance(DAY);
    core.store.save(&obs("shop", "Use Redis for sessions and carts", "carts too")).unwrap();
    let report = run_arrivals(&mut core, None, &|| false).unwrap();
    assert!(report.judged == 1 && report.pending >= 1, "{report:?}");
    let all = relations(&core);
    let rule = all.iter().find(|r| r.judgment_status == "judged").unwrap();
    let (first, again) = (core.store.get(first.id).unwrap(), core.store.get(again.id).unwrap());
    assert_eq!((rule.source_id.as_str(), rule.target_id.as_str()), (again.sync_id.as_str(), first.sync_id.as_str()));
    assert_eq!((rule.relation.as_str(), rule.marked_by_kind.as_deref()), ("supersedes", Some("rule")));
    assert!(
        all.iter().filter(|r| r.judgment_status == "pending").all(|r| r.marked_by_kind.as_deref() == Some("system"))
    );
}

#[test]
fn a_memory_pulled_by_sync_with_a_known_topic_key_is_its_revision() {
    let (mut core, _) = core_with_clock();
    let mut local = obs("p", "Deploy target", "we deploy to Fly.io");
    local.topic_key = Some("deploy/target".into());
    let local = core.store.save(&local).unwrap();
    let pulled = Mutation {
        seq: 0,
        project: "p".into(),
        entity: "observation".into(),
        entity_key: "obs-remote".into(),
        op: "upsert".into(),
        payload: json!({
            "sync_id": "obs-remote", "session_id": "s1", "type": "decision", "title": "Deploy target",
            "content": "we deploy to Hetzner now", "project": "p", "scope": "project", "topic_key": "deploy/target",
            "created_at": "2099-01-01T00:00:00.000Z", "updated_at": "2099-01-01T00:00:00.000Z"
        }),
    };
    core.store.apply_mutations("hub", &[pulled]).unwrap();
    let report = run_arrivals(&mut core, None, &|| false).unwrap();
    assert_eq!(report.judged, 1, "{report:?}");
    let local = core.store.get(local.id).unwrap();
    assert_eq!(core.store.current_of(std::slice::from_ref(&local.sync_id)).unwrap().len(), 1);
}

#[test]
fn a_judge_that_is_down_or_talks_nonsense_leaves_pairs_pending() {
    for (name, answer) in [
        ("down", Err(LlmError::Unavailable("connection refused".into()))),
        ("nonsense", Ok("I would say they are kind of the same?".to_owned())),
        ("unknown relation", Ok(r#"{"relation": "replaces-ish", "confidence": 0.99}"#.to_owned())),
    ] {
        let (mut core, clock) = core_with_clock();
        cache_key_decisions(&mut core, &clock);
        let answer = std::sync::Mutex::new(Some(answer));
        let judge = ScriptedProvider::new(move |_, _| match answer.lock().unwrap().as_ref().unwrap() {
            Ok(text) => Ok(text.clone()),
            Err(_) => Err(LlmError::Unavailable("connection refused".into())),
        });
        let report = run_arrivals(&mut core, Some(&judge), &|| false).unwrap();
        assert!(report.errors >= 1 && report.judged == 0, "{name}: {report:?}");
        let all = relations(&core);
        assert!(!all.is_empty() && all.iter().all(|r| r.judgment_status == "pending"), "{name}: {all:?}");
        if name == "down" {
            assert!(report.stopped.is_some() && judge.requests().len() == 1, "{name}: asked once, then not");
        }
    }
}

#[test]
fn a_doubtful_model_leaves_the_pair_pending_and_is_not_asked_again() {
    let (mut core, clock) = core_with_clock();
    cache_key_decisions(&mut core, &clock);
    let judge =
        ScriptedProvider::new(|_, _| Ok(r#"{"relation": "supersedes", "confidence": 0.3, "reason": "?"}"#.into()));
    let report = run_arrivals(&mut core, Some(&judge), &|| false).unwrap();
    assert!(report.judged == 0 && report.pending >= 1, "{report:?}");
    let all = relations(&core);
    assert!(
        all.iter().all(|r| ["pending", "ignored"].contains(&r.judgment_status.as_str())
            && r.marked_by_kind.as_deref() == Some("llm")),
        "{all:?}"
    );
    let asked = judge.requests().len();
    let scan = ScanRequest { project: "shop".into(), semantic: true, apply: true, ..ScanRequest::default() };
    let result = run_scan(&mut core, &judge, &scan, &mut |_, _| {}).unwrap();
    assert_eq!((result.semantic_judged, judge.requests().len()), (0, asked), "{result:?}");
}

#[test]
fn a_supersession_cycle_is_refused_with_its_code() {
    let (mut core, _) = core_with_clock();
    let ids: Vec<i64> = ["A", "B", "C"]
        .iter()
        .map(|t| core.store.save(&obs("p", &format!("Decision {t}"), &format!("text {t}"))).unwrap().id)
        .collect();
    let compare = |a: i64, b: i64| Comparison {
        memory_id_a: a,
        memory_id_b: b,
        relation: "supersedes".into(),
        confidence: 0.9,
        reasoning: "newer".into(),
        model: None,
    };
    core.store.compare(&compare(ids[0], ids[1])).unwrap();
    core.store.compare(&compare(ids[1], ids[2])).unwrap();
    let longer = core.store.compare(&compare(ids[2], ids[0]));
    assert_eq!(longer.unwrap_err().code, ErrorCode::SupersessionCycle, "A > B > C, so C > A is a cycle");
    // Another row on a judged pair (another actor's), judged the other way through mem_judge.
    let (a, b, c) = (core.store.get(ids[0]).unwrap(), core.store.get(ids[1]).unwrap(), core.store.get(ids[2]).unwrap());
    let pair = Pair { newer: b.clone(), older: a.clone(), strong: true };
    assert_eq!(core.store.record_judgments(&[(pair, PairOutcome::Pending)], None).unwrap(), 1);
    let rel = relations(&core).into_iter().find(|r| r.judgment_status == "pending").unwrap();
    let judged =
        core.store.judge(&Judgment { judgment_id: rel.sync_id, relation: "supersedes".into(), ..Judgment::default() });
    assert_eq!(judged.unwrap_err().code, ErrorCode::SupersessionCycle, "B > A while A > B");
    // And the judge's own verdicts: a cycle it would close is left pending.
    let verdict = Verdict {
        relation: "supersedes".into(),
        confidence: 0.9,
        reason: "r".into(),
        kind: JudgeKind::Llm,
        model: Some("m".into()),
    };
    let pair = Pair { newer: c, older: a, strong: true };
    core.store.record_judgments(&[(pair, PairOutcome::Judged(verdict))], None).unwrap();
    assert!(relations(&core).iter().filter(|r| r.judgment_status == "judged").count() == 2);
}

#[test]
fn deleting_the_replacement_makes_the_replaced_memory_current_again() {
    let (mut core, clock) = core_with_clock();
    let saved = cache_key_decisions(&mut core, &clock);
    run_arrivals(&mut core, Some(fifth_supersedes().as_ref()), &|| false).unwrap();
    let fourth = &saved[3];
    let replaced = core.store.superseded_ids(&[fourth.id]).unwrap();
    assert_eq!(replaced.get(&fourth.id), Some(&saved[4].id));
    let notes = core.store.relation_annotations(std::slice::from_ref(&fourth.sync_id)).unwrap();
    assert!(notes[&fourth.sync_id].iter().any(|n| n.starts_with(&format!("superseded_by: #{}", saved[4].id))));
    core.store.delete(saved[4].id, false).unwrap();
    assert!(core.store.superseded_ids(&[fourth.id]).unwrap().is_empty());
    let notes = core.store.relation_annotations(std::slice::from_ref(&fourth.sync_id)).unwrap();
    assert!(notes.get(&fourth.sync_id).is_none_or(|n| n.iter().all(|l| !l.starts_with("superseded_by"))), "{notes:?}");
    assert!(!search_now(&core).contains(&saved[4].id));
}

#[test]
fn verdicts_from_two_machines_on_one_pair_are_both_kept() {
    let (mut core, clock) = core_with_clock();
    let saved = cache_key_decisions(&mut core, &clock);
    run_arrivals(&mut core, Some(fifth_supersedes().as_ref()), &|| false).unwrap();
    let (fifth, fourth) = (&saved[4], &saved[3]);
    let before = relations(&core).len();
    let theirs = Mutation {
        seq: 0,
        project: "shop".into(),
        entity: "relation".into(),
        entity_key: "rel-other-machine".into(),
        op: "upsert".into(),
        payload: json!({
            "sync_id": "rel-other-machine", "source_id": fifth.sync_id, "target_id": fourth.sync_id,
            "relation": "compatible", "judgment_status": "judged", "marked_by_actor": "cairn",
            "marked_by_kind": "llm", "marked_by_model": "other-model", "confidence": 0.7, "project": "shop",
            "created_at": "2099-01-01T00:00:00.000Z", "updated_at": "2099-01-01T00:00:00.000Z"
        }),
    };
    core.store.apply_mutations("hub", &[theirs]).unwrap();
    let all = relations(&core);
    assert_eq!(all.len(), before + 1);
    let on_pair: Vec<_> = all
        .iter()
        .filter(|r| r.source_id == fifth.sync_id && r.target_id == fourth.sync_id && r.judgment_status == "judged")
        .collect();
    assert_eq!(on_pair.len(), 2, "{on_pair:?}");
}

#[test]
fn a_semantic_scan_judges_old_pairs_in_batches_and_a_dry_run_records_nothing() {
    let (mut core, clock) = core_with_clock();
    let saved = cache_key_decisions(&mut core, &clock);
    // The memories were there before judging existed: the mark is past them.
    let through = saved.last().map(|o| o.id);
    core.store.record_judgments(&[], through).unwrap();
    let judge = fifth_supersedes();
    let dry = ScanRequest { project: "shop".into(), semantic: true, max_semantic: Some(2), ..ScanRequest::default() };
    let mut seen = Vec::new();
    let first = run_scan(&mut core, judge.as_ref(), &dry, &mut |done, of| seen.push((done, of))).unwrap();
    assert!(first.dry_run && first.semantic_judged + first.semantic_skipped == 2, "{first:?}");
    assert_eq!(seen.last().map(|s| s.0), Some(2));
    assert!(relations(&core).is_empty(), "a dry run records nothing");
    assert_eq!(first.next_offset, 2);
    let mut offset = 0;
    let mut judged = 0;
    loop {
        let req = ScanRequest { apply: true, offset: Some(offset), ..dry.clone() };
        let r = run_scan(&mut core, judge.as_ref(), &req, &mut |_, _| {}).unwrap();
        judged += r.semantic_judged;
        offset = r.next_offset;
        if r.semantic_remaining == 0 {
            break;
        }
    }
    assert_eq!(judged, first.candidates_found, "every pair judged once");
    assert_eq!(search_now(&core)[0], saved[4].id);
}

#[test]
fn the_block_never_shows_a_replaced_decision_as_current() {
    let (mut core, clock) = core_with_clock();
    let mut typed = Vec::new();
    for (title, content) in [("ORM: Diesel", "we use Diesel for the database"), ("ORM: SeaORM", "we moved to SeaORM")] {
        let mut o = obs("shop", title, content);
        o.kind = Some("architecture".into());
        typed.push(core.store.save(&o).unwrap().id);
        clock.advance(DAY);
    }
    let compare = Comparison {
        memory_id_a: typed[1],
        memory_id_b: typed[0],
        relation: "supersedes".into(),
        confidence: 0.9,
        reasoning: "moved".into(),
        model: None,
    };
    core.store.compare(&compare).unwrap();
    let req = crate::context::ContextRequest {
        project: Some("shop".into()),
        layout: crate::context::ContextLayout::MemoryBlock,
        query: Some("which ORM do we use now".into()),
        similarity_threshold: Some(0.0),
        ..crate::context::ContextRequest::default()
    };
    let block = core.context(&req).unwrap().context;
    let architecture = block.split("## Architecture").nth(1).unwrap_or_default().split("\n## ").next().unwrap();
    assert!(architecture.contains("SeaORM") && !architecture.contains("Diesel"), "{block}");
    if let Some(relevant) = block.split("## Relevant to Current Task").nth(1) {
        for line in relevant.lines().filter(|l| l.contains("Diesel")) {
            assert!(line.contains(&format!("superseded_by: #{}", typed[1])), "{block}");
        }
    }
    let recent = core.context(&crate::context::ContextRequest { project: Some("shop".into()), ..Default::default() });
    let recent = recent.unwrap().context;
    let (seaorm, diesel) = (recent.find("SeaORM").unwrap(), recent.find("Diesel").unwrap());
    assert!(seaorm < diesel && recent.contains(&format!("superseded_by: #{}", typed[1])), "{recent}");
}

use time::Duration;

use crate::memory::NewObservation;
use crate::search::{MatchKind, SearchQuery};
use crate::testutil::{engine_store, obs};
use crate::text::Scope;

fn titles(s: &crate::Core, q: &SearchQuery) -> Vec<String> {
    s.search(q).unwrap().hits.into_iter().map(|h| h.observation.title).collect()
}

fn natural_question_finds_memory_sharing_some_words(indexed: bool) {
    let (mut s, _) = engine_store(indexed);
    s.store
        .save(&obs(
            "app",
            "Flaky login test on CI",
            "The login e2e test failed randomly because the session cookie expired; we fixed it by freezing time.",
        ))
        .unwrap();
    s.store.save(&obs("app", "Redis timeouts", "Raised the pool size to 50")).unwrap();
    let q =
        SearchQuery { project: Some("app".into()), ..SearchQuery::new("how did we fix the flaky login test on CI?") };
    assert_eq!(titles(&s, &q).first().map(String::as_str), Some("Flaky login test on CI"));
}

fn stemming_more_and_rarer_matches_win(indexed: bool) {
    let (mut s, _) = engine_store(indexed);
    s.store.save(&obs("p", "Caching notes", "we cache responses")).unwrap();
    s.store
        .save(&obs("p", "Cached responses for the pricing endpoint", "pricing endpoint responses are cached for 60s"))
        .unwrap();
    let got = titles(&s, &SearchQuery::new("caching pricing responses"));
    assert_eq!(got[0], "Cached responses for the pricing endpoint");
    assert_eq!(got.len(), 2, "porter stemming: caching ~ cache ~ cached");
}

fn title_matches_outweigh_content_matches(indexed: bool) {
    let (mut s, _) = engine_store(indexed);
    s.store.save(&obs("p", "Notes", "something about migrations and more text here")).unwrap();
    s.store.save(&obs("p", "Migrations", "how we run them")).unwrap();
    assert_eq!(titles(&s, &SearchQuery::new("migrations"))[0], "Migrations");
}

fn ties_broken_by_recency(indexed: bool) {
    let (mut s, clock) = engine_store(indexed);
    s.store.save(&obs("p", "Alpha", "deploy steps")).unwrap();
    clock.advance(Duration::minutes(1));
    s.store.save(&obs("p", "Beta", "deploy steps")).unwrap();
    assert_eq!(titles(&s, &SearchQuery::new("deploy")), vec!["Beta", "Alpha"]);
}

fn phrase_and_prefix(indexed: bool) {
    let (mut s, _) = engine_store(indexed);
    s.store.save(&obs("p", "A", "connection pool exhausted under load")).unwrap();
    s.store.save(&obs("p", "B", "pool of connection objects")).unwrap();
    assert_eq!(titles(&s, &SearchQuery::new("\"connection pool\"")), vec!["A"]);
    assert_eq!(titles(&s, &SearchQuery::new("exhaust*")), vec!["A"]);
}

fn exact_topic_key_first(indexed: bool) {
    let (mut s, _) = engine_store(indexed);
    let mut t = obs("p", "Auth architecture", "JWT in cookies");
    t.topic_key = Some("architecture/auth".into());
    s.store.save(&t).unwrap();
    s.store.save(&obs("p", "architecture auth notes", "architecture auth architecture auth")).unwrap();
    let hits = s.search(&SearchQuery::new("architecture/auth")).unwrap().hits;
    assert_eq!(hits[0].matched, MatchKind::TopicKey);
    assert_eq!(hits[0].observation.title, "Auth architecture");
    assert_eq!(hits.iter().filter(|h| h.observation.title == "Auth architecture").count(), 1);
}

fn filters_project_type_scope_and_personal_follows_user(indexed: bool) {
    let (mut s, _) = engine_store(indexed);
    s.store.save(&obs("a", "tabs a", "indent with tabs")).unwrap();
    s.store.save(&obs("b", "tabs b", "indent with tabs")).unwrap();
    let mut personal = obs("b", "tabs personal", "I prefer tabs everywhere");
    personal.scope = Some("personal".into());
    personal.kind = Some("preference".into());
    s.store.save(&personal).unwrap();
    let mut in_a = titles(&s, &SearchQuery { project: Some("A".into()), ..SearchQuery::new("tabs") });
    in_a.sort();
    assert_eq!(in_a, vec!["tabs a", "tabs personal"]);
    let all = SearchQuery { project: Some("a".into()), all_projects: true, ..SearchQuery::new("tabs") };
    assert_eq!(titles(&s, &all).len(), 3);
    let prefs = SearchQuery { kind: Some("preference".into()), ..SearchQuery::new("tabs") };
    assert_eq!(titles(&s, &prefs), vec!["tabs personal"]);
    let scoped = SearchQuery { scope: Some(Scope::Project), ..SearchQuery::new("tabs") };
    assert_eq!(titles(&s, &scoped).len(), 2);
}

fn empty_elsewhere_says_so(indexed: bool) {
    let (mut s, _) = engine_store(indexed);
    s.store.save(&obs("other", "kafka consumer lag", "lag")).unwrap();
    let res = s.search(&SearchQuery { project: Some("mine".into()), ..SearchQuery::new("kafka") }).unwrap();
    assert!(res.hits.is_empty());
    assert!(res.notices[0].contains("other projects"), "{:?}", res.notices);
}

fn bad_queries(indexed: bool) {
    let (mut s, _) = engine_store(indexed);
    s.store.save(&obs("p", "x", "y")).unwrap();
    assert_eq!(s.search(&SearchQuery::new("  ")).unwrap_err().code, crate::ErrorCode::EmptyField);
    let punct = s.search(&SearchQuery::new("?!?! ...")).unwrap();
    assert!(punct.hits.is_empty() && !punct.notices.is_empty());
    let huge = "word ".repeat(20_000);
    assert!(s.search(&SearchQuery::new(huge)).is_ok());
    let syntax = s.search(&SearchQuery::new("NEAR(x y) AND \"unclosed title:y")).unwrap();
    assert!(!syntax.hits.is_empty());
}

fn revised_topic_returns_latest_content_only(indexed: bool) {
    let (mut s, clock) = engine_store(indexed);
    let mut v1 = NewObservation {
        topic_key: Some("config/node".into()),
        ..obs("p", "Node version", "We use Node 18 everywhere")
    };
    s.store.save(&v1).unwrap();
    clock.advance(Duration::minutes(3));
    v1.content = "We upgraded to Node 20 because 18 is end of life".into();
    s.store.save(&v1).unwrap();
    let hits = s.search(&SearchQuery::new("which node version do we use")).unwrap().hits;
    assert_eq!(hits.len(), 1);
    assert!(hits[0].observation.content.contains("Node 20"));
    assert!(s.search(&SearchQuery::new("\"node 18 everywhere\"")).unwrap().hits.is_empty());
}

fn snippets_highlight_and_limit_caps(indexed: bool) {
    let (mut s, _) = engine_store(indexed);
    for i in 0..120 {
        s.store.save(&obs("p", &format!("memo {i}"), "shared token appears")).unwrap();
    }
    let hits = s.search(&SearchQuery { limit: 500, ..SearchQuery::new("token") }).unwrap().hits;
    assert_eq!(hits.len(), 100);
    assert!(hits[0].snippet.contains("**token**"), "{}", hits[0].snippet);
    assert_eq!(s.search(&SearchQuery::new("token")).unwrap().hits.len(), 10);
}

fn prompt_search(indexed: bool) {
    let (mut s, _) = engine_store(indexed);
    s.store
        .add_prompt(&crate::prompts::NewPrompt {
            content: "please refactor the billing module".into(),
            project: Some("p".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(s.store.search_prompts("billing refactoring", Some("p"), 5).unwrap().len(), 1);
    assert!(s.store.search_prompts("billing", Some("q"), 5).unwrap().is_empty());
}

/// Every search rule holds for both engines: FTS5 (CLI, no daemon) and the daemon's index.
macro_rules! on_both_engines {
    ($($name:ident),* $(,)?) => {
        mod fts5 {
            $( #[test] fn $name() { super::$name(false) } )*
        }
        mod index {
            $( #[test] fn $name() { super::$name(true) } )*
        }
    };
}

on_both_engines!(
    natural_question_finds_memory_sharing_some_words,
    stemming_more_and_rarer_matches_win,
    title_matches_outweigh_content_matches,
    ties_broken_by_recency,
    phrase_and_prefix,
    exact_topic_key_first,
    filters_project_type_scope_and_personal_follows_user,
    empty_elsewhere_says_so,
    bad_queries,
    revised_topic_returns_latest_content_only,
    snippets_highlight_and_limit_caps,
    prompt_search
);

//! Semantic and hybrid search through `Core::search`, with a small concept embedder: words of
//! one concept (car, automobile, vehicle) share a dimension, so "meaning" is known exactly and
//! a test can tell semantic matches from lexical ones.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use cairn_embed::{EmbedError, Embedder};

use crate::memory::{NewObservation, ObservationPatch};
use crate::search::semantic::Semantic;
use crate::search::{MatchKind, SearchMode, SearchQuery};
use crate::testutil::{core_with_clock, obs};
use crate::{Core, ErrorCode};

const CONCEPTS: &[&[&str]] = &[
    &["car", "automobile", "vehicle", "cars"],
    &["database", "postgres", "sql", "db"],
    &["crash", "panic", "segfault", "crashed"],
    &["deploy", "release", "ship", "rollout"],
    &["login", "signin", "authentication", "auth"],
];

#[derive(Default)]
struct ConceptEmbedder {
    calls: AtomicUsize,
    failing: AtomicBool,
}

impl Embedder for ConceptEmbedder {
    fn model_id(&self) -> &'static str {
        "test:concepts"
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.failing.load(Ordering::Relaxed) {
            return Err(EmbedError::Endpoint("connection refused".into()));
        }
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0f32; CONCEPTS.len() + 1];
                for word in t.to_lowercase().split(|c: char| !c.is_alphanumeric()) {
                    match CONCEPTS.iter().position(|c| c.contains(&word)) {
                        Some(dim) => v[dim] += 1.0,
                        None if !word.is_empty() => v[CONCEPTS.len()] += 0.05,
                        None => {}
                    }
                }
                cairn_embed::normalise(&mut v);
                v
            })
            .collect())
    }
}

fn semantic_store() -> (Core, Arc<ConceptEmbedder>) {
    let (core, _) = core_with_clock();
    let embedder = Arc::new(ConceptEmbedder::default());
    let core = core.with_semantic(Some(Semantic::new(embedder.clone())));
    core.load_vectors().unwrap();
    (core, embedder)
}

fn embed_all(store: &mut Core) {
    while store.embed_pending(8).unwrap() > 0 {}
}

fn search(store: &Core, text: &str, mode: Option<SearchMode>) -> crate::search::SearchResults {
    store.search(&SearchQuery { mode, all_projects: true, ..SearchQuery::new(text) }).unwrap()
}

fn titles(results: &crate::search::SearchResults) -> Vec<&str> {
    results.hits.iter().map(|h| h.observation.title.as_str()).collect()
}

#[test]
fn semantic_search_finds_a_memory_sharing_no_word_with_the_query() {
    let (mut s, _) = semantic_store();
    s.store.save(&obs("p", "Automobile registry", "we keep one row per vehicle")).unwrap();
    s.store.save(&obs("p", "Release checklist", "tag, ship, announce")).unwrap();
    embed_all(&mut s);
    let lexical = search(&s, "car", Some(SearchMode::Lexical));
    assert!(lexical.hits.is_empty(), "no shared word: {:?}", titles(&lexical));
    let semantic = search(&s, "car", Some(SearchMode::Semantic));
    assert_eq!(titles(&semantic), vec!["Automobile registry"]);
    assert_eq!(semantic.mode, SearchMode::Semantic);
    assert_eq!(semantic.hits[0].matched, MatchKind::Semantic);
    assert!(semantic.hits[0].scores.semantic.unwrap() > 0.9);
    let hybrid = search(&s, "car", None);
    assert_eq!(hybrid.mode, SearchMode::Hybrid, "hybrid is the default when vectors exist");
    assert_eq!(titles(&hybrid), vec!["Automobile registry"]);
}

#[test]
fn hybrid_ranks_a_memory_both_rankings_find_first_and_reports_both_scores() {
    let (mut s, _) = semantic_store();
    s.store.save(&obs("p", "Postgres failover", "the database crashed during failover")).unwrap();
    s.store.save(&obs("p", "Crash notes", "the app panicked on start")).unwrap();
    s.store.save(&obs("p", "Database sizing", "postgres needs 8 GB")).unwrap();
    embed_all(&mut s);
    let hybrid = search(&s, "database crash", None);
    assert_eq!(hybrid.hits[0].observation.title, "Postgres failover");
    let top = &hybrid.hits[0];
    assert_eq!(top.matched, MatchKind::Hybrid);
    assert!(top.scores.lexical.is_some() && top.scores.semantic.is_some());
    assert!(hybrid.hits.windows(2).all(|w| w[0].scores.fused >= w[1].scores.fused));
    // The re-ranking model was fitted on another model's cosines: with this embedder the
    // order and the scores are the fusion's (at most first place in both rankings).
    let first_in_both = 2.0 / (crate::search::fusion::RRF_K + 1.0);
    assert!((top.scores.fused - first_in_both).abs() < 1e-9, "{:?}", top.scores);
}

#[test]
fn a_when_question_marks_the_pool_memories_that_say_when() {
    use crate::search::rerank::{FEATURES, NAMES};
    let time_answer = NAMES.iter().position(|n| *n == "time_answer").expect("the feature is named");
    assert_eq!(time_answer, FEATURES - 1);
    let (mut s, _) = semantic_store();
    let dated = s.store.save(&obs("p", "Deploy", "we did the rollout of the database last week")).unwrap().id;
    let undated = s.store.save(&obs("p", "Deploy notes", "the database rollout needs a flag")).unwrap().id;
    embed_all(&mut s);
    let marks = |text: &str| -> Vec<(i64, f64)> {
        let query = SearchQuery { text: text.into(), project: Some("p".into()), ..SearchQuery::default() };
        let mut pool: Vec<(i64, f64)> =
            s.rerank_pool(&query).unwrap().into_iter().map(|(id, c)| (id, c.features[time_answer])).collect();
        pool.sort_by_key(|(id, _)| *id);
        pool
    };
    assert_eq!(marks("when did the database rollout happen?"), vec![(dated, 1.0), (undated, 0.0)]);
    assert_eq!(marks("how does the database rollout work?"), vec![(dated, 0.0), (undated, 0.0)], "not a when question");
}

#[test]
fn without_a_model_search_is_lexical_and_says_so_only_when_asked() {
    let (mut s, _) = core_with_clock();
    s.store.save(&obs("p", "Car parking", "level 2")).unwrap();
    let quiet = search(&s, "car", None);
    assert_eq!((quiet.mode, quiet.notices.len(), quiet.hits.len()), (SearchMode::Lexical, 0, 1));
    let asked = search(&s, "car", Some(SearchMode::Hybrid));
    assert_eq!(asked.mode, SearchMode::Lexical);
    assert_eq!(asked.hits.len(), 1, "lexical results still come back");
    assert!(asked.notices[0].contains("cairn model install"), "{:?}", asked.notices);
    assert_eq!(s.stats().unwrap().embeddings_pending, 0);
    assert!(s.stats().unwrap().semantic_search.starts_with("off"));
}

#[test]
fn a_failing_embedder_falls_back_to_lexical_and_pauses() {
    let (mut s, embedder) = semantic_store();
    s.store.save(&obs("p", "Car parking", "level 2")).unwrap();
    embed_all(&mut s);
    embedder.failing.store(true, Ordering::Relaxed);
    let first = search(&s, "parking car", Some(SearchMode::Hybrid));
    assert_eq!(first.mode, SearchMode::Lexical);
    assert_eq!(first.hits.len(), 1);
    assert!(first.notices[0].contains("connection refused"), "{:?}", first.notices);
    let calls = embedder.calls.load(Ordering::Relaxed);
    let second = search(&s, "level", Some(SearchMode::Hybrid));
    assert_eq!(second.mode, SearchMode::Lexical);
    assert_eq!(embedder.calls.load(Ordering::Relaxed), calls, "paused: the dead embedder is not asked again");
    s.store.save(&obs("p", "Another car", "level 3")).unwrap();
    assert_eq!(s.embed_pending(8).unwrap_err().code, ErrorCode::EmbedderUnavailable);
    assert_eq!(s.stats().unwrap().embeddings_pending, 1, "nothing is lost: it waits for the embedder");
}

#[test]
fn a_revised_topic_ranks_by_its_current_text_only() {
    let (mut s, _) = semantic_store();
    let topic = |content: &str| NewObservation { topic_key: Some("infra/db".into()), ..obs("p", "Datastore", content) };
    let first = s.store.save(&topic("we run postgres")).unwrap();
    embed_all(&mut s);
    assert_eq!(titles(&search(&s, "sql", Some(SearchMode::Semantic))), vec!["Datastore"]);
    let revised = s.store.save(&topic("we moved everything to the automobile fleet service")).unwrap();
    assert_eq!(revised.id, first.id);
    assert_eq!(s.stats().unwrap().embeddings_pending, 1, "the old vector went with the old text");
    embed_all(&mut s);
    assert!(search(&s, "sql", Some(SearchMode::Semantic)).hits.is_empty(), "superseded text does not match");
    let now = search(&s, "vehicle", Some(SearchMode::Semantic));
    assert_eq!(titles(&now), vec!["Datastore"]);
    assert!(now.hits[0].observation.content.contains("automobile"));
}

#[test]
fn a_vector_computed_for_old_text_is_not_stored() {
    let (mut s, embedder) = semantic_store();
    let saved = s.store.save(&obs("p", "Car", "parking")).unwrap();
    let pending = s.store.pending_embeddings("test:concepts", 10).unwrap();
    let vectors = embedder.embed(&[pending[0].text().as_str()]).unwrap();
    s.store
        .update(saved.id, &ObservationPatch { content: Some("database".into()), ..ObservationPatch::default() })
        .unwrap();
    let stored = s.store.put_embeddings("test:concepts", &[(pending[0].clone(), vectors[0].clone())]).unwrap();
    assert!(stored.is_empty());
    assert_eq!(s.store.count_pending_embeddings("test:concepts").unwrap(), 1);
}

#[test]
fn filters_apply_to_semantic_hits_and_deleted_memories_vanish() {
    let (mut s, _) = semantic_store();
    s.store.save(&obs("alpha", "Automobile A", "x")).unwrap();
    let b = s.store.save(&obs("beta", "Automobile B", "y")).unwrap();
    let c = s.store.save(&obs("beta", "Vehicle C", "z")).unwrap();
    embed_all(&mut s);
    let q = SearchQuery { project: Some("beta".into()), mode: Some(SearchMode::Semantic), ..SearchQuery::new("car") };
    let mut got: Vec<i64> = s.search(&q).unwrap().hits.iter().map(|h| h.observation.id).collect();
    got.sort_unstable();
    assert_eq!(got, vec![b.id, c.id]);
    s.store.delete(c.id, false).unwrap();
    let after: Vec<i64> = s.search(&q).unwrap().hits.iter().map(|h| h.observation.id).collect();
    assert_eq!(after, vec![b.id]);
    assert_eq!(s.stats().unwrap().embeddings_stored, 2, "a deleted memory's vector is dropped");
}

#[test]
fn reindex_force_drops_vectors_and_pending_counts_them_again() {
    let (mut s, _) = semantic_store();
    for i in 0..5 {
        s.store.save(&obs("p", &format!("Car {i}"), "v")).unwrap();
    }
    assert_eq!(s.stats().unwrap().embeddings_pending, 5);
    embed_all(&mut s);
    let stats = s.stats().unwrap();
    assert_eq!((stats.embeddings_pending, stats.embeddings_stored), (0, 5));
    assert_eq!(stats.embedding_model.as_deref(), Some("test:concepts"));
    let report =
        crate::ops::execute_value(&mut s, crate::ops::Op::Reindex(crate::ops::ReindexRequest { force: true })).unwrap();
    assert_eq!((report["cleared"].as_u64(), report["pending"].as_i64()), (Some(5), Some(5)));
    assert!(search(&s, "automobile", Some(SearchMode::Semantic)).notices[0].contains("no memory has an embedding"));
}

#[test]
fn queries_of_only_punctuation_or_huge_size_do_not_fail() {
    let (mut s, _) = semantic_store();
    s.store.save(&obs("p", "Car", "x")).unwrap();
    embed_all(&mut s);
    assert!(search(&s, "?!…", None).hits.is_empty());
    let huge = "automobile ".repeat(10_000);
    assert_eq!(titles(&search(&s, &huge, None)), vec!["Car"]);
}

struct ShortEmbedder;

impl Embedder for ShortEmbedder {
    fn model_id(&self) -> &'static str {
        "test:short"
    }

    fn embed(&self, _texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(Vec::new())
    }
}

#[test]
fn an_embedder_that_answers_too_few_vectors_is_an_error_and_nothing_is_lost() {
    let (mut s, _) = core_with_clock();
    s.semantic = Some(Semantic::new(Arc::new(ShortEmbedder)));
    s.load_vectors().unwrap();
    s.store.save(&obs("p", "Car", "x")).unwrap();
    assert_eq!(s.embed_pending(8).unwrap_err().code, ErrorCode::EmbedderUnavailable);
    assert_eq!(s.store.count_pending_embeddings("test:short").unwrap(), 1);
}

fn in_session(session: &str, title: &str, content: &str) -> NewObservation {
    NewObservation { session_id: Some(session.into()), ..obs("p", title, content) }
}

#[test]
fn the_memory_saved_after_a_hit_in_its_session_is_found_as_context() {
    let (mut s, _) = semantic_store();
    // The reply shares no word and no concept with the question; only its place says it
    // answers it.
    s.store.save(&in_session("chat-1", "Tim", "how did the billing deploy go?")).unwrap();
    // Long enough to be embedded alone (a short one would carry the question in its vector).
    let long_reply = "smoothly, nobody noticed a thing. ".repeat(10);
    let reply = s.store.save(&in_session("chat-1", "John", &long_reply)).unwrap();
    s.store.save(&in_session("chat-2", "Ana", "lunch tomorrow at noon?")).unwrap();
    // The same exchange saved without a session: neighbours in the catch-all session are
    // not context.
    s.store.save(&obs("q", "Notes", "how did the invoice deploy go?")).unwrap();
    let unrelated = s.store.save(&obs("q", "Notes", "smoothly, nobody noticed a thing")).unwrap();
    embed_all(&mut s);
    let found = search(&s, "billing deploy", None);
    let hit = found.hits.iter().find(|h| h.observation.id == reply.id).expect("the reply is found");
    assert_eq!(hit.matched, MatchKind::Context);
    assert_eq!(found.hits[0].observation.title, "Tim");
    let found = search(&s, "invoice deploy", None);
    assert!(found.hits.iter().all(|h| h.observation.id != unrelated.id), "no context without a session");
    let found = search(&s, "billing deploy", Some(SearchMode::Lexical));
    assert!(found.hits.iter().all(|h| h.observation.id != reply.id), "lexical search alone has no context");
}

#[test]
fn each_pool_memory_knows_the_pool_memories_within_two_saves_in_its_session() {
    let (mut s, _) = semantic_store();
    let mut chat = Vec::new();
    let mut other = Vec::new();
    for turn in 0..5 {
        chat.push(s.store.save(&in_session("chat-1", "Tim", &format!("billing turn {turn}"))).unwrap().id);
        // Another session's turns between them: the distance is counted in the session's own
        // saves.
        if turn < 2 {
            other.push(s.store.save(&in_session("chat-2", "Ana", &format!("billing aside {turn}"))).unwrap().id);
        }
    }
    let loose = s.store.save(&obs("p", "Notes", "billing notes")).unwrap().id;
    embed_all(&mut s);
    let query = SearchQuery { text: "billing".into(), project: Some("p".into()), ..SearchQuery::default() };
    let pool = s.rerank_pool(&query).unwrap();
    let ids: Vec<i64> = pool.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids.len(), 8, "every memory is in the pool: {ids:?}");
    let near = |id: i64| -> Vec<i64> {
        let (_, c) = pool.iter().find(|(i, _)| *i == id).unwrap();
        let mut near: Vec<i64> = c.near.iter().map(|&place| ids[place]).collect();
        near.sort_unstable();
        near
    };
    assert_eq!(near(chat[0]), vec![chat[1], chat[2]]);
    assert_eq!(near(chat[2]), vec![chat[0], chat[1], chat[3], chat[4]]);
    assert_eq!(near(chat[4]), vec![chat[2], chat[3]]);
    assert_eq!(near(other[0]), vec![other[1]]);
    assert_eq!(near(loose), Vec::<i64>::new(), "a memory outside a session has no neighbours");
}

#[test]
fn a_short_memory_in_a_session_is_embedded_with_the_one_before_it() {
    let (mut s, _) = semantic_store();
    s.store.save(&in_session("chat-1", "Tim", "did the release of the billing service go well?")).unwrap();
    let reply = s.store.save(&in_session("chat-1", "John", "yes, nobody noticed a thing")).unwrap();
    // Without a session the memory before is no context; a long memory stands on its own.
    s.store.save(&obs("p", "Notes", "did the release of the invoice service go well?")).unwrap();
    let alone = s.store.save(&obs("p", "Notes", "yes, nobody noticed a thing")).unwrap();
    let long = "nobody noticed a thing ".repeat(20);
    s.store.save(&in_session("chat-2", "Tim", "did the rollout go well?")).unwrap();
    let long_reply = s.store.save(&in_session("chat-2", "John", &long)).unwrap();
    let pending = s.store.pending_embeddings("test:concepts", 10).unwrap();
    let context_of = |id| pending.iter().find(|p| p.id == id).map(|p| p.context.clone()).unwrap();
    assert_eq!(context_of(reply.id), "did the release of the billing service go well?");
    assert_eq!(context_of(alone.id), "");
    assert_eq!(context_of(long_reply.id), "");
    embed_all(&mut s);
    // The reply shares no word with the query, but its vector carries what it answers.
    let found = search(&s, "deploy", Some(SearchMode::Semantic));
    let ids: Vec<i64> = found.hits.iter().map(|h| h.observation.id).collect();
    assert!(ids.contains(&reply.id), "the short reply is found by meaning: {ids:?}");
    assert!(!ids.contains(&alone.id) && !ids.contains(&long_reply.id));
}

/// `min_score` cuts on the cosine (semantic), the re-ranker's relevance (hybrid) and BM25
/// relative to the best hit (lexical).
#[test]
fn min_score_applies_to_the_score_of_each_mode() {
    let (mut s, _) = semantic_store();
    s.store.save(&obs("p", "Postgres failover", "the database crashed during failover")).unwrap();
    s.store.save(&obs("p", "Crash notes", "the app panicked on start, a database crash")).unwrap();
    s.store.save(&obs("p", "Release checklist", "tag, ship, announce")).unwrap();
    embed_all(&mut s);
    let with = |mode, min| {
        let q = SearchQuery { min_score: min, mode, project: Some("p".into()), ..SearchQuery::new("database crash") };
        s.search(&q).unwrap()
    };
    for mode in [Some(SearchMode::Lexical), Some(SearchMode::Semantic), None] {
        let all = with(mode, None);
        assert!(all.hits.len() >= 2, "{mode:?}");
        let best = crate::search::best_lexical(&all.hits);
        let scores: Vec<f64> = all.hits.iter().map(|h| crate::search::relevance(h, all.mode, best)).collect();
        let carried: Vec<f64> = all.hits.iter().map(|h| h.relevance).collect();
        assert_eq!(carried, scores, "{mode:?}: each hit carries its relevance");
        for cut in [scores[0], f64::midpoint(scores[0], scores[scores.len() - 1]), (scores[0] + 0.01).min(1.0)] {
            let expected = scores.iter().filter(|&&x| x >= cut).count();
            let kept = with(mode, Some(cut));
            assert_eq!(kept.hits.len(), expected, "{mode:?} at {cut}: {scores:?}");
        }
    }
    assert_eq!(with(Some(SearchMode::Lexical), Some(1.0)).hits.len(), 1, "only the best lexical hit is 100 %");
    let q = SearchQuery { min_score: Some(-0.1), ..SearchQuery::new("x") };
    assert_eq!(s.search(&q).unwrap_err().code, crate::ErrorCode::InvalidArgument);
}

/// The `[MEMORY]` block's relevant section uses hybrid search: a memory that shares no word
/// with the user's message is found, shown with its relevance as a percentage.
#[test]
fn memory_block_finds_relevant_memories_by_meaning() {
    let (mut s, _) = semantic_store();
    s.store.save(&obs("p", "Automobile registry", "we keep one row per vehicle")).unwrap();
    s.store.save(&obs("p", "Release checklist", "tag, ship, announce")).unwrap();
    embed_all(&mut s);
    let req = crate::context::ContextRequest {
        project: Some("p".into()),
        layout: crate::context::ContextLayout::MemoryBlock,
        query: Some("car".into()),
        similarity_threshold: Some(0.0),
        max_profile: Some(0),
        ..Default::default()
    };
    let block = s.context(&req).unwrap().context;
    let line = block.lines().find(|l| l.contains("Automobile registry")).unwrap_or_else(|| panic!("{block}"));
    assert!(line.starts_with("- [") && line.contains("%, "), "{line}");
    let relevant = block.split("## Recent").next().unwrap_or_default();
    assert!(!relevant.contains("Release checklist"), "no shared meaning: {block}");
}

/// Records which texts were embedded as queries and which as passages.
#[derive(Default)]
struct PromptedEmbedder {
    inner: ConceptEmbedder,
    queries: std::sync::Mutex<Vec<String>>,
    passages: std::sync::Mutex<Vec<String>>,
}

impl Embedder for PromptedEmbedder {
    fn model_id(&self) -> &'static str {
        "test:prompted"
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.passages.lock().unwrap().extend(texts.iter().map(std::string::ToString::to_string));
        self.inner.embed(texts)
    }

    fn embed_queries(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.queries.lock().unwrap().extend(texts.iter().map(std::string::ToString::to_string));
        self.inner.embed(texts)
    }
}

#[test]
fn queries_are_embedded_as_queries_and_memories_as_passages() {
    let (mut s, _) = core_with_clock();
    let embedder = Arc::new(PromptedEmbedder::default());
    s.semantic = Some(Semantic::new(embedder.clone()));
    s.load_vectors().unwrap();
    s.store.save(&obs("p", "Automobile registry", "we keep one row per vehicle")).unwrap();
    embed_all(&mut s);
    assert!(embedder.queries.lock().unwrap().is_empty());
    assert_eq!(embedder.passages.lock().unwrap().len(), 1);
    let semantic = search(&s, "car", Some(SearchMode::Semantic));
    assert_eq!(titles(&semantic), vec!["Automobile registry"]);
    assert_eq!(*embedder.queries.lock().unwrap(), vec!["car".to_owned()]);
    assert_eq!(embedder.passages.lock().unwrap().len(), 1, "the query is not embedded as a passage");
}

/// A store of `n` memories over three projects and the personal scope, every fifth about cars,
/// embedded, searched through a current in-memory index.
fn indexed_semantic_store(n: usize) -> Core {
    let (mut s, _) = semantic_store();
    for i in 0..n {
        let project = ["alpha", "beta", "gamma"][i % 3];
        let (title, content) = if i % 5 == 0 { ("Automobile", "one row per vehicle") } else { ("Deploy", "ship it") };
        let mut memory = obs(project, &format!("{title} {i}"), content);
        if i % 17 == 0 {
            memory.scope = Some("personal".into());
        }
        s.store.save(&memory).unwrap();
    }
    embed_all(&mut s);
    let index = Arc::new(crate::index::SharedIndex::default());
    index.set(s.store.build_index().unwrap());
    s.with_index(index)
}

fn semantic_ids(s: &Core, project: &str, limit: usize) -> Vec<i64> {
    let q = SearchQuery {
        project: Some(project.into()),
        mode: Some(SearchMode::Semantic),
        limit,
        ..SearchQuery::new("car")
    };
    let mut ids: Vec<i64> = s.search(&q).unwrap().hits.iter().map(|h| h.observation.id).collect();
    ids.sort_unstable();
    ids
}

#[test]
fn semantic_hits_follow_a_move_and_a_delete_beside_the_index() {
    let mut s = indexed_semantic_store(600);
    // Exact mode: every vector is scored, so only the filter decides what is found.
    s.semantic.as_ref().unwrap().override_exact_scan();
    let moved = s.store.save(&obs("alpha", "Vehicle moved", "a car")).unwrap();
    embed_all(&mut s);
    s.store.update(moved.id, &ObservationPatch { project: Some("beta".into()), ..Default::default() }).unwrap();
    let gone = semantic_ids(&s, "beta", 50)[0];
    s.store.delete(gone, false).unwrap();
    let index = s.index.clone().unwrap();
    index.follow(s.store.conn()).unwrap();
    let through_index = semantic_ids(&s, "beta", 50);
    assert!(through_index.contains(&moved.id), "a memory moved into the project is found there");
    assert!(!through_index.contains(&gone), "a deleted memory is not");
    assert!(!semantic_ids(&s, "alpha", 50).contains(&moved.id), "nor in the project it left");
}

#[test]
fn a_project_filter_fills_the_page_from_a_shortlist_of_every_project() {
    // 1,500 memories, a third per project: the nearest of every project are shortlisted, so
    // the search must go deeper until enough pass the filter.
    let s = indexed_semantic_store(1_500);
    let ids = semantic_ids(&s, "gamma", 40);
    assert_eq!(ids.len(), 40, "the limit is filled from the project and the personal memories");
    for id in ids {
        let memory = s.store.get(id).unwrap();
        assert!(
            memory.project == "gamma" || memory.scope == crate::text::Scope::Personal,
            "{id} is of {} ({:?})",
            memory.project,
            memory.scope
        );
        assert!(memory.title.starts_with("Automobile"), "{id}: {}", memory.title);
    }
}

/// A hybrid search reads the semantic ranking's shortlist on the thread that embedded the
/// query (beside the lexical ranking): the engine uses a shortlist read ahead only when it was
/// read for the number of memories it fetches first, and then ranks exactly as when it reads
/// the shortlist itself. Enough memories that `Core::search` shares the scan with the lexical
/// thread (two of its parts in tests), as at a million.
#[test]
fn a_shortlist_read_ahead_ranks_as_one_read_in_place() {
    use crate::search::fusion::{self, HybridEngine, SemanticEngine};
    use crate::search::{IndexEngine, SearchEngine};
    let s = indexed_semantic_store(2_500);
    let semantic = s.semantic.clone().unwrap();
    let car = semantic.embed_query("car").unwrap();
    let deploy = semantic.embed_query("deploy").unwrap();
    let q = SearchQuery { all_projects: true, ..SearchQuery::new("car") };
    let depth = fusion::ranking_depth(q.effective_limit());
    let ids = |engine: &SemanticEngine| -> Vec<(i64, Option<f32>)> {
        engine.candidates(&s, &q, depth).unwrap().iter().map(|c| (c.id, c.scores.semantic)).collect()
    };
    let in_place = ids(&SemanticEngine::new(&car));
    assert_eq!(in_place.len(), depth);
    let ahead = semantic.shortlist(&car, fusion::first_fetch(depth));
    assert_eq!(ids(&SemanticEngine { vector: &car, ahead: Some(&ahead) }), in_place, "the same ranking");
    // Another query's shortlist, read for the same depth: used (so the ranking differs) ...
    let other = semantic.shortlist(&deploy, fusion::first_fetch(depth));
    assert_ne!(ids(&SemanticEngine { vector: &car, ahead: Some(&other) }), in_place, "a shortlist read ahead is used");
    // ... but not when read for another depth.
    let other = semantic.shortlist(&deploy, fusion::first_fetch(depth) + 1);
    assert_eq!(ids(&SemanticEngine { vector: &car, ahead: Some(&other) }), in_place, "only for its own depth");
    // Through `Core::search` (which reads it ahead): the hits of the engines without it.
    let hybrid = s.search(&q).unwrap();
    let without =
        s.search_with(&HybridEngine { lexical: &IndexEngine, semantic: SemanticEngine::new(&car) }, &q).unwrap();
    let hits = |r: &crate::search::SearchResults| -> Vec<(i64, u64)> {
        r.hits.iter().map(|h| (h.observation.id, h.scores.fused.to_bits())).collect()
    };
    assert_eq!(hybrid.mode, SearchMode::Hybrid);
    assert_eq!(hits(&hybrid), hits(&without));
}

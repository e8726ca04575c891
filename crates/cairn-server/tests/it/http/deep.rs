//! Deep recall through `GET /search?deep=true`: the model's order, marked (`scores.deep`) and
//! reported (`X-Cairn-Deep`: how long it took); without a model, with a nonsense answer or a
//! model slower than `deep_timeout_ms`, the first stage's order with a code, never an error.

use cairn_engine::deep::DeepPolicy;
use cairn_llm::rerank::is_rerank_request;
use cairn_llm::scripted::ScriptedProvider;
use cairn_llm::{LlmError, LlmProvider};

use super::*;

const QUESTION: &str = "/search?q=redis+pool&project=alpha&deep=true";

/// Four memories that all match the question's words; their ids, oldest first.
async fn four_memories(s: &Server) -> Vec<i64> {
    let mut ids = Vec::new();
    for (title, content) in [
        ("Redis pool size", "raised the redis pool to 50 connections"),
        ("Redis pool timeouts", "the redis pool waits 2 s for a connection"),
        ("Redis pool metrics", "redis pool usage is exported to Prometheus"),
        ("Why the redis pool was exhausted", "a leaked connection per failed request emptied the redis pool"),
    ] {
        ids.push(s.save(json!({"title": title, "content": content, "project": "alpha"})).await["id"].as_i64().unwrap());
    }
    ids
}

fn ids_of(hits: &Value) -> Vec<i64> {
    hits.as_array().unwrap().iter().map(|h| h["id"].as_i64().unwrap()).collect()
}

fn deep_header(reply: &Reply) -> Value {
    let raw = reply.headers.get("x-cairn-deep").expect("an X-Cairn-Deep header").to_str().unwrap();
    serde_json::from_str(raw).unwrap()
}

fn notices(reply: &Reply) -> String {
    reply
        .headers
        .get_all("x-cairn-notice")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A model that answers every re-ranking with `answer`.
fn answering(answer: &'static str) -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::new(move |_, request| {
        assert!(is_rerank_request(request), "only deep recall asks the model here");
        Ok(answer.to_owned())
    }))
}

#[tokio::test]
async fn the_model_order_answers_marked_and_timed() {
    let s = start().await;
    four_memories(&s).await;
    let first_stage = ids_of(&s.get("/search?q=redis+pool&project=alpha").await.expect(200));
    assert_eq!(first_stage.len(), 4);
    let model = answering(r#"{"ranking": [4, 2]}"#);
    s.engine.set_llm(Some(Arc::clone(&model) as Arc<dyn LlmProvider>));

    let reply = s.get(QUESTION).await;
    assert_eq!(reply.status, 200);
    let hits = reply.json();
    let expected = vec![first_stage[3], first_stage[1], first_stage[0], first_stage[2]];
    assert_eq!(ids_of(&hits), expected, "the named first, in the model's order, then the rest as they were");
    assert_eq!((hits[0]["scores"]["deep"].as_u64(), hits[1]["scores"]["deep"].as_u64()), (Some(1), Some(2)));
    assert!(hits[2]["scores"].get("deep").is_none(), "{hits:#}");
    let report = deep_header(&reply);
    assert_eq!((report["reranked"].as_bool(), report["candidates"].as_u64()), (Some(true), Some(4)), "{report}");
    assert!(report["llm_ms"].is_u64() && report.get("code").is_none(), "{report}");

    // What the model read: the question and each candidate, numbered.
    let asked = model.requests();
    assert_eq!(asked.len(), 1);
    let prompt = &asked[0].messages[1].content;
    assert!(prompt.starts_with("Question: redis pool") && prompt.contains("[4] "), "{prompt}");

    let mut shape = scrub(&json!({"hits": hits, "deep": report}));
    shape["deep"]["llm_ms"] = json!("[ms]");
    for hit in shape["hits"].as_array_mut().unwrap() {
        hit["scores"]["lexical"] = json!("[bm25]");
        hit["rank"] = json!("[rank]");
        hit["score"] = json!("[score]");
        hit["relevance"] = json!("[relevance]");
        hit["scores"]["fused"] = json!("[fused]");
    }
    insta::assert_json_snapshot!("deep_search", shape);

    // deep=false, or no deep at all (the default is off): the model is not asked.
    s.get("/search?q=redis+pool&project=alpha&deep=false").await.expect(200);
    let plain = s.get("/search?q=redis+pool&project=alpha").await;
    assert!(plain.headers.get("x-cairn-deep").is_none());
    assert_eq!(model.requests().len(), 1);
    s.get("/search?q=x&deep=maybe").await.expect_error(400, "invalid_argument");
}

#[tokio::test]
async fn no_model_nonsense_or_a_slow_model_answer_the_first_stage_order() {
    let s = start().await;
    four_memories(&s).await;
    let first_stage = ids_of(&s.get("/search?q=redis+pool&project=alpha").await.expect(200));

    let reply = s.get(QUESTION).await;
    assert_eq!(ids_of(&reply.json()), first_stage);
    assert_eq!(deep_header(&reply)["code"], "llm_not_configured");
    assert!(notices(&reply).contains("deep recall skipped (llm_not_configured)"), "{}", notices(&reply));

    for nonsense in ["I would pick the second one.", r#"{"ranking": [17, 0]}"#] {
        s.engine.set_llm(Some(answering(nonsense)));
        let reply = s.get(QUESTION).await;
        assert_eq!(ids_of(&reply.json()), first_stage, "{nonsense}");
        assert_eq!(deep_header(&reply)["code"], "llm_unavailable", "{nonsense}");
    }

    s.engine.set_llm(Some(Arc::new(ScriptedProvider::new(|_, _| Err(LlmError::Unavailable("down".into()))))));
    assert_eq!(deep_header(&s.get(QUESTION).await)["code"], "llm_unavailable");

    // Slower than the budget: the first stage answers; the model's late answer is dropped.
    s.engine.set_deep_policy(DeepPolicy { by_default: false, timeout: Duration::from_millis(100) });
    s.engine.set_llm(Some(Arc::new(ScriptedProvider::new(|_, _| {
        std::thread::sleep(Duration::from_secs(2));
        Ok(r#"{"ranking": [4, 3, 2, 1]}"#.into())
    }))));
    let reply = s.get(QUESTION).await;
    assert_eq!(ids_of(&reply.json()), first_stage);
    assert_eq!(deep_header(&reply)["code"], "llm_unavailable");
}

#[tokio::test]
async fn the_config_default_turns_deep_recall_on() {
    let s = start().await;
    four_memories(&s).await;
    s.engine.set_llm(Some(answering(r#"{"ranking": [2]}"#)));
    s.engine.set_deep_policy(DeepPolicy { by_default: true, ..DeepPolicy::default() });
    let reply = s.get("/search?q=redis+pool&project=alpha").await;
    assert_eq!(deep_header(&reply)["reranked"], true);
    assert!(s.get("/search?q=redis+pool&project=alpha&deep=false").await.headers.get("x-cairn-deep").is_none());
}

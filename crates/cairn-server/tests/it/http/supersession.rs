//! Issue 42's replaced decision through HTTP: four decisions on a cache key scheme, then a fifth
//! that replaces them in other words; "what cache key scheme do we use now" answers the fifth,
//! before any judge ran (the recency prior), and after the judge recorded `supersedes` (the
//! replaced one annotated, history kept; deleting the fifth makes the fourth current again).
//! The same through the web page's search (`/ui/search`, server-rendered).

use cairn_llm::judge::is_judge_request;
use cairn_llm::scripted::ScriptedProvider;

use super::*;

const QUESTION: &str = "/search?q=what+cache+key+scheme+do+we+use+now&project=shop";

/// The five decisions, each in its own session, oldest first; their ids.
async fn five_decisions(s: &Server) -> Vec<i64> {
    let texts = [
        ("Product cache key scheme", "Product cache keys are product:{id}."),
        ("Product cache key scheme: add locale", "Product cache keys are product:{id}:{locale}."),
        ("Product cache key scheme: add currency", "Product cache keys are product:{id}:{locale}:{currency}."),
        ("Product cache key scheme: version prefix", "Product cache keys are v2:product:{id}:{locale}:{currency}."),
        (
            "Catalogue entries cached by content hash",
            "We no longer build product cache keys from the id, locale and currency: an entry is keyed by the \
             sha256 of its rendered JSON, so any change invalidates it by itself.",
        ),
    ];
    let mut ids = Vec::new();
    for (i, (title, content)) in texts.into_iter().enumerate() {
        let session = format!("ses-cache-{i}");
        s.post("/sessions", &json!({"id": session, "project": "shop"})).await.expect(201);
        let body =
            json!({"session_id": session, "project": "shop", "type": "decision", "title": title, "content": content});
        ids.push(s.save(body).await["id"].as_i64().unwrap());
        // Saved on different milliseconds at least: "newest" is a fact, not a tie.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    ids
}

fn first_id(hits: &Value) -> i64 {
    hits[0]["id"].as_i64().unwrap_or_default()
}

/// Waits until `n` memories have their vectors. Not a time limit on anything measured: a guard
/// against a hang while the vectors come.
async fn all_embedded(s: &Server, n: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let stats = s.get("/stats").await.expect(200);
        if stats["embeddings_stored"] == n {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{stats:#}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The daemon's judge, a scripted model: the content-hash memory replaces each older one, the
/// others refine each other ("related"). Runs the judge over the arrivals now.
async fn judge_fifth_supersedes(s: &Server) {
    let judge = Arc::new(ScriptedProvider::new(|_, request| {
        assert!(is_judge_request(request));
        let newer = request.messages[1].content.split("Memory B").next().unwrap_or_default().to_owned();
        Ok(if newer.contains("sha256") {
            r#"{"relation": "supersedes", "confidence": 0.92, "reason": "keys by content hash now"}"#.into()
        } else {
            r#"{"relation": "related", "confidence": 0.8, "reason": "the same scheme, refined"}"#.into()
        })
    }));
    s.engine.set_llm(Some(judge));
    let engine = Arc::clone(&s.engine);
    let report = tokio::task::spawn_blocking(move || engine.judge_now()).await.unwrap().unwrap();
    assert!(report.judged >= 4 && report.errors == 0, "{report:?}");
}

/// The hits of `/ui/search`'s page, in order: each memory's id and the notes under it.
fn page_hits(html: &str) -> Vec<(i64, Vec<String>)> {
    let Some(list) = html.split("<ol class=\"results\">").nth(1) else { return Vec::new() };
    let list = list.split("</ol>").next().unwrap_or_default();
    list.split("<li>")
        .skip(1)
        .map(|item| {
            let id = item.split("href=\"/ui/memory/").nth(1).and_then(|r| r.split('"').next()).unwrap_or_default();
            let notes = item
                .split("<p class=\"note\">")
                .skip(1)
                .map(|n| n.split("</p>").next().unwrap_or_default().to_owned())
                .collect();
            (id.parse().unwrap_or_default(), notes)
        })
        .collect()
}

async fn web_search(s: &Server) -> (Vec<(i64, Vec<String>)>, String) {
    let reply = s.get(&QUESTION.replacen("/search", "/ui/search", 1)).await;
    let html = String::from_utf8_lossy(&reply.bytes).into_owned();
    assert_eq!(reply.status, 200, "{html}");
    (page_hits(&html), html)
}

/// A daemon with the default embedding model (multilingual-e5-small from the test deps, made by
/// `scripts/install-test-deps.sh e5`, as the other model tests).
async fn start_with_e5() -> Server {
    let model_dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-deps/multilingual-e5-small");
    assert!(model_dir.join("model.safetensors").is_file(), "no e5 test model: run scripts/install-test-deps.sh e5");
    let config = cairn_core::settings::EmbedderConfig {
        kind: cairn_core::settings::EmbedderKind::Local,
        model_dir,
        url: None,
        model: None,
        api_key: None,
        timeout_secs: 30,
        batch_size: 16,
    };
    let semantic = cairn_engine::embedder::semantic_now(&config).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open_with(&dir.path().join("cairn.db"), Some(semantic), Arc::default()).unwrap();
    let config =
        HttpConfig { data_dir: Some(dir.path().to_owned()), version: "9.9.9-test".into(), ..HttpConfig::default() };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let state = AppState { engine: Arc::clone(&engine), config: Arc::new(config) };
    let task = tokio::spawn(serve(listener, state, async {
        let _ = stopped.await;
    }));
    let client = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    Server { addr, client, stop: Some(stop), task: Some(task), dir, engine }
}

/// With the default model and no LLM: the recency prior alone puts the fifth first (the
/// fifth shares too few words with the others for words alone to say they are one topic).
#[tokio::test]
async fn what_we_use_now_answers_the_fifth_decision_before_any_judge() {
    let s = start_with_e5().await;
    let ids = five_decisions(&s).await;
    all_embedded(&s, 5).await;
    let hits = s.get(QUESTION).await.expect(200);
    assert_eq!(first_id(&hits), ids[4], "{hits:#}");
}

#[tokio::test]
async fn a_judged_supersession_orders_annotates_and_undoes_on_delete() {
    let s = start().await;
    let ids = five_decisions(&s).await;
    judge_fifth_supersedes(&s).await;

    let hits = s.get(QUESTION).await.expect(200);
    assert_eq!(first_id(&hits), ids[4], "{hits:#}");
    let fourth = hits.as_array().unwrap().iter().find(|h| h["id"] == ids[3]).expect("the fourth stays, as history");
    let notes = fourth["annotations"].to_string();
    assert!(notes.contains(&format!("superseded_by: #{}", ids[4])), "{fourth:#}");

    let judged = s.get("/conflicts?project=shop&status=judged").await.expect(200);
    assert!(judged["total"].as_i64().unwrap() >= 4, "{judged:#}");
    let supersedes = judged["relations"].as_array().unwrap().iter().find(|r| r["relation"] == "supersedes").unwrap();
    let detail = s.get(&format!("/conflicts/{}", supersedes["id"])).await.expect(200);
    assert_eq!(
        (&detail["marked_by_kind"], &detail["marked_by_model"], &detail["confidence"]),
        (&json!("llm"), &json!("scripted-1"), &json!(0.92)),
        "{detail:#}"
    );

    // The replacement deleted: the fourth is current again, and says nothing of a replacement.
    s.delete(&format!("/observations/{}", ids[4])).await.expect(200);
    let hits = s.get(QUESTION).await.expect(200);
    assert_eq!(first_id(&hits), ids[3], "{hits:#}");
    assert!(!hits[0]["annotations"].to_string().contains("superseded_by"), "{hits:#}");
}

#[tokio::test]
async fn a_semantic_scan_needs_a_model_and_then_judges_in_batches() {
    let s = start().await;
    five_decisions(&s).await;
    let scan = json!({"project": "shop", "semantic": true, "apply": true, "max_semantic": 2});
    s.post("/conflicts/scan", &scan).await.expect_error(503, "llm_not_configured");
    s.engine.set_llm(Some(Arc::new(ScriptedProvider::new(|_, _| {
        Ok(r#"{"relation": "compatible", "confidence": 0.9, "reason": "both hold"}"#.into())
    }))));
    let first = s.post("/conflicts/scan", &scan).await.expect(200);
    assert_eq!(first["semantic_judged"], 2, "{first:#}");
    assert!(first["semantic_remaining"].as_u64().unwrap() > 0, "{first:#}");
    let next = json!({"project": "shop", "semantic": true, "apply": true, "offset": first["next_offset"]});
    let rest = s.post("/conflicts/scan", &next).await.expect(200);
    assert_eq!(rest["semantic_remaining"], 0, "{rest:#}");
    let stats = s.get("/conflicts/stats?project=shop").await.expect(200);
    let compatible = stats["by_relation"]["compatible"].as_u64().unwrap();
    assert_eq!(compatible, 2 + rest["semantic_judged"].as_u64().unwrap(), "{stats:#}");
}

/// The web page's search: the fifth first before any judge (the recency prior, with the default
/// model), then first with the replaced ones marked `superseded_by` under them (kept, as
/// history); the fifth deleted, the fourth first and unmarked.
#[tokio::test]
async fn the_web_page_answers_the_fifth_first_and_marks_the_replaced_ones() {
    let s = start_with_e5().await;
    let ids = five_decisions(&s).await;
    all_embedded(&s, 5).await;
    let (hits, html) = web_search(&s).await;
    assert_eq!(hits.first().map(|h| h.0), Some(ids[4]), "before any judge: {html}");
    assert!(hits.iter().all(|(_, notes)| notes.iter().all(|n| !n.contains("superseded_by"))), "{html}");

    judge_fifth_supersedes(&s).await;
    let (hits, html) = web_search(&s).await;
    assert_eq!(hits.first().map(|h| h.0), Some(ids[4]), "judged: {html}");
    let marked = format!("superseded_by: #{}", ids[4]);
    for old in &ids[..4] {
        let (_, notes) = hits.iter().find(|h| h.0 == *old).unwrap_or_else(|| panic!("#{old} kept as history: {html}"));
        assert!(notes.iter().any(|n| n.starts_with(&marked)), "#{old} marked replaced: {notes:?}");
    }
    assert!(hits[0].1.iter().all(|n| !n.contains("superseded_by")), "the current one is not marked: {html}");

    s.delete(&format!("/observations/{}", ids[4])).await.expect(200);
    let (hits, html) = web_search(&s).await;
    assert_eq!(hits.first().map(|h| h.0), Some(ids[3]), "the fifth deleted: {html}");
    assert!(
        hits.iter().all(|(id, notes)| *id != ids[4] && notes.iter().all(|n| !n.contains("superseded_by"))),
        "{html}"
    );
    s.shutdown().await.unwrap();
}

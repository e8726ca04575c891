//! The web page at `/ui`: its views as HTML, escaping, refusal of writes from other origins,
//! the token cookie, deep-link 404s and the live stream.

use super::*;

impl Reply {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

impl Server {
    /// A form POST as the page sends it, from `origin`.
    async fn form(&self, path: &str, body: &str, origin: &str, site: &str) -> Reply {
        let mut req = Request::builder()
            .method("POST")
            .uri(format!("http://{}{path}", self.addr))
            .header("content-type", "application/x-www-form-urlencoded");
        if !origin.is_empty() {
            req = req.header("origin", origin);
        }
        if !site.is_empty() {
            req = req.header("sec-fetch-site", site);
        }
        let req = req.body(Full::new(Bytes::from(body.to_owned()))).unwrap();
        let res = tokio::time::timeout(TIMEOUT, self.client.request(req)).await.expect("timed out").expect("request");
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let bytes = res.into_body().collect().await.unwrap().to_bytes();
        Reply { status, headers, bytes }
    }

    fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }
}

const XSS_TITLE: &str = "<script>alert('owned')</script> **bold** <img src=x onerror=alert(1)>";

#[tokio::test]
async fn views_render_server_side_with_stored_text_escaped() {
    let server = start().await;
    let evil =
        server.save(json!({"title": XSS_TITLE, "content": "payload <b>html</b> wal mode", "project": "alpha"})).await;
    let plain = server
        .save(json!({"title": "Use WAL mode", "content": "we use wal mode", "project": "alpha", "type": "decision"}))
        .await;

    let dashboard = server.get("/ui").await;
    assert_eq!(dashboard.status, 200);
    assert!(dashboard.header("content-type").starts_with("text/html"));
    let csp = dashboard.header("content-security-policy");
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{csp}");
    let html = dashboard.text();
    assert!(html.contains("<input id=\"quick-q\" type=\"search\""), "a searchbox");
    assert!(html.contains("<svg") && html.contains("Memories per type"), "charts drawn on the server");
    assert!(html.contains("id=\"live\""));
    assert!(html.contains("Sync: off"), "no project syncs and no hub is set");
    assert!(html.contains("LLM: <strong>off</strong>"), "no model: extraction is off, and said so");
    assert!(!html.contains("<script>alert"), "the title is never markup");
    assert!(html.contains("&lt;script&gt;alert(&#39;owned&#39;)&lt;/script&gt;"));

    let search = server.get("/ui/search?q=wal&project=alpha").await;
    assert_eq!(search.status, 200);
    let html = search.text();
    assert!(html.contains(&format!("href=\"/ui/memory/{}\"", plain["id"])), "{html}");
    assert!(html.contains("<mark>"), "matched terms highlighted: {html}");
    assert!(!html.contains("<script>alert") && !html.contains("<img src=x"));
    assert_eq!(html.matches("type=\"search\"").count(), 1, "one searchbox on the search page");
    // The page reads `GET /search`'s parameters: a limit from the address is kept, a bad one refused.
    let one = server.get("/ui/search?q=wal&project=alpha&limit=1").await.text();
    assert_eq!(one.matches("href=\"/ui/memory/").count(), 1, "limit=1 gives one hit: {one}");
    assert_eq!(server.get("/ui/search?q=wal&mode=fuzzy").await.status, 400);

    let memory = server.get(&format!("/ui/memory/{}", evil["id"])).await;
    assert_eq!(memory.status, 200);
    let html = memory.text();
    assert!(html.contains(">Edit</button>") && html.contains(">Save</button>"));
    assert!(html.contains("<label for=\"edit-content\">Content</label>"));
    assert!(html.contains("payload &lt;b&gt;html&lt;/b&gt;") && !html.contains("<b>html</b>"));
    assert!(!html.contains("<script>alert") && !html.contains("<img src=x"));

    for path in ["/ui/sessions", "/ui/conflicts", "/ui/history", "/ui/assets/ui.css", "/ui/assets/ui.js"] {
        assert_eq!(server.get(path).await.status, 200, "{path}");
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_long_memory_is_cut_with_a_link_to_all_of_it() {
    let server = start_with(|c| c.max_body_bytes = 4 * 1024 * 1024).await;
    let content = "line of text\n".repeat(1024 * 1024 / 13);
    let saved = server.save(json!({"title": "Huge", "content": content})).await;
    let page = server.get(&format!("/ui/memory/{}", saved["id"])).await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains("?full=1\">Show all"), "cut, with a way to see all");
    let full = server.get(&format!("/ui/memory/{}?full=1", saved["id"])).await;
    assert_eq!(full.status, 200);
    assert!(full.bytes.len() > page.bytes.len());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn unknown_ids_and_routes_get_a_404_page() {
    let server = start().await;
    for path in ["/ui/memory/999999", "/ui/memory/not-a-number", "/ui/no/such/view", "/ui/history/no-such-session"] {
        let reply = server.get(path).await;
        assert_eq!(reply.status, 404, "{path}: {}", reply.text());
        assert!(reply.header("content-type").starts_with("text/html"), "{path}");
        assert!(reply.text().contains("Not found"), "{path}");
    }
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_write_from_another_origin_is_refused_and_changes_nothing() {
    let server = start().await;
    let saved = server.save(json!({"title": "Keep me", "content": "original"})).await;
    let path = format!("/ui/memory/{}/edit", saved["id"]);
    let body = "title=Changed&content=hacked";
    let before = server.store_state().await;

    for (origin, site) in [
        ("http://evil.example", "cross-site"),
        ("http://localhost:5173", "same-site"),
        ("http://localhost:5173", ""),
        ("null", ""),
    ] {
        let reply = server.form(&path, body, origin, site).await;
        assert_eq!((reply.status, reply.code().as_str()), (403, "forbidden"), "{origin} {site}");
    }
    assert_eq!(server.store_state().await, before, "nothing changed");

    let own = server.form(&path, "title=Changed&content=edited+here", &server.origin(), "same-origin").await;
    assert_eq!(own.status, 303, "{}", own.text());
    let got = server.get(&format!("/observations/{}", saved["id"])).await.expect(200);
    assert_eq!((got["title"].as_str(), got["content"].as_str()), (Some("Changed"), Some("edited here")));
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_token_reaches_the_page_through_a_strict_cookie() {
    let server = start_with(|c| c.token = Some("s3cret".into())).await;
    assert_eq!(server.get("/ui").await.status, 401);
    assert_eq!(server.get("/ui?token=wrong").await.status, 401);

    let first = server.get("/ui?token=s3cret").await;
    assert_eq!(first.status, 303);
    assert_eq!(first.header("location"), "/ui", "the token leaves the address bar");
    let cookie = first.header("set-cookie");
    for attribute in ["cairn_ui_token=s3cret", "HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let with_cookie = [("cookie", "cairn_ui_token=s3cret")];
    assert_eq!(server.call("GET", "/ui", None, &with_cookie).await.status, 200);
    assert_eq!(server.call("GET", "/ui", None, &[("cookie", "cairn_ui_token=nope")]).await.status, 401);
    assert_eq!(
        server.call("GET", "/observations", None, &with_cookie).await.status,
        401,
        "the cookie is the page's, not the API's"
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_live_stream_announces_a_memory_saved_after_it_opened() {
    let server = start().await;
    server.save(json!({"title": "Before the page", "content": "already there"})).await;
    let req = Request::builder()
        .uri(format!("http://{}/ui/live", server.addr))
        .header("accept", "text/event-stream")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let res = tokio::time::timeout(TIMEOUT, server.client.request(req)).await.unwrap().unwrap();
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let mut body = res.into_body();
    let mut seen = String::new();
    let mut saved = false;
    let found = tokio::time::timeout(TIMEOUT, async {
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.unwrap().into_data() {
                seen.push_str(&String::from_utf8_lossy(&data));
            }
            if seen.contains("event: ready") && !saved {
                saved = true;
                server.save(json!({"title": "Saved <live>", "content": "from another writer"})).await;
            }
            if seen.contains("event: memory") && seen.contains("Saved <live>") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "{seen}");
    assert!(!seen.contains("Before the page"), "only what is new: {seen}");
    drop(body);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn delete_and_restore_from_the_page() {
    let server = start().await;
    let saved = server.save(json!({"title": "Bring me back", "content": "soft deleted then restored"})).await;
    let id = &saved["id"];
    let deleted = server.form(&format!("/ui/memory/{id}/delete"), "", &server.origin(), "same-origin").await;
    assert_eq!(deleted.status, 200);
    assert!(deleted.text().contains(&format!("action=\"/ui/memory/{id}/restore\"")));
    assert_eq!(server.get(&format!("/ui/memory/{id}")).await.status, 404, "gone from the live memories");
    assert!(server.get("/ui/trash").await.text().contains("Bring me back"));

    let restored = server.form(&format!("/ui/memory/{id}/restore"), "", &server.origin(), "same-origin").await;
    assert_eq!((restored.status, restored.header("location")), (303, format!("/ui/memory/{id}").as_str()));
    assert_eq!(server.get(&format!("/ui/memory/{id}")).await.status, 200);
    server.shutdown().await.unwrap();
}

/// The dashboard shows the daemon's model, what it spent today against the daily budget, what
/// extraction wrote and the last failure.
#[tokio::test]
async fn the_dashboard_shows_the_models_spend_against_the_budget() {
    use cairn_llm::budget::{Budget, Ledger, Metered};
    use cairn_llm::{ChatMessage, ChatReply, ChatRequest, LlmError, LlmProvider, Usage};

    /// Answers once (1,000 tokens), then is down.
    struct OnceThenDown(std::sync::atomic::AtomicBool);
    impl LlmProvider for OnceThenDown {
        fn kind(&self) -> &'static str {
            "openai"
        }
        fn model(&self) -> &'static str {
            "qwen2.5:1.5b"
        }
        fn chat(&self, _: &ChatRequest) -> Result<ChatReply, LlmError> {
            if self.0.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Err(LlmError::Unavailable("connection refused".into()));
            }
            let usage = Usage { input_tokens: 600, output_tokens: 400 };
            Ok(ChatReply { text: "ok".into(), usage, model: "qwen2.5:1.5b".into() })
        }
    }

    let server = start().await;
    let ledger = Arc::new(Ledger::open(server.dir.path()).unwrap());
    let model = OnceThenDown(std::sync::atomic::AtomicBool::new(false));
    let metered = Metered::new(Box::new(model), Budget::new(ledger, Some(5000)), true);
    let ask = ChatRequest { messages: vec![ChatMessage::user("hi")], max_tokens: 4, temperature: 0.0, json: false };
    metered.chat(&ask).unwrap();
    metered.chat(&ask).unwrap_err();
    server.engine.set_llm(Some(Arc::new(metered)));

    let html = server.get("/ui").await.text();
    let line = html.split("id=\"llm-status\">").nth(1).and_then(|l| l.split("</p>").next()).expect("an LLM line");
    assert!(line.starts_with("LLM: <strong>openai</strong> · model qwen2.5:1.5b"), "{line}");
    assert!(line.contains("1000 of 5000 tokens spent today (4000 left), 1 call(s)"), "{line}");
    assert!(line.contains("last failure") && line.contains("connection refused (unavailable)"), "{line}");
}

/// The conflicts view: a verdict given on the page is listed under "Judged lately" as a
/// person's, with its reason, on the memory's page too; a scan runs from the page (a dry run
/// records nothing); a semantic scan without a model answers the API's code on the error page.
#[tokio::test]
async fn the_conflicts_view_shows_who_judged_and_scans_from_the_page() {
    let server = start().await;
    let first = server
        .save(json!({"title": "Use WAL mode for the SQLite store", "content": "journal_mode WAL", "project": "alpha"}))
        .await;
    let second = server
        .save(json!({"title": "Use WAL mode for the SQLite store now", "content": "journal_mode WAL again", "project": "alpha",
            "find_candidates": true}))
        .await;
    let judgment = second["candidates"][0]["judgment_id"].as_str().expect("the second save found the first").to_owned();

    let body = format!("judgment_id={judgment}&relation=supersedes&reason=the+newer+one+says+it+better");
    let judged = server.form("/ui/conflicts/judge", &body, &server.origin(), "same-origin").await;
    assert_eq!((judged.status, judged.header("location")), (303, "/ui/conflicts"));
    let page = server.get("/ui/conflicts").await.text();
    let lately = &page[page.find("Judged lately").expect("a judged section")..];
    assert!(
        lately.contains("supersedes") && lately.contains("person") && lately.contains("the newer one says it better"),
        "{lately}"
    );
    let memory = server.get(&format!("/ui/memory/{}", first["id"])).await.text();
    assert!(memory.contains("Judged by") && memory.contains("person"), "the memory's relations say who judged");

    let dry = server.form("/ui/conflicts/scan", "project=alpha&dry_run=true", &server.origin(), "same-origin").await;
    assert_eq!(dry.status, 200);
    let text = dry.text();
    assert!(text.contains("alpha: 2 memories inspected") && text.contains("would record"), "{text}");
    let semantic =
        server.form("/ui/conflicts/scan", "project=alpha&semantic=true", &server.origin(), "same-origin").await;
    assert_eq!(semantic.status, 503, "{}", semantic.text());
    assert!(semantic.text().contains("llm_not_configured"), "{}", semantic.text());
    let refused = server.form("/ui/conflicts/scan", "project=alpha", "http://127.0.0.1:1", "cross-site").await;
    assert_eq!(refused.status, 403, "a scan is a write: other origins are refused");
    server.shutdown().await.unwrap();
}

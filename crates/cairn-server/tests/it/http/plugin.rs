//! What the OpenCode plugin calls, through the generic `POST /v1/op` route it uses: the
//! protocol, one round trip per user prompt, the `[MEMORY]` block, compaction summaries, the
//! plugin settings; plus `GET /protocol`, `GET /config`, session titles and `min_score`.

use super::*;

async fn op(s: &Server, name: &str, args: Value) -> Reply {
    s.post("/v1/op", &json!({"op": name, "args": args})).await
}

#[tokio::test]
async fn protocol_through_the_op_route_and_get_protocol() {
    let s = start().await;
    let text = op(&s, "protocol", json!({"host": "opencode", "tools": "agent"})).await.expect(200);
    assert_eq!((text["host"].as_str(), text["part"].as_str()), (Some("opencode"), Some("memory")));
    assert!(text["text"].as_str().unwrap().contains("AFTER COMPACTION"));
    let same = s.get("/protocol?host=OpenCode&tools=agent").await.expect(200);
    assert_eq!(same, text);
    let trigger = s.get("/protocol?part=trigger").await.expect(200);
    assert!(trigger["text"].as_str().unwrap().starts_with("[MEMORY TRIGGER DETECTED]"));
    s.get("/protocol?host=vim").await.expect_error(400, "invalid_argument");
    op(&s, "protocol", json!({"part": "everything"})).await.expect_error(400, "invalid_argument");
}

#[tokio::test]
async fn user_prompt_is_one_round_trip_and_first_only_once() {
    let s = start().await;
    let args = json!({"session_id": "oc-1", "project": "shop", "agent": "build", "directory": "/w",
        "content": "remember that we deploy with fly.io"});
    let first = op(&s, "user_prompt", args.clone()).await.expect(200);
    assert_eq!(first["first_prompt"], true);
    assert_eq!(first["memory_trigger"], true);
    assert!(first["prompt_id"].is_i64());
    let second = op(&s, "user_prompt", json!({"session_id": "oc-1", "content": "ok"})).await.expect(200);
    // without a host, no texts to inject (`texts` is always there: the plugin tells a new daemon by it)
    assert_eq!(second, json!({"prompt_id": null, "first_prompt": false, "memory_trigger": false, "texts": []}));
    let session = s.get("/sessions/oc-1").await.expect(200);
    assert_eq!((session["project"].as_str(), session["agent"].as_str()), (Some("shop"), Some("build")));
    op(&s, "user_prompt", json!({"session_id": "oc-1"})).await.expect_error(400, "invalid_argument");
    op(&s, "user_prompt", json!({"session_id": "oc-1", "content": " "})).await.expect_error(400, "empty_field");
}

#[tokio::test]
async fn memory_block_and_compaction_summary() {
    let s = start().await;
    s.save(
        json!({"title": "Hexagonal core", "content": "ports and adapters", "type": "architecture", "project": "shop"}),
    )
    .await;
    s.save(json!({"title": "Stripe webhooks retried", "content": "made the handler idempotent", "type": "bugfix",
        "project": "shop"}))
        .await;
    let saved = op(
        &s,
        "save_compaction",
        json!({"session_id": "oc-2", "project": "shop",
        "summary": "## Goal\nRefunds", "trigger": "auto", "overflow": false}),
    )
    .await
    .expect(200);
    assert_eq!(
        (saved["type"].as_str(), saved["topic_key"].as_str()),
        (Some("compaction_summary"), Some("session/oc-2/compaction"))
    );
    let revised =
        op(&s, "save_compaction", json!({"session_id": "oc-2", "summary": "## Goal\nRefunds, done"})).await.expect(200);
    assert_eq!((revised["id"].clone(), revised["action"].as_str()), (saved["id"].clone(), Some("revised")));
    op(&s, "save_compaction", json!({"session_id": "oc-2", "summary": "x", "trigger": "later"}))
        .await
        .expect_error(400, "invalid_argument");

    let block = op(
        &s,
        "context",
        json!({"project": "shop", "layout": "memory_block", "query": "stripe webhook",
        "similarity_threshold": 0.1, "budget_bytes": 4000}),
    )
    .await
    .expect(200);
    let text = block["context"].as_str().unwrap();
    assert!(text.starts_with("[MEMORY]\n"), "{text}");
    assert!(text.contains("## Architecture") && text.contains("## Last Session\n### Goal\nRefunds, done"), "{text}");
    assert!(text.contains("## Relevant to Current Task\n- [100%, "), "{text}");
    assert!(block["bytes"].as_u64().unwrap() <= 4000);
    op(&s, "context", json!({"layout": "memory_block", "similarity_threshold": 2}))
        .await
        .expect_error(400, "invalid_argument");
    op(&s, "context", json!({"layout": "sideways"})).await.expect_error(400, "invalid_argument");
    // GET /context takes the same block.
    let got = s.get("/context?project=shop&layout=Memory_Block&query=stripe%20webhook&similarity_threshold=0.1").await;
    assert!(got.expect(200)["context"].as_str().unwrap().starts_with("[MEMORY]\n"));
    s.get("/context?layout=sideways").await.expect_error(400, "invalid_argument");
    s.get("/context?layout=memory_block&similarity_threshold=3").await.expect_error(400, "invalid_argument");
    // Found by fuzzing: the recent layout ignores the threshold, but a bad one is still refused.
    s.get("/context?similarity_threshold=-1").await.expect_error(400, "invalid_argument");
}

#[tokio::test]
async fn plugin_config_never_has_the_token_and_profile_takes_user_scope() {
    let s = start_with(|c| c.token = Some("secret-token-123456".into())).await;
    let auth = [("authorization", "Bearer secret-token-123456")];
    let body = |v: Value| Some(serde_json::to_vec(&v).unwrap());
    for reply in [
        s.call("POST", "/v1/op", body(json!({"op": "plugin_config", "args": {}})), &auth).await,
        s.call("GET", "/config", None, &auth).await,
    ] {
        let config = reply.expect(200);
        assert_eq!(config["inject"]["mode"], "first_message");
        assert_eq!(config["context_meter"]["red"], 85);
        assert!(!config.to_string().contains("secret"), "{config}");
    }
    let save =
        json!({"op": "save", "args": {"title": "tabs", "content": "tabs not spaces", "scope": "user", "project": "a"}});
    s.call("POST", "/v1/op", body(save), &auth).await.expect(200);
    let profile = s.call("POST", "/v1/op", body(json!({"op": "profile", "args": {"project": "b"}})), &auth).await;
    let profile = profile.expect(200);
    assert_eq!((profile[0]["title"].as_str(), profile[0]["scope"].as_str()), (Some("tabs"), Some("personal")));
}

#[tokio::test]
async fn session_titles_children_and_min_score() {
    let s = start().await;
    s.post("/sessions", &json!({"id": "main", "project": "p", "title": "Fix auth"})).await.expect(201);
    let renamed = s.post("/sessions", &json!({"id": "main", "title": "Fix auth flow"})).await.expect(201);
    assert_eq!(renamed["title"], "Fix auth flow");
    s.post("/sessions", &json!({"id": "child", "project": "p", "parent_id": "main"})).await.expect(201);
    let recent = s.get("/sessions/recent?project=p").await.expect(200);
    assert_eq!(recent.as_array().unwrap().len(), 1);
    let all = s.get("/sessions/recent?project=p&include_children=true").await.expect(200);
    assert_eq!(all.as_array().unwrap().len(), 2);

    s.save(json!({"title": "auth tokens", "content": "auth tokens rotate hourly", "project": "p"})).await;
    s.save(json!({"title": "billing", "content": "auth mentioned once", "project": "p"})).await;
    let every = s.get("/search?q=auth%20tokens&project=p").await.expect(200);
    assert_eq!(every.as_array().unwrap().len(), 2);
    let best = s.get("/search?q=auth%20tokens&project=p&min_score=1").await.expect(200);
    assert_eq!(best.as_array().unwrap().len(), 1);
    s.get("/search?q=auth&min_score=7").await.expect_error(400, "invalid_argument");
}

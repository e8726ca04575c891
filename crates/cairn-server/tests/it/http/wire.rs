//! opencode-memory's wire (`/memories`, seed 002) and `POST /extract`, with a scripted model in
//! place of a real one: container tags to scopes and projects, facts saved once, summaries and
//! briefs, what needs a model refused with `llm_not_configured`, and the shapes its plugin reads.

use cairn_llm::LlmError;
use cairn_llm::scripted::{Ask, ScriptedProvider};

use super::*;

const USER_TAG: &str = "opencode_user_0123456789abcdef";

fn scripted() -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::new(|ask, _| {
        Ok(match ask {
            Ask::Facts => json!({"facts": [
                {"type": "config", "title": "API port", "content": "The velodrome API listens on port 8080."},
                {"type": "decision", "content": "Velodrome stores results in SQLite, not PostgreSQL."}
            ]})
            .to_string(),
            Ask::Summary => r#"{"title": "Port setup", "summary": "Set the API port to 8080."}"#.into(),
            Ask::Brief => r#"{"title": "velodrome", "content": "Velodrome is a Go benchmark runner."}"#.into(),
            Ask::FollowUp(_) => r#"{"facts": []}"#.into(),
            Ask::Other => return Err(LlmError::Malformed("?".into())),
        })
    }))
}

fn conversation(user_id: &str) -> Value {
    json!({
        "messages": [
            {"role": "user", "content": "Which port should the velodrome API use? <private>token abc</private>"},
            {"role": "assistant", "content": [{"type": "text", "text": "Port 8080, and results go to SQLite."}]}
        ],
        "user_id": user_id,
        "metadata": {}
    })
}

/// The project tag opencode-memory gives `dir`.
fn project_tag(dir: &str) -> String {
    format!("opencode_project_{}", cairn_core::extract::wire::directory_tag_hash(dir))
}

#[tokio::test]
async fn facts_are_extracted_saved_once_and_found_in_the_tags_project() {
    let s = start().await;
    let provider = scripted();
    s.engine.set_llm(Some(provider.clone()));
    // A session cairn saw run in the directory: the project tag of that directory is its project.
    let dir = "/nonexistent/velodrome";
    s.post("/sessions", &json!({"id": "ses_v", "project": "velodrome", "directory": dir})).await.expect(201);
    let tag = project_tag(dir);

    let added = s.post("/memories", &conversation(&tag)).await.expect(200);
    let results = added["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{added}");
    assert!(results.iter().all(|r| r["event"] == "ADD" && r["id"].is_string()), "{added}");
    let sent = &provider.asked(Ask::Facts)[0].messages[1].content;
    assert!(sent.contains("[m1] user: Which port") && !sent.contains("token abc"), "redacted: {sent}");

    let again = s.post("/memories", &conversation(&tag)).await.expect(200);
    assert!(again["results"].as_array().unwrap().iter().all(|r| r["event"] == "NONE"), "already said: {again}");

    let found = s
        .post("/memories/search", &json!({"query": "velodrome API port", "user_id": tag, "limit": 5, "threshold": 0.0}))
        .await
        .expect(200);
    let first = &found["results"][0];
    assert_eq!(first["memory"], "The velodrome API listens on port 8080.");
    assert!(first["similarity"].as_f64().unwrap() > 0.0 && first["score"] == first["similarity"]);
    assert_eq!(first["metadata"]["project"], "velodrome", "the tag mapped to the directory's project");
    assert_eq!(first["metadata"]["type"], "config");

    let typed = s
        .post(
            "/memories/search",
            &json!({"query": "velodrome", "user_id": tag, "threshold": 0.0, "types": ["decision"]}),
        )
        .await
        .expect(200);
    let kinds: Vec<&Value> = typed["results"].as_array().unwrap().iter().map(|r| &r["metadata"]["type"]).collect();
    assert_eq!(kinds, [&json!("decision")]);

    let listed = s.get(&format!("/memories?user_id={tag}&limit=10")).await.expect(200);
    assert_eq!(listed["results"].as_array().unwrap().len(), 2);
    let id = listed["results"][0]["id"].as_str().unwrap().to_owned();
    let gone = s.delete(&format!("/memories/{id}")).await.expect(200);
    assert_eq!(gone, json!({"success": true, "message": "Memory deleted"}));
    let listed = s.get(&format!("/memories?user_id={tag}")).await.expect(200);
    assert_eq!(listed["results"].as_array().unwrap().len(), 1);
    s.delete(&format!("/memories/{id}")).await.expect_error(404, "observation_not_found");
    s.delete("/memories/not-a-number").await.expect_error(404, "observation_not_found");
}

#[tokio::test]
async fn the_user_tag_is_the_personal_scope_and_modes_write_summaries_and_briefs() {
    let s = start().await;
    s.engine.set_llm(Some(scripted()));
    s.post("/memories", &conversation(USER_TAG)).await.expect(200);
    let profile = s.get(&format!("/memories?user_id={USER_TAG}")).await.expect(200);
    assert!(profile["results"].as_array().unwrap().iter().all(|m| m["metadata"]["scope"] == "personal"), "{profile}");

    let tag = "opencode_project_ffffffffffffffff";
    let summary = json!({"messages": conversation(tag)["messages"], "user_id": tag, "summary_mode": true});
    let saved = s.post("/memories", &summary).await.expect(200);
    assert_eq!(saved["results"].as_array().unwrap().len(), 1);
    let init = json!({"messages": [{"role": "user", "content": "# velodrome\nA Go benchmark runner."}], "user_id": tag,
        "init_mode": true});
    s.post("/memories", &init).await.expect(200);
    let listed = s.get(&format!("/memories?user_id={tag}")).await.expect(200);
    let mut kinds: Vec<&str> =
        listed["results"].as_array().unwrap().iter().map(|m| m["metadata"]["type"].as_str().unwrap()).collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["project-brief", "session-summary"]);
    // The summary keeps the developer's first message in their words, redacted.
    let summary = listed["results"].as_array().unwrap().iter().find(|m| m["metadata"]["type"] == "session-summary");
    let text = summary.unwrap()["memory"].as_str().unwrap();
    assert!(text.ends_with("\n\nAsked: Which port should the velodrome API use? [REDACTED]"), "{text}");
    assert_eq!(listed["results"][0]["metadata"]["project"], tag, "an unknown directory: the tag names the project");
}

/// The model's facts pass the daemon's checks here too: a value the developer took back and a
/// plan put off are not saved.
#[tokio::test]
async fn a_value_taken_back_and_a_plan_put_off_are_not_saved() {
    let s = start().await;
    s.engine.set_llm(Some(Arc::new(ScriptedProvider::new(|ask, _| {
        Ok(match ask {
            Ask::Facts => json!({"facts": [
                {"type": "config", "content": "The velodrome retry limit is 5."},
                {"type": "config", "content": "The velodrome retry limit is 8 (5 was too few)."},
                {"type": "decision", "content": "A retry dashboard for velodrome, maybe later, not this sprint."}
            ]})
            .to_string(),
            _ => r#"{"facts": []}"#.into(),
        })
    }))));
    let tag = "opencode_project_eeeeeeeeeeeeeeee";
    let talk = json!({"messages": [
        {"role": "user", "content": "Retries: make it 5."},
        {"role": "assistant", "content": "Set to 5."},
        {"role": "user", "content": "Hmm, CI flakes more than that. 8 then. A dashboard maybe later."}
    ], "user_id": tag});
    let added = s.post("/memories", &talk).await.expect(200);
    let saved: Vec<&str> = added["results"].as_array().unwrap().iter().map(|r| r["memory"].as_str().unwrap()).collect();
    assert_eq!(saved, ["The velodrome retry limit is 8 (5 was too few)."], "{added}");
}

#[tokio::test]
async fn a_value_the_developer_set_is_saved_as_the_reply_confirmed_it_though_the_model_missed_it() {
    let s = start().await;
    s.engine.set_llm(Some(Arc::new(ScriptedProvider::new(|_, _| Ok(r#"{"facts": []}"#.into())))));
    let tag = "opencode_project_ffffffffffffffff";
    let talk = json!({"messages": [
        {"role": "user", "content": "How many retries does the uploader get?"},
        {"role": "assistant", "content": "MAX_RETRIES in uploader.ts is 3."},
        {"role": "user", "content": "Make it 5."},
        {"role": "assistant", "content": "MAX_RETRIES is 5 now."},
        {"role": "user", "content": "Hmm, CI flakes more than that. 8 then."},
        {"role": "assistant", "content": "MAX_RETRIES is 8 now; the upload test covers the eighth try."}
    ], "user_id": tag});
    let added = s.post("/memories", &talk).await.expect(200);
    let saved: Vec<&str> = added["results"].as_array().unwrap().iter().map(|r| r["memory"].as_str().unwrap()).collect();
    assert_eq!(saved, ["MAX_RETRIES is 8 now; the upload test covers the eighth try."], "{added}");
    let listed = s.get(&format!("/memories?user_id={tag}")).await.expect(200);
    assert_eq!(listed["results"][0]["metadata"]["type"], "config", "{listed}");
}

#[tokio::test]
async fn without_a_model_a_conversation_is_refused_and_an_explicit_add_is_kept() {
    let s = start().await;
    let before = s.store_state().await;
    s.post("/memories", &conversation(USER_TAG)).await.expect_error(503, "llm_not_configured");
    let summary = json!({"messages": [{"role": "user", "content": "x"}], "user_id": USER_TAG, "summary_mode": true});
    s.post("/memories", &summary).await.expect_error(503, "llm_not_configured");
    assert_eq!(s.store_state().await, before, "nothing saved");

    let add = json!({"messages": [{"role": "user", "content": "Always run the linter before committing."}],
        "user_id": USER_TAG, "metadata": {"type": "preference"}});
    let saved = s.post("/memories", &add).await.expect(200);
    assert_eq!(saved["results"][0]["event"], "ADD");
    let listed = s.get(&format!("/memories?user_id={USER_TAG}")).await.expect(200);
    assert_eq!(listed["results"][0]["memory"], "Always run the linter before committing.");
    assert_eq!(listed["results"][0]["metadata"]["type"], "preference");

    s.post("/memories", &json!({"messages": [], "user_id": USER_TAG})).await.expect_error(400, "empty_field");
    s.post("/memories", &json!({"messages": [{"role": "user", "content": "x"}], "user_id": ""}))
        .await
        .expect_error(400, "empty_field");
    s.post("/extract", &json!({})).await.expect_error(503, "llm_not_configured");
}

#[tokio::test]
async fn a_model_that_fails_is_a_503_and_saves_nothing() {
    let s = start().await;
    s.engine.set_llm(Some(Arc::new(ScriptedProvider::new(|_, _| Err(LlmError::Unavailable("refused".into()))))));
    let before = s.store_state().await;
    s.post("/memories", &conversation(USER_TAG)).await.expect_error(503, "llm_unavailable");
    assert_eq!(s.store_state().await, before);
}

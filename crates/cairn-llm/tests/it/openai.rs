//! The OpenAI-compatible provider against a scripted server on loopback.

use std::time::Duration;

use cairn_base::settings::{LlmProviderKind, LlmSettings, Setting, Source};
use cairn_llm::openai::{OpenAiConfig, OpenAiProvider};
use cairn_llm::{ChatMessage, ChatRequest, LlmError, LlmProvider, Usage};
use serde_json::json;

use crate::fake::{Fake, Reply};

fn completion(text: &str, usage: Option<(u64, u64)>) -> String {
    let mut body = json!({
        "id": "c1",
        "model": "qwen2.5:1.5b-instruct",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    });
    if let Some((input, output)) = usage {
        body["usage"] = json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output});
    }
    body.to_string()
}

fn config(fake: &Fake, key_env: Option<&str>, timeout: Duration) -> OpenAiConfig {
    OpenAiConfig {
        base_url: fake.url("/v1/"),
        model: "qwen2.5:1.5b".into(),
        api_key_env: key_env.map(str::to_owned),
        timeout,
    }
}

fn provider(fake: &Fake) -> OpenAiProvider {
    OpenAiProvider::new(&config(fake, Some("TEST_KEY"), Duration::from_secs(10)), Some("sk-test".into())).unwrap()
}

fn request(json: bool) -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::system("You extract facts."), ChatMessage::user("We chose SQLite.")],
        max_tokens: 256,
        temperature: 0.0,
        json,
    }
}

#[test]
fn a_chat_is_one_post_with_the_key_and_the_servers_counts() {
    let fake = Fake::start(|_| Reply::Json(200, completion("{\"facts\":[]}", Some((42, 7)))));
    let reply = provider(&fake).chat(&request(false)).unwrap();
    assert_eq!(reply.text, "{\"facts\":[]}");
    assert_eq!(reply.usage, Usage { input_tokens: 42, output_tokens: 7 });
    assert_eq!(reply.model, "qwen2.5:1.5b-instruct", "the model that answered");
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    let sent = &seen[0];
    assert_eq!((sent.method.as_str(), sent.path.as_str()), ("POST", "/v1/chat/completions"));
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(sent.body["model"], "qwen2.5:1.5b");
    assert_eq!(sent.body["messages"][0], json!({"role": "system", "content": "You extract facts."}));
    assert_eq!(sent.body["messages"][1]["role"], "user");
    assert_eq!((sent.body["max_tokens"].as_u64(), sent.body["temperature"].as_f64()), (Some(256), Some(0.0)));
    assert!(sent.body.get("response_format").is_none(), "no JSON mode unasked: {}", sent.body);
}

#[test]
fn json_mode_is_asked_and_usage_is_estimated_when_the_server_gives_none() {
    let fake = Fake::start(|_| Reply::Json(200, completion("{\"facts\":[{\"title\":\"SQLite\"}]}", None)));
    let reply = provider(&fake).chat(&request(true)).unwrap();
    assert_eq!(fake.seen()[0].body["response_format"], json!({"type": "json_object"}));
    // "You extract facts." (18 bytes) and "We chose SQLite." (16): 5 + 4 tokens at 4 bytes a token.
    assert_eq!(reply.usage.input_tokens, 9);
    assert_eq!(reply.usage.output_tokens, 8, "32 bytes of answer");
}

#[test]
fn a_server_refusing_json_mode_is_asked_again_without_it_and_remembered() {
    let fake = Fake::start(|seen| {
        if seen.body.get("response_format").is_some() {
            Reply::Json(400, json!({"error": {"message": "Unsupported param: response_format"}}).to_string())
        } else {
            Reply::Json(200, completion("{}", Some((3, 1))))
        }
    });
    let provider = provider(&fake);
    assert_eq!(provider.chat(&request(true)).unwrap().text, "{}");
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen[0].body.get("response_format").is_some() && seen[1].body.get("response_format").is_none());
    provider.chat(&request(true)).unwrap();
    assert_eq!(fake.seen().len(), 3, "the next call goes without JSON mode at once");
}

#[test]
fn a_rejected_key_needs_the_user_and_is_not_retried() {
    let fake = Fake::start(|_| Reply::Json(401, json!({"error": {"message": "Incorrect API key"}}).to_string()));
    let err = provider(&fake).chat(&request(true)).unwrap_err();
    assert!(
        matches!(&err, LlmError::NotConfigured(m) if m.contains("TEST_KEY") && m.contains("Incorrect API key")),
        "{err}"
    );
    assert!(!err.retryable());
    assert_eq!(fake.seen().len(), 1, "a 401 is not a JSON-mode refusal: no second request");
}

#[test]
fn rate_limits_and_server_errors_are_retried_later() {
    for status in [429, 500, 503] {
        let fake = Fake::start(move |_| Reply::Json(status, json!({"error": "busy"}).to_string()));
        let err = provider(&fake).chat(&request(false)).unwrap_err();
        assert!(matches!(&err, LlmError::Unavailable(m) if m.contains(&status.to_string())), "{status}: {err}");
        assert!(err.retryable(), "{status}");
    }
}

#[test]
fn a_server_that_does_not_answer_in_time_is_a_timeout() {
    let fake = Fake::start(|_| Reply::Never);
    let slow = OpenAiProvider::new(&config(&fake, None, Duration::from_millis(500)), None).unwrap();
    let err = slow.chat(&request(false)).unwrap_err();
    assert!(matches!(err, LlmError::Timeout(_)), "{err}");
    assert!(err.retryable());
}

#[test]
fn an_answer_that_is_not_a_completion_is_malformed() {
    for body in ["not json", "{\"choices\": []}", &completion("  ", None)] {
        let body = body.to_owned();
        let fake = Fake::start(move |_| Reply::Json(200, body.clone()));
        let err = provider(&fake).chat(&request(false)).unwrap_err();
        assert!(matches!(err, LlmError::Malformed(_)), "{err}");
        assert!(err.retryable());
    }
    let refusal =
        json!({"choices": [{"message": {"content": null, "refusal": "I can't help with that."}}]}).to_string();
    let fake = Fake::start(move |_| Reply::Json(200, refusal.clone()));
    let err = provider(&fake).chat(&request(false)).unwrap_err();
    assert!(matches!(&err, LlmError::Refused(m) if m.contains("can't help")), "{err}");
    assert!(!err.retryable());
}

#[test]
fn a_server_down_is_unavailable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = OpenAiConfig {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        model: "m".into(),
        api_key_env: None,
        timeout: Duration::from_secs(5),
    };
    let err = OpenAiProvider::new(&config, None).unwrap().chat(&request(false)).unwrap_err();
    assert!(matches!(err, LlmError::Unavailable(_)), "{err}");
}

#[test]
fn without_its_key_nothing_is_sent() {
    let fake = Fake::start(|_| Reply::Json(200, completion("{}", None)));
    // A variable named but not set: refused even on loopback.
    let err =
        OpenAiProvider::new(&config(&fake, Some("CAIRN_TEST_UNSET_KEY"), Duration::from_secs(5)), None).unwrap_err();
    assert!(matches!(&err, LlmError::NotConfigured(m) if m.contains("CAIRN_TEST_UNSET_KEY")), "{err}");
    assert!(!err.retryable());
    // Through the settings, as the daemon opens it.
    let settings = LlmSettings {
        provider: Setting { value: LlmProviderKind::OpenAi, source: Source::ConfigFile },
        model: Setting { value: Some("m".into()), source: Source::ConfigFile },
        base_url: Setting { value: Some(fake.url("/v1")), source: Source::ConfigFile },
        api_key_env: Setting { value: Some("CAIRN_TEST_UNSET_KEY".into()), source: Source::ConfigFile },
        ..LlmSettings::default()
    };
    let tmp = tempfile::tempdir().unwrap();
    let err = cairn_llm::config::open(&settings, tmp.path(), &|_| None).unwrap_err();
    assert!(matches!(&err, LlmError::NotConfigured(m) if m.contains("CAIRN_TEST_UNSET_KEY")), "{err}");
    // A remote server with the default variable unset.
    let remote = OpenAiConfig {
        base_url: "https://api.openai.com/v1".into(),
        model: "gpt-4o-mini".into(),
        api_key_env: None,
        timeout: Duration::from_secs(5),
    };
    let err = OpenAiProvider::new(&remote, None).unwrap_err();
    assert!(matches!(&err, LlmError::NotConfigured(m) if m.contains("OPENAI_API_KEY")), "{err}");
    assert!(fake.seen().is_empty(), "the server saw nothing");
    // With the key it is the same server that answers.
    let env = |name: &str| (name == "CAIRN_TEST_UNSET_KEY").then(|| "sk-x".to_owned());
    let opened = cairn_llm::config::open(&settings, tmp.path(), &env).unwrap().unwrap();
    opened.chat(&request(false)).unwrap();
    assert_eq!(fake.seen()[0].header("authorization"), Some("Bearer sk-x"));
}

#[test]
fn the_probe_lists_models_and_spends_nothing() {
    let fake = Fake::start(|seen| match seen.path.as_str() {
        "/v1/models" => Reply::Json(200, json!({"data": [{"id": "qwen2.5:1.5b"}]}).to_string()),
        _ => Reply::Json(404, String::new()),
    });
    provider(&fake).probe().unwrap();
    assert_eq!(fake.seen()[0].method, "GET");
}

#[test]
fn a_prefill_is_not_sent_and_the_answer_comes_back_as_the_server_wrote_it() {
    let fake = Fake::start(|_| Reply::Json(200, completion("{\"facts\":[]}", None)));
    let mut prefilled = request(true);
    prefilled.messages.push(ChatMessage::assistant("{\"facts\": ["));
    let reply = provider(&fake).chat(&prefilled).unwrap();
    let sent = &fake.seen()[0].body["messages"];
    assert_eq!(sent.as_array().map(Vec::len), Some(2), "servers differ on a last assistant turn: {sent}");
    assert_eq!(sent[1]["role"], "user");
    assert_eq!(reply.text, "{\"facts\":[]}");
}

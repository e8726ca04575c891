//! The Anthropic provider against a scripted Messages API on loopback.

use std::time::Duration;

use cairn_llm::anthropic::{AnthropicConfig, AnthropicProvider};
use cairn_llm::{ChatMessage, ChatRequest, LlmError, LlmProvider, Usage};
use serde_json::json;

use crate::fake::{Fake, Reply};

fn message(text: &str, stop_reason: &str) -> String {
    json!({
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5-20251001",
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "usage": {"input_tokens": 120, "output_tokens": 30},
    })
    .to_string()
}

fn config(fake: &Fake, timeout: Duration) -> AnthropicConfig {
    AnthropicConfig {
        base_url: fake.url(""),
        model: "claude-haiku-4-5".into(),
        api_key_env: "TEST_ANTHROPIC_KEY".into(),
        timeout,
    }
}

fn provider(fake: &Fake) -> AnthropicProvider {
    AnthropicProvider::new(&config(fake, Duration::from_secs(10)), Some("sk-ant-test".into())).unwrap()
}

fn request(json: bool) -> ChatRequest {
    ChatRequest {
        messages: vec![ChatMessage::system("You extract facts."), ChatMessage::user("We chose SQLite.")],
        max_tokens: 300,
        temperature: 0.0,
        json,
    }
}

#[test]
fn a_message_carries_the_key_the_version_and_the_system_prompt_on_top() {
    let fake = Fake::start(|_| Reply::Json(200, message("{\"facts\":[]}", "end_turn")));
    let reply = provider(&fake).chat(&request(false)).unwrap();
    assert_eq!(reply.text, "{\"facts\":[]}");
    assert_eq!(reply.usage, Usage { input_tokens: 120, output_tokens: 30 });
    assert_eq!(reply.model, "claude-haiku-4-5-20251001");
    let seen = fake.seen();
    let sent = &seen[0];
    assert_eq!((sent.method.as_str(), sent.path.as_str()), ("POST", "/v1/messages"));
    assert_eq!(sent.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(sent.body["system"], "You extract facts.");
    assert_eq!(
        sent.body["messages"],
        json!([{"role": "user", "content": "We chose SQLite."}]),
        "no system message inside"
    );
    assert_eq!((sent.body["max_tokens"].as_u64(), sent.body["model"].as_str()), (Some(300), Some("claude-haiku-4-5")));
}

#[test]
fn a_json_request_says_so_in_the_system_prompt() {
    let fake = Fake::start(|_| Reply::Json(200, message("{}", "end_turn")));
    provider(&fake).chat(&request(true)).unwrap();
    let system = fake.seen()[0].body["system"].as_str().unwrap().to_owned();
    assert!(system.starts_with("You extract facts.\n\n") && system.contains("one JSON value"), "{system}");
}

#[test]
fn failures_are_sorted_for_the_backoff() {
    let fake = Fake::start(|_| {
        Reply::Json(
            401,
            json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}})
                .to_string(),
        )
    });
    let err = provider(&fake).chat(&request(false)).unwrap_err();
    assert!(
        matches!(&err, LlmError::NotConfigured(m) if m.contains("TEST_ANTHROPIC_KEY") && m.contains("invalid x-api-key")),
        "{err}"
    );
    assert!(!err.retryable());
    for status in [429, 500, 529] {
        let fake = Fake::start(move |_| {
            Reply::Json(
                status,
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).to_string(),
            )
        });
        let err = provider(&fake).chat(&request(false)).unwrap_err();
        assert!(matches!(&err, LlmError::Unavailable(m) if m.contains("Overloaded")), "{status}: {err}");
        assert!(err.retryable());
    }
    let fake = Fake::start(|_| Reply::Json(200, message("", "refusal")));
    assert!(matches!(provider(&fake).chat(&request(false)), Err(LlmError::Refused(_))));
    let fake = Fake::start(|_| Reply::Json(200, "{\"content\": 3}".into()));
    let err = provider(&fake).chat(&request(false)).unwrap_err();
    assert!(matches!(err, LlmError::Malformed(_)), "{err}");
}

#[test]
fn a_slow_api_is_a_timeout() {
    let fake = Fake::start(|_| Reply::Never);
    let slow = AnthropicProvider::new(&config(&fake, Duration::from_millis(500)), Some("k".into())).unwrap();
    assert!(matches!(slow.chat(&request(false)), Err(LlmError::Timeout(_))));
}

#[test]
fn without_its_key_nothing_is_sent() {
    let fake = Fake::start(|_| Reply::Json(200, message("{}", "end_turn")));
    for key in [None, Some(String::new())] {
        let err = AnthropicProvider::new(&config(&fake, Duration::from_secs(5)), key).unwrap_err();
        assert!(matches!(&err, LlmError::NotConfigured(m) if m.contains("TEST_ANTHROPIC_KEY")), "{err}");
    }
    assert!(fake.seen().is_empty());
}

#[test]
fn a_prefill_is_not_sent_and_the_answer_comes_back_as_the_model_wrote_it() {
    let fake = Fake::start(|_| Reply::Json(200, message("{\"facts\":[]}", "end_turn")));
    let mut prefilled = request(true);
    prefilled.messages.push(ChatMessage::assistant("{\"facts\": ["));
    let reply = provider(&fake).chat(&prefilled).unwrap();
    let sent = &fake.seen()[0].body["messages"];
    assert_eq!(sent.as_array().map(Vec::len), Some(1), "some models refuse prefill: {sent}");
    assert_eq!(reply.text, "{\"facts\":[]}");
}

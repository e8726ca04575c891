//! Anthropic's Messages API: `POST {base_url}/v1/messages` with `x-api-key` and
//! `anthropic-version: 2023-06-01`, the system prompt as the top-level `system` field.
//!
//! The API has no JSON mode: a JSON request says so at the end of the system prompt, and the
//! caller parses forgivingly as it does for every provider.

use std::time::Duration;

use serde::Deserialize;

use crate::http::{Http, status_error};
use crate::{ChatReply, ChatRequest, LlmError, LlmProvider, Role, Usage, estimate_request_tokens, estimate_tokens};

/// The variable the key is read from unless `api_key_env` names another.
pub const DEFAULT_KEY_ENV: &str = "ANTHROPIC_API_KEY";
/// Anthropic's own address.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The API version every request names.
const API_VERSION: &str = "2023-06-01";
/// What a JSON request adds to the system prompt.
const JSON_ONLY: &str = "Answer with one JSON value only: no prose before or after it, no code fence.";

/// Where and what to ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnthropicConfig {
    /// `https://api.anthropic.com` or a proxy of the same API; `/v1/messages` is appended.
    pub base_url: String,
    pub model: String,
    pub api_key_env: String,
    pub timeout: Duration,
}

#[derive(Debug)]
pub struct AnthropicProvider {
    base_url: String,
    model: String,
    key: String,
    key_env: String,
    http: Http,
}

impl AnthropicProvider {
    /// A provider for `config` with the key read from `config.api_key_env`: none, none sent.
    pub fn new(config: &AnthropicConfig, key: Option<String>) -> Result<AnthropicProvider, LlmError> {
        let base = config.base_url.trim().trim_end_matches('/');
        let base_url = base.strip_suffix("/v1").unwrap_or(base).to_owned();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(LlmError::NotConfigured(format!("{base_url:?} is not an http(s) address")));
        }
        if config.model.trim().is_empty() {
            return Err(LlmError::NotConfigured("no model named: cairn llm use anthropic --model M".into()));
        }
        let Some(key) = key.filter(|k| !k.trim().is_empty()) else {
            return Err(LlmError::NotConfigured(format!(
                "{} is not set: export it with your Anthropic API key (or name another variable with --api-key-env)",
                config.api_key_env
            )));
        };
        Ok(AnthropicProvider {
            base_url,
            model: config.model.trim().to_owned(),
            key,
            key_env: config.api_key_env.clone(),
            http: Http::new(config.timeout),
        })
    }

    fn headers(&self) -> [(&str, &str); 2] {
        [("x-api-key", self.key.as_str()), ("anthropic-version", API_VERSION)]
    }

    fn body(&self, request: &ChatRequest) -> serde_json::Value {
        let mut system: Vec<&str> =
            request.messages.iter().filter(|m| m.role == Role::System).map(|m| m.content.as_str()).collect();
        if request.json {
            system.push(JSON_ONLY);
        }
        let messages: Vec<serde_json::Value> = request
            .without_prefill()
            .iter()
            .filter(|m| m.role != Role::System)
            .map(|m| serde_json::json!({ "role": m.role, "content": m.content }))
            .collect();
        let mut body = serde_json::json!({
            "model": self.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "messages": messages,
        });
        if !system.is_empty() {
            body["system"] = system.join("\n\n").into();
        }
        body
    }
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Vec<Block>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<MessageUsage>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Deserialize)]
struct MessageUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

impl LlmProvider for AnthropicProvider {
    fn kind(&self) -> &'static str {
        "anthropic"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        let url = format!("{}/v1/messages", self.base_url);
        let answer = self.http.post_json(&url, &self.headers(), &self.body(request))?;
        if !(200..=299).contains(&answer.status) {
            return Err(status_error(&url, &answer, Some(&self.key_env)));
        }
        let message: Message = serde_json::from_str(&answer.body)
            .map_err(|e| LlmError::Malformed(format!("{url} answered with something other than a message: {e}")))?;
        if message.stop_reason.as_deref() == Some("refusal") {
            return Err(LlmError::Refused(format!("{url}: the model declined to answer (stop_reason refusal)")));
        }
        let text: String =
            message.content.iter().filter(|b| b.kind == "text").filter_map(|b| b.text.as_deref()).collect();
        if text.trim().is_empty() {
            return Err(LlmError::Malformed(format!(
                "{url} answered no text (stop_reason {})",
                message.stop_reason.as_deref().unwrap_or("none")
            )));
        }
        let counted = message.usage.unwrap_or(MessageUsage { input_tokens: None, output_tokens: None });
        let usage = Usage {
            input_tokens: counted.input_tokens.unwrap_or_else(|| estimate_request_tokens(request)),
            output_tokens: counted.output_tokens.unwrap_or_else(|| estimate_tokens(&text)),
        };
        Ok(ChatReply { text, usage, model: message.model.filter(|m| !m.is_empty()).unwrap_or(self.model.clone()) })
    }

    /// `GET {base_url}/v1/models`: checks the address and the key, spends no token.
    fn probe(&self) -> Result<(), LlmError> {
        let url = format!("{}/v1/models", self.base_url);
        let answer = self.http.get(&url, &self.headers())?;
        match answer.status {
            200..=299 => Ok(()),
            _ => Err(status_error(&url, &answer, Some(&self.key_env))),
        }
    }
}

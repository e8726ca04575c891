//! Any OpenAI-compatible chat endpoint: `POST {base_url}/chat/completions` on Ollama
//! (`http://localhost:11434/v1`), llama.cpp's server, LM Studio, vLLM, OpenRouter or OpenAI.
//!
//! The key is read from a named environment variable by the caller and never written anywhere.
//! Without one, a request is never sent: only a server on this machine (Ollama, llama.cpp)
//! may go without a key, and only while no variable is named.
//!
//! Servers differ in what they accept. A 400 is read once for what it objects to, and the
//! request sent again without it, remembered for the provider's life: `response_format` (JSON
//! mode, which llama.cpp's and older servers refuse), `max_tokens` (OpenAI's reasoning models
//! want `max_completion_tokens`) and `temperature` (which those models fix).

use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;

use crate::http::{Http, is_loopback_url, status_error};
use crate::{ChatReply, ChatRequest, LlmError, LlmProvider, Usage, estimate_request_tokens, estimate_tokens};

/// The variable the key is read from unless `api_key_env` names another.
pub const DEFAULT_KEY_ENV: &str = "OPENAI_API_KEY";

/// Where and what to ask.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenAiConfig {
    /// The API root, e.g. `http://localhost:11434/v1`; `/chat/completions` is appended.
    pub base_url: String,
    pub model: String,
    /// The variable the key is read from, named in errors. `None`: `DEFAULT_KEY_ENV`, and
    /// a server on this machine may go without it; a variable named is always required.
    pub api_key_env: Option<String>,
    pub timeout: Duration,
}

/// What this server turned out not to accept.
#[derive(Debug, Default, Clone, Copy)]
struct Accepts {
    no_json_mode: bool,
    max_completion_tokens: bool,
    no_temperature: bool,
}

#[derive(Debug)]
pub struct OpenAiProvider {
    base_url: String,
    model: String,
    key: Option<String>,
    key_env: String,
    http: Http,
    accepts: Mutex<Accepts>,
}

impl OpenAiProvider {
    /// A provider for `config` with the key read from `config.api_key_env` (`None`: not set).
    /// Without a key only a server on this machine is accepted.
    pub fn new(config: &OpenAiConfig, key: Option<String>) -> Result<OpenAiProvider, LlmError> {
        let base_url = config.base_url.trim().trim_end_matches('/').to_owned();
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(LlmError::NotConfigured(format!(
                "{base_url:?} is not an http(s) address: give the API root, e.g. http://localhost:11434/v1"
            )));
        }
        if config.model.trim().is_empty() {
            return Err(LlmError::NotConfigured("no model named: cairn llm use openai --model M".into()));
        }
        let key = key.filter(|k| !k.trim().is_empty());
        let key_env = config.api_key_env.clone().unwrap_or_else(|| DEFAULT_KEY_ENV.to_owned());
        let required = config.api_key_env.is_some() || !is_loopback_url(&base_url);
        if key.is_none() && required {
            return Err(LlmError::NotConfigured(format!(
                "{key_env} is not set: export it with the key of {base_url} (or name another variable with --api-key-env)"
            )));
        }
        Ok(OpenAiProvider {
            base_url,
            model: config.model.trim().to_owned(),
            key,
            key_env,
            http: Http::new(config.timeout),
            accepts: Mutex::new(Accepts::default()),
        })
    }

    fn chat_url(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        self.key.iter().map(|k| ("authorization", format!("Bearer {k}"))).collect()
    }

    fn body(&self, request: &ChatRequest, accepts: Accepts) -> serde_json::Value {
        let mut body =
            serde_json::json!({ "model": self.model, "messages": request.without_prefill(), "stream": false });
        let tokens = if accepts.max_completion_tokens { "max_completion_tokens" } else { "max_tokens" };
        body[tokens] = request.max_tokens.into();
        if !accepts.no_temperature {
            body["temperature"] = f64::from(request.temperature).into();
        }
        if request.json && !accepts.no_json_mode {
            body["response_format"] = serde_json::json!({ "type": "json_object" });
        }
        body
    }

    fn post(&self, body: &serde_json::Value) -> Result<crate::http::Answer, LlmError> {
        let headers = self.headers();
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        self.http.post_json(&self.chat_url(), &headers, body)
    }

    fn accepts(&self) -> Accepts {
        *self.accepts.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What a 400 objects to, as a change to the request; `None` when nothing left to drop.
fn adjusted(accepts: Accepts, message: &str, json_sent: bool) -> Option<Accepts> {
    let message = message.to_ascii_lowercase();
    let mut next = accepts;
    if message.contains("max_completion_tokens") && !accepts.max_completion_tokens {
        next.max_completion_tokens = true;
    } else if message.contains("temperature") && !accepts.no_temperature {
        next.no_temperature = true;
    } else if json_sent {
        // Servers word it every way ("response_format", "json_object", "unsupported param"):
        // with JSON mode on, any other 400 is tried once without it.
        next.no_json_mode = true;
    }
    let changed = next.no_json_mode != accepts.no_json_mode
        || next.max_completion_tokens != accepts.max_completion_tokens
        || next.no_temperature != accepts.no_temperature;
    changed.then_some(next)
}

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<CompletionUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<Message>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct CompletionUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl OpenAiProvider {
    fn reply(&self, request: &ChatRequest, body: &str) -> Result<ChatReply, LlmError> {
        let url = self.chat_url();
        let completion: Completion = serde_json::from_str(body).map_err(|e| {
            LlmError::Malformed(format!("{url} answered with something other than a chat completion: {e}"))
        })?;
        let choice = completion
            .choices
            .into_iter()
            .next()
            .ok_or_else(|| LlmError::Malformed(format!("{url} answered with no choice")))?;
        let message = choice.message.unwrap_or(Message { content: None, refusal: None });
        if let Some(refusal) = message.refusal.filter(|r| !r.trim().is_empty()) {
            return Err(LlmError::Refused(refusal));
        }
        if choice.finish_reason.as_deref() == Some("content_filter") {
            return Err(LlmError::Refused(format!("{url} filtered the answer (finish_reason content_filter)")));
        }
        let text = message.content.unwrap_or_default();
        if text.trim().is_empty() {
            return Err(LlmError::Malformed(format!(
                "{url} answered an empty message (finish_reason {})",
                choice.finish_reason.as_deref().unwrap_or("none")
            )));
        }
        let counted = completion.usage.unwrap_or(CompletionUsage { prompt_tokens: None, completion_tokens: None });
        let usage = Usage {
            input_tokens: counted.prompt_tokens.unwrap_or_else(|| estimate_request_tokens(request)),
            output_tokens: counted.completion_tokens.unwrap_or_else(|| estimate_tokens(&text)),
        };
        Ok(ChatReply { text, usage, model: completion.model.filter(|m| !m.is_empty()).unwrap_or(self.model.clone()) })
    }
}

impl LlmProvider for OpenAiProvider {
    fn kind(&self) -> &'static str {
        "openai"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        let mut accepts = self.accepts();
        // At most one retry per thing a server can object to.
        for _ in 0..4 {
            let answer = self.post(&self.body(request, accepts))?;
            match answer.status {
                200..=299 => {
                    *self.accepts.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = accepts;
                    return self.reply(request, &answer.body);
                }
                400 => {
                    let json_sent = request.json && !accepts.no_json_mode;
                    match adjusted(accepts, &answer.body, json_sent) {
                        Some(next) => {
                            tracing::debug!(url = %self.chat_url(), body = %answer.body, "the server refused a parameter; sending again without it");
                            accepts = next;
                        }
                        None => return Err(status_error(&self.chat_url(), &answer, Some(&self.key_env))),
                    }
                }
                _ => return Err(status_error(&self.chat_url(), &answer, Some(&self.key_env))),
            }
        }
        Err(LlmError::Refused(format!("{} refused every form of the request", self.chat_url())))
    }

    /// `GET {base_url}/models`: no prompt, no token spent.
    fn probe(&self) -> Result<(), LlmError> {
        let url = format!("{}/models", self.base_url);
        let headers = self.headers();
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let answer = self.http.get(&url, &headers)?;
        match answer.status {
            200..=299 => Ok(()),
            _ => Err(status_error(&url, &answer, Some(&self.key_env))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_drops_what_it_names_else_json_mode() {
        let none = Accepts::default();
        let next = adjusted(none, "Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens'", true).unwrap();
        assert!(next.max_completion_tokens && !next.no_json_mode);
        let next = adjusted(none, "'temperature' does not support 0", true).unwrap();
        assert!(next.no_temperature);
        let next = adjusted(none, "unknown field response_format", true).unwrap();
        assert!(next.no_json_mode);
        assert!(adjusted(none, "context length exceeded", false).is_none(), "nothing to drop");
        let dropped = Accepts { no_json_mode: true, ..none };
        assert!(adjusted(dropped, "context length exceeded", false).is_none());
    }
}

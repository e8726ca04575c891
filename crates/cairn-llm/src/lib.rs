//! The LLM port: what cairn asks of any language model, and the providers that answer.
//!
//! A provider turns a `ChatRequest` into a `ChatReply`. Everything above this crate
//! (extraction, judging, re-ranking) speaks only this trait, so a local GGUF model, an
//! OpenAI-compatible server, Anthropic's Messages API and the user's own agent CLI are
//! interchangeable, and "off" is simply no provider.
//!
//! Nothing here redacts: callers hand over text that already went through cairn-base's
//! outbound redaction (`<private>` and secrets by pattern), so no provider can be the one
//! that forgets.

use serde::{Deserialize, Serialize};

/// The user's own agent CLI (`claude -p`, `opencode run`) as the model.
pub mod agent_cli;
/// Anthropic's Messages API.
#[cfg(feature = "remote")]
pub mod anthropic;
/// What each call spent, per UTC day, in the data dir; the daily budget of remote providers.
pub mod budget;
/// The provider `[llm]` names, opened, metered and budgeted; the port's errors as cairn's.
pub mod config;
/// Prompts and parsing of the memories a model writes (facts, summaries, briefs).
pub mod extract;
#[cfg(feature = "remote")]
mod http;
/// The prompt and parsing of a verdict between two memories (supersedes, conflicts_with, ...).
pub mod judge;
/// The local models: the catalogue and installs always; the forward pass (a small instruction
/// model from a GGUF file on the CPU) with the feature `local`.
pub mod local;
/// Any OpenAI-compatible chat endpoint.
#[cfg(feature = "remote")]
pub mod openai;
mod prompt_text;
/// The prompt and parsing of deep recall: search hits re-ranked by a model reading the question.
pub mod rerank;
/// A provider answering from a script, for the tests of what runs on the port.
#[cfg(feature = "scripted")]
pub mod scripted;
/// The local model in a process of its own (`cairn-llm-worker`), for a `cairn` built without it.
pub mod worker;

/// Who speaks a message of a chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        Self { role: Role::System, content: content.into() }
    }
    pub fn user(content: impl Into<String>) -> Self {
        Self { role: Role::User, content: content.into() }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Self { role: Role::Assistant, content: content.into() }
    }
}

/// What a caller asks for: a chat, a cap on the answer's length, and whether the answer must be
/// one JSON value (providers that support a JSON mode turn it on; the caller parses anyway).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    pub max_tokens: u32,
    /// 0.0 for extraction and judging: the same session gives the same facts.
    pub temperature: f32,
    pub json: bool,
}

impl ChatRequest {
    /// The start of the answer the caller wrote for the model: a last message from the
    /// assistant. The local provider continues it, and its reply's text then begins with it.
    /// The remote ones leave it out (`without_prefill`) and reply with the model's whole answer:
    /// OpenAI-compatible servers differ on a last assistant message (continued, a new turn, or
    /// refused), and some Anthropic models refuse prefill. Either way the caller parses the
    /// text whole, so a prefill guides a model and is never needed to read its answer.
    pub fn prefill(&self) -> Option<&str> {
        self.messages.last().filter(|m| m.role == Role::Assistant).map(|m| m.content.as_str())
    }

    /// The chat without its prefill, for a provider that does not continue an answer.
    pub fn without_prefill(&self) -> &[ChatMessage] {
        let keep = self.messages.len() - usize::from(self.prefill().is_some());
        &self.messages[..keep]
    }
}

/// Tokens a call consumed, as the provider counted them (estimated where it does not say).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// A provider's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    pub text: String,
    pub usage: Usage,
    /// The model that answered, as the provider names it (recorded in a memory's provenance).
    pub model: String,
}

/// Why a call failed. `retryable` failures (down, slow, rate-limited, malformed answer) put the
/// work back with backoff; the others need the user (no key, no model file, refused).
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("the model is not reachable: {0}")]
    Unavailable(String),
    #[error("the model took longer than {0} s")]
    Timeout(u64),
    #[error("the model answered with something cairn cannot use: {0}")]
    Malformed(String),
    #[error("the model refused: {0}")]
    Refused(String),
    #[error("not configured: {0}")]
    NotConfigured(String),
    #[error("the daily token budget is spent ({spent} of {budget})")]
    BudgetSpent { spent: u64, budget: u64 },
    /// The local model's file: missing, unreadable, truncated, not a model cairn runs, or not
    /// the file its checksum names. The message says what to do.
    #[error("the local model file: {0}")]
    ModelFile(String),
    /// The chat does not fit the model's context: the caller sends it in smaller windows.
    #[error("the prompt is {tokens} tokens, more than the {limit} the model is run with; send it in smaller windows")]
    ContextFull { tokens: usize, limit: usize },
}

impl LlmError {
    /// Whether the same call may succeed later without the user doing anything.
    pub fn retryable(&self) -> bool {
        matches!(self, Self::Unavailable(_) | Self::Timeout(_) | Self::Malformed(_) | Self::BudgetSpent { .. })
    }
}

/// The port: one chat call. Providers are blocking and `Send + Sync`, run on cairn's background
/// workers, never on a hook's or a request's path.
pub trait LlmProvider: Send + Sync {
    /// A short stable name: `local`, `openai`, `anthropic`, `agent-cli`.
    fn kind(&self) -> &'static str;
    /// The model this provider will use, for provenance and `cairn llm status`.
    fn model(&self) -> &str;
    fn chat(&self, request: &ChatRequest) -> Result<ChatReply, LlmError>;
    /// A cheap check that the provider can answer, spending no token (a remote one lists its
    /// models, an agent CLI is found on PATH). The default: nothing to check.
    fn probe(&self) -> Result<(), LlmError> {
        Ok(())
    }
    /// What this provider's calls spent today against the budget, and the last failure, when
    /// they are metered (`budget::Metered`, as every provider `config::open` gives); `None` for
    /// a bare one. For what the daemon shows (`/ui`) of the model it runs.
    fn spend(&self) -> Option<budget::Spend> {
        None
    }
}

/// Tokens of a text, estimated where a provider does not count them: about four bytes a token
/// for English and code in the tokenizers of today's models, rounded up.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// Tokens of a request's messages, estimated.
pub fn estimate_request_tokens(request: &ChatRequest) -> u64 {
    request.messages.iter().map(|m| estimate_tokens(&m.content)).sum()
}

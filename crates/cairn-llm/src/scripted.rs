//! A provider that answers from a script (feature `scripted`): the test double of the crates
//! above the port, which test what they do with answers (good, malformed, failing) without a
//! model. The providers themselves are tested against real servers and a real model file.

use std::sync::Mutex;

use crate::extract::{BRIEF_PROMPT, EXTRACT_PROMPT, FollowUp, SUMMARY_PROMPT};
use crate::{ChatReply, ChatRequest, LlmError, LlmProvider, Usage};

/// What a request asks for, by its system prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ask {
    Facts,
    /// A question asked after the facts (`extract::follow_up_request`).
    FollowUp(FollowUp),
    Summary,
    Brief,
    Other,
}

impl Ask {
    pub fn of(request: &ChatRequest) -> Ask {
        let system = request.messages.first().map_or("", |m| m.content.as_str());
        let user = request.messages.get(1).map_or("", |m| m.content.as_str());
        if system == EXTRACT_PROMPT.trim()
            && let Some(follow_up) = FollowUp::ALL.into_iter().find(|f| user.ends_with(f.question()))
        {
            return Ask::FollowUp(follow_up);
        }
        [(EXTRACT_PROMPT, Ask::Facts), (SUMMARY_PROMPT, Ask::Summary), (BRIEF_PROMPT, Ask::Brief)]
            .into_iter()
            .find(|(prompt, _)| system == prompt.trim())
            .map_or(Ask::Other, |(_, ask)| ask)
    }
}

type Script = Box<dyn Fn(Ask, &ChatRequest) -> Result<String, LlmError> + Send + Sync>;

/// Answers each request with what its script returns, and keeps every request it was sent.
pub struct ScriptedProvider {
    script: Script,
    requests: Mutex<Vec<ChatRequest>>,
}

impl std::fmt::Debug for ScriptedProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedProvider").finish_non_exhaustive()
    }
}

impl ScriptedProvider {
    pub fn new(script: impl Fn(Ask, &ChatRequest) -> Result<String, LlmError> + Send + Sync + 'static) -> Self {
        Self { script: Box::new(script), requests: Mutex::new(Vec::new()) }
    }

    /// Every request sent so far, oldest first.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The requests of one kind sent so far.
    pub fn asked(&self, ask: Ask) -> Vec<ChatRequest> {
        self.requests().into_iter().filter(|r| Ask::of(r) == ask).collect()
    }
}

impl LlmProvider for ScriptedProvider {
    fn kind(&self) -> &'static str {
        "scripted"
    }

    fn model(&self) -> &'static str {
        "scripted-1"
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        self.requests.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(request.clone());
        let text = (self.script)(Ask::of(request), request)?;
        Ok(ChatReply { text, usage: Usage::default(), model: "scripted-1".into() })
    }
}

//! The model an extraction run asks, chosen by flag, and what each of its calls cost.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Result;
use cairn_core::{CairnError, ErrorCode};
use cairn_llm::local::{LocalProvider, find as find_local, test_model_file};
use cairn_llm::openai::{OpenAiConfig, OpenAiProvider};
use cairn_llm::scripted::{Ask, ScriptedProvider};
use cairn_llm::{ChatReply, ChatRequest, LlmError, LlmProvider};
use serde::Serialize;

use super::data::Session;

/// What one call cost.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Call {
    pub seconds: f64,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// Of the prompt, the tokens the local model's cache held from the call before.
    pub reused_tokens: u64,
    /// The local model's split of the time (prompt evaluation, generation); `None` elsewhere.
    pub prompt_seconds: Option<f64>,
    pub generation_seconds: Option<f64>,
    /// The temperature asked (0 is greedy; above it, a sampled second asking).
    pub temperature: f32,
    /// The model's answer as it came (what `--details` shows beside the verdicts).
    pub answer: String,
}

enum Inner {
    Local(Box<LocalProvider>),
    Other(Box<dyn LlmProvider>),
}

/// A provider that records every call.
pub struct Timed {
    inner: Inner,
    calls: Mutex<Vec<Call>>,
}

impl Timed {
    /// The calls since the last `take`.
    pub fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}

impl LlmProvider for Timed {
    fn kind(&self) -> &'static str {
        match &self.inner {
            Inner::Local(p) => p.kind(),
            Inner::Other(p) => p.kind(),
        }
    }

    fn model(&self) -> &str {
        match &self.inner {
            Inner::Local(p) => p.model(),
            Inner::Other(p) => p.model(),
        }
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        let started = Instant::now();
        let (reply, split) = match &self.inner {
            Inner::Local(p) => {
                let (reply, t) = p.chat_timed(request)?;
                (reply, Some((t.prompt, t.generation, t.reused_tokens as u64)))
            }
            Inner::Other(p) => (p.chat(request)?, None),
        };
        let call = Call {
            seconds: started.elapsed().as_secs_f64(),
            prompt_tokens: reply.usage.input_tokens,
            output_tokens: reply.usage.output_tokens,
            reused_tokens: split.map_or(0, |(_, _, reused)| reused),
            prompt_seconds: split.map(|(p, _, _): (Duration, Duration, u64)| p.as_secs_f64()),
            generation_seconds: split.map(|(_, g, _)| g.as_secs_f64()),
            temperature: request.temperature,
            answer: reply.text.clone(),
        };
        self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(call);
        Ok(reply)
    }
}

/// Which provider, from the flags.
pub struct Choice {
    pub provider: String,
    pub model: Option<String>,
    pub model_file: Option<PathBuf>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    /// replay: the `--json --details` reports whose answers are replayed.
    pub replay: Vec<PathBuf>,
}

/// Open the provider the flags name. `scripted` is the oracle: it answers each session with its
/// own annotated facts (the scorer and the pipeline checked end to end, no model).
pub fn open(choice: &Choice, sessions: &[Session]) -> Result<Timed> {
    let inner = match choice.provider.as_str() {
        "local" => Inner::Local(Box::new(open_local(choice)?)),
        "openai" => {
            let base_url = choice.base_url.clone().ok_or_else(|| {
                CairnError::invalid("--provider openai needs --base-url")
                    .with_hint("e.g. --base-url http://localhost:11434/v1")
            })?;
            let config = OpenAiConfig {
                base_url,
                model: choice.model.clone().unwrap_or_default(),
                api_key_env: choice.api_key_env.clone(),
                timeout: Duration::from_secs(600),
            };
            let key_env = choice.api_key_env.as_deref().unwrap_or(cairn_llm::openai::DEFAULT_KEY_ENV);
            Inner::Other(Box::new(OpenAiProvider::new(&config, std::env::var(key_env).ok())?))
        }
        "scripted" => Inner::Other(Box::new(oracle(sessions))),
        "replay" => Inner::Other(Box::new(Replay::open(&choice.replay, sessions)?)),
        other => {
            return Err(CairnError::invalid(format!("unknown provider {other:?}"))
                .with_hint("use --provider local, openai, scripted or replay")
                .into());
        }
    };
    Ok(Timed { inner, calls: Mutex::new(Vec::new()) })
}

fn open_local(choice: &Choice) -> Result<LocalProvider> {
    let name = choice.model.as_deref().unwrap_or(cairn_llm::local::default_model().name);
    let spec = find_local(name).ok_or_else(|| {
        CairnError::invalid(format!("no local model {name:?}")).with_hint("cairn llm use local lists the catalogue")
    })?;
    let path = choice.model_file.clone().or_else(|| test_model_file(spec)).ok_or_else(|| {
        CairnError::invalid(format!("{name} is not installed in target/test-deps/llm"))
            .with_hint("scripts/install-test-deps.sh llm-qwen, or pass --model-file FILE")
    })?;
    Ok(LocalProvider::open(&path, spec)?)
}

/// Answers each session's calls with the answers a recorded run (`--json --details`) got, in
/// the order it got them: a change to what reads the answers (the parser, the filters, the
/// dedupe) scored in seconds on answers a model really wrote, with no model run. A request the
/// recording did not make (the pipeline now asks otherwise: a resample where there was none,
/// a call more) fails the session, never answers out of step. The windows and follow-up
/// questions must be the recording's (the prompts themselves are not recorded, so a replay with
/// other `--window-bytes` would answer one window with another's answers).
struct Replay {
    model: String,
    sessions: Vec<Recording>,
}

/// One session of a replay: its messages' texts, and its recorded calls still to answer.
struct Recording {
    texts: Vec<String>,
    calls: Mutex<std::collections::VecDeque<Call>>,
}

#[derive(serde::Deserialize)]
struct Recorded {
    model: String,
    per_session: Vec<RecordedSession>,
}

#[derive(serde::Deserialize)]
struct RecordedSession {
    id: String,
    calls: Vec<RecordedCall>,
}

#[derive(serde::Deserialize)]
struct RecordedCall {
    temperature: f32,
    answer: String,
}

impl Replay {
    fn open(files: &[PathBuf], sessions: &[Session]) -> Result<Replay> {
        if files.is_empty() {
            return Err(CairnError::invalid("--provider replay needs --replay FILE")
                .with_hint("a report written by `cairn-eval extraction --json --details`")
                .into());
        }
        let mut model = String::new();
        let mut recorded = std::collections::HashMap::new();
        for file in files {
            let text = std::fs::read_to_string(file).map_err(|e| {
                CairnError::new(ErrorCode::FileNotFound, format!("cannot read {}: {e}", file.display()))
            })?;
            let report: Recorded = serde_json::from_str(&text).map_err(|e| {
                CairnError::invalid(format!("{} is not a recorded run: {e}", file.display()))
                    .with_hint("record one with `cairn-eval extraction --json --details`")
            })?;
            model = report.model;
            for one in report.per_session {
                recorded.insert(one.id, one.calls);
            }
        }
        let sessions = sessions
            .iter()
            .filter_map(|s| {
                let calls = recorded.remove(&s.id)?;
                let calls = calls
                    .into_iter()
                    .map(|c| Call { temperature: c.temperature, answer: c.answer, ..Call::default() })
                    .collect();
                let texts = s.messages.iter().map(|m| m.text.clone()).filter(|t| !t.trim().is_empty()).collect();
                Some(Recording { texts, calls: Mutex::new(calls) })
            })
            .collect();
        Ok(Replay { model, sessions })
    }
}

impl Replay {
    /// The session whose messages the transcript shows most of. A session's later window, or a
    /// summary of its newest turns, shows some of its messages and not its first; and a short
    /// message ("Thanks.") of one session can sit inside another's transcript, so the session
    /// showing the most text of its own whole messages wins.
    fn session_shown(&self, transcript: &str) -> Option<&Recording> {
        let shown = |r: &Recording| -> usize {
            r.texts.iter().filter(|t| transcript.contains(t.as_str())).map(String::len).sum()
        };
        self.sessions.iter().map(|r| (shown(r), r)).filter(|(n, _)| *n > 0).max_by_key(|(n, _)| *n).map(|(_, r)| r)
    }
}

impl LlmProvider for Replay {
    fn kind(&self) -> &'static str {
        "replay"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        let transcript = request.without_prefill().last().map_or("", |m| m.content.as_str());
        let recording = self
            .session_shown(transcript)
            .ok_or_else(|| LlmError::Unavailable("replay: no recorded session for this request".into()))?;
        let mut calls = recording.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let call = calls
            .pop_front()
            .filter(|c| c.temperature == request.temperature)
            .ok_or_else(|| LlmError::Unavailable("replay: the recording made no such call here".into()))?;
        let usage = cairn_llm::Usage { input_tokens: 0, output_tokens: cairn_llm::estimate_tokens(&call.answer) };
        Ok(ChatReply { text: call.answer, usage, model: self.model.clone() })
    }
}

/// Answers a facts request with the annotated facts of the session whose first message the
/// transcript shows (its notes as contents), a follow-up question with no more facts, a summary
/// with the session's title, anything else with an empty answer.
fn oracle(sessions: &[Session]) -> ScriptedProvider {
    let sessions = sessions.to_vec();
    ScriptedProvider::new(move |ask, request| {
        let transcript = request.without_prefill().last().map_or("", |m| m.content.as_str());
        let session = sessions.iter().find(|s| s.messages.first().is_some_and(|m| transcript.contains(&m.text)));
        Ok(match (ask, session) {
            (Ask::Facts, Some(session)) => {
                let facts: Vec<_> = session
                    .facts
                    .iter()
                    .map(|f| serde_json::json!({"type": f.kind, "content": f.note, "message_ids": ["m1"]}))
                    .collect();
                serde_json::json!({ "facts": facts }).to_string()
            }
            // The facts said everything: the follow-up questions find no more.
            (Ask::Facts, None) | (Ask::FollowUp(_), _) => r#"{"facts": []}"#.to_owned(),
            (Ask::Summary, Some(session)) => serde_json::json!({ "summary": session.title }).to_string(),
            _ => r#"{"summary": "-"}"#.to_owned(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replay_of(sessions: &[(&str, &[&str])]) -> Replay {
        let sessions = sessions
            .iter()
            .map(|(answer, texts)| {
                let call = Call { answer: (*answer).to_owned(), ..Call::default() };
                Recording {
                    texts: texts.iter().map(|t| (*t).to_owned()).collect(),
                    calls: Mutex::new(vec![call].into()),
                }
            })
            .collect();
        Replay { model: "m".into(), sessions }
    }

    #[test]
    fn a_short_message_shared_with_another_session_does_not_name_it() {
        let replay = replay_of(&[("first", &["Thanks."]), ("second", &["The build fails on arm64.", "Thanks."])]);
        let shown = replay.session_shown("[m1] The build fails on arm64.\n[m2] Thanks.").expect("a session");
        assert_eq!(shown.calls.lock().unwrap()[0].answer, "second");
        assert!(replay.session_shown("nothing of either").is_none());
    }
}

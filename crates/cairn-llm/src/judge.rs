//! What cairn asks a model when it judges two memories (is the newer one a replacement of the
//! older?), and how it reads the answer.
//!
//! The answer is read forgivingly in form (a code fence, prose around the JSON, another
//! spelling of a relation) and strictly in content: a relation outside engram's six, a missing
//! or out-of-range confidence, is `LlmError::Malformed`. The caller then leaves the pair
//! pending: a judge that answers nonsense never records a verdict.
//!
//! Callers hand over text that is already redacted; nothing here sends anything.

use serde_json::Value;

use crate::prompt_text;
use crate::{ChatMessage, ChatRequest, LlmError};

pub(crate) const JUDGE_PROMPT: &str = include_str!("prompts/judge.md");

/// engram's verdicts, the only relations a judge may answer.
pub const RELATIONS: &[&str] = &["supersedes", "conflicts_with", "compatible", "scoped", "related", "not_conflict"];
/// Bytes of a memory shown to the judge: enough for a decision and its reasons.
pub const MAX_MEMORY_BYTES: usize = 1500;
/// The answer is one short JSON object.
const JUDGE_MAX_TOKENS: u32 = 160;

/// One memory as the judge reads it (already redacted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JudgedMemory<'a> {
    pub title: std::borrow::Cow<'a, str>,
    pub content: std::borrow::Cow<'a, str>,
    /// When it was saved (RFC 3339): the judge is told which came first anyway.
    pub saved_at: &'a str,
}

/// A verdict as the model gave it: a relation from `newer` to `older`.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeAnswer {
    /// One of [`RELATIONS`].
    pub relation: String,
    /// 0..1.
    pub confidence: f64,
    pub reason: String,
}

/// Whether a request is a judge's (test scripts answer it apart from extraction's).
pub fn is_judge_request(request: &ChatRequest) -> bool {
    request.messages.first().is_some_and(|m| m.content == JUDGE_PROMPT.trim())
}

/// The request that asks how `newer` (A) relates to `older` (B).
pub fn judge_request(newer: &JudgedMemory<'_>, older: &JudgedMemory<'_>) -> ChatRequest {
    let memory = |label: &str, m: &JudgedMemory<'_>| {
        format!(
            "Memory {label} (saved {}):\nTitle: {}\n{}\n",
            m.saved_at.get(..10).unwrap_or(m.saved_at),
            prompt_text::one_line(&m.title),
            prompt_text::cut(m.content.trim(), MAX_MEMORY_BYTES, " […]")
        )
    };
    let user = format!("{}\n{}", memory("A", newer), memory("B", older));
    ChatRequest {
        messages: vec![ChatMessage::system(JUDGE_PROMPT.trim()), ChatMessage::user(user)],
        max_tokens: JUDGE_MAX_TOKENS,
        temperature: 0.0,
        json: true,
    }
}

/// The verdict of an answer to [`judge_request`], or `Malformed` when it is not one.
pub fn parse_judge(answer: &str) -> Result<JudgeAnswer, LlmError> {
    let Value::Object(object) = crate::extract::json_value(answer)? else {
        return Err(LlmError::Malformed("the verdict is not a JSON object".into()));
    };
    let field = |keys: &[&str]| keys.iter().find_map(|k| object.get(*k).or_else(|| object.get(&capitalized(k))));
    let raw_relation = field(&["relation", "verdict"]).and_then(Value::as_str).unwrap_or_default();
    let relation = normalize_relation(raw_relation).ok_or_else(|| {
        LlmError::Malformed(format!("{:?} is not one of the six relations", prompt_text::cut(raw_relation, 40, " […]")))
    })?;
    let confidence = match field(&["confidence", "score"]) {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s.trim().trim_end_matches('%').parse::<f64>().ok(),
        _ => None,
    }
    .map(|c| if c > 1.0 && c <= 100.0 { c / 100.0 } else { c })
    .filter(|c| (0.0..=1.0).contains(c))
    .ok_or_else(|| LlmError::Malformed("the verdict has no confidence between 0 and 1".into()))?;
    let reason =
        field(&["reason", "reasoning", "why"]).and_then(Value::as_str).map(prompt_text::one_line).unwrap_or_default();
    Ok(JudgeAnswer { relation: relation.to_owned(), confidence, reason: prompt_text::cut(&reason, 300, " […]") })
}

/// A relation as a model may spell it ("Supersedes", "conflicts with", "not-conflict").
fn normalize_relation(raw: &str) -> Option<&'static str> {
    let key: String = raw.trim().to_lowercase().chars().map(|c| if c == ' ' || c == '-' { '_' } else { c }).collect();
    let key = match key.as_str() {
        "replaces" | "supersede" | "superseded" => "supersedes",
        "conflicts" | "conflict" | "contradicts" => "conflicts_with",
        "unrelated" | "no_conflict" | "different" => "not_conflict",
        other => other,
    };
    RELATIONS.iter().copied().find(|r| *r == key)
}

fn capitalized(key: &str) -> String {
    let mut chars = key.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_read_in_any_usual_form() {
        let plain = parse_judge(r#"{"relation": "supersedes", "confidence": 0.9, "reason": "A moves the port"}"#);
        assert_eq!(plain.unwrap().relation, "supersedes");
        // engram's runner asks for capitalised keys; fences and prose around are forgiven.
        let engram = parse_judge(
            "Sure:\n```json\n{\"Relation\": \"Conflicts with\", \"Confidence\": \"80%\", \"Reasoning\": \"x\"}\n```",
        );
        let engram = engram.unwrap();
        assert_eq!((engram.relation.as_str(), engram.confidence), ("conflicts_with", 0.8));
        let thought = parse_judge("<think>hmm</think>{\"relation\": \"not-conflict\", \"confidence\": 1}").unwrap();
        assert_eq!(thought.relation, "not_conflict");
    }

    #[test]
    fn nonsense_is_malformed_never_a_verdict() {
        for answer in [
            "I think A replaces B.",
            r#"{"relation": "maybe", "confidence": 0.9}"#,
            r#"{"relation": "supersedes"}"#,
            r#"{"relation": "supersedes", "confidence": 7000}"#,
            r#"{"relation": "supersedes", "confidence": -0.2}"#,
            r#"["supersedes", 0.9]"#,
        ] {
            assert!(matches!(parse_judge(answer), Err(LlmError::Malformed(_))), "{answer}");
        }
    }

    #[test]
    fn the_request_names_which_came_first_and_cuts_long_memories() {
        let long = "x".repeat(MAX_MEMORY_BYTES * 2);
        let newer =
            JudgedMemory { title: "Cache keys v5".into(), content: long.into(), saved_at: "2026-03-02T10:00:00.000Z" };
        let older = JudgedMemory {
            title: "Cache keys v4".into(),
            content: "sku:locale".into(),
            saved_at: "2026-03-01T10:00:00.000Z",
        };
        let request = judge_request(&newer, &older);
        let user = &request.messages[1].content;
        assert!(user.contains("Memory A (saved 2026-03-02)") && user.contains("Memory B (saved 2026-03-01)"));
        assert!(user.len() < MAX_MEMORY_BYTES + 400, "{}", user.len());
        assert!(request.json && request.temperature == 0.0);
    }
}

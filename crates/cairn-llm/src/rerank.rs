//! What cairn asks a model when it re-ranks search hits (deep recall), and how it reads the
//! answer.
//!
//! Listwise: the question and the first stage's candidates, numbered, in one request; the model
//! answers the numbers of the relevant ones, best first. One prefill per query is what a small
//! local model can afford (a pointwise score would read the question once per candidate).
//!
//! The answer is read forgivingly in form (a code fence, prose around the JSON, a bare array,
//! numbers as strings) and strictly in content: no number in range is `LlmError::Malformed`, and
//! the caller keeps the first stage's order. Callers hand over redacted text.

use serde_json::Value;

use crate::prompt_text;
use crate::{ChatMessage, ChatRequest, LlmError};

pub(crate) const RERANK_PROMPT: &str = include_str!("prompts/rerank.md");

/// Bytes of a candidate shown to the model: a turn or a decision's gist. Longer ones are cut;
/// the prompt's length is what a local model pays for.
pub const MAX_CANDIDATE_BYTES: usize = 280;
/// Bytes of the question.
const MAX_QUESTION_BYTES: usize = 500;
/// At most 10 numbers and the braces around them.
const RERANK_MAX_TOKENS: u32 = 48;

/// Whether a request is a re-ranker's (test scripts answer it apart from the others).
pub fn is_rerank_request(request: &ChatRequest) -> bool {
    request.messages.first().is_some_and(|m| m.content == RERANK_PROMPT.trim())
}

/// The request that asks which of `candidates` (already redacted) answer `question`; the
/// model numbers them from 1.
pub fn rerank_request(question: &str, candidates: &[String]) -> ChatRequest {
    let mut user = format!(
        "Question: {}\n\nPassages:\n",
        prompt_text::one_line(&prompt_text::cut(question, MAX_QUESTION_BYTES, "…"))
    );
    for (i, text) in candidates.iter().enumerate() {
        user.push_str(&format!(
            "[{}] {}\n",
            i + 1,
            prompt_text::one_line(&prompt_text::cut(text, MAX_CANDIDATE_BYTES, "…"))
        ));
    }
    user.push_str("\nWhich passages answer the question? JSON only.");
    ChatRequest {
        messages: vec![ChatMessage::system(RERANK_PROMPT.trim()), ChatMessage::user(user)],
        max_tokens: RERANK_MAX_TOKENS,
        temperature: 0.0,
        json: true,
    }
}

/// The candidates an answer to [`rerank_request`] names, as 0-based indexes into the `count`
/// candidates sent, best first, each once. An empty list is a valid answer (nothing helps);
/// an answer with numbers, none of them a candidate's, or with none at all, is `Malformed`.
pub fn parse_rerank(answer: &str, count: usize) -> Result<Vec<usize>, LlmError> {
    let value = crate::extract::json_value(answer)?;
    let list = match &value {
        Value::Array(items) => items,
        Value::Object(object) => ["ranking", "Ranking", "ids", "passages", "order", "relevant"]
            .iter()
            .find_map(|k| object.get(*k))
            .and_then(Value::as_array)
            .ok_or_else(|| LlmError::Malformed("the answer has no \"ranking\" list".into()))?,
        _ => return Err(LlmError::Malformed("the answer is not a JSON object or list".into())),
    };
    let mut order = Vec::with_capacity(list.len());
    for item in list {
        let number = match item {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().trim_start_matches('[').trim_end_matches(']').parse::<u64>().ok(),
            _ => None,
        };
        let index = number.and_then(|n| usize::try_from(n).ok()).filter(|n| (1..=count).contains(n)).map(|n| n - 1);
        if let Some(index) = index
            && !order.contains(&index)
        {
            order.push(index);
        }
    }
    if order.is_empty() && !list.is_empty() {
        return Err(LlmError::Malformed(format!("none of the numbers answered is a passage (1 to {count})")));
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ranking_is_read_in_any_usual_form() {
        assert_eq!(parse_rerank(r#"{"ranking": [3, 1]}"#, 5).unwrap(), vec![2, 0]);
        assert_eq!(parse_rerank("Sure:\n```json\n{\"ids\": [\"2\", \"[4]\"]}\n```", 5).unwrap(), vec![1, 3]);
        assert_eq!(parse_rerank("The best are [5, 5, 2].", 5).unwrap(), vec![4, 1], "a bare list, repeats once");
        assert_eq!(parse_rerank(r#"{"ranking": []}"#, 5).unwrap(), Vec::<usize>::new(), "nothing helps");
        // Out-of-range numbers are dropped when some are in range.
        assert_eq!(parse_rerank(r#"{"ranking": [9, 0, 2]}"#, 3).unwrap(), vec![1]);
    }

    #[test]
    fn nonsense_is_malformed_never_an_order() {
        for answer in [
            "I think passage three.",
            r#"{"ranking": [42, 0]}"#,
            r#"{"answer": "yes"}"#,
            r#""3""#,
            r#"{"ranking": "3"}"#,
        ] {
            assert!(matches!(parse_rerank(answer, 5), Err(LlmError::Malformed(_))), "{answer}");
        }
    }

    #[test]
    fn the_request_numbers_the_candidates_and_cuts_long_ones() {
        let long = "word ".repeat(MAX_CANDIDATE_BYTES);
        let request = rerank_request("where did Caroline move\nfrom?", &["Caroline moved from Sweden".into(), long]);
        let user = &request.messages[1].content;
        assert!(user.starts_with("Question: where did Caroline move from?"), "{user}");
        assert!(user.contains("[1] Caroline moved from Sweden\n[2] word word"), "{user}");
        assert!(user.len() < MAX_CANDIDATE_BYTES + 300, "{}", user.len());
        assert!(is_rerank_request(&request) && request.json && request.temperature == 0.0);
    }
}

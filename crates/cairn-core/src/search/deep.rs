//! Deep recall: a second search stage in which a language model reads the question with each
//! of the first stage's best candidates and puts the ones that answer it first.
//!
//! The rules are here: how many candidates the model reads, what of each leaves the machine
//! (redacted, cut), how its answer reorders the hits, and what the caller is told when it
//! cannot (no model, down, slow, nonsense): the first stage's order, never an error that loses
//! the results. Where the model runs and how long it may take is the caller's (the daemon's
//! engine gives a provider bounded in time, `cairn_engine::deep`).

use std::time::Instant;

use cairn_llm::rerank::{parse_rerank, rerank_request};
use cairn_llm::{LlmError, LlmProvider};
use serde::{Deserialize, Serialize};

use super::{MatchKind, SearchHit, SearchQuery};
use crate::error::ErrorCode;

/// Candidates the model reads: the first stage's best 20. A listwise prompt of 20 short
/// passages is ~1,000 tokens, what a small local model reads in a few seconds; more would
/// cost linearly for the few evidence turns that rank below 20 in the first stage.
pub const DEEP_CANDIDATES: usize = 20;
/// How long the model may take when the settings do not say (`[search] deep_timeout_ms`).
pub const DEFAULT_DEEP_TIMEOUT_MS: u64 = 60_000;

/// What deep recall did for one search, in the answer (`deep`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeepReport {
    /// Whether the hits are in the model's order (`false`: the first stage's, see `code`).
    pub reranked: bool,
    /// Candidates the model was given.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub candidates: usize,
    /// The model asked, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Milliseconds the model took (or was given before it was left behind).
    pub llm_ms: u64,
    /// Why the first stage's order was kept: `llm_not_configured`, `llm_unavailable` (down,
    /// slow, an answer cairn cannot read), `llm_refused`, `llm_budget_spent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

impl DeepReport {
    /// The first stage's order kept because no model is configured.
    pub fn no_model(candidates: usize) -> DeepReport {
        DeepReport { code: Some(ErrorCode::LlmNotConfigured.as_str().to_owned()), candidates, ..DeepReport::default() }
    }

    /// The notice a fallback adds to the answer's `notices`.
    pub fn notice(&self) -> Option<String> {
        let code = self.code.as_deref()?;
        let why = match ErrorCode::from_name(code) {
            Some(ErrorCode::LlmNotConfigured) => "no language model is configured (cairn llm use local)".to_owned(),
            Some(ErrorCode::LlmBudgetSpent) => "today's LLM token budget is spent".to_owned(),
            Some(ErrorCode::LlmRefused) => "the model refused the request".to_owned(),
            _ => format!("the model did not answer usably within {} ms", self.llm_ms),
        };
        Some(format!("deep recall skipped ({code}): {why}; hits are in the first-stage order"))
    }
}

/// The first stage's query of a deep search: at least [`DEEP_CANDIDATES`] hits, deep off.
pub fn pool_query(query: &SearchQuery) -> SearchQuery {
    SearchQuery { limit: query.effective_limit().max(DEEP_CANDIDATES), deep: Some(false), ..query.clone() }
}

/// Reorder `hits` (the first stage's, best first) by what `provider` answers to the question,
/// and cut them to the query's limit. Exact topic-key hits stay first; the model orders the
/// next [`DEEP_CANDIDATES`]; the ones it names come first, in its order (`scores.deep` is their
/// place), then the rest in the first stage's order. No provider, or one that fails: the first
/// stage's order and a report that says why.
pub fn rerank<H: AsRef<SearchHit> + AsMut<SearchHit> + Clone>(
    query: &SearchQuery,
    mut hits: Vec<H>,
    provider: Option<&dyn LlmProvider>,
) -> (Vec<H>, DeepReport) {
    let limit = query.effective_limit();
    let fixed = hits.iter().take_while(|h| h.as_ref().matched == MatchKind::TopicKey).count();
    let candidates = hits.len().saturating_sub(fixed).min(DEEP_CANDIDATES);
    let Some(provider) = provider else {
        hits.truncate(limit);
        return (hits, DeepReport::no_model(candidates));
    };
    if candidates < 2 {
        hits.truncate(limit);
        let report = DeepReport {
            reranked: true,
            candidates,
            model: Some(provider.model().to_owned()),
            ..DeepReport::default()
        };
        return (hits, report);
    }
    let texts: Vec<String> = hits[fixed..fixed + candidates].iter().map(|h| outbound(h.as_ref())).collect();
    let question = crate::text::redact_outbound(&query.text);
    let started = Instant::now();
    let answer = provider.chat(&rerank_request(&question, &texts));
    let llm_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut report =
        DeepReport { candidates, llm_ms, model: Some(provider.model().to_owned()), ..DeepReport::default() };
    let order = answer.and_then(|reply| {
        if !reply.model.is_empty() {
            report.model = Some(reply.model);
        }
        parse_rerank(&reply.text, candidates)
    });
    match order {
        Ok(order) => {
            reorder(&mut hits[fixed..fixed + candidates], &order);
            report.reranked = true;
        }
        Err(e) => {
            tracing::info!(error = %e, "deep recall fell back to the first-stage order");
            report.code = Some(fallback_code(&e).as_str().to_owned());
        }
    }
    hits.truncate(limit);
    (hits, report)
}

/// The candidates the model named first, in its order, each marked with its place; the others
/// after them, in the order they had.
fn reorder<H: AsMut<SearchHit> + Clone>(candidates: &mut [H], order: &[usize]) {
    let mut slots: Vec<Option<H>> = candidates.iter().cloned().map(Some).collect();
    let mut sorted = Vec::with_capacity(candidates.len());
    for (place, &index) in order.iter().enumerate() {
        if let Some(mut hit) = slots[index].take() {
            hit.as_mut().scores.deep = Some(u32::try_from(place + 1).unwrap_or(u32::MAX));
            sorted.push(hit);
        }
    }
    sorted.extend(slots.into_iter().flatten());
    candidates.clone_from_slice(&sorted);
}

/// What of a hit the model reads: its title and content, redacted (the prompt cuts it).
fn outbound(hit: &SearchHit) -> String {
    let o = &hit.observation;
    let text = format!("{}: {}", o.title.trim(), o.content.trim());
    crate::text::redact_outbound(&text).into_owned()
}

fn fallback_code(e: &LlmError) -> ErrorCode {
    match e {
        LlmError::NotConfigured(_) | LlmError::ModelFile(_) => ErrorCode::LlmNotConfigured,
        LlmError::Refused(_) | LlmError::ContextFull { .. } => ErrorCode::LlmRefused,
        LlmError::BudgetSpent { .. } => ErrorCode::LlmBudgetSpent,
        LlmError::Unavailable(_) | LlmError::Timeout(_) | LlmError::Malformed(_) => ErrorCode::LlmUnavailable,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cairn_llm::scripted::ScriptedProvider;
    use serde_json::json;

    use super::*;
    use crate::Core;
    use crate::ops::{Op, execute_value};
    use crate::settings::{PrivacySettings, RuleSettings};
    use crate::store::Store;

    /// A store that keeps secrets (`redact_secrets = false`), with three memories on tokens.
    fn core_keeping_secrets() -> Core {
        let rules = RuleSettings { privacy: PrivacySettings { redact_secrets: false }, ..RuleSettings::default() };
        let mut core = Core::new(Store::open_in_memory().unwrap()).with_settings(Arc::new(rules));
        for (title, content) in [
            ("Token rotation", "rotate the deploy token monthly"),
            ("Token for CI", "the CI token is ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dE3fG5"),
            ("Token scopes", "the token needs repo and workflow scopes"),
        ] {
            let save = json!({"op": "save", "args": {"title": title, "content": content, "project": "p"}});
            execute_value(&mut core, Op::from_value(save).unwrap()).unwrap();
        }
        core
    }

    #[test]
    fn what_the_model_reads_is_redacted_and_its_order_is_kept() {
        let core = core_keeping_secrets();
        let query = SearchQuery { project: Some("p".into()), ..SearchQuery::new("token") };
        let first = core.search(&pool_query(&query)).unwrap().hits;
        assert!(first.iter().any(|h| h.observation.content.contains("ghp_")), "the store keeps the secret");
        let model = ScriptedProvider::new(|_, _| Ok(r#"{"ranking": [3]}"#.into()));
        let (hits, report) = rerank(&query, first.clone(), Some(&model));
        assert!(report.reranked && report.code.is_none(), "{report:?}");
        assert_eq!(hits[0].observation.id, first[2].observation.id);
        assert_eq!(hits[0].scores.deep, Some(1));
        assert_eq!(
            hits[1..].iter().map(|h| h.observation.id).collect::<Vec<_>>(),
            vec![first[0].observation.id, first[1].observation.id]
        );
        let prompt = &model.requests()[0].messages[1].content;
        assert!(!prompt.contains("ghp_") && prompt.contains("[REDACTED:github-token]"), "{prompt}");
    }

    #[test]
    fn without_a_model_or_with_nonsense_the_first_stage_answers_cut_to_the_limit() {
        let core = core_keeping_secrets();
        let query = SearchQuery { project: Some("p".into()), limit: 2, ..SearchQuery::new("token") };
        let first = core.search(&pool_query(&query)).unwrap().hits;
        assert_eq!(first.len(), 3, "the pool is wider than the limit");
        let (hits, report) = rerank(&query, first.clone(), None);
        assert_eq!((hits.len(), report.code.as_deref()), (2, Some("llm_not_configured")));
        assert!(report.notice().unwrap().contains("first-stage order"));
        let nonsense = ScriptedProvider::new(|_, _| Ok("passage two, surely".into()));
        let (hits, report) = rerank(&query, first.clone(), Some(&nonsense));
        assert_eq!(
            hits.iter().map(|h| h.observation.id).collect::<Vec<_>>(),
            vec![first[0].observation.id, first[1].observation.id]
        );
        assert_eq!(report.code.as_deref(), Some("llm_unavailable"));
    }
}

//! Supersession judged on arrival: every new memory (saved, extracted, synced, imported) is
//! compared with its nearest neighbours of the same project and scope, in the background.
//!
//! A pair is judged by the first judge that is sure: the certain rules (the same topic key in
//! two rows, which only sync or an import makes; the same text saved again), then the
//! configured model (`cairn_llm::judge`: redacted text, a JSON verdict, a confidence). When
//! neither is sure, the pair is left `pending` for an agent or a person (`mem_judge`). A model
//! that is down or answers nonsense never records a verdict: the pair stays pending.
//!
//! Who judged is kept on the relation row (`marked_by_kind`: `rule`, `llm`, `agent`, `person`;
//! `marked_by_model`, `confidence`, `reason`), and rows travel with sync like any relation, so
//! verdicts of two machines on one pair are both kept (engram's multi-actor rule).
//!
//! Where the work runs is the caller's: [`run_arrivals`] and [`run_scan`] drive any
//! [`JudgeAccess`], a [`Core`] in-process or the daemon's engine (reads on a reader, verdicts
//! through the writer, the model called in between, holding neither).

use std::collections::HashSet;

use cairn_llm::judge::{JudgedMemory, judge_request, parse_judge};
use cairn_llm::{LlmError, LlmProvider};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::Observation;
use crate::owners::Core;
pub use crate::store::judging::{JudgeKind, Pair, PairOutcome, SKIPPED_KINDS, Verdict};
use crate::text::normalized_hash;

/// Neighbours judged per arriving memory.
pub const NEIGHBOURS: usize = 5;
/// Least word overlap for a neighbour worth a model's look: a replacement "in other words"
/// shares few. Below [`crate::relations::CANDIDATE_MIN_SCORE`] a pair is only judged by a
/// model, never left pending for a person (too many would be noise).
pub const JUDGE_MIN_SCORE: f64 = 0.12;
/// A model's verdict below this confidence is doubt: the pair stays pending.
pub const LLM_MIN_CONFIDENCE: f64 = 0.6;
/// Memories taken per pass of the background judge.
pub const ARRIVALS_PER_PASS: usize = 32;

/// The certain rules: `Some` only when the verdict cannot be wrong.
pub fn rule_verdict(pair: &Pair) -> Option<Verdict> {
    let (newer, older) = (&pair.newer, &pair.older);
    let rule = |reason: &str| Verdict {
        relation: "supersedes".into(),
        confidence: 1.0,
        reason: reason.into(),
        kind: JudgeKind::Rule,
        model: None,
    };
    if newer.topic_key.is_some() && newer.topic_key == older.topic_key {
        // One project and scope keep one memory per topic key; two rows of one key come from
        // two machines or an import, and the newer is the key's revision.
        return Some(rule("the same topic key, saved later"));
    }
    if normalized_hash(&newer.content) == normalized_hash(&older.content) && newer.title.trim() == older.title.trim() {
        return Some(rule("the same memory, saved again"));
    }
    None
}

/// The model's verdict on a pair: `Ok(None)` when it is unsure, `Err` when it is down or
/// answered nonsense (both leave the pair pending).
pub fn ask_model(provider: &dyn LlmProvider, pair: &Pair) -> std::result::Result<PairOutcome, LlmError> {
    let (newer, older) = (outbound(&pair.newer), outbound(&pair.older));
    let reply = provider.chat(&judge_request(&newer, &older))?;
    let answer = parse_judge(&reply.text)?;
    let model = if reply.model.is_empty() { provider.model().to_owned() } else { reply.model };
    if answer.confidence < LLM_MIN_CONFIDENCE {
        let reason = format!("unsure ({:.2}): {} {}", answer.confidence, answer.relation, answer.reason);
        return Ok(PairOutcome::Unsure { model, reason });
    }
    Ok(PairOutcome::Judged(Verdict {
        relation: answer.relation,
        confidence: answer.confidence,
        reason: answer.reason,
        kind: JudgeKind::Llm,
        model: Some(model),
    }))
}

/// A memory as it may leave the machine: `<private>` and secrets redacted.
fn outbound(o: &Observation) -> JudgedMemory<'_> {
    JudgedMemory {
        title: crate::text::redact_outbound(&o.title),
        content: crate::text::redact_outbound(&o.content),
        saved_at: &o.created_at,
    }
}

/// Judge one pair: the rules, then the model when there is one. A model that fails leaves
/// the pair pending and says why (`Err` carries it to the caller's report).
pub fn judge_pair(pair: &Pair, provider: Option<&dyn LlmProvider>) -> (PairOutcome, Option<LlmError>) {
    if let Some(verdict) = rule_verdict(pair) {
        return (PairOutcome::Judged(verdict), None);
    }
    let unjudged = if pair.strong { PairOutcome::Pending } else { PairOutcome::Dropped };
    let Some(provider) = provider else { return (unjudged, None) };
    match ask_model(provider, pair) {
        Ok(outcome) => (outcome, None),
        Err(e) => (unjudged, Some(e)),
    }
}

/// Whether a model error means the model cannot answer now (stop asking it this pass), as
/// opposed to one bad answer.
fn judge_is_down(e: &LlmError) -> bool {
    !matches!(e, LlmError::Malformed(_) | LlmError::Refused(_) | LlmError::ContextFull { .. })
}

/// What a judging pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JudgeReport {
    /// Memories looked at.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub memories: usize,
    /// Pairs judged by a rule or a model.
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub judged: usize,
    /// Pairs left pending (no judge sure, or none configured).
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub pending: usize,
    /// Model calls that failed (the pairs stay pending).
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub errors: usize,
    /// Why the pass stopped asking the model, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
}

/// How a judging pass reads and writes.
pub trait JudgeAccess {
    /// Live memories past the judge's mark and the highest id looked at.
    fn arrivals(&mut self, limit: usize) -> Result<(Vec<Observation>, Option<i64>)>;
    /// The pairs of `memory` with its nearest neighbours that still need a verdict; `arrived`:
    /// only the neighbours that were there when it arrived (later ones pair with it themselves).
    fn pairs_of(&mut self, memory: &Observation, model: Option<&str>, arrived: bool) -> Result<Vec<Pair>>;
    /// Record the outcomes and move the mark (one transaction).
    fn record(&mut self, outcomes: Vec<(Pair, PairOutcome)>, through: Option<i64>) -> Result<usize>;
}

/// One pass over the memories that arrived since the last: each paired with its neighbours,
/// each pair judged and recorded, the mark moved past them.
pub fn run_arrivals(
    access: &mut dyn JudgeAccess,
    provider: Option<&dyn LlmProvider>,
    stop: &dyn Fn() -> bool,
) -> Result<JudgeReport> {
    let mut report = JudgeReport::default();
    let mut provider = provider;
    loop {
        let (memories, through) = access.arrivals(ARRIVALS_PER_PASS)?;
        let Some(through) = through else { return Ok(report) };
        let mut outcomes = Vec::new();
        for memory in &memories {
            report.memories += 1;
            for pair in access.pairs_of(memory, provider.map(LlmProvider::model), true)? {
                let (outcome, error) = judge_pair(&pair, provider);
                tally(&mut report, &outcome, error.as_ref());
                if let Some(e) = error.filter(judge_is_down) {
                    // Down: the rest of the pass goes without it (rules and pending only).
                    report.stopped = Some(e.to_string());
                    provider = None;
                }
                outcomes.push((pair, outcome));
            }
        }
        access.record(outcomes, Some(through))?;
        if stop() {
            return Ok(report);
        }
    }
}

fn tally(report: &mut JudgeReport, outcome: &PairOutcome, error: Option<&LlmError>) {
    match outcome {
        PairOutcome::Judged(_) => report.judged += 1,
        PairOutcome::Unsure { .. } | PairOutcome::Pending => report.pending += 1,
        PairOutcome::Dropped => {}
    }
    if let Some(e) = error {
        report.errors += 1;
        tracing::debug!(error = %e, "judge: the model failed on a pair; it stays pending");
    }
}

/// The pairs a semantic scan of a project would judge, in a stable order: every memory with
/// its neighbours, each pair once, those without a verdict.
pub fn scan_pairs(
    access: &mut dyn ScanAccess,
    project: &str,
    since: Option<&str>,
    model: Option<&str>,
) -> Result<Vec<Pair>> {
    let mut seen = HashSet::new();
    let mut pairs = Vec::new();
    for memory in access.scan_memories(project, since)? {
        for pair in access.pairs_of(&memory, model, false)? {
            if seen.insert(pair.key()) {
                pairs.push(pair);
            }
        }
    }
    Ok(pairs)
}

/// What a semantic scan reads beyond a judging pass.
pub trait ScanAccess: JudgeAccess {
    fn scan_memories(&mut self, project: &str, since: Option<&str>) -> Result<Vec<Observation>>;
}

impl Core {
    /// The neighbours of `memory` in its project and scope: the lexical candidates (shared
    /// words, [`crate::relations::CANDIDATE_MIN_SCORE`]) and, when vectors exist, the nearest
    /// by meaning (about the same thing on the model's scale,
    /// [`crate::search::currency::same_thing_cosine`]); the pairs not settled yet.
    pub fn judge_pairs_of(&mut self, memory: &Observation, model: Option<&str>, arrived: bool) -> Result<Vec<Pair>> {
        let floor = if model.is_some() { JUDGE_MIN_SCORE } else { crate::relations::CANDIDATE_MIN_SCORE };
        let mut near: Vec<(i64, bool)> = self
            .store
            .lexical_neighbours(memory, NEIGHBOURS, floor, self.index.as_ref())?
            .iter()
            .map(|(score, o)| (o.id, *score >= crate::relations::CANDIDATE_MIN_SCORE))
            .collect();
        if let Some(semantic) = &self.semantic
            && let Some(vector) = self.store.stored_vector(memory.id, semantic.model_id())?
        {
            let floor = crate::search::currency::same_thing_cosine(semantic);
            let close = semantic.nearest(self.store.conn(), &vector, NEIGHBOURS * 4 + 1);
            near.extend(close.into_iter().filter(|(_, cosine)| *cosine >= floor).map(|(id, _)| (id, true)));
        }
        if arrived {
            near.retain(|(id, _)| *id < memory.id);
        }
        // Strong wins when both rankings found a memory.
        let mut strength: std::collections::HashMap<i64, bool> = std::collections::HashMap::new();
        for (id, strong) in &near {
            *strength.entry(*id).or_default() |= *strong;
        }
        let mut seen = HashSet::new();
        let ids: Vec<i64> = near.iter().map(|(id, _)| *id).filter(|id| seen.insert(*id)).collect();
        let mut pairs = Vec::new();
        for other in self.store.same_place(memory, &ids)?.into_iter().take(NEIGHBOURS * 2) {
            if self.store.pair_settled(&memory.sync_id, &other.sync_id, model)? {
                continue;
            }
            let strong = strength.get(&other.id).copied().unwrap_or(false);
            pairs.push(Pair::of(memory.clone(), other, strong));
        }
        Ok(pairs)
    }
}

impl JudgeAccess for Core {
    fn arrivals(&mut self, limit: usize) -> Result<(Vec<Observation>, Option<i64>)> {
        self.store.judge_arrivals(limit)
    }

    fn pairs_of(&mut self, memory: &Observation, model: Option<&str>, arrived: bool) -> Result<Vec<Pair>> {
        self.judge_pairs_of(memory, model, arrived)
    }

    fn record(&mut self, outcomes: Vec<(Pair, PairOutcome)>, through: Option<i64>) -> Result<usize> {
        self.store.record_judgments(&outcomes, through)
    }
}

impl ScanAccess for Core {
    fn scan_memories(&mut self, project: &str, since: Option<&str>) -> Result<Vec<Observation>> {
        self.store.scan_memories(project, since)
    }
}

/// A semantic scan (`cairn conflicts scan --semantic`, `POST /conflicts/scan` with
/// `semantic`): the project's pairs without a verdict, from `offset`, at most `max_semantic`,
/// each judged by the rules and the model and (unless a dry run) recorded at once, so a scan
/// cut short keeps what it judged. `progress` hears (done, of) after each pair.
pub fn run_scan(
    access: &mut dyn ScanAccess,
    provider: &dyn LlmProvider,
    req: &super::ScanRequest,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<super::ScanResult> {
    let project = crate::text::normalize_project(&req.project).0;
    if project.is_empty() {
        return Err(crate::error::CairnError::empty("project"));
    }
    let since = super::checked_since(req.since.as_deref())?;
    let memories = access.scan_memories(&project, since.as_deref())?.len();
    let pairs = scan_pairs(access, &project, since.as_deref(), Some(provider.model()))?;
    let offset = req.offset.unwrap_or(0).min(pairs.len());
    let cap = req.max_semantic.unwrap_or(super::DEFAULT_MAX_SEMANTIC).max(1);
    let batch: Vec<Pair> = pairs.iter().skip(offset).take(cap).cloned().collect();
    let mut result = super::ScanResult {
        project,
        inspected: memories,
        candidates_found: pairs.len(),
        dry_run: !req.apply,
        ..super::ScanResult::default()
    };
    let mut still_listed = 0;
    let mut processed = 0;
    for pair in batch {
        let (outcome, error) = judge_pair(&pair, Some(provider));
        processed += 1;
        match (&outcome, &error) {
            (PairOutcome::Judged(_), _) => result.semantic_judged += 1,
            (_, Some(_)) => result.semantic_errors += 1,
            _ => result.semantic_skipped += 1,
        }
        // What stays in the list of pairs to judge: everything in a dry run, the failed ones
        // otherwise (judged and doubted pairs are settled once recorded).
        if !req.apply || error.is_some() || outcome == PairOutcome::Dropped {
            still_listed += 1;
        }
        if req.apply {
            result.inserted += access.record(vec![(pair, outcome)], None)?;
        }
        progress(processed, pairs.len() - offset);
        if let Some(e) = error.filter(judge_is_down) {
            result.warning = Some(format!("stopped: the judge is down ({e}); the pairs left stay pending"));
            break;
        }
    }
    result.next_offset = offset + still_listed;
    result.semantic_remaining = pairs.len().saturating_sub(offset + processed);
    result.capped = result.semantic_remaining > 0;
    Ok(result)
}

/// A semantic scan asked of a store with no model at hand.
pub fn no_model_here() -> crate::error::CairnError {
    crate::error::CairnError::new(
        crate::error::ErrorCode::LlmNotConfigured,
        "a semantic scan needs a model to judge with",
    )
    .with_hint("cairn llm use local (or openai, anthropic, agent-cli), then run it with the daemon (cairn serve)")
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;

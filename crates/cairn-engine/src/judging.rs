//! The `cairn-judge` worker: every memory that arrives (saved, extracted, synced, imported,
//! spooled) judged against its neighbours in the background (`cairn_core::relations::judge`
//! holds the rules), and the semantic scans of `cairn conflicts scan --semantic`.
//!
//! A save never waits for it: the writer only wakes it after a commit. Each pass reads the
//! arrivals and their neighbours on a reader, asks the model (when one is configured) on this
//! thread at the lowest priority, and records the verdicts and its mark through the writer, in
//! turn with every other write. With semantic search on, an arrival waits (at most
//! [`EMBED_WAIT`]) for its vector, so its neighbours by meaning are found too.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use cairn_core::Result;
use cairn_core::model::Observation;
use cairn_core::relations::judge::{
    JudgeAccess, JudgeReport, Pair, PairOutcome, ScanAccess, no_model_here, run_arrivals, run_scan,
};
use cairn_core::relations::{ScanRequest, ScanResult};

use crate::Engine;

/// The worker's name in `/health`.
pub const JUDGE_WORKER: &str = "cairn-judge";
/// Longest an arrival waits for its vector before it is judged on its words alone.
pub const EMBED_WAIT: Duration = Duration::from_secs(30);

impl Engine {
    /// Start the `cairn-judge` worker: a pass after each commit (and every `every`), judging
    /// what arrived with the rules and the model in use (none: rules, and pending for the
    /// rest). `false` for an in-memory store, a second call, or a thread that could not start.
    pub fn start_judging(self: &Arc<Self>, every: Duration) -> bool {
        let Some(woken) = self.judge_woken.lock().unwrap_or_else(PoisonError::into_inner).take() else {
            return false;
        };
        let engine = Arc::downgrade(self);
        let alive = self.workers.alive();
        self.workers.spawn_loop(JUDGE_WORKER, move || {
            crate::workers::run_in_background();
            let mut waiting = Waiting::default();
            while alive.get() {
                let Some(engine) = engine.upgrade() else { return };
                let stop = || !alive.get();
                match engine.judge_pass(&mut waiting, &stop) {
                    Ok(report) if report != JudgeReport::default() => tracing::info!(?report, "judge pass"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "judge pass failed; retrying at the next"),
                }
                drop(engine);
                if let Err(mpsc::RecvTimeoutError::Disconnected) = woken.recv_timeout(every) {
                    return;
                }
            }
        })
    }

    /// One judging pass now, on the calling thread (blocking; tests and tools).
    pub fn judge_now(&self) -> Result<JudgeReport> {
        self.judge_pass(&mut Waiting::default(), &|| false)
    }

    fn judge_pass(&self, waiting: &mut Waiting, stop: &dyn Fn() -> bool) -> Result<JudgeReport> {
        let provider = self.llm();
        let _one_at_a_time = self.judging.lock().unwrap_or_else(PoisonError::into_inner);
        run_arrivals(&mut EngineJudge { engine: self, waiting }, provider.as_deref(), stop)
    }

    /// A semantic scan with the model in use (`cairn conflicts scan --semantic`): pairs read on
    /// a reader, the model asked on this thread, each verdict recorded through the writer.
    pub fn scan_semantic(&self, req: &ScanRequest, progress: &mut dyn FnMut(usize, usize)) -> Result<ScanResult> {
        self.touch();
        let provider = self.llm().ok_or_else(no_model_here)?;
        let mut waiting = Waiting::default();
        run_scan(&mut EngineJudge { engine: self, waiting: &mut waiting }, provider.as_ref(), req, progress)
    }
}

/// When each arrival without a vector was first met.
#[derive(Default)]
struct Waiting(HashMap<i64, Instant>);

/// The engine as the judge's access: reads on a reader, writes through the writer.
struct EngineJudge<'a> {
    engine: &'a Engine,
    waiting: &'a mut Waiting,
}

impl EngineJudge<'_> {
    /// Whether `memory` should wait for its vector: a model is embedding, the memory has none
    /// yet, and it has not waited [`EMBED_WAIT`].
    fn waits_for_vector(&mut self, memory: &Observation) -> Result<bool> {
        let Some(semantic) = self.engine.semantic().filter(|s| s.embedder().is_some()) else { return Ok(false) };
        let (id, model) = (memory.id, semantic.model_id().to_owned());
        let has = self.engine.with_reader(move |core| Ok(core.store.stored_vector(id, &model)?.is_some()))?;
        if has {
            self.waiting.0.remove(&memory.id);
            return Ok(false);
        }
        let first = *self.waiting.0.entry(memory.id).or_insert_with(Instant::now);
        Ok(first.elapsed() < EMBED_WAIT)
    }
}

impl JudgeAccess for EngineJudge<'_> {
    fn arrivals(&mut self, limit: usize) -> Result<(Vec<Observation>, Option<i64>)> {
        let (mut memories, through) = self.engine.with_reader(move |core| core.store.judge_arrivals(limit))?;
        for (i, memory) in memories.iter().enumerate() {
            if self.waits_for_vector(memory)? {
                // Judged at a later pass, with the ones after it; those before it go now.
                let through = (memory.id > 1).then(|| memory.id - 1).filter(|_| i > 0);
                memories.truncate(i);
                return Ok((memories, through));
            }
        }
        Ok((memories, through))
    }

    fn pairs_of(&mut self, memory: &Observation, model: Option<&str>, arrived: bool) -> Result<Vec<Pair>> {
        let (memory, model) = (memory.clone(), model.map(str::to_owned));
        self.engine.with_reader(move |core| core.judge_pairs_of(&memory, model.as_deref(), arrived))
    }

    fn record(&mut self, outcomes: Vec<(Pair, PairOutcome)>, through: Option<i64>) -> Result<usize> {
        self.engine.with_writer(move |core| core.store.record_judgments(&outcomes, through))
    }
}

impl ScanAccess for EngineJudge<'_> {
    fn scan_memories(&mut self, project: &str, since: Option<&str>) -> Result<Vec<Observation>> {
        let (project, since) = (project.to_owned(), since.map(str::to_owned));
        self.engine.with_reader(move |core| core.store.scan_memories(&project, since.as_deref()))
    }
}

/// Keeps judging passes (the worker's, `judge_now`) from overlapping.
pub(crate) type JudgingLock = Mutex<()>;

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::ops::Op;
    use cairn_llm::scripted::ScriptedProvider;

    fn save(title: &str, content: &str) -> Op {
        Op::from_value(serde_json::json!({"op": "save", "args": {"title": title, "content": content, "project": "p"}}))
            .unwrap()
    }

    /// The worker, woken by the writer's commits, judges what was saved (a save never waits
    /// for it), and the verdict carries the model that gave it.
    #[test]
    fn the_worker_judges_what_arrives_after_the_commit() {
        let data = tempfile::tempdir().unwrap();
        let engine = Engine::open(&data.path().join("cairn.db")).unwrap();
        engine.set_llm(Some(Arc::new(ScriptedProvider::new(|_, _| {
            Ok(r#"{"relation": "supersedes", "confidence": 0.95, "reason": "moved"}"#.into())
        }))));
        assert!(engine.start_judging(Duration::from_secs(60)));
        assert!(!engine.start_judging(Duration::from_secs(60)), "one worker per engine");
        engine.execute_blocking(save("Deploy target is Heroku", "we deploy the API to Heroku")).unwrap();
        engine.execute_blocking(save("Deploy target is Fly.io", "we deploy the API to Fly.io now")).unwrap();
        // Only a guard against a hang, not a measure of speed.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let stats = engine.with_writer(|core| core.store.relation_stats(Some("p"))).unwrap();
            if stats.by_relation.get("supersedes") == Some(&1) {
                break;
            }
            assert!(Instant::now() < deadline, "nothing judged: {stats:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(engine.workers().iter().any(|w| w.name == JUDGE_WORKER && w.state == "running"));
        engine.stop(Duration::from_secs(10));
    }

    #[test]
    fn a_semantic_scan_without_a_model_names_the_fix() {
        let engine = Engine::in_memory().unwrap();
        let req = ScanRequest { project: "p".into(), semantic: true, ..ScanRequest::default() };
        let err = engine.execute_blocking(Op::ScanRelations(req)).unwrap_err();
        assert_eq!(err.code, cairn_core::ErrorCode::LlmNotConfigured);
    }
}

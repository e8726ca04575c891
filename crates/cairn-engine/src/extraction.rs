//! The `cairn-extract` worker: archived conversations turned into memories by the configured
//! model, in the background (`cairn_core::extract` holds the rules).
//!
//! Each pass reads its work on a reader connection, calls the model on this thread (at the
//! lowest priority, like the other backfills: a local model's inference is seconds of CPU) and
//! saves each window through the writer, in turn with every other write. Hooks and the plugin
//! never wait for it. Passes never overlap: `cairn extract` (through [`Engine::extract_now`])
//! waits for the worker's pass to end, then runs its own.

use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use cairn_core::extract::{
    CommitOutcome, ExtractionAccess, ExtractionCommit, ExtractionPolicy, ExtractionReport, Selection, SessionWork,
    run_pass,
};
use cairn_core::{CairnError, Core, ErrorCode, Result};
use cairn_llm::LlmProvider;

use crate::Engine;

/// The worker's name in `/health`.
pub const EXTRACT_WORKER: &str = "cairn-extract";
/// The worker that takes up a model chosen while the daemon runs, in `/health`.
pub const LLM_WATCH_WORKER: &str = "cairn-llm-watch";

/// The engine's hold on extraction: the model in use (none: extraction is off) and the lock
/// that keeps passes from overlapping.
#[derive(Default)]
pub(crate) struct Extraction {
    provider: RwLock<Option<Arc<dyn LlmProvider>>>,
    passing: Mutex<()>,
    policy: RwLock<ExtractionPolicy>,
}

impl Engine {
    /// Use this model from now on (`None`: extraction off). The daemon sets it from `[llm]` at
    /// start and again when `cairn llm use` changes it.
    pub fn set_llm(&self, provider: Option<Arc<dyn LlmProvider>>) {
        *self.extraction.provider.write().unwrap_or_else(PoisonError::into_inner) = provider;
    }

    /// The model in use, if any.
    pub fn llm(&self) -> Option<Arc<dyn LlmProvider>> {
        self.extraction.provider.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The model in use, or the error that says how to configure one.
    pub fn require_llm(&self) -> Result<Arc<dyn LlmProvider>> {
        self.llm().ok_or_else(|| {
            CairnError::new(ErrorCode::LlmNotConfigured, "no model is configured to extract memories")
                .with_hint("cairn llm use local (or openai, anthropic, agent-cli)")
        })
    }

    /// Start the `cairn-extract` worker: a pass over the conversations that are due every
    /// `every`, while a model is configured (it idles while none is). `false` when the thread
    /// could not start.
    pub fn start_extraction(self: &Arc<Self>, policy: ExtractionPolicy, every: Duration) -> bool {
        *self.extraction.policy.write().unwrap_or_else(PoisonError::into_inner) = policy;
        let engine = Arc::downgrade(self);
        let alive = self.workers.alive();
        self.workers.spawn_loop(EXTRACT_WORKER, move || {
            crate::workers::run_in_background();
            let mut started = false;
            while alive.get() {
                let Some(engine) = engine.upgrade() else { return };
                if engine.llm().is_some() {
                    if !started {
                        // Extraction is on from now: older conversations wait for `cairn extract`.
                        started = engine.with_writer(|core| core.store.start_extraction()).is_ok();
                    }
                    let stop = || !alive.get();
                    match engine.extract_pass(&Selection::Due, &stop) {
                        Ok(report) if report != ExtractionReport::default() => {
                            tracing::info!(?report, "extraction pass");
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "extraction pass failed; retrying at the next"),
                    }
                }
                drop(engine);
                crate::workers::sleep_while(&alive, every);
            }
        })
    }

    /// Run `look` on a worker of its own (`cairn-llm-watch`) at once, then every `every`: how
    /// the daemon takes up `cairn llm use …` / `cairn llm off` without a restart. `look` reads
    /// the settings (the binary's business) and hands a changed model to [`Engine::set_llm`];
    /// opening a local model takes seconds, which this thread spends, never a pass's. `false`
    /// when the thread could not start.
    pub fn watch_llm(self: &Arc<Self>, every: Duration, mut look: impl FnMut(&Engine) + Send + 'static) -> bool {
        let engine = Arc::downgrade(self);
        let alive = self.workers.alive();
        self.workers.spawn_loop(LLM_WATCH_WORKER, move || {
            while alive.get() {
                let Some(engine) = engine.upgrade() else { return };
                look(&engine);
                drop(engine);
                crate::workers::sleep_while(&alive, every);
            }
        })
    }

    /// One pass now over `selection`, on the calling thread (blocking; not from async code),
    /// after any pass already running.
    pub fn extract_now(&self, selection: &Selection) -> Result<ExtractionReport> {
        self.touch();
        self.require_llm()?;
        self.extract_pass(selection, &|| false)
    }

    fn extract_pass(&self, selection: &Selection, stop: &dyn Fn() -> bool) -> Result<ExtractionReport> {
        let provider = self.require_llm()?;
        let policy = self.extraction.policy.read().unwrap_or_else(PoisonError::into_inner).clone();
        let _one_at_a_time = self.extraction.passing.lock().unwrap_or_else(PoisonError::into_inner);
        run_pass(&mut EngineAccess(self), provider.as_ref(), selection, &policy, stop)
    }

    /// Run `f` on a pooled reader's whole context (the writer's for an in-memory store).
    pub fn with_reader<T: Send + 'static>(&self, f: impl FnOnce(&mut Core) -> Result<T> + Send + 'static) -> Result<T> {
        if self.path().is_none() {
            return self.with_writer(f);
        }
        let mut reader = self.take_reader()?;
        let result = f(&mut reader);
        self.return_reader(reader);
        result
    }
}

/// The engine as extraction's access: reads on a reader, saves through the writer.
struct EngineAccess<'a>(&'a Engine);

impl ExtractionAccess for EngineAccess<'_> {
    fn plan(&mut self, selection: &Selection, policy: &ExtractionPolicy) -> Result<Vec<SessionWork>> {
        let (selection, policy) = (selection.clone(), policy.clone());
        self.0.with_reader(move |core| core.extraction_plan(&selection, &policy))
    }

    fn commit(&mut self, commit: ExtractionCommit) -> Result<CommitOutcome> {
        self.0.with_writer(move |core| core.store.commit_extraction(&commit))
    }

    fn record_failure(
        &mut self,
        session_id: &str,
        code: ErrorCode,
        message: &str,
        policy: &ExtractionPolicy,
    ) -> Result<()> {
        let (session_id, message, policy) = (session_id.to_owned(), message.to_owned(), policy.clone());
        self.0.with_writer(move |core| core.store.record_extraction_failure(&session_id, code, &message, &policy))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::history::model::*;
    use cairn_core::history::store::SourceRef;
    use cairn_core::ops::Op;
    use cairn_llm::scripted::{Ask, ScriptedProvider};

    const SESSION: &str = "ses_worker";

    /// A conversation of one turn whose messages were written `at`, in the archive beside `db`.
    fn archive(db: &std::path::Path, at: &str) {
        let at = at.to_owned();
        let mut history = cairn_core::history::HistoryDb::open(&crate::history::history_db_path(db)).unwrap();
        let user = HistoryMessage::new(SESSION, "msg_1", HistoryRole::User, 1, &at);
        let answer = HistoryMessage::new(SESSION, "msg_2", HistoryRole::Assistant, 2, &at);
        let text = |m: &HistoryMessage, t: &str| HistoryPart {
            text: Some(t.into()),
            ..HistoryPart::new(SESSION, &m.id, &format!("p_{}", m.id), 0, PartKind::Text)
        };
        let batch = IngestBatch {
            sessions: vec![HistorySession {
                project: Some("shop".into()),
                ..HistorySession::new(SESSION, HistoryHost::ClaudeCode, &at, &at)
            }],
            parts: vec![text(&user, "Which port does the API use?"), text(&answer, "It listens on 8080.")],
            messages: vec![user, answer],
            ..IngestBatch::default()
        };
        let source = SourceRef { key: "t.jsonl".into(), host: HistoryHost::ClaudeCode };
        history.apply(&source, None, &batch, &Cursor::default()).unwrap();
    }

    fn port_fact() -> Arc<ScriptedProvider> {
        Arc::new(ScriptedProvider::new(|ask, _| {
            Ok(match ask {
                Ask::Facts => r#"{"facts": [{"type": "config", "content": "The API listens on port 8080."}]}"#.into(),
                _ => r#"{"summary": "s"}"#.into(),
            })
        }))
    }

    fn memories(engine: &Engine) -> String {
        let op = Op::from_value(serde_json::json!({"op": "search", "args": {"query": "port 8080"}})).unwrap();
        engine.execute_blocking(op).unwrap().into_value().unwrap().to_string()
    }

    #[test]
    fn without_a_model_extract_now_names_the_fix() {
        let engine = Engine::in_memory().unwrap();
        let err = engine.extract_now(&Selection::All).unwrap_err();
        assert_eq!(err.code, ErrorCode::LlmNotConfigured);
        assert!(err.hint.unwrap_or_default().contains("cairn llm use"));
    }

    #[test]
    fn extract_now_saves_through_the_writer() {
        let data = tempfile::tempdir().unwrap();
        let db = data.path().join("cairn.db");
        let engine = Engine::open(&db).unwrap();
        archive(&db, "2026-03-01T10:00:00.000Z");
        engine.set_llm(Some(port_fact()));
        let report = engine.extract_now(&Selection::All).unwrap();
        assert_eq!((report.sessions, report.facts_saved), (1, 1));
        assert!(memories(&engine).contains(SESSION), "found by search with its session id");
        engine.stop(Duration::from_secs(10));
    }

    #[test]
    fn the_worker_extracts_conversations_active_since_a_model_was_set() {
        let data = tempfile::tempdir().unwrap();
        let db = data.path().join("cairn.db");
        let engine = Engine::open(&db).unwrap();
        // A conversation written the moment extraction came on (not before it), and no cooldown.
        let since = engine.with_writer(|core| core.store.start_extraction()).unwrap();
        archive(&db, &since);
        let provider = port_fact();
        engine.set_llm(Some(provider.clone()));
        let policy = ExtractionPolicy { cooldown: time::Duration::ZERO, ..ExtractionPolicy::default() };
        assert!(engine.start_extraction(policy, Duration::from_millis(20)));
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !memories(&engine).contains("8080") {
            assert!(std::time::Instant::now() < deadline, "the worker saved nothing");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(engine.workers().iter().any(|w| w.name == EXTRACT_WORKER && w.state == "running"));
        engine.stop(Duration::from_secs(10));
    }
}

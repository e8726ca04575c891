//! Deep recall in the daemon: a search whose hits a language model re-ranks
//! (`cairn_core::search::deep` holds the rules).
//!
//! The first stage runs as any search, on a reader; the model is then asked on the calling
//! (blocking) thread, holding no connection, through a provider bounded in time: past
//! `[search] deep_timeout_ms`, or while an earlier deep call is still with the model, the
//! search answers the first stage's order at once and says why. A call left behind finishes
//! on its own thread and its answer is dropped; only one runs at a time, so a slow model never
//! piles up calls.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use cairn_core::Result;
use cairn_core::ops::{Op, SearchResponse};
use cairn_core::search::SearchQuery;
use cairn_core::search::deep::{self, DEFAULT_DEEP_TIMEOUT_MS};
use cairn_llm::{ChatReply, ChatRequest, LlmError, LlmProvider};

use crate::Engine;

/// What deep recall does when a search does not say, and how long it waits for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeepPolicy {
    /// `[search] deep`: re-rank every search that does not say `deep=false`.
    pub by_default: bool,
    /// `[search] deep_timeout_ms`.
    pub timeout: Duration,
}

impl Default for DeepPolicy {
    fn default() -> Self {
        DeepPolicy { by_default: false, timeout: Duration::from_millis(DEFAULT_DEEP_TIMEOUT_MS) }
    }
}

/// The engine's hold on deep recall.
#[derive(Default)]
pub(crate) struct Deep {
    policy: RwLock<DeepPolicy>,
    /// A model call of deep recall is running (maybe one a search already gave up on).
    busy: Arc<AtomicBool>,
}

impl Engine {
    /// Deep recall's default and time budget from now on (the daemon sets them from `[search]`).
    pub fn set_deep_policy(&self, policy: DeepPolicy) {
        *self.deep.policy.write().unwrap_or_else(PoisonError::into_inner) = policy;
    }

    fn deep_policy(&self) -> DeepPolicy {
        *self.deep.policy.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The query of `op` when it is a search deep recall should answer.
    pub(crate) fn deep_query(&self, op: &Op) -> Option<SearchQuery> {
        let Op::Search(query) = op else { return None };
        let deep = query.deep.unwrap_or_else(|| self.deep_policy().by_default);
        deep.then(|| SearchQuery { deep: Some(true), ..query.clone() })
    }

    /// A search re-ranked by the model in use (blocking: the model's time is spent here). No
    /// model, or one that fails or is slow: the first stage's hits, with a notice and the code.
    pub fn deep_search(&self, query: &SearchQuery) -> Result<SearchResponse> {
        let pool = deep::pool_query(query);
        let mut found = self.call_blocking(pool)?;
        let bounded = self.llm().map(|inner| TimeBoxed {
            inner,
            timeout: self.deep_policy().timeout,
            busy: Arc::clone(&self.deep.busy),
        });
        let provider = bounded.as_ref().map(|p| p as &dyn LlmProvider);
        let (hits, report) = deep::rerank(query, std::mem::take(&mut found.hits), provider);
        found.notices.extend(report.notice());
        found.hits = hits;
        found.deep = Some(report);
        Ok(found)
    }
}

/// A provider that answers within `timeout` or not at all, one call at a time.
struct TimeBoxed {
    inner: Arc<dyn LlmProvider>,
    timeout: Duration,
    busy: Arc<AtomicBool>,
}

impl LlmProvider for TimeBoxed {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn chat(&self, request: &ChatRequest) -> std::result::Result<ChatReply, LlmError> {
        if self.busy.swap(true, Ordering::AcqRel) {
            return Err(LlmError::Unavailable("an earlier deep recall is still with the model".into()));
        }
        let (answer, answered) = mpsc::sync_channel(1);
        let (inner, request, busy) = (Arc::clone(&self.inner), request.clone(), Arc::clone(&self.busy));
        let started = std::thread::Builder::new().name("cairn-deep".into()).spawn(move || {
            let reply = inner.chat(&request);
            busy.store(false, Ordering::Release);
            let _ = answer.send(reply);
        });
        if let Err(e) = started {
            self.busy.store(false, Ordering::Release);
            return Err(LlmError::Unavailable(format!("no thread for the model: {e}")));
        }
        match answered.recv_timeout(self.timeout) {
            Ok(reply) => reply,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(LlmError::Timeout(self.timeout.as_secs())),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(LlmError::Unavailable("the model's thread ended".into())),
        }
    }
}

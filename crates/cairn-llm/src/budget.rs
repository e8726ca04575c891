//! What LLM calls spent, and the daily budget of the remote ones.
//!
//! The `Ledger` is a small SQLite file in the data dir (`llm-usage.db`): tokens and calls per
//! UTC day, provider and model, and the last failures. SQLite, not a JSON file, because the
//! daemon and a CLI command (`cairn extract`, `cairn llm status --check`) may call at once: each
//! record is one UPSERT, atomic across processes, and survives restarts.
//!
//! `Metered` wraps any provider: a remote one (openai, anthropic, agent-cli) is refused before
//! the call once today's spend reached the budget (the call that crosses it completes: the
//! overshoot is at most one call); every call's usage is recorded, a local model's too (shown,
//! never limited), and every failure, for `cairn llm status`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use cairn_base::clock::{SharedClock, SystemClock, format_ts};
use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use crate::{ChatReply, ChatRequest, LlmError, LlmProvider, Usage};

/// The ledger's file in the data dir.
pub const LEDGER_FILE: &str = "llm-usage.db";
/// Failures kept: enough to see a pattern, never a growing file.
const FAILURES_KEPT: i64 = 20;

const MIGRATIONS: &[&str] = &["
    CREATE TABLE usage (
        day TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        remote INTEGER NOT NULL,
        calls INTEGER NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        PRIMARY KEY (day, provider, model)
    ) WITHOUT ROWID;
    CREATE TABLE failures (
        id INTEGER PRIMARY KEY,
        at TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        kind TEXT NOT NULL,
        retryable INTEGER NOT NULL,
        message TEXT NOT NULL
    );
"];

/// One failed call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    pub at: String,
    pub provider: String,
    pub model: String,
    /// `unavailable`, `timeout`, `malformed`, `refused`, `not_configured`, `budget_spent`…
    pub kind: String,
    /// Whether the work is retried later by itself.
    pub retryable: bool,
    pub message: String,
}

/// What one day's calls spent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DaySpend {
    /// `YYYY-MM-DD`, UTC.
    pub day: String,
    /// Tokens (in + out) of remote providers: what the budget counts.
    pub remote_tokens: u64,
    /// Tokens of the local model: shown, never limited.
    pub local_tokens: u64,
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// The ledger file, shared by every process of a data dir.
#[derive(Debug)]
pub struct Ledger {
    conn: Mutex<Connection>,
    path: PathBuf,
}

fn ledger_error(e: impl std::fmt::Display) -> LlmError {
    LlmError::Unavailable(format!("the token ledger ({LEDGER_FILE}): {e}"))
}

impl Ledger {
    /// Open (or create) the ledger of a data dir.
    pub fn open(data_dir: &Path) -> Result<Ledger, LlmError> {
        std::fs::create_dir_all(data_dir).map_err(ledger_error)?;
        let path = data_dir.join(LEDGER_FILE);
        let mut conn = Connection::open(&path).map_err(ledger_error)?;
        conn.busy_timeout(cairn_base::settings::BUSY_TIMEOUT).map_err(ledger_error)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(ledger_error)?;
        cairn_base::migrate::run_list(&mut conn, MIGRATIONS).map_err(|e| ledger_error(e.message))?;
        Ok(Ledger { conn: Mutex::new(conn), path })
    }

    /// The ledger when one was ever written: reading status creates no file.
    pub fn open_existing(data_dir: &Path) -> Result<Option<Ledger>, LlmError> {
        if data_dir.join(LEDGER_FILE).is_file() { Self::open(data_dir).map(Some) } else { Ok(None) }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Add one call's usage to its day.
    pub fn record(&self, day: &str, provider: &str, model: &str, remote: bool, usage: Usage) -> Result<(), LlmError> {
        self.conn()
            .prepare_cached(
                "INSERT INTO usage (day, provider, model, remote, calls, input_tokens, output_tokens)
                 VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6)
                 ON CONFLICT (day, provider, model) DO UPDATE SET
                    calls = calls + 1,
                    input_tokens = input_tokens + excluded.input_tokens,
                    output_tokens = output_tokens + excluded.output_tokens",
            )
            .and_then(|mut s| {
                s.execute(params![
                    day,
                    provider,
                    model,
                    remote,
                    to_sql(usage.input_tokens),
                    to_sql(usage.output_tokens)
                ])
            })
            .map(|_| ())
            .map_err(ledger_error)
    }

    /// What `day` spent.
    pub fn day(&self, day: &str) -> Result<DaySpend, LlmError> {
        let conn = self.conn();
        let mut spend = DaySpend { day: day.to_owned(), ..DaySpend::default() };
        let mut statement = conn
            .prepare_cached("SELECT remote, calls, input_tokens, output_tokens FROM usage WHERE day = ?1")
            .map_err(ledger_error)?;
        let rows = statement
            .query_map([day], |r| {
                Ok((r.get::<_, bool>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?))
            })
            .map_err(ledger_error)?;
        for row in rows {
            let (remote, calls, input, output) = row.map_err(ledger_error)?;
            let (calls, input, output) = (from_sql(calls), from_sql(input), from_sql(output));
            spend.calls += calls;
            spend.input_tokens += input;
            spend.output_tokens += output;
            if remote {
                spend.remote_tokens += input + output;
            } else {
                spend.local_tokens += input + output;
            }
        }
        Ok(spend)
    }

    /// Keep a failure (the last 20 are kept).
    pub fn record_failure(&self, failure: &Failure) -> Result<(), LlmError> {
        let conn = self.conn();
        conn.prepare_cached(
            "INSERT INTO failures (at, provider, model, kind, retryable, message) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .and_then(|mut s| {
            s.execute(params![
                failure.at,
                failure.provider,
                failure.model,
                failure.kind,
                failure.retryable,
                failure.message
            ])
        })
        .and_then(|_| {
            conn.execute("DELETE FROM failures WHERE id <= (SELECT MAX(id) FROM failures) - ?1", [FAILURES_KEPT])
        })
        .map(|_| ())
        .map_err(ledger_error)
    }

    /// The latest failure, if any.
    pub fn last_failure(&self) -> Result<Option<Failure>, LlmError> {
        self.conn()
            .query_row(
                "SELECT at, provider, model, kind, retryable, message FROM failures ORDER BY id DESC LIMIT 1",
                [],
                |r| {
                    Ok(Failure {
                        at: r.get(0)?,
                        provider: r.get(1)?,
                        model: r.get(2)?,
                        kind: r.get(3)?,
                        retryable: r.get(4)?,
                        message: r.get(5)?,
                    })
                },
            )
            .optional()
            .map_err(ledger_error)
    }
}

fn to_sql(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn from_sql(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

/// The stable name of a failure's kind.
pub fn failure_kind(error: &LlmError) -> &'static str {
    match error {
        LlmError::Unavailable(_) => "unavailable",
        LlmError::Timeout(_) => "timeout",
        LlmError::Malformed(_) => "malformed",
        LlmError::Refused(_) => "refused",
        LlmError::NotConfigured(_) => "not_configured",
        LlmError::BudgetSpent { .. } => "budget_spent",
        LlmError::ModelFile(_) => "model_file",
        LlmError::ContextFull { .. } => "context_full",
    }
}

/// A day's budget over the ledger.
#[derive(Clone)]
pub struct Budget {
    ledger: std::sync::Arc<Ledger>,
    /// Tokens per UTC day for remote providers; `None`: no limit.
    daily: Option<u64>,
    clock: SharedClock,
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budget").field("ledger", &self.ledger.path).field("daily", &self.daily).finish_non_exhaustive()
    }
}

/// Where today stands, for `cairn llm status` and `cairn doctor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BudgetStatus {
    #[serde(flatten)]
    pub today: DaySpend,
    /// `None`: no limit.
    pub budget: Option<u64>,
    /// `None`: no limit.
    pub remaining: Option<u64>,
}

impl Budget {
    pub fn new(ledger: std::sync::Arc<Ledger>, daily: Option<u64>) -> Budget {
        Budget::with_clock(ledger, daily, std::sync::Arc::new(SystemClock))
    }

    /// With the clock that says which day it is (tests move it).
    pub fn with_clock(ledger: std::sync::Arc<Ledger>, daily: Option<u64>, clock: SharedClock) -> Budget {
        Budget { ledger, daily, clock }
    }

    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Today, UTC, as the ledger keys it.
    pub fn today(&self) -> String {
        day_of(&format_ts(self.clock.now()))
    }

    pub fn status(&self) -> Result<BudgetStatus, LlmError> {
        let today = self.ledger.day(&self.today())?;
        let remaining = self.daily.map(|b| b.saturating_sub(today.remote_tokens));
        Ok(BudgetStatus { today, budget: self.daily, remaining })
    }

    /// Refuse a remote call once today's spend reached the budget.
    pub fn check(&self) -> Result<(), LlmError> {
        let Some(budget) = self.daily else { return Ok(()) };
        let spent = self.ledger.day(&self.today())?.remote_tokens;
        if spent >= budget {
            return Err(LlmError::BudgetSpent { spent, budget });
        }
        Ok(())
    }

    pub fn record(&self, provider: &str, model: &str, remote: bool, usage: Usage) -> Result<(), LlmError> {
        self.ledger.record(&self.today(), provider, model, remote, usage)
    }

    pub fn record_failure(&self, provider: &str, model: &str, error: &LlmError) -> Result<(), LlmError> {
        self.ledger.record_failure(&Failure {
            at: format_ts(self.clock.now()),
            provider: provider.to_owned(),
            model: model.to_owned(),
            kind: failure_kind(error).to_owned(),
            retryable: error.retryable(),
            message: error.to_string(),
        })
    }
}

/// `YYYY-MM-DD` of a stored timestamp.
fn day_of(ts: &str) -> String {
    ts.get(..10).unwrap_or(ts).to_owned()
}

/// A metered provider's day: who it is, what it spent against its budget, its last failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Spend {
    pub provider: String,
    pub model: String,
    /// Whether the budget applies (remote providers); a local model's tokens are only shown.
    pub remote: bool,
    pub today: BudgetStatus,
    pub last_failure: Option<Failure>,
}

/// A provider whose calls are counted, and refused past the budget when it is remote.
pub struct Metered {
    inner: Box<dyn LlmProvider>,
    budget: Budget,
    remote: bool,
}

impl std::fmt::Debug for Metered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metered")
            .field("kind", &self.inner.kind())
            .field("model", &self.inner.model())
            .field("remote", &self.remote)
            .field("budget", &self.budget)
            .finish()
    }
}

impl Metered {
    /// `remote`: its calls spend the budget (openai, anthropic, agent-cli).
    pub fn new(inner: Box<dyn LlmProvider>, budget: Budget, remote: bool) -> Metered {
        Metered { inner, budget, remote }
    }

    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    pub fn is_remote(&self) -> bool {
        self.remote
    }

    fn note_failure(&self, error: &LlmError) {
        if let Err(e) = self.budget.record_failure(self.inner.kind(), self.inner.model(), error) {
            tracing::warn!(error = %e, "cannot record an LLM failure");
        }
    }
}

impl LlmProvider for Metered {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn model(&self) -> &str {
        self.inner.model()
    }

    fn chat(&self, request: &ChatRequest) -> Result<ChatReply, LlmError> {
        if self.remote
            && let Err(refused) = self.budget.check()
        {
            self.note_failure(&refused);
            return Err(refused);
        }
        match self.inner.chat(request) {
            Ok(reply) => {
                // The tokens are spent whether or not they can be written down: the answer is
                // returned either way, and the failure to count is logged.
                if let Err(e) = self.budget.record(self.inner.kind(), &reply.model, self.remote, reply.usage) {
                    tracing::warn!(error = %e, "cannot record an LLM call's tokens");
                }
                Ok(reply)
            }
            Err(error) => {
                self.note_failure(&error);
                Err(error)
            }
        }
    }

    fn probe(&self) -> Result<(), LlmError> {
        self.inner.probe()
    }

    fn spend(&self) -> Option<Spend> {
        let read = || -> Result<Spend, LlmError> {
            let mut today = self.budget.status()?;
            if !self.remote {
                (today.budget, today.remaining) = (None, None);
            }
            Ok(Spend {
                provider: self.inner.kind().to_owned(),
                model: self.inner.model().to_owned(),
                remote: self.remote,
                today,
                last_failure: self.budget.ledger().last_failure()?,
            })
        };
        read().map_err(|e| tracing::warn!(error = %e, "cannot read the token ledger")).ok()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use cairn_base::clock::Clock;
    use time::OffsetDateTime;

    use super::*;
    use crate::ChatMessage;

    /// A clock the test moves.
    struct Manual(Mutex<OffsetDateTime>);

    impl Clock for Manual {
        fn now(&self) -> OffsetDateTime {
            *self.0.lock().unwrap()
        }
    }

    /// Answers every call with 600 tokens in and 400 out, counting the calls it saw.
    struct Fixed(Arc<AtomicUsize>);

    impl LlmProvider for Fixed {
        fn kind(&self) -> &'static str {
            "openai"
        }
        fn model(&self) -> &'static str {
            "m"
        }
        fn chat(&self, _: &ChatRequest) -> Result<ChatReply, LlmError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(ChatReply {
                text: "{}".into(),
                usage: Usage { input_tokens: 600, output_tokens: 400 },
                model: "m-1".into(),
            })
        }
    }

    fn request() -> ChatRequest {
        ChatRequest { messages: vec![ChatMessage::user("hi")], max_tokens: 10, temperature: 0.0, json: false }
    }

    fn at(day: &str) -> Arc<Manual> {
        let t =
            OffsetDateTime::parse(&format!("{day}T23:59:00Z"), &time::format_description::well_known::Rfc3339).unwrap();
        Arc::new(Manual(Mutex::new(t)))
    }

    fn metered(dir: &Path, daily: Option<u64>, clock: Arc<Manual>, calls: Arc<AtomicUsize>, remote: bool) -> Metered {
        let ledger = Arc::new(Ledger::open(dir).unwrap());
        Metered::new(Box::new(Fixed(calls)), Budget::with_clock(ledger, daily, clock), remote)
    }

    #[test]
    fn spending_survives_a_restart_and_stops_at_the_budget_until_the_next_day() {
        let tmp = tempfile::tempdir().unwrap();
        let clock = at("2026-03-01");
        let calls = Arc::new(AtomicUsize::new(0));
        let first = metered(tmp.path(), Some(1500), clock.clone(), calls.clone(), true);
        first.chat(&request()).unwrap();
        drop(first);
        // Another process (or the daemon after a restart) sees what was spent.
        let second = metered(tmp.path(), Some(1500), clock.clone(), calls.clone(), true);
        assert_eq!(second.budget().status().unwrap().today.remote_tokens, 1000);
        second.chat(&request()).unwrap();
        let refused = second.chat(&request()).unwrap_err();
        assert!(matches!(refused, LlmError::BudgetSpent { spent: 2000, budget: 1500 }), "{refused}");
        assert!(refused.retryable(), "tomorrow it may run");
        assert_eq!(calls.load(Ordering::SeqCst), 2, "the refused call never reached the provider");
        let failure = second.budget().ledger().last_failure().unwrap().unwrap();
        assert_eq!((failure.kind.as_str(), failure.at.as_str()), ("budget_spent", "2026-03-01T23:59:00.000Z"));
        let status = second.budget().status().unwrap();
        assert_eq!((status.remaining, status.today.calls), (Some(0), 2));
        // A minute later it is another UTC day: a fresh budget.
        *clock.0.lock().unwrap() += time::Duration::minutes(2);
        second.chat(&request()).unwrap();
        let status = second.budget().status().unwrap();
        assert_eq!(
            (status.today.day.as_str(), status.today.remote_tokens, status.remaining),
            ("2026-03-02", 1000, Some(500))
        );
        assert_eq!(second.budget().ledger().day("2026-03-01").unwrap().remote_tokens, 2000, "yesterday kept");
    }

    #[test]
    fn local_calls_are_counted_but_never_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let local = metered(tmp.path(), Some(1), at("2026-03-01"), calls.clone(), false);
        for _ in 0..3 {
            local.chat(&request()).unwrap();
        }
        let status = local.budget().status().unwrap();
        assert_eq!((status.today.local_tokens, status.today.remote_tokens, status.today.calls), (3000, 0, 3));
        let unlimited = metered(tmp.path(), None, at("2026-03-01"), calls.clone(), true);
        for _ in 0..3 {
            unlimited.chat(&request()).unwrap();
        }
        assert_eq!(unlimited.budget().status().unwrap().remaining, None);
        assert_eq!(calls.load(Ordering::SeqCst), 6);
    }

    #[test]
    fn spend_says_what_today_cost_against_the_budget_and_the_last_failure() {
        let tmp = tempfile::tempdir().unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let remote = metered(tmp.path(), Some(1500), at("2026-03-01"), calls.clone(), true);
        remote.chat(&request()).unwrap();
        remote.chat(&request()).unwrap();
        remote.chat(&request()).unwrap_err();
        let spend = remote.spend().expect("metered");
        assert_eq!((spend.provider.as_str(), spend.model.as_str(), spend.remote), ("openai", "m", true));
        assert_eq!(
            (spend.today.today.remote_tokens, spend.today.budget, spend.today.remaining),
            (2000, Some(1500), Some(0))
        );
        assert_eq!(spend.last_failure.map(|f| f.kind).as_deref(), Some("budget_spent"));
        // A local model's tokens are shown; no budget is said to apply to them.
        let local = metered(tmp.path(), Some(1500), at("2026-03-01"), calls, false);
        let spend = local.spend().unwrap();
        assert_eq!((spend.remote, spend.today.budget, spend.today.remaining), (false, None, None));
        assert_eq!(Fixed(Arc::default()).spend(), None, "a bare provider meters nothing");
    }

    #[test]
    fn only_the_last_failures_are_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let ledger = Ledger::open(tmp.path()).unwrap();
        for i in 0..30 {
            let failure = Failure {
                at: format!("t{i:02}"),
                provider: "openai".into(),
                model: "m".into(),
                kind: "timeout".into(),
                retryable: true,
                message: String::new(),
            };
            ledger.record_failure(&failure).unwrap();
        }
        assert_eq!(ledger.last_failure().unwrap().unwrap().at, "t29");
        let kept: i64 = ledger.conn().query_row("SELECT COUNT(*) FROM failures", [], |r| r.get(0)).unwrap();
        assert_eq!(kept, FAILURES_KEPT);
    }
}

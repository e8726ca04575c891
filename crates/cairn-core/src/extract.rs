//! Memory that writes itself: archived conversations turned into memories by a model.
//!
//! A conversation (an OpenCode or Claude Code session in the history archive) with new turns is
//! extracted once it has gone idle (a cooldown after its last message), was compacted or ended.
//! Its messages after the conversation's mark are redacted, split into windows and sent to the
//! model ([`cairn_llm::extract`] holds the prompts and the parsing); each window's facts are
//! saved in one transaction that also moves the mark ([`ExtractionCommit`]), so nothing is half
//! saved and a restart resumes where the last window ended. A fact a stored memory of the
//! project already says (the same words, or nearly) is a duplicate and saves nothing. Every
//! `summary_every_turns` turns, and when the conversation ends, the running summary is revised;
//! on the first conversation of a project with no brief, the brief is written from its README
//! and manifest files.
//!
//! A failure (the model down, slow, malformed, refusing) is recorded on the conversation and
//! retried after an exponential backoff; `extraction_status` shows it.
//!
//! Where the work runs is the caller's: [`run_pass`] drives any [`ExtractionAccess`]: a
//! [`Core`] in-process, or the daemon's engine (reads on a reader, commits on the writer, the
//! model called on a background thread in between, never holding either).

use std::path::Path;

use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};

use cairn_llm::extract::{self as prompts, Fact, TranscriptMessage};
use cairn_llm::{ChatRequest, LlmError, LlmProvider, Role};

use crate::clock::{format_ts, parse_ts};
use crate::error::{CairnError, ErrorCode, Result};
use crate::history::extraction::{ExtractableMessage, Mark, SessionTail};
use crate::history::model::HistoryRole;
use crate::memory::{NewObservation, SaveAction, SaveOutcome};
use crate::owners::Core;
use crate::store::Store;
pub use crate::store::extraction::FailingSession;
use crate::store::extraction::{self, ProvenanceRow, StateAdvance};

mod diagnosis;
mod directives;
mod refusals;
mod settings;
mod substance;
mod taken_back;
pub mod wire;

/// The most rules one prompt is taken to state (`Store::save_stated_rules`).
const MAX_RULES_PER_PROMPT: usize = 3;

/// When and how much is extracted. The defaults are what opencode-memory does (a 15 s
/// cooldown, a summary every 5 turns) sized for a small local model's context.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtractionPolicy {
    /// A conversation is extracted once its last message is this old (or it was compacted).
    pub cooldown: Duration,
    /// The running summary is revised after this many new turns (and at the end).
    pub summary_every_turns: u32,
    /// Bytes of transcript per request; a longer conversation goes in several windows.
    pub window_bytes: usize,
    /// What each window is asked after its facts (`prompts::FollowUp`): each costs the
    /// model's answer again, not the transcript (a local model reuses it).
    pub follow_ups: Vec<prompts::FollowUp>,
    /// A conversation idle this long has ended (besides one its host ended).
    pub ended_after: Duration,
    /// The first retry after a failure; each further failure doubles it, up to `backoff_cap`.
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    /// Messages read per conversation and pass (the rest waits for the next pass).
    pub messages_per_pass: usize,
}

impl Default for ExtractionPolicy {
    fn default() -> Self {
        Self {
            cooldown: Duration::seconds(15),
            summary_every_turns: 5,
            window_bytes: 12 * 1024,
            follow_ups: prompts::FollowUp::ALL.to_vec(),
            ended_after: Duration::minutes(30),
            backoff_base: Duration::seconds(30),
            backoff_cap: Duration::hours(1),
            messages_per_pass: 400,
        }
    }
}

/// Which conversations a pass looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Selection {
    /// The background worker's: conversations active since extraction was turned on, idle
    /// past the cooldown and not waiting out a backoff.
    #[default]
    Due,
    /// One conversation, now (no cooldown, no backoff).
    Session(String),
    /// Every archived conversation with something new, now (`cairn extract --all`).
    All,
}

/// What one pass did (`cairn extract --wait` prints it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExtractionReport {
    /// Conversations that had something to extract.
    pub sessions: u64,
    pub facts_saved: u64,
    /// Facts a stored memory already said: nothing saved for them.
    pub duplicates_skipped: u64,
    pub summaries: u64,
    pub briefs: u64,
    /// Conversations whose extraction failed this pass (retried later).
    pub failures: u64,
    /// Each failure: the conversation and why.
    pub failed: Vec<FailedSession>,
}

/// A conversation whose extraction failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FailedSession {
    pub session_id: String,
    /// `llm_unavailable`, `llm_refused`, `llm_not_configured`, `llm_budget_spent`.
    pub code: String,
    pub error: String,
}

/// The work a pass found for one conversation (read by [`ExtractionAccess::plan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionWork {
    pub session_id: String,
    pub project: String,
    pub directory: Option<String>,
    /// Where the last extraction ended (`None`: never extracted).
    pub mark: Option<Mark>,
    /// The messages after the mark, redacted.
    pub messages: Vec<ExtractableMessage>,
    /// The running summary to revise now, when one is due.
    pub summary: Option<SummaryWork>,
    /// The project's files to write its brief from, when the project has none yet (an empty
    /// list: nothing to write it from, the check is recorded all the same).
    pub brief_files: Option<Vec<(String, String)>>,
}

/// A summary due: the previous one and what was said since it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryWork {
    /// The previous summary as the model wrote it (without the request line).
    pub previous: Option<String>,
    pub messages: Vec<ExtractableMessage>,
    /// The conversation's opening request in the developer's words, redacted (see
    /// `request_line`); `None` when it has none.
    pub opening: Option<String>,
}

/// What opens the request line of a summary's content.
const REQUEST_MARK: &str = "\n\nAsked: ";
/// The longest request line, in bytes: its first sentences, where the problem is said.
const MAX_REQUEST_BYTES: usize = 300;

/// A summary's request line: the developer's first message, its prose only, on one line and cut
/// at a word. A model's summary says the problem in its own words; a later search is in the
/// developer's ("the HUD label turns to garbage"), and finds the session by them.
fn request_line(text: &str) -> Option<String> {
    let prose = crate::text::without_code_blocks(text, " ");
    let line = prose.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.is_empty() || prompts::is_noise(&line) {
        return None;
    }
    if line.len() <= MAX_REQUEST_BYTES {
        return Some(line);
    }
    let cut = crate::text::cut_at_char_boundary(&line, MAX_REQUEST_BYTES);
    let cut = cut.rsplit_once(' ').map_or(cut, |(head, _)| head);
    Some(format!("{cut}…"))
}

/// A stored summary as the model wrote it: the request line is the store's, not the model's to
/// revise.
fn without_request_line(summary: &str) -> &str {
    summary.split_once(REQUEST_MARK).map_or(summary, |(written, _)| written)
}

/// One memory a model wrote, ready to save.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extracted {
    pub origin: Origin,
    pub kind: String,
    pub title: String,
    pub content: String,
    pub message_ids: Vec<String>,
    /// Summaries and briefs revise one memory per conversation / project.
    pub topic_key: Option<String>,
}

/// What kind of memory a model wrote (`memory_provenance.origin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    Fact,
    /// A rule the developer stated, saved in their words (`directives`): no model wrote it.
    Directive,
    /// A value the developer set, saved as the agent's reply confirmed it (`settings`): no
    /// model wrote it.
    Setting,
    /// A bug's cause and fix, as the agent found and said them (`diagnosis`): no model wrote
    /// it.
    Diagnosis,
    /// A suggestion the developer turned down, in their words (`refusals`): no model wrote it.
    Refusal,
    Summary,
    Brief,
}

impl Origin {
    fn as_str(self) -> &'static str {
        match self {
            Origin::Fact => "fact",
            Origin::Directive => "directive",
            Origin::Setting => "setting",
            Origin::Diagnosis => "diagnosis",
            Origin::Refusal => "refusal",
            Origin::Summary => "summary",
            Origin::Brief => "brief",
        }
    }

    /// Whether it counts as a fact: one of many a conversation holds, deduped against what the
    /// project already says (a summary or a brief is one revised text).
    pub(crate) fn is_fact(self) -> bool {
        matches!(self, Origin::Fact | Origin::Directive | Origin::Setting | Origin::Diagnosis | Origin::Refusal)
    }
}

/// Everything one window (or a summary, or a brief) saves, in one transaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtractionCommit {
    pub session_id: String,
    pub project: String,
    pub directory: Option<String>,
    /// The mark the work was read at: a commit over a mark that moved since (another pass got
    /// there first) saves nothing.
    pub expected_mark: Option<Mark>,
    /// The new mark (`None`: unchanged).
    pub new_mark: Option<Mark>,
    /// Turns in the window, counted towards the next summary.
    pub turns: u32,
    pub memories: Vec<Extracted>,
    /// A summary was written: its count of turns starts again.
    pub summarized: bool,
    /// The project's brief was looked for.
    pub brief_checked: bool,
    pub provider: String,
    pub model: String,
}

/// What a commit saved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitOutcome {
    pub saved: u64,
    pub duplicates: u64,
    /// The mark had moved: nothing was saved.
    pub stale: bool,
}

/// Where a pass reads its work and saves what the model wrote. [`Core`] does both on itself;
/// the daemon reads on a reader and commits on its writer.
pub trait ExtractionAccess {
    fn plan(&mut self, selection: &Selection, policy: &ExtractionPolicy) -> Result<Vec<SessionWork>>;
    fn commit(&mut self, commit: ExtractionCommit) -> Result<CommitOutcome>;
    /// Record a failed attempt (`code`: the error table's, `message`: what happened).
    fn record_failure(
        &mut self,
        session_id: &str,
        code: ErrorCode,
        message: &str,
        policy: &ExtractionPolicy,
    ) -> Result<()>;
}

impl ExtractionAccess for Core {
    fn plan(&mut self, selection: &Selection, policy: &ExtractionPolicy) -> Result<Vec<SessionWork>> {
        self.extraction_plan(selection, policy)
    }

    fn commit(&mut self, commit: ExtractionCommit) -> Result<CommitOutcome> {
        self.store.commit_extraction(&commit)
    }

    fn record_failure(
        &mut self,
        session_id: &str,
        code: ErrorCode,
        message: &str,
        policy: &ExtractionPolicy,
    ) -> Result<()> {
        self.store.record_extraction_failure(session_id, code, message, policy)
    }
}

/// The one place text leaves for a model: `<private>` blocks and secrets by pattern removed
/// (the outbound redaction git chunks and hub pushes get too).
pub fn redact_for_model(text: &str) -> String {
    crate::text::redact_outbound(text).into_owned()
}

/// The stable code of a model's failure (as cairn-llm's `From<LlmError> for CairnError` maps it).
pub fn llm_error_code(error: &LlmError) -> ErrorCode {
    match error {
        LlmError::Unavailable(_) | LlmError::Timeout(_) | LlmError::Malformed(_) => ErrorCode::LlmUnavailable,
        LlmError::Refused(_) | LlmError::ContextFull { .. } => ErrorCode::LlmRefused,
        LlmError::NotConfigured(_) | LlmError::ModelFile(_) => ErrorCode::LlmNotConfigured,
        LlmError::BudgetSpent { .. } => ErrorCode::LlmBudgetSpent,
    }
}

/// Run one pass: plan, then per conversation its brief, its windows of facts and its summary,
/// each saved on its own. A conversation whose model call fails is recorded and left for later;
/// the pass goes on with the next. It ends early when `stop` says so (the daemon stops), when
/// no model is configured, or when the day's budget is spent.
pub fn run_pass(
    access: &mut dyn ExtractionAccess,
    provider: &dyn LlmProvider,
    selection: &Selection,
    policy: &ExtractionPolicy,
    stop: &dyn Fn() -> bool,
) -> Result<ExtractionReport> {
    let mut report = ExtractionReport::default();
    for work in access.plan(selection, policy)? {
        if stop() {
            break;
        }
        report.sessions += 1;
        if let Err(error) = extract_session(access, provider, policy, &work, &mut report) {
            match error {
                SessionError::Store(e) => return Err(e),
                SessionError::Model(e) => {
                    tracing::info!(session = work.session_id, error = %e, "extraction failed; retried later");
                    let code = llm_error_code(&e);
                    access.record_failure(&work.session_id, code, &e.to_string(), policy)?;
                    report.failures += 1;
                    report.failed.push(FailedSession {
                        session_id: work.session_id.clone(),
                        code: code.as_str().to_owned(),
                        error: e.to_string(),
                    });
                    if matches!(code, ErrorCode::LlmNotConfigured | ErrorCode::LlmBudgetSpent) {
                        break;
                    }
                }
            }
        }
    }
    Ok(report)
}

enum SessionError {
    Model(LlmError),
    Store(CairnError),
}

impl From<CairnError> for SessionError {
    fn from(e: CairnError) -> Self {
        SessionError::Store(e)
    }
}

impl From<LlmError> for SessionError {
    fn from(e: LlmError) -> Self {
        SessionError::Model(e)
    }
}

/// One conversation's brief, facts and summary, in that order; the first model failure ends it.
fn extract_session(
    access: &mut dyn ExtractionAccess,
    provider: &dyn LlmProvider,
    policy: &ExtractionPolicy,
    work: &SessionWork,
    report: &mut ExtractionReport,
) -> std::result::Result<(), SessionError> {
    let commit = |mark: &Option<Mark>| ExtractionCommit {
        session_id: work.session_id.clone(),
        project: work.project.clone(),
        directory: work.directory.clone(),
        expected_mark: mark.clone(),
        new_mark: None,
        turns: 0,
        memories: Vec::new(),
        summarized: false,
        brief_checked: false,
        provider: provider.kind().to_owned(),
        model: provider.model().to_owned(),
    };
    let mut mark = work.mark.clone();
    if let Some(files) = &work.brief_files {
        let mut brief = ExtractionCommit { brief_checked: true, ..commit(&mark) };
        if !files.is_empty() {
            let reply = provider.chat(&prompts::brief_request(files))?;
            let written = prompts::parse_brief(&reply.text)?;
            brief.model = reply.model;
            brief.memories.push(brief_memory(&work.project, written));
        }
        let outcome = access.commit(brief)?;
        report.briefs += outcome.saved;
    }
    let transcript = transcript_of(&work.messages);
    for range in prompts::windows(&transcript, policy.window_bytes) {
        let window = &work.messages[range.clone()];
        let said = &transcript[range.clone()];
        let said = said_only(said);
        let (mut memories, set) = said_outright(&said);
        if !said.is_empty() {
            let opening = if work.mark.is_none() && range.start == 0 { opening_id(&said) } else { None };
            let mut facts = ask_facts(provider, &said)?;
            for follow_up in &policy.follow_ups {
                let answered = ask_follow_up(provider, &said, *follow_up)?;
                facts.extend(answered.into_iter().filter(|f| follow_up.keeps(f, &said, opening)));
            }
            memories.extend(facts.into_iter().filter(|f| holds_up(f, &said, &set)).map(fact_memory));
        }
        let last = window.last().map(|m| m.mark.clone());
        let saved = ExtractionCommit {
            new_mark: last.clone(),
            turns: window.iter().filter(|m| m.opens_turn).count() as u32,
            memories,
            ..commit(&mark)
        };
        let outcome = access.commit(saved)?;
        if outcome.stale {
            return Ok(());
        }
        report.facts_saved += outcome.saved;
        report.duplicates_skipped += outcome.duplicates;
        mark = last;
    }
    if let Some(summary) = &work.summary {
        let said = transcript_of(&summary.messages);
        let recent = tail_within(&said, policy.window_bytes);
        let reply = provider.chat(&prompts::summary_request(summary.previous.as_deref(), &said_only(recent)))?;
        let written = prompts::parse_summary(&reply.text)?;
        let saved = ExtractionCommit {
            summarized: true,
            memories: vec![summary_memory(&work.session_id, written, summary.opening.as_deref())],
            ..commit(&mark)
        };
        report.summaries += access.commit(saved)?.saved;
    }
    Ok(())
}

/// The temperature of the second asking when a greedy facts answer was unusable. Greedy
/// decoding answers the same every time, so a retry later would fail the same way (seen: a
/// small model copying the prompt's format line into its answer and looping to the cap).
const RESAMPLE_TEMPERATURE: f32 = 0.7;

/// The facts of `said`; a window too long for the model's context is asked in halves, and an
/// answer with no usable JSON is asked once more, sampled, before the window counts as failed.
fn ask_facts(provider: &dyn LlmProvider, said: &[TranscriptMessage]) -> std::result::Result<Vec<Fact>, LlmError> {
    let request = prompts::facts_request(said);
    let ask = |request: &ChatRequest| provider.chat(request).and_then(|reply| prompts::parse_facts(&reply.text, said));
    match ask(&request) {
        Err(LlmError::Malformed(why)) if request.temperature <= 0.0 => {
            tracing::info!(error = %why, "a facts answer was unusable; asked once more, sampled");
            ask(&ChatRequest { temperature: RESAMPLE_TEMPERATURE, ..request })
        }
        Err(LlmError::ContextFull { .. }) if said.len() > 1 => {
            let (first, second) = said.split_at(said.len() / 2);
            let mut facts = ask_facts(provider, first)?;
            facts.extend(ask_facts(provider, second)?);
            Ok(facts)
        }
        answered => answered,
    }
}

/// The facts `follow_up` asks for in `said`. Its facts add to the window's: an unusable
/// answer is asked again, sampled, then given up (the window keeps the facts it has), and a
/// window too long for the model gives none (its facts were asked in halves already). A model
/// that is down fails the window, as its facts would.
fn ask_follow_up(
    provider: &dyn LlmProvider,
    said: &[TranscriptMessage],
    follow_up: prompts::FollowUp,
) -> std::result::Result<Vec<Fact>, LlmError> {
    let request = prompts::follow_up_request(said, follow_up);
    let ask = |request: &ChatRequest| provider.chat(request).and_then(|reply| prompts::parse_facts(&reply.text, said));
    let answered = match ask(&request) {
        Err(LlmError::Malformed(_)) => ask(&ChatRequest { temperature: RESAMPLE_TEMPERATURE, ..request }),
        answered => answered,
    };
    match answered {
        Err(LlmError::Malformed(why)) => {
            tracing::info!(follow_up = follow_up.name(), error = %why, "a follow-up answer was unusable twice; skipped");
            Ok(Vec::new())
        }
        Err(LlmError::ContextFull { .. }) => Ok(Vec::new()),
        answered => answered,
    }
}

/// The messages as the model reads them, ids kept (a message with no text keeps its place, so
/// the windows line up with the messages).
fn transcript_of(messages: &[ExtractableMessage]) -> Vec<TranscriptMessage> {
    messages
        .iter()
        .map(|m| TranscriptMessage {
            id: m.mark.id.clone(),
            role: if m.role == HistoryRole::User { Role::User } else { Role::Assistant },
            text: m.text.clone(),
        })
        .collect()
}

/// The id of a conversation's opening message: its first from the developer. A settings answer
/// drawn from it alone describes the project rather than a setting chosen (`FollowUp::keeps`).
fn opening_id(said: &[TranscriptMessage]) -> Option<&str> {
    said.iter().find(|m| m.role == Role::User).map(|m| m.id.as_str())
}

/// Only the messages that say something (what the model is shown).
fn said_only(messages: &[TranscriptMessage]) -> Vec<TranscriptMessage> {
    messages.iter().filter(|m| !m.text.trim().is_empty()).cloned().collect()
}

/// The newest messages that fit `max_bytes` (at least the newest one).
fn tail_within(messages: &[TranscriptMessage], max_bytes: usize) -> &[TranscriptMessage] {
    let mut size = 0;
    let mut start = messages.len();
    while start > 0 {
        let cost = messages[start - 1].text.len().min(prompts::MAX_MESSAGE_BYTES) + 32;
        if size + cost > max_bytes && start < messages.len() {
            break;
        }
        size += cost;
        start -= 1;
    }
    &messages[start..]
}

/// Whether a model's fact about `said` is kept: a plan the fact itself says is put off is no
/// fact (the prompt asks to skip them), nor a bare "No.", nor a few plain words that name
/// nothing and state no rule, nor a value the developer took back, nor one the agent confirmed
/// and that was replaced after.
fn holds_up(fact: &Fact, said: &[TranscriptMessage], set: &settings::Reading) -> bool {
    let stale_setting = fact.kind == settings::SETTING_TYPE && set.names_a_value_read_before_it_was_set(&fact.content);
    !directives::puts_off(&fact.content)
        && !refusals::only_says_no(&fact.content)
        && !substance::says_too_little(&fact.content)
        && !taken_back::names_a_value_taken_back(&fact.content, said)
        && !set.names_a_value_replaced(&fact.content)
        && !stale_setting
}

/// What `said` states in so many words, read with no model, and the window's settings. These
/// come first: a model's paraphrase of one is then a duplicate. The pass and opencode-memory's
/// `POST /memories` both read a window this way.
fn said_outright(said: &[TranscriptMessage]) -> (Vec<Extracted>, settings::Reading) {
    let set = settings::read(said);
    let mut memories = directives::directives(said);
    memories.extend(set.memories.iter().cloned());
    memories.extend(diagnosis::diagnoses(said));
    memories.extend(refusals::refusals(said));
    (memories, set)
}

impl Extracted {
    /// A memory a reader took as said, with no model: its title is its first sentence.
    fn said(origin: Origin, kind: &str, content: String, message_ids: Vec<String>) -> Self {
        Extracted {
            origin,
            kind: kind.to_owned(),
            title: directives::title(&content),
            content,
            message_ids,
            topic_key: None,
        }
    }
}

fn fact_memory(fact: Fact) -> Extracted {
    Extracted {
        origin: Origin::Fact,
        kind: fact.kind,
        title: fact.title,
        content: fact.content,
        message_ids: fact.message_ids,
        topic_key: None,
    }
}

/// The type and topic of a conversation's running summary (one memory per conversation,
/// revised: cairn's `session_summary`, which the Last Session section reads).
pub const SUMMARY_TYPE: &str = "session_summary";
/// The type and topic of a project's brief (the `[MEMORY]` block's Project Brief section).
pub const BRIEF_TYPE: &str = "project-brief";
pub const BRIEF_TOPIC: &str = "project/brief";

fn summary_memory(session_id: &str, written: prompts::Written, opening: Option<&str>) -> Extracted {
    let content = match opening {
        Some(request) => format!("{}{REQUEST_MARK}{request}", written.content),
        None => written.content,
    };
    Extracted {
        origin: Origin::Summary,
        kind: SUMMARY_TYPE.to_owned(),
        title: written.title.map_or_else(|| format!("Session summary ({session_id})"), |t| format!("Session: {t}")),
        content,
        message_ids: Vec::new(),
        topic_key: Some(format!("summary/{session_id}")),
    }
}

fn brief_memory(project: &str, written: prompts::Written) -> Extracted {
    let fallback = if project.is_empty() { "Project brief".to_owned() } else { format!("Project brief: {project}") };
    Extracted {
        origin: Origin::Brief,
        kind: BRIEF_TYPE.to_owned(),
        title: written.title.unwrap_or(fallback),
        content: written.content,
        message_ids: Vec::new(),
        topic_key: Some(BRIEF_TOPIC.to_owned()),
    }
}

impl Core {
    /// The conversations with work, and the work (redacted), for a pass.
    pub fn extraction_plan(&mut self, selection: &Selection, policy: &ExtractionPolicy) -> Result<Vec<SessionWork>> {
        let now = self.store.clock().now();
        let (since, only) = match selection {
            Selection::Due => (Some(self.store.extraction_since()?.unwrap_or_else(|| format_ts(now))), None),
            Selection::Session(id) => (None, Some(id.as_str())),
            Selection::All => (None, None),
        };
        let tails = self.history.db()?.session_tails(since.as_deref(), only)?;
        if let (Selection::Session(id), true) = (selection, tails.is_empty()) {
            return Err(CairnError::new(
                ErrorCode::HistorySessionNotFound,
                format!("the history archive has no conversation {id:?} with messages"),
            )
            .with_hint("cairn history sessions lists them; cairn history ingest reads the hosts' storage first"));
        }
        let mut plan = Vec::new();
        for tail in tails {
            if tail.parent_id.is_some() && !matches!(selection, Selection::Session(_)) {
                // A sub-agent's findings come back into its parent's conversation.
                continue;
            }
            if let Some(work) = self.session_work(&tail, selection, policy, now)? {
                plan.push(work);
            }
        }
        // One brief per project: the first conversation writes it, the others find it there.
        let mut briefed = std::collections::HashSet::new();
        for work in &mut plan {
            if work.brief_files.is_some() && !briefed.insert(work.project.clone()) {
                work.brief_files = None;
            }
        }
        Ok(plan)
    }

    fn session_work(
        &mut self,
        tail: &SessionTail,
        selection: &Selection,
        policy: &ExtractionPolicy,
        now: OffsetDateTime,
    ) -> Result<Option<SessionWork>> {
        let state = self.store.extraction_state(&tail.session_id)?;
        let background = *selection == Selection::Due;
        if background && state.next_attempt_at.as_deref().and_then(parse_ts).is_some_and(|at| at > now) {
            return Ok(None);
        }
        let has_new = state.mark.as_ref().is_none_or(|mark| *mark < tail.last);
        let idle_for = parse_ts(&tail.last_at).map_or(Duration::MAX, |at| now - at);
        let ended = idle_for >= policy.ended_after || self.store.session_ended(&tail.session_id)?;
        let history = self.history.db()?;
        let settled = !background
            || idle_for >= policy.cooldown
            || ended
            || history.compacted_after(&tail.session_id, state.mark.as_ref())?;
        let summary_owed_at_end = ended && state.turns_since_summary > 0;
        if !settled || !(has_new || summary_owed_at_end) {
            return Ok(None);
        }
        let mut messages = if has_new {
            history.messages_after(&tail.session_id, state.mark.as_ref(), policy.messages_per_pass)?
        } else {
            Vec::new()
        };
        redact_all(&mut messages);
        let turns = state.turns_since_summary + messages.iter().filter(|m| m.opens_turn).count() as u32;
        let summary = if turns >= policy.summary_every_turns.max(1) || (ended && turns > 0) {
            let mut since_summary =
                history.messages_after(&tail.session_id, state.summary_mark.as_ref(), policy.messages_per_pass)?;
            redact_all(&mut since_summary);
            let previous = self.store.extracted_summary(&tail.session_id)?.map(|p| without_request_line(&p).to_owned());
            let opening = opening_request(history, &tail.session_id)?;
            Some(SummaryWork { previous, messages: since_summary, opening })
        } else {
            None
        };
        let project = tail.project.clone().unwrap_or_default();
        let brief_files = if !state.brief_checked && !project.is_empty() && !self.store.has_brief(&project)? {
            Some(
                tail.directory.as_deref().map(|d| project_files(Path::new(d), policy.window_bytes)).unwrap_or_default(),
            )
        } else {
            None
        };
        Ok(Some(SessionWork {
            session_id: tail.session_id.clone(),
            project,
            directory: tail.directory.clone(),
            mark: state.mark,
            messages,
            summary,
            brief_files,
        }))
    }
}

/// How many of a conversation's first messages are looked through for its opening request.
const OPENING_SCAN: usize = 8;

/// The request line of the conversation's first user message, redacted.
fn opening_request(history: &crate::history::HistoryDb, session_id: &str) -> Result<Option<String>> {
    let first = history.messages_after(session_id, None, OPENING_SCAN)?;
    Ok(first
        .iter()
        .find(|m| m.role == HistoryRole::User && !m.text.trim().is_empty())
        .and_then(|m| request_line(&redact_for_model(&m.text))))
}

fn redact_all(messages: &mut [ExtractableMessage]) {
    for message in messages {
        message.text = redact_for_model(&message.text);
    }
}

/// The files a project's brief is written from, in this order, when present.
const BRIEF_FILES: &[&str] = &[
    "README.md",
    "README",
    "README.rst",
    "README.txt",
    "readme.md",
    "Cargo.toml",
    "package.json",
    "pyproject.toml",
    "go.mod",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "Gemfile",
    "composer.json",
    "mix.exs",
    "deno.json",
    "setup.py",
    "requirements.txt",
    "Makefile",
];
/// Bytes read of one file for the brief.
const BRIEF_FILE_BYTES: usize = 8 * 1024;

/// A project's README and manifest files in `dir` (redacted, each cut, `budget` bytes in all).
/// Only regular files are read: a FIFO or a link out of the project is not.
pub fn project_files(dir: &Path, budget: usize) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut left = budget;
    for name in BRIEF_FILES {
        let path = dir.join(name);
        let regular = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
        if !regular || left < 256 {
            continue;
        }
        let Ok(bytes) = std::fs::read(&path) else { continue };
        let text = String::from_utf8_lossy(&bytes[..bytes.len().min(BRIEF_FILE_BYTES.min(left))]).into_owned();
        let text = redact_for_model(&text);
        if text.trim().is_empty() {
            continue;
        }
        left = left.saturating_sub(text.len());
        files.push(((*name).to_owned(), text));
    }
    files
}

/// Words of a text that say something (for the near-duplicate check): lowercase, letters and
/// digits, three characters or more.
fn words(text: &str) -> std::collections::HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.chars().count() >= 3).map(str::to_lowercase).collect()
}

/// Share of a new fact's words an existing memory must hold for the fact to add nothing.
const NEAR_DUPLICATE_SHARE: f64 = 0.8;
/// Fewer words than this are compared by their exact hash only (too few to judge by overlap).
const NEAR_DUPLICATE_MIN_WORDS: usize = 4;
/// Memories sharing words with a new fact that are compared with it, the best matches first.
const NEAR_DUPLICATE_CANDIDATES: usize = 20;

/// Whether a live memory of `project` already says `content`: the same normalized text, or one
/// holding nearly all of its words (found through the full-text index).
fn already_said(store: &Store, project: &str, content: &str) -> Result<Option<i64>> {
    let hash = crate::text::normalized_hash(&redact_for_model(content));
    let exact = store.live_memory_with_hash(&hash, project)?;
    if exact.is_some() {
        return Ok(exact);
    }
    let mine = words(content);
    if mine.len() < NEAR_DUPLICATE_MIN_WORDS {
        return Ok(None);
    }
    let query = mine.iter().map(|w| format!("\"{w}\"")).collect::<Vec<_>>().join(" OR ");
    for (id, title, body) in store.live_memories_matching(&query, project, NEAR_DUPLICATE_CANDIDATES)? {
        let theirs = words(&format!("{title} {body}"));
        let shared = mine.iter().filter(|w| theirs.contains(*w)).count();
        if shared as f64 >= NEAR_DUPLICATE_SHARE * mine.len() as f64 {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// Where extraction stands (op `extraction_status`, shown by `cairn llm status`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExtractionStatus {
    /// When extraction was first on: the background worker extracts what is newer.
    pub since: Option<String>,
    /// Conversations extracted at least once.
    pub sessions: u64,
    pub facts_saved: u64,
    pub duplicates_skipped: u64,
    /// Memories a model wrote that are still live, by origin.
    pub extracted_memories: u64,
    /// When a conversation was last extracted.
    pub last_extracted_at: Option<String>,
    /// Conversations whose last attempt failed, the next retry first.
    pub failing: Vec<FailingSession>,
}

/// Where a memory came from, when a model wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Provenance {
    pub origin: Origin,
    pub session_id: Option<String>,
    pub message_ids: Vec<String>,
    pub provider: String,
    pub model: String,
    pub created_at: String,
}

impl Store {
    /// The running summary a model wrote for the conversation.
    fn extracted_summary(&self, session_id: &str) -> Result<Option<String>> {
        self.newest_memory_content(&format!("summary/{session_id}"), SUMMARY_TYPE)
    }

    /// Whether the project has a brief (a model's or anyone's).
    fn has_brief(&self, project: &str) -> Result<bool> {
        self.has_brief_under(project, BRIEF_TOPIC)
    }

    /// Save what a model wrote for one window, summary or brief, and move the conversation's
    /// state, in one transaction: all of it or none.
    pub fn commit_extraction(&mut self, commit: &ExtractionCommit) -> Result<CommitOutcome> {
        let now = self.now();
        self.in_transaction(|store| {
            let state = store.extraction_state(&commit.session_id)?;
            if state.mark != commit.expected_mark {
                return Ok(CommitOutcome { stale: true, ..CommitOutcome::default() });
            }
            let mut outcome = CommitOutcome::default();
            // Only facts count as facts saved: a summary or a brief is counted by its own kind.
            let mut facts_saved = 0_i64;
            for memory in &commit.memories {
                if memory.origin.is_fact() && already_said(store, &commit.project, &memory.content)?.is_some() {
                    outcome.duplicates += 1;
                    continue;
                }
                match store.save_extracted(commit, memory, &now)?.action {
                    SaveAction::Duplicate => outcome.duplicates += 1,
                    SaveAction::Created | SaveAction::Revised => {
                        outcome.saved += 1;
                        facts_saved += i64::from(memory.origin.is_fact());
                    }
                }
            }
            let mark = commit.new_mark.clone().or(state.mark);
            store.advance_extraction_state(&StateAdvance {
                session_id: &commit.session_id,
                project: &commit.project,
                mark: mark.as_ref(),
                turns: if commit.summarized { 0 } else { commit.turns },
                summarized: commit.summarized,
                brief_checked: commit.brief_checked,
                facts_saved,
                duplicates: outcome.duplicates as i64,
                now: &now,
            })?;
            Ok(outcome)
        })
    }

    /// Save one memory a model wrote, with its provenance, in the caller's transaction.
    fn save_extracted(&mut self, commit: &ExtractionCommit, memory: &Extracted, now: &str) -> Result<SaveOutcome> {
        // The conversation's own session, when cairn recorded it, decides the project.
        let known = self.session_known(&commit.session_id)?;
        let new = NewObservation {
            title: memory.title.clone(),
            content: memory.content.clone(),
            kind: Some(memory.kind.clone()),
            session_id: Some(commit.session_id.clone()),
            project: (!known && !commit.project.is_empty()).then(|| commit.project.clone()),
            topic_key: memory.topic_key.clone(),
            directory: commit.directory.clone(),
            ..NewObservation::default()
        };
        let ids = serde_json::to_string(&memory.message_ids)?;
        self.save_then(&new, |tx, saved| {
            if saved.action != SaveAction::Duplicate {
                extraction::record_provenance(
                    tx,
                    &ProvenanceRow {
                        observation_id: saved.id,
                        origin: memory.origin.as_str().to_owned(),
                        session_id: Some(commit.session_id.clone()),
                        message_ids: ids.clone(),
                        provider: commit.provider.clone(),
                        model: commit.model.clone(),
                        created_at: now.to_owned(),
                    },
                )?;
            }
            Ok(())
        })
    }

    /// The rules a developer states in a prompt ("from now on …", "always use pnpm": see
    /// `directives`) and the suggestions they turn down ("Dad asked if I'd make it for iPhone.
    /// No. …": see `refusals`), saved at once in their words, with no model: remembered with
    /// the LLM off too (the default), and before any extraction pass. One a memory already says
    /// saves nothing (the extraction, when on, finds it again later as a duplicate). A prompt
    /// that seems to state more than `MAX_RULES_PER_PROMPT` is a pasted document, left to the
    /// extraction. The ids of the memories saved.
    pub fn save_stated_rules(&mut self, session_id: &str, prompt: &str) -> Result<Vec<i64>> {
        let said = TranscriptMessage { id: String::new(), role: Role::User, text: redact_for_model(prompt) };
        let said = std::slice::from_ref(&said);
        let mut rules = directives::directives(said);
        rules.extend(refusals::refusals(said));
        if rules.is_empty() || rules.len() > MAX_RULES_PER_PROMPT {
            return Ok(Vec::new());
        }
        // The prompt has no message id yet: the host writes the message after the hook.
        for rule in &mut rules {
            rule.message_ids.clear();
        }
        let commit = ExtractionCommit {
            session_id: session_id.to_owned(),
            project: self.session_project(session_id)?.unwrap_or_default(),
            directory: None,
            expected_mark: None,
            new_mark: None,
            turns: 0,
            memories: Vec::new(),
            summarized: false,
            brief_checked: false,
            provider: String::new(),
            model: String::new(),
        };
        let now = self.now();
        self.in_transaction(|store| {
            let mut saved = Vec::new();
            for rule in &rules {
                if already_said(store, &commit.project, &rule.content)?.is_some() {
                    continue;
                }
                let outcome = store.save_extracted(&commit, rule, &now)?;
                if outcome.action != SaveAction::Duplicate {
                    saved.push(outcome.id);
                }
            }
            Ok(saved)
        })
    }

    /// Record a failed attempt: the next one waits `backoff_base` doubled per failure before it,
    /// up to `backoff_cap`. The mark does not move.
    pub fn record_extraction_failure(
        &mut self,
        session_id: &str,
        code: ErrorCode,
        message: &str,
        policy: &ExtractionPolicy,
    ) -> Result<()> {
        let now = self.clock().now();
        let attempts = self.extraction_attempts(session_id)?;
        let wait = backoff(policy, attempts + 1);
        let (now_ts, next) = (format_ts(now), format_ts(now + wait));
        let message = crate::text::cut_at_char_boundary(message, 500).to_owned();
        self.write_extraction_failure(session_id, &next, code.as_str(), &message, &now_ts)
    }

    /// Where extraction stands.
    pub fn extraction_status(&self) -> Result<ExtractionStatus> {
        let totals = self.extraction_totals()?;
        Ok(ExtractionStatus {
            since: self.extraction_since()?,
            sessions: totals.sessions as u64,
            facts_saved: totals.facts_saved as u64,
            duplicates_skipped: totals.duplicates_skipped as u64,
            extracted_memories: self.extracted_memory_count()? as u64,
            last_extracted_at: totals.last_extracted_at,
            failing: self.failing_extractions(FAILING_SHOWN)?,
        })
    }

    /// Where a memory came from, when a model wrote it.
    pub fn provenance(&self, id: i64) -> Result<Option<Provenance>> {
        Ok(self.provenance_row(id)?.map(|row| Provenance {
            origin: match row.origin.as_str() {
                "summary" => Origin::Summary,
                "brief" => Origin::Brief,
                "directive" => Origin::Directive,
                "setting" => Origin::Setting,
                "diagnosis" => Origin::Diagnosis,
                "refusal" => Origin::Refusal,
                _ => Origin::Fact,
            },
            session_id: row.session_id,
            message_ids: serde_json::from_str(&row.message_ids).unwrap_or_default(),
            provider: row.provider,
            model: row.model,
            created_at: row.created_at,
        }))
    }
}

/// Failing conversations `extraction_status` lists, the next retry first.
const FAILING_SHOWN: usize = 50;

/// The wait before attempt number `attempt + 1` after `attempt` failures in a row.
fn backoff(policy: &ExtractionPolicy, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(20);
    let wait = policy.backoff_base * 2_i32.pow(doublings);
    if wait > policy.backoff_cap { policy.backoff_cap } else { wait }
}

#[cfg(test)]
#[path = "extract_tests.rs"]
mod tests;

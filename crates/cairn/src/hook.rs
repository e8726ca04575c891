//! `cairn hook [--host codex|gemini] <event>`: one hook of Claude Code (or of Codex, which
//! copies Claude Code's contract, or Gemini CLI, which renames its events), a translator. Reads the hook's JSON on stdin,
//! sends the event's one op (`session_start`, `user_prompt`, `tool_call`, ...; the rules are
//! cairn-core's) through the one client (the daemon, started if needed, else the file), and
//! prints Claude Code's answer.
//!
//! A hook sits on the agent's critical path, so it never fails and never waits long: a
//! watchdog thread prints the fail-open answer (`{}`) at the deadline and exits 0 whatever the
//! work is doing. Problems are one line on stderr.
//!
//! Writes are never lost to a cold or busy daemon: each goes through [`Client::deliver`], which
//! starts a daemon when none runs and waits for it within the hook's budget, and keeps the
//! write in the data dir's spool when none answers in time; the hook then answers `{}`. Reads
//! fail open. A hook
//! does not open the store itself while a daemon may be starting: the daemon could be
//! migrating, and a hook killed at its deadline mid-write would lose the event; a spool file
//! is written in microseconds and never waits for a lock.

use std::io::{Read, Seek, SeekFrom};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use cairn_client::{Client, ConnectOptions, Delivered, Role};
use cairn_core::agent::hooks::{
    FAIL_OPEN, HookEvent, HookInput, agent_of, clean, context_answer_for, last_assistant_text, transcript_usage,
    updated_input_answer, with_session_id, without_hook_context,
};
use cairn_core::agent::intent::{SessionStart, ToolCall, ToolCallOutcome, history_host, is_cairn_tool, wants_protocol};
use cairn_core::agent::meter::MeterRequest;
use cairn_core::agent::protocol::{Host, Part, ToolProfile};
use cairn_core::agent::{
    CompactionSave, CompactionTrigger, ProjectHints, ProtocolRequest, RecordSession, UserPrompt, protocol,
    resolve_project,
};
use cairn_core::history::ingest::{PokeRequest, check_host_source, process_env};
use cairn_core::ops::{EndSessionRequest, EventOutcome, Op, OpOutput, Request};
use cairn_core::sessions::NewSession;
use cairn_core::settings::{Overrides, Settings};
use cairn_core::{ErrorCode, passive};
use serde_json::Value;

use crate::output::{note, out};

/// The whole budget of a hook, from start to answer. Claude Code gives SessionEnd 1.5 s in
/// all, process start included, so that one gets less.
const DEADLINE: Duration = Duration::from_millis(1_400);
const SESSION_END_DEADLINE: Duration = Duration::from_secs(1);
/// Most stdin read: a hook payload is a few KB (a PostToolUse with a big tool output more).
const MAX_STDIN: u64 = 16 * 1024 * 1024;
/// Tail of a transcript read for the last answer: records are small, tool results are not.
const TRANSCRIPT_TAIL: u64 = 512 * 1024;

/// Run `host`'s hook for `event` and print its answer. Never an error: the exit code is 0.
pub fn run(event: &str, host: &str, overrides: Overrides) -> Result<()> {
    let started = Instant::now();
    let Ok(host @ (Host::ClaudeCode | Host::Codex | Host::Gemini)) = Host::parse(host) else {
        note(&format!(
            "cairn hook: {host:?} is not a host with hooks: claude-code, codex or gemini (answered {FAIL_OPEN})"
        ));
        return print(FAIL_OPEN);
    };
    let Some(event) = HookEvent::parse_for(host, event) else {
        note(&format!("cairn hook: unknown event {event:?} (answered {FAIL_OPEN})"));
        return print(FAIL_OPEN);
    };
    let deadline = if event == HookEvent::SessionEnd { SESSION_END_DEADLINE } else { DEADLINE };
    let until = started + deadline;
    // The work runs on this thread and a watchdog thread keeps the deadline: one thread's heap
    // and caches warm instead of two, and the answer needs no hand-over between threads
    // (fewer page faults and wake-ups per hook; docs/BENCHMARKS.md). Whichever of the two
    // claims `answered` first prints; the other prints nothing.
    let answered = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let answered = Arc::clone(&answered);
        std::thread::Builder::new().name("hook-deadline".into()).spawn(move || {
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
            if !answered.swap(true, Ordering::SeqCst) {
                let late = anyhow!("no answer within {} ms; the store is slow or starting", deadline.as_millis());
                fail_open(event, &late);
                // the work may still be waiting on the store: the hook is done all the same
                std::process::exit(0);
            }
        })
    };
    let answer = match watchdog {
        Err(e) => Err(anyhow!("cannot start the hook's thread: {e}")),
        Ok(_) => std::panic::catch_unwind(AssertUnwindSafe(|| answer(host, event, &overrides, until)))
            .unwrap_or_else(|_| Err(anyhow!("the hook's work stopped without an answer"))),
    };
    if answered.swap(true, Ordering::SeqCst) {
        // The watchdog answered at the deadline and is ending the process.
        loop {
            std::thread::park();
        }
    }
    match answer {
        Ok(text) => print(&text),
        Err(e) => {
            fail_open(event, &e);
            Ok(())
        }
    }
}

/// The fail-open answer, with its reason as one line on stderr.
fn fail_open(event: HookEvent, why: &anyhow::Error) {
    note(&format!("cairn hook {}: {why:#} (answered {FAIL_OPEN})", event.name()));
    let _ = print(FAIL_OPEN);
}

/// Print the answer; a reader that went away is not the hook's problem.
fn print(text: &str) -> Result<()> {
    let _ = out(text);
    Ok(())
}

fn answer(host: Host, event: HookEvent, overrides: &Overrides, deadline: Instant) -> Result<String> {
    let payload = read_payload()?;
    let input = HookInput::from_value(&payload);
    let session = input.session_id.clone().context("the payload has no session_id")?;
    // PreToolUse is on every cairn tool call: it needs nothing from the store.
    if event == HookEvent::PreToolUse {
        let tool = input.tool_name.as_deref().unwrap_or("");
        return Ok(with_session_id(tool, input.tool_input.as_ref(), &session)
            .map_or_else(|| FAIL_OPEN.to_owned(), |updated| updated_input_answer(&updated)));
    }
    // A write past a file size limit (a full disk) then fails, and the hook still answers.
    crate::daemon::survive_file_size_limit();
    let settings = Settings::load(overrides)?;
    crate::hook_log::init(&settings.log.value);
    let client = Client::new(ConnectOptions::from_settings(&settings, Role::Hook)?);
    let hook = Hook { host, input, session, settings, client, deadline };
    match event {
        HookEvent::SessionStart => hook.session_start(),
        HookEvent::UserPromptSubmit => hook.user_prompt_submit(),
        HookEvent::PostToolUse => hook.post_tool_use(),
        HookEvent::SubagentStart => hook.subagent_start(),
        HookEvent::SubagentStop => {
            hook.archive(hook.input.agent_transcript_path.as_deref());
            hook.capture(true)
        }
        HookEvent::Stop => {
            hook.archive(hook.input.transcript_path.as_deref());
            let answer = hook.capture(false);
            // after the capture: the record names the turn's Key Learnings
            hook.record_session();
            answer
        }
        HookEvent::PostCompact => hook.post_compact(),
        HookEvent::SessionEnd => hook.session_end(),
        // Claude Code writes the compact boundary next: archive everything before it first.
        HookEvent::PreCompact => {
            hook.archive(hook.input.transcript_path.as_deref());
            Ok(FAIL_OPEN.to_owned())
        }
        HookEvent::PreToolUse => Ok(FAIL_OPEN.to_owned()),
    }
}

fn read_payload() -> Result<Value> {
    let mut raw = Vec::new();
    std::io::stdin().take(MAX_STDIN).read_to_end(&mut raw).context("cannot read stdin")?;
    if raw.iter().all(u8::is_ascii_whitespace) {
        bail!("stdin is empty: expected the hook's JSON");
    }
    let value: Value = serde_json::from_slice(&raw).map_err(|e| anyhow!("stdin is not the hook's JSON: {e}"))?;
    if !value.is_object() {
        bail!("stdin is not a JSON object");
    }
    Ok(value)
}

struct Hook {
    /// Whose hook: its agent name, its texts, its transcripts.
    host: Host,
    input: HookInput,
    session: String,
    settings: Settings,
    client: Client,
    /// When the answer is due: a write not answered by then is kept in the spool.
    deadline: Instant,
}

impl Hook {
    fn call<R: Request>(&self, request: R) -> Result<R::Output> {
        Ok(self.client.call(request)?)
    }

    /// A write, delivered within the hook's budget: its result, or `None` when no daemon
    /// answered in time and it was kept in the spool for the daemon (the hook then answers
    /// `{}`: what it would add needs the store).
    fn write<R: Request>(&self, request: R) -> Result<Option<R::Output>> {
        Ok(self.deliver(request.into_op())?.map(R::output).transpose()?)
    }

    /// [`Hook::write`] for a write whose result the hook does not use.
    fn write_only(&self, op: Op) -> Result<()> {
        self.deliver(op).map(drop)
    }

    fn deliver(&self, op: Op) -> Result<Option<OpOutput>> {
        let budget = self.deadline.saturating_duration_since(Instant::now());
        match self.client.deliver(op, agent_of(self.host), budget)? {
            Delivered::Answered(EventOutcome::Applied(output)) => Ok(Some(output)),
            // Applied before under the same event id: its result is not kept.
            Delivered::Answered(EventOutcome::Duplicate(_)) => Ok(None),
            // no line on stderr: a cold start is not a problem, and nothing was lost
            Delivered::Spooled(_) => Ok(None),
        }
    }

    fn cwd(&self) -> Option<String> {
        self.input.cwd.clone()
    }

    /// `--project` / `CAIRN_PROJECT`, when set: otherwise the daemon detects the project from
    /// [`Self::directory`] (and caches it), so the hook runs no git of its own.
    fn named_project(&self) -> Option<String> {
        self.settings.project.value.clone()
    }

    /// Where Claude Code runs: the payload's `cwd`, else this process's.
    fn directory(&self) -> Option<String> {
        self.cwd().or_else(|| std::env::current_dir().ok().map(|d| d.display().to_string()))
    }

    /// The project of the directory Claude Code runs in (`CAIRN_PROJECT` wins).
    fn project(&self) -> Result<String> {
        let hints = ProjectHints {
            process: self.settings.project.value.clone(),
            dir: self.input.cwd.as_ref().map(PathBuf::from),
            process_cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            ..ProjectHints::default()
        };
        Ok(resolve_project(&hints, |_| Ok(None))?.project)
    }

    /// A text of the one protocol source, for the host with the agent tools; empty when
    /// `[inject] protocol` leaves its agent out.
    fn protocol(&self, part: Part) -> String {
        if part == Part::Memory && !wants_protocol(&self.settings.plugin.config, Some(agent_of(self.host))) {
            return String::new();
        }
        protocol(ProtocolRequest { host: self.host, tools: ToolProfile::Agent, part, session_id: None }).text
    }

    /// The answer in the host's words.
    fn context_answer(&self, event: HookEvent, parts: &[String]) -> String {
        context_answer_for(self.host, event, parts)
    }

    /// The transcript's last 512 KB (`None` when there is none to read).
    fn transcript_tail(&self, path: Option<&str>) -> Option<String> {
        let path = path?;
        let read = || -> std::io::Result<String> {
            let mut file = std::fs::File::open(path)?;
            let len = file.metadata()?.len();
            file.seek(SeekFrom::Start(len.saturating_sub(TRANSCRIPT_TAIL)))?;
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        };
        match read() {
            Ok(text) => Some(text),
            Err(e) => {
                note(&format!("cairn hook: cannot read the transcript {path}: {e}"));
                None
            }
        }
    }

    /// Register the session and inject what `session_start` answers: the protocol and the
    /// project's context; on a resume only what changed; after a compaction the note and chart.
    fn session_start(&self) -> Result<String> {
        let Some(start) = self.write(SessionStart {
            session_id: self.session.clone(),
            project: self.named_project(),
            directory: self.directory(),
            agent: Some(agent_of(self.host).to_owned()),
            host: self.host,
            source: self.input.source.clone(),
            transcript_path: self.input.transcript_path.as_ref().map(PathBuf::from),
            ..SessionStart::default()
        })?
        else {
            return Ok(FAIL_OPEN.to_owned());
        };
        self.start_sync_import();
        Ok(self.context_answer(HookEvent::SessionStart, &start.texts))
    }

    /// When the repository holds git sync chunks, have the daemon import them in the
    /// background (it answers at once; the session never waits for the import).
    fn start_sync_import(&self) {
        let Some(dir) = self.directory().map(PathBuf::from) else { return };
        if ![".cairn", ".engram"].iter().any(|f| dir.join(f).join("manifest.json").is_file()) {
            return;
        }
        let budget = self.deadline.saturating_duration_since(Instant::now()).min(Duration::from_millis(300));
        if !self.client.start_sync_import(&dir, budget) {
            note("cairn hook: the sync import did not start (no daemon answered)");
        }
    }

    /// Store the prompt and inject what `user_prompt` answers for it: the `[MEMORY]` block of a
    /// first prompt, the trigger note, the save reminder when due, the context meter.
    fn user_prompt_submit(&self) -> Result<String> {
        let prompt = self.input.prompt.as_deref().context("UserPromptSubmit without a prompt")?;
        let prompt = clean(&without_hook_context(prompt));
        let Some(outcome) = self.write(UserPrompt {
            session_id: self.session.clone(),
            project: self.named_project(),
            content: prompt,
            agent: Some(agent_of(self.host).to_owned()),
            directory: self.directory(),
            host: Some(self.host),
            remind: true,
            usage: self.usage(),
        })?
        else {
            return Ok(FAIL_OPEN.to_owned());
        };
        Ok(self.context_answer(HookEvent::UserPromptSubmit, &outcome.texts))
    }

    /// The window's usage from the transcript's last answer (the meter's numbers); only
    /// Claude Code's transcript is read for it.
    fn usage(&self) -> Option<MeterRequest> {
        if self.host != Host::ClaudeCode {
            return None;
        }
        let tail = self.transcript_tail(self.input.transcript_path.as_deref())?;
        let usage = transcript_usage(&tail, 0)?;
        Some(MeterRequest { used: usage.used, limit: None, model: Some(usage.model), host: Host::ClaudeCode })
    }

    /// Count the agent's tool calls (cairn's own are counted by its MCP server: no round trip).
    fn post_tool_use(&self) -> Result<String> {
        let Some(tool) = self.input.tool_name.clone().filter(|t| !is_cairn_tool(self.host, t)) else {
            return Ok(FAIL_OPEN.to_owned());
        };
        let _: Option<ToolCallOutcome> = self.write(ToolCall {
            session_id: self.session.clone(),
            project: self.named_project(),
            directory: self.directory(),
            tool,
            host: self.host,
            remind: false,
        })?;
        Ok(FAIL_OPEN.to_owned())
    }

    /// SubagentStop and Stop: the `## Key Learnings` of a finished sub-agent or turn, saved by
    /// passive capture. Nothing to capture means no round trip at all.
    fn capture(&self, subagent: bool) -> Result<String> {
        let transcript = if subagent { &self.input.agent_transcript_path } else { &self.input.transcript_path };
        let text = match &self.input.last_assistant_message {
            Some(text) => text.clone(),
            None => match self.transcript_tail(transcript.as_deref()).as_deref().and_then(last_assistant_text) {
                Some(text) => text,
                None => return Ok(FAIL_OPEN.to_owned()),
            },
        };
        let text = clean(&text);
        if passive::extract_learnings(&text).is_empty() {
            return Ok(FAIL_OPEN.to_owned());
        }
        let source = if subagent { "subagent-stop" } else { "turn-complete" };
        self.write_only(Op::CapturePassive(passive::PassiveCapture {
            content: text,
            session_id: Some(self.session.clone()),
            project: self.named_project(),
            directory: self.directory(),
            source: Some(source.to_owned()),
        }))?;
        Ok(FAIL_OPEN.to_owned())
    }

    /// PreCompact: the summary Claude Code wrote, stored as the session's compaction summary.
    fn post_compact(&self) -> Result<String> {
        let Some(summary) = self.input.compact_summary.as_deref() else {
            bail!("PostCompact without a compact_summary");
        };
        let trigger = if self.input.trigger.as_deref() == Some("manual") {
            CompactionTrigger::Manual
        } else {
            CompactionTrigger::Auto
        };
        self.write_only(Op::SaveCompaction(CompactionSave {
            session_id: self.session.clone(),
            project: self.named_project(),
            directory: self.directory(),
            summary: clean(summary),
            trigger,
            overflow: false,
        }))?;
        Ok(FAIL_OPEN.to_owned())
    }

    /// History ingest: have the daemon read what is new in a transcript into the history archive
    /// (Claude Code deletes transcripts after 30 days). A failure costs nothing but a log line: the
    /// daemon's periodic scan reads the file later.
    fn archive(&self, transcript: Option<&str>) {
        let Some(path) = transcript else { return };
        let poke = PokeRequest { host: history_host(self.host), path: Some(PathBuf::from(path)), session_id: None };
        // Only the host's own transcripts are archived (the daemon refuses anything else):
        // one elsewhere (a test, a wrapper) is simply not the archive's business.
        if check_host_source(&process_env, &poke).is_err() {
            return;
        }
        if let Err(e) = self.call(poke) {
            note(&format!("cairn hook: archiving {path} failed: {e:#}"));
        }
    }

    /// Upstream history: a sub-agent gets the protocol, and its parent's session id with how to
    /// pull the parent's history (unless `[history] upstream_history` says otherwise for it).
    fn subagent_start(&self) -> Result<String> {
        let mut parts = vec![self.protocol(Part::Memory)];
        let upstream = &self.settings.history.config.upstream_history;
        let agent_off =
            self.input.agent_type.as_ref().is_some_and(|agent| upstream.disable_for_agents.iter().any(|a| a == agent));
        if upstream.enable && !agent_off {
            parts.push(
                protocol(ProtocolRequest {
                    host: self.host,
                    tools: ToolProfile::Agent,
                    part: Part::Upstream,
                    session_id: Some(self.session.clone()),
                })
                .text,
            );
        }
        Ok(self.context_answer(HookEvent::SubagentStart, &parts))
    }

    /// SessionEnd: the session ends here, not at every Stop; an unknown session is registered first
    /// (its end would be `session_not_found`). Its activity is kept: `claude --resume` goes on
    /// with the same session id, and its next prompt is not a first one (no second `[MEMORY]`
    /// block) while the transcript replays what was injected.
    fn session_end(&self) -> Result<String> {
        // archived first: ending the session revises its Last Session record from the archive
        self.archive(self.input.transcript_path.as_deref());
        self.end_session()?;
        Ok(FAIL_OPEN.to_owned())
    }

    /// Revise the session's Last Session record after a turn (the next session's "what we did
    /// last time"); a failure is a line on stderr, the turn is done either way.
    fn record_session(&self) {
        let req = RecordSession { session_id: self.session.clone(), project: self.named_project(), compacted: false };
        if let Err(e) = self.write_only(Op::RecordSession(req)) {
            note(&format!("cairn hook: the Last Session record of {} was not revised: {e:#}", self.session));
        }
    }

    fn end_session(&self) -> Result<()> {
        let end = || {
            self.write_only(Op::EndSession(EndSessionRequest {
                id: self.session.clone(),
                summary: None,
                keep_activity: true,
            }))
        };
        match end() {
            Err(e)
                if e.downcast_ref::<cairn_core::CairnError>().is_some_and(|e| e.code == ErrorCode::SessionNotFound) =>
            {
                self.write_only(Op::StartSession(NewSession {
                    id: self.session.clone(),
                    project: Some(self.project()?),
                    directory: self.cwd(),
                    agent: Some(agent_of(self.host).to_owned()),
                    ..NewSession::default()
                }))?;
                end()?;
            }
            other => {
                other?;
            }
        }
        Ok(())
    }
}

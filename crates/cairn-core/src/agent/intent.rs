//! One operation per thing an agent's host does (a session starts, a tool was called), so a
//! hook or a plugin makes one round trip per event and only translates: every rule of what
//! is injected and counted lives here. `user_prompt` (in [`super::activity`]) is the third.
//!
//! - `session_start`: register the session, then what the host injects: the protocol and the
//!   project's context; after a compaction the note that the summary is stored (and, in
//!   `chart` mode, the chart of the turns before it); on a resume only what changed since the
//!   last injection (the host replays that one).
//! - `tool_call`: count one of the agent's tool calls (cairn's own are counted by its MCP
//!   server), with the save reminder when asked for one.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::activity::{ActivityEvent, ActivityRecord, SessionActivity};
use super::hooks::{MAX_CONTEXT_CHARS, StartInjection, StartKind, fingerprint, start_injection};
use super::meter::{MeterReading, MeterRequest, meter_of};
use super::project_or_detected;
use super::protocol::{Host, Part, host_text};
use crate::Core;
use crate::context::{ContextLayout, ContextRequest};
use crate::error::{ErrorCode, Result};
use crate::history::ingest::PokeRequest;
use crate::history::model::HistoryHost;
use crate::sessions::{NewSession, validate_session_id};
use crate::settings::RuleSettings;
use crate::settings::plugin::{CompactionMode, PluginConfig, ProtocolAgents};
use crate::store::Store;

/// What `session_start` asks of the history archive after a compaction. The ops answer it
/// with the history ops every door calls (the same settings, the same call log), so the agent
/// rules need not know how ops run.
pub trait SessionArchive {
    /// Read the host's transcript that `poke` names into the archive.
    fn ingest(&mut self, rules: &RuleSettings, poke: PokeRequest) -> Result<()>;
    /// The chart of the session's turns (`history_chart`).
    fn chart(&mut self, rules: &RuleSettings, session_id: &str) -> Result<String>;
}

/// The agent name a host's sessions are registered with, when the caller names none.
fn default_agent(host: Host) -> Option<String> {
    match host {
        Host::Mcp => None,
        host => Some(super::hooks::agent_of(host).to_owned()),
    }
}

/// Whether `session_start` brings the protocol. Codex and Gemini CLI get it from what setup
/// wrote, whether or not their hooks run (Codex: the MCP server's instructions; Gemini CLI:
/// `GEMINI.md`), so their hooks bring the context alone rather than a second copy.
fn protocol_at_start(host: Host) -> bool {
    !matches!(host, Host::Codex | Host::Gemini)
}

/// The history archive's name for a host's transcripts (`None`: it has none cairn reads).
pub fn history_host(host: Host) -> Option<HistoryHost> {
    match host {
        Host::Opencode => Some(HistoryHost::OpenCode),
        Host::ClaudeCode => Some(HistoryHost::ClaudeCode),
        Host::Codex => Some(HistoryHost::Codex),
        Host::Gemini => Some(HistoryHost::Gemini),
        Host::Mcp => None,
    }
}

/// The arguments of `session_start`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionStart {
    pub session_id: String,
    /// Absent: the session's, else detected from `directory`.
    #[serde(default)]
    pub project: Option<String>,
    #[serde(default)]
    pub directory: Option<String>,
    /// The agent (default: the host's name).
    #[serde(default)]
    pub agent: Option<String>,
    /// Whose texts (default: Claude Code).
    #[serde(default = "claude_code")]
    pub host: Host,
    /// Why the session starts: `startup` (default), `clear`, `resume` or `compact`.
    #[serde(default)]
    pub source: Option<String>,
    /// The host's transcript, read into the history archive before the chart of a compaction.
    #[serde(default)]
    pub transcript_path: Option<PathBuf>,
    #[serde(default)]
    pub parent_id: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    /// The window's usage after the last answer, when the host knows it: the answer's `meter`.
    #[serde(default)]
    pub usage: Option<MeterRequest>,
}

fn claude_code() -> Host {
    Host::ClaudeCode
}

/// What a `session_start` injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Injected {
    /// The protocol and the context (and after a compaction the note and the chart).
    Everything,
    /// A resume whose context changed: the new context only.
    ContextOnly,
    /// A resume with the context of the last injection, which the host replays.
    Nothing,
}

/// The answer to `session_start`: the texts the host injects, in order, and each of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SessionStartOutcome {
    pub session_id: String,
    pub project: String,
    pub injected: Injected,
    /// What to put in front of the agent, in order, none empty (Claude Code: joined by blank
    /// lines into `additionalContext`).
    pub texts: Vec<String>,
    /// The Memory Protocol (empty when `[inject] protocol` leaves this agent out).
    pub protocol: String,
    /// The project's recent context (empty when there is none).
    pub context: String,
    /// After a compaction: the note that the summary is stored, and the chart when there is one.
    pub compaction_note: Option<String>,
    pub chart: Option<String>,
    pub meter: Option<MeterReading>,
}

/// The arguments of `tool_call`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub session_id: String,
    /// Creates the session when it is unknown.
    #[serde(default)]
    pub project: Option<String>,
    /// Where the agent works: the project of an unknown session when none is given.
    #[serde(default)]
    pub directory: Option<String>,
    /// The tool's name as the host shows it.
    pub tool: String,
    #[serde(default = "claude_code")]
    pub host: Host,
    /// Answer the save reminder due now (and count it as sent).
    #[serde(default)]
    pub remind: bool,
}

/// The answer to `tool_call`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ToolCallOutcome {
    /// Whether the call was counted (cairn's own tools are not: its MCP server counts them).
    pub counted: bool,
    pub reminder: Option<String>,
    /// The activity after it (none when not counted).
    pub activity: Option<SessionActivity>,
}

/// How OpenCode names cairn's tools (any case): its MCP tools `cairn_…`, engram's `mem_…`, the
/// history tools, the router, and the plugin's own tool. The plugin reads the same lists
/// (generated into `plugins/opencode/cairn/rules.ts`).
pub const OPENCODE_TOOL_PREFIXES: [&str; 3] = ["cairn_", "mem_", "history_"];
pub const OPENCODE_TOOL_NAMES: [&str; 2] = ["memory", "memory_compact"];

/// Whether `tool` is one of cairn's own tools as `host` names them: Claude Code's
/// `mcp__cairn__…`/`mcp__plugin_cairn_…`, OpenCode's `cairn_…`, `mem_…`, `history_…`,
/// `memory` and the plugin's `memory_compact`.
pub fn is_cairn_tool(host: Host, tool: &str) -> bool {
    match host {
        Host::Opencode => {
            let t = tool.to_ascii_lowercase();
            OPENCODE_TOOL_PREFIXES.iter().any(|p| t.starts_with(p)) || OPENCODE_TOOL_NAMES.contains(&t.as_str())
        }
        // Gemini CLI names an MCP tool `mcp_<server>_<tool>`
        Host::Gemini => tool.starts_with("mcp_cairn_"),
        _ => super::hooks::is_cairn_tool(tool),
    }
}

/// Whether `[inject] protocol` gives the protocol to `agent`.
pub fn wants_protocol(config: &PluginConfig, agent: Option<&str>) -> bool {
    match &config.inject.protocol {
        ProtocolAgents::All(on) => *on,
        ProtocolAgents::Named(agents) => agent.is_none_or(|a| agents.iter().any(|n| n == a)),
    }
}

impl Core {
    /// `session_start`: register the session and answer what its host injects.
    pub fn session_start(&mut self, req: &SessionStart) -> Result<SessionStartOutcome> {
        validate_session_id(&req.session_id)?;
        let config = self.settings.plugin_config();
        let agent = crate::agent::given(req.agent.clone()).or_else(|| default_agent(req.host));
        let project = match self.store.session_project(&req.session_id)? {
            Some(known) => Some(known),
            None => project_or_detected(req.project.as_deref(), req.directory.as_deref())?,
        };
        let session = self.store.start_session(&NewSession {
            id: req.session_id.clone(),
            project: crate::agent::given(req.project.clone()).or(project),
            directory: req.directory.clone(),
            agent: agent.clone(),
            parent_id: crate::agent::given(req.parent_id.clone()),
            title: req.title.clone(),
        })?;
        let project = session.project.clone();
        let kind = StartKind::of(req.source.as_deref());
        let injected_before =
            kind == StartKind::Resume && self.store.session_activity(&req.session_id)?.context_fingerprint.is_some();
        let protocol = if protocol_at_start(req.host) && wants_protocol(&config, agent.as_deref()) {
            host_text(req.host, Part::Memory)
        } else {
            String::new()
        };
        let (compaction_note, chart) = if kind == StartKind::Compact {
            let note = host_text(req.host, Part::CompactionNote);
            let chart = start_chart(&mut self.history, &self.settings, req, &config, protocol.len() + note.len());
            (Some(note), chart)
        } else {
            (None, None)
        };
        let note_len = compaction_note.as_ref().map_or(0, String::len) + chart.as_ref().map_or(0, |c| c.len() + 2);
        // The protocol and the note come first and whole; the context gets what is left.
        let room = MAX_CONTEXT_CHARS.saturating_sub(protocol.len() + note_len + 100);
        let context = self.recent_context(&project, &req.session_id, room.min(config.inject.budget_bytes))?;
        // The note is left out of the fingerprint: a resume after a compaction replays the
        // compact injection, and the same protocol and context again would be a second copy.
        let print = fingerprint(&[protocol.as_str(), context.as_str()].join("\u{0}"));
        let update = self.store.record_activity(&ActivityRecord {
            session_id: req.session_id.clone(),
            project: Some(project.clone()),
            event: ActivityEvent::ContextInjected { fingerprint: print },
        })?;
        let changed = update.context_changed.unwrap_or(true);
        let (injected, texts) = match start_injection(kind, injected_before, changed) {
            StartInjection::Everything => {
                let note = match (&compaction_note, &chart) {
                    (Some(note), Some(chart)) => format!("{note}\n\n{chart}"),
                    (Some(note), None) => note.clone(),
                    _ => String::new(),
                };
                (Injected::Everything, vec![protocol.clone(), context.clone(), note])
            }
            StartInjection::ContextOnly => (Injected::ContextOnly, vec![context.clone()]),
            StartInjection::Nothing => (Injected::Nothing, Vec::new()),
        };
        let texts = texts.into_iter().filter(|t| !t.trim().is_empty()).collect();
        let meter = req.usage.as_ref().map(|u| meter_of(u, req.host, &config));
        Ok(SessionStartOutcome {
            session_id: req.session_id.clone(),
            project,
            injected,
            texts,
            protocol,
            context,
            compaction_note,
            chart,
            meter,
        })
    }

    /// The project's recent context within `budget` bytes; empty when it holds nothing (a
    /// heading over nothing is noise in every request of the session). The asking session's own
    /// Last Session record is left out until it compacts.
    pub fn recent_context(&self, project: &str, session_id: &str, budget: usize) -> Result<String> {
        self.injected_context(ContextRequest {
            project: Some(project.to_owned()),
            session_id: Some(session_id.to_owned()),
            budget_bytes: budget,
            layout: ContextLayout::Recent,
            ..ContextRequest::default()
        })
    }

    /// The context of `req`. A recent-context heading over nothing is left out (noise in every
    /// request of the session); the `[MEMORY]` block is never empty: with nothing stored it
    /// says so, and how to search.
    pub(crate) fn injected_context(&self, req: ContextRequest) -> Result<String> {
        let ctx = self.context(&req)?;
        let empty = ctx.memory_ids.is_empty() && ctx.session_ids.is_empty() && ctx.prompt_ids.is_empty();
        Ok(if empty && req.layout == ContextLayout::Recent { String::new() } else { ctx.context })
    }
}

/// After a compaction in `chart` mode: the chart of the session's turns before it, when
/// the archive has them and it fits beside the `used` characters. The host's transcript
/// is read into the archive first.
fn start_chart(
    archive: &mut dyn SessionArchive,
    rules: &RuleSettings,
    req: &SessionStart,
    config: &PluginConfig,
    used: usize,
) -> Option<String> {
    if config.compaction.mode != CompactionMode::Chart || !config.history.context_charting.enable {
        return None;
    }
    if let Some(path) = &req.transcript_path {
        let host = history_host(req.host).unwrap_or(HistoryHost::ClaudeCode);
        let poke = PokeRequest { host: Some(host), path: Some(path.clone()), session_id: None };
        // Only a host's own transcript is read (anything else is refused, and not the
        // archive's business); a failure leaves the chart to what is archived already.
        if let Err(e) = archive.ingest(rules, poke) {
            tracing::debug!(session = req.session_id, error = %e, "archiving the transcript before its chart");
        }
    }
    let chart = match archive.chart(rules, &req.session_id) {
        Ok(chart) => chart,
        Err(e) => {
            if e.code != ErrorCode::HistorySessionNotFound {
                tracing::warn!(session = req.session_id, error = %e, "no chart after the compaction");
            }
            return None;
        }
    };
    let room = MAX_CONTEXT_CHARS.saturating_sub(used + 200);
    (chart.len() <= room && !chart.trim().is_empty()).then_some(chart)
}

impl Store {
    /// `tool_call`: count one of the agent's tool calls.
    pub fn tool_call(&mut self, call: &ToolCall) -> Result<ToolCallOutcome> {
        validate_session_id(&call.session_id)?;
        crate::text::require("tool", &call.tool)?;
        if is_cairn_tool(call.host, call.tool.trim()) {
            return Ok(ToolCallOutcome { counted: false, reminder: None, activity: None });
        }
        // the project only opens an unknown session
        let project = match self.session_project(&call.session_id)? {
            Some(_) => None,
            None => project_or_detected(call.project.as_deref(), call.directory.as_deref())?,
        };
        let update = self.record_activity(&ActivityRecord {
            session_id: call.session_id.clone(),
            project,
            event: ActivityEvent::ToolCall { remind: call.remind },
        })?;
        Ok(ToolCallOutcome { counted: true, reminder: update.reminder, activity: Some(update.activity) })
    }
}

//! The rules of Claude Code's hooks (`cairn hook <event>`: SessionStart, UserPromptSubmit, tool
//! calls, SubagentStop, Stop, SessionEnd): which events exist, what a hook payload says, which
//! tools are cairn's, the answer's shape and cap, the fingerprint that deduplicates injections, and
//! the usage read from a transcript (the meter's line is `meter::reading`'s, as for every host).
//! The command only reads stdin, runs the ops these rules name and prints the answer.
//!
//! Everything here is lenient on purpose: Claude Code adds fields in every release and a hook must
//! answer whatever it is given (a wrong type is treated like a missing field).

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub use super::meter::ContextUsage;
use super::meter::{used_tokens, window_of};
use super::protocol::Host;
use crate::text::redact;

/// Most characters of injected context: Claude Code cuts anything over 10,000 to a preview and
/// a file path, which the model never reads.
pub const MAX_CONTEXT_CHARS: usize = 9_500;
/// The answer when there is nothing to say, or something went wrong: Claude Code goes on.
pub const FAIL_OPEN: &str = "{}";
/// Agent name sessions are registered with.
pub const AGENT: &str = "claude-code";

/// The Claude Code events `cairn hook` handles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookEvent {
    SessionStart,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    SubagentStart,
    SubagentStop,
    Stop,
    PreCompact,
    PostCompact,
    SessionEnd,
}

impl HookEvent {
    pub const ALL: [HookEvent; 10] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::SubagentStart,
        HookEvent::SubagentStop,
        HookEvent::Stop,
        HookEvent::PreCompact,
        HookEvent::PostCompact,
        HookEvent::SessionEnd,
    ];

    /// Claude Code's name (`hookEventName`).
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::SubagentStart => "SubagentStart",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::Stop => "Stop",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::PostCompact => "PostCompact",
            HookEvent::SessionEnd => "SessionEnd",
        }
    }

    /// `SessionStart`, `session-start` and `session_start` all name the same event (engram's
    /// scripts use the kebab form, Claude Code the camel one).
    pub fn parse(raw: &str) -> Option<HookEvent> {
        let key: String = raw.chars().filter(|c| *c != '-' && *c != '_').flat_map(char::to_lowercase).collect();
        HookEvent::ALL.into_iter().find(|e| e.name().to_ascii_lowercase() == key)
    }

    /// The event a host's hook names `raw`: Claude Code's names (Codex uses the same), and for
    /// Gemini CLI also its own (`BeforeAgent` is the prompt, `AfterAgent` the turn's end,
    /// `PreCompress` the compaction, `BeforeTool`/`AfterTool` a tool call).
    pub fn parse_for(host: Host, raw: &str) -> Option<HookEvent> {
        let gemini = GEMINI_EVENTS.iter().find(|(name, _)| name.eq_ignore_ascii_case(raw.trim()));
        match gemini {
            Some((_, event)) if host == Host::Gemini => Some(*event),
            _ => HookEvent::parse(raw),
        }
    }

    /// The name `host` gives the event (the answer's `hookEventName`).
    pub fn name_for(self, host: Host) -> &'static str {
        let gemini = GEMINI_EVENTS.iter().find(|(_, e)| *e == self).map(|(name, _)| *name);
        match gemini {
            Some(name) if host == Host::Gemini => name,
            _ => self.name(),
        }
    }

    /// Whether Claude Code reads `additionalContext` from this event's answer.
    pub fn takes_context(self) -> bool {
        matches!(
            self,
            HookEvent::SessionStart
                | HookEvent::UserPromptSubmit
                | HookEvent::PreToolUse
                | HookEvent::PostToolUse
                | HookEvent::SubagentStart
        )
    }
}

/// Gemini CLI's names for the events it shares with Claude Code (checked against 0.61: the
/// payloads carry the same `session_id`, `transcript_path`, `cwd`, `prompt`; `AfterAgent` has
/// the answer as `prompt_response`).
const GEMINI_EVENTS: [(&str, HookEvent); 5] = [
    ("BeforeAgent", HookEvent::UserPromptSubmit),
    ("AfterAgent", HookEvent::Stop),
    ("PreCompress", HookEvent::PreCompact),
    ("BeforeTool", HookEvent::PreToolUse),
    ("AfterTool", HookEvent::PostToolUse),
];

/// The agent name a host's hook sessions are registered with.
pub fn agent_of(host: Host) -> &'static str {
    match host {
        Host::ClaudeCode => AGENT,
        Host::Codex => "codex",
        Host::Gemini => "gemini",
        Host::Opencode => "opencode",
        Host::Mcp => "mcp",
    }
}

/// What a hook payload says (Claude Code's stdin JSON). Missing, blank or mistyped fields are
/// `None`; unknown ones are ignored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookInput {
    pub session_id: Option<String>,
    pub transcript_path: Option<String>,
    pub cwd: Option<String>,
    /// SessionStart: `startup`, `resume`, `clear` or `compact`.
    pub source: Option<String>,
    /// UserPromptSubmit.
    pub prompt: Option<String>,
    pub tool_name: Option<String>,
    pub tool_input: Option<Value>,
    /// Stop and SubagentStop.
    pub last_assistant_message: Option<String>,
    /// SubagentStop: the sub-agent's own transcript.
    pub agent_transcript_path: Option<String>,
    pub agent_type: Option<String>,
    /// PreCompact / PostCompact: `manual` or `auto`.
    pub trigger: Option<String>,
    /// PostCompact.
    pub compact_summary: Option<String>,
}

impl HookInput {
    pub fn from_value(value: &Value) -> HookInput {
        let text =
            |key: &str| value.get(key).and_then(Value::as_str).filter(|s| !s.trim().is_empty()).map(str::to_owned);
        HookInput {
            session_id: text("session_id"),
            transcript_path: text("transcript_path"),
            cwd: text("cwd"),
            source: text("source"),
            prompt: text("prompt"),
            tool_name: text("tool_name"),
            tool_input: value.get("tool_input").filter(|v| v.is_object()).cloned(),
            // Gemini CLI's AfterAgent names the answer `prompt_response`
            last_assistant_message: text("last_assistant_message").or_else(|| text("prompt_response")),
            agent_transcript_path: text("agent_transcript_path"),
            agent_type: text("agent_type"),
            trigger: text("trigger"),
            compact_summary: text("compact_summary"),
        }
    }
}

/// What SessionStart's `source` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartKind {
    /// `startup` or `clear`: a conversation with nothing of cairn in it yet.
    Fresh,
    /// `resume`: Claude Code replays the earlier injection from the transcript, so the same
    /// text again would be a second copy.
    Resume,
    /// `compact`: the compaction dropped the earlier injection; it has to come back.
    Compact,
}

impl StartKind {
    pub fn of(source: Option<&str>) -> StartKind {
        match source {
            Some("resume") => StartKind::Resume,
            Some("compact") => StartKind::Compact,
            _ => StartKind::Fresh,
        }
    }
}

/// What a SessionStart injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartInjection {
    /// The protocol, the context (and after a compaction the note).
    Everything,
    /// A resume whose context changed: the protocol is still in the replayed conversation.
    ContextOnly,
    /// A resume with the same context as the last injection, which Claude Code replays.
    Nothing,
}

/// What a SessionStart of `kind` injects, given whether this session had an injection before
/// and whether the context differs from it.
pub fn start_injection(kind: StartKind, injected_before: bool, changed: bool) -> StartInjection {
    match kind {
        StartKind::Resume if !injected_before => StartInjection::Everything,
        StartKind::Resume if changed => StartInjection::ContextOnly,
        StartKind::Resume => StartInjection::Nothing,
        StartKind::Fresh | StartKind::Compact => StartInjection::Everything,
    }
}

/// A short, stable hash of an injected text (what `context_injected` keeps).
pub fn fingerprint(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

/// Whether a tool is one of cairn's MCP tools: `mcp__cairn__…` from `.mcp.json` or
/// `cairn setup`, `mcp__plugin_cairn_cairn__…` from the plugin.
pub fn is_cairn_tool(tool_name: &str) -> bool {
    tool_name.starts_with("mcp__cairn__") || tool_name.starts_with("mcp__plugin_cairn_")
}

/// cairn tools whose `session_id` means something else (they open or close a session by `id`).
const SESSION_ID_TOOLS_EXCLUDED: [&str; 2] = ["mem_session_start", "mem_session_end"];

/// PreToolUse: the input of a cairn tool with Claude Code's session id, so a save lands in
/// the real session instead of `manual-save-<project>`. `None` for any other tool.
pub fn with_session_id(tool_name: &str, tool_input: Option<&Value>, session_id: &str) -> Option<Value> {
    if !is_cairn_tool(tool_name) {
        return None;
    }
    let short = tool_name.rsplit("__").next().unwrap_or(tool_name);
    if SESSION_ID_TOOLS_EXCLUDED.contains(&short) {
        return None;
    }
    let mut input = tool_input.filter(|v| v.is_object()).cloned().unwrap_or_else(|| json!({}));
    if short.starts_with("history_") {
        return with_caller(short, input, session_id);
    }
    let current = input.get("session_id").and_then(Value::as_str);
    if current == Some(session_id) {
        return None;
    }
    input["session_id"] = Value::String(session_id.to_owned());
    Some(input)
}

/// The history tools' `session_id` names the conversation to read, so the caller goes in
/// `caller_session_id` (history visibility: its own session is visible only up to its latest
/// compaction), and a browse or pull without a session reads the caller's. A search without one
/// spans the project.
fn with_caller(short: &str, mut input: Value, session_id: &str) -> Option<Value> {
    let before = input.clone();
    input["caller_session_id"] = Value::String(session_id.to_owned());
    let spans_many = matches!(short, "history_search" | "history_sessions");
    if !spans_many && input.get("session_id").and_then(Value::as_str).is_none_or(|s| s.trim().is_empty()) {
        input["session_id"] = Value::String(session_id.to_owned());
    }
    (input != before).then_some(input)
}

/// Cut a text to [`MAX_CONTEXT_CHARS`] characters, saying so at the end.
pub fn cap_context(text: &str) -> String {
    const CUT: &str = "\n[cut to fit Claude Code's hook limit]";
    if text.chars().count() <= MAX_CONTEXT_CHARS {
        return text.to_owned();
    }
    let keep = MAX_CONTEXT_CHARS - CUT.chars().count();
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(CUT);
    out
}

/// The answer printed on stdout: `additionalContext` for an event that takes one, else
/// [`FAIL_OPEN`]. The parts are joined by blank lines; empty ones are dropped.
pub fn context_answer(event: HookEvent, parts: &[String]) -> String {
    context_answer_for(Host::ClaudeCode, event, parts)
}

/// [`context_answer`] in `host`'s words (Gemini CLI wants its own event name back).
pub fn context_answer_for(host: Host, event: HookEvent, parts: &[String]) -> String {
    let text = parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()).collect::<Vec<_>>().join("\n\n");
    if text.is_empty() || !event.takes_context() {
        return FAIL_OPEN.to_owned();
    }
    json!({ "hookSpecificOutput": { "hookEventName": event.name_for(host), "additionalContext": cap_context(&text) } })
        .to_string()
}

/// The user's prompt without the `<hook_context>` blocks Gemini CLI puts in front of it (what
/// the SessionStart hook answered): that text is cairn's, not the user's.
pub fn without_hook_context(prompt: &str) -> String {
    const OPEN: &str = "<hook_context>";
    const CLOSE: &str = "</hook_context>";
    let mut out = String::with_capacity(prompt.len());
    let mut rest = prompt;
    while let Some(start) = rest.find(OPEN) {
        let Some(end) = rest[start..].find(CLOSE) else { break };
        out.push_str(&rest[..start]);
        rest = &rest[start + end + CLOSE.len()..];
    }
    out.push_str(rest);
    out.trim().to_owned()
}

/// PreToolUse's answer with the tool's new input (no permission decision: Claude Code's own
/// rules still decide whether the call runs).
pub fn updated_input_answer(input: &Value) -> String {
    json!({ "hookSpecificOutput": { "hookEventName": HookEvent::PreToolUse.name(), "updatedInput": input } })
        .to_string()
}

/// A text of the agent's or the user's, redacted of `<private>` before it leaves the hook.
pub fn clean(text: &str) -> String {
    redact(text).0
}

/// The last assistant record of a transcript (JSONL), read from its tail: lines that do not
/// parse (a partial last line, a record of an unknown shape) are skipped.
fn last_assistant(transcript: &str) -> Option<Value> {
    transcript.lines().rev().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find(|r| {
        r.get("type").and_then(Value::as_str) == Some("assistant")
            && r.pointer("/message/role").and_then(Value::as_str).is_none_or(|role| role == "assistant")
    })
}

/// The text of the last assistant message with text in it (Stop's fallback when the payload
/// has no `last_assistant_message`).
pub fn last_assistant_text(transcript: &str) -> Option<String> {
    transcript.lines().rev().filter_map(|l| serde_json::from_str::<Value>(l).ok()).find_map(|r| {
        if r.get("type").and_then(Value::as_str) != Some("assistant") {
            return None;
        }
        let content = r.pointer("/message/content")?;
        let text = match content {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => return None,
        };
        (!text.trim().is_empty()).then_some(text)
    })
}

/// The usage of the last model answer in a transcript: what was sent (`input_tokens` plus the
/// cache's creation and reads); the window is 1M for a `[1m]` model, else `default_limit`.
pub fn transcript_usage(transcript: &str, default_limit: u64) -> Option<ContextUsage> {
    let record = last_assistant(transcript)?;
    let used = used_tokens(record.pointer("/message/usage")?);
    let model = record.pointer("/message/model").and_then(Value::as_str).unwrap_or("").to_owned();
    let limit = window_of(&model, default_limit);
    (used > 0).then_some(ContextUsage { used, limit, model })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::meter::ONE_MILLION;

    #[test]
    fn event_names_parse_in_every_spelling() {
        for e in HookEvent::ALL {
            assert_eq!(HookEvent::parse(e.name()), Some(e));
        }
        assert_eq!(HookEvent::parse("session-start"), Some(HookEvent::SessionStart));
        assert_eq!(HookEvent::parse("user_prompt_submit"), Some(HookEvent::UserPromptSubmit));
        assert_eq!(HookEvent::parse("post-compact"), Some(HookEvent::PostCompact));
        assert_eq!(HookEvent::parse("Notification"), None);
        assert_eq!(HookEvent::parse(""), None);
    }

    #[test]
    fn gemini_names_its_events_and_gets_them_back() {
        assert_eq!(HookEvent::parse_for(Host::Gemini, "BeforeAgent"), Some(HookEvent::UserPromptSubmit));
        assert_eq!(HookEvent::parse_for(Host::Gemini, "AfterAgent"), Some(HookEvent::Stop));
        assert_eq!(HookEvent::parse_for(Host::Gemini, "PreCompress"), Some(HookEvent::PreCompact));
        assert_eq!(HookEvent::parse_for(Host::Gemini, "SessionStart"), Some(HookEvent::SessionStart));
        assert_eq!(HookEvent::parse_for(Host::Codex, "BeforeAgent"), None, "Claude Code's names only");
        assert_eq!(HookEvent::parse_for(Host::Codex, "UserPromptSubmit"), Some(HookEvent::UserPromptSubmit));
        let answer = context_answer_for(Host::Gemini, HookEvent::UserPromptSubmit, &["ctx".into()]);
        assert!(answer.contains(r#""hookEventName":"BeforeAgent""#), "{answer}");
        let answer = context_answer_for(Host::Codex, HookEvent::SessionStart, &["ctx".into()]);
        assert!(answer.contains(r#""hookEventName":"SessionStart""#), "{answer}");
        let after = HookInput::from_value(&json!({"session_id": "s", "prompt_response": "## Key Learnings"}));
        assert_eq!(after.last_assistant_message.as_deref(), Some("## Key Learnings"));
        assert_eq!((agent_of(Host::Codex), agent_of(Host::Gemini)), ("codex", "gemini"));
    }

    #[test]
    fn a_prompt_loses_the_context_gemini_put_in_front_of_it() {
        let prompt = "<hook_context>[MEMORY] deploy with pnpm</hook_context>\n\nhello there";
        assert_eq!(without_hook_context(prompt), "hello there");
        assert_eq!(without_hook_context("a <hook_context>x</hook_context> b"), "a  b");
        assert_eq!(without_hook_context("plain <hook_context> unclosed"), "plain <hook_context> unclosed");
    }

    #[test]
    fn payload_fields_are_read_leniently() {
        let v = json!({"session_id": "s1", "cwd": 7, "prompt": "  ", "tool_input": "x", "new_field": {}});
        let input = HookInput::from_value(&v);
        assert_eq!(input.session_id.as_deref(), Some("s1"));
        assert_eq!((input.cwd, input.prompt, input.tool_input), (None, None, None));
        assert_eq!(HookInput::from_value(&json!([1, 2])), HookInput::default());
    }

    #[test]
    fn only_cairn_tools_get_the_session_id() {
        let input = json!({"title": "t", "session_id": "made-up"});
        let updated = with_session_id("mcp__plugin_cairn_cairn__mem_save", Some(&input), "real").unwrap();
        assert_eq!(updated, json!({"title": "t", "session_id": "real"}));
        assert_eq!(with_session_id("mcp__cairn__mem_search", None, "real"), Some(json!({"session_id": "real"})));
        assert_eq!(with_session_id("mcp__cairn__mem_save", Some(&updated), "real"), None, "already right");
        assert_eq!(with_session_id("mcp__cairn__mem_session_start", None, "real"), None);
        assert_eq!(with_session_id("Bash", Some(&input), "real"), None);
        assert_eq!(with_session_id("mcp__cairnish__x", None, "real"), None);
    }

    #[test]
    fn history_tools_get_the_caller_not_a_new_target() {
        let other = json!({"session_id": "ses_other", "message_id": "m1"});
        let updated = with_session_id("mcp__cairn__history_pull_message", Some(&other), "me").unwrap();
        assert_eq!(updated, json!({"session_id": "ses_other", "message_id": "m1", "caller_session_id": "me"}));
        let bare = with_session_id("mcp__plugin_cairn_cairn__history_browse_turns", Some(&json!({})), "me").unwrap();
        assert_eq!(bare, json!({"session_id": "me", "caller_session_id": "me"}));
        let search = with_session_id("mcp__cairn__history_search", Some(&json!({"query": "x"})), "me").unwrap();
        assert_eq!(
            search,
            json!({"query": "x", "caller_session_id": "me"}),
            "a search without a session spans the project"
        );
        assert_eq!(with_session_id("mcp__cairn__history_search", Some(&search), "me"), None, "already right");
    }

    #[test]
    fn answers_are_capped_and_only_where_read() {
        let long = "x".repeat(MAX_CONTEXT_CHARS * 2);
        let answer: Value = serde_json::from_str(&context_answer(HookEvent::SessionStart, &[long])).unwrap();
        let text = answer.pointer("/hookSpecificOutput/additionalContext").and_then(Value::as_str).unwrap();
        assert_eq!(text.chars().count(), MAX_CONTEXT_CHARS);
        assert_eq!(answer.pointer("/hookSpecificOutput/hookEventName"), Some(&json!("SessionStart")));
        assert_eq!(context_answer(HookEvent::Stop, &["learned".into()]), FAIL_OPEN);
        assert_eq!(context_answer(HookEvent::UserPromptSubmit, &[String::new(), " ".into()]), FAIL_OPEN);
        let joined = context_answer(HookEvent::UserPromptSubmit, &["a".into(), String::new(), "b".into()]);
        assert!(joined.contains(r#""additionalContext":"a\n\nb""#), "{joined}");
    }

    #[test]
    fn resume_injects_only_a_changed_context() {
        use StartInjection::*;
        assert_eq!(start_injection(StartKind::of(Some("startup")), true, false), Everything);
        assert_eq!(start_injection(StartKind::of(None), false, false), Everything);
        assert_eq!(start_injection(StartKind::of(Some("clear")), true, false), Everything);
        assert_eq!(start_injection(StartKind::of(Some("compact")), true, false), Everything);
        assert_eq!(start_injection(StartKind::of(Some("resume")), true, false), Nothing);
        assert_eq!(start_injection(StartKind::of(Some("resume")), true, true), ContextOnly);
        assert_eq!(start_injection(StartKind::of(Some("resume")), false, true), Everything);
        assert_eq!(fingerprint("a"), fingerprint("a"));
        assert_ne!(fingerprint("a"), fingerprint("b"));
        assert_eq!(fingerprint("a").len(), 32);
    }

    #[test]
    fn the_meter_reads_the_last_answer_of_a_transcript() {
        let transcript = [
            r#"{"type":"assistant","message":{"role":"assistant","model":"m","usage":{"input_tokens":10}}}"#,
            r#"{"type":"user","message":{"role":"user","content":"hi"}}"#,
            r#"{"type":"assistant","message":{"role":"assistant","model":"claude-x","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":100000,"cache_creation_input_tokens":40000,"cache_read_input_tokens":10000,"output_tokens":99}}}"#,
            r#"{"type":"attachment","attachment":{}}"#,
            r#"{"type":"assistant","message":{"#,
        ]
        .join("\n");
        let usage = transcript_usage(&transcript, 200_000).unwrap();
        assert_eq!(usage, ContextUsage { used: 150_000, limit: 200_000, model: "claude-x".into() });
        assert_eq!(transcript_usage("not json", 1), None);
        assert_eq!(last_assistant_text(&transcript).as_deref(), Some("done"));
        let big = transcript_usage(&transcript.replace("claude-x", "m[1m]"), 200_000).unwrap();
        assert_eq!(big.limit, ONE_MILLION);
    }
}

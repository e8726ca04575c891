//! The Memory Protocol and the other texts cairn puts in front of agents (one source for every
//! host): one source for the MCP `instructions`, the OpenCode plugin's system injection, the Claude
//! Code skill and the files `setup` writes. Served by op `protocol`, `cairn protocol` and
//! `GET /protocol`.
//!
//! The texts name the MCP tools (`mem_save`...); a host that shows them under other names gets one
//! line saying so, not a second copy of every sentence. They are sent with every request an agent
//! makes, so every word costs: keep them short.

use serde::{Deserialize, Serialize};

use crate::error::{CairnError, Result};

/// The host that shows the text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Host {
    /// Any MCP client (the server's `instructions`).
    #[default]
    Mcp,
    Opencode,
    ClaudeCode,
    Codex,
    Gemini,
}

/// The MCP tool profile the agent has (`cairn mcp --tools=...`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ToolProfile {
    #[default]
    Agent,
    Admin,
    All,
    /// The one `memory` tool taking `{op, args}`.
    Router,
}

/// Which text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Part {
    /// The Memory Protocol (when to save, search, close; after compaction).
    #[default]
    Memory,
    /// Pushed into a compaction's context: the summary is stored by cairn.
    CompactionNote,
    /// The self-continuity compaction prompt.
    Continuity,
    /// Added to a user message that asks to remember something (a memory trigger).
    Trigger,
    /// The history guidance: when and how to pull from the conversation history (the "## Session
    /// History" block).
    History,
    /// Upstream history: told to a sub-agent: its parent's session id and how to pull the parent's
    /// history (the parent's id is the request's `session_id`).
    Upstream,
    /// Chart mode, step 1: the compaction prompt of `compaction.mode = "chart"`. The summariser's
    /// answer is thrown away (the plugin puts the chart in its place), so it is asked for next to
    /// nothing.
    ChartPrompt,
}

/// The arguments of op `protocol`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProtocolRequest {
    pub host: Host,
    pub tools: ToolProfile,
    pub part: Part,
    /// For `upstream`: the parent session's id, written into the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// The answer to `protocol`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProtocolText {
    pub host: Host,
    pub tools: ToolProfile,
    pub part: Part,
    pub text: String,
}

/// Parse one of the names `serde` accepts for `T`, as a clear `invalid_argument`.
fn parse_name<T: serde::de::DeserializeOwned>(what: &str, raw: &str, names: &str) -> Result<T> {
    serde_json::from_value(serde_json::Value::String(raw.trim().to_ascii_lowercase()))
        .map_err(|_| CairnError::invalid(format!("{what} {raw:?} is not known")).with_hint(format!("use {names}")))
}

impl ProtocolRequest {
    /// From the strings a CLI flag or a query parameter gives (absent or blank: the default).
    pub fn parse(host: Option<&str>, tools: Option<&str>, part: Option<&str>) -> Result<ProtocolRequest> {
        let given = |v: Option<&str>| v.filter(|v| !v.trim().is_empty()).map(str::to_owned);
        Ok(ProtocolRequest {
            host: match given(host) {
                Some(h) => Host::parse(&h)?,
                None => Host::default(),
            },
            tools: match given(tools) {
                Some(t) => parse_name("tools", &t, "agent, admin, all or router")?,
                None => ToolProfile::default(),
            },
            part: match given(part) {
                Some(p) => parse_name(
                    "part",
                    &p,
                    "memory, compaction_note, continuity, trigger, history, upstream or chart_prompt",
                )?,
                None => Part::default(),
            },
            session_id: None,
        })
    }
}

/// The text asked for. `upstream` without a `session_id` is refused.
pub fn protocol_checked(req: ProtocolRequest) -> Result<ProtocolText> {
    if req.part == Part::Upstream && req.session_id.as_deref().is_none_or(|s| s.trim().is_empty()) {
        return Err(CairnError::invalid("part upstream needs the parent's session_id")
            .with_hint("pass session_id: the id of the session that started the sub-agent"));
    }
    Ok(protocol(req))
}

/// The text asked for (`upstream` without a parent names none).
pub fn protocol(req: ProtocolRequest) -> ProtocolText {
    let text = match req.part {
        Part::Memory => memory_protocol(req.host, req.tools),
        Part::CompactionNote => compaction_note(req.tools),
        Part::Continuity => CONTINUITY.to_owned(),
        Part::Trigger => trigger_note(req.tools),
        Part::History => history_guidance(req.host, req.tools),
        Part::Upstream => upstream_note(req.host, req.tools, req.session_id.as_deref().unwrap_or("unknown")),
        Part::ChartPrompt => CHART_PROMPT.to_owned(),
    };
    ProtocolText { host: req.host, tools: req.tools, part: req.part, text }
}

/// The `instructions` of an MCP server started for `host` (`cairn mcp --host ...`). Where a
/// cairn plugin or hooks run (OpenCode, Claude Code) they put the protocol in front of the
/// agent already, and the host also shows MCP instructions, so the server says one line instead
/// of a second copy. Anywhere else the server's instructions are the protocol.
pub fn mcp_instructions(host: Option<Host>, tools: ToolProfile) -> String {
    match host {
        Some(host) if host_captures(host) && tools != ToolProfile::Admin => format!(
            "cairn: your memory across sessions ({}, {}, {}). When to use it: the Memory Protocol in your context.",
            call(tools, "mem_save", "save"),
            call(tools, "mem_search", "search"),
            call(tools, "mem_context", "context"),
        ),
        _ => memory_protocol(Host::Mcp, tools),
    }
}

impl Host {
    /// A host name as `cairn mcp --host` and `cairn protocol --host` take it.
    pub fn parse(raw: &str) -> Result<Host> {
        parse_name("host", raw, "mcp, opencode, claude-code, codex or gemini")
    }
}

/// How the agent calls operation `op` (MCP tool `tool`) with this profile.
fn call(tools: ToolProfile, tool: &str, op: &str) -> String {
    if tools == ToolProfile::Router { format!("memory {{op: \"{op}\"}}") } else { tool.to_owned() }
}

/// Whether the host stores compaction summaries and `## Key Learnings` itself (a cairn plugin
/// or hooks run there); elsewhere the agent has to.
fn host_captures(host: Host) -> bool {
    matches!(host, Host::Opencode | Host::ClaudeCode)
}

/// The one line about how the host names the MCP tools, if it renames them.
fn tool_names_note(host: Host, tools: ToolProfile) -> Option<&'static str> {
    match (host, tools) {
        (Host::Opencode, ToolProfile::Router) => Some("OpenCode shows the tool as cairn_memory."),
        (Host::Opencode, _) => {
            Some("OpenCode shows these tools as cairn_mem_save, cairn_mem_search, cairn_history_search...")
        }
        // Claude Code (2.1.3xx) defers MCP tools behind ToolSearch: the model sees only their names.
        (Host::ClaudeCode, ToolProfile::Router) => Some(
            "Claude Code shows the tool as mcp__cairn__memory (mcp__plugin_cairn_cairn__memory from the plugin); \
             if it is deferred, load it with ToolSearch first.",
        ),
        (Host::ClaudeCode, _) => Some(
            "Claude Code shows these tools as mcp__cairn__mem_save, mcp__cairn__history_search... \
             (mcp__plugin_cairn_cairn__mem_save... from the plugin); if they are deferred, load them with ToolSearch \
             first.",
        ),
        _ => None,
    }
}

fn memory_protocol(host: Host, tools: ToolProfile) -> String {
    if tools == ToolProfile::Admin {
        return "cairn memory: maintenance tools. Memory calls never replace your reply to the user.".to_owned();
    }
    let c = |tool: &str, op: &str| call(tools, tool, op);
    let (context, search, save) = (c("mem_context", "context"), c("mem_search", "search"), c("mem_save", "save"));
    let mut lines = vec!["cairn is your persistent memory across sessions.".to_owned()];
    lines.extend(tool_names_note(host, tools).map(str::to_owned));
    lines.push(format!(
        "- SAVE right after a decision, bug fix, discovery, config change, convention or user preference: {save} \
         with a short title and content as What / Why / Where / Learned. Reuse a stable topic_key (e.g. \
         architecture/auth-model) so later saves revise the memory. Judge listed duplicates with {judge}.",
        judge = c("mem_judge", "judge"),
    ));
    lines.push(format!(
        "- SEARCH when the user says \"remember\", \"recordar\", \"what did we...\", and before work that may \
         touch a past decision or bug: {context} once, then {search} with a few keywords; {get} for full text.",
        get = c("mem_get_observation", "get"),
    ));
    lines.push(format!(
        "- SESSION CLOSE: only the main agent, once, when the work is done: {summary} (Goal, Instructions, \
         Discoveries, Accomplished, Next Steps, Relevant Files). Sub-agents never call it.",
        summary = c("mem_session_summary", "session_summary"),
    ));
    lines.push(if host_captures(host) {
        format!("- AFTER COMPACTION: the summary is stored automatically; call {context}, then {search} for specifics.")
    } else {
        format!("- AFTER COMPACTION: call {context} first, then {search} for specifics.")
    });
    lines.push(if host_captures(host) {
        "- You may end a reply with a \"## Key Learnings:\" list; cairn saves its items.".to_owned()
    } else {
        format!(
            "- You may end a reply with a \"## Key Learnings:\" list and pass it to {}.",
            c("mem_capture_passive", "capture_passive")
        )
    });
    lines
        .push("- Memory calls never replace your reply: always answer the user in full; saving is a side task.".into());
    lines.push("- Never save secrets; wrap sensitive text in <private>...</private>.".into());
    // Claude Code shows this text once per session (SessionStart, the skill): the history
    // guidance rides along. The OpenCode plugin sends it once, in the first message.
    if host == Host::ClaudeCode {
        lines.push(String::new());
        lines.push(history_guidance(host, tools));
    }
    lines.join("\n")
}

/// The history guidance: when to pull from the conversation history, and how, in few words.
fn history_guidance(host: Host, tools: ToolProfile) -> String {
    if tools == ToolProfile::Admin {
        return "cairn keeps every conversation; the history tools are in the agent profile.".to_owned();
    }
    let c = |tool: &str| call(tools, tool, tool);
    let whose = if host_captures(host) { "this session's and every earlier one's" } else { "earlier sessions'" };
    [
        "## Session History".to_owned(),
        format!(
            "cairn keeps the full conversation history ({whose}, OpenCode and Claude Code), word for word. Pull \
             from it instead of guessing when you went in a wrong direction, lack context you once had (after a \
             compaction), or a detail (a path, an error, a number, the user's exact words) lacks substance."
        ),
        format!(
            "- Search first: {search} {{query, session_id?}} (keywords, or a tool name such as bash); then {pull} \
             {{session_id, message_id}} on a hit, and {part} {{…, part_id}} for one output in full (page with offset).",
            search = c("history_search"),
            pull = c("history_pull_message"),
            part = c("history_pull_part"),
        ),
        format!(
            "- Browse: {turns} {{session_id, num_before: 5}} outlines the last turns; {messages} {{session_id, \
             message_id, num_before, num_after}} shows the messages around one. {sessions} {{query}} finds other \
             sessions; every tool takes any session id.",
            turns = c("history_browse_turns"),
            messages = c("history_browse_messages"),
            sessions = c("history_sessions"),
        ),
        "- Keep windows small, make independent calls in parallel, and verify critical details in full: previews \
         omit qualifiers."
            .to_owned(),
    ]
    .join("\n")
}

/// Upstream history: a sub-agent learns where its parent's history is and how to use it before
/// acting.
fn upstream_note(host: Host, tools: ToolProfile, parent: &str) -> String {
    let c = |tool: &str| call(tools, tool, tool);
    let _ = host;
    [
        format!("**Upstream session ID: {parent}**"),
        "You are a sub-agent. The session that started you keeps its full conversation in cairn; pull what the task \
         leaves out instead of guessing:"
            .to_owned(),
        "| need | how |".to_owned(),
        "|---|---|".to_owned(),
        format!(
            "| the task's background | {search} {{session_id: \"{parent}\", query: <the task's keywords>}}, then {pull} \
             on the hits |",
            search = c("history_search"),
            pull = c("history_pull_message"),
        ),
        format!("| the plan agreed there | {turns} {{session_id: \"{parent}\", num_before: 3}} |", turns = c("history_browse_turns")),
        format!(
            "| the user's exact constraints | {pull} on the user's message: quote it verbatim before acting |",
            pull = c("history_pull_message"),
        ),
    ]
    .join("\n")
}

fn compaction_note(tools: ToolProfile) -> String {
    format!(
        "The summary of this compaction is stored in cairn automatically; after compaction, call {} to recover \
         the project's memory, then {} for specifics. No need to save the summary yourself.",
        call(tools, "mem_context", "context"),
        call(tools, "mem_search", "search"),
    )
}

fn trigger_note(tools: ToolProfile) -> String {
    format!(
        "[MEMORY TRIGGER DETECTED] The user asked you to remember something. Save it now with {} — then answer \
         the user in full.",
        call(tools, "mem_save", "save")
    )
}

/// Chart mode: what the summariser is asked for when the chart replaces its answer; also the
/// summary that stays if the chart cannot be made at the last moment.
const CHART_PROMPT: &str = "Do not think. Do not summarize. Return exactly the following text and nothing else:
# Summary
Chart unavailable. Use history_browse_turns for prior context.";

/// Self-continuity mode: the compaction prompt written for the agent that will continue the
/// session.
const CONTINUITY: &str = "You are compacting your own session to free context space. You will continue this \
session after compaction with this summary as your starting context. Write what you need to pick the work up \
without asking again: the current task and progress, the files in work, key decisions and why, next steps, \
context that would be hard to rediscover, and any active debugging or partial edits.

Use this template:

## Goal
What the user wants, in their terms.

## Instructions
The plan and spec details the user gave; constraints and preferences.

## Discoveries
What you learned about the code, the problem or the environment.

## Accomplished
Done; in progress; left to do.

## Relevant files / directories
Paths, with what each is for and what changed.

## Notes
Patterns, gotchas, tool quirks, environment details.

You are summarizing for yourself, not another agent.";

/// A text of the one protocol source for `host` with the agent tools.
pub fn host_text(host: Host, part: Part) -> String {
    protocol(ProtocolRequest { host, tools: ToolProfile::Agent, part, session_id: None }).text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(host: Host, tools: ToolProfile, part: Part) -> String {
        protocol(ProtocolRequest { host, tools, part, session_id: None }).text
    }

    #[test]
    fn the_memory_protocol_covers_every_rule_and_stays_small() {
        for host in [Host::Mcp, Host::Opencode, Host::ClaudeCode, Host::Codex, Host::Gemini] {
            let t = text(host, ToolProfile::Agent, Part::Memory);
            for needed in [
                "SAVE",
                "SEARCH",
                "\"remember\"",
                "\"recordar\"",
                "what did we",
                "SESSION CLOSE: only the main agent",
                "AFTER COMPACTION",
                "mem_context",
                "## Key Learnings:",
                "never replace your reply",
            ] {
                assert!(t.contains(needed), "{host:?} lacks {needed:?}:\n{t}");
            }
            // Claude Code's is sent once per session and carries the history guidance too.
            let most = if host == Host::ClaudeCode { 2800 } else { 1500 };
            assert!(t.len() < most, "sent with every request: {} bytes for {host:?}", t.len());
        }
        let opencode = text(Host::Opencode, ToolProfile::Agent, Part::Memory);
        assert!(opencode.contains("stored automatically") && opencode.matches("cairn_mem_").count() == 2);
        assert!(!text(Host::Mcp, ToolProfile::Agent, Part::Memory).contains("cairn_mem_"));
    }

    #[test]
    fn router_and_admin_profiles_name_their_tools() {
        let router = text(Host::Mcp, ToolProfile::Router, Part::Memory);
        assert!(router.contains("memory {op: \"save\"}") && !router.contains("mem_save"), "{router}");
        let admin = text(Host::Mcp, ToolProfile::Admin, Part::Memory);
        assert!(!admin.contains("mem_save") && admin.contains("never replace"), "{admin}");
        assert!(text(Host::Mcp, ToolProfile::Router, Part::Trigger).contains("memory {op: \"save\"}"));
    }

    #[test]
    fn the_other_parts() {
        let trigger = text(Host::Opencode, ToolProfile::Agent, Part::Trigger);
        assert_eq!(
            trigger,
            "[MEMORY TRIGGER DETECTED] The user asked you to remember something. Save it now with mem_save — then \
             answer the user in full."
        );
        let note = text(Host::Opencode, ToolProfile::Agent, Part::CompactionNote);
        assert!(
            note.starts_with("The summary of this compaction is stored in cairn automatically")
                && note.contains("mem_context")
        );
        let continuity = text(Host::Opencode, ToolProfile::Agent, Part::Continuity);
        assert!(continuity.starts_with("You are compacting your own session"));
        assert!(continuity.ends_with("You are summarizing for yourself, not another agent."));
        for section in
            ["## Goal", "## Instructions", "## Discoveries", "## Accomplished", "## Relevant files", "## Notes"]
        {
            assert!(continuity.contains(section), "{section}");
        }
    }

    #[test]
    fn history_guidance_upstream_and_the_chart_prompt() {
        let history = text(Host::Opencode, ToolProfile::Agent, Part::History);
        assert!(history.starts_with("## Session History"));
        for tool in
            ["history_search", "history_pull_message", "history_pull_part", "history_browse_turns", "history_sessions"]
        {
            assert!(history.contains(tool), "{tool}");
        }
        assert!(text(Host::Mcp, ToolProfile::Router, Part::History).contains("memory {op: \"history_search\"}"));
        // Claude Code reads the protocol once per session: the guidance is in it (and SKILL.md)
        assert!(
            text(Host::ClaudeCode, ToolProfile::Agent, Part::Memory)
                .ends_with(&history_guidance(Host::ClaudeCode, ToolProfile::Agent))
        );
        assert!(!text(Host::Opencode, ToolProfile::Agent, Part::Memory).contains("## Session History"));

        let req = |session_id: Option<&str>| ProtocolRequest {
            part: Part::Upstream,
            session_id: session_id.map(str::to_owned),
            ..ProtocolRequest::default()
        };
        let up = protocol_checked(req(Some("ses_parent"))).unwrap().text;
        assert!(up.starts_with("**Upstream session ID: ses_parent**"), "{up}");
        assert!(up.contains("session_id: \"ses_parent\"") && up.contains("history_browse_turns"));
        for missing in [None, Some(" ")] {
            assert_eq!(protocol_checked(req(missing)).unwrap_err().code, crate::ErrorCode::InvalidArgument);
        }
        let chart = text(Host::Opencode, ToolProfile::Agent, Part::ChartPrompt);
        assert!(chart.starts_with("Do not think. Do not summarize.") && chart.contains("history_browse_turns"));
    }

    #[test]
    fn names_parse_from_flags_and_json() {
        let req = ProtocolRequest::parse(Some("Claude-Code"), Some("router"), Some("trigger")).unwrap();
        assert_eq!((req.host, req.tools, req.part), (Host::ClaudeCode, ToolProfile::Router, Part::Trigger));
        assert_eq!(ProtocolRequest::parse(None, Some(" "), None).unwrap(), ProtocolRequest::default());
        let err = ProtocolRequest::parse(Some("vim"), None, None).unwrap_err();
        assert_eq!(err.code, crate::ErrorCode::InvalidArgument);
        assert!(err.hint.as_deref().is_some_and(|h| h.contains("opencode")));
        let json: ProtocolRequest = serde_json::from_str(r#"{"host":"opencode","part":"compaction_note"}"#).unwrap();
        assert_eq!((json.host, json.tools, json.part), (Host::Opencode, ToolProfile::Agent, Part::CompactionNote));
    }
}

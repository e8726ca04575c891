//! Which tools a server exposes (`cairn mcp --tools=...`, engram §12.1), plus cairn's `router`
//! profile: one `memory` tool that runs any operation, so a prompt carries one schema instead
//! of nineteen (open-memory's router pattern).

use std::collections::BTreeSet;

use cairn_core::CairnError;
use cairn_core::agent::protocol::ToolProfile;

/// The tools an agent needs day to day.
pub const AGENT_TOOLS: &[&str] = &[
    "mem_save",
    "mem_search",
    "mem_context",
    "mem_session_summary",
    "mem_session_start",
    "mem_session_end",
    "mem_get_observation",
    "mem_suggest_topic_key",
    "mem_capture_passive",
    "mem_save_prompt",
    "mem_update",
    "mem_current_project",
    "mem_judge",
    "mem_compare",
    "mem_doctor",
];

/// Maintenance tools, kept out of agents' prompts by default.
pub const ADMIN_TOOLS: &[&str] = &["mem_delete", "mem_stats", "mem_timeline", "mem_merge_projects"];

/// Conversation-history tools (browse, pull, search, sessions): the `history` profile, part of
/// `agent` and `all`.
pub const HISTORY_TOOLS: &[&str] = &[
    "history_sessions",
    "history_browse_turns",
    "history_browse_messages",
    "history_pull_message",
    "history_pull_part",
    "history_search",
];

/// The single tool of the `router` profile.
pub const ROUTER_TOOL: &str = "memory";

/// A set of tool names, chosen once at startup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSelection {
    names: BTreeSet<&'static str>,
}

impl Default for ToolSelection {
    /// `all`: the 19 engram tools and the history tools (not the router).
    fn default() -> Self {
        Self { names: AGENT_TOOLS.iter().chain(ADMIN_TOOLS).chain(HISTORY_TOOLS).copied().collect() }
    }
}

impl ToolSelection {
    /// Parse a comma list of profiles (`agent`, `admin`, `all`, `router`) and tool names.
    /// Empty means `all`. An unknown name is an error: a typo must not silently drop tools.
    pub fn parse(spec: &str) -> Result<ToolSelection, CairnError> {
        let mut names = BTreeSet::new();
        let mut unknown = Vec::new();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let item_lc = item.to_ascii_lowercase();
            match item_lc.as_str() {
                "all" => names.extend(Self::default().names),
                "agent" => names.extend(AGENT_TOOLS.iter().chain(HISTORY_TOOLS)),
                "admin" => names.extend(ADMIN_TOOLS),
                "history" => names.extend(HISTORY_TOOLS),
                "router" | ROUTER_TOOL => {
                    names.insert(ROUTER_TOOL);
                }
                other => match known_tool(other) {
                    Some(name) => {
                        names.insert(name);
                    }
                    None => unknown.push(item.to_owned()),
                },
            }
        }
        if !unknown.is_empty() {
            return Err(CairnError::invalid(format!("unknown tool or profile: {}", unknown.join(", "))).with_hint(
                format!(
                    "use profiles agent, admin, history, all, router, or tool names: {}",
                    AGENT_TOOLS.iter().chain(ADMIN_TOOLS).chain(HISTORY_TOOLS).copied().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        if names.is_empty() {
            return Ok(Self::default());
        }
        Ok(Self { names })
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// The profile the Memory Protocol is written for: the agent's tools when `mem_save` is
    /// there (`all` when every engram tool is), the router when only it can save, else admin.
    pub fn profile(&self) -> ToolProfile {
        if self.contains("mem_save") {
            if *self == Self::default() { ToolProfile::All } else { ToolProfile::Agent }
        } else if self.contains(ROUTER_TOOL) {
            ToolProfile::Router
        } else {
            ToolProfile::Admin
        }
    }

    /// Tool names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.names.iter().copied()
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

fn known_tool(name: &str) -> Option<&'static str> {
    AGENT_TOOLS.iter().chain(ADMIN_TOOLS).chain(HISTORY_TOOLS).copied().find(|t| *t == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_have_engrams_sizes() {
        assert_eq!(ToolSelection::parse("agent").unwrap().len(), 15 + 6);
        assert_eq!(ToolSelection::parse("admin").unwrap().len(), 4);
        assert_eq!(ToolSelection::parse("history").unwrap().len(), 6);
        assert_eq!(ToolSelection::parse("all").unwrap().len(), 19 + 6);
        assert_eq!(ToolSelection::parse("").unwrap(), ToolSelection::default());
        assert_eq!(ToolSelection::parse("router").unwrap().names().collect::<Vec<_>>(), vec!["memory"]);
    }

    #[test]
    fn lists_combine_profiles_and_names() {
        let sel = ToolSelection::parse(" agent , mem_stats,router").unwrap();
        assert_eq!(sel.len(), 17 + 6);
        assert!(sel.contains("mem_stats") && sel.contains("memory") && !sel.contains("mem_delete"));
    }

    #[test]
    fn unknown_names_are_errors() {
        let err = ToolSelection::parse("agent,mem_serch").unwrap_err();
        assert_eq!(err.code, cairn_core::ErrorCode::InvalidArgument);
        assert!(err.message.contains("mem_serch"), "{}", err.message);
    }
}

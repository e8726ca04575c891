//! The tool list: names and parameters are engram's (its agents know them), descriptions are
//! ours and short (they cost tokens in every prompt). Each tool hands its parsed arguments to
//! a handler in `handlers.rs`.

use std::future::Future;

use cairn_core::CairnError;
use cairn_core::history::query as history;
use cairn_core::search::SearchQuery;
use rmcp::handler::server::tool::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router};

use super::args::{
    Args, CapturePassiveArgs, CompareArgs, ContextArgs, DeleteArgs, DoctorArgs, IdArgs, JudgeArgs, MergeProjectsArgs,
    NoArgs, RouterArgs, SaveArgs, SavePromptArgs, SessionEndArgs, SessionStartArgs, SessionSummaryArgs, StatsArgs,
    SuggestTopicKeyArgs, TimelineArgs, UpdateArgs,
};
use super::{CairnMcp, CallCtx, reply, router_tool};

/// Run a handler on parsed arguments; any failure becomes an `isError` result.
async fn run<T, Fut>(args: Args<T>, handler: impl FnOnce(T) -> Fut) -> CallToolResult
where
    Fut: Future<Output = Result<CallToolResult, CairnError>>,
{
    let result = match args.0 {
        Ok(args) => handler(args).await,
        Err(e) => Err(e),
    };
    result.unwrap_or_else(|e| {
        tracing::debug!(code = %e.code, message = %e.message, "tool call failed");
        reply::error(&e)
    })
}

#[tool_router(vis = "pub(super)")]
impl CairnMcp {
    /// Save a memory right after a decision, bug fix, discovery, convention or preference.
    /// Content as What / Why / Where / Learned. Reusing a topic_key revises that memory instead
    /// of adding one. Answers with the id (#N); possible duplicates come with a judgment_id for
    /// mem_judge.
    #[tool(
        name = "mem_save",
        annotations(
            title = "Save memory",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn mem_save(
        &self,
        Parameters(args): Parameters<Args<SaveArgs>>,
        Extension(call): Extension<CallCtx>,
    ) -> CallToolResult {
        run(args, |a| self.save(&call, a)).await
    }

    /// Search memories of this project (and personal ones) by keywords; any word may match,
    /// best first. Use before work that may touch earlier decisions or bugs. all_projects: true
    /// searches everywhere. Shows previews; mem_get_observation(id) gives the full text.
    #[tool(
        name = "mem_search",
        annotations(
            title = "Search memories",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_search(
        &self,
        Parameters(args): Parameters<Args<SearchQuery>>,
        Extension(call): Extension<CallCtx>,
    ) -> CallToolResult {
        run(args, |a| self.search(&call, a)).await
    }

    /// Recent sessions, memories and prompts of this project in one short block. Call once at
    /// the start of a task that continues earlier work.
    #[tool(
        name = "mem_context",
        annotations(
            title = "Project memory context",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_context(
        &self,
        Parameters(args): Parameters<Args<ContextArgs>>,
        Extension(call): Extension<CallCtx>,
    ) -> CallToolResult {
        run(args, |a| self.context(&call, a)).await
    }

    /// Record this session's summary (Goal, Discoveries, Accomplished, Next steps, Relevant
    /// files). Main agent only, once, when the work is done; sub-agents never call it. A later
    /// summary of the same session replaces the earlier one.
    #[tool(
        name = "mem_session_summary",
        annotations(
            title = "Save session summary",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_session_summary(
        &self,
        Parameters(args): Parameters<Args<SessionSummaryArgs>>,
        Extension(call): Extension<CallCtx>,
    ) -> CallToolResult {
        run(args, |a| self.session_summary(&call, a)).await
    }

    /// Register a session (your host's id) with its directory, agent and parent session.
    /// Optional: saves without a session_id use a default session.
    #[tool(
        name = "mem_session_start",
        annotations(
            title = "Start session",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_session_start(
        &self,
        Parameters(args): Parameters<Args<SessionStartArgs>>,
        Extension(call): Extension<CallCtx>,
    ) -> CallToolResult {
        run(args, |a| self.session_start(&call, a)).await
    }

    /// Mark a session finished, optionally with a closing summary.
    #[tool(
        name = "mem_session_end",
        annotations(
            title = "End session",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_session_end(&self, Parameters(args): Parameters<Args<SessionEndArgs>>) -> CallToolResult {
        run(args, |a| self.session_end(a)).await
    }

    /// One memory in full (search shows previews), with its metadata.
    #[tool(
        name = "mem_get_observation",
        annotations(
            title = "Get memory",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_get_observation(&self, Parameters(args): Parameters<Args<IdArgs>>) -> CallToolResult {
        run(args, |a| self.get_observation(a)).await
    }

    /// Suggest a stable topic_key (family/subject) from a memory's type, title or content.
    #[tool(
        name = "mem_suggest_topic_key",
        annotations(
            title = "Suggest topic key",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_suggest_topic_key(&self, Parameters(args): Parameters<Args<SuggestTopicKeyArgs>>) -> CallToolResult {
        run(args, |a| self.suggest_topic_key(a)).await
    }

    /// Save each item of a "## Key Learnings" section of a text (e.g. a sub-agent's report).
    /// Learnings already known in the project are skipped.
    #[tool(
        name = "mem_capture_passive",
        annotations(
            title = "Capture learnings",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_capture_passive(
        &self,
        Parameters(args): Parameters<Args<CapturePassiveArgs>>,
        Extension(call): Extension<CallCtx>,
    ) -> CallToolResult {
        run(args, |a| self.capture_passive(&call, a)).await
    }

    /// Record what the user asked (once per request). Later saves in the session link to it.
    #[tool(
        name = "mem_save_prompt",
        annotations(
            title = "Save user prompt",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_save_prompt(
        &self,
        Parameters(args): Parameters<Args<SavePromptArgs>>,
        Extension(call): Extension<CallCtx>,
    ) -> CallToolResult {
        run(args, |a| self.save_prompt(&call, a)).await
    }

    /// Change fields of a memory by id (only those given). The previous version is kept.
    #[tool(
        name = "mem_update",
        annotations(
            title = "Update memory",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_update(&self, Parameters(args): Parameters<Args<UpdateArgs>>) -> CallToolResult {
        run(args, |a| self.update(a)).await
    }

    /// The project memories go to from here, and how it was detected. Never fails.
    #[tool(
        name = "mem_current_project",
        annotations(
            title = "Current project",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_current_project(
        &self,
        Parameters(_args): Parameters<Args<NoArgs>>,
        Extension(call): Extension<CallCtx>,
    ) -> CallToolResult {
        self.current_project(&call).await
    }

    /// Record your verdict on a possible duplicate or conflict that mem_save reported
    /// (judgment_id). Ask the user when your confidence is below 0.7.
    #[tool(
        name = "mem_judge",
        annotations(
            title = "Judge memory relation",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_judge(&self, Parameters(args): Parameters<Args<JudgeArgs>>) -> CallToolResult {
        run(args, |a| self.judge(a)).await
    }

    /// Record a verdict between two memories by id (e.g. the newer supersedes the older).
    #[tool(
        name = "mem_compare",
        annotations(
            title = "Compare memories",
            read_only_hint = false,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_compare(&self, Parameters(args): Parameters<Args<CompareArgs>>) -> CallToolResult {
        run(args, |a| self.compare(a)).await
    }

    /// Health checks of cairn's data directory and database.
    #[tool(
        name = "mem_doctor",
        annotations(
            title = "Memory health check",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_doctor(&self, Parameters(args): Parameters<Args<DoctorArgs>>) -> CallToolResult {
        run(args, |a| self.doctor(a)).await
    }

    /// Delete a memory by id: soft by default (hidden everywhere), hard_delete erases it.
    #[tool(
        name = "mem_delete",
        annotations(
            title = "Delete memory",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn mem_delete(&self, Parameters(args): Parameters<Args<DeleteArgs>>) -> CallToolResult {
        run(args, |a| self.delete(a)).await
    }

    /// Counts of sessions, memories and prompts, per project and type.
    #[tool(
        name = "mem_stats",
        annotations(
            title = "Memory statistics",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_stats(&self, Parameters(args): Parameters<Args<StatsArgs>>) -> CallToolResult {
        run(args, |a| self.stats(a)).await
    }

    /// The memories saved before and after one memory, in its session.
    #[tool(
        name = "mem_timeline",
        annotations(
            title = "Memory timeline",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_timeline(&self, Parameters(args): Parameters<Args<TimelineArgs>>) -> CallToolResult {
        run(args, |a| self.timeline(a)).await
    }

    /// Merge projects (e.g. misspellings of one) into `to`: memories, sessions and prompts move.
    #[tool(
        name = "mem_merge_projects",
        annotations(
            title = "Merge projects",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn mem_merge_projects(&self, Parameters(args): Parameters<Args<MergeProjectsArgs>>) -> CallToolResult {
        run(args, |a| self.merge_projects(a)).await
    }

    /// Conversation-history sessions of OpenCode and Claude Code, newest first, with ids for the
    /// other history_* tools. Filter by project, host or words of the title.
    #[tool(
        name = "history_sessions",
        annotations(
            title = "History sessions",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn history_sessions(&self, Parameters(args): Parameters<Args<history::SessionsRequest>>) -> CallToolResult {
        run(args, |a| self.history_sessions_op(a)).await
    }

    /// Turn previews of a session (user intent, assistant tools, files modified), around
    /// turn_number (default the newest). Pass caller_session_id = your own session id.
    #[tool(
        name = "history_browse_turns",
        annotations(
            title = "Browse history turns",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn history_browse_turns(&self, Parameters(args): Parameters<Args<history::TurnsRequest>>) -> CallToolResult {
        run(args, |a| self.history_browse_turns_op(a)).await
    }

    /// Message previews around message_id (default the latest), with before/after ids to page on.
    #[tool(
        name = "history_browse_messages",
        annotations(
            title = "Browse history messages",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn history_browse_messages(
        &self,
        Parameters(args): Parameters<Args<history::MessagesRequest>>,
    ) -> CallToolResult {
        run(args, |a| self.history_browse_messages_op(a)).await
    }

    /// One message's parts; long ones are cut and carry a part_id for history_pull_part.
    #[tool(
        name = "history_pull_message",
        annotations(
            title = "Pull a history message",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn history_pull_message(
        &self,
        Parameters(args): Parameters<Args<history::MessageRequest>>,
    ) -> CallToolResult {
        run(args, |a| self.history_pull_message_op(a)).await
    }

    /// One part of a message in full, a page at a time: follow next_offset.
    #[tool(
        name = "history_pull_part",
        annotations(
            title = "Pull a history part",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn history_pull_part(&self, Parameters(args): Parameters<Args<history::PartRequest>>) -> CallToolResult {
        run(args, |a| self.history_pull_part_op(a)).await
    }

    /// Search past conversations (one session, else this project's newest first) by keywords or
    /// a tool name; literal=true for an exact substring. Answers message and part ids to pull.
    #[tool(
        name = "history_search",
        annotations(
            title = "Search history",
            read_only_hint = true,
            destructive_hint = false,
            idempotent_hint = true,
            open_world_hint = false
        )
    )]
    async fn history_search(
        &self,
        Parameters(args): Parameters<Args<history::SearchRequest>>,
        Extension(call): Extension<CallCtx>,
    ) -> CallToolResult {
        run(args, |a| self.history_search_op(&call, a)).await
    }

    #[tool(
        name = "memory",
        description = router_tool::description(),
        annotations(
            title = "cairn memory",
            read_only_hint = false,
            destructive_hint = true,
            idempotent_hint = false,
            open_world_hint = false
        )
    )]
    async fn memory(
        &self,
        Parameters(args): Parameters<Args<RouterArgs>>,
        Extension(call): Extension<CallCtx>,
    ) -> CallToolResult {
        run(args, |a| self.route(&call, a)).await
    }
}

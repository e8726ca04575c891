//! What each tool does: resolve the project, build one operation, run it through the client,
//! render. No rule of cairn lives here; those are in cairn-core.

use std::path::{Path, PathBuf};

use cairn_core::agent::{
    self, ActivityEvent, ActivityRecord, ActivityUpdate, ProjectHints, SAVE_FINDS_CANDIDATES, SaveActivity, given,
};
use cairn_core::context::{Context, ContextRequest};
use cairn_core::doctor::{CheckStatus, DoctorReport};
use cairn_core::history::query as history;
use cairn_core::memory::{NewObservation, ObservationPatch, SaveAction};
use cairn_core::model::{Observation, Prompt, Session};
use cairn_core::ops::{
    DeleteRequest, DoctorRequest, EndSessionRequest, GetRequest, GetResponse, MergeProjectsRequest, Op, Request,
    SaveRequest, SaveResponse, SearchResponse, SessionSummaryRequest, StatsRequest, SuggestTopicKeyRequest,
    TimelineRequest, TopicKeySuggestion, UpdateRequest,
};
use cairn_core::passive::{PassiveCapture, PassiveOutcome};
use cairn_core::project::ProjectDetection;
use cairn_core::projects::MigrateOutcome;
use cairn_core::prompts::NewPrompt;
use cairn_core::relations::{Comparison, Judgment};
use cairn_core::search::SearchQuery;
use cairn_core::sessions::{NewSession, default_session_id};
use cairn_core::text::Scope;
use cairn_core::views::{Stats, Timeline};
use cairn_core::{CairnError, Result};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};

use super::args::{
    CapturePassiveArgs, CompareArgs, ContextArgs, DeleteArgs, DoctorArgs, IdArgs, JudgeArgs, MergeProjectsArgs,
    RouterArgs, SaveArgs, SavePromptArgs, SessionEndArgs, SessionStartArgs, SessionSummaryArgs, StatsArgs,
    SuggestTopicKeyArgs, TimelineArgs, UpdateArgs,
};
use super::reply::{self, Scoped};
use super::{CairnMcp, CallCtx, router_tool};
use cairn_render::agent as render;

/// Tools whose answer carries the save reminder when one is due.
const REMINDING_TOOLS: &[&str] = &["mem_search", "mem_context"];
/// Tools that open the session they name when it is unknown (as their write will): their call
/// may open it first. Others naming an unknown session are not counted rather than open it.
const OPENING_TOOLS: &[&str] = &["mem_save", "mem_save_prompt", "mem_capture_passive", "mem_session_summary"];

impl CairnMcp {
    fn cwd(&self) -> &Path {
        &self.state.opts.cwd
    }

    fn cwd_text(&self) -> String {
        self.cwd().display().to_string()
    }

    async fn call<R: Request>(&self, request: R) -> Result<R::Output> {
        self.state.client.call_async(request).await
    }

    /// What a call says about its project, for core's one resolution rule.
    fn hints(&self, call: &CallCtx, explicit: Option<&str>, dir: Option<&Path>) -> ProjectHints {
        ProjectHints {
            explicit: explicit.map(str::to_owned),
            session_id: call.session.as_ref().map(|(id, _)| id.clone()),
            header: call.header_project.clone(),
            process: self.state.opts.project.clone(),
            dir: dir.map(Path::to_owned),
            process_cwd: self.cwd().to_owned(),
        }
    }

    /// The project of a call (`cairn_core::agent::resolve_project`).
    async fn resolve(&self, call: &CallCtx, explicit: Option<&str>) -> Result<Scoped> {
        self.resolve_in(call, explicit, None).await
    }

    /// [`Self::resolve`], detecting from `dir` instead of the working directory.
    async fn resolve_in(&self, call: &CallCtx, explicit: Option<&str>, dir: Option<&Path>) -> Result<Scoped> {
        let hints = self.hints(call, explicit, dir);
        let session_project = call.session.as_ref().and_then(|(_, p)| p.clone());
        let found = match agent::named_project(&hints, |_| Ok(session_project))? {
            Some(named) => named,
            // Detection may run git (once per directory per process): keep it off the async workers.
            None => tokio::task::spawn_blocking(move || agent::detected_project(&hints))
                .await
                .map_err(|e| CairnError::internal(format!("project detection failed: {e}")))??,
        };
        Ok(scoped(found))
    }

    /// Count the call in its session's activity (see the module doc for which session), and
    /// keep what the tool needs from it. Best effort: activity never fails a call.
    pub(super) async fn record_call(&self, request: &CallToolRequestParams, call: &mut CallCtx) {
        let arg = |key: &str| {
            let value = request.arguments.as_ref().and_then(|a| a.get(key)).and_then(Value::as_str);
            agent::given_str(value).map(str::to_owned)
        };
        // mem_session_start opens the session later calls count in, mem_session_end clears it:
        // neither is counted.
        if matches!(request.name.as_ref(), "mem_session_start" | "mem_session_end") {
            return;
        }
        let named = arg("session_id");
        let opened = self.opened_session().clone();
        call.session = match (&named, &opened) {
            (Some(id), _) => Some((id.clone(), None)),
            (None, Some((id, project))) => Some((id.clone(), Some(project.clone()))),
            (None, None) => None,
        };
        // The project an unknown session is opened with, and the default session's name.
        let base = self.resolve(&CallCtx { session: None, ..call.clone() }, arg("project").as_deref()).await.ok();
        let session_id = match (&call.session, &base) {
            (Some((id, _)), _) => id.clone(),
            (None, Some(base)) => default_session_id(&base.project),
            (None, None) => return,
        };
        let remind = REMINDING_TOOLS.contains(&request.name.as_ref());
        let may_open = call.session.is_none() || OPENING_TOOLS.contains(&request.name.as_ref());
        let record = ActivityRecord {
            session_id: session_id.clone(),
            project: base.map(|b| b.project).filter(|_| may_open),
            event: ActivityEvent::ToolCall { remind },
        };
        let Some(update) = self.record_activity(record).await else { return };
        if let Some((_, project)) = call.session.as_mut() {
            *project = Some(update.activity.project.clone()).filter(|p| !p.is_empty());
        }
        call.activity_session = Some(session_id);
        call.reminder = update.reminder;
    }

    /// Record an event in the call's session. Best effort, like [`Self::record_call`].
    async fn record(&self, call: &CallCtx, event: ActivityEvent) -> Option<ActivityUpdate> {
        let session_id = call.activity_session.clone()?;
        self.record_activity(ActivityRecord { session_id, project: None, event }).await
    }

    async fn record_activity(&self, record: ActivityRecord) -> Option<ActivityUpdate> {
        match self.call(record).await {
            Ok(update) => Some(update),
            Err(e) => {
                tracing::debug!(error = %e, "session activity not recorded");
                None
            }
        }
    }

    fn with_nudge(call: &CallCtx, mut text: String) -> String {
        if let Some(nudge) = &call.reminder {
            text.push_str("\n\n");
            text.push_str(nudge);
        }
        text
    }

    pub(super) async fn save(&self, call: &CallCtx, a: SaveArgs) -> Result<CallToolResult> {
        let scoped = self.resolve(call, a.project.as_deref()).await?;
        let observation = NewObservation {
            title: a.title,
            content: a.content,
            kind: given(a.kind),
            session_id: given(a.session_id),
            project: Some(scoped.project.clone()),
            scope: given(a.scope),
            topic_key: given(a.topic_key),
            directory: Some(self.cwd_text()),
            ..NewObservation::default()
        };
        // Counted in the call's session in the save's own transaction, with the prompt the user
        // typed last attached to the memory's session.
        let activity = call
            .activity_session
            .clone()
            .map(|session_id| SaveActivity { session_id, attach_prompt: a.capture_prompt.unwrap_or(true) });
        let request = SaveRequest { observation, find_candidates: SAVE_FINDS_CANDIDATES, activity };
        let resp: SaveResponse = self.call(request).await?;
        let o = &resp.outcome;
        let mut extra = json!({
            "id": o.id,
            "sync_id": o.sync_id,
            "action": o.action,
            "session_id": o.session_id,
            "topic_key": o.topic_key,
            "suggested_topic_key": o.suggested_topic_key,
            "revision_count": o.revision_count,
            "duplicate_count": o.duplicate_count,
            "judgment_required": !resp.candidates.is_empty(),
            "candidates": resp.candidates,
        });
        if let Some(first) = resp.candidates.first() {
            extra["judgment_status"] = json!("pending");
            extra["judgment_id"] = json!(first.judgment_id);
        }
        if !o.warnings.is_empty() {
            extra["warning"] = json!(o.warnings.join("; "));
        }
        Ok(reply::envelope(Some(&scoped), render::save(&resp), extra))
    }

    pub(super) async fn search(&self, call: &CallCtx, mut query: SearchQuery) -> Result<CallToolResult> {
        // No project given: the call's own (its memories plus personal ones).
        let scoped = self.resolve(call, query.project.as_deref()).await?;
        query.project = Some(scoped.project.clone());
        let all_projects = query.all_projects;
        let text = query.text.clone();
        let resp: SearchResponse = self.call(query).await?;
        let label = if all_projects { "all projects".to_owned() } else { format!("project {}", scoped.project) };
        let text = Self::with_nudge(call, render::search(&text, &label, &resp));
        let ids: Vec<i64> = resp.hits.iter().map(|h| h.hit.observation.id).collect();
        let mut extra = json!({ "count": ids.len(), "ids": ids });
        if let Some(deep) = &resp.deep {
            extra["deep"] = json!(deep);
        }
        Ok(reply::envelope(Some(&scoped), text, extra))
    }

    pub(super) async fn context(&self, call: &CallCtx, a: ContextArgs) -> Result<CallToolResult> {
        let scoped = self.resolve(call, a.project.as_deref()).await?;
        let request = ContextRequest {
            project: Some(scoped.project.clone()),
            scope: Scope::parse_filter(a.scope.as_deref())?,
            budget_bytes: self.state.opts.context_budget,
            ..ContextRequest::default()
        };
        let ctx: Context = self.call(request).await?;
        // The store-wide line shows that other projects exist even when this one is empty.
        let stats: Option<Stats> = self.call(StatsRequest).await.ok();
        let text = Self::with_nudge(call, render::context(&ctx, stats.as_ref()));
        Ok(reply::envelope(Some(&scoped), text, json!({ "memory_ids": ctx.memory_ids, "truncated": ctx.truncated })))
    }

    pub(super) async fn session_summary(&self, call: &CallCtx, a: SessionSummaryArgs) -> Result<CallToolResult> {
        let scoped = self.resolve(call, a.project.as_deref()).await?;
        let op = SessionSummaryRequest {
            content: a.content,
            session_id: given(a.session_id),
            project: Some(scoped.project.clone()),
        };
        let saved: cairn_core::memory::SaveOutcome = self.call(op).await?;
        let event = ActivityEvent::Save { saved_session_id: Some(saved.session_id.clone()), attach_prompt: false };
        let activity = self.record(call, event).await;
        let verb = if saved.action == SaveAction::Created { "saved" } else { "updated" };
        let mut text = format!("Session summary {verb}: #{} (session {}).", saved.id, saved.session_id);
        if let Some(update) = activity {
            text.push('\n');
            text.push_str(&update.activity.summary_line());
        }
        Ok(reply::envelope(
            Some(&scoped),
            text,
            json!({ "id": saved.id, "sync_id": saved.sync_id, "session_id": saved.session_id }),
        ))
    }

    pub(super) async fn session_start(&self, call: &CallCtx, a: SessionStartArgs) -> Result<CallToolResult> {
        let directory = given(a.directory).map(PathBuf::from);
        let scoped = self.resolve_in(call, a.project.as_deref(), directory.as_deref()).await?;
        let new = NewSession {
            id: a.id,
            project: Some(scoped.project.clone()),
            directory: Some(directory.map_or_else(|| self.cwd_text(), |d| d.display().to_string())),
            agent: given(a.agent),
            parent_id: given(a.parent_session_id),
            title: given(a.title),
        };
        let session: Session = self.call(new).await?;
        *self.opened_session() = Some((session.id.clone(), session.project.clone()));
        let mut text = format!("Session started: {} (project {})", session.id, session.project);
        if let Some(parent) = &session.parent_id {
            text.push_str(&format!(", sub-session of {parent}"));
        }
        Ok(reply::envelope(Some(&scoped), text, json!({ "session_id": session.id })))
    }

    pub(super) async fn session_end(&self, a: SessionEndArgs) -> Result<CallToolResult> {
        // Ending a session also clears its activity (core's rule).
        let session: Session =
            self.call(EndSessionRequest { id: a.id, summary: given(a.summary), keep_activity: false }).await?;
        let mut opened = self.opened_session();
        if opened.as_ref().is_some_and(|(id, _)| *id == session.id) {
            *opened = None;
        }
        drop(opened);
        let text = format!("Session ended: {}", session.id);
        Ok(reply::envelope(None, text, json!({ "session_id": session.id, "project": session.project })))
    }

    pub(super) async fn get_observation(&self, a: IdArgs) -> Result<CallToolResult> {
        let GetResponse { observation: o, provenance, .. } =
            self.call(GetRequest { id: a.id, revisions: false }).await?;
        let mut text = render::observation(&o);
        if let Some(p) = &provenance {
            text.push('\n');
            text.push_str(&cairn_render::provenance(p));
        }
        let session = provenance.as_ref().and_then(|p| p.session_id.clone());
        let meta = match session {
            Some(session) => json!({ "id": o.id, "project": o.project, "extracted_from_session": session }),
            None => json!({ "id": o.id, "project": o.project }),
        };
        Ok(reply::envelope(None, text, meta))
    }

    pub(super) async fn suggest_topic_key(&self, a: SuggestTopicKeyArgs) -> Result<CallToolResult> {
        let op = SuggestTopicKeyRequest {
            kind: given(a.kind),
            title: a.title.unwrap_or_default(),
            content: a.content.unwrap_or_default(),
        };
        let found: TopicKeySuggestion = self.call(op).await?;
        Ok(reply::text(format!("Suggested topic_key: {}", found.topic_key)))
    }

    pub(super) async fn capture_passive(&self, call: &CallCtx, a: CapturePassiveArgs) -> Result<CallToolResult> {
        let scoped = self.resolve(call, a.project.as_deref()).await?;
        let capture = PassiveCapture {
            content: a.content,
            session_id: given(a.session_id),
            project: Some(scoped.project.clone()),
            directory: None,
            source: given(a.source),
        };
        let outcome: PassiveOutcome = self.call(capture).await?;
        if outcome.saved > 0 {
            self.record(call, ActivityEvent::Save { saved_session_id: None, attach_prompt: false }).await;
        }
        Ok(reply::envelope(Some(&scoped), render::passive(&outcome), json!(outcome)))
    }

    pub(super) async fn save_prompt(&self, call: &CallCtx, a: SavePromptArgs) -> Result<CallToolResult> {
        let scoped = self.resolve(call, a.project.as_deref()).await?;
        let new = NewPrompt {
            content: a.content,
            session_id: given(a.session_id),
            project: Some(scoped.project.clone()),
            directory: Some(self.cwd_text()),
        };
        let prompt: Prompt = self.call(new).await?;
        // Kept as the session's pending prompt, attached to the next save that lands elsewhere.
        let typed =
            ActivityEvent::Prompt { content: prompt.content.clone(), stored_in: Some(prompt.session_id.clone()) };
        self.record(call, typed).await;
        let text = format!("Prompt saved: #{} (session {})", prompt.id, prompt.session_id);
        Ok(reply::envelope(Some(&scoped), text, json!({ "id": prompt.id, "session_id": prompt.session_id })))
    }

    pub(super) async fn update(&self, a: UpdateArgs) -> Result<CallToolResult> {
        let patch = ObservationPatch {
            kind: given(a.kind),
            title: a.title,
            content: a.content,
            project: given(a.project),
            scope: given(a.scope),
            // An empty string is meaningful here: it clears the key.
            topic_key: a.topic_key,
            tool_name: None,
        };
        let o: Observation = self.call(UpdateRequest { id: a.id, patch }).await?;
        let text = format!("Memory updated: #{} {:?} ({}), revision {}", o.id, o.title, o.kind, o.revision_count);
        Ok(reply::envelope(None, text, json!({ "id": o.id, "project": o.project, "revision_count": o.revision_count })))
    }

    pub(super) async fn delete(&self, a: DeleteArgs) -> Result<CallToolResult> {
        let hard = a.hard_delete.unwrap_or(false);
        self.state.client.execute_async(Op::Delete(DeleteRequest { id: a.id, hard })).await?;
        let how = if hard { "permanently deleted" } else { "soft-deleted" };
        Ok(reply::text(format!("Memory #{} {how}", a.id)))
    }

    pub(super) async fn stats(&self, a: StatsArgs) -> Result<CallToolResult> {
        let stats: Stats = self.call(StatsRequest).await?;
        let extra = given(a.project).map_or_else(|| json!({}), |p| json!({ "project": p }));
        Ok(reply::envelope(None, render::stats(&stats), extra))
    }

    pub(super) async fn timeline(&self, a: TimelineArgs) -> Result<CallToolResult> {
        let op = TimelineRequest { id: a.observation_id, before: a.before.unwrap_or(5), after: a.after.unwrap_or(5) };
        let t: Timeline = self.call(op).await?;
        let focus = &t.focus.observation;
        Ok(reply::envelope(None, render::timeline(&t), json!({ "id": focus.id, "project": focus.project })))
    }

    pub(super) async fn merge_projects(&self, a: MergeProjectsArgs) -> Result<CallToolResult> {
        let to = a.to.clone();
        let outcomes: Vec<MigrateOutcome> = self.call(MergeProjectsRequest { from: a.from, to: a.to }).await?;
        Ok(reply::text(render::merge(&outcomes, &to)))
    }

    /// core's current-project view (`cairn_core::agent::current_project`), the same JSON as
    /// `GET /project/current` for the same directory.
    pub(super) async fn current_project(&self, call: &CallCtx) -> CallToolResult {
        let hints = self.hints(call, None, None);
        let session_project = call.session.as_ref().and_then(|(_, p)| p.clone());
        let view = tokio::task::spawn_blocking(move || agent::current_project(&hints, |_| Ok(session_project)))
            .await
            .map_err(|e| CairnError::internal(format!("project detection failed: {e}")));
        match view {
            Ok(view) => reply::json_text(&json!(view)),
            Err(e) => reply::error(&e),
        }
    }

    pub(super) async fn doctor(&self, a: DoctorArgs) -> Result<CallToolResult> {
        let mut report: DoctorReport = self.call(DoctorRequest).await?;
        if let Some(id) = given(a.check) {
            report.checks.retain(|c| c.id == id);
        }
        let failed = report.status == CheckStatus::Error;
        let mut report = serde_json::to_value(report).map_err(|e| CairnError::internal(e.to_string()))?;
        if let Some(project) = given(a.project) {
            report["project"] = json!(project);
        }
        let mut result = reply::json_text(&report);
        result.is_error = Some(failed);
        Ok(result)
    }

    pub(super) async fn judge(&self, a: JudgeArgs) -> Result<CallToolResult> {
        let judgment = Judgment {
            judgment_id: a.judgment_id,
            relation: a.relation.trim().to_owned(),
            reason: given(a.reason),
            evidence: given(a.evidence),
            confidence: a.confidence,
            session_id: given(a.session_id),
            by_person: false,
        };
        let result: Value = self.state.client.execute_async(Op::Judge(judgment)).await?;
        Ok(reply::json_text(&result))
    }

    pub(super) async fn compare(&self, a: CompareArgs) -> Result<CallToolResult> {
        let comparison = Comparison {
            memory_id_a: a.memory_id_a,
            memory_id_b: a.memory_id_b,
            relation: a.relation.trim().to_owned(),
            confidence: a.confidence,
            reasoning: a.reasoning,
            model: given(a.model),
        };
        let result: Value = self.state.client.execute_async(Op::Compare(comparison)).await?;
        Ok(reply::json_text(&result))
    }

    /// A history tool: one op, its JSON answer pretty-printed (the layout the history tools share).
    async fn history_json(&self, op: Op) -> Result<CallToolResult> {
        let value: Value = self.state.client.execute_async(op).await?;
        let text = serde_json::to_string_pretty(&value).map_err(|e| CairnError::internal(e.to_string()))?;
        Ok(reply::text(text))
    }

    pub(super) async fn history_sessions_op(&self, req: history::SessionsRequest) -> Result<CallToolResult> {
        self.history_json(Op::HistorySessions(req)).await
    }

    pub(super) async fn history_browse_turns_op(&self, req: history::TurnsRequest) -> Result<CallToolResult> {
        self.history_json(Op::HistoryBrowseTurns(req)).await
    }

    pub(super) async fn history_browse_messages_op(&self, req: history::MessagesRequest) -> Result<CallToolResult> {
        self.history_json(Op::HistoryBrowseMessages(req)).await
    }

    pub(super) async fn history_pull_message_op(&self, req: history::MessageRequest) -> Result<CallToolResult> {
        self.history_json(Op::HistoryPullMessage(req)).await
    }

    pub(super) async fn history_pull_part_op(&self, req: history::PartRequest) -> Result<CallToolResult> {
        self.history_json(Op::HistoryPullPart(req)).await
    }

    /// Without a session, the search covers the caller's project.
    pub(super) async fn history_search_op(
        &self,
        call: &CallCtx,
        mut req: history::SearchRequest,
    ) -> Result<CallToolResult> {
        if req.session_id.is_none() && req.project.is_none() {
            req.project = Some(self.resolve(call, None).await?.project);
        }
        self.history_json(Op::HistorySearch(req)).await
    }

    /// The `memory` router tool: any operation by name.
    pub(super) async fn route(&self, call: &CallCtx, a: RouterArgs) -> Result<CallToolResult> {
        if a.op.trim() == "help" {
            return Ok(reply::text(router_tool::help(&a.args)?));
        }
        // Only operations that default their project need (and may fail on) detection.
        let project = if router_tool::wants_current_project(&a.op, &a.args) {
            Some(self.resolve(call, None).await?.project)
        } else {
            None
        };
        let caller = router_tool::Caller {
            session_id: call.session.as_ref().map(|(id, _)| id.as_str()),
            directory: Some(self.cwd()),
        };
        let args = router_tool::with_caller(a.op.trim(), a.args, caller);
        let op = router_tool::build_op(&a.op, args, project.as_deref())?;
        let saves =
            matches!(op, Op::Save(_) | Op::SessionSummary(SessionSummaryRequest { .. }) | Op::CapturePassive(_));
        let output = self.state.client.run_async(op.clone()).await?;
        if saves {
            self.record(call, ActivityEvent::Save { saved_session_id: None, attach_prompt: false }).await;
        }
        Ok(reply::text(router_tool::render_result(&op, output)?))
    }
}

fn scoped(found: ProjectDetection) -> Scoped {
    Scoped {
        project: found.project,
        source: found.project_source.as_str().into(),
        path: found.project_path,
        warning: found.warning,
    }
}

//! What each tool does: resolve the project, build one operation, run it through the backend,
//! render. No rule of cairn lives here; those are in cairn-core.

use std::path::{Path, PathBuf};
use std::time::Instant;

use cairn_core::context::{Context, ContextRequest};
use cairn_core::memory::{NewObservation, ObservationPatch, SaveAction, SaveOutcome};
use cairn_core::model::{Observation, Prompt, Session};
use cairn_core::ops::{Op, SaveRequest, SaveResponse, SearchResponse};
use cairn_core::passive::{PassiveCapture, PassiveOutcome};
use cairn_core::project::{detect_project, explicit_project};
use cairn_core::projects::MigrateOutcome;
use cairn_core::prompts::NewPrompt;
use cairn_core::relations::{Comparison, Judgment};
use cairn_core::search::{SearchMode, SearchQuery};
use cairn_core::sessions::NewSession;
use cairn_core::text::Scope;
use cairn_core::views::{Stats, Timeline};
use cairn_core::{CairnError, Result};
use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use super::args::*;
use super::reply::{self, Scoped};
use super::{CairnMcp, CallCtx, render, router_tool};

/// `Some` only for a value with something in it: agents often send `""` for "not set".
fn given(value: Option<String>) -> Option<String> {
    value.filter(|v| !v.trim().is_empty())
}

/// A scope filter: core's rule, shared with HTTP and the CLI.
fn scope_of(value: Option<String>) -> Result<Option<Scope>> {
    Scope::parse_filter(value.as_deref())
}

impl CairnMcp {
    fn cwd(&self) -> &Path {
        &self.state.opts.cwd
    }

    fn cwd_text(&self) -> String {
        self.cwd().display().to_string()
    }

    async fn call<T: serde::de::DeserializeOwned>(&self, op: Op) -> Result<T> {
        self.state.backend.call(op).await
    }

    /// The project of a call: the tool's `project` argument, else the `X-Cairn-Project`
    /// header, else `--project` / `CAIRN_PROJECT`, else detection from the working directory.
    async fn resolve(&self, call: &CallCtx, explicit: Option<&str>) -> Result<Scoped> {
        self.resolve_in(call, explicit, None).await
    }

    /// [`Self::resolve`], detecting from `dir` instead of the working directory.
    async fn resolve_in(&self, call: &CallCtx, explicit: Option<&str>, dir: Option<&Path>) -> Result<Scoped> {
        let named = [
            (explicit, "explicit_override"),
            (call.header_project.as_deref(), "request_header"),
            (self.state.opts.project.as_deref(), "process_override"),
        ];
        for (name, source) in named {
            if let Some(name) = name.filter(|n| !n.trim().is_empty()) {
                let found = explicit_project(name, self.cwd()).map_err(|e| {
                    CairnError::invalid(e.message)
                        .with_hint("a project is a plain name: no slashes, no control characters")
                })?;
                return Ok(Scoped {
                    project: found.project,
                    source: source.into(),
                    path: String::new(),
                    warning: found.warning,
                });
            }
        }
        let dir: PathBuf = dir.unwrap_or(self.cwd()).to_owned();
        // Detection may run git (once per directory per process): keep it off the async workers.
        let found = tokio::task::spawn_blocking(move || detect_project(&dir))
            .await
            .map_err(|e| CairnError::internal(format!("project detection failed: {e}")))??;
        Ok(Scoped {
            project: found.project,
            source: found.project_source.as_str().into(),
            path: found.project_path,
            warning: found.warning,
        })
    }

    fn nudge(&self) -> Option<String> {
        self.activity().nudge(Instant::now())
    }

    fn with_nudge(&self, mut text: String) -> String {
        if let Some(nudge) = self.nudge() {
            text.push_str("\n\n");
            text.push_str(&nudge);
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
        let resp: SaveResponse = self.call(Op::Save(SaveRequest { observation, find_candidates: true })).await?;
        self.activity().record_save(Instant::now());
        if a.capture_prompt.unwrap_or(true) {
            self.attach_prompt(&resp.outcome).await;
        }
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

    /// Store the prompt last recorded for this project in the session the memory went to,
    /// once. Best effort: a failure here never fails the save.
    async fn attach_prompt(&self, saved: &SaveOutcome) {
        let Some(content) = self.prompts().pending_for(&saved.project, &saved.session_id) else { return };
        let prompt = NewPrompt {
            content,
            session_id: Some(saved.session_id.clone()),
            project: Some(saved.project.clone()),
            directory: Some(self.cwd_text()),
        };
        match self.state.backend.execute(Op::AddPrompt(prompt)).await {
            Ok(_) => self.prompts().mark_stored(&saved.project, &saved.session_id),
            Err(e) => tracing::warn!(error = %e, "could not attach the current prompt to the save"),
        }
    }

    pub(super) async fn search(&self, call: &CallCtx, a: SearchArgs) -> Result<CallToolResult> {
        let scoped = self.resolve(call, a.project.as_deref()).await?;
        let all_projects = a.all_projects.unwrap_or(false);
        let query = SearchQuery {
            text: a.query.clone(),
            project: Some(scoped.project.clone()),
            all_projects,
            kind: given(a.kind),
            scope: scope_of(a.scope)?,
            limit: a.limit.unwrap_or(0),
            mode: given(a.mode).map(|m| SearchMode::parse(&m)).transpose()?,
        };
        let resp: SearchResponse = self.call(Op::Search(query)).await?;
        let label = if all_projects { "all projects".to_owned() } else { format!("project {}", scoped.project) };
        let text = self.with_nudge(render::search(&a.query, &label, &resp));
        let ids: Vec<i64> = resp.hits.iter().map(|h| h.observation.id).collect();
        Ok(reply::envelope(Some(&scoped), text, json!({ "count": ids.len(), "ids": ids })))
    }

    pub(super) async fn context(&self, call: &CallCtx, a: ContextArgs) -> Result<CallToolResult> {
        let scoped = self.resolve(call, a.project.as_deref()).await?;
        let request = ContextRequest {
            project: Some(scoped.project.clone()),
            scope: scope_of(a.scope)?,
            budget_bytes: self.state.opts.context_budget,
            ..ContextRequest::default()
        };
        let ctx: Context = self.call(Op::Context(request)).await?;
        // The store-wide line shows that other projects exist even when this one is empty.
        let stats: Option<Stats> = self.call(Op::Stats).await.ok();
        let text = self.with_nudge(render::context(&ctx, stats.as_ref()));
        Ok(reply::envelope(Some(&scoped), text, json!({ "memory_ids": ctx.memory_ids, "truncated": ctx.truncated })))
    }

    pub(super) async fn session_summary(&self, call: &CallCtx, a: SessionSummaryArgs) -> Result<CallToolResult> {
        let scoped = self.resolve(call, a.project.as_deref()).await?;
        let op = Op::SessionSummary {
            content: a.content,
            session_id: given(a.session_id),
            project: Some(scoped.project.clone()),
        };
        let saved: SaveOutcome = self.call(op).await?;
        let line = {
            let mut activity = self.activity();
            activity.record_save(Instant::now());
            activity.summary_line()
        };
        let verb = if saved.action == SaveAction::Created { "saved" } else { "updated" };
        let text = format!("Session summary {verb}: #{} (session {}).\n{line}", saved.id, saved.session_id);
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
        };
        let session: Session = self.call(Op::StartSession(new)).await?;
        let mut text = format!("Session started: {} (project {})", session.id, session.project);
        if let Some(parent) = &session.parent_id {
            text.push_str(&format!(", sub-session of {parent}"));
        }
        Ok(reply::envelope(Some(&scoped), text, json!({ "session_id": session.id })))
    }

    pub(super) async fn session_end(&self, a: SessionEndArgs) -> Result<CallToolResult> {
        let session: Session = self.call(Op::EndSession { id: a.id, summary: given(a.summary) }).await?;
        self.activity().reset(Instant::now());
        let text = format!("Session ended: {}", session.id);
        Ok(reply::envelope(None, text, json!({ "session_id": session.id, "project": session.project })))
    }

    pub(super) async fn get_observation(&self, a: IdArgs) -> Result<CallToolResult> {
        let o: Observation = self.call(Op::Get { id: a.id, revisions: false }).await?;
        Ok(reply::envelope(None, render::observation(&o), json!({ "id": o.id, "project": o.project })))
    }

    pub(super) async fn suggest_topic_key(&self, a: SuggestTopicKeyArgs) -> Result<CallToolResult> {
        let op = Op::SuggestTopicKey {
            kind: given(a.kind),
            title: a.title.unwrap_or_default(),
            content: a.content.unwrap_or_default(),
        };
        let found: Value = self.call(op).await?;
        let key = found["topic_key"].as_str().unwrap_or_default();
        Ok(reply::text(format!("Suggested topic_key: {key}")))
    }

    pub(super) async fn capture_passive(&self, call: &CallCtx, a: CapturePassiveArgs) -> Result<CallToolResult> {
        let scoped = self.resolve(call, a.project.as_deref()).await?;
        let capture = PassiveCapture {
            content: a.content,
            session_id: given(a.session_id),
            project: Some(scoped.project.clone()),
            source: given(a.source),
        };
        let outcome: PassiveOutcome = self.call(Op::CapturePassive(capture)).await?;
        if outcome.saved > 0 {
            self.activity().record_save(Instant::now());
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
        let prompt: Prompt = self.call(Op::AddPrompt(new)).await?;
        self.prompts().remember(&prompt.project, &prompt.content, &prompt.session_id);
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
        let o: Observation = self.call(Op::Update { id: a.id, patch }).await?;
        let text = format!("Memory updated: #{} {:?} ({}), revision {}", o.id, o.title, o.kind, o.revision_count);
        Ok(reply::envelope(None, text, json!({ "id": o.id, "project": o.project, "revision_count": o.revision_count })))
    }

    pub(super) async fn delete(&self, a: DeleteArgs) -> Result<CallToolResult> {
        let hard = a.hard_delete.unwrap_or(false);
        self.state.backend.execute(Op::Delete { id: a.id, hard }).await?;
        let how = if hard { "permanently deleted" } else { "soft-deleted" };
        Ok(reply::text(format!("Memory #{} {how}", a.id)))
    }

    pub(super) async fn stats(&self, a: StatsArgs) -> Result<CallToolResult> {
        let stats: Stats = self.call(Op::Stats).await?;
        let extra = given(a.project).map_or_else(|| json!({}), |p| json!({ "project": p }));
        Ok(reply::envelope(None, render::stats(&stats), extra))
    }

    pub(super) async fn timeline(&self, a: TimelineArgs) -> Result<CallToolResult> {
        let op = Op::Timeline { id: a.observation_id, before: a.before.unwrap_or(5), after: a.after.unwrap_or(5) };
        let t: Timeline = self.call(op).await?;
        let focus = &t.focus.observation;
        Ok(reply::envelope(None, render::timeline(&t), json!({ "id": focus.id, "project": focus.project })))
    }

    pub(super) async fn merge_projects(&self, a: MergeProjectsArgs) -> Result<CallToolResult> {
        let to = a.to.clone();
        let outcomes: Vec<MigrateOutcome> = self.call(Op::MergeProjects { from: a.from, to: a.to }).await?;
        Ok(reply::text(render::merge(&outcomes, &to)))
    }

    /// Detection as JSON, with the problem described instead of raised: an agent asks this
    /// precisely when something about the project looks wrong.
    pub(super) async fn current_project(&self, call: &CallCtx) -> CallToolResult {
        let mut body = match self.resolve(call, None).await {
            Ok(s) => json!({
                "project": s.project,
                "project_source": s.source,
                "project_path": s.path,
                "cwd": self.cwd_text(),
                "warning": s.warning,
            }),
            Err(e) => json!({
                "project": "",
                "project_source": "error",
                "project_path": "",
                "cwd": self.cwd_text(),
                "error_code": e.code.as_str(),
                "error_hint": match &e.hint { Some(h) => format!("{}; {h}", e.message), None => e.message.clone() },
            }),
        };
        let projects = self.call::<Stats>(Op::Stats).await.map(|s| s.projects).unwrap_or_default();
        body["available_projects"] = json!(projects);
        if let Some(fields) = body.as_object_mut().filter(|o| o["warning"].is_null()) {
            fields.remove("warning");
        }
        reply::json_text(&body)
    }

    pub(super) async fn doctor(&self, a: DoctorArgs) -> Result<CallToolResult> {
        let mut report: Value = self.call(Op::Doctor).await?;
        if let (Some(id), Some(checks)) = (given(a.check), report["checks"].as_array_mut()) {
            checks.retain(|c| c["id"].as_str() == Some(id.as_str()));
        }
        if let Some(project) = given(a.project) {
            report["project"] = json!(project);
        }
        let failed = report["status"] == "error";
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
        };
        let result: Value = self.state.backend.execute(Op::Judge(judgment)).await?;
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
        let result: Value = self.state.backend.execute(Op::Compare(comparison)).await?;
        Ok(reply::json_text(&result))
    }

    /// The `memory` router tool: any operation by name.
    pub(super) async fn route(&self, call: &CallCtx, a: RouterArgs) -> Result<CallToolResult> {
        // Only operations that default their project need (and may fail on) detection.
        let project = if router_tool::wants_current_project(&a.op, &a.args) {
            Some(self.resolve(call, None).await?.project)
        } else {
            None
        };
        let op = router_tool::build_op(&a.op, a.args, project.as_deref())?;
        let saves = matches!(op, Op::Save(_) | Op::SessionSummary { .. } | Op::CapturePassive(_));
        let result = self.state.backend.execute(op.clone()).await?;
        if saves {
            self.activity().record_save(Instant::now());
        }
        Ok(reply::text(router_tool::render_result(&op, &result)))
    }
}

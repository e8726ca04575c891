//! Context assembly: what an agent should know when a session starts, as markdown within a
//! byte budget. Pinned memories first, then recent sessions, memories and prompts, with
//! nothing repeated across sections.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::memory::ListFilter;
use crate::model::Observation;
use crate::store::Store;
use crate::text::{Scope, normalize_project, preview};

mod memory_block;

pub use crate::settings::DEFAULT_BUDGET_BYTES;
/// Memory counts on session lines stop here ("100+").
const SESSION_COUNT_CAP: usize = 100;
/// Most personal memories shown in a project's context.
const PERSONAL_LIMIT: usize = 10;

/// How the context reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextLayout {
    /// Pinned, personal, recent sessions, memories, prompts (`## Memory from previous sessions`).
    #[default]
    Recent,
    /// The `[MEMORY]` block a plugin injects: typed sections, the last
    /// session, the user's preferences, what is relevant to `query` and the newest memories and
    /// sessions; never empty.
    MemoryBlock,
}

/// What context to build.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContextRequest {
    /// `None`: every project.
    pub project: Option<String>,
    pub scope: Option<Scope>,
    pub budget_bytes: usize,
    pub sessions: usize,
    pub prompts: usize,
    pub memories: usize,
    /// Sub-agent sessions (with a parent) are left out of the recent sessions unless this is set.
    pub include_children: bool,
    pub layout: ContextLayout,
    /// `memory_block`: what the user is asking about, for the relevant section.
    pub query: Option<String>,
    /// `memory_block`: least relevance (0–1) of a relevant memory; default from the settings
    /// (`inject.similarity_threshold`).
    pub similarity_threshold: Option<f64>,
    /// `memory_block`: most relevant memories (default `inject.max_relevant`).
    pub max_relevant: Option<usize>,
    /// `memory_block`: most user preferences (default `inject.max_profile`; 0 leaves them out).
    pub max_profile: Option<usize>,
    /// `memory_block`: the session asking. Its own record is not its "Last Session" unless it
    /// was compacted (then what it did before is what it lost).
    pub session_id: Option<String>,
}

impl Default for ContextRequest {
    fn default() -> Self {
        Self {
            project: None,
            scope: None,
            budget_bytes: DEFAULT_BUDGET_BYTES,
            sessions: 5,
            prompts: 10,
            memories: 20,
            include_children: false,
            layout: ContextLayout::Recent,
            query: None,
            similarity_threshold: None,
            max_relevant: None,
            max_profile: None,
            session_id: None,
        }
    }
}

/// The assembled context and what went into it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Context {
    /// Markdown; empty when there is nothing to say.
    pub context: String,
    pub project: Option<String>,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub bytes: usize,
    #[cfg_attr(feature = "openapi", schema(value_type = u64))]
    pub budget_bytes: usize,
    /// Memory ids included, in order.
    pub memory_ids: Vec<i64>,
    pub session_ids: Vec<String>,
    pub prompt_ids: Vec<i64>,
    /// Whether items were left out to respect the budget.
    pub truncated: bool,
}

/// Appends lines while they fit the budget.
struct Budgeted {
    out: String,
    budget: usize,
    truncated: bool,
}

impl Budgeted {
    fn fits(&self, extra: usize) -> bool {
        self.out.len() + extra <= self.budget
    }

    /// Add a section: the header only goes in when at least one line fits after it.
    fn section(&mut self, header: &str, lines: impl IntoIterator<Item = String>) -> usize {
        let mut added = 0;
        for line in lines {
            let needs_header = added == 0;
            let cost = line.len() + 1 + if needs_header { header.len() + 2 } else { 0 };
            if !self.fits(cost) {
                self.truncated = true;
                break;
            }
            if needs_header {
                self.out.push('\n');
                self.out.push_str(header);
                self.out.push('\n');
            }
            self.out.push_str(&line);
            self.out.push('\n');
            added += 1;
        }
        added
    }
}

impl crate::Core {
    /// Build the context block for a project (or all projects).
    pub fn context(&self, req: &ContextRequest) -> Result<Context> {
        // Checked for every layout: a threshold the recent layout ignores is still a mistake
        // the caller should hear about.
        crate::search::check_min_score(req.similarity_threshold)?;
        if req.layout == ContextLayout::MemoryBlock {
            return self.memory_block(req);
        }
        self.store.recent_layout(req)
    }
}

impl Store {
    /// The context in the recent layout: pinned, recent and personal memories, sessions and
    /// prompts (no search: the store alone answers it).
    fn recent_layout(&self, req: &ContextRequest) -> Result<Context> {
        let project = req.project.as_deref().map(|p| normalize_project(p).0);
        let pinned = self.pinned(project.as_deref(), req.scope, req.memories)?;
        let recent = self.list(&ListFilter {
            project: project.clone(),
            scope: req.scope,
            kind: None,
            limit: req.memories + pinned.len(),
            ..ListFilter::default()
        })?;
        // Personal memories (preferences, habits) follow the user into every project.
        let personal = match (&project, req.scope) {
            (Some(_), None | Some(Scope::Personal)) => self.list(&ListFilter {
                scope: Some(Scope::Personal),
                limit: PERSONAL_LIMIT + pinned.len(),
                ..ListFilter::default()
            })?,
            _ => Vec::new(),
        };
        let sessions = self.recent_sessions_counted(
            project.as_deref(),
            req.sessions,
            Some(SESSION_COUNT_CAP + 1),
            req.include_children,
        )?;
        let prompts = self.recent_prompts(project.as_deref(), req.prompts)?;
        if pinned.is_empty() && recent.is_empty() && personal.is_empty() && sessions.is_empty() && prompts.is_empty() {
            return Ok(Context { project, budget_bytes: req.budget_bytes, ..Context::default() });
        }

        let title = match &project {
            Some(p) => format!("## Memory from previous sessions (project: {p})\n"),
            None => "## Memory from previous sessions\n".to_owned(),
        };
        let mut doc = Budgeted { out: String::new(), budget: req.budget_bytes, truncated: false };
        if !doc.fits(title.len()) {
            return Ok(Context { project, budget_bytes: req.budget_bytes, truncated: true, ..Context::default() });
        }
        doc.out.push_str(&title);
        let mut ctx = Context { project: project.clone(), budget_bytes: req.budget_bytes, ..Context::default() };
        let mut seen_text: HashSet<String> = HashSet::new();

        let pinned_lines = pinned.iter().map(|o| memory_line(o, 600));
        let n = doc.section("### Pinned", pinned_lines);
        ctx.memory_ids.extend(pinned.iter().take(n).map(|o| o.id));

        let personal: Vec<&Observation> =
            personal.iter().filter(|o| !ctx.memory_ids.contains(&o.id)).take(PERSONAL_LIMIT).collect();
        let n = doc.section("### Personal (applies to every project)", personal.iter().map(|o| memory_line(o, 300)));
        ctx.memory_ids.extend(personal.iter().take(n).map(|o| o.id));

        let sessions: Vec<_> =
            sessions.into_iter().filter(|s| s.observation_count > 0 || s.session.summary.is_some()).collect();
        let session_lines = sessions.iter().map(|s| {
            if let Some(summary) = &s.session.summary {
                seen_text.insert(normalize_for_dedupe(summary));
            }
            session_line(s, project.is_none())
        });
        let n = doc.section("### Recent sessions", session_lines.collect::<Vec<_>>());
        ctx.session_ids.extend(sessions.iter().take(n).map(|s| s.session.id.clone()));

        let fresh: Vec<&Observation> = recent
            .iter()
            .filter(|o| !ctx.memory_ids.contains(&o.id))
            .filter(|o| !seen_text.contains(&normalize_for_dedupe(&o.content)))
            .take(req.memories)
            .collect();
        // A replaced memory is shown as history: after the current ones, marked with what
        // replaced it.
        let replaced = self.superseded_ids(&fresh.iter().map(|o| o.id).collect::<Vec<_>>())?;
        let (current, history): (Vec<&Observation>, Vec<&Observation>) =
            fresh.into_iter().partition(|o| !replaced.contains_key(&o.id));
        let fresh: Vec<&Observation> = current.into_iter().chain(history).collect();
        let lines = fresh.iter().map(|o| match replaced.get(&o.id) {
            Some(by) => format!("{} (superseded_by: #{by})", memory_line(o, 300)),
            None => memory_line(o, 300),
        });
        let n = doc.section("### Recent memories", lines.collect::<Vec<_>>());
        ctx.memory_ids.extend(fresh.iter().take(n).map(|o| o.id));
        seen_text.extend(fresh.iter().map(|o| normalize_for_dedupe(&o.content)));

        let fresh_prompts: Vec<_> =
            prompts.iter().filter(|p| seen_text.insert(normalize_for_dedupe(&p.content))).collect();
        let n = doc.section(
            "### Recent prompts",
            fresh_prompts.iter().map(|p| format!("- {}: {}", short_date(&p.created_at), preview(&p.content, 200))),
        );
        ctx.prompt_ids.extend(fresh_prompts.iter().take(n).map(|p| p.id));

        ctx.truncated = doc.truncated;
        ctx.bytes = doc.out.len();
        ctx.context = doc.out;
        Ok(ctx)
    }
}

fn memory_line(o: &Observation, max_chars: usize) -> String {
    format!("- #{} [{}] **{}**: {}", o.id, o.kind, preview(&o.title, 120), preview(&o.content, max_chars))
}

fn session_line(s: &crate::model::SessionSummary, show_project: bool) -> String {
    let mut line = format!("- {}", short_date(&s.session.started_at));
    if show_project && !s.session.project.is_empty() {
        line.push_str(&format!(" **{}**", s.session.project));
    }
    if !s.session.agent.is_empty() {
        line.push_str(&format!(" ({})", s.session.agent));
    }
    match &s.session.summary {
        Some(summary) => line.push_str(&format!(": {}", preview(summary, 300))),
        None => line.push_str(&format!(" `{}`", s.session.id)),
    }
    let noun = if s.observation_count == 1 { "memory" } else { "memories" };
    let count = if s.observation_count > SESSION_COUNT_CAP as i64 {
        format!("{SESSION_COUNT_CAP}+")
    } else {
        s.observation_count.to_string()
    };
    line.push_str(&format!(" [{count} {noun}]"));
    line
}

fn short_date(ts: &str) -> &str {
    ts.get(..16).unwrap_or(ts)
}

fn normalize_for_dedupe(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

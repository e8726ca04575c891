//! The `[MEMORY]` block: what a plugin injects before a session's first
//! message. Typed sections (brief, architecture, tech, product, progress), the Last Session (the
//! project's newest session that ended or compacted: its summary and its record), the user's
//! preferences, the memories relevant to the user's message with their relevance as a
//! percentage, and a short Recent list (the newest sessions and memories, as `mem_context` shows
//! them). Empty sections are left out, nothing appears twice, and the block stays within the
//! byte budget: room is kept for the Last Session and Recent, which are there even when nothing
//! is relevant. A project with nothing stored gets one line saying so and how to search.

use std::collections::HashSet;

use super::{Budgeted, Context, ContextRequest};
use crate::error::Result;
use crate::model::Observation;
use crate::model::{COMPACTION_SUMMARY, SESSION_RECORD, record_says_compacted};
use crate::search::{SearchQuery, check_min_score};
use crate::store::Store;
use crate::text::{cut_bytes, normalize_project, preview};

/// The typed sections: header and the memory types that fill it.
const TYPED_SECTIONS: &[(&str, &[&str])] = &[
    ("## Project Brief", &["project-brief", "project_brief"]),
    ("## Architecture", &["architecture"]),
    ("## Tech Context", &["tech-context", "tech_context", "config", "project-config"]),
    ("## Product Context", &["product-context", "product_context"]),
    ("## Progress & Status", &["progress"]),
];
/// Most memories per typed section (newest first).
const PER_SECTION: usize = 5;
/// Characters of a memory shown in a typed section, and of the last session's summary (beside
/// its record, which is bounded on its own).
const ITEM_CHARS: usize = 300;
const LAST_SESSION_CHARS: usize = 1_500;
const SUMMARY_BESIDE_RECORD_CHARS: usize = 800;
/// The Last Session takes at most this share of the budget; less room than `MIN_LAST_SESSION`
/// bytes and it is left out rather than cut to nothing.
const LAST_SESSION_SHARE: usize = 2;
const MIN_LAST_SESSION: usize = 160;
/// The Recent list: sessions and memories shown, and the bytes kept for it.
const RECENT_SESSIONS: usize = 3;
const RECENT_MEMORIES: usize = 5;
const RECENT_RESERVE: usize = 700;
/// Summaries and records: what a session did, shown as the Last Session, not as memories.
const SESSION_KINDS: [&str; 3] = [SESSION_RECORD, "session_summary", COMPACTION_SUMMARY];

/// The project's previous session, as the block shows it.
struct LastSession {
    session_id: String,
    memory_ids: Vec<i64>,
    text: String,
}

impl crate::Core {
    /// The `[MEMORY]` block for `req.project` (see the module doc).
    pub(super) fn memory_block(&self, req: &ContextRequest) -> Result<Context> {
        check_min_score(req.similarity_threshold)?;
        let plugin = self.settings.plugin_config();
        let store = &self.store;
        let project = req.project.as_deref().map(|p| normalize_project(p).0).filter(|p| !p.is_empty());
        let mut ctx = Context { project: project.clone(), budget_bytes: req.budget_bytes, ..Context::default() };
        let mut doc = Budgeted { out: "[MEMORY]\n".to_owned(), budget: req.budget_bytes, truncated: false };
        if !doc.fits(0) {
            return Ok(Context { truncated: true, ..ctx });
        }
        let current = req.session_id.as_deref().map(str::trim).filter(|s| !s.is_empty());
        let last = match project.as_deref() {
            Some(project) => store.last_session(project, current)?,
            None => None,
        };
        let recent = match project.as_deref() {
            Some(project) => store.recent_items(project, current, last.as_ref().map(|l| l.session_id.as_str()))?,
            None => Vec::new(),
        };
        // Kept for the parts that are there whatever the prompt: the typed sections, the
        // preferences and the relevant hits cannot crowd them out.
        let recent_reserve = recent.iter().map(|(_, line)| line.len() + 1).sum::<usize>().min(RECENT_RESERVE);
        let last_reserve = last.as_ref().map_or(0, |l| (l.text.len() + 20).min(req.budget_bytes / LAST_SESSION_SHARE));
        let full_budget = req.budget_bytes;
        doc.budget = full_budget.saturating_sub(recent_reserve + last_reserve);

        // A memory is shown once, in the first section that has room for it.
        let add = |doc: &mut Budgeted, ctx: &mut Context, header: &str, items: Vec<(i64, String)>| {
            let items: Vec<_> = items.into_iter().filter(|(id, _)| !ctx.memory_ids.contains(id)).collect();
            let n = doc.section(header, items.iter().map(|(_, line)| line.clone()));
            ctx.memory_ids.extend(items.iter().take(n).map(|(id, _)| *id));
        };

        if let Some(project) = project.as_deref() {
            for (header, kinds) in TYPED_SECTIONS {
                let items = store.typed_memories(project, kinds, header.ends_with("Brief"), PER_SECTION)?;
                // A replaced decision is history, never a section's current fact.
                let replaced = store.superseded_ids(&items.iter().map(|o| o.id).collect::<Vec<_>>())?;
                let current = items.iter().filter(|o| !replaced.contains_key(&o.id));
                add(&mut doc, &mut ctx, header, current.map(|o| (o.id, typed_line(o))).collect());
            }
        }
        doc.budget = full_budget.saturating_sub(recent_reserve);
        if let Some(last) = last {
            const HEADER: &str = "## Last Session";
            let room = doc.budget.saturating_sub(doc.out.len() + HEADER.len() + 3);
            if room >= MIN_LAST_SESSION.min(last.text.len()) {
                let text = cut_bytes(&last.text, room);
                doc.truncated |= text.len() < last.text.len();
                if doc.section(HEADER, [text]) == 1 {
                    let fresh: Vec<i64> =
                        last.memory_ids.iter().copied().filter(|id| !ctx.memory_ids.contains(id)).collect();
                    ctx.memory_ids.extend(fresh);
                    ctx.session_ids.push(last.session_id);
                }
            } else {
                doc.truncated = true;
            }
        }
        let max_profile = req.max_profile.unwrap_or(plugin.inject.max_profile);
        if max_profile > 0 {
            let profile = store.profile(project.as_deref(), max_profile)?;
            add(&mut doc, &mut ctx, "## User Preferences", profile.iter().map(|o| (o.id, typed_line(o))).collect());
        }
        if let Some(query) = req.query.as_deref().filter(|q| !q.trim().is_empty()) {
            let threshold = req.similarity_threshold.unwrap_or(plugin.inject.similarity_threshold);
            let limit = req.max_relevant.unwrap_or(plugin.inject.max_relevant);
            let items = self.relevant(query, project.as_deref(), threshold, limit)?;
            add(&mut doc, &mut ctx, "## Relevant to Current Task", items);
        }
        doc.budget = full_budget;
        let shown: HashSet<i64> = ctx.memory_ids.iter().copied().collect();
        let (mut sessions, mut memories) = (0, 0);
        let recent: Vec<(RecentItem, String)> = recent
            .into_iter()
            .filter(|(item, _)| match item {
                RecentItem::Memory(id) => {
                    !shown.contains(id) && {
                        memories += 1;
                        memories <= RECENT_MEMORIES
                    }
                }
                RecentItem::Session(id) => {
                    !ctx.session_ids.contains(id) && {
                        sessions += 1;
                        sessions <= RECENT_SESSIONS
                    }
                }
            })
            .collect();
        let n = doc.section("## Recent", recent.iter().map(|(_, line)| line.clone()));
        for (item, _) in recent.into_iter().take(n) {
            match item {
                RecentItem::Memory(id) => ctx.memory_ids.push(id),
                RecentItem::Session(id) => ctx.session_ids.push(id),
            }
        }

        if ctx.memory_ids.is_empty() && ctx.session_ids.is_empty() {
            // Things stored but no room for any: not "nothing stored".
            if doc.truncated {
                return Ok(Context { truncated: true, ..ctx });
            }
            return Ok(nothing_stored(ctx));
        }
        ctx.truncated = doc.truncated;
        ctx.bytes = doc.out.len();
        ctx.context = doc.out;
        Ok(ctx)
    }

    /// The hits for `query` at or above `threshold`, as `- [72%, 2026-02-21] title: snippet`.
    fn relevant(&self, query: &str, project: Option<&str>, threshold: f64, limit: usize) -> Result<Vec<(i64, String)>> {
        // The query is what the user typed, not search syntax.
        let query = crate::search::query::plain_words(query);
        let query = query.as_str();
        if limit == 0 || crate::search::query::parse(query).is_empty() {
            return Ok(Vec::new());
        }
        let q = SearchQuery {
            text: query.to_owned(),
            project: project.map(str::to_owned),
            all_projects: project.is_none(),
            limit,
            ..SearchQuery::default()
        };
        let q = SearchQuery { min_score: Some(threshold), ..q };
        let results = self.search(&q)?;
        // Search puts the current memory first; a replaced one that still made the page says so.
        let ids: Vec<i64> = results.hits.iter().map(|h| h.observation.id).collect();
        let replaced = self.store.superseded_ids(&ids)?;
        Ok(results
            .hits
            .iter()
            .map(|hit| {
                let mut line = relevant_line(hit, hit.relevance);
                if let Some(by) = replaced.get(&hit.observation.id) {
                    line.push_str(&format!(" (superseded_by: #{by})"));
                }
                (hit.observation.id, line)
            })
            .collect())
    }
}

impl Store {
    /// The project's newest session that left a record or a summary, other than `current`
    /// unless `current` was compacted: its summary (when an agent or host wrote one) and its
    /// record.
    fn last_session(&self, project: &str, current: Option<&str>) -> Result<Option<LastSession>> {
        let newest = self.newest_of_kinds(project, SESSION_KINDS, 50)?;
        let current_compacted = newest.iter().any(|o| {
            Some(o.session_id.as_str()) == current
                && (o.kind == COMPACTION_SUMMARY
                    || (o.kind == SESSION_RECORD && record_says_compacted(o.tool_name.as_deref())))
        });
        let Some(chosen) = newest.iter().find(|o| Some(o.session_id.as_str()) != current || current_compacted) else {
            return Ok(None);
        };
        let of_session: Vec<&Observation> = newest.iter().filter(|o| o.session_id == chosen.session_id).collect();
        let record = of_session.iter().find(|o| o.kind == SESSION_RECORD);
        let summary = of_session.iter().find(|o| o.kind != SESSION_RECORD);
        let mut parts = Vec::new();
        let mut memory_ids = Vec::new();
        if let Some(summary) = summary {
            let max = if record.is_some() { SUMMARY_BESIDE_RECORD_CHARS } else { LAST_SESSION_CHARS };
            parts.push(summary_lines(&summary.content, max));
            memory_ids.push(summary.id);
        }
        if let Some(record) = record {
            parts.push(record.content.trim().to_owned());
            memory_ids.push(record.id);
        }
        Ok(Some(LastSession { session_id: chosen.session_id.clone(), memory_ids, text: parts.join("\n") }))
    }

    /// The newest sessions and memories of the project, as `mem_context` lists them (the
    /// current session and the Last Session's left out), sessions first.
    fn recent_items(
        &self,
        project: &str,
        current: Option<&str>,
        last: Option<&str>,
    ) -> Result<Vec<(RecentItem, String)>> {
        let mut items = Vec::new();
        let sessions = self.recent_sessions_counted(Some(project), RECENT_SESSIONS + 2, Some(100), false)?;
        let catch_all = crate::sessions::catch_all_sessions_like();
        let catch_all = catch_all.trim_end_matches('%');
        for s in
            sessions.iter().filter(|s| Some(s.session.id.as_str()) != current && Some(s.session.id.as_str()) != last)
        {
            // the catch-all session's memories are unrelated; they are listed as memories
            let said_nothing = s.observation_count == 0 && s.session.title.is_none() && s.session.summary.is_none();
            if said_nothing || s.session.id.starts_with(catch_all) {
                continue;
            }
            items.push((RecentItem::Session(s.session.id.clone()), recent_session_line(s)));
            if items.len() == RECENT_SESSIONS {
                break;
            }
        }
        // More than shown: some are in the sections above already; the Last Session's own
        // memories are in its record already.
        let rows = self.newest_besides_kinds(project, SESSION_KINDS, last, RECENT_MEMORIES * 4)?;
        // Recent lists what is current: a replaced memory is history.
        let replaced = self.superseded_ids(&rows.iter().map(|o| o.id).collect::<Vec<_>>())?;
        for o in rows.into_iter().filter(|o| !replaced.contains_key(&o.id)) {
            let date = o.updated_at.get(..10).unwrap_or(&o.updated_at).to_owned();
            items.push((
                RecentItem::Memory(o.id),
                format!("- #{} [{}] {} ({date})", o.id, o.kind, preview(&o.title, 100)),
            ));
        }
        Ok(items)
    }
}

/// A summary with its line structure (Goal, Accomplished...), its headings one level below the
/// block's own (`### Goal`), cut to `max_chars`.
fn summary_lines(content: &str, max_chars: usize) -> String {
    let lines: Vec<String> = content
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .map(|l| match l.trim_start().strip_prefix('#') {
            Some(rest) => format!("### {}", rest.trim_start_matches('#').trim()),
            None => l.to_owned(),
        })
        .collect();
    let text = lines.join("\n");
    if text.chars().count() <= max_chars {
        return text;
    }
    let mut cut: String = text.chars().take(max_chars).collect();
    cut.push('…');
    cut
}

fn typed_line(o: &Observation) -> String {
    format!("- {}: {}", preview(&o.title, 120), preview(&o.content, ITEM_CHARS))
}

fn relevant_line(hit: &crate::search::SearchHit, score: f64) -> String {
    let o = &hit.observation;
    let date = o.updated_at.get(..10).unwrap_or(&o.updated_at);
    let snippet = if hit.snippet.is_empty() { preview(&o.content, 200) } else { preview(&hit.snippet, 200) };
    format!("- [{}%, {date}] {}: {snippet}", (score * 100.0).round() as i64, preview(&o.title, 120))
}

/// An entry of the Recent list.
enum RecentItem {
    Session(String),
    Memory(i64),
}

fn recent_session_line(s: &crate::model::SessionSummary) -> String {
    let when = s.last_activity_at.get(..16).unwrap_or(&s.last_activity_at).replace('T', " ");
    let mut line = format!("- {when} session `{}`", s.session.id);
    if !s.session.agent.is_empty() {
        line.push_str(&format!(" ({})", s.session.agent));
    }
    if let Some(title) = s.session.title.as_deref().filter(|t| !t.trim().is_empty()) {
        line.push_str(&format!(" \"{}\"", preview(title, 80)));
    }
    if let Some(summary) = &s.session.summary {
        line.push_str(&format!(": {}", preview(summary, 120)));
    }
    let noun = if s.observation_count == 1 { "memory" } else { "memories" };
    line.push_str(&format!(" [{} {noun}]", s.observation_count));
    line
}

/// The block of a project with nothing stored: one line, with where to look.
fn nothing_stored(ctx: Context) -> Context {
    let whose = match ctx.project.as_deref() {
        Some(p) => format!(" for project {p:?}"),
        None => String::new(),
    };
    let line = format!(
        "[MEMORY] Nothing is stored{whose} yet: no memories, no earlier sessions. To look for something \
         later, search memories with mem_search and past conversations with history_search."
    );
    if line.len() > ctx.budget_bytes {
        return Context { truncated: true, ..ctx };
    }
    Context { bytes: line.len(), context: line, ..ctx }
}

//! The `[MEMORY]` block (host-integration M1): what a plugin injects before a session's first
//! message. Typed sections (brief, architecture, tech, product, progress), the last session's
//! summary, the user's preferences, then the memories relevant to the user's message with their
//! relevance as a percentage. Empty sections are left out, nothing appears twice, and the block
//! stays within the byte budget (sections in this order get the room first).

use std::collections::HashSet;

use rusqlite::params;

use super::{Budgeted, Context, ContextRequest};
use crate::agent::COMPACTION_SUMMARY;
use crate::error::Result;
use crate::model::{OBSERVATION_COLUMNS, Observation};
use crate::search::{SearchQuery, check_min_score};
use crate::store::Store;
use crate::text::{normalize_project, preview};

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
/// Characters of a memory shown in a typed section, and of the last session's summary.
const ITEM_CHARS: usize = 300;
const LAST_SESSION_CHARS: usize = 1_500;

impl Store {
    /// The `[MEMORY]` block for `req.project` (see the module doc).
    pub(super) fn memory_block(&self, req: &ContextRequest) -> Result<Context> {
        check_min_score(req.similarity_threshold)?;
        let plugin = crate::settings::plugin::current();
        let project = req.project.as_deref().map(|p| normalize_project(p).0).filter(|p| !p.is_empty());
        let mut ctx = Context { project: project.clone(), budget_bytes: req.budget_bytes, ..Context::default() };
        let mut doc = Budgeted { out: "[MEMORY]\n".to_owned(), budget: req.budget_bytes, truncated: false };
        if !doc.fits(0) {
            return Ok(Context { truncated: true, ..ctx });
        }
        let mut shown: HashSet<i64> = HashSet::new();
        let mut add = |doc: &mut Budgeted, ctx: &mut Context, header: &str, items: Vec<(i64, String)>| {
            let items: Vec<_> = items.into_iter().filter(|(id, _)| shown.insert(*id)).collect();
            let n = doc.section(header, items.iter().map(|(_, line)| line.clone()));
            ctx.memory_ids.extend(items.iter().take(n).map(|(id, _)| *id));
        };

        if let Some(project) = project.as_deref() {
            for (header, kinds) in TYPED_SECTIONS {
                let items = self.typed_memories(project, kinds, header.ends_with("Brief"))?;
                add(&mut doc, &mut ctx, header, items.iter().map(|o| (o.id, typed_line(o))).collect());
            }
            if let Some(last) = self.last_session_summary(project)? {
                let line = summary_lines(&last.content, LAST_SESSION_CHARS);
                add(&mut doc, &mut ctx, "## Last Session", vec![(last.id, line)]);
            }
        }
        let max_profile = req.max_profile.unwrap_or(plugin.inject.max_profile);
        if max_profile > 0 {
            let profile = self.profile(project.as_deref(), max_profile)?;
            add(&mut doc, &mut ctx, "## User Preferences", profile.iter().map(|o| (o.id, typed_line(o))).collect());
        }
        if let Some(query) = req.query.as_deref().filter(|q| !q.trim().is_empty()) {
            let threshold = req.similarity_threshold.unwrap_or(plugin.inject.similarity_threshold);
            let limit = req.max_relevant.unwrap_or(plugin.inject.max_relevant);
            let items = self.relevant(query, project.as_deref(), threshold, limit)?;
            add(&mut doc, &mut ctx, "## Relevant to Current Task", items);
        }

        if ctx.memory_ids.is_empty() {
            // Nothing to say: an empty block, not a bare "[MEMORY]" header.
            return Ok(Context { truncated: doc.truncated, ..ctx });
        }
        ctx.truncated = doc.truncated;
        ctx.bytes = doc.out.len();
        ctx.context = doc.out;
        Ok(ctx)
    }

    /// A project's memories of these types, newest first; the brief also by its topic.
    fn typed_memories(&self, project: &str, kinds: &[&str], brief: bool) -> Result<Vec<Observation>> {
        let placeholders = (0..kinds.len()).map(|i| format!("?{}", i + 3)).collect::<Vec<_>>().join(", ");
        let by_topic = if brief { " OR o.topic_key = 'project/brief'" } else { "" };
        let sql = format!(
            "SELECT {OBSERVATION_COLUMNS} FROM observations o
             WHERE o.project = ?1 AND o.deleted_at IS NULL AND (o.type IN ({placeholders}){by_topic})
             ORDER BY o.updated_at DESC, o.id DESC LIMIT ?2"
        );
        let mut values: Vec<rusqlite::types::Value> = vec![project.to_owned().into(), (PER_SECTION as i64).into()];
        values.extend(kinds.iter().map(|k| rusqlite::types::Value::from((*k).to_owned())));
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(values), Observation::from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The newest session or compaction summary of the project.
    fn last_session_summary(&self, project: &str) -> Result<Option<Observation>> {
        let sql = format!(
            "SELECT {OBSERVATION_COLUMNS} FROM observations o
             WHERE o.project = ?1 AND o.deleted_at IS NULL AND o.type IN ('session_summary', ?2)
             ORDER BY o.updated_at DESC, o.id DESC LIMIT 1"
        );
        let mut stmt = self.conn().prepare_cached(&sql)?;
        let mut rows = stmt.query_map(params![project, COMPACTION_SUMMARY], Observation::from_row)?;
        Ok(rows.next().transpose()?)
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
        Ok(results.hits.iter().map(|hit| (hit.observation.id, relevant_line(hit, hit.relevance))).collect())
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

//! The memory views: dashboard, search, a memory (edit, pin, delete), sessions.

use std::fmt::Write as _;

use axum::Form;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect};
use cairn_core::extract::ExtractionStatus;
use cairn_core::history::query::HistoryStats;
use cairn_core::memory::{ListFilter, ObservationPatch};
use cairn_core::model::{Observation, Prompt, SessionSummary};
use cairn_core::ops::{
    DeleteRequest, ExtractionStatusRequest, GetRequest, GetResponse, HistoryStatsRequest, MemoriesPerDayRequest,
    PinRequest, RecentPromptsRequest, RecentSessionsRequest, RestoreRequest, SearchResponse, StatsRequest,
    SyncStatusRequest, TimelineRequest, UpdateRequest,
};
use cairn_core::relations::{RelationFilter, RelationPage};
use cairn_core::search::SearchQuery;
use cairn_core::sync::SyncStatus;
use cairn_core::text::Scope;
use cairn_core::views::{MemoriesPerDay, Stats, Timeline};
use cairn_llm::budget::Spend;
use serde::Deserialize;

use super::html::{self, Page, Section, bytes, esc, memory_link, table, when};
use super::{UiResult, charts, error_page, page, run};
use crate::http::AppState;
use crate::http::given;

/// Content longer than this is cut on a memory's page, with a link to show all of it.
const SHOWN_CONTENT_BYTES: usize = 16 * 1024;

pub(super) async fn dashboard(State(state): State<AppState>) -> UiResult {
    let stats: Stats = run(&state, StatsRequest).await?;
    let per_day: MemoriesPerDay = run(&state, MemoriesPerDayRequest { project: None, days: 30 }).await?;
    let recent: Vec<Observation> = run(&state, ListFilter { limit: 10, ..ListFilter::default() }).await?;
    let prompts: Vec<Prompt> = run(&state, RecentPromptsRequest { project: None, limit: 5 }).await?;
    // The archive is optional: a daemon without it still shows the rest.
    let history: Option<HistoryStats> = run(&state, HistoryStatsRequest).await.ok();
    let sync: Option<SyncStatus> = run(&state, SyncStatusRequest { directory: None }).await.ok();

    let mut p = Page::new("Dashboard", Section::Dashboard);
    p.heading("Dashboard");
    p.raw(&format!(
        "<ul class=\"counts\"><li><strong>{}</strong> memories</li><li><strong>{}</strong> sessions</li>\
         <li><strong>{}</strong> prompts</li><li><strong>{}</strong> pinned</li><li><strong>{}</strong> relations</li>\
         <li><strong>{}</strong> on disk</li></ul>",
        stats.total_observations,
        stats.total_sessions,
        stats.total_prompts,
        stats.pinned_observations,
        stats.total_relations,
        bytes(stats.db_bytes)
    ));
    p.raw(&model_status(&stats));
    p.raw(&sync_status(sync.as_ref()));
    p.raw(&llm_status(&state).await);
    p.raw(
        "<section aria-labelledby=\"live-h\"><h2 id=\"live-h\">Live</h2>\
         <p class=\"muted\" id=\"live-state\">New memories, prompts and sessions appear here while the page is open \
         (needs JavaScript; reload otherwise).</p><ol id=\"live\" class=\"live\" aria-live=\"polite\"></ol></section>",
    );
    p.raw("<div class=\"grid\">");
    let days: Vec<(String, i64)> = per_day.days.into_iter().map(|d| (d.day, d.memories)).collect();
    p.raw(&charts::columns("Memories per day, last 30 days", &days));
    let types: Vec<(String, u64, String)> =
        stats.by_type.iter().map(|(kind, n)| (kind.clone(), *n as u64, n.to_string())).collect();
    p.raw(&charts::bars("Memories per type", &types));
    let disk: Vec<(String, u64, String)> =
        cairn_render::disk::parts(&stats.disk).into_iter().map(|(part, n)| (part.to_owned(), n, bytes(n))).collect();
    p.raw(&charts::bars("Disk use per part", &disk));
    for warning in &stats.disk.warnings {
        p.raw(&format!(
            "<p class=\"notice\" role=\"status\">Disk: {}</p>",
            esc(&cairn_render::disk::warning_line(warning))
        ));
    }
    if let Some(history) = history {
        let hosts: Vec<(String, u64, String)> =
            history.hosts.iter().map(|h| (h.host.clone(), h.bytes, bytes(h.bytes))).collect();
        p.raw(&charts::bars("Conversation archive per host", &hosts));
    }
    p.raw("</div>");
    p.raw(&table(
        "Projects",
        &["Project", "Memories", "Sessions", "Prompts", "Last activity"],
        stats.by_project.iter().map(|row| {
            vec![
                format!("<a href=\"/ui/search?project={}\">{}</a>", html::url(&row.project), esc(&row.project)),
                row.observations.to_string(),
                row.sessions.to_string(),
                row.prompts.to_string(),
                row.last_activity_at.as_deref().map(when).unwrap_or_default(),
            ]
        }),
    ));
    p.raw(&table("Recent memories", &["Title", "Type", "Project", "Saved"], recent.iter().map(memory_row)));
    p.raw(&table(
        "Recent prompts",
        &["Prompt", "Project", "When"],
        prompts.iter().map(|pr| vec![esc(&preview(&pr.content, 200)), esc(&pr.project), when(&pr.created_at)]),
    ));
    Ok(page(&p))
}

fn model_status(stats: &Stats) -> String {
    let model = stats.embedding_model.as_deref().unwrap_or("none (lexical search only)");
    format!(
        "<p class=\"status\">Semantic search: <strong>{}</strong> · model {} · {} vectors stored, {} pending</p>",
        esc(&stats.semantic_search),
        esc(model),
        stats.embeddings_stored,
        stats.embeddings_pending
    )
}

/// The model extraction runs on, what it spent today against the daily budget, what it wrote,
/// and what fails; or that it is off.
async fn llm_status(state: &AppState) -> String {
    let extraction: Option<ExtractionStatus> = run(state, ExtractionStatusRequest).await.ok();
    let provider = state.engine.llm();
    // The spend is read from the token ledger (SQLite): off the async threads.
    let spend = match provider {
        Some(provider) => tokio::task::spawn_blocking(move || provider.spend()).await.ok().flatten(),
        None => None,
    };
    llm_line(spend.as_ref(), extraction.as_ref(), state.engine.llm().is_some())
}

fn llm_line(spend: Option<&Spend>, extraction: Option<&ExtractionStatus>, on: bool) -> String {
    let mut line = match spend {
        Some(s) => {
            let t = &s.today;
            let spent = if s.remote { t.today.remote_tokens } else { t.today.local_tokens };
            let spent = match (t.budget, t.remaining) {
                (Some(budget), Some(left)) => format!("{spent} of {budget} tokens spent today ({left} left)"),
                _ if s.remote => format!("{spent} tokens spent today (no budget)"),
                _ => format!("{spent} tokens today (a local model: no budget applies)"),
            };
            format!(
                "<strong>{}</strong> · model {} · {spent}, {} call(s)",
                esc(&s.provider),
                esc(&s.model),
                t.today.calls
            )
        }
        None if on => "<strong>on</strong>".to_owned(),
        None => {
            "<strong>off</strong> (<code>cairn llm use local</code> or <code>openai</code>, <code>anthropic</code>, \
                 <code>agent-cli</code>: memories extracted from sessions)"
                .to_owned()
        }
    };
    if let Some(x) = extraction.filter(|x| x.sessions > 0 || !x.failing.is_empty()) {
        let _ = write!(line, " · {} memories extracted from {} conversation(s)", x.extracted_memories, x.sessions);
        if let Some(first) = x.failing.first() {
            let _ = write!(
                line,
                " · {} failing, retried later (next: {} {}: {})",
                x.failing.len(),
                esc(&first.session_id),
                esc(first.last_error_code.as_deref().unwrap_or("")),
                esc(first.last_error.as_deref().unwrap_or(""))
            );
        }
    }
    if let Some(f) = spend.and_then(|s| s.last_failure.as_ref()) {
        let _ = write!(line, " · last failure {}: {} ({})", when(&f.at), esc(&f.message), esc(&f.kind));
    }
    format!("<p class=\"status\" id=\"llm-status\">LLM: {line}</p>")
}

/// The hub this data dir syncs with and how it stands, or the projects git syncs, or off.
fn sync_status(sync: Option<&SyncStatus>) -> String {
    let line = match sync {
        Some(SyncStatus { remote: Some(r), .. }) => {
            let error = r
                .last_error
                .as_ref()
                .or(r.last_pull_error.as_ref())
                .map(|e| format!(" · last error: {}", esc(e)))
                .unwrap_or_default();
            format!("hub <strong>{}</strong> · {} · {} to push{error}", esc(&r.url), esc(&r.phase), r.pending)
        }
        Some(s) if s.enabled => format!("git ({})", esc(&s.projects.join(", "))),
        _ => "off".to_owned(),
    };
    format!("<p class=\"status\">Sync: {line}</p>")
}

fn memory_row(o: &Observation) -> Vec<String> {
    vec![memory_link(o.id, &o.title), esc(&o.kind), esc(&o.project), when(&o.created_at)]
}

/// The first `max` characters of a text, on one line.
pub(super) fn preview(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

/// The search page reads the one search request (`GET /search`'s, the MCP tool's), so a link
/// may carry `mode`, `min_score`, `deep`, `limit` or `all_projects` too; the form sets words,
/// project, type and scope.
pub(super) async fn search(
    State(state): State<AppState>,
    params: Result<Query<SearchQuery>, QueryRejection>,
) -> UiResult {
    let mut query = match params {
        Ok(Query(query)) => query,
        Err(rejection) => {
            let why = crate::http::extract::query_rejection_reason(&rejection);
            return Ok(error_page(StatusCode::BAD_REQUEST, "Bad search", &why));
        }
    };
    let title = if query.text.trim().is_empty() { "Search" } else { query.text.as_str() };
    let mut p = Page::new(title, Section::Search);
    p.heading("Search memories");
    p.raw(&search_form(&query));
    p.raw("<div id=\"results\">");
    if !query.text.trim().is_empty() {
        // The page's defaults, where the address says nothing: every project, 30 hits.
        query.all_projects |= query.project.is_none();
        if query.limit == 0 {
            query.limit = 30;
        }
        let found: SearchResponse = run(&state, query).await?;
        p.raw(&search_results(&found));
    } else if query.project.is_some() || query.kind.is_some() {
        // Filters without words: the newest memories that match them.
        let SearchQuery { project, kind, scope, .. } = query;
        let filter = ListFilter { project, kind, scope, limit: 50, ..ListFilter::default() };
        let listed: Vec<Observation> = run(&state, filter).await?;
        p.raw(&table("Newest memories", &["Title", "Type", "Project", "Saved"], listed.iter().map(memory_row)));
    }
    p.raw("</div>");
    Ok(page(&p))
}

fn search_form(query: &SearchQuery) -> String {
    let value = |v: &Option<String>| esc(v.as_deref().unwrap_or(""));
    let scope = query.scope.map_or("", Scope::as_str);
    let option = |v: &str, label: &str| {
        let selected = if v == scope { " selected" } else { "" };
        format!("<option value=\"{v}\"{selected}>{label}</option>")
    };
    format!(
        "<form id=\"search-form\" class=\"filters\" role=\"search\" action=\"/ui/search\" method=\"get\">\
         <label for=\"q\">Search</label><input id=\"q\" type=\"search\" name=\"q\" value=\"{}\" autocomplete=\"off\" autofocus data-results=\"results\">\
         <label for=\"project\">Project</label><input id=\"project\" name=\"project\" value=\"{}\">\
         <label for=\"type\">Type</label><input id=\"type\" name=\"type\" value=\"{}\">\
         <label for=\"scope\">Scope</label><select id=\"scope\" name=\"scope\">{}{}{}</select>\
         <button type=\"submit\">Search</button></form>",
        esc(&query.text),
        value(&query.project),
        value(&query.kind),
        option("", "any"),
        option("project", "project"),
        option("personal", "personal"),
    )
}

fn search_results(found: &SearchResponse) -> String {
    let mut html = String::new();
    for notice in &found.notices {
        let _ = write!(html, "<p class=\"notice\">{}</p>", esc(notice));
    }
    if found.hits.is_empty() {
        html.push_str("<p class=\"muted\">No memory matches.</p>");
        return html;
    }
    html.push_str("<ol class=\"results\">");
    for hit in &found.hits {
        let o = &hit.hit.observation;
        let _ = write!(
            html,
            "<li><h2>{}</h2><p class=\"meta\">{} · {} · {} · {}{}</p><p class=\"snippet\">{}</p>",
            memory_link(o.id, &o.title),
            esc(&o.kind),
            esc(&o.project),
            esc(scope_name(o.scope)),
            when(&o.created_at),
            if o.pinned { " · pinned" } else { "" },
            html::snippet(&hit.hit.snippet)
        );
        for note in &hit.annotations {
            let _ = write!(html, "<p class=\"note\">{}</p>", esc(note));
        }
        html.push_str("</li>");
    }
    html.push_str("</ol>");
    html
}

fn scope_name(scope: Scope) -> &'static str {
    match scope {
        Scope::Project => "project",
        Scope::Personal => "personal",
    }
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct MemoryParams {
    #[serde(default)]
    full: Option<String>,
    #[serde(default)]
    edit: Option<String>,
}

pub(super) async fn memory(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(params): Query<MemoryParams>,
) -> UiResult {
    let Ok(id) = id.parse::<i64>() else {
        return Ok(error_page(StatusCode::NOT_FOUND, "Not found", &format!("{id:?} is not a memory id")));
    };
    let got: GetResponse = run(&state, GetRequest { id, revisions: true }).await?;
    let timeline: Option<Timeline> = run(&state, TimelineRequest { id, before: 3, after: 3 }).await.ok();
    let related = RelationFilter { memory_id: Some(id), limit: Some(50), ..RelationFilter::default() };
    let relations: Option<RelationPage> = run(&state, related).await.ok();
    let o = &got.observation;
    let mut p = Page::new(&o.title, Section::None);
    p.heading(&o.title);
    p.raw(&format!(
        "<p class=\"meta\">#{} · {} · {} · {} · saved {} · updated {} · {} revision(s){}{}</p>",
        o.id,
        esc(&o.kind),
        esc(&o.project),
        scope_name(o.scope),
        when(&o.created_at),
        when(&o.updated_at),
        o.revision_count,
        if o.pinned { " · <strong>pinned</strong>" } else { "" },
        o.topic_key.as_deref().map(|k| format!(" · topic <code>{}</code>", esc(k))).unwrap_or_default()
    ));
    p.raw(&actions(o));
    let editing = params.edit.is_some();
    p.raw(&format!("<article id=\"content\" class=\"content\"{}>", if editing { " hidden" } else { "" }));
    match html::truncated(&o.content, SHOWN_CONTENT_BYTES).filter(|_| params.full.is_none()) {
        Some(cut) => {
            p.raw(&format!(
                "<pre>{}</pre><p><a href=\"/ui/memory/{id}?full=1\">Show all ({})</a></p>",
                esc(cut),
                bytes(o.content.len() as u64)
            ));
        }
        None => {
            p.raw(&format!("<pre>{}</pre>", esc(&o.content)));
        }
    }
    p.raw("</article>");
    p.raw(&edit_form(o, editing));
    if let Some(revisions) = got.revisions.as_ref().filter(|r| !r.is_empty()) {
        p.raw("<section><h2>Earlier revisions</h2>");
        for r in revisions {
            p.raw(&format!(
                "<details><summary>Revision {} · {} · replaced {}</summary><pre>{}</pre></details>",
                r.revision,
                esc(&r.title),
                when(&r.replaced_at),
                esc(html::truncated(&r.content, SHOWN_CONTENT_BYTES).unwrap_or(&r.content))
            ));
        }
        p.raw("</section>");
    }
    if let Some(page) = relations.filter(|r| !r.relations.is_empty()) {
        p.raw(&table(
            "Relations",
            &["Relation", "Status", "Other memory", "Confidence", "Judged by", "Found"],
            page.relations.iter().map(|r| {
                let (other_id, other_title) = if r.source_id == o.sync_id {
                    (&r.target_id, &r.target_title)
                } else {
                    (&r.source_id, &r.source_title)
                };
                vec![
                    esc(&r.relation.replace('_', " ")),
                    esc(&r.judgment_status),
                    esc(other_title.as_deref().unwrap_or(other_id)),
                    r.confidence.map(|c| format!("{c:.2}")).unwrap_or_default(),
                    super::conflicts::judged_by(r),
                    when(&r.created_at),
                ]
            }),
        ));
    }
    if let Some(t) = timeline {
        let rows = t.before.iter().chain(std::iter::once(&t.focus)).chain(t.after.iter()).map(|entry| {
            let mut row = memory_row(&entry.observation);
            if entry.is_focus {
                row[0] = format!("<strong>{}</strong>", esc(&entry.observation.title));
            }
            row
        });
        p.raw(&table(
            &format!("Timeline: session {} ({} memories)", o.session_id, t.total_in_range),
            &["Title", "Type", "Project", "Saved"],
            rows,
        ));
    }
    Ok(page(&p))
}

fn actions(o: &Observation) -> String {
    let (pin_value, pin_label) = if o.pinned { ("false", "Unpin") } else { ("true", "Pin") };
    format!(
        "<div class=\"actions\">\
         <form method=\"get\" action=\"/ui/memory/{id}\"><input type=\"hidden\" name=\"edit\" value=\"1\">\
         <button type=\"submit\" id=\"edit-button\">Edit</button></form>\
         <form method=\"post\" action=\"/ui/memory/{id}/pin\"><input type=\"hidden\" name=\"pinned\" value=\"{pin_value}\">\
         <button type=\"submit\">{pin_label}</button></form>\
         <form method=\"post\" action=\"/ui/memory/{id}/delete\" class=\"confirm\">\
         <button type=\"submit\" class=\"danger\">Delete</button></form></div>",
        id = o.id
    )
}

fn edit_form(o: &Observation, shown: bool) -> String {
    format!(
        "<form id=\"edit-form\" class=\"edit\" method=\"post\" action=\"/ui/memory/{id}/edit\"{hidden}>\
         <label for=\"edit-title\">Title</label><input id=\"edit-title\" name=\"title\" value=\"{title}\" required>\
         <label for=\"edit-type\">Type</label><input id=\"edit-type\" name=\"type\" value=\"{kind}\">\
         <label for=\"edit-content\">Content</label><textarea id=\"edit-content\" name=\"content\" rows=\"14\" required>{content}</textarea>\
         <div class=\"actions\"><button type=\"submit\">Save</button> <a href=\"/ui/memory/{id}\">Cancel</a></div></form>",
        id = o.id,
        hidden = if shown { "" } else { " hidden" },
        title = esc(&o.title),
        kind = esc(&o.kind),
        content = esc(&o.content),
    )
}

#[derive(Debug, Deserialize)]
pub(super) struct EditForm {
    title: Option<String>,
    content: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
}

pub(super) async fn edit(State(state): State<AppState>, Path(id): Path<i64>, Form(form): Form<EditForm>) -> UiResult {
    let patch = ObservationPatch {
        title: given(form.title),
        content: given(form.content),
        kind: given(form.kind),
        ..ObservationPatch::default()
    };
    let _: Observation = run(&state, UpdateRequest { id, patch }).await?;
    Ok(Redirect::to(&format!("/ui/memory/{id}")).into_response())
}

pub(super) async fn delete(State(state): State<AppState>, Path(id): Path<i64>) -> UiResult {
    let _ = run(&state, DeleteRequest { id, hard: false }).await?;
    let mut p = Page::new("Deleted", Section::None);
    p.heading("Memory deleted");
    p.raw(&format!(
        "<p>Memory #{id} was moved to the trash.</p>{}<p><a href=\"/ui/trash\">The trash</a> · \
         <a href=\"/ui\">Back to the dashboard</a></p>",
        restore_button(id)
    ));
    Ok(page(&p))
}

fn restore_button(id: i64) -> String {
    format!("<form method=\"post\" action=\"/ui/memory/{id}/restore\"><button type=\"submit\">Restore</button></form>")
}

pub(super) async fn restore(State(state): State<AppState>, Path(id): Path<i64>) -> UiResult {
    let _: Observation = run(&state, RestoreRequest { id }).await?;
    Ok(Redirect::to(&format!("/ui/memory/{id}")).into_response())
}

/// Soft-deleted memories, latest deletion first, each with its Restore button.
pub(super) async fn trash(State(state): State<AppState>) -> UiResult {
    let deleted: Vec<Observation> =
        run(&state, ListFilter { deleted: true, limit: 200, ..ListFilter::default() }).await?;
    let mut p = Page::new("Trash", Section::Trash);
    p.heading("Trash");
    p.raw(&table(
        "Deleted memories, latest first",
        &["Title", "Type", "Project", "Deleted", ""],
        deleted.iter().map(|o| {
            vec![
                esc(&o.title),
                esc(&o.kind),
                esc(&o.project),
                o.deleted_at.as_deref().map(when).unwrap_or_default(),
                restore_button(o.id),
            ]
        }),
    ));
    Ok(page(&p))
}

#[derive(Debug, Deserialize)]
pub(super) struct PinForm {
    pinned: String,
}

pub(super) async fn pin(State(state): State<AppState>, Path(id): Path<i64>, Form(form): Form<PinForm>) -> UiResult {
    let _: Observation = run(&state, PinRequest { id, pinned: form.pinned == "true" }).await?;
    Ok(Redirect::to(&format!("/ui/memory/{id}")).into_response())
}

pub(super) async fn sessions(State(state): State<AppState>) -> UiResult {
    let sessions: Vec<SessionSummary> =
        run(&state, RecentSessionsRequest { project: None, limit: 100, include_children: true }).await?;
    let mut p = Page::new("Sessions", Section::Sessions);
    p.heading("Sessions");
    p.raw(&table(
        "Recent sessions",
        &["Session", "Project", "Agent", "Memories", "Started", "Last activity", "Summary"],
        sessions.iter().map(|s| {
            vec![
                format!("<a href=\"/ui/history/{}\"><code>{}</code></a>", html::url(&s.session.id), esc(&s.session.id)),
                esc(&s.session.project),
                esc(&s.session.agent),
                s.observation_count.to_string(),
                when(&s.session.started_at),
                when(&s.last_activity_at),
                esc(&preview(s.session.summary.as_deref().unwrap_or(""), 160)),
            ]
        }),
    ));
    Ok(page(&p))
}

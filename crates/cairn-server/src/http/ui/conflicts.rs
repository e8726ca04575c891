//! The conflicts view: pairs waiting for a verdict (each with a verdict form), the verdicts
//! given lately with who gave them (a rule, a model, an agent, a person), and a scan of a
//! project's memories for pairs no judge has seen yet.

use std::fmt::Write as _;

use axum::Form;
use axum::extract::State;
use axum::response::IntoResponse;
use cairn_core::ops::StatsRequest;
use cairn_core::relations::{Judgment, RelationFilter, RelationPage, RelationRow, ScanRequest, ScanResult, VERDICTS};
use cairn_core::views::Stats;
use serde::Deserialize;

use super::html::{Page, Section, esc, table, when};
use super::{UiResult, page, run};
use crate::http::AppState;
use crate::http::given;

/// Verdicts listed under "Judged lately".
const JUDGED_SHOWN: usize = 50;
/// Pairs a semantic scan from the page judges in one go (the model answers each in seconds).
const SCAN_SEMANTIC_PAIRS: usize = 20;

pub(super) async fn queue(State(state): State<AppState>) -> UiResult {
    let pending: RelationPage = run(&state, filter("pending", 100)).await?;
    let judged: RelationPage = run(&state, filter("judged", JUDGED_SHOWN)).await?;
    let stats: Stats = run(&state, StatsRequest).await?;
    let mut p = Page::new("Conflicts", Section::Conflicts);
    p.heading("Conflicts to judge");
    p.raw(&format!(
        "<p class=\"muted\">{} pending. Each pair was found when a memory arrived and no judge was sure; say how \
         they relate.</p>",
        pending.total
    ));
    if pending.relations.is_empty() {
        p.raw("<p>Nothing to judge.</p>");
    }
    for r in &pending.relations {
        p.raw(&pending_pair(r));
    }
    p.raw(&scan_form(&stats.projects));
    p.raw(&judged_table(&judged));
    Ok(page(&p))
}

fn filter(status: &str, limit: usize) -> RelationFilter {
    RelationFilter { status: Some(status.into()), limit: Some(limit), ..RelationFilter::default() }
}

fn title(t: &Option<String>, id: &str) -> String {
    esc(t.as_deref().unwrap_or(id))
}

fn pending_pair(r: &RelationRow) -> String {
    let mut verdicts = String::new();
    for v in VERDICTS {
        let _ = write!(verdicts, "<option value=\"{v}\">{}</option>", v.replace('_', " "));
    }
    format!(
        "<article class=\"conflict\"><h2>{} <span class=\"muted\">and</span> {}</h2>\
         <p class=\"meta\">suggested: {} · confidence {} · {}</p>\
         <form method=\"post\" action=\"/ui/conflicts/judge\"><input type=\"hidden\" name=\"judgment_id\" value=\"{}\">\
         <label for=\"verdict-{id}\">Verdict</label><select id=\"verdict-{id}\" name=\"relation\">{verdicts}</select>\
         <label for=\"reason-{id}\">Reason</label><input id=\"reason-{id}\" name=\"reason\">\
         <button type=\"submit\">Judge</button></form></article>",
        title(&r.source_title, &r.source_id),
        title(&r.target_title, &r.target_id),
        esc(&r.relation),
        confidence(r.confidence),
        when(&r.created_at),
        esc(&r.sync_id),
        id = r.id,
    )
}

fn confidence(c: Option<f64>) -> String {
    c.map_or_else(|| "-".into(), |c| format!("{c:.2}"))
}

/// Who gave a verdict: the kind of judge, and the model when one did.
pub(super) fn judged_by(r: &RelationRow) -> String {
    match (r.marked_by_kind.as_deref(), r.marked_by_model.as_deref()) {
        (Some(kind), Some(model)) => format!("{} ({})", esc(kind), esc(model)),
        (Some(kind), None) => esc(kind),
        (None, _) => "<span class=\"muted\">unknown</span>".into(),
    }
}

fn judged_table(judged: &RelationPage) -> String {
    let rows = judged.relations.iter().map(|r| {
        vec![
            format!(
                "{} <span class=\"muted\">{}</span> {}",
                title(&r.source_title, &r.source_id),
                esc(&r.relation.replace('_', " ")),
                title(&r.target_title, &r.target_id)
            ),
            judged_by(r),
            confidence(r.confidence),
            esc(r.reason.as_deref().unwrap_or("")),
            when(&r.updated_at),
        ]
    });
    format!(
        "<h2>Judged lately</h2><p class=\"muted\">The {} newest of {} verdicts, with who gave each.</p>{}",
        judged.relations.len(),
        judged.total,
        table("Verdicts", &["pair", "judged by", "confidence", "reason", "when"], rows)
    )
}

fn scan_form(projects: &[String]) -> String {
    let mut options = String::new();
    for project in projects {
        let _ = write!(options, "<option value=\"{0}\">{0}</option>", esc(project));
    }
    format!(
        "<h2>Scan a project</h2><p class=\"muted\">Look for pairs among memories saved before a judge ran. With the \
         model, each pair is judged (at most {SCAN_SEMANTIC_PAIRS} at a time); without, the pairs found are queued \
         above.</p><form method=\"post\" action=\"/ui/conflicts/scan\">\
         <label for=\"scan-project\">Project</label><select id=\"scan-project\" name=\"project\" required>{options}</select>\
         <label><input type=\"checkbox\" name=\"semantic\" value=\"true\"> judge with the configured model</label>\
         <label><input type=\"checkbox\" name=\"dry_run\" value=\"true\"> dry run (record nothing)</label>\
         <button type=\"submit\">Scan</button></form>"
    )
}

#[derive(Debug, Deserialize)]
pub(super) struct JudgeForm {
    judgment_id: String,
    relation: String,
    reason: Option<String>,
}

pub(super) async fn judge(State(state): State<AppState>, Form(form): Form<JudgeForm>) -> UiResult {
    let judgment = Judgment {
        judgment_id: form.judgment_id,
        relation: form.relation,
        reason: given(form.reason),
        evidence: None,
        confidence: None,
        session_id: None,
        by_person: true,
    };
    let _ = run(&state, judgment).await?;
    Ok(axum::response::Redirect::to("/ui/conflicts").into_response())
}

#[derive(Debug, Deserialize)]
pub(super) struct ScanForm {
    project: String,
    semantic: Option<String>,
    dry_run: Option<String>,
}

/// Run the scan and show what it found; a model that is missing or down answers as the API
/// does (`llm_not_configured`, `llm_unavailable`), on the page's error view.
pub(super) async fn scan(State(state): State<AppState>, Form(form): Form<ScanForm>) -> UiResult {
    let semantic = form.semantic.as_deref() == Some("true");
    let dry_run = form.dry_run.as_deref() == Some("true");
    let request = ScanRequest {
        project: form.project,
        apply: !dry_run,
        semantic,
        max_semantic: semantic.then_some(SCAN_SEMANTIC_PAIRS),
        ..ScanRequest::default()
    };
    let result: ScanResult = run(&state, request).await?;
    let mut p = Page::new("Conflicts", Section::Conflicts);
    p.heading("Scan");
    p.raw(&scan_summary(&result, semantic));
    p.raw("<p><a href=\"/ui/conflicts\">Back to the conflicts</a></p>");
    Ok(page(&p))
}

fn scan_summary(r: &ScanResult, semantic: bool) -> String {
    let verb = if r.dry_run { "would record" } else { "recorded" };
    let mut html = format!(
        "<p>{}: {} memories inspected, {} candidate pairs ({} already related); {verb} {}.</p>",
        esc(&r.project),
        r.inspected,
        r.candidates_found,
        r.already_related,
        r.inserted
    );
    if semantic {
        let _ = write!(
            html,
            "<p>Judged {} pairs; {} left pending (the model was unsure), {} failed (they stay pending), {} still to \
             judge: scan again to go on.</p>",
            r.semantic_judged, r.semantic_skipped, r.semantic_errors, r.semantic_remaining
        );
    }
    if let Some(w) = &r.warning {
        let _ = write!(html, "<p class=\"muted\">{}</p>", esc(w));
    }
    html
}

//! `cairn conflicts`: relations between memories, listed, shown, judged and scanned for (with
//! `--semantic`, by the LLM judge, in batches with progress). Each parses, calls the core and
//! renders.

use std::fmt::Write as _;

use anyhow::Result;
use cairn_core::ops::{GetRelationRequest, RelationStatsRequest};
use cairn_core::relations::{RelationDetail, RelationFilter, RelationPage, RelationStats, ScanRequest, ScanResult};

use crate::cli::ConflictsAction;
use crate::env::{Env, parse_id};
use crate::output::note;

pub fn conflicts(env: &Env, action: ConflictsAction) -> Result<()> {
    match action {
        ConflictsAction::List { status, limit, all_projects } => {
            let project = if all_projects { None } else { Some(env.project()?.project) };
            let filter = RelationFilter { project, status, limit: Some(limit), ..RelationFilter::default() };
            let page: RelationPage = env.call(filter)?;
            env.emit(&page, render_relations)
        }
        ConflictsAction::Show { id } => {
            let relation: RelationDetail = env.call(GetRelationRequest { id: parse_id(&id)? })?;
            env.emit(&relation, render_relation)
        }
        ConflictsAction::Stats { all_projects } => {
            let project = if all_projects { None } else { Some(env.project()?.project) };
            let stats: RelationStats = env.call(RelationStatsRequest { project })?;
            env.emit(&stats, |s| {
                let mut text = String::from("By relation:\n");
                for (k, v) in &s.by_relation {
                    let _ = writeln!(text, "  {k:<16} {v}");
                }
                text.push_str("By verdict:\n");
                for (k, v) in &s.by_judgment_status {
                    let _ = writeln!(text, "  {k:<16} {v}");
                }
                text
            })
        }
        ConflictsAction::Scan { semantic: true, since, limit, dry_run, .. } => {
            let project = env.project()?.project;
            let result =
                semantic_scan(env, ScanRequest { project, since, apply: !dry_run, ..ScanRequest::default() }, limit)?;
            env.emit(&result, render_semantic_scan)
        }
        ConflictsAction::Scan { apply, since, max, .. } => {
            let project = env.project()?.project;
            let request = ScanRequest { project, since, apply, max_insert: max, ..ScanRequest::default() };
            let result: ScanResult = env.call(request)?;
            env.emit(&result, |r| {
                let verb = if r.dry_run { "would record" } else { "recorded" };
                let mut text = format!(
                    "{}: inspected {} memories, {} candidate pairs ({} already related), {verb} {}",
                    r.project,
                    r.inspected,
                    r.candidates_found,
                    r.already_related,
                    if r.dry_run { r.candidates_found - r.already_related.min(r.candidates_found) } else { r.inserted }
                );
                if let Some(w) = &r.warning {
                    let _ = write!(text, "\nwarning: {w}");
                }
                if r.dry_run {
                    text.push_str("\nhint: run with --apply to record them as pending relations");
                }
                text
            })
        }
    }
}

/// Pairs judged per call to the daemon: a few model calls, so progress shows and no call
/// comes near the client's time limit.
const SEMANTIC_BATCH: usize = 4;

/// A semantic scan in batches, progress on stderr after each; the counts of all of them.
fn semantic_scan(env: &Env, base: ScanRequest, limit: usize) -> Result<ScanResult> {
    let mut total = ScanResult::default();
    let mut offset = 0;
    let mut done = 0;
    loop {
        let max_semantic = SEMANTIC_BATCH.min(limit - done);
        let request =
            ScanRequest { semantic: true, max_semantic: Some(max_semantic), offset: Some(offset), ..base.clone() };
        let batch: ScanResult = env.call(request)?;
        let judged_now = batch.semantic_judged + batch.semantic_skipped + batch.semantic_errors;
        done += judged_now;
        if total.project.is_empty() {
            total = ScanResult {
                semantic_judged: 0,
                semantic_skipped: 0,
                semantic_errors: 0,
                inserted: 0,
                ..batch.clone()
            };
        }
        total.semantic_judged += batch.semantic_judged;
        total.semantic_skipped += batch.semantic_skipped;
        total.semantic_errors += batch.semantic_errors;
        total.inserted += batch.inserted;
        total.semantic_remaining = batch.semantic_remaining;
        total.next_offset = batch.next_offset;
        total.warning.clone_from(&batch.warning);
        note(&format!("judged {done} of {} pairs", (done + batch.semantic_remaining).min(limit)));
        offset = batch.next_offset;
        if batch.warning.is_some() || batch.semantic_remaining == 0 || judged_now == 0 || done >= limit {
            total.capped = batch.semantic_remaining > 0;
            return Ok(total);
        }
    }
}

fn render_semantic_scan(r: &ScanResult) -> String {
    let verb = if r.dry_run { "would record" } else { "recorded" };
    let mut text = format!(
        "{}: {} memories, {} pairs to judge; {} judged, {} unsure (pending), {} failed; {verb} {}",
        r.project,
        r.inspected,
        r.candidates_found,
        r.semantic_judged,
        r.semantic_skipped,
        r.semantic_errors,
        if r.dry_run { r.semantic_judged } else { r.inserted }
    );
    if let Some(w) = &r.warning {
        let _ = write!(text, "\nwarning: {w}");
    }
    if r.semantic_remaining > 0 {
        let _ = write!(text, "\nhint: {} pairs left; run it again (or raise --limit)", r.semantic_remaining);
    }
    text
}

fn render_relations(page: &RelationPage) -> String {
    if page.relations.is_empty() {
        return "no relations".to_owned();
    }
    let mut text = String::new();
    for r in &page.relations {
        let _ = writeln!(
            text,
            "#{:<5} {:<14} {:<9} {} ⟷ {}",
            r.id,
            r.relation,
            r.judgment_status,
            r.source_title.as_deref().unwrap_or("(gone)"),
            r.target_title.as_deref().unwrap_or("(gone)")
        );
    }
    let _ = write!(text, "{} of {}", page.relations.len(), page.total);
    text
}

fn render_relation(r: &RelationDetail) -> String {
    let relation = &r.relation;
    let mut text = format!(
        "#{} {} ({})\n  {}\n  {}\n  verdict: {}",
        relation.id,
        relation.relation,
        relation.sync_id,
        r.source_title.as_deref().unwrap_or("(memory gone)"),
        r.target_title.as_deref().unwrap_or("(memory gone)"),
        relation.judgment_status,
    );
    if let Some(reason) = &relation.reason {
        let _ = write!(text, "\n  reason: {reason}");
    }
    text
}

//! The text of MCP tool results for agents (engram's layouts), kept short: every line lands in
//! an agent's context window.

use std::fmt::Write as _;

use cairn_core::context::Context;
use cairn_core::memory::SaveAction;
use cairn_core::model::Observation;
use cairn_core::ops::{SaveResponse, SearchResponse};
use cairn_core::passive::PassiveOutcome;
use cairn_core::projects::MigrateOutcome;
use cairn_core::text::preview;
use cairn_core::views::Stats;

/// Characters of content shown per search hit.
const SEARCH_PREVIEW: usize = 300;
/// Project names listed in a stats line.
const MAX_PROJECTS_LISTED: usize = 10;

/// `Memory saved: #12 "title" (decision)` and what the agent should know about the save.
pub fn save(resp: &SaveResponse) -> String {
    let o = &resp.outcome;
    let (title, kind) = (&o.title, &o.kind);
    let mut out = match o.action {
        SaveAction::Created => format!("Memory saved: #{} {title:?} ({kind})", o.id),
        SaveAction::Revised => format!(
            "Memory revised: #{} {title:?} ({kind}), revision {} of topic {}",
            o.id,
            o.revision_count,
            o.topic_key.as_deref().unwrap_or("-")
        ),
        SaveAction::Duplicate => format!(
            "Memory already known: #{} {title:?} ({kind}), seen {} times; nothing new stored",
            o.id, o.duplicate_count
        ),
    };
    if let Some(notice) = o.truncation_notice() {
        let _ = write!(out, "\nNote: {notice}.");
    }
    if o.redacted {
        out.push_str("\n<private> content was redacted before storing.");
    }
    for warning in &o.warnings {
        let _ = write!(out, "\nWarning: {warning}");
    }
    if let (Some(key), SaveAction::Created) = (&o.suggested_topic_key, o.action) {
        let _ = write!(out, "\nSuggested topic_key: {key} (pass it on the next save of this subject to revise it)");
    }
    if !resp.candidates.is_empty() {
        out.push_str("\nPossible duplicates / conflicts:");
        for c in &resp.candidates {
            let _ = write!(
                out,
                "\n- #{} {:?} ({}, score {:.2}) judgment_id={}",
                c.id, c.title, c.kind, c.score, c.judgment_id
            );
        }
        out.push_str(
            "\nJudge each with mem_judge(judgment_id, relation: related|compatible|scoped|conflicts_with|\
             supersedes|not_conflict); ask the user when unsure.",
        );
    }
    out
}

/// Numbered hits with previews and relation notes, or why nothing was found.
pub fn search(query: &str, scope_label: &str, resp: &SearchResponse) -> String {
    if resp.hits.is_empty() {
        let mut out = format!("No memories found for {query:?} in {scope_label}.");
        for notice in &resp.notices {
            let _ = write!(out, "\nNote: {notice}");
        }
        if scope_label != "all projects" {
            out.push_str("\nTry other keywords, or all_projects: true to search every project.");
        }
        return out;
    }
    let noun = if resp.hits.len() == 1 { "memory" } else { "memories" };
    let mut out = format!("Found {} {noun}:", resp.hits.len());
    if let Some(deep) = &resp.deep {
        // Deep recall says what it did first: an agent weighs a re-ranked list, or a fallback.
        if let Some(notice) = deep.notice() {
            let _ = write!(out, "\nNote: {notice}");
        } else {
            let model = deep.model.as_deref().unwrap_or("the model");
            let _ = write!(out, "\n(deep recall: re-ranked by {model} in {} ms)", deep.llm_ms);
        }
    }
    let mut cut_any = false;
    for (n, hit) in resp.hits.iter().enumerate() {
        let o = &hit.hit.observation;
        let text = preview(&o.content, SEARCH_PREVIEW);
        let cut = flat_chars(&o.content) > SEARCH_PREVIEW;
        cut_any |= cut;
        let _ = write!(
            out,
            "\n\n{}. #{} ({}) — {}\n   {}{}",
            n + 1,
            o.id,
            o.kind,
            o.title,
            text,
            if cut { " [preview]" } else { "" }
        );
        let _ = write!(out, "\n   {} | project: {} | scope: {}", o.created_at, o.project, o.scope.as_str());
        if let Some(key) = &o.topic_key {
            let _ = write!(out, " | topic: {key}");
        }
        for note in &hit.annotations {
            let _ = write!(out, "\n   {note}");
        }
    }
    if cut_any {
        out.push_str("\n\nPreviews are cut; mem_get_observation(id) returns the full text.");
    }
    out
}

/// Characters of `text` once whitespace runs are one space (as [`preview`] counts them).
fn flat_chars(text: &str) -> usize {
    text.split_whitespace().map(|w| w.chars().count() + 1).sum::<usize>().saturating_sub(1)
}

/// One memory in full, then its metadata.
pub fn observation(o: &Observation) -> String {
    let mut out = format!("#{} [{}] {}\n\n{}\n", o.id, o.kind, o.title, o.content);
    let _ = write!(out, "\nSession: {}\nProject: {}\nScope: {}", o.session_id, o.project, o.scope.as_str());
    if let Some(key) = &o.topic_key {
        let _ = write!(out, "\nTopic: {key}");
    }
    if let Some(tool) = &o.tool_name {
        let _ = write!(out, "\nTool: {tool}");
    }
    let _ = write!(out, "\nDuplicates: {}\nRevisions: {}", o.duplicate_count, o.revision_count);
    if o.pinned {
        out.push_str("\nPinned: yes");
    }
    let _ = write!(out, "\nCreated: {}\nUpdated: {}", o.created_at, o.updated_at);
    if let Some(review) = &o.review_after {
        let _ = write!(out, "\nReview after: {review}");
    }
    out
}

/// The context block, then a global stats line (so memories of other projects are never
/// invisible, engram #146).
pub fn context(ctx: &Context, stats: Option<&Stats>) -> String {
    let mut out = if ctx.context.trim().is_empty() {
        "No previous session memories found.".to_owned()
    } else {
        ctx.context.clone()
    };
    if ctx.truncated {
        out.push_str("\n(Some items were left out to keep this short; use mem_search for more.)");
    }
    if let Some(stats) = stats {
        let _ = write!(out, "\n---\n{}", stats_line(stats));
    }
    out
}

fn stats_line(s: &Stats) -> String {
    let mut names: Vec<&str> = s.projects.iter().map(String::as_str).take(MAX_PROJECTS_LISTED).collect();
    if s.projects.len() > MAX_PROJECTS_LISTED {
        names.push("...");
    }
    format!(
        "Memory stats: {} sessions, {} memories across {} projects: {}",
        s.total_sessions,
        s.total_observations,
        s.projects.len(),
        if names.is_empty() { "-".to_owned() } else { names.join(", ") }
    )
}

pub fn stats(s: &Stats) -> String {
    let mut out = format!(
        "Memory stats: {} sessions, {} memories ({} pinned, {} deleted), {} prompts, {} relations",
        s.total_sessions,
        s.total_observations,
        s.pinned_observations,
        s.deleted_observations,
        s.total_prompts,
        s.total_relations
    );
    if !s.by_project.is_empty() {
        out.push_str("\nProjects (most recent first):");
        for p in &s.by_project {
            let _ = write!(
                out,
                "\n- {}: {} memories, {} sessions, {} prompts",
                p.project, p.observations, p.sessions, p.prompts
            );
        }
    }
    if !s.by_type.is_empty() {
        let types: Vec<String> = s.by_type.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = write!(out, "\nTypes: {}", types.join(", "));
    }
    out
}

pub use crate::timeline;

pub fn passive(o: &PassiveOutcome) -> String {
    if o.extracted == 0 {
        return "No learnings found (expected a \"## Key Learnings\" section with numbered or bulleted items)."
            .to_owned();
    }
    let ids: Vec<String> = o.ids.iter().map(|id| format!("#{id}")).collect();
    format!(
        "Extracted {} learnings: {} saved{}, {} already known.",
        o.extracted,
        o.saved,
        if ids.is_empty() { String::new() } else { format!(" ({})", ids.join(", ")) },
        o.duplicates
    )
}

pub fn merge(outcomes: &[MigrateOutcome], to: &str) -> String {
    let mut out = format!("Merged into {to}:");
    for m in outcomes {
        let _ = write!(
            out,
            "\n- {}: {} ({} memories, {} sessions, {} prompts){}",
            m.old_project,
            m.status,
            m.observations,
            m.sessions,
            m.prompts,
            m.reason.as_deref().map(|r| format!(" — {r}")).unwrap_or_default()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_core::memory::SaveOutcome;
    use cairn_core::relations::Candidate;

    fn outcome(action: SaveAction) -> SaveOutcome {
        SaveOutcome {
            id: 12,
            sync_id: "s".into(),
            action,
            project: "p".into(),
            session_id: "manual-save-p".into(),
            title: "Deploy".into(),
            kind: "decision".into(),
            topic_key: Some("decision/deploy".into()),
            suggested_topic_key: None,
            revision_count: 2,
            duplicate_count: 3,
            truncated_from: None,
            redacted: false,
            warnings: vec![],
        }
    }

    #[test]
    fn save_lines_per_action() {
        let resp = SaveResponse { outcome: outcome(SaveAction::Created), candidates: vec![], activity: None };
        assert_eq!(save(&resp), "Memory saved: #12 \"Deploy\" (decision)");
        let resp = SaveResponse { outcome: outcome(SaveAction::Revised), candidates: vec![], activity: None };
        assert!(save(&resp).contains("revision 2 of topic decision/deploy"));
        let resp = SaveResponse { outcome: outcome(SaveAction::Duplicate), candidates: vec![], activity: None };
        assert!(save(&resp).contains("seen 3 times"));
    }

    #[test]
    fn candidates_point_to_mem_judge() {
        let mut o = outcome(SaveAction::Created);
        o.suggested_topic_key = Some("decision/x".into());
        o.warnings = vec!["w1".into()];
        let candidate = Candidate {
            id: 3,
            sync_id: "x".into(),
            title: "Old".into(),
            kind: "decision".into(),
            score: 0.8123,
            judgment_id: "rel-1".into(),
            topic_key: None,
        };
        let text = save(&SaveResponse { outcome: o, candidates: vec![candidate], activity: None });
        assert!(text.contains("Warning: w1") && text.contains("Suggested topic_key: decision/x"), "{text}");
        assert!(
            text.contains("#3 \"Old\" (decision, score 0.81) judgment_id=rel-1") && text.contains("mem_judge"),
            "{text}"
        );
    }

    #[test]
    fn empty_search_explains_and_suggests_all_projects() {
        let resp = SearchResponse {
            notices: vec!["no match in project \"p\"; 2 in other projects".into()],
            ..Default::default()
        };
        let text = search("auth", "project p", &resp);
        assert!(text.contains("Note: no match") && text.contains("all_projects: true"), "{text}");
        assert!(!search("auth", "all projects", &SearchResponse::default()).contains("all_projects"));
    }
}

//! The text of cairn's results, in one place for its two readers:
//! - [`agent`]: MCP tool results, in engram's layouts, kept short because every line lands in
//!   an agent's context window;
//! - [`people`]: the CLI's text (its JSON output is the serialized core types).
//!
//! What both show the same way (a memory's one-line form, the timeline around a memory) is
//! written once, here.

pub mod agent;
pub mod disk;
mod gc_report;
mod history_settings;
pub mod people;

use std::fmt::Write as _;

use cairn_core::model::Observation;
use cairn_core::text::preview;
use cairn_core::views::Timeline;

/// Characters of content in a memory's one-line form.
const LINE_PREVIEW: usize = 150;
/// Characters of the focused memory's content in a timeline.
const FOCUS_PREVIEW: usize = 500;

/// `#12 [decision] Title — the start of its content`.
pub fn memory_line(o: &Observation) -> String {
    format!("#{} [{}] {} — {}", o.id, o.kind, o.title, preview(&o.content, LINE_PREVIEW))
}

/// Where a memory a model wrote came from, on one line: `Extracted: fact from session S
/// (messages a, b) by openai qwen2.5:1.5b at T`.
pub fn provenance(p: &cairn_core::extract::Provenance) -> String {
    let origin = match p.origin {
        cairn_core::extract::Origin::Fact => "fact",
        cairn_core::extract::Origin::Directive => "rule the developer stated",
        cairn_core::extract::Origin::Setting => "value the developer set",
        cairn_core::extract::Origin::Diagnosis => "bug the agent diagnosed",
        cairn_core::extract::Origin::Refusal => "suggestion the developer turned down",
        cairn_core::extract::Origin::Summary => "session summary",
        cairn_core::extract::Origin::Brief => "project brief",
    };
    let mut out = format!("Extracted: {origin}");
    if let Some(session) = &p.session_id {
        let _ = write!(out, " from session {session}");
    }
    if !p.message_ids.is_empty() {
        let _ = write!(out, " (messages {})", p.message_ids.join(", "));
    }
    let _ = write!(out, " by {} {} at {}", p.provider, p.model, p.created_at);
    out
}

/// The session around a memory: its session, the memories before, the memory itself, after.
pub fn timeline(t: &Timeline) -> String {
    let focus = &t.focus.observation;
    let mut out = match &t.session_info {
        Some(s) => {
            format!("Session {} (project {}, {} memories, started {})", s.id, s.project, t.total_in_range, s.started_at)
        }
        None => format!("Session {} ({} memories)", focus.session_id, t.total_in_range),
    };
    if !t.before.is_empty() {
        out.push_str("\n─── Before ───");
        t.before.iter().for_each(|e| out.push_str(&format!("\n{}", memory_line(&e.observation))));
    }
    let _ = write!(
        out,
        "\n─── Focus ───\n#{} [{}] {}\n{}\n{}",
        focus.id,
        focus.kind,
        focus.title,
        preview(&focus.content, FOCUS_PREVIEW),
        focus.created_at
    );
    if !t.after.is_empty() {
        out.push_str("\n─── After ───");
        t.after.iter().for_each(|e| out.push_str(&format!("\n{}", memory_line(&e.observation))));
    }
    out
}

//! `cairn gc`'s report for people: what went (or would go), what stays and why, and each
//! file's size before and after.

use std::fmt::Write;

use cairn_core::gc::{GcFile, GcReport, GcRows};

use crate::disk::bytes;

#[must_use]
pub fn gc(r: &GcReport) -> String {
    let verb = if r.dry_run { "would drop" } else { "dropped" };
    let mut text = String::new();
    let model = r.model_in_use.as_deref().unwrap_or("none here");
    let _ = writeln!(text, "{verb}: {} (model in use: {model})", rows(&r.old_model_vectors, "vectors of other models"));
    let _ = writeln!(text, "{verb}: {}", rows(&r.applied_spool_events, "spool ids applied over a month ago"));
    for kept in &r.kept {
        let _ = writeln!(text, "kept: {} {} rows ({})", kept.what, kept.rows, kept.why);
    }
    let _ = writeln!(text, "{}", file("memory store", &r.memory_store, r.dry_run));
    match &r.history_archive {
        Some(archive) => {
            let _ = writeln!(text, "{}", file("history archive", archive, r.dry_run));
        }
        None => text.push_str("history archive: none in this data dir\n"),
    }
    for note in &r.notes {
        let _ = writeln!(text, "note: {note}");
    }
    text
}

fn rows(r: &GcRows, what: &str) -> String {
    format!("{} {what} ({})", r.rows, bytes(r.bytes))
}

fn file(name: &str, f: &GcFile, dry_run: bool) -> String {
    let after = if dry_run { "estimated after" } else { "after" };
    let how = if f.vacuumed { ", rebuilt" } else { "" };
    format!("{name}: {} before, {} {after}{how}", bytes(f.before_bytes), bytes(f.after_bytes))
}

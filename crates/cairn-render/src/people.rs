//! The CLI's text for people. Its JSON output is the serialized core types.

use std::fmt::Write;

use cairn_core::context::Context;
use cairn_core::doctor::{CheckStatus, DoctorReport};
use cairn_core::memory::{SaveAction, SaveOutcome};
use cairn_core::model::{Observation, Revision, SessionSummary};
use cairn_core::project::ProjectDetection;
use cairn_core::search::SearchResults;
use cairn_core::settings::{ENV_VARS, LLM_ENV_VARS, LlmSettings, PLUGIN_KEYS, PluginSettings, Settings};
use cairn_core::text::preview;
use cairn_core::transfer::ImportReport;
use cairn_core::views::Stats;

pub use crate::gc_report::gc;

pub fn saved(out: &SaveOutcome) -> String {
    let (title, kind) = (&out.title, &out.kind);
    let verb = match out.action {
        SaveAction::Created => "Memory saved",
        SaveAction::Revised => "Memory revised",
        SaveAction::Duplicate => "Already saved (duplicate counted)",
    };
    let mut text = format!("{verb}: #{} {title:?} ({kind})", out.id);
    if out.action == SaveAction::Revised {
        let _ = write!(text, " — revision {}", out.revision_count);
    }
    text
}

pub fn search(results: &SearchResults) -> String {
    if results.hits.is_empty() {
        return "No memories found.".into();
    }
    let n = results.hits.len();
    let mut text = format!("Found {n} {}:\n", if n == 1 { "memory" } else { "memories" });
    for (i, hit) in results.hits.iter().enumerate() {
        let o = &hit.observation;
        let _ = writeln!(text, "\n{}. #{} ({}) — {}", i + 1, o.id, o.kind, o.title);
        let _ = writeln!(text, "   {}", preview(&hit.snippet, 300));
        let _ = writeln!(text, "   {} | project: {} | scope: {}", o.created_at, or_dash(&o.project), o.scope.as_str());
    }
    text
}

pub fn observation(o: &Observation, revisions: Option<&[Revision]>) -> String {
    let mut text = format!("#{} [{}] {}\n\n{}\n\n", o.id, o.kind, o.title, o.content);
    let _ = writeln!(text, "Project:    {}", or_dash(&o.project));
    let _ = writeln!(text, "Scope:      {}", o.scope.as_str());
    let _ = writeln!(text, "Session:    {}", o.session_id);
    if let Some(key) = &o.topic_key {
        let _ = writeln!(text, "Topic:      {key}");
    }
    if let Some(tool) = &o.tool_name {
        let _ = writeln!(text, "Tool:       {tool}");
    }
    if o.pinned {
        let _ = writeln!(text, "Pinned:     yes");
    }
    let _ = writeln!(text, "Revisions:  {}", o.revision_count);
    let _ = writeln!(text, "Duplicates: {}", o.duplicate_count);
    let _ = writeln!(text, "Created:    {}", o.created_at);
    let _ = writeln!(text, "Updated:    {}", o.updated_at);
    let _ = writeln!(text, "Sync id:    {}", o.sync_id);
    if let Some(revisions) = revisions {
        for r in revisions {
            let _ = write!(
                text,
                "\n--- revision {} (replaced {}) [{}] {}\n{}\n",
                r.revision, r.replaced_at, r.kind, r.title, r.content
            );
        }
    }
    text
}

pub fn context(ctx: &Context) -> String {
    if ctx.context.is_empty() { "No previous session memories found.".into() } else { ctx.context.clone() }
}

/// The trash: what `cairn restore` can bring back.
pub fn trash(deleted: &[Observation]) -> String {
    if deleted.is_empty() {
        return "The trash is empty.\n".into();
    }
    let mut text = String::new();
    for o in deleted {
        let deleted = o.deleted_at.as_deref().unwrap_or("-");
        let _ = writeln!(text, "#{} [{}] {} — {} (deleted {deleted})", o.id, o.kind, o.title, or_dash(&o.project));
    }
    text.push_str("Bring one back with `cairn restore ID`.\n");
    text
}

pub use crate::timeline;

pub fn sessions(list: &[SessionSummary]) -> String {
    if list.is_empty() {
        return "No sessions.".into();
    }
    let mut text = String::new();
    for s in list {
        let ended = if s.session.ended_at.is_some() { "ended" } else { "open" };
        let _ = write!(
            text,
            "{}  {}  {}  {} memories  {ended}",
            s.session.id,
            or_dash(&s.session.project),
            s.last_activity_at,
            s.observation_count
        );
        if let Some(summary) = &s.session.summary {
            let _ = write!(text, "\n    {}", preview(summary, 200));
        }
        text.push('\n');
    }
    text
}

pub fn stats(s: &Stats) -> String {
    let mut text = format!(
        "Memories:  {} ({} pinned, {} deleted)\nSessions:  {}\nPrompts:   {}\nRelations: {}\n",
        s.total_observations,
        s.pinned_observations,
        s.deleted_observations,
        s.total_sessions,
        s.total_prompts,
        s.total_relations
    );
    if !s.by_project.is_empty() {
        text.push_str("\nProjects:\n");
        for p in &s.by_project {
            let _ = writeln!(
                text,
                "  {:<24} {} memories, {} sessions, {} prompts",
                p.project, p.observations, p.sessions, p.prompts
            );
        }
    }
    if !s.by_type.is_empty() {
        text.push_str("\nTypes:\n");
        for (kind, count) in &s.by_type {
            let _ = writeln!(text, "  {kind:<24} {count}");
        }
    }
    let _ = write!(text, "\nSemantic:  {}", s.semantic_search);
    if let Some(model) = &s.embedding_model {
        let _ = write!(text, " — {model}, {} vectors, {} pending", s.embeddings_stored, s.embeddings_pending);
    }
    text.push('\n');
    let _ = write!(
        text,
        "\nSchema:    v{}\nDatabase:  {} ({} bytes)",
        s.schema_version,
        s.db_path.as_deref().unwrap_or("-"),
        s.db_bytes
    );
    text.push_str("\n\n");
    text.push_str(&crate::disk::disk_use(&s.disk));
    text
}

pub fn imported(r: &ImportReport) -> String {
    format!(
        "Imported {} sessions, {} memories ({} updated), {} prompts, {} relations; {} already present.",
        r.sessions_imported,
        r.observations_imported,
        r.observations_updated,
        r.prompts_imported,
        r.relations_imported,
        r.skipped
    )
}

pub fn sync_exported(s: &cairn_core::sync::git::ExportSummary) -> String {
    let mut lines = Vec::new();
    for p in &s.projects {
        let enrolled = if p.enrolled_now { " (now syncing: first export carries everything)" } else { "" };
        if p.chunks.is_empty() {
            lines.push(format!("{}: nothing new to sync{enrolled}", p.project));
            continue;
        }
        let ids: Vec<&str> = p.chunks.iter().map(|c| c.id.as_str()).collect();
        lines.push(format!(
            "{}: {} change(s) in {} chunk(s) under {}/chunks ({}){enrolled}",
            p.project,
            p.mutations,
            p.chunks.len(),
            s.folder,
            ids.join(", ")
        ));
    }
    if s.projects.iter().any(|p| !p.chunks.is_empty()) {
        lines.push(format!("Commit {}/ to share them.", s.folder));
    }
    lines.join("\n")
}

pub fn sync_imported(s: &cairn_core::sync::git::ImportSummary) -> String {
    if s.folders.is_empty() {
        return "No .cairn/manifest.json or .engram/manifest.json here: nothing to import.".to_owned();
    }
    let a = &s.applied;
    let mut lines = vec![format!(
        "Applied {} chunk(s) from {} ({} already applied): {} change(s), {} skipped, {} conflict(s) flagged, {} relation(s) waiting.",
        s.chunks_applied,
        s.folders.join(" and "),
        s.chunks_already_applied,
        a.applied + a.deferred_applied,
        a.skipped,
        a.conflicts,
        a.deferred
    )];
    if s.chunks_left > 0 {
        lines.push(format!("{} chunk(s) left for the next run (time limit).", s.chunks_left));
    }
    for r in &s.refused {
        lines.push(format!("refused {}/{}: {} ({})", r.folder, r.chunk_id, r.message, r.code));
    }
    lines.join("\n")
}

pub fn sync_status(s: &cairn_core::sync::SyncStatus) -> String {
    let mut lines = Vec::new();
    if s.projects.is_empty() {
        lines.push("No project syncs yet: `cairn sync` in a repository starts.".to_owned());
    } else {
        lines.push(format!("Syncing: {}", s.projects.join(", ")));
    }
    for t in &s.targets {
        let error = t.last_error.as_deref().map(|e| format!(", last error: {e}")).unwrap_or_default();
        lines.push(format!("  {}: {} pending{error}", t.target_key, t.pending));
    }
    for f in &s.folders {
        let error = f.error.as_deref().map(|e| format!(", last error: {e}")).unwrap_or_default();
        lines.push(format!(
            "{}: {} chunk(s) in the manifest, {} applied here, {} to import{error}",
            f.folder, f.manifest_chunks, f.applied_chunks, f.pending_import
        ));
    }
    if s.deferred_pending + s.deferred_dead > 0 {
        lines.push(format!(
            "Relations waiting for their memories: {} ({} given up)",
            s.deferred_pending, s.deferred_dead
        ));
    }
    if let Some(remote) = &s.remote {
        let parked = if remote.parked > 0 { format!(", {} parked", remote.parked) } else { String::new() };
        lines.push(format!("Hub: {} — {}, {} pending{parked}", remote.url, remote.phase, remote.pending));
    }
    if let Some(error) = &s.remote_config_error {
        lines.push(format!("Hub: [sync] cannot be read: {error}"));
    }
    lines.join("\n")
}

/// `cairn extract --wait`: what the pass did, and each conversation that failed.
pub fn extraction_report(r: &cairn_core::extract::ExtractionReport) -> String {
    let mut lines = vec![format!(
        "{} conversation(s): {} fact(s) saved, {} duplicate(s) skipped, {} summar{}, {} brief(s), {} failure(s)",
        r.sessions,
        r.facts_saved,
        r.duplicates_skipped,
        r.summaries,
        if r.summaries == 1 { "y" } else { "ies" },
        r.briefs,
        r.failures
    )];
    for failed in &r.failed {
        lines.push(format!("  {} failed ({}): {}; retried later", failed.session_id, failed.code, failed.error));
    }
    lines.join("\n")
}

/// `cairn remote sync`.
pub fn remote_round(r: &cairn_core::sync::remote::RoundReport) -> String {
    let mut lines = vec![format!(
        "pushed {}, pulled {} ({} applied, {} already here, {} contested); hub seq {}",
        r.pushed, r.pulled, r.applied.applied, r.applied.skipped, r.applied.conflicts, r.cursor
    )];
    for refusal in &r.refused {
        lines.push(format!("  {} refused by the hub: {} ({})", refusal.project, refusal.message, refusal.hub_code));
    }
    if !r.not_granted.is_empty() {
        lines.push(format!("  not shared (the token has no grant): {}", r.not_granted.join(", ")));
    }
    if !r.parked.is_empty() {
        lines.push(format!(
            "  parked {} change(s) the hub will not take (`cairn remote status` lists them):",
            r.parked.len()
        ));
        lines.extend(r.parked.iter().take(PARKED_LINES).map(parked_line));
    }
    lines.push(if r.in_sync { "in sync".to_owned() } else { format!("{} change(s) still to push", r.pending) });
    lines.join("\n")
}

/// Parked entries listed in a text (the JSON has them all).
const PARKED_LINES: usize = 5;

/// One parked journal entry: which row, who refused it and why.
fn parked_line(p: &cairn_core::sync::remote::ParkedEntry) -> String {
    let by = if p.refused_by == "hub" { "refused by the hub" } else { "not sent" };
    format!("    {} {} {} (journal seq {}), {by}: {}: {}", p.project, p.entity, p.entity_key, p.seq, p.code, p.reason)
}

/// What a phase means for the person reading it.
fn phase_note(r: &cairn_core::sync::remote::RemoteStatus) -> &'static str {
    match r.phase.as_str() {
        "no_daemon" => " (no daemon runs: `cairn remote sync` syncs now; a running daemon syncs by itself)",
        "manual" => " (autosync off: `cairn remote sync` syncs)",
        "backoff" => " (the hub did not answer; retrying)",
        "refused" => " (the hub refused; see the last error)",
        "standby" => " (another process holds the sync lease)",
        _ => "",
    }
}

/// `cairn remote status`.
pub fn remote_status(r: &cairn_core::sync::remote::RemoteStatus) -> String {
    let projects = if r.projects.is_empty() { "every project".to_owned() } else { r.projects.join(", ") };
    let mut lines = vec![
        format!("hub: {} ({projects})", r.url),
        format!("phase: {}{}", r.phase, phase_note(r)),
        format!("pending: {} change(s) to push; pulled up to hub seq {}", r.pending, r.cursor),
    ];
    for p in &r.per_project {
        if p.not_granted {
            lines.push(format!("  {}: not shared (the token has no grant for it)", p.project));
            continue;
        }
        let error = p.last_error.as_deref().map(|e| format!(", last error: {e}")).unwrap_or_default();
        lines.push(format!("  {}: {} pending{error}", p.project, p.pending));
    }
    if r.parked > 0 {
        lines.push(format!(
            "parked: {} change(s) the hub will not take; never retried (edit or delete the memory to send it again):",
            r.parked
        ));
        lines.extend(r.parked_entries.iter().take(PARKED_LINES).map(parked_line));
    }
    if let Some(at) = &r.last_round_at {
        lines.push(format!("last round: {at}"));
    }
    if let Some(at) = &r.last_pull_at {
        lines.push(format!("last pull: {at}"));
    }
    if let Some(error) = r.last_error.as_ref().or(r.last_pull_error.as_ref()) {
        lines.push(format!("last error: {error}"));
    }
    if let Some(ms) = r.next_attempt_in_ms {
        lines.push(format!("next attempt in {:.1} s", ms as f64 / 1000.0));
    }
    if let Some(holder) = &r.lease_holder {
        lines.push(format!("syncing process: {holder}"));
    }
    lines.join("\n")
}

pub fn project(p: &ProjectDetection) -> String {
    let mut text = format!("{}\nsource: {}", p.project, p.project_source.as_str());
    if !p.project_path.is_empty() {
        let _ = write!(text, " ({})", p.project_path);
    }
    text
}

pub fn settings(s: &Settings) -> String {
    let token = cairn_core::settings::mask_secret(s.http_token.value.as_deref());
    let optional = |v: &Option<String>| v.clone().unwrap_or_else(|| "not set".into());
    let rows = [
        ("data_dir", s.data_dir.value.display().to_string(), s.data_dir.source.to_string()),
        ("port", s.port.value.to_string(), s.port.source.to_string()),
        ("bind", s.bind.value.clone(), s.bind.source.to_string()),
        ("http_token", token, s.http_token.source.to_string()),
        ("project", s.project.value.clone().unwrap_or_else(|| "(detected)".into()), s.project.source.to_string()),
        ("context_budget", s.context_budget.value.to_string(), s.context_budget.source.to_string()),
        ("log", s.log.value.clone(), s.log.source.to_string()),
        ("autostart", format!("{:?}", s.autostart.value).to_lowercase(), s.autostart.source.to_string()),
        ("direct", s.direct.value.to_string(), s.direct.source.to_string()),
        ("privacy.redact_secrets", s.redact_secrets.value.to_string(), s.redact_secrets.source.to_string()),
        ("embedder", format!("{:?}", s.embedder.value).to_lowercase(), s.embedder.source.to_string()),
        ("model", s.model.value.clone(), s.model.source.to_string()),
        ("model_dir", s.model_dir.value.display().to_string(), s.model_dir.source.to_string()),
        ("embed_url", optional(&s.embed_url.value), s.embed_url.source.to_string()),
        ("embed_model", optional(&s.embed_model.value), s.embed_model.source.to_string()),
        (
            "embed_api_key",
            cairn_core::settings::mask_secret(s.embed_api_key.value.as_deref()),
            s.embed_api_key.source.to_string(),
        ),
    ];
    let mut text = String::new();
    for (name, value, source) in rows {
        let _ = writeln!(text, "{name:<15} {value:<40} ({source})");
    }
    text.push_str(&llm_settings(&s.llm));
    text.push_str(&plugin_settings(&s.plugin));
    text.push_str(&crate::history_settings::history_settings(&s.history));
    text.push_str("\nEnvironment variables:\n");
    for (name, what) in ENV_VARS.iter().chain(LLM_ENV_VARS) {
        let _ = writeln!(text, "  {name:<29} {what}");
    }
    for (_, name, what) in cairn_core::settings::HISTORY_ENV_KEYS {
        let _ = writeln!(text, "  {name:<29} {what}");
    }
    for (_, name, what) in PLUGIN_KEYS {
        let _ = writeln!(text, "  {name:<29} {what}");
    }
    text
}

/// `[llm]` of `cairn config`: the LLM of background extraction, each key with where it came from.
fn llm_settings(llm: &LlmSettings) -> String {
    let optional = |v: &Option<String>| v.clone().unwrap_or_else(|| "not set".into());
    let budget = match llm.daily_token_budget.value {
        0 => "0 (no limit)".to_owned(),
        n => n.to_string(),
    };
    let timeout = llm.timeout_secs.value.map_or_else(|| "the provider's default".to_owned(), |t| t.to_string());
    let rows = [
        ("llm.provider", llm.provider.value.to_string(), llm.provider.source.to_string()),
        ("llm.model", optional(&llm.model.value), llm.model.source.to_string()),
        ("llm.base_url", optional(&llm.base_url.value), llm.base_url.source.to_string()),
        ("llm.api_key_env", optional(&llm.api_key_env.value), llm.api_key_env.source.to_string()),
        ("llm.command", optional(&llm.command.value), llm.command.source.to_string()),
        ("llm.daily_token_budget", budget, llm.daily_token_budget.source.to_string()),
        ("llm.timeout_secs", timeout, llm.timeout_secs.source.to_string()),
    ];
    let mut text = String::from("\nLLM ([llm], `cairn llm status`):\n");
    for (name, value, source) in rows {
        let _ = writeln!(text, "{name:<28} {value:<27} ({source})");
    }
    if let Some(problem) = &llm.problem {
        let _ = writeln!(text, "problem: {problem} (the LLM is off)");
    }
    text
}

/// The plugin tables of `cairn config`, one `section.key` per line, as config.toml spells them.
fn plugin_settings(plugin: &PluginSettings) -> String {
    let tree = serde_json::to_value(&plugin.config).unwrap_or_default();
    let mut text = String::from("\nPlugin settings ([inject], [triggers], [compaction], [context_meter]):\n");
    for (key, _, _) in PLUGIN_KEYS {
        let (section, name) = key.split_once('.').unwrap_or((key, ""));
        let value = tree[section][name].to_string();
        let source = plugin.sources.get(*key).map_or_else(|| "default".to_owned(), ToString::to_string);
        let _ = writeln!(text, "{key:<28} {value:<27} ({source})");
    }
    text
}

/// `cairn privacy rewrite`: what held private content or a secret, and what was done.
pub fn privacy_rewrite(r: &cairn_core::privacy::PrivacyRewrite) -> String {
    let f = &r.found;
    if f.total() == 0 {
        return "nothing stored holds private content or a secret\n".to_owned();
    }
    let verb = if r.dry_run { "would redact" } else { "redacted" };
    let mut text = format!(
        "{verb}: {} memories, {} revisions, {} prompts, {} sessions, {} relations, {} sync journal entries\n",
        f.memories, f.revisions, f.prompts, f.sessions, f.relations, f.journal
    );
    if r.vacuumed {
        text.push_str("the database file was rebuilt: no old byte is left in it\n");
    }
    if let Some(why) = &r.not_rebuilt {
        let _ = writeln!(text, "{}: {why}", if r.dry_run { "note" } else { "warning" });
    }
    text
}

pub fn doctor(r: &DoctorReport) -> String {
    let mut text = String::new();
    for c in &r.checks {
        let mark = match c.status {
            CheckStatus::Ok => "ok  ",
            CheckStatus::Warning => "warn",
            CheckStatus::Error => "FAIL",
        };
        let _ = writeln!(text, "[{mark}] {:<17} {}", c.id, c.message);
        if let Some(hint) = &c.hint {
            let _ = writeln!(text, "       hint: {hint}");
        }
    }
    let _ = write!(
        text,
        "status: {}",
        serde_json::to_value(r.status).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
    );
    text
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "-" } else { s }
}

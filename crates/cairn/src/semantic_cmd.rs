//! `cairn model`, `cairn reindex`, `cairn conflicts`: the commands around semantic search and
//! relations. Each parses, calls the core (or cairn-embed for files) and renders.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::Result;
use cairn_core::ops::{Op, ReindexReport};
use cairn_core::relations::{RelationDetail, RelationFilter, RelationPage, RelationStats, ScanRequest, ScanResult};
use cairn_core::search::semantic::embed_error;
use cairn_core::views::Stats;
use cairn_core::{CairnError, ErrorCode};
use cairn_embed::install::{self, DEFAULT_MODEL};
use serde::Serialize;

use crate::cli::{ConflictsAction, ModelAction};
use crate::output::note;
use crate::run::{Env, parse_id};

/// How long `reindex` waits for the daemon without seeing progress before giving up.
const STALL_LIMIT: Duration = Duration::from_secs(120);

pub fn model(env: &Env, action: ModelAction) -> Result<()> {
    match action {
        ModelAction::Install { from, url } => install_model(env, from, url),
        ModelAction::Status => model_status(env),
    }
}

fn install_model(env: &Env, from: Option<std::path::PathBuf>, url: Option<String>) -> Result<()> {
    let dest = env.settings.model_dir.value.clone();
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut progress = ProgressLine::default();
    let manifest = match &from {
        Some(dir) => install::install_from_dir(&DEFAULT_MODEL, dir, &dest, &mut |f, d, t| progress.show(f, d, t))
            .map_err(|e| embed_error(&e))?,
        None => download(url.as_deref(), &dest, &mut progress)?,
    };
    note(&format!(
        "installed {} in {} (checksums verified); restart a running daemon to use it, then `cairn reindex`",
        manifest.id,
        dest.display()
    ));
    #[derive(Serialize)]
    struct Installed<'a> {
        model: &'a str,
        dir: String,
        source: &'a str,
        files: &'a [(String, String)],
    }
    let installed = Installed {
        model: &manifest.id,
        dir: dest.display().to_string(),
        source: &manifest.source,
        files: &manifest.files,
    };
    env.emit(&installed, |i| format!("{} in {}", i.model, i.dir))
}

/// A progress line on stderr: each file at every tenth of its size.
#[cfg(feature = "remote")]
fn download(url: Option<&str>, dest: &std::path::Path, progress: &mut ProgressLine) -> Result<install::Manifest> {
    let base = url.unwrap_or(DEFAULT_MODEL.url);
    note(&format!("downloading {} from {base}", DEFAULT_MODEL.id));
    Ok(install::install_from_url(&DEFAULT_MODEL, base, dest, &mut |f, d, t| progress.show(f, d, t))
        .map_err(|e| embed_error(&e))?)
}

#[cfg(not(feature = "remote"))]
fn download(_url: Option<&str>, _dest: &std::path::Path, _progress: &mut ProgressLine) -> Result<install::Manifest> {
    Err(cairn_core::CairnError::new(
        cairn_core::ErrorCode::InvalidArgument,
        "this cairn was built without downloads (the `remote` feature)",
    )
    .with_hint("copy the model from a local directory: cairn model install --from DIR")
    .into())
}

#[derive(Default)]
struct ProgressLine {
    file: String,
    shown: u64,
}

impl ProgressLine {
    fn show(&mut self, file: &str, done: u64, total: u64) {
        if file != self.file {
            self.file = file.to_owned();
            self.shown = 0;
        }
        let tenth = (done * 10).checked_div(total).map_or(10, |t| t.min(10));
        if tenth > self.shown || (done >= total && self.shown < 10) {
            self.shown = tenth.max(1);
            note(&format!("  {file}: {:>3}% of {}", tenth * 10, human_bytes(total)));
        }
    }
}

fn human_bytes(n: u64) -> String {
    match n {
        0..1_000_000 => format!("{:.1} kB", n as f64 / 1e3),
        _ => format!("{:.1} MB", n as f64 / 1e6),
    }
}

#[derive(Debug, Serialize)]
struct ModelStatus {
    embedder: String,
    model_dir: String,
    installed: bool,
    verified: Option<bool>,
    problem: Option<String>,
    model: Option<String>,
    semantic_search: Option<String>,
    embeddings_pending: Option<i64>,
}

fn model_status(env: &Env) -> Result<()> {
    let dir = &env.settings.model_dir.value;
    let (installed, verified, problem) = match install::verify(dir) {
        Ok(_) => (true, Some(true), None),
        Err(cairn_embed::EmbedError::ModelMissing { .. }) if cairn_embed::is_model_dir(dir) => {
            (true, None, Some("no manifest: not installed by `cairn model install`, checksums unknown".to_owned()))
        }
        Err(e @ cairn_embed::EmbedError::ModelMissing { .. }) => (false, None, Some(e.to_string())),
        Err(e) => (true, Some(false), Some(e.to_string())),
    };
    let stats: Option<Stats> = env.call(Op::Stats).ok();
    let status = ModelStatus {
        embedder: format!("{:?}", env.settings.embedder.value).to_lowercase(),
        model_dir: dir.display().to_string(),
        installed,
        verified,
        problem,
        model: stats.as_ref().and_then(|s| s.embedding_model.clone()),
        semantic_search: stats.as_ref().map(|s| s.semantic_search.clone()),
        embeddings_pending: stats.as_ref().map(|s| s.embeddings_pending),
    };
    env.emit(&status, render_status)?;
    if verified == Some(false) {
        return Err(CairnError::new(ErrorCode::ChecksumMismatch, "the installed model's files are damaged")
            .with_hint("run `cairn model install` again")
            .into());
    }
    Ok(())
}

fn render_status(s: &ModelStatus) -> String {
    let mut text = format!("embedder:  {}\nmodel dir: {}\n", s.embedder, s.model_dir);
    let state = match (s.installed, s.verified) {
        (false, _) => "not installed (run `cairn model install`)",
        (true, Some(true)) => "installed, checksums verified",
        (true, Some(false)) => "installed, DAMAGED",
        (true, None) => "present",
    };
    let _ = writeln!(text, "files:     {state}");
    if let Some(p) = &s.problem {
        let _ = writeln!(text, "           {p}");
    }
    if let Some(search) = &s.semantic_search {
        let _ = writeln!(text, "semantic:  {search}");
    }
    if let Some(pending) = s.embeddings_pending {
        let _ = writeln!(text, "pending:   {pending} memories without a vector");
    }
    text
}

pub fn reindex(env: &Env, force: bool) -> Result<()> {
    let report: ReindexReport = env.call(Op::Reindex { force })?;
    let total = report.pending;
    let started = Instant::now();
    let mut show = |done: usize, pending: i64| {
        note(&format!("  embedded {done}, {pending} to go ({:.0?})", started.elapsed()));
    };
    let embedded = match env.embed_here(&mut show)? {
        Some(done) => done as i64,
        None => wait_for_daemon(env, total, &mut show)?,
    };
    #[derive(Serialize)]
    struct Done {
        model: Option<String>,
        cleared: usize,
        embedded: i64,
        seconds: f64,
    }
    let done =
        Done { model: report.model, cleared: report.cleared, embedded, seconds: started.elapsed().as_secs_f64() };
    env.emit(&done, |d| {
        format!("{} memories embedded with {} in {:.1} s", d.embedded, d.model.as_deref().unwrap_or("-"), d.seconds)
    })
}

/// Poll the daemon's `embeddings_pending` until it reaches 0.
fn wait_for_daemon(env: &Env, total: i64, show: &mut dyn FnMut(usize, i64)) -> Result<i64> {
    let mut last = i64::MAX;
    let mut last_change = Instant::now();
    loop {
        let stats: Stats = env.call(Op::Stats)?;
        let pending = stats.embeddings_pending;
        if pending == 0 {
            return Ok(total);
        }
        if pending < last {
            last = pending;
            last_change = Instant::now();
            show(usize::try_from(total - pending).unwrap_or(0), pending);
        } else if last_change.elapsed() > STALL_LIMIT {
            return Err(CairnError::new(
                ErrorCode::EmbedderUnavailable,
                format!(
                    "no progress for {} s; {pending} memories still wait ({})",
                    STALL_LIMIT.as_secs(),
                    stats.semantic_search
                ),
            )
            .with_hint("check the daemon's log, or `cairn model status`")
            .into());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

pub fn conflicts(env: &Env, action: ConflictsAction) -> Result<()> {
    match action {
        ConflictsAction::List { status, limit, all_projects } => {
            let project = if all_projects { None } else { Some(env.project()?.project) };
            let filter = RelationFilter { project, status, limit: Some(limit), ..RelationFilter::default() };
            let page: RelationPage = env.call(Op::Relations(filter))?;
            env.emit(&page, render_relations)
        }
        ConflictsAction::Show { id } => {
            let relation: RelationDetail = env.call(Op::GetRelation { id: parse_id(&id)? })?;
            env.emit(&relation, render_relation)
        }
        ConflictsAction::Stats { all_projects } => {
            let project = if all_projects { None } else { Some(env.project()?.project) };
            let stats: RelationStats = env.call(Op::RelationStats { project })?;
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
        ConflictsAction::Scan { apply, since, max } => {
            let project = env.project()?.project;
            let request = ScanRequest { project, since, apply, max_insert: max };
            let result: ScanResult = env.call(Op::ScanRelations(request))?;
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

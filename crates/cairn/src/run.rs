//! One function per command: parse what the CLI gave, call the core, render.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use cairn_core::agent::ProtocolRequest;
use cairn_core::context::{Context, ContextLayout, ContextRequest};
use cairn_core::memory::{ListFilter, NewObservation, ObservationPatch};
use cairn_core::model::{Observation, SessionSummary};
use cairn_core::ops::{
    DeleteRequest, DeleteResponse, ExportMemoriesRequest, GetRequest, GetResponse, ImportEngramRequest, ImportRequest,
    PinRequest, PrivacyRewriteRequest, RecentSessionsRequest, RepairIndexesRequest, RepairReport, RestoreRequest,
    SaveRequest, SaveResponse, SearchResponse, StatsRequest, SyncImportRequest, SyncStatusRequest, TimelineRequest,
    UpdateRequest,
};
use cairn_core::search::{SearchMode, SearchQuery, SearchResults};
use cairn_core::settings::{Overrides, Settings};
use cairn_core::text::Scope;
use cairn_core::transfer::{ExportData, ImportReport};
use cairn_core::views::{Stats, Timeline};
use cairn_core::{CairnError, ErrorCode, doctor};

use crate::cli::{Cli, Command, ContextArgs, SaveArgs, SearchArgs, UpdateArgs};
use crate::env::{Env, parse_id};
use crate::output::{note, out};
use cairn_render::people as render;

pub fn run(cli: Cli) -> Result<()> {
    let mut overrides = Overrides {
        data_dir: cli.global.data_dir.clone(),
        project: cli.global.project.clone(),
        ..Overrides::default()
    };
    // A hook answers even when the settings do not load: it runs before anything can fail.
    if let Command::Hook { event, host } = &cli.command {
        return crate::hook::run(event, host, overrides);
    }
    // Generated from the CLI definition: no settings, no data dir.
    match &cli.command {
        Command::Completions { shell } => return crate::completions_cmd::completions(*shell),
        Command::Man { out_dir } => return crate::completions_cmd::man(out_dir.as_deref()),
        _ => {}
    }
    // The hub is its own service: it reads no data dir and no settings.
    #[cfg(feature = "hub")]
    let cli = match cli.command {
        Command::Hub { action } => return crate::hub_cmd::run(action, &cli.global),
        command => Cli { command, global: cli.global },
    };
    if let Command::Serve { port_positional, port, bind, .. } = &cli.command {
        overrides.port = port.or(*port_positional);
        overrides.bind.clone_from(bind);
    }
    let settings = Settings::load(&overrides)?;
    // The interface owns the terminal: a log line on stderr would be drawn over it.
    if !matches!(cli.command, Command::Tui { .. }) {
        crate::init_logging(&settings.log.value);
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let env = Env::new(settings, cli.global.json, cwd);
    dispatch(&env, cli.command)
}

fn dispatch(env: &Env, command: Command) -> Result<()> {
    match command {
        Command::Serve { detach: true, .. } => crate::daemon::detach(),
        Command::Serve { idle_exit, or_any_port, model_install, model_url, .. } => crate::daemon::serve(
            &env.settings,
            crate::daemon::ServeArgs {
                idle_exit: idle_exit.map(Duration::from_secs),
                or_any_port,
                model_install,
                model_url,
            },
        ),
        Command::Mcp { tools, host } => crate::daemon::mcp(&env.settings, &tools, host.as_deref()),
        Command::Sync { import, status, all, engram_layout, cloud, time_limit_ms } => {
            sync(env, SyncArgs { import, status, all, engram_layout, cloud, time_limit_ms })
        }
        Command::Remote { action } => crate::remote_cmd::remote(env, action),
        Command::Setup(args) => crate::setup::run(env, args),
        Command::Tui { write } => tui(env, write),
        #[cfg(feature = "hub")]
        Command::Hub { .. } => unreachable!("`cairn hub` runs before the settings load"),
        Command::Completions { .. } | Command::Man { .. } => unreachable!("run before the settings load"),
        Command::Version => out(&format!("cairn {}", cairn_core::VERSION)),
        Command::Model { action } => crate::model_cmd::model(env, action),
        Command::Llm { action } => crate::llm_cmd::llm(env, action),
        Command::Extract(args) => crate::extract_cmd::extract(env, args),
        Command::Reindex { force } => crate::model_cmd::reindex(env, force),
        Command::Conflicts { action } => crate::conflicts_cmd::conflicts(env, action),
        Command::History { action } => crate::history_cmd::history(env, action),
        Command::Save(args) => save(env, args),
        Command::Search(args) => search(env, args),
        Command::Get { id, revisions } => get(env, &id, revisions),
        Command::Update(args) => update(env, args),
        Command::Delete { id, hard } => delete(env, &id, hard),
        Command::Restore { id } => restore(env, &id),
        Command::Trash { limit, all_projects } => trash(env, limit, all_projects),
        Command::Pin { id } => pin(env, &id, true),
        Command::Unpin { id } => pin(env, &id, false),
        Command::Context(args) => context(env, args),
        Command::Timeline { id, before, after } => {
            let timeline: Timeline = env.call(TimelineRequest { id: parse_id(&id)?, before, after })?;
            env.emit(&timeline, render::timeline)
        }
        Command::Sessions { limit, all_projects, include_children } => {
            let project = if all_projects { None } else { Some(env.project()?.project) };
            let list: Vec<SessionSummary> = env.call(RecentSessionsRequest { project, limit, include_children })?;
            env.emit(&list, |l| render::sessions(l))
        }
        Command::Stats => {
            let stats: Stats = env.call(StatsRequest)?;
            env.emit(&stats, render::stats)
        }
        Command::Export { obsidian: Some(dir), watch, interval, .. } => {
            crate::obsidian_cmd::export(env, &dir, watch.then(|| Duration::from_secs(interval)))
        }
        Command::Export { file, .. } => export(env, &file),
        Command::Import { file } => {
            let data = cairn_core::transfer::parse_import_value(&read_input(&file)?)?;
            let report: ImportReport = env.call(ImportRequest { data })?;
            env.emit(&report, render::imported)
        }
        Command::ImportEngram { path } => import_engram(env, path),
        Command::Project => env.emit(&env.project()?, render::project),
        Command::Config => env.emit(&env.settings, render::settings),
        Command::Doctor { repair } => doctor_cmd(env, repair),
        Command::Gc { dry_run } => {
            let report: cairn_core::gc::GcReport = env.call(cairn_core::gc::GcRequest { dry_run })?;
            env.emit(&report, render::gc)
        }
        Command::Privacy { action: crate::cli::PrivacyAction::Rewrite { dry_run } } => {
            let report: cairn_core::privacy::PrivacyRewrite = env.call(PrivacyRewriteRequest { dry_run })?;
            env.emit(&report, render::privacy_rewrite)
        }
        Command::SuggestTopic { kind, title, content } => {
            let suggestion = cairn_core::ops::suggest_topic_key(kind.as_deref(), &title, &content)?;
            env.emit(&suggestion, |s| s.topic_key.clone())
        }
        Command::Protocol(args) => {
            // Text only: no store, no daemon.
            let mut request = ProtocolRequest::parse(Some(&args.host), Some(&args.tools), Some(&args.part))?;
            request.session_id = args.session;
            let text = cairn_core::agent::protocol::protocol_checked(request)?;
            env.emit(&text, |t| t.text.clone())
        }
        // Run before the settings load (see `run`); here only for completeness.
        Command::Hook { event, host } => crate::hook::run(
            &event,
            &host,
            Overrides { data_dir: Some(env.settings.data_dir.value.clone()), ..Overrides::default() },
        ),
    }
}

/// `cairn tui`: read-only by default (the daemon when one runs, else the file opened
/// read-only); `--write` sends edits to the daemon, started when none runs.
#[cfg(feature = "tui")]
fn tui(env: &Env, write: bool) -> Result<()> {
    use cairn_client::{Client, ConnectOptions, Role};
    let mut options = ConnectOptions::from_settings(&env.settings, Role::Cli)?;
    if write {
        if !options.direct && options.autostart.is_none() {
            options.autostart = std::env::current_exe().ok();
        }
    } else {
        options.autostart = None;
        options.local = cairn_client::LocalKind::ReadOnly;
    }
    let client = Client::new(options);
    // What the conflicts view's scan covers, resolved as `cairn conflicts scan` does; before
    // the screen is taken, so a warning about it is still readable.
    let project = env.project().ok().map(|detection| detection.project);
    cairn_tui::run(client, cairn_tui::Options { write, connection: "connecting…".into(), project })?;
    Ok(())
}

#[cfg(not(feature = "tui"))]
fn tui(_env: &Env, _write: bool) -> Result<()> {
    Err(CairnError::invalid("this cairn was built without the terminal interface")
        .with_hint("build it with the `tui` feature (on by default)")
        .into())
}

fn utf8(field: &str, raw: OsString) -> Result<String> {
    raw.into_string().map_err(|_| {
        CairnError::new(ErrorCode::InvalidUtf8, format!("{field} is not valid UTF-8"))
            .with_hint("pass text, or pipe it through iconv")
            .into()
    })
}

fn read_stdin(field: &str) -> Result<String> {
    let mut bytes = Vec::new();
    std::io::stdin().read_to_end(&mut bytes)?;
    String::from_utf8(bytes)
        .map_err(|_| CairnError::new(ErrorCode::InvalidUtf8, format!("{field} on stdin is not valid UTF-8")).into())
}

fn read_input(file: &Path) -> Result<Vec<u8>> {
    if file == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin().read_to_end(&mut bytes)?;
        return Ok(bytes);
    }
    std::fs::read(file).map_err(|e| {
        let code =
            if e.kind() == std::io::ErrorKind::NotFound { ErrorCode::FileNotFound } else { ErrorCode::InvalidArgument };
        CairnError::new(code, format!("cannot read {}: {e}", file.display())).into()
    })
}

fn save(env: &Env, args: SaveArgs) -> Result<()> {
    let title = utf8("title", args.title)?;
    let content = match args.content {
        Some(c) if c != "-" => utf8("content", c)?,
        _ => read_stdin("content")?,
    };
    let detection = env.project()?;
    let new = NewObservation {
        title,
        content,
        kind: args.kind,
        session_id: args.session,
        project: Some(detection.project),
        scope: args.scope,
        topic_key: args.topic,
        tool_name: None,
        pinned: args.pin,
        directory: Some(env.cwd().display().to_string()),
    };
    let response: SaveResponse = env.call(SaveRequest { observation: new, ..SaveRequest::default() })?;
    let outcome = response.outcome;
    for w in &outcome.warnings {
        note(&format!("warning: {w}"));
    }
    if let Some(notice) = outcome.truncation_notice() {
        note(&format!("warning: {notice}"));
    }
    if outcome.redacted {
        note("note: <private> content was redacted before saving");
    }
    env.emit(&outcome, render::saved)
}

fn search(env: &Env, args: SearchArgs) -> Result<()> {
    let words = args.query.into_iter().map(|w| utf8("query", w)).collect::<Result<Vec<_>>>()?;
    let project = if args.all_projects { None } else { Some(env.project()?.project) };
    let query = SearchQuery {
        text: words.join(" "),
        project,
        all_projects: args.all_projects,
        kind: args.kind,
        scope: Scope::parse_filter(args.scope.as_deref())?,
        limit: args.limit,
        mode: args.mode.as_deref().map(SearchMode::parse).transpose()?,
        min_score: args.min_score,
        deep: if args.deep {
            Some(true)
        } else if args.no_deep {
            Some(false)
        } else {
            None
        },
    };
    let response: SearchResponse = env.call(query)?;
    // The CLI's JSON has the ranked hits without their relation notes, as it always had.
    let results = SearchResults {
        hits: response.hits.into_iter().map(|annotated| annotated.hit).collect(),
        notices: response.notices,
        mode: response.mode.unwrap_or(SearchMode::Lexical),
    };
    if !env.json {
        for n in &results.notices {
            note(&format!("hint: {n}"));
        }
    }
    match response.deep {
        Some(deep) => {
            if !env.json && deep.reranked {
                let model = deep.model.as_deref().unwrap_or("the model");
                note(&format!("deep recall: {model} re-ranked {} candidates in {} ms", deep.candidates, deep.llm_ms));
            }
            env.emit(&DeepResults { results: &results, deep }, |r| render::search(r.results))
        }
        None => env.emit(&results, render::search),
    }
}

/// `cairn search --deep --json`: the results and what deep recall did.
#[derive(serde::Serialize)]
struct DeepResults<'a> {
    #[serde(flatten)]
    results: &'a SearchResults,
    deep: cairn_core::search::deep::DeepReport,
}

fn get(env: &Env, raw: &str, with_revisions: bool) -> Result<()> {
    let id = parse_id(raw)?;
    let found: GetResponse = env.call(GetRequest { id, revisions: with_revisions })?;
    env.emit(&found, |found| {
        let text = render::observation(&found.observation, found.revisions.as_deref());
        match &found.provenance {
            Some(p) => format!("{}\n{}", text.trim_end_matches('\n'), cairn_render::provenance(p)),
            None => text,
        }
    })
}

fn update(env: &Env, args: UpdateArgs) -> Result<()> {
    let id = parse_id(&args.id)?;
    let patch = ObservationPatch {
        kind: args.kind,
        title: args.title.map(|t| utf8("title", t)).transpose()?,
        content: args.content.map(|c| utf8("content", c)).transpose()?,
        project: args.to_project,
        scope: args.scope,
        topic_key: args.topic,
        tool_name: None,
    };
    let updated: Observation = env.call(UpdateRequest { id, patch })?;
    env.emit(&updated, |o| format!("Memory updated: #{} {:?} (revision {})", o.id, o.title, o.revision_count))
}

fn delete(env: &Env, raw: &str, hard: bool) -> Result<()> {
    let id = parse_id(raw)?;
    let deleted: DeleteResponse = env.call(DeleteRequest { id, hard })?;
    env.emit(&deleted, |_| format!("Memory #{id} {}", if hard { "permanently deleted" } else { "deleted" }))
}

fn restore(env: &Env, raw: &str) -> Result<()> {
    let o: Observation = env.call(RestoreRequest { id: parse_id(raw)? })?;
    env.emit(&o, |o| format!("Memory #{} restored: {}", o.id, o.title))
}

fn trash(env: &Env, limit: usize, all_projects: bool) -> Result<()> {
    let project = if all_projects { None } else { Some(env.project()?.project) };
    let filter = ListFilter { project, limit, deleted: true, ..ListFilter::default() };
    let deleted: Vec<Observation> = env.call(filter)?;
    env.emit(&deleted, |list| render::trash(list))
}

fn pin(env: &Env, raw: &str, pinned: bool) -> Result<()> {
    let o: Observation = env.call(PinRequest { id: parse_id(raw)?, pinned })?;
    env.emit(&o, |o| format!("Memory #{} {}", o.id, if o.pinned { "pinned" } else { "unpinned" }))
}

fn context(env: &Env, args: ContextArgs) -> Result<()> {
    let project = if args.all_projects { None } else { Some(env.project()?.project) };
    let (layout, default_budget) = if args.memory_block {
        (ContextLayout::MemoryBlock, env.settings.plugin.config.inject.budget_bytes)
    } else {
        (ContextLayout::Recent, env.settings.context_budget.value)
    };
    let req = ContextRequest {
        project,
        scope: Scope::parse_filter(args.scope.as_deref())?,
        budget_bytes: args.budget.unwrap_or(default_budget),
        layout,
        query: args.query,
        similarity_threshold: args.similarity_threshold,
        ..ContextRequest::default()
    };
    let ctx: Context = env.call(req)?;
    env.emit(&ctx, render::context)
}

fn export(env: &Env, file: &Path) -> Result<()> {
    let project = env.settings.project.value.clone();
    let data: ExportData = env.call(ExportMemoriesRequest { project })?;
    let text = serde_json::to_string_pretty(&data)?;
    if file == Path::new("-") {
        return out(&text);
    }
    write_atomically(file, text.as_bytes())?;
    let summary = serde_json::json!({
        "file": file.display().to_string(),
        "sessions": data.sessions.len(),
        "observations": data.observations.len(),
        "prompts": data.prompts.len(),
        "relations": data.relations.len(),
    });
    env.emit(&summary, |_| {
        format!(
            "Exported {} memories, {} sessions, {} prompts to {}",
            data.observations.len(),
            data.sessions.len(),
            data.prompts.len(),
            file.display()
        )
    })
}

/// Write next to the target and rename, so an interrupted export never leaves half a file.
fn write_atomically(file: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = file.with_extension("json.partial");
    std::fs::write(&tmp, bytes)
        .map_err(|e| CairnError::new(ErrorCode::InvalidArgument, format!("cannot write {}: {e}", tmp.display())))?;
    std::fs::rename(&tmp, file)?;
    Ok(())
}

struct SyncArgs {
    import: bool,
    status: bool,
    all: bool,
    engram_layout: bool,
    cloud: bool,
    time_limit_ms: Option<u64>,
}

/// `cairn sync`: export, `--import` or `--status`, in the repository of the current directory.
fn sync(env: &Env, args: SyncArgs) -> Result<()> {
    if args.cloud {
        return Err(CairnError::new(ErrorCode::InvalidArgument, "cairn syncs through git; --cloud is engram's")
            .with_hint("run `cairn sync` and commit .cairn/, or `cairn sync --engram-layout` for .engram/")
            .into());
    }
    let directory = env.cwd().to_owned();
    if args.status {
        let status: cairn_core::sync::SyncStatus = env.call(SyncStatusRequest { directory: Some(directory) })?;
        return env.emit(&status, render::sync_status);
    }
    if args.import {
        let summary: cairn_core::sync::git::ImportSummary =
            env.call(SyncImportRequest { directory, time_limit_ms: args.time_limit_ms })?;
        env.emit(&summary, render::sync_imported)?;
        // Refused chunks are listed above; the exit code says some were.
        return match summary.refused.first() {
            Some(first) => Err(CairnError::new(
                ErrorCode::from_name(&first.code).unwrap_or(ErrorCode::SyncChunkCorrupt),
                format!("{} chunk(s) refused; the others were applied", summary.refused.len()),
            )
            .into()),
            None => Ok(()),
        };
    }
    let project = if args.all { None } else { Some(env.project()?.project) };
    let request =
        cairn_core::sync::git::ExportRequest { directory, project, all: args.all, engram_layout: args.engram_layout };
    let summary: cairn_core::sync::git::ExportSummary = env.call(request)?;
    env.emit(&summary, render::sync_exported)
}

fn import_engram(env: &Env, path: Option<PathBuf>) -> Result<()> {
    let path = if let Some(p) = path {
        env.cwd().join(p)
    } else {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
        cairn_core::transfer::default_engram_db(&home)
    };
    let report: ImportReport = env.call(ImportEngramRequest { path })?;
    env.emit(&report, render::imported)
}

/// `cairn doctor --json`: the checks, and each installed host's wiring piece by piece (the
/// `setup.<host>` checks say the same in one line each).
#[derive(serde::Serialize)]
struct DoctorOutput {
    #[serde(flatten)]
    report: doctor::DoctorReport,
    hosts: Vec<crate::setup::Wiring>,
}

fn doctor_cmd(env: &Env, repair: bool) -> Result<()> {
    let dir = &env.settings.data_dir.value;
    if repair {
        let _: RepairReport = env.call(RepairIndexesRequest)?;
        note("rebuilt the full-text indexes and recounted the stats");
    }
    let mut report = doctor::run(dir);
    let hosts = crate::setup::wirings();
    let host_checks = hosts.iter().map(crate::setup::Wiring::check);
    let caps = cairn_core::disk_caps::doctor_check(dir, &env.settings.history.config);
    for check in std::iter::once(crate::llm_cmd::doctor_check(env)).chain(caps).chain(host_checks) {
        if check.status == doctor::CheckStatus::Warning && report.status == doctor::CheckStatus::Ok {
            report.status = doctor::CheckStatus::Warning;
        }
        report.checks.push(check);
    }
    let output = DoctorOutput { report, hosts };
    env.emit(&output, |o| render::doctor(&o.report))?;
    let report = output.report;
    if report.status == doctor::CheckStatus::Error {
        return Err(CairnError::new(ErrorCode::DatabaseCorrupt, "doctor found errors").into());
    }
    Ok(())
}

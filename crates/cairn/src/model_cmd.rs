//! `cairn model` and `cairn reindex`: the embedding models (installed, chosen, listed, checked)
//! and the vectors made with them. Each parses, calls the core (or cairn-embed for files) and
//! renders.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use anyhow::Result;
use cairn_core::ops::{ReindexReport, ReindexRequest, StatsRequest};

use cairn_core::search::semantic::embed_error;
use cairn_core::settings::{EmbedderKind, Source};
use cairn_core::views::Stats;
use cairn_core::{CairnError, ErrorCode};
use cairn_embed::install::{self, CATALOGUE, ModelSpec};
use serde::Serialize;

use crate::cli::ModelAction;
use crate::env::Env;
use crate::output::note;
use crate::output::{Progress, human_bytes};

/// How long `reindex` waits for the daemon without seeing progress before giving up.
const STALL_LIMIT: Duration = Duration::from_secs(120);

pub fn model(env: &Env, action: ModelAction) -> Result<()> {
    match action {
        ModelAction::Install { name, from, url } => install_model(env, name, from, url),
        ModelAction::List => list_models(env),
        ModelAction::Use { name } => use_model(env, &name),
        ModelAction::Status => model_status(env),
    }
}

/// The catalogue's model `name`, or an error listing the known ones.
fn spec(name: &str) -> Result<&'static ModelSpec> {
    install::spec(name).ok_or_else(|| {
        let known: Vec<&str> = CATALOGUE.iter().map(|s| s.id).collect();
        CairnError::new(ErrorCode::InvalidArgument, format!("no model called {name:?} in cairn's catalogue"))
            .with_hint(format!("known: {} (`cairn model list`)", known.join(", ")))
            .into()
    })
}

/// Where model `name` lives: the configured directory for the model in use (it may be set by
/// `model_dir` / `CAIRN_MODEL_DIR`), `<data dir>/models/<name>` for the others.
fn dir_of(env: &Env, name: &str) -> std::path::PathBuf {
    if name == env.settings.model.value {
        env.settings.model_dir.value.clone()
    } else {
        cairn_core::settings::model_dir_for(&env.settings.data_dir.value, name)
    }
}

fn install_model(env: &Env, name: Option<String>, from: Option<std::path::PathBuf>, url: Option<String>) -> Result<()> {
    let spec = spec(name.as_deref().unwrap_or(&env.settings.model.value))?;
    let dest = dir_of(env, spec.id);
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut progress = Progress::on_stderr();
    let manifest = match &from {
        Some(dir) => {
            let copied = install::install_from_dir(spec, dir, &dest, &mut |f, d, t| progress.show(f, d, t));
            progress.finish();
            copied.map_err(|e| embed_error(&e))?
        }
        None => download(spec, url.as_deref(), &dest, &mut progress)?,
    };
    // A model made from a GGUF file has that file checked whatever `--from` gave.
    let from_archive =
        spec.gguf.is_some() || (spec.archive.is_some() && from.as_deref().is_none_or(std::path::Path::is_file));
    let checked = match (spec.files.is_empty(), from_archive) {
        (false, _) => "checksums verified",
        (true, true) => "the download's checksum verified, the converted files' recorded",
        (true, false) => "checksums recorded",
    };
    if spec.id == env.settings.model.value {
        note(&format!(
            "installed {} in {} ({checked}); a running daemon takes it up within seconds and embeds every \
             memory in the background",
            manifest.id,
            dest.display()
        ));
    } else {
        note(&format!(
            "installed {} in {} ({checked}); search with it: cairn model use {}",
            manifest.id,
            dest.display(),
            manifest.id
        ));
    }
    #[derive(Serialize)]
    struct Installed<'a> {
        model: &'a str,
        dir: String,
        source: &'a str,
        files: &'a [(String, String)],
        query_prefix: Option<&'a str>,
        passage_prefix: Option<&'a str>,
    }
    let installed = Installed {
        model: &manifest.id,
        dir: dest.display().to_string(),
        source: &manifest.source,
        files: &manifest.files,
        query_prefix: manifest.query_prefix.as_deref(),
        passage_prefix: manifest.passage_prefix.as_deref(),
    };
    env.emit(&installed, |i| format!("{} in {}", i.model, i.dir))
}

/// Download `spec` into `dest`, showing `progress`.
#[cfg(feature = "remote")]
fn download(
    spec: &ModelSpec,
    url: Option<&str>,
    dest: &std::path::Path,
    progress: &mut Progress,
) -> Result<install::Manifest> {
    if spec.files.is_empty() && spec.archive.is_none() && spec.gguf.is_none() {
        return Err(unknown_checksums(spec));
    }
    let base = url.unwrap_or(spec.url);
    let converted = spec.archive.map(|a| (a.name, a.size)).or(spec.gguf.map(|g| (g.name, g.size)));
    match converted {
        Some((name, size)) => note(&format!(
            "downloading {} ({name}, {} MB) from {base}; it is converted after its checksum is checked",
            spec.id,
            size / 1_000_000
        )),
        None => note(&format!("downloading {} from {base}", spec.id)),
    }
    let downloaded = install::install_from_url(spec, base, dest, &mut |f, d, t| progress.show(f, d, t));
    progress.finish();
    downloaded.map_err(|e| download_error(&e, spec))
}

/// A failed download says what to do about a download (the embedder's hint is about an
/// embedding endpoint).
#[cfg(feature = "remote")]
fn download_error(err: &cairn_embed::EmbedError, spec: &ModelSpec) -> anyhow::Error {
    match err {
        cairn_embed::EmbedError::Endpoint(message) => CairnError::new(
            ErrorCode::EmbedderUnavailable,
            format!("download failed: {message}"),
        )
        .with_hint(format!(
            "check the network, or pass --url MIRROR, or copy it from a local copy: cairn model install {} --from DIR",
            spec.id
        ))
        .into(),
        other => embed_error(other).into(),
    }
}

/// A model whose hub files cairn has no checksums for is not downloaded.
#[cfg(feature = "remote")]
fn unknown_checksums(spec: &ModelSpec) -> anyhow::Error {
    CairnError::new(
        ErrorCode::InvalidArgument,
        format!(
            "the checksums of {}'s files on the hub are unknown to this build, so cairn does not download it",
            spec.id
        ),
    )
    .with_hint(format!(
        "install it from a local copy: cairn model install {} --from DIR (a Hugging Face snapshot)",
        spec.id
    ))
    .into()
}

#[cfg(not(feature = "remote"))]
fn download(
    _spec: &ModelSpec,
    _url: Option<&str>,
    _dest: &std::path::Path,
    _progress: &mut Progress,
) -> Result<install::Manifest> {
    Err(cairn_core::CairnError::new(
        cairn_core::ErrorCode::InvalidArgument,
        "this cairn was built without downloads (the `remote` feature)",
    )
    .with_hint("copy the model from a local directory: cairn model install --from DIR")
    .into())
}

#[derive(Debug, Serialize)]
struct ModelRow {
    name: String,
    description: String,
    installed: bool,
    in_use: bool,
    dir: String,
    /// Bytes of the installed files, measured now; `None` when not installed.
    disk_bytes: Option<u64>,
    /// Bytes `cairn model install` downloads (the checked archive or files).
    download_bytes: Option<u64>,
    /// Figures measured on the evaluation sets and at 100k memories (a committed table,
    /// `cairn_embed::measured`); `None` for a model outside the catalogue.
    measured: Option<MeasuredRow>,
}

/// `cairn_embed::measured::Measured`, for output.
#[derive(Debug, Serialize)]
struct MeasuredRow {
    languages: &'static str,
    measured_on: &'static str,
    rss_mib: Option<u32>,
    hybrid_ms_p50_100k: Option<f64>,
    coding_r5: Option<f64>,
    paraphrase_r5: Option<f64>,
    spanish_r5: Option<f64>,
    heldout_r5: Option<f64>,
    locomo_r10: Option<f64>,
}

impl From<&cairn_embed::measured::Measured> for MeasuredRow {
    fn from(m: &cairn_embed::measured::Measured) -> MeasuredRow {
        MeasuredRow {
            languages: m.languages,
            measured_on: m.measured_on,
            rss_mib: m.rss_mib,
            hybrid_ms_p50_100k: m.hybrid_ms_p50_100k,
            coding_r5: m.recall.coding_r5,
            paraphrase_r5: m.recall.paraphrase_r5,
            spanish_r5: m.recall.spanish_r5,
            heldout_r5: m.recall.heldout_r5,
            locomo_r10: m.recall.locomo_r10,
        }
    }
}

/// Bytes of the files directly in `dir` (a model directory is flat), links followed.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .filter_map(|e| std::fs::metadata(e.path()).ok())
        .filter(std::fs::Metadata::is_file)
        .map(|m| m.len())
        .sum()
}

/// What installing `spec` downloads.
fn download_bytes(spec: &ModelSpec) -> Option<u64> {
    let files: u64 = spec.files.iter().map(|f| f.size).sum();
    spec.archive.map(|a| a.size).or(spec.gguf.map(|g| g.size)).or((files > 0).then_some(files))
}

#[derive(Debug, Serialize)]
struct ModelList {
    embedder: String,
    /// The model used when none is chosen.
    default: &'static str,
    models: Vec<ModelRow>,
    /// An earlier default kept in use: that the default changed and how to switch.
    note: Option<String>,
    /// The local LLMs of extraction (`cairn llm use local`), installed or not.
    llm: Vec<crate::llm_cmd::LocalModelRow>,
}

fn list_models(env: &Env) -> Result<()> {
    let in_use = |name: &str| env.settings.model.value == name && env.settings.embedder.value == EmbedderKind::Local;
    let row = |name: &str, description: &str| {
        let dir = dir_of(env, name);
        let installed = cairn_embed::is_model_dir(&dir);
        ModelRow {
            name: name.to_owned(),
            description: description.to_owned(),
            installed,
            in_use: in_use(name),
            disk_bytes: installed.then(|| dir_bytes(&dir)),
            download_bytes: install::spec(name).and_then(download_bytes),
            measured: cairn_embed::measured::measured(name).map(MeasuredRow::from),
            dir: dir.display().to_string(),
        }
    };
    let mut models: Vec<ModelRow> = CATALOGUE.iter().map(|s| row(s.id, s.description)).collect();
    if install::spec(&env.settings.model.value).is_none() {
        models.push(row(&env.settings.model.value, "not in the catalogue (set in the configuration)"));
    }
    let list = ModelList {
        embedder: format!("{:?}", env.settings.embedder.value).to_lowercase(),
        default: cairn_core::settings::DEFAULT_MODEL,
        models,
        note: env.settings.kept_model_note(),
        llm: crate::llm_cmd::local_model_rows(env),
    };
    env.emit(&list, render_list)
}

fn render_list(list: &ModelList) -> String {
    let mut text = String::new();
    for m in &list.models {
        let state = match (m.in_use, m.installed) {
            (true, true) => "in use",
            (true, false) => "in use, not installed",
            (false, true) => "installed",
            (false, false) => "not installed",
        };
        let _ = writeln!(text, "{} {:<22} {:<22} {}", if m.in_use { "*" } else { " " }, m.name, state, m.description);
        let _ = writeln!(text, "    {}", render_figures(m));
    }
    if let Some(on) = list.models.iter().find_map(|m| m.measured.as_ref().map(|f| f.measured_on)) {
        let _ = writeln!(
            text,
            "Recall of hybrid search on cairn's evaluation sets (R@5; LoCoMo R@10), RSS the model adds to the \
             daemon, hybrid search p50 at 100k memories through the HTTP API (the query embedded, never seen before): measured {on} (docs/BENCHMARKS.md, \
             \"Models side by side\"); \"-\" not measured."
        );
    }
    if list.embedder != "local" {
        let _ = writeln!(text, "(the embedder is {}: no local model is in use)", list.embedder);
    }
    if let Some(note) = &list.note {
        let _ = writeln!(text, "note: {note}");
    }
    text.push_str(&crate::llm_cmd::render_local_model_rows(&list.llm));
    text
}

/// A model's size and measured figures on one line.
fn render_figures(m: &ModelRow) -> String {
    let size = match (m.disk_bytes, m.download_bytes) {
        (Some(bytes), _) => format!("{} on disk", human_bytes(bytes)),
        (None, Some(bytes)) => format!("{} download", human_bytes(bytes)),
        (None, None) => "size unknown".to_owned(),
    };
    let Some(f) = &m.measured else { return size };
    let share = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"));
    let rss = f.rss_mib.map_or_else(|| "-".to_owned(), |v| format!("{v} MiB"));
    let ms = f.hybrid_ms_p50_100k.map_or_else(|| "-".to_owned(), |v| format!("{v:.1} ms"));
    format!(
        "{size}, RSS {rss}, {ms} at 100k; {}; coding {} (paraphrase {}, Spanish {}), held-out {}, LoCoMo {}",
        f.languages,
        share(f.coding_r5),
        share(f.paraphrase_r5),
        share(f.spanish_r5),
        share(f.heldout_r5),
        share(f.locomo_r10)
    )
}

fn use_model(env: &Env, name: &str) -> Result<()> {
    let spec = spec(name)?;
    let data_dir = &env.settings.data_dir.value;
    cairn_core::settings::ensure_data_dir(data_dir)?;
    let path = data_dir.join(cairn_core::settings::CONFIG_FILE);
    let previous = env.settings.model.value.clone();
    write_config_key(&path, "model", spec.id)?;
    let dir = match &env.settings.model_dir.source {
        Source::Default => cairn_core::settings::model_dir_for(data_dir, spec.id),
        _ => env.settings.model_dir.value.clone(),
    };
    let installed = cairn_embed::is_model_dir(&dir);
    if let Source::Env(var) = &env.settings.model.source {
        note(&format!("warning: {var} is set and overrides config.toml's model"));
    }
    if env.settings.model_dir.source != Source::Default {
        note(&format!(
            "warning: model_dir is set ({}): the model is read from {}, whatever its name",
            env.settings.model_dir.source,
            dir.display()
        ));
    }
    if env.settings.embedder.value != EmbedderKind::Local {
        note(&format!(
            "warning: the embedder is {:?} ({}): set embedder = \"local\" to search with a local model",
            env.settings.embedder.value, env.settings.embedder.source
        ));
    }
    if !installed {
        note(&format!("{} is not installed yet: cairn model install {}", spec.id, spec.id));
    }
    if previous != spec.id {
        note(&format!(
            "a running daemon takes up {} within seconds (one started later, at its start) and re-embeds every \
             memory with it in the background; search is lexical for the memories not yet embedded",
            spec.id
        ));
    }
    #[derive(Serialize)]
    struct Used {
        model: String,
        previous: String,
        config: String,
        dir: String,
        installed: bool,
    }
    let used = Used {
        model: spec.id.to_owned(),
        previous,
        config: path.display().to_string(),
        dir: dir.display().to_string(),
        installed,
    };
    env.emit(&used, |u| format!("model: {} (was {}), in {}", u.model, u.previous, u.config))
}

/// Set a top-level key of cairn's `config.toml`, keeping the rest of the file as it is
/// (comments, order); written to a temporary file, then renamed over.
fn write_config_key(path: &std::path::Path, key: &str, value: &str) -> Result<()> {
    let mut doc = crate::config_file::read(path)?;
    doc[key] = toml_edit::value(value);
    crate::config_file::write(path, &doc)
}

/// The model `cairn serve` installs at its start: the model in use, when the local embedder is
/// on, its directory is cairn's own (not one set with `model_dir` / `CAIRN_MODEL_DIR`, which
/// the user fills), its files are missing and cairn can download it. `None` otherwise, with a
/// word on stderr when only the download is missing.
pub fn model_to_install_at_start(settings: &cairn_core::settings::Settings) -> Option<&'static ModelSpec> {
    if settings.embedder.value != EmbedderKind::Local
        || settings.model_dir.source != Source::Default
        || cairn_embed::missing_file(&settings.model_dir.value).is_none()
    {
        return None;
    }
    let spec = install::spec(&settings.model.value)?;
    if !cfg!(feature = "remote") || (spec.files.is_empty() && spec.archive.is_none()) {
        note(&format!("semantic search is off: {} is not installed (cairn model install {0} --from DIR)", spec.id));
        return None;
    }
    Some(spec)
}

/// Install `spec` into `dest` on a thread of its own, saying so on stderr; the daemon's model
/// watch then takes it up and semantic search turns on. A failure is said, and search stays
/// lexical.
pub fn install_in_background(spec: &'static ModelSpec, dest: std::path::PathBuf, url: Option<String>) {
    note(&format!(
        "semantic search needs the embedding model {}: installing it now, in the background (search is by \
         words until it is there; `cairn serve --model-install never` skips this)",
        spec.id
    ));
    let spawned = std::thread::Builder::new().name("cairn-model-install".into()).spawn(move || {
        if let Some(parent) = dest.parent()
            && let Err(e) = std::fs::create_dir_all(parent)
        {
            note(&format!("could not install {}: {e}", spec.id));
            return;
        }
        let mut progress = Progress::on_stderr();
        match download(spec, url.as_deref(), &dest, &mut progress) {
            Ok(manifest) => note(&format!(
                "installed {} in {}; semantic search turns on (memories are embedded in the background)",
                manifest.id,
                dest.display()
            )),
            Err(e) => note(&format!(
                "could not install {}: {e:#}; search stays by words (retry: cairn model install {0})",
                spec.id
            )),
        }
    });
    if let Err(e) = spawned {
        note(&format!("could not start installing {}: {e}", spec.id));
    }
}

#[derive(Debug, Serialize)]
struct ModelStatus {
    embedder: String,
    /// The local model configured (`cairn model use`).
    name: String,
    /// Where that choice came from (`default (installed)`: an earlier default kept).
    name_source: String,
    model_dir: String,
    installed: bool,
    verified: Option<bool>,
    problem: Option<String>,
    model: Option<String>,
    semantic_search: Option<String>,
    embeddings_pending: Option<i64>,
    /// An earlier default kept in use: that the default changed and how to switch.
    note: Option<String>,
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
    let stats: Option<Stats> = env.call(StatsRequest).ok();
    // Opened as a file (no daemon), this process loads no model: the store's "off" then says
    // nothing about the model, which the daemon loads.
    let direct = env.client().is_ok_and(|c| c.connected_to() == "file");
    let semantic_search = stats.as_ref().map(|s| {
        if direct && installed {
            "not loaded here (no daemon runs; `cairn serve` loads it)".to_owned()
        } else {
            s.semantic_search.clone()
        }
    });
    let status = ModelStatus {
        embedder: format!("{:?}", env.settings.embedder.value).to_lowercase(),
        name: env.settings.model.value.clone(),
        name_source: env.settings.model.source.to_string(),
        model_dir: dir.display().to_string(),
        installed,
        verified,
        problem,
        model: stats.as_ref().and_then(|s| s.embedding_model.clone()),
        semantic_search,
        embeddings_pending: stats.as_ref().map(|s| s.embeddings_pending),
        note: env.settings.kept_model_note(),
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
    let mut text =
        format!("embedder:  {}\nmodel:     {} ({})\nmodel dir: {}\n", s.embedder, s.name, s.name_source, s.model_dir);
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
    if let Some(note) = &s.note {
        let _ = writeln!(text, "note:      {note}");
    }
    text
}

pub fn reindex(env: &Env, force: bool) -> Result<()> {
    let report: ReindexReport = env.call(ReindexRequest { force })?;
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
        let stats: Stats = env.call(StatsRequest)?;
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

#[cfg(test)]
mod tests {
    /// cairn-core says a model is installed by the files cairn-embed needs to load one.
    #[test]
    fn the_core_checks_the_files_the_embedder_needs() {
        assert_eq!(cairn_core::settings::MODEL_FILES, cairn_embed::REQUIRED_FILES);
        assert_eq!(cairn_core::settings::DEFAULT_MODEL, cairn_embed::install::DEFAULT_MODEL.id);
        for earlier in cairn_core::settings::EARLIER_DEFAULTS {
            assert!(cairn_embed::install::spec(earlier).is_some(), "{earlier} stays in the catalogue");
        }
    }
}

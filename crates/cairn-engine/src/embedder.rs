//! Building the embedder the settings ask for. Loading a local model takes a few hundred
//! milliseconds, so [`semantic`] names the model at once and loads it on a background thread:
//! nothing waits for it, and search is lexical until it is there. [`watch_model`] takes up a
//! model installed or chosen while the daemon runs.

use std::sync::Arc;
use std::time::Duration;

use cairn_core::search::semantic::{Semantic, embed_error};
use cairn_core::settings::{EmbedderConfig, EmbedderKind};
use cairn_core::{CairnError, ErrorCode, Result};
use cairn_embed::{Embedder, LocalModel};

use crate::Engine;

/// Semantic search for these settings, its model loading in the background; `None` when it
/// is switched off or cannot work (said once in the log, with what to do).
pub fn semantic(config: &EmbedderConfig) -> Option<Arc<Semantic>> {
    let model_id = match model_id(config) {
        Ok(Some(id)) => id,
        Ok(None) => return None,
        Err(e) => {
            tracing::warn!(error = %e.message, hint = e.hint.as_deref().unwrap_or(""), "semantic search is off; searching lexically");
            return None;
        }
    };
    let semantic = Semantic::pending(model_id);
    let config = config.clone();
    let loading = Arc::clone(&semantic);
    let spawned = std::thread::Builder::new().name("cairn-model-load".into()).spawn(move || {
        // Loading reads and repacks ~90 MB: never at the expense of the first requests.
        crate::workers::run_in_background();
        match build(&config) {
            Ok(embedder) => loading.set_embedder(embedder),
            Err(e) => {
                tracing::warn!(error = %e.message, "the embedding model did not load; searching lexically");
                loading.set_failed(e.message);
            }
        }
    });
    if let Err(e) = spawned {
        semantic.set_failed(format!("cannot start the model loader: {e}"));
    }
    Some(semantic)
}

/// How often the daemon reads its settings again to see whether the model changed.
pub const MODEL_WATCH_EVERY: Duration = Duration::from_secs(2);

/// Take up a model installed (`cairn model install`, or the daemon's own first install) or
/// chosen (`cairn model use`) while the daemon runs, without a restart: every
/// [`MODEL_WATCH_EVERY`], `current` gives the embedder the settings ask for now (config.toml
/// is read again; the environment is the daemon's); when its model's files are there and it is
/// not the model in use, it is loaded in the background and handed to the engine, which then
/// embeds every memory with it, newest first. A model that failed to load is tried again once
/// its files change (installed again over a broken copy), not at every turn. `false` when the
/// thread could not start.
pub fn watch_model(engine: &Arc<Engine>, current: impl Fn() -> Option<EmbedderConfig> + Send + 'static) -> bool {
    let db = Arc::downgrade(engine);
    let alive = engine.workers.alive();
    engine.workers.spawn_loop("cairn-model-watch", move || {
        // The files of the model last handed over: a failed load is retried when they differ.
        let mut handed_over: Option<Vec<FileStamp>> = None;
        while alive.get() {
            let waited = std::time::Instant::now();
            while alive.get() && waited.elapsed() < MODEL_WATCH_EVERY {
                std::thread::sleep(Duration::from_millis(100));
            }
            let Some(db) = db.upgrade() else { return };
            let Some(config) = current() else { continue };
            let Ok(Some(id)) = model_id(&config) else { continue };
            let stamps = file_stamps(&config);
            let wanted = match db.semantic() {
                None => true,
                Some(in_use) if in_use.model_id() != id => true,
                Some(in_use) => failed_to_load(&in_use) && handed_over.as_ref() != Some(&stamps),
            };
            if !wanted {
                continue;
            }
            let Some(semantic) = semantic(&config) else { continue };
            handed_over = Some(stamps);
            if let Err(e) = db.use_semantic(semantic) {
                tracing::warn!(error = %e.message, "could not take up the new model");
            }
        }
    })
}

/// A model file's name, length and modification time: enough to tell a copy installed again.
type FileStamp = (String, u64, Option<std::time::SystemTime>);

fn file_stamps(config: &EmbedderConfig) -> Vec<FileStamp> {
    if config.kind != EmbedderKind::Local {
        return Vec::new();
    }
    let stamp = |name: &str| {
        let meta = std::fs::metadata(config.model_dir.join(name)).ok();
        (name.to_owned(), meta.as_ref().map_or(0, std::fs::Metadata::len), meta.and_then(|m| m.modified().ok()))
    };
    cairn_embed::REQUIRED_FILES.iter().map(|name| stamp(name)).collect()
}

fn failed_to_load(semantic: &Semantic) -> bool {
    matches!(semantic.availability(), Err(cairn_core::search::semantic::Unavailable::NoModel(_)))
}

/// Semantic search with the model loaded now (the CLI without a daemon, `cairn eval`).
pub fn semantic_now(config: &EmbedderConfig) -> Result<Arc<Semantic>> {
    Ok(Semantic::new(build(config)?))
}

/// The id the configured model's vectors are stored under, without loading it (`None`: no
/// model configured, or its files are missing).
pub fn model_in_use(config: &EmbedderConfig) -> Option<String> {
    model_id(config).ok().flatten()
}

/// The id the configured model's vectors are stored under, without loading it.
fn model_id(config: &EmbedderConfig) -> Result<Option<String>> {
    match config.kind {
        EmbedderKind::None => Ok(None),
        EmbedderKind::Local => {
            if let Some(missing) = cairn_embed::missing_file(&config.model_dir) {
                return Err(CairnError::new(
                    ErrorCode::ModelMissing,
                    format!("no embedding model: {} is missing", missing.display()),
                )
                .with_hint("run `cairn model install` (or set CAIRN_EMBEDDER=none to silence this)"));
            }
            Ok(Some(cairn_embed::local_model_id(&config.model_dir)))
        }
        EmbedderKind::Http => Ok(Some(format!("http:{}", endpoint(config)?.1))),
    }
}

/// Load the configured embedder (blocking).
pub fn build(config: &EmbedderConfig) -> Result<Arc<dyn Embedder>> {
    match config.kind {
        EmbedderKind::None => Err(CairnError::new(ErrorCode::ModelMissing, "semantic search is switched off")
            .with_hint("unset CAIRN_EMBEDDER=none")),
        EmbedderKind::Local => {
            let model = LocalModel::load(&config.model_dir).map_err(|e| embed_error(&e))?;
            Ok(Arc::new(model))
        }
        EmbedderKind::Http => http_embedder(config),
    }
}

#[cfg(feature = "remote")]
fn http_embedder(config: &EmbedderConfig) -> Result<Arc<dyn Embedder>> {
    let (url, model) = endpoint(config)?;
    let limits = cairn_embed::http::HttpLimits {
        timeout: Duration::from_secs(config.timeout_secs),
        batch_size: config.batch_size,
    };
    let embedder = cairn_embed::http::HttpEmbedder::new(url, model, config.api_key.clone(), None, limits);
    Ok(Arc::new(embedder))
}

#[cfg(not(feature = "remote"))]
fn http_embedder(config: &EmbedderConfig) -> Result<Arc<dyn Embedder>> {
    endpoint(config)?;
    Err(CairnError::new(ErrorCode::InvalidConfig, "this cairn was built without the HTTP embedder")
        .with_hint("rebuild with the `remote` feature (on by default), or set CAIRN_EMBEDDER=local"))
}

fn endpoint(config: &EmbedderConfig) -> Result<(&str, &str)> {
    let url = config.url.as_deref().ok_or_else(|| {
        CairnError::new(ErrorCode::InvalidConfig, "CAIRN_EMBEDDER=http needs CAIRN_EMBED_URL")
            .with_hint("e.g. CAIRN_EMBED_URL=http://localhost:11434/v1 CAIRN_EMBED_MODEL=nomic-embed-text")
    })?;
    let model = config.model.as_deref().ok_or_else(|| {
        CairnError::new(ErrorCode::InvalidConfig, "CAIRN_EMBEDDER=http needs CAIRN_EMBED_MODEL")
            .with_hint("the model name the endpoint serves, e.g. nomic-embed-text or text-embedding-3-small")
    })?;
    Ok((url, model))
}

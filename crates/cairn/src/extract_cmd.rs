//! `cairn extract`: archived conversations turned into memories by the configured model, now
//! (through the daemon when one runs, else in this process); and the daemon's extraction
//! worker, started with the model `[llm]` names.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use cairn_core::extract::{ExtractionPolicy, Selection};
use cairn_core::settings::{CONFIG_FILE, LlmSettings};
use cairn_engine::Engine;
use cairn_llm::LlmProvider;

use crate::cli::ExtractArgs;
use crate::env::Env;
use crate::output::note;

/// How often the daemon's worker looks for conversations gone idle (the cooldown itself is
/// 15 s: a conversation is extracted within about 20 s of its last message).
const EXTRACT_EVERY: Duration = Duration::from_secs(5);
/// How long `cairn extract --wait` waits for the daemon's pass (a local model takes seconds
/// per conversation; an archive's backlog, much longer).
const WAIT_AT_MOST: Duration = Duration::from_secs(6 * 3600);

pub fn extract(env: &Env, args: ExtractArgs) -> Result<()> {
    let selection = match (args.session, args.all) {
        (Some(id), _) => Selection::Session(id),
        (None, _) => Selection::All,
    };
    let data_dir = env.settings.data_dir.value.clone();
    let open_model = || -> cairn_core::Result<Option<Box<dyn LlmProvider>>> {
        let settings = cairn_core::settings::load_llm(&data_dir);
        let opened = cairn_llm::config::open_from_env(&settings, &data_dir).map_err(cairn_core::CairnError::from)?;
        Ok(opened.map(|metered| Box::new(metered) as Box<dyn LlmProvider>))
    };
    let report = env.client()?.extract(&selection, args.wait, WAIT_AT_MOST, open_model)?;
    if let Some(report) = report {
        return env.emit(&report, cairn_render::people::extraction_report);
    }
    note("the daemon is extracting in the background; `cairn llm status` shows how it goes");
    env.emit(&serde_json::json!({"status": "started"}), |_| String::new())
}

/// The daemon's part: the worker that extracts conversations as they go idle, and the watcher
/// that keeps its model the one `[llm]` names: opened at start, and again whenever `cairn llm
/// use …` or `cairn llm off` rewrites config.toml, without a restart. With no model the worker
/// idles; a model that cannot be opened is logged, and everything else runs.
pub fn start_in_daemon(engine: &Arc<Engine>, data_dir: &Path) {
    engine.start_extraction(ExtractionPolicy::default(), EXTRACT_EVERY);
    let mut watch = LlmWatch::new(data_dir);
    if !engine.watch_llm(LLM_WATCH_EVERY, move |engine| watch.look(engine)) {
        tracing::warn!("extraction is off: could not start the model's watcher");
    }
}

/// How often the daemon looks whether `[llm]` changed: config.toml's modification time only,
/// the file read again when it moved.
const LLM_WATCH_EVERY: Duration = Duration::from_secs(2);
/// How often a model that could not be opened is tried again although config.toml did not move:
/// what it lacked may have come since (`cairn-llm-worker` built by `scripts/start` after `cairn
/// llm use local`, a key exported), and a running daemon takes it up without a restart.
const RETRY_FAILED_EVERY: Duration = Duration::from_secs(30);

/// The daemon's hold on `[llm]`: what the model in use was opened from, so that a look finding
/// the same settings opens nothing again (a local model is a second of loading and a GB).
struct LlmWatch {
    data_dir: PathBuf,
    /// config.toml's modification time at the last look (`Some(None)`: there was no file);
    /// `None` before the first look.
    seen: Option<Option<SystemTime>>,
    /// The settings the engine's model (or its absence) comes from.
    opened: Option<LlmSettings>,
    /// When the last opening failed, and why: tried again on the next change of the file even
    /// when the settings read the same (`cairn llm use local` installed the file they name),
    /// and every `RETRY_FAILED_EVERY` regardless.
    failed: Option<(Instant, String)>,
}

impl LlmWatch {
    fn new(data_dir: &Path) -> LlmWatch {
        LlmWatch { data_dir: data_dir.to_owned(), seen: None, opened: None, failed: None }
    }

    /// Whether this look reads `[llm]` again: config.toml moved, or the last opening failed
    /// long enough ago to try again.
    fn due(&self, modified: Option<SystemTime>, now: Instant) -> bool {
        let retry = self.failed.as_ref().is_some_and(|(at, _)| now.duration_since(*at) >= RETRY_FAILED_EVERY);
        self.seen != Some(modified) || retry
    }

    fn look(&mut self, engine: &Engine) {
        let modified = std::fs::metadata(self.data_dir.join(CONFIG_FILE)).and_then(|m| m.modified()).ok();
        if !self.due(modified, Instant::now()) {
            return;
        }
        self.seen = Some(modified);
        let settings = cairn_core::settings::load_llm(&self.data_dir);
        if self.opened.as_ref() == Some(&settings) && self.failed.is_none() {
            return;
        }
        let first = self.opened.is_none();
        let failed_before = self.failed.take().map(|(_, error)| error);
        match cairn_llm::config::open_from_env(&settings, &self.data_dir) {
            Ok(Some(model)) => {
                tracing::info!(provider = model.kind(), model = model.model(), "extraction: model ready");
                engine.set_llm(Some(Arc::new(model)));
            }
            Ok(None) => {
                if !first {
                    tracing::info!("extraction is off: [llm] provider = \"off\"");
                }
                engine.set_llm(None);
            }
            Err(e) => {
                let error = e.to_string();
                // Said once, not at every retry.
                if failed_before.as_deref() != Some(error.as_str()) {
                    tracing::warn!(%error, "extraction is off: the [llm] model could not be opened");
                }
                self.failed = Some((Instant::now(), error));
                engine.set_llm(None);
            }
        }
        self.opened = Some(settings);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A daemon whose model could not be opened (the worker not built yet) takes it up once it
    /// can be, without config.toml moving and without a restart; one that opened reads nothing
    /// again until the file moves.
    #[test]
    fn a_failed_opening_is_tried_again_after_a_while_and_a_good_one_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let mut watch = LlmWatch::new(dir.path());
        let (now, file_time) = (Instant::now(), Some(SystemTime::UNIX_EPOCH));
        assert!(watch.due(file_time, now), "the first look reads [llm]");
        watch.seen = Some(file_time);
        assert!(!watch.due(file_time, now + RETRY_FAILED_EVERY * 10), "opened and unchanged: nothing to do");
        assert!(watch.due(None, now), "the file moved (here: went away)");
        watch.failed = Some((now, "not configured: no cairn-llm-worker".into()));
        assert!(!watch.due(file_time, now + RETRY_FAILED_EVERY / 2), "not at every look");
        assert!(watch.due(file_time, now + RETRY_FAILED_EVERY), "tried again");
    }
}

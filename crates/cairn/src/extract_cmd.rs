//! `cairn extract`: archived conversations turned into memories by the configured model, now
//! (through the daemon when one runs, else in this process); and the daemon's extraction
//! worker, started with the model `[llm]` names.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use cairn_core::extract::{ExtractionPolicy, Selection};
use cairn_core::settings::Settings;
use cairn_engine::Engine;
use cairn_llm::LlmProvider;

use crate::cli::ExtractArgs;
use crate::output::note;
use crate::run::Env;

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

/// The daemon's part: the model `[llm]` names (opened on a background thread: a local model
/// takes seconds to load) and the worker that extracts conversations as they go idle. With no
/// model the worker idles; a model that cannot be opened is logged, and everything else runs.
pub fn start_in_daemon(engine: &Arc<Engine>, settings: &Settings, data_dir: &Path) {
    engine.start_extraction(ExtractionPolicy::default(), EXTRACT_EVERY);
    let (engine, llm, data_dir) = (Arc::clone(engine), settings.llm.clone(), data_dir.to_owned());
    let opened =
        std::thread::Builder::new().name("cairn-llm-open".into()).spawn(
            move || match cairn_llm::config::open_from_env(&llm, &data_dir) {
                Ok(Some(model)) => {
                    tracing::info!(provider = model.kind(), model = model.model(), "extraction: model ready");
                    engine.set_llm(Some(Arc::new(model)));
                }
                Ok(None) => tracing::debug!("extraction is off: no [llm] model"),
                Err(e) => tracing::warn!(error = %e, "extraction is off: the [llm] model could not be opened"),
            },
        );
    if let Err(e) = opened {
        tracing::warn!(error = %e, "extraction is off: could not start opening the model");
    }
}

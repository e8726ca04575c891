//! `cairn-eval`: retrieval quality of cairn's search as numbers, and the fitting of hybrid
//! search's re-ranking model. A developer tool (not shipped in the `cairn` binary): run it
//! from the repository root with `cargo run --release -p cairn-eval -- --help`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod crossfit;
mod eval;
mod extraction;
mod fit;
mod turns;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use cairn_core::CairnError;
use clap::Parser;

/// Score retrieval quality: recall@k and MRR of lexical, semantic and hybrid search on the
/// coding-memory set (`eval/coding-memory.json`) and LoCoMo.
#[derive(Debug, Parser)]
#[command(
    name = "cairn-eval",
    version,
    after_help = "Example: cargo run --release -p cairn-eval -- --sets coding,locomo --locomo locomo10.json --split dev",
    args_conflicts_with_subcommands = true
)]
pub struct EvalArgs {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Data directory: its settings choose the embedding model (as for `cairn`), and vectors
    /// are cached under `<DIR>/eval-vectors` [env: CAIRN_DATA_DIR]
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
    /// Data sets: coding (eval/coding-memory.json), heldout (eval/coding-heldout.json), locomo (needs --locomo)
    #[arg(long, value_delimiter = ',', default_value = "coding")]
    pub sets: Vec<String>,
    /// The coding-memory set file
    #[arg(long, value_name = "FILE", default_value = "eval/coding-memory.json")]
    pub coding_file: PathBuf,
    /// LoCoMo's locomo10.json (not in the repository; required by --sets locomo)
    #[arg(long = "locomo", alias = "locomo-file", value_name = "FILE", env = "CAIRN_LOCOMO")]
    pub locomo_file: Option<PathBuf>,
    /// Question split: dev, test or all (LoCoMo: conversations 0–4 dev, 5–9 test)
    #[arg(long, default_value = "all")]
    pub split: String,
    /// Modes to score, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "lexical,semantic,hybrid")]
    pub modes: Vec<String>,
    /// Only the first N LoCoMo conversations (each is one store)
    #[arg(long)]
    pub locomo_samples: Option<usize>,
    /// Skip the first N LoCoMo conversations (with --locomo-samples, a range of them: a quick
    /// look at a few test conversations, or a long embedding run taken in steps)
    #[arg(long, default_value_t = 0)]
    pub locomo_skip: usize,
    /// Print each missed question
    #[arg(long)]
    pub misses: bool,
    /// Also write each question's lexical and semantic rankings (top 100, with scores) and
    /// every memory's session and title to FILE as JSON lines, for studying the fusion offline
    #[arg(long, value_name = "FILE")]
    pub dump: Option<PathBuf>,
    /// The held-out coding set (`--sets heldout`): questions no fit or choice ever used
    #[arg(long, value_name = "FILE", default_value = "eval/coding-heldout.json")]
    pub heldout_file: PathBuf,
    /// Cross-fit the re-ranking: fit each recipe on the coding set's dev half, on LoCoMo's,
    /// and on both, and score every split of every set with each (use --split all and
    /// `--sets coding,locomo[,heldout]`); prints the comparison and the chosen recipe's constants
    #[arg(long)]
    pub cross_fit: bool,
    /// Fit hybrid search's re-ranking model on the questions of --split (use dev) and print
    /// its weights as the Rust constants of `cairn-core/src/search/rerank.rs`
    #[arg(long)]
    pub fit_rerank: bool,
    /// What a LoCoMo turn is embedded with (the stored and returned memory stays the turn):
    /// `shipped` (cairn's rule: the previous turn, for turns of at most 250 characters),
    /// `none` (the turn alone), `prev` (the previous turn, for every turn) or `around:N` (N
    /// turns before and N after it in its session, for every turn)
    #[arg(long, value_name = "CONTEXT", default_value = "shipped")]
    pub turn_context: String,
    /// Search with this cosine scale instead of the model's: `MIN,FLOOR`, the cosine below
    /// which a memory is no semantic candidate and the one above which it lends session
    /// context (how a new model's floors are chosen on the dev halves)
    #[arg(long, value_name = "MIN,FLOOR", value_parser = parse_cosine_scale)]
    pub cosine_scale: Option<cairn_core::search::rerank::CosineScale>,
    /// Score every stored vector exactly (f32) instead of a shortlist of the binary codes:
    /// the baseline the compact index is measured against
    #[arg(long)]
    pub exact_vectors: bool,
}

/// What else cairn-eval scores besides retrieval.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    Extraction(extraction::ExtractionArgs),
}

fn parse_cosine_scale(text: &str) -> Result<cairn_core::search::rerank::CosineScale, String> {
    let (min, floor) = text.split_once(',').ok_or("expected MIN,FLOOR, for example 0.75,0.8")?;
    let min: f32 = min.trim().parse().map_err(|e| format!("MIN: {e}"))?;
    let floor: f64 = floor.trim().parse().map_err(|e| format!("FLOOR: {e}"))?;
    if !(-1.0..=1.0).contains(&min) || !(-1.0..=1.0).contains(&floor) || f64::from(min) > floor {
        return Err("each is a cosine (-1 to 1), and MIN is at most FLOOR".into());
    }
    Ok(cairn_core::search::rerank::CosineScale { min_similarity: min, context_floor: floor })
}

/// Exit codes as `cairn`'s (docs/CLI.md "Exit codes"): 3 invalid input, 4 not found, …
fn main() -> ExitCode {
    let mut args = EvalArgs::parse();
    let (json, result) = match args.command.take() {
        Some(Command::Extraction(extraction)) => (extraction.json, extraction::run(&extraction)),
        None => (args.json, eval::run(args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => report(&err, json),
    }
}

fn report(err: &anyhow::Error, json: bool) -> ExitCode {
    let (code, message, hint, exit) = match err.downcast_ref::<CairnError>() {
        Some(e) => (e.code.as_str(), e.message.clone(), e.hint.clone(), e.code.exit_code()),
        None => ("internal", format!("{err:#}"), None, 1),
    };
    if json {
        println!("{}", serde_json::json!({ "error": { "code": code, "message": message, "hint": hint } }));
    }
    note(&format!("error[{code}]: {message}"));
    if let Some(hint) = hint {
        note(&format!("hint: {hint}"));
    }
    ExitCode::from(u8::try_from(exit).unwrap_or(1))
}

/// A line for people on stderr (progress, warnings, the fitted model).
pub fn note(text: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// The result on stdout: JSON, or text for people.
pub fn emit<T: serde::Serialize>(json: bool, value: &T, human: impl FnOnce(&T) -> String) -> anyhow::Result<()> {
    let text = if json { serde_json::to_string_pretty(value)? } else { human(value) };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", text.trim_end())?;
    Ok(stdout.flush()?)
}

#[cfg(test)]
mod tests {
    use super::parse_cosine_scale;

    #[test]
    fn a_cosine_scale_is_two_cosines_in_order() {
        let scale = parse_cosine_scale("0.75, 0.8").expect("valid");
        assert_eq!((scale.min_similarity, scale.context_floor), (0.75, 0.8));
        for (bad, why) in [
            ("0.8", "MIN,FLOOR"),
            ("x,0.8", "MIN:"),
            ("0.5,y", "FLOOR:"),
            ("0.9,0.8", "at most"),
            ("0.2,1.5", "cosine"),
        ] {
            let err = parse_cosine_scale(bad).expect_err(bad);
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}

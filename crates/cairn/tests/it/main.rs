//! The integration tests of the `cairn` binary: one test binary (link time dominates on small
//! machines), one module per area.
// A skipped test says why, and the load and crash proofs print their figures, on stderr.
#![allow(clippy::print_stderr)]

mod bounded;
mod cli;
mod codex_sessions;
mod concurrency;
mod crash;
mod daemon;
mod disk_full;
mod extract;
#[cfg(unix)]
mod git_sync;
mod hook;
#[cfg(feature = "hub")]
mod hub;
mod install;
#[cfg(unix)]
mod knowledge;
mod llm;
mod load;
mod mcp_fuzz;
mod mcp_stdio;
mod obsidian;
mod privacy;
#[cfg(feature = "hub")]
mod remote;
mod semantic;
mod setup;
mod setup_claude;
mod setup_codex;
mod setup_gemini_cursor;
mod setup_hosts;
mod setup_more_hosts;
mod soak;
mod spool;
mod support;

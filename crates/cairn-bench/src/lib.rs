//! cairn-bench: a seeded load and latency benchmark for any server that speaks engram's HTTP
//! API (cairn, engram). See README.md.

pub mod bench;
pub mod http;
pub mod mcp;
pub mod procs;
pub mod report;
pub mod rng;
pub mod stats;
pub mod vocab;
pub mod workload;

/// Progress and warnings, for people (stdout is the report).
#[allow(clippy::print_stderr)]
pub fn note(msg: &str) {
    eprintln!("{msg}");
}

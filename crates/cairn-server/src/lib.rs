//! cairn-server: the daemon (`cairn serve`) and the MCP server (`cairn mcp`), thin doors over
//! cairn-core.
//!
//! - [`db`]: the daemon's hold on the store (one writer, pooled readers).
//! - [`client`]: finding, starting and calling the daemon of a data dir.
//! - [`backend`]: run an operation here or in the daemon.

pub mod backend;
pub mod client;
pub mod db;
pub mod embedder;
pub mod http;
pub mod mcp;

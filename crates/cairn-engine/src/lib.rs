//! cairn-engine: the daemon's runtime over cairn-core. One [`Engine`] owns a store file: a
//! writer thread with group commit, pooled readers, the WAL checkpointer, the search-index
//! follower and builder, the background embedder and the conversation-history scanner
//! ([`history`]), all under one worker lifecycle
//! ([`workers`]: start, health, graceful stop). [`embedder`] builds the embedding model the
//! settings ask for.
//!
//! Doors (HTTP, MCP) and clients run operations through an engine; none of them opens the
//! database or starts a thread of its own.

pub mod autosync;
pub mod deep;
mod disk_use;
mod embed_lanes;
pub mod embedder;
mod engine;
pub mod extraction;
pub mod history;
pub mod hub_client;
pub mod judging;
pub mod retention;
pub mod workers;

pub use engine::Engine;

//! cairn-core: every rule of cairn. The doors (CLI, HTTP, MCP, hooks, plugins) parse input,
//! call one function here and render its result; none of them talks to SQLite.
//!
//! Map: [`agent`] (the agent protocol: project resolution, current project, session activity)
//! · [`store`] (SQLite, migrations) · [`memory`] (save / revise / dedupe / update / delete)
//! · [`sessions`] · [`prompts`] · [`search`] (engines, lexical BM25) · [`context`] · [`views`]
//! (timeline, stats) · [`transfer`] (export / import / engram import) · [`edge`] (file I/O: the Obsidian vault export) · [`project`] (identity)
//! · [`topic`] · [`text`] (redaction, limits, normalisation) · [`settings`] · [`doctor`] ·
//! [`error`] (the one error table).
//!
//! Feature `openapi`: the result types derive `utoipa::ToSchema`, so the daemon's OpenAPI
//! document is the served types themselves. Most `usize` counts are documented as `u64` (the
//! same JSON integer, with the `int64` format the document always gave them).

pub mod agent;
pub mod archived_sessions;
pub mod context;
pub mod disk_caps;
pub mod doctor;
pub mod edge;
pub mod event_id;
pub mod extract;
pub mod gc;
pub mod index;
pub mod memory;
pub mod model;
#[cfg(feature = "openapi")]
pub mod openapi;
pub mod ops;
pub mod owners;
pub mod passive;
pub mod privacy;
pub mod projects;
pub mod prompts;
pub mod redaction;
pub mod relations;
pub mod room;
pub mod search;
mod search_timing;
pub mod semantic;
pub mod sessions;
pub mod spool;
pub mod store;
pub mod sync;
pub mod topic;
pub mod transfer;
pub mod views;

/// The shared base, under the paths it always had here.
pub use cairn_base::{clock, context_window, error, lenient, project, settings, text};
/// The conversation-history archive, its own crate.
pub use cairn_history as history;
/// The vault export, at the edge, under the path it always had.
pub use edge::obsidian;
pub use error::{CairnError, ErrorCode, Result};
pub use owners::Core;
pub use store::Store;

/// Version of this build, reported by `/health` and `--version`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[cfg(test)]
mod context_tests;
#[cfg(test)]
mod file_graph_tests;
#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod history_ops_tests;
#[cfg(test)]
mod memory_tests;
#[cfg(test)]
mod module_graph_tests;
#[cfg(test)]
mod obsidian_tests;
#[cfg(test)]
mod plugin_rules_tests;
#[cfg(test)]
mod privacy_tests;
#[cfg(test)]
mod search_tests;
#[cfg(test)]
mod semantic_tests;
#[cfg(test)]
mod sql_boundary_tests;
#[cfg(test)]
mod sync_tests;
#[cfg(test)]
mod testutil;
#[cfg(test)]
mod transfer_tests;

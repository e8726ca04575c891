//! cairn-history: the conversation-history archive. Every OpenCode, Claude Code, Codex and
//! Gemini CLI session,
//! read strictly read-only from the hosts' own storage into one model and kept in `history.db`,
//! beside the memory store and sharing none of its rules: it builds on `cairn-base` only, and
//! `cairn-core` runs its ops (as `cairn_core::history`).

mod archive;
pub mod claude;
pub mod codex;
mod connection;
pub mod context_usage;
pub mod extraction;
pub mod gemini;
pub mod index;
mod indexed;
pub mod ingest;
pub mod injected;
mod jsonl;
pub mod model;
pub mod opencode;
pub mod plans;
pub mod prune;
pub mod query;
mod session_facts;
pub mod store;
mod text;
pub mod vacuum;

pub use archive::HistoryArchive;
pub use session_facts::ArchivedSession;
pub use store::{ApplyCounts, ApplyOutcome, HISTORY_DB_FILE, HistoryDb, SourceRef};

#[cfg(test)]
mod index_tests;
#[cfg(test)]
mod injected_tests;
#[cfg(test)]
mod plans_and_context_usage_tests;
#[cfg(test)]
mod test_sink;
#[cfg(test)]
mod tests;

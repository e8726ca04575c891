//! The conversation-history archive: every OpenCode and Claude Code session, read
//! strictly read-only from the hosts' own storage into one model and kept in `history.db`.

mod archive;
pub mod claude;
pub mod context_usage;
pub mod index;
pub mod ingest;
pub mod injected;
pub mod model;
pub mod opencode;
pub mod plans;
pub mod query;
pub mod store;
mod text;

pub use archive::HistoryArchive;
pub use store::{ApplyCounts, ApplyOutcome, HISTORY_DB_FILE, HistoryDb, SourceRef};

#[cfg(test)]
mod index_tests;
#[cfg(test)]
mod injected_tests;
#[cfg(test)]
mod plans_and_context_usage_tests;
#[cfg(test)]
mod project_tests;
#[cfg(test)]
mod test_sink;
#[cfg(test)]
mod tests;

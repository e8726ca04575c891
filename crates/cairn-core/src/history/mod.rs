//! The conversation-history archive (B3): every OpenCode and Claude Code session, read
//! strictly read-only from the hosts' own storage into one model and kept in `history.db`.

pub mod model;
pub mod query;
pub mod store;

pub use store::{ApplyCounts, ApplyOutcome, HISTORY_DB_FILE, HistoryDb, SourceRef};

#[cfg(test)]
mod tests;

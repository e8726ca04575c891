//! The conversation-history archive (B3): every OpenCode and Claude Code session, read
//! strictly read-only from the hosts' own storage into one model and kept in `history.db`.

pub mod claude;
pub mod ingest;
pub mod model;
pub mod opencode;
mod text;

#[cfg(test)]
mod test_sink;

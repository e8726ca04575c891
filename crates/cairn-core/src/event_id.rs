//! The id of one host event: a write sent with one runs at most once (a host's retry, a spooled
//! event met again), and [`crate::ops::EventOutcome::Duplicate`] names it.

use crate::error::{CairnError, Result};

/// A UUID v7 event id, lowercase and hyphenated: its text order is its time order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventId(String);

impl EventId {
    /// A new id, after every id this process made before.
    pub fn new() -> EventId {
        EventId(uuid::Uuid::now_v7().hyphenated().to_string())
    }

    /// Read an id sent by a door (`Idempotency-Key`) or found in a file name.
    pub fn parse(raw: &str) -> Result<EventId> {
        let uuid = uuid::Uuid::try_parse(raw.trim()).map_err(|_| {
            CairnError::invalid(format!("event id {raw:?} is not a UUID"))
                .with_hint("send a UUID v7 (time-ordered), e.g. 01890a5d-ac96-774b-bcce-b302099a8057")
        })?;
        if uuid.get_version_num() != 7 {
            return Err(CairnError::invalid(format!("event id {raw:?} is not a UUID v7"))
                .with_hint("event ids are UUID v7, so their order is their time order"));
        }
        Ok(EventId(uuid.hyphenated().to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for EventId {
    fn default() -> Self {
        EventId::new()
    }
}

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

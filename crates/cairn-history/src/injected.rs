//! Recognising the texts cairn puts into a conversation (the `[MEMORY]` block, the protocol,
//! the Session History guidance, the trigger and compaction notes, the save reminder, the
//! context meter) when they come back in a host's transcript, so the history archive can tell
//! them from what the user typed.
//!
//! A text is cairn's only when it starts with the exact leading line cairn writes: a text the
//! user edited there (or typed in the same words, with another first line) is the user's. The
//! archive also asks the host (OpenCode's `synthetic` part, Claude Code's hook context), so a
//! user who types `[MEMORY]` as the first line of a message still owns it.
//!
//! Every text this recognises is produced elsewhere (`protocol.rs`, `context/memory_block.rs`,
//! `context.rs`, `activity.rs`, `hooks.rs`); `agent/injected_tests.rs` builds each one from its
//! producer, so a changed leading line fails there instead of leaking into previews.

/// Which of cairn's injected texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Injection {
    /// The `[MEMORY]` block before a session's first message.
    MemoryBlock,
    /// The Memory Protocol (Claude Code's SessionStart and SubagentStart).
    Protocol,
    /// The "## Session History" guidance (the OpenCode plugin's first message).
    HistoryGuidance,
    /// The note added to a message that asks to remember something.
    Trigger,
    /// The note after a compaction that the summary is stored.
    CompactionNote,
    /// A sub-agent's note about its parent's history.
    Upstream,
    /// The project's recent memory (Claude Code's SessionStart).
    SessionContext,
    /// The save reminder.
    SaveReminder,
    /// The context meter line.
    ContextMeter,
}

/// Each kind by the exact text it starts with.
const LEADS: &[(&str, Injection)] = &[
    ("[MEMORY]\n", Injection::MemoryBlock),
    // the block of a project with nothing stored yet: one line
    ("[MEMORY] Nothing is stored", Injection::MemoryBlock),
    ("cairn is your persistent memory across sessions.\n", Injection::Protocol),
    ("cairn memory: maintenance tools.", Injection::Protocol),
    ("## Session History\n", Injection::HistoryGuidance),
    ("[MEMORY TRIGGER DETECTED] The user asked you to remember something.", Injection::Trigger),
    ("The summary of this compaction is stored in cairn automatically;", Injection::CompactionNote),
    ("**Upstream session ID: ", Injection::Upstream),
    ("## Memory from previous sessions\n", Injection::SessionContext),
    ("## Memory from previous sessions (project: ", Injection::SessionContext),
    ("(side note: nothing saved to memory for ", Injection::SaveReminder),
    ("🟡 Context: ", Injection::ContextMeter),
    ("🟠 Context: ", Injection::ContextMeter),
    ("🔴 Context: ", Injection::ContextMeter),
];

/// Which of cairn's texts `text` is, by its exact start; `None`: not cairn's.
pub fn cairn_injection(text: &str) -> Option<Injection> {
    // the common case (a user's message) decided on the first byte
    if !text.starts_with(['[', 'c', '#', 'T', '*', '(', '\u{1F7E1}', '\u{1F7E0}', '\u{1F534}']) {
        return None;
    }
    LEADS.iter().find(|(lead, _)| text.starts_with(lead)).map(|(_, kind)| *kind)
}

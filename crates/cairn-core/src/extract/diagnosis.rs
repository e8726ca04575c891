//! A bug's cause, as the agent found it, and its fix. An agent that finds a bug says so in a
//! few well-worn words ("Found it.", "That's the cause: …", "The problem is units. …", "There it
//! is: …") and then explains it; after the developer's go-ahead its next reply says what it
//! changed. A small local model often writes the developer's first guess, or a gloss of the
//! symptom, as the bug (on the extraction set's holdout17 to holdout29, 49 of the 111 facts
//! the recorded answers miss are bugs). The diagnosis needs no model: the memory is the
//! sentences from the one that says the cause was found, and the first sentences of the reply
//! that fixed it.
//!
//! Only the first such diagnosis of a window is read, and only when the agent says it found
//! the cause: a guess ("… usually means …", "smells like …") is no diagnosis.

use std::sync::LazyLock;

use cairn_llm::Role;
use cairn_llm::extract::TranscriptMessage;
use regex::Regex;

use super::directives::every_sentence;
use super::{Extracted, Origin};

/// The type a diagnosis is saved with.
const DIAGNOSIS_TYPE: &str = "bugfix";
/// Sentences of the diagnosis kept, counting the one that says it was found.
const DIAGNOSIS_SENTENCES: usize = 3;
/// Sentences of the fix's reply kept.
const FIX_SENTENCES: usize = 2;
/// A diagnosis is a few sentences; a longer passage is a report.
const MAX_DIAGNOSIS_BYTES: usize = 900;
/// Words a sentence that only says the cause was found may have beside it: "Ah, found it.",
/// "OK, that's the cause."
const FILLER: &[&str] = &["ah", "oh", "ok", "okay", "right", "so", "yes", "and", "well", "good", "great", "aha"];

/// Words that say the cause was found: "Found it.", "That's the bug.", "There's the problem:
/// …", "The problem is units.", "That explains it.", "None of it, as it turns out."
static FOUND_IT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(the (real |root )?(problem|cause|culprit|bug|issue) (is|was)\b|that's (the whole story|why|what|it\b|the (cause|bug|problem|culprit)|how)|that explains it|there's the (problem|bug|cause|culprit)|there it is|turns out|found it)",
    )
    .expect("a valid pattern")
});

/// A sentence that says the agent is still looking: "Let me look at the log.", "I'll check the
/// decoder next."
static STILL_LOOKING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(let me|let's|i'll (check|look|see)|i will (check|look)|next,? i'll)\b").expect("a valid pattern")
});

/// The first diagnosis the agent gives in `messages`, with its fix, as one memory (see the
/// module), or none.
pub(crate) fn diagnoses(messages: &[TranscriptMessage]) -> Vec<Extracted> {
    let first_developer = messages.iter().position(|m| m.role == Role::User);
    let Some(first_developer) = first_developer else { return Vec::new() };
    let found = messages.iter().enumerate().skip(first_developer + 1).find_map(|(at, m)| {
        (m.role == Role::Assistant).then(|| diagnosis_in(&m.text).map(|said| (at, said))).flatten()
    });
    let Some((at, diagnosis)) = found else { return Vec::new() };
    let mut message_ids = vec![messages[at].id.clone()];
    let mut content = within_budget(String::new(), &diagnosis);
    if let Some((fix_id, fix)) = fix_after(messages, at) {
        let with_fix = within_budget(content.clone(), &fix);
        if with_fix.len() > content.len() {
            message_ids.push(fix_id);
            content = with_fix;
        }
    }
    if content.is_empty() || content.contains(crate::text::REDACTED) || cairn_llm::extract::is_noise(&content) {
        return Vec::new();
    }
    vec![Extracted {
        origin: Origin::Diagnosis,
        kind: DIAGNOSIS_TYPE.to_owned(),
        title: super::directives::title(&content),
        content,
        message_ids,
        topic_key: None,
    }]
}

/// What a reply says in words: no code block, and no note of a tool it ran (`(ran edit:
/// dvc.yaml)`, a line of its own in the extraction transcript).
fn prose_of(text: &str) -> String {
    crate::text::without_code_blocks(text, "\n")
        .lines()
        .filter(|line| !cairn_llm::extract::is_tool_note(line.trim_start()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `sentences` added to `content` in order, while it stays within `MAX_DIAGNOSIS_BYTES`.
fn within_budget(mut content: String, sentences: &[String]) -> String {
    for sentence in sentences {
        if content.len() + 1 + sentence.len() > MAX_DIAGNOSIS_BYTES {
            break;
        }
        if !content.is_empty() {
            content.push(' ');
        }
        content.push_str(sentence);
    }
    content
}

/// The sentences of a reply from the one that says the cause was found, that one left out when
/// it says nothing else.
fn diagnosis_in(text: &str) -> Option<Vec<String>> {
    let sentences = every_sentence(&prose_of(text));
    let found = sentences.iter().position(|s| FOUND_IT.is_match(s))?;
    let said = &sentences[found..sentences.len().min(found + DIAGNOSIS_SENTENCES)];
    // "… the problem is between the decoder and the map. Let me look at its log.": still looking.
    if said.iter().any(|s| STILL_LOOKING.is_match(s)) {
        return None;
    }
    let kept: Vec<String> =
        said.iter().enumerate().filter(|(nth, s)| *nth > 0 || !says_only_found(s)).map(|(_, s)| s.clone()).collect();
    (!kept.is_empty()).then_some(kept)
}

/// Whether `sentence` says the cause was found and nothing else ("Found it.", "That's the
/// cause."; not "The problem is units."): it is left out of the memory.
fn says_only_found(sentence: &str) -> bool {
    FOUND_IT
        .replace_all(sentence, "")
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .all(|w| FILLER.contains(&w.to_lowercase().as_str()))
}

/// The first sentences of the agent's first reply after the developer's next message: what it
/// changed.
fn fix_after(messages: &[TranscriptMessage], diagnosed_at: usize) -> Option<(String, Vec<String>)> {
    let go_ahead = diagnosed_at + 1 + messages[diagnosed_at + 1..].iter().position(|m| m.role == Role::User)?;
    messages[go_ahead + 1..].iter().take_while(|m| m.role == Role::Assistant).find_map(|reply| {
        let first: Vec<String> = every_sentence(&prose_of(&reply.text)).into_iter().take(FIX_SENTENCES).collect();
        (!first.is_empty()).then(|| (reply.id.clone(), first))
    })
}

#[cfg(test)]
#[path = "diagnosis_tests.rs"]
mod tests;

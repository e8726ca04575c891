//! A bug's cause, as the agent found it, and its fix. An agent that finds a bug says so in a
//! few well-worn words ("Found it.", "That's the cause: …", "The problem is units. …", "There it
//! is: …") and then explains it; after the developer's go-ahead its next reply says what it
//! changed. A small local model often writes the developer's first guess, or a gloss of the
//! symptom, as the bug (on the extraction set's holdout17 to holdout29, 49 of the 111 facts
//! the recorded answers miss are bugs). The diagnosis needs no model: the memory is the
//! sentences from the one that says the cause was found, the change the same reply says it
//! made, and the first sentences of the reply that fixed it after the developer's go-ahead.
//!
//! Only the first such diagnosis of a window is read, and only when the agent says it found
//! the cause: a guess ("… usually means …", "smells like …") is no diagnosis. A window where
//! the agent never says so may still hold one told the other common way: a reply that opens by
//! ruling out the suspect the developer named ("Not the cache: …", "The export is fine; the
//! plugin picks the wrong part.", "Nobody deleted them: …") and goes on to the cause.

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
/// …", "The problem is units.", "The trouble is that …", "That explains it.", "None of it, as it
/// turns out."
static FOUND_IT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(the (real |root )?(problem|cause|culprit|bug|issue|trouble|fault) (is|was)\b|that's (the whole story|why|what|it\b|the (cause|bug|problem|culprit)|how)|that explains it|there's the (problem|bug|cause|culprit)|there it is|turns out|found it)",
    )
    .expect("a valid pattern")
});

/// A reply's first sentence that rules out a suspect: "It isn't the cache: …", "Not Python.",
/// "The SSD is healthy, …", "The relay isn't the problem.", "No image updater involved.",
/// "Nobody deleted them: …", "Rounding isn't it: …", "…, so it isn't the retrain." The
/// `suspect` is checked apart (`JUDGEMENTS`): "It's not a good idea." rules out nothing.
static RULED_OUT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?ix)
        ^(?:(?:so|ok|okay|right|well),?\s)?(?:
            (?:it|that|this)(?:'s|\sis|\swas)?\s(?:not|isn't|wasn't)\s(?:the\s|a\s|an\s|\w+'s\s)?(?P<suspect>[\w-]+)
          | not\s(?:the\s|a\s|an\s|\w+'s\s)?(?P<named>[\w-]+)(?:\s[\w-]+)?\s*[:;,.]
          | (?:the|your|our)\s[\w'\s-]{1,30}?(?:\sis|\sare|\swas|\swere|'s)\s(?:fine|clean|healthy|innocent|intact)\b
          | (?:the|your|our)\s[\w'\s-]{1,30}?\s(?:isn't|aren't|wasn't|weren't)\sthe\s(?:problem|cause|culprit|issue)\b
          | no\s[\w'\s-]{1,30}?\s(?:at\sall|involved)\b
          | nobody\s\w+\s(?:it|them)\b
          | [\w'\s-]{1,30}\sisn't\sit\b
        )
        | \bso\s(?:it|that)(?:'s|\sis)?\s(?:not|isn't)\s(?:the|it)\b",
    )
    .expect("a valid pattern")
});

/// Words after "it's not" or "not" that judge an idea rather than rule out a suspect: "It's
/// not a good idea.", "Not yet."
const JUDGEMENTS: &[&str] = &[
    "good",
    "bad",
    "possible",
    "necessary",
    "worth",
    "needed",
    "enough",
    "safe",
    "supported",
    "wise",
    "quite",
    "yet",
    "so",
    "too",
    "very",
    "really",
    "sure",
    "much",
    "only",
    "all",
];

/// A developer's question that asks for an answer ("What's the threshold now?", "Is that a big
/// change?"), not for the work ("Can you fix both?").
static ASKS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:(?:so|ok|okay|and|but|now|next|oh|right|also),?\s)*(?:what|how|when|where|which|who|why|is|are|does|do|did|was|were|has|have|should)\b",
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
    let replies = || messages.iter().enumerate().skip(first_developer + 1).filter(|(_, m)| m.role == Role::Assistant);
    let found = replies()
        .find_map(|(at, m)| diagnosis_in(&m.text).map(|said| (at, said)))
        .or_else(|| replies().find_map(|(at, m)| ruled_out_in(&m.text).map(|said| (at, said))));
    let Some((at, diagnosis)) = found else { return Vec::new() };
    let mut message_ids = vec![messages[at].id.clone()];
    let mut content = within_budget(String::new(), &diagnosis);
    content = within_budget(content, &change_in_same_reply(&messages[at].text, &diagnosis));
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
    vec![Extracted::said(Origin::Diagnosis, DIAGNOSIS_TYPE, content, message_ids)]
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

/// The first sentences of a reply that opens by ruling out a suspect and goes on to say more:
/// the opener alone ("The database is fine: every connection still says what it said.") names
/// no cause.
fn ruled_out_in(text: &str) -> Option<Vec<String>> {
    let sentences = every_sentence(&prose_of(text));
    if sentences.len() < 2 || !rules_out_a_suspect(&sentences[0]) {
        return None;
    }
    let said = &sentences[..sentences.len().min(DIAGNOSIS_SENTENCES)];
    (!said.iter().any(|s| STILL_LOOKING.is_match(s))).then(|| said.to_vec())
}

/// Whether `opener` rules out a suspect (`RULED_OUT`), not an idea (`JUDGEMENTS`).
fn rules_out_a_suspect(opener: &str) -> bool {
    let Some(found) = RULED_OUT.captures(opener) else { return false };
    let suspect = found.name("suspect").or_else(|| found.name("named"));
    suspect.is_none_or(|word| !JUDGEMENTS.contains(&word.as_str().to_lowercase().as_str()))
}

/// Whether the developer's `message` asks a question of its own (`ASKS`).
fn asks_something_else(message: &str) -> bool {
    every_sentence(message).iter().any(|s| s.trim_end().ends_with('?') && ASKS.is_match(s.trim_start()))
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

/// Sentences that say what the agent changed: "I've made TouchInput map every touch …", "The
/// press is now handled once, …".
static CHANGED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^(?:(?:so|and|now|then|instead),?\s)?(?:i've|i have|we've)\s(?:\w+\s){0,2}?(?:changed|made|moved|added|removed|set|put|fixed|replaced|switched|taken|rewritten|wrapped|swapped|dropped|turned|given|pinned|raised|lowered|cleared|deleted|reverted|patched|renamed|split|limited|capped|increased|reduced|disabled|enabled|corrected|updated)\b|\b(?:is|are) now\b",
    )
    .expect("a valid pattern")
});

/// The sentences of the diagnosing reply, after the `diagnosis` kept from it, from the first
/// one that says what the agent changed (`CHANGED`): the fix, when the agent made it before
/// the developer answered. Without it a diagnosis often named the cause and not the fix; on
/// holdout17 to holdout33's recorded answers (tuning data) it found 6 more facts and wrote 11
/// fewer wrong memories.
fn change_in_same_reply(text: &str, diagnosis: &[String]) -> Vec<String> {
    let sentences = every_sentence(&prose_of(text));
    let Some(last) = diagnosis.last() else { return Vec::new() };
    let Some(after) = sentences.iter().position(|s| s == last) else { return Vec::new() };
    let rest = &sentences[after + 1..];
    let Some(change) = rest.iter().position(|s| CHANGED.is_match(s)) else { return Vec::new() };
    rest[change..].iter().take(FIX_SENTENCES).cloned().collect()
}

/// The first sentences of the agent's first reply after the developer's next message: what it
/// changed. When that message asks something else ("Thanks! How fast can a winch go?"), the
/// reply answers it, and is no fix: it is left out (a stale "max_speed = 400" once rode along).
fn fix_after(messages: &[TranscriptMessage], diagnosed_at: usize) -> Option<(String, Vec<String>)> {
    let go_ahead = diagnosed_at + 1 + messages[diagnosed_at + 1..].iter().position(|m| m.role == Role::User)?;
    if asks_something_else(&messages[go_ahead].text) {
        return None;
    }
    messages[go_ahead + 1..].iter().take_while(|m| m.role == Role::Assistant).find_map(|reply| {
        let first: Vec<String> = every_sentence(&prose_of(&reply.text)).into_iter().take(FIX_SENTENCES).collect();
        (!first.is_empty()).then(|| (reply.id.clone(), first))
    })
}

#[cfg(test)]
#[path = "diagnosis_tests.rs"]
mod tests;

//! A suggestion the developer turned down, in their words. Someone asks for a change ("Dad asked
//! if I'd make it for iPhone.", "Kieran keeps on at me to put Stripe on the shop.", "The
//! examiner suggested we move to an online accounting package."), the developer says no in a
//! sentence of its own ("No.", "I'm not having it.", "I've decided no.") and then says why, or
//! what stays. A small local model passes over such a decision, or writes the suggestion as if
//! it were taken (on the extraction set's holdout17 to holdout31, 24 of the 79 facts the
//! recorded answers missed were decisions, most of them said this way). It needs no model: the
//! memory is the suggestion, the refusal and the two sentences after it.

use std::sync::LazyLock;

use cairn_llm::Role;
use cairn_llm::extract::TranscriptMessage;
use regex::Regex;

use super::directives::{TURNS_TO_SOMETHING_ELSE, every_sentence};
use super::{Extracted, Origin};

/// The type a refusal is saved with.
const REFUSAL_TYPE: &str = "decision";
/// Sentences kept after the refusal: why, or what stays.
const REASON_SENTENCES: usize = 2;
/// A refusal is a few sentences; a longer passage is a story.
const MAX_REFUSAL_BYTES: usize = 500;

/// A sentence that says no and nothing else: "No.", "No then.", "I'm not having it.", "We're not
/// doing it.", "We're not.", "I'm saying no.", "I've decided no.", "No, we're not doing plate
/// recognition."
static REFUSES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)^((and|so|but|well|then|ok|okay),?\s+)*(no(\s+then)?|no,\s+(we're|we are|i'm|i am)\s+not\b.*|(i'm|i am|we're|we are)\s+not(\s+(having|doing|going\s+to\s+do)\s+(it|that|this))?|(i'm|i am|we're|we are)\s+saying\s+no|i've\s+decided\s+no|not\s+a\s+chance|absolutely\s+not|definitely\s+not)\s*[.!]*$",
    )
    .expect("a valid pattern")
});

/// A sentence that reports a suggestion: "… asked if we could …", "… wants us to …", "…
/// suggested we move …", "… keeps on at me to …", "… keeps emailing us to use it …", "… offered
/// to take the journal …".
static SUGGESTED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(asked|asks|asking|wants|wanted|suggested|suggests|keeps\s+(on\s+at\s+me|pushing|asking|telling|sending|emailing|nagging|ringing|on)|offered|thinks\s+we\s+should|pushing|would\s+like|proposed)\b",
    )
    .expect("a valid pattern")
});

/// A sentence that closes the conversation, no reason: "Thanks very much.", "Cheers."
static SIGNS_OFF: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^(thanks|thank you|cheers|ta|bye|right,? i'm off)\b").expect("a valid pattern"));

/// Whether `text` only says no ("I'm saying no.", "No."): a memory that says only that tells
/// nothing of what was turned down (a small model copies such a sentence as a decision).
pub(crate) fn only_says_no(text: &str) -> bool {
    REFUSES.is_match(text.trim())
}

/// The suggestions the developer turned down in the users' messages of `messages`, one memory
/// each, in order.
pub(crate) fn refusals(messages: &[TranscriptMessage]) -> Vec<Extracted> {
    messages
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| refusals_in(&m.text).into_iter().map(|said| memory(said, &m.id)))
        .collect()
}

/// The refusals one message says (see the module).
fn refusals_in(text: &str) -> Vec<String> {
    let sentences = every_sentence(&crate::text::without_code_blocks(text, "\n"));
    (1..sentences.len())
        .filter(|&at| REFUSES.is_match(&sentences[at]) && SUGGESTED.is_match(&sentences[at - 1]))
        .map(|at| told_with_its_reason(&sentences[at - 1..]))
        .filter(|said| {
            said.len() <= MAX_REFUSAL_BYTES
                && !said.contains(crate::text::REDACTED)
                && !cairn_llm::extract::is_noise(said)
        })
        .collect()
}

/// The suggestion and the refusal, with the sentences after them that say why, up to a
/// question, a turn to something else ("Next: …") or a sign-off ("Thanks very much.").
fn told_with_its_reason(from_suggestion: &[String]) -> String {
    let reasons = from_suggestion[2..]
        .iter()
        .take(REASON_SENTENCES)
        .take_while(|s| !s.ends_with('?') && !TURNS_TO_SOMETHING_ELSE.is_match(s) && !SIGNS_OFF.is_match(s));
    from_suggestion[..2].iter().chain(reasons).map(String::as_str).collect::<Vec<_>>().join(" ")
}

fn memory(said: String, message_id: &str) -> Extracted {
    Extracted::said(Origin::Refusal, REFUSAL_TYPE, said, vec![message_id.to_owned()])
}

#[cfg(test)]
#[path = "refusals_tests.rs"]
mod tests;

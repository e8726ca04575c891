//! Values the developer set, as the agent confirmed them. A developer sets a value in a few
//! words, often in answer to the agent's question ("Make it 21 days.", "12 per page.", "Seven
//! years."), and the agent's reply names the setting: "OVERDUE_DAYS is now 21, so …",
//! "pagination per_page is 12 now.", "Camping pitches is 160." A small local model passes over
//! such short exchanges (on the extraction set's holdout17 to holdout22 it wrote none of eleven
//! settings this reads); they need no model: the reply's first sentence is the memory.
//!
//! A developer's message sets a value when its last sentence is no question, is at most
//! `MAX_SETTING_WORDS` words long and names a number (in digits, or a word from one to a
//! hundred), or when one of its sentences sets one ("Make the minimum 40, and if a name still
//! doesn't fit …"). The memory is the first sentence of the agent's reply (a message of that
//! turn) that names one of those numbers and the setting: by its name in the code
//! (`snake_case`, `camelCase`, `PascalCase`, `dotted.key` or `name=value`), or, in a short
//! sentence, by a few words before `is` and the value ("Camping pitches is 160."). "Set both to
//! 14." and "It is 14 now." name no setting, and are left to the model. It is not kept when the
//! value did not last:
//! - the developer's next message sets a value again ("Hmm, no, people wait weeks already. 20
//!   then.") or names it again beside another ("10 is unfair on the big dogs. 12 for the
//!   Open");
//! - a later reply names the same setting, by its name in the code, with other numbers only (it
//!   was changed again);
//! - it names a value the developer took back (`taken_back`).

use std::collections::HashSet;
use std::sync::LazyLock;

use cairn_llm::Role;
use cairn_llm::extract::TranscriptMessage;
use regex::Regex;

use super::directives::every_sentence as sentences;
use super::taken_back::{names_a_value_taken_back, numbers, values_set};
use super::{Extracted, Origin};

/// The type a setting is saved with.
const SETTING_TYPE: &str = "config";
/// A sentence that sets a value is short: "Lower the threshold to 25.", "14 daily please."
const MAX_SETTING_WORDS: usize = 8;
/// A sentence that sets a value again, in the next message, may be this short with no word
/// that sets ("20 then" has one; "30." has none).
const MAX_BARE_SETTING_WORDS: usize = 6;
/// A confirmation is a sentence; a longer one is an explanation, not a setting's new value.
const MAX_SETTING_BYTES: usize = 300;
/// A setting named in words, not as the code names it, is read only in a sentence this short:
/// "Camping pitches is 160." A longer one is about more than the setting.
const MAX_WORDS_NAMED_IN_WORDS: usize = 12;
/// Numbers a developer says in words ("Seven years.", "Make it four."), and their digits.
const NUMBER_WORDS: &[(&str, &str)] = &[
    ("one", "1"),
    ("two", "2"),
    ("three", "3"),
    ("four", "4"),
    ("five", "5"),
    ("six", "6"),
    ("seven", "7"),
    ("eight", "8"),
    ("nine", "9"),
    ("ten", "10"),
    ("eleven", "11"),
    ("twelve", "12"),
    ("fifteen", "15"),
    ("twenty", "20"),
    ("thirty", "30"),
    ("forty", "40"),
    ("fifty", "50"),
    ("sixty", "60"),
    ("ninety", "90"),
    ("hundred", "100"),
];

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid setting pattern")
}

/// A setting named as the code names it: `OVERDUE_DAYS`, `maxLessonsPerPonyPerDay`,
/// `HighLevel`, `preferences.text_cps`, `timeout=15`. Words with no such shape ("the
/// threshold") name a setting only in a short sentence (`NAMED_IN_WORDS`).
static SETTING_NAME: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"\b(?P<name>[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9]|[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|[a-z][a-z0-9]+\.[A-Za-z_][A-Za-z0-9_.]*[A-Za-z0-9])\b|\b(?P<assigned>[A-Za-z]\w*)=\S",
    )
});
/// A setting named in words, in a short sentence: a few words, then `is` or `are` and the value
/// ("Camping pitches is 160.", "Open is 12 minutes now", "The HighLevel setpoint is 85%"). A
/// pronoun is no name ("It is 14 now.", "That's 3.").
static NAMED_IN_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)^(?:(?:done|ok|okay|right)[,:.]?\s+)?(?P<name>(?:[\w'-]+\s+){1,4})(?:is|are)\s+(?:now\s+)?(?:set\s+to\s+|at\s+)?[£$€]?(?P<value>\d+(?:\.\d+)?)",
    )
});
/// Words that name no setting, opening what `NAMED_IN_WORDS` would take for its name.
const PRONOUNS: &[&str] = &["it", "that", "this", "which", "there", "he", "she", "they", "we", "i", "what", "who"];
/// Words that set a value: "make it 10", "put it at 250", "go -18 then", "halve it again, 400".
static SETS: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)\b(make|put|set|go|change|lower|raise|bump|drop|halve|double|back to|then|instead)\b")
});

/// The settings `messages` show the developer choosing, one memory each, in order.
pub(crate) fn settings(messages: &[TranscriptMessage]) -> Vec<Extracted> {
    let developer: Vec<usize> = (0..messages.len()).filter(|&at| messages[at].role == Role::User).collect();
    let mut out = Vec::new();
    for (nth, &at) in developer.iter().enumerate() {
        let values = values_chosen(&messages[at].text);
        if values.is_empty() {
            continue;
        }
        let next = developer.get(nth + 1).copied();
        if next.is_some_and(|next| sets_again(&messages[next].text, &values)) {
            continue;
        }
        let turn = &messages[at + 1..next.unwrap_or(messages.len())];
        let Some((reply, sentence, names)) = confirmation(turn, &values) else { continue };
        let later = &messages[next.unwrap_or(messages.len())..];
        if changed_again(later, &names, &values) || names_a_value_taken_back(&sentence, messages) {
            continue;
        }
        out.push(memory(sentence, &messages[at].id, &reply.id));
    }
    out
}

/// The numbers a developer's message sets (see the module), or none.
fn values_chosen(text: &str) -> Vec<String> {
    let mut values: Vec<String> = values_set(text).into_iter().map(|n| n.value).collect();
    if let Some(last) = sentences(text).pop()
        && !last.ends_with('?')
        && last.split_whitespace().count() <= MAX_SETTING_WORDS
    {
        values.extend(numbers_said(&last));
    }
    values.sort();
    values.dedup();
    values
}

/// The numbers of `text`, in digits or in words, as digits.
fn numbers_said(text: &str) -> Vec<String> {
    let in_words = text.split(|c: char| !c.is_alphabetic()).filter_map(|word| {
        let word = word.to_lowercase();
        NUMBER_WORDS.iter().find(|(said, _)| *said == word).map(|(_, digits)| (*digits).to_owned())
    });
    numbers(text).into_iter().map(|n| n.value).chain(in_words).collect()
}

/// Whether the developer's next message sets a value again, or names one of `values` again
/// beside another number: the value set before did not last.
fn sets_again(text: &str, values: &[String]) -> bool {
    let named = numbers_said(text);
    let named_again = named.iter().any(|n| values.contains(n)) && named.iter().any(|n| !values.contains(n));
    named_again
        || !values_chosen(text).is_empty()
        || sentences(text).iter().filter(|s| !s.ends_with('?')).any(|s| {
            !numbers(s).is_empty() && (SETS.is_match(s) || s.split_whitespace().count() <= MAX_BARE_SETTING_WORDS)
        })
}

/// The first reply of `turn` whose first sentence names one of `values` and a setting: the
/// reply, the sentence and the settings it names by their names in the code (none when it
/// names one in words).
fn confirmation<'a>(
    turn: &'a [TranscriptMessage],
    values: &[String],
) -> Option<(&'a TranscriptMessage, String, HashSet<String>)> {
    turn.iter().filter(|m| m.role == Role::Assistant).find_map(|reply| {
        let first = sentences(&reply.text).into_iter().next()?;
        let names = setting_names(&first);
        let confirms = (!names.is_empty() || names_in_words(&first, values))
            && first.len() <= MAX_SETTING_BYTES
            && !first.contains(crate::text::REDACTED)
            && !cairn_llm::extract::is_noise(&first)
            && numbers(&first).iter().any(|n| values.contains(&n.value));
        confirms.then_some((reply, first, names))
    })
}

/// Whether a short `sentence` names a setting in words and gives it one of `values`
/// (`NAMED_IN_WORDS`).
fn names_in_words(sentence: &str, values: &[String]) -> bool {
    sentence.split_whitespace().count() <= MAX_WORDS_NAMED_IN_WORDS
        && NAMED_IN_WORDS.captures(sentence).is_some_and(|c| {
            let opening = c["name"].split_whitespace().next().unwrap_or_default().to_lowercase();
            values.contains(&c["value"].to_owned()) && !PRONOUNS.contains(&opening.as_str())
        })
}

/// Whether a later reply names one of `names` with numbers, none of them one of `values`.
fn changed_again(later: &[TranscriptMessage], names: &HashSet<String>, values: &[String]) -> bool {
    later.iter().filter(|m| m.role == Role::Assistant).flat_map(|m| sentences(&m.text)).any(|sentence| {
        let said = numbers(&sentence);
        !said.is_empty()
            && !setting_names(&sentence).is_disjoint(names)
            && !said.iter().any(|n| values.contains(&n.value))
    })
}

/// The settings a sentence names (`SETTING_NAME`), lowercased.
fn setting_names(sentence: &str) -> HashSet<String> {
    SETTING_NAME
        .captures_iter(sentence)
        .filter_map(|c| c.name("name").or_else(|| c.name("assigned")))
        .map(|m| m.as_str().to_lowercase())
        .collect()
}

fn memory(sentence: String, set_in: &str, confirmed_in: &str) -> Extracted {
    Extracted {
        origin: Origin::Setting,
        kind: SETTING_TYPE.to_owned(),
        title: super::directives::title(&sentence),
        content: sentence,
        message_ids: vec![set_in.to_owned(), confirmed_in.to_owned()],
        topic_key: None,
    }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;

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
//! (`snake_case`, `camelCase`, `PascalCase`, `dotted.key`, `name=value`, or a config key
//! opening the sentence, `replicas: 4`), or, in a short
//! sentence, by a few words before `is` and the value ("Camping pitches is 160."). "Set both to
//! 14." and "It is 14 now." name no setting, and are left to the model. It is not kept when the
//! value did not last:
//! - the developer's next message sets a value again ("Hmm, no, people wait weeks already. 20
//!   then.") or names it again beside another ("10 is unfair on the big dogs. 12 for the
//!   Open");
//! - a later reply names the same setting, by its name in the code, with other numbers only (it
//!   was changed again);
//! - it names a value the developer took back (`taken_back`).
//!
//! A value set again right after another is often confirmed in words that name no setting ("Set
//! to 7 and published.", "Changed to 1 day."). The sentence that confirmed the value before
//! names it ("refer_flag now says yes from a risk score of 6, …"), or says how it is now ("The
//! trash keeps things for 90 days now."): the memory is that sentence's clause with the new
//! value, the value it replaced, and the reply's words. Weeks said are the days a reply may
//! give ("Two weeks." and "14 days").
//!
//! A value the agent confirmed and that was then replaced (set again, or changed on the same
//! setting) is known to be stale: a model's memory that names it, and no value kept, is
//! dropped (`Reading::names_a_value_replaced`).

use std::collections::HashSet;
use std::sync::LazyLock;

use cairn_llm::Role;
use cairn_llm::extract::TranscriptMessage;
use regex::Regex;

use super::directives::{TURNS_TO_SOMETHING_ELSE, every_sentence as sentences};
use super::taken_back::{Said, names_a_value_taken_back, numbers, values_set};
use super::{Extracted, Origin};

/// The type a setting is saved with.
pub(super) const SETTING_TYPE: &str = "config";
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
/// `HighLevel`, `preferences.text_cps`, `{$SUMP.HIGH}`, `timeout=15`. Words with no such shape ("the
/// threshold") name a setting only in a short sentence (`NAMED_IN_WORDS`).
static SETTING_NAME: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"\b(?P<name>[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9]|[a-z][a-z0-9]*[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*|[A-Za-z][A-Za-z0-9_]+\.[A-Za-z_][A-Za-z0-9_.]*[A-Za-z0-9])\b|\b(?P<assigned>[A-Za-z]\w*)=\S",
    )
});
/// A setting named as a config file's key opening the sentence: "duration: 10, so every entry
/// …", "`replicas: 4`, pushed", or a hyphenated option given its value: "keep-daily is 10 on
/// the garage datastore".
static KEY_OPENS: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^`?(?P<key>[a-z][a-z0-9_-]*[a-z0-9])`?:\s*`?[£$€]?\d|^`?(?P<option>[a-z][a-z0-9]*(?:-[a-z0-9]+)+)`?\s+(?:is|=)\s+(?:now\s+)?[£$€]?\d",
    )
});
/// A time offset, no condition: "14 days before the end date".
static OFFSET: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)\b\d+\s+(second|minute|hour|day|week|month|year)s?\s+(before|after)\b"));
/// A number of weeks, which a reply may give in days: "Two weeks." and "14 days".
static WEEKS: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)\b(?P<n>\d+|[a-z]+)\s+weeks?\b|\b(?P<fortnight>a\s+fortnight)\b"));
/// A setting named in words, in a short sentence: a few words, then `is` or `are` and the value
/// ("Camping pitches is 160.", "Open is 12 minutes now", "The HighLevel setpoint is 85%", "High
/// CO2 is now above 1000 ppm, cleared under 900."). A
/// pronoun is no name ("It is 14 now.", "That's 3.").
static NAMED_IN_WORDS: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)^(?:(?:done|ok|okay|right)[,:.]?\s+)?(?P<name>(?:[\w'&-]+\s+){1,4})(?:is|are)\s+(?:now\s+)?(?:set\s+to\s+|at\s+|above\s+|below\s+|over\s+|under\s+)?(?:\#\w+\s+)?[£$€]?(?P<value>\d+(?:\.\d+)?)",
    )
});
/// Words that name no setting, opening what `NAMED_IN_WORDS` would take for its name.
const PRONOUNS: &[&str] = &["it", "that", "this", "which", "there", "he", "she", "they", "we", "i", "what", "who"];
/// A sentence that says how a value is now: "The trash keeps things for 90 days now."
static NOW: LazyLock<Regex> = LazyLock::new(|| regex(r"(?i)\bnow\b"));
/// A sentence about a value that may be: "With 30 minutes, Thursday would fit 7 of 11".
static HYPOTHETICAL: LazyLock<Regex> = LazyLock::new(|| regex(r"(?i)\b(would|could|might|if|before|with)\b|\?"));
/// Where a clause ends, after a value: "…risk score of 6, published as …", "0.7 and the model
/// retrained".
static CLAUSE_END: LazyLock<Regex> = LazyLock::new(|| regex(r"[,;:(]|\s[-–—]\s|\s(?:and|so|which|but)\s|\.\s"));
/// Words that close a choice: "20 then", "90 instead".
static CLOSES_A_CHOICE: LazyLock<Regex> = LazyLock::new(|| regex(r"(?i)\b(then|instead)\b"));
/// The words a sentence that sets a value again may have before it: "So 30.", "Hmm, no, make it
/// 22.", "Use 20.", "Every two hours".
const SETS_IT_AGAIN_WORDS: &[&str] = &[
    "so", "ok", "okay", "hmm", "fine", "right", "no", "actually", "well", "make", "put", "set", "change", "use", "go",
    "for", "it", "to", "at", "every", "try", "let's", "do", "just", "and", "but",
];
/// Units a value of 1 names in the singular: "1 day", "2 days".
const UNITS_OF_TIME: &[&str] = &["second", "minute", "hour", "day", "week", "month", "year"];
/// A message's last sentence that sets the value the sentence before it named: "Our EHO said
/// 28 days from make. Change it."
static SET_AS_SAID: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)^(?:please\s+)?(?:change|set|make|do|update|apply|fix)\s+(?:it|that|this)(?:\s+please)?[.!]?$")
});
/// A sentence that describes a thing, opening with a pronoun and a verb of being: "It's only a
/// 40 GB box." It sets nothing.
static DESCRIBES: LazyLock<Regex> =
    LazyLock::new(|| regex(r"(?i)^(?:it's|it is|that's|that is|there's|there are|there is|we've|we have|i've)\b"));
/// A last sentence that opens with the value, then goes on: "45, and a 'Hide PIN' button so
/// they can clear it when they're done."
static OPENS_WITH_A_VALUE: LazyLock<Regex> = LazyLock::new(|| regex(r"^(?P<value>[£$€]?\d+(?:\.\d+)?%?),\s"));
/// Words that set a value: "make it 10", "put it at 250", "go -18 then", "halve it again, 400".
static SETS: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)\b(make|put|set|go|change|lower|raise|bump|drop|halve|double|back to|then|instead)\b")
});

/// What the settings reader finds in a window: the settings the developer chose (one memory
/// each, in order), every value the developer chose, and the values the agent confirmed that
/// did not last. Read once a window; the model's facts are checked against it.
pub(crate) struct Reading {
    pub(crate) memories: Vec<Extracted>,
    chosen: Vec<String>,
    replaced: Vec<Said>,
    /// The values settings had before the developer set them (`values_read_before`).
    read_before: Vec<Said>,
}

impl Reading {
    /// Whether `content` names a value the agent confirmed that did not last (set again, or
    /// changed after), and none that did: "The renewal reminder now goes 14 days before the end
    /// date." when 21 days replaced it. A small model writes such a value as the setting; the
    /// settings read here tell the value now. The number must be of the same unit ("14 days" is
    /// not replaced by talk of "14 contacts").
    pub(crate) fn names_a_value_replaced(&self, content: &str) -> bool {
        self.names_a_stale_value(content, &self.replaced)
    }

    /// Whether a setting's `content` names the value a setting had before the developer set it,
    /// and none that stands: "The PIN display time is set to 20 seconds." once 45 was set. Only
    /// for a setting: a bug's account may tell the value it had ("the mount's 768 hours
    /// applied").
    pub(crate) fn names_a_value_read_before_it_was_set(&self, content: &str) -> bool {
        self.names_a_stale_value(content, &self.read_before)
    }

    fn names_a_stale_value(&self, content: &str, stale: &[Said]) -> bool {
        let named = numbers(content);
        let is_replaced = |n: &Said| {
            stale.iter().any(|old| old.same_value_as(n)) && !told_as_history(content, n) && !is_an_argument(content, n)
        };
        // "60 minutes (45 was set first)" tells the change: it names a value that stands too.
        let names_a_value_that_stands = named.iter().any(|n| !is_replaced(n) && self.chosen.contains(&n.value));
        !names_a_value_that_stands && named.iter().any(is_replaced)
    }
}

/// Words before a value that tell it as what was: "was 14", "from 24", "instead of 72".
static HISTORY_BEFORE: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)\b(was|were|briefly|from|instead of|not|rather than|replacing|replaced|up from|down from)\s+$")
});
/// Words after a value (and its unit) that tell it as what was: "72 was set first and dropped",
/// "60 was tried", "21 → 10".
static HISTORY_AFTER: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"(?i)^\s*(\w+\s+)?((was|were)\s+(set|tried|first|dropped|put|too|rejected|changed)|(→|->)|(at\s+)?first\b|earlier\b|previously\b)",
    )
});

/// Whether `n` is a call's argument in code ("clock.tick(60)"): another thing than a setting's
/// value.
fn is_an_argument(content: &str, n: &Said) -> bool {
    let before = content[..n.start].strip_suffix('(');
    before.is_some_and(|name| name.ends_with(|c: char| c.is_alphanumeric() || c == '_'))
}

/// The numbers of the developer's sentences that set something ("Then 1.5, the rim lighting
/// looks too soft at 1.25."): a value that may stand, whatever the reply said.
fn values_in_sentences_that_set(text: &str) -> Vec<String> {
    sentences(text).iter().filter(|s| !s.ends_with('?') && SETS.is_match(s)).flat_map(|s| numbers_said(s)).collect()
}

/// Whether `content` tells the value `n` as history, not as it is now.
fn told_as_history(content: &str, n: &Said) -> bool {
    HISTORY_BEFORE.is_match(&content[..n.start])
        || HISTORY_AFTER.is_match(&content[n.end..])
        || IN_A_NOTE_OF_WHAT_WAS.is_match(&content[..n.start])
}

/// A value inside a parenthesis that tells what was: "(was hashmap every 10 minutes)".
static IN_A_NOTE_OF_WHAT_WAS: LazyLock<Regex> = LazyLock::new(|| regex(r"(?i)\((was|were|from)\b[^()]*$"));

/// The settings `messages` show the developer choosing, and the values that did not last.
pub(crate) fn read(messages: &[TranscriptMessage]) -> Reading {
    let developer: Vec<usize> = (0..messages.len()).filter(|&at| messages[at].role == Role::User).collect();
    let mut reading =
        Reading { memories: Vec::new(), chosen: Vec::new(), replaced: Vec::new(), read_before: Vec::new() };
    let mut last_confirmed: Option<Confirmed> = None;
    let mut kept = Vec::new();
    for (nth, &at) in developer.iter().enumerate() {
        let values = values_chosen(&messages[at].text);
        reading.chosen.extend(values.iter().cloned());
        reading.chosen.extend(values_in_sentences_that_set(&messages[at].text));
        if values.is_empty() {
            continue;
        }
        let next = developer.get(nth + 1).copied();
        let turn = &messages[at + 1..next.unwrap_or(messages.len())];
        let found = confirmation(turn, &values).or_else(|| {
            let previous = last_confirmed.as_ref()?;
            let again = restated(&messages[at].text, turn, &values, previous)?;
            // The value the sentence before confirmed was set again.
            reading.replaced.extend(value_in(previous));
            Some(again)
        });
        last_confirmed = found.clone().or_else(|| stated(turn, &values));
        let Some(confirmed) = found else { continue };
        // The value the setting had before it was set ("pinDisplaySeconds in src/config.ts is 20.")
        reading.read_before.extend(values_read_before(&messages[..at], &confirmed));
        let later = &messages[next.unwrap_or(messages.len())..];
        if let Some(next) = next.filter(|&next| sets_again(&messages[next].text, &values)) {
            // The next message may set this value again, or another setting ("… put the price
            // in a flag, £25. Take that out."): the value is replaced only when the reply to it
            // gives the same setting a value.
            let after = developer.get(nth + 2).copied().unwrap_or(messages.len());
            match set_next(&messages[next].text, &messages[next + 1..after], &confirmed) {
                SetNext::TheSameSetting => {
                    reading.replaced.extend(value_in(&confirmed));
                    continue;
                }
                SetNext::MaybeTheSameSetting => continue,
                SetNext::SomethingElse => {}
            }
        }
        if changed_again(later, &confirmed.names, &values) || names_a_value_taken_back(&confirmed.sentence, messages) {
            reading.replaced.extend(value_in(&confirmed));
            continue;
        }
        kept.push(confirmed.value.clone());
        reading.memories.push(memory(confirmed.sentence, &messages[at].id, &confirmed.reply_id));
    }
    // A value set, replaced, then set again is the value now.
    reading.replaced.retain(|old| !kept.contains(&old.value));
    reading
}

/// The values the agent's replies before `confirmed` gave the setting it names as the code does,
/// other than the one set: "pinDisplaySeconds in src/config.ts is 20." before "pinDisplaySeconds
/// is 45". The first number after the setting's name in each sentence that names it.
fn values_read_before(before: &[TranscriptMessage], confirmed: &Confirmed) -> Vec<Said> {
    if confirmed.names.is_empty() {
        return Vec::new();
    }
    before
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| sentences(&m.text))
        .filter_map(|sentence| {
            let lower = sentence.to_lowercase();
            let named_at =
                confirmed.names.iter().filter_map(|name| lower.find(name.as_str()).map(|at| at + name.len())).min()?;
            numbers(&sentence).into_iter().find(|n| n.start >= named_at)
        })
        .filter(|n| n.value != confirmed.value)
        .collect()
}

/// The number of a confirmation's sentence that is its value, with its unit.
fn value_in(confirmed: &Confirmed) -> Option<Said> {
    numbers(&confirmed.sentence).into_iter().find(|n| n.value == confirmed.value)
}

/// A reply's sentence that gives a value the developer chose: the reply, the sentence, the
/// settings it names by their names in the code (none when it names one in words), and the
/// value it gives.
#[derive(Clone)]
struct Confirmed {
    reply_id: String,
    sentence: String,
    names: HashSet<String>,
    value: String,
}

/// The numbers a developer's message sets (see the module), or none.
fn values_chosen(text: &str) -> Vec<String> {
    let mut values: Vec<String> = values_set(text).into_iter().map(|n| n.value).collect();
    let said = sentences(text);
    if let Some(last) = said.last()
        && !last.ends_with('?')
        && !describes(last)
        && last.split_whitespace().count() <= MAX_SETTING_WORDS
    {
        values.extend(numbers_said(last));
    }
    if let Some(last) = said.last()
        && let Some(opening) = OPENS_WITH_A_VALUE.captures(last)
    {
        values.extend(numbers_said(&opening["value"]));
    }
    if let [.., before, last] = said.as_slice()
        && SET_AS_SAID.is_match(last)
    {
        values.extend(numbers_said(before));
    }
    values.sort();
    values.dedup();
    values
}

/// The numbers of `text`, in digits or in words, as digits.
fn numbers_said(text: &str) -> Vec<String> {
    let in_words = numbers_in_words(text).map(|(_, digits)| digits.to_owned());
    numbers(text).into_iter().map(|n| n.value).chain(in_words).chain(weeks_in_days(text)).collect()
}

/// The numbers of weeks `text` names, in days: "Two weeks." is 14.
fn weeks_in_days(text: &str) -> impl Iterator<Item = String> + '_ {
    WEEKS.captures_iter(text).filter_map(|c| {
        if c.name("fortnight").is_some() {
            return Some("14".to_owned());
        }
        let n = &c["n"];
        let digits = match n.parse::<u32>() {
            Ok(_) => n.to_owned(),
            Err(_) => NUMBER_WORDS.iter().find(|(said, _)| said.eq_ignore_ascii_case(n))?.1.to_owned(),
        };
        Some((digits.parse::<u32>().ok()? * 7).to_string())
    })
}

/// The numbers `text` says in words ("Seven years."), each with where its word starts and its
/// digits.
fn numbers_in_words(text: &str) -> impl Iterator<Item = (usize, &'static str)> + '_ {
    text.split(|c: char| !c.is_alphabetic()).filter_map(move |word| {
        let at = word.as_ptr() as usize - text.as_ptr() as usize;
        let word = word.to_lowercase();
        NUMBER_WORDS.iter().find(|(said, _)| *said == word).map(|(_, digits)| (at, *digits))
    })
}

/// Whether the developer's next message sets a value again, or names one of `values` again
/// beside another number: the value set before did not last.
fn sets_again(text: &str, values: &[String]) -> bool {
    // "Next thing. …", "Also, …": the developer has moved on, and the value stands.
    if sentences(text).first().is_some_and(|first| TURNS_TO_SOMETHING_ELSE.is_match(first)) {
        return false;
    }
    let named = numbers_said(text);
    let named_again = named.iter().any(|n| values.contains(n)) && named.iter().any(|n| !values.contains(n));
    named_again
        || !values_chosen(text).is_empty()
        || sentences(text).iter().filter(|s| !s.ends_with('?') && !describes(s)).any(|s| {
            !numbers(s).is_empty() && (SETS.is_match(s) || s.split_whitespace().count() <= MAX_BARE_SETTING_WORDS)
        })
}

/// Whether a sentence describes a thing and sets nothing: "It's only a 40 GB box." ("It's 12
/// then." sets.)
fn describes(sentence: &str) -> bool {
    DESCRIBES.is_match(sentence) && !CLOSES_A_CHOICE.is_match(sentence)
}

/// Whether the developer's `text` sets `value` again, in a sentence of its own: "22.", "7
/// then, so …", "Make it 1 day.", "So 30.", "Every two hours then." ("Retries: 3." names
/// another setting.)
fn sets_it_again(text: &str, value: &str) -> bool {
    sentences(text).iter().any(|sentence| {
        let Some(at) = first_number_at(sentence, value) else { return false };
        CLOSES_A_CHOICE.is_match(sentence)
            || sentence[..at]
                .split(|c: char| !c.is_alphabetic() && c != '\'')
                .filter(|w| !w.is_empty())
                .all(|word| SETS_IT_AGAIN_WORDS.contains(&word.to_lowercase().as_str()))
    })
}

/// Where `sentence` first names `value`, in digits or in words.
fn first_number_at(sentence: &str, value: &str) -> Option<usize> {
    let in_digits = numbers(sentence).into_iter().find(|n| n.value == value).map(|n| n.start);
    let in_words = numbers_in_words(sentence).find(|(_, digits)| *digits == value).map(|(at, _)| at);
    [in_digits, in_words].into_iter().flatten().min()
}

/// The first reply of `turn` whose first sentence names one of `values` and a setting.
fn confirmation(turn: &[TranscriptMessage], values: &[String]) -> Option<Confirmed> {
    first_sentences(turn).find_map(|(reply, first)| {
        let names = setting_names(&first);
        let value = value_given(&first, values)?;
        (!names.is_empty() || names_in_words(&first, values)).then(|| Confirmed {
            reply_id: reply.id.clone(),
            sentence: first,
            names,
            value,
        })
    })
}

/// The first sentence of each reply in `turn` that may be kept: short, nothing private, no
/// transcript noise.
fn first_sentences(turn: &[TranscriptMessage]) -> impl Iterator<Item = (&TranscriptMessage, String)> {
    turn.iter().filter(|m| m.role == Role::Assistant).filter_map(|reply| {
        let first = sentences(&reply.text).into_iter().next()?;
        let keepable = first.len() <= MAX_SETTING_BYTES
            && !first.contains(crate::text::REDACTED)
            && !cairn_llm::extract::is_noise(&first);
        keepable.then_some((reply, first))
    })
}

/// The first of `values` that `sentence` names, in digits or else in words: "DelaySeconds is
/// 120: each round score appears two minutes after it's submitted." gives the developer's "2
/// minutes" in words after the setting's own unit.
fn value_given(sentence: &str, values: &[String]) -> Option<String> {
    let in_digits = numbers(sentence).into_iter().map(|n| n.value).find(|n| values.contains(n));
    in_digits.or_else(|| numbers_in_words(sentence).map(|(_, digits)| digits.to_owned()).find(|n| values.contains(n)))
}

/// A reply's first sentence that states one of `values` as it is now, though it names no
/// setting: "The trash keeps things for 90 days now." Not kept by itself, it names the
/// setting a next value is set on ("Set to 60 days, which is …").
fn stated(turn: &[TranscriptMessage], values: &[String]) -> Option<Confirmed> {
    first_sentences(turn).find_map(|(reply, first)| {
        let value = value_given(&first, values)?;
        let hypothetical = HYPOTHETICAL.is_match(&OFFSET.replace_all(&first, ""));
        (NOW.is_match(&first) && !hypothetical).then(|| Confirmed {
            reply_id: reply.id.clone(),
            sentence: first,
            names: HashSet::new(),
            value,
        })
    })
}

/// A value set again right after another, confirmed in words that name no setting ("Set to
/// 7 and published as 2025.11.3.", "0.5 it is, retrained: …", "Changed to 1 day."): the
/// sentence that confirmed the value before (`previous`), with the new value in its place, up
/// to the end of its clause, the value it replaced, and the reply's own words: "refer_flag now
/// says yes from a risk score of 7 (was 6). Set to 7 and published as 2025.11.3."
fn restated(
    developer_text: &str,
    turn: &[TranscriptMessage],
    values: &[String],
    previous: &Confirmed,
) -> Option<Confirmed> {
    let (reply, first, value) = first_sentences(turn).find_map(|(reply, first)| {
        let named = numbers_said(&first);
        let value = values
            .iter()
            .find(|v| named.contains(v) && **v != previous.value && sets_it_again(developer_text, v))?
            .clone();
        // "73." echoes the developer's "73!" sign-off: a confirmation says something of the value.
        let says_more = first.chars().any(char::is_alphabetic);
        (setting_names(&first).is_empty() && says_more).then_some((reply, first, value))
    })?;
    let old = numbers(&previous.sentence).into_iter().find(|n| n.value == previous.value)?;
    let (before, after) = previous.sentence.split_at(old.end);
    let before = &before[..old.start];
    let clause_end = CLAUSE_END.find(after).map_or(after.len(), |m| m.start());
    let rest = after[..clause_end].trim_end_matches(['.', ' ']);
    // A unit written on the number goes with the value replaced too: "100M (was 200M)".
    let glued: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
    let rest = in_number(rest, &value, &previous.value);
    // "Wash Minutes is 30 now; …" names the setting as the sentence before did: it says it all.
    let names_it_again = !before.trim().is_empty() && first.contains(before.trim());
    let sentence =
        if names_it_again { first } else { format!("{before}{value}{rest} (was {}{glued}). {first}", previous.value) };
    Some(Confirmed { reply_id: reply.id.clone(), sentence, names: previous.names.clone(), value })
}

/// The words after a number, agreeing with it: "1 day" for 1, "3 days" for 3.
fn in_number(rest: &str, value: &str, old: &str) -> String {
    let unit: String = rest.trim_start().chars().take_while(|c| c.is_alphabetic()).collect();
    let at = rest.len() - rest.trim_start().len();
    let tail = &rest[at + unit.len()..];
    let plural = unit.strip_suffix('s').filter(|singular| UNITS_OF_TIME.contains(singular));
    match (value == "1", old == "1") {
        (true, false) if plural.is_some() => format!("{}{}{tail}", &rest[..at], plural.unwrap_or_default()),
        (false, true) if UNITS_OF_TIME.contains(&unit.as_str()) => format!("{}{unit}s{tail}", &rest[..at]),
        _ => rest.to_owned(),
    }
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

/// What the developer's next message sets, beside a value the agent just confirmed.
enum SetNext {
    /// The reply gives the same setting another value: the one confirmed is replaced.
    TheSameSetting,
    /// It may have replaced it: the confirmed value is not kept, nor known to be stale.
    MaybeTheSameSetting,
    /// Another setting: the confirmed value stands.
    SomethingElse,
}

/// What the developer's next message (`developer_text`) and the reply to it (`turn`) set,
/// beside the value `confirmed` gave. The same setting when the reply names it as the code
/// does ("pinDisplaySeconds is 45") or in the same words ("The rollout is 50% now." then
/// "Rollout is 25%."). Maybe the same when the message names the value again beside another
/// ("10 is unfair on the big dogs. 12 for the Open."; "Super 8 ran at 18, only Standard 8 at
/// 16" keeps it for some), when the reply confirms the new value naming no setting ("Set to
/// 12 and published.", read as the value set again), or when there is no reply yet. Something
/// else otherwise ("… put the price in a flag, £25. Take that out.").
fn set_next(developer_text: &str, turn: &[TranscriptMessage], confirmed: &Confirmed) -> SetNext {
    let named_in_the_same_words = name_in_words(&confirmed.sentence)
        .is_some_and(|name| first_sentences(turn).any(|(_, first)| name_in_words(&first).as_ref() == Some(&name)));
    if names_again(turn, &confirmed.names) || named_in_the_same_words {
        return SetNext::TheSameSetting;
    }
    let values = values_chosen(developer_text);
    let named = numbers_said(developer_text);
    let named_beside_another = named.contains(&confirmed.value) && named.iter().any(|n| *n != confirmed.value);
    let confirmed_naming_nothing = confirmation(turn, &values).is_none()
        && first_sentences(turn).any(|(_, first)| value_given(&first, &values).is_some());
    let no_reply = !turn.iter().any(|m| m.role == Role::Assistant);
    if named_beside_another || confirmed_naming_nothing || no_reply {
        SetNext::MaybeTheSameSetting
    } else {
        SetNext::SomethingElse
    }
}

/// The last word of the name a sentence gives a setting in words, lowercased: "rollout" in
/// "The rollout is 50% now."
fn name_in_words(sentence: &str) -> Option<String> {
    let name = NAMED_IN_WORDS.captures(sentence)?.name("name")?.as_str().split_whitespace().last()?.to_lowercase();
    (!PRONOUNS.contains(&name.as_str())).then_some(name)
}

/// Whether a reply of `turn` names one of `names` (none when `names` is empty).
fn names_again(turn: &[TranscriptMessage], names: &HashSet<String>) -> bool {
    turn.iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| sentences(&m.text))
        .any(|sentence| !setting_names(&sentence).is_disjoint(names))
}

/// The settings a sentence names (`SETTING_NAME`), lowercased.
fn setting_names(sentence: &str) -> HashSet<String> {
    SETTING_NAME
        .captures_iter(sentence)
        .filter_map(|c| c.name("name").or_else(|| c.name("assigned")))
        .chain(KEY_OPENS.captures(sentence).and_then(|c| c.name("key").or_else(|| c.name("option"))))
        .map(|m| m.as_str().to_lowercase())
        .collect()
}

fn memory(sentence: String, set_in: &str, confirmed_in: &str) -> Extracted {
    Extracted::said(Origin::Setting, SETTING_TYPE, sentence, vec![set_in.to_owned(), confirmed_in.to_owned()])
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;

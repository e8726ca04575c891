//! Values the developer named and took back: "15 is way too loose. Make it 5." … "Ugh, OK. 10
//! then." A small model often writes the first value named (or the one read from the file
//! before it was changed) as the setting, and such a memory is false: it is dropped.
//!
//! A value is taken back when the developer's message that names it rejects it and sets
//! another in the same message ("2.0 is far too late … 1.7 for every station", "no, 0.5 would
//! lose the martens … Go 0.35"), or sets it ("Make it 260.") and the developer's next message
//! sets another of the same unit ("Put it at 250", "make it 1.5 shares"). A memory that names
//! the new value too ("10, was 15") keeps it: it tells the change.

use std::sync::LazyLock;

use cairn_llm::Role;
use cairn_llm::extract::TranscriptMessage;
use regex::Regex;

/// A value set: "make it 5", "put it at 250", "give the caller 2 shares", "go 0.35", "set the
/// limit to 12"; or a value closing its choice: "10 then", "1.7 for every station", "90
/// instead".
static SETS_A_VALUE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:make|put|set|change|bump|raise|lower|drop|give|go|use)\b(?:\s+(?:it|that|them|this|the\s+\w+|\w+'s\s+\w+))?(?:\s+(?:to|at|with))?\s+(?:an?\s+)?(?P<set>\d+(?:\.\d+)?)|(?P<closed>\d+(?:\.\d+)?)(?:\s+\w+)?\s+(?:then|instead|it is|for (?:every|all|each))\b",
    )
    .expect("a valid pattern")
});
/// A rejection right after a value, in its sentence: "15 is way too loose", "45 minutes isn't
/// nearly enough", "0.5 would lose the martens".
static REJECTED_AFTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^[^.;!?]{0,40}?\b(too|isn't|wouldn't|would lose|not enough|nowhere near)\b")
        .expect("a valid pattern")
});
/// A rejection right before a value: "no, 0.5 …".
static REJECTED_BEFORE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)\bno[,:]?\s+$").expect("a valid pattern"));
/// Words after a number that are no unit of it.
const NOT_UNITS: &[&str] = &[
    "then", "instead", "for", "it", "is", "and", "or", "but", "the", "to", "at", "in", "on", "please", "that", "this",
    "of", "with", "so", "as", "a", "an", "now", "either", "each", "every", "all",
];

/// A number said in a text: its place, its digits, and the unit word after it, if any.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Said {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) value: String,
    unit: Option<String>,
}

/// Whether `content` names a value the developer took back in `messages` (see the module).
pub(crate) fn names_a_value_taken_back(content: &str, messages: &[TranscriptMessage]) -> bool {
    let named: Vec<String> = numbers(content).into_iter().map(|n| n.value).collect();
    if named.is_empty() {
        return false;
    }
    let developer: Vec<&str> = messages.iter().filter(|m| m.role == Role::User).map(|m| m.text.as_str()).collect();
    developer.iter().enumerate().any(|(at, text)| {
        let set_here = values_set(text);
        numbers(text).into_iter().filter(|n| named.contains(&n.value)).any(|old| {
            let replaced_here = rejected(text, &old)
                && set_here.iter().any(|new| new.start > old.end && is_other_value(new, &old, &named));
            let set_then_replaced = set_here.iter().any(|s| s.value == old.value)
                && developer
                    .get(at + 1)
                    .is_some_and(|next| values_set(next).iter().any(|new| is_other_value(new, &old, &named)));
            replaced_here || set_then_replaced
        })
    })
}

impl Said {
    /// Whether `other` is this value, in the same unit when both name one ("14 days" and "14
    /// days"; not "14 contacts").
    pub(super) fn same_value_as(&self, other: &Said) -> bool {
        self.value == other.value && same_unit(self, other)
    }
}

fn same_unit(a: &Said, b: &Said) -> bool {
    match (&a.unit, &b.unit) {
        (Some(a), Some(b)) => a.trim_end_matches('s') == b.trim_end_matches('s'),
        _ => true,
    }
}

/// Whether `new` replaces `old`: another value, not named by the memory, and of the same
/// unit when both have one ("8 MB" is not replaced by "10 ms").
fn is_other_value(new: &Said, old: &Said, named: &[String]) -> bool {
    new.value != old.value && !named.contains(&new.value) && same_unit(new, old)
}

fn rejected(text: &str, value: &Said) -> bool {
    REJECTED_AFTER.is_match(&text[value.end..]) || REJECTED_BEFORE.is_match(&text[..value.start])
}

/// The values `text` sets (`SETS_A_VALUE`), each with its unit.
pub(super) fn values_set(text: &str) -> Vec<Said> {
    let said = numbers(text);
    SETS_A_VALUE
        .captures_iter(text)
        .filter_map(|c| c.name("set").or_else(|| c.name("closed")))
        .filter_map(|m| said.iter().find(|n| n.start == m.start() && n.end == m.end()).cloned())
        .collect()
}

/// The numbers of `text` that stand alone: not a part of a name, a time, a version, a path
/// or a thousands group ("v2", "1:15", "2.6.1", "6,870"). A unit written on the number counts
/// as its unit ("200M", "30s"), and a value's digits are compared without trailing zeros ("3.0"
/// is 3).
pub(super) fn numbers(text: &str) -> Vec<Said> {
    static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+(?:\.\d+)?").expect("a valid pattern"));
    NUMBER
        .find_iter(text)
        .filter_map(|m| {
            let before = text[..m.start()].chars().next_back();
            let glued_before = before.is_some_and(|c| c.is_alphanumeric() || "_.:,/-".contains(c));
            let glued_unit = glued_unit(&text[m.end()..]);
            let rest = &text[m.end() + glued_unit.map_or(0, str::len)..];
            let mut after = rest.chars();
            let (next, second) = (after.next(), after.next());
            // "7: 212 stones" ends its number at the colon; "1:15" is a time.
            let glued_after = next.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '/')
                || (matches!(next, Some('.' | ',' | ':')) && second.is_some_and(|c| c.is_ascii_digit()));
            (!glued_before && !glued_after).then(|| Said {
                start: m.start(),
                end: m.end(),
                value: without_trailing_zeros(m.as_str()),
                unit: glued_unit.map(str::to_lowercase).or_else(|| unit_after(rest)),
            })
        })
        .collect()
}

/// Units written on a number in settings and config files: "200M", "4K", "30s", "72h".
const GLUED_UNITS: &[&str] = &["k", "m", "g", "t", "kb", "mb", "gb", "tb", "ms", "s", "h", "d", "px"];

/// The unit glued to the front of `rest`, when it is one of `GLUED_UNITS` and ends there.
fn glued_unit(rest: &str) -> Option<&str> {
    let letters = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
    let unit = &rest[..letters];
    let ends = !rest[letters..].starts_with(|c: char| c.is_alphanumeric() || c == '_');
    (letters > 0 && ends && GLUED_UNITS.contains(&unit.to_lowercase().as_str())).then_some(unit)
}

/// "3.0" as 3, "1.50" as 1.5: a value written with zeros after its point is the same value.
fn without_trailing_zeros(digits: &str) -> String {
    match digits.split_once('.') {
        Some((whole, fraction)) if fraction.trim_end_matches('0').is_empty() => whole.to_owned(),
        Some((whole, fraction)) => format!("{whole}.{}", fraction.trim_end_matches('0')),
        None => digits.to_owned(),
    }
}

/// The word right after a number when it may be its unit ("45 minutes", "8 MB").
fn unit_after(rest: &str) -> Option<String> {
    let word: String = rest.trim_start_matches(' ').chars().take_while(|c| c.is_alphabetic()).collect();
    let word = word.to_lowercase();
    (!word.is_empty() && rest.starts_with(' ') && !NOT_UNITS.contains(&word.as_str())).then_some(word)
}

#[cfg(test)]
#[path = "taken_back_tests.rs"]
pub(super) mod tests;

//! Questions about *when*, and memories that say when: one feature of the re-ranking.
//!
//! "When did we move the cache to Redis?" or "When did Caroline go to the support group?" is
//! answered by the memory that says "yesterday", "last week" or "in June 2023", and such a memory
//! often shares fewer words with the question than one that only mentions the same thing. A
//! fitted weight decides how much this counts (`rerank.rs`); here are only the two tests,
//! word lists kept small and plain (English first, with the question words of the other
//! languages the coding set asks in).

/// Whether `query` asks for a time: "when …", "what year …", "how long ago …", "cuándo …".
pub fn asks_when(query: &str) -> bool {
    // The index's words: lowercased and accent-folded, so "Cuándo" is "cuando".
    let words: Vec<String> = super::index::tokenize(query).collect();
    if words.iter().any(|w| matches!(w.as_str(), "when" | "cuando" | "quando" | "wann" | "quand")) {
        return true;
    }
    // "what year", "which month", "what date", "how long (ago)"
    words.windows(2).any(|pair| {
        matches!(
            (pair[0].as_str(), pair[1].as_str()),
            ("what" | "which", "year" | "month" | "day" | "date" | "week" | "time") | ("how", "long") | ("long", "ago")
        )
    })
}

/// Whether `text` says when something happened or will: a relative time ("yesterday", "last
/// week", "two days ago"), a weekday or month name, or a year. Runs on each candidate of a
/// "when" question's pool (~5 µs for 2 KB), so it reads the words in place and stops at the
/// first time it finds.
pub fn mentions_time(text: &str) -> bool {
    // Every word looked for is ASCII, so the text is split at bytes: a letter outside ASCII
    // splits a word, which can only cut a word that is not looked for.
    let mut after_last_or_next = false;
    for word in text.as_bytes().split(|b| !b.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
        if word.len() > LONGEST {
            after_last_or_next = false;
            continue;
        }
        let mut buffer = [0; LONGEST];
        let lower = &mut buffer[..word.len()];
        lower.copy_from_slice(word);
        lower.make_ascii_lowercase();
        let lower = &*lower;
        if is_time_word(lower) || is_year(lower) || (after_last_or_next && is_period(lower)) {
            return true;
        }
        after_last_or_next = matches!(lower, b"last" | b"next" | b"this" | b"past");
    }
    false
}

/// The longest word looked for ("vorgestern").
const LONGEST: usize = 10;

/// What "last", "next", "this" or "past" make a time of.
fn is_period(word: &[u8]) -> bool {
    matches!(
        word,
        b"week" | b"weekend" | b"month" | b"year" | b"summer" | b"winter" | b"spring" | b"fall" | b"autumn" | b"night"
    )
}

/// Words that place a memory in time by themselves. "May" and "March" are left out: as "may"
/// and "march" they are common words.
fn is_time_word(word: &[u8]) -> bool {
    matches!(
        word,
        b"yesterday" | b"today" | b"tonight" | b"tomorrow" | b"ago" | b"recently" | b"lately"
            // The same in the other languages the coding set asks in.
            | b"ayer" | b"anteayer" | b"hoy" | b"ontem" | b"hoje" | b"gestern" | b"vorgestern" | b"heute"
            | b"monday" | b"tuesday" | b"wednesday" | b"thursday" | b"friday" | b"saturday" | b"sunday"
            | b"january" | b"february" | b"april" | b"june" | b"july" | b"august" | b"september"
            | b"october" | b"november" | b"december"
    )
}

/// A four-digit year from 1900 to 2099 ("2023", "in 1998").
fn is_year(word: &[u8]) -> bool {
    word.len() == 4 && (word.starts_with(b"19") || word.starts_with(b"20")) && word.iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_about_time_are_told_apart() {
        for q in [
            "When did Caroline go to the LGBTQ support group?",
            "what year did we drop Python 2",
            "How long ago did the migration run?",
            "¿Cuándo cambiamos la caché?",
            "Wann haben wir Redis eingeführt?",
        ] {
            assert!(asks_when(q), "{q}");
        }
        for q in ["What does Melanie paint?", "why did the build fail", "whenever-flag config"] {
            assert!(!asks_when(q), "{q}");
        }
    }

    #[test]
    fn memories_that_say_when_are_told_apart() {
        for t in [
            "I went to a support group yesterday!",
            "We shipped it last week.",
            "Moved to Berlin in 2019",
            "See you on Friday",
            "two days ago the cache broke",
            "Ayer migramos la base de datos",
        ] {
            assert!(mentions_time(t), "{t}");
        }
        // "May" and "march" are left out of the names: they are also common words.
        for t in ["the cache may break", "Use the weekly build", "port 20000 is taken", "a march through the docs"] {
            assert!(!mentions_time(t), "{t}");
        }
    }
}

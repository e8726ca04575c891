//! Turning what a person or agent typed into an FTS5 query that finds memories sharing *some*
//! of its words (engram ANDs every word and so finds nothing for a question: #352, #940).

/// One unit of a parsed query.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Term {
    /// A word (matched with porter stemming).
    Word(String),
    /// `word*`: any word starting with this.
    Prefix(String),
    /// `"several words"` in this order.
    Phrase(String),
}

/// At most this many terms reach FTS5: a 100 KB paste must not become a 20,000-way OR.
pub const MAX_TERMS: usize = 48;

/// Words that carry no meaning in a question. Dropped unless nothing else is left.
///
/// Besides function words: `s` and `t`, the pieces an apostrophe leaves ("John's",
/// "didn't"), which are in most memories of a conversation; third-person pronouns ("what does
/// she do with her kids"); and the hedges of speculative questions ("would he likely...",
/// "might", "ever"). Adding those raised LoCoMo dev recall@10 of hybrid search from 0.765 to
/// 0.770 and left the coding set unchanged (docs/BENCHMARKS.md).
const STOPWORDS: &[&str] = &[
    // English
    "a", "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been", "before", "but",
    "by", "can", "could", "did", "do", "does", "doing", "ever", "for", "from", "had", "has", "have", "he", "her",
    "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "likely", "me",
    "might", "my", "of", "on", "or", "our", "s", "she", "should", "so", "some", "t", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "those", "to", "us", "was", "we", "were", "what", "when", "where",
    "which", "who", "why", "will", "with", "would", "you", "your", // Spanish
    "el", "la", "los", "las", "un", "una", "unos", "unas", "de", "del", "al", "y", "o", "en", "que", "qué", "por",
    "para", "con", "sin", "se", "su", "sus", "lo", "le", "les", "es", "son", "fue", "como", "cómo", "cuál", "cual",
    "cuando", "cuándo", "donde", "dónde", "nos", "nuestro", "nuestra", "hay", "este", "esta", "ese", "esa", "mi", "tu",
];

/// Whether a lowercased word is one of the stopwords (`STOPWORDS`).
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.contains(&word)
}

/// A user's message as a query of plain words: quotes and `*` are prose there, not search
/// syntax. (`opencode run "fix the build"` arrives quoted; read as a phrase it matches nothing.)
pub fn plain_words(text: &str) -> String {
    text.replace(['"', '*'], " ")
}

/// Parse a query: `"phrases"`, `prefix*` and plain words; stopwords dropped when other words
/// remain; duplicates removed; capped at [`MAX_TERMS`].
pub fn parse(text: &str) -> Vec<Term> {
    let mut terms = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('"') {
        push_words(&rest[..start], &mut terms);
        let after = &rest[start + 1..];
        if let Some(end) = after.find('"') {
            let phrase = clean_phrase(&after[..end]);
            if !phrase.is_empty() {
                terms.push(Term::Phrase(phrase));
            }
            rest = &after[end + 1..];
        } else {
            rest = after;
            break;
        }
    }
    push_words(rest, &mut terms);
    drop_stopwords(dedupe(terms))
}

fn push_words(text: &str, terms: &mut Vec<Term>) {
    for raw in text.split_whitespace() {
        let is_prefix = raw.ends_with('*');
        // Split on anything FTS5's tokenizer would split on anyway, so `auth-flow` finds
        // both words and `foo.rs:12` does not become a syntax error.
        let parts: Vec<String> = raw
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|p| !p.is_empty())
            .map(str::to_lowercase)
            .collect();
        let count = parts.len();
        for (i, part) in parts.into_iter().enumerate() {
            if is_prefix && i + 1 == count {
                terms.push(Term::Prefix(part));
            } else {
                terms.push(Term::Word(part));
            }
        }
    }
}

fn clean_phrase(raw: &str) -> String {
    raw.split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|p| !p.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

fn dedupe(terms: Vec<Term>) -> Vec<Term> {
    let mut seen = std::collections::HashSet::new();
    terms.into_iter().filter(|t| seen.insert(t.clone())).collect()
}

fn drop_stopwords(terms: Vec<Term>) -> Vec<Term> {
    let is_stop = |t: &Term| matches!(t, Term::Word(w) if is_stopword(w));
    let meaningful: Vec<Term> = terms.iter().filter(|t| !is_stop(t)).cloned().collect();
    let mut kept = if meaningful.is_empty() { terms } else { meaningful };
    kept.truncate(MAX_TERMS);
    kept
}

/// The FTS5 MATCH expression: terms ORed, each quoted so no user text is FTS5 syntax.
pub fn to_fts(terms: &[Term]) -> Option<String> {
    if terms.is_empty() {
        return None;
    }
    let quoted: Vec<String> = terms
        .iter()
        .map(|t| match t {
            Term::Word(w) => quote(w),
            Term::Prefix(p) => format!("{}*", quote(p)),
            Term::Phrase(p) => quote(p),
        })
        .collect();
    Some(quoted.join(" OR "))
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_phrases_and_prefixes() {
        let terms = parse(r#"how did we fix "flaky login" auth* test"#);
        assert_eq!(
            terms,
            vec![
                Term::Word("fix".into()),
                Term::Phrase("flaky login".into()),
                Term::Prefix("auth".into()),
                Term::Word("test".into()),
            ]
        );
        assert_eq!(to_fts(&terms).unwrap(), r#""fix" OR "flaky login" OR "auth"* OR "test""#);
    }

    #[test]
    fn punctuation_only_gives_nothing() {
        assert!(parse("?!... --- ***").is_empty());
        assert_eq!(to_fts(&parse("?!")), None);
    }

    #[test]
    fn only_stopwords_are_kept() {
        assert_eq!(
            parse("what is it"),
            vec![Term::Word("what".into()), Term::Word("is".into()), Term::Word("it".into())]
        );
    }

    #[test]
    fn possessives_pronouns_and_hedges_are_dropped_from_questions() {
        assert_eq!(
            parse("Would Melanie's kids likely enjoy what she paints with her husband?"),
            ["melanie", "kids", "enjoy", "paints", "husband"].map(|w| Term::Word(w.into())).to_vec()
        );
    }

    #[test]
    fn hostile_syntax_is_neutralised() {
        let fts = to_fts(&parse(r#"NEAR(a b) title:x "unclosed AND OR NOT ^"#)).unwrap();
        assert!(!fts.contains(':') && !fts.contains('('));
    }

    #[test]
    fn long_queries_are_capped() {
        let text: String = (0..10_000).map(|i| format!("w{i} ")).collect();
        assert_eq!(parse(&text).len(), MAX_TERMS);
    }
}

//! Snippets for index hits, made in Rust with the index's own tokenizer and stemmer: the
//! window of a memory where the most query words meet, matches in `**bold**`. (FTS5's
//! `snippet()` would re-tokenise every hit through SQL; this is a scan of one string.)

use rust_stemmers::{Algorithm, Stemmer};

use crate::search::index::{fold_token_into, tokenize};
use crate::search::query::Term;

/// Tokens shown around the matches.
const WINDOW: usize = 24;

/// What the query looks for, stemmed like the index.
pub struct Matcher {
    stemmer: Stemmer,
    stems: Vec<String>,
    prefixes: Vec<String>,
}

impl Matcher {
    pub fn new(terms: &[Term]) -> Matcher {
        let stemmer = Stemmer::create(Algorithm::English);
        let mut stems = Vec::new();
        let mut prefixes = Vec::new();
        for term in terms {
            match term {
                Term::Word(w) | Term::Phrase(w) => stems.extend(tokenize(w).map(|t| stemmer.stem(&t).into_owned())),
                Term::Prefix(p) => prefixes.extend(tokenize(p)),
            }
        }
        Matcher { stemmer, stems, prefixes }
    }

    /// Whether an alphanumeric run of the text matches; `folded` is scratch space.
    fn matches(&self, token: &str, folded: &mut String) -> bool {
        self.which(token, folded).is_some()
    }

    /// Whether any word of the text matches the query.
    pub fn matches_any(&self, text: &str) -> bool {
        let mut folded = String::new();
        token_spans(text).iter().any(|&(s, e)| self.matches(&text[s..e], &mut folded))
    }

    /// Share of the query's words (stems and prefixes) found in the texts, 0–1 (0 for a
    /// query without words).
    pub fn coverage(&self, texts: &[&str]) -> f64 {
        let wanted = self.stems.len() + self.prefixes.len();
        if wanted == 0 {
            return 0.0;
        }
        let mut found = vec![false; wanted];
        let mut folded = String::new();
        let mut count = 0;
        for text in texts {
            for &(s, e) in &token_spans(text) {
                if let Some(which) = self.which(&text[s..e], &mut folded)
                    && !std::mem::replace(&mut found[which], true)
                {
                    count += 1;
                    if count == wanted {
                        return 1.0;
                    }
                }
            }
        }
        count as f64 / wanted as f64
    }

    /// Which query word (index into stems, then prefixes) a token of the text matches;
    /// `folded` is scratch space.
    fn which(&self, token: &str, folded: &mut String) -> Option<usize> {
        // Most words of a text start like no query word; an ASCII word folds to its lowercase,
        // so that is known before folding and stemming it.
        if token.is_ascii() && !self.could_start(token.as_bytes()) {
            return None;
        }
        fold_token_into(token, folded);
        if folded.is_empty() {
            return None;
        }
        if let Some(p) = self.prefixes.iter().position(|p| folded.starts_with(p.as_str())) {
            return Some(self.stems.len() + p);
        }
        if !self.could_be_a_stem(folded) {
            return None;
        }
        let stem = self.stemmer.stem(folded);
        self.stems.iter().position(|s| *s == stem)
    }

    /// Whether an ASCII word could match: it starts with a prefix term, or with a stem but
    /// its last letter (stemming cuts a suffix and at most rewrites the last letter of what
    /// remains: "studies" and "study" → "studi").
    fn could_start(&self, token: &[u8]) -> bool {
        let starts = |head: &[u8]| token.len() >= head.len() && token[..head.len()].eq_ignore_ascii_case(head);
        self.prefixes.iter().any(|p| starts(p.as_bytes()))
            || self.stems.iter().any(|s| {
                let s = s.as_bytes();
                starts(&s[..s.len().saturating_sub(1).max(2).min(s.len())])
            })
    }

    /// A word's stem starts with the word's first two letters in practice, so most tokens
    /// are ruled out without running the stemmer.
    fn could_be_a_stem(&self, folded: &str) -> bool {
        let head_len = folded.char_indices().nth(2).map_or(folded.len(), |(i, _)| i);
        let head = &folded[..head_len];
        self.stems.iter().any(|s| s.starts_with(head))
    }

    /// The best passage of the content, else of the title; empty when neither matches.
    pub fn snippet(&self, title: &str, content: &str) -> String {
        self.best_window(content).or_else(|| self.best_window(title)).unwrap_or_default()
    }

    fn best_window(&self, text: &str) -> Option<String> {
        let spans = token_spans(text);
        let mut folded = String::new();
        let hits: Vec<bool> = spans.iter().map(|&(s, e)| self.matches(&text[s..e], &mut folded)).collect();
        if !hits.iter().any(|h| *h) {
            return None;
        }
        let start = best_start(&hits);
        let end = (start + WINDOW).min(spans.len());
        Some(render(text, &spans[start..end], &hits[start..end], start > 0, end < spans.len()))
    }
}

/// Byte ranges of alphanumeric runs.
fn token_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                spans.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push((s, text.len()));
    }
    spans
}

/// Start of the window with the most matches (sliding count), nudged to begin a little before
/// the first match so it reads in context.
fn best_start(hits: &[bool]) -> usize {
    let window = WINDOW.min(hits.len());
    let mut count = hits[..window].iter().filter(|h| **h).count();
    let (mut best, mut best_count) = (0, count);
    for start in 1..=hits.len() - window {
        count += usize::from(hits[start + window - 1]);
        count -= usize::from(hits[start - 1]);
        if count > best_count {
            (best, best_count) = (start, count);
        }
    }
    let first_hit = (best..best + window).find(|&i| hits[i]).unwrap_or(best);
    first_hit.saturating_sub(3).max(best).min(hits.len().saturating_sub(window))
}

fn render(text: &str, spans: &[(usize, usize)], hits: &[bool], cut_before: bool, cut_after: bool) -> String {
    let mut out = String::new();
    if cut_before {
        out.push('…');
    }
    let mut cursor = spans[0].0;
    for (&(s, e), &hit) in spans.iter().zip(hits) {
        out.push_str(&text[cursor..s]);
        if hit {
            out.push_str("**");
            out.push_str(&text[s..e]);
            out.push_str("**");
        } else {
            out.push_str(&text[s..e]);
        }
        cursor = e;
    }
    if cut_after {
        out.push('…');
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::query::parse;

    #[test]
    fn highlights_stemmed_matches_in_the_densest_window() {
        let content =
            format!("{} the login test was flaky because cookies expired {}", "filler ".repeat(40), "tail ".repeat(40));
        let m = Matcher::new(&parse("flakiness of login tests"));
        let s = m.snippet("Title", &content);
        assert!(s.contains("**login** **test**"), "{s}");
        assert!(s.starts_with('…') && s.ends_with('…'));
    }

    #[test]
    fn falls_back_to_title_then_nothing() {
        let m = Matcher::new(&parse("deploy*"));
        assert_eq!(m.snippet("Deployment checklist", "nothing relevant"), "**Deployment** checklist");
        assert_eq!(Matcher::new(&parse("zebra")).snippet("a", "b"), "");
    }

    #[test]
    fn coverage_counts_each_query_word_once() {
        let m = Matcher::new(&parse("flaky login tests deploy*"));
        assert_eq!(m.coverage(&["Login", "the login test was flaky; login again"]), 0.75);
        assert_eq!(m.coverage(&["deployment of the login test, flaky"]), 1.0);
        assert_eq!(m.coverage(&["nothing here"]), 0.0);
        let m = Matcher::new(&parse("study flakiness"));
        assert_eq!(m.coverage(&["STUDIES of Flaky tests"]), 1.0, "case and suffixes do not matter");
        assert_eq!(Matcher::new(&[]).coverage(&["login"]), 0.0);
    }

    #[test]
    fn matches_any_word_stemmed() {
        let m = Matcher::new(&parse("what did Caroline paint"));
        assert!(m.matches_any("Caroline (1:56 pm on 8 May, 2023)"));
        assert!(m.matches_any("Painting lessons"));
        assert!(!m.matches_any("Melanie (1:56 pm on 8 May, 2023)"), "stopwords of the question match nothing");
    }
}

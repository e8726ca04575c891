//! Text put into a prompt: on one line, and cut to a byte budget at a character boundary with a
//! mark that says so (the judge's and the re-ranker's prompts both).

/// `text` with every run of whitespace (newlines too) made one space.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` whole up to `max` bytes, else its first `max` bytes (on a character boundary)
/// followed by `mark`.
pub(crate) fn cut(text: &str, max: usize, mark: &str) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!("{}{mark}", cairn_base::text::cut_at_char_boundary(text, max))
}

//! Text from the store made safe and fit for a terminal: control characters and escape
//! sequences neutralised (a title is data, never a command to the terminal), long text
//! wrapped once into lines so only the visible ones are drawn, `**matches**` highlighted.

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// `s` with every control character made visible: C0 controls as their Unicode control
/// pictures (`ESC` → `␛`), DEL and the C1 range (which some terminals obey as CSI) as `�`.
/// A tab becomes spaces; a newline is kept only when `keep_newlines`.
pub fn clean(s: &str, keep_newlines: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' if keep_newlines => out.push('\n'),
            '\t' => out.push_str("    "),
            '\n' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('�')),
            '\u{7f}'..='\u{9f}' => out.push('�'),
            // Bidirectional overrides would reorder what follows them on screen.
            '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => out.push('�'),
            c => out.push(c),
        }
    }
    out
}

/// One line of text, cleaned and cut to `max` characters (a title in a list).
pub fn one_line(s: &str, max: usize) -> String {
    let cleaned = clean(s, false);
    if cleaned.chars().count() <= max {
        return cleaned;
    }
    let mut cut: String = cleaned.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Whether a cell's symbol could reach the terminal as a control: the last guard before a
/// frame is written (every text is cleaned before, this catches what was not).
pub fn is_unsafe_symbol(symbol: &str) -> bool {
    symbol.chars().any(|c| (c as u32) < 0x20 || ('\u{7f}'..='\u{9f}').contains(&c))
}

/// `text` (already cleaned, newlines kept) hard-wrapped at `width` columns. Wide characters
/// count double. Done once per text and width: a 1 MB memory is wrapped in milliseconds and
/// then only the visible lines are drawn.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut lines = Vec::new();
    for raw in text.split('\n') {
        let mut line = String::new();
        let mut used = 0;
        for c in raw.chars() {
            let w = c.width().unwrap_or(0);
            if used + w > width && !line.is_empty() {
                lines.push(std::mem::take(&mut line));
                used = 0;
            }
            line.push(c);
            used += w;
        }
        lines.push(line);
    }
    lines
}

/// Lines of a long text, wrapped for one width and one version of the text.
#[derive(Debug, Default)]
pub struct Wrapped {
    key: (usize, u64),
    pub lines: Vec<(String, Style)>,
}

impl Wrapped {
    /// The lines for `width` and `version`, made again by `make` only when either changed.
    pub fn get(
        cache: &mut Option<Wrapped>,
        width: usize,
        version: u64,
        make: impl FnOnce() -> Vec<(String, Style)>,
    ) -> &Wrapped {
        let stale = cache.as_ref().is_none_or(|c| c.key != (width, version));
        if stale {
            let lines = make()
                .into_iter()
                .flat_map(|(text, style)| wrap(&text, width).into_iter().map(move |line| (line, style)))
                .collect();
            *cache = Some(Wrapped { key: (width, version), lines });
        }
        cache.as_ref().expect("filled above")
    }
}

/// A snippet with its `**matches**` in bold yellow (the search's own marking).
pub fn highlighted(snippet: &str) -> Line<'static> {
    let cleaned = clean(snippet, false);
    let mark = Style::default().add_modifier(Modifier::BOLD).fg(ratatui::style::Color::Yellow);
    let mut spans = Vec::new();
    for (i, piece) in cleaned.split("**").enumerate() {
        if piece.is_empty() {
            continue;
        }
        let style = if i % 2 == 1 { mark } else { Style::default() };
        spans.push(Span::styled(piece.to_owned(), style));
    }
    Line::from(spans)
}

/// `2026-11-27T10:00:00.000Z` → `2026-11-27 10:00` (lists have no room for the rest).
pub fn short_time(ts: &str) -> String {
    let date_time: String = ts.chars().take(16).collect();
    clean(&date_time.replacen('T', " ", 1), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_controls_are_made_visible() {
        let title = "\u{1b}[31mred\u{1b}[0m \u{7}bell \u{9b}2J\r\nnext";
        let cleaned = clean(title, false);
        assert_eq!(cleaned, "␛[31mred␛[0m ␇bell �2J  next");
        assert!(!is_unsafe_symbol(&cleaned));
        assert_eq!(clean("a\nb\tc", true), "a\nb    c");
    }

    #[test]
    fn wrapping_cuts_at_the_width_and_keeps_empty_lines() {
        assert_eq!(wrap("abcdef\n\nxy", 4), ["abcd", "ef", "", "xy"]);
        assert_eq!(wrap("日本語", 4), ["日本", "語"]);
    }

    #[test]
    fn matches_are_bold_and_the_markers_gone() {
        let line = highlighted("the **auth** bug in **jwt**");
        let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(text, "the auth bug in jwt");
        assert!(line.spans[1].style.add_modifier.contains(Modifier::BOLD));
        assert!(!line.spans[0].style.add_modifier.contains(Modifier::BOLD));
    }

    #[test]
    fn one_line_cuts_long_titles() {
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("a\nb", 10), "a b");
    }
}

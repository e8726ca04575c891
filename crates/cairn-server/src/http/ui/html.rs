//! Building HTML by hand, escaping by default: every piece of stored text reaches the page
//! through [`esc`] (or [`Page::text`]), so a title holding `<script>` is shown, never run.

use std::fmt::Write as _;

/// Escape text for an HTML text node or a double-quoted attribute value.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encode a value for a URL path segment or query value.
pub fn url(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A search snippet: the search marks matched terms `**like this**`; they become `<mark>`,
/// everything else is escaped.
pub fn snippet(text: &str) -> String {
    let mut out = String::new();
    for (i, piece) in text.split("**").enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<mark>{}</mark>", esc(piece));
        } else {
            out.push_str(&esc(piece));
        }
    }
    out
}

/// At most `max` bytes of `text`, cut on a character boundary; `None` when nothing was cut.
pub fn truncated(text: &str, max: usize) -> Option<&str> {
    if text.len() <= max {
        return None;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Some(&text[..end])
}

/// One page: a title, the active section of the menu, and its body.
pub struct Page {
    title: String,
    section: Section,
    body: String,
}

/// The menu entries.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Dashboard,
    Search,
    Conflicts,
    Sessions,
    History,
    Trash,
    None,
}

const MENU: &[(Section, &str, &str)] = &[
    (Section::Dashboard, "/ui", "Dashboard"),
    (Section::Search, "/ui/search", "Search"),
    (Section::Conflicts, "/ui/conflicts", "Conflicts"),
    (Section::Sessions, "/ui/sessions", "Sessions"),
    (Section::History, "/ui/history", "History"),
    (Section::Trash, "/ui/trash", "Trash"),
];

impl Page {
    pub fn new(title: &str, section: Section) -> Self {
        Self { title: title.to_owned(), section, body: String::with_capacity(8 * 1024) }
    }

    /// Append markup the caller built (its text already escaped).
    pub fn raw(&mut self, html: &str) -> &mut Self {
        self.body.push_str(html);
        self
    }

    /// `<h1>`, escaped.
    pub fn heading(&mut self, text: &str) -> &mut Self {
        let _ = write!(self.body, "<h1>{}</h1>", esc(text));
        self
    }

    /// The whole document.
    pub fn render(&self) -> String {
        let mut html = String::with_capacity(self.body.len() + 2048);
        let _ = write!(
            html,
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>{} · cairn</title><link rel=\"icon\" href=\"data:,\"><link rel=\"stylesheet\" href=\"/ui/assets/ui.css\">\
             <script src=\"/ui/assets/ui.js\" defer></script></head><body>\
             <a class=\"skip\" href=\"#main\">Skip to content</a><header><nav aria-label=\"Sections\">\
             <a class=\"brand\" href=\"/ui\">cairn</a>",
            esc(&self.title)
        );
        for (section, href, label) in MENU {
            let current = if *section == self.section { " aria-current=\"page\"" } else { "" };
            let _ = write!(html, "<a href=\"{href}\"{current}>{label}</a>");
        }
        html.push_str("</nav>");
        // The search page has its own box: one searchbox per page.
        if self.section != Section::Search {
            html.push_str(
                "<form class=\"quick\" role=\"search\" action=\"/ui/search\" method=\"get\">\
                 <label for=\"quick-q\" class=\"visually-hidden\">Search memories</label>\
                 <input id=\"quick-q\" type=\"search\" name=\"q\" placeholder=\"Search memories\" \
                 autocomplete=\"off\" data-results=\"quick-results\"></form>",
            );
        }
        html.push_str("</header><main id=\"main\"><div id=\"quick-results\" aria-live=\"polite\"></div>");
        html.push_str(&self.body);
        html.push_str("</main></body></html>");
        html
    }
}

/// A `<table>` with a header row; cells are markup the caller escaped.
pub fn table(caption: &str, headers: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let mut html = format!("<div class=\"scroll\"><table><caption>{}</caption><thead><tr>", esc(caption));
    for h in headers {
        let _ = write!(html, "<th scope=\"col\">{}</th>", esc(h));
    }
    html.push_str("</tr></thead><tbody>");
    let mut any = false;
    for row in rows {
        any = true;
        html.push_str("<tr>");
        for cell in row {
            let _ = write!(html, "<td>{cell}</td>");
        }
        html.push_str("</tr>");
    }
    if !any {
        let _ = write!(html, "<tr><td colspan=\"{}\" class=\"muted\">Nothing yet.</td></tr>", headers.len().max(1));
    }
    html.push_str("</tbody></table></div>");
    html
}

/// A link to a memory's page, its title as the text.
pub fn memory_link(id: i64, title: &str) -> String {
    format!("<a class=\"memory-link\" href=\"/ui/memory/{id}\">{}</a>", esc(title))
}

/// A timestamp shown to the minute (the full one in a tooltip).
pub fn when(ts: &str) -> String {
    let short = ts.get(..16).unwrap_or(ts).replace('T', " ");
    format!("<time datetime=\"{}\">{}</time>", esc(ts), esc(&short))
}

/// A byte count for people, in powers of 1024 (as the CLI shows it).
pub use cairn_render::disk::bytes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }

    #[test]
    fn snippets_mark_terms_and_escape_the_rest() {
        assert_eq!(snippet("a **<b>** c"), "a <mark>&lt;b&gt;</mark> c");
        assert_eq!(snippet("no marks"), "no marks");
    }

    #[test]
    fn truncation_keeps_characters_whole() {
        assert_eq!(truncated("héllo", 2), Some("h"));
        assert_eq!(truncated("short", 10), None);
    }

    #[test]
    fn urls_encode_everything_but_unreserved() {
        assert_eq!(url("a b/c?d=é"), "a%20b%2Fc%3Fd%3D%C3%A9");
    }
}
